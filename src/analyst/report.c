/*
 * analyst/report — turns a history and a many-path forecast into the report's numbers (see
 * report.h for every definition). Everything is computed from the forecast's kept paths, so
 * the figures are statements about the model's sample distribution, nothing more.
 */
#include "analyst/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/stats.h"
#include "analyst/summary.h"
#include "base/error.h"
#include "base/rng.h"

/* A close below zero counts as zero: the loss of a price is at most all of it. */
static double floored(double close) { return close > 0.0 ? close : 0.0; }

double kr_path_return(const double *closes, int horizon, double last_close) {
    return floored(closes[horizon - 1]) / last_close - 1.0;
}

double kr_path_max_drawdown(const double *closes, int horizon, double last_close) {
    double peak = last_close, dd = 0.0;
    for (int t = 0; t < horizon; t++) {
        double c = floored(closes[t]);
        if (c > peak) peak = c;
        double d = (peak - c) / peak;
        if (d > dd) dd = d;
    }
    return dd;
}

double kr_path_volatility(const double *closes, int horizon, double last_close) {
    if (horizon < 2) return NAN;
    for (int t = 0; t < horizon; t++)
        if (!(closes[t] > 0.0)) return NAN; /* no log return through zero */
    double *r = malloc((size_t)horizon * sizeof *r);
    if (!r) return NAN;
    double prev = last_close;
    for (int t = 0; t < horizon; t++) {
        r[t] = log(closes[t] / prev);
        prev = closes[t];
    }
    double sd = kr_stat_std(r, horizon, 1);
    free(r);
    return sd;
}

void kr_report_free(kr_report *r) {
    if (!r) return;
    free(r->chart_ts);
    free(r->chart_values);
    free(r->fc_ts);
    free(r->fc_mean);
    free(r->fc_mean_se);
    free(r->fc_p10);
    free(r->fc_p50);
    free(r->fc_p90);
    free(r->fc_p10_se);
    free(r->fc_p50_se);
    free(r->fc_p90_se);
    kr_calibration_free(r->calibration);
    kr_summary_free(r->summary, r->n_summary);
    free(r);
}

/* Agresti-Coull standard error of a proportion k/n (report.h). */
static double prop_se(int k, int n) {
    double pt = (k + 2.0) / (n + 4.0);
    return sqrt(pt * (1.0 - pt) / (n + 4.0));
}

/* The statistics of one (sorted or not) sample of horizon returns and drawdowns that the
 * bootstrap recomputes: sorts ret and dd in place. */
typedef struct tail_stats {
    double std, p10, p50, p90, var95, es95, dd_p50, dd_p90;
} tail_stats;

static void tail_of(double *ret, double *dd, int n, tail_stats *t) {
    t->std = kr_stat_std(ret, n, 1);
    kr_stat_sort(ret, n);
    t->p10 = kr_stat_quantile_sorted(ret, n, 0.10);
    t->p50 = kr_stat_quantile_sorted(ret, n, 0.50);
    t->p90 = kr_stat_quantile_sorted(ret, n, 0.90);
    double q05 = kr_stat_quantile_sorted(ret, n, 0.05);
    t->var95 = -q05;
    /* Expected shortfall: the mean of the tail at or below the 5% quantile; the worst path
     * is always in it, so it is defined for any number of paths. */
    double tail = 0.0;
    int n_tail = 0;
    for (int p = 0; p < n && (ret[p] <= q05 || p == 0); p++) {
        tail += ret[p];
        n_tail++;
    }
    t->es95 = -tail / n_tail;
    kr_stat_sort(dd, n);
    t->dd_p50 = kr_stat_quantile_sorted(dd, n, 0.50);
    t->dd_p90 = kr_stat_quantile_sorted(dd, n, 0.90);
}

/* The tail statistics of one resample (ret and dd reordered) added to acc: the sum of each
 * of the 8 figures, then the sum of its square. */
static void spread_add(double acc[16], double *ret, double *dd, int n) {
    tail_stats t;
    tail_of(ret, dd, n, &t);
    const double v[8] = { t.std, t.p10, t.p50, t.p90, t.var95, t.es95, t.dd_p50, t.dd_p90 };
    for (int j = 0; j < 8; j++) {
        acc[j] += v[j];
        acc[8 + j] += v[j] * v[j];
    }
}

/* Each figure's sample standard deviation over the B resamples of acc, divided by
 * sqrt(per): 1 for a bootstrap (its spread is the error), B for batch means (a batch varies B
 * times as much as the whole). */
static void spread_of(const double acc[16], int B, int per, tail_stats *se) {
    double out[8];
    for (int j = 0; j < 8; j++) {
        const double mean = acc[j] / B, var = (acc[8 + j] - B * mean * mean) / (B - 1);
        out[j] = var > 0 ? sqrt(var / per) : 0.0;
    }
    *se = (tail_stats){ out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7] };
}

/* Bootstrap standard errors of the tail statistics: KR_REPORT_BOOTSTRAP resamples of the
 * paths, drawn from a fixed counter-based stream so a report never changes between runs. */
static kr_status bootstrap(const double *ret, const double *dd, int n, tail_stats *se,
                           kr_error *err) {
    const int B = KR_REPORT_BOOTSTRAP;
    double *br = malloc((size_t)n * sizeof *br), *bd = malloc((size_t)n * sizeof *bd);
    double *acc = calloc(16, sizeof *acc); /* sum and sum of squares of the 8 figures */
    if (!br || !bd || !acc) {
        free(br);
        free(bd);
        free(acc);
        return kr_error_set(err, KR_ERR_NOMEM, "bootstrap: out of memory");
    }
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < n; i++) {
            uint64_t k = kr_rng_u64(0x6b726f6e6f73ull, (uint64_t)b, (uint64_t)i) % (uint64_t)n;
            br[i] = ret[k];
            bd[i] = dd[k];
        }
        spread_add(acc, br, bd, n);
    }
    spread_of(acc, B, 1, se);
    free(br);
    free(bd);
    free(acc);
    return KR_OK;
}

/* Batch means: the paths (independent draws, so consecutive batches are as random as any)
 * split into KR_REPORT_BATCHES batches, each figure computed on each batch; a batch estimate
 * varies B times as much as the whole sample's, so their spread / sqrt(B) estimates its error.
 * Unlike the bootstrap, which resamples the paths at hand and cannot see tail mass they missed,
 * a batch's own tail is drawn fresh: on small batches its ES and VaR vary more, never less, so
 * this errs on the side of a larger error. NaN figures when there are too few paths. */
static void batch_means(const double *ret, const double *dd, int n, tail_stats *se) {
    const int B = KR_REPORT_BATCHES, m = n / B;
    *se = (tail_stats){ NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN };
    if (m < KR_REPORT_BATCH_MIN) return;
    double *br = malloc((size_t)m * sizeof *br), *bd = malloc((size_t)m * sizeof *bd);
    double acc[16] = { 0 };
    if (!br || !bd) { /* out of memory: the other estimates stand */
        free(br);
        free(bd);
        return;
    }
    for (int b = 0; b < B; b++) {
        memcpy(br, ret + (size_t)b * m, (size_t)m * sizeof *br);
        memcpy(bd, dd + (size_t)b * m, (size_t)m * sizeof *bd);
        spread_add(acc, br, bd, m);
    }
    free(br);
    free(bd);
    spread_of(acc, B, B, se);
}

/* The order-statistic error of a quantile (kr_stat_quantile_se_sorted) with its rank interval
 * widened to the nearest values that differ from the quantile: paths that share a token path
 * share a return, and a median resting inside a block of ties looks exact to the bootstrap
 * (every resample's median is that value) while another seed moves it to a neighbouring
 * value. The distance to those neighbours, times the quantile's rank spread, is its error. */
static double quantile_se_discrete(const double *sorted, int n, double q) {
    if (n < KR_STAT_QUANTILE_SE_MIN_N) return NAN;
    const double spread = sqrt((double)n * q * (1.0 - q)), centre = q * (double)(n - 1);
    int j = (int)floor(centre - spread), k = (int)ceil(centre + spread);
    if (j < 0) j = 0;
    if (k > n - 1) k = n - 1;
    const double v = kr_stat_quantile_sorted(sorted, n, q);
    while (j > 0 && sorted[j] >= v) j--;
    while (k < n - 1 && sorted[k] <= v) k++;
    return k > j ? (sorted[k] - sorted[j]) * spread / (double)(k - j) : 0.0;
}

/* The larger of two estimates (NaN ones ignored). */
static double larger(double a, double b) {
    if (isnan(a)) return b;
    if (isnan(b)) return a;
    return a > b ? a : b;
}

/* The middle one of three estimates (NaN ones ignored: then the larger of the rest): no single
 * estimate decides, neither one the bootstrap reads as exact on ties nor one that is
 * inflated by a small batch. */
static double middle(double a, double b, double c) {
    if (isnan(a)) return larger(b, c);
    if (isnan(b)) return larger(a, c);
    if (isnan(c)) return larger(a, b);
    if (a > b) {
        const double t = a;
        a = b;
        b = t;
    }
    return c < a ? a : c > b ? b : c;
}

kr_status kr_report_horizon_stats(kr_report *r, const kr_path_set *ps, kr_error *err) {
    const int h = r->horizon, n = r->paths;
    double *ret = malloc((size_t)n * sizeof *ret), *dd = malloc((size_t)n * sizeof *dd);
    double *vol = malloc((size_t)n * sizeof *vol), *cl = malloc((size_t)h * sizeof *cl);
    double *ret2 = malloc((size_t)n * sizeof *ret2), *dd2 = malloc((size_t)n * sizeof *dd2);
    kr_status st = KR_OK;
    if (!ret || !dd || !vol || !cl || !ret2 || !dd2) {
        st = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory for statistics", r->symbol);
        goto done;
    }
    int up = 0, down = 0, vol_above = 0, vol_known = 0;
    const double up_from = r->last_close * (1.0 + KR_REPORT_FLAT_REL),
                 down_from = r->last_close * (1.0 - KR_REPORT_FLAT_REL);
    for (int p = 0; p < n; p++) {
        const double *path = kr_path_set_path(ps, p);
        for (int t = 0; t < h; t++) cl[t] = path[t * KR_N_FEATURES + KR_CLOSE];
        ret[p] = kr_path_return(cl, h, r->last_close);
        dd[p] = kr_path_max_drawdown(cl, h, r->last_close);
        up += cl[h - 1] > up_from;
        down += cl[h - 1] < down_from;
        double v = kr_path_volatility(cl, h, r->last_close);
        if (!isnan(v)) {
            vol[vol_known++] = v;
            vol_above += !isnan(r->realized_vol_h) && v > r->realized_vol_h + KR_REPORT_VOL_TIE;
        }
    }
    r->nonpositive_paths = ps->nonpositive_paths;
    r->vol_paths = vol_known;
    r->prob_up = (double)up / n;
    r->prob_up_se = prop_se(up, n);
    r->prob_down = (double)down / n;
    r->prob_down_se = prop_se(down, n);
    r->expected_return = kr_stat_mean(ret, n);
    r->forecast_vol = vol_known >= 1 ? kr_stat_mean(vol, vol_known) : NAN;
    r->forecast_vol_se = vol_known >= 2 ? kr_stat_std(vol, vol_known, 1) / sqrt(vol_known) : NAN;
    const int vol_compared = vol_known >= 1 && !isnan(r->realized_vol_h);
    r->prob_vol_above = vol_compared ? (double)vol_above / vol_known : NAN;
    r->prob_vol_above_se = vol_compared ? prop_se(vol_above, vol_known) : NAN;
    r->drawdown_mean = kr_stat_mean(dd, n);
    r->drawdown_mean_se = n >= 2 ? kr_stat_std(dd, n, 1) / sqrt(n) : NAN;
    memcpy(ret2, ret, (size_t)n * sizeof *ret);
    memcpy(dd2, dd, (size_t)n * sizeof *dd);
    tail_stats t, se = { NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN };
    tail_of(ret2, dd2, n, &t);
    r->return_std = t.std;
    r->expected_return_se = n >= 2 ? t.std / sqrt(n) : NAN;
    r->return_p10 = t.p10;
    r->return_p50 = t.p50;
    r->return_p90 = t.p90;
    r->var95 = t.var95;
    r->es95 = t.es95;
    r->drawdown_p50 = t.dd_p50;
    r->drawdown_p90 = t.dd_p90;
    if (n >= 2 && (st = bootstrap(ret, dd, n, &se, err)) != KR_OK) goto done;
    /* No estimate is trusted alone where it is known to fall short (the bootstrap in the
     * tail and on ties): quantiles take the middle of the bootstrap's, the batch means' and
     * the tie-aware order-statistic error; ES, a tail mean, the larger of the first two
     * (tests/test_analyst_mc_errors.c measures each against the spread across 400 seeds).
     * ret2 and dd2 are sorted. */
    tail_stats bm;
    batch_means(ret, dd, n, &bm);
    r->return_std_se = n >= 3 ? larger(se.std, bm.std) : NAN;
    r->return_p10_se = middle(se.p10, bm.p10, quantile_se_discrete(ret2, n, 0.10));
    r->return_p50_se = middle(se.p50, bm.p50, quantile_se_discrete(ret2, n, 0.50));
    r->return_p90_se = middle(se.p90, bm.p90, quantile_se_discrete(ret2, n, 0.90));
    r->var95_se = middle(se.var95, bm.var95, quantile_se_discrete(ret2, n, 0.05));
    r->es95_se = larger(se.es95, bm.es95);
    r->drawdown_p50_se = middle(se.dd_p50, bm.dd_p50, quantile_se_discrete(dd2, n, 0.50));
    r->drawdown_p90_se = middle(se.dd_p90, bm.dd_p90, quantile_se_discrete(dd2, n, 0.90));
done:
    free(ret);
    free(dd);
    free(vol);
    free(cl);
    free(ret2);
    free(dd2);
    return st;
}

/* The mean path's standard error per step and column: how far the average of these N paths
 * may lie from the model's own mean (what infinitely many paths would give). Two-pass sample
 * variance over the same values the mean path averages (repaired ones in consistent mode;
 * in raw mode the engine averages the same paths in normalised space, a linear map away). */
static void mean_se(const kr_path_set *ps, double *out) {
    const int n = ps->paths;
    const size_t cell = (size_t)ps->pred_len * KR_N_FEATURES;
    for (size_t i = 0; i < cell; i++) {
        if (n < 2) {
            out[i] = NAN;
            continue;
        }
        double m = 0.0, ss = 0.0;
        for (int p = 0; p < n; p++) m += ps->values[(size_t)p * cell + i];
        m /= n;
        for (int p = 0; p < n; p++) {
            double d = ps->values[(size_t)p * cell + i] - m;
            ss += d * d;
        }
        out[i] = sqrt(ss / (n - 1)) / sqrt((double)n);
    }
}

/* The per-step bands (p10, p50, p90 of each step and column across paths) and their Monte Carlo
 * errors, from one sort of each step and column: the quantiles exactly as kr_path_set_quantile
 * takes them, the errors from the same order statistics (kr_stat_quantile_se_sorted). */
static kr_status bands(const kr_path_set *ps, kr_report *r, kr_error *err) {
    const int n = ps->paths;
    const size_t cell = (size_t)ps->pred_len * KR_N_FEATURES;
    double *col = malloc((size_t)n * sizeof *col);
    if (!col) return kr_error_set(err, KR_ERR_NOMEM, "per-step bands: out of memory");
    const double q[3] = { 0.1, 0.5, 0.9 };
    double *const value[3] = { r->fc_p10, r->fc_p50, r->fc_p90 };
    double *const se[3] = { r->fc_p10_se, r->fc_p50_se, r->fc_p90_se };
    for (size_t i = 0; i < cell; i++) {
        for (int p = 0; p < n; p++) col[p] = ps->values[(size_t)p * cell + i];
        kr_stat_sort(col, n);
        for (int b = 0; b < 3; b++) {
            value[b][i] = kr_stat_quantile_sorted(col, n, q[b]);
            se[b][i] = kr_stat_quantile_se_sorted(col, n, q[b]);
        }
    }
    free(col);
    return KR_OK;
}

/* Realised volatility over the last h bars (h log returns, h + 1 closes): the same number of
 * bars as the forecast, so the two are comparable. */
static double realized_vol_h(const kr_candles *c, int h) {
    if (c->n < h + 1) return NAN;
    double *hist = malloc((size_t)(h + 1) * sizeof *hist);
    if (!hist) return NAN;
    for (int i = 0; i <= h; i++) hist[i] = c->values[(c->n - h - 1 + i) * KR_N_FEATURES + KR_CLOSE];
    double v = kr_ind_realized_vol(hist, h + 1, h);
    free(hist);
    return v;
}

kr_status kr_report_build(const char *symbol, const char *interval, const kr_candles *c,
                          int lookback, const kr_path_set *ps, const kr_forecast_stats *timing,
                          const kr_report_meta *meta, kr_report **out, kr_error *err) {
    if (!symbol || !c || !ps || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "report: NULL argument");
    *out = NULL;
    if (c->n < 2)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "report %s: need at least 2 history rows",
                            symbol);
    const int h = ps->pred_len, n = ps->paths;
    if (h < 1 || n < 1)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "report %s: a forecast without paths", symbol);
    kr_report *r = calloc(1, sizeof *r);
    if (!r) return kr_error_set(err, KR_ERR_NOMEM, "report %s: out of memory", symbol);
    snprintf(r->symbol, sizeof r->symbol, "%s", symbol);
    snprintf(r->interval, sizeof r->interval, "%s", interval ? interval : "");
    if (meta) r->meta = *meta;
    if (timing) r->timing = *timing;
    r->rounds = 1;
    r->target_met = 1;
    r->repaired_candles = ps->repaired_rows;
    r->raw_inconsistent = ps->raw_inconsistent;
    r->date_only = c->date_only;
    r->rows_available = c->n;
    r->first_ts = c->timestamps[0];
    r->lookback = lookback;
    r->last_ts = c->timestamps[c->n - 1];
    r->last_close = c->values[(c->n - 1) * KR_N_FEATURES + KR_CLOSE];
    r->horizon = h;
    r->paths = n;

    kr_status st;
    r->n_chart = (int)(c->n < KR_REPORT_CHART_BARS ? c->n : KR_REPORT_CHART_BARS);
    const size_t cell = (size_t)h * KR_N_FEATURES * sizeof(double);
    r->chart_ts = malloc((size_t)r->n_chart * sizeof *r->chart_ts);
    r->chart_values = malloc((size_t)r->n_chart * KR_N_FEATURES * sizeof *r->chart_values);
    r->fc_ts = malloc((size_t)h * sizeof *r->fc_ts);
    r->fc_mean = malloc(cell);
    r->fc_mean_se = malloc(cell);
    r->fc_p10 = malloc(cell);
    r->fc_p50 = malloc(cell);
    r->fc_p90 = malloc(cell);
    r->fc_p10_se = malloc(cell);
    r->fc_p50_se = malloc(cell);
    r->fc_p90_se = malloc(cell);
    if (!r->chart_ts || !r->chart_values || !r->fc_ts || !r->fc_mean || !r->fc_mean_se ||
        !r->fc_p10 || !r->fc_p50 || !r->fc_p90 || !r->fc_p10_se || !r->fc_p50_se || !r->fc_p90_se) {
        st = kr_error_set(err, KR_ERR_NOMEM, "report %s: out of memory", symbol);
        goto fail;
    }
    int64_t first = c->n - r->n_chart;
    memcpy(r->chart_ts, c->timestamps + first, (size_t)r->n_chart * sizeof *r->chart_ts);
    memcpy(r->chart_values, c->values + first * KR_N_FEATURES,
           (size_t)r->n_chart * KR_N_FEATURES * sizeof *r->chart_values);
    memcpy(r->fc_ts, ps->timestamps, (size_t)h * sizeof *r->fc_ts);
    memcpy(r->fc_mean, ps->mean, cell);
    mean_se(ps, r->fc_mean_se);
    if ((st = bands(ps, r, err)) != KR_OK) goto fail;
    r->realized_vol_h = realized_vol_h(c, h);
    if ((st = kr_report_horizon_stats(r, ps, err)) != KR_OK) goto fail;
    if ((st = kr_tech_snapshot_compute(c, KR_REPORT_RV_WINDOW, &r->tech, err)) != KR_OK) goto fail;
    if ((st = kr_summary_build(r, &r->summary, &r->n_summary, err)) != KR_OK) goto fail;
    *out = r;
    return KR_OK;
fail:
    kr_error_prefix(err, "report %s", symbol);
    kr_report_free(r);
    return st;
}

kr_status kr_report_attach_calibration(kr_report *r, kr_calibration *cal, kr_error *err) {
    if (!r || !cal) return kr_error_set(err, KR_ERR_INVALID_ARG, "report: NULL calibration");
    kr_calibration_free(r->calibration);
    r->calibration = cal;
    char **s = NULL;
    int n = 0;
    kr_status st = kr_summary_build(r, &s, &n, err);
    if (st != KR_OK) return st;
    kr_summary_free(r->summary, r->n_summary);
    r->summary = s;
    r->n_summary = n;
    return KR_OK;
}

const char *kr_report_symbol(const kr_report *r) { return r ? r->symbol : ""; }
const char *kr_report_interval(const kr_report *r) { return r ? r->interval : ""; }
