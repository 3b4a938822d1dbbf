/*
 * Anchored normalisation (engine/norm_anchor.h): the anchor rule (a first sight uses the exact
 * statistics; a window grown inside the rows given keeps its anchor's statistics until
 * refresh bars or max_context; a client that sends only the lookback never grows), and
 * through a context: a window grown by one bar keeps every earlier token, reuses all of them
 * from the prefix cache (one row of prefill), and forecasts exactly what the same request
 * computes without the cache. The default stays exact.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/norm_anchor.h"
#include "engine_helpers.h"
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
    kr_candles_free(g_data);
    kr_model_free(g_model);
    return 0;
}

/* Rows [0, n) of the fixture as a series. */
static kr_series rows(int64_t n) {
    kr_series s = kr_candles_series(g_data);
    s.n = n;
    return s;
}

static void choose(kr_norm_anchors *t, int64_t first, int64_t n, int lookback, int max_context,
                   int refresh, int *window, int *stats) {
    kr_series s = rows(first + n);
    kr_norm_anchor_choose(t, s.timestamps + first, s.values + first * KR_N_FEATURES, n, lookback,
                          max_context, refresh, window, stats);
}

static void test_anchor_rule(void **state) {
    (void)state;
    kr_norm_anchors *t = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_norm_anchors_create(&t, &err), KR_OK);
    int w = 0, a = 0;
    /* First sight: the lookback, over all of it (the exact statistics). */
    choose(t, 0, 300, 100, 512, 8, &w, &a);
    assert_int_equal(w, 100);
    assert_int_equal(a, 100);
    /* Bars 1..7 later: the window reaches back to the anchor, statistics over its 100 rows. */
    for (int bar = 1; bar < 8; bar++) {
        choose(t, 0, 300 + bar, 100, 512, 8, &w, &a);
        assert_int_equal(w, 100 + bar);
        assert_int_equal(a, 100);
    }
    /* Bar 8: refresh, a new anchor at the lookback; the next bar grows from it. */
    choose(t, 0, 308, 100, 512, 8, &w, &a);
    assert_int_equal(w, 100);
    assert_int_equal(a, 100);
    choose(t, 0, 309, 100, 512, 8, &w, &a);
    assert_int_equal(w, 101);
    assert_int_equal(a, 100);
    /* max_context caps the growth: 100 + 3 > 102 anchors anew. */
    choose(t, 0, 400, 100, 102, 64, &w, &a);
    assert_int_equal(w, 100);
    choose(t, 0, 402, 100, 102, 64, &w, &a);
    assert_int_equal(w, 102);
    assert_int_equal(a, 100);
    choose(t, 0, 403, 100, 102, 64, &w, &a);
    assert_int_equal(w, 100);
    assert_int_equal(a, 100);
    /* A client sending exactly the lookback: the anchor's first row is gone next bar. */
    choose(t, 1000, 100, 100, 512, 64, &w, &a);
    choose(t, 1001, 100, 100, 512, 64, &w, &a);
    assert_int_equal(w, 100);
    assert_int_equal(a, 100);
    int64_t reused = 0, made = 0;
    kr_norm_anchor_counts(t, &reused, &made);
    assert_int_equal(reused, 7 + 1 + 1);
    assert_int_equal(made, 1 + 1 + 1 + 1 + 2);
    kr_norm_anchors_free(t);
}

static kr_forecast *run(kr_context *ctx, int64_t n, kr_norm_mode norm) {
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 6;
    p.paths = 3;
    p.seed = 11;
    p.lookback = 128;
    p.norm = norm;
    kr_series s = rows(n);
    kr_forecast *f = NULL;
    kr_error err = { 0 };
    if (kr_forecast_run(ctx, &s, &p, &f, &err) != KR_OK) fail_msg("forecast: %s", err.message);
    return f;
}

static void expect_same_paths(const kr_forecast *a, const kr_forecast *b) {
    assert_int_equal(kr_forecast_paths(a), kr_forecast_paths(b));
    assert_int_equal(kr_forecast_lookback(a), kr_forecast_lookback(b));
    for (int p = 0; p < kr_forecast_paths(a); p++) {
        assert_memory_equal(kr_forecast_path_s1(a, p), kr_forecast_path_s1(b, p),
                            (size_t)kr_forecast_pred_len(a) * sizeof(int32_t));
        assert_memory_equal(kr_forecast_path(a, p), kr_forecast_path(b, p),
                            (size_t)kr_forecast_pred_len(a) * 6 * sizeof(double));
    }
}

static void test_grown_window_reuses_every_token(void **state) {
    (void)state;
    kr_context *ctx = kr_test_context(g_model, 2, NULL);
    kr_forecast *first = run(ctx, 400, KR_NORM_ANCHORED);
    assert_int_equal(kr_forecast_lookback(first), 128);
    assert_int_equal(kr_forecast_norm_rows(first), 128);
    kr_forecast *grown = run(ctx, 401, KR_NORM_ANCHORED);
    assert_int_equal(kr_forecast_lookback(grown), 129);
    assert_int_equal(kr_forecast_norm_rows(grown), 128);
    /* Same statistics: the grown window's first 128 tokens are the first window's. */
    assert_memory_equal(kr_forecast_history_s1(first), kr_forecast_history_s1(grown),
                        128 * sizeof(int32_t));
    assert_memory_equal(kr_forecast_history_s2(first), kr_forecast_history_s2(grown),
                        128 * sizeof(int32_t));
    kr_forecast_stats st;
    kr_forecast_get_stats(grown, &st);
    assert_int_equal(st.cached_tokens, 128);
    assert_int_equal(st.prefill_tokens, 1);

    /* The same two requests on a context without a prefix cache: the cache changed nothing
     * but the work. */
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = 2;
    cp.prefix_cache = 0;
    kr_context *bare = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_context_create(g_model, &cp, &bare, &err), KR_OK);
    kr_forecast *b1 = run(bare, 400, KR_NORM_ANCHORED), *b2 = run(bare, 401, KR_NORM_ANCHORED);
    kr_forecast_get_stats(b2, &st);
    assert_int_equal(st.cached_tokens, 0);
    expect_same_paths(first, b1);
    expect_same_paths(grown, b2);

    /* Exact stays the default and does not grow. */
    kr_forecast *exact = run(ctx, 401, KR_NORM_EXACT);
    assert_int_equal(kr_forecast_lookback(exact), 128);
    assert_int_equal(kr_forecast_norm_rows(exact), 128);
    assert_int_equal(kr_forecast_default_params().norm, KR_NORM_EXACT);
    kr_forecast_free(exact);
    kr_forecast_free(b1);
    kr_forecast_free(b2);
    kr_forecast_free(first);
    kr_forecast_free(grown);
    kr_context_free(bare);
    kr_context_free(ctx);
}

static void test_bad_params(void **state) {
    (void)state;
    kr_context *ctx = kr_test_context(g_model, 1, NULL);
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 4;
    kr_series s = rows(200);
    kr_forecast *f = NULL;
    kr_error err = { 0 };
    p.norm = (kr_norm_mode)7;
    assert_int_equal(kr_forecast_run(ctx, &s, &p, &f, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "norm"));
    p.norm = KR_NORM_ANCHORED;
    p.norm_refresh = -1;
    assert_int_equal(kr_forecast_run(ctx, &s, &p, &f, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "norm_refresh"));
    kr_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_anchor_rule),
        cmocka_unit_test(test_grown_window_reuses_every_token),
        cmocka_unit_test(test_bad_params),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
