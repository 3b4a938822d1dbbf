/*
 * analyst/figures — the one description of the report's figures that the JSON, Markdown and
 * HTML writers walk. On a report filled by hand (no model), each figure of each table is
 * where the JSON says it is, with the value and error its unit gives (null when not finite,
 * no error key for a figure without one), and every row of the Markdown and HTML tables is
 * printed with its label filled in.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "analyst/figures.h"
#include "analyst/render.h"
#include "analyst/report.h"
#include "test_support.h"

static double g_fc[6], g_zero[6];
static int64_t g_ts[1] = { 1754006400 }; /* 2025-08-01 */

static void set_double(void *base, size_t off, double v) {
    memcpy((char *)base + off, &v, sizeof v);
}

/* A one-step report whose every figure has a value of its own: figure i of a table i + 1
 * hundredths (ints: i + 1), its error a tenth of that. */
static void fill(kr_report *r) {
    memset(r, 0, sizeof *r);
    snprintf(r->symbol, sizeof r->symbol, "TEST");
    snprintf(r->interval, sizeof r->interval, "1d");
    r->date_only = 1;
    r->rows_available = 100;
    r->lookback = 90;
    r->last_ts = g_ts[0] - 86400;
    r->last_close = 100.0;
    r->horizon = 1;
    r->paths = 64;
    r->fc_ts = g_ts;
    for (int c = 0; c < 6; c++) g_fc[c] = 100.0 + c;
    r->fc_mean = r->fc_p10 = r->fc_p50 = r->fc_p90 = g_fc;
    r->fc_mean_se = r->fc_p10_se = r->fc_p50_se = r->fc_p90_se = g_zero;
    for (int i = 0; i < KR_N_REPORT_STATS; i++) {
        const kr_figure *f = &kr_report_stats[i];
        if (f->unit == KR_FIG_COUNT) {
            int n = i + 1;
            memcpy((char *)r + f->value, &n, sizeof n);
        } else {
            set_double(r, f->value, (i + 1) / 100.0);
        }
        if (f->se >= 0) set_double(r, (size_t)f->se, (i + 1) / 1000.0);
    }
    for (int i = 0; i < KR_N_TECH_FIGURES; i++) {
        const kr_figure *f = &kr_tech_figures[i];
        if (f->unit == KR_FIG_COUNT || f->unit == KR_FIG_BOOL) {
            int n = f->unit == KR_FIG_BOOL ? 1 : i + 1;
            memcpy((char *)&r->tech + f->value, &n, sizeof n);
        } else {
            set_double(&r->tech, f->value, (i + 1) / 100.0);
        }
    }
    r->tech.close = 100.0;
}

static cJSON *render_json(kr_report *r) {
    kr_report *reps[1] = { r };
    int rank[1] = { 0 };
    kr_report_set set = { .n = 1, .reports = reps, .rank = rank, .generated_at = g_ts[0] };
    char *text = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_render_json(&set, &text, &err), KR_OK);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    return root;
}

static char *render(kr_report *r, int html) {
    kr_report *reps[1] = { r };
    int rank[1] = { 0 };
    kr_report_set set = { .n = 1, .reports = reps, .rank = rank, .generated_at = g_ts[0] };
    char *text = NULL;
    kr_error err = { 0 };
    assert_int_equal((html ? kr_render_html : kr_render_md)(&set, &text, &err), KR_OK);
    return text;
}

/* The JSON item of figure f inside o (its group's object, when it has one), or NULL. */
static const cJSON *item(const cJSON *o, const kr_figure *f) {
    if (f->group) o = cJSON_GetObjectItemCaseSensitive(o, f->group);
    return cJSON_GetObjectItemCaseSensitive(o, f->key);
}

/* Equal as cJSON prints a double: to within an ulp or so (7.000000000000001 prints "7"). */
static int same(double a, double b) { return fabs(a - b) <= 1e-12 * fmax(fabs(a), fabs(b)); }

static void expect_table(const cJSON *o, const cJSON *se, const kr_figure *t, int n,
                         const void *base) {
    for (int i = 0; i < n; i++) {
        const kr_figure *f = &t[i];
        const cJSON *v = item(o, f);
        if (!v) fail_msg("%s: no key %s", o->string, f->key);
        if (f->unit == KR_FIG_BOOL)
            assert_true(cJSON_IsTrue(v));
        else if (!cJSON_IsNumber(v) || !same(v->valuedouble, kr_figure_json(f, base)))
            fail_msg("%s: %g, not %g", f->key, v->valuedouble, kr_figure_json(f, base));
        if (!se) continue;
        const cJSON *e = item(se, f);
        if (f->se < 0) {
            if (e) fail_msg("standard_error.%s: a figure without an error has the key", f->key);
        } else {
            if (!cJSON_IsNumber(e)) fail_msg("standard_error.%s missing", f->key);
            if (!same(e->valuedouble, kr_figure_se_json(f, base)))
                fail_msg("standard_error.%s: %g", f->key, e->valuedouble);
        }
    }
}

static void test_json_walks_the_tables(void **state) {
    (void)state;
    kr_report r;
    fill(&r);
    cJSON *root = render_json(&r);
    const cJSON *rep = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "reports"), 0);
    const cJSON *stats = cJSON_GetObjectItem(rep, "statistics");
    expect_table(stats, cJSON_GetObjectItem(stats, "standard_error"), kr_report_stats,
                 KR_N_REPORT_STATS, &r);
    /* Units: a return in percent, the expected close from the mean return. */
    assert_true(same(cJSON_GetObjectItem(stats, "expected_return_pct")->valuedouble,
                     r.expected_return * 100.0));
    assert_true(same(cJSON_GetObjectItem(stats, "expected_close")->valuedouble,
                     100.0 * (1.0 + r.expected_return)));
    const cJSON *tech = cJSON_GetObjectItem(rep, "technical");
    expect_table(tech, NULL, kr_tech_figures, KR_N_TECH_FIGURES, &r.tech);
    assert_string_equal(cJSON_GetObjectItem(tech, "rsi_state")->valuestring, "oversold");
    assert_non_null(cJSON_GetObjectItem(tech, "atr_14_pct"));
    cJSON_Delete(root);

    /* A figure that cannot be computed is null, its error too. */
    r.var95 = NAN;
    r.var95_se = NAN;
    root = render_json(&r);
    rep = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "reports"), 0);
    stats = cJSON_GetObjectItem(rep, "statistics");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(stats, "var95_pct")));
    assert_true(cJSON_IsNull(
        cJSON_GetObjectItem(cJSON_GetObjectItem(stats, "standard_error"), "var95_pct")));
    cJSON_Delete(root);
}

static void test_calibration_scores(void **state) {
    (void)state;
    kr_report r;
    fill(&r);
    double by_step[1] = { 0.5 };
    kr_calib_window w = { .history_end_ts = g_ts[0] - 86400 };
    kr_calibration c = { .windows = 1, .horizon = 1, .window = &w };
    c.model = (kr_calib_scores){ 0.8, by_step, 0.6, 0.02, 0.1, 0.2, 0.003 };
    c.naive = (kr_calib_scores){ 0.7, by_step, 0.5, 0.03, NAN, 0.25, 0.004 };
    r.calibration = &c;
    cJSON *root = render_json(&r);
    const cJSON *cal = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(root, "reports"), 0), "calibration");
    const cJSON *model = cJSON_GetObjectItem(cal, "model");
    expect_table(model, cJSON_GetObjectItem(model, "standard_error"), kr_calib_scores_figures,
                 KR_N_CALIB_SCORES, &c.model);
    /* The per-step coverage sits right after the overall one. */
    assert_string_equal(model->child->next->string, "coverage_by_step");
    const cJSON *naive = cJSON_GetObjectItem(cal, "naive");
    assert_true(cJSON_IsNull(
        cJSON_GetObjectItem(cJSON_GetObjectItem(naive, "standard_error"), "coverage_p10_p90")));
    cJSON_Delete(root);

    char *md = render(&r, 0);
    for (int i = 0; i < KR_N_CALIB_SCORES; i++) {
        char label[128], value[256], line[512];
        kr_figure_row_text(&kr_calib_rows[i], 0, &r, &c.model, kr_calib_scores_figures, label,
                           value);
        snprintf(line, sizeof line, "| %s | %s | ", label, value);
        if (!strstr(md, line)) fail_msg("Markdown lacks \"%s\"", line);
    }
    free(md);
    /* An error under half a point ("\u00b1 <1 pp") is escaped in the page, as the horizon
     * table's are: the calibration table once wrote a raw '<' into the HTML. */
    c.model.coverage_se = 0.001;
    char *html = render(&r, 1);
    assert_non_null(strstr(html, "\xc2\xb1 &lt;1 pp"));
    const char *raw = strstr(html, "\xc2\xb1 <");
    if (raw) fail_msg("a raw '<' in the page: \"%.80s\"", raw - 40);
    free(html);
}

/* Every row shows figures of its table (or has its own text) and prints, in both formats,
 * with its placeholders filled. */
static void test_rows_print(void **state) {
    (void)state;
    struct {
        const kr_figure_row *rows;
        int n, n_fig;
        const kr_figure *table;
    } sets[] = { { kr_horizon_rows, KR_N_HORIZON_ROWS, KR_N_REPORT_STATS, kr_report_stats },
                 { kr_tech_rows, KR_N_TECH_ROWS, KR_N_TECH_FIGURES, kr_tech_figures },
                 { kr_calib_rows, KR_N_CALIB_SCORES, KR_N_CALIB_SCORES, kr_calib_scores_figures } };
    kr_report r;
    fill(&r);
    r.tech.rv_window = 20;
    char *md = render(&r, 0), *html = render(&r, 1);
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        for (int i = 0; i < sets[s].n; i++) {
            const kr_figure_row *row = &sets[s].rows[i];
            assert_true(row->md_label[0] && row->html_label[0]);
            if (!row->text) {
                assert_true(row->n >= 1 && row->n <= 3);
                for (int k = 0; k < row->n; k++)
                    assert_true(row->fig[k] >= 0 && row->fig[k] < sets[s].n_fig);
            }
            if (s == 2) continue; /* the calibration's rows: test_calibration_scores */
            const void *base = s == 0 ? (const void *)&r : (const void *)&r.tech;
            char label[128], value[256], line[512];
            kr_figure_row_text(row, 0, &r, base, sets[s].table, label, value);
            assert_null(strchr(label, '{'));
            snprintf(line, sizeof line, "| %s | %s |\n", label, value);
            if (!strstr(md, line)) fail_msg("Markdown lacks \"%s\"", line);
            kr_figure_row_text(row, 1, &r, base, sets[s].table, label, value);
            assert_null(strchr(label, '{'));
        }
    }
    assert_non_null(strstr(md, "| Expected return (mean of 64 paths) | "));
    assert_non_null(strstr(md, "| Realised volatility (20 bars): per bar / annualised | "));
    assert_non_null(strstr(html, "<tr><td>P(forecast volatility &gt; realised)</td><td>"));
    assert_non_null(strstr(html, "<tr><td>Realised vol (20 bars)</td><td>"));
    free(md);
    free(html);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_walks_the_tables),
        cmocka_unit_test(test_calibration_scores),
        cmocka_unit_test(test_rows_print),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
