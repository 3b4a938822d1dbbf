/*
 * fuzz_auth — libFuzzer target for API-key authentication (server/auth): the key file's text
 * (kr_auth_parse_key) and the Authorization header check (kr_auth_check). The first half of
 * the input is a key file, the second an Authorization header. A parsed key is non-empty printable text of the file's first line, and
 * "Bearer <key>" always passes while a header only passes when its token is exactly the key.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/auth.h"

#define CHECK(cond)           \
    do {                      \
        if (!(cond)) abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const size_t half = size / 2;
    char key[256];
    kr_error err;
    if (kr_auth_parse_key((const char *)data, half, "key", key, sizeof key, &err) != KR_OK) {
        CHECK(memchr(err.message, '\0', sizeof err.message) && err.message[0]);
        snprintf(key, sizeof key, "fallback-key");
    }
    const size_t klen = strlen(key);
    CHECK(klen > 0 && klen < sizeof key);
    for (size_t i = 0; i < klen; i++) CHECK((unsigned char)key[i] >= 0x20 && key[i] != 0x7f);
    CHECK(key[0] != ' ' && key[0] != '\t' && key[klen - 1] != ' ' && key[klen - 1] != '\t');

    char good[300];
    snprintf(good, sizeof good, "Bearer %s", key);
    CHECK(kr_auth_check(good, key) == 1);
    CHECK(kr_auth_check(NULL, key) == 0);

    /* The header: the second half as a C string. */
    char header[4096];
    size_t hn = size - half < sizeof header - 1 ? size - half : sizeof header - 1;
    memcpy(header, data + half, hn);
    header[hn] = '\0';
    if (kr_auth_check(header, key)) {
        /* Accepted: the scheme is Bearer and the token, trimmed, is the key. */
        const char *s = header;
        while (*s == ' ' || *s == '\t') s++;
        CHECK(!strncasecmp(s, "Bearer", 6));
        CHECK(strstr(s + 6, key) != NULL);
    }
    return 0;
}
