/*
 * kernels/gemm_nn_avx512 — C (+)= A·B and Aᵀ·B (kernels.h) with AVX-512: 12 × 32 register
 * tiles (24 accumulators), the loop nest of gemm_nn_body.h.
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/simd_avx512.h"

#define GNN_V __m512
#define GNN_W 16
#define GNN_MR 12
#define GNN_LOAD(p) _mm512_loadu_ps(p)
#define GNN_STORE(p, v) _mm512_storeu_ps((p), (v))
#define GNN_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define GNN_BCAST(p) _mm512_set1_ps(*(p))
#define GNN_ZERO() _mm512_setzero_ps()
#define GNN_LOADN(p, n) _mm512_maskz_loadu_ps(kr_mask16(n), (p))
#define GNN_STOREN(p, n, v) _mm512_mask_storeu_ps((p), kr_mask16(n), (v))
#define GNN_TRANSPOSE(r) kr_transpose16(r)
#define GNN_NAME(x) x##_avx512
#include "kernels/gemm_nn_body.h"

void kr_gemm_nn_f32_avx512(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float *C, int ldc, int accumulate, int ith, int nth) {
    gemm_avx512(0, M, N, K, A, lda, B, ldb, C, ldc, accumulate, ith, nth);
}

void kr_gemm_tn_f32_avx512(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float *C, int ldc, int accumulate, int ith, int nth) {
    gemm_avx512(1, M, N, K, A, lda, B, ldb, C, ldc, accumulate, ith, nth);
}
#endif
