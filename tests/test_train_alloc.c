/*
 * A training step allocates nothing: every buffer of kr_trainer_accumulate, kr_trainer_evaluate
 * and kr_trainer_step comes from what kr_trainer_create allocated (the kernels' per-thread
 * packing buffers are made by the first step, like decode's). This executable replaces malloc
 * and friends (forwarding to glibc's) to count every heap allocation of the process, and checks
 * that none happens in steps 2..5 of the predictor and the tokenizer, with dropout, sampled
 * s1 ids and 2-way accumulation, on 2 threads, for windows as long as the trainer was sized for
 * and shorter ones.
 *
 * Under AddressSanitizer (which owns malloc) the test reports itself skipped.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kronos/train.h"
#include "test_support.h"

#define KR_COUNTING (!KR_TEST_ASAN)

static atomic_int g_counting;
static atomic_long g_allocs;

#if KR_COUNTING
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static void note(void) {
    if (atomic_load_explicit(&g_counting, memory_order_relaxed)) atomic_fetch_add(&g_allocs, 1);
}

void *malloc(size_t n) {
    note();
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    note();
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    note();
    return __libc_realloc(p, n);
}
int posix_memalign(void **out, size_t align, size_t n) {
    note();
    void *p = __libc_memalign(align, n);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}
void *aligned_alloc(size_t align, size_t n) {
    note();
    return __libc_memalign(align, n);
}
void free(void *p) { __libc_free(p); }
#endif

#define B 4
#define LEN 33

static void steps(kr_train_target target, const char *sub) {
    char dir[1024], cfg[4096];
    const char *tmp = kr_test_fresh_dir();
    /* the tiny checkpoint with every dropout on (its config rewritten, its weights linked) */
    snprintf(dir, sizeof dir, "%s/tiny/%s/model.safetensors", kr_test_fixture("train"), sub);
    char link_path[1200];
    snprintf(link_path, sizeof link_path, "%s/model.safetensors", tmp);
    assert_int_equal(symlink(dir, link_path), 0);
    snprintf(dir, sizeof dir, "%s/tiny/%s/config.json", kr_test_fixture("train"), sub);
    kr_test_slurp(dir, cfg, sizeof cfg);
    for (char *p = strstr(cfg, "_p\": 0.0"); p; p = strstr(p + 1, "_p\": 0.0"))
        p[7] = '2'; /* every "..._dropout_p": 0.0 → 0.2 */
    snprintf(link_path, sizeof link_path, "%s/config.json", tmp);
    assert_int_equal(kr_test_write_file(link_path, cfg, strlen(cfg)), 0);

    kr_train_params p = kr_train_default_params(target);
    p.batch_size = B;
    p.seq_len = LEN;
    p.accumulation_steps = 2;
    p.n_threads = 2;
    p.total_steps = 100;
    kr_trainer *tr = NULL;
    kr_error err = { 0 };
    if (kr_trainer_create(tmp, &p, &tr, &err) != KR_OK) fail_msg("%s", err.message);
    static int32_t s1[B * LEN], s2[B * LEN], stamp[B * LEN * 5];
    static float x[B * LEN * 6];
    for (int i = 0; i < B * LEN; i++) {
        s1[i] = (i * 131) % 1024;
        s2[i] = (i * 71) % 1024;
        int32_t st[5] = { i % 60, i % 24, i % 7, 1 + i % 31, 1 + i % 12 };
        memcpy(stamp + i * 5, st, sizeof st);
        for (int k = 0; k < 6; k++) x[i * 6 + k] = (float)((i * 7 + k * 3) % 11) / 5.0f - 1.0f;
    }
    long counted = 0;
    for (int s = 0; s < 6; s++) {
        int len = s % 2 ? LEN : LEN - 9; /* shorter windows fit the same buffers */
        kr_train_batch b = {
            .n = s == 3 ? B - 1 : B, .len = len, .s1 = s1, .s2 = s2, .stamp = stamp, .x = x
        };
        kr_train_losses l;
        kr_train_step_info info;
        atomic_store(&g_allocs, 0);
        atomic_store(&g_counting, s >= 2);
        kr_status a1 = kr_trainer_accumulate(tr, &b, &l, &err);
        kr_status a2 = kr_trainer_accumulate(tr, &b, &l, &err);
        kr_status e = kr_trainer_evaluate(tr, &b, s % 2, &l, &err);
        kr_status st = kr_trainer_step(tr, &info, &err);
        atomic_store(&g_counting, 0);
        if (a1 != KR_OK || a2 != KR_OK || e != KR_OK || st != KR_OK)
            fail_msg("step %d: %s", s, err.message);
        if (s >= 2) counted += atomic_load(&g_allocs);
    }
    if (counted != 0) fail_msg("%s: %ld heap allocations in steps 2..5", sub, counted);
    kr_trainer_free(tr);
}

static void test_no_allocation(void **state) {
    (void)state;
    if (!KR_COUNTING) skip();
    steps(KR_TRAIN_PREDICTOR, "predictor");
    steps(KR_TRAIN_TOKENIZER, "tokenizer");
}

/* The counter counts: creating a trainer allocates. */
static void test_counter_works(void **state) {
    (void)state;
    if (!KR_COUNTING) skip();
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny/tokenizer", kr_test_fixture("train"));
    kr_train_params p = kr_train_default_params(KR_TRAIN_TOKENIZER);
    p.batch_size = 2;
    p.seq_len = 8;
    kr_trainer *tr = NULL;
    atomic_store(&g_allocs, 0);
    atomic_store(&g_counting, 1);
    kr_status st = kr_trainer_create(dir, &p, &tr, NULL);
    atomic_store(&g_counting, 0);
    assert_int_equal(st, KR_OK);
    assert_true(atomic_load(&g_allocs) > 0);
    kr_trainer_free(tr);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_works),
        cmocka_unit_test(test_no_allocation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
