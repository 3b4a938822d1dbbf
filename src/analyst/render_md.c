/*
 * analyst/render_md — the report set as Markdown (GitHub-flavoured tables), for terminals,
 * chat tools and pull requests. Same numbers and wording as the HTML page, without charts.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analyst/figures.h"
#include "analyst/narrative.h"
#include "analyst/render.h"
#include "analyst/text.h"
#include "base/error.h"
#include "base/timeutil.h"

static void md_text(kr_sb *sb, const char *s, size_t n);
static void md_inline(kr_sb *sb, const char *s);

/* One table per interval: horizons of 5-minute and daily bars are not comparable. */
static void ranking(kr_sb *sb, const kr_report_set *set) {
    char a[32], b[64], c[64], d[32], e[64], t[32];
    kr_sb_append(sb, "## Ranking by expected return\n\n"
                     "Ranked within each interval; \u00b1 is the Monte Carlo standard error. "
                     "Symbols marked \u2248 are indistinguishable from the named ones at that "
                     "error (their expected returns differ by less than two combined standard "
                     "errors).\n\n");
    for (int k = 0; k < set->n; k++) {
        const kr_report *r = set->reports[set->rank[k]];
        if (r->group_rank == 1)
            kr_sb_appendf(sb,
                          "%s### %s bars (%d-bar horizon)\n\n"
                          "| # | Symbol | Last bar | Last close | Expected return | P(up) | "
                          "Volatility (std of return) | VaR 95%% | Note |\n"
                          "|---:|---|---|---:|---:|---:|---:|---:|---|\n",
                          k ? "\n" : "", r->interval, r->horizon);
        kr_sb_appendf(sb, "| %d | ", r->group_rank);
        md_inline(sb, r->symbol);
        kr_sb_appendf(sb, " | %s | %s | %s | %s | %s | %s | ",
                      kr_format_timestamp(r->last_ts, r->date_only, t, sizeof t),
                      kr_fmt_price(r->last_close, a),
                      kr_fmt_pm_pct(r->expected_return, r->expected_return_se, 2, 1, b),
                      kr_fmt_pm_prob(r->prob_up, r->prob_up_se, c), kr_fmt_pct(r->return_std, 2, d),
                      kr_fmt_pm_pct(r->var95, r->var95_se, 2, 0, e));
        if (r->stale) {
            kr_sb age = { 0 };
            kr_report_age_note(&age, r);
            kr_sb_append(sb, "stale: ");
            md_inline(sb, age.data ? age.data : "");
            kr_sb_free(&age);
        }
        if (r->tied_with[0]) {
            kr_sb_append(sb, r->stale ? "; \u2248 " : "\u2248 ");
            md_inline(sb, r->tied_with);
        }
        kr_sb_append(sb, " |\n");
    }
    kr_sb_append(sb, "\n");
}

static void failures_md(kr_sb *sb, const kr_report_set *set) {
    if (!set->n_failures) return;
    kr_sb_append(sb, "## Not analysed\n\n");
    for (int i = 0; i < set->n_failures; i++) {
        const kr_analyze_failure *f = &set->failures[i];
        kr_sb_append(sb, "- **");
        md_inline(sb, f->symbol); /* as given: it may be the name that was refused */
        kr_sb_append(sb, "**");
        if (f->interval[0]) kr_sb_append(sb, " ");
        md_inline(sb, f->interval);
        kr_sb_append(sb, ": ");
        md_inline(sb, f->message);
        kr_sb_append(sb, "\n");
    }
    kr_sb_append(sb, "\n");
}

static void horizon_table(kr_sb *sb, const kr_report *r) {
    char d[32];
    kr_format_timestamp(r->fc_ts[r->horizon - 1], r->date_only, d, sizeof d);
    kr_sb_appendf(sb, "### At the horizon (%d bars, %s)\n\n| Figure | Value |\n|---|---:|\n",
                  r->horizon, d);
    const void *base[1] = { r };
    kr_figure_rows_append(sb, 0, 0, kr_horizon_rows, KR_N_HORIZON_ROWS, r, kr_report_stats, base,
                          1);
    kr_sb_append(sb, "\n");
    kr_sb_append(sb, "\u00b1: Monte Carlo standard error (how much the figure moves between seeds "
                     "at this number of paths); pp = percentage points. ");
    kr_report_paths_note(sb, r);
    kr_sb_append(sb, "\n\n");
}

static void path_table(kr_sb *sb, const kr_report *r) {
    kr_sb_append(
        sb, "### Forecast close per step\n\n| Step | Time | Mean | p10 | p50 (median) | p90 |\n"
            "|---:|---|---:|---:|---:|---:|\n");
    for (int i = 0; i < r->horizon; i++) {
        kr_step_cells s;
        kr_report_step_cells(r, i, &s);
        kr_sb_appendf(sb, "| %d | %s | %s | %s | %s | %s |\n", i + 1, s.time, s.mean, s.p10, s.p50,
                      s.p90);
    }
    kr_sb_append(sb, "\n");
    kr_report_bands_note(sb, r);
    kr_sb_append(sb, "\n\n");
}

static void technical_table(kr_sb *sb, const kr_report *r) {
    kr_sb_append(sb, "### Technical snapshot (last bar)\n\n| Indicator | Value |\n|---|---:|\n");
    const void *base[1] = { &r->tech };
    kr_figure_rows_append(sb, 0, 0, kr_tech_rows, KR_N_TECH_ROWS, r, kr_tech_figures, base, 1);
    kr_sb_append(sb, "\n");
}

static void calibration_tables(kr_sb *sb, const kr_report *r) {
    const kr_calibration *c = r->calibration;
    if (!c) return;
    kr_sb_appendf(sb,
                  "### Calibration (last %d windows of %d bars)\n\n"
                  "| Figure | Model | Naive (no change) |\n|---|---:|---:|\n",
                  c->windows, c->horizon);
    const void *scores[2] = { &c->model, &c->naive };
    kr_figure_rows_append(sb, 0, 0, kr_calib_rows, KR_N_CALIB_SCORES, r, kr_calib_scores_figures,
                          scores, 2);
    kr_sb_append(sb, "\n");
    kr_sb_append(
        sb,
        "| History ends | Last close | Realised | Model mean | Model p10-p90 | Naive p10-p90 |\n"
        "|---|---:|---:|---:|---:|---:|\n");
    for (int j = 0; j < c->windows; j++) {
        kr_window_cells w;
        kr_report_window_cells(r, &c->window[j], "-", &w);
        kr_sb_appendf(sb, "| %s | %s | %s | %s | %s | %s |\n", w.end, w.last, w.realized, w.model,
                      w.model_band, w.naive_band);
    }
    kr_sb_append(sb, "\n");
}

static void metadata_table(kr_sb *sb, const kr_report *r) {
    const kr_report_meta *m = &r->meta;
    char a[32];
    kr_sb_append(sb, "### Model and run\n\n| | |\n|---|---|\n");
    kr_sb_append(sb, "| Model | ");
    md_inline(sb, m->model_name);
    kr_sb_appendf(sb, "%s (d_model %d, %d layers, %d heads, %s parameters, weights %s%s%s) |\n",
                  m->demo ? " \u2014 **DEMO MODEL, not a forecast**" : "", m->d_model, m->n_layers,
                  m->n_heads, kr_fmt_compact((double)m->n_params, a), m->quantization,
                  m->quant_method[0] ? " " : "", m->quant_method);
    kr_sb_append(sb, "| Source | ");
    md_inline(sb, m->source);
    kr_sb_append(sb, " |\n| Directories | ");
    md_inline(sb, m->predictor_dir);
    kr_sb_append(sb, ", ");
    md_inline(sb, m->tokenizer_dir);
    kr_sb_append(sb, " |\n");
    char v[512];
    kr_sb_appendf(sb, "| Sampling | %s |\n", kr_report_sampling_text(r, v, sizeof v));
    kr_sb_appendf(sb, "| Timing | %s |\n", kr_report_timing_text(r, v, sizeof v));
    kr_sb_appendf(sb, "| Engine | kronos %s |\n\n", m->engine_version);
}

/* Text from outside (the language model, its server) with & < > as entities, so it cannot
 * inject HTML into a Markdown viewer that passes HTML through. */
static void md_text(kr_sb *sb, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&': kr_sb_append(sb, "&amp;"); break;
        case '<': kr_sb_append(sb, "&lt;"); break;
        case '>': kr_sb_append(sb, "&gt;"); break;
        default: kr_sb_appendn(sb, s + i, 1);
        }
    }
}

/* Text from outside (a model's name, its config's "source", an error message) on one line of
 * a table, a quote or an emphasis: entities as md_text, Markdown's punctuation escaped (a `|`
 * would split the table's cell, a `*` end the emphasis) and line breaks made spaces. */
static void md_inline(kr_sb *sb, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&' || c == '<' || c == '>')
            md_text(sb, s, 1);
        else if (strchr("\\`*_[]|#", c))
            kr_sb_appendf(sb, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            kr_sb_append(sb, " ");
        else
            kr_sb_appendn(sb, s, 1);
    }
}

/* A line of the model's prose: entities as md_text, and the punctuation of links, images,
 * code and emphasis escaped, so the text shows as the model wrote it and cannot make a viewer
 * fetch an image (a tracking pixel carrying data in its URL) or show a disguised link. */
static void md_prose(kr_sb *sb, const char *s, size_t n) {
    /* Besides emphasis, code and links: a '|' (a table), and at a line's start '#' (a
     * heading), '-', '+', '=' (a list, a rule, a setext heading's underline) and '>' (a nested
     * quote) would give the model's text a structure of its own inside the quote. */
    int lead = 1; /* no character but spaces yet on this line */
    for (size_t i = 0; i < n; i++) {
        const int structural = s[i] == '|' || (lead && s[i] && strchr("#-+=>", s[i]));
        if (s[i] != ' ') lead = 0;
        if (structural || (s[i] && strchr("\\`*_[]", s[i])))
            kr_sb_appendf(sb, "\\%c", s[i]);
        else
            md_text(sb, s + i, 1);
    }
}

/* The language model's narrative under the summary, as a block quote so that whatever
 * Markdown it writes stays inside it; or why a requested one is missing. */
static void narrative_md(kr_sb *sb, const kr_report *r) {
    const kr_narrative *n = r->narrative;
    if (!n) return;
    if (!n->text) {
        kr_sb_append(sb, "*No narrative: ");
        md_inline(sb, n->error);
        kr_sb_append(sb, "*\n\n");
        return;
    }
    kr_sb_append(sb, "**Narrative (written by ");
    md_inline(sb, n->model);
    kr_sb_append(sb, " from the numbers above; the numbers come from kronos, not from the language "
                     "model)**\n\n");
    for (const char *p = n->text; *p;) {
        size_t len = strcspn(p, "\n");
        size_t show = len;
        while (show > 0 && p[show - 1] == '\r') show--;
        kr_sb_append(sb, show ? "> " : ">");
        md_prose(sb, p, show);
        kr_sb_append(sb, "\n");
        p += len + (p[len] == '\n');
    }
    kr_sb_append(sb, "\n");
    if (n->warning[0]) {
        kr_sb_appendf(sb, "*Warning: %s", n->warning);
        if (n->unsupported[0]) {
            kr_sb_append(sb, " (for example ");
            md_inline(sb, n->unsupported);
            kr_sb_append(sb, ")");
        }
        kr_sb_append(sb, ".*\n\n");
    }
}

static void report_md(kr_sb *sb, const kr_report *r) {
    char a[32], d[32];
    kr_sb_append(sb, "## ");
    md_inline(sb, r->symbol);
    kr_sb_append(sb, " (");
    md_inline(sb, r->interval);
    kr_sb_append(sb, ")\n\n");
    kr_sb_appendf(
        sb, "Last close **%s** on %s; %lld rows of history.\n\n", kr_fmt_price(r->last_close, a),
        kr_format_timestamp(r->last_ts, r->date_only, d, sizeof d), (long long)r->rows_available);
    /* A stale history in bold, else how old the data is. */
    kr_sb note = { 0 };
    if (r->stale)
        kr_report_stale_note(&note, r);
    else
        kr_report_age_note(&note, r);
    kr_sb_append(sb, r->stale ? "**" : "Data: ");
    md_inline(sb, note.data ? note.data : "");
    kr_sb_append(sb, r->stale ? "**\n\n" : ".\n\n");
    kr_sb_free(&note);
    kr_sb_append(sb, "**Summary**\n\n");
    for (int i = 0; i < r->n_summary; i++) kr_sb_appendf(sb, "- %s\n", r->summary[i]);
    kr_sb_append(sb, "\n");
    narrative_md(sb, r);
    horizon_table(sb, r);
    path_table(sb, r);
    technical_table(sb, r);
    calibration_tables(sb, r);
    metadata_table(sb, r);
}

kr_status kr_render_md(const kr_report_set *set, char **out, kr_error *err) {
    if (!set || !out || set->n < 1)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "render md: no reports");
    kr_sb sb = { 0 };
    kr_civil g = kr_civil_from_unix(set->generated_at);
    if (set->n > 1)
        kr_sb_appendf(&sb, "# Kronos analysis: %d symbols\n\n", set->n);
    else {
        kr_sb_append(&sb, "# Kronos analysis: ");
        md_inline(&sb, set->reports[0]->symbol);
        kr_sb_append(&sb, " (");
        md_inline(&sb, set->reports[0]->interval);
        kr_sb_append(&sb, ")\n\n");
    }
    kr_sb_appendf(&sb, "*Generated %04d-%02d-%02d %02d:%02d UTC by kronos %s with model ", g.year,
                  g.month, g.day, g.hour, g.minute, kr_version());
    md_inline(&sb, set->reports[0]->meta.model_name);
    kr_sb_append(&sb, ".*\n\n");
    char notices[2][1024];
    const int have[2] = { kr_report_model_notice(set, notices[0], sizeof notices[0]),
                          kr_report_calendar_notice(set, notices[1], sizeof notices[1]) };
    for (int i = 0; i < 2; i++) {
        if (!have[i]) continue;
        kr_sb_append(&sb, "> **");
        md_inline(&sb, notices[i]);
        kr_sb_append(&sb, "**\n\n");
    }
    kr_sb_appendf(&sb, "> **%s**\n\n", KR_REPORT_DISCLAIMER);
    failures_md(&sb, set);
    if (set->n > 1) ranking(&sb, set);
    for (int i = 0; i < set->n; i++) report_md(&sb, set->reports[i]);
    return kr_sb_finish(&sb, out, err);
}
