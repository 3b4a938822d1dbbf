/*
 * analyst/calibrate — walk-forward check of the forecast on the symbol's own recent past,
 * next to the naive "no change" forecast, so a reader can see whether the model's bands and
 * direction are worth anything on this series.
 *
 * Window j of K (oldest first, j = 0..K-1) ends its history (K - j)·h bars before the last
 * bar, h = the report's horizon; the model forecasts h bars from that history only (with the
 * realised bars' timestamps) and is compared with the h bars that followed:
 *   coverage            fraction of realised closes inside the forecast's [p10, p90]
 *                       (per step over the windows, and over all steps and windows);
 *   direction hit rate  fraction of windows where the sign of (point close at the horizon -
 *                       last close) equals the realised sign;
 *   MAPE                mean |point close - realised close| / realised close over all steps
 *                       and windows (a fraction).
 * The model's point forecast is its mean path. The naive forecast's point is the last close;
 * its band at step s is last close x (1 + p10 / p90 of the s-bar returns inside its lookback
 * window) — at the horizon that is the h-bar return distribution; it has no direction of its
 * own, so its direction is the sign of the mean h-bar return in the lookback (the drift).
 */
#ifndef KR_ANALYST_CALIBRATE_H
#define KR_ANALYST_CALIBRATE_H

#include <stdint.h>

#include "kronos.h"
#include "series/candles.h"

typedef struct kr_calib_scores {
    double coverage; /* fraction in [0, 1] */
    double *coverage_by_step; /* [horizon] fractions in [0, 1] */
    double direction_hit_rate; /* fraction in [0, 1] */
    double mape; /* fraction (0.02 = 2%) */
    /* Standard errors, the windows taken as the independent trials (a window's steps move
     * together): Agresti-Coull sqrt(p~(1-p~)/(W+4)) for the coverage and the hit rate, the
     * windows' MAPEs' s / sqrt(W) for the MAPE (NaN below 2 windows). With 3 windows the hit
     * rate's is ~23 pp: a calibration of a few windows says little, and now says so. */
    double coverage_se, direction_hit_rate_se, mape_se;
} kr_calib_scores;

typedef struct kr_calib_window {
    int64_t history_end_ts; /* timestamp of the window's last history bar */
    int lookback; /* history rows the model saw */
    double last_close; /* close of the last history bar */
    double realized_close; /* realised close at the horizon */
    double model_close; /* mean-path close at the horizon */
    double model_p10, model_p90; /* forecast band of the close at the horizon */
    double naive_p10, naive_p90; /* naive band of the close at the horizon */
    double naive_drift; /* mean h-bar return in the lookback (fraction) */
} kr_calib_window;

typedef struct kr_calibration {
    int windows, horizon;
    kr_calib_scores model, naive;
    kr_calib_window *window; /* [windows], oldest first */
} kr_calibration;

/* Rows of history the forecast uses: `requested` (> 0) capped at the rows there are, else all
 * rows up to max_context - horizon, so history plus forecast fit the model's window. */
int kr_analyst_lookback(int64_t rows, int horizon, int max_context, int requested);

/* Rows a series needs for `windows` calibration windows of `horizon`. */
int64_t kr_calibration_min_rows(int windows, int horizon);
/* The shortest lookback a calibration window can use: the naive band needs at least
 * KR_CALIB_MIN_RETURNS horizon-bar returns inside it. */
int kr_calibration_min_lookback(int horizon);

/* Fills series[windows] with the windows' histories (views borrowed from c, each with the
 * realised bars' timestamps as future timestamps). */
kr_status kr_calibration_plan(const kr_candles *c, int windows, int horizon, int max_context,
                              int requested_lookback, kr_series *series, kr_error *err);

/* Scores the forecasts fc[windows] of the planned series against the realised bars of c.
 * fc must keep their paths. Caller owns *out; free with kr_calibration_free. */
kr_status kr_calibration_score(const kr_candles *c, int windows, int horizon,
                               const kr_series *series, kr_forecast *const *fc,
                               kr_calibration **out, kr_error *err);

/* Plans the windows, runs them as ONE kr_forecast_run_batch call (params->pred_len is the
 * horizon; lookback and keep_paths are set here) and scores them. Caller owns *out. */
struct kr_analyst_request; /* analyst/analyze.h; NULL: the defaults, no deadline */
kr_status kr_calibrate(kr_context *ctx, const kr_candles *c, int windows,
                       const kr_forecast_params *params, int requested_lookback,
                       const struct kr_analyst_request *request, kr_calibration **out,
                       kr_error *err);

void kr_calibration_free(kr_calibration *cal);

#endif
