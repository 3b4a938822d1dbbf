/*
 * kernels/calibrate_avx2 — FMA peak probe with 256-bit vectors (see calibrate.h).
 */
#include "kernels/calibrate.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* 12 chains: latency 4 × 2 FMA pipes, with margin; fits the 16 ymm registers. */
double kr_fma_burn_avx2(long iters) {
    volatile float seed = 1.0f;
    __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    __m256 a[12];
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps(seed + (float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
    }
    __m256 s = a[0];
#pragma GCC unroll 12
    for (int i = 1; i < 12; i++) s = _mm256_add_ps(s, a[i]);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    seed = _mm_cvtss_f32(h);
    return 2.0 * 8.0 * 12.0 * (double)iters;
}
#endif
