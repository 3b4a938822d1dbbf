/*
 * kernels/gemm_nn_scalar — reference C (+)= A·B and Aᵀ·B with B as stored (kernels.h), any
 * CPU: one float per C element, k in order. The SIMD variants are tested against this.
 */
#include "kernels/kernels.h"
#include "kernels/kernels_internal.h"

/* A element (m, k): A[m][k] for NN, A[k][m] for TN. */
static void gemm_ab(int trans_a, int M, int N, int K, const float *A, int lda, const float *B,
                    int ldb, const float *bias, float *C, int ldc, int accumulate, int ith,
                    int nth) {
    int m0, m1, n0, n1;
    kr_gemm_nn_split(M, N, ith, nth, &m0, &m1, &n0, &n1);
    for (int m = m0; m < m1; m++) {
        float *c = C + (size_t)m * (size_t)ldc;
        if (!accumulate)
            for (int n = n0; n < n1; n++) c[n] = bias ? bias[n] : 0.0f;
        for (int k = 0; k < K; k++) {
            float a = trans_a ? A[(size_t)k * (size_t)lda + (size_t)m]
                              : A[(size_t)m * (size_t)lda + (size_t)k];
            const float *b = B + (size_t)k * (size_t)ldb;
            for (int n = n0; n < n1; n++) c[n] += a * b[n];
        }
    }
}

void kr_gemm_nn_f32_scalar(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float *C, int ldc, int accumulate, int ith, int nth) {
    gemm_ab(0, M, N, K, A, lda, B, ldb, NULL, C, ldc, accumulate, ith, nth);
}

void kr_gemm_tn_f32_scalar(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float *C, int ldc, int accumulate, int ith, int nth) {
    gemm_ab(1, M, N, K, A, lda, B, ldb, NULL, C, ldc, accumulate, ith, nth);
}

void kr_gemm_nn_bias_f32_scalar(int M, int N, int K, const float *A, int lda, const float *B,
                                int ldb, const float *bias, float *C, int ldc, int ith, int nth) {
    gemm_ab(0, M, N, K, A, lda, B, ldb, bias, C, ldc, 0, ith, nth);
}
