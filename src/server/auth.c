/*
 * server/auth — API key file and bearer-token check (see auth.h).
 */
#include "server/auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "base/fsutil.h"

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

kr_status kr_auth_load_key_file(const char *path, char *key, size_t cap, kr_error *err) {
    char *text = NULL;
    kr_status rst = kr_read_file(path, 4096, "API key file", &text, NULL, err);
    if (rst != KR_OK) return rst;
    char line[4097];
    snprintf(line, sizeof line, "%s", text);
    free(text);
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    char *s = line;
    while (*s && is_space(*s)) s++;
    size_t len = strlen(s);
    while (len > 0 && is_space(s[len - 1])) s[--len] = '\0';
    if (len == 0) return kr_error_set(err, KR_ERR_FORMAT, "%s: the API key is empty", path);
    if (len >= cap)
        return kr_error_set(err, KR_ERR_FORMAT, "%s: the API key is longer than %zu bytes", path,
                            cap - 1);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return kr_error_set(err, KR_ERR_FORMAT,
                                "%s: the API key contains a control character at byte %zu", path,
                                i + 1);
    memcpy(key, s, len + 1);
    return KR_OK;
}

int kr_auth_equal(const char *a, size_t alen, const char *b, size_t blen) {
    /* Walk the expected key's full length whatever the candidate is, folding every byte
     * difference and the length difference into one accumulator. */
    unsigned char acc = (unsigned char)(alen != blen);
    for (size_t i = 0; i < blen; i++) {
        unsigned char x = i < alen ? (unsigned char)a[i] : 0;
        acc |= (unsigned char)(x ^ (unsigned char)b[i]);
    }
    return acc == 0;
}

int kr_auth_check(const char *authorization, const char *key) {
    if (!key || !*key) return 1;
    if (!authorization) return 0;
    const char *s = authorization;
    while (*s == ' ' || *s == '\t') s++;
    if (strncasecmp(s, "Bearer", 6) != 0 || (s[6] != ' ' && s[6] != '\t')) return 0;
    s += 6;
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    return kr_auth_equal(s, n, key, strlen(key));
}
