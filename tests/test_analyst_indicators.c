/*
 * analyst/indicators and analyst/stats against hand-computed values on small series (the
 * derivations are in the comments) and Wilder's RSI against StockCharts' published worked
 * example; bars-per-year inference on daily, intraday and 24/7 calendars; the last-bar
 * snapshot against the series functions on the bundled AAPL data.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/indicators.h"
#include "analyst/stats.h"
#include "test_support.h"

#define NA NAN

static void expect_series(const double *got, const double *want, int n, double tol,
                          const char *what) {
    for (int i = 0; i < n; i++) {
        if (isnan(want[i])) {
            if (!isnan(got[i])) fail_msg("%s[%d]: got %.10g, want NaN", what, i, got[i]);
        } else if (!(fabs(got[i] - want[i]) <= tol)) {
            fail_msg("%s[%d]: got %.10g, want %.10g", what, i, got[i], want[i]);
        }
    }
}

static void test_stats(void **state) {
    (void)state;
    double x[] = { 4, 1, 3, 2 };
    assert_true(kr_stat_mean(x, 4) == 2.5);
    /* population: sqrt(((1.5)^2+(1.5)^2+(.5)^2+(.5)^2)/4) = sqrt(1.25) */
    assert_true(fabs(kr_stat_std(x, 4, 0) - sqrt(1.25)) < 1e-15);
    assert_true(fabs(kr_stat_std(x, 4, 1) - sqrt(5.0 / 3.0)) < 1e-15);
    assert_true(isnan(kr_stat_std(x, 1, 1)));
    kr_stat_sort(x, 4);
    assert_true(x[0] == 1 && x[3] == 4);
    /* numpy linear: q=0.1 -> position 0.3 -> 1 + 0.3 = 1.3; q=0.5 -> 2.5; q=1 -> 4 */
    assert_true(fabs(kr_stat_quantile_sorted(x, 4, 0.1) - 1.3) < 1e-15);
    assert_true(kr_stat_quantile_sorted(x, 4, 0.5) == 2.5);
    assert_true(kr_stat_quantile_sorted(x, 4, 1.0) == 4.0);
    assert_true(kr_stat_quantile_sorted(x, 1, 0.3) == 1.0);
    assert_int_equal(kr_stat_sign(-0.1), -1);
    assert_int_equal(kr_stat_sign(0.0), 0);
}

static void test_sma_ema(void **state) {
    (void)state;
    const double x[] = { 10, 11, 12, 14, 13, 15 };
    double out[6];
    kr_error err;
    assert_int_equal(kr_ind_sma(x, 6, 3, out, &err), KR_OK);
    /* (10+11+12)/3 = 11, (11+12+14)/3 = 12.333.., (12+14+13)/3 = 13, (14+13+15)/3 = 14 */
    const double sma[] = { NA, NA, 11, 37.0 / 3.0, 13, 14 };
    expect_series(out, sma, 6, 1e-12, "sma3");
    /* alpha = 2/(3+1) = 0.5, seed = SMA = 11 at bar 2; then 0.5*14+0.5*11 = 12.5,
     * 0.5*13+0.5*12.5 = 12.75, 0.5*15+0.5*12.75 = 13.875 */
    assert_int_equal(kr_ind_ema(x, 6, 3, out, &err), KR_OK);
    const double ema[] = { NA, NA, 11, 12.5, 12.75, 13.875 };
    expect_series(out, ema, 6, 1e-12, "ema3");
    /* Too short for the period: all NaN. */
    assert_int_equal(kr_ind_ema(x, 2, 3, out, &err), KR_OK);
    assert_true(isnan(out[0]) && isnan(out[1]));
    assert_int_equal(kr_ind_sma(x, 6, 0, out, &err), KR_ERR_INVALID_ARG);
}

static void test_rsi_hand_and_textbook(void **state) {
    (void)state;
    kr_error err;
    /* closes 1,2,3,2,3, period 2: changes +1,+1,-1,+1.
     * bar 2: gain (1+1)/2 = 1, loss 0 -> 100; bar 3: gain (1*1+0)/2 = .5, loss (0+1)/2 = .5 -> 50;
     * bar 4: gain (.5+1)/2 = .75, loss .25/1... = (.5*1+0)/2 = .25 -> RS 3 -> 75. */
    const double c1[] = { 1, 2, 3, 2, 3 };
    double out[40];
    assert_int_equal(kr_ind_rsi(c1, 5, 2, out, &err), KR_OK);
    const double want1[] = { NA, NA, 100, 50, 75 };
    expect_series(out, want1, 5, 1e-12, "rsi2");
    /* A flat series has neither gains nor losses: 50. */
    const double flat[] = { 5, 5, 5, 5 };
    assert_int_equal(kr_ind_rsi(flat, 4, 2, out, &err), KR_OK);
    assert_true(out[3] == 50.0);

    /* StockCharts' RSI(14) worked example ("ChartSchool: RSI"), 33 closes. Their sheet rounds
     * the averages to 2 decimals at each step, so their published RSI differs from the exact
     * computation by < 0.1; the exact values (computed in double precision) are checked
     * tightly, the published ones loosely. */
    const double cs[] = { 44.34, 44.09, 44.15, 43.61, 44.33, 44.83, 45.10, 45.42, 45.84,
                          46.08, 45.89, 46.03, 45.61, 46.28, 46.28, 46.00, 46.03, 46.41,
                          46.22, 45.64, 46.21, 46.25, 45.71, 46.45, 45.78, 45.35, 44.03,
                          44.18, 44.22, 44.57, 43.42, 42.66, 43.13 };
    const double published[] = { 70.53, 66.32, 66.55, 69.41, 66.36, 57.97, 62.93,
                                 63.26, 56.06, 62.38, 54.71, 50.42, 39.99, 41.46,
                                 41.87, 45.46, 37.30, 33.08, 37.77 };
    const double exact_first = 70.46413502109705, exact_last = 37.788771982057824;
    assert_int_equal(kr_ind_rsi(cs, 33, 14, out, &err), KR_OK);
    for (int i = 0; i < 14; i++) assert_true(isnan(out[i]));
    for (int i = 14; i < 33; i++)
        if (fabs(out[i] - published[i - 14]) > 0.1)
            fail_msg("rsi14[%d] = %.4f, StockCharts %.2f", i, out[i], published[i - 14]);
    assert_true(fabs(out[14] - exact_first) < 1e-9);
    assert_true(fabs(out[32] - exact_last) < 1e-9);
    assert_string_equal(kr_rsi_state(72), "overbought");
    assert_string_equal(kr_rsi_state(30), "oversold");
    assert_string_equal(kr_rsi_state(50), "neutral");
    assert_string_equal(kr_rsi_state(NAN), "unknown");
}

static void test_macd(void **state) {
    (void)state;
    kr_error err;
    /* MACD(2, 3, 2) on 10,11,12,14,13,15,17:
     *   EMA2 (alpha 2/3, seed 10.5 at bar 1): 11.5, 13.1667, 13.0556, 14.3519, 16.1173
     *   EMA3 (alpha 1/2, seed 11 at bar 2):   11, 12.5, 12.75, 13.875, 15.4375
     *   line from bar 2: 0.5, 0.66667, 0.30556, 0.47685, 0.67978
     *   signal EMA2 of the line, seed (0.5 + 0.66667)/2 = 0.58333 at bar 3, then
     *   2/3*0.30556 + 1/3*0.58333 = 0.39815, 0.45062, 0.60340; histogram = line - signal. */
    const double x[] = { 10, 11, 12, 14, 13, 15, 17 };
    double line[7], sig[7], hist[7];
    assert_int_equal(kr_ind_macd(x, 7, 2, 3, 2, line, sig, hist, &err), KR_OK);
    const double wl[] = {
        NA, NA, 0.5, 0.6666666666666661, 0.30555555555555536, 0.4768518518518512, 0.6797839506172849
    };
    const double ws[] = {
        NA, NA, NA, 0.583333333333333, 0.3981481481481479, 0.45061728395061673, 0.6033950617283955
    };
    const double wh[] = { NA,
                          NA,
                          NA,
                          0.08333333333333304,
                          -0.09259259259259256,
                          0.026234567901234462,
                          0.0763888888888894 };
    expect_series(line, wl, 7, 1e-12, "macd line");
    expect_series(sig, ws, 7, 1e-12, "macd signal");
    expect_series(hist, wh, 7, 1e-12, "macd hist");
    assert_int_equal(kr_ind_macd(x, 7, 3, 3, 2, line, sig, hist, &err), KR_ERR_INVALID_ARG);
}

static void test_bollinger(void **state) {
    (void)state;
    kr_error err;
    /* 1..5, period 5, k 2: middle 3, population std sqrt(2); upper 3+2*1.41421 = 5.82843,
     * lower 0.17157; %b = (5 - 0.17157)/5.65685 = 0.85355; bandwidth = 5.65685/3 = 1.88562. */
    const double x[] = { 1, 2, 3, 4, 5 };
    double m[5], u[5], l[5], pb[5], bw[5];
    assert_int_equal(kr_ind_bollinger(x, 5, 5, 2.0, m, u, l, pb, bw, &err), KR_OK);
    assert_true(isnan(m[3]) && isnan(pb[3]));
    assert_true(fabs(m[4] - 3.0) < 1e-12);
    assert_true(fabs(u[4] - (3.0 + 2.0 * sqrt(2.0))) < 1e-12);
    assert_true(fabs(l[4] - (3.0 - 2.0 * sqrt(2.0))) < 1e-12);
    assert_true(fabs(pb[4] - (5.0 - (3.0 - 2.0 * sqrt(2.0))) / (4.0 * sqrt(2.0))) < 1e-12);
    assert_true(fabs(pb[4] - 0.8535533905932737) < 1e-12);
    assert_true(fabs(bw[4] - 4.0 * sqrt(2.0) / 3.0) < 1e-12);
    /* A flat window has no band width: %b undefined. */
    const double flat[] = { 2, 2, 2 };
    assert_int_equal(kr_ind_bollinger(flat, 3, 3, 2.0, m, u, l, pb, bw, &err), KR_OK);
    assert_true(isnan(pb[2]) && bw[2] == 0.0);
}

static void test_atr(void **state) {
    (void)state;
    kr_error err;
    /* bars (high, low, close): (10,8,9) (11,9,10.5) (12,10,11) (11.5,10.5,11) (13,12,12.5)
     * (12.6,12,12.2). TR: 2 (first bar: high-low), max(2,|11-9|,|9-9|) = 2,
     * max(2,|12-10.5|,|10-10.5|) = 2, max(1,.5,.5) = 1, max(1,|13-11|,|12-11|) = 2,
     * max(.6,.1,.5) = .6. ATR(3): (2+2+2)/3 = 2 at bar 2, (2*2+1)/3 = 1.66667,
     * (1.66667*2+2)/3 = 1.77778, (1.77778*2+.6)/3 = 1.38519. */
    const double h[] = { 10, 11, 12, 11.5, 13, 12.6 }, l[] = { 8, 9, 10, 10.5, 12, 12 },
                 c[] = { 9, 10.5, 11, 11, 12.5, 12.2 };
    double out[6];
    assert_int_equal(kr_ind_atr(h, l, c, 6, 3, out, &err), KR_OK);
    const double want[] = { NA, NA, 2.0, 5.0 / 3.0, 16.0 / 9.0, (32.0 / 9.0 + 0.6) / 3.0 };
    expect_series(out, want, 6, 1e-12, "atr3");
}

static void test_realized_vol(void **state) {
    (void)state;
    /* closes 100, 101, 99, 102: log returns .0099503, -.0200007, .0298530; mean .0066009;
     * sample std sqrt(sum of squared deviations / 2) = 0.0250950. */
    const double c[] = { 100, 101, 99, 102 };
    assert_true(fabs(kr_ind_realized_vol(c, 4, 3) - 0.02509502419808099) < 1e-12);
    /* window 2 uses only the last two returns */
    double r1 = log(99.0 / 101.0), r2 = log(102.0 / 99.0), m = (r1 + r2) / 2;
    assert_true(fabs(kr_ind_realized_vol(c, 4, 2) -
                     sqrt((r1 - m) * (r1 - m) + (r2 - m) * (r2 - m))) < 1e-15);
    assert_true(isnan(kr_ind_realized_vol(c, 4, 4))); /* needs 5 closes */
}

/* n timestamps starting Monday 2024-01-01 00:00 + first_offset, step seconds, keeping only
 * times whose weekday < days_per_week and whose seconds-of-day fall in [open, close). */
static int64_t make_calendar(int64_t *ts, int64_t n, int64_t step, int days_per_week, int64_t open,
                             int64_t close) {
    int64_t t = 1704067200, k = 0;
    while (k < n) {
        int64_t day = (t / 86400 + 3) % 7; /* 1970-01-01 was a Thursday: Monday = 0 */
        int64_t sod = t % 86400;
        if (day < days_per_week && sod >= open && sod < close) ts[k++] = t;
        t += step;
    }
    return k;
}

static void test_bars_per_year(void **state) {
    (void)state;
    int64_t ts[3000];
    double bpy, bpd;
    kr_error err;
    make_calendar(ts, 500, 86400, 5, 0, 86400); /* equities, daily */
    assert_int_equal(kr_ind_bars_per_year(ts, 500, &bpy, &bpd, &err), KR_OK);
    assert_true(bpy == 252.0 && bpd == 1.0);
    make_calendar(ts, 500, 86400, 7, 0, 86400); /* crypto, daily */
    assert_int_equal(kr_ind_bars_per_year(ts, 500, &bpy, &bpd, &err), KR_OK);
    assert_true(bpy == 365.0);
    make_calendar(ts, 2000, 3600, 7, 0, 86400); /* crypto, hourly: 24 x 365 */
    assert_int_equal(kr_ind_bars_per_year(ts, 2000, &bpy, &bpd, &err), KR_OK);
    assert_true(bpd == 24.0 && bpy == 24.0 * 365.0);
    /* A-share-like 5-minute session 09:30-11:30 and 13:00-15:00: 48 bars a day. */
    int64_t n = 0, t = 1704067200;
    while (n < 2400) {
        int64_t day = (t / 86400 + 3) % 7, sod = t % 86400;
        if (day < 5 && ((sod >= 9 * 3600 + 1800 && sod < 11 * 3600 + 1800) ||
                        (sod >= 13 * 3600 && sod < 15 * 3600)))
            ts[n++] = t;
        t += 300;
    }
    assert_int_equal(kr_ind_bars_per_year(ts, n, &bpy, &bpd, &err), KR_OK);
    assert_true(bpd == 48.0 && bpy == 48.0 * 252.0);
    make_calendar(ts, 200, 7 * 86400, 7, 0, 86400); /* weekly */
    assert_int_equal(kr_ind_bars_per_year(ts, 200, &bpy, NULL, &err), KR_OK);
    assert_true(bpy == 52.0);
    assert_int_equal(kr_ind_bars_per_year(ts, 1, &bpy, NULL, &err), KR_ERR_INVALID_ARG);
}

static double last_of_series(kr_status (*fn)(const double *, int64_t, int, double *, kr_error *),
                             const double *x, int64_t n, int p) {
    double *o = malloc((size_t)n * sizeof *o);
    assert_int_equal(fn(x, n, p, o, NULL), KR_OK);
    double v = o[n - 1];
    free(o);
    return v;
}

static void test_snapshot_on_aapl(void **state) {
    (void)state;
    kr_candles *c = NULL;
    kr_error err;
    if (kr_candles_read_csv(KR_SOURCE_DIR "/data/AAPL_1d.csv", &c, &err) != KR_OK)
        fail_msg("%s", err.message);
    int64_t n = c->n;
    double *cl = malloc((size_t)n * sizeof *cl), *vol = malloc((size_t)n * sizeof *vol);
    for (int64_t i = 0; i < n; i++) {
        cl[i] = c->values[i * 6 + KR_CLOSE];
        vol[i] = c->values[i * 6 + KR_VOLUME];
    }
    kr_tech_snapshot s;
    assert_int_equal(kr_tech_snapshot_compute(c, 20, &s, &err), KR_OK);
    assert_true(s.close == cl[n - 1]);
    assert_true(s.sma20 == last_of_series(kr_ind_sma, cl, n, 20));
    assert_true(s.sma60 == last_of_series(kr_ind_sma, cl, n, 60));
    assert_true(s.ema5 == last_of_series(kr_ind_ema, cl, n, 5));
    assert_true(s.rsi14 == last_of_series(kr_ind_rsi, cl, n, 14));
    assert_true(s.rsi14 > 0 && s.rsi14 < 100);
    /* Independent checks of the simple ones. */
    double sum = 0;
    for (int64_t i = n - 20; i < n; i++) sum += cl[i];
    assert_true(fabs(s.sma20 - sum / 20) < 1e-9);
    assert_true(fabs(s.bb_middle - s.sma20) < 1e-12);
    assert_true(s.bb_upper > s.bb_middle && s.bb_lower < s.bb_middle);
    assert_true(fabs(s.macd_hist - (s.macd_line - s.macd_signal)) < 1e-12);
    assert_true(s.atr14 > 0);
    double v5 = 0, v20 = 0;
    for (int64_t i = n - 5; i < n; i++) v5 += vol[i];
    for (int64_t i = n - 20; i < n; i++) v20 += vol[i];
    assert_true(fabs(s.volume_ratio - (v5 / 5) / (v20 / 20)) < 1e-12);
    assert_true(s.bars_per_year == 252.0);
    assert_true(fabs(s.rv_per_bar - kr_ind_realized_vol(cl, n, 20)) < 1e-15);
    assert_true(fabs(s.rv_annualized - s.rv_per_bar * sqrt(252.0)) < 1e-12);

    /* A short history: 30 bars have no SMA 60 / EMA 60 and no MACD signal (needs 34). */
    c->n = 30;
    assert_int_equal(kr_tech_snapshot_compute(c, 20, &s, &err), KR_OK);
    assert_true(isnan(s.sma60) && isnan(s.ema60) && isnan(s.macd_signal) && !isnan(s.macd_line));
    assert_true(!isnan(s.sma20) && !isnan(s.rsi14));
    /* No volume column. */
    c->has_volume = 0;
    assert_int_equal(kr_tech_snapshot_compute(c, 20, &s, &err), KR_OK);
    assert_true(isnan(s.volume_ratio) && s.volume_slope_sign == 0);
    free(cl);
    free(vol);
    kr_candles_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_sma_ema),
        cmocka_unit_test(test_rsi_hand_and_textbook),
        cmocka_unit_test(test_macd),
        cmocka_unit_test(test_bollinger),
        cmocka_unit_test(test_atr),
        cmocka_unit_test(test_realized_vol),
        cmocka_unit_test(test_bars_per_year),
        cmocka_unit_test(test_snapshot_on_aapl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
