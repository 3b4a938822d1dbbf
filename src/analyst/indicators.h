/*
 * analyst/indicators — classic technical indicators over a candle history, and the snapshot
 * of their values at the last bar that a report shows.
 *
 * Series functions fill out[i] with the indicator at bar i and NaN where there are not yet
 * enough bars (a chart can then draw them as they are). Conventions, chosen to match the
 * textbook definitions (Wilder 1978; StockCharts' worked examples; Bollinger 2001):
 *   SMA(p)      mean of the last p values.
 *   EMA(p)      alpha = 2/(p+1), seeded with the SMA of the first p values at bar p-1.
 *   RSI(p)      Wilder: first average gain/loss = mean of the first p changes (bar p), then
 *               avg = (avg*(p-1) + x)/p; RSI = 100 - 100/(1 + gain/loss); 100 when there are
 *               no losses, 50 when the price did not move at all.
 *   MACD        line = EMA(fast) - EMA(slow) (from bar slow-1), signal = EMA(signal) of the
 *               line seeded with the SMA of its first `signal` values, histogram = line - signal.
 *   Bollinger   middle = SMA(p), bands = middle +- k * population std of the last p closes,
 *               %b = (close - lower)/(upper - lower), bandwidth = (upper - lower)/middle.
 *   ATR(p)      true range TR = max(high - low, |high - prev close|, |low - prev close|)
 *               (TR of the first bar = high - low); first ATR = mean of the first p TRs
 *               (bar p-1), then Wilder smoothing.
 */
#ifndef KR_ANALYST_INDICATORS_H
#define KR_ANALYST_INDICATORS_H

#include <stdint.h>

#include "kronos.h"
#include "series/candles.h"

kr_status kr_ind_sma(const double *x, int64_t n, int period, double *out, kr_error *err);
kr_status kr_ind_ema(const double *x, int64_t n, int period, double *out, kr_error *err);
kr_status kr_ind_rsi(const double *close, int64_t n, int period, double *out, kr_error *err);
kr_status kr_ind_macd(const double *close, int64_t n, int fast, int slow, int signal, double *line,
                      double *sig, double *hist, kr_error *err);
/* Any of the five outputs may be NULL. */
kr_status kr_ind_bollinger(const double *close, int64_t n, int period, double k, double *middle,
                           double *upper, double *lower, double *percent_b, double *bandwidth,
                           kr_error *err);
kr_status kr_ind_atr(const double *high, const double *low, const double *close, int64_t n,
                     int period, double *out, kr_error *err);

/* Standard deviation (ddof 1) of the last `window` log returns of close (needs window + 1
 * closes; NaN otherwise), per bar. */
double kr_ind_realized_vol(const double *close, int64_t n, int window);

/* Bars per year of a history, for annualising: daily bars count trading days per year (252,
 * or 365 when the history has weekend bars, as crypto does), weekly 52, monthly 12; intraday
 * bars count bars per day (the median number of bars per calendar date) times those days.
 * bars_per_day may be NULL. Needs n >= 2. */
kr_status kr_ind_bars_per_year(const int64_t *ts, int64_t n, double *bars_per_year,
                               double *bars_per_day, kr_error *err);

/* The indicators at the last bar. NaN marks a value the history is too short for (or, for
 * the volume fields, a history without volume). */
typedef struct kr_tech_snapshot {
    double close; /* last close */
    double sma5, sma20, sma60;
    double ema5, ema20, ema60;
    double rsi14; /* 0..100 */
    double macd_line, macd_signal, macd_hist; /* MACD(12, 26, 9), price units */
    double bb_middle, bb_upper, bb_lower; /* Bollinger(20, 2) */
    double bb_percent_b; /* 0 at the lower band, 1 at the upper */
    double bb_bandwidth; /* (upper - lower) / middle, a fraction */
    double atr14; /* price units */
    int has_volume;
    double volume_avg5, volume_avg20; /* mean volume of the last 5 / 20 bars */
    double volume_ratio; /* volume_avg5 / volume_avg20 */
    int volume_slope_sign; /* sign of the least-squares slope of the last 20
                                           volumes: -1, 0, +1 (0 also when unknown) */
    int rv_window; /* log returns used for realised volatility */
    double rv_per_bar; /* std of those log returns (fraction per bar) */
    double rv_annualized; /* rv_per_bar * sqrt(bars_per_year) */
    double bars_per_year, bars_per_day;
} kr_tech_snapshot;

/* Computes the snapshot from all rows of c; rv_window (e.g. 20) sets the realised-volatility
 * window. Needs c->n >= 2. */
kr_status kr_tech_snapshot_compute(const kr_candles *c, int rv_window, kr_tech_snapshot *out,
                                   kr_error *err);

/* "overbought" (RSI >= 70), "oversold" (<= 30), "neutral", or "unknown" (NaN). */
const char *kr_rsi_state(double rsi);

#endif
