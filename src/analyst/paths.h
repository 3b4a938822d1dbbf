/*
 * analyst/paths — a forecast's sample paths as the statistics see them: copied out of one or
 * more engine results (rounds of one run, extended with kr_forecast_params.first_path), made
 * consistent candles when asked, with the mean path and per-step quantiles taken afterwards.
 *
 * The raw model does not know that a candle's high bounds its open and close: most sampled
 * candles of the bundled demo model have open > high or close < low, and so does the mean
 * path. KR_OHLC_CONSISTENT repairs every candle of every path before any statistic:
 *   high = max(high, open, close), low = min(low, open, close), volume, amount >= 0,
 * which moves no open or close (every return, probability and risk figure is unchanged by it)
 * and makes the mean path a consistent candle too (a mean of consistent candles is one).
 * KR_OHLC_RAW keeps the model's numbers; with one round the mean is then exactly the engine's
 * (the reference KronosPredictor's: averaged in normalised space, then denormalised).
 * In both modes a series whose volume is all zero (FX, indices) gets zero forecast volume and
 * amount: the model's output there is noise around zero and must not become a negative
 * volume that a candle reader rejects.
 */
#ifndef KR_ANALYST_PATHS_H
#define KR_ANALYST_PATHS_H

#include <stdint.h>

#include "kronos.h"

typedef enum kr_ohlc_mode { KR_OHLC_RAW = 0, KR_OHLC_CONSISTENT = 1 } kr_ohlc_mode;

/* "raw" / "consistent"; 0 on success, -1 otherwise. */
int kr_ohlc_mode_parse(const char *s, kr_ohlc_mode *out);
const char *kr_ohlc_mode_name(kr_ohlc_mode mode);

/* Makes rows[n][6] consistent candles in place (see above). Returns the rows it changed. */
int64_t kr_ohlc_make_consistent(double *rows, int64_t n);

typedef struct kr_path_set {
    int pred_len, paths;
    kr_ohlc_mode ohlc;
    int zero_volume; /* the input's volume was all zero: forecast volume/amount are 0 */
    int64_t *timestamps; /* [pred_len] */
    double *values; /* [paths][pred_len][6], after the OHLC mode */
    double *mean; /* [pred_len][6] */
    int64_t repaired_rows; /* path candles the consistent mode changed */
    int64_t
        raw_inconsistent; /* path candles whose open or close lay outside [low, high] as the model wrote them */
} kr_path_set;

/* Builds the set from rounds[n_rounds] (same series and horizon, kept paths; paths in round
 * order). zero_volume: see above (kr_series_zero_volume). Caller owns *out. */
kr_status kr_path_set_create(const kr_forecast *const *rounds, int n_rounds, kr_ohlc_mode mode,
                             int zero_volume, kr_path_set **out, kr_error *err);
void kr_path_set_free(kr_path_set *s);

/* Candles of path p ([pred_len][6]); borrowed. */
const double *kr_path_set_path(const kr_path_set *s, int p);

/* Quantile q across paths, per step and column (numpy 'linear', as kr_forecast_quantile),
 * into out[pred_len][6]. */
kr_status kr_path_set_quantile(const kr_path_set *s, double q, double *out, kr_error *err);

/* 1 when the series has no volume column or every volume in it is 0. */
int kr_series_zero_volume(const kr_series *s);

#endif
