/*
 * analyst/render_html — the report set as one self-contained HTML page: inline CSS, inline
 * SVG charts (analyst/chart_svg), no scripts, fonts or images fetched from anywhere, so it
 * can be mailed, archived or printed as it is. Light theme, system fonts, tables for every
 * number, print rules that keep each table and chart on one page.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/chart_svg.h"
#include "analyst/figures.h"
#include "analyst/narrative.h"
#include "analyst/render.h"
#include "analyst/summary.h"
#include "analyst/text.h"
#include "base/error.h"
#include "base/timeutil.h"

static const char k_css[] =
    ":root{--fg:#111827;--muted:#6b7280;--line:#e5e7eb;--bg:#ffffff;--panel:#f9fafb;--accent:#"
    "1d4ed8;"
    "--up:#15803d;--down:#b91c1c}\n"
    "*{box-sizing:border-box}\n"
    "body{margin:0;background:#f3f4f6;color:var(--fg);font:14px/1.5 system-ui,-apple-system,'Segoe "
    "UI',"
    "Roboto,'Helvetica Neue',Arial,sans-serif;-webkit-font-smoothing:antialiased}\n"
    "main{max-width:1440px;margin:0 auto;padding:28px 24px 40px}\n"
    "header.page{margin-bottom:18px}\n"
    "h1{font-size:24px;margin:0 0 4px;letter-spacing:-.01em}\n"
    "h2{font-size:20px;margin:0 0 2px}\n"
    "h3{font-size:13px;text-transform:uppercase;letter-spacing:.06em;color:var(--muted);margin:"
    "22px 0 8px}\n"
    ".sub{color:var(--muted);font-size:13px}\n"
    ".demo{border:2px solid "
    "#b91c1c;background:#fef2f2;color:#7f1d1d;border-radius:8px;padding:12px "
    "16px;font-size:15px;margin:14px 0}.demo strong{font-size:18px;letter-spacing:.02em}\n"
    ".pm{color:var(--muted);font-weight:400;font-size:.8em;white-space:nowrap}\n"
    ".stale{color:#92400e;font-weight:600}.tie{color:var(--muted)}\n"
    "#ranking td:nth-child(2),#ranking th:nth-child(2),#ranking td:last-child,#ranking "
    "th:last-child{text-align:left}\n"
    ".fail{border:1px solid #fca5a5;background:#fff7f7;border-radius:8px;padding:10px 14px}\n"
    ".note{color:var(--muted);font-size:12px;margin:6px 0 0}\n"
    ".disclaimer{border:1px solid "
    "#fcd34d;background:#fffbeb;color:#78350f;border-radius:6px;padding:10px 14px;"
    "font-size:13px;margin:14px 0}\n"
    "section.card{background:var(--bg);border:1px solid "
    "var(--line);border-radius:10px;padding:22px 24px;"
    "margin:18px 0;box-shadow:0 1px 2px rgba(0,0,0,.04)}\n"
    ".kpis{display:grid;grid-template-columns:repeat(6,1fr);gap:10px;margin:16px 0 6px}\n"
    ".kpi{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:10px "
    "12px}\n"
    ".kpi .l{font-size:11px;color:var(--muted);text-transform:uppercase;letter-spacing:.05em}\n"
    ".kpi .v{font-size:19px;font-weight:600;font-variant-numeric:tabular-nums;margin-top:2px}\n"
    ".kpi .n{font-size:12px;color:var(--muted)}\n"
    ".kpi .v.long{font-size:15px;padding-top:4px;white-space:nowrap}\n"
    ".pos{color:var(--up)}.neg{color:var(--down)}\n"
    "ul.summary{margin:6px 0 0;padding-left:20px}ul.summary li{margin:3px 0}\n"
    ".narrative{border-left:3px solid #c7d2fe;background:var(--panel);border-radius:0 6px 6px 0;"
    "padding:8px 14px;margin:12px 0 0}\n"
    ".narrative .nl{font-size:12px;color:var(--muted);margin-bottom:4px}\n"
    ".narrative p{margin:4px 0}.narrative .warn{color:#92400e;font-size:12px}\n"
    ".chart{width:100%;height:auto;display:block;margin-top:6px}\n"
    ".grid2{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,500px),1fr));"
    "gap:24px}\n"
    /* A card scrolls before the page does (a narrow window); at 1280 px and up nothing needs
     * to (tests/web/report_layout.mjs). */
    "section.card{overflow-x:auto}\n"
    "table.kv td:first-child{white-space:nowrap;width:1%}\n"
    "table.kv td:not(:first-child){white-space:normal;overflow-wrap:anywhere;text-align:left}\n"
    "table.h td:first-child{min-width:13em}\n"
    "#ranking td:last-child{white-space:normal;min-width:16em}\n"
    "#ranking thead th{white-space:nowrap}\n"
    "table{border-collapse:collapse;width:100%;font-size:13px;font-variant-numeric:tabular-nums}\n"
    "table.sp{margin-top:12px}\n"
    "th,td{padding:5px 8px;border-bottom:1px solid "
    "var(--line);text-align:right;vertical-align:top}\n"
    "th:first-child,td:first-child{text-align:left}\n"
    "thead th{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);"
    "font-weight:600;border-bottom:1px solid #d1d5db}\n"
    "tbody tr:nth-child(even){background:var(--panel)}\n"
    "td.t{color:var(--muted);white-space:nowrap}\n"
    "td:not(:first-child){white-space:nowrap}\n"
    "a{color:var(--accent);text-decoration:none}\n"
    "footer{color:var(--muted);font-size:12px;margin-top:26px}\n"
    "code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;word-break:break-all}\n"
    "@media "
    "(max-width:820px){.kpis{grid-template-columns:repeat(3,1fr)}.grid2{grid-template-columns:1fr}}"
    "\n"
    "@media print{body{background:#fff;font-size:11px}main{max-width:none;padding:0}"
    "section.card{border:none;box-shadow:none;padding:0;margin:0 0 14px}"
    "section.card+section.card{break-before:page}"
    "table,.chart,.kpis,tr{break-inside:avoid}h3{break-after:avoid}.kpi{border-color:#d1d5db}"
    "a{color:inherit}@page{size:A4;margin:14mm}}\n";

const char *kr_report_css(void) { return k_css; }

/* The disclaimer with its first sentence ("Not investment advice.") in bold. */
static void disclaimer(kr_sb *sb) {
    const char *d = KR_REPORT_DISCLAIMER, *dot = strstr(d, ". ");
    size_t n = dot ? (size_t)(dot - d) + 1 : strlen(d);
    char first[128];
    snprintf(first, sizeof first, "%.*s", (int)(n < sizeof first ? n : sizeof first - 1), d);
    kr_sb_append(sb, "<strong>");
    kr_sb_append_html(sb, first);
    kr_sb_append(sb, "</strong>");
    kr_sb_append_html(sb, d + n);
}

static void signed_class(kr_sb *sb, double x) {
    kr_sb_append(sb, x > 0 ? "pos" : x < 0 ? "neg" : "");
}

static void kpi(kr_sb *sb, const char *label, const char *value, const char *note, double sign) {
    kr_sb_append(sb, "<div class=\"kpi\"><div class=\"l\">");
    kr_sb_append_html(sb, label);
    kr_sb_append(sb, "</div><div class=\"v ");
    signed_class(sb, sign);
    if (strlen(value) > 9) kr_sb_append(sb, " long");
    kr_sb_append(sb, "\">");
    kr_sb_append_html(sb, value);
    kr_sb_append(sb, "</div><div class=\"n\">");
    kr_sb_append_html(sb, note);
    kr_sb_append(sb, "</div></div>\n");
}

static void row2(kr_sb *sb, const char *label, const char *value) {
    kr_sb_append(sb, "<tr><td>");
    kr_sb_append_html(sb, label);
    kr_sb_append(sb, "</td><td>");
    kr_sb_append_html(sb, value);
    kr_sb_append(sb, "</td></tr>\n");
}

static void kpis(kr_sb *sb, const kr_report *r) {
    char a[32], b[32], v[96], n[96];
    const size_t last = (size_t)(r->horizon - 1) * KR_N_FEATURES + KR_CLOSE;
    kr_sb_append(sb, "<div class=\"kpis\">\n");
    kr_format_timestamp(r->last_ts, r->date_only, a, sizeof a);
    kpi(sb, "Last close", kr_fmt_price(r->last_close, b), a, 0);
    char e[32];
    kr_fmt_se_pp(r->prob_up_se, e);
    snprintf(n, sizeof n, "%s%s%d paths, %d bars", e, e[0] ? ", " : "", r->paths, r->horizon);
    kpi(sb, "P(close up)", kr_fmt_pct(r->prob_up, 0, a), n, 0);
    kr_fmt_se_pct(r->expected_return_se, 2, e);
    snprintf(n, sizeof n, "%s%sstd %s", e, e[0] ? " \xc2\xb7 " : "",
             kr_fmt_pct(r->return_std, 2, b));
    kpi(sb, "Expected return", kr_fmt_pct_signed(r->expected_return, a), n, r->expected_return);
    snprintf(v, sizeof v, "%s \xe2\x80\x93 %s", kr_fmt_price(r->fc_p10[last], a),
             kr_fmt_price(r->fc_p90[last], b));
    /* Each end with its Monte Carlo error, as the per-step table prints it. */
    char e10[32], e90[32];
    kr_fmt_se_price(r->fc_p10_se[last], r->fc_p10[last], e10);
    kr_fmt_se_price(r->fc_p90_se[last], r->fc_p90[last], e90);
    if (e10[0] && e90[0])
        snprintf(n, sizeof n, "%s / %s \xc2\xb7 p10 \xe2\x80\x93 p90 close", e10, e90);
    else
        snprintf(n, sizeof n, "p10 \xe2\x80\x93 p90 close");
    kpi(sb, "80% band at horizon", v, n, 0);
    kr_fmt_se_pct(r->var95_se, 2, e);
    snprintf(n, sizeof n, "%s%sES %s", e, e[0] ? " \xc2\xb7 " : "", kr_fmt_pct(r->es95, 2, b));
    kpi(sb, "VaR 95%", kr_fmt_pct(r->var95, 2, a), n, 0);
    kpi(sb, "RSI 14", kr_fmt_num(r->tech.rsi14, 0, a), kr_rsi_state(r->tech.rsi14), 0);
    kr_sb_append(sb, "</div>\n");
}

static void horizon_table(kr_sb *sb, const kr_report *r) {
    kr_sb_append(sb, "<div><h3>At the horizon</h3><table class=\"h\"><tbody>\n");
    const void *base[1] = { r };
    kr_figure_rows_append(sb, 1, 1, kr_horizon_rows, KR_N_HORIZON_ROWS, r, kr_report_stats, base,
                          1);
    kr_sb_append(sb, "</tbody></table><p class=\"note\">\xc2\xb1: Monte Carlo standard error (how "
                     "much a figure moves between seeds at this number of paths); pp = percentage "
                     "points. ");
    kr_sb e = { 0 };
    kr_report_paths_note(&e, r);
    if (e.data) kr_sb_append_html(sb, e.data);
    kr_sb_free(&e);
    kr_sb_append(sb, "</p></div>\n");
}

static void technical_table(kr_sb *sb, const kr_report *r) {
    kr_sb_append(sb, "<div><h3>Technical snapshot</h3><table><tbody>\n");
    const void *base[1] = { &r->tech };
    kr_figure_rows_append(sb, 1, 1, kr_tech_rows, KR_N_TECH_ROWS, r, kr_tech_figures, base, 1);
    kr_sb_append(sb, "</tbody></table></div>\n");
}

/* One table row of cells, each escaped (a cell such as "103.00 \u00b1 <0.01" holds a '<');
 * the cell at index `time_col` (-1: none) is a time, in the monospaced class "t". */
static void cells_row(kr_sb *sb, const char *const *cells, int n, int time_col) {
    kr_sb_append(sb, "<tr>");
    for (int i = 0; i < n; i++) {
        kr_sb_append(sb, i == time_col ? "<td class=\"t\">" : "<td>");
        kr_sb_append_html(sb, cells[i]);
        kr_sb_append(sb, "</td>");
    }
    kr_sb_append(sb, "</tr>\n");
}

static void path_table(kr_sb *sb, const kr_report *r) {
    char e[32];
    kr_sb_append(
        sb,
        "<h3>Forecast per step</h3><table><thead><tr><th>Step</th><th>Time</th><th>Mean close</th>"
        "<th>p10</th><th>p50 (median)</th><th>p90</th><th>Mean volume</th></tr></thead><tbody>\n");
    for (int i = 0; i < r->horizon; i++) {
        kr_step_cells s;
        kr_report_step_cells(r, i, &s);
        char step[16];
        snprintf(step, sizeof step, "%d", i + 1);
        const char *cells[] = { step,
                                s.time,
                                s.mean,
                                s.p10,
                                s.p50,
                                s.p90,
                                kr_fmt_compact(r->fc_mean[(size_t)i * KR_N_FEATURES + KR_VOLUME],
                                               e) };
        cells_row(sb, cells, 7, 1);
    }
    kr_sb_append(sb, "</tbody></table><p class=\"note\">");
    kr_sb note = { 0 };
    kr_report_bands_note(&note, r);
    if (note.data) kr_sb_append_html(sb, note.data);
    kr_sb_free(&note);
    kr_sb_append(sb, "</p>\n");
}

static void calibration(kr_sb *sb, const kr_report *r) {
    const kr_calibration *c = r->calibration;
    if (!c) return;
    kr_sb_appendf(sb,
                  "<h3>Calibration: last %d windows of %d bars</h3><table><thead><tr>"
                  "<th>Figure</th><th>Model</th><th>Naive (no change)</th></tr></thead><tbody>\n",
                  c->windows, c->horizon);
    /* Escaped as the horizon table is: an error under half a point reads "\u00b1 <1 pp". */
    const void *scores[2] = { &c->model, &c->naive };
    kr_figure_rows_append(sb, 1, 1, kr_calib_rows, KR_N_CALIB_SCORES, r, kr_calib_scores_figures,
                          scores, 2);
    kr_sb_append(sb, "</tbody></table>\n");
    kr_sb_append(sb, "<table class=\"sp\"><thead><tr><th>Window: history ends</th><th>Last "
                     "close</th><th>Realised at horizon</th>"
                     "<th>Model mean</th><th>Model p10 \xe2\x80\x93 p90</th><th>Naive p10 "
                     "\xe2\x80\x93 p90</th></tr></thead><tbody>\n");
    for (int j = 0; j < c->windows; j++) {
        kr_window_cells w;
        kr_report_window_cells(r, &c->window[j], " \xe2\x80\x93 ", &w);
        const char *cells[] = { w.end, w.last, w.realized, w.model, w.model_band, w.naive_band };
        cells_row(sb, cells, 6, 0);
    }
    kr_sb_append(sb, "</tbody></table>\n");
}

static void metadata(kr_sb *sb, const kr_report *r) {
    const kr_report_meta *m = &r->meta;
    char a[32], v[2400];
    kr_sb_append(sb, "<h3>Model and run</h3><table class=\"kv\"><tbody>\n");
    snprintf(v, sizeof v, "%s%s — d_model %d, %d layers, %d heads, %s parameters, weights %s%s%s",
             m->model_name, m->demo ? " (DEMO MODEL, not a forecast)" : "", m->d_model, m->n_layers,
             m->n_heads, kr_fmt_compact((double)m->n_params, a), m->quantization,
             m->quant_method[0] ? " " : "", m->quant_method);
    row2(sb, "Model", v);
    row2(sb, "Source", m->source);
    kr_sb_append(sb, "<tr><td>Directories</td><td><code>");
    kr_sb_append_html(sb, m->predictor_dir);
    kr_sb_append(sb, "</code><br><code>");
    kr_sb_append_html(sb, m->tokenizer_dir);
    kr_sb_append(sb, "</code></td></tr>\n");
    row2(sb, "Sampling", kr_report_sampling_text(r, v, sizeof v));
    row2(sb, "Timing", kr_report_timing_text(r, v, sizeof v));
    snprintf(v, sizeof v, "kronos %s", m->engine_version);
    row2(sb, "Engine", v);
    kr_sb_append(sb, "</tbody></table>\n");
}

/* The language model's narrative under the summary, escaped, one <p> per paragraph; or why a
 * requested one is missing. Labelled so nobody mistakes it for the report's own words. */
static void narrative(kr_sb *sb, const kr_report *r) {
    const kr_narrative *n = r->narrative;
    if (!n) return;
    if (!n->text) {
        kr_sb_append(sb, "<div class=\"narrative\"><div class=\"nl\">No narrative: ");
        kr_sb_append_html(sb, n->error);
        kr_sb_append(sb, "</div></div>\n");
        return;
    }
    char label[256];
    snprintf(label, sizeof label,
             "Narrative (written by %s from the numbers above; the numbers come from kronos, "
             "not from the language model)",
             n->model);
    kr_sb_append(sb, "<div class=\"narrative\"><div class=\"nl\">");
    kr_sb_append_html(sb, label);
    kr_sb_append(sb, "</div>\n<p>");
    /* Blank lines separate paragraphs; single newlines become <br>. */
    kr_sb para = { 0 };
    for (const char *p = n->text; *p;) {
        size_t len = strcspn(p, "\n");
        size_t show = len;
        while (show > 0 && (p[show - 1] == '\r' || p[show - 1] == ' ' || p[show - 1] == '\t'))
            show--;
        if (show == 0) {
            if (para.len) {
                kr_sb_append(sb, para.data);
                kr_sb_append(sb, "</p>\n<p>");
                para.len = 0;
                para.data[0] = 0;
            }
        } else {
            char *line = strndup(p, show);
            if (!line) {
                sb->oom = 1;
                break;
            }
            if (para.len) kr_sb_append(&para, "<br>\n");
            kr_sb_append_html(&para, line);
            free(line);
        }
        p += len + (p[len] == '\n');
    }
    if (para.oom) sb->oom = 1;
    if (para.len) kr_sb_append(sb, para.data);
    kr_sb_free(&para);
    kr_sb_append(sb, "</p>\n");
    if (n->warning[0]) {
        kr_sb_append(sb, "<p class=\"warn\">Warning: ");
        kr_sb_append_html(sb, n->warning);
        if (n->unsupported[0]) {
            kr_sb_append(sb, " (for example ");
            kr_sb_append_html(sb, n->unsupported);
            kr_sb_append(sb, ")");
        }
        kr_sb_append(sb, ".</p>\n");
    }
    kr_sb_append(sb, "</div>\n");
}

static void report_section(kr_sb *sb, const kr_report *r) {
    char a[32], b[32];
    kr_sb_append(sb, "<section class=\"card\" id=\"");
    kr_sb_append_html(sb, r->symbol);
    kr_sb_append(sb, "-");
    kr_sb_append_html(sb, r->interval);
    kr_sb_append(sb, "\"><h2>");
    kr_sb_append_html(sb, r->symbol);
    kr_sb_append(sb, " <span class=\"sub\">");
    kr_sb_append_html(sb, r->interval);
    kr_sb_appendf(sb, " bars, %lld rows from %s to %s</span></h2>\n", (long long)r->rows_available,
                  kr_format_timestamp(r->first_ts, r->date_only, a, sizeof a),
                  kr_format_timestamp(r->last_ts, r->date_only, b, sizeof b));
    kr_sb note = { 0 };
    if (r->stale)
        kr_report_stale_note(&note, r);
    else
        kr_report_age_note(&note, r);
    kr_sb_append(sb, r->stale ? "<p class=\"stale\">" : "<p class=\"sub\">");
    kr_sb_append_html(sb, note.data ? note.data : "");
    kr_sb_append(sb, "</p>\n");
    kr_sb_free(&note);
    kpis(sb, r);
    kr_sb_append(sb, "<h3>Summary</h3><ul class=\"summary\">\n");
    for (int i = 0; i < r->n_summary; i++) {
        kr_sb_append(sb, "<li>");
        kr_sb_append_html(sb, r->summary[i]);
        kr_sb_append(sb, "</li>\n");
    }
    kr_sb_append(sb, "</ul>\n");
    narrative(sb, r);
    kr_sb_appendf(sb, "<h3>Last %d bars and the %d-bar forecast</h3>\n", r->n_chart, r->horizon);
    kr_chart_forecast_svg(sb, r, 1020, 440);
    kr_sb_append(sb, "<div class=\"grid2\">\n");
    horizon_table(sb, r);
    technical_table(sb, r);
    kr_sb_append(sb, "</div>\n");
    calibration(sb, r);
    path_table(sb, r);
    metadata(sb, r);
    kr_sb_append(sb, "</section>\n");
}

/* One table per interval (their horizons are not comparable), with each symbol's last bar, a
 * stale flag and the symbols it cannot be told apart from at the Monte Carlo error. */
static void ranking(kr_sb *sb, const kr_report_set *set) {
    char a[32], b[64], c[64], d[32], e[64], t[32];
    kr_sb_append(sb, "<section class=\"card\" id=\"ranking\"><h2>Ranking by expected return</h2>"
                     "<p class=\"note\">Ranked within each interval; \xc2\xb1 is the Monte Carlo "
                     "standard error; \xe2\x89\x88 names symbols whose expected return differs by "
                     "less than two combined standard errors (indistinguishable at this number of "
                     "paths).</p>\n");
    for (int k = 0; k < set->n; k++) {
        const kr_report *r = set->reports[set->rank[k]];
        if (r->group_rank == 1) {
            if (k) kr_sb_append(sb, "</tbody></table>\n");
            kr_sb_append(sb, "<h3>");
            kr_sb_append_html(sb, r->interval);
            kr_sb_appendf(sb,
                          " bars, %d-bar horizon</h3><table><thead><tr><th>#</th><th>Symbol</th>"
                          "<th>Last bar</th><th>Last<br>close</th><th>Expected<br>return</th>"
                          "<th>P(up)</th><th>Volatility<br>(std of return)</th><th>VaR 95%%</th>"
                          "<th>Direction</th><th>Note</th></tr></thead><tbody>\n",
                          r->horizon);
        }
        kr_sb_appendf(sb, "<tr><td>%d</td><td><a href=\"#", r->group_rank);
        kr_sb_append_html(sb, r->symbol);
        kr_sb_append(sb, "-");
        kr_sb_append_html(sb, r->interval);
        kr_sb_append(sb, "\">");
        kr_sb_append_html(sb, r->symbol);
        kr_sb_appendf(sb, "</a></td><td class=\"t\">%s</td><td>%s</td><td class=\"",
                      kr_format_timestamp(r->last_ts, r->date_only, t, sizeof t),
                      kr_fmt_price(r->last_close, a));
        signed_class(sb, r->expected_return);
        kr_sb_append(sb, "\">");
        kr_sb_append_html(sb, kr_fmt_pm_pct(r->expected_return, r->expected_return_se, 2, 1, b));
        kr_sb_append(sb, "</td><td>");
        kr_sb_append_html(sb, kr_fmt_pm_prob(r->prob_up, r->prob_up_se, c));
        kr_sb_appendf(sb, "</td><td>%s</td><td>", kr_fmt_pct(r->return_std, 2, d));
        kr_sb_append_html(sb, kr_fmt_pm_pct(r->var95, r->var95_se, 2, 0, e));
        kr_sb_appendf(sb, "</td><td>%s</td><td>", kr_summary_direction(r));
        if (r->stale) {
            kr_sb age = { 0 };
            kr_report_age_note(&age, r);
            kr_sb_append(sb, "<span class=\"stale\">stale (");
            kr_sb_append_html(sb, age.data ? age.data : "");
            kr_sb_append(sb, ")</span> ");
            kr_sb_free(&age);
        }
        if (r->tied_with[0]) {
            kr_sb_append(sb, "<span class=\"tie\">\xe2\x89\x88 ");
            kr_sb_append_html(sb, r->tied_with);
            kr_sb_append(sb, "</span>");
        }
        kr_sb_append(sb, "</td></tr>\n");
    }
    kr_sb_append(sb, "</tbody></table></section>\n");
}

static void failures(kr_sb *sb, const kr_report_set *set) {
    if (!set->n_failures) return;
    kr_sb_append(sb, "<section class=\"card fail\" id=\"failures\"><h2>Not analysed</h2><ul>\n");
    for (int i = 0; i < set->n_failures; i++) {
        kr_sb_append(sb, "<li><strong>");
        kr_sb_append_html(sb, set->failures[i].symbol);
        kr_sb_append(sb, "</strong>");
        if (set->failures[i].interval[0]) kr_sb_append(sb, " ");
        kr_sb_append_html(sb, set->failures[i].interval);
        kr_sb_append(sb, ": ");
        kr_sb_append_html(sb, set->failures[i].message);
        kr_sb_append(sb, "</li>\n");
    }
    kr_sb_append(sb, "</ul></section>\n");
}

kr_status kr_render_html(const kr_report_set *set, char **out, kr_error *err) {
    if (!set || !out || set->n < 1)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "render html: no reports");
    kr_sb sb = { 0 };
    const kr_report *r0 = set->reports[0];
    char title[160];
    if (set->n == 1)
        snprintf(title, sizeof title, "%s (%s)", r0->symbol, r0->interval);
    else
        snprintf(title, sizeof title, "%d symbols", set->n);
    kr_civil g = kr_civil_from_unix(set->generated_at);
    kr_sb_append(&sb, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                      "<meta name=\"viewport\" content=\"width=device-width, "
                      "initial-scale=1\">\n<title>Kronos analysis: ");
    kr_sb_append_html(&sb, title);
    kr_sb_appendf(&sb,
                  "</title>\n<style>\n%s</style></head>\n<body><main>\n<header "
                  "class=\"page\"><h1>Kronos analysis: ",
                  k_css);
    kr_sb_append_html(&sb, title);
    kr_sb_appendf(
        &sb,
        "</h1><div class=\"sub\">Generated %04d-%02d-%02d %02d:%02d UTC by kronos %s with model ",
        g.year, g.month, g.day, g.hour, g.minute, kr_version());
    kr_sb_append_html(&sb, r0->meta.model_name);
    int lo = r0->paths, hi = r0->paths; /* the adaptive rounds give each symbol its count */
    for (int i = 1; i < set->n; i++) {
        if (set->reports[i]->paths < lo) lo = set->reports[i]->paths;
        if (set->reports[i]->paths > hi) hi = set->reports[i]->paths;
    }
    if (lo == hi)
        kr_sb_appendf(&sb, " &middot; %d sampled paths", lo);
    else
        kr_sb_appendf(&sb, " &middot; %d\xe2\x80\x93%d sampled paths per symbol", lo, hi);
    kr_sb_appendf(&sb, ", %d-bar horizon</div>\n", r0->horizon);
    char notice[1024];
    if (kr_report_model_notice(set, notice, sizeof notice)) {
        const char *colon = strchr(notice, ':');
        size_t head = colon ? (size_t)(colon - notice) : strlen(notice);
        kr_sb_append(&sb, "<div class=\"demo\" id=\"model-notice\"><strong>");
        char h[128];
        snprintf(h, sizeof h, "%.*s", (int)(head < sizeof h ? head : sizeof h - 1), notice);
        kr_sb_append_html(&sb, h);
        kr_sb_append(&sb, "</strong>");
        kr_sb_append_html(&sb, notice + head);
        kr_sb_append(&sb, "</div>\n");
    }
    if (kr_report_calendar_notice(set, notice, sizeof notice)) {
        const size_t head = strlen(KR_REPORT_CALENDAR_BANNER);
        kr_sb_append(&sb, "<div class=\"demo\" id=\"calendar-notice\"><strong>");
        kr_sb_append_html(&sb, KR_REPORT_CALENDAR_BANNER);
        kr_sb_append(&sb, "</strong>");
        kr_sb_append_html(&sb, notice + head);
        kr_sb_append(&sb, "</div>\n");
    }
    kr_sb_append(&sb, "<div class=\"disclaimer\">");
    disclaimer(&sb);
    kr_sb_append(&sb, "</div>");
    kr_sb_append(&sb, "</header>\n");
    failures(&sb, set);
    if (set->n > 1) ranking(&sb, set);
    for (int i = 0; i < set->n; i++) report_section(&sb, set->reports[i]);
    kr_sb_append(&sb, "<footer>Figures are statistics of the model's sampled paths; see "
                      "docs/report.md for how each "
                      "is computed. ");
    kr_sb_append_html(&sb, KR_REPORT_DISCLAIMER);
    kr_sb_append(&sb, "</footer>\n</main></body></html>\n");
    return kr_sb_finish(&sb, out, err);
}
