/*
 * server/framing — where a request body ends must be unambiguous. Two Content-Length headers
 * that disagree, or Transfer-Encoding together with Content-Length, let a proxy in front and
 * this server split the byte stream into different requests (request smuggling: a request
 * hidden in another's body reaches the server without passing the proxy's checks). Such a
 * request is refused with 400 and its connection closed (RFC 9112 §6.3). Pure, so the rule
 * is unit-tested and fuzzed without a socket.
 */
#ifndef KR_SERVER_FRAMING_H
#define KR_SERVER_FRAMING_H

#include <stddef.h>

/* Checks the n header lines (names[i]: values[i], as received: duplicates kept apart).
 * Content-Length lines must all carry the same decimal value (a comma list of one repeated
 * value counts as that value); Transfer-Encoding must be one line saying "chunked" and must
 * not come with Content-Length; no header name may hold white space ("Content-Length :").
 * Returns 0, or 400 with a message for the client in msg[cap]. */
int kr_http_check_framing(int n, const char *const *names, const char *const *values, char *msg,
                          size_t cap);

#endif
