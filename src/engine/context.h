/*
 * engine/context — what the rest of the library (server, tools) and the tests may do with a
 * kr_context beyond the public API: share a metrics registry, pass generation options, and
 * run a computation on the engine thread with the context's threads and workspace.
 */
#ifndef KR_ENGINE_CONTEXT_H
#define KR_ENGINE_CONTEXT_H

#include "engine/generate.h"
#include "engine/metrics.h"
#include "kronos.h"

/* kr_context_create with the metrics registry to report into (borrowed, must outlive the
 * context; NULL: the context makes its own). A server passes the registry its HTTP series
 * live in, so one /metrics page shows both. */
KR_PRIVATE kr_status kr_context_create_ex(const kr_model *model, const kr_context_params *params,
                                          kr_metrics *metrics, kr_context **out, kr_error *err);

/* The registry the context reports into. */
kr_metrics *kr_context_registry(kr_context *ctx);

/* The request parameters kr_submit and kr_forecast_run_batch refuse (request may be NULL:
 * the defaults): a NaN deadline_s. */
kr_status kr_request_check(const kr_request_params *request, kr_error *err);

/* kr_submit with generation options (naive recomputation, a step observer): tests and
 * benchmarks. index and n_series name the series in errors and events. */
kr_status kr_submit_ex(kr_context *ctx, const kr_series *series, int index, int n_series,
                       const kr_forecast_params *params, const kr_request_params *request,
                       const kr_seq_options *opt, uint64_t *id, kr_error *err);

/* kr_submit_ex for a caller that waits for room when the queue is full and submits again
 * (kr_forecast_run_batch with wait_for_room): those refusals are not rejected requests, so
 * kronos_requests_total{outcome="rejected"} does not count them; a caller that gives up
 * waiting counts its request once with kr_context_count_rejected. */
kr_status kr_submit_waiting(kr_context *ctx, const kr_series *series, int index, int n_series,
                            const kr_forecast_params *params, const kr_request_params *request,
                            const kr_seq_options *opt, uint64_t *id, kr_error *err);
void kr_context_count_rejected(kr_context *ctx);

/* A computation outside the forecast pipeline (teacher forcing, benchmarks of the forward
 * passes) run with the context's engine: on the engine thread, between steps, alone. */
typedef kr_status (*kr_context_task)(void *user, const kr_engine *eng, kr_error *err);
/* Runs fn on the engine thread and waits for it; its status and error come back. */
kr_status kr_context_run_task(kr_context *ctx, kr_context_task fn, void *user, kr_error *err);

#endif
