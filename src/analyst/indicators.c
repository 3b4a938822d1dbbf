/*
 * analyst/indicators — see indicators.h for the definitions. Each series function is one
 * pass over the data with O(1) state (except the windowed std), so a snapshot over 10,000
 * bars costs microseconds.
 */
#include "analyst/indicators.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/stats.h"
#include "base/error.h"
#include "base/timeutil.h"

static kr_status check_args(const void *x, int64_t n, int period, const void *out, const char *name,
                            kr_error *err) {
    if (!x || !out || n < 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: NULL argument", name);
    if (period < 1)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: period must be >= 1, got %d", name,
                            period);
    return KR_OK;
}

static void fill_nan(double *out, int64_t from, int64_t to) {
    for (int64_t i = from; i < to; i++) out[i] = NAN;
}

kr_status kr_ind_sma(const double *x, int64_t n, int period, double *out, kr_error *err) {
    kr_status st = check_args(x, n, period, out, "sma", err);
    if (st != KR_OK) return st;
    /* Each window summed afresh: a running sum drifts over thousands of bars, and the cost
     * (period adds per bar) is irrelevant at these sizes. */
    for (int64_t i = 0; i < n; i++) {
        if (i < period - 1) {
            out[i] = NAN;
            continue;
        }
        double s = 0.0;
        for (int64_t j = i - period + 1; j <= i; j++) s += x[j];
        out[i] = s / period;
    }
    return KR_OK;
}

/* EMA over x[start..n) seeded with the SMA of x[start..start+period), NaN before. */
static void ema_from(const double *x, int64_t n, int64_t start, int period, double *out) {
    fill_nan(out, 0, n < start + period - 1 ? n : start + period - 1);
    if (n < start + period) return;
    double alpha = 2.0 / (period + 1.0), s = 0.0;
    for (int64_t j = start; j < start + period; j++) s += x[j];
    double e = s / period;
    out[start + period - 1] = e;
    for (int64_t i = start + period; i < n; i++) {
        e = alpha * x[i] + (1.0 - alpha) * e;
        out[i] = e;
    }
}

kr_status kr_ind_ema(const double *x, int64_t n, int period, double *out, kr_error *err) {
    kr_status st = check_args(x, n, period, out, "ema", err);
    if (st != KR_OK) return st;
    ema_from(x, n, 0, period, out);
    return KR_OK;
}

static double rsi_value(double gain, double loss) {
    if (loss == 0.0) return gain == 0.0 ? 50.0 : 100.0;
    return 100.0 - 100.0 / (1.0 + gain / loss);
}

kr_status kr_ind_rsi(const double *close, int64_t n, int period, double *out, kr_error *err) {
    kr_status st = check_args(close, n, period, out, "rsi", err);
    if (st != KR_OK) return st;
    fill_nan(out, 0, n < period ? n : period);
    if (n <= period) return KR_OK;
    double gain = 0.0, loss = 0.0;
    for (int64_t i = 1; i <= period; i++) {
        double d = close[i] - close[i - 1];
        gain += d > 0 ? d : 0.0;
        loss += d < 0 ? -d : 0.0;
    }
    gain /= period;
    loss /= period;
    out[period] = rsi_value(gain, loss);
    for (int64_t i = period + 1; i < n; i++) {
        double d = close[i] - close[i - 1];
        gain = (gain * (period - 1) + (d > 0 ? d : 0.0)) / period;
        loss = (loss * (period - 1) + (d < 0 ? -d : 0.0)) / period;
        out[i] = rsi_value(gain, loss);
    }
    return KR_OK;
}

kr_status kr_ind_macd(const double *close, int64_t n, int fast, int slow, int signal, double *line,
                      double *sig, double *hist, kr_error *err) {
    kr_status st = check_args(close, n, fast < signal ? fast : signal, line, "macd", err);
    if (st != KR_OK) return st;
    if (!sig || !hist) return kr_error_set(err, KR_ERR_INVALID_ARG, "macd: NULL argument");
    if (slow <= fast)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "macd: slow period (%d) must exceed fast (%d)",
                            slow, fast);
    double *ef = malloc((size_t)(n > 0 ? n : 1) * sizeof *ef);
    double *es = malloc((size_t)(n > 0 ? n : 1) * sizeof *es);
    if (!ef || !es) {
        free(ef);
        free(es);
        return kr_error_set(err, KR_ERR_NOMEM, "macd: out of memory for %lld bars", (long long)n);
    }
    ema_from(close, n, 0, fast, ef);
    ema_from(close, n, 0, slow, es);
    for (int64_t i = 0; i < n; i++) line[i] = ef[i] - es[i]; /* NaN until bar slow-1 */
    ema_from(line, n, slow - 1, signal, sig);
    for (int64_t i = 0; i < n; i++) hist[i] = line[i] - sig[i];
    free(ef);
    free(es);
    return KR_OK;
}

kr_status kr_ind_bollinger(const double *close, int64_t n, int period, double k, double *middle,
                           double *upper, double *lower, double *percent_b, double *bandwidth,
                           kr_error *err) {
    kr_status st = check_args(close, n, period, close, "bollinger", err);
    if (st != KR_OK) return st;
    for (int64_t i = 0; i < n; i++) {
        double m = NAN, u = NAN, l = NAN, pb = NAN, bw = NAN;
        if (i >= period - 1) {
            const double *w = close + i - period + 1;
            m = kr_stat_mean(w, period);
            double sd = kr_stat_std(w, period, 0);
            u = m + k * sd;
            l = m - k * sd;
            pb = u > l ? (close[i] - l) / (u - l) : NAN;
            bw = m != 0.0 ? (u - l) / m : NAN;
        }
        if (middle) middle[i] = m;
        if (upper) upper[i] = u;
        if (lower) lower[i] = l;
        if (percent_b) percent_b[i] = pb;
        if (bandwidth) bandwidth[i] = bw;
    }
    return KR_OK;
}

kr_status kr_ind_atr(const double *high, const double *low, const double *close, int64_t n,
                     int period, double *out, kr_error *err) {
    kr_status st = check_args(close, n, period, out, "atr", err);
    if (st != KR_OK) return st;
    if (!high || !low) return kr_error_set(err, KR_ERR_INVALID_ARG, "atr: NULL argument");
    double atr = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double tr = high[i] - low[i];
        if (i > 0) {
            double a = fabs(high[i] - close[i - 1]), b = fabs(low[i] - close[i - 1]);
            if (a > tr) tr = a;
            if (b > tr) tr = b;
        }
        if (i < period) {
            atr += tr;
            out[i] = NAN;
            if (i == period - 1) out[i] = atr = atr / period;
        } else {
            atr = (atr * (period - 1) + tr) / period;
            out[i] = atr;
        }
    }
    return KR_OK;
}

double kr_ind_realized_vol(const double *close, int64_t n, int window) {
    if (window < 2 || n < window + 1) return NAN;
    double *r = malloc((size_t)window * sizeof *r);
    if (!r) return NAN;
    for (int i = 0; i < window; i++) {
        int64_t j = n - window + i;
        r[i] = log(close[j] / close[j - 1]);
    }
    double sd = kr_stat_std(r, window, 1);
    free(r);
    return sd;
}

/* Calendar day number of a naive timestamp (floor division, also before 1970). */
static int64_t day_of(int64_t t) { return t >= 0 ? t / 86400 : -((-t + 86399) / 86400); }

kr_status kr_ind_bars_per_year(const int64_t *ts, int64_t n, double *bars_per_year,
                               double *bars_per_day, kr_error *err) {
    if (!ts || !bars_per_year || n < 2)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "bars per year: need at least 2 timestamps");
    double *tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp) return kr_error_set(err, KR_ERR_NOMEM, "bars per year: out of memory");
    for (int64_t i = 1; i < n; i++) tmp[i - 1] = (double)(ts[i] - ts[i - 1]);
    kr_stat_sort(tmp, n - 1);
    double gap = kr_stat_quantile_sorted(tmp, n - 1, 0.5);
    /* Weekend bars (more than a stray few) mean a market that trades every day. */
    int64_t weekend = 0;
    for (int64_t i = 0; i < n; i++) weekend += kr_civil_from_unix(ts[i]).weekday >= 5;
    double days_per_year = (double)weekend > 0.05 * (double)n ? 365.0 : 252.0;
    double per_day;
    if (gap >= 0.9 * 86400.0) {
        double days = gap / 86400.0;
        per_day = 1.0 / days;
        *bars_per_year = days < 4.5 ? days_per_year : days < 25.0 ? 52.0 : 12.0;
        if (days < 4.5) per_day = 1.0;
    } else {
        /* Bars per calendar date, median over dates: robust to a partial first/last day and
         * to half-day sessions. */
        int64_t n_dates = 0, count = 1;
        for (int64_t i = 1; i <= n; i++) {
            if (i < n && day_of(ts[i]) == day_of(ts[i - 1])) {
                count++;
                continue;
            }
            tmp[n_dates++] = (double)count;
            count = 1;
        }
        kr_stat_sort(tmp, n_dates);
        per_day = kr_stat_quantile_sorted(tmp, n_dates, 0.5);
        *bars_per_year = per_day * days_per_year;
    }
    if (bars_per_day) *bars_per_day = per_day;
    free(tmp);
    return KR_OK;
}

/* Least-squares slope of y over x = 0..n-1. */
static double ols_slope(const double *y, int n) {
    double mx = (n - 1) / 2.0, my = kr_stat_mean(y, n), sxy = 0.0, sxx = 0.0;
    for (int i = 0; i < n; i++) {
        sxy += (i - mx) * (y[i] - my);
        sxx += (i - mx) * (i - mx);
    }
    return sxx > 0 ? sxy / sxx : 0.0;
}

static double last_of(kr_status (*fn)(const double *, int64_t, int, double *, kr_error *),
                      const double *x, int64_t n, int period, double *scratch) {
    return fn(x, n, period, scratch, NULL) == KR_OK && n > 0 ? scratch[n - 1] : NAN;
}

kr_status kr_tech_snapshot_compute(const kr_candles *c, int rv_window, kr_tech_snapshot *out,
                                   kr_error *err) {
    if (!c || !out || c->n < 2)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "technical snapshot: need at least 2 bars");
    int64_t n = c->n;
    double *col = malloc((size_t)n * 5 * sizeof *col);
    double *a = malloc((size_t)n * 5 * sizeof *a);
    if (!col || !a) {
        free(col);
        free(a);
        return kr_error_set(err, KR_ERR_NOMEM, "technical snapshot: out of memory");
    }
    double *hi = col, *lo = col + n, *cl = col + 2 * n, *vol = col + 3 * n;
    double *b = a + n, *d = a + 2 * n, *e = a + 3 * n, *f = a + 4 * n;
    for (int64_t i = 0; i < n; i++) {
        hi[i] = c->values[i * KR_N_FEATURES + KR_HIGH];
        lo[i] = c->values[i * KR_N_FEATURES + KR_LOW];
        cl[i] = c->values[i * KR_N_FEATURES + KR_CLOSE];
        vol[i] = c->values[i * KR_N_FEATURES + KR_VOLUME];
    }
    memset(out, 0, sizeof *out);
    out->close = cl[n - 1];
    out->sma5 = last_of(kr_ind_sma, cl, n, 5, a);
    out->sma20 = last_of(kr_ind_sma, cl, n, 20, a);
    out->sma60 = last_of(kr_ind_sma, cl, n, 60, a);
    out->ema5 = last_of(kr_ind_ema, cl, n, 5, a);
    out->ema20 = last_of(kr_ind_ema, cl, n, 20, a);
    out->ema60 = last_of(kr_ind_ema, cl, n, 60, a);
    out->rsi14 = last_of(kr_ind_rsi, cl, n, 14, a);
    kr_status st = kr_ind_macd(cl, n, 12, 26, 9, a, b, d, err);
    if (st != KR_OK) goto done;
    out->macd_line = a[n - 1];
    out->macd_signal = b[n - 1];
    out->macd_hist = d[n - 1];
    if ((st = kr_ind_bollinger(cl, n, 20, 2.0, a, b, d, e, f, err)) != KR_OK) goto done;
    out->bb_middle = a[n - 1];
    out->bb_upper = b[n - 1];
    out->bb_lower = d[n - 1];
    out->bb_percent_b = e[n - 1];
    out->bb_bandwidth = f[n - 1];
    if ((st = kr_ind_atr(hi, lo, cl, n, 14, a, err)) != KR_OK) goto done;
    out->atr14 = a[n - 1];

    out->has_volume = c->has_volume;
    out->volume_avg5 = out->volume_avg20 = out->volume_ratio = NAN;
    if (c->has_volume) {
        if (n >= 5) out->volume_avg5 = kr_stat_mean(vol + n - 5, 5);
        if (n >= 20) {
            out->volume_avg20 = kr_stat_mean(vol + n - 20, 20);
            out->volume_slope_sign = kr_stat_sign(ols_slope(vol + n - 20, 20));
        }
        if (out->volume_avg20 > 0) out->volume_ratio = out->volume_avg5 / out->volume_avg20;
    }
    out->rv_window = rv_window;
    out->rv_per_bar = kr_ind_realized_vol(cl, n, rv_window);
    if ((st = kr_ind_bars_per_year(c->timestamps, n, &out->bars_per_year, &out->bars_per_day,
                                   err)) != KR_OK)
        goto done;
    out->rv_annualized = out->rv_per_bar * sqrt(out->bars_per_year);
done:
    free(col);
    free(a);
    return st;
}

const char *kr_rsi_state(double rsi) {
    if (isnan(rsi)) return "unknown";
    return rsi >= 70.0 ? "overbought" : rsi <= 30.0 ? "oversold" : "neutral";
}
