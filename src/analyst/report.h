/*
 * analyst/report — one symbol's analysis: the numbers a reader needs about a Kronos
 * forecast with many sample paths, computed once here and only formatted by the renderers.
 *
 * Returns are simple returns as fractions (0.01 = 1%) of the last close, taken on the close
 * column, a close below zero counting as zero (a price has a floor; the model's normalised
 * space does not). "Horizon" is the last forecast step. With N paths:
 *   prob_up            fraction of paths whose close at the horizon is above the last close by
 *                      more than KR_REPORT_FLAT_REL of it; prob_down the same below (the rest
 *                      ended where they began, to within the float32 the model computes in)
 *   expected_return    mean over paths of the horizon return; return_std its sample std
 *   return_p10/p50/p90 quantiles (numpy 'linear') of the horizon return over paths
 *   var95              -(5% quantile of the horizon return): the loss not exceeded in 95% of
 *                      paths, positive for a loss (negative when even that path gains)
 *   es95               -(mean of the horizon returns at or below that 5% quantile)
 *   drawdown           per path: max over steps of (running peak - close) / running peak,
 *                      the peak starting at the last close; mean, p50 and p90 over paths
 *   forecast_vol       per path: sample std of its h per-step log returns (the first from the
 *                      last close); mean over the vol_paths paths whose closes stay above zero
 *   realized_vol_h     sample std of the last h log returns of the history
 *   prob_vol_above     fraction of those paths whose forecast_vol exceeds realized_vol_h by
 *                      more than KR_REPORT_VOL_TIE (per-bar log-return units)
 * NaN marks a figure that cannot be computed (e.g. a std with one path or horizon 1).
 *
 * Each of these figures carries its Monte Carlo standard error (`_se`, same units): how much it
 * would move between runs with other seeds and the same number of paths. Probabilities use the
 * Agresti-Coull binomial error sqrt(p~(1-p~)/(N+4)) with p~ = (k+2)/(N+4), so 32 of 32 paths
 * up is not "100% +- 0"; means use s/sqrt(N); quantiles, VaR, ES, the standard deviation and
 * the drawdown quantiles use the largest of three estimates, since each falls short somewhere:
 * the bootstrap (KR_REPORT_BOOTSTRAP resamples of the paths, drawn with a fixed stream, so a
 * report is reproducible; blind to tail mass the paths missed and to ties), batch means
 * (KR_REPORT_BATCHES batches, from 128 paths) and, for quantiles, the order-statistic interval
 * widened past tied values (a median on a block of equal returns is not exact). The per-step mean path and bands carry
 * theirs too (fc_mean_se, fc_p10_se, ...: see kr_report).
 */
#ifndef KR_ANALYST_REPORT_H
#define KR_ANALYST_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "analyst/calibrate.h"
#include "analyst/indicators.h"
#include "kronos.h"
#include "series/candles.h"

#include "engine/path_set.h"
#include "kronos/analyst.h"

#define KR_REPORT_CHART_BARS 120
#define KR_REPORT_BOOTSTRAP 400
/* Batch means (report.c): the paths in this many batches, used from this many paths a batch
 * (so from 128 paths on). */
#define KR_REPORT_BATCHES 8
#define KR_REPORT_BATCH_MIN 16
#define KR_REPORT_DEMO_BANNER "DEMO MODEL \xe2\x80\x94 not a forecast"
#define KR_REPORT_RV_WINDOW 20
/* Moves smaller than this fraction of the price are float32 rounding, not a direction. */
#define KR_REPORT_FLAT_REL 1e-6
#define KR_REPORT_VOL_TIE 1e-6
#define KR_REPORT_DISCLAIMER                                                                    \
    "Not investment advice. This report is generated automatically from a statistical model's " \
    "sampled forecasts and simple indicators; forecasts can be wrong, past behaviour does not " \
    "predict future results, and nothing here is a recommendation to buy, sell or hold any "    \
    "instrument."

/* What produced a report: model, sampling parameters, engine. */
typedef struct kr_report_meta {
    char model_name[128];
    char predictor_dir[1024], tokenizer_dir[1024];
    int d_model, n_layers, n_heads;
    int64_t n_params;
    char quantization[16]; /* weight format the forecast ran with (kr_model_info.quant) */
    char quant_method[16]; /* "rtn", "smoothquant", "awq"; "" for f32 */
    int demo; /* the checkpoint declares itself a demo/test model (kr_model_info.demo) */
    char source[512]; /* where the weights come from: config "source", a hub repo, or the dir */
    int max_context, top_k;
    double temperature, top_p;
    uint64_t seed;
    kr_ohlc_mode ohlc; /* candles repaired before the statistics (engine/path_set.h) */
    int paths_min, paths_max; /* the first round's paths and the cap (adaptive paths) */
    double target_prob_se; /* stop adding paths when prob_up_se <= this ... */
    double target_var_rel_se; /* ... and var95_se <= this x |var95| (0: no target) */
    char engine_version[32]; /* kr_version() */
} kr_report_meta;

typedef struct kr_report {
    char symbol[40], interval[40];
    int date_only; /* format timestamps as dates */
    int64_t rows_available; /* history rows given */
    int64_t first_ts; /* first history timestamp */
    int lookback; /* rows the model saw */
    int64_t last_ts;
    double last_close;

    /* The last n_chart history bars, for charts. */
    int n_chart;
    int64_t *chart_ts; /* [n_chart] */
    double *chart_values; /* [n_chart][6] */

    /* Forecast per step: mean path and per-step quantiles over paths (p50 = the median
     * path), all six columns. */
    int horizon, paths;
    int64_t *fc_ts; /* [horizon] */
    double *fc_mean, *fc_p10, *fc_p50, *fc_p90; /* [horizon][6] */
    /* Monte Carlo standard error of fc_mean: sample std over the paths / sqrt(paths), per step
     * and column (the paths as the statistics see them); NaN with one path. [horizon][6] */
    double *fc_mean_se;
    /* Monte Carlo standard errors of fc_p10, fc_p50, fc_p90, per step and column: half the
     * order-statistic interval around each quantile that holds the true quantile with about
     * 68% probability (analyst/stats.h kr_stat_quantile_se_sorted); NaN below
     * KR_STAT_QUANTILE_SE_MIN_N paths. [horizon][6] */
    double *fc_p10_se, *fc_p50_se, *fc_p90_se;

    /* Horizon statistics (see the header comment). */
    double prob_up, prob_down;
    double expected_return, return_std, return_p10, return_p50, return_p90;
    double var95, es95;
    double drawdown_mean, drawdown_p50, drawdown_p90;
    double forecast_vol, realized_vol_h, prob_vol_above;
    /* Their Monte Carlo standard errors (header comment). */
    double prob_up_se, prob_down_se, expected_return_se, return_std_se, return_p10_se,
        return_p50_se, return_p90_se, var95_se, es95_se, drawdown_mean_se, drawdown_p50_se,
        drawdown_p90_se, forecast_vol_se, prob_vol_above_se;
    int rounds; /* engine runs that made the paths (adaptive paths) */
    int target_met; /* the error targets were reached within the cap (1 without targets) */
    int64_t repaired_candles; /* path candles the consistent OHLC mode changed */
    int64_t raw_inconsistent; /* path candles with open or close outside [low, high] as written */
    int nonpositive_paths; /* paths with a price at or below zero as written (kr_path_set) */
    int vol_paths; /* paths whose forecast_vol is defined (closes above zero, h >= 2) */
    char market[24]; /* calendar of the forecast bars ("" when learned from the history) */
    char calendar[128]; /* how it was chosen: "SSE (inferred from the history)" */
    int holidays_known; /* the forecast bars lie within the calendar's holiday years */
    /* Set by kr_report_set_rank: */
    double stale_days; /* how far the last bar lies behind the newest last bar of the set */
    /* Trading sessions of the market's calendar (weekdays when none) between the last bar's
     * day and the clock's (kr_analyze_params.now), both excluded: 0 for a bar of yesterday
     * or today; and the most a history of this interval may miss before it is stale: two
     * bars' worth of sessions (2 for intraday and daily bars, 10 weekly, 42 monthly on a
     * five-day week). */
    int64_t sessions_ago;
    int stale_sessions_limit;
    int stale_now; /* sessions_ago > stale_sessions_limit */
    int stale; /* stale_now, or stale_days beyond max(14 days, 5 bars) */
    int group_rank; /* rank within its interval, from 1 */
    char tied_with[256]; /* symbols of the same interval whose expected return lies within 2
                            combined standard errors of this one, comma-separated */

    kr_tech_snapshot tech;
    kr_calibration *calibration; /* NULL unless calibrated; owned */

    char **summary; /* [n_summary] sentences, owned */
    int n_summary;

    /* Prose by a language model from the figures above (analyst/narrative): NULL unless
     * asked for. Borrowed: whoever attached it frees it after the report's last render. */
    const struct kr_narrative *narrative;

    kr_report_meta meta;
    kr_forecast_stats timing; /* of the forecast call (a batch shares its wall time) */
} kr_report;

/* Builds the report of one symbol from its history c (all rows; indicators use them all) and
 * the paths ps forecast from its last `lookback` rows; timing may be NULL. Strings are copied;
 * c, ps and timing are borrowed. The summary is built too. Caller owns *out; free with
 * kr_report_free. */
kr_status kr_report_build(const char *symbol, const char *interval, const kr_candles *c,
                          int lookback, const kr_path_set *ps, const kr_forecast_stats *timing,
                          const kr_report_meta *meta, kr_report **out, kr_error *err);

/* The horizon statistics and their standard errors from the paths alone (r->last_close,
 * horizon, paths and realized_vol_h must be set): what kr_report_build computes, exposed so
 * the adaptive path count can test its targets between rounds. */
kr_status kr_report_horizon_stats(kr_report *r, const kr_path_set *ps, kr_error *err);

/* Hands a calibration to the report (which then owns it) and rebuilds the summary. */
kr_status kr_report_attach_calibration(kr_report *r, kr_calibration *cal, kr_error *err);

void kr_report_free(kr_report *r);

/* The per-path quantities behind the horizon statistics, for the tests and the charts:
 * horizon return, max drawdown and forecast volatility of one path of closes[horizon]. */
double kr_path_return(const double *closes, int horizon, double last_close);
double kr_path_max_drawdown(const double *closes, int horizon, double last_close);
double kr_path_volatility(const double *closes, int horizon, double last_close);

#endif
