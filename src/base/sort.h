/*
 * base/sort — a stable merge sort that never allocates (the caller lends the scratch), for the
 * decode loop, where glibc's qsort would malloc its buffer for anything over 1 KiB.
 */
#ifndef KR_BASE_SORT_H
#define KR_BASE_SORT_H

#include <stddef.h>

typedef int (*kr_sort_cmp)(const void *a, const void *b, void *ctx);

/* Sorts n elements of `size` bytes at base, stably, by cmp; tmp holds n * size bytes. */
void kr_sort(void *base, size_t n, size_t size, kr_sort_cmp cmp, void *ctx, void *tmp);

#endif
