/*
 * kernels/gemm_avx2 — C = A·Wᵀ + bias with AVX2+FMA, W used in place ([N×K] row-major).
 *
 * Same scheme as gemm_avx512.c with 8 lanes: each C element is one 8-lane accumulator over
 * k blocks in order (masked tail), reduced by the fixed tree of kr_reduce8, then + bias. The
 * tile (2 A rows × 4 W rows, 1×8 for a last odd row) fits the 16 ymm registers and never
 * changes a result, which keeps the determinism contract of kernels.h.
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include "kernels/kernels_internal.h"
#include "kernels/simd_avx2.h"

KR_INLINE void tile(const int MR, const int NR, int K, const float *A, int lda,
                    const float *W, const float *bias, float *C, int ldc, int m0, int mr,
                    int n0, int nr) {
    const float *a[2];
    const float *w[8];
#pragma GCC unroll 2
    for (int r = 0; r < MR; r++) a[r] = A + (size_t)(m0 + (r < mr ? r : mr - 1)) * (size_t)lda;
#pragma GCC unroll 8
    for (int c = 0; c < NR; c++) w[c] = W + (size_t)(n0 + (c < nr ? c : nr - 1)) * (size_t)K;
    __m256 acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();

    int k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 av[2];
#pragma GCC unroll 2
        for (int r = 0; r < MR; r++) av[r] = _mm256_loadu_ps(a[r] + k);
#pragma GCC unroll 8
        for (int c = 0; c < NR; c++) {
            __m256 wv = _mm256_loadu_ps(w[c] + k);
#pragma GCC unroll 2
            for (int r = 0; r < MR; r++)
                acc[KR_R8(r * NR + c)] = _mm256_fmadd_ps(av[r], wv, acc[KR_R8(r * NR + c)]);
        }
    }
    if (k < K) {
        __m256i km = kr_mask8(K - k);
        __m256 av[2];
#pragma GCC unroll 2
        for (int r = 0; r < MR; r++) av[r] = _mm256_maskload_ps(a[r] + k, km);
#pragma GCC unroll 8
        for (int c = 0; c < NR; c++) {
            __m256 wv = _mm256_maskload_ps(w[c] + k, km);
#pragma GCC unroll 2
            for (int r = 0; r < MR; r++)
                acc[KR_R8(r * NR + c)] = _mm256_fmadd_ps(av[r], wv, acc[KR_R8(r * NR + c)]);
        }
    }

    /* Lane r·NR + c of s is C[m0 + r][n0 + c] before the bias. */
    __m256 s = kr_reduce8(acc);
    __m256i nm = kr_mask8(nr);
    if (NR == 8) {
        if (bias) s = _mm256_add_ps(s, _mm256_maskload_ps(bias + n0, nm));
        _mm256_maskstore_ps(C + (size_t)m0 * (size_t)ldc + n0, nm, s);
    } else {
        __m128i nm4 = _mm256_castsi256_si128(nm);
        __m128 b = bias ? _mm_maskload_ps(bias + n0, nm4) : _mm_setzero_ps();
        __m128 rows[2] = {_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1)};
        for (int r = 0; r < mr && r < 2; r++) {
            __m128 v = bias ? _mm_add_ps(rows[r], b) : rows[r];
            _mm_maskstore_ps(C + (size_t)(m0 + r) * (size_t)ldc + n0, nm4, v);
        }
    }
}

void kr_gemm_f32_avx2(int M, int N, int K, const float *A, int lda, const float *W,
                      const float *bias, float *C, int ldc, int ith, int nth) {
    int n0, n1;
    kr_gemm_split(N, ith, nth, &n0, &n1);
    if (n0 >= n1 || M <= 0) return;
    if (K <= 0) {
        for (int m = 0; m < M; m++)
            for (int n = n0; n < n1; n++) C[(size_t)m * (size_t)ldc + n] = bias ? 0.0f + bias[n] : 0.0f;
        return;
    }
    /* W block of ~192 KB reused from L2 across all row tiles (see gemm_avx512.c). */
    int nb_cols = (192 * 1024 / 4) / K / KR_GEMM_NUNIT * KR_GEMM_NUNIT;
    if (nb_cols < KR_GEMM_NUNIT) nb_cols = KR_GEMM_NUNIT;
    for (int nb = n0; nb < n1; nb += nb_cols) {
        int ne = nb + nb_cols < n1 ? nb + nb_cols : n1;
        int m = 0;
        for (; m + 2 <= M; m += 2)
            for (int n = nb; n < ne; n += 4)
                tile(2, 4, K, A, lda, W, bias, C, ldc, m, 2, n, ne - n < 4 ? ne - n : 4);
        if (m < M)
            for (int n = nb; n < ne; n += 8)
                tile(1, 8, K, A, lda, W, bias, C, ldc, m, 1, n, ne - n < 8 ? ne - n : 8);
    }
}
#endif
