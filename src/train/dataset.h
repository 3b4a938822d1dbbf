/*
 * train/dataset — the training windows of `kronos finetune`: candles of one or more series,
 * split by time, cut into windows and normalised the way inference sees its input.
 *
 * As the official finetune_csv pipeline (../shared/golden/train/README.md):
 *   - each series is split BY TIME into its first train_ratio rows, the next val_ratio rows
 *     and the rest (test): train_end = int(n * train_ratio), val_end = int(n * (train_ratio +
 *     val_ratio)), as Python's int() truncates; windows are formed within a split, so no
 *     validation window shares a row with a training window;
 *   - a window is lookback + predict + 1 consecutive rows; a split of m rows has
 *     m - window + 1 of them (none when it is shorter);
 *   - the time features are minute, hour, weekday (Monday 0), day and month of each row.
 * Differs on purpose: each window is normalised with the mean and population std of its
 * LOOKBACK rows only (float32, numpy's pairwise sums, as inference: model/normalize.h), then
 * (x - mean) / (std + 1e-5) clipped to +-clip, over the whole window. finetune_csv uses the
 * whole window's statistics, predict part included: future data leaks into every input
 * (upstream issues #84, #227, #228, #263, #307). Here changing any row after a window's
 * lookback part leaves that part's inputs unchanged bit for bit.
 *
 * Features are float32 as inference prepares them (engine/forecast.c): no volume column means
 * volume = amount = 0; no amount column means amount = volume x mean(open, high, low, close),
 * computed in double and then rounded.
 *
 * A dataset is immutable once built: any number of threads may fill windows from it.
 */
#ifndef KR_SERIES_DATASET_H
#define KR_SERIES_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"

#define KR_DS_FEATURES 6 /* open, high, low, close, volume, amount */
#define KR_DS_STAMP_FIELDS 5 /* minute, hour, weekday, day, month */
#define KR_DS_NAME_MAX 256

typedef enum kr_split {
    KR_SPLIT_TRAIN = 0,
    KR_SPLIT_VAL = 1,
    KR_SPLIT_TEST = 2,
} kr_split;
#define KR_N_SPLITS 3

typedef struct kr_dataset_params {
    int lookback; /* rows the statistics come from, >= 2 */
    int predict; /* rows after them, >= 0; a window has lookback + predict + 1 rows */
    double train_ratio, val_ratio; /* in [0, 1], sum <= 1; test is the rest */
    float clip; /* > 0 */
} kr_dataset_params;

typedef struct kr_dataset kr_dataset;

/* One window: series index and its first row (0-based, in the whole series). */
typedef struct kr_window_ref {
    int32_t series;
    int64_t start;
} kr_window_ref;

/* Where a split lies in one series: rows [begin, end). */
typedef struct kr_split_range {
    int64_t begin, end;
} kr_split_range;

/* Checks the parameters; caller owns *out (kr_dataset_free). */
KR_PRIVATE kr_status kr_dataset_create(const kr_dataset_params *p, kr_dataset **out, kr_error *err);
KR_PRIVATE void kr_dataset_free(kr_dataset *ds);

/* Adds a series (copied). Timestamps must be strictly increasing and within
 * +-KR_TIME_MAX_ABS; every value finite and within float32's range. Errors name `name`, the
 * row (0-based) and the field. A series too short for any window is kept (it counts in
 * kr_dataset_series_rows) but gives none. */
KR_PRIVATE kr_status kr_dataset_add(kr_dataset *ds, const char *name, const kr_series *s,
                                    kr_error *err);

KR_PRIVATE int kr_dataset_n_series(const kr_dataset *ds);
const char *kr_dataset_series_name(const kr_dataset *ds, int series);
int64_t kr_dataset_series_rows(const kr_dataset *ds, int series);
const int64_t *kr_dataset_series_timestamps(const kr_dataset *ds, int series);
KR_PRIVATE kr_split_range kr_dataset_split_range(const kr_dataset *ds, int series, kr_split split);
const kr_dataset_params *kr_dataset_get_params(const kr_dataset *ds);
/* Rows per window: lookback + predict + 1. */
KR_PRIVATE int kr_dataset_window_rows(const kr_dataset *ds);
/* Bytes the dataset holds (series, timestamps, features): for the up-front memory estimate. */
KR_PRIVATE size_t kr_dataset_bytes(const kr_dataset *ds);

/* Windows of a split over every series. */
KR_PRIVATE int64_t kr_dataset_n_windows(const kr_dataset *ds, kr_split split);
/* The i-th window of a split in natural order: series by series, start ascending (what the
 * official validation loader reads: start = idx). i in [0, kr_dataset_n_windows). */
kr_window_ref kr_dataset_window(const kr_dataset *ds, kr_split split, int64_t i);

/* The official training scramble of window index j of a split of one series, at `epoch`:
 * (j * 9973 + (epoch + 1) * 104729) % (max_start + 1), max_start = windows - 1, computed
 * exactly (Python integers do not overflow). */
int64_t kr_dataset_scramble(int64_t j, int64_t epoch, int64_t windows);

/* Fills one window: x[rows][6] normalised as described above, stamp[rows][5] the time
 * features; rows = kr_dataset_window_rows. Either output may be NULL. Fails only when the
 * lookback statistics overflow float32 (naming the series and the column) or out of memory. */
KR_PRIVATE kr_status kr_dataset_fill(const kr_dataset *ds, kr_window_ref w, float *x,
                                     int32_t *stamp, kr_error *err);

/* The features of a candle view as inference prepares them (see above), out[n][6]. Errors
 * name `what` and the row. */
kr_status kr_series_features_f32(const kr_series *s, const char *what, float *out, kr_error *err);

#endif
