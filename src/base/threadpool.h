/*
 * base/threadpool — a fixed set of worker threads that run one parallel region at a time.
 *
 * kr_pool_run(pool, fn, ctx) calls fn(ctx, ith, nth) for every ith in [0, nth) — the caller
 * is thread 0 — and returns when all have finished. Workers spin briefly before sleeping, so
 * the many small regions of a decode step cost microseconds, not a futex round-trip each.
 * One owner drives a pool (not re-entrant, not for concurrent callers).
 */
#ifndef KR_BASE_THREADPOOL_H
#define KR_BASE_THREADPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "kronos/status.h"

typedef struct kr_pool kr_pool;
typedef void (*kr_pool_fn)(void *ctx, int ith, int nth);

/* n_threads total including the caller; <= 0 means the number of online CPUs.
 * Caller owns *out; free with kr_pool_free. */
kr_status kr_pool_create(int n_threads, kr_pool **out, kr_error *err);
void kr_pool_free(kr_pool *pool);
/* Threads a region runs on (1 for a NULL pool). */
int kr_pool_size(const kr_pool *pool);
/* Runs fn on every thread; a NULL pool runs fn(ctx, 0, 1) on the caller. */
void kr_pool_run(kr_pool *pool, kr_pool_fn fn, void *ctx);
/* kr_pool_run when `work` (any unit: FLOPs, values) reaches `threshold`, else fn(ctx, 0, 1) on
 * the calling thread alone: below some work a hand-off to the pool costs more than it saves
 * (microseconds on an idle machine, far more when other processes hold the cores). Results are
 * the same either way when fn's split does not change its numbers (the kernels'). */
static inline void kr_pool_run_if_worth(kr_pool *pool, kr_pool_fn fn, void *ctx, double work,
                                        double threshold) {
    if (work < threshold)
        fn(ctx, 0, 1);
    else
        kr_pool_run(pool, fn, ctx);
}
/* A 64-byte-aligned buffer of at least `bytes` owned by the pool, for the region about to
 * run (its contents do not survive the next call). NULL for a NULL pool or when out of
 * memory. Only the pool's driver calls it. */
void *kr_pool_scratch(kr_pool *pool, size_t bytes);
/* Regions run so far, and the seconds the caller spent waiting for the other threads after
 * finishing its own share (load imbalance + hand-off latency): what splitting work over the
 * pool cost. Only the pool's driver calls it. */
void kr_pool_counters(const kr_pool *pool, int64_t *regions, double *wait_seconds);
/* Time per part of a computation (a training step's phases): with a kr_pool_parts attached,
 * kr_pool_run_part adds each region's wall seconds (the driver's monotonic clock, from the
 * publication to the last thread's end) and the process's CPU seconds over the same span
 * (every thread, spin-waits included) to its part's row, and counts the call. The CPU clock
 * makes the figures usable on a machine shared with other jobs; it costs a system call per
 * region, so attach only to measure. The arrays are the caller's; n_parts bounds `part`
 * (others are run untimed). Only the pool's driver attaches or reads. NULL detaches. */
typedef struct kr_pool_parts {
    int n_parts;
    double *wall_seconds, *cpu_seconds; /* [n_parts] */
    int64_t *calls; /* [n_parts] */
} kr_pool_parts;
void kr_pool_attach_parts(kr_pool *pool, kr_pool_parts *parts);
/* kr_pool_run, timed under `part` when parts are attached. */
void kr_pool_run_part(kr_pool *pool, int part, kr_pool_fn fn, void *ctx);
/* Number of online CPUs (>= 1). */
int kr_cpu_count(void);

#endif
