/*
 * server/server_internal — what server.c (the libmicrohttpd glue and lifecycle) and
 * handlers.c (what each route does) share: the server struct, the per-connection context and
 * the reply helpers. Not installed; nothing outside src/server includes it.
 */
#ifndef KR_SERVER_INTERNAL_H
#define KR_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include <microhttpd.h>

#include "series/timezone.h"
#include "server/access_log.h"
#include "server/config.h"
#include "server/conn_watch.h"
#include "server/drift.h"
#include "server/http_metrics.h"
#include "server/job.h"
#include "server/models.h"
#include "server/process_metrics.h"
#include "server/request.h"
#include "server/response.h"
#include "server/router.h"
#include "server/server.h"
#include "server/sse.h"
#include "server/store_health.h"

struct kr_server {
    kr_server_config cfg;
    const kr_model *model; /* borrowed */
    kr_context *ctx; /* the main model's engine (the analyses' and the store routes') */
    kr_models *models; /* every model served by name, the main one first */
    kr_metrics *metrics;
    kr_http_metrics *http;
    struct MHD_Daemon *daemon;
    int port;
    char model_name[256];
    char predictor_shown[KR_SERVER_PATH_MAX], tokenizer_shown[KR_SERVER_PATH_MAX]; /* reports */
    kr_api_model_desc model_desc;
    /* f32 shadow of a quantised model, or NULL. Attached after the daemon has started
     * (loading the f32 checkpoint takes a while), so published with release and read with
     * acquire: a connection thread sees NULL or a whole monitor. */
    _Atomic(kr_drift *) drift;
    size_t shadow_kv_budget; /* the share of kv_budget set aside for it (0: none planned) */
    kr_conn_watch *watch; /* request read deadlines (slow clients) */
    kr_access_log *access_log; /* NULL: none */
    kr_process_metrics *pmetrics;
    kr_api_limits limits; /* the request-size limits of cfg, for every route's parser */
    kr_store_health *store_health; /* what /ready knows of the store's database; NULL: none */
    struct kr_bt_jobs *backtests; /* POST /v1/backtest's jobs (routes_backtest.c) */

    pthread_mutex_t mu; /* guards the fields below */
    size_t mem_in_flight; /* memory budget held by requests being read and parsed */
    pthread_cond_t idle; /* signalled when active_jobs drops */
    int leaving; /* a drain was asked for: /ready answers 503 (from before draining) */
    int draining, drained;
    int active_jobs; /* forecasts, analyses and store requests whose response is not yet
                        finished (a drain waits for them) */
    double profile_checked_at; /* monotonic seconds of the last time-of-day check */
    int active_profile; /* index into cfg.profiles, -1 = base parameters */
    kr_tz tz; /* the profiles' zone (have_tz), loaded once at start */
    int have_tz;
};

/* Per-connection (per-request) state, created on the first access-handler call and freed
 * when libmicrohttpd reports the request complete. */
typedef struct kr_conn {
    kr_server *srv;
    double t0; /* monotonic start, for the duration histogram */
    double t0_wall; /* Unix seconds, for the access log */
    const kr_route *route; /* NULL for unknown paths */
    int status; /* status of the response: what was queued, or for a stream the status of
                   its final event (0: none yet) */
    int fd; /* client socket, for disconnect checks */
    kr_conn_slot *slot; /* its connection's read deadline */
    char request_id[KR_REQUEST_ID_MAX + 1]; /* the client's X-Request-Id or a fresh one */
    char client[64]; /* peer address */
    char method[16];
    char error[256]; /* why the request failed, for the access log ("" = it did not) */
    uint64_t bytes_sent; /* response body bytes */
    double queue_wait; /* seconds queued in the scheduler; < 0: did not queue */
    size_t reserved; /* bytes of the server's memory budget held for the body and its parse
                        (given back when the body is dropped) */
    size_t held; /* bytes held until the request completes: a working set, an answer (budget.c) */
    size_t answer_room; /* of held, reserved in advance for the answer being built */
    size_t expected; /* Content-Length + 1 when declared: the body buffer's final size */
    char *body; /* request body so far */
    size_t len, cap;
    int too_large; /* body past max_body_bytes: discarding, 413 at the end */
    int refused; /* a declared body the budget could not take mid-read: discarding, answered
                  * with this status (503) at the end */
    char refusal[256]; /* its message */
    size_t discarded; /* bytes dropped since */
    /* forecast */
    kr_job *job; /* set once submitted (one reference held) */
    kr_served *served; /* the model the request runs on (a reference held), or NULL */
    int rung; /* its precision: served->rung[rung] (the ladder's pick at submission) */
    int counted; /* counted in srv->active_jobs */
    kr_api_request req;
    double hard_deadline; /* monotonic; the server's own guard past the engine's */
    /* streaming */
    kr_sse_buf sse;
    int seen_steps, stream_done;
    /* An X-Kronos-Warning header for the answer ("" for none): e.g. a calendar past its
     * known years. */
    char warning_header[96];
    double last_write;
} kr_conn;

/* Queues a response with body (malloc'd, ownership passes to libmicrohttpd; NULL = empty).
 * Also records c->status and the bytes, and sends X-Request-Id. extra_name/extra_value: one
 * optional extra header. */
enum MHD_Result kr_srv_reply(struct MHD_Connection *mc, kr_conn *c, int status,
                             const char *content_type, char *body, size_t len,
                             const char *extra_name, const char *extra_value);
/* An error reply: {"error": {...}} with the status. */
enum MHD_Result kr_srv_reply_error(struct MHD_Connection *mc, kr_conn *c, int status,
                                   const char *message, const char *field);
/* Queues a prepared response (X-Request-Id added, c->status and bytes recorded) and drops
 * the caller's reference to it. */
enum MHD_Result kr_srv_queue(struct MHD_Connection *mc, kr_conn *c, int status,
                             struct MHD_Response *r, size_t body_len);
/* Starts a text/event-stream answer read from reader(cls) (MHD's content reader contract);
 * free_cb(cls) runs when the response is gone (also when this fails). Sets c->status 200. */
enum MHD_Result kr_srv_stream(struct MHD_Connection *mc, kr_conn *c,
                              MHD_ContentReaderCallback reader, void *cls,
                              MHD_ContentReaderFreeCallback free_cb);
/* Frees the request body once parsed and gives its memory budget back. */
void kr_srv_drop_body(kr_conn *c);

/* The memory budget (budget.c; the rules are in its opening comment). Each returns 0, or the
 * status to answer — 413 when the bytes can never fit (body 1: c's body and parse past
 * max_request_memory; else c's holdings past the whole max_memory_in_flight), 503 when
 * max_memory_in_flight cannot take them now — with a message in msg naming the limit and
 * `what` ("the analysis' candles and paths"). */
/* Whether bytes more fit for c; commit 1 also charges them to the server (the caller adds
 * them to c->reserved or c->held). */
int kr_srv_mem_admit(kr_conn *c, size_t bytes, int commit, int body, const char *what, char *msg,
                     size_t cap);
/* Holds bytes for c until its request completes (or kr_srv_unhold). */
int kr_srv_hold(kr_conn *c, size_t bytes, const char *what, char *msg, size_t cap);
void kr_srv_unhold(kr_conn *c, size_t bytes);
/* Holds the room for an answer about to be built (an estimate); the answer takes it over. */
int kr_srv_reserve_answer(kr_conn *c, size_t bytes, char *msg, size_t cap);
/* Holds an answer of len bytes (from 64 KiB on; smaller ones are not counted), taking over
 * the room reserved for it. refusable: a larger answer than the room that the budget cannot
 * take is refused, else it is charged whatever the budget (it exists; an error must go out). */
int kr_srv_hold_answer(kr_conn *c, size_t len, int refusable, char *msg, size_t cap);
/* Charges (release 0) or gives back bytes no request holds: a streamed analysis' final
 * event, a finished forecast waiting in its job (a kr_job_charge_fn, server = the server). */
void kr_srv_charge_memory(void *server, size_t bytes, int release);
/* Gives back the body's reservation (kr_srv_drop_body), and everything at completion. */
void kr_srv_mem_release_body(kr_conn *c);
void kr_srv_mem_release_all(kr_conn *c);
/* The answer to a refusal: 503 with Retry-After, or 413 with Connection: close. */
enum MHD_Result kr_srv_reply_refusal(struct MHD_Connection *mc, kr_conn *c, int status,
                                     const char *msg);
/* A lifecycle log line through cfg.sched.log (or stderr when none). */
void kr_srv_log(kr_server *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Applies the time-of-day profile now in effect (at most one look a second). */
void kr_srv_check_profile(kr_server *s);

/* libmicrohttpd's callbacks (connection.c), cls = the server. */
enum MHD_Result kr_srv_on_access(void *cls, struct MHD_Connection *mc, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls);
void kr_srv_on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode toe);
void kr_srv_on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode code);

/* 1 when the peer has closed the socket (checked without blocking). */
int kr_srv_client_gone(int fd);

/* Route handlers (handlers.c); called once the whole request has arrived. */
enum MHD_Result kr_handle_health(struct MHD_Connection *mc, kr_conn *c);
enum MHD_Result kr_handle_ready(struct MHD_Connection *mc, kr_conn *c);
enum MHD_Result kr_handle_metrics(struct MHD_Connection *mc, kr_conn *c);
enum MHD_Result kr_handle_models(struct MHD_Connection *mc, kr_conn *c);
enum MHD_Result kr_handle_model_put(struct MHD_Connection *mc, kr_conn *c, const char *url);
enum MHD_Result kr_handle_model_delete(struct MHD_Connection *mc, kr_conn *c, const char *url);
enum MHD_Result kr_handle_forecast(struct MHD_Connection *mc, kr_conn *c);

/* Releases a forecast's job when its connection completes: cancels the request if it is
 * still running (client gone), returns the status to record (499 for a cancelled one). */
int kr_forecast_conn_done(kr_conn *c, int terminated_ok);

#endif
