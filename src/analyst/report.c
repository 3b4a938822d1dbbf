/*
 * analyst/report — turns a history and a many-path forecast into the report's numbers (see
 * report.h for every definition). Everything is computed from the forecast's kept paths, so
 * the figures are statements about the model's sample distribution, nothing more.
 */
#include "analyst/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/stats.h"
#include "analyst/summary.h"
#include "base/error.h"

double kr_path_return(const double *closes, int horizon, double last_close) {
    return closes[horizon - 1] / last_close - 1.0;
}

double kr_path_max_drawdown(const double *closes, int horizon, double last_close) {
    double peak = last_close, dd = 0.0;
    for (int t = 0; t < horizon; t++) {
        if (closes[t] > peak) peak = closes[t];
        double d = (peak - closes[t]) / peak;
        if (d > dd) dd = d;
    }
    return dd;
}

double kr_path_volatility(const double *closes, int horizon, double last_close) {
    if (horizon < 2) return NAN;
    double *r = malloc((size_t)horizon * sizeof *r);
    if (!r) return NAN;
    double prev = last_close;
    for (int t = 0; t < horizon; t++) {
        r[t] = log(closes[t] / prev);
        prev = closes[t];
    }
    double sd = kr_stat_std(r, horizon, 1);
    free(r);
    return sd;
}

void kr_report_free(kr_report *r) {
    if (!r) return;
    free(r->chart_ts);
    free(r->chart_values);
    free(r->fc_ts);
    free(r->fc_mean);
    free(r->fc_p10);
    free(r->fc_p50);
    free(r->fc_p90);
    kr_calibration_free(r->calibration);
    kr_summary_free(r->summary, r->n_summary);
    free(r);
}

/* Fills the horizon statistics from the kept paths. */
static kr_status horizon_stats(kr_report *r, const kr_forecast *f, const kr_candles *c,
                               kr_error *err) {
    const int h = r->horizon, n = r->paths;
    double *ret = malloc((size_t)n * sizeof *ret), *dd = malloc((size_t)n * sizeof *dd);
    double *vol = malloc((size_t)n * sizeof *vol), *cl = malloc((size_t)h * sizeof *cl);
    kr_status st = KR_OK;
    if (!ret || !dd || !vol || !cl) {
        st = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory for statistics", r->symbol);
        goto done;
    }
    int up = 0, vol_above = 0, vol_known = 0;
    r->realized_vol_h = NAN;
    {
        /* Realised volatility over the last h bars (h log returns, h + 1 closes): the same
         * number of bars as the forecast, so the two are comparable. */
        double *hist = malloc((size_t)(h + 1) * sizeof *hist);
        if (!hist) {
            st = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", r->symbol);
            goto done;
        }
        if (c->n >= h + 1) {
            for (int i = 0; i <= h; i++)
                hist[i] = c->values[(c->n - h - 1 + i) * KR_N_FEATURES + KR_CLOSE];
            r->realized_vol_h = kr_ind_realized_vol(hist, h + 1, h);
        }
        free(hist);
    }
    for (int p = 0; p < n; p++) {
        const double *path = kr_forecast_path(f, p);
        for (int t = 0; t < h; t++) cl[t] = path[t * KR_N_FEATURES + KR_CLOSE];
        ret[p] = kr_path_return(cl, h, r->last_close);
        dd[p] = kr_path_max_drawdown(cl, h, r->last_close);
        vol[p] = kr_path_volatility(cl, h, r->last_close);
        up += cl[h - 1] > r->last_close;
        if (!isnan(vol[p]) && !isnan(r->realized_vol_h)) {
            vol_known++;
            vol_above += vol[p] > r->realized_vol_h;
        }
    }
    r->prob_up = (double)up / n;
    r->expected_return = kr_stat_mean(ret, n);
    r->return_std = kr_stat_std(ret, n, 1);
    r->forecast_vol = h >= 2 ? kr_stat_mean(vol, n) : NAN;
    r->prob_vol_above = vol_known == n ? (double)vol_above / n : NAN;
    kr_stat_sort(ret, n);
    r->return_p10 = kr_stat_quantile_sorted(ret, n, 0.10);
    r->return_p50 = kr_stat_quantile_sorted(ret, n, 0.50);
    r->return_p90 = kr_stat_quantile_sorted(ret, n, 0.90);
    double q05 = kr_stat_quantile_sorted(ret, n, 0.05);
    r->var95 = -q05;
    /* Expected shortfall: the mean of the tail at or below the 5% quantile; the worst path
     * is always in it, so it is defined for any number of paths. */
    double tail = 0.0;
    int n_tail = 0;
    for (int p = 0; p < n && (ret[p] <= q05 || p == 0); p++) {
        tail += ret[p];
        n_tail++;
    }
    r->es95 = -tail / n_tail;
    kr_stat_sort(dd, n);
    r->drawdown_mean = kr_stat_mean(dd, n);
    r->drawdown_p50 = kr_stat_quantile_sorted(dd, n, 0.50);
    r->drawdown_p90 = kr_stat_quantile_sorted(dd, n, 0.90);
done:
    free(ret);
    free(dd);
    free(vol);
    free(cl);
    return st;
}

kr_status kr_report_build(const char *symbol, const char *interval, const kr_candles *c,
                          int lookback, const kr_forecast *f, const kr_report_meta *meta,
                          kr_report **out, kr_error *err) {
    if (!symbol || !c || !f || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "report: NULL argument");
    *out = NULL;
    if (c->n < 2)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "report %s: need at least 2 history rows",
                            symbol);
    const int h = kr_forecast_pred_len(f), n = kr_forecast_paths(f);
    if (h < 1 || n < 1 || !kr_forecast_path(f, 0))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "report %s: the forecast must keep its paths (keep_paths)", symbol);
    kr_report *r = calloc(1, sizeof *r);
    if (!r) return kr_error_set(err, KR_ERR_NOMEM, "report %s: out of memory", symbol);
    snprintf(r->symbol, sizeof r->symbol, "%s", symbol);
    snprintf(r->interval, sizeof r->interval, "%s", interval ? interval : "");
    if (meta) r->meta = *meta;
    kr_forecast_get_stats(f, &r->timing);
    r->date_only = c->date_only;
    r->rows_available = c->n;
    r->first_ts = c->timestamps[0];
    r->lookback = lookback;
    r->last_ts = c->timestamps[c->n - 1];
    r->last_close = c->values[(c->n - 1) * KR_N_FEATURES + KR_CLOSE];
    r->horizon = h;
    r->paths = n;

    kr_status st;
    r->n_chart = (int)(c->n < KR_REPORT_CHART_BARS ? c->n : KR_REPORT_CHART_BARS);
    const size_t cell = (size_t)h * KR_N_FEATURES * sizeof(double);
    r->chart_ts = malloc((size_t)r->n_chart * sizeof *r->chart_ts);
    r->chart_values = malloc((size_t)r->n_chart * KR_N_FEATURES * sizeof *r->chart_values);
    r->fc_ts = malloc((size_t)h * sizeof *r->fc_ts);
    r->fc_mean = malloc(cell);
    r->fc_p10 = malloc(cell);
    r->fc_p50 = malloc(cell);
    r->fc_p90 = malloc(cell);
    if (!r->chart_ts || !r->chart_values || !r->fc_ts || !r->fc_mean || !r->fc_p10 || !r->fc_p50 ||
        !r->fc_p90) {
        st = kr_error_set(err, KR_ERR_NOMEM, "report %s: out of memory", symbol);
        goto fail;
    }
    int64_t first = c->n - r->n_chart;
    memcpy(r->chart_ts, c->timestamps + first, (size_t)r->n_chart * sizeof *r->chart_ts);
    memcpy(r->chart_values, c->values + first * KR_N_FEATURES,
           (size_t)r->n_chart * KR_N_FEATURES * sizeof *r->chart_values);
    memcpy(r->fc_ts, kr_forecast_timestamps(f), (size_t)h * sizeof *r->fc_ts);
    memcpy(r->fc_mean, kr_forecast_mean(f), cell);
    if ((st = kr_forecast_quantile(f, 0.1, r->fc_p10, err)) != KR_OK ||
        (st = kr_forecast_quantile(f, 0.5, r->fc_p50, err)) != KR_OK ||
        (st = kr_forecast_quantile(f, 0.9, r->fc_p90, err)) != KR_OK)
        goto fail;
    if ((st = horizon_stats(r, f, c, err)) != KR_OK) goto fail;
    if ((st = kr_tech_snapshot_compute(c, KR_REPORT_RV_WINDOW, &r->tech, err)) != KR_OK) goto fail;
    if ((st = kr_summary_build(r, &r->summary, &r->n_summary, err)) != KR_OK) goto fail;
    *out = r;
    return KR_OK;
fail:
    kr_error_prefix(err, "report %s", symbol);
    kr_report_free(r);
    return st;
}

kr_status kr_report_attach_calibration(kr_report *r, kr_calibration *cal, kr_error *err) {
    if (!r || !cal) return kr_error_set(err, KR_ERR_INVALID_ARG, "report: NULL calibration");
    kr_calibration_free(r->calibration);
    r->calibration = cal;
    char **s = NULL;
    int n = 0;
    kr_status st = kr_summary_build(r, &s, &n, err);
    if (st != KR_OK) return st;
    kr_summary_free(r->summary, r->n_summary);
    r->summary = s;
    r->n_summary = n;
    return KR_OK;
}
