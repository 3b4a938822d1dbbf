/*
 * eval/backtest_score — one forecast's cells: every score of every step, added into the
 * report's sums (backtest_internal.h), and what the cross-section, the strategy and the CSV
 * need of it; and the baselines' forecasts.
 *
 * Everything is computed on z = close / last close, so a cell of a $20 stock and one of a
 * $60,000 coin weigh alike in pooled scores (CRPS and MAE are then fractions of the price);
 * MAPE is the same on either scale, MASE is scaled by the series' own seasonal naive error.
 * A point forecast is a distribution with all its mass on one value: its CRPS is its absolute
 * error and every quantile is the value.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/stats.h"
#include "base/rng.h"
#include "eval/backtest_internal.h"
#include "eval/backtest_stats.h"

static const double k_levels[KR_BT_N_QUANTILES] = { 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9 };

/* Distinct stream tags of the score seed, so the PIT's uniforms, the random walk's draws and
 * the bootstrap's starts never share a stream. */
#define KR_BT_STREAM_PIT 0x5049540000000000ull
#define KR_BT_STREAM_RW 0x5257000000000000ull

int64_t kr_bt_score_scratch(int paths, int horizon) {
    (void)horizon;
    return 2 * (int64_t)(paths > 1 ? paths : 1) + 8;
}

static void add_cell(kr_backtest_report *r, int item, int f, int m, int k, double num, double den) {
    if (!isfinite(num) || !isfinite(den) || den == 0) return;
    const kr_bt_item *it = &r->items[item];
    r->item_num[kr_bt_item_idx(item, f, m)] += num;
    r->item_den[kr_bt_item_idx(item, f, m)] += den;
    const int h = r->p.horizon;
    r->unit_num[kr_bt_unit_idx(r, it->unit, f, m, k)] += num;
    r->unit_den[kr_bt_unit_idx(r, it->unit, f, m, k)] += den;
    r->unit_num[kr_bt_unit_idx(r, it->unit, f, m, h)] += num;
    r->unit_den[kr_bt_unit_idx(r, it->unit, f, m, h)] += den;
}

/* Bin of a probability in [0, 1] among n equal bins (1 falls in the last). */
static int bin_of(double x, int n) {
    int b = (int)floor(x * n);
    return b < 0 ? 0 : b >= n ? n - 1 : b;
}

/* 1 when both moves have the same sign, 0 when opposite, 1/2 when either is flat. */
static double direction_hit(double predicted, double realised) {
    const int a = kr_stat_sign(predicted), b = kr_stat_sign(realised);
    if (a == 0 || b == 0) return 0.5;
    return a == b ? 1.0 : 0.0;
}

void kr_bt_score_item(kr_backtest_report *r, int item, int f, const kr_bt_cell_input *in,
                      const double *real, double *scratch) {
    kr_bt_item *it = &r->items[item];
    kr_bt_fsum *fs = &it->f[f];
    const int h = r->p.horizon, P = in->paths;
    const double c0 = it->last_close;
    const int hold_step = (r->hold < h ? r->hold : h) - 1;
    double *z = scratch, *path_sq = scratch + P;
    double *bins = r->unit_bins + ((int64_t)it->unit * KR_BT_N_F + f) * KR_BT_N_BINS;
    for (int p = 0; p < P; p++) path_sq[p] = 0;
    double crps_sum = 0;
    int crps_n = 0;
    for (int k = 0; k < h; k++) {
        double mean = 0;
        int ups = 0;
        for (int p = 0; p < P; p++) {
            const double x = in->closes[(int64_t)p * h + k];
            const double prev = k == 0 ? c0 : in->closes[(int64_t)p * h + k - 1];
            /* A path through a price <= 0 has no log return: out of the volatility. */
            path_sq[p] += x > 0 && prev > 0 ? log(x / prev) * log(x / prev) : INFINITY;
            z[p] = x / c0;
            ups += z[p] > 1.0;
        }
        /* The mean about the first path: the same value, exactly z when every path agrees. */
        double dev = 0;
        for (int p = 0; p < P; p++) dev += z[p] - z[0];
        mean = z[0] + dev / P;
        kr_stat_sort(z, P);
        const double y = real[k] / c0;
        const double med = kr_stat_quantile_sorted(z, P, 0.5);
        const double crps = kr_bt_crps_sorted(z, P, y);
        if (isfinite(crps)) crps_sum += crps, crps_n++;
        add_cell(r, item, f, KR_BT_CRPS, k, crps, 1);
        double ql = 0;
        for (int j = 0; j < KR_BT_N_QUANTILES; j++)
            ql += kr_bt_pinball(k_levels[j], kr_stat_quantile_sorted(z, P, k_levels[j]), y);
        add_cell(r, item, f, KR_BT_WQL, k, 2.0 * ql / KR_BT_N_QUANTILES, fabs(y));
        const double p10 = kr_stat_quantile_sorted(z, P, 0.1),
                     p90 = kr_stat_quantile_sorted(z, P, 0.9);
        add_cell(r, item, f, KR_BT_COV80, k, y >= p10 && y <= p90, 1);
        add_cell(r, item, f, KR_BT_COV90, k,
                 y >= kr_stat_quantile_sorted(z, P, 0.05) &&
                     y <= kr_stat_quantile_sorted(z, P, 0.95),
                 1);
        add_cell(r, item, f, KR_BT_MAE_MEDIAN, k, fabs(med - y), 1);
        add_cell(r, item, f, KR_BT_MAE_MEAN, k, fabs(mean - y), 1);
        if (y != 0) {
            add_cell(r, item, f, KR_BT_MAPE_MEDIAN, k, fabs(med - y) / fabs(y), 1);
            add_cell(r, item, f, KR_BT_MAPE_MEAN, k, fabs(mean - y) / fabs(y), 1);
        }
        if (it->mase_scale > 0) {
            add_cell(r, item, f, KR_BT_MASE_MEDIAN, k, fabs(med - y) * c0 / it->mase_scale, 1);
            add_cell(r, item, f, KR_BT_MASE_MEAN, k, fabs(mean - y) * c0 / it->mase_scale, 1);
        }
        add_cell(r, item, f, KR_BT_DIRECTION, k, direction_hit(mean - 1.0, y - 1.0), 1);
        /* A point forecast's P(up): 1 above the last close, 0 below, 1/2 on it. */
        const double prob_up = in->probabilistic ? (double)ups / P
                               : mean > 1.0      ? 1.0
                               : mean < 1.0      ? 0.0
                                                 : 0.5;
        const double went_up = y > 1.0;
        add_cell(r, item, f, KR_BT_BRIER, k, (prob_up - went_up) * (prob_up - went_up), 1);
        const int rb = bin_of(prob_up, KR_BT_REL_BINS);
        bins[KR_BT_PIT_BINS + rb] += 1;
        bins[KR_BT_PIT_BINS + KR_BT_REL_BINS + rb] += prob_up;
        bins[KR_BT_PIT_BINS + 2 * KR_BT_REL_BINS + rb] += went_up;
        if (in->probabilistic) {
            const uint64_t stream =
                KR_BT_STREAM_PIT ^ ((uint64_t)it->sym << 40) ^ (uint64_t)it->row;
            const double u = kr_rng_uniform(r->p.score_seed, stream, (uint64_t)(f * h + k));
            bins[bin_of(kr_bt_pit(z, P, y, u), KR_BT_PIT_BINS)] += 1;
        }
        if (k == h - 1) {
            fs->mean_h = mean * c0;
            fs->median_h = med * c0;
            fs->p10_h = p10 * c0;
            fs->p90_h = p90 * c0;
            fs->exp_return = mean - 1.0;
            fs->prob_up = prob_up;
        }
        if (k == hold_step) {
            fs->exp_return_hold = mean - 1.0;
            fs->prob_up_hold = prob_up;
        }
    }
    fs->crps = crps_n ? crps_sum / crps_n : NAN;
    fs->vol = NAN;
    if (in->probabilistic) {
        double s = 0;
        int m = 0;
        for (int p = 0; p < P; p++)
            if (isfinite(path_sq[p])) s += path_sq[p], m++;
        if (m > 0) fs->vol = sqrt(s / m);
        if (isfinite(fs->vol) && isfinite(it->real_vol)) {
            const double ae = fabs(fs->vol - it->real_vol);
            r->item_num[kr_bt_item_idx(item, f, KR_BT_VOL_AE)] += ae;
            r->item_den[kr_bt_item_idx(item, f, KR_BT_VOL_AE)] += 1;
            r->unit_num[kr_bt_unit_idx(r, it->unit, f, KR_BT_VOL_AE, h)] += ae;
            r->unit_den[kr_bt_unit_idx(r, it->unit, f, KR_BT_VOL_AE, h)] += 1;
        }
    }
}

int kr_bt_baseline(const kr_backtest_report *r, int f, const kr_bt_item *it, const double *hist,
                   int n_hist, double *out) {
    const int h = r->p.horizon;
    const double c0 = it->last_close;
    switch (f) {
    case KR_BT_F_NAIVE:
        for (int k = 0; k < h; k++) out[k] = c0;
        return 0;
    case KR_BT_F_SEASONAL: {
        const int m = r->symbols[it->sym].season;
        if (m < 1 || n_hist < m) return -1;
        /* Step k + 1 repeats the bar one season before it: T + k + 1 - m ceil((k + 1) / m). */
        for (int k = 0; k < h; k++) {
            const int back = m * ((k + 1 + m - 1) / m) - (k + 1);
            out[k] = hist[n_hist - 1 - back];
        }
        return 0;
    }
    case KR_BT_F_DRIFT: {
        if (n_hist < 2 || !(hist[0] > 0) || !(c0 > 0)) return -1;
        const double mu = log(c0 / hist[0]) / (n_hist - 1);
        for (int k = 0; k < h; k++) out[k] = c0 * exp((k + 1) * mu);
        return 0;
    }
    case KR_BT_F_RW: {
        /* The lookback's 1-bar log returns, drawn with replacement, step by step. */
        double *ret = malloc((size_t)(n_hist > 1 ? n_hist : 1) * sizeof *ret);
        if (!ret) return -1;
        int nr = 0;
        for (int t = 1; t < n_hist; t++)
            if (hist[t] > 0 && hist[t - 1] > 0) ret[nr++] = log(hist[t] / hist[t - 1]);
        if (nr < 1 || !(c0 > 0)) {
            free(ret);
            return -1;
        }
        const int P = r->p.paths;
        const uint64_t stream = KR_BT_STREAM_RW ^ ((uint64_t)it->sym << 40) ^ (uint64_t)it->row;
        for (int p = 0; p < P; p++) {
            double x = c0;
            for (int k = 0; k < h; k++) {
                const double u = kr_rng_uniform(r->p.score_seed, stream, (uint64_t)p * h + k);
                int j = (int)(u * nr);
                if (j >= nr) j = nr - 1;
                x *= exp(ret[j]);
                out[(int64_t)p * h + k] = x;
            }
        }
        free(ret);
        return 0;
    }
    default: return -1;
    }
}
