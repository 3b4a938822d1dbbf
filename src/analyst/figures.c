/*
 * analyst/figures — the report's figure tables and how a figure reads and prints (header
 * comment).
 */
#include "analyst/figures.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analyst/text.h"

#define FIGURE_(type, id, key, group, unit, field, se) \
    { key, group, unit, offsetof(type, field), se },
#define REPORT_FIGURE_(...) FIGURE_(kr_report, __VA_ARGS__)
#define REPORT_SE_(field) ((ptrdiff_t)offsetof(kr_report, field))
#define CALIB_FIGURE_(...) FIGURE_(kr_calib_scores, __VA_ARGS__)
#define CALIB_SE_(field) ((ptrdiff_t)offsetof(kr_calib_scores, field))

const kr_figure kr_report_stats[KR_N_REPORT_STATS] = { KR_REPORT_STATS(REPORT_FIGURE_, REPORT_SE_,
                                                                       -1) };

const kr_figure kr_calib_scores_figures[KR_N_CALIB_SCORES] = { KR_CALIB_SCORES(CALIB_FIGURE_,
                                                                               CALIB_SE_, -1) };

/* Labels as each format has always printed them; the HTML table is narrower, so some of its
 * labels are shorter. */
const kr_figure_row kr_horizon_rows[KR_N_HORIZON_ROWS] = {
    { "Probability of closing above {close}",
      "Probability of closing above {close}",
      1,
      { KR_STAT_PROB_UP } },
    { "Expected return (mean of {paths} paths)",
      "Expected return (mean over paths)",
      1,
      { KR_STAT_EXPECTED_RETURN } },
    { "Standard deviation of return", "Standard deviation of return", 1, { KR_STAT_RETURN_STD } },
    { "Return p10 / p50 / p90",
      "Return p10 / p50 / p90",
      3,
      { KR_STAT_RETURN_P10, KR_STAT_RETURN_P50, KR_STAT_RETURN_P90 } },
    { "Value at risk 95% (loss)", "Value at risk 95% (loss)", 1, { KR_STAT_VAR95 } },
    { "Expected shortfall 95% (loss)", "Expected shortfall 95% (loss)", 1, { KR_STAT_ES95 } },
    { "Max drawdown mean / p50 / p90",
      "Max drawdown mean / p50 / p90",
      3,
      { KR_STAT_DRAWDOWN_MEAN, KR_STAT_DRAWDOWN_P50, KR_STAT_DRAWDOWN_P90 } },
    { "Volatility per bar: forecast / realised (last {horizon} bars)",
      "Volatility per bar: forecast / realised (last {horizon})",
      2,
      { KR_STAT_FORECAST_VOL, KR_STAT_REALIZED_VOL } },
    { "Probability forecast volatility > realised",
      "P(forecast volatility > realised)",
      1,
      { KR_STAT_PROB_VOL_ABOVE } },
};

const kr_figure_row kr_calib_rows[KR_N_CALIB_SCORES] = {
    { "p10-p90 coverage of realised closes (target 80%)",
      "p10-p90 coverage (target 80%)",
      1,
      { KR_CALIB_COVERAGE } },
    { "Direction hit rate at the horizon", "Direction hit rate", 1, { KR_CALIB_HIT_RATE } },
    { "MAPE of the point forecast", "MAPE of the point forecast", 1, { KR_CALIB_MAPE } },
};

static double at(const void *base, size_t off) {
    double v;
    memcpy(&v, (const char *)base + off, sizeof v);
    return v;
}

static double value(const kr_figure *f, const void *base) {
    if (f->unit == KR_FIG_COUNT) {
        int n;
        memcpy(&n, (const char *)base + f->value, sizeof n);
        return n;
    }
    return at(base, f->value);
}

static double se(const kr_figure *f, const void *base) {
    return f->se < 0 ? NAN : at(base, (size_t)f->se);
}

double kr_figure_json(const kr_figure *f, const void *base) {
    const double v = value(f, base);
    switch (f->unit) {
    case KR_FIG_RETURN:
    case KR_FIG_PCT: return v * 100.0;
    case KR_FIG_CLOSE: return ((const kr_report *)base)->last_close * (1.0 + v);
    default: return v;
    }
}

double kr_figure_se_json(const kr_figure *f, const void *base) {
    const double e = se(f, base);
    switch (f->unit) {
    case KR_FIG_RETURN:
    case KR_FIG_PCT: return e * 100.0;
    case KR_FIG_CLOSE: return ((const kr_report *)base)->last_close * e;
    default: return e;
    }
}

char *kr_figure_text(const kr_figure *f, const void *base, char *buf) {
    const double v = value(f, base), e = se(f, base);
    switch (f->unit) {
    case KR_FIG_PROB: return kr_fmt_pm_prob(v, e, buf);
    case KR_FIG_RETURN: return kr_fmt_pm_pct(v, e, 2, 1, buf);
    case KR_FIG_PCT: return f->se < 0 ? kr_fmt_pct(v, 2, buf) : kr_fmt_pm_pct(v, e, 2, 0, buf);
    case KR_FIG_CLOSE:
        return kr_fmt_pm_price(((const kr_report *)base)->last_close * (1.0 + v),
                               ((const kr_report *)base)->last_close * e, buf);
    case KR_FIG_COUNT: snprintf(buf, 64, "%d", (int)v); return buf;
    }
    return buf;
}

/* tmpl with {close}, {paths} and {horizon} replaced by r's, into out (cap bytes). */
static void fill_label(const char *tmpl, const kr_report *r, char *out, size_t cap) {
    size_t n = 0;
    out[0] = 0;
    for (const char *p = tmpl; *p && n + 1 < cap;) {
        char b[32];
        const char *put = NULL;
        size_t skip = 0;
        if (!strncmp(p, "{close}", 7)) {
            put = kr_fmt_price(r->last_close, b), skip = 7;
        } else if (!strncmp(p, "{paths}", 7)) {
            snprintf(b, sizeof b, "%d", r->paths), put = b, skip = 7;
        } else if (!strncmp(p, "{horizon}", 9)) {
            snprintf(b, sizeof b, "%d", r->horizon), put = b, skip = 9;
        }
        if (put) {
            n += (size_t)snprintf(out + n, cap - n, "%s", put);
            if (n >= cap) n = cap - 1;
            p += skip;
        } else {
            out[n++] = *p++;
            out[n] = 0;
        }
    }
}

void kr_figure_row_text(const kr_figure_row *row, int html, const kr_report *r, const void *base,
                        const kr_figure *table, char *label, char *value_out) {
    fill_label(html ? row->html_label : row->md_label, r, label, 128);
    size_t n = 0;
    value_out[0] = 0;
    for (int i = 0; i < row->n; i++) {
        char b[64];
        n += (size_t)snprintf(value_out + n, 256 - n, "%s%s", i ? " / " : "",
                              kr_figure_text(&table[row->fig[i]], base, b));
        if (n >= 256) break;
    }
}
