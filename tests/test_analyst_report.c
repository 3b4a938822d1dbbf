/*
 * analyst/report, calibrate, analyze and the renderers, on the bundled demo model with few
 * paths and short horizons:
 *   - every horizon statistic recomputed here, independently, from the same forecast's paths;
 *   - calibration figures recomputed window by window from single kr_forecast_run calls
 *     (which also shows the one-batch calibration equals separate runs);
 *   - a batch analysis equals per-symbol analyses, and its ranking is ordered;
 *   - the JSON validated against docs/report.schema.json by a small validator for the subset
 *     of JSON Schema the schema uses (type, required, properties, additionalProperties,
 *     items, enum, minimum, maximum, minItems, oneOf, $ref);
 *   - Markdown and HTML carry the key numbers, the SVG chart and the disclaimer, nothing
 *     external, and the summary never advises.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analyst/analyze.h"
#include "analyst/render.h"
#include "analyst/report.h"
#include "analyst/summary.h"
#include "analyst/text.h"
#include "engine_helpers.h"
#include "json_schema.h"
#include "test_support.h"

#define MODEL_DIR KR_SOURCE_DIR "/models/kronos-demo"

static kr_model *g_model;
static kr_context *g_ctx; /* forecasts and analyses in the test itself */
static kr_candles *g_aapl, *g_msft, *g_btc;

static kr_candles *read_csv(const char *path) {
    kr_candles *c = NULL;
    kr_error err;
    if (kr_candles_read_csv(path, &c, &err) != KR_OK) fail_msg("%s", err.message);
    return c;
}

/* Keeps only the last n rows (cheaper forecasts, same code paths). */
static void keep_last(kr_candles *c, int64_t n) {
    memmove(c->timestamps, c->timestamps + (c->n - n), (size_t)n * sizeof(int64_t));
    memmove(c->values, c->values + (c->n - n) * 6, (size_t)n * 6 * sizeof(double));
    c->n = n;
}

static int setup(void **state) {
    (void)state;
    kr_error err;
    kr_model_params mp = kr_model_default_params();
    if (kr_model_load(MODEL_DIR "/predictor", MODEL_DIR "/tokenizer", &mp, &g_model, &err) !=
        KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = 2;
    if (kr_context_create(g_model, &cp, &g_ctx, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    g_aapl = read_csv(KR_SOURCE_DIR "/data/AAPL_1d.csv");
    g_msft = read_csv(KR_SOURCE_DIR "/data/MSFT_1d.csv");
    g_btc = read_csv(KR_SOURCE_DIR "/data/BTCUSDT_1h.csv");
    keep_last(g_aapl, 400);
    keep_last(g_msft, 300);
    keep_last(g_btc, 250);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_context_free(g_ctx);
    g_ctx = NULL;
    kr_model_free(g_model);
    kr_candles_free(g_aapl);
    kr_candles_free(g_msft);
    kr_candles_free(g_btc);
    return 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* numpy 'linear' quantile, written out again here rather than reusing analyst/stats. */
static double quantile(const double *v, int n, double q) {
    double *s = malloc((size_t)n * sizeof *s);
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_d);
    double pos = q * (n - 1);
    int lo = (int)pos;
    double r = lo + 1 < n ? s[lo] + (s[lo + 1] - s[lo]) * (pos - lo) : s[lo];
    free(s);
    return r;
}

static void close_to(double got, double want, double tol, const char *what) {
    if (!(fabs(got - want) <= tol * (1.0 + fabs(want))))
        fail_msg("%s: got %.12g, want %.12g", what, got, want);
}

static kr_report_meta test_meta(void) {
    kr_report_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.model_name, sizeof m.model_name, "kronos-demo");
    snprintf(m.quantization, sizeof m.quantization, "f32");
    snprintf(m.engine_version, sizeof m.engine_version, "%s", kr_version());
    m.d_model = 128;
    m.n_layers = 4;
    m.n_heads = 4;
    m.n_params = 1;
    m.max_context = 512;
    m.temperature = 1.0;
    m.top_p = 0.9;
    return m;
}

/* A report of one raw forecast (the engine's mean and quantiles, unchanged). */
static kr_status build_raw(const char *sym, const kr_candles *c, int L, const kr_forecast *f,
                           const kr_report_meta *meta, kr_report **r, kr_error *err) {
    kr_path_set *ps = NULL;
    kr_status st = kr_path_set_create(&f, 1, KR_OHLC_RAW, 0, &ps, err);
    if (st == KR_OK) st = kr_report_build(sym, "1d", c, L, ps, NULL, meta, r, err);
    kr_path_set_free(ps);
    return st;
}

static void test_report_numbers_independent(void **state) {
    (void)state;
    const int H = 6, N = 12, L = 200;
    kr_forecast_params fp = kr_forecast_default_params();
    fp.pred_len = H;
    fp.paths = N;
    fp.seed = 7;
    fp.keep_paths = 1;
    kr_series s = kr_candles_slice(g_aapl, g_aapl->n - L, L);
    kr_forecast *f = NULL;
    kr_error err;
    if (kr_forecast_run(g_ctx, &s, &fp, &f, &err) != KR_OK) fail_msg("%s", err.message);
    kr_report_meta meta = test_meta();
    kr_report *r = NULL;
    if (build_raw("AAPL", g_aapl, L, f, &meta, &r, &err) != KR_OK) fail_msg("%s", err.message);

    const double last = g_aapl->values[(g_aapl->n - 1) * 6 + KR_CLOSE];
    assert_true(r->last_close == last);
    assert_int_equal(r->last_ts, g_aapl->timestamps[g_aapl->n - 1]);
    assert_int_equal(r->horizon, H);
    assert_int_equal(r->paths, N);
    assert_int_equal(r->n_chart, KR_REPORT_CHART_BARS);
    assert_int_equal(r->chart_ts[KR_REPORT_CHART_BARS - 1], r->last_ts);

    /* Independent recomputation from the paths. */
    double ret[64], dd[64], vol[64];
    int up = 0;
    double rv;
    {
        double lr[64], m = 0, ss = 0;
        for (int i = 0; i < H; i++) {
            int64_t k = g_aapl->n - H + i;
            lr[i] = log(g_aapl->values[k * 6 + KR_CLOSE] / g_aapl->values[(k - 1) * 6 + KR_CLOSE]);
            m += lr[i];
        }
        m /= H;
        for (int i = 0; i < H; i++) ss += (lr[i] - m) * (lr[i] - m);
        rv = sqrt(ss / (H - 1));
    }
    int above = 0;
    for (int p = 0; p < N; p++) {
        const double *path = kr_forecast_path(f, p);
        double peak = last, worst = 0, prev = last, lr[64], m = 0, ss = 0;
        for (int t = 0; t < H; t++) {
            double c = path[t * 6 + KR_CLOSE];
            peak = c > peak ? c : peak;
            worst = (peak - c) / peak > worst ? (peak - c) / peak : worst;
            lr[t] = log(c / prev);
            prev = c;
            m += lr[t];
        }
        m /= H;
        for (int t = 0; t < H; t++) ss += (lr[t] - m) * (lr[t] - m);
        vol[p] = sqrt(ss / (H - 1));
        ret[p] = path[(H - 1) * 6 + KR_CLOSE] / last - 1;
        dd[p] = worst;
        up += path[(H - 1) * 6 + KR_CLOSE] > last;
        above += vol[p] > rv;
    }
    double mean = 0, var = 0;
    for (int p = 0; p < N; p++) mean += ret[p];
    mean /= N;
    for (int p = 0; p < N; p++) var += (ret[p] - mean) * (ret[p] - mean);
    close_to(r->prob_up, (double)up / N, 1e-15, "prob_up");
    close_to(r->expected_return, mean, 1e-12, "expected_return");
    close_to(r->return_std, sqrt(var / (N - 1)), 1e-12, "return_std");
    close_to(r->return_p10, quantile(ret, N, 0.1), 1e-12, "return_p10");
    close_to(r->return_p90, quantile(ret, N, 0.9), 1e-12, "return_p90");
    double q05 = quantile(ret, N, 0.05);
    close_to(r->var95, -q05, 1e-12, "var95");
    /* ES: mean of the returns at or below the 5% quantile. With 12 paths the quantile sits
     * between the worst and second-worst (position 0.55), so the tail is the worst path. */
    double sorted[64];
    memcpy(sorted, ret, sizeof sorted);
    qsort(sorted, (size_t)N, sizeof(double), cmp_d);
    close_to(r->es95, -sorted[0], 1e-12, "es95");
    assert_true(r->es95 >= r->var95);
    double ddm = 0;
    for (int p = 0; p < N; p++) ddm += dd[p];
    close_to(r->drawdown_mean, ddm / N, 1e-12, "drawdown_mean");
    close_to(r->drawdown_p50, quantile(dd, N, 0.5), 1e-12, "drawdown_p50");
    close_to(r->drawdown_p90, quantile(dd, N, 0.9), 1e-12, "drawdown_p90");
    assert_true(r->drawdown_p50 >= 0 && r->drawdown_p90 >= r->drawdown_p50);
    close_to(r->realized_vol_h, rv, 1e-12, "realized_vol_h");
    double vm = 0;
    for (int p = 0; p < N; p++) vm += vol[p];
    close_to(r->forecast_vol, vm / N, 1e-12, "forecast_vol");
    close_to(r->prob_vol_above, (double)above / N, 1e-15, "prob_vol_above");
    /* Bands: the engine's quantiles, ordered; the median path is p50. */
    double q[64 * 6];
    assert_int_equal(kr_forecast_quantile(f, 0.5, q, &err), KR_OK);
    for (int i = 0; i < H * 6; i++) {
        assert_true(r->fc_p50[i] == q[i]);
        assert_true(r->fc_p10[i] <= r->fc_p50[i] && r->fc_p50[i] <= r->fc_p90[i]);
    }
    /* The horizon close band is the return band times the last close. */
    close_to(r->fc_p10[(H - 1) * 6 + KR_CLOSE], last * (1 + r->return_p10), 1e-12, "p10 close");
    assert_memory_equal(r->fc_mean, kr_forecast_mean(f), (size_t)H * 6 * sizeof(double));
    /* The mean path's Monte Carlo error, per step and column: sd over the paths / sqrt(N). */
    for (int i = 0; i < H * 6; i++) {
        double m = 0, ss = 0;
        for (int p = 0; p < N; p++) m += kr_forecast_path(f, p)[i];
        m /= N;
        for (int p = 0; p < N; p++)
            ss += (kr_forecast_path(f, p)[i] - m) * (kr_forecast_path(f, p)[i] - m);
        close_to(r->fc_mean_se[i], sqrt(ss / (N - 1)) / sqrt((double)N), 1e-12, "fc_mean_se");
    }
    const size_t hc = (size_t)(H - 1) * 6 + KR_CLOSE;
    assert_true(r->fc_mean_se[hc] > 0);
    /* The bands' Monte Carlo errors, per step and column, written out again here: the order
     * statistics sqrt(N q (1 - q)) ranks either side of position q (N - 1), rounded outward
     * and clamped, their distance per rank times sqrt(N q (1 - q)). */
    const double qs[3] = { 0.1, 0.5, 0.9 };
    const double *band_se[3] = { r->fc_p10_se, r->fc_p50_se, r->fc_p90_se };
    for (int i = 0; i < H * 6; i++) {
        double col[64];
        for (int p = 0; p < N; p++) col[p] = kr_forecast_path(f, p)[i];
        qsort(col, (size_t)N, sizeof(double), cmp_d);
        for (int b = 0; b < 3; b++) {
            const double w = sqrt(N * qs[b] * (1 - qs[b])), c = qs[b] * (N - 1);
            int j = (int)floor(c - w), k = (int)ceil(c + w);
            j = j < 0 ? 0 : j;
            k = k > N - 1 ? N - 1 : k;
            close_to(band_se[b][i], (col[k] - col[j]) * w / (k - j), 1e-12, "band se");
        }
    }
    assert_true(r->fc_p10_se[hc] > 0 && r->fc_p90_se[hc] > 0);

    /* Summary: the numbers it quotes, with the mean path's error, and no advice. */
    assert_true(r->n_summary >= 4);
    char pct[32], ends[96];
    snprintf(pct, sizeof pct, "%.0f%% of %d sampled paths", r->prob_up * 100, N);
    assert_non_null(strstr(r->summary[0], pct));
    snprintf(ends, sizeof ends, "the mean path ends at %.2f \u00b1 %.2f.", r->fc_mean[hc],
             r->fc_mean_se[hc]);
    if (!strstr(r->summary[0], ends)) fail_msg("summary lacks '%s': %s", ends, r->summary[0]);
    /* The 80% band's ends with their errors. */
    char band[160];
    snprintf(band, sizeof band, "80%% of paths end between %.2f \u00b1 %.2f and %.2f \u00b1 %.2f (",
             r->fc_p10[hc], r->fc_p10_se[hc], r->fc_p90[hc], r->fc_p90_se[hc]);
    if (!strstr(r->summary[1], band)) fail_msg("summary lacks '%s': %s", band, r->summary[1]);
    const char *banned[] = { "buy", "sell", "should", "recommend", "advice" };
    for (int i = 0; i < r->n_summary; i++)
        for (size_t b = 0; b < sizeof banned / sizeof banned[0]; b++)
            if (strstr(r->summary[i], banned[b]))
                fail_msg("summary advises ('%s'): %s", banned[b], r->summary[i]);
    kr_report_free(r);

    /* Horizon 1 and one path: the figures that need two values are NaN, nothing crashes. */
    fp.pred_len = 1;
    fp.paths = 1;
    kr_forecast *f1 = NULL;
    assert_int_equal(kr_forecast_run(g_ctx, &s, &fp, &f1, &err), KR_OK);
    assert_int_equal(build_raw("AAPL", g_aapl, L, f1, &meta, &r, &err), KR_OK);
    assert_true(isnan(r->return_std) && isnan(r->forecast_vol) && isnan(r->prob_vol_above));
    assert_true(r->prob_up == 0.0 || r->prob_up == 1.0);
    assert_true(isnan(r->fc_mean_se[KR_CLOSE])); /* no error from one path: the figure alone */
    snprintf(ends, sizeof ends, "the mean path ends at %.2f.", r->fc_mean[KR_CLOSE]);
    if (!strstr(r->summary[0], ends)) fail_msg("summary lacks '%s': %s", ends, r->summary[0]);
    /* Nor for a band below KR_STAT_QUANTILE_SE_MIN_N paths: the ends alone. */
    assert_true(isnan(r->fc_p10_se[KR_CLOSE]) && isnan(r->fc_p50_se[KR_CLOSE]) &&
                isnan(r->fc_p90_se[KR_CLOSE]));
    snprintf(band, sizeof band, "80%% of paths end between %.2f and %.2f (", r->fc_p10[KR_CLOSE],
             r->fc_p90[KR_CLOSE]);
    if (!strstr(r->summary[1], band)) fail_msg("summary lacks '%s': %s", band, r->summary[1]);
    kr_report_free(r);
    kr_forecast_free(f1);
    kr_forecast_free(f);
}

/* Scores of one window recomputed from a single forecast run. */
static void test_calibration_independent(void **state) {
    (void)state;
    const int K = 3, H = 5;
    kr_forecast_params fp = kr_forecast_default_params();
    fp.pred_len = H;
    fp.paths = 8;
    fp.seed = 3;
    kr_calibration *cal = NULL;
    kr_error err;
    if (kr_calibrate(g_ctx, g_msft, K, &fp, 0, NULL, &cal, &err) != KR_OK)
        fail_msg("%s", err.message);
    assert_int_equal(cal->windows, K);
    assert_int_equal(cal->horizon, H);
    const kr_candles *c = g_msft;
    double m_cov = 0, n_cov = 0, m_ape = 0, n_ape = 0, m_hit = 0, n_hit = 0, m_step0 = 0;
    for (int j = 0; j < K; j++) {
        int64_t end = c->n - (int64_t)(K - j) * H;
        int L = (int)(end < 512 - H ? end : 512 - H);
        kr_series s = kr_candles_slice(c, end - L, L);
        s.future_timestamps = c->timestamps + end;
        kr_forecast *f = NULL;
        kr_forecast_params p1 = fp;
        p1.keep_paths = 1;
        assert_int_equal(kr_forecast_run(g_ctx, &s, &p1, &f, &err), KR_OK);
        assert_memory_equal(kr_forecast_timestamps(f), c->timestamps + end,
                            (size_t)H * sizeof(int64_t));
        double p10[64 * 6], p90[64 * 6];
        assert_int_equal(kr_forecast_quantile(f, 0.1, p10, &err), KR_OK);
        assert_int_equal(kr_forecast_quantile(f, 0.9, p90, &err), KR_OK);
        const double last = c->values[(end - 1) * 6 + KR_CLOSE];
        const double *mean = kr_forecast_mean(f);
        assert_int_equal(cal->window[j].history_end_ts, c->timestamps[end - 1]);
        assert_int_equal(cal->window[j].lookback, L);
        for (int k = 0; k < H; k++) {
            double real = c->values[(end + k) * 6 + KR_CLOSE];
            /* naive band from (k+1)-bar returns inside the lookback */
            double rets[600];
            int nr = 0;
            double drift = 0;
            for (int64_t i = end - L; i + k + 1 < end; i++) {
                rets[nr] = c->values[(i + k + 1) * 6 + KR_CLOSE] / c->values[i * 6 + KR_CLOSE] - 1;
                drift += rets[nr++];
            }
            drift /= nr;
            double nlo = last * (1 + quantile(rets, nr, 0.1)),
                   nhi = last * (1 + quantile(rets, nr, 0.9));
            int m_in = real >= p10[k * 6 + KR_CLOSE] && real <= p90[k * 6 + KR_CLOSE];
            m_cov += m_in;
            if (k == 0) m_step0 += m_in;
            n_cov += real >= nlo && real <= nhi;
            m_ape += fabs(mean[k * 6 + KR_CLOSE] - real) / real;
            n_ape += fabs(last - real) / real;
            if (k == H - 1) {
                double mv = mean[k * 6 + KR_CLOSE] - last, rv = real - last;
                m_hit += (mv > 0) == (rv > 0) && (mv < 0) == (rv < 0);
                n_hit += (drift > 0) == (rv > 0) && (drift < 0) == (rv < 0);
                close_to(cal->window[j].realized_close, real, 0, "realized close");
                close_to(cal->window[j].model_close, mean[k * 6 + KR_CLOSE], 0, "model close");
                close_to(cal->window[j].naive_p10, nlo, 1e-12, "naive p10");
                close_to(cal->window[j].naive_p90, nhi, 1e-12, "naive p90");
                close_to(cal->window[j].naive_drift, drift, 1e-12, "naive drift");
            }
        }
        kr_forecast_free(f);
    }
    close_to(cal->model.coverage, m_cov / (K * H), 1e-15, "model coverage");
    close_to(cal->naive.coverage, n_cov / (K * H), 1e-15, "naive coverage");
    close_to(cal->model.coverage_by_step[0], m_step0 / K, 1e-15, "model coverage step 1");
    close_to(cal->model.mape, m_ape / (K * H), 1e-12, "model mape");
    close_to(cal->naive.mape, n_ape / (K * H), 1e-12, "naive mape");
    close_to(cal->model.direction_hit_rate, m_hit / K, 1e-15, "model hit rate");
    close_to(cal->naive.direction_hit_rate, n_hit / K, 1e-15, "naive hit rate");
    kr_calibration_free(cal);

    /* Too little history for the windows: a clear error. */
    kr_candles short_c = *g_msft;
    short_c.n = 40;
    assert_int_equal(kr_calibrate(g_ctx, &short_c, 10, &fp, 0, NULL, &cal, &err),
                     KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "need at least"));
}

/* ---------------------------------------------------------------- JSON Schema subset */

/* The validator is tests/support/json_schema.c (the backtest report's test uses it too). */
#define validate kr_test_schema_validate

static cJSON *load_schema(void) {
    return kr_test_schema_load(KR_SOURCE_DIR "/docs/report.schema.json");
}

static void expect_valid(const cJSON *schema, const char *json) {
    cJSON *doc = cJSON_Parse(json);
    assert_non_null(doc);
    char msg[1024];
    if (!validate(schema, schema, doc, "$", msg, sizeof msg)) fail_msg("schema violation: %s", msg);
    cJSON_Delete(doc);
}

static void test_validator_rejects(void **state) {
    (void)state;
    /* The validator itself must be able to fail, or the schema test proves nothing. */
    cJSON *schema = load_schema();
    char msg[512];
    const char *bad[] = {
        "{}",
        "{\"schema_version\": 2, \"generated_at\": \"x\", \"engine\": {\"name\": \"kronos\", "
        "\"version\": \"1\"}, "
        "\"disclaimer\": \"d\", \"reports\": [], \"ranking\": []}",
        "{\"schema_version\": 1, \"generated_at\": \"x\", \"engine\": {\"name\": \"kronos\", "
        "\"version\": \"1\"}, "
        "\"disclaimer\": \"d\", \"reports\": [{}], \"ranking\": [{}], \"extra\": 1}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *doc = cJSON_Parse(bad[i]);
        assert_non_null(doc);
        assert_false(validate(schema, schema, doc, "$", msg, sizeof msg));
        cJSON_Delete(doc);
    }
    cJSON_Delete(schema);
}

/* ---------------------------------------------------------------- batch + renderers */

static kr_report_set *analyze3(int calibrate, int horizon) {
    kr_analyze_item items[3] = { { "MSFT", "1d", g_msft, NULL, NULL },
                                 { "AAPL", "1d", g_aapl, NULL, NULL },
                                 { "BTCUSDT", "1h", g_btc, NULL, NULL } };
    kr_analyze_params p = kr_analyze_default_params();
    p.horizon = horizon;
    p.paths = 8;
    p.max_paths = 8; /* exactly 8: no adaptive rounds */
    p.seed = 11;
    p.calibrate = calibrate;
    p.predictor_dir = MODEL_DIR "/predictor";
    p.tokenizer_dir = MODEL_DIR "/tokenizer";
    kr_report_set *set = NULL;
    kr_error err;
    if (kr_analyze(g_ctx, items, 3, &p, &set, &err) != KR_OK) fail_msg("%s", err.message);
    return set;
}

/* What kr_analyze refuses: an ohlc mode that is neither (it was reported as "raw" while the
 * path set averaged as neither), and an item with no symbol (said to have "no history"). */
static void test_analyze_arguments(void **state) {
    (void)state;
    kr_analyze_params p = kr_analyze_default_params();
    p.horizon = 4;
    p.paths = 4;
    p.max_paths = 4;
    p.predictor_dir = MODEL_DIR "/predictor";
    p.tokenizer_dir = MODEL_DIR "/tokenizer";
    kr_report_set *set = NULL;
    kr_error err = { 0 };
    kr_analyze_item items[2] = { { "AAPL", "1d", g_aapl, NULL, NULL },
                                 { NULL, NULL, g_msft, NULL, NULL } };
    p.ohlc = (kr_ohlc_mode)7;
    assert_int_equal(kr_analyze(g_ctx, items, 1, &p, &set, &err), KR_ERR_INVALID_ARG);
    assert_null(set);
    assert_non_null(strstr(err.message, "ohlc"));
    p.ohlc = KR_OHLC_CONSISTENT;
    assert_int_equal(kr_analyze(g_ctx, items, 2, &p, &set, &err), KR_OK);
    assert_int_equal(set->n_failures, 1);
    if (!strstr(set->failures[0].message, "item 1 has no symbol"))
        fail_msg("failure: %s", set->failures[0].message);
    kr_report_set_free(set);
}

/* The request's deadline covers the whole analysis, counted from its start: time spent
 * before a round (here in the progress callback, standing in for earlier rounds and
 * calibrations) is not given back to the next one. Each forecast call once got the whole
 * deadline_s anew, so a server's analysis could run many times its request_timeout_s. */
static void sleep_past_deadline(void *user, int step, int n_steps, const char *what) {
    (void)n_steps;
    (void)what;
    if (step == 0) usleep((useconds_t)(*(const double *)user * 1e6) + 50000);
}

static void test_analysis_deadline_covers_all(void **state) {
    (void)state;
    double deadline_s = 0.2;
    kr_request_params rp = kr_request_default_params();
    rp.deadline_s = deadline_s;
    kr_analyze_params p = kr_analyze_default_params();
    p.horizon = 4;
    p.paths = 4;
    p.max_paths = 4;
    p.predictor_dir = MODEL_DIR "/predictor";
    p.tokenizer_dir = MODEL_DIR "/tokenizer";
    p.request = &rp;
    p.progress = sleep_past_deadline;
    p.progress_user = &deadline_s;
    kr_analyze_item items[1] = { { "AAPL", "1d", g_aapl, NULL, NULL } };
    kr_report_set *set = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_analyze(g_ctx, items, 1, &p, &set, &err), KR_ERR_TIMEOUT);
    assert_null(set);
    if (!strstr(err.message, "deadline")) fail_msg("%s", err.message);
    /* The same with time to spare runs. */
    deadline_s = 0;
    rp.deadline_s = 600;
    assert_int_equal(kr_analyze(g_ctx, items, 1, &p, &set, &err), KR_OK);
    kr_report_set_free(set);
}

/* Adaptive paths: a symbol's rounds are its own, so its report is the same alone or beside
 * others that need more paths (each once got the largest request among them: AAPL ended at
 * 674 paths alone and 602 in a batch of four). */
static void test_adaptive_paths_batch_independent(void **state) {
    (void)state;
    kr_analyze_params p = kr_analyze_default_params();
    p.horizon = 4;
    p.paths = 8;
    p.max_paths = 96;
    p.target_prob_se = 0.06;
    p.target_var_rel_se = 0.5;
    p.seed = 3;
    p.predictor_dir = MODEL_DIR "/predictor";
    p.tokenizer_dir = MODEL_DIR "/tokenizer";
    kr_analyze_item items[3] = { { "MSFT", "1d", g_msft, NULL, NULL },
                                 { "AAPL", "1d", g_aapl, NULL, NULL },
                                 { "BTCUSDT", "1h", g_btc, NULL, NULL } };
    kr_report_set *all = NULL, *alone = NULL;
    kr_error err;
    assert_int_equal(kr_analyze(g_ctx, items, 3, &p, &all, &err), KR_OK);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(kr_analyze(g_ctx, &items[k], 1, &p, &alone, &err), KR_OK);
        const kr_report *a = all->reports[k], *b = alone->reports[0];
        assert_string_equal(a->symbol, b->symbol);
        if (a->paths != b->paths || a->prob_up != b->prob_up ||
            a->expected_return != b->expected_return)
            fail_msg("%s: %d paths in the batch, %d alone (P(up) %.4f / %.4f)", a->symbol, a->paths,
                     b->paths, a->prob_up, b->prob_up);
        kr_report_set_free(alone);
    }
    kr_report_set_free(all);
}

static void test_batch_equals_single_and_ranks(void **state) {
    (void)state;
    kr_report_set *set = analyze3(0, 5);
    assert_int_equal(set->n, 3);
    assert_string_equal(set->reports[1]->symbol, "AAPL");
    assert_string_equal(set->reports[1]->meta.model_name, "kronos-demo");
    assert_int_equal(set->reports[1]->meta.d_model, 128);
    assert_int_equal(set->reports[1]->lookback, 400); /* all 400 rows < 512 - 5 */
    /* Grouped by interval (1h before 1d), expected return descending within a group. */
    assert_string_equal(set->reports[set->rank[0]]->interval, "1h");
    for (int k = 1; k < 3; k++) {
        const kr_report *a = set->reports[set->rank[k - 1]], *b = set->reports[set->rank[k]];
        if (!strcmp(a->interval, b->interval)) {
            assert_true(a->expected_return >= b->expected_return);
            assert_int_equal(b->group_rank, a->group_rank + 1);
        } else {
            assert_int_equal(b->group_rank, 1);
        }
    }
    /* The AAPL report from the batch equals one from a lone analysis. */
    kr_analyze_item one = { "AAPL", "1d", g_aapl, NULL, NULL };
    kr_analyze_params p = kr_analyze_default_params();
    p.horizon = 5;
    p.paths = 8;
    p.max_paths = 8;
    p.seed = 11;
    kr_report_set *solo = NULL;
    kr_error err;
    assert_int_equal(kr_analyze(g_ctx, &one, 1, &p, &solo, &err), KR_OK);
    const kr_report *a = set->reports[1], *b = solo->reports[0];
    assert_true(a->expected_return == b->expected_return && a->var95 == b->var95 &&
                a->prob_up == b->prob_up);
    assert_memory_equal(a->fc_p90, b->fc_p90, (size_t)5 * 6 * sizeof(double));
    kr_report_set_free(solo);

    /* Too few rows: the error names the symbol. */
    kr_candles tiny = *g_aapl;
    tiny.n = 10;
    kr_analyze_item bad = { "TINY", "1d", &tiny, NULL, NULL };
    assert_int_equal(kr_analyze(g_ctx, &bad, 1, &p, &solo, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "TINY 1d: 10 rows"));
    kr_report_set_free(set);
}

static void test_renderers(void **state) {
    (void)state;
    kr_report_set *set = analyze3(2, 4);
    cJSON *schema = load_schema();
    kr_error err;
    char *json = NULL, *md = NULL, *html = NULL;
    assert_int_equal(kr_render(set, KR_FORMAT_JSON, &json, &err), KR_OK);
    assert_int_equal(kr_render(set, KR_FORMAT_MD, &md, &err), KR_OK);
    assert_int_equal(kr_render(set, KR_FORMAT_HTML, &html, &err), KR_OK);
    expect_valid(schema, json);

    /* JSON numbers are the report's. */
    cJSON *doc = cJSON_Parse(json);
    const kr_report *r = set->reports[1];
    cJSON *jr = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "reports"), 1);
    cJSON *st = cJSON_GetObjectItem(jr, "statistics");
    close_to(cJSON_GetObjectItem(st, "prob_up")->valuedouble, r->prob_up, 1e-15, "json prob_up");
    close_to(cJSON_GetObjectItem(st, "expected_return_pct")->valuedouble, 100 * r->expected_return,
             1e-12, "json er");
    close_to(cJSON_GetObjectItem(st, "var95_pct")->valuedouble, 100 * r->var95, 1e-12, "json var");
    cJSON *steps = cJSON_GetObjectItem(cJSON_GetObjectItem(jr, "forecast"), "steps");
    assert_int_equal(cJSON_GetArraySize(steps), 4);
    cJSON *p90 = cJSON_GetObjectItem(cJSON_GetArrayItem(steps, 3), "p90");
    close_to(cJSON_GetObjectItem(p90, "close")->valuedouble, r->fc_p90[3 * 6 + KR_CLOSE], 1e-15,
             "json p90");
    /* Each step's mean candle carries its Monte Carlo error, and Markdown / HTML print the
     * mean close with it ("207.57 ± 0.45") in the per-step table. */
    for (int i = 0; i < 4; i++) {
        cJSON *se = cJSON_GetObjectItem(cJSON_GetArrayItem(steps, i), "standard_error");
        cJSON *mc = cJSON_GetObjectItem(cJSON_GetObjectItem(se, "mean"), "close");
        assert_non_null(mc);
        const size_t o = (size_t)i * 6 + KR_CLOSE;
        close_to(mc->valuedouble, r->fc_mean_se[o], 1e-15, "json mean close se");
        assert_true(r->fc_mean_se[o] > 0);
        char cell[96];
        snprintf(cell, sizeof cell, "| %.2f \u00b1 %.2f |", r->fc_mean[o], r->fc_mean_se[o]);
        if (!strstr(md, cell)) fail_msg("markdown lacks '%s'", cell);
        snprintf(cell, sizeof cell, "<td>%.2f \u00b1 %.2f</td>", r->fc_mean[o], r->fc_mean_se[o]);
        if (!strstr(html, cell)) fail_msg("html lacks '%s'", cell);
        /* So do the bands (8 paths: the fewest that get one), in JSON and in both tables:
         * "| 207.57 ± 0.45 | 202.78 ± 0.61 | 207.50 ± 0.30 | 214.63 ± 0.79 |". */
        const char *names[3] = { "p10", "p50", "p90" };
        const double *val[3] = { r->fc_p10, r->fc_p50, r->fc_p90 };
        const double *bse[3] = { r->fc_p10_se, r->fc_p50_se, r->fc_p90_se };
        char row[400], md_row[400] = "", html_row[400] = "";
        snprintf(md_row, sizeof md_row, "| %s |",
                 kr_fmt_pm_price(r->fc_mean[o], r->fc_mean_se[o], row));
        snprintf(html_row, sizeof html_row, "<td>%s</td>", row);
        for (int b = 0; b < 3; b++) {
            cJSON *bc = cJSON_GetObjectItem(cJSON_GetObjectItem(se, names[b]), "close");
            if (!cJSON_IsNumber(bc))
                fail_msg("step %d: no standard_error.%s.close", i + 1, names[b]);
            close_to(bc->valuedouble, bse[b][o], 1e-15, "json band close se");
            assert_true(isfinite(bse[b][o]) && bse[b][o] >= 0);
            char v[64];
            kr_fmt_pm_price(val[b][o], bse[b][o], v);
            assert_non_null(strstr(v, " \u00b1 "));
            snprintf(md_row + strlen(md_row), sizeof md_row - strlen(md_row), " %s |", v);
            snprintf(html_row + strlen(html_row), sizeof html_row - strlen(html_row), "<td>%s</td>",
                     v);
        }
        if (!strstr(md, md_row)) fail_msg("markdown lacks '%s'", md_row);
        if (!strstr(html, html_row)) fail_msg("html lacks '%s'", html_row);
    }
    /* The note under the table says what the \u00b1 of a quantile is. */
    assert_non_null(strstr(md, "for p10, p50 and p90, half the distance between the closes"));
    assert_non_null(strstr(html, "for p10, p50 and p90, half the distance between the closes"));
    cJSON *cal = cJSON_GetObjectItem(jr, "calibration");
    assert_int_equal(cJSON_GetObjectItem(cal, "windows")->valueint, 2);
    cJSON *rank = cJSON_GetObjectItem(doc, "ranking");
    assert_int_equal(cJSON_GetArraySize(rank), 3);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(rank, 0), "symbol")->valuestring,
                        set->reports[set->rank[0]]->symbol);
    cJSON_Delete(doc);

    /* Markdown and HTML: key numbers, ranking, chart, disclaimer; HTML self-contained. */
    char pct[32], close[32];
    /* P(up) with its Monte Carlo error: whole percent, then "± N pp". */
    snprintf(pct, sizeof pct, "%.0f%% \xc2\xb1 ", r->prob_up * 100);
    snprintf(close, sizeof close, "%.2f", r->last_close);
    assert_non_null(strstr(md, "## Ranking by expected return"));
    assert_non_null(strstr(md, "## AAPL (1d)"));
    assert_non_null(strstr(md, pct));
    assert_non_null(strstr(md, close));
    assert_non_null(strstr(md, "Not investment advice"));
    assert_non_null(strstr(md, "### Calibration"));
    assert_non_null(strstr(html, "<svg"));
    assert_non_null(strstr(html, "p10-p90 band"));
    assert_non_null(strstr(html, "Ranking by expected return"));
    assert_non_null(strstr(html, pct));
    assert_non_null(strstr(html, close));
    assert_non_null(strstr(html, "Not investment advice"));
    assert_non_null(strstr(html, "@media print"));
    assert_null(strstr(html, "<script"));
    assert_null(strstr(html, "<link"));
    assert_null(strstr(html, "src="));
    assert_null(strstr(html, "url("));
    /* Every svg opened is closed. */
    int open = 0, closed = 0;
    for (const char *p = html; (p = strstr(p, "<svg")); p++) open++;
    for (const char *p = html; (p = strstr(p, "</svg>")); p++) closed++;
    assert_int_equal(open, 3);
    assert_int_equal(closed, 3);

    /* A single-report set without calibration and with NaN figures stays schema-valid. */
    kr_report_set_free(set);
    kr_analyze_item one = { "BTC-USD", "1h", g_btc, NULL, NULL };
    kr_analyze_params p = kr_analyze_default_params();
    p.horizon = 1;
    p.paths = 1;
    set = NULL;
    assert_int_equal(kr_analyze(g_ctx, &one, 1, &p, &set, &err), KR_OK);
    free(json);
    assert_int_equal(kr_render_json(set, &json, &err), KR_OK);
    expect_valid(schema, json);
    assert_non_null(strstr(json, "\"forecast_volatility_pct\":\tnull"));
    assert_non_null(strstr(json, "\"calibration\":\tnull"));
    free(html);
    assert_int_equal(kr_render_html(set, &html, &err), KR_OK);
    assert_null(strstr(html, "Ranking by expected return"));
    free(md);
    assert_int_equal(kr_render_md(set, &md, &err), KR_OK);
    assert_non_null(strstr(md, "n/a"));

    free(json);
    free(md);
    free(html);
    cJSON_Delete(schema);
    kr_report_set_free(set);
}

/* The consistent OHLC mode: every path candle brackets its open and close, volume >= 0, opens
 * and closes untouched (so every return figure is the raw one), the mean is consistent too;
 * a zero-volume history gets zero forecast volume in both modes. */
static void test_ohlc_modes(void **state) {
    (void)state;
    double rows[3][6] = { { 10, 9, 8, 11, -1, -5 }, { 10, 12, 11, 9, 3, 4 }, { 5, 6, 4, 5, 1, 1 } };
    assert_int_equal(kr_ohlc_make_consistent(&rows[0][0], 3), 2);
    assert_true(rows[0][KR_HIGH] == 11 && rows[0][KR_LOW] == 8 && rows[0][KR_VOLUME] == 0 &&
                rows[0][KR_AMOUNT] == 0);
    assert_true(rows[1][KR_HIGH] == 12 && rows[1][KR_LOW] == 9);
    assert_true(rows[2][KR_HIGH] == 6 && rows[2][KR_LOW] == 4);
    kr_ohlc_mode m;
    assert_int_equal(kr_ohlc_mode_parse("consistent", &m), 0);
    assert_int_equal(m, KR_OHLC_CONSISTENT);
    assert_int_equal(kr_ohlc_mode_parse("Raw", &m), -1);

    const int H = 6, N = 16, L = 200;
    kr_forecast_params fp = kr_forecast_default_params();
    fp.pred_len = H;
    fp.paths = N;
    fp.seed = 5;
    /* Sampled hot enough that some path candle needs the repair (high below its close...). */
    fp.temperature = 1.5f;
    fp.top_p = 1.0f;
    kr_series s = kr_candles_slice(g_aapl, g_aapl->n - L, L);
    kr_forecast *f = NULL;
    kr_error err;
    assert_int_equal(kr_forecast_run(g_ctx, &s, &fp, &f, &err), KR_OK);
    kr_path_set *raw = NULL, *con = NULL;
    const kr_forecast *rounds[1] = { f };
    assert_int_equal(kr_path_set_create(rounds, 1, KR_OHLC_RAW, 0, &raw, &err), KR_OK);
    assert_int_equal(kr_path_set_create(rounds, 1, KR_OHLC_CONSISTENT, 0, &con, &err), KR_OK);
    assert_memory_equal(raw->mean, kr_forecast_mean(f), (size_t)H * 6 * sizeof(double));
    assert_true(raw->raw_inconsistent > 0); /* the demo model's candles need the repair */
    assert_int_equal(con->raw_inconsistent, raw->raw_inconsistent);
    for (int p = 0; p < N; p++)
        for (int t = 0; t < H; t++) {
            const double *a = kr_path_set_path(raw, p) + t * 6,
                         *b = kr_path_set_path(con, p) + t * 6;
            assert_true(a[KR_OPEN] == b[KR_OPEN] && a[KR_CLOSE] == b[KR_CLOSE]);
            assert_true(b[KR_HIGH] >= b[KR_OPEN] && b[KR_HIGH] >= b[KR_CLOSE]);
            assert_true(b[KR_LOW] <= b[KR_OPEN] && b[KR_LOW] <= b[KR_CLOSE]);
            assert_true(b[KR_VOLUME] >= 0 && b[KR_AMOUNT] >= 0);
        }
    for (int t = 0; t < H; t++) {
        const double *mm = con->mean + t * 6;
        assert_true(mm[KR_HIGH] >= mm[KR_OPEN] && mm[KR_HIGH] >= mm[KR_CLOSE]);
        assert_true(mm[KR_LOW] <= mm[KR_OPEN] && mm[KR_LOW] <= mm[KR_CLOSE]);
    }
    /* Out of range, NULL: as kr_forecast_path (it once pointed past the buffer). */
    assert_null(kr_path_set_path(raw, N));
    assert_null(kr_path_set_path(raw, -1));
    assert_null(kr_path_set_path(NULL, 0));
    /* A mode that is neither is refused, not read as an unnamed third one. */
    kr_path_set *bad = NULL;
    assert_int_equal(kr_path_set_create(rounds, 1, (kr_ohlc_mode)7, 0, &bad, &err),
                     KR_ERR_INVALID_ARG);
    assert_null(bad);
    assert_non_null(strstr(err.message, "ohlc"));
    kr_path_set_free(raw);
    kr_path_set_free(con);
    kr_forecast_free(f);

    /* Zero volume in (an index, FX): never a negative volume out, raw mode included. */
    kr_candles z = *g_aapl;
    z.n = L;
    z.timestamps = g_aapl->timestamps + g_aapl->n - L;
    double *vals = malloc((size_t)L * 6 * sizeof *vals);
    memcpy(vals, g_aapl->values + (g_aapl->n - L) * 6, (size_t)L * 6 * sizeof *vals);
    for (int i = 0; i < L; i++) vals[i * 6 + KR_VOLUME] = vals[i * 6 + KR_AMOUNT] = 0;
    z.values = vals;
    kr_series zs = kr_candles_series(&z);
    assert_true(kr_series_zero_volume(&zs));
    assert_int_equal(kr_forecast_run(g_ctx, &zs, &fp, &f, &err), KR_OK);
    rounds[0] = f;
    assert_int_equal(kr_path_set_create(rounds, 1, KR_OHLC_RAW, 1, &raw, &err), KR_OK);
    for (int i = 0; i < N * H; i++) assert_true(raw->values[i * 6 + KR_VOLUME] == 0.0);
    for (int t = 0; t < H; t++) assert_true(raw->mean[t * 6 + KR_AMOUNT] == 0.0);
    kr_path_set_free(raw);
    kr_forecast_free(f);
    free(vals);
}

/* Standard errors: the binomial one by its formula, the bootstrap ones reproducible and
 * shrinking with more paths. */
static void test_standard_errors(void **state) {
    (void)state;
    kr_analyze_item one = { "AAPL", "1d", g_aapl, NULL, NULL };
    kr_analyze_params p = kr_analyze_default_params();
    p.horizon = 5;
    p.paths = 32;
    p.max_paths = 32;
    kr_report_set *a = NULL, *b = NULL, *c = NULL;
    kr_error err;
    assert_int_equal(kr_analyze(g_ctx, &one, 1, &p, &a, &err), KR_OK);
    assert_int_equal(kr_analyze(g_ctx, &one, 1, &p, &b, &err), KR_OK);
    const kr_report *r = a->reports[0];
    int k = (int)lround(r->prob_up * 32);
    double pt = (k + 2.0) / 36.0;
    close_to(r->prob_up_se, sqrt(pt * (1 - pt) / 36.0), 1e-15, "prob_up_se");
    close_to(r->expected_return_se, r->return_std / sqrt(32.0), 1e-15, "expected_return_se");
    assert_true(r->var95_se > 0 && r->es95_se > 0 && r->drawdown_p90_se > 0);
    assert_true(r->var95_se == b->reports[0]->var95_se); /* fixed bootstrap stream */
    p.paths = 256;
    p.max_paths = 256;
    assert_int_equal(kr_analyze(g_ctx, &one, 1, &p, &c, &err), KR_OK);
    assert_true(c->reports[0]->expected_return_se < r->expected_return_se);
    assert_true(c->reports[0]->prob_up_se < r->prob_up_se);
    /* Adaptive: rounds of 32 extended to reach the P(up) target give exactly the paths of one
     * bigger run (first_path), whatever the rounds. */
    p.paths = 32;
    p.max_paths = 256;
    p.target_prob_se = 0.001; /* unreachable: runs to the cap */
    kr_report_set *d = NULL;
    assert_int_equal(kr_analyze(g_ctx, &one, 1, &p, &d, &err), KR_OK);
    assert_int_equal(d->reports[0]->paths, 256);
    assert_true(d->reports[0]->rounds > 1);
    assert_false(d->reports[0]->target_met);
    assert_true(d->reports[0]->prob_up == c->reports[0]->prob_up);
    assert_true(d->reports[0]->var95 == c->reports[0]->var95);
    kr_report_set_free(a);
    kr_report_set_free(b);
    kr_report_set_free(c);
    kr_report_set_free(d);
}

/* n daily candles from 2024-01-01 whose close is price(i): open = close, high/low 1 % around
 * it unless flat. */
static kr_candles *synthetic(int n, double (*price)(int i), int flat) {
    kr_candles *c = calloc(1, sizeof *c);
    c->n = n;
    c->timestamps = malloc((size_t)n * sizeof(int64_t));
    c->values = malloc((size_t)n * 6 * sizeof(double));
    c->has_volume = 1;
    c->date_only = 1;
    for (int i = 0; i < n; i++) {
        double x = price(i), *v = c->values + (size_t)i * 6;
        c->timestamps[i] = 1704067200 + (int64_t)i * 86400;
        v[KR_OPEN] = v[KR_CLOSE] = x;
        v[KR_HIGH] = flat ? x : x * 1.01;
        v[KR_LOW] = flat ? x : x * 0.99;
        v[KR_VOLUME] = 1000;
        v[KR_AMOUNT] = 1000 * x;
    }
    return c;
}

static double crash_price(int i) { return (i < 200 ? 100.0 : 1.0) * (1.0 + 0.02 * sin(i * 1.7)); }
static double flat_price(int i) {
    (void)i;
    return 50.0;
}
static double penny_price(int i) { return 1.2e-5 * (1.0 + 0.001 * sin(i * 0.9)); }
static double giant_price(int i) { return 1.3e12 * (1.0 + 0.01 * sin(i * 0.9)); }
static double micro_price(int i) { return 3.1e-8 * (1.0 + 0.002 * sin(i * 0.7)); }

static kr_report_set *analyze_one(const char *sym, const kr_candles *c, int horizon, int paths) {
    kr_analyze_item one = { sym, "1d", c, NULL, NULL };
    kr_analyze_params p = kr_analyze_default_params();
    p.horizon = horizon;
    p.paths = paths;
    p.max_paths = paths;
    p.seed = 3;
    kr_report_set *set = NULL;
    kr_error err;
    if (kr_analyze(g_ctx, &one, 1, &p, &set, &err) != KR_OK) fail_msg("%s", err.message);
    return set;
}

/* The price-axis labels of a rendered chart, in order (at most 32). */
static int axis_labels(const char *html, char labels[][32]) {
    int n = 0;
    for (const char *p = html; n < 32 && (p = strstr(p, "class=\"ax\">")); n++) {
        p += strlen("class=\"ax\">");
        size_t len = strcspn(p, "<");
        snprintf(labels[n], 32, "%.*s", (int)(len < 31 ? len : 31), p);
    }
    return n;
}

/* Every price label and the last-close tag end inside the chart's 1020 px: their x plus the
 * chart's own width estimate for 11 px digits (6.8 px a character). */
static void expect_labels_inside(const char *html, const char *what) {
    const char *svg_end = strstr(html, "</svg>");
    int seen = 0;
    for (const char *p = html; (p = strstr(p, "<text x=\"")) && p < svg_end; p++) {
        double x = atof(p + strlen("<text x=\""));
        const char *gt = strchr(p, '>');
        const char *anchor = strstr(p, "text-anchor"), *cls = strstr(p, "class=\"");
        if (anchor && anchor < gt) continue; /* the dates, centred on their tick */
        if (!cls || cls > gt ||
            (strncmp(cls, "class=\"ax\"", 10) && strncmp(cls, "class=\"tag\"", 11)))
            continue;
        size_t len = strcspn(gt + 1, "<");
        if (x + 6.8 * (double)len > 1020.0)
            fail_msg("%s: label '%.*s' at x=%.1f runs past the chart", what, (int)len, gt + 1, x);
        seen++;
    }
    assert_true(seen >= 3);
}

/* Forecasts that leave the price's domain or never move: the figures stay inside what a price
 * can do (a loss is at most 100 %), float dust does not read as a direction or a side, and
 * the words say so. */
static void test_degenerate_series(void **state) {
    (void)state;
    cJSON *schema = load_schema();
    kr_error err;
    char *json = NULL, *md = NULL, *html = NULL;

    /* A crash from 100 to 1: the demo model samples prices below zero. */
    kr_candles *crash = synthetic(300, crash_price, 0);
    kr_report_set *set = analyze_one("CRASH", crash, 20, 64);
    const kr_report *r = set->reports[0];
    assert_true(r->nonpositive_paths > 0);
    assert_true(r->var95 <= 1.0 && r->es95 <= 1.0 && r->drawdown_p90 <= 1.0);
    assert_true(r->return_p10 >= -1.0 && r->expected_return >= -1.0);
    assert_true(r->vol_paths >= r->paths - r->nonpositive_paths); /* closes > 0 throughout */
    assert_non_null(strstr(r->summary[0], "Caution:"));
    for (int t = 0; t < r->horizon; t++)
        assert_true(r->fc_p10[t * 6 + KR_LOW] >= 0.0 && r->fc_mean[t * 6 + KR_CLOSE] >= 0.0);
    assert_int_equal(kr_render(set, KR_FORMAT_JSON, &json, &err), KR_OK);
    expect_valid(schema, json); /* drawdowns <= 100 %, as the schema says */
    assert_non_null(strstr(json, "\"nonpositive_paths\""));
    free(json);
    kr_report_set_free(set);
    kr_candles_free(crash);

    /* A flat series: every path ends within float32 rounding of the last close. */
    kr_candles *flat = synthetic(300, flat_price, 1);
    set = analyze_one("FLAT", flat, 20, 32);
    r = set->reports[0];
    assert_true(r->prob_up == 0.0 && r->prob_down == 0.0);
    assert_string_equal(kr_summary_direction(r), "is undecided");
    assert_true(r->prob_vol_above == 0.0);
    assert_int_equal(kr_render(set, KR_FORMAT_MD, &md, &err), KR_OK);
    assert_int_equal(kr_render(set, KR_FORMAT_HTML, &html, &err), KR_OK);
    assert_null(strstr(md, "-0.00"));
    assert_null(strstr(md, "+0.00%"));
    assert_non_null(strstr(md, "close at SMA 20"));
    assert_non_null(strstr(md, "MACD histogram zero"));
    assert_null(strstr(md, "leans"));
    char labels[32][32];
    int n = axis_labels(html, labels);
    assert_true(n >= 2);
    for (int i = 1; i < n; i++)
        if (!strcmp(labels[i], labels[i - 1])) fail_msg("flat: axis label '%s' twice", labels[i]);
    free(md);
    free(html);
    kr_report_set_free(set);
    kr_candles_free(flat);

    /* A penny stock moving 0.1 %: labels distinct at its scale. */
    kr_candles *penny = synthetic(300, penny_price, 0);
    set = analyze_one("PENNY", penny, 5, 8);
    assert_int_equal(kr_render(set, KR_FORMAT_HTML, &html, &err), KR_OK);
    n = axis_labels(html, labels);
    assert_true(n >= 2);
    for (int i = 1; i < n; i++)
        if (!strcmp(labels[i], labels[i - 1])) fail_msg("penny: axis label '%s' twice", labels[i]);
    expect_labels_inside(html, "penny");
    free(html);
    kr_report_set_free(set);
    kr_candles_free(penny);

    /* Prices in the trillions (an index in satoshis) and in the hundred-millionths: short
     * labels in a unit (1.30T), still distinct, and none runs off the picture. */
    double (*const extreme[2])(int) = { giant_price, micro_price };
    for (int e = 0; e < 2; e++) {
        kr_candles *c = synthetic(300, extreme[e], 0);
        set = analyze_one(e ? "MICRO" : "GIANT", c, 5, 8);
        assert_int_equal(kr_render(set, KR_FORMAT_HTML, &html, &err), KR_OK);
        n = axis_labels(html, labels);
        assert_true(n >= 2);
        for (int i = 0; i < n; i++) {
            if (i > 0 && !strcmp(labels[i], labels[i - 1]))
                fail_msg("%s: axis label '%s' twice", e ? "micro" : "giant", labels[i]);
            if (!e && labels[i][strlen(labels[i]) - 1] != 'T')
                fail_msg("giant: axis label '%s' not in trillions", labels[i]);
        }
        expect_labels_inside(html, e ? "micro" : "giant");
        free(html);
        kr_report_set_free(set);
        kr_candles_free(c);
    }

    /* One path, one bar: no error to show, and none shown as "nan". */
    set = analyze_one("AAPL", g_aapl, 1, 1);
    assert_int_equal(kr_render(set, KR_FORMAT_HTML, &html, &err), KR_OK);
    assert_null(strstr(html, "nan"));
    free(html);
    kr_report_set_free(set);
    cJSON_Delete(schema);
}

/* A price's ± is written at the price's decimals; a price of exactly 0 (a band end of paths
 * that crashed) gives the error two significant digits of its own, never "± <0.01" on a coin
 * priced in millionths. */
static void test_price_error_decimals(void **state) {
    (void)state;
    char buf[64];
    assert_string_equal(kr_fmt_se_price(0.456, 20.0, buf), "\xc2\xb1 0.46");
    assert_string_equal(kr_fmt_se_price(0.001, 20.0, buf), "\xc2\xb1 <0.01");
    assert_string_equal(kr_fmt_se_price(0.0000123, 0.001234, buf), "\xc2\xb1 0.000012");
    assert_string_equal(kr_fmt_se_price(0.0000021, 0.0, buf), "\xc2\xb1 0.0000021");
    assert_string_equal(kr_fmt_se_price(0.456, 0.0, buf), "\xc2\xb1 0.46");
    assert_string_equal(kr_fmt_se_price(0.0, 0.0, buf), "\xc2\xb1 <0.01");
    assert_string_equal(kr_fmt_pm_price(0.0, 0.0000021, buf), "0.00 \xc2\xb1 0.0000021");
}

/* A lean the Monte Carlo error could undo is no lean. */
static void test_direction_words(void **state) {
    (void)state;
    kr_report r;
    memset(&r, 0, sizeof r);
    const struct {
        double up, up_se, down, down_se;
        int paths;
        const char *want;
    } cases[] = {
        { 0.62, 0.01, 0.38, 0.01, 2356, "leans up" },
        { 0.62, 0.07, 0.38, 0.07, 48, "is undecided" }, /* 62 % +- 14 pp straddles one half */
        { 0.375, 0.14, 0.625, 0.14, 8, "is undecided" }, /* 8 paths: 3 up, 5 down */
        { 0.10, 0.02, 0.90, 0.02, 225, "leans down" },
        { 0.0, 0.03, 0.0, 0.03, 128, "is undecided" }, /* nothing moved */
        /* All of 1 or 2 paths is no lean (it was: the raw share, 1.0, minus 2 errors); all of
         * 8 is. The errors are the Agresti-Coull ones the report computes. */
        { 1.0, 0.2191, 0.0, 0.2191, 1, "is undecided" },
        { 1.0, 0.1925, 0.0, 0.1925, 2, "is undecided" },
        { 1.0, 0.1076, 0.0, 0.1076, 8, "leans up" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r.prob_up = cases[i].up;
        r.prob_up_se = cases[i].up_se;
        r.prob_down = cases[i].down;
        r.prob_down_se = cases[i].down_se;
        r.paths = cases[i].paths;
        if (strcmp(kr_summary_direction(&r), cases[i].want) != 0)
            fail_msg("case %zu: %s, want %s", i, kr_summary_direction(&r), cases[i].want);
    }
}

/* "... and N% where they began" only when some path did: 1 - P(up) - P(down) leaves float
 * dust for most path counts (2.8e-17 at 578 up and 96 down of 674), which read as "0% where
 * they began". Across path counts that are not powers of two, the clause follows the counts. */
static void test_flat_clause_from_counts(void **state) {
    (void)state;
    static const int counts[] = { 3, 6, 7, 9, 10, 11, 12 };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        kr_analyze_item one = { "AAPL", "1d", g_aapl, NULL, NULL };
        kr_analyze_params p = kr_analyze_default_params();
        p.horizon = 3;
        p.paths = counts[i];
        p.max_paths = counts[i];
        p.seed = 7 + i;
        p.predictor_dir = MODEL_DIR "/predictor";
        p.tokenizer_dir = MODEL_DIR "/tokenizer";
        kr_report_set *set = NULL;
        kr_error err;
        assert_int_equal(kr_analyze(g_ctx, &one, 1, &p, &set, &err), KR_OK);
        const kr_report *r = set->reports[0];
        const long n = r->paths, flat = n - lround(r->prob_up * n) - lround(r->prob_down * n);
        const int said = strstr(r->summary[0], "where they began") != NULL;
        if (said != (flat > 0)) fail_msg("%ld paths, %ld flat: %s", n, flat, r->summary[0]);
        kr_report_set_free(set);
    }
}

/* Names from outside (a model directory, its config's "source") cannot break a Markdown table
 * or quote, nor inject HTML. */
static void test_markdown_escapes_metadata(void **state) {
    (void)state;
    kr_analyze_item one = { "AAPL", "1d", g_aapl, NULL, NULL };
    kr_analyze_params p = kr_analyze_default_params();
    p.horizon = 3;
    p.paths = 4;
    p.max_paths = 4;
    p.predictor_dir = "/tmp/we|ird<b>&\"x/predictor";
    kr_report_set *set = NULL;
    kr_error err;
    assert_int_equal(kr_analyze(g_ctx, &one, 1, &p, &set, &err), KR_OK);
    kr_report *r = set->reports[0];
    snprintf(r->meta.model_name, sizeof r->meta.model_name, "we|ird<b>&\"x");
    snprintf(r->meta.source, sizeof r->meta.source, "src | with pipe\nsecond line");
    r->meta.demo = 1;
    char *md = NULL;
    assert_int_equal(kr_render(set, KR_FORMAT_MD, &md, &err), KR_OK);
    assert_null(strstr(md, "<b>"));
    assert_null(strstr(md, "\nsecond line"));
    for (const char *line = md; line && *line;) {
        size_t len = strcspn(line, "\n");
        if (!strncmp(line, "| Model |", 9) || !strncmp(line, "| Source |", 10) ||
            !strncmp(line, "| Directories |", 15)) {
            int bars = 0;
            for (size_t i = 0; i < len; i++)
                bars += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
            if (bars != 3) fail_msg("%d unescaped bars in '%.*s'", bars, (int)len, line);
        }
        line = line[len] ? line + len + 1 : NULL;
    }
    free(md);
    kr_report_set_free(set);
}

/* A checkpoint's config.json "source" is text from outside, printed in every report format
 * and on terminals: its control characters and bidi overrides do not reach the report. */
static void test_source_cleaned(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char pred[1024], path[1200], config[65536];
    snprintf(pred, sizeof pred, "%s/predictor", dir);
    assert_int_equal(mkdir(pred, 0755), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", pred);
    assert_int_equal(symlink(MODEL_DIR "/predictor/model.safetensors", path), 0);
    kr_test_slurp(MODEL_DIR "/predictor/config.json", config, sizeof config);
    cJSON *cfg = cJSON_Parse(config);
    assert_non_null(cfg);
    cJSON_ReplaceItemInObject(cfg, "source",
                              cJSON_CreateString("esc\x1b[2J\x07 c1\xc2\x9b bidi\xe2\x80\xae end"));
    char *text = cJSON_Print(cfg);
    cJSON_Delete(cfg);
    snprintf(path, sizeof path, "%s/config.json", pred);
    assert_int_equal(kr_test_write_file(path, text, strlen(text)), 0);
    free(text);

    kr_error err;
    kr_model_params mp = kr_model_default_params();
    kr_model *model = NULL;
    kr_context *ctx = NULL;
    assert_int_equal(kr_model_load(pred, MODEL_DIR "/tokenizer", &mp, &model, &err), KR_OK);
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = 2;
    assert_int_equal(kr_context_create(model, &cp, &ctx, &err), KR_OK);
    kr_analyze_item one = { "AAPL", "1d", g_aapl, NULL, NULL };
    kr_analyze_params p = kr_analyze_default_params();
    p.horizon = 2;
    p.paths = 2;
    p.max_paths = 2;
    kr_report_set *set = NULL;
    assert_int_equal(kr_analyze(ctx, &one, 1, &p, &set, &err), KR_OK);
    const char *src = set->reports[0]->meta.source;
    for (const unsigned char *c = (const unsigned char *)src; *c; c++)
        if (*c < 0x20 || *c == 0x7f || (c[0] == 0xc2 && c[1] == 0x9b) ||
            (c[0] == 0xe2 && c[1] == 0x80 && c[2] == 0xae))
            fail_msg("a control character is left in the source: '%s'", src);
    if (!strstr(src, "esc") || !strstr(src, "end")) fail_msg("source: '%s'", src);
    kr_report_set_free(set);
    kr_context_free(ctx);
    kr_model_free(model);
}

/* kr_analyze takes any symbol spelling (only the store and the server check names): every
 * rendering escapes it, the chart's label included. */
static void test_symbol_escaped(void **state) {
    (void)state;
    const char *sym = "<b>X</b>\"_*|";
    kr_report_set *set = analyze_one(sym, g_aapl, 3, 4);
    char *md = NULL, *html = NULL;
    kr_error err;
    assert_int_equal(kr_render(set, KR_FORMAT_HTML, &html, &err), KR_OK);
    assert_int_equal(kr_render(set, KR_FORMAT_MD, &md, &err), KR_OK);
    assert_null(strstr(html, "<b>X"));
    assert_non_null(strstr(html, "aria-label=\"&lt;b&gt;X&lt;/b&gt;&quot;_*|: last "));
    assert_null(strstr(md, "<b>X"));
    assert_non_null(strstr(md, "# Kronos analysis: &lt;b&gt;X&lt;/b&gt;\"\\_\\*\\| (1d)"));
    assert_non_null(strstr(md, "## &lt;b&gt;X&lt;/b&gt;\"\\_\\*\\| (1d)"));
    free(md);
    free(html);
    kr_report_set_free(set);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_numbers_independent),
        cmocka_unit_test(test_calibration_independent),
        cmocka_unit_test(test_validator_rejects),
        cmocka_unit_test(test_analyze_arguments),
        cmocka_unit_test(test_analysis_deadline_covers_all),
        cmocka_unit_test(test_batch_equals_single_and_ranks),
        cmocka_unit_test(test_adaptive_paths_batch_independent),
        cmocka_unit_test(test_renderers),
        cmocka_unit_test(test_symbol_escaped),
        cmocka_unit_test(test_source_cleaned),
        cmocka_unit_test(test_ohlc_modes),
        cmocka_unit_test(test_standard_errors),
        cmocka_unit_test(test_degenerate_series),
        cmocka_unit_test(test_price_error_decimals),
        cmocka_unit_test(test_direction_words),
        cmocka_unit_test(test_flat_clause_from_counts),
        cmocka_unit_test(test_markdown_escapes_metadata),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
