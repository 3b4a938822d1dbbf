/*
 * kernels/gemm_nn_avx512 — C (+)= A·B and Aᵀ·B (kernels.h) for the avx512 row. Placeholder: the
 * scalar reference until the vector kernel lands.
 */
#include "kernels/kernels.h"

void kr_gemm_nn_f32_avx512(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float *C, int ldc, int accumulate, int ith, int nth) {
    kr_gemm_nn_f32_scalar(M, N, K, A, lda, B, ldb, C, ldc, accumulate, ith, nth);
}

void kr_gemm_tn_f32_avx512(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float *C, int ldc, int accumulate, int ith, int nth) {
    kr_gemm_tn_f32_scalar(M, N, K, A, lda, B, ldb, C, ldc, accumulate, ith, nth);
}
