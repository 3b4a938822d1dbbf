/*
 * engine/context_internal — the kr_context struct shared by the engine's files:
 *   context.c    lifecycle, submission, cancellation, limits, stats, metrics, tasks;
 *   scheduler.c  the engine thread: admission by priority and memory, step budgets, events;
 *   sync.c       the synchronous kr_forecast_run* on top of kr_submit.
 * Nothing outside src/engine includes it (engine/context.h is the library-internal API).
 *
 * Locking: `lock` guards the waiting queue, the cancel list, the task list, the limits (p's
 * batch_wait_ms, max_batch_tokens, max_running, max_queue, static_batching and targets) and
 * the published stats. The engine thread alone touches the running set, the groups, the
 * prefix cache, the tuner, the workspace and the step counters; it calls callbacks with no
 * lock held. Other threads never read engine-thread state: the engine publishes a snapshot
 * of it (stats, its gauges) under the lock at every step boundary, and they copy that; limits
 * they set are written under the lock and reach the tuner at the engine's next boundary
 * (limits_changed), so nothing the engine reads without the lock changes under it.
 */
#ifndef KR_ENGINE_CONTEXT_INTERNAL_H
#define KR_ENGINE_CONTEXT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "base/assert.h"
#include "engine/context.h"
#include "engine/forecast_internal.h"
#include "engine/norm_anchor.h"
#include "engine/prefix_cache.h"
#include "engine/tuner.h"

typedef struct kr_req {
    uint64_t id;
    int index; /* in a batch call, for events */
    kr_forecast_job job;
    kr_seq_options opt;
    kr_seq *group;
    kr_request_params rp;
    double t_submit, t_start, t_first, t_last, deadline;
    int cancelled, aborted, reported_steps;
    size_t kv_bytes; /* KV blocks the group holds now (the kv_used gauge) */
    size_t kv_peak; /* the most it will hold at once: what admission reserves */
    struct kr_req *next;
} kr_req;

/* A request's estimated remaining engine steps and its reserved KV peak (admission.c). */
typedef struct kr_admit_slot {
    int64_t steps_left;
    size_t kv_peak;
} kr_admit_slot;

/* A function to run on the engine thread between steps (kr_context_run_task). */
typedef struct kr_task {
    kr_context_task fn;
    void *user;
    kr_status status;
    kr_error err;
    int done;
    struct kr_task *next;
} kr_task;

struct kr_context {
    const kr_model *model;
    kr_engine eng; /* the model, the pool + arena, the KV precision */
    kr_context_params p;
    kr_metrics *metrics;
    int own_metrics;
    size_t kv_keep_reserved; /* bytes reserved with the block pool (model/kv_cache.h), 0: none */
    pthread_t thread;
    /* The engine thread, set by itself first thing (pthread_create may return after it has
     * started): what KR_ASSERT_ENGINE_THREAD compares with. */
    pthread_t engine_thread;
    _Atomic int engine_thread_set;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* new work, cancels, tasks, limits, drain */
    pthread_cond_t event; /* the engine thread finished something (tasks, exit) */
    kr_req *wait_head; /* waiting requests: priority descending, then submission order */
    int n_waiting;
    uint64_t *cancels; /* ids to cancel, consumed by the engine thread */
    int n_cancels, cap_cancels;
    int cancel_all; /* fail everything queued and running (drain timeout, free) */
    kr_task *tasks;
    int stop, draining, thread_started, thread_exited;
    uint64_t next_id;
    /* kr_context_set_limits changed p's limits: the tuner takes them as its new home at the
     * engine's next step boundary (under `lock`), with this reason. */
    int limits_changed;
    char limits_reason[64];

    /* engine-thread state */
    kr_req **running;
    int n_running, cap_running;
    atomic_int running_now; /* n_running for other threads, updated as it changes */
    atomic_size_t kv_used_now; /* kv_used likewise */
    kr_seq **step_groups; /* [cap_running], per step */
    int64_t *step_budget;
    int *step_order;
    kr_admit_slot *admit_slots; /* [cap_running + 1], admission's scratch */
    /* The request waiting for KV memory that others may be started past (admission.c), and
     * the engine step after which none may be any more. */
    uint64_t hol_id;
    int64_t hol_until_step;
    int64_t backfilled; /* requests started past a request waiting for memory */
    kr_req **abort_checks; /* [cap_abort_checks]: queued requests to poll, outside the lock */
    int cap_abort_checks;
    double abort_checked_at;
    int rr_offset; /* round-robin start among equal priorities */
    int step_max_batch_tokens; /* p.max_batch_tokens as read under `lock` before the step */
    kr_prefix_cache *cache;
    kr_norm_anchors *anchors; /* anchored normalisation's anchors (norm_anchor.h) */
    size_t kv_used;
    /* The running requests' kv_peak: admitted only while this, the prefix cache and the
     * newcomer's peak fit the budget, so the running set never outgrows it as its requests
     * allocate their windows and decoder stores after admission. */
    size_t kv_reserved;
    kr_tuner tuner;
    int64_t steps;
    /* Counted as each request ends, before its DONE / FAILED event: a caller whose forecast
     * has returned sees it counted (atomic: read without the engine thread). */
    _Atomic int64_t completed, failed;

    kr_context_stats stats; /* published under lock */

    kr_metric *m_ttft, *m_itl, *m_queue, *m_e2e, *m_batch, *m_rows, *m_running, *m_waiting,
        *m_kv_used, *m_kv_budget, *m_kv_usage, *m_busy, *m_q_tokens, *m_h_tokens, *m_ok, *m_failed,
        *m_cancelled, *m_timeout, *m_rejected, *m_cache_bytes, *m_gen_tokens, *m_prefill_tokens,
        *m_kv_blocks_used, *m_kv_blocks_free, *m_kv_blocks_free_bytes, *m_workspace, *m_backfilled,
        *m_oldest_wait;
    kr_metric *m_lim_wait, *m_lim_tokens, *m_lim_running, *m_lim_queue, *m_lim_static;
    /* The step profile (kr_context_params.profile): what the engine thread accumulates, and
     * its parts' seconds as last exported to the metrics (counters grow by the difference). */
    kr_engine_profile profile; /* engine thread only */
    kr_engine_profile profile_shared; /* its copy under `lock`, taken after each step */
    double part_seconds_published[KR_PART_COUNT];
    kr_metric *m_part_seconds[KR_PART_COUNT];
};

/* context.c */
void kr_context_log(kr_context *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Engine thread (or before it starts / after it exits), lock held: snapshots its state into
 * `stats` and the gauges. */
void kr_context_publish_stats(kr_context *c);
/* Engine thread, lock held: gives the tuner limits set since the last boundary. */
void kr_context_apply_limits(kr_context *c);

/* admission.c, engine thread, lock held. */
/* Starts the waiting requests that may start now; those that never can go to *failed. */
void kr_context_admit(kr_context *c, double now, kr_req **failed);
/* Room for n running requests in the running set and the per-step arrays; 0: out of memory. */
int kr_context_ensure_running_capacity(kr_context *c, int n);
/* Seconds the longest-waiting queued request has waited (0: none). Any thread, lock held. */
double kr_context_oldest_wait_s(const kr_context *c, double now);

/* The functions documented "engine thread" check it in debug and sanitizer builds (before the
 * thread starts and after it exits, the creating or freeing thread is the only one). */
#define KR_ASSERT_ENGINE_THREAD(c)                                           \
    KR_ASSERT(!atomic_load(&(c)->engine_thread_set) || (c)->thread_exited || \
              pthread_equal(pthread_self(), (c)->engine_thread))

/* scheduler.c: the engine thread's main loop. */
void *kr_context_engine_main(void *arg);

#endif
