/*
 * The eval layer (kronos/eval.h) through its public API: eval-quant of a model against
 * itself agrees everywhere (the statistics are wired to the right inputs); a quantised model
 * is compared on every window; bad files and parameters fail with a message naming the place;
 * bench times every (paths, mode) pair and writes a parseable JSON report. Acceptance gates:
 * the model against itself passes strict gates, the int8 model fails a zero-KL gate with the
 * figure and the miss printed, and malformed gate files are refused naming file and key.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kronos.h"
#include "eval/draft_acceptance.h"
#include "kronos/eval.h"
#include "series/candles.h"
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
    /* As its own draft a model is always accepted: K + 1 tokens a pass, as many bytes. */
    assert_int_equal((int)number_at(j, "speculative_draft", "positions"), 6 * 47);
    assert_true(number_at(j, "speculative_draft", "token_draw_agreement") == 1.0);
    const cJSON *by_k =
        cJSON_GetObjectItem(cJSON_GetObjectItem(j, "speculative_draft"), "by_draft_length");
    assert_int_equal(cJSON_GetArraySize(by_k), KR_DRAFT_KS);
    for (int k = 0; k < KR_DRAFT_KS; k++) {
        const cJSON *o = cJSON_GetArrayItem(by_k, k);
        assert_int_equal((int)number_at(o, NULL, "k"), kr_draft_k[k]);
        assert_true(number_at(o, NULL, "tokens_per_f32_pass") == kr_draft_k[k] + 1);
        assert_true(fabs(number_at(o, NULL, "weight_bytes_per_token_vs_plain") - 1.0) < 1e-12);
    }
    assert_true(number_at(j, "forecast", "roc_auc_f32") ==
                number_at(j, "forecast", "roc_auc_quant"));
    const cJSON *ks = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "forecast"), "ks_path_returns");
    assert_true(cJSON_GetObjectItem(ks, "statistic")->valuedouble == 0.0);
    /* Risk control, both models side by side: the same P(up) separates outcomes the same. */
    const cJSON *risk = cJSON_GetObjectItem(j, "risk_control");
    assert_non_null(risk);
    assert_int_equal((int)(number_at(j, "risk_control", "windows_up") +
                           number_at(j, "risk_control", "windows_down")),
                     6);
    const cJSON *kf = cJSON_GetObjectItem(risk, "ks_f32"),
                *kq = cJSON_GetObjectItem(risk, "ks_quant");
    assert_true((cJSON_IsNull(kf) && cJSON_IsNull(kq)) || kf->valuedouble == kq->valuedouble);
    assert_true(number_at(j, "risk_control", "roc_auc_f32") ==
                number_at(j, "forecast", "roc_auc_f32"));
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
    /* The int8 draft: a smaller model, accepted mostly, a longer draft never yields less. */
    double draw = number_at(j, "speculative_draft", "token_draw_agreement");
    assert_true(draw > 0.5 && draw <= 1.0);
    double beta = number_at(j, "speculative_draft", "weight_bytes_ratio");
    assert_true(beta > 0.2 && beta < 0.6);
    const cJSON *by_k =
        cJSON_GetObjectItem(cJSON_GetObjectItem(j, "speculative_draft"), "by_draft_length");
    double prev = 1.0;
    for (int k = 0; k < KR_DRAFT_KS; k++) {
        double e = number_at(cJSON_GetArrayItem(by_k, k), NULL, "tokens_per_f32_pass");
        assert_true(e >= prev && e <= kr_draft_k[k] + 1);
        prev = e;
    }
    char *md = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&md, &len);
    assert_int_equal(kr_eval_quant_write_markdown(r, f, &err), KR_OK);
    fclose(f);
    assert_non_null(strstr(md, "### int8"));
    assert_non_null(strstr(md, "KS two-sample"));
    assert_non_null(strstr(md, "| draft length K | tokens per f32 pass |"));
    free(md);
    cJSON_Delete(j);
    kr_eval_quant_report_free(r);
}

/* One-hot logits: every draw takes the hot token whatever the uniform. */
static void one_hot(float *row, int v, int hot) {
    for (int i = 0; i < v; i++) row[i] = i == hot ? 50.0f : 0.0f;
}

/* A draft that disagrees at known positions gives the pass counts by hand: a pass from t
 * yields the accepted run (at most K) plus one f32 draw. */
static void test_draft_acceptance_counts_runs(void **state) {
    (void)state;
    enum { N = 10, V1 = 16, V2 = 8 };
    float p1[N * V1], q1[N * V1], p2[N * V2], q2[N * V2];
    for (int t = 0; t < N; t++) {
        one_hot(p1 + t * V1, V1, 5);
        one_hot(q1 + t * V1, V1, t == 3 ? 7 : 5); /* s1 differs at 3 */
        one_hot(p2 + t * V2, V2, 2);
        one_hot(q2 + t * V2, V2, t == 8 ? 1 : 2); /* s2 differs at 8 */
    }
    kr_sampler_params sp = { 1.0f, 0, 0.9f };
    kr_draft_acc acc = { 0 };
    kr_error err = { 0 };
    assert_int_equal(kr_draft_acceptance_add(&acc, p1, q1, p2, q2, N, V1, V2, &sp, 1, 0, &err),
                     KR_OK);
    assert_int_equal((int)acc.positions, N);
    assert_int_equal((int)acc.s1_agree, N - 1);
    assert_int_equal((int)acc.s2_agree, N - 1);
    assert_int_equal((int)acc.both_agree, N - 2);
    /* accepted: 1 1 1 0 1 1 1 1 0 1 */
    assert_int_equal((int)acc.rounds[0], 10); /* K = 1 from t = 0..9 */
    assert_int_equal((int)acc.tokens[0], 8 * 2 + 2 * 1);
    assert_int_equal((int)acc.rounds[1], 9); /* K = 2 from t = 0..8 */
    /* t: 0 1 2 3 4 5 6 7 8 -> 3 3 2 1 3 3 3 2 1 */
    assert_int_equal((int)acc.tokens[1], 21);
    assert_true(fabs(kr_draft_tokens_per_pass(&acc, 1) - 21.0 / 9.0) < 1e-12);
    assert_true(fabs(kr_draft_bytes_per_token(&acc, 1, 0.25) - 1.5 / (21.0 / 9.0)) < 1e-12);
    /* K = 8 from t = 0..2: runs 3, 2, 1 -> 4 + 3 + 2 */
    assert_int_equal((int)acc.rounds[3], 3);
    assert_int_equal((int)acc.tokens[3], 9);
    /* Nothing counted: no figure rather than a made-up one. */
    kr_draft_acc none = { 0 };
    assert_true(isnan(kr_draft_tokens_per_pass(&none, 0)));
    assert_true(isnan(kr_draft_bytes_per_token(&none, 0, 0.25)));
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
        /* Two series mix re-runs and decode in a step: no floor is claimed for them. */
        assert_null(cJSON_GetObjectItem(row, "floor_seconds"));
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

static kr_quant_gate *gate_of(const char *text) {
    kr_quant_gate *g = NULL;
    kr_error err = { 0 };
    if (kr_quant_gate_parse(text, strlen(text), "test-gate.json", &g, &err) != KR_OK)
        fail_msg("%s", err.message);
    return g;
}

static char *markdown_of(const kr_eval_quant_report *r) {
    char *md = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&md, &len);
    kr_error err = { 0 };
    assert_int_equal(kr_eval_quant_write_markdown(r, f, &err), KR_OK);
    fclose(f);
    return md;
}

static void test_gate_pass_and_fail(void **state) {
    (void)state;
    kr_eval_quant_params p = small_params();
    kr_eval_quant_report *self = NULL, *q = NULL;
    kr_error err = { 0 };
    kr_context *twin = context_on(g_ref);
    if (kr_eval_quant_run(g_ref_ctx, twin, &p, &self, &err) != KR_OK) fail_msg("%s", err.message);
    if (kr_eval_quant_run(g_ref_ctx, g_q_ctx, &p, &q, &err) != KR_OK) fail_msg("%s", err.message);
    /* The model against itself meets the strictest gates there are. */
    kr_quant_gate *strict = gate_of("{\"description\": \"strict\", \"s1_top1_agreement_min\": 1, "
                                    "\"s2_top1_agreement_min\": 1, \"s1_kl_max\": 0, "
                                    "\"ks_p_value_min\": 0.99, \"roc_auc_drop_max\": 0}");
    int failed = -1;
    assert_int_equal(kr_eval_quant_apply_gate(self, strict, &failed, &err), KR_OK);
    assert_int_equal(failed, 0);
    cJSON *j = report_json(self);
    const cJSON *g = cJSON_GetObjectItem(j, "gates");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(g, "passed")));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(g, "results")), 5);
    cJSON_Delete(j);
    char *md = markdown_of(self);
    assert_non_null(strstr(md, "Acceptance gates (test-gate.json): **pass**"));
    free(md);

    /* int8 moves the logits: a zero-KL gate fails, naming the gate, the figure and the miss;
     * the agreement gate at 0 holds. */
    kr_quant_gate *zero_kl = gate_of("{\"s1_kl_max\": 0, \"s1_top1_agreement_min\": 0}");
    assert_int_equal(kr_eval_quant_apply_gate(q, zero_kl, &failed, &err), KR_OK);
    assert_int_equal(failed, 1);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(kr_eval_quant_write_gate_failures(q, f, &err), KR_OK);
    fclose(f);
    assert_non_null(strstr(buf, "gate s1_kl_max failed: mean KL(f32 ‖ quant) s1 = "));
    assert_non_null(strstr(buf, "above the maximum 0 by "));
    assert_null(strstr(buf, "s1_top1_agreement_min"));
    free(buf);
    j = report_json(q);
    g = cJSON_GetObjectItem(j, "gates");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(g, "passed")));
    assert_int_equal((int)number_at(j, "gates", "failed"), 1);
    cJSON_Delete(j);
    md = markdown_of(q);
    assert_non_null(strstr(md, "**FAIL**"));
    assert_non_null(strstr(md, "| **fail** |"));
    free(md);
    /* One window: a single outcome class, so ROC-AUC is NaN — unmeasurable fails its gate. */
    kr_eval_quant_report *one = NULL;
    p.n_data = 1;
    p.windows = 1;
    if (kr_eval_quant_run(g_ref_ctx, twin, &p, &one, &err) != KR_OK) fail_msg("%s", err.message);
    kr_quant_gate *auc = gate_of("{\"roc_auc_drop_max\": 1}");
    assert_int_equal(kr_eval_quant_apply_gate(one, auc, &failed, &err), KR_OK);
    assert_int_equal(failed, 1);
    buf = NULL;
    f = open_memstream(&buf, &len);
    assert_int_equal(kr_eval_quant_write_gate_failures(one, f, &err), KR_OK);
    fclose(f);
    assert_non_null(strstr(buf, "could not be measured (NaN)"));
    free(buf);
    /* ... and the tables say "n/a" for it, never "nan". */
    md = markdown_of(one);
    assert_null(strstr(md, "nan"));
    assert_non_null(
        strstr(md, "| `roc_auc_drop_max` (ROC-AUC drop of P(up), f32 − quant) | n/a |"));
    free(md);
    kr_quant_gate_free(auc);
    kr_eval_quant_report_free(one);
    kr_quant_gate_free(strict);
    kr_quant_gate_free(zero_kl);
    kr_eval_quant_report_free(self);
    kr_eval_quant_report_free(q);
    kr_context_free(twin);
}

static void test_malformed_gate_files(void **state) {
    (void)state;
    static const struct {
        const char *text, *says;
    } bad[] = {
        { "{\"s1_kl_max\": 0.01,\n \"ks_p_value_min\": }", "not valid JSON (line 2)" },
        { "[0.95]", "must be a JSON object" },
        { "{\"s1_kl_max\": 0.01, \"top1_min\": 0.9}", "unknown gate 'top1_min' (known: " },
        { "{\"s1_kl_max\": 0.01, \"s1_kl_max\": 0.02}", "gate 's1_kl_max' is given twice" },
        { "{\"s1_kl_max\": \"0.01\"}", "gate 's1_kl_max' must be a number" },
        { "{\"s1_top1_agreement_min\": 95}", "gate 's1_top1_agreement_min' = 95 is outside 0..1" },
        { "{\"s1_kl_max\": -1}", "is outside 0..inf" },
        { "{}", "no gate thresholds" },
        { "{\"description\": \"nothing\"}", "no gate thresholds" },
        { "{\"description\": 3, \"s1_kl_max\": 1}", "'description' must be a string" },
        /* A second object (or anything) after the first would be ignored, its gates unapplied. */
        { "{\"s1_kl_max\": 0.01}{\"top1_min\": 0.9}", "text after the JSON object (line 1)" },
        { "{\"s1_kl_max\": 0.01}\n\n ,\"s2_kl_max\": 0}", "text after the JSON object (line 3)" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kr_quant_gate *g = NULL;
        kr_error err = { 0 };
        assert_int_not_equal(
            kr_quant_gate_parse(bad[i].text, strlen(bad[i].text), "gates.json", &g, &err), KR_OK);
        assert_null(g);
        if (!strstr(err.message, bad[i].says) || strncmp(err.message, "gates.json: ", 12) != 0)
            fail_msg("'%s' gave '%s', not '%s'", bad[i].text, err.message, bad[i].says);
    }
    kr_quant_gate *g = NULL;
    kr_error err = { 0 };
    assert_int_not_equal(kr_quant_gate_load("/nonexistent/gate.json", &g, &err), KR_OK);
    assert_non_null(strstr(err.message, "/nonexistent/gate.json"));
    /* The shipped defaults parse. */
    assert_int_equal(kr_quant_gate_load(KR_SOURCE_DIR "/deploy/quant-gate.json", &g, &err), KR_OK);
    kr_quant_gate_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_against_itself_agrees_everywhere),
        cmocka_unit_test(test_quantised_model_is_measured_on_every_window),
        cmocka_unit_test(test_draft_acceptance_counts_runs),
        cmocka_unit_test(test_bad_inputs_name_the_place),
        cmocka_unit_test(test_bench_times_every_row),
        cmocka_unit_test(test_gate_pass_and_fail),
        cmocka_unit_test(test_malformed_gate_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
