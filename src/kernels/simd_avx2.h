/*
 * kernels/simd_avx2.h — inline helpers shared by the *_avx2.c files (only they include it).
 *
 * The one reduction tree of every AVX2 kernel for an 8-lane partial sum: lane i + i+4, then
 * i + i+2, then 0 + 1. kr_hsum8 applies it to one vector, kr_reduce8 to 8 vectors at once
 * with bit-identical results (see simd_avx512.h for why that matters).
 */
#ifndef KR_SIMD_AVX2_H
#define KR_SIMD_AVX2_H

#include <immintrin.h>

#define KR_INLINE static inline __attribute__((always_inline))

KR_INLINE float kr_hsum8(__m256 v) {
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    __m128 d = _mm_add_ss(c, _mm_shuffle_ps(c, c, 1));
    return _mm_cvtss_f32(d);
}

/* Lane L of the result is the lane-sum of x[2·(L%4) + L/4]; place output o's accumulator
 * at x[KR_R8(o)] to get it in lane o. */
#define KR_R8(o) (2 * ((o) % 4) + (o) / 4)
KR_INLINE __m256 kr_reduce8(const __m256 x[8]) {
    __m256 y[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        y[i] = _mm256_add_ps(_mm256_permute2f128_ps(x[2 * i], x[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(x[2 * i], x[2 * i + 1], 0x31));
    __m256 w0 =
        _mm256_add_ps(_mm256_shuffle_ps(y[0], y[1], 0x44), _mm256_shuffle_ps(y[0], y[1], 0xEE));
    __m256 w1 =
        _mm256_add_ps(_mm256_shuffle_ps(y[2], y[3], 0x44), _mm256_shuffle_ps(y[2], y[3], 0xEE));
    return _mm256_add_ps(_mm256_shuffle_ps(w0, w1, 0x88), _mm256_shuffle_ps(w0, w1, 0xDD));
}

/* r[i][j] ↔ r[j][i] for 8 vectors of 8 lanes. */
KR_INLINE void kr_transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
        r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
    }
}

/* Lane mask for the first n lanes (n may exceed 8). */
KR_INLINE __m256i kr_mask8(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Stores lanes [0, n) of v at p and nothing past them (all 8 when n >= 8; n >= 1). Never
 * VMASKMOVPS: its store form is microcoded on AMD Zen, ~12 cycles each (Zen 4: 3.5 ns against
 * 0.55 ns for a plain store per vector), and the kernels store short rows many times. The
 * values written are the same, so the results are. (Masked loads are fast everywhere.) */
KR_INLINE void kr_store4(float *p, __m128 v, int n) {
    if (n >= 4) {
        _mm_storeu_ps(p, v);
        return;
    }
    if (n & 2) {
        _mm_storel_pi((__m64 *)(void *)p, v);
        p += 2;
        v = _mm_movehl_ps(v, v);
    }
    if (n & 1) _mm_store_ss(p, v);
}
KR_INLINE void kr_store8(float *p, __m256 v, int n) {
    if (n >= 8) {
        _mm256_storeu_ps(p, v);
        return;
    }
    __m128 lo = _mm256_castps256_ps128(v);
    if (n >= 4) {
        _mm_storeu_ps(p, lo);
        kr_store4(p + 4, _mm256_extractf128_ps(v, 1), n - 4);
    } else {
        kr_store4(p, lo, n);
    }
}

/* expf to ~1 ulp (Cephes polynomial). 2^n is applied as two halves so the subnormal range
 * works; inputs above ln(FLT_MAX) give +inf. */
KR_INLINE __m256 kr_exp8(__m256 x0) {
    __m256 x =
        _mm256_max_ps(_mm256_min_ps(x0, _mm256_set1_ps(88.7228394f)), _mm256_set1_ps(-104.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i h1 = _mm256_srai_epi32(ni, 1), h2 = _mm256_sub_epi32(ni, h1);
    __m256 s1 =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h1, _mm256_set1_epi32(127)), 23));
    __m256 s2 =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h2, _mm256_set1_epi32(127)), 23));
    __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    __m256 big = _mm256_cmp_ps(x0, _mm256_set1_ps(88.7228394f), _CMP_GT_OQ);
    return _mm256_blendv_ps(e, _mm256_set1_ps(__builtin_inff()), big);
}

#endif
