/*
 * kernels/gemm_nn_avx512 — C (+)= A·B and Aᵀ·B (kernels.h) with AVX-512: 12 × 32 register
 * tiles (24 accumulators), the loop nest of gemm_nn_body.h, and its own packing of full NN A
 * tiles.
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#define KR_WIDTH_AVX512
#include "kernels/simd_width.h"

/* 12 rows × 16 values of k of an NN A (rows lda apart) into the packed tile layout: the 16 k
 * of 12 row values each, 192 consecutive floats. One 16 × 16 transpose (4 rows of zeros),
 * then each output vector gathered from two transposed rows by a permute: 12 full stores
 * instead of 16 masked ones across cache lines. */
KR_INLINE void pack_a_tile_12x16(const float *rows, int lda, float *d) {
    __m512 r[16];
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) r[i] = _mm512_loadu_ps(rows + (size_t)i * (size_t)lda);
#pragma GCC unroll 4
    for (int i = 12; i < 16; i++) r[i] = _mm512_setzero_ps();
    kr_transpose16(r);
    /* out[3g .. 3g+2] = the first 12 lanes of r[4g], r[4g+1], r[4g+2], r[4g+3] in a row */
    const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19);
    const __m512i mid = _mm512_setr_epi32(4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i hi =
        _mm512_setr_epi32(8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27);
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        _mm512_storeu_ps(d + 48 * g, _mm512_permutex2var_ps(r[4 * g], lo, r[4 * g + 1]));
        _mm512_storeu_ps(d + 48 * g + 16, _mm512_permutex2var_ps(r[4 * g + 1], mid, r[4 * g + 2]));
        _mm512_storeu_ps(d + 48 * g + 32, _mm512_permutex2var_ps(r[4 * g + 2], hi, r[4 * g + 3]));
    }
}

#define GNN_MR 12
#define GNN_STOREN(p, n, v) VW_STOREN((p), (n), (v))
#define GNN_PACK_A_TILE(rows, lda, d) pack_a_tile_12x16((rows), (lda), (d))
#include "kernels/gemm_nn_body.h"
#endif
