/*
 * engine/forecast — the public forecasting API: validates a request, turns candles into the
 * reference's float32 inputs (amount fill, statistics, clip, time stamps, future timestamps),
 * hands the job to a context (generate.c via scheduler.c) and turns decoded paths back into candles, mean and quantiles.
 */
#include "engine/forecast_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/sort.h"
#include "base/timeutil.h"
#include "engine/norm_anchor.h"
#include "series/calendar.h"
#include "model/model.h"
#include "model/normalize.h"

#define KR_MAX_PATHS 4096
#define KR_MAX_CONTEXT_LIMIT 65536

kr_forecast_params kr_forecast_default_params(void) {
    kr_forecast_params p;
    memset(&p, 0, sizeof p);
    p.pred_len = 0;
    p.lookback = 0;
    p.max_context = 512;
    p.paths = 1;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 0.9f;
    p.seed = 0;
    p.window = KR_WINDOW_EXACT;
    p.clip = 5.0f;
    p.keep_paths = 1;
    return p;
}

kr_status kr_forecast_check_params(const kr_forecast_params *p, kr_error *err) {
    if (p->max_context < 1 || p->max_context > KR_MAX_CONTEXT_LIMIT)
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "max_context",
                                  "max_context must be in 1..%d, got %d", KR_MAX_CONTEXT_LIMIT,
                                  p->max_context);
    if (p->pred_len < 1 || p->pred_len > p->max_context)
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "pred_len",
                                  "pred_len must be in 1..max_context (%d), got %d", p->max_context,
                                  p->pred_len);
    if (p->paths < 1 || p->paths > KR_MAX_PATHS)
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "paths",
                                  "paths must be in 1..%d, got %d", KR_MAX_PATHS, p->paths);
    if (!(p->temperature > 0.0f) || !isfinite(p->temperature))
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "temperature",
                                  "temperature must be a positive number");
    if (p->top_k < 0)
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "top_k", "top_k must be >= 0, got %d",
                                  p->top_k);
    /* NaN fails both comparisons; above 1 (or +inf) was once clamped to 1 silently. */
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "top_p",
                                  "top_p must be in (0, 1], got %g", (double)p->top_p);
    if (!(p->clip > 0.0f))
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "clip", "clip must be positive");
    if (p->window != KR_WINDOW_EXACT && p->window != KR_WINDOW_ROLLING)
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "window",
                                  "window must be exact or rolling");
    if (p->norm != KR_NORM_EXACT && p->norm != KR_NORM_ANCHORED)
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "norm",
                                  "norm must be exact or anchored");
    if (p->norm_refresh < 0 || p->norm_refresh > (1 << 20))
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "norm_refresh",
                                  "norm_refresh must be in 0..%d, got %d", 1 << 20,
                                  p->norm_refresh);
    if (p->lookback < 0)
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "lookback", "lookback must be >= 0");
    if (p->prenormalized != 0 && p->prenormalized != 1)
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "prenormalized",
                                  "prenormalized must be 0 or 1, got %d", p->prenormalized);
    if (p->prenormalized && p->norm == KR_NORM_ANCHORED)
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "norm",
                                  "norm anchored needs raw candles (prenormalized is set)");
    if (p->first_path < 0 || p->first_path > INT32_MAX - p->paths)
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "first_path",
                                  "first_path must be in 0..%d (2^31 - 1 - paths), got %d",
                                  INT32_MAX - p->paths, p->first_path);
    return KR_OK;
}

typedef kr_prepared prepared;

static void prepared_free(prepared *pr) {
    free(pr->x);
    free(pr->x_norm);
    free(pr->stamps);
    free(pr->future);
    memset(pr, 0, sizeof *pr);
}

static kr_status prepare(const kr_series *s, int index, int n_series, const kr_forecast_params *p,
                         kr_norm_anchors *anchors, prepared *pr, kr_error *err) {
    char where[32] = "";
    if (n_series > 1) snprintf(where, sizeof where, "series %d: ", index);
    if (!s || !s->timestamps || !s->values)
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "candles", "%sno candles given", where);
    if (s->n < 2)
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "candles",
                                  "%stoo few rows: %lld (need at least 2)", where, (long long)s->n);
    int64_t L = p->lookback > 0 ? p->lookback : (s->n < p->max_context ? s->n : p->max_context);
    if (L > s->n)
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "lookback",
                                  "%slookback %lld exceeds the %lld rows given", where,
                                  (long long)L, (long long)s->n);
    /* One row has no spread to normalise by: the model would see only zeros. */
    if (L < 2 || L > (1 << 20))
        return kr_error_set_field(err, KR_ERR_INVALID_ARG, "lookback",
                                  "%sbad lookback %lld (need 2 .. %d rows)", where, (long long)L,
                                  1 << 20);
    /* Anchored: the window may reach back to its anchor, the statistics cover the anchor's
     * rows only (norm_anchor.h). */
    int64_t stat_rows = L;
    if (p->norm == KR_NORM_ANCHORED && anchors) {
        int window = 0, stats = 0;
        kr_norm_anchor_choose(anchors, s->timestamps, s->values, s->n, (int)L, p->max_context,
                              p->norm_refresh, &window, &stats);
        L = window;
        stat_rows = stats;
    }
    int64_t first = s->n - L;
    int P = p->pred_len;
    pr->L = (int)L;
    pr->norm_rows = (int)stat_rows;
    pr->x = malloc((size_t)L * 6 * sizeof(float));
    pr->x_norm = malloc((size_t)L * 6 * sizeof(float));
    pr->stamps = malloc((size_t)(L + P) * 5 * sizeof(float));
    pr->future = malloc((size_t)P * sizeof(int64_t));
    if (!pr->x || !pr->x_norm || !pr->stamps || !pr->future)
        return kr_error_set(err, KR_ERR_NOMEM, "%sout of memory for %lld rows", where,
                            (long long)L);
    static const char *names[6] = { "open", "high", "low", "close", "volume", "amount" };
    for (int64_t i = 0; i < L; i++) {
        const double *v = s->values + (size_t)(first + i) * 6;
        int64_t row = first + i;
        /* Whether or not future_timestamps are given (the calendar checks only the history
         * it infers from), every stamp the model sees gets calendar fields. */
        if (s->timestamps[row] > KR_TIME_MAX_ABS || s->timestamps[row] < -KR_TIME_MAX_ABS)
            return kr_error_set_field(err, KR_ERR_INVALID_ARG, "candles",
                                      "%srow %lld: timestamp %lld is out of range (|t| <= %lld s, "
                                      "about 317,000 years either side of 1970)",
                                      where, (long long)row, (long long)s->timestamps[row],
                                      (long long)KR_TIME_MAX_ABS);
        if (i > 0 && s->timestamps[row] <= s->timestamps[row - 1])
            return kr_error_set_field(err, KR_ERR_INVALID_ARG, "candles",
                                      "%srow %lld: timestamps not strictly increasing", where,
                                      (long long)row);
        double vol = s->has_volume ? v[KR_VOLUME] : 0.0;
        /* pandas: amount = volume × row mean of the four prices, in float64, then float32. */
        /* No volume: both are 0, an amount given or not (the reference's rule, kronos.h). */
        double amt = !s->has_volume  ? 0.0
                     : s->has_amount ? v[KR_AMOUNT]
                                     : vol * ((((v[0] + v[1]) + v[2]) + v[3]) / 4.0);
        double vals[6] = { v[0], v[1], v[2], v[3], vol, amt };
        for (int c = 0; c < 6; c++) {
            if (!isfinite(vals[c]))
                return kr_error_set_field(err, KR_ERR_INVALID_ARG, "candles",
                                          "%srow %lld, field '%s': not a finite number", where,
                                          (long long)row, names[c]);
            pr->x[i * 6 + c] = (float)vals[c];
            /* A derived amount (volume x mean price) can pass float32's range. */
            if (!isfinite(pr->x[i * 6 + c]))
                return kr_error_set_field(err, KR_ERR_INVALID_ARG, "candles",
                                          "%srow %lld, field '%s': %g is out of float32 range",
                                          where, (long long)row, names[c], vals[c]);
        }
    }
    kr_status st = KR_OK;
    if (p->prenormalized) {
        /* Normalised by the caller: only the reference's clip (torch.clip, as kr_normalize
         * clips), and nothing to undo at the end. */
        pr->prenormalized = 1;
        for (int64_t k = 0; k < L * 6; k++) {
            float v = pr->x[k];
            pr->x_norm[k] = v < -p->clip ? -p->clip : v > p->clip ? p->clip : v;
        }
    } else {
        st = kr_norm_stats(pr->x, stat_rows, pr->mean, pr->std, err);
        if (st != KR_OK) return st;
        /* The reference normalises in float32: squared deviations past ~1.8e19 overflow, and
         * the model would be fed infinities or NaNs. */
        for (int c = 0; c < 6; c++)
            if (!isfinite(pr->mean[c]) || !isfinite(pr->std[c]))
                return kr_error_set(err, KR_ERR_INVALID_ARG,
                                    "%sfield '%s': values too large to normalise in float32 "
                                    "(their spread over the %lld lookback rows overflows); "
                                    "scale the column down",
                                    where, names[c], (long long)L);
        kr_normalize(pr->x, L, pr->mean, pr->std, p->clip, pr->x_norm);
    }

    if (s->future_timestamps) {
        int64_t prev = s->timestamps[s->n - 1];
        for (int i = 0; i < P; prev = s->future_timestamps[i++]) {
            if (s->future_timestamps[i] > KR_TIME_MAX_ABS ||
                s->future_timestamps[i] < -KR_TIME_MAX_ABS)
                return kr_error_set_field(
                    err, KR_ERR_INVALID_ARG, "future_timestamps",
                    "%sfuture timestamp %d: %lld is out of range (|t| <= %lld s, "
                    "about 317,000 years either side of 1970)",
                    where, i + 1, (long long)s->future_timestamps[i], (long long)KR_TIME_MAX_ABS);
            if (s->future_timestamps[i] <= prev) {
                char a[32], b[32];
                return kr_error_set_field(
                    err, KR_ERR_INVALID_ARG, "future_timestamps",
                    "%sfuture timestamp %d (%s) is not after %s (%s)", where, i + 1,
                    kr_format_timestamp(s->future_timestamps[i], 0, a, sizeof a),
                    i == 0 ? "the last candle" : "the previous one",
                    kr_format_timestamp(prev, 0, b, sizeof b));
            }
        }
        memcpy(pr->future, s->future_timestamps, (size_t)P * sizeof(int64_t));
    } else {
        st = kr_calendar_future(s->timestamps, s->n, P, pr->future, NULL, err);
        if (st != KR_OK) {
            kr_error_prefix(err, "%sinferring future timestamps", where);
            return st;
        }
    }
    for (int64_t i = 0; i < L; i++) kr_time_features(s->timestamps[first + i], pr->stamps + i * 5);
    for (int i = 0; i < P; i++) kr_time_features(pr->future[i], pr->stamps + (L + i) * 5);
    return KR_OK;
}

static kr_forecast *result_alloc(int P, int paths, int L, int keep) {
    kr_forecast *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->pred_len = P;
    f->paths = paths;
    f->lookback = L;
    f->timestamps = malloc((size_t)P * sizeof(int64_t));
    f->mean = malloc((size_t)P * 6 * sizeof(double));
    f->gen_s1 = malloc((size_t)paths * P * sizeof(int32_t));
    f->gen_s2 = malloc((size_t)paths * P * sizeof(int32_t));
    f->hist_s1 = malloc((size_t)L * sizeof(int32_t));
    f->hist_s2 = malloc((size_t)L * sizeof(int32_t));
    f->pred_norm = malloc((size_t)paths * P * 6 * sizeof(float));
    if (keep) f->path_values = malloc((size_t)paths * P * 6 * sizeof(double));
    if (!f->timestamps || !f->mean || !f->gen_s1 || !f->gen_s2 || !f->hist_s1 || !f->hist_s2 ||
        !f->pred_norm || (keep && !f->path_values)) {
        kr_forecast_free(f);
        return NULL;
    }
    return f;
}

void kr_forecast_free(kr_forecast *f) {
    if (!f) return;
    free(f->timestamps);
    free(f->mean);
    free(f->path_values);
    free(f->gen_s1);
    free(f->gen_s2);
    free(f->hist_s1);
    free(f->hist_s2);
    free(f->pred_norm);
    free(f);
}

/* Mean over paths in normalised space (float32, path order), then denormalised — what the
 * reference returns; and each path denormalised on its own. */
static kr_status finish(kr_forecast *f, const prepared *pr, kr_error *err) {
    int P = f->pred_len, paths = f->paths;
    float *acc = calloc((size_t)P * 6, sizeof(float));
    float *den = malloc((size_t)P * 6 * sizeof(float));
    if (!acc || !den) {
        free(acc);
        free(den);
        return kr_error_set(err, KR_ERR_NOMEM, "forecast: out of memory for results");
    }
    for (int p = 0; p < paths; p++)
        for (int k = 0; k < P * 6; k++) acc[k] += f->pred_norm[(size_t)p * P * 6 + k];
    for (int k = 0; k < P * 6; k++) acc[k] /= (float)paths;
    if (pr->prenormalized)
        memcpy(den, acc, (size_t)P * 6 * sizeof *den);
    else
        kr_denormalize(acc, P, pr->mean, pr->std, den);
    for (int k = 0; k < P * 6; k++) f->mean[k] = den[k];
    if (f->path_values)
        for (int p = 0; p < paths; p++) {
            const float *norm = f->pred_norm + (size_t)p * P * 6;
            if (pr->prenormalized)
                memcpy(den, norm, (size_t)P * 6 * sizeof *den);
            else
                kr_denormalize(norm, P, pr->mean, pr->std, den);
            for (int k = 0; k < P * 6; k++) f->path_values[(size_t)p * P * 6 + k] = den[k];
        }
    free(acc);
    free(den);
    return KR_OK;
}

kr_status kr_forecast_job_prepare(kr_forecast_job *j, const kr_series *series, int index,
                                  int n_series, const kr_forecast_params *params, kr_error *err) {
    return kr_forecast_job_prepare_with(j, series, index, n_series, params, NULL, err);
}

kr_status kr_forecast_job_prepare_with(kr_forecast_job *j, const kr_series *series, int index,
                                       int n_series, const kr_forecast_params *params,
                                       kr_norm_anchors *anchors, kr_error *err) {
    memset(j, 0, sizeof *j);
    kr_status st = kr_forecast_check_params(params, err);
    if (st != KR_OK) return st;
    j->params = *params;
    if ((st = prepare(series, index, n_series, &j->params, anchors, &j->pr, err)) != KR_OK) {
        prepared_free(&j->pr);
        return st;
    }
    j->in.hist_len = j->pr.L;
    j->in.x_norm = j->pr.x_norm;
    j->in.stamps = j->pr.stamps;
    j->in.seed = j->params.seed;
    return KR_OK;
}

kr_status kr_forecast_job_alloc_result(kr_forecast_job *j, kr_error *err) {
    const kr_forecast_params *p = &j->params;
    j->result = result_alloc(p->pred_len, p->paths, j->pr.L, p->keep_paths);
    if (!j->result) {
        prepared_free(&j->pr);
        return kr_error_set(err, KR_ERR_NOMEM, "forecast: out of memory for results");
    }
    j->out.hist_s1 = j->result->hist_s1;
    j->out.hist_s2 = j->result->hist_s2;
    j->out.gen_s1 = j->result->gen_s1;
    j->out.gen_s2 = j->result->gen_s2;
    j->out.pred_norm = j->result->pred_norm;
    return KR_OK;
}

kr_status kr_forecast_job_init(kr_forecast_job *j, const kr_series *series, int index, int n_series,
                               const kr_forecast_params *params, kr_error *err) {
    kr_status st = kr_forecast_job_prepare(j, series, index, n_series, params, err);
    return st != KR_OK ? st : kr_forecast_job_alloc_result(j, err);
}

kr_status kr_forecast_job_finish(kr_forecast_job *j, double seconds_total, kr_error *err) {
    kr_forecast *f = j->result;
    memcpy(f->timestamps, j->pr.future, (size_t)j->params.pred_len * sizeof(int64_t));
    memcpy(f->x_mean, j->pr.mean, sizeof f->x_mean);
    f->norm_rows = j->pr.norm_rows;
    memcpy(f->x_std, j->pr.std, sizeof f->x_std);
    kr_status st = finish(f, &j->pr, err);
    if (st != KR_OK) return st;
    f->stats.prefill_tokens = j->out.prefill_tokens;
    f->stats.cached_tokens = j->out.cached_tokens;
    f->stats.decode_tokens = j->out.decode_tokens;
    f->stats.window_recomputes = j->out.window_recomputes;
    f->stats.reused_tokens = j->out.reused_tokens;
    f->stats.kv_bytes = j->out.kv_bytes;
    f->stats.seconds_prefill = j->out.seconds_prefill;
    f->stats.seconds_decode = j->out.seconds_decode;
    f->stats.seconds_tokenizer = j->out.seconds_tokenizer;
    f->stats.seconds_total = seconds_total;
    kr_engine_profile_export(&j->out.profile, &f->stats.profile);
    return KR_OK;
}

void kr_forecast_job_release(kr_forecast_job *j) {
    prepared_free(&j->pr);
    kr_forecast_free(j->result);
    j->result = NULL;
}

size_t kr_forecast_bytes(const kr_forecast *f) {
    if (!f) return 0;
    /* What result_alloc allocates. */
    const size_t P = (size_t)f->pred_len, rows = (size_t)f->paths * P;
    return sizeof *f + P * (sizeof(int64_t) + 6 * sizeof(double)) + rows * 2 * sizeof(int32_t) +
           (size_t)f->lookback * 2 * sizeof(int32_t) + rows * 6 * sizeof(float) +
           (f->path_values ? rows * 6 * sizeof(double) : 0);
}

int kr_forecast_pred_len(const kr_forecast *f) { return f ? f->pred_len : 0; }
int kr_forecast_paths(const kr_forecast *f) { return f ? f->paths : 0; }
int kr_forecast_lookback(const kr_forecast *f) { return f ? f->lookback : 0; }
int kr_forecast_norm_rows(const kr_forecast *f) { return f ? f->norm_rows : 0; }
const int32_t *kr_forecast_history_s1(const kr_forecast *f) { return f ? f->hist_s1 : NULL; }
const int32_t *kr_forecast_history_s2(const kr_forecast *f) { return f ? f->hist_s2 : NULL; }
const int64_t *kr_forecast_timestamps(const kr_forecast *f) { return f ? f->timestamps : NULL; }
const double *kr_forecast_mean(const kr_forecast *f) { return f ? f->mean : NULL; }

const double *kr_forecast_path(const kr_forecast *f, int path) {
    if (!f || !f->path_values || path < 0 || path >= f->paths) return NULL;
    return f->path_values + (size_t)path * f->pred_len * 6;
}
const int32_t *kr_forecast_path_s1(const kr_forecast *f, int path) {
    if (!f || path < 0 || path >= f->paths) return NULL;
    return f->gen_s1 + (size_t)path * f->pred_len;
}
const int32_t *kr_forecast_path_s2(const kr_forecast *f, int path) {
    if (!f || path < 0 || path >= f->paths) return NULL;
    return f->gen_s2 + (size_t)path * f->pred_len;
}

kr_status kr_forecast_quantile(const kr_forecast *f, double q, double *out, kr_error *err) {
    if (!f || !out) return kr_error_set(err, KR_ERR_INVALID_ARG, "quantile: NULL argument");
    if (!(q >= 0.0 && q <= 1.0))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "quantile %g not in [0, 1]", q);
    if (!f->path_values)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "quantile: paths were not kept");
    double *col = malloc((size_t)f->paths * sizeof(double));
    if (!col) return kr_error_set(err, KR_ERR_NOMEM, "quantile: out of memory");
    int P = f->pred_len;
    for (int i = 0; i < P; i++)
        for (int c = 0; c < 6; c++) {
            for (int p = 0; p < f->paths; p++) col[p] = f->path_values[((size_t)p * P + i) * 6 + c];
            kr_sort_doubles(col, f->paths);
            out[i * 6 + c] = kr_quantile_sorted(col, f->paths, q);
        }
    free(col);
    return KR_OK;
}

void kr_forecast_get_stats(const kr_forecast *f, kr_forecast_stats *stats) {
    if (f && stats) *stats = f->stats;
}
