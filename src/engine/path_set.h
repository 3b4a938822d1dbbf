/*
 * engine/path_set — a forecast's sample paths as the statistics see them: copied out of one or
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
#ifndef KR_ENGINE_PATH_SET_H
#define KR_ENGINE_PATH_SET_H

#include <stdint.h>

#include "kronos.h"
#include "kronos/paths.h"

/* kr_ohlc_mode and its names: kronos/paths.h. */

/* Makes rows[n][6] consistent candles in place (see above). Returns the rows it changed. */
KR_PRIVATE int64_t kr_ohlc_make_consistent(double *rows, int64_t n);

/* kr_path_set, its constructor, quantiles and kr_series_zero_volume: kronos/paths.h. */

#endif
