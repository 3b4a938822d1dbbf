/* train/dataset — see dataset.h. */
#include "train/dataset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "model/normalize.h"

typedef struct ds_series {
    char name[KR_DS_NAME_MAX];
    int64_t n;
    int64_t *ts; /* [n] */
    float *x; /* [n][6] raw features, float32 */
    kr_split_range split[KR_N_SPLITS];
} ds_series;

struct kr_dataset {
    kr_dataset_params p;
    int window; /* rows per window */
    ds_series *series;
    int n_series, cap_series;
    /* Windows of each split before series s: prefix[split][s], s in [0, n_series]. */
    int64_t *prefix[KR_N_SPLITS];
};

static const char *const k_feature_names[KR_DS_FEATURES] = { "open",  "high",   "low",
                                                             "close", "volume", "amount" };

kr_status kr_dataset_create(const kr_dataset_params *p, kr_dataset **out, kr_error *err) {
    if (!p || !out) return kr_error_set(err, KR_ERR_INVALID_ARG, "dataset: NULL argument");
    /* One lookback row has no spread to normalise by (inference refuses it too). */
    if (p->lookback < 2 || p->lookback > (1 << 20))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "dataset: lookback_window %d out of range (2 .. %d)", p->lookback,
                            1 << 20);
    if (p->predict < 0 || p->predict > (1 << 20))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "dataset: predict_window %d out of range (0 .. %d)", p->predict,
                            1 << 20);
    if (!(p->train_ratio >= 0 && p->train_ratio <= 1) || !(p->val_ratio >= 0 && p->val_ratio <= 1))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "dataset: train_ratio %g and val_ratio %g must lie in [0, 1]",
                            p->train_ratio, p->val_ratio);
    if (p->train_ratio + p->val_ratio > 1.0 + 1e-9)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "dataset: train_ratio + val_ratio = %g exceeds 1",
                            p->train_ratio + p->val_ratio);
    if (!(p->clip > 0) || !isfinite(p->clip))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "dataset: clip %g must be > 0",
                            (double)p->clip);
    kr_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return kr_error_set(err, KR_ERR_NOMEM, "dataset: out of memory");
    ds->p = *p;
    ds->window = p->lookback + p->predict + 1;
    for (int k = 0; k < KR_N_SPLITS; k++) {
        ds->prefix[k] = calloc(1, sizeof(int64_t));
        if (!ds->prefix[k]) {
            kr_dataset_free(ds);
            return kr_error_set(err, KR_ERR_NOMEM, "dataset: out of memory");
        }
    }
    *out = ds;
    return KR_OK;
}

void kr_dataset_free(kr_dataset *ds) {
    if (!ds) return;
    for (int i = 0; i < ds->n_series; i++) {
        free(ds->series[i].ts);
        free(ds->series[i].x);
    }
    free(ds->series);
    for (int k = 0; k < KR_N_SPLITS; k++) free(ds->prefix[k]);
    free(ds);
}

kr_status kr_series_features_f32(const kr_series *s, const char *what, float *out, kr_error *err) {
    for (int64_t i = 0; i < s->n; i++) {
        const double *v = s->values + (size_t)i * KR_DS_FEATURES;
        double vol = s->has_volume ? v[KR_VOLUME] : 0.0;
        /* pandas: amount = volume x row mean of the four prices, in float64, then float32;
         * no volume: both 0, an amount given or not (the reference's rule, kronos.h). */
        double amt = !s->has_volume  ? 0.0
                     : s->has_amount ? v[KR_AMOUNT]
                                     : vol * ((((v[0] + v[1]) + v[2]) + v[3]) / 4.0);
        const double vals[KR_DS_FEATURES] = { v[0], v[1], v[2], v[3], vol, amt };
        for (int c = 0; c < KR_DS_FEATURES; c++) {
            float f = (float)vals[c];
            if (!isfinite(vals[c]) || !isfinite(f))
                return kr_error_set(err, KR_ERR_INVALID_ARG,
                                    "%s: row %lld, field '%s': %g is not a finite float32", what,
                                    (long long)i, k_feature_names[c], vals[c]);
            out[(size_t)i * KR_DS_FEATURES + (size_t)c] = f;
        }
    }
    return KR_OK;
}

/* Python's int(n * ratio) for the non-negative product of a row count and a ratio. */
static int64_t split_point(int64_t n, double ratio) {
    double v = (double)n * ratio;
    if (v >= (double)n) return n;
    return v <= 0 ? 0 : (int64_t)v;
}

static int64_t windows_in(kr_split_range r, int window) {
    int64_t m = r.end - r.begin;
    return m >= window ? m - window + 1 : 0;
}

kr_status kr_dataset_add(kr_dataset *ds, const char *name, const kr_series *s, kr_error *err) {
    if (!ds || !s || !name) return kr_error_set(err, KR_ERR_INVALID_ARG, "dataset: NULL argument");
    if (s->n < 0 || (s->n > 0 && (!s->timestamps || !s->values)))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: no candles", name);
    if (ds->n_series == INT32_MAX)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "dataset: too many series");
    for (int64_t i = 0; i < s->n; i++) {
        int64_t t = s->timestamps[i];
        if (t > KR_TIME_MAX_ABS || t < -KR_TIME_MAX_ABS)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: row %lld: timestamp out of range",
                                name, (long long)i);
        if (i > 0 && t <= s->timestamps[i - 1])
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "%s: row %lld: timestamps not strictly increasing", name,
                                (long long)i);
    }
    if (ds->n_series == ds->cap_series) {
        int cap = ds->cap_series ? 2 * ds->cap_series : 8;
        ds_series *grown = realloc(ds->series, (size_t)cap * sizeof *grown);
        if (!grown) return kr_error_set(err, KR_ERR_NOMEM, "dataset: out of memory");
        ds->series = grown;
        for (int k = 0; k < KR_N_SPLITS; k++) {
            int64_t *pf = realloc(ds->prefix[k], (size_t)(cap + 1) * sizeof *pf);
            if (!pf) return kr_error_set(err, KR_ERR_NOMEM, "dataset: out of memory");
            ds->prefix[k] = pf;
        }
        ds->cap_series = cap;
    }
    ds_series *e = &ds->series[ds->n_series];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->n = s->n;
    e->ts = malloc((size_t)(s->n ? s->n : 1) * sizeof *e->ts);
    e->x = malloc((size_t)(s->n ? s->n : 1) * KR_DS_FEATURES * sizeof *e->x);
    if (!e->ts || !e->x) {
        free(e->ts);
        free(e->x);
        return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory for %lld rows", name,
                            (long long)s->n);
    }
    if (s->n) memcpy(e->ts, s->timestamps, (size_t)s->n * sizeof *e->ts);
    kr_status st = kr_series_features_f32(s, name, e->x, err);
    if (st != KR_OK) {
        free(e->ts);
        free(e->x);
        return st;
    }
    int64_t train_end = split_point(s->n, ds->p.train_ratio);
    int64_t val_end = split_point(s->n, ds->p.train_ratio + ds->p.val_ratio);
    if (val_end < train_end) val_end = train_end;
    e->split[KR_SPLIT_TRAIN] = (kr_split_range){ 0, train_end };
    e->split[KR_SPLIT_VAL] = (kr_split_range){ train_end, val_end };
    e->split[KR_SPLIT_TEST] = (kr_split_range){ val_end, s->n };
    int idx = ds->n_series++;
    for (int k = 0; k < KR_N_SPLITS; k++)
        ds->prefix[k][idx + 1] = ds->prefix[k][idx] + windows_in(e->split[k], ds->window);
    return KR_OK;
}

int kr_dataset_n_series(const kr_dataset *ds) { return ds->n_series; }
const char *kr_dataset_series_name(const kr_dataset *ds, int i) { return ds->series[i].name; }
int64_t kr_dataset_series_rows(const kr_dataset *ds, int i) { return ds->series[i].n; }
const int64_t *kr_dataset_series_timestamps(const kr_dataset *ds, int i) {
    return ds->series[i].ts;
}
kr_split_range kr_dataset_split_range(const kr_dataset *ds, int i, kr_split split) {
    return ds->series[i].split[split];
}
const kr_dataset_params *kr_dataset_get_params(const kr_dataset *ds) { return &ds->p; }
int kr_dataset_window_rows(const kr_dataset *ds) { return ds->window; }

size_t kr_dataset_bytes(const kr_dataset *ds) {
    size_t b = sizeof *ds + (size_t)ds->cap_series * (sizeof(ds_series) + 3 * sizeof(int64_t));
    for (int i = 0; i < ds->n_series; i++)
        b += (size_t)ds->series[i].n * (sizeof(int64_t) + KR_DS_FEATURES * sizeof(float));
    return b;
}

int64_t kr_dataset_n_windows(const kr_dataset *ds, kr_split split) {
    return ds->prefix[split][ds->n_series];
}

kr_window_ref kr_dataset_window(const kr_dataset *ds, kr_split split, int64_t i) {
    /* The series holding window i: the last one whose prefix is <= i (binary search). */
    const int64_t *pf = ds->prefix[split];
    int lo = 0, hi = ds->n_series - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (pf[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    /* Skip series without windows of this split (equal prefixes). */
    while (lo + 1 < ds->n_series && pf[lo + 1] <= i) lo++;
    return (kr_window_ref){ lo, ds->series[lo].split[split].begin + (i - pf[lo]) };
}

/* (a * b) mod m, exact for any m < 2^63: directly when the product fits in 64 bits, else by
 * doubling (splits that large do not occur in market data, but Python's integers would not
 * overflow either). */
static uint64_t mulmod(uint64_t a, uint64_t b, uint64_t m) {
    a %= m;
    b %= m;
    if (m <= ((uint64_t)1 << 32)) return a * b % m;
    uint64_t r = 0;
    for (; b; b >>= 1) {
        if (b & 1) r = (r + a) % m;
        a = (a * 2) % m;
    }
    return r;
}

int64_t kr_dataset_scramble(int64_t j, int64_t epoch, int64_t windows) {
    if (windows <= 1 || j < 0 || epoch < -1) return 0;
    uint64_t m = (uint64_t)windows;
    return (int64_t)((mulmod((uint64_t)j, 9973, m) + mulmod((uint64_t)epoch + 1, 104729, m)) % m);
}

kr_status kr_dataset_fill(const kr_dataset *ds, kr_window_ref w, float *x, int32_t *stamp,
                          kr_error *err) {
    if (w.series < 0 || w.series >= ds->n_series)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "dataset: no series %d", (int)w.series);
    const ds_series *e = &ds->series[w.series];
    const int rows = ds->window;
    if (w.start < 0 || w.start + rows > e->n)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: no window of %d rows at row %lld",
                            e->name, rows, (long long)w.start);
    const float *raw = e->x + (size_t)w.start * KR_DS_FEATURES;
    if (x) {
        float mean[KR_DS_FEATURES], std[KR_DS_FEATURES];
        kr_status st = kr_norm_stats(raw, ds->p.lookback, mean, std, err);
        if (st != KR_OK) return st;
        for (int c = 0; c < KR_DS_FEATURES; c++)
            if (!isfinite(mean[c]) || !isfinite(std[c]))
                return kr_error_set(err, KR_ERR_INVALID_ARG,
                                    "%s: rows %lld..%lld, field '%s': values too large to "
                                    "normalise in float32 (their spread overflows); scale the "
                                    "column down",
                                    e->name, (long long)w.start,
                                    (long long)(w.start + ds->p.lookback - 1), k_feature_names[c]);
        kr_normalize(raw, rows, mean, std, ds->p.clip, x);
    }
    if (stamp)
        for (int i = 0; i < rows; i++) {
            float f[KR_DS_STAMP_FIELDS];
            kr_time_features(e->ts[w.start + i], f);
            for (int k = 0; k < KR_DS_STAMP_FIELDS; k++)
                stamp[(size_t)i * KR_DS_STAMP_FIELDS + (size_t)k] = (int32_t)f[k];
        }
    return KR_OK;
}
