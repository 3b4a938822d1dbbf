/* analyst/stats — see stats.h. */
#include "analyst/stats.h"

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

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void kr_stat_sort(double *x, int64_t n) {
    if (n > 1) qsort(x, (size_t)n, sizeof *x, cmp_double);
}

double kr_stat_quantile_sorted(const double *sorted, int64_t n, double q) {
    if (n < 1) return NAN;
    double pos = q * (double)(n - 1);
    int64_t lo = (int64_t)floor(pos);
    if (lo < 0) lo = 0;
    if (lo > n - 1) lo = n - 1;
    int64_t hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - (double)lo);
}

int kr_stat_sign(double x) { return (x > 0.0) - (x < 0.0); }
