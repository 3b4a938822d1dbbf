/*
 * kr_backtest_run on real engines (the tiny random model of tests/fixtures/tiny; the bundled
 * demo model once): no lookahead — every row after an origin changed, that origin's forecast
 * is unchanged bit for bit, and moving the origin one bar earlier changes it; a backtest
 * forecast equals the live forecast of the same rows; results do not depend on the static
 * batching; progress and cancellation; a second model; every format renders (JSON parsed, the
 * CSV's rows counted); a demo model says so; and `kronos backtest` from the command line.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "eval/backtest_internal.h"
#include "kronos.h"
#include "kronos/analyst.h"
#include "kronos/backtest.h"
#include "kronos/store.h"
#include "json_schema.h"
#include "test_support.h"

static kr_model *g_model, *g_q;
static kr_context *g_ctx, *g_qctx;
static kr_candles *g_aapl;

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
    char pred[1100], tok[1100];
    snprintf(pred, sizeof pred, "%s", kr_test_fixture("tiny/predictor"));
    snprintf(tok, sizeof tok, "%s", kr_test_fixture("tiny/tokenizer"));
    kr_error err = { 0 };
    kr_model_params mp = kr_model_default_params();
    if (kr_model_load(pred, tok, &mp, &g_model, &err) != KR_OK) fail_msg("%s", err.message);
    mp.quant = "int8";
    if (kr_model_load(pred, tok, &mp, &g_q, &err) != KR_OK) fail_msg("%s", err.message);
    g_ctx = context_on(g_model);
    g_qctx = context_on(g_q);
    if (kr_candles_read_csv(kr_test_fixture("csv/aapl_1d_2019.csv"), &g_aapl, &err) != KR_OK)
        fail_msg("%s", err.message);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_context_free(g_ctx);
    kr_context_free(g_qctx);
    kr_model_free(g_model);
    kr_model_free(g_q);
    kr_candles_free(g_aapl);
    return 0;
}

static kr_backtest_params small(void) {
    kr_backtest_params p = kr_backtest_default_params();
    p.horizon = 6;
    p.paths = 4;
    p.bootstrap = 0;
    p.strategy_k = 0;
    p.seed = 11;
    return p;
}

static kr_backtest_report *run_on(kr_context *ctx, const kr_backtest_series *s, int n,
                                  const kr_backtest_params *p) {
    kr_backtest_report *r = NULL;
    kr_error err = { 0 };
    if (kr_backtest_run(ctx, s, n, p, &r, &err) != KR_OK) fail_msg("backtest: %s", err.message);
    return r;
}

/* A deep copy of c with every row after `row` changed: prices scaled (OHLC stays valid),
 * volumes doubled, stamps moved an hour on. */
static kr_candles *changed_after(const kr_candles *c, int64_t row) {
    kr_candles *d = calloc(1, sizeof *d);
    *d = *c;
    d->timestamps = malloc((size_t)c->n * sizeof *d->timestamps);
    d->values = malloc((size_t)c->n * KR_N_FEATURES * sizeof *d->values);
    memcpy(d->timestamps, c->timestamps, (size_t)c->n * sizeof *d->timestamps);
    memcpy(d->values, c->values, (size_t)c->n * KR_N_FEATURES * sizeof *d->values);
    for (int64_t i = row + 1; i < c->n; i++) {
        d->timestamps[i] += 3600;
        for (int f = KR_OPEN; f <= KR_CLOSE; f++)
            d->values[i * KR_N_FEATURES + f] *= 1.3 + 0.01 * (double)(i - row);
        d->values[i * KR_N_FEATURES + KR_VOLUME] *= 2;
        d->values[i * KR_N_FEATURES + KR_AMOUNT] *= 3;
    }
    return d;
}

/* What the model said at an origin: every field of the forecast alone (not the scores, which
 * also depend on what happened). */
static void forecast_fields(const kr_bt_fsum *f, double *out) {
    const double v[] = { f->mean_h,  f->median_h,        f->p10_h,        f->p90_h, f->exp_return,
                         f->prob_up, f->exp_return_hold, f->prob_up_hold, f->vol };
    memcpy(out, v, sizeof v);
}
#define N_FIELDS 9

static void test_no_lookahead(void **state) {
    (void)state;
    const int64_t row = 150;
    kr_backtest_params p = small();
    int64_t origin[1] = { g_aapl->timestamps[row] };
    p.origin_ts = origin;
    p.n_origin_ts = 1;
    kr_backtest_series s = { "AAPL", "1d", g_aapl, NULL };
    kr_backtest_report *a = run_on(g_ctx, &s, 1, &p);
    assert_int_equal(a->n_items, 1);
    assert_int_equal((int)a->items[0].row, row);

    kr_candles *future_changed = changed_after(g_aapl, row);
    kr_backtest_series s2 = { "AAPL", "1d", future_changed, NULL };
    kr_backtest_report *b = run_on(g_ctx, &s2, 1, &p);
    double fa[N_FIELDS], fb[N_FIELDS];
    forecast_fields(&a->items[0].f[KR_BT_F_MODEL], fa);
    forecast_fields(&b->items[0].f[KR_BT_F_MODEL], fb);
    assert_memory_equal(fa, fb, sizeof fa); /* bit for bit */
    /* The check can fail: what happened afterwards did change, and so did the scores. */
    assert_true(a->items[0].real_h != b->items[0].real_h);
    assert_true(a->items[0].f[KR_BT_F_MODEL].crps != b->items[0].f[KR_BT_F_MODEL].crps);

    /* The converse: one bar earlier, another forecast. */
    origin[0] = g_aapl->timestamps[row - 1];
    kr_backtest_report *c = run_on(g_ctx, &s, 1, &p);
    assert_int_equal((int)c->items[0].row, row - 1);
    double fc[N_FIELDS];
    forecast_fields(&c->items[0].f[KR_BT_F_MODEL], fc);
    assert_true(memcmp(fa, fc, sizeof fa) != 0);
    assert_true(fa[0] != fc[0]);
    kr_backtest_report_free(a);
    kr_backtest_report_free(b);
    kr_backtest_report_free(c);
    kr_candles_free(future_changed);
}

/* The backtest's forecast at an origin is the live forecast of the rows up to it: same view,
 * same calendar, same parameters. */
static void test_equals_live_forecast(void **state) {
    (void)state;
    const int64_t row = 120;
    kr_backtest_params p = small();
    p.ohlc = KR_OHLC_RAW;
    int64_t origin[1] = { g_aapl->timestamps[row] };
    p.origin_ts = origin;
    p.n_origin_ts = 1;
    kr_backtest_series s = { "AAPL", "1d", g_aapl, NULL };
    kr_backtest_report *r = run_on(g_ctx, &s, 1, &p);

    kr_error err = { 0 };
    int64_t future[6];
    assert_int_equal(kr_calendar_future(g_aapl->timestamps, row + 1, 6, future, NULL, &err), KR_OK);
    kr_series live = kr_candles_slice(g_aapl, 0, row + 1); /* lookback: every row (< 506) */
    live.future_timestamps = future;
    kr_forecast_params fp = kr_forecast_default_params();
    fp.pred_len = 6;
    fp.paths = 4;
    fp.seed = 11;
    fp.keep_paths = 1;
    kr_forecast *f = NULL;
    assert_int_equal(kr_forecast_run(g_ctx, &live, &fp, &f, &err), KR_OK);
    double q[6 * KR_N_FEATURES];
    assert_int_equal(kr_forecast_quantile(f, 0.5, q, &err), KR_OK);
    const double live_median = q[5 * KR_N_FEATURES + KR_CLOSE];
    assert_true(fabs(r->items[0].f[KR_BT_F_MODEL].median_h - live_median) <=
                1e-12 * fabs(live_median));
    int up = 0;
    for (int pth = 0; pth < 4; pth++)
        up += kr_forecast_path(f, pth)[5 * KR_N_FEATURES + KR_CLOSE] > r->items[0].last_close;
    assert_true(r->items[0].f[KR_BT_F_MODEL].prob_up == up / 4.0);
    kr_forecast_free(f);
    kr_backtest_report_free(r);
}

static void test_batching_invariant(void **state) {
    (void)state;
    kr_backtest_params p = small();
    p.every = 9;
    kr_backtest_series s = { "AAPL", "1d", g_aapl, NULL };
    p.static_batch_rows = p.paths; /* one series a batch */
    kr_backtest_report *a = run_on(g_ctx, &s, 1, &p);
    p.static_batch_rows = -1; /* everything at once */
    kr_backtest_report *b = run_on(g_ctx, &s, 1, &p);
    assert_int_equal(a->n_items, b->n_items);
    assert_true(a->n_items > 15);
    for (int i = 0; i < a->n_items; i++) {
        double x[N_FIELDS], y[N_FIELDS];
        forecast_fields(&a->items[i].f[KR_BT_F_MODEL], x);
        forecast_fields(&b->items[i].f[KR_BT_F_MODEL], y);
        assert_memory_equal(x, y, sizeof x);
    }
    assert_true(a->pooled[kr_bt_pooled_idx(a, KR_BT_F_MODEL, KR_BT_CRPS, 6)].value ==
                b->pooled[kr_bt_pooled_idx(b, KR_BT_F_MODEL, KR_BT_CRPS, 6)].value);
    kr_backtest_report_free(a);
    kr_backtest_report_free(b);
}

typedef struct watch {
    int calls, forecast_calls, done_seen, bad_order;
    int64_t last_done;
    int cancel_after; /* > 0: set the flag after this many forecast reports */
    int flag;
} watch;

static void on_progress(void *user, const kr_backtest_progress *pr) {
    watch *w = user;
    w->calls++;
    if (!strcmp(pr->phase, "forecast")) {
        if (pr->done < w->last_done || pr->done > pr->total) w->bad_order = 1;
        w->last_done = pr->done;
        if (++w->forecast_calls == w->cancel_after) __atomic_store_n(&w->flag, 1, __ATOMIC_SEQ_CST);
    }
    if (!strcmp(pr->phase, "done")) w->done_seen = 1;
}

static void test_progress_and_cancel(void **state) {
    (void)state;
    kr_backtest_params p = small();
    p.every = 7;
    p.static_batch_rows = 2 * p.paths;
    watch w = { 0 };
    p.progress = on_progress;
    p.progress_user = &w;
    kr_backtest_series s = { "AAPL", "1d", g_aapl, NULL };
    kr_backtest_report *r = run_on(g_ctx, &s, 1, &p);
    assert_true(w.forecast_calls >= 3 && !w.bad_order && w.done_seen);
    assert_int_equal(w.last_done, r->n_items);
    kr_backtest_report_free(r);

    watch c = { .cancel_after = 2 };
    p.progress_user = &c;
    kr_request_params rq = kr_request_default_params();
    rq.should_abort = kr_abort_flag;
    rq.abort_user = &c.flag;
    p.request = &rq;
    kr_error err = { 0 };
    r = NULL;
    assert_int_equal(kr_backtest_run(g_ctx, &s, 1, &p, &r, &err), KR_ERR_CANCELLED);
    assert_null(r);
    assert_false(c.done_seen);
}

/* Three series on the same dates (AAPL and two transforms of it): the cross-section, the
 * strategy and every format. */
static kr_candles *scaled(const kr_candles *c, double wiggle) {
    kr_candles *d = changed_after(c, -1);
    for (int64_t i = 0; i < c->n; i++) {
        d->timestamps[i] = c->timestamps[i];
        const double f = 1 + wiggle * sin((double)i * 0.37);
        for (int k = KR_OPEN; k <= KR_CLOSE; k++)
            d->values[i * KR_N_FEATURES + k] = c->values[i * KR_N_FEATURES + k] * f;
    }
    return d;
}

static void test_formats_and_compare(void **state) {
    (void)state;
    kr_candles *b = scaled(g_aapl, 0.05), *c = scaled(g_aapl, -0.08);
    kr_backtest_series s[3] = { { "AAPL", "1d", g_aapl, NULL },
                                { "B", "1d", b, NULL },
                                { "C", "1d", c, NULL } };
    kr_backtest_params p = small();
    p.every = 8;
    p.bootstrap = 50;
    p.strategy_k = 1;
    p.compare = g_qctx;
    p.compare_name = "tiny int8";
    kr_backtest_report *r = run_on(g_ctx, s, 3, &p);
    assert_true(r->has[KR_BT_F_COMPARE]);
    assert_true(r->strategy.ran);
    assert_true(r->ic_sum[KR_BT_F_MODEL].n > 10);
    int compare_vs_model = 0;
    for (int i = 0; i < r->n_dm; i++)
        compare_vs_model += r->dm[i].f == KR_BT_F_COMPARE && r->dm[i].b == KR_BT_F_MODEL;
    assert_true(compare_vs_model > 0);

    char *text = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_backtest_render(r, KR_BACKTEST_JSON, &text, &err), KR_OK);
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    assert_string_equal(cJSON_GetObjectItem(root, "object")->valuestring, "backtest");
    assert_int_equal(cJSON_GetObjectItem(root, "schema_version")->valueint,
                     KR_BACKTEST_SCHEMA_VERSION);
    const cJSON *counts = cJSON_GetObjectItem(root, "counts");
    assert_int_equal(cJSON_GetObjectItem(counts, "forecasts")->valueint,
                     (int)kr_backtest_report_forecasts(r));
    const cJSON *crps = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(root, "pooled"), "model"), "crps");
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(crps, "value")));
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(crps, "lo")));
    const cJSON *steps = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(root, "by_step"), "compare"), "crps");
    assert_int_equal(cJSON_GetArraySize(steps), 6);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "strategy"), "ran")));
    assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "cross_section"),
                                                       "series")) > 10);
    assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(root, "verdicts")) > 0);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(root, "demo")));
    cJSON *schema = kr_test_schema_load(KR_SOURCE_DIR "/docs/backtest.schema.json");
    char msg[1024];
    if (!kr_test_schema_validate(schema, schema, root, "$", msg, sizeof msg))
        fail_msg("docs/backtest.schema.json: %s", msg);
    cJSON_Delete(schema);
    cJSON_Delete(root);
    free(text);

    assert_int_equal(kr_backtest_render(r, KR_BACKTEST_CSV, &text, &err), KR_OK);
    int lines = 0;
    for (const char *q = text; *q; q++) lines += *q == '\n';
    assert_int_equal(lines, r->n_items + 1);
    assert_non_null(strstr(text, "compare_crps"));
    free(text);
    assert_int_equal(kr_backtest_render(r, KR_BACKTEST_MD, &text, &err), KR_OK);
    assert_non_null(strstr(text, "## Verdict"));
    assert_non_null(strstr(text, "tiny int8"));
    free(text);
    assert_int_equal(kr_backtest_render(r, KR_BACKTEST_HTML, &text, &err), KR_OK);
    assert_non_null(strstr(text, "<svg"));
    free(text);
    kr_backtest_report_free(r);
    kr_candles_free(b);
    kr_candles_free(c);
}

static void test_demo_model_says_so(void **state) {
    (void)state;
    char pred[1100], tok[1100];
    snprintf(pred, sizeof pred, "%s/models/kronos-demo/predictor", KR_SOURCE_DIR);
    snprintf(tok, sizeof tok, "%s/models/kronos-demo/tokenizer", KR_SOURCE_DIR);
    kr_model *m = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_model_load(pred, tok, NULL, &m, &err), KR_OK);
    kr_context *ctx = context_on(m);
    kr_backtest_params p = small();
    p.max_origins = 3;
    p.lookback = 64;
    p.predictor_dir = pred;
    kr_backtest_series s = { "AAPL", "1d", g_aapl, NULL };
    kr_backtest_report *r = run_on(ctx, &s, 1, &p);
    char *text = NULL;
    assert_int_equal(kr_backtest_render(r, KR_BACKTEST_JSON, &text, &err), KR_OK);
    cJSON *root = cJSON_Parse(text);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(root, "demo")));
    assert_non_null(strstr(cJSON_GetObjectItem(root, "demo_notice")->valuestring, "DEMO MODEL"));
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(root, "model"), "name")->valuestring,
        "kronos-demo");
    /* One symbol: no strategy, no cross-section; still the schema's shape, figures null. */
    cJSON *schema = kr_test_schema_load(KR_SOURCE_DIR "/docs/backtest.schema.json");
    char msg[1024];
    if (!kr_test_schema_validate(schema, schema, root, "$", msg, sizeof msg))
        fail_msg("docs/backtest.schema.json: %s", msg);
    const cJSON *strategy = cJSON_GetObjectItem(root, "strategy");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(strategy, "ran")));
    assert_true(
        cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(strategy, "sharpe"), "value")));
    cJSON_Delete(schema);
    cJSON_Delete(root);
    free(text);
    assert_int_equal(kr_backtest_render(r, KR_BACKTEST_MD, &text, &err), KR_OK);
    assert_non_null(strstr(text, "DEMO MODEL"));
    assert_true(strstr(text, "DEMO MODEL") < strstr(text, "## Verdict"));
    free(text);
    assert_int_equal(kr_backtest_render(r, KR_BACKTEST_HTML, &text, &err), KR_OK);
    assert_true(strstr(text, "DEMO MODEL") && strstr(text, "DEMO MODEL") < strstr(text, "<svg"));
    free(text);
    kr_backtest_report_free(r);
    kr_context_free(ctx);
    kr_model_free(m);
}

static void test_cli(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char args[4096];
    const kr_test_run *run = kr_test_kronos(dir, "", "backtest --help");
    assert_int_equal(run->code, 0);
    assert_non_null(strstr(run->out, "usage: kronos backtest"));
    run = kr_test_kronos(dir, "", "backtest");
    assert_int_equal(run->code, 2);
    snprintf(args, sizeof args, "backtest --input %s --every 2 --hold 3",
             kr_test_fixture("csv/aapl_1d_2019.csv"));
    run = kr_test_kronos(dir, "", args);
    assert_int_equal(run->code, 2);
    assert_non_null(strstr(run->err, "multiple"));
    snprintf(args, sizeof args, "backtest --input %s --paths 1",
             kr_test_fixture("csv/aapl_1d_2019.csv"));
    assert_int_equal(kr_test_kronos(dir, "", args)->code, 2);
    snprintf(args, sizeof args, "backtest --input %s/missing.csv", dir);
    run = kr_test_kronos(dir, "", args);
    assert_int_equal(run->code, 1);
    assert_non_null(strstr(run->err, "missing.csv"));
    char pred[1100], tok[1100], csv[1100]; /* kr_test_fixture's buffer is reused */
    snprintf(pred, sizeof pred, "%s", kr_test_fixture("tiny/predictor"));
    snprintf(tok, sizeof tok, "%s", kr_test_fixture("tiny/tokenizer"));
    snprintf(csv, sizeof csv, "%s", kr_test_fixture("csv/aapl_1d_2019.csv"));
    snprintf(args, sizeof args,
             "backtest --model %s --tokenizer %s --input X=%s --horizon 4 --paths 2 "
             "--max-origins 5 --bootstrap 20 --format csv --out %s/bt.csv --csv %s/bt2.csv",
             pred, tok, csv, dir, dir);
    run = kr_test_kronos(dir, "", args);
    if (run->code != 0) fail_msg("%s", run->err);
    char path[1200], buf[65536];
    snprintf(path, sizeof path, "%s/bt.csv", dir);
    kr_test_slurp(path, buf, sizeof buf);
    assert_non_null(strstr(buf, "symbol,interval,origin"));
    int lines = 0;
    for (const char *q = buf; *q; q++) lines += *q == '\n';
    assert_int_equal(lines, 6);
    assert_non_null(strstr(buf, "\nX,"));
    /* A symbol never stored. */
    snprintf(args, sizeof args, "backtest NOPE --db %s/none.db", dir);
    run = kr_test_kronos(dir, "", args);
    assert_int_equal(run->code, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_lookahead),
        cmocka_unit_test(test_equals_live_forecast),
        cmocka_unit_test(test_batching_invariant),
        cmocka_unit_test(test_progress_and_cancel),
        cmocka_unit_test(test_formats_and_compare),
        cmocka_unit_test(test_demo_model_says_so),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
