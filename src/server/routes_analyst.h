/*
 * server/routes_analyst — the analyst over HTTP: the candle store (market/store) and the
 * analysis reports (analyst/analyze, analyst/render) behind `kronos serve`.
 *
 *   GET  /v1/symbols                       the stored series (kr_store_list)
 *   GET  /v1/candles/{symbol}?interval=&limit=   stored candles, newest `limit` rows
 *   POST /v1/candles/{symbol}?interval=I   JSON rows (as /v1/forecast's "candles") or text/csv;
 *                                          validated first, then one all-or-nothing upsert
 *   POST /v1/analyze                       one report: a stored symbol, or "candles" in the body
 *   POST /v1/analyze/batch                 several stored symbols -> one report with a ranking;
 *                                          "stream": true answers with SSE progress events
 *
 * The store file is cfg.db (`kronos serve --db FILE`); every request opens its own handle
 * (store.h: one handle per thread; WAL lets readers and a writer overlap).
 *
 * Threads and the engine: an analysis runs kr_analyze on the connection's thread (or, when
 * streamed, on a worker thread the connection waits for). Its forecasts (and calibration
 * windows) are submitted to the server's engine context like /v1/forecast requests: they
 * join the continuous batch at the analysis priority (cfg.analysis_priority, below
 * forecasts by default, so a heavy report slows but never stalls them), within
 * request_timeout_s (504 after), cancelled when the client goes (499), refused with 429 and
 * Retry-After when the queue is full, counted in the engine's metrics. Analyses count as
 * active requests, so a drain waits for them up to its bound, then cancels them.
 */
#ifndef KR_SERVER_ROUTES_ANALYST_H
#define KR_SERVER_ROUTES_ANALYST_H

#include <stddef.h>

#include "analyst/analyze.h"
#include "analyst/render.h"
#include "kronos.h"
#include "market/store.h"
#include "server/request.h"
#include "server/server_internal.h"

#define KR_API_MAX_SYMBOLS 64 /* symbols per /v1/analyze/batch -> 400 beyond */
#define KR_API_MAX_CALIBRATE 50 /* walk-forward windows per symbol -> 400 beyond */
#define KR_API_CANDLES_LIMIT 1000 /* GET /v1/candles rows when no ?limit= is given */
#define KR_API_CANDLES_MAX 100000 /* largest ?limit=, and rows read per analysed symbol */

/* A validated POST /v1/analyze or /v1/analyze/batch body. */
typedef struct kr_api_analyze_request {
    int batch; /* parsed as /v1/analyze/batch */
    int n; /* symbols (1 for /v1/analyze) */
    char symbols[KR_API_MAX_SYMBOLS][KR_STORE_NAME_MAX + 1];
    char interval[KR_STORE_NAME_MAX + 1]; /* "" = each symbol's only / latest interval */
    kr_candles *candles; /* owned; "candles" given (symbols[0] labels it) */
    kr_analyze_params params; /* progress and model metadata left NULL */
    kr_report_format format; /* default JSON */
    int stream; /* answer as text/event-stream */
} kr_api_analyze_request;

/* Parses and validates an analyze body (len bytes, need not be NUL-terminated); batch selects
 * the /v1/analyze/batch fields ("symbols" instead of "symbol"/"candles"). Unknown and
 * duplicate fields are 400s; null means "the default". Pure: no I/O. On success *out owns its
 * candles (kr_api_analyze_request_free). On failure *out is zeroed and err names the field. */
kr_status kr_api_analyze_parse(const char *json, size_t len, int batch, const kr_api_limits *lim,
                               kr_api_analyze_request *out, kr_api_error *err);
void kr_api_analyze_request_free(kr_api_analyze_request *r);

/* Parses a POST /v1/candles body: CSV text when csv is set (the CSV reader's rules; label
 * "body"), else JSON: an array of rows or {"candles": ..., "columns": [...]} with the layouts
 * and rules of /v1/forecast's "candles" (rows named candles[i]). Pure. Caller owns *out. */
kr_status kr_api_candles_parse(const char *body, size_t len, int csv, kr_candles **out,
                               kr_api_error *err);

/* Route handlers, called by server.c once the request body has arrived. url is the decoded
 * path without the query string. */
enum MHD_Result kr_handle_symbols(struct MHD_Connection *mc, kr_conn *c);
enum MHD_Result kr_handle_candles_get(struct MHD_Connection *mc, kr_conn *c, const char *url);
enum MHD_Result kr_handle_candles_post(struct MHD_Connection *mc, kr_conn *c, const char *url);
enum MHD_Result kr_handle_analyze(struct MHD_Connection *mc, kr_conn *c);
enum MHD_Result kr_handle_analyze_batch(struct MHD_Connection *mc, kr_conn *c);

#endif
