/*
 * server/routes_backtest — backtests over HTTP as asynchronous jobs (docs/api.md):
 *
 *   POST   /v1/backtest                  starts one: 202 {"id", "state", "status_url",
 *                                        "events_url", "result_url"} (Location: status_url)
 *   GET    /v1/backtest/{id}             its state and progress
 *   GET    /v1/backtest/{id}/events      progress as Server-Sent Events, then the final one
 *   GET    /v1/backtest/{id}/result      the report (?format=json|md|html|csv); 409 while it
 *                                        runs, the run's error when it failed
 *   DELETE /v1/backtest/{id}             cancels a running one, forgets a finished one
 *
 * A job runs kr_backtest_run (kronos/backtest.h) on a worker thread of its own, its forecasts
 * submitted to the server's engine at background priority (they slow interactive requests,
 * never stall them), waiting for room in the queue, cancelled by DELETE or a drain. At most
 * KR_BT_JOBS_RUNNING run at once and KR_BT_JOBS_KEPT are kept (a finished job for
 * KR_BT_JOB_TTL_S, then forgotten); more is a 429. A finished report holds the server's memory
 * budget (max_memory_in_flight) for its bytes until it is forgotten.
 */
#ifndef KR_SERVER_ROUTES_BACKTEST_H
#define KR_SERVER_ROUTES_BACKTEST_H

#include "server/server_internal.h"

#define KR_BT_JOBS_RUNNING 2
#define KR_BT_JOBS_KEPT 16
#define KR_BT_JOB_TTL_S 3600.0

typedef struct kr_bt_jobs kr_bt_jobs;

/* The server's registry (NULL when out of memory). */
kr_bt_jobs *kr_bt_jobs_create(kr_server *s);
/* Cancels every running job (a drain: their forecasts stop at the engine's next step). */
void kr_bt_jobs_cancel_all(kr_bt_jobs *j);
/* Cancels, waits for every worker and frees every job; before the engine context is freed. */
void kr_bt_jobs_free(kr_bt_jobs *j);

enum MHD_Result kr_handle_backtest_post(struct MHD_Connection *mc, kr_conn *c);
/* GET and DELETE of /v1/backtest/{id}[/events|/result]; url is the path. */
enum MHD_Result kr_handle_backtest_get(struct MHD_Connection *mc, kr_conn *c, const char *url);
enum MHD_Result kr_handle_backtest_delete(struct MHD_Connection *mc, kr_conn *c, const char *url);

#endif
