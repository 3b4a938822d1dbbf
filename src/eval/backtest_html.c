/*
 * eval/backtest_html — the backtest report as one self-contained HTML page in the analysis
 * report's style (analyst/render_html's style sheet): a demo notice first when the model is
 * one, the verdicts, key figures, the plots (per-step CRPS against the baselines, coverage
 * against nominal, the PIT histogram, the P(up) reliability diagram, cumulative IC, equity and
 * drawdown), each with its intervals, then the tables. No scripts, nothing fetched.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/render.h"
#include "analyst/report.h"
#include "base/error.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "eval/backtest_internal.h"
#include "eval/backtest_md.h"
#include "eval/backtest_render.h"
#include "eval/backtest_svg.h"

static const char *const k_colors[KR_BT_N_F] = { "#2563eb", "#7c3aed", "#6b7280",
                                                 "#0d9488", "#c2410c", "#ca8a04" };

/* Extra rules on top of the report's style sheet. */
static const char k_css_extra[] =
    "ul.verdicts li{margin:3px 0}.v-better{color:var(--up);font-weight:600}"
    ".v-worse{color:var(--down);font-weight:600}.v-ns{color:var(--muted)}\n"
    ".scroll{overflow-x:auto}.scroll table{font-size:12px}\n"
    "table.txt td:nth-child(-n+3),table.txt th:nth-child(-n+3){text-align:left}\n";

static void cell_est(kr_sb *sb, kr_bt_est e, int pct) {
    char b[96];
    kr_bt_fmt_est(e, pct, b, sizeof b);
    char *br = strchr(b, '[');
    kr_sb_append(sb, "<td>");
    if (br) {
        kr_sb_appendn(sb, b, (size_t)(br - b));
        kr_sb_append(sb, "<span class=\"pm\">");
        kr_sb_append_html(sb, br);
        kr_sb_append(sb, "</span>");
    } else {
        kr_sb_append_html(sb, b);
    }
    kr_sb_append(sb, "</td>");
}

static void kpi(kr_sb *sb, const char *label, kr_bt_est e, int pct, const char *note) {
    char b[96];
    kr_bt_fmt_est((kr_bt_est){ e.value, NAN, NAN }, pct, b, sizeof b);
    kr_sb_append(sb, "<div class=\"kpi\"><div class=\"l\">");
    kr_sb_append_html(sb, label);
    kr_sb_append(sb, "</div><div class=\"v\">");
    kr_sb_append_html(sb, b);
    kr_sb_append(sb, "</div><div class=\"n\">");
    if (isfinite(e.lo) && isfinite(e.hi)) {
        char ci[96];
        kr_bt_fmt_est(e, pct, ci, sizeof ci);
        const char *br = strchr(ci, '[');
        kr_sb_append_html(sb, br ? br : "");
        kr_sb_append(sb, " ");
    }
    kr_sb_append_html(sb, note);
    kr_sb_append(sb, "</div></div>\n");
}

static const kr_bt_rel_row *rel_row(const kr_backtest_report *r, int f, int b, int m) {
    for (int i = 0; i < r->n_rel; i++)
        if (r->rel[i].f == f && r->rel[i].b == b && r->rel[i].metric == m) return &r->rel[i];
    return NULL;
}

static void header(kr_sb *sb, const kr_backtest_report *r) {
    char when[40], notice[1024];
    kr_format_timestamp(r->generated_at, 0, when, sizeof when);
    kr_sb_append(sb, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                     "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
                     "<title>Backtest: ");
    kr_sb_append_html(sb, r->model_name);
    kr_sb_appendf(sb, "</title><style>%s%s</style></head><body><main>\n", kr_report_css(),
                  k_css_extra);
    if (kr_bt_demo_notice(r, notice, sizeof notice)) {
        kr_sb_append(sb, "<div class=\"demo\"><strong>DEMO MODEL</strong> \xe2\x80\x94 ");
        const char *rest = strstr(notice, "not a forecast");
        kr_sb_append_html(sb, rest ? rest : notice);
        kr_sb_append(sb, "</div>\n");
    }
    const int ok = r->n_symbols - kr_backtest_report_failures(r);
    kr_sb_append(sb, "<header class=\"page\"><h1>Backtest: ");
    kr_sb_append_html(sb, r->model_name);
    kr_sb_appendf(sb, " on %d symbol%s</h1><div class=\"sub\">", ok, ok == 1 ? "" : "s");
    kr_sb_appendf(sb,
                  "%d forecasts at %d origins \xc2\xb7 horizon %d bars \xc2\xb7 an origin every %d "
                  "bars \xc2\xb7 %d paths \xc2\xb7 seed %llu \xc2\xb7 generated %s UTC by kronos ",
                  r->n_items, r->n_units, r->p.horizon, r->every, r->p.paths,
                  (unsigned long long)r->p.seed, when);
    kr_sb_append_html(sb, r->engine_version);
    kr_sb_append(sb, "</div></header>\n");
}

static void verdicts(kr_sb *sb, const kr_backtest_report *r) {
    kr_sb_append(
        sb, "<section class=\"card\"><h2>Does it beat the baselines?</h2><ul class=\"verdicts\">");
    for (int i = 0; i < r->n_dm; i++) {
        const kr_bt_dm_row *d = &r->dm[i];
        if (d->sym >= 0) continue;
        char line[512];
        kr_bt_verdict_sentence(r, d, line, sizeof line);
        kr_sb_appendf(sb, "<li class=\"%s\">",
                      d->verdict < 0   ? "v-better"
                      : d->verdict > 0 ? "v-worse"
                                       : "v-ns");
        kr_sb_append_html(sb, line);
        kr_sb_append(sb, "</li>");
    }
    kr_sb_append(sb, "</ul><p class=\"note\">");
    char note[512];
    snprintf(note, sizeof note,
             "Diebold-Mariano tests on the per-origin loss (the mean over the horizon's steps; "
             "across symbols, each origin's mean difference), Newey-West variance with %d lags, "
             "Harvey-Leybourne-Newbold correction, Student t, level %.2g. ",
             r->lags, r->p.alpha);
    kr_sb_append_html(sb, note);
    snprintf(note, sizeof note, KR_BT_INTERVAL_NOTE, r->p.ci_level * 100, r->p.bootstrap,
             r->block_length);
    kr_sb_append_html(sb, note);
    kr_sb_append(sb, " Scored: the close relative to the last close at the origin; returns simple, "
                     "volatility in log returns.</p>\n<div class=\"kpis\">");
    const int h = r->p.horizon;
    const kr_bt_rel_row *vs = rel_row(r, KR_BT_F_MODEL, KR_BT_F_NAIVE, KR_BT_CRPS);
    kpi(sb, "CRPS", r->pooled[kr_bt_pooled_idx(r, KR_BT_F_MODEL, KR_BT_CRPS, h)], 0,
        "of the price");
    kpi(sb, "CRPS / naive", vs ? vs->geo_mean : (kr_bt_est){ NAN, NAN, NAN }, 0, "below 1: better");
    kpi(sb, "coverage 10-90", r->pooled[kr_bt_pooled_idx(r, KR_BT_F_MODEL, KR_BT_COV80, h)], 1,
        "nominal 80%");
    kpi(sb, "direction", r->pooled[kr_bt_pooled_idx(r, KR_BT_F_MODEL, KR_BT_DIRECTION, h)], 1,
        "0.5 = a coin");
    kpi(sb, "mean IC", r->ic_sum[KR_BT_F_MODEL].mean, 0,
        r->ic_sum[KR_BT_F_MODEL].n ? "" : "needs 3 symbols");
    kpi(sb, "Sharpe", r->strategy.ran ? r->strategy.sharpe : (kr_bt_est){ NAN, NAN, NAN }, 0,
        r->strategy.ran ? "top-K strategy" : "no strategy");
    kr_sb_append(sb, "</div></section>\n");
}

static void plots(kr_sb *sb, const kr_backtest_report *r) {
    const int h = r->p.horizon;
    kr_bt_est *buf =
        malloc((size_t)(KR_BT_N_F + 2) * (h > r->n_units ? h : r->n_units) * sizeof *buf);
    if (!buf) return;
    kr_bt_line lines[KR_BT_N_F];
    int nl = 0;
    for (int f = 0; f < KR_BT_N_F; f++) {
        if (!r->has[f]) continue;
        kr_bt_est *y = buf + (int64_t)nl * h;
        for (int k = 0; k < h; k++) y[k] = r->pooled[kr_bt_pooled_idx(r, f, KR_BT_CRPS, k)];
        lines[nl++] =
            (kr_bt_line){ kr_bt_forecaster_label(r, f), k_colors[f], y, f >= KR_BT_F_NAIVE };
    }
    kr_sb_append(sb, "<section class=\"card\"><h2>Plots</h2><div class=\"grid2\"><div>");
    kr_bt_svg_lines(sb, "CRPS by horizon step (lower is better)", "CRPS (fraction of price)", lines,
                    nl, h, NULL, NULL, NULL, 0, 0);
    kr_sb_append(sb, "</div><div>");
    kr_bt_est *c80 = buf, *c90 = buf + h;
    for (int k = 0; k < h; k++) {
        c80[k] = r->pooled[kr_bt_pooled_idx(r, KR_BT_F_MODEL, KR_BT_COV80, k)];
        c90[k] = r->pooled[kr_bt_pooled_idx(r, KR_BT_F_MODEL, KR_BT_COV90, k)];
    }
    const kr_bt_line cov[2] = { { "10-90 % band", k_colors[0], c80, 0 },
                                { "5-95 % band", "#0d9488", c90, 0 } };
    const double nominal[2] = { 0.8, 0.9 };
    const char *const nominal_label[2] = { "nominal 80%", "nominal 90%" };
    kr_bt_svg_lines(sb, "Coverage of the bands vs nominal", "share of closes inside", cov, 2, h,
                    NULL, nominal, nominal_label, 2, 1);
    kr_sb_append(sb, "</div><div>");
    kr_bt_svg_histogram(sb, "PIT histogram (flat when calibrated)",
                        r->pit + KR_BT_F_MODEL * KR_BT_PIT_BINS, KR_BT_PIT_BINS,
                        1.0 / KR_BT_PIT_BINS);
    kr_sb_append(sb, "</div><div>");
    kr_bt_svg_reliability(sb, "Reliability of P(up)", r->rel_pred + KR_BT_F_MODEL * KR_BT_REL_BINS,
                          r->rel_freq + KR_BT_F_MODEL * KR_BT_REL_BINS,
                          r->rel_count + KR_BT_F_MODEL * KR_BT_REL_BINS, KR_BT_REL_BINS);
    kr_sb_append(sb, "</div>");
    /* Cumulative IC, with the band a zero-mean IC of the same spread would stay in. */
    int n = 0;
    int64_t *ts = malloc((size_t)r->n_units * sizeof *ts);
    if (ts && r->ic_sum[KR_BT_F_MODEL].n >= 2) {
        kr_bt_est *cum = buf, *cum_rank = buf + r->n_units;
        double a = 0, b = 0;
        const double sd = r->ic_sum[KR_BT_F_MODEL].std, sdr = r->rank_ic_sum[KR_BT_F_MODEL].std;
        for (int u = 0; u < r->n_units; u++) {
            if (!isfinite(r->ic[u].ic)) continue;
            a += r->ic[u].ic;
            b += r->ic[u].rank_ic;
            ts[n] = r->ic[u].ts;
            const double band = 1.96 * sd * sqrt((double)(n + 1)),
                         bandr = 1.96 * sdr * sqrt((double)(n + 1));
            cum[n] = (kr_bt_est){ a, -band, band };
            cum_rank[n++] = (kr_bt_est){ b, -bandr, bandr };
        }
        const kr_bt_line ic[2] = { { "cumulative IC", k_colors[0], cum, 0 },
                                   { "cumulative RankIC", "#c2410c", cum_rank, 0 } };
        kr_sb_append(sb, "<div>");
        kr_bt_svg_lines(sb, "Cumulative IC (band: where no skill would stay, 95 %)", "sum of IC",
                        ic, 2, n, ts, (const double[]){ 0 }, NULL, 1, 0);
        kr_sb_append(sb, "</div>");
    }
    free(ts);
    if (r->strategy.ran) {
        kr_sb_append(sb, "<div>");
        kr_bt_svg_equity(sb, &r->strategy);
        char a[96], s[96], note[256];
        kr_bt_fmt_est(r->strategy.ann_return, 1, a, sizeof a);
        kr_bt_fmt_est(r->strategy.sharpe, 0, s, sizeof s);
        snprintf(note, sizeof note, "Annual return %s, Sharpe %s (block bootstrap over periods).",
                 a, s);
        kr_sb_append(sb, "<p class=\"note\">");
        kr_sb_append_html(sb, note);
        kr_sb_append(sb, "</p></div>");
    }
    kr_sb_append(sb, "</div></section>\n");
    free(buf);
}

static const int k_cols[] = { KR_BT_CRPS,  KR_BT_WQL,   KR_BT_MASE_MEDIAN, KR_BT_MAE_MEDIAN,
                              KR_BT_COV80, KR_BT_COV90, KR_BT_DIRECTION,   KR_BT_BRIER };
#define N_COLS ((int)(sizeof k_cols / sizeof k_cols[0]))

static void tables(kr_sb *sb, const kr_backtest_report *r) {
    const int h = r->p.horizon;
    kr_sb_append(sb, "<section class=\"card\"><h2>Scores</h2><h3>All symbols, over the horizon</h3>"
                     "<div class=\"scroll\"><table><thead><tr><th>forecaster</th>");
    for (int c = 0; c < N_COLS; c++) {
        kr_sb_append(sb, "<th>");
        kr_sb_append_html(sb, kr_bt_metric_label(k_cols[c]));
        kr_sb_append(sb, "</th>");
    }
    kr_sb_append(sb, "</tr></thead><tbody>");
    for (int f = 0; f < KR_BT_N_F; f++) {
        if (!r->has[f]) continue;
        kr_sb_append(sb, "<tr><td>");
        kr_sb_append_html(sb, kr_bt_forecaster_label(r, f));
        kr_sb_append(sb, "</td>");
        for (int c = 0; c < N_COLS; c++)
            cell_est(sb, r->pooled[kr_bt_pooled_idx(r, f, k_cols[c], h)],
                     kr_bt_metric_is_pct(k_cols[c]));
        kr_sb_append(sb, "</tr>");
    }
    kr_sb_append(
        sb,
        "</tbody></table></div>\n<h3>Relative scores (geometric mean across symbols)</h3>"
        "<table "
        "class=\"txt\"><thead><tr><th>forecaster</th><th>baseline</th><th>score</th><th>ratio</th>"
        "</tr></thead><tbody>");
    for (int i = 0; i < r->n_rel; i++) {
        const kr_bt_rel_row *q = &r->rel[i];
        kr_sb_append(sb, "<tr><td>");
        kr_sb_append_html(sb, kr_bt_forecaster_label(r, q->f));
        kr_sb_append(sb, "</td><td>");
        kr_sb_append_html(sb, kr_bt_forecaster_label(r, q->b));
        kr_sb_append(sb, "</td><td>");
        kr_sb_append_html(sb, kr_bt_metric_label(q->metric));
        kr_sb_append(sb, "</td>");
        cell_est(sb, q->geo_mean, 0);
        kr_sb_append(sb, "</tr>");
    }
    kr_sb_append(sb,
                 "</tbody></table>\n<h3>Significance (Diebold-Mariano)</h3><div class=\"scroll\">"
                 "<table class=\"txt\"><thead><tr><th>forecaster</th><th>baseline</th>"
                 "<th>score</th><th>symbol</th><th>origins</th><th>mean loss difference</th>"
                 "<th>HLN statistic</th><th>p</th><th>verdict</th></tr></thead><tbody>");
    for (int i = 0; i < r->n_dm; i++) {
        const kr_bt_dm_row *d = &r->dm[i];
        if (d->sym >= 0 && r->symbols[d->sym].failed) continue;
        kr_sb_append(sb, "<tr><td>");
        kr_sb_append_html(sb, kr_bt_forecaster_label(r, d->f));
        kr_sb_append(sb, "</td><td>");
        kr_sb_append_html(sb, kr_bt_forecaster_label(r, d->b));
        kr_sb_append(sb, "</td><td>");
        kr_sb_append_html(sb, kr_bt_metric_label(d->metric));
        kr_sb_append(sb, "</td><td>");
        kr_sb_append_html(sb, d->sym < 0 ? "all" : r->symbols[d->sym].symbol);
        kr_sb_appendf(
            sb,
            "</td><td>%d</td><td>%.3g</td><td>%.3g</td><td>%.3g</td><td class=\"%s\">%s</td></tr>",
            d->n, d->mean_diff, d->hln, d->p_value,
            d->verdict < 0   ? "v-better"
            : d->verdict > 0 ? "v-worse"
                             : "v-ns",
            kr_bt_verdict_word(d->verdict));
    }
    kr_sb_append(sb, "</tbody></table></div>\n<h3>Per symbol</h3><table><thead><tr><th>symbol</th>"
                     "<th>origins</th><th>CRPS</th><th>CRPS / naive</th><th>MASE</th>"
                     "<th>coverage 10-90</th><th>direction</th></tr></thead><tbody>");
    const kr_bt_rel_row *vs = rel_row(r, KR_BT_F_MODEL, KR_BT_F_NAIVE, KR_BT_CRPS);
    for (int s = 0; s < r->n_symbols; s++) {
        const kr_bt_symbol *sy = &r->symbols[s];
        if (sy->failed) continue;
        const kr_bt_est *m =
            &r->per_symbol[((int64_t)s * KR_BT_N_F + KR_BT_F_MODEL) * KR_BT_N_METRICS];
        kr_sb_append(sb, "<tr><td>");
        kr_sb_append_html(sb, sy->symbol);
        kr_sb_appendf(sb, "</td><td>%d</td>", sy->n_items);
        cell_est(sb, m[KR_BT_CRPS], 0);
        cell_est(sb, vs ? vs->per_symbol[s] : (kr_bt_est){ NAN, NAN, NAN }, 0);
        cell_est(sb, m[KR_BT_MASE_MEDIAN], 0);
        cell_est(sb, m[KR_BT_COV80], 1);
        cell_est(sb, m[KR_BT_DIRECTION], 1);
        kr_sb_append(sb, "</tr>");
    }
    kr_sb_append(sb, "</tbody></table>");
    if (kr_backtest_report_failures(r)) {
        kr_sb_append(sb, "<h3>Not evaluated</h3><div class=\"fail\"><ul>");
        for (int s = 0; s < r->n_symbols; s++) {
            if (!r->symbols[s].failed) continue;
            kr_sb_append(sb, "<li><strong>");
            kr_sb_append_html(sb, r->symbols[s].symbol);
            kr_sb_append(sb, "</strong>: ");
            kr_sb_append_html(sb, r->symbols[s].error);
            kr_sb_append(sb, "</li>");
        }
        kr_sb_append(sb, "</ul></div>");
    }
    kr_sb_append(sb, "</section>\n");
}

static void strategy(kr_sb *sb, const kr_backtest_report *r) {
    const kr_bt_strategy *s = &r->strategy;
    kr_sb_append(sb, "<section class=\"card\"><h2>Strategy</h2>");
    if (!s->ran) {
        kr_sb_append(sb, "<p class=\"note\">Not run: ");
        kr_sb_append_html(sb, s->reason);
        kr_sb_append(sb, ".</p></section>\n");
        return;
    }
    char d[512];
    snprintf(
        d, sizeof d,
        "Top %d%s by %s, equal weight, rebalanced every %d bars at the origin's close, %.1f bps "
        "a unit of weight traded%s; %d periods, %.1f a year.",
        r->p.strategy_k, r->p.strategy_short ? " long and bottom short" : "",
        r->p.strategy_rank == KR_BACKTEST_RANK_PROB_UP ? "P(up)" : "expected return", r->hold,
        r->p.cost_bps, kr_bt_ashare_note(r), s->n_periods, s->periods_per_year);
    kr_sb_append(sb, "<p>");
    kr_sb_append_html(sb, d);
    kr_sb_append(sb, "</p><table><thead><tr><th></th><th>strategy</th><th>equal-weight buy-and-hold"
                     "</th></tr></thead><tbody><tr><td>annual return</td>");
    cell_est(sb, s->ann_return, 1);
    kr_sb_appendf(sb, "<td>%.1f%%</td></tr><tr><td>annual volatility</td>",
                  100 * s->bench_ann_return);
    cell_est(sb, s->ann_vol, 1);
    kr_sb_append(sb, "<td></td></tr><tr><td>Sharpe</td>");
    cell_est(sb, s->sharpe, 0);
    kr_sb_appendf(
        sb,
        "<td>%.2f</td></tr><tr><td>total return</td><td>%.1f%%</td><td>%.1f%%</td></tr>"
        "<tr><td>max drawdown</td><td>%.1f%%</td><td>%.1f%%</td></tr><tr><td>hit rate</td>",
        s->bench_sharpe, 100 * s->total_return, 100 * s->bench_total_return, 100 * s->max_drawdown,
        100 * s->bench_max_drawdown);
    cell_est(sb, s->hit_rate, 1);
    kr_sb_append(sb, "<td></td></tr><tr><td>periods beating equal weight</td>");
    cell_est(sb, s->excess_hit_rate, 1);
    kr_sb_appendf(sb,
                  "<td></td></tr><tr><td>turnover a rebalance</td><td>%.2f</td><td></td></tr>"
                  "<tr><td>trades refused (limit up / down / T+1)</td><td>%lld / %lld / %lld</td>"
                  "<td></td></tr></tbody></table></section>\n",
                  s->turnover, (long long)s->blocked_limit_up, (long long)s->blocked_limit_down,
                  (long long)s->blocked_t1);
}

kr_status kr_bt_render_html(const kr_backtest_report *r, char **out, kr_error *err) {
    kr_sb sb = { 0 };
    header(&sb, r);
    verdicts(&sb, r);
    plots(&sb, r);
    tables(&sb, r);
    strategy(&sb, r);
    kr_sb_append(&sb, "<div class=\"disclaimer\">");
    kr_sb_append_html(&sb, KR_REPORT_DISCLAIMER);
    kr_sb_append(&sb, "</div><footer>kronos backtest \xc2\xb7 docs/backtest.md defines every "
                      "figure</footer></main></body></html>\n");
    return kr_sb_finish(&sb, out, err);
}
