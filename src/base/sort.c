/* base/sort — see sort.h. Bottom-up merge sort over runs made by insertion sort. */
#include "base/sort.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RUN 16

static void insertion(unsigned char *a, size_t n, size_t size, kr_sort_cmp cmp, void *ctx,
                      unsigned char *hold) {
    for (size_t i = 1; i < n; i++) {
        size_t j = i;
        if (cmp(a + (j - 1) * size, a + j * size, ctx) <= 0) continue;
        memcpy(hold, a + i * size, size);
        while (j > 0 && cmp(a + (j - 1) * size, hold, ctx) > 0) {
            memcpy(a + j * size, a + (j - 1) * size, size);
            j--;
        }
        memcpy(a + j * size, hold, size);
    }
}

void kr_sort(void *base, size_t n, size_t size, kr_sort_cmp cmp, void *ctx, void *tmp) {
    if (n < 2) return;
    unsigned char *src = base, *dst = tmp;
    /* One element of tmp serves as the insertion sort's hold slot before merging starts. */
    for (size_t i = 0; i < n; i += RUN)
        insertion(src + i * size, n - i < RUN ? n - i : RUN, size, cmp, ctx, dst);
    for (size_t width = RUN; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n,
                   hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                /* <= keeps equal elements in their order: stable. */
                if (cmp(src + i * size, src + j * size, ctx) <= 0)
                    memcpy(dst + k++ * size, src + i++ * size, size);
                else
                    memcpy(dst + k++ * size, src + j++ * size, size);
            }
            memcpy(dst + k * size, src + i * size, (mid - i) * size);
            k += mid - i;
            memcpy(dst + k * size, src + j * size, (hi - j) * size);
        }
        unsigned char *t = src;
        src = dst;
        dst = t;
    }
    if (src != base) memcpy(base, src, n * size);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void kr_sort_doubles(double *x, int64_t n) {
    if (n > 1) qsort(x, (size_t)n, sizeof *x, cmp_double);
}

double kr_quantile_sorted(const double *sorted, int64_t n, double q) {
    if (n < 1) return NAN;
    double pos = q * (double)(n - 1);
    int64_t lo = (int64_t)floor(pos);
    if (lo < 0) lo = 0;
    if (lo > n - 1) lo = n - 1;
    int64_t hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - (double)lo);
}
