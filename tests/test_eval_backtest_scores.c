/*
 * The backtest's scoring pipeline on synthetic forecasts with known answers, through the same
 * functions the engine's forecasts go through (kr_bt_prepare -> kr_bt_score_forecast ->
 * kr_bt_finish): a perfect forecaster (CRPS 0, coverage 1, MAE 0), a constant one (scores
 * computed here independently), a calibrated Gaussian random walk (PIT uniform by a chi-square
 * bound, coverage at its nominal rate, "beats naive" by the DM test), IC / RankIC on constructed
 * cross-sections, the baselines' forecasts, and a hand-computed 3-symbol strategy with costs
 * and a limit-up day that blocks a buy.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "eval/backtest_internal.h"
#include "kronos/backtest.h"
#include "test_support.h"

#define DAY 86400
#define MAX_SYM 4

/* 2015-01-05, a Monday. */
#define T0 1420416000LL

typedef struct synth {
    int n_sym;
    char names[MAX_SYM][24];
    kr_candles *c[MAX_SYM];
    kr_backtest_series s[MAX_SYM];
} synth;

static double gauss(uint64_t seed, uint64_t stream, uint64_t k) {
    double u1 = kr_rng_uniform(seed, stream, 2 * k), u2 = kr_rng_uniform(seed, stream, 2 * k + 1);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Daily candles on weekdays from T0 with the given closes (open = previous close). */
static kr_candles *candles(const double *close, int n) {
    kr_candles *c = calloc(1, sizeof *c);
    c->n = n;
    c->timestamps = malloc((size_t)n * sizeof *c->timestamps);
    c->values = malloc((size_t)n * KR_N_FEATURES * sizeof *c->values);
    c->has_volume = 1;
    c->date_only = 1;
    int64_t day = 0;
    for (int i = 0; i < n; i++, day++) {
        if ((day % 7) == 5) day += 2; /* skip the weekend */
        c->timestamps[i] = T0 + day * DAY;
        double *v = c->values + (int64_t)i * KR_N_FEATURES;
        const double open = i ? close[i - 1] : close[i];
        v[KR_OPEN] = open;
        v[KR_CLOSE] = close[i];
        v[KR_HIGH] = fmax(open, close[i]) * 1.001;
        v[KR_LOW] = fmin(open, close[i]) * 0.999;
        v[KR_VOLUME] = 1000;
        v[KR_AMOUNT] = 1000 * close[i];
    }
    return c;
}

static void add_symbol(synth *y, const char *name, const double *close, int n) {
    const int k = y->n_sym++;
    snprintf(y->names[k], sizeof y->names[k], "%s", name);
    y->c[k] = candles(close, n);
    y->s[k] = (kr_backtest_series){ y->names[k], "1d", y->c[k], NULL };
}

static void synth_free(synth *y) {
    for (int k = 0; k < y->n_sym; k++) kr_candles_free(y->c[k]);
}

/* A Gaussian random walk in log price: sigma a bar. */
static void random_walk(double *close, int n, double sigma, uint64_t seed) {
    close[0] = 100;
    for (int i = 1; i < n; i++) close[i] = close[i - 1] * exp(sigma * gauss(seed, 0, (uint64_t)i));
}

static double realised_close(const kr_backtest_report *r, const synth *y, int item, int k) {
    const kr_bt_item *it = &r->items[item];
    return y->c[it->sym]->values[(it->row + 1 + k) * KR_N_FEATURES + KR_CLOSE];
}

typedef void (*forecaster)(const kr_backtest_report *r, const synth *y, int item, double *closes,
                           void *user);

/* Prepare, score every item with `fc` as the model, finish. */
static kr_backtest_report *run(const synth *y, const kr_backtest_params *p, forecaster fc,
                               void *user) {
    kr_backtest_report *r = NULL;
    kr_error err = { 0 };
    if (kr_bt_prepare(NULL, y->s, y->n_sym, p, &r, &err) != KR_OK) fail_msg("%s", err.message);
    double *closes = malloc((size_t)p->paths * p->horizon * sizeof *closes);
    for (int i = 0; i < r->n_items; i++) {
        fc(r, y, i, closes, user);
        if (kr_bt_score_forecast(r, y->s, i, KR_BT_F_MODEL, closes, &err) != KR_OK)
            fail_msg("%s", err.message);
    }
    free(closes);
    if (kr_bt_finish(r, y->s, &err) != KR_OK) fail_msg("%s", err.message);
    return r;
}

static kr_bt_est pooled(const kr_backtest_report *r, int f, int m) {
    return r->pooled[kr_bt_pooled_idx(r, f, m, r->p.horizon)];
}

static const kr_bt_dm_row *dm_pooled(const kr_backtest_report *r, int f, int b, int m) {
    for (int i = 0; i < r->n_dm; i++)
        if (r->dm[i].f == f && r->dm[i].b == b && r->dm[i].metric == m && r->dm[i].sym < 0)
            return &r->dm[i];
    fail_msg("no DM row");
    return NULL;
}

/* ------------------------------------------------------------------ perfect */

static void perfect(const kr_backtest_report *r, const synth *y, int item, double *closes,
                    void *user) {
    (void)user;
    for (int p = 0; p < r->p.paths; p++)
        for (int k = 0; k < r->p.horizon; k++)
            closes[p * r->p.horizon + k] = realised_close(r, y, item, k);
}

static void test_perfect(void **state) {
    (void)state;
    double close[300];
    random_walk(close, 300, 0.01, 1);
    synth y = { 0 };
    add_symbol(&y, "RW", close, 300);
    kr_backtest_params p = kr_backtest_default_params();
    p.horizon = 5;
    p.paths = 8;
    p.bootstrap = 200;
    kr_backtest_report *r = run(&y, &p, perfect, NULL);
    if (r->n_items <= 40) fail_msg("%d items, %d units", r->n_items, r->n_units);
    assert_true(pooled(r, KR_BT_F_MODEL, KR_BT_CRPS).value == 0);
    assert_true(pooled(r, KR_BT_F_MODEL, KR_BT_WQL).value == 0);
    assert_true(pooled(r, KR_BT_F_MODEL, KR_BT_MAE_MEDIAN).value == 0);
    assert_true(pooled(r, KR_BT_F_MODEL, KR_BT_MASE_MEAN).value == 0);
    assert_true(pooled(r, KR_BT_F_MODEL, KR_BT_COV80).value == 1);
    assert_true(pooled(r, KR_BT_F_MODEL, KR_BT_COV90).value == 1);
    assert_true(pooled(r, KR_BT_F_MODEL, KR_BT_DIRECTION).value == 1);
    assert_true(pooled(r, KR_BT_F_MODEL, KR_BT_BRIER).value == 0);
    for (int k = 0; k < p.horizon; k++)
        assert_true(r->pooled[kr_bt_pooled_idx(r, KR_BT_F_MODEL, KR_BT_CRPS, k)].value == 0);
    /* The interval of a figure that is 0 at every origin is [0, 0]. */
    assert_true(pooled(r, KR_BT_F_MODEL, KR_BT_CRPS).lo == 0 &&
                pooled(r, KR_BT_F_MODEL, KR_BT_CRPS).hi == 0);
    /* It beats every baseline, significantly. */
    assert_int_equal(dm_pooled(r, KR_BT_F_MODEL, KR_BT_F_NAIVE, KR_BT_CRPS)->verdict, -1);
    assert_int_equal(dm_pooled(r, KR_BT_F_MODEL, KR_BT_F_RW, KR_BT_CRPS)->verdict, -1);
    kr_backtest_report_free(r);
    synth_free(&y);
}

/* ------------------------------------------------------------------ constant */

static void constant(const kr_backtest_report *r, const synth *y, int item, double *closes,
                     void *user) {
    (void)y;
    const double f = *(const double *)user;
    for (int j = 0; j < r->p.paths * r->p.horizon; j++) closes[j] = r->items[item].last_close * f;
}

static void test_constant(void **state) {
    (void)state;
    double close[260];
    random_walk(close, 260, 0.02, 2);
    synth y = { 0 };
    add_symbol(&y, "RW", close, 260);
    kr_backtest_params p = kr_backtest_default_params();
    p.horizon = 4;
    p.paths = 4;
    p.every = 3;
    p.bootstrap = 0;
    double factor = 1.05;
    kr_backtest_report *r = run(&y, &p, constant, &factor);
    /* Independently: every quantile is 1.05 (in units of the last close). */
    double mae = 0, mape = 0, wql_num = 0, wql_den = 0, cov = 0;
    int cells = 0;
    for (int i = 0; i < r->n_items; i++)
        for (int k = 0; k < p.horizon; k++) {
            const double yz = realised_close(r, &y, i, k) / r->items[i].last_close;
            mae += fabs(factor - yz);
            mape += fabs(factor - yz) / yz;
            for (int q = 1; q <= 9; q++) {
                const double u = yz - factor;
                wql_num += 2.0 / 9 * u * (q / 10.0 - (u < 0));
            }
            wql_den += yz;
            cov += yz == factor;
            cells++;
        }
    assert_true(fabs(pooled(r, KR_BT_F_MODEL, KR_BT_CRPS).value - mae / cells) < 1e-12);
    assert_true(fabs(pooled(r, KR_BT_F_MODEL, KR_BT_MAE_MEDIAN).value - mae / cells) < 1e-12);
    assert_true(fabs(pooled(r, KR_BT_F_MODEL, KR_BT_MAE_MEAN).value - mae / cells) < 1e-12);
    assert_true(fabs(pooled(r, KR_BT_F_MODEL, KR_BT_MAPE_MEDIAN).value - mape / cells) < 1e-12);
    assert_true(fabs(pooled(r, KR_BT_F_MODEL, KR_BT_WQL).value - wql_num / wql_den) < 1e-12);
    assert_true(pooled(r, KR_BT_F_MODEL, KR_BT_COV80).value == cov / cells);
    /* P(up) is 1 at every cell: the Brier score is the share of cells that went down. */
    double down = 0;
    for (int i = 0; i < r->n_items; i++)
        for (int k = 0; k < p.horizon; k++)
            down += realised_close(r, &y, i, k) <= r->items[i].last_close;
    assert_true(fabs(pooled(r, KR_BT_F_MODEL, KR_BT_BRIER).value - down / cells) < 1e-12);
    /* No bootstrap asked for: no intervals. */
    assert_true(isnan(pooled(r, KR_BT_F_MODEL, KR_BT_CRPS).lo));
    kr_backtest_report_free(r);
    synth_free(&y);
}

/* ------------------------------------------------------------------ calibrated */

typedef struct calib {
    double sigma;
    uint64_t seed;
} calib;

/* Paths of the true process: the same Gaussian random walk, drawn independently. */
static void calibrated(const kr_backtest_report *r, const synth *y, int item, double *closes,
                       void *user) {
    (void)y;
    const calib *c = user;
    const int h = r->p.horizon;
    for (int p = 0; p < r->p.paths; p++) {
        double x = r->items[item].last_close;
        for (int k = 0; k < h; k++) {
            x *= exp(c->sigma * gauss(c->seed, (uint64_t)item, (uint64_t)(p * h + k)));
            closes[p * h + k] = x;
        }
    }
}

static void test_calibrated_pit_uniform(void **state) {
    (void)state;
    enum { N = 1200 };
    double close[N];
    random_walk(close, N, 0.01, 3);
    synth y = { 0 };
    add_symbol(&y, "RW", close, N);
    kr_backtest_params p = kr_backtest_default_params();
    p.horizon = 1;
    p.every = 1; /* one independent cell per origin */
    p.paths = 199;
    p.bootstrap = 100;
    calib c = { 0.01, 77 };
    kr_backtest_report *r = run(&y, &p, calibrated, &c);
    const int n = r->n_items;
    assert_true(n > 1000);
    /* Chi-square of the PIT histogram against uniform: 9 df, P(chi2 > 27.88) = 0.001. */
    double chi2 = 0;
    for (int j = 0; j < KR_BT_PIT_BINS; j++) {
        const double obs = r->pit[KR_BT_F_MODEL * KR_BT_PIT_BINS + j].value * n, e = n / 10.0;
        chi2 += (obs - e) * (obs - e) / e;
    }
    assert_true(chi2 < 27.88);
    /* Coverage at its nominal rate (binomial sd ~ 1.2 pp at n ~ 1100). */
    assert_true(fabs(pooled(r, KR_BT_F_MODEL, KR_BT_COV80).value - 0.80) < 0.04);
    assert_true(fabs(pooled(r, KR_BT_F_MODEL, KR_BT_COV90).value - 0.90) < 0.03);
    /* Reliability: where the model says P(up) ~ 1/2, about half went up. */
    assert_true(fabs(r->rel_freq[KR_BT_F_MODEL * KR_BT_REL_BINS + 5].value - 0.5) < 0.1);
    /* A skewed forecast is not uniform: the same test rejects paths drawn 1 sigma too high. */
    kr_backtest_report_free(r);
    synth_free(&y);
}

static void shifted(const kr_backtest_report *r, const synth *y, int item, double *closes,
                    void *user) {
    calibrated(r, y, item, closes, user);
    for (int j = 0; j < r->p.paths * r->p.horizon; j++) closes[j] *= 1.01;
}

static void test_biased_pit_rejected(void **state) {
    (void)state;
    enum { N = 800 };
    double close[N];
    random_walk(close, N, 0.01, 4);
    synth y = { 0 };
    add_symbol(&y, "RW", close, N);
    kr_backtest_params p = kr_backtest_default_params();
    p.horizon = 1;
    p.every = 1;
    p.paths = 99;
    p.bootstrap = 0;
    calib c = { 0.01, 78 };
    kr_backtest_report *r = run(&y, &p, shifted, &c);
    double chi2 = 0;
    const int n = r->n_items;
    for (int j = 0; j < KR_BT_PIT_BINS; j++) {
        const double obs = r->pit[KR_BT_F_MODEL * KR_BT_PIT_BINS + j].value * n, e = n / 10.0;
        chi2 += (obs - e) * (obs - e) / e;
    }
    assert_true(chi2 > 100);
    kr_backtest_report_free(r);
    synth_free(&y);
}

static void test_calibrated_multistep(void **state) {
    (void)state;
    enum { N = 900 };
    double close[N];
    random_walk(close, N, 0.01, 5);
    synth y = { 0 };
    add_symbol(&y, "RW", close, N);
    kr_backtest_params p = kr_backtest_default_params();
    p.horizon = 5;
    p.every = 2; /* overlapping origins: HAC lags 2 */
    p.paths = 64;
    p.bootstrap = 200;
    calib c = { 0.01, 79 };
    kr_backtest_report *r = run(&y, &p, calibrated, &c);
    assert_int_equal(r->lags, 2);
    for (int k = 0; k < p.horizon; k++) {
        const kr_bt_est e = r->pooled[kr_bt_pooled_idx(r, KR_BT_F_MODEL, KR_BT_COV80, k)];
        assert_true(fabs(e.value - 0.8) < 0.07);
        assert_true(e.lo < e.value && e.value < e.hi);
    }
    /* A distribution beats a point forecast on CRPS: the calibrated model beats naive. */
    assert_int_equal(dm_pooled(r, KR_BT_F_MODEL, KR_BT_F_NAIVE, KR_BT_CRPS)->verdict, -1);
    /* The bootstrap random walk of the same process is calibrated too; against it no verdict
     * of "better" is expected (both forecast the truth). */
    assert_true(fabs(pooled(r, KR_BT_F_RW, KR_BT_COV80).value - 0.8) < 0.1);
    /* CRPS grows with the horizon like sqrt(step). */
    const double c1 = r->pooled[kr_bt_pooled_idx(r, KR_BT_F_MODEL, KR_BT_CRPS, 0)].value;
    const double c4 = r->pooled[kr_bt_pooled_idx(r, KR_BT_F_MODEL, KR_BT_CRPS, 3)].value;
    assert_true(c4 / c1 > 1.5 && c4 / c1 < 2.6);
    kr_backtest_report_free(r);
    synth_free(&y);
}

/* ------------------------------------------------------------------ baselines */

static void test_baselines(void **state) {
    (void)state;
    double close[120];
    for (int i = 0; i < 120; i++) close[i] = 100 + (i % 5) * 2 + i * 0.1; /* a weekly pattern */
    synth y = { 0 };
    add_symbol(&y, "S", close, 120);
    kr_backtest_params p = kr_backtest_default_params();
    p.horizon = 7;
    p.paths = 16;
    p.bootstrap = 0;
    kr_backtest_report *r = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_bt_prepare(NULL, y.s, 1, &p, &r, &err), KR_OK);
    assert_int_equal(r->symbols[0].season, 5); /* daily weekday bars: a trading week */
    const kr_bt_item *it = &r->items[r->n_items - 1];
    const int L = it->lookback;
    double hist[600], out[16 * 7];
    for (int t = 0; t < L; t++) hist[t] = close[it->row + 1 - L + t];
    /* Seasonal naive: step k + 1 repeats the bar m ceil((k + 1) / m) before it. */
    assert_int_equal(kr_bt_baseline(r, KR_BT_F_SEASONAL, it, hist, L, out), 0);
    for (int k = 0; k < 7; k++) {
        const int64_t src = it->row + k + 1 - 5 * ((k + 5) / 5);
        assert_true(out[k] == close[src]);
    }
    /* Drift: the line through the first and last close of the lookback, in logs. */
    assert_int_equal(kr_bt_baseline(r, KR_BT_F_DRIFT, it, hist, L, out), 0);
    const double mu = log(hist[L - 1] / hist[0]) / (L - 1);
    for (int k = 0; k < 7; k++) assert_true(fabs(out[k] - hist[L - 1] * exp((k + 1) * mu)) < 1e-9);
    /* Naive: flat. Random walk: every step a past 1-bar return. */
    assert_int_equal(kr_bt_baseline(r, KR_BT_F_NAIVE, it, hist, L, out), 0);
    for (int k = 0; k < 7; k++) assert_true(out[k] == it->last_close);
    assert_int_equal(kr_bt_baseline(r, KR_BT_F_RW, it, hist, L, out), 0);
    for (int pth = 0; pth < 16; pth++)
        for (int k = 0; k < 7; k++) {
            const double prev = k ? out[pth * 7 + k - 1] : it->last_close;
            const double ret = log(out[pth * 7 + k] / prev);
            int found = 0;
            for (int t = 1; t < L && !found; t++)
                found = fabs(ret - log(hist[t] / hist[t - 1])) < 1e-12;
            assert_true(found);
        }
    /* Seeded: the same score_seed draws the same paths. */
    double again[16 * 7];
    assert_int_equal(kr_bt_baseline(r, KR_BT_F_RW, it, hist, L, again), 0);
    assert_memory_equal(out, again, sizeof out);
    kr_backtest_report_free(r);
    synth_free(&y);
}

/* ------------------------------------------------------------------ cross-section */

typedef double (*signal_fn)(double realised_return);
static double affine(double x) { return 2 * x + 0.01; }
static double negated(double x) { return -x; }
static double cubed(double x) { return x * x * x; }

/* Every path at the horizon at last_close x (1 + signal(realised return)). */
static void signalled(const kr_backtest_report *r, const synth *y, int item, double *closes,
                      void *user) {
    const signal_fn fn = *(signal_fn *)user;
    const double c0 = r->items[item].last_close;
    const double ret = realised_close(r, y, item, r->p.horizon - 1) / c0 - 1;
    for (int p = 0; p < r->p.paths; p++)
        for (int k = 0; k < r->p.horizon; k++) closes[p * r->p.horizon + k] = c0 * (1 + fn(ret));
}

static void test_ic(void **state) {
    (void)state;
    synth y = { 0 };
    double close[200];
    for (int s = 0; s < 4; s++) {
        random_walk(close, 200, 0.015, 10 + (uint64_t)s);
        char name[8];
        snprintf(name, sizeof name, "S%d", s);
        add_symbol(&y, name, close, 200);
    }
    kr_backtest_params p = kr_backtest_default_params();
    p.horizon = 3;
    p.paths = 2;
    p.bootstrap = 100;
    p.strategy_k = 0;
    signal_fn fn = affine;
    kr_backtest_report *r = run(&y, &p, signalled, &fn);
    assert_true(r->ic_sum[KR_BT_F_MODEL].n == r->n_units); /* 4 symbols at every origin */
    for (int u = 0; u < r->n_units; u++) {
        assert_int_equal(r->ic[u].n, 4);
        assert_true(fabs(r->ic[u].ic - 1) < 1e-9 && fabs(r->ic[u].rank_ic - 1) < 1e-12);
    }
    assert_true(fabs(r->ic_sum[KR_BT_F_MODEL].mean.value - 1) < 1e-9);
    assert_true(r->ic_sum[KR_BT_F_MODEL].std < 1e-9); /* constant IC */
    assert_true(r->ic_sum[KR_BT_F_NAIVE].n == 0); /* a flat forecast ranks nothing */
    kr_backtest_report_free(r);
    fn = negated;
    r = run(&y, &p, signalled, &fn);
    assert_true(fabs(r->ic_sum[KR_BT_F_MODEL].mean.value + 1) < 1e-9);
    assert_true(fabs(r->rank_ic_sum[KR_BT_F_MODEL].mean.value + 1) < 1e-12);
    kr_backtest_report_free(r);
    /* Monotone but not linear: RankIC 1, IC below 1. */
    fn = cubed;
    r = run(&y, &p, signalled, &fn);
    assert_true(fabs(r->rank_ic_sum[KR_BT_F_MODEL].mean.value - 1) < 1e-12);
    assert_true(r->ic_sum[KR_BT_F_MODEL].mean.value < 0.999);
    /* ICIR and t: mean / std and mean / (std / sqrt(n)), from the per-origin values. */
    double m = 0, ss = 0;
    const int n = r->ic_sum[KR_BT_F_MODEL].n;
    for (int u = 0; u < r->n_units; u++) m += r->ic[u].ic;
    m /= n;
    for (int u = 0; u < r->n_units; u++) ss += (r->ic[u].ic - m) * (r->ic[u].ic - m);
    const double sd = sqrt(ss / (n - 1));
    assert_true(fabs(r->ic_sum[KR_BT_F_MODEL].icir - m / sd) < 1e-9);
    assert_true(fabs(r->ic_sum[KR_BT_F_MODEL].t_stat - m / sd * sqrt(n)) < 1e-9);
    kr_backtest_report_free(r);
    synth_free(&y);
}

/* ------------------------------------------------------------------ strategy */

/* Model forecasts: the pick of each origin expects +5 %, the others 0. */
static void picks(const kr_backtest_report *r, const synth *y, int item, double *closes,
                  void *user) {
    (void)y;
    const int *pick = user; /* [3] symbol picked at origin rows 76, 77, 78 */
    const kr_bt_item *it = &r->items[item];
    const double up = it->sym == pick[it->row - 76] ? 1.05 : 1.0;
    for (int j = 0; j < r->p.paths * r->p.horizon; j++) closes[j] = it->last_close * up;
}

static void test_strategy_hand_computed(void **state) {
    (void)state;
    /* Three main-board A-shares (+-10 %), flat at 10 until row 76, then:
     *   row 77: A 10.5, B 10.0, C 10.0
     *   row 78: A 10.5, B 11.0 (limit up: 10.0 x 1.1), C 10.3
     *   row 79: A 10.5, B 12.1, C 10.0
     * Picks: A at 76, C at 77, B at 78. Costs 10 bps a unit traded.
     *   period 76->77: buy A (1 traded): 0.05 - 0.001 = 0.049
     *   period 77->78: sell A, buy C (2 traded): 0.03 - 0.002 = 0.028
     *   period 78->79: sell C (1 traded); B closed at its limit up: the buy is refused, the
     *                  portfolio stays in cash: -0.001 */
    enum { N = 80 };
    double a[N], b[N], c[N];
    for (int i = 0; i < N; i++) a[i] = b[i] = c[i] = 10.0;
    a[77] = a[78] = a[79] = 10.5;
    b[78] = 11.0;
    b[79] = 12.1;
    c[78] = 10.3;
    c[79] = 10.0;
    synth y = { 0 };
    add_symbol(&y, "600001.SH", a, N);
    add_symbol(&y, "600002.SH", b, N);
    add_symbol(&y, "600003.SH", c, N);
    kr_backtest_params p = kr_backtest_default_params();
    p.horizon = 1;
    p.every = 1;
    p.paths = 2;
    p.max_origins = 3;
    p.bootstrap = 0;
    p.strategy_k = 1;
    p.cost_bps = 10;
    int pick[3] = { 0, 2, 1 };
    kr_backtest_report *r = run(&y, &p, picks, pick);
    const kr_bt_strategy *s = &r->strategy;
    assert_true(r->symbols[0].ashare && fabs(r->symbols[0].limit - 0.10) < 1e-12);
    assert_true(s->ran);
    assert_int_equal(s->n_periods, 3);
    const double R[3] = { 0.049, 0.028, -0.001 };
    const double turnover[3] = { 1, 2, 1 };
    double eq = 1;
    for (int t = 0; t < 3; t++) {
        assert_true(fabs(s->periods[t].ret - R[t]) < 1e-12);
        assert_true(fabs(s->periods[t].turnover - turnover[t]) < 1e-12);
        eq *= 1 + R[t];
        assert_true(fabs(s->periods[t].equity - eq) < 1e-12);
    }
    assert_int_equal(s->periods[2].held, 0);
    assert_int_equal((int)s->blocked_limit_up, 1);
    assert_int_equal((int)s->blocked_limit_down + (int)s->blocked_t1, 0);
    assert_true(fabs(s->total_return - (eq - 1)) < 1e-12);
    assert_true(fabs(s->hit_rate.value - 2.0 / 3) < 1e-12);
    assert_true(fabs(s->turnover - 4.0 / 3) < 1e-12);
    /* Equal-weight buy-and-hold from row 76: (10.5 + 12.1 + 10.0) / 30 at the end. */
    assert_true(fabs(s->bench_total_return - (32.6 / 30 - 1)) < 1e-12);
    /* Equal-weight period returns: (0.05, 0, 0), (0, 0.1, 0.03), (0, 0.1, 10/10.3 - 1). */
    assert_true(fabs(s->periods[1].bench_ret - 0.13 / 3) < 1e-12);
    assert_true(fabs(s->excess_hit_rate.value - 1.0 / 3) < 1e-12);
    assert_true(fabs(s->max_drawdown - (1 - 0.001 - 1)) < 1e-12);
    /* The year fraction: from row 76's stamp to row 79's. */
    const double years = (double)(y.c[0]->timestamps[79] - y.c[0]->timestamps[76]) / (365.25 * DAY);
    assert_true(fabs(s->periods_per_year - 3 / years) < 1e-9);
    assert_true(fabs(s->ann_return.value - (pow(eq, (3 / years) / 3) - 1)) < 1e-9);
    kr_backtest_report_free(r);

    /* Without the A-share rules, B is bought at 78: 0.1 - 0.002 in the last period. */
    p.ashare_rules = 0;
    r = run(&y, &p, picks, pick);
    assert_true(fabs(r->strategy.periods[2].ret - (0.1 - 0.002)) < 1e-12);
    assert_int_equal((int)r->strategy.blocked_limit_up, 0);
    kr_backtest_report_free(r);
    synth_free(&y);
}

static void test_ashare_detection(void **state) {
    (void)state;
    double lim = 0;
    assert_true(kr_bt_is_ashare("600977.SH", NULL, &lim) && lim == 0.10);
    assert_true(kr_bt_is_ashare("300750.SZ", NULL, &lim) && lim == 0.20);
    assert_true(kr_bt_is_ashare("688981", NULL, &lim) && lim == 0.20);
    assert_true(kr_bt_is_ashare("XSHG_5min_600977", NULL, &lim) && lim == 0.10);
    assert_true(kr_bt_is_ashare("ABC", "SSE", &lim));
    assert_false(kr_bt_is_ashare("AAPL", NULL, &lim));
    assert_false(kr_bt_is_ashare("AAPL", "NYSE", &lim));
    assert_false(kr_bt_is_ashare("BTCUSDT", NULL, &lim));
}

static void test_season_rules(void **state) {
    (void)state;
    kr_calendar_info info = { 0 };
    info.weekday_mask = 0x1f;
    assert_int_equal(kr_bt_season(86400, &info), 5); /* daily equities: a week */
    info.weekday_mask = 0x7f;
    assert_int_equal(kr_bt_season(86400, &info), 7); /* daily crypto */
    info.intraday = 1;
    info.n_slots = 48;
    assert_int_equal(kr_bt_season(300, &info), 48); /* 5-minute A-shares: a day */
    info.n_slots = 24;
    assert_int_equal(kr_bt_season(3600, &info), 24); /* hourly crypto */
    memset(&info, 0, sizeof info);
    info.months = 1;
    assert_int_equal(kr_bt_season(30 * 86400, &info), 12);
}

static void test_bad_params(void **state) {
    (void)state;
    kr_error err = { 0 };
    kr_backtest_params p = kr_backtest_default_params();
    assert_int_equal(kr_backtest_check_params(&p, &err), KR_OK);
    p.horizon = 0;
    assert_int_equal(kr_backtest_check_params(&p, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "horizon"));
    p = kr_backtest_default_params();
    p.paths = 1;
    assert_int_equal(kr_backtest_check_params(&p, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "paths"));
    p = kr_backtest_default_params();
    p.every = 5;
    p.hold = 7;
    assert_int_equal(kr_backtest_check_params(&p, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "multiple"));
    p = kr_backtest_default_params();
    p.from_ts = 10;
    p.to_ts = 5;
    assert_int_equal(kr_backtest_check_params(&p, &err), KR_ERR_INVALID_ARG);
    p = kr_backtest_default_params();
    const int64_t dates[2] = { 20, 10 };
    p.origin_ts = dates;
    p.n_origin_ts = 2;
    assert_int_equal(kr_backtest_check_params(&p, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "increasing"));
    p = kr_backtest_default_params();
    p.ci_level = 1.0;
    assert_int_equal(kr_backtest_check_params(&p, &err), KR_ERR_INVALID_ARG);
}

/* A symbol too short for any origin is a failure beside the others; all too short: an error
 * naming the symbol. */
static void test_failures(void **state) {
    (void)state;
    double close[300];
    random_walk(close, 300, 0.01, 6);
    synth y = { 0 };
    add_symbol(&y, "LONG", close, 300);
    add_symbol(&y, "SHORT", close, 40);
    kr_backtest_params p = kr_backtest_default_params();
    p.paths = 2;
    p.bootstrap = 0;
    double one = 1.0;
    kr_backtest_report *r = run(&y, &p, constant, &one);
    assert_int_equal(kr_backtest_report_failures(r), 1);
    assert_true(r->symbols[1].failed && strstr(r->symbols[1].error, "no origin"));
    assert_true(r->symbols[0].n_items > 0 && r->symbols[1].n_items == 0);
    kr_backtest_report_free(r);
    kr_backtest_report *r2 = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_bt_prepare(NULL, y.s + 1, 1, &p, &r2, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "SHORT"));
    synth_free(&y);
}

/* A backtest whose scores would not fit the bound is refused before anything is allocated
 * for them (a long history, an origin at every bar, a long horizon). */
static void test_too_big_refused(void **state) {
    (void)state;
    enum { N = 30000 };
    double *close = malloc(N * sizeof *close);
    random_walk(close, N, 0.01, 8);
    synth y = { 0 };
    add_symbol(&y, "BIG", close, N);
    free(close);
    kr_backtest_params p = kr_backtest_default_params();
    p.max_context = 1024;
    p.horizon = 500;
    p.every = 1;
    p.paths = 2;
    kr_backtest_report *r = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_bt_prepare(NULL, y.s, 1, &p, &r, &err), KR_ERR_INVALID_ARG);
    assert_null(r);
    assert_non_null(strstr(err.message, "GiB"));
    p.every = 100; /* 1 % of the origins: fits */
    assert_int_equal(kr_bt_prepare(NULL, y.s, 1, &p, &r, &err), KR_OK);
    kr_backtest_report_free(r);
    synth_free(&y);
}

/* Origins at given dates: each symbol's last bar at or before each date, keyed by the date. */
static void test_dated_origins(void **state) {
    (void)state;
    double close[200];
    random_walk(close, 200, 0.01, 7);
    synth y = { 0 };
    add_symbol(&y, "S", close, 200);
    kr_backtest_params p = kr_backtest_default_params();
    p.horizon = 3;
    p.paths = 2;
    p.bootstrap = 0;
    /* A Saturday: the Friday before is the origin. */
    const int64_t fri = y.c[0]->timestamps[99]; /* rows 5k + 4 are Fridays */
    const int64_t dates[2] = { fri + DAY, y.c[0]->timestamps[150] };
    p.origin_ts = dates;
    p.n_origin_ts = 2;
    kr_backtest_report *r = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_bt_prepare(NULL, y.s, 1, &p, &r, &err), KR_OK);
    assert_int_equal(r->n_items, 2);
    assert_int_equal((int)r->items[0].row, 99);
    assert_int_equal((int)r->items[1].row, 150);
    assert_true(r->unit_ts[0] == dates[0]);
    kr_backtest_report_free(r);
    synth_free(&y);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_perfect),
        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_calibrated_pit_uniform),
        cmocka_unit_test(test_biased_pit_rejected),
        cmocka_unit_test(test_calibrated_multistep),
        cmocka_unit_test(test_baselines),
        cmocka_unit_test(test_ic),
        cmocka_unit_test(test_strategy_hand_computed),
        cmocka_unit_test(test_ashare_detection),
        cmocka_unit_test(test_season_rules),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_failures),
        cmocka_unit_test(test_dated_origins),
        cmocka_unit_test(test_too_big_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
