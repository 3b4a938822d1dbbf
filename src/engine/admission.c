/*
 * engine/admission — which waiting requests join the running set, on the engine thread with
 * the context's lock held.
 *
 * Waiting requests are taken in priority order (then submission order) while the running set
 * has a free slot and the KV budget allows. Each is charged its peak KV (kv_peak) before its
 * group is created, so a request waiting for memory allocates nothing and the running set
 * stays within the budget as its requests grow into their windows and decoder stores; the
 * prefix cache gives way first.
 *
 * The first request that does not fit (the head) must not hold back, for nothing, smaller
 * ones behind it that do. As in EASY backfilling (Lifka 1995; Slurm's backfill scheduler),
 * the head gets a reservation: the engine step at which, the running requests ending in
 * order of their remaining steps, enough memory and a slot are free for it. A later request
 * that fits now starts only if the head's estimated start does not move: it ends before then,
 * or leaves room beside the head. Remaining steps are estimates (generation steps left, a
 * prefill at the step's row budget), so backfilling stops once the head has waited twice its
 * first estimate plus a margin: then the running set drains into its start, and a wrong
 * estimate costs the head a bounded delay, never starvation.
 */
#include <stdint.h>
#include <stdlib.h>

#include "engine/context_internal.h"

/* Engine steps a blocked head may wait beyond twice its first estimate before backfilling
 * stops for it. */
#define KR_BACKFILL_MARGIN_STEPS 16
/* Waiting requests behind the head examined per admission round (Slurm's bf_max_job_test):
 * bounds the round's cost with a long queue. */
#define KR_BACKFILL_SCAN 32

int kr_context_ensure_running_capacity(kr_context *c, int n) {
    KR_ASSERT_ENGINE_THREAD(c);
    if (n <= c->cap_running) return 1;
    int cap = n;
    kr_req **run = realloc(c->running, (size_t)cap * sizeof *run);
    if (run) c->running = run;
    kr_seq **gs = realloc(c->step_groups, (size_t)cap * sizeof *gs);
    if (gs) c->step_groups = gs;
    int64_t *bu = realloc(c->step_budget, (size_t)cap * sizeof *bu);
    if (bu) c->step_budget = bu;
    int *ord = realloc(c->step_order, (size_t)cap * sizeof *ord);
    if (ord) c->step_order = ord;
    /* One more: the reservation estimate counts a candidate beside the running set. */
    kr_admit_slot *sl = realloc(c->admit_slots, (size_t)(cap + 1) * sizeof *sl);
    if (sl) c->admit_slots = sl;
    if (!run || !gs || !bu || !ord || !sl) return 0;
    c->cap_running = cap;
    return 1;
}

double kr_context_oldest_wait_s(const kr_context *c, double now) {
    KR_ASSERT_LOCKED((pthread_mutex_t *)&c->lock);
    /* The queue is in priority order, so its head is the most urgent request, not the
     * oldest: a low-priority one stuck behind a stream of newer high-priority ones is the
     * pressure the tuner must see. The queue is at most max_queue long. */
    double oldest = 0;
    for (const kr_req *r = c->wait_head; r; r = r->next)
        if (now - r->t_submit > oldest) oldest = now - r->t_submit;
    return oldest;
}

static int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : a; }

/* Estimated engine steps until a running request ends: its generation steps left, the rest
 * of its prefill at the step's row budget, and one for decoding. */
static int64_t steps_left_running(const kr_context *c, const kr_req *r) {
    int done = kr_seq_steps(r->group), pred_len = r->job.params.pred_len;
    if (done >= pred_len) return 1;
    int64_t left = pred_len - done + 1;
    if (done == 0 && !kr_seq_generating(r->group))
        left += ceil_div(kr_seq_pending_rows(r->group), c->p.max_batch_tokens);
    return left;
}

/* The same for a waiting request, whose prefill is all of its history. */
static int64_t steps_left_waiting(const kr_context *c, const kr_req *r) {
    return r->job.params.pred_len + 1 + ceil_div(r->job.in.hist_len, c->p.max_batch_tokens);
}

static int by_steps_left(const void *a, const void *b) {
    const kr_admit_slot *x = a, *y = b;
    return (x->steps_left > y->steps_left) - (x->steps_left < y->steps_left);
}

/* Estimated engine steps until a request needing `need` bytes could start: the running
 * requests (and `extra`, a candidate beside them) end in order of their remaining steps
 * until the memory and a slot are free. INT64_MAX: not even when all have ended. */
static int64_t start_estimate(kr_context *c, size_t need, const kr_admit_slot *extra) {
    kr_admit_slot *s = c->admit_slots;
    int n = 0;
    size_t reserved = c->kv_reserved;
    for (int i = 0; i < c->n_running; i++)
        s[n++] = (kr_admit_slot){ steps_left_running(c, c->running[i]), c->running[i]->kv_peak };
    if (extra) {
        s[n++] = *extra;
        reserved += extra->kv_peak;
    }
    qsort(s, (size_t)n, sizeof *s, by_steps_left);
    for (int k = 0;; k++) {
        if (reserved + need <= c->p.kv_budget_bytes && n - k < c->p.max_running)
            return k == 0 ? 0 : s[k - 1].steps_left;
        if (k == n) return INT64_MAX;
        reserved -= s[k].kv_peak;
    }
}

/* Moves `r` (at *link in the queue) into the running set, the prefix cache giving way to its
 * peak. When its group cannot be created, returns why and leaves it queued. */
static kr_status start_request(kr_context *c, kr_req **link, kr_req *r, double now) {
    if (c->cache) {
        kr_prefix_cache_stats cs;
        kr_prefix_cache_get_stats(c->cache, &cs);
        if (c->kv_reserved + cs.bytes + r->kv_peak > c->p.kv_budget_bytes) {
            kr_prefix_cache_evict(c->cache,
                                  c->kv_reserved + cs.bytes + r->kv_peak - c->p.kv_budget_bytes);
            /* Readers add the cache's published bytes to the running set's current ones:
             * publish the smaller cache before the newcomer's bytes count. */
            kr_prefix_cache_get_stats(c->cache, &cs);
            c->stats.prefix_cache_bytes = cs.bytes;
        }
    }
    kr_error e = { 0 };
    kr_seq *g = NULL;
    if (!kr_context_ensure_running_capacity(c, c->n_running + 1) ||
        kr_seq_create(&c->eng, &r->job.in, &r->job.out, &r->job.params, &r->opt, &g, &e) != KR_OK)
        return e.status ? e.status : KR_ERR_NOMEM;
    *link = r->next;
    c->n_waiting--;
    r->next = NULL;
    r->group = g;
    r->kv_bytes = kr_seq_kv_bytes(g);
    r->t_start = now;
    c->kv_reserved += r->kv_peak;
    c->kv_used += r->kv_bytes;
    atomic_store(&c->kv_used_now, c->kv_used);
    c->running[c->n_running++] = r;
    atomic_store(&c->running_now, c->n_running);
    kr_metric_observe(c->m_queue, now - r->t_submit);
    kr_tuner_observe_queue(&c->tuner, now - r->t_submit);
    return KR_OK;
}

/* Whether `r`, which fits now, may start ahead of the blocked head without moving the head's
 * estimated start. */
static int may_backfill(kr_context *c, const kr_req *head, int64_t head_start, const kr_req *r) {
    kr_admit_slot cand = { steps_left_waiting(c, r), r->kv_peak };
    return start_estimate(c, head->kv_peak, &cand) <= head_start;
}

void kr_context_admit(kr_context *c, double now, kr_req **failed) {
    KR_ASSERT_LOCKED(&c->lock);
    KR_ASSERT_ENGINE_THREAD(c);
    if (c->p.static_batching && c->n_running > 0) return;
    kr_req **link = &c->wait_head;
    const kr_req *head = NULL; /* the first request that has to wait */
    int64_t head_start = 0;
    int scanned = 0;
    while (*link && c->n_running < c->p.max_running) {
        kr_req *r = *link;
        /* The prefix cache can always give way, so only the running set's peaks count; with
         * nothing running anything fits (kr_submit refused a peak above the whole budget). */
        int fits = c->n_running == 0 || c->kv_reserved + r->kv_peak <= c->p.kv_budget_bytes;
        if (head) {
            if (++scanned > KR_BACKFILL_SCAN) return;
            if (!fits || !may_backfill(c, head, head_start, r)) {
                link = &r->next;
                continue;
            }
        } else if (!fits) {
            head = r;
            head_start = start_estimate(c, r->kv_peak, NULL);
            if (c->hol_id != r->id) {
                c->hol_id = r->id;
                c->hol_until_step = head_start == INT64_MAX
                                        ? c->steps
                                        : c->steps + 2 * head_start + KR_BACKFILL_MARGIN_STEPS;
            }
            /* Past its bound the head reserves: nothing more starts until it does. */
            if (!c->p.backfill || head_start == INT64_MAX || c->steps > c->hol_until_step) return;
            link = &r->next;
            continue;
        }
        kr_status st = start_request(c, link, r, now);
        if (st != KR_OK) {
            /* Out of memory for this one: leave it queued unless nothing runs (then fail it). */
            if (c->n_running > 0) return;
            *link = r->next;
            c->n_waiting--;
            r->cancelled = st;
            r->next = *failed;
            *failed = r;
            continue;
        }
        if (head) {
            c->backfilled++;
            kr_metric_add(c->m_backfilled, 1);
        }
    }
}
