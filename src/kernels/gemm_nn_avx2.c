/*
 * kernels/gemm_nn_avx2 — C (+)= A·B and Aᵀ·B (kernels.h) with AVX2 + FMA: 6 × 16 register
 * tiles (12 accumulators of the 16 registers), the loop nest of gemm_nn_body.h.
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/simd_avx2.h"

/* r[i][j] ↔ r[j][i] for 8 vectors of 8 lanes. */
KR_INLINE void transpose8(__m256 r[8]) {
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

#define GNN_V __m256
#define GNN_W 8
#define GNN_MR 6
#define GNN_LOAD(p) _mm256_loadu_ps(p)
#define GNN_STORE(p, v) _mm256_storeu_ps((p), (v))
#define GNN_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define GNN_BCAST(p) _mm256_broadcast_ss(p)
#define GNN_ZERO() _mm256_setzero_ps()
#define GNN_LOADN(p, n) _mm256_maskload_ps((p), kr_mask8(n))
#define GNN_STOREN(p, n, v) _mm256_maskstore_ps((p), kr_mask8(n), (v))
#define GNN_TRANSPOSE(r) transpose8(r)
#define GNN_NAME(x) x##_avx2
#include "kernels/gemm_nn_body.h"

void kr_gemm_nn_f32_avx2(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                         float *C, int ldc, int accumulate, int ith, int nth) {
    gemm_avx2(0, M, N, K, A, lda, B, ldb, C, ldc, accumulate, ith, nth);
}

void kr_gemm_tn_f32_avx2(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                         float *C, int ldc, int accumulate, int ith, int nth) {
    gemm_avx2(1, M, N, K, A, lda, B, ldb, C, ldc, accumulate, ith, nth);
}
#endif
