/*
 * KV-cache precision (kr_context_params.kv_dtype): bf16 and int8 stores round-trip within their
 * format's bound (bf16 bit-identical to kr_f32_to_bf16), attention over a quantised store
 * equals attention over its dequantised f32 copy bit for bit, forecasts stay close to f32
 * while kv_bytes shrinks to 1/2 and ~1/4, and within each dtype the KV-cached path (and a
 * prefix-cache hit) still equals full recomputation bit for bit.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "engine/forecast_internal.h"
#include "kernels/quant.h"
#include "series/candles.h"
#include "model/attention_plan.h"
#include "model/model.h"
#include "model/weights.h"
#include "engine_helpers.h"
#include "test_support.h"

static const char *const k_dtypes[] = { "f32", "bf16", "int8" };

static char g_tiny_dir[1024], g_demo_dir[1024];
static kr_candles *g_candles;

static int setup(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    kr_error err = { 0 };
    if (!dir || kr_model_write_random(kr_random_shape_find("tiny"), 7, dir, &err) != KR_OK) {
        fprintf(stderr, "gen-random: %s\n", err.message);
        return -1;
    }
    snprintf(g_tiny_dir, sizeof g_tiny_dir, "%s", dir);
    snprintf(g_demo_dir, sizeof g_demo_dir, "%s/models/kronos-demo", KR_SOURCE_DIR);
    if (kr_candles_read_csv(kr_test_fixture("regression_input.csv"), &g_candles, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_candles_free(g_candles);
    return 0;
}

static kr_test_engine load(const char *root, const char *kv_dtype) {
    return kr_test_engine_load(root, NULL, 0, kv_dtype);
}

/* Deterministic values with a wide spread of magnitudes (xorshift). */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}
static float rnd_wide(void) { return rnd() * ldexpf(1.0f, (int)(rnd() * 12.0f)); }

/* ---------------------------------------------------------------- store round trip */

/* A store holds whole blocks of rows (transformer.h). */
#define HELD_ROWS(n) (((n) + KR_KV_BLOCK_ROWS - 1) / KR_KV_BLOCK_ROWS * KR_KV_BLOCK_ROWS)

static void test_bf16_round_trip(void **state) {
    (void)state;
    enum { LAYERS = 3, D = 24, CAP = 40 };
    kr_kv_store s;
    kr_error err = { 0 };
    assert_int_equal(kr_kv_store_init_dtype(&s, LAYERS, D, CAP, KR_KV_BF16, 0, &err), KR_OK);
    assert_int_equal(kr_kv_store_bytes(&s), 2u * LAYERS * HELD_ROWS(CAP) * D * sizeof(uint16_t));
    float k[CAP * D], v[CAP * D], ko[CAP * D], vo[CAP * D];
    /* Values already in bf16 come back exactly. */
    for (int i = 0; i < CAP * D; i++) {
        k[i] = kr_bf16_to_f32(kr_f32_to_bf16(rnd_wide()));
        v[i] = kr_bf16_to_f32(kr_f32_to_bf16(rnd_wide()));
    }
    kr_kv_store_write(&s, 1, 0, k, v, CAP);
    kr_kv_store_read(&s, 1, 0, CAP, ko, vo);
    assert_memory_equal(k, ko, sizeof k);
    assert_memory_equal(v, vo, sizeof v);
    /* Others: within 2^-8 relative, and the stored bits are exactly kr_f32_to_bf16's (ties,
     * overflow to infinity, subnormals and NaN included). */
    for (int i = 0; i < CAP * D; i++) {
        k[i] = rnd_wide();
        v[i] = rnd() * 1e-3f;
    }
    const uint32_t special[] = { 0x3F808000u, 0x3F818000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x00000001u,
                                 0x80400000u, 0x7F800000u, 0xFF800000u, 0x7FC00001u, 0x7F800001u,
                                 0xFFA12345u, 0x00000000u, 0x80000000u };
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) memcpy(&k[i], &special[i], 4);
    kr_kv_store_write(&s, 2, 3, k, v, CAP - 3);
    kr_kv_store_read(&s, 2, 3, CAP - 3, ko, vo);
    for (int i = 0; i < (CAP - 3) * D; i++) {
        uint16_t qk = ((const uint16_t *)kr_kv_row(&s, 0, 2, 3 + i / D))[i % D];
        if (qk != kr_f32_to_bf16(k[i]))
            fail_msg("element %d: bf16 bits %04x, expected %04x", i, qk, kr_f32_to_bf16(k[i]));
        if (i >= (int)(sizeof special / sizeof special[0])) {
            assert_true(fabsf(ko[i] - k[i]) <= ldexpf(fabsf(k[i]), -8));
            assert_true(fabsf(vo[i] - v[i]) <= ldexpf(fabsf(v[i]), -8));
        }
    }
    kr_kv_store_release(&s);
    assert_int_equal(kr_kv_store_bytes(&s), 0);
}

static void test_int8_round_trip(void **state) {
    (void)state;
    enum { LAYERS = 2, D = 48, G = 16, CAP = 30 };
    kr_kv_store s;
    kr_error err = { 0 };
    assert_int_equal(kr_kv_store_init_dtype(&s, LAYERS, D, 7, KR_KV_INT8, 10, &err),
                     KR_ERR_INVALID_ARG);
    assert_int_equal(kr_kv_store_init_dtype(&s, LAYERS, D, 7, KR_KV_INT8, 0, &err),
                     KR_ERR_INVALID_ARG);
    assert_int_equal(kr_kv_store_init_dtype(&s, LAYERS, D, 7, (kr_kv_dtype)7, G, &err),
                     KR_ERR_INVALID_ARG);
    assert_int_equal(kr_kv_store_init_dtype(&s, LAYERS, D, CAP, KR_KV_INT8, G, &err), KR_OK);
    size_t n = (size_t)LAYERS * HELD_ROWS(CAP) * D;
    assert_int_equal(kr_kv_store_bytes(&s), 2 * (n + n / G * sizeof(float)));
    float k[CAP * D], v[CAP * D], ko[CAP * D], vo[CAP * D];
    for (int r = 0; r < CAP; r++)
        for (int g = 0; g < D / G; g++) {
            /* Each group its own magnitude; one all-zero group per row in K. */
            float mag = ldexpf(1.0f, (int)(rnd() * 10.0f));
            for (int j = 0; j < G; j++) {
                int i = r * D + g * G + j;
                k[i] = g == r % (D / G) ? 0.0f : rnd() * mag;
                v[i] = rnd() * mag;
            }
        }
    /* Exact halves with scale 1: round half to even (2.5 → 2, -3.5 → -4, 0.5 → 0). */
    const float ties[G] = { 127, 2.5f, -3.5f, 0.5f,  -0.5f, 1.5f,  126.5f, -126.5f,
                            3,   -127, 0,     0.49f, 64.5f, -0.0f, 7,      8 };
    memcpy(k + G, ties, sizeof ties);
    /* Written in two calls, read back in one: conversion is row-local. */
    kr_kv_store_write(&s, 1, 0, k, v, 11);
    kr_kv_store_write(&s, 1, 11, k + 11 * D, v + 11 * D, CAP - 11);
    kr_kv_store_read(&s, 1, 0, CAP, ko, vo);
    const int8_t want_ties[G] = { 127, 2, -4, 0, 0, 2, 126, -126, 3, -127, 0, 0, 64, 0, 7, 8 };
    assert_memory_equal((const int8_t *)kr_kv_row(&s, 0, 1, 0) + G, want_ties, G);
    for (int r = 0; r < CAP; r++)
        for (int g = 0; g < D / G; g++) {
            const float *x[2] = { k + r * D + g * G, v + r * D + g * G };
            const float *y[2] = { ko + r * D + g * G, vo + r * D + g * G };
            for (int t = 0; t < 2; t++) {
                float amax = 0;
                for (int j = 0; j < G; j++) amax = fmaxf(amax, fabsf(x[t][j]));
                float scale = amax / 127.0f;
                const float *stored = kr_kv_row_scales(&s, t, 1, r) + g;
                assert_true(*stored == scale);
                /* The codes are exactly the documented rounding. */
                const int8_t *codes = (const int8_t *)kr_kv_row(&s, t, 1, r) + g * G;
                for (int j = 0; j < G; j++) {
                    float want = scale > 0
                                     ? fminf(fmaxf(nearbyintf(x[t][j] / scale), -127.0f), 127.0f)
                                     : 0.0f;
                    assert_int_equal(codes[j], (int)want);
                }
                for (int j = 0; j < G; j++) {
                    /* scale/2 from rounding, plus the f32 rounding of x/scale and q·scale. */
                    float bound = 0.5f * scale + 2e-7f * amax;
                    if (fabsf(y[t][j] - x[t][j]) > bound)
                        fail_msg("row %d group %d elt %d: %g vs %g (scale %g)", r, g, j, y[t][j],
                                 x[t][j], scale);
                    if (amax == 0) assert_true(y[t][j] == 0.0f);
                }
            }
        }
    kr_kv_store_release(&s);
}

/* ---------------------------------------------------------------- attention over stores */

/* Attention over bf16/int8 stores (refs overlapping, shared first refs, mixed with an f32
 * store) equals attention over f32 stores holding their dequantised rows, bit for bit. */
static void test_attention_reads_dequantised(void **state) {
    (void)state;
    enum { LAYERS = 2, H = 2, HD = 8, D = H * HD, CAP = 24, ROWS = 9 };
    kr_error err = { 0 };
    kr_kv_store q[3], f[3]; /* bf16, int8, f32 and their f32 mirrors */
    assert_int_equal(kr_kv_store_init_dtype(&q[0], LAYERS, D, CAP, KR_KV_BF16, 0, &err), KR_OK);
    assert_int_equal(kr_kv_store_init_dtype(&q[1], LAYERS, D, CAP, KR_KV_INT8, HD, &err), KR_OK);
    assert_int_equal(kr_kv_store_init(&q[2], LAYERS, D, CAP, &err), KR_OK);
    float k[CAP * D], v[CAP * D], ko[CAP * D], vo[CAP * D];
    for (int s = 0; s < 3; s++) {
        assert_int_equal(kr_kv_store_init(&f[s], LAYERS, D, CAP, &err), KR_OK);
        for (int l = 0; l < LAYERS; l++) {
            for (int i = 0; i < CAP * D; i++) {
                k[i] = rnd() * 3.0f;
                v[i] = rnd();
            }
            kr_kv_store_write(&q[s], l, 0, k, v, CAP);
            kr_kv_store_read(&q[s], l, 0, CAP, ko, vo);
            kr_kv_store_write(&f[s], l, 0, ko, vo, CAP);
        }
    }
    /* (store, start, n) per ref; rows 0-3 share their first ref. */
    static const int spec[ROWS][4][3] = {
        { { 0, 0, 10 }, { 1, 0, 1 }, { 2, 4, 2 }, { -1 } },
        { { 0, 0, 10 }, { 1, 0, 2 }, { -1 } },
        { { 0, 0, 10 }, { 1, 0, 3 }, { 0, 12, 3 }, { -1 } },
        { { 0, 0, 10 }, { 1, 5, 4 }, { -1 } },
        { { 0, 5, 7 }, { -1 } },
        { { 1, 0, 3 }, { 0, 3, 4 }, { -1 } },
        { { 2, 0, 6 }, { 1, 20, 4 }, { -1 } },
        { { 1, 2, 20 }, { 1, 0, 0 }, { 1, 1, 5 }, { -1 } },
        { { 2, 1, 1 }, { -1 } },
    };
    kr_attn_keys kq[ROWS], kf[ROWS];
    for (int r = 0; r < ROWS; r++) {
        kq[r].n = kf[r].n = 0;
        for (int i = 0; i < 4 && spec[r][i][0] >= 0; i++) {
            kq[r].ref[i] = (kr_kv_ref){ &q[spec[r][i][0]], spec[r][i][1], spec[r][i][2] };
            kf[r].ref[i] = (kr_kv_ref){ &f[spec[r][i][0]], spec[r][i][1], spec[r][i][2] };
            kq[r].n = kf[r].n = i + 1;
        }
    }
    float qv[ROWS * D], out_q[ROWS * D], out_f[ROWS * D];
    for (int i = 0; i < ROWS * D; i++) qv[i] = rnd();
    kr_exec *three = NULL, *one = NULL;
    assert_int_equal(kr_exec_create(3, 0, &three, &err), KR_OK);
    assert_int_equal(kr_exec_create(1, 0, &one, &err), KR_OK);
    for (int l = 0; l < LAYERS; l++)
        for (int withpool = 0; withpool < 2; withpool++) {
            const kr_exec *p = withpool ? three : one;
            assert_int_equal(kr_attention_rows(p, ROWS, kq, l, H, HD, D, qv, out_q, &err), KR_OK);
            assert_int_equal(kr_attention_rows(p, ROWS, kf, l, H, HD, D, qv, out_f, &err), KR_OK);
            assert_memory_equal(out_q, out_f, sizeof out_q);
        }
    kr_exec_free(three);
    kr_exec_free(one);
    for (int s = 0; s < 3; s++) {
        kr_kv_store_release(&q[s]);
        kr_kv_store_release(&f[s]);
    }
}

/* ---------------------------------------------------------------- forecasts */

static kr_forecast *run(kr_context *ctx, kr_series s, const kr_forecast_params *p,
                        const kr_seq_options *opt) {
    return kr_test_run_opt(ctx, &s, p, opt);
}

static void expect_same(const kr_forecast *a, const kr_forecast *b, const char *what) {
    int P = a->pred_len, n = a->paths;
    assert_int_equal(P, b->pred_len);
    assert_int_equal(n, b->paths);
    if (memcmp(a->gen_s1, b->gen_s1, (size_t)n * P * sizeof(int32_t)) ||
        memcmp(a->gen_s2, b->gen_s2, (size_t)n * P * sizeof(int32_t)))
        fail_msg("%s: generated tokens differ", what);
    if (memcmp(a->pred_norm, b->pred_norm, (size_t)n * P * 6 * sizeof(float)))
        fail_msg("%s: decoded paths differ (not bit-identical)", what);
    if (memcmp(a->mean, b->mean, (size_t)P * 6 * sizeof(double)))
        fail_msg("%s: mean differs", what);
}

/* Within a dtype, the KV-cached path equals full recomputation bit for bit: inside the
 * window, at its edge and past it (exact-mode window re-runs). */
static void cached_equals_naive(const char *root, int max_context) {
    const int cases[][2] = {
        { 40, 8 }, { max_context - 5, 12 }, { max_context, 6 }, { max_context + 9, 7 }
    };
    for (int t = 0; t < 3; t++) {
        kr_test_engine E = load(root, k_dtypes[t]);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            kr_forecast_params p = kr_forecast_default_params();
            p.lookback = cases[c][0];
            p.pred_len = cases[c][1];
            p.max_context = max_context;
            p.paths = 3;
            p.seed = 11 + c;
            p.temperature = 1.0f;
            p.top_p = 0.95f;
            kr_series s = kr_candles_slice(g_candles, 300, cases[c][0] + 5);
            kr_seq_options cached = { 0 }, naive = { .naive = 1 };
            kr_forecast *a = run(E.ctx, s, &p, &cached), *b = run(E.ctx, s, &p, &naive);
            char what[256];
            snprintf(what, sizeof what, "%s kv %s lookback %d pred_len %d ctx %d", root,
                     k_dtypes[t], cases[c][0], cases[c][1], max_context);
            expect_same(a, b, what);
            kr_forecast_free(a);
            kr_forecast_free(b);
        }
        kr_test_engine_free(&E);
    }
}

static void test_cached_equals_naive_tiny(void **s) {
    (void)s;
    cached_equals_naive(g_tiny_dir, 64); /* int8 group 8: finer than the 16-wide heads */
}
static void test_cached_equals_naive_odd(void **s) {
    (void)s;
    cached_equals_naive(kr_test_fixture("odd"), 48); /* head_dim 52 */
}
static void test_cached_equals_naive_demo(void **s) {
    (void)s;
    cached_equals_naive(g_demo_dir, 96);
}

typedef struct first_step {
    float s1[1 << 10], s2[1 << 10];
    int s1_id, have;
} first_step;

static void observe(void *user, int group, int path, int step, const float *s1_logits,
                    const float *s2_logits, int s1, int s2, int window_start, int window_len) {
    (void)group, (void)s2, (void)window_start, (void)window_len;
    first_step *f = user;
    if (path != 0 || step != 0) return;
    memcpy(f->s1, s1_logits, sizeof f->s1);
    memcpy(f->s2, s2_logits, sizeof f->s2);
    f->s1_id = s1;
    f->have = 1;
}

static double max_abs(const float *a, const float *b, int n, double *range) {
    double m = 0, lo = a[0], hi = a[0];
    for (int i = 0; i < n; i++) {
        m = fmax(m, fabs((double)a[i] - b[i]));
        lo = fmin(lo, a[i]);
        hi = fmax(hi, a[i]);
    }
    *range = hi - lo;
    return m;
}

/* bf16 and int8 KV on the demo model: first-step logits within 0.1% / 0.3% of their range,
 * the mean close path within 0.5% of the price level, and KV memory 1/2 and (1 + 4/32)/4 of
 * f32 (int8 adds one f32 scale per 32-value head). */
static void test_close_to_f32_demo(void **state) {
    (void)state;
    kr_forecast_params p = kr_forecast_default_params();
    p.lookback = 256;
    p.pred_len = 24;
    p.paths = 32;
    p.seed = 2024;
    p.temperature = 1.0f;
    p.top_p = 0.9f;
    p.max_context = 512;
    kr_series s = kr_candles_slice(g_candles, 1000, 256);
    static first_step fs[3];
    kr_forecast *f[3];
    kr_forecast_stats st[3];
    for (int t = 0; t < 3; t++) {
        kr_test_engine E = load(g_demo_dir, k_dtypes[t]);
        kr_context_stats cs;
        kr_context_get_stats(E.ctx, &cs);
        assert_string_equal(cs.kv_dtype, k_dtypes[t]);
        kr_seq_options opt = { .observer = observe, .observer_user = &fs[t] };
        f[t] = run(E.ctx, s, &p, &opt);
        assert_true(fs[t].have);
        kr_forecast_get_stats(f[t], &st[t]);
        kr_test_engine_free(&E);
    }
    double level = 0;
    for (int64_t i = 0; i < s.n; i++) level += s.values[i * 6 + KR_CLOSE];
    level /= (double)s.n;
    assert_true(st[0].kv_bytes > 0);
    /* Bytes per row value: f32 4·S/D (rows padded to kr_kv_f32_stride S for attention's
     * in-place reads), bf16 2, int8 1 + 4/32 (scales); the demo model's D is 128. */
    const int64_t D = 128, S = kr_kv_f32_stride(128);
    assert_true(st[1].kv_bytes * 2 * S == st[0].kv_bytes * D);
    assert_true(st[2].kv_bytes * 32 * S == st[0].kv_bytes * 9 * D);
    for (int t = 1; t < 3; t++) {
        double range1, range2;
        double d1 = max_abs(fs[0].s1, fs[t].s1, 1 << 10, &range1);
        double d2 = fs[0].s1_id == fs[t].s1_id ? max_abs(fs[0].s2, fs[t].s2, 1 << 10, &range2) : 0;
        double mean_diff = 0;
        for (int i = 0; i < p.pred_len; i++)
            mean_diff += fabs(f[t]->mean[i * 6 + KR_CLOSE] - f[0]->mean[i * 6 + KR_CLOSE]);
        mean_diff /= p.pred_len;
        int same = 0;
        for (int i = 0; i < p.paths * p.pred_len; i++) same += f[t]->gen_s1[i] == f[0]->gen_s1[i];
        print_message("kv %s vs f32: step-0 s1 logits max |diff| %.3g (range %.3g), s2 %.3g; mean "
                      "close |diff| "
                      "%.3g%% of price level %.4g; %d/%d s1 tokens equal; kv_bytes %zu vs %zu\n",
                      k_dtypes[t], d1, range1, d2, 100.0 * mean_diff / level, level, same,
                      p.paths * p.pred_len, st[t].kv_bytes, st[0].kv_bytes);
        /* Measured here: bf16 1.3e-4 and int8 3.8e-4 of the logit range; every token equal. */
        assert_true(d1 <= (t == 1 ? 1e-3 : 3e-3) * range1);
        assert_true(mean_diff <= 0.005 * level);
    }
    for (int t = 0; t < 3; t++) kr_forecast_free(f[t]);
}

/* A prefix-cache hit in a quantised store gives the same paths as a fresh run, and the cache
 * is charged the quantised bytes. */
typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
    kr_status status;
    kr_forecast *result;
    int64_t cached_tokens;
} waiter;

static void on_event(void *user, const kr_event *ev) {
    waiter *w = user;
    pthread_mutex_lock(&w->lock);
    if (ev->kind == KR_EVENT_DONE || ev->kind == KR_EVENT_FAILED) {
        w->done = 1;
        w->status = ev->kind == KR_EVENT_DONE ? KR_OK : ev->error.status;
        w->result = ev->result;
        w->cached_tokens = ev->stats.cached_tokens;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
}

static void submit_wait(kr_context *ctx, kr_series ser, const kr_forecast_params *p, waiter *w) {
    kr_error err = { 0 };
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    kr_request_params rp = kr_request_default_params();
    rp.on_event = on_event;
    rp.user = w;
    if (kr_submit(ctx, &ser, p, &rp, NULL, &err) != KR_OK) fail_msg("%s", err.message);
    pthread_mutex_lock(&w->lock);
    while (!w->done) pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    assert_int_equal(w->status, KR_OK);
}

static void test_prefix_cache_quantised(void **state) {
    (void)state;
    for (int t = 1; t < 3; t++) {
        kr_test_engine E = load(g_demo_dir, k_dtypes[t]);
        kr_error err = { 0 };
        kr_forecast_params p = kr_forecast_default_params();
        p.pred_len = 8;
        p.paths = 3;
        p.seed = 77;
        p.max_context = 128;
        kr_series ser = kr_candles_slice(g_candles, 500, 100);
        waiter a, b;
        submit_wait(E.ctx, ser, &p, &a);
        kr_context_stats ss;
        kr_context_get_stats(E.ctx, &ss);
        /* One cached window of 100 rows, held as whole blocks: 5 layers × 112 rows × 128
         * values, K and V. */
        size_t n = (size_t)5 * HELD_ROWS(100) * 128;
        /* (plus the tokenizer decoder's f32 context of the same history, counted apart) */
        assert_int_equal(ss.prefix_cache_bytes - ss.prefix_cache_decoder_bytes,
                         t == 1 ? 2 * n * 2 : 2 * (n + n / 32 * 4));
        submit_wait(E.ctx, ser, &p, &b);
        assert_true(b.cached_tokens == ser.n);
        /* A context of its own (no shared cache) gives the same numbers. */
        kr_context *fresh = kr_test_context(E.model, 0, k_dtypes[t]);
        kr_forecast *alone = NULL;
        assert_int_equal(kr_forecast_run(fresh, &ser, &p, &alone, &err), KR_OK);
        kr_context_free(fresh);
        expect_same(alone, a.result, "context vs alone");
        expect_same(alone, b.result, "prefix-cache hit vs alone");
        kr_forecast_free(alone);
        kr_forecast_free(a.result);
        kr_forecast_free(b.result);
        kr_test_engine_free(&E);
    }
}

static void test_bad_dtype(void **state) {
    (void)state;
    char pred[1100], tok[1100];
    snprintf(pred, sizeof pred, "%s/predictor", g_tiny_dir);
    snprintf(tok, sizeof tok, "%s/tokenizer", g_tiny_dir);
    kr_model *m = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_model_load(pred, tok, NULL, &m, &err), KR_OK);
    kr_context_params cp = kr_context_default_params();
    cp.kv_dtype = "fp8";
    kr_context *ctx = (kr_context *)1;
    assert_int_equal(kr_context_create(m, &cp, &ctx, &err), KR_ERR_INVALID_ARG);
    assert_null(ctx);
    assert_non_null(strstr(err.message, "fp8"));
    kr_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_round_trip),
        cmocka_unit_test(test_int8_round_trip),
        cmocka_unit_test(test_attention_reads_dequantised),
        cmocka_unit_test(test_cached_equals_naive_tiny),
        cmocka_unit_test(test_cached_equals_naive_odd),
        cmocka_unit_test(test_cached_equals_naive_demo),
        cmocka_unit_test(test_close_to_f32_demo),
        cmocka_unit_test(test_prefix_cache_quantised),
        cmocka_unit_test(test_bad_dtype),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
