/*
 * engine/tuner — the scheduler's adaptive tuner: a closed loop on a latency objective.
 * Every tick (2 s) it looks at the p95 queue wait and p95 TTFT of the requests admitted since
 * the last tick and at the prefix cache's hit rate:
 *   - targets missed → halve batch_wait_ms and raise max_batch_tokens (admit sooner, more);
 *   - load light and targets comfortably met → raise batch_wait_ms (batch more);
 *   - hit rate below 40% for three ticks → shrink the prefix cache (memory better spent on
 *     running requests); hit rate fine but entries being evicted → grow it.
 * Every change is logged and exported (kronos_tuner_* metrics).
 */
#ifndef KR_ENGINE_TUNER_H
#define KR_ENGINE_TUNER_H

#include <stdint.h>

#include "engine/metrics.h"
#include "engine/prefix_cache.h"
#include "kronos.h"

#define KR_TUNER_SAMPLES 512

typedef struct kr_tuner {
    double target_queue, target_ttft, last_tick, period;
    double queue[KR_TUNER_SAMPLES], ttft[KR_TUNER_SAMPLES];
    double sort_tmp[KR_TUNER_SAMPLES]; /* so a tick never allocates */
    int n_queue, n_ttft;
    int64_t cache_queried, cache_hits, last_evictions;
    int low_hit_ticks;
    size_t cache_budget_max;
    kr_metric *m_wait, *m_tokens, *m_cache_budget, *m_adj_wait, *m_adj_tokens, *m_adj_cache;
    void (*log)(void *user, const char *line);
    void *log_user;
} kr_tuner;

void kr_tuner_init(kr_tuner *t, const kr_context_params *p, kr_metrics *metrics,
                   void (*log)(void *user, const char *line), void *log_user);
void kr_tuner_observe_queue(kr_tuner *t, double seconds);
void kr_tuner_observe_ttft(kr_tuner *t, double seconds);
void kr_tuner_observe_cache(kr_tuner *t, int64_t queried_tokens, int64_t hit_tokens);
/* Called after every scheduler step; acts once per period. */
void kr_tuner_tick(kr_tuner *t, double now, int waiting, int running, int *batch_wait_ms,
                   int *max_batch_tokens, kr_prefix_cache *cache);
/* Exports externally set values (time-of-day profiles) and logs the reason. */
void kr_tuner_note(kr_tuner *t, int batch_wait_ms, int max_batch_tokens, const char *reason);

#endif
