/* Tests for base/threadpool: every thread index runs exactly once per region, regions see
 * each other's writes in order, sizing and error paths. */
#include "test_support.h"

#include "base/threadpool.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_T = 8 };

typedef struct {
    atomic_int hits[MAX_T]; /* runs of each ith in the current region */
    int bad_nth; /* regions where a thread saw an nth other than expected */
    int expect_nth;
    int plain[MAX_T]; /* written without atomics: the pool's barrier must order it */
    int region;
} count_ctx;

static void count_fn(void *p, int ith, int nth) {
    count_ctx *c = p;
    if (nth != c->expect_nth || ith < 0 || ith >= nth || ith >= MAX_T) {
        c->bad_nth = 1;
        return;
    }
    atomic_fetch_add(&c->hits[ith], 1);
    c->plain[ith] = c->region;
}

static void run_regions(kr_pool *pool, int expect_nth, int regions) {
    count_ctx c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < MAX_T; i++) atomic_init(&c.hits[i], 0);
    c.expect_nth = expect_nth;
    for (int r = 1; r <= regions; r++) {
        c.region = r;
        kr_pool_run(pool, count_fn, &c);
        assert_int_equal(c.bad_nth, 0);
        for (int i = 0; i < MAX_T; i++) {
            /* Exactly once per region: the running count equals the region number. */
            assert_int_equal(atomic_load(&c.hits[i]), i < expect_nth ? r : 0);
            if (i < expect_nth) assert_int_equal(c.plain[i], r);
        }
    }
}

static void test_pool_sizes(void **state) {
    (void)state;
    for (int n = 1; n <= 4; n++) {
        kr_pool *pool = NULL;
        kr_error err = { 0 };
        assert_int_equal(kr_pool_create(n, &pool, &err), KR_OK);
        assert_non_null(pool);
        assert_int_equal(kr_pool_size(pool), n);
        run_regions(pool, n, 10000);
        kr_pool_free(pool);
    }
}

static void test_null_pool(void **state) {
    (void)state;
    assert_int_equal(kr_pool_size(NULL), 1);
    run_regions(NULL, 1, 100);
    kr_pool_free(NULL);
}

static void test_default_size_and_cpu_count(void **state) {
    (void)state;
    int cpus = kr_cpu_count();
    assert_true(cpus >= 1);
    kr_pool *pool = NULL;
    assert_int_equal(kr_pool_create(0, &pool, NULL), KR_OK);
    assert_int_equal(kr_pool_size(pool), cpus);
    run_regions(pool, cpus > MAX_T ? -1 : cpus, cpus > MAX_T ? 0 : 50);
    kr_pool_free(pool);
}

static void test_create_errors(void **state) {
    (void)state;
    kr_error err = { 0 };
    kr_pool *pool = (kr_pool *)&err; /* must be reset to NULL on failure */
    assert_int_equal(kr_pool_create(1 << 20, &pool, &err), KR_ERR_INVALID_ARG);
    assert_null(pool);
    assert_int_equal(err.status, KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "kr_pool_create"));
    assert_int_equal(kr_pool_create(2, NULL, &err), KR_ERR_INVALID_ARG);
}

/* Workers that went to sleep between regions must wake for the next one. */
static void sleep_ms(int ms) {
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static void test_wake_after_idle(void **state) {
    (void)state;
    kr_pool *pool = NULL;
    assert_int_equal(kr_pool_create(3, &pool, NULL), KR_OK);
    count_ctx c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < MAX_T; i++) atomic_init(&c.hits[i], 0);
    c.expect_nth = 3;
    for (int r = 1; r <= 5; r++) {
        sleep_ms(20);
        c.region = r;
        kr_pool_run(pool, count_fn, &c);
        for (int i = 0; i < 3; i++) assert_int_equal(atomic_load(&c.hits[i]), r);
    }
    kr_pool_free(pool);
}

/* Create/free churn: shutdown must join cleanly whether workers spin or sleep. */
static void test_create_free_churn(void **state) {
    (void)state;
    for (int i = 0; i < 50; i++) {
        kr_pool *pool = NULL;
        assert_int_equal(kr_pool_create(1 + i % 4, &pool, NULL), KR_OK);
        if (i % 2) run_regions(pool, 1 + i % 4, 3);
        kr_pool_free(pool);
    }
}

/* Work that takes CPU time on every thread (volatile: not optimised away). */
static void burn_fn(void *p, int ith, int nth) {
    (void)p, (void)ith, (void)nth;
    volatile double x = 1.0;
    for (int i = 0; i < 200000; i++) x = x * 1.0000001 + 1e-9;
}

/* With parts attached, each kr_pool_run_part call is counted and timed under its part; a
 * part out of range runs untimed; detached, nothing is counted; every thread still runs. */
static void test_run_part_timing(void **state) {
    (void)state;
    for (int n = 1; n <= 3; n += 2) {
        kr_pool *pool = NULL;
        assert_int_equal(kr_pool_create(n, &pool, NULL), KR_OK);
        double wall[2] = { 0 }, cpu[2] = { 0 };
        int64_t calls[2] = { 0 };
        kr_pool_parts parts = { 2, wall, cpu, calls };
        kr_pool_attach_parts(pool, &parts);
        for (int r = 0; r < 3; r++) kr_pool_run_part(pool, 1, burn_fn, NULL);
        kr_pool_run_part(pool, 0, burn_fn, NULL);
        kr_pool_run_part(pool, 7, burn_fn, NULL);
        kr_pool_run_part(pool, -1, burn_fn, NULL);
        assert_int_equal(calls[0], 1);
        assert_int_equal(calls[1], 3);
        assert_true(wall[0] > 0.0 && wall[1] > 0.0);
        assert_true(cpu[0] > 0.0 && cpu[1] > 0.0);
        count_ctx c;
        memset(&c, 0, sizeof c);
        for (int i = 0; i < MAX_T; i++) atomic_init(&c.hits[i], 0);
        c.expect_nth = n;
        c.region = 1;
        kr_pool_run_part(pool, 0, count_fn, &c);
        for (int i = 0; i < n; i++) assert_int_equal(atomic_load(&c.hits[i]), 1);
        assert_int_equal(calls[0], 2);
        kr_pool_attach_parts(pool, NULL);
        kr_pool_run_part(pool, 0, burn_fn, NULL);
        assert_int_equal(calls[0], 2);
        kr_pool_free(pool);
    }
    kr_pool_run_part(NULL, 0, burn_fn, NULL); /* a NULL pool runs on the caller, untimed */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_sizes),
        cmocka_unit_test(test_null_pool),
        cmocka_unit_test(test_default_size_and_cpu_count),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_wake_after_idle),
        cmocka_unit_test(test_create_free_churn),
        cmocka_unit_test(test_run_part_timing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
