/*
 * kernels/simd_avx512.h — inline helpers shared by the *_avx512.c files (only they include
 * it, so it is always compiled with AVX-512 flags).
 *
 * The horizontal sums here define the one reduction tree every AVX-512 kernel uses for a
 * 16-lane partial sum: lane i + lane i+8, then i + i+4, then i + i+2, then 0 + 1. hsum16
 * applies it to one vector; reduce16 applies it to 16 vectors at once (a transpose woven into
 * the adds) and gives bit-identical sums, so a dot computed in a 4×4 GEMM tile equals the
 * same dot computed alone.
 */
#ifndef KR_SIMD_AVX512_H
#define KR_SIMD_AVX512_H

#include <immintrin.h>

#define KR_INLINE static inline __attribute__((always_inline))

KR_INLINE float kr_hsum16(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    __m128 d = _mm_add_ss(c, _mm_shuffle_ps(c, c, 1));
    return _mm_cvtss_f32(d);
}

/* Lane-sums of x[0..15] into one vector: lane L holds the sum of x[4·(L%4) + L/4]. Callers
 * place the accumulator of output o at x[KR_R16(o)] to get output o in lane o. */
#define KR_R16(o) (4 * ((o) % 4) + (o) / 4)
KR_INLINE __m512 kr_reduce16(const __m512 x[16]) {
    __m512 y[8], z[4];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        y[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0xEE));
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        z[i] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], 0xDD));
    __m512 w0 =
        _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], 0x44), _mm512_shuffle_ps(z[0], z[1], 0xEE));
    __m512 w1 =
        _mm512_add_ps(_mm512_shuffle_ps(z[2], z[3], 0x44), _mm512_shuffle_ps(z[2], z[3], 0xEE));
    return _mm512_add_ps(_mm512_shuffle_ps(w0, w1, 0x88), _mm512_shuffle_ps(w0, w1, 0xDD));
}

/* r[i][j] ↔ r[j][i]: the 16×16 transpose (unpack pairs, then quads, then 128-bit lanes). */
KR_INLINE void kr_transpose16(__m512 r[16]) {
    __m512 t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
        __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
        t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xDD);
        t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
        t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xDD);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
        r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);
        r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xDD);
    }
}

/* kr_transpose16 on 32-bit integer lanes: shuffles move bits without reading them as floats,
 * so the float view is exact. */
KR_INLINE void kr_transpose16_epi32(__m512i r[16]) {
    __m512 f[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) f[i] = _mm512_castsi512_ps(r[i]);
    kr_transpose16(f);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = _mm512_castps_si512(f[i]);
}

KR_INLINE __mmask16 kr_mask16(int n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* Reduces the MR×NR accumulators of a GEMM register tile (output r·NR + c at
 * acc[KR_R16(r·NR + c)]) and stores its mr×nr real elements at C[m0..][n0..] with the bias
 * added: the epilogue of the f32 and the bf16 GEMM tiles. */
KR_INLINE void kr_store_tile16(const int MR, const int NR, const __m512 acc[16], const float *bias,
                               float *C, int ldc, int m0, int mr, int n0, int nr) {
    /* Lane r·NR + c of s is C[m0 + r][n0 + c] before the bias. */
    __m512 s = kr_reduce16(acc);
    __mmask16 nm = kr_mask16(nr);
    __m512 b = bias ? _mm512_maskz_loadu_ps(nm, bias + n0) : _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++) {
        if (r >= mr) break;
        __m512 row = s;
        if (NR < 16) { /* bring lanes r·NR .. r·NR + NR - 1 down to 0 .. NR - 1 */
            const __m512i iota =
                _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
            row = _mm512_permutexvar_ps(_mm512_add_epi32(iota, _mm512_set1_epi32(r * NR)), s);
        }
        if (bias) row = _mm512_add_ps(row, b);
        _mm512_mask_storeu_ps(C + (size_t)(m0 + r) * (size_t)ldc + n0, nm, row);
    }
}

/* expf to ~1 ulp (Cephes polynomial); 2^n applied with scalef so the subnormal range and
 * overflow to +inf come out right. */
KR_INLINE __m512 kr_exp16(__m512 x) {
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(104.0f)), _mm512_set1_ps(-104.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

#endif
