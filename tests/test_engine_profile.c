/*
 * The step profile (kr_step_profile): its GEMM FLOPs equal the count worked out independently
 * from the model's shape and the rows a forecast runs; the parts never add up to more than
 * the steps' wall time; the window re-run view appears exactly when exact mode re-runs the
 * window; turning it off changes no number of the forecast; the context's cumulative profile,
 * the forecast JSON and the Prometheus text carry it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/forecast_internal.h"
#include "engine/profile.h"
#include "engine_helpers.h"
#include "kronos/forecast_json.h"
#include "series/candles.h"
#include "test_support.h"

static kr_model *g_model;
static kr_candles *g_data;

static int setup(void **state) {
    (void)state;
    return kr_test_load_demo(&g_model, &g_data);
}

static int teardown(void **state) {
    (void)state;
    kr_model_free(g_model);
    kr_candles_free(g_data);
    return 0;
}

static kr_context *context(int profile) {
    kr_context_params cp = kr_context_default_params();
    assert_int_equal(cp.profile, 1); /* on by default */
    cp.n_threads = 2;
    cp.profile = profile;
    cp.prefix_cache = 0;
    kr_context *ctx = NULL;
    kr_error err = { 0 };
    if (kr_context_create(g_model, &cp, &ctx, &err) != KR_OK) fail_msg("context: %s", err.message);
    return ctx;
}

static kr_forecast *run(kr_context *ctx, int rows, int pred_len, int paths) {
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = pred_len;
    p.paths = paths;
    p.seed = 7;
    p.max_context = 128;
    kr_series s = kr_candles_slice(g_data, 0, rows);
    kr_forecast *f = NULL;
    kr_error err = { 0 };
    if (kr_forecast_run(ctx, &s, &p, &f, &err) != KR_OK) fail_msg("forecast: %s", err.message);
    return f;
}

/* The predictor's matrix-product FLOPs of a forecast whose window never slides: the window
 * prefilled once, then one row per path per later step; s1 logits at the window's end and
 * at each of those rows; the s2 layer once per sampled token. */
/* rows run through the predictor, of which `reused` kept their first stage (no fusion, no
 * first Q/K/V), last_rows with s1 logits, samples s2 passes. */
static double gemm_flops(double rows, double reused, double last_rows, double samples) {
    kr_model_info mi;
    kr_model_get_info(g_model, &mi);
    double d = mi.d_model, ff = mi.ff_dim, v1 = 1 << mi.s1_bits, v2 = 1 << mi.s2_bits;
    double per_row = mi.n_layers * (8 * d * d + 6 * d * ff) /* q k v out, w1 w3 w2 */
                     + 4 * d * d /* embedding fusion [2d -> d] */
                     + 4 * d * d; /* dep k, v of each context row */
    double first_stage = 4 * d * d + 6 * d * d; /* fusion, first block's q k v */
    return rows * per_row - reused * first_stage + last_rows * 2 * d * v1 +
           samples * (4 * d * d + 2 * d * v2);
}

static double expected_gemm_flops(int window, int pred_len, int paths) {
    double rows = window + (double)paths * (pred_len - 1);
    double last_rows = 1 + (double)paths * (pred_len - 1);
    return gemm_flops(rows, 0, last_rows, (double)paths * pred_len);
}

static void check_consistent(const kr_step_profile *p) {
    assert_int_equal(p->enabled, 1);
    assert_true(p->seconds_steps > 0);
    double sum = 0;
    for (int i = 0; i < KR_PART_COUNT; i++) {
        assert_non_null(kr_profile_part_name(i));
        assert_true(p->part[i].seconds >= 0);
        sum += p->part[i].seconds;
    }
    /* OTHER is the remainder, so the parts add up to the steps (to rounding). */
    assert_true(fabs(sum - p->seconds_steps) <= 1e-6 * p->seconds_steps + 1e-9);
    for (int i = 0; i < KR_PART_OTHER; i++) assert_true(p->part[i].calls > 0);
    assert_true(p->part[KR_PART_ATTENTION].flops > 0);
    assert_true(p->part[KR_PART_TOK_ENCODE].flops > 0);
    assert_true(p->part[KR_PART_TOK_DECODE].flops > 0);
    assert_true(p->seconds_pool_wait <= p->seconds_steps);
    assert_null(kr_profile_part_name(KR_PART_COUNT));
}

static void test_gemm_flops_counted_exactly(void **state) {
    (void)state;
    kr_context *ctx = context(1);
    const int rows = 100, pred_len = 8, paths = 3;
    kr_forecast *f = run(ctx, rows, pred_len, paths);
    kr_forecast_stats st;
    kr_forecast_get_stats(f, &st);
    check_consistent(&st.profile);
    double want = expected_gemm_flops(rows, pred_len, paths);
    assert_true(fabs(st.profile.part[KR_PART_GEMM].flops - want) <= 1e-9 * want);
    /* No window overflow: no re-run pass. */
    assert_int_equal(st.profile.rerun.calls, 0);
    assert_int_equal(st.window_recomputes, 0);
    assert_int_equal(st.reused_tokens, 0);
    /* The context's account holds this forecast's steps (and nothing else ran). */
    kr_context_stats cs;
    kr_context_get_stats(ctx, &cs);
    assert_int_equal(cs.profile.enabled, 1);
    assert_true(fabs(cs.profile.part[KR_PART_GEMM].flops - want) <= 1e-9 * want);
    kr_forecast_free(f);
    kr_context_free(ctx);
}

static void test_rerun_view_in_exact_mode(void **state) {
    (void)state;
    kr_context *ctx = context(1);
    kr_forecast *f = run(ctx, 128, 6, 2); /* the window is full: steps 1..5 re-run it */
    kr_forecast_stats st;
    kr_forecast_get_stats(f, &st);
    check_consistent(&st.profile);
    assert_int_equal(st.window_recomputes, 5);
    assert_int_equal(st.profile.rerun.calls, 5);
    /* Step i re-runs history rows [i, 128), all kept from the prefill, and each path's i
     * tokens, all but the newest kept from the steps before: Σ (128 − i) + 2·(i − 1). */
    assert_int_equal(st.prefill_tokens, 128 + 5 * 128 + 15);
    assert_int_equal(st.reused_tokens, 5 * 126 + 15);
    double want = gemm_flops(128 + 5 * 128 + 15, 5 * 126 + 15, 1 + 2 * 5, 2 * 6);
    assert_true(fabs(st.profile.part[KR_PART_GEMM].flops - want) <= 1e-9 * want);
    assert_true(st.profile.rerun.flops > 0);
    assert_true(st.profile.rerun.seconds <= st.profile.seconds_steps);
    /* The re-run passes' work is part of the predictor's parts, not extra. */
    double pred = st.profile.part[KR_PART_GEMM].flops + st.profile.part[KR_PART_ATTENTION].flops +
                  st.profile.part[KR_PART_NORM_ACT].flops;
    assert_true(st.profile.rerun.flops < pred);
    kr_forecast_free(f);
    kr_context_free(ctx);
}

static void test_off_changes_no_number(void **state) {
    (void)state;
    kr_context *on = context(1), *off = context(0);
    kr_forecast *a = run(on, 128, 6, 2), *b = run(off, 128, 6, 2);
    assert_memory_equal(a->gen_s1, b->gen_s1, (size_t)a->paths * a->pred_len * sizeof(int32_t));
    assert_memory_equal(a->gen_s2, b->gen_s2, (size_t)a->paths * a->pred_len * sizeof(int32_t));
    assert_memory_equal(a->pred_norm, b->pred_norm,
                        (size_t)a->paths * a->pred_len * 6 * sizeof(float));
    kr_forecast_stats st;
    kr_forecast_get_stats(b, &st);
    assert_int_equal(st.profile.enabled, 0);
    assert_true(st.profile.seconds_steps == 0 && st.profile.part[KR_PART_GEMM].calls == 0);
    kr_context_stats cs;
    kr_context_get_stats(off, &cs);
    assert_int_equal(cs.profile.enabled, 0);
    /* JSON: a profile object only when it was on. */
    kr_forecast_params p = kr_forecast_default_params();
    kr_forecast_json_params jp = kr_forecast_json_default_params();
    jp.params = &p;
    char *ja = NULL, *jb = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_forecast_json(a, &jp, &ja, NULL, &err), KR_OK);
    assert_int_equal(kr_forecast_json(b, &jp, &jb, NULL, &err), KR_OK);
    assert_non_null(strstr(ja, "\"profile\":{\"steps_seconds\":"));
    assert_non_null(strstr(ja, "\"gemm\":{\"seconds\":"));
    assert_non_null(strstr(ja, "\"rerun\":{"));
    assert_null(strstr(jb, "\"profile\""));
    free(ja);
    free(jb);
    /* Prometheus: the parts' seconds as counters. */
    char *text = NULL;
    assert_int_equal(kr_context_metrics(on, &text, &err), KR_OK);
    const char *line = strstr(text, "kronos_step_part_seconds_total{part=\"gemm\"} ");
    assert_non_null(line);
    assert_true(strtod(line + strlen("kronos_step_part_seconds_total{part=\"gemm\"} "), NULL) > 0);
    free(text);
    kr_forecast_free(a);
    kr_forecast_free(b);
    kr_context_free(on);
    kr_context_free(off);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_flops_counted_exactly),
        cmocka_unit_test(test_rerun_view_in_exact_mode),
        cmocka_unit_test(test_off_changes_no_number),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
