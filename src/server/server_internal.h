/*
 * server/server_internal — what server.c (the libmicrohttpd glue and lifecycle) and
 * handlers.c (what each route does) share: the server struct, the per-connection context and
 * the reply helpers. Not installed; nothing outside src/server includes it.
 */
#ifndef KR_SERVER_INTERNAL_H
#define KR_SERVER_INTERNAL_H

#include <pthread.h>
#include <stddef.h>

#include <microhttpd.h>

#include "server/config.h"
#include "server/drift.h"
#include "server/http_metrics.h"
#include "server/job.h"
#include "server/request.h"
#include "server/response.h"
#include "server/router.h"
#include "server/server.h"
#include "server/sse.h"

struct kr_server {
    kr_server_config cfg;
    const kr_model *model; /* borrowed */
    kr_context *ctx; /* the engine every route submits to */
    kr_metrics *metrics;
    kr_http_metrics *http;
    struct MHD_Daemon *daemon;
    int port;
    char model_name[256];
    kr_api_model_desc model_desc;
    kr_drift *drift; /* f32 shadow of a quantised model, or NULL */

    pthread_mutex_t mu; /* guards the fields below */
    pthread_cond_t idle; /* signalled when active_jobs drops */
    int draining, drained;
    int active_jobs; /* forecasts submitted whose response is not yet finished */
    double profile_checked_at; /* monotonic seconds of the last time-of-day check */
    int active_profile; /* index into cfg.profiles, -1 = base parameters */
};

/* Per-connection (per-request) state, created on the first access-handler call and freed
 * when libmicrohttpd reports the request complete. */
typedef struct kr_conn {
    kr_server *srv;
    double t0; /* monotonic start, for the duration histogram */
    const kr_route *route; /* NULL for unknown paths */
    int status; /* status of the queued response (0: none yet) */
    int fd; /* client socket, for disconnect checks */
    char *body; /* request body so far */
    size_t len, cap;
    int too_large; /* body past max_body_bytes: discarding, 413 at the end */
    size_t discarded; /* bytes dropped since */
    /* forecast */
    kr_job *job; /* set once submitted (one reference held) */
    int counted; /* counted in srv->active_jobs */
    kr_api_request req;
    double hard_deadline; /* monotonic; the server's own guard past the engine's */
    /* streaming */
    kr_sse_buf sse;
    int seen_steps, stream_done;
    double last_write;
} kr_conn;

/* Queues a response with body (malloc'd, ownership passes to libmicrohttpd; NULL = empty).
 * Also records c->status. extra_name/extra_value: one optional extra header. */
enum MHD_Result kr_srv_reply(struct MHD_Connection *mc, kr_conn *c, int status,
                             const char *content_type, char *body, size_t len,
                             const char *extra_name, const char *extra_value);
/* An error reply: {"error": {...}} with the status. */
enum MHD_Result kr_srv_reply_error(struct MHD_Connection *mc, kr_conn *c, int status,
                                   const char *message, const char *field);
/* A lifecycle log line through cfg.sched.log (or stderr when none). */
void kr_srv_log(kr_server *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* 1 when the peer has closed the socket (checked without blocking). */
int kr_srv_client_gone(int fd);

/* Route handlers (handlers.c); called once the whole request has arrived. */
enum MHD_Result kr_handle_health(struct MHD_Connection *mc, kr_conn *c);
enum MHD_Result kr_handle_ready(struct MHD_Connection *mc, kr_conn *c);
enum MHD_Result kr_handle_metrics(struct MHD_Connection *mc, kr_conn *c);
enum MHD_Result kr_handle_models(struct MHD_Connection *mc, kr_conn *c);
enum MHD_Result kr_handle_forecast(struct MHD_Connection *mc, kr_conn *c);

/* Releases a forecast's job when its connection completes: cancels the request if it is
 * still running (client gone), returns the status to record (499 for a cancelled one). */
int kr_forecast_conn_done(kr_conn *c, int terminated_ok);

#endif
