/*
 * base/sort — a stable merge sort that never allocates (the caller lends the scratch), for the
 * decode loop, where glibc's qsort would malloc its buffer for anything over 1 KiB.
 */
#ifndef KR_BASE_SORT_H
#define KR_BASE_SORT_H

#include <stddef.h>
#include <stdint.h>

#include "kronos/status.h"

typedef int (*kr_sort_cmp)(const void *a, const void *b, void *ctx);

/* Sorts n elements of `size` bytes at base, stably, by cmp; tmp holds n * size bytes. */
void kr_sort(void *base, size_t n, size_t size, kr_sort_cmp cmp, void *ctx, void *tmp);

/* Sorts x[n] ascending (qsort; NaNs compare equal to everything, as before). */
KR_PRIVATE void kr_sort_doubles(double *x, int64_t n);

/* The q-quantile of sorted[n] by numpy's default 'linear' method: position q * (n - 1) between
 * the order statistics either side; NAN when n < 1. Every quantile of the project (a forecast's,
 * a path set's, the analyst's statistics) is this one. */
KR_PRIVATE double kr_quantile_sorted(const double *sorted, int64_t n, double q);

#endif
