/*
 * server/routes_analyst — the analyst's reports over HTTP (see routes_analyst.h for the
 * routes and how an analysis shares the model with the scheduler).
 *
 * The request bodies are parsed in server/analyst_request, with the field readers and the
 * candle parser of /v1/forecast; stored symbols are picked and read by common/analyze_stored
 * (as `kronos analyze` does), the store reached through server/store_access.
 */
#include "server/routes_analyst.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "analyst/narrative.h"
#include "analyst/text.h"
#include "base/error.h"
#include "base/timeutil.h"
#include "common/analyze_stored.h"
#include "server/store_access.h"

/* How often a streaming connection looks at its socket while the analysis runs, seconds. */
#define POLL_S 0.1
/* SSE comment interval while nothing else is sent (as for streamed forecasts). */
#define KEEPALIVE_S 15.0

/* ------------------------------------------------------------------ analyses */

/* One analysis request from parse to answer. The plain path runs it on the connection's
 * thread; the streamed one on a worker thread that the connection's content reader waits for
 * (and joins: the worker borrows the model, which must not outlive the connection). */
typedef struct analyze_task {
    kr_server *srv;
    kr_api_analyze_request req;
    kr_store_entry *list; /* every stored series (owned); t->series borrow it */
    int64_t n_list;
    kr_stored_series series[KR_API_MAX_SYMBOLS]; /* the symbols read from the store */
    char intervals[1][KR_STORE_NAME_MAX + 1]; /* a body's candles: their interval */
    char errors[KR_API_MAX_SYMBOLS][512]; /* per-symbol load failures (batch) */
    int64_t rows[KR_API_MAX_SYMBOLS]; /* candles each picked series holds (what reading costs) */
    kr_store *store; /* opened by task_plan, read by task_run, closed once read (owned) */
    kr_analyze_item items[KR_API_MAX_SYMBOLS];
    /* outcome */
    int status; /* HTTP status */
    int retry_after; /* 429, 503: tell the client when to retry */
    char *body; /* report text or error JSON (owned) */
    const char *content_type;
    /* streaming: events for the connection, guarded by mu */
    int streaming;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    kr_sse_buf sse;
    int step, steps; /* progress numbering, 1..steps */
    int done; /* final event queued */
    int thread_started, joined;
    pthread_t thread;
    int fd; /* the client's socket, for disconnects */
    atomic_int abandoned; /* the client has gone: the engine cancels the forecasts */
    double last_write;
    double started; /* kr_now_seconds() when the analysis began: the request deadline's origin */
    size_t charged; /* the final event's bytes charged to the memory budget */
    kr_served *served; /* the model it runs on (a reference held until the task is freed) */
    int rung; /* the precision that ran it (served->rung[rung]) */
} analyze_task;

static analyze_task *task_new(kr_server *s) {
    analyze_task *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->srv = s;
    t->fd = -1;
    t->started = kr_now_seconds();
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    return t;
}

static void task_join(analyze_task *t) {
    if (t->thread_started && !t->joined) {
        pthread_join(t->thread, NULL);
        t->joined = 1;
    }
}

/* The histories read from the store, once the analysis is done with them. */
static void task_drop_histories(analyze_task *t) {
    kr_stored_series_free(t->series, KR_API_MAX_SYMBOLS);
}

static void task_free(analyze_task *t) {
    if (!t) return;
    task_join(t);
    if (t->charged) kr_srv_charge_memory(t->srv, t->charged, 1);
    kr_store_close(t->store);
    task_drop_histories(t);
    free(t->list);
    kr_api_analyze_request_free(&t->req);
    kr_models_release(t->srv->models, t->served);
    free(t->body);
    kr_sse_free(&t->sse);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* Queues one SSE progress event (streaming only):
 * {"phase": "load|forecast|calibrate|render", "step": k, "steps": N, "symbol"?, "message"}. */
static void emit(analyze_task *t, const char *phase, const char *symbol, const char *message) {
    if (!t->streaming) return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "phase", phase);
    pthread_mutex_lock(&t->mu);
    cJSON_AddNumberToObject(o, "step", ++t->step);
    cJSON_AddNumberToObject(o, "steps", t->steps);
    if (symbol) cJSON_AddStringToObject(o, "symbol", symbol);
    cJSON_AddStringToObject(o, "message", message);
    char *data = cJSON_PrintUnformatted(o);
    if (data) kr_sse_event(&t->sse, "progress", data);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    free(data);
    cJSON_Delete(o);
}

static void on_analyze_progress(void *user, int step, int n_steps, const char *what) {
    analyze_task *t = user;
    if (step >= n_steps) return; /* "done": the render phase follows */
    emit(t, step == 0 ? "forecast" : "calibrate", step == 0 ? NULL : t->items[step - 1].symbol,
         what);
}

/* Polled by the engine thread once per step while the analysis' forecasts are queued or
 * running: a client that has gone cancels them. */
static int task_should_abort(void *user) {
    analyze_task *t = user;
    if (atomic_load(&t->abandoned)) return 1;
    if (kr_srv_client_gone(t->fd)) {
        atomic_store(&t->abandoned, 1);
        return 1;
    }
    return 0;
}

/* The analysis' error answer (the plain body, or a stream's "error" event). Messages that may
 * carry a store's words lose its path (kr_store_access_scrub); such a 5xx is logged whole. */
static void task_fail(analyze_task *t, int status, const char *message, const char *field) {
    char msg[1024];
    kr_store_access_scrub(t->srv, message, msg, sizeof msg);
    if (status >= 500 && strcmp(msg, message) != 0)
        kr_store_access_log_error(t->srv, status, message);
    t->status = status;
    if (status == 503) t->retry_after = 1; /* draining, overload, the store: all pass */
    free(t->body);
    t->body = kr_api_error_json(status, msg, field && field[0] ? field : NULL);
    t->content_type = "application/json";
}

/* A batch where no symbol could be analysed is the request's fault at symbols[0] (or "all"):
 * kr_analyze then reports the first symbol's failure, and every symbol failed, so index 0.
 * The error names that field and its message starts with it, as every field error does. */
static void task_fail_batch(analyze_task *t, int status, const char *message) {
    const char *field = t->req.all ? "all" : "symbols[0]";
    size_t fn = strlen(field);
    char msg[1024];
    if (!strncmp(message, field, fn) && message[fn] == ':')
        snprintf(msg, sizeof msg, "%s", message);
    else
        snprintf(msg, sizeof msg, "%s: %s", field, message);
    task_fail(t, status, msg, field);
}

/* Reads the histories (or takes the body's candles), runs the analyst, renders the report.
 * Leaves the outcome in t->status / body / content_type. */
/* Where the language model runs is the operator's business, not the clients': a failure is
 * logged with the endpoint and answered without it, and a report names the model only. */
static void hide_llm_url(kr_server *s, kr_narrative *n) {
    static const char hidden[] = "the server's language model";
    if (!n) return;
    if (!n->text) {
        kr_srv_log(s, "narrative: %s", n->error);
        snprintf(n->error, sizeof n->error, "%s (%s): %s", hidden, n->model, n->reason);
        kr_text_cut_partial(n->error);
    }
    snprintf(n->url, sizeof n->url, "%s", hidden);
}

/* The request field symbol i came from, for its errors: "all" names no symbols, so its series'
 * errors name the field that asked for them. */
static void task_field(const analyze_task *t, int i, char *field, size_t cap) {
    const kr_api_analyze_request *r = &t->req;
    if (r->batch && r->all)
        snprintf(field, cap, "all");
    else if (r->batch)
        snprintf(field, cap, "symbols[%d]", i);
    else
        snprintf(field, cap, "%s", r->stock_code ? "stock_code" : "symbol");
}

/* The progress events a stream will carry: a load per stored symbol, the forecasts, a
 * calibration per symbol, the narrative, the rendering. */
static void task_count_steps(analyze_task *t) {
    const kr_api_analyze_request *r = &t->req;
    pthread_mutex_lock(&t->mu);
    t->steps = (r->candles ? 0 : r->n) + 1 + (r->params.calibrate > 0 ? r->n : 0) + 1 +
               (r->narrative ? 1 : 0);
    pthread_mutex_unlock(&t->mu);
}

/* Before anything is read: the store opened, every series picked (its interval, stored
 * spelling, market and row count), so the analysis' memory can be charged before it is
 * allocated (task_working_set). A failure is the task's outcome (t->status), answered by
 * task_run's caller as any other. On the connection's thread. */
static void task_plan(analyze_task *t) {
    kr_server *s = t->srv;
    kr_api_analyze_request *r = &t->req;
    kr_api_error aerr = { 0 };
    kr_error err = { 0 };
    char field[40], msg[256];
    task_count_steps(t);
    if (r->candles) {
        snprintf(t->intervals[0], sizeof t->intervals[0], "%s", r->interval);
        t->items[0] = (kr_analyze_item){ r->symbols[0], t->intervals[0], r->candles, NULL,
                                         r->market[0] ? r->market : NULL };
        return;
    }
    int status;
    kr_store *store = kr_store_access_open(s, 1, &status, &aerr);
    if (status) {
        task_fail(t, status, aerr.message, NULL);
        return;
    }
    t->store = store;
    status = kr_store_access_list(s, store, NULL, &t->list, &t->n_list, &aerr);
    if (status) {
        task_fail(t, status, aerr.message, NULL);
        return;
    }
    if (r->all) {
        /* Every stored series: each symbol with each of its intervals, up to the same cap as a
         * list of symbols (the config's max_symbols, itself at most the compiled
         * KR_API_MAX_SYMBOLS): more is refused, naming the limit, never cut to the first ones. */
        int cap = s->limits.max_symbols;
        if (cap < 1 || cap > KR_API_MAX_SYMBOLS) cap = KR_API_MAX_SYMBOLS;
        if (kr_stored_all(t->list, t->n_list, t->series, cap, &r->n, &err) != KR_OK) {
            snprintf(msg, sizeof msg,
                     "all: %d series are stored, more than max_symbols (%d) one analysis takes; "
                     "name up to %d in symbols instead",
                     r->n, cap, cap);
            task_fail(t, 400, msg, "all");
            return;
        }
        if (r->n == 0) {
            task_fail(t, 400, "all: nothing is stored (add candles with POST /v1/candles)", "all");
            return;
        }
        task_count_steps(t);
    } else {
        for (int i = 0; i < r->n; i++) {
            t->series[i].asked = r->symbols[i];
            t->series[i].want = r->interval;
        }
    }
    for (int i = 0; i < r->n; i++) {
        kr_stored_series *e = &t->series[i];
        task_field(t, i, field, sizeof field);
        snprintf(msg, sizeof msg, "reading %s", e->asked);
        emit(t, "load", e->asked, msg);
        /* A batch reports a symbol it cannot load beside the others' reports; a single
         * analysis answers with the error. */
        kr_stored_pick(t->list, t->n_list, e);
        if (kr_store_access_fault(s, e, field, 400, &aerr)) {
            if (!r->batch) {
                task_fail(t, aerr.status, aerr.message, aerr.field);
                return;
            }
            snprintf(t->errors[i], sizeof t->errors[i], "%s", aerr.message);
            t->items[i] = kr_stored_item(e, r->market, t->errors[i]);
            continue;
        }
        /* kr_stored_read reads the most recent KR_LIMIT_ANALYZE_ROWS of a series. */
        t->rows[i] =
            e->entry->rows > KR_LIMIT_ANALYZE_ROWS ? KR_LIMIT_ANALYZE_ROWS : e->entry->rows;
    }
}

/* What a history row costs at the analysis' peak: its stamp and six values (56 bytes), the
 * reader's growth and the copies the calendar, the indicators and the reports take while the
 * histories are held — about 160 bytes measured (resident memory of `all` over 16 series of
 * 40,000 rows, tests/hostile/server_memory.py) — and what the largest history costs again
 * while it is read and its indicators run (ten columns of doubles, the gaps). */
#define KR_ANALYSIS_ROW_BYTES 160
#define KR_ANALYSIS_SCRATCH_ROW_BYTES 160
/* A sample path's step: the engine's candle (floats) and ids, the kept doubles and the
 * statistics' copy (the path set). */
#define KR_ANALYSIS_PATH_STEP_BYTES 128
/* A symbol's report and its rendering (chart, bands, tables; HTML with SVG is the largest). */
#define KR_ANALYSIS_REPORT_BYTES ((size_t)256 << 10)

/* The memory an analysis holds at its peak, from what it will read and compute: every
 * history at once, the largest one's scratch, each symbol's paths up to the adaptive cap
 * (they are kept until the reports are built), the calibration's windows one symbol at a time,
 * and the reports. An upper estimate, charged to the budget before anything is read. */
static size_t task_working_set(const analyze_task *t) {
    const kr_api_analyze_request *r = &t->req;
    const kr_analyze_params *p = &r->params;
    size_t rows = 0, largest = 0;
    for (int i = 0; i < r->n; i++) {
        size_t n = r->candles && i == 0 ? (size_t)r->candles->n : (size_t)t->rows[i];
        rows += n;
        if (n > largest) largest = n;
    }
    const size_t paths = (size_t)(p->max_paths > p->paths ? p->max_paths : p->paths);
    const size_t steps = (size_t)p->horizon;
    const size_t n = (size_t)(r->n > 0 ? r->n : 1);
    return rows * KR_ANALYSIS_ROW_BYTES + largest * KR_ANALYSIS_SCRATCH_ROW_BYTES +
           n * paths * steps * KR_ANALYSIS_PATH_STEP_BYTES +
           (size_t)p->calibrate * (size_t)p->paths * steps * KR_ANALYSIS_PATH_STEP_BYTES +
           n * KR_ANALYSIS_REPORT_BYTES;
}

/* Reads the histories planned (task_plan), runs the analyst, renders the report. Leaves the
 * outcome in t->status / body / content_type. */
static void task_run(analyze_task *t) {
    kr_server *s = t->srv;
    kr_api_analyze_request *r = &t->req;
    kr_error err = { 0 };
    char field[40];
    if (t->status) return; /* the plan failed */
    if (!r->candles) {
        kr_api_error aerr = { 0 };
        const int64_t need = kr_analyze_min_rows(&r->params);
        for (int i = 0; i < r->n; i++) {
            if (t->errors[i][0]) continue; /* not picked: its failure is in items[i] */
            kr_stored_series *e = &t->series[i];
            task_field(t, i, field, sizeof field);
            kr_stored_read(t->store, need, e);
            int status = kr_store_access_fault(s, e, field, 400, &aerr);
            if (!status && e->fault == KR_STORED_TOO_FEW_ROWS) {
                status = 400;
                kr_api_error_set(&aerr, 400, NULL,
                                 "%s: %s %s has %lld rows, at least %lld needed for horizon %d%s",
                                 field, e->symbol, e->interval, (long long)e->rows,
                                 (long long)e->need, r->params.horizon,
                                 r->params.calibrate ? " and calibrate" : "");
                snprintf(aerr.field, sizeof aerr.field, "%s", field);
            }
            if (status && !r->batch) {
                task_fail(t, aerr.status, aerr.message, aerr.field);
                return;
            }
            if (status) snprintf(t->errors[i], sizeof t->errors[i], "%s", aerr.message);
            t->items[i] = kr_stored_item(e, r->market, t->errors[i]);
        }
        kr_store_close(t->store);
        t->store = NULL;
    }

    kr_analyze_params p = r->params;
    p.model_name = t->served->name;
    /* Another served model's directories are the operator's: the report names the model. */
    p.predictor_dir = t->served->main ? s->predictor_shown : t->served->name;
    p.tokenizer_dir = t->served->main ? s->tokenizer_shown : t->served->name;
    /* A batch of symbols is offline-style scoring: static batches (the report says which). */
    if (r->batch) p.static_batch_rows = s->cfg.batch_size;
    if (t->streaming) {
        p.progress = on_analyze_progress;
        p.progress_user = t;
    }
    /* The forecasts join the engine's continuous batch like /v1/forecast requests, at the
     * analysis priority, within what is left of the request timeout (kr_analyze holds all its
     * rounds and calibrations to it), cancelled when the client goes. */
    kr_request_params rp = kr_request_default_params();
    if (s->cfg.request_timeout_s > 0) {
        const double left = s->cfg.request_timeout_s - (kr_now_seconds() - t->started);
        rp.deadline_s = left > 0 ? left : 1e-9;
    }
    rp.priority = s->cfg.analysis_priority;
    rp.wait_for_room = 0; /* a full queue is a 429, not a wait */
    /* Offline scoring waits long for company, whatever the profile (latency is not its aim). */
    if (r->batch) rp.batch_wait_ms = s->cfg.offline_batch_wait_ms;
    rp.should_abort = task_should_abort;
    rp.abort_user = t;
    p.request = &rp;
    kr_report_set *set = NULL;
    const int rung = t->rung = kr_served_pick(t->served);
    kr_status st = kr_analyze(t->served->rung[rung].ctx, t->items, r->n, &p, &set, &err);
    if (st != KR_OK) {
        int code = kr_api_http_status(st);
        if (st == KR_ERR_BUSY && kr_server_is_draining(s)) code = 503;
        if (st == KR_ERR_BUSY) t->retry_after = 1;
        if (code == 429) kr_http_metrics_reject(s->http, "busy");
        /* Not the deadline, the client or the engine's capacity: every symbol failed. */
        if (r->batch && !kr_analyst_fatal(st) && code < 500)
            task_fail_batch(t, code, err.message);
        else
            task_fail(t, code, err.message, NULL);
        return;
    }
    /* The optional prose (server llm_url): its failure is recorded in the report, never an
     * error of the analysis (analyst/narrative.h). */
    kr_narrative **narrs = NULL;
    int n_narrs = set->n;
    if (r->narrative) {
        emit(t, "narrative", NULL, "asking the language model for the narrative");
        kr_narrative_params np = kr_narrative_default_params();
        np.url = s->cfg.llm_url;
        if (s->cfg.llm_model[0]) np.model = s->cfg.llm_model;
        np.timeout_s = s->cfg.llm_timeout_s;
        /* The request deadline covers the narrative too: the model gets what the analysis
         * left of it (a report without narrative, saying why, beats a 504 or a late answer),
         * and a client that leaves stops the wait. */
        if (s->cfg.request_timeout_s > 0) {
            double left = s->cfg.request_timeout_s - (kr_now_seconds() - t->started);
            np.budget_s = left > 0 ? left : 1e-9;
        }
        np.should_abort = task_should_abort;
        np.abort_user = t;
        if (kr_narrative_attach_all(set, &np, &narrs, &err) != KR_OK) {
            kr_report_set_free(set);
            task_fail(t, 500, err.message, NULL);
            return;
        }
        for (int i = 0; i < n_narrs; i++) hide_llm_url(s, narrs[i]);
    }
    emit(t, "render", NULL,
         r->format == KR_FORMAT_JSON ? "writing the JSON report"
         : r->format == KR_FORMAT_MD ? "writing the Markdown report"
                                     : "writing the HTML report");
    char *text = NULL;
    st = kr_render(set, r->format, &text, &err);
    kr_report_set_free(set);
    kr_narrative_free_all(narrs, n_narrs);
    if (st != KR_OK) {
        task_fail(t, 500, err.message, NULL);
        return;
    }
    /* The renderer indents for people reading files; over HTTP compact text is the norm
     * (and a streamed result then fits one "data:" line). */
    if (r->format == KR_FORMAT_JSON) cJSON_Minify(text);
    t->status = 200;
    t->body = text;
    t->content_type = r->format == KR_FORMAT_JSON ? "application/json"
                      : r->format == KR_FORMAT_MD ? "text/markdown; charset=utf-8"
                                                  : "text/html; charset=utf-8";
}

/* The streamed answer's last event: "result" with the JSON report (Markdown and HTML come
 * wrapped as {"format", "content_type", "content"}), or "error" with the error body. */
static void *task_worker(void *arg) {
    analyze_task *t = arg;
    task_run(t);
    char *data = NULL;
    const char *event = t->status == 200 ? "result" : "error";
    if (t->status == 200 && t->req.format != KR_FORMAT_JSON) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "format", t->req.format == KR_FORMAT_MD ? "md" : "html");
        cJSON_AddStringToObject(o, "content_type", t->content_type);
        cJSON_AddStringToObject(o, "content", t->body ? t->body : "");
        data = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
    }
    pthread_mutex_lock(&t->mu);
    const char *payload = data ? data : t->body;
    kr_sse_event(&t->sse, payload ? event : "error",
                 payload ? payload : "{\"error\":{\"code\":503,\"message\":\"out of memory\"}}");
    /* The event waits in the stream's buffer until the client reads it, charged like any
     * answer; the report's own copy is not needed any more. */
    free(t->body);
    t->body = NULL;
    t->charged = kr_sse_pending(&t->sse);
    kr_srv_charge_memory(t->srv, t->charged, 0);
    t->done = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    free(data);
    return NULL;
}

/* libmicrohttpd's content reader for a streamed analysis, on the connection's thread. It
 * joins the worker before ending the stream, so by the time the connection completes (and
 * the server may drain and free the model) no analysis is running for it. */
static ssize_t task_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    analyze_task *t = cls;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        size_t n = kr_sse_read(&t->sse, buf, max);
        if (n > 0) {
            t->last_write = kr_now_seconds();
            pthread_mutex_unlock(&t->mu);
            return (ssize_t)n;
        }
        if (t->done) {
            pthread_mutex_unlock(&t->mu);
            task_join(t);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += (long)(POLL_S * 1e9);
        if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&t->cv, &t->mu, &dl);
        if (kr_sse_pending(&t->sse) || t->done) continue;
        if (kr_srv_client_gone(t->fd)) {
            /* The engine cancels the forecasts at its next step; then drop the stream. */
            atomic_store(&t->abandoned, 1);
            pthread_mutex_unlock(&t->mu);
            task_join(t);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (kr_now_seconds() - t->last_write > KEEPALIVE_S) kr_sse_comment(&t->sse, "keep-alive");
    }
}

static void task_release(void *cls) { task_free(cls); }

static enum MHD_Result start_stream(struct MHD_Connection *mc, kr_conn *c, analyze_task *t) {
    t->streaming = 1;
    t->fd = c->fd;
    t->last_write = kr_now_seconds();
    if (pthread_create(&t->thread, NULL, task_worker, t) != 0) {
        task_free(t);
        return kr_srv_reply_error(mc, c, 503, "cannot start the analysis thread", NULL);
    }
    t->thread_started = 1;
    /* The response owns t from here: task_release frees it (joining the worker) when the
     * response is gone, or now if it cannot be queued. */
    return kr_srv_stream(mc, c, task_reader, t, task_release);
}

static enum MHD_Result handle_analyze(struct MHD_Connection *mc, kr_conn *c, int batch) {
    kr_server *s = c->srv;
    analyze_task *t = task_new(s);
    if (!t) return kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
    kr_api_error aerr;
    if (kr_api_analyze_parse(c->body, c->len, batch, &s->limits, &t->req, &aerr) != KR_OK) {
        task_free(t);
        return kr_store_access_reply_error(mc, c, &aerr);
    }
    kr_srv_drop_body(c);
    if (!(t->served = kr_models_acquire(s->models, t->req.model))) {
        char msg[160];
        snprintf(msg, sizeof msg, "no model '%s' is served (GET /v1/models lists them)",
                 t->req.model);
        task_free(t);
        return kr_srv_reply_error(mc, c, 404, msg, "model");
    }
    if (t->req.narrative && !s->cfg.llm_url[0]) {
        task_free(t);
        return kr_srv_reply_error(mc, c, 400,
                                  "this server has no language model for narratives (set "
                                  "llm_url in its config)",
                                  "narrative");
    }

    /* Counted like a forecast (server_internal.h: c->counted, released when the connection
     * completes), under the lock drain takes, so a drain waits for the analysis. */
    pthread_mutex_lock(&s->mu);
    int draining = s->draining;
    if (!draining) s->active_jobs++;
    pthread_mutex_unlock(&s->mu);
    if (draining) {
        task_free(t);
        kr_http_metrics_reject(s->http, "draining");
        return kr_srv_reply_error(mc, c, 503, "the server is shutting down", NULL);
    }
    c->counted = 1;

    t->fd = c->fd;
    t->streaming = t->req.stream; /* the plan's progress events wait for the stream */
    /* What it will read and compute, charged before any of it is allocated: 503 while the
     * budget is taken, 413 when it could never fit. */
    task_plan(t);
    size_t working_set = 0;
    if (!t->status) {
        working_set = task_working_set(t);
        char msg[256];
        int refused = kr_srv_hold(c, working_set,
                                  "the analysis' histories, paths and reports; fewer symbols or "
                                  "paths take less",
                                  msg, sizeof msg);
        if (refused) {
            task_free(t);
            return kr_srv_reply_refusal(mc, c, refused, msg);
        }
    }
    if (t->req.stream) return start_stream(mc, c, t);
    task_run(t);
    /* Its histories go now, and the working set's hold becomes the answer's room. */
    task_drop_histories(t);
    c->answer_room = working_set;
    char *body = t->body;
    t->body = NULL;
    /* One extra header: Retry-After when refused, else the precision that served it. */
    enum MHD_Result ok =
        body ? kr_srv_reply(mc, c, t->status, t->content_type, body, strlen(body),
                            t->retry_after ? MHD_HTTP_HEADER_RETRY_AFTER : "X-Kronos-Precision",
                            t->retry_after ? "1" : t->served->rung[t->rung].precision)
             : kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
    task_free(t);
    return ok;
}

enum MHD_Result kr_handle_analyze(struct MHD_Connection *mc, kr_conn *c) {
    return handle_analyze(mc, c, 0);
}

enum MHD_Result kr_handle_analyze_batch(struct MHD_Connection *mc, kr_conn *c) {
    return handle_analyze(mc, c, 1);
}
