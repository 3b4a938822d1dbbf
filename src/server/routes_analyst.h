/*
 * server/routes_analyst — the analyst over HTTP: the analysis reports (analyst/analyze,
 * analyst/render) behind `kronos serve`, of stored symbols (the candle store's routes are
 * server/routes_store) or of candles in the body.
 *
 *   POST /v1/analyze                       one report: a stored symbol, or "candles" in the body
 *   POST /v1/analyze/batch                 several stored symbols -> one report with a ranking;
 *                                          "stream": true answers with SSE progress events
 *
 * Stored symbols come from cfg.db (`kronos serve --db FILE`); every request opens its own
 * handle (server/store_access; store.h: one handle per thread).
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

#include "kronos.h"
#include "server/analyst_request.h"
#include "server/server_internal.h"

/* Route handlers, called by connection.c once the request body has arrived. url is the decoded
 * path without the query string. */
enum MHD_Result kr_handle_analyze(struct MHD_Connection *mc, kr_conn *c);
enum MHD_Result kr_handle_analyze_batch(struct MHD_Connection *mc, kr_conn *c);

#endif
