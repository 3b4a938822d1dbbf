/*
 * The steady-state decode loop allocates nothing: every buffer a step needs comes from the
 * context's workspace arena. This executable replaces malloc and friends (forwarding to
 * glibc's) so that it counts every heap allocation of the process, the C library's own
 * included (glibc's qsort, for one, allocates), and checks that none happens between two
 * generation steps well inside a forecast: cached decode, exact-mode window re-runs, rolling
 * mode, 1 and 32 paths, several requests batched.
 *
 * The same counting tracks which allocations made in a window are still live at its end: a
 * request submitted with no event callback leaves no result behind.
 *
 * Under AddressSanitizer (which owns malloc) the test reports itself skipped.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "engine/forecast_internal.h"
#include "engine_helpers.h"
#include "series/candles.h"
#include "test_support.h"

#define KR_COUNTING (!KR_TEST_ASAN)

static atomic_int g_counting;
static atomic_long g_allocs;
static void *g_callers[16];

/* Allocations made while g_tracking is set, until freed: an open-addressing table of
 * (pointer, size); a freed slot becomes a tombstone, so probe chains stay intact. */
#define TRACK_SLOTS (1 << 16)
#define TRACK_GONE ((void *)1)
typedef struct tracked {
    void *_Atomic p;
    size_t n;
} tracked;
static tracked g_tracked[TRACK_SLOTS];
static atomic_int g_tracking, g_n_tracked;

#if KR_COUNTING /* the allocator hooks below are the table's only users */
static size_t track_hash(const void *p) {
    return (size_t)(((uintptr_t)p >> 4) * 2654435761u) % TRACK_SLOTS;
}

static void track(void *p, size_t n) {
    if (!p || !atomic_load_explicit(&g_tracking, memory_order_relaxed)) return;
    for (size_t i = 0, h = track_hash(p); i < TRACK_SLOTS; i++) {
        void *empty = NULL;
        tracked *t = &g_tracked[(h + i) % TRACK_SLOTS];
        if (atomic_compare_exchange_strong(&t->p, &empty, p)) {
            t->n = n;
            atomic_fetch_add(&g_n_tracked, 1);
            return;
        }
    }
}

static void untrack(void *p) {
    if (!p || atomic_load_explicit(&g_n_tracked, memory_order_relaxed) == 0) return;
    for (size_t i = 0, h = track_hash(p); i < TRACK_SLOTS; i++) {
        tracked *t = &g_tracked[(h + i) % TRACK_SLOTS];
        void *q = atomic_load(&t->p);
        if (q == NULL) return;
        if (q == p && atomic_compare_exchange_strong(&t->p, &q, TRACK_GONE)) return;
    }
}

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static void note(void *caller) {
    if (!atomic_load_explicit(&g_counting, memory_order_relaxed)) return;
    long n = atomic_fetch_add(&g_allocs, 1);
    if (n < 16) g_callers[n] = caller;
}

void *malloc(size_t n) {
    note(__builtin_return_address(0));
    void *p = __libc_malloc(n);
    track(p, n);
    return p;
}
void *calloc(size_t a, size_t b) {
    note(__builtin_return_address(0));
    void *p = __libc_calloc(a, b);
    track(p, a * b);
    return p;
}
void *realloc(void *p, size_t n) {
    note(__builtin_return_address(0));
    untrack(p);
    void *q = __libc_realloc(p, n);
    track(q, n);
    return q;
}
int posix_memalign(void **out, size_t align, size_t n) {
    note(__builtin_return_address(0));
    void *p = __libc_memalign(align, n);
    if (!p) return 12; /* ENOMEM */
    track(p, n);
    *out = p;
    return 0;
}
void *aligned_alloc(size_t align, size_t n) {
    note(__builtin_return_address(0));
    void *p = __libc_memalign(align, n);
    track(p, n);
    return p;
}
void free(void *p) {
    untrack(p);
    __libc_free(p);
}
#endif

static kr_model *g_model;
static kr_candles *g_data;

typedef struct watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int from, to; /* count allocations between these STEP events */
    long allocs;
    int last; /* the last STEP event: from there to DONE the paths are decoded, */
    long decode_allocs; /* which allocates (their decoder stores): proof the count works */
    int done;
    kr_status status;
    kr_forecast *result;
} watch;

/* On the engine thread: between steps, no allocation of its own. */
static void on_event(void *user, const kr_event *ev) {
    watch *w = user;
    if (ev->kind == KR_EVENT_STEP && ev->step == w->from) {
        atomic_store(&g_allocs, 0);
        atomic_store(&g_counting, 1);
    }
    if (ev->kind == KR_EVENT_STEP && ev->step == w->to) {
        atomic_store(&g_counting, 0);
        w->allocs = atomic_load(&g_allocs);
    }
    if (ev->kind == KR_EVENT_STEP && ev->step == w->last) {
        atomic_store(&g_allocs, 0);
        atomic_store(&g_counting, 1);
    }
    if (ev->kind == KR_EVENT_DONE || ev->kind == KR_EVENT_FAILED) {
        if (w->last > 0) {
            atomic_store(&g_counting, 0);
            w->decode_allocs = atomic_load(&g_allocs);
        }
        pthread_mutex_lock(&w->mu);
        w->done = 1;
        w->status = ev->kind == KR_EVENT_DONE ? KR_OK : ev->error.status;
        w->result = ev->result;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

static int setup(void **state) {
    (void)state;
    kr_error err = { 0 };
    if (kr_model_load(KR_SOURCE_DIR "/models/kronos-demo/predictor",
                      KR_SOURCE_DIR "/models/kronos-demo/tokenizer", NULL, &g_model, &err) != KR_OK)
        return -1;
    if (kr_candles_read_csv(kr_test_fixture("regression_input.csv"), &g_data, &err) != KR_OK)
        return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_model_free(g_model);
    kr_candles_free(g_data);
    return 0;
}

/* Runs `n` requests of these parameters together; counts allocations between generation
 * steps `from` and `to` of the first one (the others run alongside). */
static void expect_no_allocations(const char *what, int n, int lookback, int pred_len, int paths,
                                  kr_window_mode window, int from, int to) {
    if (!KR_COUNTING) skip();
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = 2;
    cp.prefix_cache = 1;
    kr_context *ctx = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_context_create(g_model, &cp, &ctx, &err), KR_OK);
    kr_forecast_params p = kr_forecast_default_params();
    p.lookback = lookback;
    p.pred_len = pred_len;
    p.paths = paths;
    p.window = window;
    p.seed = 3;
    watch w[4];
    for (int k = 0; k < n; k++) {
        memset(&w[k], 0, sizeof w[k]);
        pthread_mutex_init(&w[k].mu, NULL);
        pthread_cond_init(&w[k].cv, NULL);
        w[k].from = k == 0 ? from : -1;
        w[k].to = k == 0 ? to : -1;
        w[k].last = k == 0 && n == 1 ? pred_len : -1;
        kr_series s = kr_candles_slice(g_data, 100 + 50 * k, lookback);
        kr_request_params rp = kr_request_default_params();
        rp.on_event = on_event;
        rp.user = &w[k];
        assert_int_equal(kr_submit(ctx, &s, &p, &rp, NULL, &err), KR_OK);
    }
    for (int k = 0; k < n; k++) {
        pthread_mutex_lock(&w[k].mu);
        while (!w[k].done) pthread_cond_wait(&w[k].cv, &w[k].mu);
        pthread_mutex_unlock(&w[k].mu);
        assert_int_equal(w[k].status, KR_OK);
        kr_forecast_free(w[k].result);
    }
    kr_context_stats st;
    kr_context_get_stats(ctx, &st);
    print_message("%s: %ld allocations over steps %d..%d (workspace %zu KB, grown %lld times)\n",
                  what, w[0].allocs, from, to, st.workspace_bytes >> 10,
                  (long long)st.workspace_grows);
    if (w[0].allocs != 0) {
        for (long i = 0; i < w[0].allocs && i < 16; i++)
            print_message("  allocation %ld from %p\n", i, g_callers[i]);
        fail_msg("%s: %ld heap allocations in the steady-state decode loop", what, w[0].allocs);
    }
    if (n == 1) assert_true(w[0].decode_allocs > 0); /* the counter sees allocations */
    kr_context_free(ctx);
}

static void test_cached_decode_one_path(void **state) {
    (void)state;
    expect_no_allocations("1 path, cached", 1, 200, 64, 1, KR_WINDOW_EXACT, 8, 56);
}

static void test_cached_decode_32_paths(void **state) {
    (void)state;
    expect_no_allocations("32 paths, cached", 1, 200, 64, 32, KR_WINDOW_EXACT, 8, 56);
}

static void test_window_reruns(void **state) {
    (void)state;
    /* 480 + 64 > 512: every step from 33 on re-runs the trailing window. */
    expect_no_allocations("8 paths, exact re-runs", 1, 480, 64, 8, KR_WINDOW_EXACT, 40, 60);
}

static void test_rolling(void **state) {
    (void)state;
    expect_no_allocations("8 paths, rolling", 1, 480, 64, 8, KR_WINDOW_ROLLING, 40, 60);
}

static void test_batched_requests(void **state) {
    (void)state;
    expect_no_allocations("4 requests x 4 paths", 4, 150, 48, 4, KR_WINDOW_EXACT, 8, 40);
}

/* A request submitted with no event callback (kr_request_params.on_event NULL, "may be NULL")
 * has nobody to hand its result to: the engine frees it. Counted here as the allocations of
 * a forecast result's size made while the requests ran and still live once they finished. */
static void test_submit_without_callback_frees_result(void **state) {
    (void)state;
    if (!KR_COUNTING) skip();
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = 1;
    cp.prefix_cache = 0;
    kr_context *ctx = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_context_create(g_model, &cp, &ctx, &err), KR_OK);
    kr_forecast_params p = kr_forecast_default_params();
    p.lookback = 100;
    p.pred_len = 8;
    p.paths = 2;
    enum { N = 6 };
    kr_series s[N];
    for (int k = 0; k < N; k++) s[k] = kr_candles_slice(g_data, 100, 100);
    kr_forecast *warm[N] = { 0 };
    assert_int_equal(kr_forecast_run_batch(ctx, s, N, &p, NULL, warm, &err), KR_OK);
    for (int k = 0; k < N; k++) kr_forecast_free(warm[k]);

    memset(g_tracked, 0, sizeof g_tracked);
    atomic_store(&g_n_tracked, 0);
    atomic_store(&g_tracking, 1);
    /* The warm-up's N and these N: the stats are published after each step, maybe after
     * the warm-up's call returned, so the target is counted from creation. */
    kr_context_stats st;
    for (int k = 0; k < N; k++)
        assert_int_equal(kr_submit(ctx, &s[k], &p, NULL, NULL, &err), KR_OK);
    double t0 = kr_now_seconds();
    do {
        usleep(2000);
        kr_context_get_stats(ctx, &st);
    } while (st.completed < 2 * N && kr_now_seconds() - t0 < 60);
    assert_int_equal(kr_context_drain(ctx, -1), KR_OK);
    atomic_store(&g_tracking, 0);
    assert_int_equal(st.completed, 2 * N);
    int live = 0;
    for (size_t i = 0; i < TRACK_SLOTS; i++) {
        void *q = atomic_load(&g_tracked[i].p);
        if (q && q != TRACK_GONE && g_tracked[i].n == sizeof(kr_forecast)) live++;
    }
    atomic_store(&g_n_tracked, 0);
    print_message("%d of %d results still allocated after their requests finished\n", live, N);
    assert_int_equal(live, 0);
    kr_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cached_decode_one_path),
        cmocka_unit_test(test_cached_decode_32_paths),
        cmocka_unit_test(test_window_reruns),
        cmocka_unit_test(test_rolling),
        cmocka_unit_test(test_batched_requests),
        cmocka_unit_test(test_submit_without_callback_frees_result),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
