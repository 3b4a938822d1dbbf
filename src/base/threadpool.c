/*
 * base/threadpool — see threadpool.h.
 *
 * A region is published by bumping a generation counter; workers notice it by spinning
 * (cheap for the many tiny regions of a decode step) and fall back to a condition variable
 * when idle for long, so an idle engine burns no CPU. Completion is an atomic counter the
 * caller waits on. The sleeper count lets the caller skip the mutex when nobody sleeps; the
 * seq_cst pair (caller: bump gen, read sleepers / worker: bump sleepers, read gen) makes a
 * lost wake-up impossible.
 */
#include "base/threadpool.h"

#include "base/error.h"
#include "base/profile.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* A waiting thread first spins with a pause hint (tens of µs: covers the gap between the
 * regions of one forward pass), then yields the CPU for a while — on an oversubscribed
 * machine the thread it waits for may need this very core — and only then sleeps (a
 * worker) so an idle engine burns no CPU. */
enum { KR_POOL_SPIN = 1 << 11, KR_POOL_YIELDS = 256, KR_POOL_MAX_THREADS = 1024 };

struct kr_pool;

typedef struct kr_worker {
    struct kr_pool *pool;
    int ith;
    pthread_t thread;
} kr_worker;

struct kr_pool {
    int n; /* threads per region, caller included */
    kr_worker *workers; /* n - 1 */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen; /* bumped once per region (and at shutdown) */
    atomic_int done; /* workers finished with the current region */
    atomic_int sleepers; /* workers blocked (or about to block) on cv */
    atomic_int stop;
    /* Written by the caller before the release bump of gen, read by workers after the
     * acquire load; the done counter orders the next write after every read. */
    kr_pool_fn fn;
    void *ctx;
    void *scratch; /* kr_pool_scratch: grow-only, 64-byte aligned */
    size_t scratch_bytes;
    int64_t regions; /* kr_pool_counters (driver only) */
    double wait_seconds;
    kr_pool_parts *parts; /* kr_pool_attach_parts (driver only), or NULL */
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

static unsigned wait_for_region(struct kr_pool *p, unsigned seen) {
    for (int i = 0; i < KR_POOL_SPIN + KR_POOL_YIELDS; i++) {
        unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen) return g;
        if (i < KR_POOL_SPIN)
            cpu_relax();
        else
            sched_yield();
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleepers, 1);
    unsigned g;
    while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *arg) {
    kr_worker *w = arg;
    struct kr_pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        seen = wait_for_region(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        p->fn(p->ctx, w->ith, p->n);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
    return NULL;
}

/* Publishes a new generation and wakes sleepers if there are any. */
static void publish(struct kr_pool *p) {
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

int kr_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (n > KR_POOL_MAX_THREADS ? KR_POOL_MAX_THREADS : (int)n) : 1;
}

static void join_workers(struct kr_pool *p, int started) {
    atomic_store(&p->stop, 1);
    publish(p);
    for (int i = 0; i < started; i++) pthread_join(p->workers[i].thread, NULL);
}

kr_status kr_pool_create(int n_threads, kr_pool **out, kr_error *err) {
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_pool_create: out is NULL");
    *out = NULL;
    if (n_threads <= 0) n_threads = kr_cpu_count();
    if (n_threads > KR_POOL_MAX_THREADS)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_pool_create: %d threads (max %d)",
                            n_threads, KR_POOL_MAX_THREADS);
    struct kr_pool *p = calloc(1, sizeof *p);
    if (!p) return kr_error_set(err, KR_ERR_NOMEM, "kr_pool_create: out of memory");
    p->n = n_threads;
    atomic_init(&p->gen, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, 0);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            free(p);
            return kr_error_set(err, KR_ERR_NOMEM, "kr_pool_create: out of memory");
        }
    }
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p->workers);
        free(p);
        return kr_error_set(err, KR_ERR_INTERNAL, "kr_pool_create: pthread_mutex_init failed");
    }
    if (pthread_cond_init(&p->cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        free(p->workers);
        free(p);
        return kr_error_set(err, KR_ERR_INTERNAL, "kr_pool_create: pthread_cond_init failed");
    }
    for (int i = 0; i < n_threads - 1; i++) {
        p->workers[i].pool = p;
        p->workers[i].ith = i + 1;
        if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]) != 0) {
            join_workers(p, i);
            pthread_cond_destroy(&p->cv);
            pthread_mutex_destroy(&p->mu);
            free(p->workers);
            free(p);
            return kr_error_set(err, KR_ERR_INTERNAL,
                                "kr_pool_create: cannot start thread %d of %d", i + 1, n_threads);
        }
    }
    *out = p;
    return KR_OK;
}

void kr_pool_free(kr_pool *pool) {
    if (!pool) return;
    join_workers(pool, pool->n - 1);
    pthread_cond_destroy(&pool->cv);
    pthread_mutex_destroy(&pool->mu);
    free(pool->workers);
    free(pool->scratch);
    free(pool);
}

void *kr_pool_scratch(kr_pool *pool, size_t bytes) {
    if (!pool) return NULL;
    if (bytes <= pool->scratch_bytes) return pool->scratch;
    /* Grow by at least half again so a slowly rising demand does not reallocate each time. */
    size_t want = bytes + bytes / 2;
    want = (want + 63) & ~(size_t)63;
    void *p = NULL;
    if (posix_memalign(&p, 64, want) != 0) return NULL;
    free(pool->scratch);
    pool->scratch = p;
    pool->scratch_bytes = want;
    return p;
}

int kr_pool_size(const kr_pool *pool) { return pool ? pool->n : 1; }

void kr_pool_run(kr_pool *pool, kr_pool_fn fn, void *ctx) {
    if (!pool || pool->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
    publish(pool);
    fn(ctx, 0, pool->n);
    const int want = pool->n - 1;
    pool->regions++;
    if (atomic_load_explicit(&pool->done, memory_order_acquire) >= want) return;
    double t0 = kr_prof_clock();
    for (int i = 0; atomic_load_explicit(&pool->done, memory_order_acquire) < want;) {
        if (i < KR_POOL_SPIN) {
            cpu_relax();
            i++;
        } else {
            sched_yield();
        }
    }
    pool->wait_seconds += kr_prof_clock() - t0;
}

void kr_pool_counters(const kr_pool *pool, int64_t *regions, double *wait_seconds) {
    *regions = pool ? pool->regions : 0;
    *wait_seconds = pool ? pool->wait_seconds : 0.0;
}

void kr_pool_attach_parts(kr_pool *pool, kr_pool_parts *parts) {
    if (pool) pool->parts = parts;
}

static double process_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void kr_pool_run_part(kr_pool *pool, int part, kr_pool_fn fn, void *ctx) {
    kr_pool_parts *parts = pool ? pool->parts : NULL;
    if (!parts || part < 0 || part >= parts->n_parts) {
        kr_pool_run(pool, fn, ctx);
        return;
    }
    double w0 = kr_prof_clock(), c0 = process_cpu_seconds();
    kr_pool_run(pool, fn, ctx);
    parts->cpu_seconds[part] += process_cpu_seconds() - c0;
    parts->wall_seconds[part] += kr_prof_clock() - w0;
    parts->calls[part]++;
}
