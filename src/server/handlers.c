/*
 * server/handlers — what each route does once its request has fully arrived.
 *
 * POST /v1/forecast: parse and validate (server/request), submit to the engine context with a job
 * as the callback target, then either block this connection's thread until the job is done
 * (plain JSON) or hand libmicrohttpd a content reader that turns the job's progress into
 * Server-Sent Events. Both waits poll the socket every 100 ms so a client that goes away
 * cancels its forecast instead of letting it run to the end for nobody.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/timeutil.h"
#include "kronos/analyst.h"
#include "server/server_internal.h"

/* How often a waiting connection looks at its socket, in seconds. */
#define KR_POLL_S 0.1
/* SSE comment interval while nothing else is sent: keeps proxies from timing the stream out
 * and lets a write notice a vanished client. */
#define KR_SSE_KEEPALIVE_S 15.0
/* The server's own deadline guard past the engine's (which should fire first). */
#define KR_DEADLINE_SLACK_S 5.0

enum MHD_Result kr_handle_health(struct MHD_Connection *mc, kr_conn *c) {
    char *body = strdup("{\"status\":\"ok\"}");
    return kr_srv_reply(mc, c, 200, "application/json", body, body ? strlen(body) : 0, NULL, NULL);
}

enum MHD_Result kr_handle_ready(struct MHD_Connection *mc, kr_conn *c) {
    int draining = kr_server_is_leaving(c->srv);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", draining ? "draining" : "ready");
    cJSON_AddStringToObject(o, "model", c->srv->model_name); /* a directory name: escape it */
    char *body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return kr_srv_reply(mc, c, draining ? 503 : 200, "application/json", body,
                        body ? strlen(body) : 0, NULL, NULL);
}

enum MHD_Result kr_handle_metrics(struct MHD_Connection *mc, kr_conn *c) {
    kr_process_metrics_update(c->srv->pmetrics);
    char *text = NULL;
    kr_error err = { 0 };
    /* Through the context, which brings the queue, the running requests and the KV block
     * pool up to now first: the engine thread publishes them only at its step boundaries, so
     * rendering the registry alone showed a request waiting out a batch wait as not queued,
     * and the blocks an idle engine handed back as still kept. It renders the server's
     * registry (the context reports into it). */
    if (kr_context_metrics(c->srv->ctx, &text, &err) != KR_OK)
        return kr_srv_reply_error(mc, c, 500, err.message, NULL);
    return kr_srv_reply(mc, c, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text),
                        NULL, NULL);
}

enum MHD_Result kr_handle_models(struct MHD_Connection *mc, kr_conn *c) {
    const kr_server_config *cfg = &c->srv->cfg;
    const char *narrative_model = !cfg->llm_url[0]    ? NULL
                                  : cfg->llm_model[0] ? cfg->llm_model
                                                      : KR_NARRATIVE_DEFAULT_MODEL;
    char *body = kr_api_models_json(&c->srv->model_desc, narrative_model);
    if (!body) return kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
    return kr_srv_reply(mc, c, 200, "application/json", body, strlen(body), NULL, NULL);
}

/* ------------------------------------------------------------------ forecast */

static void uncount(kr_conn *c) {
    if (!c->counted) return;
    kr_server *s = c->srv;
    pthread_mutex_lock(&s->mu);
    s->active_jobs--;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
    c->counted = 0;
}

int kr_forecast_conn_done(kr_conn *c, int terminated_ok) {
    /* An answer that went out whole keeps its status, even when the job is still running:
     * that is the server's own 504 when the engine is stuck past the deadline. */
    int status = c->status ? c->status : 499;
    if (c->job) {
        kr_job_state st;
        kr_job_wait(c->job, INT_MAX, 0, &st);
        if (!st.done) {
            /* The client left before the answer (or the server gave up on the engine): stop
             * spending compute (and KV) on it. */
            kr_cancel(c->srv->ctx, kr_job_id(c->job));
        }
        kr_job_unref(c->job);
        c->job = NULL;
    }
    if (!terminated_ok) status = 499;
    uncount(c);
    return status;
}

/* The final answer (JSON body) for a finished job; NULL with *status/message on failure. */
static char *final_body(kr_conn *c, const kr_job_state *st, int *status, size_t *len) {
    *len = 0;
    c->queue_wait = st->usage.queue_seconds;
    if (st->status != KR_OK) {
        *status = kr_api_http_status(st->status);
        const char *msg = st->error.message[0] ? st->error.message : kr_strerror(st->status);
        const char *field = st->error.field[0] ? st->error.field : NULL;
        char *b = kr_api_error_json(*status, msg, *status == 400 ? field : NULL);
        if (b) *len = strlen(b);
        return b;
    }
    kr_forecast *fc = kr_job_take_result(c->job);
    if (!fc) {
        *status = 500;
        char *b = kr_api_error_json(500, "the engine reported success without a result", NULL);
        if (b) *len = strlen(b);
        return b;
    }
    char *json = NULL;
    kr_error err = { 0 };
    kr_status rs =
        kr_api_forecast_json(&c->req, fc, &st->usage, &c->srv->model_desc, &json, len, &err);
    kr_drift *drift = kr_server_drift(c->srv);
    if (rs == KR_OK && drift) {
        kr_series series = kr_api_request_series(&c->req);
        kr_drift_offer(drift, &series, &c->req.params, fc);
    }
    kr_forecast_free(fc);
    if (rs != KR_OK) {
        *status = kr_api_http_status(rs) == 400 ? 500 : kr_api_http_status(rs);
        char *b = kr_api_error_json(*status, err.message, NULL);
        *len = b ? strlen(b) : 0;
        return b;
    }
    *status = 200;
    return json;
}

static void sse_progress(kr_conn *c, int upto) {
    const int P = c->req.params.pred_len;
    if (upto > P) upto = P;
    char data[96];
    for (int k = c->seen_steps + 1; k <= upto; k++) {
        snprintf(data, sizeof data, "{\"step\":%d,\"pred_len\":%d}", k, P);
        kr_sse_event(&c->sse, "progress", data);
    }
    if (upto > c->seen_steps) c->seen_steps = upto;
}

/* libmicrohttpd's content reader for a streamed forecast. Runs on the connection's own
 * thread, so blocking here (in bounded slices) only delays this one client. */
static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    kr_conn *c = cls;
    kr_server *s = c->srv;
    for (;;) {
        if (kr_sse_pending(&c->sse)) {
            c->last_write = kr_now_seconds();
            return (ssize_t)kr_sse_read(&c->sse, buf, max);
        }
        if (c->stream_done) return MHD_CONTENT_READER_END_OF_STREAM;
        kr_job_state st;
        if (kr_job_wait(c->job, c->seen_steps, KR_POLL_S, &st)) {
            if (!st.done) {
                sse_progress(c, st.steps);
                continue;
            }
            /* Every step is reported before the result, even if the engine coalesced them. */
            sse_progress(c, st.status == KR_OK ? c->req.params.pred_len : st.steps);
            int status;
            size_t len;
            char *body = final_body(c, &st, &status, &len);
            kr_sse_event(&c->sse, status == 200 ? "result" : "error",
                         body ? body : "{\"error\":{\"code\":500,\"message\":\"out of memory\"}}");
            free(body);
            /* The final event waits in the stream's buffer until the client reads it. */
            kr_srv_hold_answer(c, len);
            c->status = status; /* a stream counts with the status of its final event */
            c->stream_done = 1;
            continue;
        }
        if (kr_srv_client_gone(c->fd)) return MHD_CONTENT_READER_END_WITH_ERROR;
        double now = kr_now_seconds();
        if (now > c->hard_deadline) {
            kr_cancel(s->ctx, kr_job_id(c->job));
            char *body = kr_api_error_json(504, "request_timeout_s passed", NULL);
            kr_sse_event(&c->sse, "error", body ? body : "");
            free(body);
            c->status = 504;
            snprintf(c->error, sizeof c->error, "request_timeout_s passed");
            c->stream_done = 1;
            continue;
        }
        if (now - c->last_write > KR_SSE_KEEPALIVE_S) kr_sse_comment(&c->sse, "keep-alive");
    }
}

static enum MHD_Result start_stream(struct MHD_Connection *mc, kr_conn *c) {
    c->last_write = kr_now_seconds();
    return kr_srv_stream(mc, c, sse_reader, c, NULL);
}

/* Blocks until the job is done, the client leaves or the deadline guard fires. */
static enum MHD_Result wait_and_reply(struct MHD_Connection *mc, kr_conn *c) {
    kr_server *s = c->srv;
    kr_job_state st;
    for (;;) {
        if (kr_job_wait(c->job, INT_MAX, KR_POLL_S, &st)) break;
        if (kr_srv_client_gone(c->fd)) {
            kr_cancel(s->ctx, kr_job_id(c->job));
            return MHD_NO; /* closes the connection; completion records 499 */
        }
        if (kr_now_seconds() > c->hard_deadline) {
            kr_cancel(s->ctx, kr_job_id(c->job));
            if (kr_job_wait(c->job, INT_MAX, 1.0, &st) && st.status == KR_OK) break;
            return kr_srv_reply_error(mc, c, 504, "request_timeout_s passed", NULL);
        }
    }
    int status;
    size_t len;
    char *body = final_body(c, &st, &status, &len);
    return kr_srv_reply(mc, c, status, "application/json", body, len, NULL, NULL);
}

enum MHD_Result kr_handle_forecast(struct MHD_Connection *mc, kr_conn *c) {
    kr_server *s = c->srv;
    kr_api_error aerr;
    if (kr_api_forecast_parse(c->body, c->len, &s->limits, &c->req, &aerr) != KR_OK)
        return kr_srv_reply_error(mc, c, aerr.status ? aerr.status : 400, aerr.message, aerr.field);
    kr_srv_drop_body(c);

    double timeout = s->cfg.request_timeout_s;
    if (c->req.timeout_s > 0 && c->req.timeout_s < timeout) timeout = c->req.timeout_s;

    /* Counted before submitting, under the same lock drain takes, so a drain either sees
     * this request or this request sees the drain. */
    pthread_mutex_lock(&s->mu);
    int draining = s->draining;
    if (!draining) s->active_jobs++;
    pthread_mutex_unlock(&s->mu);
    if (draining) {
        kr_http_metrics_reject(s->http, "draining");
        return kr_srv_reply_error(mc, c, 503, "the server is shutting down", NULL);
    }
    c->counted = 1;
    c->job = kr_job_create();
    if (!c->job) {
        uncount(c);
        return kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
    }
    kr_job_set_charge(c->job, kr_srv_charge_memory, s);
    kr_job_ref(c->job); /* the scheduler's reference, dropped by its DONE/FAILED event */
    kr_series series = kr_api_request_series(&c->req);
    uint64_t id = 0;
    kr_error err = { 0 };
    kr_request_params rp = kr_request_default_params();
    rp.deadline_s = timeout;
    rp.on_event = kr_job_on_event;
    rp.user = c->job;
    kr_status st = kr_submit(s->ctx, &series, &c->req.params, &rp, &id, &err);
    if (st != KR_OK) {
        kr_job_unref(c->job); /* not accepted: the scheduler holds no reference */
        kr_job_unref(c->job);
        c->job = NULL;
        uncount(c);
        if (st == KR_ERR_BUSY && kr_server_is_draining(s)) {
            kr_http_metrics_reject(s->http, "draining");
            return kr_srv_reply_error(mc, c, 503, "the server is shutting down", NULL);
        }
        if (st == KR_ERR_BUSY) {
            kr_http_metrics_reject(s->http, "busy");
            snprintf(c->error, sizeof c->error, "%s",
                     err.message[0] ? err.message : "the request queue is full");
            char *body = kr_api_error_json(429, c->error, NULL);
            return kr_srv_reply(mc, c, 429, "application/json", body, body ? strlen(body) : 0,
                                MHD_HTTP_HEADER_RETRY_AFTER, "1");
        }
        int code = kr_api_http_status(st);
        return kr_srv_reply_error(mc, c, code, err.message[0] ? err.message : kr_strerror(st),
                                  code == 400 && err.field[0] ? err.field : NULL);
    }
    kr_job_set_id(c->job, id);
    c->hard_deadline = kr_now_seconds() + timeout + KR_DEADLINE_SLACK_S;
    if (c->req.stream) return start_stream(mc, c);
    return wait_and_reply(mc, c);
}
