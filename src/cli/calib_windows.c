/* cli/calib_windows — see calib_windows.h. */
#include "cli/calib_windows.h"

#include <stdlib.h>
#include <string.h>

#include "kronos/status.h"

kr_status kr_calib_set_load(const char *const *paths, int n_paths, int windows, int lookback,
                            kr_calib_set *out, kr_error *err) {
    memset(out, 0, sizeof *out);
    if (n_paths <= 0) return KR_OK;
    out->files = calloc((size_t)n_paths, sizeof *out->files);
    out->series = calloc((size_t)n_paths * (size_t)windows, sizeof *out->series);
    if (!out->files || !out->series) {
        kr_calib_set_free(out);
        return kr_error_set(err, KR_ERR_NOMEM, "calibration: out of memory");
    }
    for (int f = 0; f < n_paths; f++) {
        kr_status st = kr_candles_read_csv(paths[f], &out->files[f], err);
        if (st != KR_OK) {
            kr_calib_set_free(out);
            return st;
        }
        out->n_files++;
        int64_t n = out->files[f]->n, lb = n < lookback ? n : lookback;
        if (lb < 16) {
            kr_calib_set_free(out);
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "%s: %lld rows, at least 16 are needed to calibrate", paths[f],
                                (long long)n);
        }
        int w = (int)(n - lb + 1 < windows ? n - lb + 1 : windows);
        for (int i = 0; i < w; i++) {
            int64_t end = w == 1 ? n : lb + (n - lb) * i / (w - 1);
            out->series[out->n_series++] = kr_candles_slice(out->files[f], end - lb, lb);
        }
    }
    return KR_OK;
}

void kr_calib_set_free(kr_calib_set *s) {
    if (!s) return;
    for (int f = 0; f < s->n_files; f++) kr_candles_free(s->files[f]);
    free(s->files);
    free(s->series);
    memset(s, 0, sizeof *s);
}
