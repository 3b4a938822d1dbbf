/*
 * engine/scheduler — see scheduler.h. The scheduler thread is the only one that touches the
 * model's compute, the running groups and the prefix cache; other threads only append to the
 * waiting queue or the cancel list under `lock`. Callbacks run on the scheduler thread with
 * no lock held.
 */
#include "engine/scheduler.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "engine/forecast_internal.h"
#include "engine/prefix_cache.h"
#include "engine/tuner.h"
#include "model/kv_pool.h"

typedef struct req {
    uint64_t id;
    kr_forecast_job job;
    kr_gen_group *group;
    kr_sched_cb cb;
    void *user;
    double t_submit, t_start, t_first, t_last, deadline;
    int cancelled, reported_steps;
    size_t kv_bytes;
    struct req *next;
} req;

struct kr_sched {
    kr_model *m;
    kr_metrics *metrics;
    kr_sched_params p;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake, idle;
    req *wait_head, *wait_tail; /* FIFO of submitted requests */
    int n_waiting;
    uint64_t *cancels; /* ids to cancel, consumed by the thread */
    int n_cancels, cap_cancels;
    int stop, draining, thread_started;
    uint64_t next_id;
    /* scheduler-thread state */
    req **running;
    int n_running, cap_running;
    kr_prefix_cache *cache;
    size_t kv_used;
    kr_tuner tuner;
    /* published for kr_sched_get_stats (under lock) */
    kr_sched_stats stats;
    /* metrics */
    kr_metric *m_ttft, *m_itl, *m_queue, *m_e2e, *m_batch, *m_running, *m_waiting, *m_kv_used,
        *m_kv_budget, *m_kv_usage, *m_busy, *m_q_tokens, *m_h_tokens, *m_ok, *m_failed,
        *m_cancelled, *m_timeout, *m_rejected, *m_cache_bytes, *m_gen_tokens, *m_prefill_tokens,
        *m_kv_blocks_used, *m_kv_blocks_free;
};

kr_sched_params kr_sched_default_params(void) {
    kr_sched_params p;
    memset(&p, 0, sizeof p);
    p.batch_wait_ms = 50;
    p.max_batch_tokens = 4096;
    p.max_running = 64;
    p.max_queue = 256;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    p.kv_budget_bytes = pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 4 : (size_t)1 << 30;
    p.tune = 1;
    p.target_queue_p95_s = 0.5;
    p.target_ttft_p95_s = 2.0;
    p.prefix_cache = 1;
    return p;
}

static void logf_(kr_sched *s, const char *fmt, ...) KR_PRINTF(2, 3);
static void logf_(kr_sched *s, const char *fmt, ...) {
    if (!s->p.log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->p.log(s->p.log_user, line);
}

static void register_metrics(kr_sched *s) {
    kr_metrics *m = s->metrics;
    static const double batch_bounds[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024 };
    s->m_ttft = kr_metrics_histogram(m, "kronos_time_to_first_step_seconds", "",
                                     "Time from submission to the first sampled step (TTFT)",
                                     kr_latency_buckets, kr_latency_buckets_n);
    s->m_itl = kr_metrics_histogram(m, "kronos_inter_step_latency_seconds", "",
                                    "Time between consecutive steps of a request",
                                    kr_latency_buckets, kr_latency_buckets_n);
    s->m_queue = kr_metrics_histogram(m, "kronos_queue_wait_seconds", "",
                                      "Time a request waited before joining the running batch",
                                      kr_latency_buckets, kr_latency_buckets_n);
    s->m_e2e = kr_metrics_histogram(m, "kronos_request_latency_seconds", "",
                                    "End-to-end time of a request in the engine",
                                    kr_latency_buckets, kr_latency_buckets_n);
    s->m_batch = kr_metrics_histogram(
        m, "kronos_batch_size", "", "Sample paths advanced together in one engine step",
        batch_bounds, (int)(sizeof batch_bounds / sizeof batch_bounds[0]));
    s->m_running =
        kr_metrics_gauge(m, "kronos_requests_running", "", "Requests in the running batch");
    s->m_waiting =
        kr_metrics_gauge(m, "kronos_requests_waiting", "", "Requests waiting to be admitted");
    s->m_kv_used = kr_metrics_gauge(m, "kronos_kv_cache_used_bytes", "",
                                    "KV memory held by running requests and the prefix cache");
    s->m_kv_budget = kr_metrics_gauge(m, "kronos_kv_cache_budget_bytes", "", "KV memory budget");
    s->m_kv_usage =
        kr_metrics_gauge(m, "kronos_kv_cache_usage_ratio", "", "KV memory used / budget");
    s->m_kv_blocks_used = kr_metrics_gauge(
        m, "kronos_kv_blocks_used", "",
        "KV blocks held by any store of the process (requests, prefix cache, tokenizer)");
    s->m_kv_blocks_free =
        kr_metrics_gauge(m, "kronos_kv_blocks_free", "", "Freed KV blocks kept for reuse");
    s->m_busy = kr_metrics_gauge(m, "kronos_engine_busy_ratio", "",
                                 "Fraction of the last interval the engine computed");
    s->m_q_tokens = kr_metrics_counter(m, "kronos_prefix_cache_queried_tokens_total", "",
                                       "Context tokens looked up in the prefix cache");
    s->m_h_tokens = kr_metrics_counter(m, "kronos_prefix_cache_hit_tokens_total", "",
                                       "Context tokens served from the prefix cache");
    s->m_cache_bytes =
        kr_metrics_gauge(m, "kronos_prefix_cache_bytes", "", "Bytes held by the prefix cache");
    s->m_ok = kr_metrics_counter(m, "kronos_requests_total", "outcome=\"ok\"",
                                 "Finished requests by outcome");
    s->m_failed = kr_metrics_counter(m, "kronos_requests_total", "outcome=\"error\"",
                                     "Finished requests by outcome");
    s->m_cancelled = kr_metrics_counter(m, "kronos_requests_total", "outcome=\"cancelled\"",
                                        "Finished requests by outcome");
    s->m_timeout = kr_metrics_counter(m, "kronos_requests_total", "outcome=\"timeout\"",
                                      "Finished requests by outcome");
    s->m_rejected = kr_metrics_counter(m, "kronos_requests_total", "outcome=\"rejected\"",
                                       "Finished requests by outcome");
    s->m_gen_tokens =
        kr_metrics_counter(m, "kronos_generated_tokens_total", "", "Tokens sampled (all paths)");
    s->m_prefill_tokens =
        kr_metrics_counter(m, "kronos_prefill_tokens_total", "", "Context tokens prefilled");
    kr_metric_set(s->m_kv_budget, (double)s->p.kv_budget_bytes);
}

/* ---------------------------------------------------------------- submission (any thread) */

kr_status kr_sched_submit(kr_sched *s, const kr_series *series, const kr_forecast_params *params,
                          double deadline_s, kr_sched_cb cb, void *user, uint64_t *id,
                          kr_error *err) {
    if (!s || !series || !params)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "submit: NULL argument");
    req *r = calloc(1, sizeof *r);
    if (!r) return kr_error_set(err, KR_ERR_NOMEM, "submit: out of memory");
    kr_status st = kr_forecast_job_init(&r->job, series, 0, 1, params, err);
    if (st != KR_OK) {
        free(r);
        return st;
    }
    r->cb = cb;
    r->user = user;
    r->t_submit = kr_now_seconds();
    r->deadline = deadline_s > 0 ? r->t_submit + deadline_s : 0;
    pthread_mutex_lock(&s->lock);
    if (s->draining || s->stop || s->n_waiting >= s->p.max_queue) {
        int draining = s->draining || s->stop;
        pthread_mutex_unlock(&s->lock);
        kr_forecast_job_release(&r->job);
        free(r);
        kr_metric_add(s->m_rejected, 1);
        return kr_error_set(err, KR_ERR_BUSY,
                            draining ? "the server is shutting down" : "the request queue is full");
    }
    r->id = ++s->next_id;
    if (s->wait_tail)
        s->wait_tail->next = r;
    else
        s->wait_head = r;
    s->wait_tail = r;
    s->n_waiting++;
    if (id) *id = r->id;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    return KR_OK;
}

void kr_sched_cancel(kr_sched *s, uint64_t id) {
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    if (s->n_cancels == s->cap_cancels) {
        int cap = s->cap_cancels ? 2 * s->cap_cancels : 16;
        uint64_t *c = realloc(s->cancels, (size_t)cap * sizeof *c);
        if (c) {
            s->cancels = c;
            s->cap_cancels = cap;
        }
    }
    if (s->n_cancels < s->cap_cancels) s->cancels[s->n_cancels++] = id;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

void kr_sched_get_stats(kr_sched *s, kr_sched_stats *st) {
    pthread_mutex_lock(&s->lock);
    *st = s->stats;
    st->waiting = s->n_waiting;
    st->draining = s->draining;
    pthread_mutex_unlock(&s->lock);
}

/* ---------------------------------------------------------------- scheduler thread */

static void event_base(const req *r, kr_sched_event *ev, kr_sched_event_kind kind) {
    memset(ev, 0, sizeof *ev);
    ev->kind = kind;
    ev->id = r->id;
    ev->step = r->group ? kr_gen_group_steps(r->group) : 0;
    ev->pred_len = r->job.params.pred_len;
    ev->prefill_tokens = r->job.out.prefill_tokens;
    ev->cached_tokens = r->job.out.cached_tokens;
    ev->generated_tokens = (int64_t)ev->step * r->job.params.paths;
    ev->queue_seconds = r->t_start > 0 ? r->t_start - r->t_submit : kr_now_seconds() - r->t_submit;
    ev->ttft_seconds = r->t_first > 0 ? r->t_first - r->t_submit : 0;
    ev->total_seconds = kr_now_seconds() - r->t_submit;
}

static void finish_req(kr_sched *s, req *r, kr_status st, const char *msg) {
    kr_sched_event ev;
    if (st == KR_OK) {
        event_base(r, &ev, KR_SCHED_DONE);
        kr_error e = { 0 };
        if (kr_forecast_job_finish(&r->job, ev.total_seconds, &e) == KR_OK) {
            ev.result = r->job.result;
            r->job.result = NULL;
            kr_metric_add(s->m_ok, 1);
            kr_metric_observe(s->m_e2e, ev.total_seconds);
        } else {
            ev.kind = KR_SCHED_FAILED;
            ev.error = e;
            kr_metric_add(s->m_failed, 1);
        }
    } else {
        event_base(r, &ev, KR_SCHED_FAILED);
        kr_error_set(&ev.error, st, "%s", msg);
        kr_metric_add(st == KR_ERR_CANCELLED ? s->m_cancelled
                      : st == KR_ERR_TIMEOUT ? s->m_timeout
                                             : s->m_failed,
                      1);
    }
    if (r->group) {
        s->kv_used -= r->kv_bytes;
        kr_gen_group_free(r->group);
    }
    kr_forecast_job_release(&r->job);
    if (r->cb) r->cb(r->user, &ev);
    free(r);
}

/* Takes the cancel list and expired deadlines out; returns requests to fail (linked). */
static void apply_cancels(kr_sched *s, uint64_t *ids, int n) {
    for (int k = 0; k < n; k++)
        for (int i = 0; i < s->n_running; i++)
            if (s->running[i]->id == ids[k]) s->running[i]->cancelled = 1;
}

static int running_paths(const kr_sched *s) {
    int n = 0;
    for (int i = 0; i < s->n_running; i++) n += s->running[i]->job.params.paths;
    return n;
}

/* Moves admissible waiting requests to the running set. Called with the lock held; creating a
 * group allocates its KV, so the budget is checked here. */
static void admit(kr_sched *s, double now) {
    if (s->p.static_batching && s->n_running > 0) return;
    while (s->wait_head && s->n_running < s->p.max_running) {
        req *r = s->wait_head;
        kr_error e = { 0 };
        kr_gen_group *g = NULL;
        if (kr_gen_group_create(s->m, &r->job.in, &r->job.out, &r->job.params, NULL, &g, &e) !=
            KR_OK) {
            /* Out of memory for this one: leave it queued unless nothing runs (then fail it). */
            if (s->n_running > 0) return;
            s->wait_head = r->next;
            if (!s->wait_head) s->wait_tail = NULL;
            s->n_waiting--;
            r->next = NULL;
            pthread_mutex_unlock(&s->lock);
            finish_req(s, r, e.status ? e.status : KR_ERR_NOMEM, e.message);
            pthread_mutex_lock(&s->lock);
            continue;
        }
        size_t bytes = kr_gen_group_kv_bytes(g);
        size_t cache = 0;
        if (s->cache) {
            kr_prefix_cache_stats cs;
            kr_prefix_cache_get_stats(s->cache, &cs);
            cache = cs.bytes;
            if (s->kv_used + cache + bytes > s->p.kv_budget_bytes)
                kr_prefix_cache_evict(s->cache, s->kv_used + cache + bytes - s->p.kv_budget_bytes);
            kr_prefix_cache_get_stats(s->cache, &cs);
            cache = cs.bytes;
        }
        if (s->kv_used + cache + bytes > s->p.kv_budget_bytes && s->n_running > 0) {
            kr_gen_group_free(g); /* wait for memory: running requests will finish */
            return;
        }
        s->wait_head = r->next;
        if (!s->wait_head) s->wait_tail = NULL;
        s->n_waiting--;
        r->next = NULL;
        r->group = g;
        r->kv_bytes = bytes;
        r->t_start = now;
        s->kv_used += bytes;
        if (s->n_running == s->cap_running) {
            int cap = s->cap_running ? 2 * s->cap_running : 16;
            req **run = realloc(s->running, (size_t)cap * sizeof *run);
            if (!run) { /* keep it simple: fail this request */
                pthread_mutex_unlock(&s->lock);
                finish_req(s, r, KR_ERR_NOMEM, "scheduler: out of memory");
                pthread_mutex_lock(&s->lock);
                continue;
            }
            s->running = run;
            s->cap_running = cap;
        }
        s->running[s->n_running++] = r;
        kr_metric_observe(s->m_queue, now - r->t_submit);
        kr_tuner_observe_queue(&s->tuner, now - r->t_submit);
        if (r->cb) {
            kr_sched_event ev;
            event_base(r, &ev, KR_SCHED_STARTED);
            pthread_mutex_unlock(&s->lock);
            r->cb(r->user, &ev);
            pthread_mutex_lock(&s->lock);
        }
    }
}

/* Waiting requests whose deadline passed or that were cancelled leave the queue. */
static req *reap_queue(kr_sched *s, uint64_t *ids, int n_ids, double now, req **expired) {
    req *cancelled = NULL, **pp = &s->wait_head, *prev = NULL;
    *expired = NULL;
    while (*pp) {
        req *r = *pp;
        int cancel = 0;
        for (int k = 0; k < n_ids && !cancel; k++) cancel = ids[k] == r->id;
        int late = r->deadline > 0 && now > r->deadline;
        if (cancel || late) {
            *pp = r->next;
            if (s->wait_tail == r) s->wait_tail = prev;
            s->n_waiting--;
            if (cancel) {
                r->next = cancelled;
                cancelled = r;
            } else {
                r->next = *expired;
                *expired = r;
            }
            continue;
        }
        prev = r;
        pp = &r->next;
    }
    return cancelled;
}

static void publish_stats(kr_sched *s) {
    kr_sched_stats st = { 0 };
    st.running = s->n_running;
    st.kv_bytes_budget = s->p.kv_budget_bytes;
    if (s->cache) {
        kr_prefix_cache_stats cs;
        kr_prefix_cache_get_stats(s->cache, &cs);
        st.prefix_cache_bytes = cs.bytes;
        st.prefix_cache_decoder_bytes = cs.decoder_bytes;
        st.prefix_queried_tokens = cs.queried_tokens;
        st.prefix_hit_tokens = cs.hit_tokens;
    }
    st.kv_bytes_used = s->kv_used + st.prefix_cache_bytes;
    st.batch_wait_ms = s->p.batch_wait_ms;
    st.max_batch_tokens = s->p.max_batch_tokens;
    s->stats = st;
    kr_metric_set(s->m_running, st.running);
    kr_metric_set(s->m_waiting, s->n_waiting);
    kr_metric_set(s->m_kv_used, (double)st.kv_bytes_used);
    kr_metric_set(s->m_kv_usage,
                  st.kv_bytes_budget ? (double)st.kv_bytes_used / (double)st.kv_bytes_budget : 0);
    kr_metric_set(s->m_cache_bytes, (double)st.prefix_cache_bytes);
    /* The pool is process-wide: with one scheduler per process these are its blocks. */
    kr_kv_pool_stats ps;
    kr_kv_pool_get_stats(&ps);
    kr_metric_set(s->m_kv_blocks_used, (double)ps.blocks_used);
    kr_metric_set(s->m_kv_blocks_free, (double)ps.blocks_free);
}

static void timed_wait(kr_sched *s, double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double t = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + seconds;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(&s->wake, &s->lock, &ts);
}

static void *sched_main(void *arg) {
    kr_sched *s = arg;
    double busy = 0, busy_since = kr_now_seconds();
    int64_t last_q = 0, last_h = 0;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        double now = kr_now_seconds();
        /* Sleep while there is nothing to run; a lone newcomer waits batch_wait_ms for company. */
        if (s->n_running == 0) {
            if (!s->wait_head && s->n_cancels == 0) {
                if (s->stop || s->draining) break;
                pthread_cond_broadcast(&s->idle);
                timed_wait(s, 0.25);
                continue;
            }
            double oldest = s->wait_head ? s->wait_head->t_submit : now;
            double wait = s->p.batch_wait_ms / 1000.0 - (now - oldest);
            if (s->wait_head && wait > 0 && s->n_waiting < s->p.max_running && !s->draining &&
                s->n_cancels == 0) {
                timed_wait(s, wait);
                continue;
            }
        }
        int n_ids = s->n_cancels;
        uint64_t ids[64];
        if (n_ids > 64) n_ids = 64;
        if (n_ids > 0) {
            memcpy(ids, s->cancels, (size_t)n_ids * sizeof(uint64_t));
            memmove(s->cancels, s->cancels + n_ids,
                    (size_t)(s->n_cancels - n_ids) * sizeof(uint64_t));
            s->n_cancels -= n_ids;
        }
        req *expired = NULL, *cancelled = reap_queue(s, ids, n_ids, now, &expired);
        apply_cancels(s, ids, n_ids);
        admit(s, now);
        pthread_mutex_unlock(&s->lock);

        for (req *r = cancelled, *nx; r; r = nx) {
            nx = r->next;
            finish_req(s, r, KR_ERR_CANCELLED, "cancelled by the client");
        }
        for (req *r = expired, *nx; r; r = nx) {
            nx = r->next;
            finish_req(s, r, KR_ERR_TIMEOUT, "deadline passed while queued");
        }
        /* Running requests that were cancelled or ran out of time leave before the step. */
        for (int i = 0; i < s->n_running;) {
            req *r = s->running[i];
            int late = r->deadline > 0 && now > r->deadline;
            if (r->cancelled || late) {
                s->running[i] = s->running[--s->n_running];
                finish_req(s, r, r->cancelled ? KR_ERR_CANCELLED : KR_ERR_TIMEOUT,
                           r->cancelled ? "cancelled by the client" : "deadline passed");
                continue;
            }
            i++;
        }
        if (s->n_running > 0) {
            kr_gen_group **gs = malloc((size_t)s->n_running * sizeof *gs);
            kr_error e = { 0 };
            kr_status st = gs ? KR_OK : KR_ERR_NOMEM;
            if (gs) {
                for (int i = 0; i < s->n_running; i++) gs[i] = s->running[i]->group;
                kr_prefix_hooks hooks =
                    s->cache ? kr_prefix_cache_hooks(s->cache) : (kr_prefix_hooks){ 0 };
                int decode_rows = running_paths(s);
                kr_gen_step_params sp = { .max_prefill_rows =
                                              s->p.max_batch_tokens > decode_rows
                                                  ? s->p.max_batch_tokens - decode_rows
                                                  : 16,
                                          .prefix = s->cache ? &hooks : NULL };
                double t0 = kr_now_seconds();
                pthread_mutex_lock(&s->m->lock);
                st = kr_gen_step(s->m, gs, s->n_running, &sp, &e);
                pthread_mutex_unlock(&s->m->lock);
                double t1 = kr_now_seconds();
                busy += t1 - t0;
                kr_metric_observe(s->m_batch, decode_rows);
                free(gs);
            }
            double t = kr_now_seconds();
            for (int i = 0; i < s->n_running;) {
                req *r = s->running[i];
                if (st != KR_OK) { /* a failed step fails the whole batch: state is unknown */
                    s->running[i] = s->running[--s->n_running];
                    finish_req(s, r, st, e.message[0] ? e.message : "engine step failed");
                    continue;
                }
                /* Charge the blocks the group holds now: its prefill store only exists once the
                 * engine admitted it, and stops being its own once the prefix cache shares it. */
                size_t held = kr_gen_group_kv_bytes(r->group);
                s->kv_used = s->kv_used - r->kv_bytes + held;
                r->kv_bytes = held;
                int steps = kr_gen_group_steps(r->group);
                if (steps > r->reported_steps) {
                    if (r->reported_steps == 0) {
                        r->t_first = t;
                        kr_metric_observe(s->m_ttft, t - r->t_submit);
                        kr_tuner_observe_ttft(&s->tuner, t - r->t_submit);
                    } else {
                        kr_metric_observe(s->m_itl, t - r->t_last);
                    }
                    r->t_last = t;
                    kr_metric_add(s->m_gen_tokens,
                                  (double)(steps - r->reported_steps) * r->job.params.paths);
                    r->reported_steps = steps;
                    if (r->cb && !kr_gen_group_done(r->group)) {
                        kr_sched_event ev;
                        event_base(r, &ev, KR_SCHED_STEP);
                        r->cb(r->user, &ev);
                    }
                }
                if (kr_gen_group_done(r->group)) {
                    s->running[i] = s->running[--s->n_running];
                    kr_metric_add(s->m_prefill_tokens, (double)r->job.out.prefill_tokens);
                    finish_req(s, r, KR_OK, NULL);
                    continue;
                }
                i++;
            }
        }
        if (s->cache) {
            kr_prefix_cache_stats cs;
            kr_prefix_cache_get_stats(s->cache, &cs);
            kr_metric_add(s->m_q_tokens, (double)(cs.queried_tokens - last_q));
            kr_metric_add(s->m_h_tokens, (double)(cs.hit_tokens - last_h));
            kr_tuner_observe_cache(&s->tuner, cs.queried_tokens - last_q, cs.hit_tokens - last_h);
            last_q = cs.queried_tokens;
            last_h = cs.hit_tokens;
        }
        double t = kr_now_seconds();
        if (t - busy_since >= 1.0) {
            kr_metric_set(s->m_busy, busy / (t - busy_since));
            busy = 0;
            busy_since = t;
        }
        pthread_mutex_lock(&s->lock);
        if (s->p.tune)
            kr_tuner_tick(&s->tuner, t, s->n_waiting, s->n_running, &s->p.batch_wait_ms,
                          &s->p.max_batch_tokens, s->cache);
        publish_stats(s);
    }
    publish_stats(s);
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---------------------------------------------------------------- lifecycle */

kr_status kr_sched_create(kr_model *model, kr_metrics *metrics, const kr_sched_params *params,
                          kr_sched **out, kr_error *err) {
    if (!model || !out) return kr_error_set(err, KR_ERR_INVALID_ARG, "scheduler: NULL argument");
    kr_sched *s = calloc(1, sizeof *s);
    if (!s) return kr_error_set(err, KR_ERR_NOMEM, "scheduler: out of memory");
    s->m = model;
    s->metrics = metrics;
    s->p = params ? *params : kr_sched_default_params();
    if (s->p.batch_wait_ms < 0) s->p.batch_wait_ms = 0;
    if (s->p.max_batch_tokens < 1) s->p.max_batch_tokens = 1;
    if (s->p.max_running < 1) s->p.max_running = 1;
    if (s->p.max_queue < 1) s->p.max_queue = 1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->idle, NULL);
    register_metrics(s);
    kr_status st = KR_OK;
    if (s->p.prefix_cache) st = kr_prefix_cache_create(s->p.kv_budget_bytes / 2, &s->cache, err);
    if (st == KR_OK) kr_tuner_init(&s->tuner, &s->p, metrics, s->p.log, s->p.log_user);
    if (st == KR_OK && pthread_create(&s->thread, NULL, sched_main, s) != 0)
        st = kr_error_set(err, KR_ERR_INTERNAL, "scheduler: cannot start its thread");
    if (st != KR_OK) {
        kr_prefix_cache_free(s->cache);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->wake);
        pthread_cond_destroy(&s->idle);
        free(s);
        return st;
    }
    s->thread_started = 1;
    logf_(s,
          "scheduler: batch_wait_ms=%d max_batch_tokens=%d max_running=%d max_queue=%d "
          "kv_budget=%zu MB",
          s->p.batch_wait_ms, s->p.max_batch_tokens, s->p.max_running, s->p.max_queue,
          s->p.kv_budget_bytes >> 20);
    *out = s;
    return KR_OK;
}

void kr_sched_set_limits(kr_sched *s, int batch_wait_ms, int max_batch_tokens, const char *reason) {
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    if (batch_wait_ms >= 0) s->p.batch_wait_ms = batch_wait_ms;
    if (max_batch_tokens > 0) s->p.max_batch_tokens = max_batch_tokens;
    kr_tuner_note(&s->tuner, s->p.batch_wait_ms, s->p.max_batch_tokens, reason ? reason : "set");
    publish_stats(s);
    pthread_mutex_unlock(&s->lock);
}

void kr_sched_drain(kr_sched *s) {
    if (!s || !s->thread_started) return;
    pthread_mutex_lock(&s->lock);
    s->draining = 1;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    s->thread_started = 0;
}

void kr_sched_free(kr_sched *s) {
    if (!s) return;
    kr_sched_drain(s);
    kr_prefix_cache_free(s->cache);
    free(s->running);
    free(s->cancels);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->idle);
    free(s);
}
