/*
 * kernels/calibrate_avx512 — FMA peak probe with 512-bit vectors (see calibrate.h).
 */
#include "kernels/calibrate.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* 12 chains: latency 4 × up to 2 FMA pipes, with margin. */
double kr_fma_burn_avx512(long iters) {
    volatile float seed = 1.0f;
    __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    __m512 a[12];
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps(seed + (float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
    }
    __m512 s = a[0];
#pragma GCC unroll 12
    for (int i = 1; i < 12; i++) s = _mm512_add_ps(s, a[i]);
    seed = _mm512_reduce_add_ps(s);
    return 2.0 * 16.0 * 12.0 * (double)iters;
}
#endif
