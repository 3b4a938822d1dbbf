/* eval/backtest_stats — see backtest_stats.h. */
#include "eval/backtest_stats.h"

#include <math.h>
#include <stdlib.h>

#include "analyst/stats.h"
#include "base/rng.h"

double kr_bt_crps_sorted(const double *sorted, int n, double y) {
    if (n < 1 || isnan(y)) return NAN;
    /* The weights 2i - n - 1 sum to 0, so the spread is taken about the smallest sample: the
     * same value, without the cancellation of large prices (and exactly 0 when every sample is
     * the same). */
    double abs_err = 0, spread = 0;
    for (int i = 0; i < n; i++) {
        abs_err += fabs(sorted[i] - y);
        spread += (double)(2 * (i + 1) - n - 1) * (sorted[i] - sorted[0]);
    }
    const double dn = (double)n, crps = abs_err / dn - spread / (dn * dn);
    return crps > 0 ? crps : 0; /* >= 0 by definition; rounding can dip below */
}

double kr_bt_pinball(double q, double xq, double y) {
    const double u = y - xq;
    return u * (q - (u < 0 ? 1.0 : 0.0));
}

double kr_bt_pit(const double *sorted, int n, double y, double u1) {
    int below = 0, ties = 0;
    for (int i = 0; i < n; i++) {
        if (sorted[i] < y)
            below++;
        else if (sorted[i] == y)
            ties++;
    }
    return ((double)below + u1 * (double)(ties + 1)) / (double)(n + 1);
}

double kr_bt_pearson(const double *x, const double *y, const double *w, int64_t n) {
    double sw = 0, mx = 0, my = 0;
    for (int64_t i = 0; i < n; i++) {
        const double wi = w ? w[i] : 1.0;
        if (wi <= 0 || isnan(x[i]) || isnan(y[i])) continue;
        sw += wi;
        mx += wi * x[i];
        my += wi * y[i];
    }
    if (sw < 2) return NAN;
    mx /= sw;
    my /= sw;
    double sxx = 0, syy = 0, sxy = 0;
    for (int64_t i = 0; i < n; i++) {
        const double wi = w ? w[i] : 1.0;
        if (wi <= 0 || isnan(x[i]) || isnan(y[i])) continue;
        const double dx = x[i] - mx, dy = y[i] - my;
        sxx += wi * dx * dx;
        syy += wi * dy * dy;
        sxy += wi * dx * dy;
    }
    if (!(sxx > 0) || !(syy > 0)) return NAN;
    double r = sxy / sqrt(sxx * syy);
    return r > 1 ? 1 : r < -1 ? -1 : r;
}

/* The continued fraction of I_x(a, b) (modified Lentz), valid for x < (a + 1) / (a + b + 2). */
static double betacf(double a, double b, double x) {
    const double tiny = 1e-300, eps = 1e-15;
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 500; m++) {
        const double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        const double del = d * c;
        h *= del;
        if (fabs(del - 1) < eps) break;
    }
    return h;
}

double kr_bt_betainc(double a, double b, double x) {
    if (!(a > 0) || !(b > 0) || isnan(x) || x < 0 || x > 1) return NAN;
    if (x == 0 || x == 1) return x;
    const double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    const double bt = exp(lbt);
    if (x < (a + 1) / (a + b + 2)) return bt * betacf(a, b, x) / a;
    return 1 - bt * betacf(b, a, 1 - x) / b;
}

double kr_bt_t_two_sided_p(double t, double df) {
    if (!(df > 0) || isnan(t)) return NAN;
    if (isinf(t)) return 0;
    return kr_bt_betainc(df / 2, 0.5, df / (df + t * t));
}

double kr_bt_hac_variance(const double *d, int n, int lags) {
    if (n < 2) return NAN;
    double mean = 0;
    for (int i = 0; i < n; i++) mean += d[i];
    mean /= n;
    if (lags > n - 1) lags = n - 1;
    if (lags < 0) lags = 0;
    double var = 0;
    for (int j = 0; j <= lags; j++) {
        double g = 0;
        for (int t = j; t < n; t++) g += (d[t] - mean) * (d[t - j] - mean);
        g /= n;
        var += j == 0 ? g : 2.0 * (1.0 - (double)j / (lags + 1)) * g;
    }
    return var;
}

void kr_bt_dm_test(const double *d, int n, int lags, kr_bt_dm *out) {
    out->n = n;
    out->lags = lags;
    out->mean_diff = out->dm = out->hln = out->p_value = NAN;
    if (n < 1) return;
    double mean = 0;
    for (int i = 0; i < n; i++) mean += d[i];
    out->mean_diff = mean / n;
    if (n < 3) return;
    const double var = kr_bt_hac_variance(d, n, lags);
    if (!(var > 0)) return;
    out->dm = out->mean_diff / sqrt(var / n);
    const double h = (double)lags + 1.0, dn = (double)n;
    const double k = (dn + 1.0 - 2.0 * h + h * (h - 1.0) / dn) / dn;
    if (!(k > 0)) return;
    out->hln = out->dm * sqrt(k);
    out->p_value = kr_bt_t_two_sided_p(out->hln, dn - 1.0);
}

void kr_bt_block_counts(int n, int b, uint64_t seed, uint64_t rep, int *counts) {
    for (int i = 0; i < n; i++) counts[i] = 0;
    if (n < 1) return;
    if (b < 1) b = 1;
    if (b > n) b = n;
    int drawn = 0;
    for (uint64_t k = 0; drawn < n; k++) {
        const int start = (int)(kr_rng_uniform(seed, rep, k) * n);
        for (int j = 0; j < b && drawn < n; j++, drawn++) counts[(start + j) % n]++;
    }
}

double kr_bt_percentile(double *v, int n, double q) {
    int m = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) v[m++] = v[i];
    if (m < 1) return NAN;
    kr_stat_sort(v, m);
    return kr_stat_quantile_sorted(v, m, q);
}
