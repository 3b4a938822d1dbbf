/*
 * server/routes_backtest — backtests as asynchronous jobs (see routes_backtest.h).
 *
 * A job is reference-counted: the registry holds one while it is listed, its worker one while
 * it runs, and every connection reading it (status, result, an event stream) one while it
 * does, so a DELETE or an expiry never frees a job under a reader. The job's own mutex guards
 * its state and progress; the registry's mutex its list.
 */
#include "server/routes_backtest.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "base/json_out.h"
#include "base/timeutil.h"
#include "kronos/backtest.h"
#include "server/backtest_request.h"
#include "server/store_access.h"

#define POLL_S 0.1
#define KEEPALIVE_S 15.0
#define PREFIX "/v1/backtest/"
#define ID_HEX 32

typedef enum bt_state { BT_RUNNING = 0, BT_DONE, BT_FAILED, BT_CANCELLED } bt_state;
static const char *const k_state[] = { "running", "done", "failed", "cancelled" };

typedef struct bt_job {
    struct bt_job *next;
    char id[ID_HEX + 1];
    kr_server *srv;
    int refs; /* guarded by the registry's mutex */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled on every progress report and at the end */
    bt_state state;
    char phase[16];
    int64_t done, total;
    double elapsed, eta;
    int seq; /* progress reports so far */
    int http_status; /* of a failure */
    char error[512], field[64];
    kr_backtest_report *report;
    char *json; /* the JSON report, rendered once */
    size_t charged; /* memory budget held by the finished report */
    size_t inputs_charged; /* held by the histories while the job lives */
    double finished; /* kr_now_seconds() at the end, 0 while running */
    int64_t created_unix;
    atomic_int abort;
    pthread_t thread;
    int thread_started;
    /* the run's inputs */
    kr_api_backtest_request req;
    int n;
    kr_candles *cs[KR_API_MAX_SYMBOLS];
    char names[KR_API_MAX_SYMBOLS][KR_STORE_NAME_MAX + 1];
    char intervals[KR_API_MAX_SYMBOLS][KR_STORE_NAME_MAX + 1];
    char markets[KR_API_MAX_SYMBOLS][KR_STORE_MARKET_MAX];
    kr_backtest_series series[KR_API_MAX_SYMBOLS];
} bt_job;

/* A history row as the job holds it (the candle and its stamp) and as the run's scoring reads it
 * again per origin: the analysis' per-row estimate (routes_analyst.c). */
#define KR_BACKTEST_ROW_BYTES 160

struct kr_bt_jobs {
    kr_server *srv;
    pthread_mutex_t mu;
    bt_job *head;
};

/* ------------------------------------------------------------------ jobs */

static void job_free(bt_job *job) {
    if (job->thread_started) pthread_join(job->thread, NULL);
    if (job->charged) kr_srv_charge_memory(job->srv, job->charged, 1);
    if (job->inputs_charged) kr_srv_charge_memory(job->srv, job->inputs_charged, 1);
    kr_backtest_report_free(job->report);
    free(job->json);
    for (int i = 0; i < KR_API_MAX_SYMBOLS; i++) kr_candles_free(job->cs[i]);
    kr_api_backtest_request_free(&job->req);
    pthread_cond_destroy(&job->cv);
    pthread_mutex_destroy(&job->mu);
    free(job);
}

/* The worker holds no reference: job_free joins it first, so the last reference to go (the
 * registry's, or a reader's) waits for a cancelled run to stop before the job is freed. Only
 * finished jobs leave the registry before the server is freed (after its daemon stopped, so
 * no reader is left then either). */
static void job_unref(kr_bt_jobs *j, bt_job *job) {
    pthread_mutex_lock(&j->mu);
    const int last = --job->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (last) job_free(job);
}

/* A job of the registry by id, with a reference for the caller; NULL when unknown. */
static bt_job *job_find(kr_bt_jobs *j, const char *id) {
    pthread_mutex_lock(&j->mu);
    bt_job *job = j->head;
    while (job && strcmp(job->id, id)) job = job->next;
    if (job) job->refs++;
    pthread_mutex_unlock(&j->mu);
    return job;
}

static void new_id(char *out) {
    unsigned char b[ID_HEX / 2];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        const uint64_t t = (uint64_t)(kr_now_seconds() * 1e9) ^ (uint64_t)(uintptr_t)out;
        for (size_t i = 0; i < sizeof b; i++)
            b[i] = (unsigned char)(t >> (8 * (i % 8))) ^ (unsigned char)i;
    }
    for (size_t i = 0; i < sizeof b; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

kr_bt_jobs *kr_bt_jobs_create(kr_server *s) {
    kr_bt_jobs *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->srv = s;
    pthread_mutex_init(&j->mu, NULL);
    return j;
}

void kr_bt_jobs_cancel_all(kr_bt_jobs *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    for (bt_job *job = j->head; job; job = job->next) atomic_store(&job->abort, 1);
    pthread_mutex_unlock(&j->mu);
}

void kr_bt_jobs_free(kr_bt_jobs *j) {
    if (!j) return;
    kr_bt_jobs_cancel_all(j);
    pthread_mutex_lock(&j->mu);
    bt_job *job = j->head;
    j->head = NULL;
    pthread_mutex_unlock(&j->mu);
    while (job) {
        bt_job *next = job->next;
        job_unref(j, job); /* the registry's reference; the job is joined when it goes */
        job = next;
    }
    pthread_mutex_destroy(&j->mu);
    free(j);
}

/* Forgets finished jobs past their time, then makes room for one more: KR_OK, or 429 with a
 * message when too many run or are kept. Called with the registry's lock held; the removed
 * jobs are returned in *gone for the caller to unref outside it. */
static int admit_locked(kr_bt_jobs *j, bt_job **gone, char *msg, size_t cap) {
    const double now = kr_now_seconds();
    int running = 0, kept = 0;
    bt_job *oldest = NULL, **pp = &j->head;
    while (*pp) {
        bt_job *job = *pp;
        pthread_mutex_lock(&job->mu);
        const double fin = job->finished;
        pthread_mutex_unlock(&job->mu);
        if (fin > 0 && now - fin > KR_BT_JOB_TTL_S) {
            *pp = job->next;
            job->next = *gone;
            *gone = job;
            continue;
        }
        if (fin > 0 && (!oldest || fin < oldest->finished)) oldest = job;
        running += fin == 0;
        kept++;
        pp = &job->next;
    }
    if (running >= KR_BT_JOBS_RUNNING) {
        snprintf(msg, cap,
                 "%d backtests are running, the most this server runs at once; retry "
                 "when one has finished (GET its status_url)",
                 running);
        return 429;
    }
    if (kept >= KR_BT_JOBS_KEPT) {
        if (!oldest) {
            snprintf(msg, cap, "%d backtests are kept; DELETE finished ones", kept);
            return 429;
        }
        for (pp = &j->head; *pp != oldest; pp = &(*pp)->next) {
        }
        *pp = oldest->next;
        oldest->next = *gone;
        *gone = oldest;
    }
    return 0;
}

static void on_progress(void *user, const kr_backtest_progress *p) {
    bt_job *job = user;
    pthread_mutex_lock(&job->mu);
    snprintf(job->phase, sizeof job->phase, "%s", p->phase);
    job->done = p->done;
    job->total = p->total;
    job->elapsed = p->elapsed_seconds;
    job->eta = p->eta_seconds;
    job->seq++;
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
}

static void *worker(void *arg) {
    bt_job *job = arg;
    kr_server *s = job->srv;
    kr_backtest_params p = job->req.params;
    p.progress = on_progress;
    p.progress_user = job;
    p.model_name = s->model_name;
    p.predictor_dir = s->predictor_shown;
    p.tokenizer_dir = s->tokenizer_shown;
    /* Offline scoring: background priority (interactive requests go first), a full queue is
     * waited for, no deadline; DELETE and a drain cancel it. */
    kr_request_params rq = kr_request_default_params();
    rq.priority = KR_PRIORITY_BACKGROUND;
    rq.wait_for_room = 1;
    rq.should_abort = kr_abort_flag;
    rq.abort_user = &job->abort;
    p.request = &rq;
    kr_backtest_report *report = NULL;
    kr_error err = { 0 };
    kr_status st = kr_backtest_run(s->ctx, job->series, job->n, &p, &report, &err);
    char *json = NULL;
    if (st == KR_OK) st = kr_backtest_render(report, KR_BACKTEST_JSON, &json, &err);
    if (json) cJSON_Minify(json);
    size_t bytes = 0;
    if (st == KR_OK) {
        bytes = kr_backtest_report_bytes(report) + strlen(json) + 1;
        kr_srv_charge_memory(s, bytes, 0);
    }
    pthread_mutex_lock(&job->mu);
    if (st == KR_OK) {
        job->state = BT_DONE;
        job->report = report;
        job->json = json;
        job->charged = bytes;
        report = NULL;
        json = NULL;
    } else if (st == KR_ERR_CANCELLED || atomic_load(&job->abort)) {
        job->state = BT_CANCELLED;
        job->http_status = 499;
        snprintf(job->error, sizeof job->error, "%s", "the backtest was cancelled");
    } else {
        job->state = BT_FAILED;
        job->http_status = kr_api_http_status(st);
        if (job->http_status == 499) job->http_status = 503; /* the engine shut down */
        kr_store_access_scrub(s, err.message, job->error, sizeof job->error);
    }
    job->finished = kr_now_seconds(); /* monotonic: > 0 */
    job->seq++;
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
    kr_backtest_report_free(report);
    free(json);
    kr_srv_log(s, "backtest %s: %s", job->id, k_state[job->state]);
    return NULL;
}

/* ------------------------------------------------------------------ JSON answers */

static void time_field(cJSON *o, const char *key, int64_t unix_s) {
    char b[40];
    kr_format_timestamp(unix_s, 0, b, sizeof b);
    b[10] = 'T';
    strcat(b, "Z");
    cJSON_AddStringToObject(o, key, b);
}

static void urls(cJSON *o, const char *id) {
    char u[128];
    snprintf(u, sizeof u, PREFIX "%s", id);
    cJSON_AddStringToObject(o, "status_url", u);
    snprintf(u, sizeof u, PREFIX "%s/events", id);
    cJSON_AddStringToObject(o, "events_url", u);
    snprintf(u, sizeof u, PREFIX "%s/result", id);
    cJSON_AddStringToObject(o, "result_url", u);
}

/* {"object", "id", "state", "progress", "error", "created_at", urls} with the job's lock held. */
static cJSON *status_json(const bt_job *job) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "backtest.job");
    cJSON_AddStringToObject(o, "id", job->id);
    cJSON_AddStringToObject(o, "state", k_state[job->state]);
    cJSON *p = cJSON_AddObjectToObject(o, "progress");
    cJSON_AddStringToObject(p, "phase", job->phase[0] ? job->phase : "queued");
    cJSON_AddNumberToObject(p, "done", (double)job->done);
    cJSON_AddNumberToObject(p, "total", (double)job->total);
    kr_json_add_num(p, "elapsed_seconds", job->elapsed);
    kr_json_add_num(p, "eta_seconds", job->eta);
    if (job->state == BT_FAILED || job->state == BT_CANCELLED) {
        cJSON *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddNumberToObject(e, "code", job->http_status);
        cJSON_AddStringToObject(e, "message", job->error);
    } else {
        cJSON_AddNullToObject(o, "error");
    }
    if (job->report)
        cJSON_AddNumberToObject(o, "forecasts", (double)kr_backtest_report_forecasts(job->report));
    else
        cJSON_AddNullToObject(o, "forecasts");
    time_field(o, "created_at", job->created_unix);
    urls(o, job->id);
    return o;
}

static enum MHD_Result reply_json(struct MHD_Connection *mc, kr_conn *c, int status, cJSON *o,
                                  const char *extra_name, const char *extra_value) {
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text) return kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
    return kr_srv_reply(mc, c, status, "application/json", text, strlen(text), extra_name,
                        extra_value);
}

/* ------------------------------------------------------------------ POST */

/* The histories of a request: the body's candles, or stored series. 0, or an HTTP status with
 * err filled. */
static int load_series(kr_server *s, bt_job *job, kr_api_error *err) {
    kr_api_backtest_request *r = &job->req;
    if (r->candles) {
        job->n = 1;
        snprintf(job->names[0], sizeof job->names[0], "%s", r->symbols[0]);
        snprintf(job->intervals[0], sizeof job->intervals[0], "%s", r->interval);
        job->series[0] = (kr_backtest_series){ job->names[0], job->intervals[0], r->candles,
                                               r->market[0] ? r->market : NULL };
        return 0;
    }
    int status = 0;
    kr_store *store = kr_store_access_open(s, 1, &status, err);
    if (status) return status;
    char want[KR_API_MAX_SYMBOLS][KR_STORE_NAME_MAX + 1];
    memset(want, 0, sizeof want);
    if (r->all) {
        kr_store_entry *e = NULL;
        int64_t n = 0;
        kr_error ke = { 0 };
        if (store && kr_store_list(store, NULL, &e, &n, &ke) != KR_OK) {
            kr_store_close(store);
            const int code = kr_store_access_failure_status(ke.status);
            kr_store_access_log_error(s, code, ke.message);
            kr_store_access_client_message(s, ke.status, ke.message, err->message,
                                           sizeof err->message);
            err->status = code;
            return code;
        }
        int cap = s->limits.max_symbols;
        if (cap < 1 || cap > KR_API_MAX_SYMBOLS) cap = KR_API_MAX_SYMBOLS;
        if (n > cap || n == 0) {
            free(e);
            kr_store_close(store);
            if (n == 0) {
                kr_api_error_set(err, 400, "all",
                                 "nothing is stored (add candles with POST /v1/candles)");
                return 400;
            }
            kr_api_error_set(err, 400, "all",
                             "%lld series are stored, more than max_symbols (%d) one backtest "
                             "takes; name up to %d in symbols instead",
                             (long long)n, cap, cap);
            return 400;
        }
        r->n = (int)n;
        for (int64_t i = 0; i < n; i++) {
            snprintf(r->symbols[i], sizeof r->symbols[i], "%s", e[i].symbol);
            snprintf(want[i], sizeof want[i], "%s", e[i].interval);
        }
        free(e);
    }
    int64_t rows[KR_API_MAX_SYMBOLS];
    for (int i = 0; i < r->n; i++) {
        char field[40];
        snprintf(field, sizeof field, r->all ? "all" : "symbols[%d]", i);
        const char *w = want[i][0] ? want[i] : r->interval[0] ? r->interval : NULL;
        status = kr_store_access_pick_interval(s, store, r->symbols[i], w, field, 404,
                                               job->intervals[i], sizeof job->intervals[i],
                                               job->markets[i], sizeof job->markets[i],
                                               job->names[i], sizeof job->names[i], NULL, err);
        kr_error ke = { 0 };
        if (!status && kr_store_read(store, job->names[i], job->intervals[i], KR_API_CANDLES_MAX,
                                     &job->cs[i], &ke) != KR_OK) {
            status = kr_store_access_failure_status(ke.status);
            kr_store_access_log_error(s, status, ke.message);
            kr_store_access_client_message(s, ke.status, ke.message, err->message,
                                           sizeof err->message);
            err->status = status;
        }
        if (status) {
            kr_store_close(store);
            return status;
        }
        const char *market = r->market[0] ? r->market : job->markets[i];
        job->series[i] = (kr_backtest_series){ job->names[i], job->intervals[i], job->cs[i],
                                               market[0] ? market : NULL };
        rows[i] = job->cs[i]->n;
    }
    kr_store_close(store);
    job->n = r->n;
    return kr_api_backtest_fits(&r->params, rows, job->n, NULL, err);
}

enum MHD_Result kr_handle_backtest_post(struct MHD_Connection *mc, kr_conn *c) {
    kr_server *s = c->srv;
    if (!s->backtests) return kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
    bt_job *job = calloc(1, sizeof *job);
    if (!job) return kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
    pthread_mutex_init(&job->mu, NULL);
    pthread_cond_init(&job->cv, NULL);
    job->srv = s;
    job->refs = 1; /* the registry's, once listed */
    job->eta = job->elapsed = NAN;
    job->created_unix = (int64_t)time(NULL);
    kr_api_error aerr = { 0 };
    if (kr_api_backtest_parse(c->body, c->len, &s->limits, &job->req, &aerr) != KR_OK) {
        job_free(job);
        return kr_store_access_reply_error(mc, c, &aerr);
    }
    kr_srv_drop_body(c);
    if (load_series(s, job, &aerr)) {
        job_free(job);
        return kr_store_access_reply_error(mc, c, &aerr);
    }
    char msg[256];
    /* The histories stay with the job until it is freed: charged to max_memory_in_flight like
     * an analysis' (503 while the budget is taken, 413 when they could never fit). */
    size_t inputs = 0;
    for (int i = 0; i < job->n; i++)
        inputs += (size_t)job->series[i].candles->n * KR_BACKTEST_ROW_BYTES;
    int refused = kr_srv_mem_admit(c, inputs, 0, 0,
                                   "the backtest's histories; fewer symbols or a shorter range "
                                   "take less",
                                   msg, sizeof msg);
    if (refused) {
        job_free(job);
        return kr_srv_reply_refusal(mc, c, refused, msg);
    }
    kr_srv_charge_memory(s, inputs, 0);
    job->inputs_charged = inputs;
    bt_job *gone = NULL;
    kr_bt_jobs *j = s->backtests;
    pthread_mutex_lock(&j->mu);
    int st = admit_locked(j, &gone, msg, sizeof msg);
    if (!st) {
        new_id(job->id);
        if (pthread_create(&job->thread, NULL, worker, job) != 0) {
            snprintf(msg, sizeof msg, "cannot start the backtest's thread");
            st = 503;
        } else {
            job->thread_started = 1;
            job->refs++; /* this call's, until it has answered */
            job->next = j->head;
            j->head = job;
        }
    }
    pthread_mutex_unlock(&j->mu);
    while (gone) {
        bt_job *next = gone->next;
        job_unref(j, gone);
        gone = next;
    }
    if (st) {
        job_free(job);
        if (st == 429) kr_http_metrics_reject(s->http, "busy");
        return kr_srv_reply_error(mc, c, st, msg, NULL);
    }
    pthread_mutex_lock(&job->mu);
    cJSON *o = status_json(job);
    pthread_mutex_unlock(&job->mu);
    char location[128];
    snprintf(location, sizeof location, PREFIX "%s", job->id);
    job_unref(j, job);
    return reply_json(mc, c, 202, o, MHD_HTTP_HEADER_LOCATION, location);
}

/* ------------------------------------------------------------------ GET, DELETE */

/* Splits "/v1/backtest/{id}[/what]" into id and what ("" / "events" / "result"). 0, or 404. */
static int parse_path(const char *url, char *id, const char **what) {
    const char *p = url + strlen(PREFIX);
    size_t n = strcspn(p, "/?");
    if (n != ID_HEX) return 404;
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f'))) return 404;
    memcpy(id, p, n);
    id[n] = 0;
    p += n;
    if (*p == '/') p++;
    const size_t rest = strcspn(p, "?");
    if (rest == 0)
        *what = "";
    else if (rest == 6 && !strncmp(p, "events", 6))
        *what = "events";
    else if (rest == 6 && !strncmp(p, "result", 6))
        *what = "result";
    else
        return 404;
    return 0;
}

typedef struct bt_stream {
    kr_bt_jobs *jobs;
    bt_job *job;
    int seen, final_sent, fd;
    double last_write;
    kr_sse_buf sse;
} bt_stream;

static void stream_free(void *cls) {
    bt_stream *st = cls;
    job_unref(st->jobs, st->job);
    kr_sse_free(&st->sse);
    free(st);
}

/* The next frames of a job's event stream, with the job's lock held: a "progress" event when
 * the progress moved, and at the end "result" (done) or "error" (failed, cancelled). */
static void stream_frames(bt_stream *st) {
    bt_job *job = st->job;
    if (job->seq == st->seen) return;
    st->seen = job->seq;
    cJSON *o = status_json(job);
    const char *event = job->state == BT_RUNNING ? "progress"
                        : job->state == BT_DONE  ? "result"
                                                 : "error";
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (text) kr_sse_event(&st->sse, event, text);
    free(text);
    if (job->state != BT_RUNNING) st->final_sent = 1;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    bt_stream *st = cls;
    bt_job *job = st->job;
    pthread_mutex_lock(&job->mu);
    for (;;) {
        size_t n = kr_sse_read(&st->sse, buf, max);
        if (n > 0) {
            st->last_write = kr_now_seconds();
            pthread_mutex_unlock(&job->mu);
            return (ssize_t)n;
        }
        if (st->final_sent) {
            pthread_mutex_unlock(&job->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        stream_frames(st);
        if (kr_sse_pending(&st->sse)) continue;
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += (long)(POLL_S * 1e9);
        if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&job->cv, &job->mu, &dl);
        if (job->seq != st->seen) continue;
        if (kr_srv_client_gone(st->fd)) { /* the job runs on; only the stream ends */
            pthread_mutex_unlock(&job->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (kr_now_seconds() - st->last_write > KEEPALIVE_S) kr_sse_comment(&st->sse, "keep-alive");
    }
}

static enum MHD_Result result_reply(struct MHD_Connection *mc, kr_conn *c, bt_job *job) {
    const char *fq = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "format");
    kr_backtest_format fmt = job->req.format;
    if (fq && kr_backtest_format_parse(fq, &fmt) != 0)
        return kr_srv_reply_error(mc, c, 400, "format: must be json, md, html or csv", "format");
    pthread_mutex_lock(&job->mu);
    const bt_state state = job->state;
    char phase[16];
    snprintf(phase, sizeof phase, "%s", job->phase[0] ? job->phase : "queued");
    const int64_t done = job->done, total = job->total;
    pthread_mutex_unlock(&job->mu);
    char msg[640];
    if (state == BT_RUNNING) {
        snprintf(msg, sizeof msg,
                 "the backtest is still running (%s, %lld of %lld); GET its status_url or "
                 "events_url",
                 phase, (long long)done, (long long)total);
        return kr_srv_reply_error(mc, c, 409, msg, NULL);
    }
    if (state != BT_DONE) {
        snprintf(msg, sizeof msg, "the backtest %s: %s",
                 state == BT_CANCELLED ? "was cancelled" : "failed", job->error);
        return kr_srv_reply_error(mc, c, state == BT_CANCELLED ? 409 : job->http_status, msg, NULL);
    }
    /* Finished: the report and the JSON are read-only from here on. */
    char *text = NULL;
    kr_error err = { 0 };
    if (fmt == KR_BACKTEST_JSON) {
        text = strdup(job->json);
        if (!text) return kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
    } else if (kr_backtest_render(job->report, fmt, &text, &err) != KR_OK) {
        return kr_srv_reply_error(mc, c, 500, err.message, NULL);
    }
    const char *ct = fmt == KR_BACKTEST_JSON   ? "application/json"
                     : fmt == KR_BACKTEST_MD   ? "text/markdown; charset=utf-8"
                     : fmt == KR_BACKTEST_HTML ? "text/html; charset=utf-8"
                                               : "text/csv; charset=utf-8";
    return kr_srv_reply(mc, c, 200, ct, text, strlen(text), NULL, NULL);
}

enum MHD_Result kr_handle_backtest_get(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    kr_server *s = c->srv;
    char id[ID_HEX + 1];
    const char *what = "";
    if (!s->backtests || parse_path(url, id, &what))
        return kr_srv_reply_error(mc, c, 404, "no such backtest (ids are 32 hex digits)", NULL);
    bt_job *job = job_find(s->backtests, id);
    if (!job)
        return kr_srv_reply_error(mc, c, 404,
                                  "no such backtest (finished ones are kept for an hour, then "
                                  "forgotten)",
                                  NULL);
    enum MHD_Result ok;
    if (!strcmp(what, "events")) {
        bt_stream *st = calloc(1, sizeof *st);
        if (!st) {
            job_unref(s->backtests, job);
            return kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
        }
        st->jobs = s->backtests;
        st->job = job; /* the stream's reference, dropped by stream_free */
        st->fd = c->fd;
        st->seen = -1; /* the current state first */
        st->last_write = kr_now_seconds();
        return kr_srv_stream(mc, c, stream_reader, st, stream_free);
    }
    if (!strcmp(what, "result")) {
        ok = result_reply(mc, c, job);
    } else {
        pthread_mutex_lock(&job->mu);
        cJSON *o = status_json(job);
        pthread_mutex_unlock(&job->mu);
        ok = reply_json(mc, c, 200, o, NULL, NULL);
    }
    job_unref(s->backtests, job);
    return ok;
}

enum MHD_Result kr_handle_backtest_delete(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    kr_server *s = c->srv;
    char id[ID_HEX + 1];
    const char *what = "";
    if (!s->backtests || parse_path(url, id, &what) || what[0])
        return kr_srv_reply_error(mc, c, 404, "no such backtest (DELETE /v1/backtest/{id})", NULL);
    kr_bt_jobs *j = s->backtests;
    pthread_mutex_lock(&j->mu);
    bt_job **pp = &j->head;
    while (*pp && strcmp((*pp)->id, id)) pp = &(*pp)->next;
    bt_job *job = *pp;
    int remove = 0;
    if (job) {
        pthread_mutex_lock(&job->mu);
        remove = job->state != BT_RUNNING;
        if (!remove) atomic_store(&job->abort, 1);
        pthread_mutex_unlock(&job->mu);
        if (remove)
            *pp = job->next; /* the registry's reference passes to this call */
        else
            job->refs++; /* this call's */
    }
    pthread_mutex_unlock(&j->mu);
    if (!job) return kr_srv_reply_error(mc, c, 404, "no such backtest", NULL);
    pthread_mutex_lock(&job->mu);
    cJSON *o = status_json(job);
    pthread_mutex_unlock(&job->mu);
    cJSON_AddBoolToObject(o, "deleted", remove);
    if (!remove) cJSON_ReplaceItemInObject(o, "state", cJSON_CreateString("cancelling"));
    job_unref(j, job);
    return reply_json(mc, c, remove ? 200 : 202, o, NULL, NULL);
}
