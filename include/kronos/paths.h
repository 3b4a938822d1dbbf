/*
 * kronos/paths.h — a forecast's sample paths as a front end prints them: one or more engine
 * results (rounds of one run) gathered into one set, its candles made consistent when asked, its
 * mean path and per-step quantiles. Part of the core library (libkronos): `kronos forecast`,
 * /v1/forecast and the analyst all use it.
 */
#ifndef KRONOS_PATHS_H
#define KRONOS_PATHS_H

#include <stdint.h>

#include "kronos.h"

#ifdef __cplusplus
extern "C" {
#endif

/* KR_OHLC_CONSISTENT repairs every sampled candle before any statistic (prices >= 0, high =
 * max(high, open, close), low = min(low, open, close), volume, amount >= 0): an open or close
 * moves only from below zero to zero, where the statistics floor it in both modes, so every
 * return, probability and risk figure is unchanged, and the mean path is a consistent candle
 * too. KR_OHLC_RAW keeps the model's numbers. */
typedef enum kr_ohlc_mode { KR_OHLC_RAW = 0, KR_OHLC_CONSISTENT = 1 } kr_ohlc_mode;

/* "raw" / "consistent"; 0 on success, -1 otherwise. */
KR_API int kr_ohlc_mode_parse(const char *s, kr_ohlc_mode *out);
KR_API const char *kr_ohlc_mode_name(kr_ohlc_mode mode);

typedef struct kr_path_set {
    int pred_len, paths;
    kr_ohlc_mode ohlc;
    int zero_volume; /* the input's volume was all zero: forecast volume/amount are 0 */
    int64_t *timestamps; /* [pred_len] */
    double *values; /* [paths][pred_len][6], after the OHLC mode */
    double *mean; /* [pred_len][6] */
    int64_t repaired_rows; /* path candles the consistent mode changed */
    int64_t raw_inconsistent; /* path candles whose open or close lay outside [low, high] as
                                 the model wrote them */
    int nonpositive_paths; /* paths with a price (open, high, low or close) at or below zero
                              as the model wrote them: the normalised space it samples in has
                              no floor, a price has */
} kr_path_set;

/* Builds the set from rounds[n_rounds] (same series and horizon, kept paths; paths in round
 * order). zero_volume: forecast volume and amount are 0 (kr_series_zero_volume). Caller owns
 * *out. */
KR_API kr_status kr_path_set_create(const kr_forecast *const *rounds, int n_rounds,
                                    kr_ohlc_mode mode, int zero_volume, kr_path_set **out,
                                    kr_error *err);
KR_API void kr_path_set_free(kr_path_set *s);
/* Candles of path p ([pred_len][6]); borrowed. NULL when p is out of range. */
KR_API const double *kr_path_set_path(const kr_path_set *s, int p);
/* Quantile q across paths, per step and column (numpy 'linear', as kr_forecast_quantile),
 * into out[pred_len][6]. */
KR_API kr_status kr_path_set_quantile(const kr_path_set *s, double q, double *out, kr_error *err);
/* 1 when the series has no volume column or every volume in it is 0 (FX, indices). */
KR_API int kr_series_zero_volume(const kr_series *s);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_PATHS_H */
