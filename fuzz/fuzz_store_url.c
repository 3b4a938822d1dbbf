/*
 * fuzz_store_url — libFuzzer target for the store's reading of a --db value (market/store.c):
 * kr_store_check_target (what is a file, what is a URL, what is refused),
 * kr_store_resolve_path (which applies it), kr_store_display_name (the password masked) and
 * kr_store_url_password (the password the connection's messages are scrubbed of). Nothing is
 * opened or connected.
 *
 * The first byte picks how the rest becomes a target; a 0x01 byte splits the rest into parts:
 *   0  the rest as it is (no password known: crashes, termination and consistency only);
 *   1  PREFIX ":" SECRET PASSWORD_REST "@" HOST_REST — a password in the user part, holding
 *      whatever PASSWORD_REST holds ('/', '@', '?', '#', '%', ...);
 *   2  PREFIX "?" KEY "=" SECRET REST — a password parameter (KEY one of its spellings);
 *   3  PREFIX ":" SECRET "@" — as 1, the password ending at the last '@'.
 * The property: whenever the target reads as a URL (kr_store_check_target's rule: a scheme
 * "word:" at the start other than file:, or "://" with no '/' before it; white space at the
 * start skipped), SECRET appears in no message and no display of it, and a user-part
 * password (1, 3) is what kr_store_url_password returns. The checks and the resolution agree:
 * a target passes both or neither, and a resolved one is the target unchanged.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store/store_backend.h"

#define CHECK(cond)           \
    do {                      \
        if (!(cond)) abort(); \
    } while (0)

#define SECRET "Zq7SecretPw"
#define MAX_TARGET 4000

/* The rule of kr_store_check_target, written again from its contract. */
static int reads_as_url(const char *t) {
    while (*t == ' ' || *t == '\t') t++;
    const char *sep = strstr(t, "://");
    if (sep && !memchr(t, '/', (size_t)(sep - t))) return 1;
    if (!isalpha((unsigned char)t[0])) return 0;
    const char *p = t + 1;
    while (isalnum((unsigned char)*p) || *p == '+' || *p == '-' || *p == '.') p++;
    return *p == ':' && strncasecmp(t, "file:", 5) != 0;
}

/* A message: terminated within its buffer, and not empty when it is an error's. */
static void check_message(const kr_error *err) {
    CHECK(memchr(err->message, '\0', sizeof err->message) != NULL);
    CHECK(err->message[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > MAX_TARGET) return 0;
    const int layout = data[0] % 4;
    /* Up to three parts, without NULs (a C string ends there). */
    char part[3][MAX_TARGET + 1];
    size_t n[3] = { 0, 0, 0 };
    int k = 0;
    for (size_t i = 1; i < size; i++) {
        if (data[i] == 0x01 && layout != 0 && k < 2) {
            k++;
            continue;
        }
        if (data[i] == 0) continue;
        part[k][n[k]++] = (char)data[i];
    }
    for (int i = 0; i < 3; i++) {
        part[i][n[i]] = '\0';
        if (strstr(part[i], SECRET)) return 0; /* the secret only where the layout puts it */
    }
    static const char *const keys[] = { "password", "PASSWORD", "pass%77ord", "sslpassword",
                                        "PassWord" };
    char target[3 * MAX_TARGET + 64];
    switch (layout) {
    case 0: snprintf(target, sizeof target, "%s", part[0]); break;
    case 1: snprintf(target, sizeof target, "%s:" SECRET "%s@%s", part[0], part[1], part[2]); break;
    case 2:
        snprintf(target, sizeof target, "%s?%s=" SECRET "%s", part[0],
                 keys[(n[1] ? (unsigned char)part[1][0] : 0) % 5], part[2]);
        break;
    default: snprintf(target, sizeof target, "%s:" SECRET "@", part[0]); break;
    }
    const int secret_known = layout != 0 && reads_as_url(target);

    kr_error err = { 0 };
    const kr_status checked = kr_store_check_target(target, &err);
    if (checked != KR_OK) {
        CHECK(checked == KR_ERR_INVALID_ARG);
        check_message(&err);
        if (secret_known) CHECK(!strstr(err.message, SECRET));
    }

    char out[3 * MAX_TARGET + 64];
    kr_error rerr = { 0 };
    const kr_status resolved = kr_store_resolve_path(target, out, sizeof out, &rerr);
    if (target[0]) CHECK((resolved == KR_OK) == (checked == KR_OK));
    if (resolved == KR_OK) {
        CHECK(!strcmp(out, target));
    } else {
        check_message(&rerr);
        CHECK(out[0] == '\0');
        if (secret_known) CHECK(!strstr(rerr.message, SECRET));
    }

    char shown[3 * MAX_TARGET + 64];
    kr_store_display_name(target, shown, sizeof shown);
    CHECK(memchr(shown, '\0', sizeof shown) != NULL);
    if (secret_known) CHECK(!strstr(shown, SECRET));
    if (!reads_as_url(target) && strstr(target, "=") == NULL) CHECK(!strcmp(shown, target));
    /* A small buffer cuts the display, never overruns it. */
    char tiny[8];
    kr_store_display_name(target, tiny, sizeof tiny);
    CHECK(memchr(tiny, '\0', sizeof tiny) != NULL);

    char password[MAX_TARGET + 64];
    const int has = kr_store_url_password(target, password, sizeof password);
    if (secret_known && layout != 2) CHECK(has && strstr(password, SECRET));
    if (!reads_as_url(target)) CHECK(!has);
    return 0;
}
