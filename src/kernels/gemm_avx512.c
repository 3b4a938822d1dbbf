/*
 * kernels/gemm_avx512 — C = A·Wᵀ + bias with AVX-512, W used in place ([N×K] row-major).
 *
 * Every C element is one dot product kept in one 16-lane accumulator: k blocks of 16 in
 * order, the K tail as a masked block, then the fixed tree of kr_reduce16, then + bias. A
 * register tile (4 A rows × 4 W rows; 3×4, 2×8 or 1×8 for the last rows) only decides which
 * dots run side by side, so a row's result never depends on M, its position or the thread
 * split — the determinism contract of kernels.h.
 *
 * Cache blocking: a thread walks its N slice in blocks of W rows sized for L2 and, inside a
 * block, sweeps all row tiles of A, so the W block is reused from L2 across M while the 4 A
 * rows of a tile stay in L1 across the block.
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include "kernels/kernels_internal.h"
#include "kernels/simd_avx512.h"

/* Computes the MR×NR tile at (m0, n0) of which mr×nr elements are real: missing rows and
 * columns reuse the last real one (valid memory, results discarded). */
KR_INLINE void tile(const int MR, const int NR, int K, const float *A, int lda, const float *W,
                    const float *bias, float *C, int ldc, int m0, int mr, int n0, int nr) {
    const float *a[4];
    const float *w[16];
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++) a[r] = A + (size_t)(m0 + (r < mr ? r : mr - 1)) * (size_t)lda;
#pragma GCC unroll 16
    for (int c = 0; c < NR; c++) w[c] = W + (size_t)(n0 + (c < nr ? c : nr - 1)) * (size_t)K;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();

    int k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 av[4];
#pragma GCC unroll 4
        for (int r = 0; r < MR; r++) av[r] = _mm512_loadu_ps(a[r] + k);
#pragma GCC unroll 16
        for (int c = 0; c < NR; c++) {
            __m512 wv = _mm512_loadu_ps(w[c] + k);
#pragma GCC unroll 4
            for (int r = 0; r < MR; r++)
                acc[KR_R16(r * NR + c)] = _mm512_fmadd_ps(av[r], wv, acc[KR_R16(r * NR + c)]);
        }
    }
    if (k < K) {
        __mmask16 km = kr_mask16(K - k);
        __m512 av[4];
#pragma GCC unroll 4
        for (int r = 0; r < MR; r++) av[r] = _mm512_maskz_loadu_ps(km, a[r] + k);
#pragma GCC unroll 16
        for (int c = 0; c < NR; c++) {
            __m512 wv = _mm512_maskz_loadu_ps(km, w[c] + k);
#pragma GCC unroll 4
            for (int r = 0; r < MR; r++)
                acc[KR_R16(r * NR + c)] = _mm512_fmadd_ps(av[r], wv, acc[KR_R16(r * NR + c)]);
        }
    }

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

/* Every row tile of A against W rows [nb, ne). */
static void block(int M, int K, const float *A, int lda, const float *W, const float *bias,
                  float *C, int ldc, int nb, int ne) {
    int m = 0;
    for (; m + 4 <= M; m += 4)
        for (int n = nb; n < ne; n += 4)
            tile(4, 4, K, A, lda, W, bias, C, ldc, m, 4, n, ne - n < 4 ? ne - n : 4);
    switch (M - m) {
    case 3:
        for (int n = nb; n < ne; n += 4)
            tile(3, 4, K, A, lda, W, bias, C, ldc, m, 3, n, ne - n < 4 ? ne - n : 4);
        break;
    case 2:
        for (int n = nb; n < ne; n += 8)
            tile(2, 8, K, A, lda, W, bias, C, ldc, m, 2, n, ne - n < 8 ? ne - n : 8);
        break;
    case 1:
        /* 8 W rows, not 16: fewer concurrent streams keep the hardware prefetchers ahead
         * in this bandwidth-bound case (measured ~10% faster on Zen4). */
        for (int n = nb; n < ne; n += 8)
            tile(1, 8, K, A, lda, W, bias, C, ldc, m, 1, n, ne - n < 8 ? ne - n : 8);
        break;
    default: break;
    }
}

void kr_gemm_f32_avx512(int M, int N, int K, const float *A, int lda, const float *W,
                        const float *bias, float *C, int ldc, int ith, int nth) {
    int n0, n1;
    kr_gemm_split(N, ith, nth, &n0, &n1);
    if (n0 >= n1 || M <= 0) return;
    if (K <= 0) {
        for (int m = 0; m < M; m++)
            for (int n = n0; n < n1; n++)
                C[(size_t)m * (size_t)ldc + (size_t)n] = bias ? 0.0f + bias[n] : 0.0f;
        return;
    }
    /* W block of ~192 KB: several blocks fit L2 next to the A panel being swept. */
    int nb_cols = (192 * 1024 / 4) / K;
    nb_cols = nb_cols / KR_GEMM_NUNIT * KR_GEMM_NUNIT;
    if (nb_cols < KR_GEMM_NUNIT) nb_cols = KR_GEMM_NUNIT;
    for (int nb = n0; nb < n1; nb += nb_cols) {
        int ne = nb + nb_cols < n1 ? nb + nb_cols : n1;
        block(M, K, A, lda, W, bias, C, ldc, nb, ne);
    }
}
#endif
