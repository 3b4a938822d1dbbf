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

#include "base/strbuf.h"
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

/* 503 while draining, and while the store's database cannot be reached (store_health.h): a
 * load balancer then sends this replica's traffic to one that can reach it. The reason, which
 * names the database, goes to the server log when the answer turns over, not to the client. */
enum MHD_Result kr_handle_ready(struct MHD_Connection *mc, kr_conn *c) {
    kr_server *s = c->srv;
    const int draining = kr_server_is_leaving(s);
    char why[256];
    int changed = 0;
    const int reachable =
        draining || kr_store_health_reachable(s->store_health, why, sizeof why, &changed);
    if (changed && !reachable)
        kr_srv_log(s, "candle store unreachable: /ready answers 503 until it answers (%s)", why);
    else if (changed)
        kr_srv_log(s, "candle store reachable again: /ready answers 200");
    const int ok = !draining && reachable;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status",
                            draining ? "draining"
                            : ok     ? "ready"
                                     : "store_unreachable");
    cJSON_AddStringToObject(o, "model", s->model_name); /* a directory name: escape it */
    if (!ok && !draining)
        cJSON_AddStringToObject(o, "reason", "the candle store's database cannot be reached");
    char *body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return kr_srv_reply(mc, c, ok ? 200 : 503, "application/json", body, body ? strlen(body) : 0,
                        NULL, NULL);
}

/* The engine a request's job runs on: its model's (the main one's before it chose). */
static kr_context *conn_ctx(const kr_conn *c) {
    return c->served ? c->served->rung[c->rung].ctx : c->srv->ctx;
}

/* The other models' metrics, appended to the main one's families: each series of a model
 * beside the main one carries model="name" (the main model's stay unlabelled, as before). */
typedef struct metrics_merge {
    kr_sb *out;
    const char *family; /* the family being copied: its samples, from every other model */
} metrics_merge;

static void append_labelled(kr_sb *out, const char *line, size_t n, const char *model) {
    const char *brace = memchr(line, '{', n), *space = memchr(line, ' ', n);
    if (brace && (!space || brace < space)) {
        kr_sb_appendf(out, "%.*smodel=\"%s\",%.*s\n", (int)(brace + 1 - line), line, model,
                      (int)(n - (size_t)(brace + 1 - line)), brace + 1);
        /* an empty label set "{}" would leave a trailing comma: not produced by the registry */
    } else if (space) {
        kr_sb_appendf(out, "%.*s{model=\"%s\"}%.*s\n", (int)(space - line), line, model,
                      (int)(n - (size_t)(space - line)), space);
    }
}

/* Whether a sample line belongs to family f (f, f_bucket, f_sum, f_count). */
static int in_family(const char *line, size_t n, const char *f) {
    size_t fl = strlen(f);
    if (n <= fl || strncmp(line, f, fl)) return 0;
    const char *rest = line + fl;
    return *rest == ' ' || *rest == '{' || !strncmp(rest, "_bucket", 7) ||
           !strncmp(rest, "_sum", 4) || !strncmp(rest, "_count", 6);
}

static void merge_one(void *user, kr_served *e, int is_default) {
    (void)is_default;
    metrics_merge *mm = user;
    if (e->main) return;
    char *text = NULL;
    kr_error err = { 0 };
    if (kr_context_metrics(e->ctx, &text, &err) != KR_OK) return;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (n && line[0] != '#' && in_family(line, n, mm->family))
            append_labelled(mm->out, line, n, e->name);
        line += n + (nl ? 1 : 0);
    }
    free(text);
}

/* The main registry's text with the other models' samples after each family's own. */
static char *metrics_all_models(kr_server *s, const char *main_text) {
    kr_sb out = { 0 };
    char family[160] = "";
    metrics_merge mm = { &out, family };
    for (const char *line = main_text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (!strncmp(line, "# HELP ", 7)) {
            if (family[0]) kr_models_each(s->models, merge_one, &mm); /* the family ends */
            const char *name = line + 7, *sp = memchr(name, ' ', n - 7);
            size_t fl = sp ? (size_t)(sp - name) : n - 7;
            snprintf(family, sizeof family, "%.*s", (int)(fl < sizeof family ? fl : 0), name);
        }
        kr_sb_appendf(&out, "%.*s\n", (int)n, line);
        line += n + (nl ? 1 : 0);
    }
    if (family[0]) kr_models_each(s->models, merge_one, &mm);
    char *text = NULL;
    kr_sb_finish(&out, &text, NULL);
    return text;
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
    int served = 0, loads = 0, unloads = 0;
    kr_models_counts(c->srv->models, &served, &loads, &unloads);
    if (served > 1 || kr_models_retired(c->srv->models) > 0) {
        char *merged = metrics_all_models(c->srv, text);
        free(text);
        if (!merged) return kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
        text = merged;
    }
    return kr_srv_reply(mc, c, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text),
                        NULL, NULL);
}

static void list_one(void *user, kr_served *e, int is_default) {
    kr_api_models_list *l = user;
    if (l->n >= KR_API_MAX_MODELS) return;
    l->desc[l->n] = e->desc;
    snprintf(l->name[l->n], sizeof l->name[0], "%s", e->name);
    snprintf(l->quant[l->n], sizeof l->quant[0], "%s", e->quant);
    snprintf(l->kv[l->n], sizeof l->kv[0], "%s", e->kv_dtype);
    l->is_default[l->n] = is_default;
    l->generation[l->n] = e->generation;
    l->n++;
}

enum MHD_Result kr_handle_models(struct MHD_Connection *mc, kr_conn *c) {
    const kr_server_config *cfg = &c->srv->cfg;
    const char *narrative_model = !cfg->llm_url[0]    ? NULL
                                  : cfg->llm_model[0] ? cfg->llm_model
                                                      : KR_NARRATIVE_DEFAULT_MODEL;
    kr_api_models_list list = { 0 };
    kr_models_each(c->srv->models, list_one, &list);
    char *body = kr_api_models_list_json(&list, narrative_model);
    if (!body) return kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
    return kr_srv_reply(mc, c, 200, "application/json", body, strlen(body), NULL, NULL);
}

/* The name in /v1/models/{name}, or "" when it is not one. */
static void model_name_in(const char *url, char *name, size_t cap) {
    const char *p = url + strlen("/v1/models/");
    snprintf(name, cap, "%s", strlen(p) < cap ? p : "");
    if (!kr_server_model_name_ok(name)) name[0] = 0;
}

/* Managing models changes what every client gets: only with an API key configured. */
static enum MHD_Result refuse_without_key(struct MHD_Connection *mc, kr_conn *c) {
    return kr_srv_reply_error(mc, c, 403,
                              "managing models needs the server's API key (api_key_file): none "
                              "is configured",
                              NULL);
}

enum MHD_Result kr_handle_model_put(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    kr_server *s = c->srv;
    if (!s->cfg.api_key[0]) return refuse_without_key(mc, c);
    char name[64];
    model_name_in(url, name, sizeof name);
    if (!name[0])
        return kr_srv_reply_error(mc, c, 400,
                                  "a model name is 1-63 letters, digits, '-', '_' or '.'", NULL);
    cJSON *root = c->body ? cJSON_ParseWithLength(c->body, c->len) : NULL;
    kr_server_model_entry spec;
    kr_error err = { 0 };
    kr_status st = root ? kr_server_model_entry_parse(root, name, "body", &spec, &err)
                        : kr_error_set(&err, KR_ERR_INVALID_ARG,
                                       "body: a JSON object {\"model\": dir, \"tokenizer\", "
                                       "\"quant\", \"kv_dtype\"}");
    cJSON_Delete(root);
    kr_srv_drop_body(c);
    if (st != KR_OK) return kr_srv_reply_error(mc, c, 400, err.message, NULL);
    kr_srv_log(s, "loading model '%s' from %s", name, spec.model);
    st = kr_models_load(s->models, &spec, &err);
    if (st != KR_OK) {
        kr_srv_log(s, "model '%s' not loaded: %s", name, err.message);
        return kr_srv_reply_error(mc, c,
                                  st == KR_ERR_BUSY          ? 409
                                  : st == KR_ERR_UNSUPPORTED ? 409
                                                             : 400,
                                  err.message, NULL);
    }
    kr_srv_log(s, "model '%s' served from %s", name, spec.model);
    return kr_handle_models(mc, c);
}

enum MHD_Result kr_handle_model_delete(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    kr_server *s = c->srv;
    if (!s->cfg.api_key[0]) return refuse_without_key(mc, c);
    char name[64];
    model_name_in(url, name, sizeof name);
    kr_error err = { 0 };
    if (!name[0] || kr_models_unload(s->models, name, &err) != KR_OK) {
        kr_served *e = name[0] ? kr_models_acquire(s->models, name) : NULL;
        int exists = e != NULL;
        kr_models_release(s->models, e);
        return kr_srv_reply_error(mc, c, exists ? 409 : 404,
                                  err.message[0] ? err.message : "no such model", NULL);
    }
    kr_srv_log(s, "model '%s' unloaded (freed when its last request ends)", name);
    return kr_handle_models(mc, c);
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
            kr_cancel(conn_ctx(c), kr_job_id(c->job));
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
    kr_status rs = kr_api_forecast_json(
        &c->req, fc, &st->usage, c->served ? &c->served->rung[c->rung].desc : &c->srv->model_desc,
        &json, len, &err);
    /* The shadow re-runs the main model's forecasts only. */
    kr_drift *drift =
        !c->served || (c->served->main && c->rung == 0) ? kr_server_drift(c->srv) : NULL;
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
            kr_srv_hold_answer(c, len, 0, NULL, 0);
            c->status = status; /* a stream counts with the status of its final event */
            c->stream_done = 1;
            continue;
        }
        if (kr_srv_client_gone(c->fd)) return MHD_CONTENT_READER_END_WITH_ERROR;
        double now = kr_now_seconds();
        if (now > c->hard_deadline) {
            kr_cancel(conn_ctx(c), kr_job_id(c->job));
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
    kr_job_state st;
    for (;;) {
        if (kr_job_wait(c->job, INT_MAX, KR_POLL_S, &st)) break;
        if (kr_srv_client_gone(c->fd)) {
            kr_cancel(conn_ctx(c), kr_job_id(c->job));
            return MHD_NO; /* closes the connection; completion records 499 */
        }
        if (kr_now_seconds() > c->hard_deadline) {
            kr_cancel(conn_ctx(c), kr_job_id(c->job));
            if (kr_job_wait(c->job, INT_MAX, 1.0, &st) && st.status == KR_OK) break;
            return kr_srv_reply_error(mc, c, 504, "request_timeout_s passed", NULL);
        }
    }
    int status;
    size_t len;
    char *body = final_body(c, &st, &status, &len);
    /* A forecast stamped past its calendar's known holidays says so in a header too, for
     * clients that read only the numbers (kr_srv_reply adds it). */
    const kr_calendar_coverage *cov = &c->req.coverage;
    if (status == 200 && cov->past_last_year)
        snprintf(c->warning_header, sizeof c->warning_header,
                 "calendar %s holidays unknown after %d", cov->name, cov->year_last);
    /* Which precision served it, for clients that read headers only (also in the body). */
    return kr_srv_reply(mc, c, status, "application/json", body, len,
                        status == 200 ? "X-Kronos-Precision" : NULL,
                        status == 200 ? c->served->rung[c->rung].precision : NULL);
}

enum MHD_Result kr_handle_forecast(struct MHD_Connection *mc, kr_conn *c) {
    kr_server *s = c->srv;
    kr_api_error aerr;
    if (kr_api_forecast_parse(c->body, c->len, &s->limits, &c->req, &aerr) != KR_OK)
        return kr_srv_reply_error(mc, c, aerr.status ? aerr.status : 400, aerr.message, aerr.field);
    kr_srv_drop_body(c);
    /* A forecast must rest on enough history (the CLI warns, an API client gets the rule). */
    if (c->req.candles->n < KR_FORECAST_MIN_ROWS) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "candles: %lld rows given, a forecast needs at least %d: the model normalises a "
                 "series by its own mean and spread, which fewer rows do not pin down",
                 (long long)c->req.candles->n, KR_FORECAST_MIN_ROWS);
        return kr_srv_reply_error(mc, c, 400, msg, "candles");
    }
    if (!(c->served = kr_models_acquire(s->models, c->req.model))) {
        char msg[160];
        snprintf(msg, sizeof msg, "no model '%s' is served (GET /v1/models lists them)",
                 c->req.model);
        return kr_srv_reply_error(mc, c, 404, msg, "model");
    }

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
    /* The answer's room, before any compute: a client that never reads its answers cannot
     * make the server build more of them than the budget holds (503, retry), and one answer
     * larger than max_request_memory is a 413 up front instead of after the forecast. */
    char msg[256];
    int refused = kr_srv_reserve_answer(c, kr_api_forecast_answer_bytes(&c->req), msg, sizeof msg);
    if (refused) {
        uncount(c);
        return kr_srv_reply_refusal(mc, c, refused, msg);
    }
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
    c->rung = kr_served_pick(c->served);
    kr_status st = kr_submit(conn_ctx(c), &series, &c->req.params, &rp, &id, &err);
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
