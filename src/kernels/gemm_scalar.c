/*
 * kernels/gemm_scalar — reference GEMM C = A·Wᵀ + bias, any CPU.
 *
 * Deliberately plain: one float accumulator per C element, k in order. The SIMD variants
 * are tested against this (and this against a double-precision loop in the tests).
 */
#include "kernels/kernels.h"
#include "kernels/kernels_internal.h"

void kr_gemm_f32_scalar(int M, int N, int K, const float *A, int lda, const float *W,
                        const float *bias, float *C, int ldc, int ith, int nth) {
    int n0, n1;
    kr_gemm_split(N, ith, nth, &n0, &n1);
    for (int m = 0; m < M; m++) {
        const float *a = A + (size_t)m * (size_t)lda;
        float *c = C + (size_t)m * (size_t)ldc;
        for (int n = n0; n < n1; n++) {
            const float *w = W + (size_t)n * (size_t)K;
            float s = 0.0f;
            for (int k = 0; k < K; k++) s += a[k] * w[k];
            c[n] = bias ? s + bias[n] : s;
        }
    }
}
