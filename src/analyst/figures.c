/*
 * analyst/figures — the report's figure tables and how a figure reads and prints (header
 * comment).
 */
#include "analyst/figures.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analyst/text.h"

/* Each figure's field must be what its unit reads: an int for a count or a flag, else a
 * double. */
#define FIGURE_SIZE_OK_(type, unit, field) \
    (sizeof(((type *)0)->field) ==         \
     ((unit) == KR_FIG_COUNT || (unit) == KR_FIG_BOOL ? sizeof(int) : sizeof(double)))
#define FIGURE_(type, id, key, group, unit, field, se)                                             \
    { key,  group,                                                                                 \
      unit, offsetof(type, field) + 0 * sizeof(char[FIGURE_SIZE_OK_(type, unit, field) ? 1 : -1]), \
      se,   2 },
#define TECH_FIGURE_(id, key, group, unit, dec, field)                               \
    { key,                                                                           \
      group,                                                                         \
      unit,                                                                          \
      offsetof(kr_tech_snapshot, field) +                                            \
          0 * sizeof(char[FIGURE_SIZE_OK_(kr_tech_snapshot, unit, field) ? 1 : -1]), \
      -1,                                                                            \
      dec },
#define REPORT_FIGURE_(...) FIGURE_(kr_report, __VA_ARGS__)
#define REPORT_SE_(field) ((ptrdiff_t)offsetof(kr_report, field))
#define CALIB_FIGURE_(...) FIGURE_(kr_calib_scores, __VA_ARGS__)
#define CALIB_SE_(field) ((ptrdiff_t)offsetof(kr_calib_scores, field))

const kr_figure kr_report_stats[KR_N_REPORT_STATS] = { KR_REPORT_STATS(REPORT_FIGURE_, REPORT_SE_,
                                                                       -1) };

const kr_figure kr_calib_scores_figures[KR_N_CALIB_SCORES] = { KR_CALIB_SCORES(CALIB_FIGURE_,
                                                                               CALIB_SE_, -1) };

const kr_figure kr_tech_figures[KR_N_TECH_FIGURES] = { KR_TECH_FIGURES(TECH_FIGURE_) };

#define ROW_(md, html, count, ...)                                             \
    {                                                                          \
        .md_label = md, .html_label = html, .n = count, .fig = { __VA_ARGS__ } \
    }
#define TEXT_ROW_(md, html, fn) \
    { .md_label = md, .html_label = html, .text = fn }

/* Labels as each format has always printed them; the HTML table is narrower, so some of its
 * labels are shorter. */
const kr_figure_row kr_horizon_rows[KR_N_HORIZON_ROWS] = {
    ROW_("Probability of closing above {close}", "Probability of closing above {close}", 1,
         KR_STAT_PROB_UP),
    ROW_("Expected return (mean of {paths} paths)", "Expected return (mean over paths)", 1,
         KR_STAT_EXPECTED_RETURN),
    ROW_("Standard deviation of return", "Standard deviation of return", 1, KR_STAT_RETURN_STD),
    ROW_("Return p10 / p50 / p90", "Return p10 / p50 / p90", 3, KR_STAT_RETURN_P10,
         KR_STAT_RETURN_P50, KR_STAT_RETURN_P90),
    ROW_("Value at risk 95% (loss)", "Value at risk 95% (loss)", 1, KR_STAT_VAR95),
    ROW_("Expected shortfall 95% (loss)", "Expected shortfall 95% (loss)", 1, KR_STAT_ES95),
    ROW_("Max drawdown mean / p50 / p90", "Max drawdown mean / p50 / p90", 3, KR_STAT_DRAWDOWN_MEAN,
         KR_STAT_DRAWDOWN_P50, KR_STAT_DRAWDOWN_P90),
    ROW_("Volatility per bar: forecast / realised (last {horizon} bars)",
         "Volatility per bar: forecast / realised (last {horizon})", 2, KR_STAT_FORECAST_VOL,
         KR_STAT_REALIZED_VOL),
    ROW_("Probability forecast volatility > realised", "P(forecast volatility > realised)", 1,
         KR_STAT_PROB_VOL_ABOVE),
};

const kr_figure_row kr_calib_rows[KR_N_CALIB_SCORES] = {
    ROW_("p10-p90 coverage of realised closes (target 80%)", "p10-p90 coverage (target 80%)", 1,
         KR_CALIB_COVERAGE),
    ROW_("Direction hit rate at the horizon", "Direction hit rate", 1, KR_CALIB_HIT_RATE),
    ROW_("MAPE of the point forecast", "MAPE of the point forecast", 1, KR_CALIB_MAPE),
};

/* RSI with its reading: "64.2 (neutral)". */
static void rsi_text(const kr_report *r, int html, char *label, char *value) {
    char a[32];
    snprintf(value, 256, "%s (%s)", kr_fmt_num(r->tech.rsi14, 1, a), kr_rsi_state(r->tech.rsi14));
}

/* ATR in price units and as a share of the close. */
static void atr_text(const kr_report *r, int html, char *label, char *value) {
    const kr_tech_snapshot *t = &r->tech;
    char a[32], b[32];
    snprintf(value, 256, html ? "%s (%s)" : "%s (%s of close)", kr_fmt_price(t->atr14, a),
             kr_fmt_pct(t->atr14 / t->close, 2, b));
}

/* The volume's averages, their ratio and its trend; or that the data has none. Markdown has
 * the room for the averages, HTML shows the ratio and the trend. */
static void volume_text(const kr_report *r, int html, char *label, char *value) {
    const kr_tech_snapshot *t = &r->tech;
    char a[32], b[32], c[32];
    if (!t->has_volume) {
        snprintf(label, 128, "Volume");
        snprintf(value, 256, "not in the data");
    } else if (html) {
        snprintf(label, 128, "Volume 5/20-bar average ratio");
        snprintf(value, 256, "%s (%s)", kr_fmt_num(t->volume_ratio, 2, a),
                 t->volume_slope_sign > 0   ? "20-bar slope up"
                 : t->volume_slope_sign < 0 ? "20-bar slope down"
                                            : "flat");
    } else {
        snprintf(label, 128, "Volume 5 / 20-bar average, ratio, 20-bar slope");
        snprintf(value, 256, "%s / %s, %s, %s", kr_fmt_compact(t->volume_avg5, a),
                 kr_fmt_compact(t->volume_avg20, b), kr_fmt_num(t->volume_ratio, 2, c),
                 t->volume_slope_sign > 0   ? "rising"
                 : t->volume_slope_sign < 0 ? "falling"
                                            : "flat");
    }
}

const kr_figure_row kr_tech_rows[KR_N_TECH_ROWS] = {
    ROW_("SMA 5 / 20 / 60", "SMA 5 / 20 / 60", 3, KR_TECH_SMA5, KR_TECH_SMA20, KR_TECH_SMA60),
    ROW_("EMA 5 / 20 / 60", "EMA 5 / 20 / 60", 3, KR_TECH_EMA5, KR_TECH_EMA20, KR_TECH_EMA60),
    TEXT_ROW_("RSI 14", "RSI 14", rsi_text),
    ROW_("MACD 12/26/9 line / signal / histogram", "MACD line / signal / histogram", 3,
         KR_TECH_MACD_LINE, KR_TECH_MACD_SIGNAL, KR_TECH_MACD_HIST),
    ROW_("Bollinger 20/2 lower / middle / upper", "Bollinger lower / middle / upper", 3,
         KR_TECH_BB_LOWER, KR_TECH_BB_MIDDLE, KR_TECH_BB_UPPER),
    ROW_("Bollinger %b / bandwidth", "Bollinger %b / bandwidth", 2, KR_TECH_BB_PERCENT_B,
         KR_TECH_BB_BANDWIDTH),
    TEXT_ROW_("ATR 14", "ATR 14 (of close)", atr_text),
    TEXT_ROW_("Volume", "Volume", volume_text),
    ROW_("Realised volatility ({rv_window} bars): per bar / annualised",
         "Realised vol ({rv_window} bars)", 2, KR_TECH_RV_PER_BAR, KR_TECH_RV_ANNUALIZED),
};

static double at(const void *base, size_t off) {
    double v;
    memcpy(&v, (const char *)base + off, sizeof v);
    return v;
}

static double value(const kr_figure *f, const void *base) {
    if (f->unit == KR_FIG_COUNT || f->unit == KR_FIG_BOOL) {
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
    case KR_FIG_PCT: return f->se < 0 ? kr_fmt_pct(v, f->dec, buf) : kr_fmt_pm_pct(v, e, 2, 0, buf);
    case KR_FIG_CLOSE:
        return kr_fmt_pm_price(((const kr_report *)base)->last_close * (1.0 + v),
                               ((const kr_report *)base)->last_close * e, buf);
    case KR_FIG_COUNT: snprintf(buf, 64, "%d", (int)v); return buf;
    case KR_FIG_BOOL: snprintf(buf, 64, "%s", v != 0 ? "yes" : "no"); return buf;
    case KR_FIG_NUM: return kr_fmt_num(v, f->dec, buf);
    case KR_FIG_PRICE: return kr_fmt_price(v, buf);
    case KR_FIG_SIG: return kr_fmt_sig(v, f->dec, buf);
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
        } else if (!strncmp(p, "{rv_window}", 11)) {
            snprintf(b, sizeof b, "%d", r->tech.rv_window), put = b, skip = 11;
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
    if (row->text) {
        row->text(r, html, label, value_out);
        return;
    }
    size_t n = 0;
    value_out[0] = 0;
    for (int i = 0; i < row->n; i++) {
        char b[64];
        n += (size_t)snprintf(value_out + n, 256 - n, "%s%s", i ? " / " : "",
                              kr_figure_text(&table[row->fig[i]], base, b));
        if (n >= 256) break;
    }
}

void kr_figure_rows_append(kr_sb *sb, int html, int escape, const kr_figure_row *rows, int n,
                           const kr_report *r, const kr_figure *table, const void *const *bases,
                           int n_bases) {
    void (*put)(kr_sb *, const char *) = escape ? kr_sb_append_html : kr_sb_append;
    for (int i = 0; i < n; i++) {
        kr_sb_append(sb, html ? "<tr><td>" : "| ");
        for (int b = 0; b < n_bases; b++) {
            char label[128], value[256];
            kr_figure_row_text(&rows[i], html, r, bases[b], table, label, value);
            if (b == 0) put(sb, label);
            kr_sb_append(sb, html ? "</td><td>" : " | ");
            put(sb, value);
        }
        kr_sb_append(sb, html ? "</td></tr>\n" : " |\n");
    }
}
