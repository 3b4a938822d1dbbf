/*
 * kernels/gemm_nn_avx2 — C (+)= A·B and Aᵀ·B (kernels.h) with AVX2 + FMA: 6 × 16 register
 * tiles (12 accumulators of the 16 registers), the loop nest of gemm_nn_body.h.
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/simd_avx2.h"

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
#define GNN_TRANSPOSE(r) kr_transpose8(r)
#define GNN_NAME(x) x##_avx2
#include "kernels/gemm_nn_body.h"

void kr_gemm_nn_f32_avx2(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                         float *C, int ldc, int accumulate, int ith, int nth) {
    gemm_avx2(0, M, N, K, A, lda, B, ldb, NULL, C, ldc, accumulate, ith, nth);
}

void kr_gemm_tn_f32_avx2(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                         float *C, int ldc, int accumulate, int ith, int nth) {
    gemm_avx2(1, M, N, K, A, lda, B, ldb, NULL, C, ldc, accumulate, ith, nth);
}

void kr_gemm_nn_bias_f32_avx2(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                              const float *bias, float *C, int ldc, int ith, int nth) {
    gemm_avx2(0, M, N, K, A, lda, B, ldb, bias, C, ldc, 0, ith, nth);
}
#endif
