/*
 * server/server — the HTTP server behind `kronos serve`: libmicrohttpd's threads on the I/O
 * side (one thread per connection), the engine's scheduler thread on the compute side, and
 * per-request jobs (server/job.h) between them.
 *
 *   POST /v1/forecast   forecast (JSON, or text/event-stream with "stream": true)
 *   GET  /v1/models     the served model
 *   GET  /health        200 while the process runs
 *   GET  /ready         200 when the model is loaded and the server is not draining, else 503
 *   GET  /metrics       Prometheus text: engine series + HTTP series
 *
 * Limits map to statuses: bad input 400 (field and row named; also an ambiguous body length,
 * then the connection closes), missing/wrong API key 401, unknown path 404, wrong method 405,
 * body over max_body_bytes or max_request_memory 413, queue full 429 with Retry-After,
 * draining 503, memory budget (max_memory_in_flight) full 503 with Retry-After, deadline
 * passed 504. A client that disconnects cancels its request; one whose request has not
 * arrived read_timeout_s after accept is cut. Every answer carries X-Request-Id. The server
 * never installs signal handlers; the caller (cli/cmd_serve.c) turns signals into
 * kr_server_drain.
 */
#ifndef KR_SERVER_SERVER_H
#define KR_SERVER_SERVER_H

#include "engine/metrics.h"
#include "engine/context.h"
#include "kronos.h"
#include "server/config.h"

typedef struct kr_server kr_server;

/* Creates the scheduler over model (borrowed; must outlive the server) and starts listening
 * on cfg->host:cfg->port (port 0: an ephemeral port, see kr_server_port). cfg is copied. When
 * cfg->api_key is empty and cfg->api_key_file is set, the key is read from the file.
 * Caller owns *out; free with kr_server_free. */
kr_status kr_server_create(const kr_model *model, const kr_server_config *cfg, kr_server **out,
                           kr_error *err);

/* Serving a quantised model: runs a `sample` fraction of the answered forecasts again on
 * f32_model (the f32 original; owned by the server from now on) and exports
 * kronos_quant_drift (server/drift.h). Call right after kr_server_create. */
kr_status kr_server_attach_shadow(kr_server *s, kr_model *f32_model, double sample, kr_error *err);
struct kr_drift *kr_server_drift(kr_server *s); /* NULL without a shadow (tests flush it) */

/* The port actually bound (useful with port 0). */
int kr_server_port(const kr_server *s);
/* The engine context (borrowed), e.g. for kr_context_get_stats in tests. */
kr_context *kr_server_context(kr_server *s);
/* The metrics registry (borrowed). */
kr_metrics *kr_server_metrics(kr_server *s);

/* Graceful stop, blocking: /ready answers 503 at once; after cfg.drain_delay_s (requests are
 * still served meanwhile, so a load balancer checking /ready stops sending first) new /v1
 * requests answer 503 too; every request already accepted runs to completion and its response
 * is sent (waiting at most grace_s seconds for the responses after the scheduler has drained).
 * Idempotent; thread-safe. */
void kr_server_drain(kr_server *s, double grace_s);
/* 1 once kr_server_drain refuses new requests (after the drain delay). */
int kr_server_is_draining(kr_server *s);
/* 1 once kr_server_drain was called (what /ready answers 503 for). */
int kr_server_is_leaving(kr_server *s);

/* Drains (if not yet), stops listening and frees everything. NULL is a no-op. */
void kr_server_free(kr_server *s);

#endif
