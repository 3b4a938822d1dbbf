/*
 * eval/backtest_md — the backtest report as Markdown: the verdicts first, then every table of
 * the JSON report (pooled scores, relative scores, significance, per step, calibration,
 * volatility, cross-section, strategy, per symbol), each figure with its interval.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/report.h"
#include "base/error.h"
#include "base/timeutil.h"
#include "base/strbuf.h"
#include "eval/backtest_internal.h"
#include "eval/backtest_md.h"
#include "eval/backtest_render.h"

/* "0.0123 [0.0110, 0.0135]" (an interval only where there is one), "n/a" for NaN. */
void kr_bt_fmt_est(kr_bt_est e, int pct, char *buf, size_t cap) {
    if (!isfinite(e.value)) {
        snprintf(buf, cap, "n/a");
        return;
    }
    const double s = pct ? 100.0 : 1.0;
    const char *u = pct ? "%" : "";
    const int dec = pct ? 1 : 4;
    if (isfinite(e.lo) && isfinite(e.hi))
        snprintf(buf, cap, "%.*f%s [%.*f, %.*f]", dec, e.value * s, u, dec, e.lo * s, dec,
                 e.hi * s);
    else
        snprintf(buf, cap, "%.*f%s", dec, e.value * s, u);
}

int kr_bt_metric_is_pct(int m) {
    return m == KR_BT_COV80 || m == KR_BT_COV90 || m == KR_BT_DIRECTION || m == KR_BT_MAPE_MEDIAN ||
           m == KR_BT_MAPE_MEAN;
}

/* The pooled score table's columns. */
static const int k_cols[] = { KR_BT_CRPS,       KR_BT_WQL,         KR_BT_MASE_MEDIAN,
                              KR_BT_MAE_MEDIAN, KR_BT_MAPE_MEDIAN, KR_BT_COV80,
                              KR_BT_COV90,      KR_BT_DIRECTION,   KR_BT_BRIER };
#define N_COLS ((int)(sizeof k_cols / sizeof k_cols[0]))

static void header(kr_sb *sb, const kr_backtest_report *r) {
    char when[40], notice[1024];
    kr_format_timestamp(r->generated_at, 0, when, sizeof when);
    const int ok = r->n_symbols - kr_backtest_report_failures(r);
    kr_sb_appendf(sb, "# Backtest: %s on %d symbol%s\n\n", r->model_name, ok, ok == 1 ? "" : "s");
    if (kr_bt_demo_notice(r, notice, sizeof notice)) kr_sb_appendf(sb, "> **%s**\n\n", notice);
    kr_sb_appendf(sb,
                  "Generated %s UTC by kronos %s. %d forecasts at %d origins: a %d-bar horizon, an "
                  "origin every %d bars, %d sample paths each (seed %llu), forecast in %.1f s "
                  "(%.1f forecasts/s, static batches of %d rows).\n\n",
                  when, r->engine_version, r->n_items, r->n_units, r->p.horizon, r->every,
                  r->p.paths, (unsigned long long)r->p.seed, r->seconds_forecast,
                  r->seconds_forecast > 0 ? r->n_items / r->seconds_forecast : 0.0,
                  r->static_batch_rows);
    kr_sb_append(sb, "Scored: the close, as close / last close at the origin (CRPS, WQL and MAE "
                     "are fractions of the price); returns are simple, volatility uses log "
                     "returns. ");
    kr_sb_appendf(sb, KR_BT_INTERVAL_NOTE, r->p.ci_level * 100, r->p.bootstrap, r->block_length);
    kr_sb_append(sb, "\n\n");
}

static void verdicts(kr_sb *sb, const kr_backtest_report *r) {
    kr_sb_append(sb, "## Verdict\n\n");
    int any = 0;
    for (int i = 0; i < r->n_dm; i++) {
        if (r->dm[i].sym >= 0) continue;
        char line[512];
        kr_bt_verdict_sentence(r, &r->dm[i], line, sizeof line);
        kr_sb_appendf(sb, "- %s\n", line);
        any = 1;
    }
    if (!any) kr_sb_append(sb, "- no comparison (no baseline)\n");
    kr_sb_appendf(sb,
                  "\nLoss per origin: the mean over the horizon's steps; across symbols, the mean "
                  "loss difference of each origin. Newey-West variance with %d lags (the origins' "
                  "overlap), Harvey-Leybourne-Newbold correction, Student t with n - 1 degrees of "
                  "freedom, level %.2g.\n\n",
                  r->lags, r->p.alpha);
}

static void pooled_table(kr_sb *sb, const kr_backtest_report *r) {
    const int h = r->p.horizon;
    kr_sb_append(sb, "## Scores (all symbols, over the horizon)\n\n| forecaster |");
    for (int c = 0; c < N_COLS; c++) kr_sb_appendf(sb, " %s |", kr_bt_metric_label(k_cols[c]));
    kr_sb_append(sb, "\n|---|");
    for (int c = 0; c < N_COLS; c++) kr_sb_append(sb, "---|");
    kr_sb_append(sb, "\n");
    for (int f = 0; f < KR_BT_N_F; f++) {
        if (!r->has[f]) continue;
        kr_sb_appendf(sb, "| %s |", kr_bt_forecaster_label(r, f));
        for (int c = 0; c < N_COLS; c++) {
            char b[96];
            kr_bt_fmt_est(r->pooled[kr_bt_pooled_idx(r, f, k_cols[c], h)],
                          kr_bt_metric_is_pct(k_cols[c]), b, sizeof b);
            kr_sb_appendf(sb, " %s |", b);
        }
        kr_sb_append(sb, "\n");
    }
    kr_sb_append(sb, "\nLower is better except coverage (nominal 80 % and 90 %) and the direction "
                     "hit rate (0.5 is a coin).\n\n");
}

static void relative_table(kr_sb *sb, const kr_backtest_report *r) {
    if (r->n_rel == 0) return;
    kr_sb_append(sb, "## Relative scores (forecaster / baseline, geometric mean across symbols)\n\n"
                     "| forecaster | baseline | score | ratio |\n|---|---|---|---|\n");
    for (int i = 0; i < r->n_rel; i++) {
        char b[96];
        kr_bt_fmt_est(r->rel[i].geo_mean, 0, b, sizeof b);
        kr_sb_appendf(sb, "| %s | %s | %s | %s |\n", kr_bt_forecaster_label(r, r->rel[i].f),
                      kr_bt_forecaster_label(r, r->rel[i].b), kr_bt_metric_label(r->rel[i].metric),
                      b);
    }
    kr_sb_append(sb, "\nBelow 1: the forecaster's loss is lower.\n\n");
}

static void dm_table(kr_sb *sb, const kr_backtest_report *r) {
    if (r->n_dm == 0) return;
    kr_sb_append(sb,
                 "## Significance (Diebold-Mariano)\n\n| forecaster | baseline | score | symbol "
                 "| origins | mean loss difference | HLN statistic | p | verdict |\n"
                 "|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < r->n_dm; i++) {
        const kr_bt_dm_row *d = &r->dm[i];
        if (d->sym >= 0 && r->symbols[d->sym].failed) continue;
        kr_sb_appendf(sb, "| %s | %s | %s | %s | %d | %.3g | %.3g | %.3g | %s |\n",
                      kr_bt_forecaster_label(r, d->f), kr_bt_forecaster_label(r, d->b),
                      kr_bt_metric_label(d->metric), d->sym < 0 ? "all" : r->symbols[d->sym].symbol,
                      d->n, d->mean_diff, d->hln, d->p_value, kr_bt_verdict_word(d->verdict));
    }
    kr_sb_append(sb, "\n");
}

static void step_table(kr_sb *sb, const kr_backtest_report *r, int m, const char *title) {
    kr_sb_appendf(sb, "## %s by horizon step\n\n| step |", title);
    for (int f = 0; f < KR_BT_N_F; f++)
        if (r->has[f]) kr_sb_appendf(sb, " %s |", kr_bt_forecaster_label(r, f));
    kr_sb_append(sb, "\n|---|");
    for (int f = 0; f < KR_BT_N_F; f++)
        if (r->has[f]) kr_sb_append(sb, "---|");
    kr_sb_append(sb, "\n");
    for (int k = 0; k < r->p.horizon; k++) {
        kr_sb_appendf(sb, "| %d |", k + 1);
        for (int f = 0; f < KR_BT_N_F; f++) {
            if (!r->has[f]) continue;
            char b[96];
            kr_bt_fmt_est(r->pooled[kr_bt_pooled_idx(r, f, m, k)], kr_bt_metric_is_pct(m), b,
                          sizeof b);
            kr_sb_appendf(sb, " %s |", b);
        }
        kr_sb_append(sb, "\n");
    }
    kr_sb_append(sb, "\n");
}

static void calibration(kr_sb *sb, const kr_backtest_report *r) {
    kr_sb_append(sb, "## PIT histogram (uniform: 10 % a bin)\n\n| bin |");
    for (int f = 0; f < KR_BT_N_F; f++)
        if (r->has[f] && kr_bt_forecaster_probabilistic(f))
            kr_sb_appendf(sb, " %s |", kr_bt_forecaster_label(r, f));
    kr_sb_append(sb, "\n|---|");
    for (int f = 0; f < KR_BT_N_F; f++)
        if (r->has[f] && kr_bt_forecaster_probabilistic(f)) kr_sb_append(sb, "---|");
    kr_sb_append(sb, "\n");
    for (int j = 0; j < KR_BT_PIT_BINS; j++) {
        kr_sb_appendf(sb, "| %.1f-%.1f |", (double)j / KR_BT_PIT_BINS,
                      (double)(j + 1) / KR_BT_PIT_BINS);
        for (int f = 0; f < KR_BT_N_F; f++) {
            if (!r->has[f] || !kr_bt_forecaster_probabilistic(f)) continue;
            char b[96];
            kr_bt_fmt_est(r->pit[f * KR_BT_PIT_BINS + j], 1, b, sizeof b);
            kr_sb_appendf(sb, " %s |", b);
        }
        kr_sb_append(sb, "\n");
    }
    kr_sb_appendf(sb,
                  "\n## Reliability of P(up) (%s)\n\n| P(up) bin | cells | mean P(up) | observed "
                  "frequency of up |\n|---|---|---|---|\n",
                  r->model_name);
    for (int j = 0; j < KR_BT_REL_BINS; j++) {
        const int64_t n = r->rel_count[KR_BT_F_MODEL * KR_BT_REL_BINS + j];
        if (!n) continue;
        char b[96];
        kr_bt_fmt_est(r->rel_freq[KR_BT_F_MODEL * KR_BT_REL_BINS + j], 1, b, sizeof b);
        kr_sb_appendf(sb, "| %.1f-%.1f | %lld | %.1f%% | %s |\n", (double)j / KR_BT_REL_BINS,
                      (double)(j + 1) / KR_BT_REL_BINS, (long long)n,
                      100 * r->rel_pred[KR_BT_F_MODEL * KR_BT_REL_BINS + j], b);
    }
    kr_sb_append(sb, "\n## Volatility over the horizon (log returns)\n\n| forecaster | MAE | "
                     "correlation with realised |\n|---|---|---|\n");
    for (int f = 0; f < KR_BT_N_F; f++) {
        if (!r->has[f] || !kr_bt_forecaster_probabilistic(f)) continue;
        char a[96], b[96];
        kr_bt_fmt_est(r->pooled[kr_bt_pooled_idx(r, f, KR_BT_VOL_AE, r->p.horizon)], 0, a,
                      sizeof a);
        kr_bt_fmt_est(r->vol_corr[f], 0, b, sizeof b);
        kr_sb_appendf(sb, "| %s | %s | %s |\n", kr_bt_forecaster_label(r, f), a, b);
    }
    kr_sb_append(sb, "\n");
}

static void cross(kr_sb *sb, const kr_backtest_report *r) {
    kr_sb_append(sb, "## Cross-section (IC of the expected return at the horizon)\n\n");
    int any = 0;
    for (int f = 0; f < KR_BT_N_F; f++) any |= r->has[f] && r->ic_sum[f].n > 0;
    if (!any) {
        kr_sb_append(sb, "No origin with at least 3 symbols: no IC.\n\n");
        return;
    }
    kr_sb_append(sb, "| forecaster | origins | mean IC | t (HAC) | ICIR | mean RankIC | t (HAC) | "
                     "RankICIR |\n|---|---|---|---|---|---|---|---|\n");
    for (int f = 0; f < KR_BT_N_F; f++) {
        if (!r->has[f] || r->ic_sum[f].n == 0) continue;
        char a[96], b[96];
        kr_bt_fmt_est(r->ic_sum[f].mean, 0, a, sizeof a);
        kr_bt_fmt_est(r->rank_ic_sum[f].mean, 0, b, sizeof b);
        kr_sb_appendf(sb, "| %s | %d | %s | %.2f | %.3f | %s | %.2f | %.3f |\n",
                      kr_bt_forecaster_label(r, f), r->ic_sum[f].n, a, r->ic_sum[f].t_stat_hac,
                      r->ic_sum[f].icir, b, r->rank_ic_sum[f].t_stat_hac, r->rank_ic_sum[f].icir);
    }
    kr_sb_append(sb, "\n");
}

static void strategy(kr_sb *sb, const kr_backtest_report *r) {
    const kr_bt_strategy *s = &r->strategy;
    kr_sb_append(sb, "## Strategy\n\n");
    if (!s->ran) {
        kr_sb_appendf(sb, "Not run: %s.\n\n", s->reason);
        return;
    }
    kr_sb_appendf(sb,
                  "Top %d%s by %s, equal weight, rebalanced every %d bars, %.1f bps a unit of "
                  "weight traded%s. %d periods (%.1f a year).\n\n",
                  r->p.strategy_k, r->p.strategy_short ? " long, bottom short" : "",
                  r->p.strategy_rank == KR_BACKTEST_RANK_PROB_UP ? "P(up)" : "expected return",
                  r->hold, r->p.cost_bps, kr_bt_ashare_note(r), s->n_periods, s->periods_per_year);
    char a[96], b[96], c[96], d[96], e[96];
    kr_bt_fmt_est(s->ann_return, 1, a, sizeof a);
    kr_bt_fmt_est(s->ann_vol, 1, b, sizeof b);
    kr_bt_fmt_est(s->sharpe, 0, c, sizeof c);
    kr_bt_fmt_est(s->hit_rate, 1, d, sizeof d);
    kr_bt_fmt_est(s->excess_hit_rate, 1, e, sizeof e);
    kr_sb_appendf(sb,
                  "| | strategy | equal-weight buy-and-hold |\n|---|---|---|\n"
                  "| total return | %.1f%% | %.1f%% |\n| annual return | %s | %.1f%% |\n"
                  "| annual volatility | %s | |\n| Sharpe | %s | %.2f |\n"
                  "| max drawdown | %.1f%% | %.1f%% |\n| hit rate (period > 0) | %s | |\n"
                  "| periods beating equal weight | %s | |\n| turnover a rebalance | %.2f | |\n"
                  "| trades refused (limit up / limit down / T+1) | %lld / %lld / %lld | |\n\n",
                  100 * s->total_return, 100 * s->bench_total_return, a, 100 * s->bench_ann_return,
                  b, c, s->bench_sharpe, 100 * s->max_drawdown, 100 * s->bench_max_drawdown, d, e,
                  s->turnover, (long long)s->blocked_limit_up, (long long)s->blocked_limit_down,
                  (long long)s->blocked_t1);
}

static void per_symbol(kr_sb *sb, const kr_backtest_report *r) {
    kr_sb_append(sb, "## Per symbol\n\n| symbol | interval | origins | season | CRPS (model) | "
                     "CRPS (naive) | MASE (model) | coverage 10-90 % | direction |\n"
                     "|---|---|---|---|---|---|---|---|---|\n");
    for (int s = 0; s < r->n_symbols; s++) {
        const kr_bt_symbol *sy = &r->symbols[s];
        if (sy->failed) continue;
        const kr_bt_est *m =
            &r->per_symbol[((int64_t)s * KR_BT_N_F + KR_BT_F_MODEL) * KR_BT_N_METRICS];
        const kr_bt_est *n =
            &r->per_symbol[((int64_t)s * KR_BT_N_F + KR_BT_F_NAIVE) * KR_BT_N_METRICS];
        char a[96], b[96], c[96], d[96], e[96];
        kr_bt_fmt_est(m[KR_BT_CRPS], 0, a, sizeof a);
        kr_bt_fmt_est(n[KR_BT_CRPS], 0, b, sizeof b);
        kr_bt_fmt_est(m[KR_BT_MASE_MEDIAN], 0, c, sizeof c);
        kr_bt_fmt_est(m[KR_BT_COV80], 1, d, sizeof d);
        kr_bt_fmt_est(m[KR_BT_DIRECTION], 1, e, sizeof e);
        kr_sb_appendf(sb, "| %s | %s | %d | %d | %s | %s | %s | %s | %s |\n", sy->symbol,
                      sy->interval[0] ? sy->interval : "-", sy->n_items, sy->season, a, b, c, d, e);
    }
    kr_sb_append(sb, "\n");
    if (kr_backtest_report_failures(r)) {
        kr_sb_append(sb, "## Not evaluated\n\n");
        for (int s = 0; s < r->n_symbols; s++)
            if (r->symbols[s].failed)
                kr_sb_appendf(sb, "- %s: %s\n", r->symbols[s].symbol, r->symbols[s].error);
        kr_sb_append(sb, "\n");
    }
}

kr_status kr_bt_render_md(const kr_backtest_report *r, char **out, kr_error *err) {
    kr_sb sb = { 0 };
    header(&sb, r);
    verdicts(&sb, r);
    pooled_table(&sb, r);
    relative_table(&sb, r);
    dm_table(&sb, r);
    step_table(&sb, r, KR_BT_CRPS, "CRPS");
    step_table(&sb, r, KR_BT_COV80, "Coverage of the 10-90 % band");
    calibration(&sb, r);
    cross(&sb, r);
    strategy(&sb, r);
    per_symbol(&sb, r);
    kr_sb_appendf(&sb, "---\n\n*%s*\n", KR_REPORT_DISCLAIMER);
    return kr_sb_finish(&sb, out, err);
}
