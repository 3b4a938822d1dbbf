/*
 * eval/backtest_strategy — the forecasts as a trading signal: at each rebalance (an origin
 * every `hold` bars with at least K + 1 symbols forecast, 2K with shorts) hold the K symbols
 * with the highest expected return (or P(up)) at the hold step, equal weight 1/K (and short
 * the K lowest, -1/K each), until the next rebalance; close-to-close, trading at the origin
 * bar's close.
 *
 * Costs: cost_bps per unit of weight traded, against the weights the previous period drifted
 * to. A-share rules, for the symbols they apply to: a symbol closing at its daily limit up
 * (+10 %, +20 % for ChiNext 300/301 and STAR 688/689, on the previous trading day's close,
 * rounded to the fen) cannot be bought, one at its limit down cannot be sold (T+1 and the
 * limits make the order unfillable: the weight stays where it was); a position bought on a
 * day cannot be sold the same day (T+1, which binds only for intraday bars).
 *
 * The benchmark: an equal-weight buy-and-hold of the first rebalance's symbols (its equity
 * curve) and, period by period, their equal-weight return (for the excess hit rate).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "eval/backtest_internal.h"
#include "eval/backtest_stats.h"

#define KR_BT_STREAM_STRAT 0x5354524100000000ull
#define SECONDS_PER_DAY 86400
#define SECONDS_PER_YEAR (365.25 * 86400.0)

static int64_t day_of(int64_t ts) {
    return ts >= 0 ? ts / SECONDS_PER_DAY : -((-ts + SECONDS_PER_DAY - 1) / SECONDS_PER_DAY);
}

static int64_t row_at_or_before(const kr_candles *c, int64_t t) {
    int64_t lo = 0, hi = c->n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (c->timestamps[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

static double close_at(const kr_candles *c, int64_t row) {
    return c->values[row * KR_N_FEATURES + KR_CLOSE];
}

/* -1 at the limit down, +1 at the limit up, 0 otherwise (A-share rules; a fen's rounding). */
static int limit_state(const kr_candles *c, int64_t row, double limit) {
    const int64_t day = day_of(c->timestamps[row]);
    int64_t j = row - 1;
    while (j >= 0 && day_of(c->timestamps[j]) == day) j--;
    if (j < 0) return 0;
    const double prev = close_at(c, j), x = close_at(c, row);
    const double up = floor(prev * (1.0 + limit) * 100.0 + 0.5) / 100.0;
    const double down = floor(prev * (1.0 - limit) * 100.0 + 0.5) / 100.0;
    if (x >= up - 1e-9) return 1;
    if (x <= down + 1e-9) return -1;
    return 0;
}

static double score_of(const kr_backtest_report *r, const kr_bt_item *it) {
    const kr_bt_fsum *f = &it->f[KR_BT_F_MODEL];
    return r->p.strategy_rank == KR_BACKTEST_RANK_PROB_UP ? f->prob_up_hold : f->exp_return_hold;
}

typedef struct ranked {
    int sym;
    double score;
} ranked;

static int by_score_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return x->sym - y->sym;
}

/* Annualised figures of period returns R[n] (and the equity they compound to). */
static void annualise(const double *R, int n, double ppy, double *ann_ret, double *ann_vol,
                      double *sharpe, double *hit) {
    double logsum = 0, mean = 0, ss = 0, hits = 0;
    for (int i = 0; i < n; i++) {
        logsum += log1p(R[i]);
        mean += R[i];
        hits += R[i] > 0;
    }
    mean /= n;
    for (int i = 0; i < n; i++) ss += (R[i] - mean) * (R[i] - mean);
    const double sd = n > 1 ? sqrt(ss / (n - 1)) : NAN;
    *ann_ret = expm1(logsum / n * ppy);
    *ann_vol = sd * sqrt(ppy);
    *sharpe = sd > 0 ? mean / sd * sqrt(ppy) : NAN;
    if (hit) *hit = hits / n;
}

static double max_drawdown(const double *equity, int n) {
    double peak = 1.0, mdd = 0;
    for (int i = 0; i < n; i++) {
        if (equity[i] > peak) peak = equity[i];
        const double dd = equity[i] / peak - 1.0;
        if (dd < mdd) mdd = dd;
    }
    return mdd;
}

static void bootstrap(kr_bt_strategy *s, const kr_backtest_report *r) {
    const int n = s->n_periods, B = r->p.bootstrap;
    const double a = (1.0 - r->p.ci_level) / 2.0;
    s->block_length = (int)lround(cbrt((double)n));
    if (s->block_length < 1) s->block_length = 1;
    if (B < 1 || n < 2) return;
    double *R = malloc((size_t)n * sizeof *R), *X = malloc((size_t)n * sizeof *X);
    double *rep = malloc((size_t)5 * B * sizeof *rep);
    int *counts = malloc((size_t)n * sizeof *counts);
    if (R && X && rep && counts) {
        for (int b = 0; b < B; b++) {
            kr_bt_block_counts(n, s->block_length, kr_mix64(r->p.score_seed ^ KR_BT_STREAM_STRAT),
                               (uint64_t)b, counts);
            int m = 0;
            double excess = 0;
            for (int i = 0; i < n; i++)
                for (int c = 0; c < counts[i]; c++) {
                    R[m] = s->periods[i].ret;
                    X[m++] = s->periods[i].ret > s->periods[i].bench_ret;
                }
            for (int i = 0; i < m; i++) excess += X[i];
            annualise(R, m, s->periods_per_year, &rep[b], &rep[B + b], &rep[2 * B + b],
                      &rep[3 * B + b]);
            rep[4 * B + b] = excess / m;
        }
        kr_bt_est *e[5] = { &s->ann_return, &s->ann_vol, &s->sharpe, &s->hit_rate,
                            &s->excess_hit_rate };
        for (int k = 0; k < 5; k++) {
            e[k]->lo = kr_bt_percentile(rep + (int64_t)k * B, B, a);
            e[k]->hi = kr_bt_percentile(rep + (int64_t)k * B, B, 1.0 - a);
        }
    }
    free(R);
    free(X);
    free(rep);
    free(counts);
}

kr_status kr_bt_strategy_run(kr_backtest_report *r, const kr_backtest_series *series,
                             kr_error *err) {
    kr_bt_strategy *s = &r->strategy;
    const int K = r->p.strategy_k, S = r->n_symbols, U = r->n_units;
    const int need = r->p.strategy_short ? (2 * K > K + 1 ? 2 * K : K + 1) : K + 1;
    kr_bt_est none = { NAN, NAN, NAN };
    s->ann_return = s->ann_vol = s->sharpe = s->hit_rate = s->excess_hit_rate = none;
    s->periods_per_year = s->max_drawdown = s->bench_max_drawdown = s->turnover = NAN;
    s->total_return = s->bench_total_return = s->bench_ann_return = s->bench_sharpe = NAN;
    if (K < 1) {
        snprintf(s->reason, sizeof s->reason, "no strategy asked for (strategy_k 0)");
        return KR_OK;
    }
    int *start = calloc((size_t)U + 1, sizeof *start),
        *order = malloc((size_t)r->n_items * sizeof *order);
    int *reb = malloc((size_t)U * sizeof *reb), *fill = calloc((size_t)U, sizeof *fill);
    ranked *rk = malloc((size_t)S * sizeof *rk);
    double *w = calloc((size_t)S, sizeof *w), *tgt = calloc((size_t)S, sizeof *tgt);
    double *ret = calloc((size_t)S, sizeof *ret);
    int *base = calloc((size_t)S, sizeof *base); /* the benchmark's symbols */
    int64_t *bought = malloc((size_t)S * sizeof *bought);
    double *R = NULL, *eq = NULL;
    kr_status st = KR_OK;
    if (!start || !order || !reb || !fill || !rk || !w || !tgt || !ret || !base || !bought) {
        st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory for the strategy");
        goto out;
    }
    for (int i = 0; i < S; i++) bought[i] = INT64_MIN;
    for (int i = 0; i < r->n_items; i++) start[r->items[i].unit + 1]++;
    for (int u = 0; u < U; u++) start[u + 1] += start[u];
    for (int i = 0; i < r->n_items; i++) {
        const int u = r->items[i].unit;
        order[start[u] + fill[u]++] = i;
    }
    /* Rebalances: units with enough symbols, every (hold / every)-th of them. */
    const int stride = r->p.origin_ts ? 1 : (r->hold / r->every > 0 ? r->hold / r->every : 1);
    int n_reb = 0, seen = 0;
    for (int u = 0; u < U; u++) {
        int valid = 0;
        for (int j = start[u]; j < start[u + 1]; j++)
            valid += isfinite(score_of(r, &r->items[order[j]]));
        if (valid < need) continue;
        if (seen++ % stride == 0) reb[n_reb++] = u;
    }
    if (n_reb < 2) {
        snprintf(s->reason, sizeof s->reason,
                 "fewer than two rebalances with at least %d symbols forecast at the same origin "
                 "(the strategy holds the top %d%s)",
                 need, K, r->p.strategy_short ? " and shorts the bottom ones" : "");
        goto out;
    }
    s->periods = calloc((size_t)n_reb, sizeof *s->periods);
    R = malloc((size_t)n_reb * sizeof *R);
    eq = malloc((size_t)n_reb * sizeof *eq);
    if (!s->periods || !R || !eq) {
        st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory for the strategy");
        goto out;
    }
    double equity = 1.0, peak = 1.0, bench_equity = 1.0;
    int n_base = 0;
    for (int t = 0; t < n_reb; t++) {
        const int u = reb[t];
        const int64_t T = r->unit_ts[u];
        /* The period ends at the next rebalance; the last one `hold` bars on. */
        int64_t T1;
        if (t + 1 < n_reb)
            T1 = r->unit_ts[reb[t + 1]];
        else {
            const kr_bt_item *it = &r->items[order[start[u]]];
            const kr_candles *c = series[it->sym].candles;
            int64_t row = it->row + r->hold;
            if (row > c->n - 1) row = c->n - 1;
            T1 = c->timestamps[row];
        }
        int n = 0;
        for (int j = start[u]; j < start[u + 1]; j++) {
            const kr_bt_item *it = &r->items[order[j]];
            const double sc = score_of(r, it);
            if (isfinite(sc)) rk[n++] = (ranked){ it->sym, sc };
        }
        qsort(rk, (size_t)n, sizeof *rk, by_score_desc);
        memset(tgt, 0, (size_t)S * sizeof *tgt);
        for (int k = 0; k < K && k < n; k++) tgt[rk[k].sym] = 1.0 / K;
        if (r->p.strategy_short)
            for (int k = 0; k < K && n - 1 - k >= K; k++) tgt[rk[n - 1 - k].sym] = -1.0 / K;
        /* Period returns of every symbol, from T to T1 (the last close at or before each). */
        double bench = 0;
        for (int k = 0; k < S; k++) {
            ret[k] = 0;
            const kr_candles *c = series[k].candles;
            if (r->symbols[k].n_items == 0) continue;
            const int64_t a = row_at_or_before(c, T), b = row_at_or_before(c, T1);
            if (a >= 0 && b >= a) ret[k] = close_at(c, b) / close_at(c, a) - 1.0;
        }
        for (int k = 0; k < n; k++) bench += ret[rk[k].sym];
        bench /= n;
        if (t == 0)
            for (int k = 0; k < n; k++) base[n_base++] = rk[k].sym;
        /* Trade from the drifted weights to the targets, unless the rules forbid it. */
        kr_bt_period *pe = &s->periods[t];
        double turnover = 0;
        for (int k = 0; k < S; k++) {
            const double cur = w[k];
            double next = tgt[k];
            if (next != cur && r->symbols[k].ashare) {
                const kr_candles *c = series[k].candles;
                const int64_t row = row_at_or_before(c, T);
                const int lim = row >= 0 ? limit_state(c, row, r->symbols[k].limit) : 0;
                if (next > cur && lim > 0) {
                    next = cur;
                    s->blocked_limit_up++;
                    pe->blocked++;
                } else if (next < cur && lim < 0) {
                    next = cur;
                    s->blocked_limit_down++;
                    pe->blocked++;
                } else if (next < cur && cur > 0 && bought[k] == day_of(T)) {
                    next = cur;
                    s->blocked_t1++;
                    pe->blocked++;
                }
            }
            turnover += fabs(next - cur);
            if (next > cur && next > 0) bought[k] = day_of(T);
            w[k] = next;
        }
        const double cost = turnover * r->p.cost_bps / 1e4;
        double gross = 0;
        int held = 0;
        for (int k = 0; k < S; k++) {
            gross += w[k] * ret[k];
            held += w[k] != 0;
        }
        const double Rt = gross - cost;
        /* Drift: each weight grows with its symbol, over the portfolio's value. */
        for (int k = 0; k < S; k++)
            w[k] = 1.0 + gross != 0 ? w[k] * (1.0 + ret[k]) / (1.0 + gross) : 0;
        equity *= 1.0 + Rt;
        if (equity > peak) peak = equity;
        double bh = 0;
        for (int k = 0; k < n_base; k++) {
            const kr_candles *c = series[base[k]].candles;
            const int64_t a = row_at_or_before(c, r->unit_ts[reb[0]]), b = row_at_or_before(c, T1);
            bh += a >= 0 && b >= 0 ? close_at(c, b) / close_at(c, a) : 1.0;
        }
        bench_equity = bh / n_base;
        *pe = (kr_bt_period){
            T,        T1,   Rt,   bench,      equity, bench_equity, equity / peak - 1.0,
            turnover, cost, held, pe->blocked
        };
        R[t] = Rt;
        eq[t] = equity;
    }
    s->ran = 1;
    s->n_periods = n_reb;
    const double years =
        (double)(s->periods[n_reb - 1].end_ts - s->periods[0].start_ts) / SECONDS_PER_YEAR;
    s->periods_per_year = years > 0 ? n_reb / years : NAN;
    annualise(R, n_reb, s->periods_per_year, &s->ann_return.value, &s->ann_vol.value,
              &s->sharpe.value, &s->hit_rate.value);
    double excess = 0, turnover = 0;
    for (int t = 0; t < n_reb; t++) {
        excess += s->periods[t].ret > s->periods[t].bench_ret;
        turnover += s->periods[t].turnover;
    }
    s->excess_hit_rate.value = excess / n_reb;
    s->turnover = turnover / n_reb;
    s->max_drawdown = max_drawdown(eq, n_reb);
    s->total_return = equity - 1.0;
    /* The benchmark's own period returns, from its equity curve. */
    for (int t = 0; t < n_reb; t++) {
        const double prev = t ? s->periods[t - 1].bench_equity : 1.0;
        R[t] = s->periods[t].bench_equity / prev - 1.0;
        eq[t] = s->periods[t].bench_equity;
    }
    double bvol, bhit;
    annualise(R, n_reb, s->periods_per_year, &s->bench_ann_return, &bvol, &s->bench_sharpe, &bhit);
    s->bench_total_return = s->periods[n_reb - 1].bench_equity - 1.0;
    s->bench_max_drawdown = max_drawdown(eq, n_reb);
    bootstrap(s, r);
out:
    free(start);
    free(order);
    free(reb);
    free(fill);
    free(rk);
    free(w);
    free(tgt);
    free(ret);
    free(base);
    free(bought);
    free(R);
    free(eq);
    return st;
}
