/* Raw-socket helpers for protocol-level server tests (framing, slow clients): what libcurl
 * will not send, and connections from other loopback addresses (all of 127/8 is loopback on
 * Linux, so 127.0.0.2 is "another client"). */
#ifndef KR_TEST_RAW_HTTP_H
#define KR_TEST_RAW_HTTP_H

#include <stddef.h>

/* A TCP connection to 127.0.0.1:port from the local address src (e.g. "127.0.0.2"; NULL:
 * any). Returns the socket, or -1. */
int kr_raw_connect(const char *src, int port);
/* A client that posts `body` (JSON) to path and then reads nothing, with a receive buffer of
 * a few KB, so a large answer cannot all leave the server. Returns the socket (close it to
 * leave), or -1. */
int kr_raw_post_unread(int port, const char *path, const char *body);
/* Sends all of buf without SIGPIPE; 0, or -1 once the peer has closed or reset. */
int kr_raw_send(int fd, const char *buf, size_t len);
/* Reads until the peer closes or timeout_s passes; returns the bytes read into buf
 * (NUL-terminated, at most cap - 1) and sets *closed to 1 when the peer closed (or reset). */
size_t kr_raw_read(int fd, char *buf, size_t cap, double timeout_s, int *closed);
/* The status code of the first "HTTP/1.x NNN" line of buf, or 0. */
int kr_raw_status(const char *buf);

#endif
