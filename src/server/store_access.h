/*
 * server/store_access — what the store routes (routes_store.c) and the analyses
 * (routes_analyst.c) share to reach the candle store (cfg.db, `kronos serve --db`): one
 * handle per request (store.h: one handle per thread), and its errors as the client sees them
 * (the store's file or URL replaced by "candle store", an unreachable database in fixed words)
 * and as the server log records them (5xx, whole). Not installed; src/server only.
 */
#ifndef KR_SERVER_STORE_ACCESS_H
#define KR_SERVER_STORE_ACCESS_H

#include <stddef.h>

#include "kronos.h"
#include "kronos/store.h"
#include "common/analyze_stored.h"
#include "common/fields.h"
#include "server/server_internal.h"

/* msg with every occurrence of the store's shown name replaced by "candle store", into
 * out[cap] (always terminated when cap > 0). */
void kr_store_access_scrub(const kr_server *s, const char *msg, char *out, size_t cap);

/* 503 for a store failure a retry can cure (KR_ERR_BUSY, KR_ERR_UNAVAILABLE), else 500. */
int kr_store_access_failure_status(kr_status st);

/* What the client is told of a store error st with message msg, into out[cap]. */
void kr_store_access_client_message(const kr_server *s, kr_status st, const char *msg, char *out,
                                    size_t cap);

/* Logs a store error's whole message when status is a 5xx. */
void kr_store_access_log_error(kr_server *s, int status, const char *msg);

/* Opens cfg.db for this request. Returns the handle (caller closes it with kr_store_close),
 * or NULL with *status 0 when must_exist and the file is not there (nothing stored), or NULL
 * with *status the HTTP status and err filled. */
kr_store *kr_store_access_open(kr_server *s, int must_exist, int *status, kr_api_error *err);

/* Every stored series (symbol NULL) or a symbol's, as kr_store_list gives them (caller frees
 * *list): 0, or an HTTP status with err filled (a store failure, logged when a 5xx). store may
 * be NULL (nothing stored: none). */
int kr_store_access_list(kr_server *s, kr_store *store, const char *symbol, kr_store_entry **list,
                         int64_t *n, kr_api_error *err);

/* The HTTP answer to a stored series that could not be picked or read (common/analyze_stored):
 * not_found_status for an unknown symbol or interval, 503 / 500 for a store failure (logged);
 * 0 for KR_STORED_OK and KR_STORED_TOO_FEW_ROWS (the route words that one). field names the
 * symbol's place in the request (NULL: none). */
int kr_store_access_fault(kr_server *s, const kr_stored_series *e, const char *field,
                          int not_found_status, kr_api_error *err);

/* The stored interval of symbol to use (kr_stored_pick's rule: want when given, else the most
 * recently updated one). Returns 0 with out[cap] (and market[market_cap], stored_symbol[name_cap]
 * — "aapl" is stored as AAPL — when non-NULL) set, or an HTTP status (not_found_status when
 * nothing matches) with err filled; field names the symbol's place in the request (NULL:
 * none). store may be NULL (nothing stored). *rows (when non-NULL): the candles stored in the
 * picked series, what reading it costs. */
int kr_store_access_pick_interval(kr_server *s, kr_store *store, const char *symbol,
                                  const char *want, const char *field, int not_found_status,
                                  char *out, size_t cap, char *market, size_t market_cap,
                                  char *stored_symbol, size_t name_cap, int64_t *rows,
                                  kr_api_error *err);

/* Replies with e (status 0 is 400); a 503 while a store is configured carries Retry-After. */
enum MHD_Result kr_store_access_reply_error(struct MHD_Connection *mc, kr_conn *c,
                                            const kr_api_error *e);

#endif
