/*
 * server/auth — API-key authentication for the /v1 routes: the key file and the
 * `Authorization: Bearer <key>` check, compared in constant time so response timing does not
 * reveal how much of a guessed key was right.
 */
#ifndef KR_SERVER_AUTH_H
#define KR_SERVER_AUTH_H

#include <stddef.h>

#include "kronos.h"
#include "kronos/server.h"

/* kr_auth_load_key_file is public: kronos/server.h. */
/* The same rules on a key file's text (len bytes); label names it in errors. Pure. */
kr_status kr_auth_parse_key(const char *text, size_t len, const char *label, char *key, size_t cap,
                            kr_error *err);

/* 1 when the Authorization header value (may be NULL) carries exactly `key` as a bearer
 * token, else 0. The scheme name is case-insensitive (RFC 7235). */
int kr_auth_check(const char *authorization, const char *key);

/* Constant-time equality of two byte strings: the time depends only on the lengths. */
int kr_auth_equal(const char *a, size_t alen, const char *b, size_t blen);

#endif
