/*
 * engine/tuner — the scheduler's adaptive tuner: a state machine that moves the batch limits
 * on *sustained* signals, inside bounds set by the limits in force (the time-of-day profile).
 *
 * The "home" limits are what the operator (profile, config, kr_context_set_limits) asked for.
 * The tuner leaves home only under pressure and comes back when it relents:
 *
 *   rule            signal (per tick)                 sustained   action                      bounds
 *   queue_pressure  queue-wait p95 (or the oldest     window_s    batch_wait / 2,             wait >= 0,
 *                   waiter's age) > target_queue      (300 s)     max_running * 1.25          running <= 2 x home
 *                   (target_queue_p95_s, 100 ms)
 *   queue_relaxed   queue-wait p95 < target_queue/4,  relax_s     batch_wait + max(5, home/4) wait <= home,
 *                   or nothing queued                 (600 s)     max_running * 0.8           running >= home
 *   ttft_high       TTFT p95 > target_ttft_p95_s      window_s    max_batch_tokens * 1.25     <= 4 x home (32768)
 *   ttft_low        TTFT p95 < target / 4 or none     relax_s     max_batch_tokens * 0.8      >= home
 *   cache_low_hit   prefix hit rate < 40 % with       window_s    cache budget * 1.25         <= cache_max (3/4 of
 *                   evictions (capacity misses)                                               the KV budget)
 *   cache_shorten   the same, the budget at cache_max window_s    entry blocks: whole -> 16,  >= 4 blocks
 *                   (growing is used up)                          then / 2                    (64 rows)
 *   cache_rewarm    the same, entries at 4 blocks     window_s    clear the pool but the      (one-shot; the
 *                   (shortening is used up too)                   32 hottest fingerprints     window restarts)
 *   cache_restore   hit rate >= 80 %, or no evictions relax_s     entry blocks * 2, whole     <= whole windows
 *                   (with lookups)                                past 32 blocks
 *
 * Hysteresis: the two thresholds of a pair are 4x apart (100 ms vs 25 ms), the relaxing window is
 * twice the pressing one, and a signal's clock restarts after every move it causes, so the next
 * move of the same rule needs the signal to hold for a whole window again. A signal that breaks
 * for one tick restarts its window; so does a span with no work (the engine ticks only while it
 * has some, and tells the tuner when it idles: kr_tuner_idle). The tuner never leaves the bounds: a tight profile (short
 * home wait) stays tight, since the wait never rises above home. The cache budget is never
 * shrunk for a low hit rate (misses are answered with room, not with less of it).
 *
 * Every move is logged (rule, signal, old -> new) and counted in
 * kronos_tuner_decisions_total{rule, parameter, direction}.
 *
 * kr_tuner_decide is the pure part: a simulated clock and synthetic signals drive it in
 * tests. kr_tuner_tick is the scheduler's wrapper that gathers the signals.
 */
#ifndef KR_ENGINE_TUNER_H
#define KR_ENGINE_TUNER_H

#include <stddef.h>
#include <stdint.h>

#include "engine/metrics.h"
#include "engine/prefix_cache.h"
#include "kronos.h"

#define KR_TUNER_SAMPLES 512

/* Windows and thresholds (kr_tuner_default_rules: the brief's defaults). */
typedef struct kr_tuner_rules {
    double tick_s; /* signals are sampled per tick (2 s) */
    double window_s; /* a pressing signal must hold this long (300 s) */
    double relax_s; /* a relaxing signal must hold this long (600 s) */
    double cache_low_rate; /* prefix-cache hit rate below: low (0.4) */
    int64_t cache_min_queried; /* tokens a tick must have looked up to judge the rate (64) */
} kr_tuner_rules;

kr_tuner_rules kr_tuner_default_rules(void);

/* The limits the tuner moves. */
typedef struct kr_tuner_limits {
    int batch_wait_ms, max_batch_tokens, max_running;
    size_t cache_budget; /* prefix cache bytes (0 when there is no cache) */
    int cache_entry_blocks; /* leading blocks a window entry keeps (0: whole windows) */
    int cache_rewarm; /* set by kr_tuner_decide: clear and re-warm the pool now */
} kr_tuner_limits;

#define KR_TUNER_ENTRY_BLOCKS_FIRST 16 /* the first shortening: 256 rows */
#define KR_TUNER_ENTRY_BLOCKS_MIN 4 /* 64 rows */
#define KR_TUNER_REWARM_KEEP 32 /* fingerprints kept warm by a clear */

/* What one tick saw. n_* = 0: no sample (no admission / first step in the tick). */
typedef struct kr_tuner_signals {
    int n_queue, n_ttft;
    double queue_p95, ttft_p95;
    int waiting; /* requests waiting at the tick */
    double oldest_wait_s; /* how long the oldest of them has waited (0: none) */
    int64_t cache_queried, cache_hits, cache_evictions; /* during the tick */
} kr_tuner_signals;

enum {
    KR_TUNER_QUEUE_HIGH,
    KR_TUNER_QUEUE_LOW,
    KR_TUNER_TTFT_HIGH,
    KR_TUNER_TTFT_LOW,
    KR_TUNER_CACHE_LOW,
    KR_TUNER_CACHE_SHORTEN,
    KR_TUNER_CACHE_REWARM,
    KR_TUNER_CACHE_RESTORE,
    KR_TUNER_N_RULES
};

typedef struct kr_tuner {
    kr_tuner_rules rules;
    double target_queue, target_ttft; /* pressure above; relaxed below a quarter */
    kr_tuner_limits home; /* the limits in force (profile); the resting point */
    kr_tuner_limits lo, hi; /* bounds */
    double since[KR_TUNER_N_RULES]; /* when each signal started holding; < 0: not holding */
    double last_tick;
    /* samples of the current tick (kr_tuner_tick) */
    double queue[KR_TUNER_SAMPLES], ttft[KR_TUNER_SAMPLES];
    double sort_tmp[KR_TUNER_SAMPLES]; /* so a tick never allocates */
    int n_queue, n_ttft, seen_queue, seen_ttft;
    int64_t cache_queried, cache_hits, last_evictions;
    double idle_from, idle_to; /* the engine's idle span since the last tick (0: none) */
    kr_metrics *metrics;
    kr_metric *m_cache_budget;
    void (*log)(void *user, const char *line);
    void *log_user;
} kr_tuner;

/* Rules from p (tune_window_s, tune_relax_s, the targets; 0: defaults). cache_max: the most
 * the prefix cache may hold (0: no cache). */
void kr_tuner_init(kr_tuner *t, const kr_context_params *p, size_t cache_budget, size_t cache_max,
                   kr_metrics *metrics, void (*log)(void *user, const char *line), void *log_user);
/* New home limits (a profile switched, an operator set them): bounds follow, every signal's
 * window restarts, the change is logged with the reason and exported. */
void kr_tuner_set_home(kr_tuner *t, const kr_tuner_limits *home, double target_queue,
                       double target_ttft, const char *reason);

/* The pure step: given the time and one tick's signals, moves *cur (within bounds) and
 * returns the number of parameters changed. */
int kr_tuner_decide(kr_tuner *t, double now, const kr_tuner_signals *s, kr_tuner_limits *cur);

/* Scheduler side: samples, and once per tick gathers them into signals and decides. */
void kr_tuner_observe_queue(kr_tuner *t, double seconds);
void kr_tuner_observe_ttft(kr_tuner *t, double seconds);
void kr_tuner_observe_cache(kr_tuner *t, int64_t queried_tokens, int64_t hit_tokens);
/* The engine has nothing to do at `now` (called at each idle wake-up): the next tick decides
 * the idle span as idle time, since no tick runs in it. */
void kr_tuner_idle(kr_tuner *t, double now);
void kr_tuner_tick(kr_tuner *t, double now, int waiting, double oldest_wait_s, int *batch_wait_ms,
                   int *max_batch_tokens, int *max_running, kr_prefix_cache *cache);

#endif
