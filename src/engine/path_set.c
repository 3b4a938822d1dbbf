/* engine/path_set — see path_set.h. */
#include "engine/path_set.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/sort.h"

int kr_ohlc_mode_parse(const char *s, kr_ohlc_mode *out) {
    if (!s) return -1;
    if (!strcmp(s, "raw"))
        *out = KR_OHLC_RAW;
    else if (!strcmp(s, "consistent"))
        *out = KR_OHLC_CONSISTENT;
    else
        return -1;
    return 0;
}

const char *kr_ohlc_mode_name(kr_ohlc_mode mode) {
    return mode == KR_OHLC_CONSISTENT ? "consistent" : "raw";
}

int64_t kr_ohlc_make_consistent(double *rows, int64_t n) {
    int64_t changed = 0;
    for (int64_t i = 0; i < n; i++) {
        double *v = rows + i * KR_N_FEATURES;
        int floored = 0;
        for (int f = KR_OPEN; f <= KR_CLOSE; f++)
            if (v[f] < 0) {
                v[f] = 0;
                floored = 1;
            }
        double hi = v[KR_HIGH], lo = v[KR_LOW];
        if (v[KR_OPEN] > hi) hi = v[KR_OPEN];
        if (v[KR_CLOSE] > hi) hi = v[KR_CLOSE];
        if (v[KR_OPEN] < lo) lo = v[KR_OPEN];
        if (v[KR_CLOSE] < lo) lo = v[KR_CLOSE];
        int c =
            floored || hi != v[KR_HIGH] || lo != v[KR_LOW] || v[KR_VOLUME] < 0 || v[KR_AMOUNT] < 0;
        v[KR_HIGH] = hi;
        v[KR_LOW] = lo;
        if (v[KR_VOLUME] < 0) v[KR_VOLUME] = 0;
        if (v[KR_AMOUNT] < 0) v[KR_AMOUNT] = 0;
        changed += c;
    }
    return changed;
}

int kr_series_zero_volume(const kr_series *s) {
    if (!s || !s->has_volume) return 1;
    for (int64_t i = 0; i < s->n; i++)
        if (s->values[i * KR_N_FEATURES + KR_VOLUME] != 0.0) return 0;
    return 1;
}

void kr_path_set_free(kr_path_set *s) {
    if (!s) return;
    free(s->timestamps);
    free(s->values);
    free(s->mean);
    free(s);
}

const double *kr_path_set_path(const kr_path_set *s, int p) {
    if (!s || p < 0 || p >= s->paths) return NULL; /* as kr_forecast_path */
    return s->values + (size_t)p * s->pred_len * KR_N_FEATURES;
}

static void zero_volume_rows(double *rows, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        rows[i * KR_N_FEATURES + KR_VOLUME] = 0.0;
        rows[i * KR_N_FEATURES + KR_AMOUNT] = 0.0;
    }
}

kr_status kr_path_set_create(const kr_forecast *const *rounds, int n_rounds, kr_ohlc_mode mode,
                             int zero_volume, kr_path_set **out, kr_error *err) {
    if (!rounds || n_rounds < 1 || !rounds[0] || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "path set: no forecast");
    if (mode != KR_OHLC_RAW && mode != KR_OHLC_CONSISTENT)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "path set: ohlc must be KR_OHLC_RAW or KR_OHLC_CONSISTENT, got %d",
                            (int)mode);
    *out = NULL;
    const int h = kr_forecast_pred_len(rounds[0]);
    int total = 0;
    for (int r = 0; r < n_rounds; r++) {
        if (!rounds[r] || kr_forecast_pred_len(rounds[r]) != h || !kr_forecast_path(rounds[r], 0))
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "path set: round %d has another horizon or no kept paths", r);
        total += kr_forecast_paths(rounds[r]);
    }
    const size_t cell = (size_t)h * KR_N_FEATURES;
    kr_path_set *s = calloc(1, sizeof *s);
    if (!s) return kr_error_set(err, KR_ERR_NOMEM, "path set: out of memory");
    s->pred_len = h;
    s->paths = total;
    s->ohlc = mode;
    s->zero_volume = zero_volume;
    s->timestamps = malloc((size_t)h * sizeof *s->timestamps);
    s->values = malloc((size_t)total * cell * sizeof *s->values);
    s->mean = calloc(cell, sizeof *s->mean);
    if (!s->timestamps || !s->values || !s->mean) {
        kr_path_set_free(s);
        return kr_error_set(err, KR_ERR_NOMEM, "path set: out of memory for %d paths", total);
    }
    memcpy(s->timestamps, kr_forecast_timestamps(rounds[0]), (size_t)h * sizeof *s->timestamps);
    int p = 0;
    for (int r = 0; r < n_rounds; r++)
        for (int k = 0; k < kr_forecast_paths(rounds[r]); k++, p++)
            memcpy(s->values + (size_t)p * cell, kr_forecast_path(rounds[r], k),
                   cell * sizeof *s->values);
    for (size_t i = 0; i < (size_t)total * h; i++) {
        const double *v = s->values + i * KR_N_FEATURES;
        s->raw_inconsistent += v[KR_OPEN] > v[KR_HIGH] || v[KR_CLOSE] > v[KR_HIGH] ||
                               v[KR_OPEN] < v[KR_LOW] || v[KR_CLOSE] < v[KR_LOW];
    }
    for (int q = 0; q < total; q++) {
        const double *v = s->values + (size_t)q * cell;
        int below = 0;
        for (int t = 0; t < h && !below; t++)
            for (int f = KR_OPEN; f <= KR_CLOSE; f++) below |= v[t * KR_N_FEATURES + f] <= 0.0;
        s->nonpositive_paths += below;
    }
    if (zero_volume) zero_volume_rows(s->values, (int64_t)total * h);
    if (mode == KR_OHLC_CONSISTENT)
        s->repaired_rows = kr_ohlc_make_consistent(s->values, (int64_t)total * h);

    if (mode == KR_OHLC_RAW) {
        /* The engine's means (the reference's), weighted by each round's paths. */
        for (int r = 0; r < n_rounds; r++) {
            const double *m = kr_forecast_mean(rounds[r]);
            const double w = n_rounds == 1 ? 1.0 : (double)kr_forecast_paths(rounds[r]) / total;
            for (size_t i = 0; i < cell; i++) s->mean[i] += n_rounds == 1 ? m[i] : w * m[i];
        }
        if (zero_volume) zero_volume_rows(s->mean, h);
    } else {
        for (int q = 0; q < total; q++)
            for (size_t i = 0; i < cell; i++) s->mean[i] += s->values[(size_t)q * cell + i];
        for (size_t i = 0; i < cell; i++) s->mean[i] /= total;
    }
    *out = s;
    return KR_OK;
}

kr_status kr_path_set_quantile(const kr_path_set *s, double q, double *out, kr_error *err) {
    if (!s || !out || !(q >= 0.0 && q <= 1.0))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "path set quantile: bad argument");
    double *col = malloc((size_t)s->paths * sizeof *col);
    if (!col) return kr_error_set(err, KR_ERR_NOMEM, "path set quantile: out of memory");
    const size_t cell = (size_t)s->pred_len * KR_N_FEATURES;
    for (size_t i = 0; i < cell; i++) {
        for (int p = 0; p < s->paths; p++) col[p] = s->values[(size_t)p * cell + i];
        kr_sort_doubles(col, s->paths);
        out[i] = kr_quantile_sorted(col, s->paths, q);
    }
    free(col);
    return KR_OK;
}
