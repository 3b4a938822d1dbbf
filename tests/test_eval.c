/*
 * The eval layer (kronos/eval.h) through its public API: eval-quant of a model against
 * itself agrees everywhere (the statistics are wired to the right inputs); a quantised model
 * is compared on every window; bad files and parameters fail with a message naming the place;
 * bench times every (paths, mode) pair and writes a parseable JSON report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kronos.h"
#include "kronos/eval.h"
#include "market/candles.h"
#include "test_support.h"

static kr_model *g_ref, *g_q;
static kr_context *g_ref_ctx, *g_q_ctx;
static const char *g_data[2];

static kr_context *context_on(const kr_model *m) {
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = 2;
    kr_context *ctx = NULL;
    kr_error err = { 0 };
    if (kr_context_create(m, &cp, &ctx, &err) != KR_OK) fail_msg("context: %s", err.message);
    return ctx;
}

static int setup(void **state) {
    (void)state;
    static char pred[1100], tok[1100], a[1100], b[1100];
    snprintf(pred, sizeof pred, "%s", kr_test_fixture("tiny/predictor"));
    snprintf(tok, sizeof tok, "%s", kr_test_fixture("tiny/tokenizer"));
    snprintf(a, sizeof a, "%s", kr_test_fixture("csv/aapl_1d_2019.csv"));
    snprintf(b, sizeof b, "%s", kr_test_fixture("csv/spy_1h_2019_q1.csv"));
    g_data[0] = a;
    g_data[1] = b;
    kr_error err = { 0 };
    kr_model_params mp = kr_model_default_params();
    if (kr_model_load(pred, tok, &mp, &g_ref, &err) != KR_OK) fail_msg("%s", err.message);
    mp.quant = "int8";
    if (kr_model_load(pred, tok, &mp, &g_q, &err) != KR_OK) fail_msg("%s", err.message);
    g_ref_ctx = context_on(g_ref);
    g_q_ctx = context_on(g_q);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_context_free(g_ref_ctx);
    kr_context_free(g_q_ctx);
    kr_model_free(g_ref);
    kr_model_free(g_q);
    return 0;
}

static kr_eval_quant_params small_params(void) {
    kr_eval_quant_params p = kr_eval_quant_default_params();
    p.data = g_data;
    p.n_data = 2;
    p.windows = 3;
    p.lookback = 48;
    p.pred_len = 6;
    p.paths = 8;
    return p;
}

static cJSON *report_json(const kr_eval_quant_report *r) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    kr_error err = { 0 };
    assert_int_equal(kr_eval_quant_write_json(r, f, &err), KR_OK);
    fclose(f);
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    assert_non_null(j);
    return j;
}

static double number_at(const cJSON *j, const char *obj, const char *key) {
    const cJSON *o = obj ? cJSON_GetObjectItem(j, obj) : j;
    const cJSON *v = cJSON_GetObjectItem(o, key);
    if (!cJSON_IsNumber(v)) fail_msg("%s.%s is not a number", obj ? obj : "", key);
    return v->valuedouble;
}

static void test_model_against_itself_agrees_everywhere(void **state) {
    (void)state;
    kr_eval_quant_params p = small_params();
    kr_eval_quant_report *r = NULL;
    kr_error err = { 0 };
    kr_context *twin = context_on(g_ref);
    if (kr_eval_quant_run(g_ref_ctx, twin, &p, &r, &err) != KR_OK) fail_msg("%s", err.message);
    cJSON *j = report_json(r);
    assert_int_equal((int)number_at(j, NULL, "windows"), 6);
    assert_int_equal((int)number_at(j, "next_token", "positions"), 6 * 47);
    assert_true(number_at(j, "next_token", "s1_top1_agreement") == 1.0);
    assert_true(number_at(j, "next_token", "s2_top1_agreement") == 1.0);
    assert_true(number_at(j, "next_token", "s1_mean_kl") < 1e-9);
    assert_true(number_at(j, "forecast", "mae_vs_f32") == 0.0);
    assert_true(number_at(j, "forecast", "direction_agreement") == 1.0);
    assert_true(number_at(j, "forecast", "roc_auc_f32") ==
                number_at(j, "forecast", "roc_auc_quant"));
    const cJSON *ks = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "forecast"), "ks_path_returns");
    assert_true(cJSON_GetObjectItem(ks, "statistic")->valuedouble == 0.0);
    cJSON_Delete(j);
    kr_eval_quant_report_free(r);
    kr_context_free(twin);
}

static void test_quantised_model_is_measured_on_every_window(void **state) {
    (void)state;
    kr_eval_quant_params p = small_params();
    kr_eval_quant_report *r = NULL;
    kr_error err = { 0 };
    if (kr_eval_quant_run(g_ref_ctx, g_q_ctx, &p, &r, &err) != KR_OK) fail_msg("%s", err.message);
    cJSON *j = report_json(r);
    assert_string_equal(cJSON_GetObjectItem(j, "quant")->valuestring, "int8");
    double agree = number_at(j, "next_token", "s1_top1_agreement");
    assert_true(agree > 0.5 && agree <= 1.0);
    assert_true(number_at(j, "next_token", "s1_mean_kl") >= 0);
    char *md = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&md, &len);
    assert_int_equal(kr_eval_quant_write_markdown(r, f, &err), KR_OK);
    fclose(f);
    assert_non_null(strstr(md, "### int8"));
    assert_non_null(strstr(md, "KS two-sample"));
    free(md);
    cJSON_Delete(j);
    kr_eval_quant_report_free(r);
}

static void test_bad_inputs_name_the_place(void **state) {
    (void)state;
    kr_eval_quant_params p = small_params();
    const char *missing[1] = { "/nonexistent/candles.csv" };
    p.data = missing;
    p.n_data = 1;
    kr_eval_quant_report *r = NULL;
    kr_error err = { 0 };
    assert_int_not_equal(kr_eval_quant_run(g_ref_ctx, g_q_ctx, &p, &r, &err), KR_OK);
    assert_null(r);
    assert_non_null(strstr(err.message, "/nonexistent/candles.csv"));

    p = small_params();
    p.lookback = 600; /* past the predictor's window */
    assert_int_equal(kr_eval_quant_run(g_ref_ctx, g_q_ctx, &p, &r, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "lookback"));

    p = small_params();
    p.lookback = 500; /* the 2019 daily file has fewer rows than a window needs */
    p.pred_len = 400;
    assert_int_not_equal(kr_eval_quant_run(g_ref_ctx, g_q_ctx, &p, &r, &err), KR_OK);
    assert_non_null(strstr(err.message, "aapl_1d_2019.csv"));

    kr_bench_params bp = kr_bench_default_params();
    bp.repeat = 0;
    kr_bench_report *br = NULL;
    kr_series s = { 0 };
    assert_int_equal(kr_bench_run(g_ref_ctx, &s, 1, &bp, &br, &err), KR_ERR_INVALID_ARG);
    assert_null(br);
}

static int phases_started, phases_finished;
static void count_phases(const char *what, int finished, void *user) {
    (void)user;
    assert_non_null(what);
    if (finished)
        phases_finished++;
    else
        phases_started++;
}

static void test_bench_times_every_row(void **state) {
    (void)state;
    kr_candles *cs = NULL;
    kr_error err = { 0 };
    if (kr_candles_read_csv(g_data[0], &cs, &err) != KR_OK) fail_msg("%s", err.message);
    kr_series s[2];
    for (int i = 0; i < 2; i++) {
        s[i] = kr_candles_slice(cs, 10 * i, 40);
        s[i].future_timestamps = cs->timestamps + 10 * i + 40;
    }
    static const int paths[] = { 1, 3 };
    kr_bench_params bp = kr_bench_default_params();
    bp.paths = paths;
    bp.n_paths = 2;
    bp.pred_len = 4;
    bp.repeat = 2;
    bp.naive = 1;
    bp.label = "tiny";
    bp.lookback = 40;
    bp.progress = count_phases;
    phases_started = phases_finished = 0;
    kr_bench_report *r = NULL;
    if (kr_bench_run(g_ref_ctx, s, 2, &bp, &r, &err) != KR_OK) fail_msg("%s", err.message);
    /* Per path count: `repeat` cached runs and one naive run, each announced and ended. */
    assert_int_equal(phases_started, 6);
    assert_int_equal(phases_finished, 6);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(kr_bench_write(r, f, 1, &err), KR_OK);
    fclose(f);
    cJSON *j = cJSON_Parse(buf);
    assert_non_null(j);
    const cJSON *rows = cJSON_GetObjectItem(j, "results");
    assert_int_equal(cJSON_GetArraySize(rows), 4);
    for (int i = 0; i < 4; i++) {
        const cJSON *row = cJSON_GetArrayItem(rows, i);
        assert_int_equal((int)cJSON_GetObjectItem(row, "paths")->valuedouble, paths[i / 2]);
        assert_string_equal(cJSON_GetObjectItem(row, "mode")->valuestring,
                            i % 2 ? "naive" : "kv-cache");
        assert_true(cJSON_GetObjectItem(row, "seconds")->valuedouble > 0);
        /* Two series, pred_len 4: the cached path samples step 0 from the prefill and decodes
         * the 3 steps after it on every path; the naive path re-runs everything as prefill. */
        double decode = cJSON_GetObjectItem(row, "decode_tokens")->valuedouble;
        double prefill = cJSON_GetObjectItem(row, "prefill_tokens")->valuedouble;
        if (i % 2 == 0)
            assert_true(decode == 2.0 * paths[i / 2] * 3);
        else
            assert_true(decode == 0 && prefill > 2.0 * 40);
    }
    assert_non_null(cJSON_GetObjectItem(j, "isa"));
    cJSON_Delete(j);
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    assert_int_equal(kr_bench_write(r, f, 0, &err), KR_OK);
    fclose(f);
    assert_non_null(strstr(buf, "| 3 | naive |"));
    free(buf);
    kr_bench_report_free(r);
    kr_candles_free(cs);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_against_itself_agrees_everywhere),
        cmocka_unit_test(test_quantised_model_is_measured_on_every_window),
        cmocka_unit_test(test_bad_inputs_name_the_place),
        cmocka_unit_test(test_bench_times_every_row),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
