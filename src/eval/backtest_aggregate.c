/*
 * eval/backtest_aggregate — from the cells' sums to the report's figures: every score pooled
 * (per step and over the horizon) and per symbol, the PIT histogram, the P(up) reliability
 * diagram, volatility correlations, each with a circular block bootstrap interval over origins;
 * the model / baseline ratios (and their geometric mean across symbols, as Chronos reports
 * relative scores) and the Diebold-Mariano tests.
 *
 * One resample draws blocks of consecutive origins (units: every forecast made at one origin
 * time moves together, so the cross-sectional dependence is kept) and recomputes each figure as
 * the same ratio of sums over the drawn cells; the interval is the percentile interval of the
 * resampled figures. Per-symbol figures use the same draws, restricted to the symbol's cells.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "eval/backtest_internal.h"
#include "eval/backtest_stats.h"

#define KR_BT_STREAM_BOOT 0x424f4f5400000000ull

/* The resampled PIT and reliability bins share one array, bin by bin. */
_Static_assert(KR_BT_PIT_BINS == KR_BT_REL_BINS, "PIT and reliability bins differ in number");

/* The (forecaster, baseline) pairs compared, and on which scores. */
static const int k_rel_metrics[] = { KR_BT_CRPS, KR_BT_WQL, KR_BT_MASE_MEDIAN, KR_BT_MAE_MEDIAN };
static const int k_dm_metrics[] = { KR_BT_CRPS, KR_BT_MASE_MEDIAN };
#define N_REL_METRICS ((int)(sizeof k_rel_metrics / sizeof k_rel_metrics[0]))
#define N_DM_METRICS ((int)(sizeof k_dm_metrics / sizeof k_dm_metrics[0]))

static double ratio(double num, double den) { return den > 0 ? num / den : NAN; }

static uint64_t boot_seed(const kr_backtest_report *r) {
    return kr_mix64(r->p.score_seed ^ KR_BT_STREAM_BOOT);
}

static void est_from(kr_bt_est *e, double value, double *reps, int B, double level) {
    e->value = value;
    e->lo = e->hi = NAN;
    if (!reps || B < 1) return;
    const double a = (1.0 - level) / 2.0;
    /* kr_bt_percentile sorts its input: the second call reads the same sorted values. */
    e->lo = kr_bt_percentile(reps, B, a);
    e->hi = kr_bt_percentile(reps, B, 1.0 - a);
}

/* The pairs: the model and the second model against each baseline (the second model also
 * against the model). Writes up to `cap` pairs. */
static int pairs(const kr_backtest_report *r, int (*fb)[2], int cap) {
    int n = 0;
    for (int f = KR_BT_F_MODEL; f <= KR_BT_F_COMPARE; f++) {
        if (!r->has[f]) continue;
        for (int b = 0; b < KR_BT_N_F; b++) {
            if (b == f || !r->has[b] || (f == KR_BT_F_MODEL && b == KR_BT_F_COMPARE)) continue;
            if (n < cap) fb[n][0] = f, fb[n][1] = b;
            n++;
        }
    }
    return n;
}

/* Point figures: ratios of the sums over every unit / item. */
static void point_figures(kr_backtest_report *r) {
    const int H1 = r->p.horizon + 1;
    for (int f = 0; f < KR_BT_N_F; f++)
        for (int m = 0; m < KR_BT_N_METRICS; m++)
            for (int k = 0; k < H1; k++) {
                double num = 0, den = 0;
                for (int u = 0; u < r->n_units; u++) {
                    num += r->unit_num[kr_bt_unit_idx(r, u, f, m, k)];
                    den += r->unit_den[kr_bt_unit_idx(r, u, f, m, k)];
                }
                kr_bt_est *e = &r->pooled[kr_bt_pooled_idx(r, f, m, k)];
                e->value = ratio(num, den);
                e->lo = e->hi = NAN;
            }
    for (int s = 0; s < r->n_symbols; s++) {
        const kr_bt_symbol *sy = &r->symbols[s];
        for (int f = 0; f < KR_BT_N_F; f++)
            for (int m = 0; m < KR_BT_N_METRICS; m++) {
                double num = 0, den = 0;
                for (int i = sy->first_item; i < sy->first_item + sy->n_items; i++) {
                    num += r->item_num[kr_bt_item_idx(i, f, m)];
                    den += r->item_den[kr_bt_item_idx(i, f, m)];
                }
                kr_bt_est *e = &r->per_symbol[((int64_t)s * KR_BT_N_F + f) * KR_BT_N_METRICS + m];
                e->value = ratio(num, den);
                e->lo = e->hi = NAN;
            }
    }
}

/* Bins summed with weights w[unit] (NULL: 1) into the PIT fractions and the reliability
 * diagram's observed frequencies, mean predictions and counts of forecaster f. */
static void bin_figures(const kr_backtest_report *r, int f, const int *w, double *pit, double *freq,
                        double *pred, double *count) {
    double b[KR_BT_N_BINS] = { 0 };
    for (int u = 0; u < r->n_units; u++) {
        const double wu = w ? w[u] : 1;
        if (wu == 0) continue;
        const double *x = r->unit_bins + ((int64_t)u * KR_BT_N_F + f) * KR_BT_N_BINS;
        for (int j = 0; j < KR_BT_N_BINS; j++) b[j] += wu * x[j];
    }
    double n_pit = 0;
    for (int j = 0; j < KR_BT_PIT_BINS; j++) n_pit += b[j];
    for (int j = 0; j < KR_BT_PIT_BINS; j++) pit[j] = ratio(b[j], n_pit);
    for (int j = 0; j < KR_BT_REL_BINS; j++) {
        const double n = b[KR_BT_PIT_BINS + j];
        freq[j] = ratio(b[KR_BT_PIT_BINS + 2 * KR_BT_REL_BINS + j], n);
        if (pred) pred[j] = ratio(b[KR_BT_PIT_BINS + KR_BT_REL_BINS + j], n);
        if (count) count[j] = n;
    }
}

/* Volatility correlation of forecaster f over the items, weighted by their unit's count. */
static double vol_corr(const kr_backtest_report *r, int f, const int *w, double *x, double *y,
                       double *wt) {
    for (int i = 0; i < r->n_items; i++) {
        x[i] = r->items[i].f[f].vol;
        y[i] = r->items[i].real_vol;
        wt[i] = w ? w[r->items[i].unit] : 1;
    }
    return kr_bt_pearson(x, y, wt, r->n_items);
}

static kr_status pooled_bootstrap(kr_backtest_report *r, kr_error *err) {
    const int B = r->p.bootstrap, U = r->n_units, H1 = r->p.horizon + 1;
    const int64_t n_fig = (int64_t)KR_BT_N_F * KR_BT_N_METRICS * H1;
    const double level = r->p.ci_level;
    double *reps = malloc((size_t)(n_fig * B) * sizeof *reps);
    double *num = malloc((size_t)n_fig * sizeof *num), *den = malloc((size_t)n_fig * sizeof *den);
    double *bin_reps = malloc((size_t)KR_BT_N_F * 2 * KR_BT_PIT_BINS * B * sizeof *bin_reps);
    double *vol_reps = malloc((size_t)KR_BT_N_F * B * sizeof *vol_reps);
    double *x = malloc((size_t)r->n_items * 3 * sizeof *x);
    int *counts = malloc((size_t)U * sizeof *counts);
    kr_status st = KR_OK;
    if (!reps || !num || !den || !bin_reps || !vol_reps || !x || !counts) {
        st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory for the bootstrap");
        goto out;
    }
    for (int rep = 0; rep < B; rep++) {
        kr_bt_block_counts(U, r->block_length, boot_seed(r), (uint64_t)rep, counts);
        memset(num, 0, (size_t)n_fig * sizeof *num);
        memset(den, 0, (size_t)n_fig * sizeof *den);
        for (int u = 0; u < U; u++) {
            if (!counts[u]) continue;
            const double c = counts[u];
            for (int f = 0; f < KR_BT_N_F; f++) {
                if (!r->has[f]) continue;
                const int64_t base = kr_bt_unit_idx(r, u, f, 0, 0),
                              o = kr_bt_pooled_idx(r, f, 0, 0);
                for (int64_t j = 0; j < (int64_t)KR_BT_N_METRICS * H1; j++) {
                    num[o + j] += c * r->unit_num[base + j];
                    den[o + j] += c * r->unit_den[base + j];
                }
            }
        }
        for (int64_t j = 0; j < n_fig; j++) reps[j * B + rep] = ratio(num[j], den[j]);
        for (int f = 0; f < KR_BT_N_F; f++) {
            double pit[KR_BT_PIT_BINS], freq[KR_BT_REL_BINS];
            if (r->has[f])
                bin_figures(r, f, counts, pit, freq, NULL, NULL);
            else
                for (int j = 0; j < KR_BT_PIT_BINS; j++) pit[j] = freq[j] = NAN;
            for (int j = 0; j < KR_BT_PIT_BINS; j++) {
                bin_reps[((int64_t)(f * 2) * KR_BT_PIT_BINS + j) * B + rep] = pit[j];
                bin_reps[((int64_t)(f * 2 + 1) * KR_BT_PIT_BINS + j) * B + rep] = freq[j];
            }
            vol_reps[(int64_t)f * B + rep] =
                r->has[f] ? vol_corr(r, f, counts, x, x + r->n_items, x + 2 * r->n_items) : NAN;
        }
    }
    for (int64_t j = 0; j < n_fig; j++)
        est_from(&r->pooled[j], r->pooled[j].value, reps + j * B, B, level);
    for (int f = 0; f < KR_BT_N_F; f++) {
        for (int j = 0; j < KR_BT_PIT_BINS; j++) {
            kr_bt_est *e = &r->pit[f * KR_BT_PIT_BINS + j];
            est_from(e, e->value, bin_reps + ((int64_t)(f * 2) * KR_BT_PIT_BINS + j) * B, B, level);
            e = &r->rel_freq[f * KR_BT_REL_BINS + j];
            est_from(e, e->value, bin_reps + ((int64_t)(f * 2 + 1) * KR_BT_PIT_BINS + j) * B, B,
                     level);
        }
        est_from(&r->vol_corr[f], r->vol_corr[f].value, vol_reps + (int64_t)f * B, B, level);
    }
out:
    free(reps);
    free(num);
    free(den);
    free(bin_reps);
    free(vol_reps);
    free(x);
    free(counts);
    return st;
}

/* Per-symbol intervals, the per-symbol ratios' intervals and the geometric means'. */
static kr_status symbol_bootstrap(kr_backtest_report *r, int (*fb)[2], int n_pairs, kr_error *err) {
    const int B = r->p.bootstrap, U = r->n_units, S = r->n_symbols;
    const int n_fig = KR_BT_N_F * KR_BT_N_METRICS;
    const double level = r->p.ci_level;
    const int boot = B > 0 && U >= 2;
    const int n_rel = r->n_rel;
    double *reps = boot ? malloc((size_t)n_fig * B * sizeof *reps) : NULL;
    double *ratio_reps = boot ? malloc((size_t)B * sizeof *ratio_reps) : NULL;
    double *geo_sum = calloc((size_t)(n_rel * (B + 1)), sizeof *geo_sum);
    int *geo_n = calloc((size_t)(n_rel * (B + 1)), sizeof *geo_n);
    int *counts = malloc((size_t)U * sizeof *counts);
    double num[KR_BT_N_F * KR_BT_N_METRICS], den[KR_BT_N_F * KR_BT_N_METRICS];
    kr_status st = KR_OK;
    (void)fb;
    (void)n_pairs;
    if ((boot && (!reps || !ratio_reps)) || !geo_sum || !geo_n || !counts) {
        st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory for the bootstrap");
        goto out;
    }
    for (int s = 0; s < S; s++) {
        const kr_bt_symbol *sy = &r->symbols[s];
        if (sy->n_items == 0) continue;
        kr_bt_est *ps = &r->per_symbol[(int64_t)s * n_fig];
        for (int rep = 0; boot && rep < B; rep++) {
            kr_bt_block_counts(U, r->block_length, boot_seed(r), (uint64_t)rep, counts);
            memset(num, 0, sizeof num);
            memset(den, 0, sizeof den);
            for (int i = sy->first_item; i < sy->first_item + sy->n_items; i++) {
                const int c = counts[r->items[i].unit];
                if (!c) continue;
                const double *a = r->item_num + kr_bt_item_idx(i, 0, 0);
                const double *d = r->item_den + kr_bt_item_idx(i, 0, 0);
                for (int j = 0; j < n_fig; j++) num[j] += c * a[j], den[j] += c * d[j];
            }
            for (int j = 0; j < n_fig; j++) reps[(int64_t)j * B + rep] = ratio(num[j], den[j]);
        }
        /* Ratios of this symbol, point and resampled, before the percentiles sort reps. */
        for (int q = 0; q < n_rel; q++) {
            kr_bt_rel_row *row = &r->rel[q];
            const int jf = row->f * KR_BT_N_METRICS + row->metric;
            const int jb = row->b * KR_BT_N_METRICS + row->metric;
            const double v = ps[jf].value / ps[jb].value;
            if (isfinite(v) && v > 0) {
                geo_sum[(int64_t)q * (B + 1) + B] += log(v);
                geo_n[(int64_t)q * (B + 1) + B]++;
            }
            for (int rep = 0; boot && rep < B; rep++) {
                const double x = reps[(int64_t)jf * B + rep] / reps[(int64_t)jb * B + rep];
                ratio_reps[rep] = x;
                if (isfinite(x) && x > 0) {
                    geo_sum[(int64_t)q * (B + 1) + rep] += log(x);
                    geo_n[(int64_t)q * (B + 1) + rep]++;
                }
            }
            est_from(&row->per_symbol[s], v, boot ? ratio_reps : NULL, B, level);
        }
        for (int j = 0; j < n_fig; j++)
            est_from(&ps[j], ps[j].value, boot ? reps + (int64_t)j * B : NULL, B, level);
    }
    for (int q = 0; q < n_rel; q++) {
        double *g = geo_sum + (int64_t)q * (B + 1);
        const int *gn = geo_n + (int64_t)q * (B + 1);
        const double v = gn[B] ? exp(g[B] / gn[B]) : NAN;
        for (int rep = 0; rep < B; rep++) g[rep] = gn[rep] ? exp(g[rep] / gn[rep]) : NAN;
        est_from(&r->rel[q].geo_mean, v, boot ? g : NULL, B, level);
    }
out:
    free(reps);
    free(ratio_reps);
    free(geo_sum);
    free(geo_n);
    free(counts);
    return st;
}

/* Mean loss of forecaster f at item i on metric m (over the steps), NaN without cells. */
static double item_loss(const kr_backtest_report *r, int i, int f, int m) {
    return ratio(r->item_num[kr_bt_item_idx(i, f, m)], r->item_den[kr_bt_item_idx(i, f, m)]);
}

static void dm_row(kr_bt_dm_row *row, const double *d, int n, int lags, double alpha) {
    kr_bt_dm t;
    kr_bt_dm_test(d, n, lags, &t);
    row->n = t.n;
    row->lags = t.lags;
    row->mean_diff = t.mean_diff;
    row->dm = t.dm;
    row->hln = t.hln;
    row->p_value = t.p_value;
    row->verdict = t.p_value < alpha ? (t.mean_diff < 0 ? -1 : 1) : 0;
}

static kr_status dm_tests(kr_backtest_report *r, int (*fb)[2], int n_pairs, kr_error *err) {
    const int per_pair = N_DM_METRICS * (r->n_symbols + 1);
    r->dm = calloc((size_t)(n_pairs * per_pair), sizeof *r->dm);
    double *d = malloc((size_t)(r->n_items > r->n_units ? r->n_items : r->n_units) * sizeof *d);
    double *sum = calloc((size_t)r->n_units, sizeof *sum);
    int *cnt = calloc((size_t)r->n_units, sizeof *cnt);
    if (!r->dm || !d || !sum || !cnt) {
        free(d);
        free(sum);
        free(cnt);
        return kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory for the DM tests");
    }
    for (int q = 0; q < n_pairs; q++)
        for (int mi = 0; mi < N_DM_METRICS; mi++) {
            const int f = fb[q][0], b = fb[q][1], m = k_dm_metrics[mi];
            memset(sum, 0, (size_t)r->n_units * sizeof *sum);
            memset(cnt, 0, (size_t)r->n_units * sizeof *cnt);
            for (int s = 0; s < r->n_symbols; s++) {
                const kr_bt_symbol *sy = &r->symbols[s];
                if (sy->n_items == 0) continue;
                int n = 0;
                for (int i = sy->first_item; i < sy->first_item + sy->n_items; i++) {
                    const double x = item_loss(r, i, f, m) - item_loss(r, i, b, m);
                    if (!isfinite(x)) continue;
                    d[n++] = x;
                    sum[r->items[i].unit] += x;
                    cnt[r->items[i].unit]++;
                }
                kr_bt_dm_row *row = &r->dm[r->n_dm++];
                row->f = f, row->b = b, row->metric = m, row->sym = s;
                dm_row(row, d, n, r->lags, r->p.alpha);
            }
            int n = 0;
            for (int u = 0; u < r->n_units; u++)
                if (cnt[u]) d[n++] = sum[u] / cnt[u];
            kr_bt_dm_row *row = &r->dm[r->n_dm++];
            row->f = f, row->b = b, row->metric = m, row->sym = -1;
            dm_row(row, d, n, r->lags, r->p.alpha);
        }
    free(d);
    free(sum);
    free(cnt);
    return KR_OK;
}

kr_status kr_bt_aggregate(kr_backtest_report *r, kr_error *err) {
    const int H1 = r->p.horizon + 1;
    r->pooled = calloc((size_t)KR_BT_N_F * KR_BT_N_METRICS * H1, sizeof *r->pooled);
    r->per_symbol =
        calloc((size_t)r->n_symbols * KR_BT_N_F * KR_BT_N_METRICS, sizeof *r->per_symbol);
    r->pit = calloc((size_t)KR_BT_N_F * KR_BT_PIT_BINS, sizeof *r->pit);
    r->rel_freq = calloc((size_t)KR_BT_N_F * KR_BT_REL_BINS, sizeof *r->rel_freq);
    r->rel_pred = calloc((size_t)KR_BT_N_F * KR_BT_REL_BINS, sizeof *r->rel_pred);
    r->rel_count = calloc((size_t)KR_BT_N_F * KR_BT_REL_BINS, sizeof *r->rel_count);
    double *x = malloc((size_t)r->n_items * 3 * sizeof *x);
    int fb[2 * KR_BT_N_F][2];
    const int n_pairs = pairs(r, fb, 2 * KR_BT_N_F);
    r->rel = calloc((size_t)(n_pairs * N_REL_METRICS), sizeof *r->rel);
    if (!r->pooled || !r->per_symbol || !r->pit || !r->rel_freq || !r->rel_pred || !r->rel_count ||
        !x || !r->rel) {
        free(x);
        return kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory aggregating");
    }
    for (int q = 0; q < n_pairs; q++)
        for (int mi = 0; mi < N_REL_METRICS; mi++) {
            kr_bt_rel_row *row = &r->rel[r->n_rel++];
            row->f = fb[q][0];
            row->b = fb[q][1];
            row->metric = k_rel_metrics[mi];
            row->per_symbol = calloc((size_t)r->n_symbols, sizeof *row->per_symbol);
            if (!row->per_symbol) {
                free(x);
                return kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory aggregating");
            }
            for (int s = 0; s < r->n_symbols; s++)
                row->per_symbol[s].value = row->per_symbol[s].lo = row->per_symbol[s].hi = NAN;
        }
    point_figures(r);
    for (int f = 0; f < KR_BT_N_F; f++) {
        double pit[KR_BT_PIT_BINS], freq[KR_BT_REL_BINS], pred[KR_BT_REL_BINS], cnt[KR_BT_REL_BINS];
        bin_figures(r, f, NULL, pit, freq, pred, cnt);
        for (int j = 0; j < KR_BT_PIT_BINS; j++) {
            r->pit[f * KR_BT_PIT_BINS + j] = (kr_bt_est){ pit[j], NAN, NAN };
            r->rel_freq[f * KR_BT_REL_BINS + j] = (kr_bt_est){ freq[j], NAN, NAN };
            r->rel_pred[f * KR_BT_REL_BINS + j] = pred[j];
            r->rel_count[f * KR_BT_REL_BINS + j] = (int64_t)cnt[j];
        }
        r->vol_corr[f].value =
            r->has[f] ? vol_corr(r, f, NULL, x, x + r->n_items, x + 2 * r->n_items) : NAN;
        r->vol_corr[f].lo = r->vol_corr[f].hi = NAN;
    }
    free(x);
    kr_status st = KR_OK;
    if (r->p.bootstrap > 0 && r->n_units >= 2) st = pooled_bootstrap(r, err);
    if (st == KR_OK) st = symbol_bootstrap(r, fb, n_pairs, err);
    if (st == KR_OK) st = dm_tests(r, fb, n_pairs, err);
    return st;
}
