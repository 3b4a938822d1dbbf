/*
 * eval/backtest_cross — the cross-section: at each origin with at least three symbols, the
 * information coefficient of the forecast's expected return at the horizon with the realised
 * return (IC: Pearson; RankIC: Spearman, ties averaged), then over origins their mean (with a
 * block bootstrap interval), standard deviation, t-statistic (plain, and with a Newey-West
 * variance for overlapping horizons) and ICIR = mean / std — the figures of Kronos's paper and
 * Qlib's reports.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/fidelity_stats.h"
#include "base/error.h"
#include "base/rng.h"
#include "eval/backtest_internal.h"
#include "eval/backtest_stats.h"

/* Fewer symbols than this make a correlation of ranks meaningless (two give +-1). */
#define KR_BT_IC_MIN_SYMBOLS 3
#define KR_BT_STREAM_IC 0x4943000000000000ull

static void summarise(const kr_backtest_report *r, const double *v, int n, kr_bt_ic_summary *out) {
    memset(out, 0, sizeof *out);
    out->mean.value = out->mean.lo = out->mean.hi = NAN;
    out->std = out->t_stat = out->t_stat_hac = out->icir = NAN;
    out->n = n;
    if (n < 1) return;
    double mean = 0;
    for (int i = 0; i < n; i++) mean += v[i];
    mean /= n;
    out->mean.value = mean;
    if (n < 2) return;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (v[i] - mean) * (v[i] - mean);
    out->std = sqrt(ss / (n - 1));
    if (out->std > 0) {
        out->icir = mean / out->std;
        out->t_stat = mean / (out->std / sqrt((double)n));
    }
    const double hac = kr_bt_hac_variance(v, n, r->lags);
    if (hac > 0) out->t_stat_hac = mean / sqrt(hac / n);
    const int B = r->p.bootstrap;
    if (B < 1) return;
    double *reps = malloc((size_t)B * sizeof *reps);
    int *counts = malloc((size_t)n * sizeof *counts);
    if (reps && counts) {
        for (int rep = 0; rep < B; rep++) {
            kr_bt_block_counts(n, r->block_length, kr_mix64(r->p.score_seed ^ KR_BT_STREAM_IC),
                               (uint64_t)rep, counts);
            double s = 0;
            for (int i = 0; i < n; i++) s += counts[i] * v[i];
            reps[rep] = s / n;
        }
        const double a = (1.0 - r->p.ci_level) / 2.0;
        out->mean.lo = kr_bt_percentile(reps, B, a);
        out->mean.hi = kr_bt_percentile(reps, B, 1.0 - a);
    }
    free(reps);
    free(counts);
}

kr_status kr_bt_cross_section(kr_backtest_report *r, kr_error *err) {
    const int U = r->n_units;
    r->ic = calloc((size_t)U, sizeof *r->ic);
    int *start = calloc((size_t)U + 1, sizeof *start),
        *order = malloc((size_t)r->n_items * sizeof *order);
    double *fx = malloc((size_t)r->n_items * sizeof *fx),
           *ry = malloc((size_t)r->n_items * sizeof *ry);
    double *ic = malloc((size_t)U * sizeof *ic), *ric = malloc((size_t)U * sizeof *ric);
    kr_status st = KR_OK;
    if (!r->ic || !start || !order || !fx || !ry || !ic || !ric) {
        st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory for the cross-section");
        goto out;
    }
    /* The items of each unit, by a counting sort on the unit. */
    for (int i = 0; i < r->n_items; i++) start[r->items[i].unit + 1]++;
    for (int u = 0; u < U; u++) start[u + 1] += start[u];
    {
        int *fill = calloc((size_t)U, sizeof *fill);
        if (!fill) {
            st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory for the cross-section");
            goto out;
        }
        for (int i = 0; i < r->n_items; i++) {
            const int u = r->items[i].unit;
            order[start[u] + fill[u]++] = i;
        }
        free(fill);
    }
    for (int f = 0; f < KR_BT_N_F; f++) {
        int n_ic = 0;
        for (int u = 0; u < U; u++) {
            int n = 0;
            for (int j = start[u]; j < start[u + 1]; j++) {
                const kr_bt_item *it = &r->items[order[j]];
                if (!isfinite(it->f[f].exp_return) || !isfinite(it->real_return)) continue;
                fx[n] = it->f[f].exp_return;
                ry[n++] = it->real_return;
            }
            double p = NAN, s = NAN;
            if (r->has[f] && n >= KR_BT_IC_MIN_SYMBOLS) {
                p = kr_bt_pearson(fx, ry, NULL, n);
                if (kr_spearman(fx, ry, n, &s) != KR_OK) s = NAN;
            }
            if (f == KR_BT_F_MODEL) r->ic[u] = (kr_bt_ic_point){ r->unit_ts[u], n, p, s };
            if (isfinite(p) && isfinite(s)) {
                ic[n_ic] = p;
                ric[n_ic++] = s;
            }
        }
        summarise(r, ic, n_ic, &r->ic_sum[f]);
        summarise(r, ric, n_ic, &r->rank_ic_sum[f]);
    }
out:
    free(start);
    free(order);
    free(fx);
    free(ry);
    free(ic);
    free(ric);
    return st;
}
