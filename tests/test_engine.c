/*
 * Engine invariants on our own random models (gen-random), the odd golden model (head_dim 52)
 * and the bundled demo model: the KV-cached path equals full recomputation bit for bit at
 * several lengths (inside and past max_context), seeded multi-path runs reproduce themselves,
 * a series gives the same paths alone or batched with others of different lengths, rolling
 * mode is a separate approximation, and bad requests get clear errors.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/forecast_internal.h"
#include "series/candles.h"
#include "model/normalize.h"
#include "model/weights.h"
#include "engine_helpers.h"
#include "test_support.h"

static char g_tiny_dir[1024];

static kr_test_engine load_dirs(const char *root) {
    return kr_test_engine_load(root, NULL, 0, NULL);
}

static kr_candles *g_candles;

static kr_series slice(int64_t start, int64_t n) { return kr_candles_slice(g_candles, start, n); }

static int setup(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    kr_error err = { 0 };
    if (!dir || kr_model_write_random(kr_random_shape_find("tiny"), 7, dir, &err) != KR_OK) {
        fprintf(stderr, "gen-random: %s\n", err.message);
        return -1;
    }
    snprintf(g_tiny_dir, sizeof g_tiny_dir, "%s", dir);
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

static kr_forecast *run(kr_context *ctx, kr_series s, const kr_forecast_params *p, int naive) {
    kr_seq_options opt = { .naive = naive };
    return kr_test_run_opt(ctx, &s, p, &opt);
}

/* Every sampled step's logits, bit for bit: a digest of the s1 and s2 logits of each
 * (path, step), so a difference too small to flip a token still shows. */
#define MAX_LOGIT_STEPS 512
typedef struct logit_digests {
    int v1, v2;
    uint64_t digest[MAX_LOGIT_STEPS];
    int window_len[MAX_LOGIT_STEPS];
    int seen;
} logit_digests;

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static void digest_step(void *user, int group, int path, int step, const float *s1_logits,
                        const float *s2_logits, int s1, int s2, int window_start, int window_len) {
    (void)group, (void)s1, (void)s2, (void)window_start;
    logit_digests *d = user;
    int i = path * 64 + step;
    assert_true(path < 8 && step < 64 && i < MAX_LOGIT_STEPS);
    uint64_t h = fnv1a(14695981039346656037ULL, s1_logits, (size_t)d->v1 * sizeof(float));
    d->digest[i] = fnv1a(h, s2_logits, (size_t)d->v2 * sizeof(float));
    d->window_len[i] = window_len;
    d->seen++;
}

static kr_forecast *run_digest(kr_context *ctx, kr_series s, const kr_forecast_params *p, int naive,
                               logit_digests *d) {
    kr_seq_options opt = { .naive = naive, .observer = digest_step, .observer_user = d };
    return kr_test_run_opt(ctx, &s, p, &opt);
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

/* KV cache == full recomputation, bit for bit, for sampled multi-path runs: tokens, paths and
 * every step's logits (past max_context the cached path re-runs its windows from kept
 * first-stage rows, the naive one from scratch). */
static void cached_equals_naive_quant(const char *root, int max_context, const char *quant) {
    kr_model_params mp = kr_model_default_params();
    mp.quant = quant;
    kr_test_engine E = kr_test_engine_load(root, &mp, 0, NULL);
    kr_model_info mi;
    kr_model_get_info(E.model, &mi);
    const int cases[][2] = {
        { 40, 8 }, { max_context - 5, 12 }, { max_context, 6 }, { max_context + 9, 7 }
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kr_forecast_params p = kr_forecast_default_params();
        p.lookback = cases[c][0];
        p.pred_len = cases[c][1];
        p.max_context = max_context;
        p.paths = 3;
        p.seed = 11 + c;
        p.temperature = 1.0f;
        p.top_p = 0.95f;
        kr_series s = slice(300, cases[c][0] + 5);
        static logit_digests da, db;
        da = db = (logit_digests){ .v1 = 1 << mi.s1_bits, .v2 = 1 << mi.s2_bits };
        kr_forecast *a = run_digest(E.ctx, s, &p, 0, &da), *b = run_digest(E.ctx, s, &p, 1, &db);
        char what[128];
        snprintf(what, sizeof what, "%s lookback %d pred_len %d ctx %d", root, cases[c][0],
                 cases[c][1], max_context);
        expect_same(a, b, what);
        assert_int_equal(da.seen, p.paths * p.pred_len);
        assert_int_equal(db.seen, da.seen);
        for (int i = 0; i < p.paths; i++)
            for (int t = 0; t < p.pred_len; t++)
                if (da.digest[i * 64 + t] != db.digest[i * 64 + t])
                    fail_msg("%s: path %d step %d (window %d): logits differ", what, i, t,
                             da.window_len[i * 64 + t]);
        kr_forecast_free(a);
        kr_forecast_free(b);
    }
    kr_test_engine_free(&E);
}

static void cached_equals_naive(const char *root, int max_context) {
    cached_equals_naive_quant(root, max_context, NULL);
}

static void test_cached_equals_naive_tiny(void **s) {
    (void)s;
    cached_equals_naive(g_tiny_dir, 64);
}
static void test_cached_equals_naive_odd(void **s) {
    (void)s;
    cached_equals_naive(kr_test_fixture("odd"), 48);
}
static void test_cached_equals_naive_demo(void **s) {
    (void)s;
    char root[1024];
    snprintf(root, sizeof root, "%s/models/kronos-demo", KR_SOURCE_DIR);
    cached_equals_naive(root, 96);
}
/* Quantised weights: int8 quantises activations per row and q4 dequantises weights only, so
 * a row's result does not depend on the rows computed with it (AMX for a re-run's rows, VNNI
 * for a new row alone) and kept rows still match. */
static void test_cached_equals_naive_demo_quant(void **s) {
    (void)s;
    char root[1024];
    snprintf(root, sizeof root, "%s/models/kronos-demo", KR_SOURCE_DIR);
    cached_equals_naive_quant(root, 96, "int8");
    cached_equals_naive_quant(root, 96, "q4");
}

static void test_seeded_reproducible(void **state) {
    (void)state;
    kr_test_engine E = load_dirs(g_tiny_dir);
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 10;
    p.paths = 8;
    p.seed = 42;
    kr_series s = slice(0, 120);
    kr_forecast *a = run(E.ctx, s, &p, 0), *b = run(E.ctx, s, &p, 0);
    expect_same(a, b, "same seed twice");
    /* Paths differ from each other, and another seed gives other paths. */
    assert_true(memcmp(a->gen_s1, a->gen_s1 + p.pred_len, p.pred_len * sizeof(int32_t)) != 0 ||
                memcmp(a->gen_s2, a->gen_s2 + p.pred_len, p.pred_len * sizeof(int32_t)) != 0);
    p.seed = 43;
    kr_forecast *c = run(E.ctx, s, &p, 0);
    assert_true(memcmp(a->gen_s1, c->gen_s1, (size_t)p.paths * p.pred_len * sizeof(int32_t)) != 0);
    /* Path k of an 8-path run equals path k of a 3-path run (one RNG stream per path). */
    p.seed = 42;
    p.paths = 3;
    kr_forecast *d = run(E.ctx, s, &p, 0);
    assert_memory_equal(a->gen_s1, d->gen_s1, 3 * p.pred_len * sizeof(int32_t));
    assert_memory_equal(a->pred_norm, d->pred_norm, 3 * (size_t)p.pred_len * 6 * sizeof(float));
    /* first_path extends a run: paths 3..7 of the 8-path run, on their own. */
    p.paths = 5;
    p.first_path = 3;
    kr_forecast *e = run(E.ctx, s, &p, 0);
    assert_memory_equal(a->gen_s1 + 3 * p.pred_len, e->gen_s1, 5 * p.pred_len * sizeof(int32_t));
    assert_memory_equal(a->gen_s2 + 3 * p.pred_len, e->gen_s2, 5 * p.pred_len * sizeof(int32_t));
    assert_memory_equal(a->pred_norm + 3 * (size_t)p.pred_len * 6, e->pred_norm,
                        5 * (size_t)p.pred_len * 6 * sizeof(float));
    kr_forecast_free(e);
    p.first_path = 0;
    /* Quantiles bracket the mean of the paths and are ordered. */
    double q10[60], q90[60];
    kr_error err = { 0 };
    assert_int_equal(kr_forecast_quantile(a, 0.1, q10, &err), KR_OK);
    assert_int_equal(kr_forecast_quantile(a, 0.9, q90, &err), KR_OK);
    for (int i = 0; i < 60; i++) assert_true(q10[i] <= q90[i]);
    assert_int_equal(kr_forecast_quantile(a, 1.5, q10, &err), KR_ERR_INVALID_ARG);
    kr_forecast_free(a);
    kr_forecast_free(b);
    kr_forecast_free(c);
    kr_forecast_free(d);
    kr_test_engine_free(&E);
}

/* A series returns the same paths alone or batched with series of other lengths. */
static void test_batch_invariance(void **state) {
    (void)state;
    kr_test_engine E = load_dirs(kr_test_fixture("odd"));
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 9;
    p.paths = 4;
    p.seed = 5;
    p.max_context = 64;
    kr_series batch[3] = { slice(100, 50), slice(700, 70), slice(1500, 33) };
    kr_forecast *together[3] = { 0 };
    kr_error err = { 0 };
    assert_int_equal(kr_forecast_run_batch(E.ctx, batch, 3, &p, NULL, together, &err), KR_OK);
    for (int i = 0; i < 3; i++) {
        kr_forecast *alone = run(E.ctx, batch[i], &p, 0);
        expect_same(alone, together[i], "alone vs batched");
        kr_forecast_free(alone);
        kr_forecast_free(together[i]);
    }
    kr_test_engine_free(&E);
}

/* Rolling mode equals exact mode until the window slides, then is its own approximation. */
static void test_rolling_window(void **state) {
    (void)state;
    kr_test_engine E = load_dirs(g_tiny_dir);
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 20;
    p.max_context = 50;
    p.top_k = 1;
    kr_series s = slice(0, 40);
    kr_forecast *exact = run(E.ctx, s, &p, 0);
    p.window = KR_WINDOW_ROLLING;
    kr_forecast *roll = run(E.ctx, s, &p, 0);
    /* Steps 0..10 see the same window (40 + 10 = 50 tokens). */
    assert_memory_equal(exact->gen_s1, roll->gen_s1, 11 * sizeof(int32_t));
    assert_memory_equal(exact->gen_s2, roll->gen_s2, 11 * sizeof(int32_t));
    kr_forecast_stats se, sr;
    kr_forecast_get_stats(exact, &se);
    kr_forecast_get_stats(roll, &sr);
    assert_true(se.window_recomputes == 9);
    assert_true(sr.window_recomputes == 0);
    kr_forecast_free(exact);
    kr_forecast_free(roll);
    kr_test_engine_free(&E);
}

/* The forecast is refused with `want`, a message holding needle, and err.field naming the
 * parameter or input at fault (field "": none), which a server answers 400 with. */
static void expect_error(kr_context *ctx, kr_series s, kr_forecast_params p, kr_status want,
                         const char *needle, const char *field) {
    kr_forecast *f = NULL;
    kr_error err = { 0 };
    kr_status st = kr_forecast_run(ctx, &s, &p, &f, &err);
    if (st != want || !strstr(err.message, needle))
        fail_msg("expected status %d with '%s', got %d: %s", want, needle, st, err.message);
    if (strcmp(err.field, field) != 0)
        fail_msg("'%s': field '%s', expected '%s'", err.message, err.field, field);
    assert_null(f);
}

/* One bad parameter at a time: each is refused, its message and its field naming it. */
static void test_bad_requests(void **state) {
    (void)state;
    kr_test_engine E = load_dirs(g_tiny_dir);
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 4;
    kr_series s = slice(0, 30);
    enum { PRED_LEN, PATHS, TEMPERATURE, TOP_P, TOP_K, LOOKBACK, MAX_CONTEXT };
    static const struct {
        int param;
        double value;
        const char *field; /* also what the message names */
    } bad[] = {
        { PRED_LEN, 0, "pred_len" }, { PRED_LEN, 600, "pred_len" },
        { PATHS, 0, "paths" },       { TEMPERATURE, 0, "temperature" },
        { TOP_P, 0, "top_p" },       { TOP_P, 1.5, "top_p" },
        { TOP_K, -1, "top_k" },      { LOOKBACK, 31, "lookback" },
        { LOOKBACK, 1, "lookback" }, { MAX_CONTEXT, 0, "max_context" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kr_forecast_params q = p;
        switch (bad[i].param) {
        case PRED_LEN: q.pred_len = (int)bad[i].value; break;
        case PATHS: q.paths = (int)bad[i].value; break;
        case TEMPERATURE: q.temperature = (float)bad[i].value; break;
        case TOP_P: q.top_p = (float)bad[i].value; break;
        case TOP_K: q.top_k = (int)bad[i].value; break;
        case LOOKBACK: q.lookback = (int)bad[i].value; break;
        case MAX_CONTEXT: q.max_context = (int)bad[i].value; break;
        }
        expect_error(E.ctx, s, q, KR_ERR_INVALID_ARG, bad[i].field, bad[i].field);
    }
    expect_error(E.ctx, slice(0, 1), p, KR_ERR_INVALID_ARG, "too few rows", "candles");
    double vals[3 * 6] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, NAN, 1, 1, 1, 1, 1, 1, 1, 1 };
    int64_t ts[3] = { 0, 60, 120 };
    kr_series bad_rows = {
        .n = 3, .timestamps = ts, .values = vals, .has_volume = 1, .has_amount = 1
    };
    expect_error(E.ctx, bad_rows, p, KR_ERR_INVALID_ARG, "row 1, field 'close'", "candles");
    vals[9] = 1;
    ts[2] = 60;
    expect_error(E.ctx, bad_rows, p, KR_ERR_INVALID_ARG, "row 2: timestamps", "candles");
    /* Not about one field: nothing named. */
    kr_error err = { 0 };
    kr_error_set_field(&err, KR_ERR_INVALID_ARG, "paths", "x");
    kr_error_set(&err, KR_ERR_IO, "y");
    assert_string_equal(err.field, "");
    kr_test_engine_free(&E);
}

/* has_volume 0 means volume and amount are 0 (kronos.h, the reference's rule), an amount
 * column given or not: it once fed the amount to the model. Same tokens and numbers. */
static void test_no_volume_ignores_amount(void **state) {
    (void)state;
    kr_test_engine E = load_dirs(g_tiny_dir);
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 5;
    p.paths = 2;
    p.seed = 3;
    kr_series a = slice(10, 80), b = a;
    assert_true(a.values[6 * 5 + 5] != 0.0); /* the data has amounts to ignore */
    a.has_volume = b.has_volume = 0;
    a.has_amount = 0;
    b.has_amount = 1;
    kr_forecast *fa = NULL, *fb = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_forecast_run(E.ctx, &a, &p, &fa, &err), KR_OK);
    assert_int_equal(kr_forecast_run(E.ctx, &b, &p, &fb, &err), KR_OK);
    assert_memory_equal(fa->gen_s1, fb->gen_s1, (size_t)p.paths * p.pred_len * sizeof(int32_t));
    assert_memory_equal(fa->gen_s2, fb->gen_s2, (size_t)p.paths * p.pred_len * sizeof(int32_t));
    assert_memory_equal(fa->pred_norm, fb->pred_norm,
                        (size_t)p.paths * p.pred_len * 6 * sizeof(float));
    kr_forecast_free(fa);
    kr_forecast_free(fb);
    kr_test_engine_free(&E);
}

/* kr_forecast_params.prenormalized: values the caller normalised as the reference does (what
 * its auto_regressive_inference takes) give the tokens of the raw run, and results left in
 * that scale, which the engine's own denormalisation turns into the raw run's numbers. */
static void test_prenormalized_input(void **state) {
    (void)state;
    kr_test_engine E = load_dirs(g_tiny_dir);
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 6;
    p.paths = 3;
    p.seed = 9;
    kr_series s = slice(20, 90);
    s.has_volume = s.has_amount = 1;
    kr_forecast *raw = run(E.ctx, s, &p, 0);
    const int64_t L = s.n;
    float *x = malloc((size_t)L * 6 * sizeof *x), *xn = malloc((size_t)L * 6 * sizeof *xn);
    double *v = malloc((size_t)L * 6 * sizeof *v);
    assert_true(x && xn && v);
    for (int64_t k = 0; k < L * 6; k++) x[k] = (float)s.values[k];
    float mean[6], std[6];
    kr_error err = { 0 };
    assert_int_equal(kr_norm_stats(x, L, mean, std, &err), KR_OK);
    kr_normalize(x, L, mean, std, p.clip, xn);
    for (int64_t k = 0; k < L * 6; k++) v[k] = xn[k];
    kr_series sn = s;
    sn.values = v;
    p.prenormalized = 1;
    kr_forecast *pre = run(E.ctx, sn, &p, 0);
    assert_memory_equal(raw->hist_s1, pre->hist_s1, (size_t)L * sizeof(int32_t));
    assert_memory_equal(raw->hist_s2, pre->hist_s2, (size_t)L * sizeof(int32_t));
    const size_t gen = (size_t)p.paths * p.pred_len;
    assert_memory_equal(raw->gen_s1, pre->gen_s1, gen * sizeof(int32_t));
    assert_memory_equal(raw->gen_s2, pre->gen_s2, gen * sizeof(int32_t));
    assert_memory_equal(raw->pred_norm, pre->pred_norm, gen * 6 * sizeof(float));
    float m[36], back[36];
    for (int k = 0; k < p.pred_len * 6; k++) m[k] = (float)pre->mean[k];
    kr_denormalize(m, p.pred_len, mean, std, back);
    for (int k = 0; k < p.pred_len * 6; k++) assert_true(back[k] == (float)raw->mean[k]);
    assert_true(pre->mean[0] != raw->mean[0]); /* normalised, not prices */
    p.prenormalized = 2;
    kr_forecast *bad = NULL;
    assert_int_equal(kr_forecast_run(E.ctx, &sn, &p, &bad, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "prenormalized must be 0 or 1, got 2"));
    kr_forecast_free(raw);
    kr_forecast_free(pre);
    free(x);
    free(xn);
    free(v);
    kr_test_engine_free(&E);
}

/* kr_model_params.no_mmap: the checkpoint is read at load, so rewriting its files in place
 * afterwards (cp over them, truncate) changes nothing; a mapped model would read the new bytes,
 * or fault on the pages the truncation removed. Same forecasts as the mapped load, bit for bit. */
static void rewrite_in_place(const char *dir, const char *part) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, part);
    FILE *f = fopen(path, "r+b"); /* the same inode, as cp and truncate leave it */
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 0), 0);
    assert_true(fwrite("garbage!", 1, 8, f) == 8);
    assert_int_equal(fclose(f), 0);
}

static void test_no_mmap_survives_rewrite(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    kr_error err = { 0 };
    assert_non_null(dir);
    if (kr_model_write_random(kr_random_shape_find("tiny"), 7, dir, &err) != KR_OK)
        fail_msg("gen-random: %s", err.message);
    kr_model_params mp = kr_model_default_params();
    mp.no_mmap = 1;
    kr_test_engine mapped = load_dirs(g_tiny_dir); /* the same seed: the same files */
    kr_test_engine read = kr_test_engine_load(dir, &mp, 0, NULL);
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 6;
    p.paths = 3;
    p.seed = 11;
    kr_forecast *want = run(mapped.ctx, slice(0, 40), &p, 0);
    kr_forecast *before = run(read.ctx, slice(0, 40), &p, 0);
    expect_same(want, before, "no_mmap load against the mapped one");
    rewrite_in_place(dir, "predictor");
    rewrite_in_place(dir, "tokenizer");
    kr_forecast *after = run(read.ctx, slice(0, 40), &p, 0);
    expect_same(want, after, "no_mmap model after its files were rewritten");
    /* The rewritten checkpoint itself is refused, not half-read. */
    kr_model *broken = NULL;
    char pred[1100], tok[1100];
    snprintf(pred, sizeof pred, "%s/predictor", dir);
    snprintf(tok, sizeof tok, "%s/tokenizer", dir);
    assert_int_equal(kr_model_load(pred, tok, &mp, &broken, &err), KR_ERR_FORMAT);
    assert_null(broken);
    assert_non_null(strstr(err.message, "model.safetensors"));
    kr_forecast_free(want);
    kr_forecast_free(before);
    kr_forecast_free(after);
    kr_test_engine_free(&mapped);
    kr_test_engine_free(&read);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cached_equals_naive_tiny),
        cmocka_unit_test(test_cached_equals_naive_odd),
        cmocka_unit_test(test_cached_equals_naive_demo),
        cmocka_unit_test(test_cached_equals_naive_demo_quant),
        cmocka_unit_test(test_seeded_reproducible),
        cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_rolling_window),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_no_volume_ignores_amount),
        cmocka_unit_test(test_prenormalized_input),
        cmocka_unit_test(test_no_mmap_survives_rewrite),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
