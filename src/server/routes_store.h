/*
 * server/routes_store — the candle store (store/store) over HTTP, behind `kronos serve --db`:
 *
 *   GET  /v1/symbols                       the stored series (kr_store_list)
 *   GET  /v1/candles/{symbol}?interval=&limit=   stored candles, newest `limit` rows
 *   POST /v1/candles/{symbol}?interval=I   JSON rows (as /v1/forecast's "candles") or text/csv;
 *                                          validated first, then one all-or-nothing upsert
 *   DELETE /v1/candles/{symbol}?interval=I&from=&to=   the series' candles in [from, to] (whole
 *                                          series without them), one transaction; 404 when no
 *                                          such series
 *
 * The store file is cfg.db (`kronos serve --db FILE`); every request opens its own handle
 * (store.h: one handle per thread; WAL lets readers and a writer overlap), through
 * server/store_access.
 */
#ifndef KR_SERVER_ROUTES_STORE_H
#define KR_SERVER_ROUTES_STORE_H

#include "server/server_internal.h"

/* Route handlers, called by connection.c once the request body has arrived. url is the
 * decoded path without the query string. */
enum MHD_Result kr_handle_symbols(struct MHD_Connection *mc, kr_conn *c);
enum MHD_Result kr_handle_candles_get(struct MHD_Connection *mc, kr_conn *c, const char *url);
enum MHD_Result kr_handle_candles_post(struct MHD_Connection *mc, kr_conn *c, const char *url);
enum MHD_Result kr_handle_candles_delete(struct MHD_Connection *mc, kr_conn *c, const char *url);

#endif
