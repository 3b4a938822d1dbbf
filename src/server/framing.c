/*
 * server/framing — request framing checks (see framing.h).
 */
#include "server/framing.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A Content-Length value: one decimal number, or a comma list repeating it ("5, 5"); -1 for
 * anything else (empty, signs, spaces inside digits, two different numbers, overflow). */
static int64_t content_length(const char *v) {
    int64_t value = -1;
    const char *p = v;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (*p < '0' || *p > '9') return -1;
        int64_t x = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (x > (INT64_MAX - 9) / 10) return -1;
            x = x * 10 + (*p - '0');
        }
        if (value >= 0 && x != value) return -1;
        value = x;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '\0') return value;
        if (*p++ != ',') return -1;
    }
}

/* Whether v is exactly the coding "chunked" (any case). Not with white space after it:
 * libmicrohttpd keeps that in the value and then does not read the body as chunked. */
static int is_chunked(const char *v) { return strcasecmp(v, "chunked") == 0; }

int kr_http_check_framing(int n, const char *const *names, const char *const *values, char *msg,
                          size_t cap) {
    int64_t cl = -1;
    int has_cl = 0, has_te = 0;
    for (int i = 0; i < n; i++) {
        if (!names[i]) continue;
        const char *v = values[i] ? values[i] : "";
        if (strpbrk(names[i], " \t")) {
            /* "Content-Length : 5" is no length here, but a proxy may read it as one. */
            snprintf(msg, cap, "header name '%.40s' contains white space", names[i]);
            return 400;
        }
        if (!strcasecmp(names[i], "Transfer-Encoding")) {
            /* Another coding (gzip, a repeated chunked) would leave the body's end to the
             * connection's close, or to a proxy that reads it differently. */
            if (has_te || !is_chunked(v)) {
                snprintf(msg, cap,
                         "Transfer-Encoding '%.40s'%s: only a single 'chunked' is accepted", v,
                         has_te ? " (repeated)" : "");
                return 400;
            }
            has_te = 1;
        } else if (!strcasecmp(names[i], "Content-Length")) {
            int64_t x = content_length(v);
            if (x < 0) {
                snprintf(msg, cap, "Content-Length '%.40s' is not one decimal number", v);
                return 400;
            }
            if (has_cl && x != cl) {
                snprintf(msg, cap,
                         "conflicting Content-Length headers (%lld and %lld): the body's end "
                         "is ambiguous",
                         (long long)cl, (long long)x);
                return 400;
            }
            has_cl = 1;
            cl = x;
        }
    }
    if (has_te && has_cl) {
        snprintf(msg, cap,
                 "Transfer-Encoding together with Content-Length: the body's end is ambiguous");
        return 400;
    }
    return 0;
}
