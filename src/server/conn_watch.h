/*
 * server/conn_watch — deadlines for slow clients. libmicrohttpd's own timeout is an idle
 * timeout that every received byte resets, so a client trickling one byte a second holds a
 * connection (and, one thread per connection, a thread) for ever; a few hundred of them take
 * every connection slot. Here a request's headers and body must have arrived read_timeout_s
 * after the connection was accepted (or after the previous answer on a kept-alive
 * connection) whatever the client sends; a watchdog thread shuts the socket of a connection
 * past its deadline, which ends it in libmicrohttpd's thread.
 *
 * The server registers every connection (MHD_OPTION_NOTIFY_CONNECTION: started / closed)
 * and says when a request has fully arrived (no deadline while it is handled and answered)
 * and when its answer was sent (the next request's deadline starts). A slot is only freed by
 * kr_conn_watch_close, under the same lock the watchdog scans with, and libmicrohttpd closes
 * the descriptor after that notification, so the watchdog never touches a closed or reused
 * descriptor.
 */
#ifndef KR_SERVER_CONN_WATCH_H
#define KR_SERVER_CONN_WATCH_H

#include "kronos.h"

typedef struct kr_conn_watch kr_conn_watch;
typedef struct kr_conn_slot kr_conn_slot;

/* Starts the watchdog. on_cut (may be NULL) is called, on the watchdog thread with no lock
 * held, once per connection cut. Caller owns *out. */
kr_status kr_conn_watch_create(double read_timeout_s, void (*on_cut)(void *user), void *user,
                               kr_conn_watch **out, kr_error *err);
/* Also calls tick(user) on the watchdog thread, with no lock held, every tenth of a second:
 * the server's clock for work that must happen without traffic (profile switches). */
void kr_conn_watch_set_tick(kr_conn_watch *w, void (*tick)(void *user), void *user);
/* Stops the watchdog and frees what is left. Call after the HTTP daemon has stopped. */
void kr_conn_watch_free(kr_conn_watch *w);

/* A new connection on socket fd; its request deadline starts now. NULL when out of memory
 * (the connection is then simply not watched). */
kr_conn_slot *kr_conn_watch_open(kr_conn_watch *w, int fd);
/* The connection is gone (NULL is ignored). */
void kr_conn_watch_close(kr_conn_watch *w, kr_conn_slot *s);
/* The request has fully arrived: no deadline while it is handled. */
void kr_conn_watch_received(kr_conn_watch *w, kr_conn_slot *s);
/* The answer was sent: the next request on this connection must arrive within the timeout. */
void kr_conn_watch_rearm(kr_conn_watch *w, kr_conn_slot *s);
/* 1 when the watchdog cut this connection. */
int kr_conn_watch_was_cut(kr_conn_watch *w, kr_conn_slot *s);

#endif
