/*
 * engine/scheduler — continuous batching for a server: one scheduler thread owns the model's
 * compute and loops admit → one batched step over every running request → post results
 * (llama.cpp's update_slots, vLLM's engine loop). Requests come from any thread.
 *
 *  - A new request waits at most batch_wait_ms for company, then joins the running batch at
 *    the next step; prefill is chunked (max_batch_tokens per step) so a long context never
 *    stalls running decodes for long.
 *  - Identical context windows reuse each other's prefill through a prefix cache keyed by a
 *    hash chain over blocks of (s1, s2, stamp), LRU-evicted inside the KV memory budget.
 *  - Results do not depend on what else is in the batch (kernels are row-deterministic and
 *    each path has its own RNG stream): a seeded request returns the same paths alone or
 *    among fifty others.
 *  - A cancelled request (client gone) leaves the batch at the next step and frees its KV.
 *  - Metrics (TTFT, inter-step latency, queue wait, batch size, KV usage, cache hit tokens…)
 *    go to a kr_metrics registry; an adaptive tuner adjusts batch_wait_ms and the batch
 *    limit to a latency objective, and logs and exports every change.
 */
#ifndef KR_ENGINE_SCHEDULER_H
#define KR_ENGINE_SCHEDULER_H

#include <stdint.h>

#include "engine/metrics.h"
#include "kronos.h"

typedef struct kr_sched kr_sched;

typedef struct kr_sched_params {
    int batch_wait_ms; /* max wait of a new request for company (default 50) */
    int max_batch_tokens; /* tokens (prefill rows + decode paths) per step (default 4096) */
    int max_running; /* requests in the running batch (default 64) */
    int max_queue; /* waiting requests before KR_ERR_BUSY (default 256) */
    size_t kv_budget_bytes; /* KV memory: running requests + prefix cache (default 25% RAM) */
    int tune; /* adaptive tuner on (default 1) */
    double target_queue_p95_s; /* tuner objective: p95 queue wait (default 0.5 s) */
    double target_ttft_p95_s; /* tuner objective: p95 time to first step (default 2 s) */
    int prefix_cache; /* prefix cache on (default 1) */
    int static_batching; /* baseline mode for benchmarks: admit a new batch only when the
                                   running one has finished (default 0 = continuous) */
    void (*log)(void *user, const char *line); /* tuner and lifecycle log lines; may be NULL */
    void *log_user;
} kr_sched_params;

kr_sched_params kr_sched_default_params(void);

/* Starts the scheduler thread over a loaded model (borrowed; must outlive the scheduler).
 * metrics (borrowed) receives the engine's series. Caller owns *out. */
kr_status kr_sched_create(kr_model *model, kr_metrics *metrics, const kr_sched_params *params,
                          kr_sched **out, kr_error *err);
/* Stops accepting, cancels nothing: waits until every accepted request has finished, then
 * stops the thread. */
void kr_sched_drain(kr_sched *s);
/* Drains, then frees. */
void kr_sched_free(kr_sched *s);

typedef enum kr_sched_event_kind {
    KR_SCHED_STARTED = 0, /* admitted into the running batch (queue wait known) */
    KR_SCHED_STEP = 1, /* one more step sampled for every path */
    KR_SCHED_DONE = 2, /* result ready (event.result, owned by the receiver) */
    KR_SCHED_FAILED = 3 /* error (event.error): cancelled, timed out, invalid, internal */
} kr_sched_event_kind;

typedef struct kr_sched_event {
    kr_sched_event_kind kind;
    uint64_t id;
    int step, pred_len; /* steps sampled so far */
    kr_forecast *result; /* DONE: caller of the callback owns it (kr_forecast_free) */
    kr_error error; /* FAILED */
    /* usage and timing (valid from STARTED on) */
    int64_t prefill_tokens, cached_tokens, generated_tokens;
    double queue_seconds, ttft_seconds, total_seconds;
} kr_sched_event;

/* Called on the scheduler thread: keep it short (copy and signal). After DONE or FAILED the
 * request is gone and no further event comes for it. */
typedef void (*kr_sched_cb)(void *user, const kr_sched_event *ev);

/* Queues a forecast. The series and params (incl. future timestamps) are copied. deadline_s
 * > 0: fail with KR_ERR_TIMEOUT when not done that many seconds after submission.
 * KR_ERR_BUSY when the queue is full or draining; KR_ERR_INVALID_ARG for bad input (checked
 * here, synchronously, with the field named). */
kr_status kr_sched_submit(kr_sched *s, const kr_series *series, const kr_forecast_params *params,
                          double deadline_s, kr_sched_cb cb, void *user, uint64_t *id,
                          kr_error *err);
/* Cancels a queued or running request: its FAILED event (KR_ERR_CANCELLED) follows from the
 * scheduler thread and its KV blocks are freed. Unknown ids are ignored. */
void kr_sched_cancel(kr_sched *s, uint64_t id);

/* Sets batch_wait_ms / max_batch_tokens from outside (time-of-day profiles); -1 / 0 keep a
 * value. Logged with the reason and exported; the tuner continues from there. */
void kr_sched_set_limits(kr_sched *s, int batch_wait_ms, int max_batch_tokens, const char *reason);

typedef struct kr_sched_stats {
    int running, waiting;
    size_t kv_bytes_used, kv_bytes_budget, prefix_cache_bytes;
    size_t prefix_cache_decoder_bytes; /* of prefix_cache_bytes: tokenizer-decoder contexts */
    int64_t prefix_queried_tokens, prefix_hit_tokens;
    int batch_wait_ms, max_batch_tokens; /* current (tuned) values */
    int draining;
} kr_sched_stats;
void kr_sched_get_stats(kr_sched *s, kr_sched_stats *st);

#endif
