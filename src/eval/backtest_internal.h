/*
 * eval/backtest_internal — the backtest report's insides, shared by the modules that fill it
 * (plan, run, score, aggregate, cross-section, strategy) and those that render it (JSON,
 * Markdown, HTML, CSV). docs/backtest.md defines every figure.
 *
 * The unit of the bootstrap and of the cross-section is the ORIGIN: all forecasts made at
 * one origin timestamp (one per symbol that has a bar there). Scores are ratios of sums, each
 * cell of a forecast contributing a numerator and a denominator (an error and 1, a quantile
 * loss and |y|, ...), so a score over any set of cells — a step, a symbol, everything, a
 * bootstrap resample — is the same ratio over that set.
 */
#ifndef KR_EVAL_BACKTEST_INTERNAL_H
#define KR_EVAL_BACKTEST_INTERNAL_H

#include <stdint.h>

#include "kronos/backtest.h"

/* The forecasters: the model, an optional second model and the baselines. */
enum {
    KR_BT_F_MODEL = 0,
    KR_BT_F_COMPARE, /* a second model (kr_backtest_params.compare) */
    KR_BT_F_NAIVE, /* the last close, flat */
    KR_BT_F_SEASONAL, /* the close one season before each step */
    KR_BT_F_DRIFT, /* the last close moved by the lookback's mean log return per bar */
    KR_BT_F_RW, /* random walk: paths of the lookback's own 1-bar log returns, drawn iid */
    KR_BT_N_F
};

/* The scores of a forecast cell (one symbol, origin and step); each a ratio of sums. */
enum {
    KR_BT_CRPS = 0, /* CRPS of close / last close */
    KR_BT_WQL, /* weighted quantile loss at 0.1..0.9 */
    KR_BT_COV80, /* close inside [p10, p90] */
    KR_BT_COV90, /* close inside [p05, p95] */
    KR_BT_MAE_MEDIAN, /* |median - close| / last close */
    KR_BT_MAE_MEAN,
    KR_BT_MAPE_MEDIAN, /* |median - close| / close */
    KR_BT_MAPE_MEAN,
    KR_BT_MASE_MEDIAN, /* |median - close| / in-sample seasonal naive MAE */
    KR_BT_MASE_MEAN,
    KR_BT_DIRECTION, /* sign of the mean path's move = sign of the realised one */
    KR_BT_BRIER, /* (P(up) - 1[close > last close])^2 */
    KR_BT_VOL_AE, /* |forecast - realised volatility| over the horizon (horizon slot only) */
    KR_BT_N_METRICS
};

/* Histogram bins: PIT and the P(up) reliability diagram. */
#define KR_BT_PIT_BINS 10
#define KR_BT_REL_BINS 10
/* Per origin and forecaster: PIT counts [10], then reliability [10] counts, [10] sums of
 * P(up), [10] counts of "went up". */
#define KR_BT_N_BINS (KR_BT_PIT_BINS + 3 * KR_BT_REL_BINS)

/* The quantile levels of the weighted quantile loss. */
#define KR_BT_N_QUANTILES 9

/* A figure with its bootstrap interval (lo, hi NaN when there is none). */
typedef struct kr_bt_est {
    double value, lo, hi;
} kr_bt_est;

/* What a forecaster said at one (symbol, origin), for the cross-section, the strategy and the
 * per-origin CSV. Prices are closes; returns simple (x / last close - 1). */
typedef struct kr_bt_fsum {
    double mean_h, median_h, p10_h, p90_h; /* the close at the horizon */
    double exp_return, prob_up; /* at the horizon: mean path's return, P(close > last) */
    double exp_return_hold, prob_up_hold; /* at the strategy's hold step */
    double crps; /* mean CRPS over the steps */
    double vol; /* forecast volatility over the horizon (log returns), NaN for point ones */
} kr_bt_fsum;

/* One forecast: a symbol at an origin. */
typedef struct kr_bt_item {
    int sym, unit; /* indices into symbols[] and units[] */
    int64_t row; /* the origin bar's row in the symbol's candles */
    int64_t ts; /* its timestamp */
    int lookback; /* rows the model saw */
    double last_close;
    double mase_scale; /* in-sample seasonal naive MAE of the lookback (price units) */
    double real_h; /* realised close at the horizon */
    double real_return; /* real_h / last_close - 1 */
    double real_vol; /* realised volatility over the horizon: sqrt(Σ log-return²) */
    int stamp_mismatch; /* the calendar's future stamps differ from the realised bars' */
    kr_bt_fsum f[KR_BT_N_F];
} kr_bt_item;

typedef struct kr_bt_symbol {
    char symbol[72], interval[40], market[24], calendar[128];
    int64_t rows; /* candles given */
    int season; /* seasonal naive period in bars (0: none) */
    int ashare; /* A-share trading rules apply */
    double limit; /* A-share daily price limit (0.10 or 0.20) */
    int first_item, n_items; /* its items, oldest origin first */
    int lookback_min, lookback_max;
    int64_t stamp_mismatches; /* origins whose forecast stamps differ from the realised */
    int failed;
    char error[512];
} kr_bt_symbol;

/* A Diebold-Mariano comparison of `f` against baseline `b` on one loss. */
typedef struct kr_bt_dm_row {
    int f, b, metric, sym; /* sym -1: pooled (cross-sectional mean loss per origin) */
    int n, lags;
    double mean_diff, dm, hln, p_value;
    int verdict; /* -1: f significantly better, +1: significantly worse, 0: not significant */
} kr_bt_dm_row;

/* model / baseline score ratios: per symbol and their geometric mean. */
typedef struct kr_bt_rel_row {
    int f, b, metric;
    kr_bt_est geo_mean; /* across symbols */
    kr_bt_est *per_symbol; /* [n_symbols] */
} kr_bt_rel_row;

/* Cross-section of one origin. */
typedef struct kr_bt_ic_point {
    int64_t ts;
    int n; /* symbols */
    double ic, rank_ic; /* NaN below 3 symbols */
} kr_bt_ic_point;

typedef struct kr_bt_ic_summary {
    int n; /* origins with an IC */
    kr_bt_est mean; /* with a block bootstrap interval */
    double std, t_stat, t_stat_hac, icir; /* ICIR = mean / std */
} kr_bt_ic_summary;

typedef struct kr_bt_period {
    int64_t start_ts, end_ts;
    double ret, bench_ret; /* strategy (after costs), equal-weight rebalanced */
    double equity, bench_equity, drawdown; /* at end_ts; bench: equal-weight buy-and-hold */
    double turnover, cost;
    int held; /* symbols held (non-zero weight) */
    int blocked; /* trades the A-share rules refused */
} kr_bt_period;

typedef struct kr_bt_strategy {
    int ran;
    char reason[256]; /* why it did not run */
    int n_periods;
    kr_bt_period *periods;
    double periods_per_year;
    kr_bt_est ann_return, ann_vol, sharpe, hit_rate, excess_hit_rate;
    double max_drawdown, bench_max_drawdown, turnover, total_return, bench_total_return;
    double bench_ann_return, bench_sharpe;
    int64_t blocked_limit_up, blocked_limit_down, blocked_t1;
    int block_length;
} kr_bt_strategy;

struct kr_backtest_report {
    kr_backtest_params p; /* as run (pointers cleared) */
    int every, hold, block_length, lags; /* resolved */
    /* model metadata */
    char model_name[128], compare_name[128], predictor_dir[1024], tokenizer_dir[1024];
    char source[256], quant[16];
    int demo, compare_demo;
    int64_t n_params;
    int d_model, n_layers;
    char engine_version[32];
    int64_t generated_at;
    double seconds_forecast, seconds_compare, seconds_total;
    int static_batch_rows;
    int has[KR_BT_N_F]; /* forecaster present */

    int n_symbols;
    kr_bt_symbol *symbols;
    int n_items;
    kr_bt_item *items;
    int n_units;
    int64_t *unit_ts; /* [n_units] ascending */
    int *unit_n; /* [n_units] forecasts at each origin */

    /* Cell sums: per item and forecaster the totals over steps, per unit each step and the
     * total (slot horizon), per unit the bins. num then den. */
    double *item_num, *item_den; /* [n_items][F][M] */
    double *unit_num, *unit_den; /* [n_units][F][M][horizon + 1] */
    double *unit_bins; /* [n_units][F][KR_BT_N_BINS] */

    /* Aggregates. */
    kr_bt_est *pooled; /* [F][M][horizon + 1] */
    kr_bt_est *per_symbol; /* [n_symbols][F][M] */
    kr_bt_est *pit; /* [F][PIT_BINS] fractions */
    kr_bt_est *rel_freq; /* [F][REL_BINS] observed frequency of "up" */
    double *rel_pred; /* [F][REL_BINS] mean P(up) */
    int64_t *rel_count; /* [F][REL_BINS] cells */
    kr_bt_est vol_corr[KR_BT_N_F]; /* forecast vs realised volatility, over origins */

    int n_rel;
    kr_bt_rel_row *rel;
    int n_dm;
    kr_bt_dm_row *dm;

    kr_bt_ic_point *ic; /* [n_units]: the model's IC and RankIC at each origin */
    /* IC and RankIC summaries of every forecaster whose expected return varies across symbols
     * (the model, the second model, drift, random walk; n 0 for the others). */
    kr_bt_ic_summary ic_sum[KR_BT_N_F], rank_ic_sum[KR_BT_N_F];

    kr_bt_strategy strategy;
};

/* Index helpers. */
static inline int64_t kr_bt_item_idx(int item, int f, int m) {
    return ((int64_t)item * KR_BT_N_F + f) * KR_BT_N_METRICS + m;
}
static inline int64_t kr_bt_unit_idx(const kr_backtest_report *r, int unit, int f, int m, int k) {
    return (((int64_t)unit * KR_BT_N_F + f) * KR_BT_N_METRICS + m) * (r->p.horizon + 1) + k;
}
static inline int64_t kr_bt_pooled_idx(const kr_backtest_report *r, int f, int m, int k) {
    return ((int64_t)f * KR_BT_N_METRICS + m) * (r->p.horizon + 1) + k;
}

/* Names: "model", "compare", "naive", ...; "crps", "wql", ... */
const char *kr_bt_forecaster_key(int f);
const char *kr_bt_forecaster_label(const kr_backtest_report *r, int f);
const char *kr_bt_metric_key(int m);
const char *kr_bt_metric_label(int m);
/* 1 when lower is better (losses), 0 for coverage-like and hit-rate-like figures. */
int kr_bt_metric_is_loss(int m);
/* 1 when f forecasts a distribution (paths), 0 for a point forecast. */
int kr_bt_forecaster_probabilistic(int f);

/* ---- the modules */

/* eval/backtest: the run in three parts, so tests can score synthetic forecasts exactly as
 * the engine's are. kr_bt_prepare checks, plans and allocates (ctx may be NULL: no model
 * metadata); kr_bt_score_forecast scores closes[paths][horizon] as forecaster f's forecast of
 * item; kr_bt_finish scores the baselines, aggregates, cross-sections and runs the strategy
 * (then the report holds no borrowed pointer). */
kr_status kr_bt_prepare(const kr_context *ctx, const kr_backtest_series *series, int n,
                        const kr_backtest_params *p, kr_backtest_report **out, kr_error *err);
kr_status kr_bt_score_forecast(kr_backtest_report *r, const kr_backtest_series *series, int item,
                               int f, const double *closes, kr_error *err);
kr_status kr_bt_finish(kr_backtest_report *r, const kr_backtest_series *series, kr_error *err);

/* eval/backtest_plan: origins, units, symbols' calendars, seasons, A-share rules. */
kr_status kr_bt_plan(kr_backtest_report *r, const kr_backtest_series *series, int n, kr_error *err);
/* The season of a symbol (bars), from its interval and calendar; 0 when none. */
int kr_bt_season(int64_t interval_seconds, const kr_calendar_info *info);
/* A-share rules for the symbol / market; *limit receives the daily price limit. */
int kr_bt_is_ashare(const char *symbol, const char *market, double *limit);

/* eval/backtest_score: one forecast's cells. closes: [paths][horizon] (probabilistic) or
 * [horizon] (paths == 1, a point forecast). hist: the lookback closes the forecast saw.
 * real: the realised closes [horizon]. Adds into the report's item and unit sums. */
typedef struct kr_bt_cell_input {
    const double *closes;
    int paths; /* 1: a point forecast */
    int probabilistic;
} kr_bt_cell_input;
void kr_bt_score_item(kr_backtest_report *r, int item, int f, const kr_bt_cell_input *in,
                      const double *real, double *scratch);
/* Scratch doubles kr_bt_score_item needs for `paths` paths. */
int64_t kr_bt_score_scratch(int paths, int horizon);
/* The baselines' forecasts of an item (naive, seasonal, drift: point; rw: paths), into
 * out ([paths][horizon] for the random walk, [horizon] otherwise). hist: the lookback closes.
 * Returns 0, or -1 when the baseline has no forecast here (too short a history). */
int kr_bt_baseline(const kr_backtest_report *r, int f, const kr_bt_item *it, const double *hist,
                   int n_hist, double *out);

/* eval/backtest_aggregate: point figures and bootstrap intervals, relative scores, DM tests,
 * volatility correlations. */
kr_status kr_bt_aggregate(kr_backtest_report *r, kr_error *err);

/* eval/backtest_cross: IC / RankIC per origin and their summaries. */
kr_status kr_bt_cross_section(kr_backtest_report *r, kr_error *err);

/* eval/backtest_strategy: the top-K strategy. series: the histories (for prices). */
kr_status kr_bt_strategy_run(kr_backtest_report *r, const kr_backtest_series *series,
                             kr_error *err);

/* Renderers (eval/backtest_json, _md, _html, _csv). */
kr_status kr_bt_render_json(const kr_backtest_report *r, char **out, kr_error *err);
kr_status kr_bt_render_md(const kr_backtest_report *r, char **out, kr_error *err);
kr_status kr_bt_render_html(const kr_backtest_report *r, char **out, kr_error *err);
kr_status kr_bt_render_csv(const kr_backtest_report *r, char **out, kr_error *err);

/* A timestamp as the report prints it: a date for bars at midnight, else date and time. */
void kr_bt_fmt_ts(int64_t ts, char *buf, int cap);

#endif
