/*
 * eval/backtest_render — what every format of the backtest report shares: the names of the
 * forecasters and scores, timestamps, the verdict sentences ("beats naive" only where the
 * Diebold-Mariano test says so at the stated level) and the format dispatch.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "eval/backtest_internal.h"
#include "eval/backtest_render.h"

static const char *const k_fkeys[KR_BT_N_F] = { "model",          "compare", "naive",
                                                "seasonal_naive", "drift",   "random_walk" };
static const char *const k_flabels[KR_BT_N_F] = { "model", "second model",
                                                  "naive", "seasonal naive",
                                                  "drift", "random walk (bootstrap)" };
static const char *const k_mkeys[KR_BT_N_METRICS] = {
    "crps",          "wql",       "coverage_80", "coverage_90", "mae_median",         "mae_mean",
    "mape_median",   "mape_mean", "mase_median", "mase_mean",   "direction_hit_rate", "brier",
    "volatility_mae"
};
static const char *const k_mlabels[KR_BT_N_METRICS] = {
    "CRPS",          "WQL",         "coverage 10-90 %",   "coverage 5-95 %",
    "MAE (median)",  "MAE (mean)",  "MAPE (median)",      "MAPE (mean)",
    "MASE (median)", "MASE (mean)", "direction hit rate", "Brier (P(up))",
    "volatility MAE"
};

const char *kr_bt_forecaster_key(int f) { return f >= 0 && f < KR_BT_N_F ? k_fkeys[f] : "?"; }

const char *kr_bt_forecaster_label(const kr_backtest_report *r, int f) {
    if (f == KR_BT_F_MODEL && r->model_name[0]) return r->model_name;
    if (f == KR_BT_F_COMPARE && r->compare_name[0]) return r->compare_name;
    return f >= 0 && f < KR_BT_N_F ? k_flabels[f] : "?";
}

const char *kr_bt_metric_key(int m) { return m >= 0 && m < KR_BT_N_METRICS ? k_mkeys[m] : "?"; }
const char *kr_bt_metric_label(int m) { return m >= 0 && m < KR_BT_N_METRICS ? k_mlabels[m] : "?"; }

int kr_bt_metric_is_loss(int m) {
    return m != KR_BT_COV80 && m != KR_BT_COV90 && m != KR_BT_DIRECTION;
}

int kr_bt_forecaster_probabilistic(int f) {
    return f == KR_BT_F_MODEL || f == KR_BT_F_COMPARE || f == KR_BT_F_RW;
}

void kr_bt_fmt_ts(int64_t ts, char *buf, int cap) {
    kr_format_timestamp(ts, ts % 86400 == 0, buf, cap);
}

const char *kr_bt_verdict_word(int verdict) {
    return verdict < 0 ? "better" : verdict > 0 ? "worse" : "not significant";
}

void kr_bt_verdict_sentence(const kr_backtest_report *r, const kr_bt_dm_row *row, char *buf,
                            size_t cap) {
    const char *f = kr_bt_forecaster_label(r, row->f), *b = kr_bt_forecaster_label(r, row->b);
    const char *m = kr_bt_metric_label(row->metric);
    if (!isfinite(row->p_value)) {
        snprintf(buf, cap, "%s vs %s on %s: no test (%d origins%s)", f, b, m, row->n,
                 row->n < 3 ? ", at least 3 needed" : ", identical losses");
        return;
    }
    if (row->verdict < 0)
        snprintf(buf, cap, "%s beats %s on %s (Diebold-Mariano p = %.3g < %.2g, %d origins)", f, b,
                 m, row->p_value, r->p.alpha, row->n);
    else if (row->verdict > 0)
        snprintf(buf, cap, "%s loses to %s on %s (Diebold-Mariano p = %.3g < %.2g, %d origins)", f,
                 b, m, row->p_value, r->p.alpha, row->n);
    else
        snprintf(buf, cap,
                 "%s vs %s on %s: not significant (Diebold-Mariano p = %.3g >= %.2g, %d origins)",
                 f, b, m, row->p_value, r->p.alpha, row->n);
}

const char *kr_bt_ashare_note(const kr_backtest_report *r) {
    int n = 0;
    for (int s = 0; s < r->n_symbols; s++) n += !r->symbols[s].failed && r->symbols[s].ashare;
    if (n == 0) return "";
    return n == 1 ? "; A-share rules (T+1, limit days) for its A-share symbol"
                  : "; A-share rules (T+1, limit days) for its A-share symbols";
}

int kr_bt_demo_notice(const kr_backtest_report *r, char *buf, size_t cap) {
    buf[0] = 0;
    if (!r->demo && !r->compare_demo) return 0;
    snprintf(buf, cap,
             "DEMO MODEL \xe2\x80\x94 not a forecast: %s declares itself a demo or test checkpoint "
             "(%s); these scores measure the software, not a forecasting model.",
             r->demo ? r->model_name : r->compare_name, r->source[0] ? r->source : "no source");
    return 1;
}

int kr_backtest_format_parse(const char *s, kr_backtest_format *out) {
    if (!s || !out) return -1;
    if (!strcmp(s, "json"))
        *out = KR_BACKTEST_JSON;
    else if (!strcmp(s, "md") || !strcmp(s, "markdown"))
        *out = KR_BACKTEST_MD;
    else if (!strcmp(s, "html"))
        *out = KR_BACKTEST_HTML;
    else if (!strcmp(s, "csv"))
        *out = KR_BACKTEST_CSV;
    else
        return -1;
    return 0;
}

kr_status kr_backtest_render(const kr_backtest_report *r, kr_backtest_format fmt, char **out,
                             kr_error *err) {
    if (!r || !out) return kr_error_set(err, KR_ERR_INVALID_ARG, "backtest render: NULL argument");
    *out = NULL;
    switch (fmt) {
    case KR_BACKTEST_JSON: return kr_bt_render_json(r, out, err);
    case KR_BACKTEST_MD: return kr_bt_render_md(r, out, err);
    case KR_BACKTEST_HTML: return kr_bt_render_html(r, out, err);
    case KR_BACKTEST_CSV: return kr_bt_render_csv(r, out, err);
    }
    return kr_error_set(err, KR_ERR_INVALID_ARG, "backtest render: unknown format %d", (int)fmt);
}
