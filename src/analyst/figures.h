/*
 * analyst/figures — the report's figures described once, so the JSON, Markdown and HTML
 * writers walk one list instead of naming each figure three times: the horizon statistics of
 * a report, the calibration scores and the technical snapshot, each with its JSON key (and
 * the nested object it sits in), its unit, where it lies in the struct and where its Monte
 * Carlo standard error lies; and the rows of the Markdown and HTML tables that show them,
 * with their labels in each format. A figure added here appears in every format;
 * docs/report.md says what each means.
 */
#ifndef KR_ANALYST_FIGURES_H
#define KR_ANALYST_FIGURES_H

#include <stddef.h>

#include "analyst/report.h"
#include "base/strbuf.h"

/* A figure's unit: how it is stored, written to JSON and printed. */
typedef enum kr_figure_unit {
    KR_FIG_PROB, /* a probability or rate: JSON a fraction; text "63% ± 7 pp" */
    KR_FIG_RETURN, /* a signed fraction: JSON a percentage (key _pct); text "+1.23% ± 0.45%" */
    KR_FIG_PCT, /* a fraction that is a size (a loss, a spread): as RETURN, text unsigned */
    KR_FIG_CLOSE, /* a mean return as the close it implies: last close × (1 + figure) (JSON
                     only, in the report's table only: it reads kr_report.last_close) */
    KR_FIG_COUNT, /* an int, no error */
    KR_FIG_BOOL, /* an int read as true / false: JSON a boolean */
    KR_FIG_NUM, /* a plain number: text with `dec` decimals */
    KR_FIG_PRICE, /* a price: text as kr_fmt_price */
    KR_FIG_SIG, /* a number of any scale: text with `dec` significant digits */
} kr_figure_unit;

typedef struct kr_figure {
    const char *key; /* the JSON key, the same in the standard_error object */
    const char *group; /* the nested JSON object it sits in ("max_drawdown_pct"), or NULL */
    kr_figure_unit unit;
    size_t value; /* offset of the figure in its struct: an int for COUNT and BOOL, else a double */
    ptrdiff_t se; /* offset of its standard error (a double), or -1: it has none */
    int dec; /* decimals (significant digits for KR_FIG_SIG) of a figure printed without
                error */
} kr_figure;

/* The horizon statistics of a kr_report, in the order of the JSON "statistics" object.
 * X(id, key, group, unit, field, SE(its standard error's field) or NO_SE) */
#define KR_REPORT_STATS(X, SE, NO_SE)                                                             \
    X(PROB_UP, "prob_up", NULL, KR_FIG_PROB, prob_up, SE(prob_up_se))                             \
    X(PROB_DOWN, "prob_down", NULL, KR_FIG_PROB, prob_down, SE(prob_down_se))                     \
    X(EXPECTED_CLOSE, "expected_close", NULL, KR_FIG_CLOSE, expected_return,                      \
      SE(expected_return_se))                                                                     \
    X(EXPECTED_RETURN, "expected_return_pct", NULL, KR_FIG_RETURN, expected_return,               \
      SE(expected_return_se))                                                                     \
    X(RETURN_STD, "return_std_pct", NULL, KR_FIG_PCT, return_std, SE(return_std_se))              \
    X(RETURN_P10, "return_p10_pct", NULL, KR_FIG_RETURN, return_p10, SE(return_p10_se))           \
    X(RETURN_P50, "return_p50_pct", NULL, KR_FIG_RETURN, return_p50, SE(return_p50_se))           \
    X(RETURN_P90, "return_p90_pct", NULL, KR_FIG_RETURN, return_p90, SE(return_p90_se))           \
    X(VAR95, "var95_pct", NULL, KR_FIG_PCT, var95, SE(var95_se))                                  \
    X(ES95, "es95_pct", NULL, KR_FIG_PCT, es95, SE(es95_se))                                      \
    X(DRAWDOWN_MEAN, "mean", "max_drawdown_pct", KR_FIG_PCT, drawdown_mean, SE(drawdown_mean_se)) \
    X(DRAWDOWN_P50, "p50", "max_drawdown_pct", KR_FIG_PCT, drawdown_p50, SE(drawdown_p50_se))     \
    X(DRAWDOWN_P90, "p90", "max_drawdown_pct", KR_FIG_PCT, drawdown_p90, SE(drawdown_p90_se))     \
    X(FORECAST_VOL, "forecast_volatility_pct", NULL, KR_FIG_PCT, forecast_vol,                    \
      SE(forecast_vol_se))                                                                        \
    X(VOL_PATHS, "volatility_paths", NULL, KR_FIG_COUNT, vol_paths, NO_SE)                        \
    X(REALIZED_VOL, "realized_volatility_pct", NULL, KR_FIG_PCT, realized_vol_h, NO_SE)           \
    X(PROB_VOL_ABOVE, "prob_volatility_above_realized", NULL, KR_FIG_PROB, prob_vol_above,        \
      SE(prob_vol_above_se))

#define KR_FIG_ENUM_(id, ...) KR_STAT_##id,
typedef enum kr_report_stat_id {
    KR_REPORT_STATS(KR_FIG_ENUM_, , ) KR_N_REPORT_STATS
} kr_report_stat_id;

/* The calibration scores of a kr_calib_scores (model and naive alike), in JSON order. */
#define KR_CALIB_SCORES(X, SE, NO_SE)                                             \
    X(COVERAGE, "coverage_p10_p90", NULL, KR_FIG_PROB, coverage, SE(coverage_se)) \
    X(HIT_RATE, "direction_hit_rate", NULL, KR_FIG_PROB, direction_hit_rate,      \
      SE(direction_hit_rate_se))                                                  \
    X(MAPE, "mape_pct", NULL, KR_FIG_PCT, mape, SE(mape_se))

#define KR_CALIB_ENUM_(id, ...) KR_CALIB_##id,
typedef enum kr_calib_score_id {
    KR_CALIB_SCORES(KR_CALIB_ENUM_, , ) KR_N_CALIB_SCORES
} kr_calib_score_id;

/* The technical snapshot of the last bar (a kr_tech_snapshot), in JSON order; rsi_state and
 * atr_14_pct, figures of two fields, the JSON writer adds itself after RSI_14 and ATR_14.
 * X(id, key, group, unit, decimals, field) */
#define KR_TECH_FIGURES(X)                                                                  \
    X(CLOSE, "close", NULL, KR_FIG_PRICE, 2, close)                                         \
    X(SMA5, "sma_5", NULL, KR_FIG_PRICE, 2, sma5)                                           \
    X(SMA20, "sma_20", NULL, KR_FIG_PRICE, 2, sma20)                                        \
    X(SMA60, "sma_60", NULL, KR_FIG_PRICE, 2, sma60)                                        \
    X(EMA5, "ema_5", NULL, KR_FIG_PRICE, 2, ema5)                                           \
    X(EMA20, "ema_20", NULL, KR_FIG_PRICE, 2, ema20)                                        \
    X(EMA60, "ema_60", NULL, KR_FIG_PRICE, 2, ema60)                                        \
    X(RSI14, "rsi_14", NULL, KR_FIG_NUM, 1, rsi14)                                          \
    X(MACD_LINE, "line", "macd", KR_FIG_SIG, 3, macd_line)                                  \
    X(MACD_SIGNAL, "signal", "macd", KR_FIG_SIG, 3, macd_signal)                            \
    X(MACD_HIST, "histogram", "macd", KR_FIG_SIG, 3, macd_hist)                             \
    X(BB_MIDDLE, "middle", "bollinger", KR_FIG_PRICE, 2, bb_middle)                         \
    X(BB_UPPER, "upper", "bollinger", KR_FIG_PRICE, 2, bb_upper)                            \
    X(BB_LOWER, "lower", "bollinger", KR_FIG_PRICE, 2, bb_lower)                            \
    X(BB_PERCENT_B, "percent_b", "bollinger", KR_FIG_NUM, 2, bb_percent_b)                  \
    X(BB_BANDWIDTH, "bandwidth_pct", "bollinger", KR_FIG_PCT, 2, bb_bandwidth)              \
    X(ATR14, "atr_14", NULL, KR_FIG_PRICE, 2, atr14)                                        \
    X(HAS_VOLUME, "available", "volume", KR_FIG_BOOL, 0, has_volume)                        \
    X(VOLUME_AVG5, "avg_5", "volume", KR_FIG_NUM, 2, volume_avg5)                           \
    X(VOLUME_AVG20, "avg_20", "volume", KR_FIG_NUM, 2, volume_avg20)                        \
    X(VOLUME_RATIO, "ratio_5_20", "volume", KR_FIG_NUM, 2, volume_ratio)                    \
    X(VOLUME_SLOPE, "slope_sign", "volume", KR_FIG_COUNT, 0, volume_slope_sign)             \
    X(RV_WINDOW, "window_bars", "realized_volatility", KR_FIG_COUNT, 0, rv_window)          \
    X(RV_PER_BAR, "per_bar_pct", "realized_volatility", KR_FIG_PCT, 2, rv_per_bar)          \
    X(RV_ANNUALIZED, "annualized_pct", "realized_volatility", KR_FIG_PCT, 1, rv_annualized) \
    X(BARS_PER_YEAR, "bars_per_year", "realized_volatility", KR_FIG_NUM, 2, bars_per_year)  \
    X(BARS_PER_DAY, "bars_per_day", "realized_volatility", KR_FIG_NUM, 2, bars_per_day)

#define KR_TECH_ENUM_(id, ...) KR_TECH_##id,
typedef enum kr_tech_figure_id {
    KR_TECH_FIGURES(KR_TECH_ENUM_) KR_N_TECH_FIGURES
} kr_tech_figure_id;
#undef KR_TECH_ENUM_
#undef KR_FIG_ENUM_
#undef KR_CALIB_ENUM_

extern const kr_figure kr_report_stats[KR_N_REPORT_STATS]; /* base: a kr_report */
extern const kr_figure kr_calib_scores_figures[KR_N_CALIB_SCORES]; /* base: a kr_calib_scores */
extern const kr_figure kr_tech_figures[KR_N_TECH_FIGURES]; /* base: a kr_tech_snapshot */

/* The figure and its standard error as JSON writes them (NaN: null); the error is NaN for a
 * figure without one. base is the struct the figure's table describes. */
double kr_figure_json(const kr_figure *f, const void *base);
double kr_figure_se_json(const kr_figure *f, const void *base);
/* The figure with its error as Markdown and HTML print it, into buf (>= 64 bytes). */
char *kr_figure_text(const kr_figure *f, const void *base, char *buf);

/* A row of a figure table in Markdown and HTML: its label in each (with {close}, {paths},
 * {horizon} or {rv_window} standing for the report's last close, path count, horizon or
 * realised-volatility window) and the figures it shows, " / " between them; or, for a row
 * whose text is more than figures side by side, the function that writes it (value >= 256
 * bytes, label >= 128 when it changes the label). */
typedef struct kr_figure_row {
    const char *md_label, *html_label;
    int n;
    int fig[3];
    void (*text)(const kr_report *r, int html, char *label, char *value);
} kr_figure_row;

/* The rows of the "At the horizon" table (figures of kr_report_stats). */
#define KR_N_HORIZON_ROWS 9
extern const kr_figure_row kr_horizon_rows[KR_N_HORIZON_ROWS];
/* The rows of the technical snapshot's table (figures of kr_tech_figures, base r->tech). */
#define KR_N_TECH_ROWS 9
extern const kr_figure_row kr_tech_rows[KR_N_TECH_ROWS];
/* The rows of the calibration table (one figure of kr_calib_scores_figures each). */
extern const kr_figure_row kr_calib_rows[KR_N_CALIB_SCORES];

/* A row's label for Markdown (html 0) or HTML (html 1), its placeholders filled from r, and its
 * figures' texts (from base), into label (>= 128 bytes) and value (>= 256 bytes). */
void kr_figure_row_text(const kr_figure_row *row, int html, const kr_report *r, const void *base,
                        const kr_figure *table, char *label, char *value);

/* Appends rows[n] as rows of a table, one value column per base (bases[n_bases], each a
 * struct `table` describes: the model's and the naive scores side by side): Markdown
 * "| label | value |\n", or HTML "<tr><td>label</td><td>value</td></tr>\n", its text escaped
 * when escape is set. */
void kr_figure_rows_append(kr_sb *sb, int html, int escape, const kr_figure_row *rows, int n,
                           const kr_report *r, const kr_figure *table, const void *const *bases,
                           int n_bases);

#endif
