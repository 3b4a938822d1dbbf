/* analyst/stats — see stats.h. */
#include "analyst/stats.h"

#include "base/sort.h"

#include <math.h>
#include <stdlib.h>

double kr_stat_mean(const double *x, int64_t n) {
    if (n < 1) return NAN;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s / (double)n;
}

double kr_stat_std(const double *x, int64_t n, int ddof) {
    if (n - ddof < 1 || n < 1) return NAN;
    /* Two passes: the prices here are large relative to their spread (an index at 3000 moving
     * by 0.1%), where the one-pass formula loses most of its digits. */
    double m = kr_stat_mean(x, n), s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (x[i] - m) * (x[i] - m);
    return sqrt(s / (double)(n - ddof));
}

/* One sort and one quantile for the whole project: base/sort. */
void kr_stat_sort(double *x, int64_t n) { kr_sort_doubles(x, n); }

double kr_stat_quantile_sorted(const double *sorted, int64_t n, double q) {
    return kr_quantile_sorted(sorted, n, q);
}

/* The number of values at or below the true q-quantile is Binomial(n, q): the order statistics
 * sqrt(n q (1 - q)) ranks either side of the sample quantile bracket it with about 68%
 * probability (z = 1), the distribution-free confidence interval for a quantile (Conover,
 * Practical Nonparametric Statistics, 3rd ed., sec. 3.2). Half that interval's width is the
 * quantile's standard error; dividing the width by the ranks it actually spans (after rounding
 * outward to whole ranks and clamping to the sample) and multiplying by sqrt(n q (1 - q)) keeps
 * the rounding from inflating it: it is Siddiqui's difference-quotient estimate of the sparsity
 * 1/f(Q(q)) (Siddiqui 1960; Bloch & Gastwirth 1968) times the asymptotic sqrt(q (1 - q) / n).
 * Centred on the position the quantile itself uses (q (n - 1), numpy 'linear'; see Hyndman &
 * Fan 1996 for the positions), so the interval always contains the reported value. Plain
 * (x_k - x_j) / 2 with ranks n q -+ sqrt(n q (1 - q)) overstates it by up to 27% at 128 values
 * (a rank of rounding on a span of 7) and, its centre one rank high, by 77% at p90 of 32. */
double kr_stat_quantile_se_sorted(const double *sorted, int64_t n, double q) {
    if (n < KR_STAT_QUANTILE_SE_MIN_N || !(q > 0.0 && q < 1.0)) return NAN;
    const double spread = sqrt((double)n * q * (1.0 - q)), centre = q * (double)(n - 1);
    int64_t j = (int64_t)floor(centre - spread), k = (int64_t)ceil(centre + spread);
    if (j < 0) j = 0;
    if (k > n - 1) k = n - 1;
    return (sorted[k] - sorted[j]) * spread / (double)(k - j);
}

int kr_stat_sign(double x) { return (x > 0.0) - (x < 0.0); }
