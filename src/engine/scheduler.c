/*
 * engine/scheduler — the engine thread of a kr_context (llama.cpp's update_slots, vLLM's
 * engine loop): it alone drives the thread pool, the workspace, the running groups and the
 * prefix cache, and loops
 *   tasks → cancellations, deadlines, aborts → admission → one engine step → events.
 *
 * Admission (admission.c) takes waiting requests in priority order while the running set has
 * room and the KV budget allows, smaller ones past a request waiting for memory when that does
 * not delay it (a lone newcomer waits batch_wait_ms for company). Each engine step hands
 * out at most max_batch_tokens rows: the highest priority present first — its generating
 * groups before its prefills, round-robin among equals — and lower priorities at most
 * background_share of the step (at least background_min_rows), so a heavy low-priority job
 * progresses without stalling interactive requests. A request's results never depend on its
 * budgets (generate.h).
 *
 * Callbacks (request events, abort checks, logs) run here with no lock held.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "engine/context_internal.h"
#include "model/kv_cache.h"

/* How often queued requests' should_abort callbacks are polled. */
#define KR_QUEUED_ABORT_POLL_S 0.05

static void event_base(const kr_req *r, kr_event *ev, kr_event_kind kind) {
    memset(ev, 0, sizeof *ev);
    ev->kind = kind;
    ev->id = r->id;
    ev->index = r->index;
    ev->step = r->group ? kr_seq_steps(r->group) : 0;
    ev->pred_len = r->job.params.pred_len;
    double now = kr_now_seconds();
    kr_request_stats *s = &ev->stats;
    s->prefill_tokens = r->job.out.prefill_tokens;
    s->cached_tokens = r->job.out.cached_tokens;
    s->generated_tokens = (int64_t)ev->step * r->job.params.paths;
    s->queue_seconds = r->t_start > 0 ? r->t_start - r->t_submit : now - r->t_submit;
    s->ttft_seconds = r->t_first > 0 ? r->t_first - r->t_submit : 0;
    s->total_seconds = now - r->t_submit;
}

static void emit(const kr_req *r, const kr_event *ev) {
    if (r->rp.on_event) r->rp.on_event(r->rp.user, ev);
}

/* Ends a request: its DONE (with the result) or FAILED event, metrics, memory. No lock held. */
static void finish_req(kr_context *c, kr_req *r, kr_status st, const char *msg) {
    kr_event ev;
    if (st == KR_OK) {
        event_base(r, &ev, KR_EVENT_DONE);
        kr_error e = { 0 };
        if (kr_forecast_job_finish(&r->job, ev.stats.total_seconds, &e) == KR_OK) {
            ev.result = r->job.result;
            r->job.result = NULL;
            ev.result->stats.seconds_queue = ev.stats.queue_seconds;
            ev.result->stats.seconds_ttft = ev.stats.ttft_seconds;
            kr_metric_add(c->m_ok, 1);
            kr_metric_observe(c->m_e2e, ev.stats.total_seconds);
            atomic_fetch_add(&c->completed, 1);
        } else {
            ev.kind = KR_EVENT_FAILED;
            ev.error = e;
            kr_metric_add(c->m_failed, 1);
            atomic_fetch_add(&c->failed, 1);
        }
    } else {
        event_base(r, &ev, KR_EVENT_FAILED);
        kr_error_set(&ev.error, st, "%s", msg ? msg : kr_strerror(st));
        kr_metric_add(st == KR_ERR_CANCELLED ? c->m_cancelled
                      : st == KR_ERR_TIMEOUT ? c->m_timeout
                                             : c->m_failed,
                      1);
        atomic_fetch_add(&c->failed, 1);
    }
    if (r->group) {
        c->kv_reserved -= r->kv_peak;
        c->kv_used -= r->kv_bytes;
        atomic_store(&c->kv_used_now, c->kv_used);
        kr_seq_free(r->group);
        r->group = NULL;
    }
    kr_forecast_job_release(&r->job);
    emit(r, &ev);
    /* DONE hands the result to the receiver; with no receiver (on_event NULL: a request
     * submitted for its side effects, or given up on) nobody else would free it. */
    if (!r->rp.on_event) kr_forecast_free(ev.result);
    free(r);
}

static void remove_running(kr_context *c, int i) {
    c->running[i] = c->running[--c->n_running];
    atomic_store(&c->running_now, c->n_running);
}

/* Takes cancelled, expired and aborted requests out of the queue (lock held). */
static kr_req *reap_queue(kr_context *c, double now) {
    KR_ASSERT_LOCKED(&c->lock);
    KR_ASSERT_ENGINE_THREAD(c);
    kr_req *out = NULL, **pp = &c->wait_head;
    while (*pp) {
        kr_req *r = *pp;
        int cancel = c->cancel_all || r->aborted;
        for (int k = 0; k < c->n_cancels && !cancel; k++) cancel = c->cancels[k] == r->id;
        int late = r->deadline > 0 && now > r->deadline;
        if (cancel || late) {
            *pp = r->next;
            c->n_waiting--;
            r->cancelled = cancel ? KR_ERR_CANCELLED : KR_ERR_TIMEOUT;
            r->next = out;
            out = r;
            continue;
        }
        pp = &r->next;
    }
    return out;
}

/* Whether a queued request is to be failed now: aborted (should_abort said so) or past its
 * deadline. Lock held. A lone newcomer's batch wait must not hold such a request. */
static int queue_has_ended(const kr_context *c, double now) {
    for (const kr_req *r = c->wait_head; r; r = r->next)
        if (r->aborted || (r->deadline > 0 && now > r->deadline)) return 1;
    return 0;
}

/* Polls queued requests' should_abort callbacks without holding the lock while they run: only
 * this thread removes requests from the queue, so the pointers stay valid. Lock held on entry
 * and exit. */
static void poll_queued_aborts(kr_context *c, double now) {
    if (now - c->abort_checked_at < KR_QUEUED_ABORT_POLL_S) return;
    c->abort_checked_at = now;
    int n = 0;
    for (kr_req *r = c->wait_head; r; r = r->next)
        if (r->rp.should_abort) n++;
    if (n == 0) return;
    if (n > c->cap_abort_checks) {
        kr_req **a = realloc(c->abort_checks, (size_t)n * sizeof *a);
        if (!a) return;
        c->abort_checks = a;
        c->cap_abort_checks = n;
    }
    n = 0;
    for (kr_req *r = c->wait_head; r; r = r->next)
        if (r->rp.should_abort) c->abort_checks[n++] = r;
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < n; i++) {
        kr_req *r = c->abort_checks[i];
        if (r->rp.should_abort(r->rp.abort_user)) r->aborted = 1;
    }
    pthread_mutex_lock(&c->lock);
}

/* ---------------------------------------------------------------- step budgets */

static int is_generating(const kr_req *r) { return kr_seq_generating(r->group); }

/* Orders the running requests for this step's budget: priority descending, generating
 * groups before prefills, then round-robin from rr_offset. */
static void order_running(kr_context *c) {
    int n = c->n_running;
    for (int i = 0; i < n; i++) c->step_order[i] = (i + c->rr_offset) % n;
    for (int i = 1; i < n; i++) {
        int v = c->step_order[i], j = i;
        const kr_req *rv = c->running[v];
        while (j > 0) {
            const kr_req *ru = c->running[c->step_order[j - 1]];
            int before =
                rv->rp.priority > ru->rp.priority ||
                (rv->rp.priority == ru->rp.priority && is_generating(rv) && !is_generating(ru));
            if (!before) break;
            c->step_order[j] = c->step_order[j - 1];
            j--;
        }
        c->step_order[j] = v;
    }
    c->rr_offset = n > 0 ? (c->rr_offset + 1) % n : 0;
}

/* Fills step_groups / step_budget in step order; returns the rows handed out. */
static int64_t plan_budgets(kr_context *c) {
    order_running(c);
    int n = c->n_running;
    int top = n > 0 ? c->running[c->step_order[0]]->rp.priority : 0;
    int64_t step_rows = c->step_max_batch_tokens; /* p's may change meanwhile (set_limits) */
    if (top < KR_PRIORITY_NORMAL && c->p.background_step_rows < step_rows)
        step_rows = c->p.background_step_rows; /* keep steps short for whoever comes next */
    int64_t left = step_rows, top_rows = 0, bg_left = -1;
    for (int k = 0; k < n; k++) {
        kr_req *r = c->running[c->step_order[k]];
        int64_t pending = kr_seq_pending_rows(r->group), give;
        if (r->rp.priority == top) {
            give = pending < left ? pending : left;
            top_rows += give;
        } else {
            if (bg_left < 0) {
                /* Lower priorities share what keeps them within background_share of the step. */
                double s = c->p.background_share;
                int64_t cap = s >= 1 ? left : (int64_t)ceil((double)top_rows * s / (1.0 - s));
                if (cap < c->p.background_min_rows) cap = c->p.background_min_rows;
                bg_left = cap < left ? cap : left;
                if (bg_left < 1) bg_left = 1;
            }
            give = pending < bg_left ? pending : bg_left;
            bg_left -= give;
        }
        if (give < 0) give = 0;
        left -= give;
        c->step_groups[k] = r->group;
        c->step_budget[k] = give;
    }
    return step_rows - left;
}

/* ---------------------------------------------------------------- the loop */

static void timed_wait(kr_context *c, double seconds) {
    struct timespec ts;
    if (kr_realtime_deadline(seconds, &ts))
        pthread_cond_timedwait(&c->wake, &c->lock, &ts);
    else
        pthread_cond_wait(&c->wake, &c->lock);
}

/* Runs queued tasks (lock held on entry and exit, released while each runs). */
static void run_tasks(kr_context *c) {
    KR_ASSERT_LOCKED(&c->lock);
    KR_ASSERT_ENGINE_THREAD(c);
    while (c->tasks) {
        kr_task *t = c->tasks;
        c->tasks = t->next;
        pthread_mutex_unlock(&c->lock);
        t->status = t->fn(t->user, &c->eng, &t->err);
        pthread_mutex_lock(&c->lock);
        t->done = 1;
        pthread_cond_broadcast(&c->event);
    }
}

static void fail_list(kr_context *c, kr_req *list, int abort_all) {
    for (kr_req *r = list, *nx; r; r = nx) {
        nx = r->next;
        kr_status st = (kr_status)r->cancelled;
        finish_req(
            c, r, st,
            st == KR_ERR_CANCELLED
                ? (abort_all ? "cancelled: the engine is shutting down or aborted" : "cancelled")
            : st == KR_ERR_TIMEOUT ? "deadline passed while queued"
                                   : "could not start: out of memory");
    }
}

/* One engine step over the running set, as the loop runs it: plan_step (rows per group),
 * kr_generate_step (the engine/generate.c step), then post_step. No lock held. */
typedef struct step_plan {
    int64_t rows; /* granted over every group */
    int paths; /* sample paths running */
    kr_prefix_hooks hooks;
    double t0; /* when the step started */
} step_plan;

static step_plan plan_step(kr_context *c) {
    step_plan s = { .rows = plan_budgets(c) };
    for (int i = 0; i < c->n_running; i++) s.paths += c->running[i]->job.params.paths;
    s.hooks = c->cache ? kr_prefix_cache_hooks(c->cache) : (kr_prefix_hooks){ 0 };
    s.t0 = kr_now_seconds();
    return s;
}

/* After the step: the KV each group holds, its progress events and metrics, the requests that
 * finished (or all of them, when the step failed: their state is unknown). */
static void post_step(kr_context *c, const step_plan *s, kr_status st, const kr_error *err,
                      double *busy) {
    const kr_error e = *err;
    double t = kr_now_seconds();
    *busy += t - s->t0;
    c->steps++;
    kr_metric_observe(c->m_batch, s->paths);
    kr_metric_observe(c->m_rows, (double)s->rows);
    for (int i = 0; i < c->n_running;) {
        kr_req *r = c->running[i];
        if (st != KR_OK) { /* a failed step fails the whole batch: its state is unknown */
            remove_running(c, i);
            finish_req(c, r, st, e.message[0] ? e.message : "engine step failed");
            continue;
        }
        /* Charge the blocks the group holds now: its prefill store exists once it is
         * admitted, stops being its own once the prefix cache shares it, and the predictor's
         * stores are dropped when decoding starts. */
        size_t held = kr_seq_kv_bytes(r->group);
        c->kv_used = c->kv_used - r->kv_bytes + held;
        atomic_store(&c->kv_used_now, c->kv_used);
        r->kv_bytes = held;
        int steps = kr_seq_steps(r->group);
        if (steps > r->reported_steps) {
            if (r->reported_steps == 0) {
                r->t_first = t;
                kr_metric_observe(c->m_ttft, t - r->t_submit);
                kr_tuner_observe_ttft(&c->tuner, t - r->t_submit);
            } else {
                kr_metric_observe(c->m_itl, t - r->t_last);
            }
            r->t_last = t;
            kr_metric_add(c->m_gen_tokens,
                          (double)(steps - r->reported_steps) * r->job.params.paths);
            r->reported_steps = steps;
            if (!kr_seq_done(r->group)) {
                kr_event ev;
                event_base(r, &ev, KR_EVENT_STEP);
                emit(r, &ev);
            }
        }
        if (kr_seq_done(r->group)) {
            remove_running(c, i);
            kr_metric_add(c->m_prefill_tokens, (double)r->job.out.prefill_tokens);
            finish_req(c, r, KR_OK, NULL);
            continue;
        }
        i++;
    }
}

/* Fails running requests that were cancelled, ran out of time or whose should_abort says so. */
static void reap_running(kr_context *c, double now, int abort_all) {
    for (int i = 0; i < c->n_running;) {
        kr_req *r = c->running[i];
        int late = r->deadline > 0 && now > r->deadline;
        int abort = abort_all || r->cancelled ||
                    (!late && r->rp.should_abort && r->rp.should_abort(r->rp.abort_user));
        if (abort || late) {
            remove_running(c, i);
            finish_req(c, r, abort ? KR_ERR_CANCELLED : KR_ERR_TIMEOUT,
                       abort ? (abort_all ? "cancelled: the engine is shutting down or aborted"
                                          : "cancelled")
                             : "deadline passed");
            continue;
        }
        i++;
    }
}

void *kr_context_engine_main(void *arg) {
    kr_context *c = arg;
    c->engine_thread = pthread_self();
    atomic_store(&c->engine_thread_set, 1);
    double busy = 0, busy_since = kr_now_seconds();
    int64_t last_q = 0, last_h = 0;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        kr_context_apply_limits(c);
        run_tasks(c);
        double now = kr_now_seconds();
        int has_work = c->n_running > 0 || c->wait_head || c->n_cancels > 0;
        if (!has_work) {
            if (c->stop || c->draining) break;
            kr_tuner_idle(&c->tuner, now);
            if (now - busy_since >= 1.0) {
                /* Idle for the whole interval: the gauge says so instead of keeping the last
                 * busy interval's figure until work comes again. */
                kr_metric_set(c->m_busy, busy / (now - busy_since));
                busy = 0;
                busy_since = now;
            }
            if (kr_kv_pool_decay_due(now, KR_KV_POOL_DECAY_S)) {
                /* A burst's kept blocks go back, without holding the lock HTTP threads read
                 * stats under while pages are unmapped; then everything is looked at again. */
                pthread_mutex_unlock(&c->lock);
                kr_kv_pool_decay(now, KR_KV_POOL_DECAY_S);
                pthread_mutex_lock(&c->lock);
                continue;
            }
            timed_wait(c, 0.25);
            continue;
        }
        if (c->n_running == 0 && c->wait_head && !c->draining && !c->cancel_all &&
            c->n_cancels == 0 && !queue_has_ended(c, now)) {
            /* A lone newcomer waits batch_wait_ms (its own, an offline request's, else the
             * context's) for company (polling its abort meanwhile;
             * an abort or a deadline met in the wait ends it at the next poll, not when the
             * wait is over). */
            const int wait_ms = c->wait_head->rp.batch_wait_ms > 0 ? c->wait_head->rp.batch_wait_ms
                                                                   : c->p.batch_wait_ms;
            double wait = wait_ms / 1000.0 - (now - c->wait_head->t_submit);
            if (wait > 0 && c->n_waiting < c->p.max_running) {
                poll_queued_aborts(c, now);
                timed_wait(c, wait < KR_QUEUED_ABORT_POLL_S ? wait : KR_QUEUED_ABORT_POLL_S);
                continue;
            }
        }
        int abort_all = c->cancel_all;
        if (!abort_all && c->p.abort_callback) {
            pthread_mutex_unlock(&c->lock);
            abort_all = c->p.abort_callback(c->p.abort_user) != 0;
            pthread_mutex_lock(&c->lock);
        }
        poll_queued_aborts(c, now);
        if (abort_all) c->cancel_all = 1; /* reap_queue takes everything */
        kr_req *failed = reap_queue(c, now);
        /* Cancel ids of running requests. */
        for (int k = 0; k < c->n_cancels; k++)
            for (int i = 0; i < c->n_running; i++)
                if (c->running[i]->id == c->cancels[k]) c->running[i]->cancelled = 1;
        c->n_cancels = 0;
        int first_new = c->n_running;
        if (!abort_all) kr_context_admit(c, now, &failed);
        int last_new = c->n_running;
        /* An abort callback's verdict holds for this round; a shutdown's for good. */
        if (!(c->draining || c->stop)) c->cancel_all = 0;
        c->step_max_batch_tokens = c->p.max_batch_tokens;
        pthread_mutex_unlock(&c->lock);

        fail_list(c, failed, abort_all);
        for (int i = first_new; i < last_new && i < c->n_running; i++) {
            kr_event ev;
            event_base(c->running[i], &ev, KR_EVENT_STARTED);
            emit(c->running[i], &ev);
        }
        reap_running(c, now, abort_all);
        if (c->n_running > 0) {
            step_plan plan = plan_step(c);
            kr_error e = { 0 };
            kr_status st = kr_generate_step(&c->eng, c->step_groups, c->step_budget, c->n_running,
                                            c->cache ? &plan.hooks : NULL, &e);
            post_step(c, &plan, st, &e, &busy);
        }
        if (c->cache) {
            kr_prefix_cache_stats cs;
            kr_prefix_cache_get_stats(c->cache, &cs);
            kr_metric_add(c->m_q_tokens, (double)(cs.queried_tokens - last_q));
            kr_metric_add(c->m_h_tokens, (double)(cs.hit_tokens - last_h));
            kr_tuner_observe_cache(&c->tuner, cs.queried_tokens - last_q, cs.hit_tokens - last_h);
            last_q = cs.queried_tokens;
            last_h = cs.hit_tokens;
        }
        double t = kr_now_seconds();
        if (t - busy_since >= 1.0) {
            kr_kv_pool_decay(t, KR_KV_POOL_DECAY_S); /* blocks no request took back for a while */
            kr_metric_set(c->m_busy, busy / (t - busy_since));
            busy = 0;
            busy_since = t;
        }
        pthread_mutex_lock(&c->lock);
        kr_context_apply_limits(c); /* the tuner moves from limits set during the step */
        if (c->p.tune)
            kr_tuner_tick(&c->tuner, t, c->n_waiting, kr_context_oldest_wait_s(c, t),
                          &c->p.batch_wait_ms, &c->p.max_batch_tokens, &c->p.max_running, c->cache);
        c->profile_shared = c->profile;
        kr_context_publish_stats(c);
    }
    /* Tasks that came too late to run. */
    for (kr_task *t = c->tasks; t; t = t->next) {
        kr_error_set(&t->err, KR_ERR_BUSY, "the engine is shutting down");
        t->status = KR_ERR_BUSY;
        t->done = 1;
    }
    c->tasks = NULL;
    kr_context_publish_stats(c);
    c->thread_exited = 1;
    pthread_cond_broadcast(&c->event);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}
