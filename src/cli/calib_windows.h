/*
 * cli/calib_windows — the calibration windows of `kronos quantize --calib` (and of
 * `kronos eval-quant --calib`, so its calibrated rows measure exactly what quantize writes):
 * from each candle file, up to `windows` windows of `lookback` rows ending at evenly spaced
 * rows, the last at the file's end.
 */
#ifndef KR_CLI_CALIB_WINDOWS_H
#define KR_CLI_CALIB_WINDOWS_H

#include "kronos.h"
#include "kronos/series.h"

typedef struct kr_calib_set {
    kr_candles **files;
    int n_files;
    kr_series *series; /* views into files */
    int n_series;
} kr_calib_set;

/* Reads the files and cuts the windows; errors name the file. Free with kr_calib_set_free. */
kr_status kr_calib_set_load(const char *const *paths, int n_paths, int windows, int lookback,
                            kr_calib_set *out, kr_error *err);
void kr_calib_set_free(kr_calib_set *s);

#define KR_CALIB_DEFAULT_WINDOWS 8
#define KR_CALIB_DEFAULT_LOOKBACK 400

#endif
