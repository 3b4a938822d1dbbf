/*
 * analyst/calibrate — walk-forward calibration windows (see calibrate.h for the figures).
 *
 * All windows of one symbol go to the engine as one batch: the histories differ in length,
 * which the batch API allows, and each result equals what a single call would give, so the
 * batch is purely a speed-up.
 */
#include "analyst/calibrate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/analyze.h"
#include "analyst/stats.h"
#include "base/error.h"

/* Fewer history rows than this and the model's normalisation statistics (and the naive
 * band's return sample) are too noisy to score anything. */
#define KR_CALIB_MIN_HISTORY 32
#define KR_CALIB_MIN_RETURNS 10

int kr_analyst_lookback(int64_t rows, int horizon, int max_context, int requested) {
    int64_t cap = requested > 0 ? requested : (int64_t)max_context - horizon;
    if (cap < 1) cap = 1;
    return (int)(rows < cap ? rows : cap);
}

int kr_calibration_min_lookback(int horizon) { return horizon + KR_CALIB_MIN_RETURNS; }

int64_t kr_calibration_min_rows(int windows, int horizon) {
    int64_t hist = horizon + KR_CALIB_MIN_RETURNS;
    if (hist < KR_CALIB_MIN_HISTORY) hist = KR_CALIB_MIN_HISTORY;
    return hist + (int64_t)windows * horizon;
}

kr_status kr_calibration_plan(const kr_candles *c, int windows, int horizon, int max_context,
                              int requested_lookback, kr_series *series, kr_error *err) {
    if (!c || !series || windows < 1 || horizon < 1)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "calibration: need a history, windows >= 1 and horizon >= 1");
    int64_t need = kr_calibration_min_rows(windows, horizon);
    if (c->n < need)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "calibration: %d windows of %d bars need at least %lld rows, the "
                            "history has %lld",
                            windows, horizon, (long long)need, (long long)c->n);
    for (int j = 0; j < windows; j++) {
        int64_t end = c->n - (int64_t)(windows - j) * horizon;
        int L = kr_analyst_lookback(end, horizon, max_context, requested_lookback);
        series[j] = kr_candles_slice(c, end - L, L);
        series[j].future_timestamps = c->timestamps + end;
    }
    return KR_OK;
}

/* Agresti-Coull standard error of a rate p over n windows (as the report's probabilities). */
static double window_prop_se(double p, int n) {
    const double pt = (p * n + 2.0) / (n + 4.0);
    return sqrt(pt * (1.0 - pt) / (n + 4.0));
}

static int direction_hit(double predicted, double realized) {
    return kr_stat_sign(predicted) == kr_stat_sign(realized);
}

kr_status kr_calibration_score(const kr_candles *c, int windows, int horizon,
                               const kr_series *series, kr_forecast *const *fc,
                               kr_calibration **out, kr_error *err) {
    if (!c || !series || !fc || !out || windows < 1 || horizon < 1)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "calibration score: bad argument");
    *out = NULL;
    const int h = horizon;
    kr_calibration *cal = calloc(1, sizeof *cal);
    double *p10 = malloc((size_t)h * KR_N_FEATURES * sizeof *p10);
    double *p90 = malloc((size_t)h * KR_N_FEATURES * sizeof *p90);
    double *rets = NULL;
    kr_status st = KR_OK;
    if (!cal || !p10 || !p90) goto nomem;
    cal->windows = windows;
    cal->horizon = h;
    cal->window = calloc((size_t)windows, sizeof *cal->window);
    cal->model.coverage_by_step = calloc((size_t)h, sizeof(double));
    cal->naive.coverage_by_step = calloc((size_t)h, sizeof(double));
    if (!cal->window || !cal->model.coverage_by_step || !cal->naive.coverage_by_step) goto nomem;

    double m_cover = 0, n_cover = 0, m_ape = 0, n_ape = 0, m_hit = 0, n_hit = 0;
    /* Per-window sums of the MAPE, for its spread across windows. */
    double m_ape_w = 0, n_ape_w = 0, m_ape_w2 = 0, n_ape_w2 = 0;
    for (int j = 0; j < windows; j++) {
        const kr_series *s = &series[j];
        const kr_forecast *f = fc[j];
        if (!f || kr_forecast_pred_len(f) != h) {
            st = kr_error_set(err, KR_ERR_INVALID_ARG,
                              "calibration window %d: missing forecast or wrong horizon", j + 1);
            goto fail;
        }
        /* Row index in c of the window's first realised bar. */
        int64_t end = (s->timestamps - c->timestamps) + s->n;
        if (end < 2 || end + h > c->n) {
            st = kr_error_set(err, KR_ERR_INVALID_ARG,
                              "calibration window %d: not a view of this history", j + 1);
            goto fail;
        }
        if ((st = kr_forecast_quantile(f, 0.1, p10, err)) != KR_OK ||
            (st = kr_forecast_quantile(f, 0.9, p90, err)) != KR_OK)
            goto fail;
        const double *mean = kr_forecast_mean(f);
        const double *hist_close = s->values + KR_CLOSE;
        const int64_t L = s->n;
        const double last = hist_close[(L - 1) * KR_N_FEATURES];
        const double m_ape0 = m_ape, n_ape0 = n_ape;

        /* Naive band: s-bar returns inside the lookback, for s = 1..h. */
        free(rets);
        rets = malloc((size_t)L * sizeof *rets);
        if (!rets) goto nomem;
        kr_calib_window *w = &cal->window[j];
        w->history_end_ts = s->timestamps[L - 1];
        w->lookback = (int)L;
        w->last_close = last;
        for (int k = 0; k < h; k++) {
            const double real = c->values[(end + k) * KR_N_FEATURES + KR_CLOSE];
            int64_t nr = 0;
            for (int64_t i = 0; i + k + 1 < L; i++)
                rets[nr++] =
                    hist_close[(i + k + 1) * KR_N_FEATURES] / hist_close[i * KR_N_FEATURES] - 1.0;
            if (nr < 1) {
                st = kr_error_set(err, KR_ERR_INVALID_ARG,
                                  "calibration window %d: lookback %lld too short for %d-bar "
                                  "returns",
                                  j + 1, (long long)L, k + 1);
                goto fail;
            }
            double drift = kr_stat_mean(rets, nr);
            kr_stat_sort(rets, nr);
            double nlo = last * (1.0 + kr_stat_quantile_sorted(rets, nr, 0.1));
            double nhi = last * (1.0 + kr_stat_quantile_sorted(rets, nr, 0.9));
            double mlo = p10[k * KR_N_FEATURES + KR_CLOSE], mhi = p90[k * KR_N_FEATURES + KR_CLOSE];
            double mpt = mean[k * KR_N_FEATURES + KR_CLOSE];
            int m_in = real >= mlo && real <= mhi, n_in = real >= nlo && real <= nhi;
            cal->model.coverage_by_step[k] += m_in;
            cal->naive.coverage_by_step[k] += n_in;
            m_cover += m_in;
            n_cover += n_in;
            m_ape += fabs(mpt - real) / real;
            n_ape += fabs(last - real) / real;
            if (k == h - 1) {
                w->realized_close = real;
                w->model_close = mpt;
                w->model_p10 = mlo;
                w->model_p90 = mhi;
                w->naive_p10 = nlo;
                w->naive_p90 = nhi;
                w->naive_drift = drift;
                m_hit += direction_hit(mpt - last, real - last);
                n_hit += direction_hit(drift, real - last);
            }
        }
        const double mw = (m_ape - m_ape0) / h, nw = (n_ape - n_ape0) / h;
        m_ape_w += mw;
        m_ape_w2 += mw * mw;
        n_ape_w += nw;
        n_ape_w2 += nw * nw;
    }
    for (int k = 0; k < h; k++) {
        cal->model.coverage_by_step[k] /= windows;
        cal->naive.coverage_by_step[k] /= windows;
    }
    double cells = (double)windows * h;
    cal->model.coverage = m_cover / cells;
    cal->naive.coverage = n_cover / cells;
    cal->model.mape = m_ape / cells;
    cal->naive.mape = n_ape / cells;
    cal->model.direction_hit_rate = m_hit / windows;
    cal->naive.direction_hit_rate = n_hit / windows;
    kr_calib_scores *const sc[2] = { &cal->model, &cal->naive };
    const double ape_sum[2] = { m_ape_w, n_ape_w }, ape_sum2[2] = { m_ape_w2, n_ape_w2 };
    for (int i = 0; i < 2; i++) {
        sc[i]->coverage_se = window_prop_se(sc[i]->coverage, windows);
        sc[i]->direction_hit_rate_se = window_prop_se(sc[i]->direction_hit_rate, windows);
        const double mean = ape_sum[i] / windows;
        const double var =
            windows >= 2 ? (ape_sum2[i] - windows * mean * mean) / (windows - 1) : NAN;
        sc[i]->mape_se = windows >= 2 ? sqrt(var > 0 ? var : 0) / sqrt(windows) : NAN;
    }
    free(p10);
    free(p90);
    free(rets);
    *out = cal;
    return KR_OK;
nomem:
    st = kr_error_set(err, KR_ERR_NOMEM, "calibration: out of memory");
fail:
    free(p10);
    free(p90);
    free(rets);
    kr_calibration_free(cal);
    return st;
}

kr_status kr_calibrate(kr_context *ctx, const kr_candles *c, int windows,
                       const kr_forecast_params *params, int requested_lookback,
                       const struct kr_analyst_request *request, kr_calibration **out,
                       kr_error *err) {
    if (!ctx || !c || !params || !out || windows < 1)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "calibrate: bad argument");
    *out = NULL;
    kr_series *series = calloc((size_t)windows, sizeof *series);
    kr_forecast **fc = calloc((size_t)windows, sizeof *fc);
    kr_status st;
    if (!series || !fc) {
        st = kr_error_set(err, KR_ERR_NOMEM, "calibrate: out of memory");
        goto done;
    }
    kr_forecast_params p = *params;
    p.keep_paths = 1;
    p.lookback = 0; /* each view holds exactly its lookback rows */
    if ((st = kr_calibration_plan(c, windows, p.pred_len, p.max_context, requested_lookback, series,
                                  err)) != KR_OK)
        goto done;
    if ((st = kr_analyst_run_batch(ctx, request, series, windows, &p, fc, err)) != KR_OK) {
        kr_error_prefix(err, "calibration");
        goto done;
    }
    st = kr_calibration_score(c, windows, p.pred_len, series, fc, out, err);
done:
    if (fc)
        for (int j = 0; j < windows; j++) kr_forecast_free(fc[j]);
    free(fc);
    free(series);
    return st;
}

void kr_calibration_free(kr_calibration *cal) {
    if (!cal) return;
    free(cal->model.coverage_by_step);
    free(cal->naive.coverage_by_step);
    free(cal->window);
    free(cal);
}
