/*
 * kernels/gemm_avx2 — C = A·Wᵀ + bias with AVX2+FMA, W used in place ([N×K] row-major).
 *
 * Same scheme as gemm_avx512.c with 8 lanes: each C element is one 8-lane accumulator over
 * k blocks in order (masked tail), reduced by the fixed tree of kr_reduce8, then + bias. The
 * tile (3 A rows × 4 W rows; 2×4 or 1×8 for the last rows) fits the 16 ymm registers and
 * never changes a result, which keeps the determinism contract of kernels.h.
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include "kernels/kernels_internal.h"
#include "kernels/simd_avx2.h"

/* Accumulator slot of output o (row-major in the tile): outputs 0-7 reduce into the first
 * vector, 8-15 into the second, each in lane o % 8. */
#define SLOT(o) ((o) < 8 ? KR_R8(o) : 8 + KR_R8((o)-8))

/* Keeps a loaded W vector in a register: without this GCC folds the load into each of the
 * MR FMAs that use it, and the loop becomes load-bound. */
#define KR_IN_REG(v) __asm__("" : "+x"(v))

/* W rows ahead that the first row tile prefetches, once per 64-byte line: it streams W from
 * memory, in rows too short for the hardware prefetcher (see gemm_avx512.c). */
enum { KR_PREFETCH_ROWS = 8 };

/* Computes the MR×NR tile at (m0, n0) of which mr×nr elements are real: missing rows and
 * columns reuse the last real one (valid memory, results discarded). MR·NR <= 16 with
 * MR A vectors + 1 W vector + MR·NR accumulators fitting the 16 ymm registers. With pf, also
 * prefetches the W rows KR_PREFETCH_ROWS below (a hint: never a fault past the end of W). */
KR_INLINE void tile(const int MR, const int NR, int K, const float *A, int lda, const float *W,
                    const float *bias, float *C, int ldc, int m0, int mr, int n0, int nr, int pf) {
    const float *a[3];
    const float *w[8];
#pragma GCC unroll 3
    for (int r = 0; r < MR; r++) a[r] = A + (size_t)(m0 + (r < mr ? r : mr - 1)) * (size_t)lda;
#pragma GCC unroll 8
    for (int c = 0; c < NR; c++) w[c] = W + (size_t)(n0 + (c < nr ? c : nr - 1)) * (size_t)K;
    __m256 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm256_setzero_ps();

    int k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 av[3];
#pragma GCC unroll 3
        for (int r = 0; r < MR; r++) av[r] = _mm256_loadu_ps(a[r] + k);
        if (pf && k % 16 == 0)
#pragma GCC unroll 8
            for (int c = 0; c < NR; c++)
                _mm_prefetch((const char *)(w[c] + k + (size_t)KR_PREFETCH_ROWS * (size_t)K),
                             _MM_HINT_T0);
#pragma GCC unroll 8
        for (int c = 0; c < NR; c++) {
            __m256 wv = _mm256_loadu_ps(w[c] + k);
            if (MR > 1) KR_IN_REG(wv);
#pragma GCC unroll 3
            for (int r = 0; r < MR; r++)
                acc[SLOT(r * NR + c)] = _mm256_fmadd_ps(av[r], wv, acc[SLOT(r * NR + c)]);
        }
    }
    if (k < K) {
        __m256i km = kr_mask8(K - k);
        __m256 av[3];
#pragma GCC unroll 3
        for (int r = 0; r < MR; r++) av[r] = _mm256_maskload_ps(a[r] + k, km);
#pragma GCC unroll 8
        for (int c = 0; c < NR; c++) {
            __m256 wv = _mm256_maskload_ps(w[c] + k, km);
#pragma GCC unroll 3
            for (int r = 0; r < MR; r++)
                acc[SLOT(r * NR + c)] = _mm256_fmadd_ps(av[r], wv, acc[SLOT(r * NR + c)]);
        }
    }

    /* Lane o % 8 of s[o / 8] is output o = r·NR + c, i.e. C[m0 + r][n0 + c] before bias. */
    __m256 s[2];
    s[0] = kr_reduce8(acc);
    s[1] = MR * NR > 8 ? kr_reduce8(acc + 8) : s[0];
    __m256i nm = kr_mask8(nr);
    if (NR == 8) {
        if (bias) s[0] = _mm256_add_ps(s[0], _mm256_maskload_ps(bias + n0, nm));
        _mm256_maskstore_ps(C + (size_t)m0 * (size_t)ldc + n0, nm, s[0]);
    } else {
        __m128i nm4 = _mm256_castsi256_si128(nm);
        __m128 b = bias ? _mm_maskload_ps(bias + n0, nm4) : _mm_setzero_ps();
#pragma GCC unroll 3
        for (int r = 0; r < MR; r++) {
            if (r >= mr) break;
            __m128 v =
                r % 2 ? _mm256_extractf128_ps(s[r / 2], 1) : _mm256_castps256_ps128(s[r / 2]);
            if (bias) v = _mm_add_ps(v, b);
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
            for (int n = n0; n < n1; n++)
                C[(size_t)m * (size_t)ldc + (size_t)n] = bias ? 0.0f + bias[n] : 0.0f;
        return;
    }
    /* W block of ~192 KB reused from L2 across all row tiles (see gemm_avx512.c). */
    int nb_cols = (192 * 1024 / 4) / K / KR_GEMM_NUNIT * KR_GEMM_NUNIT;
    if (nb_cols < KR_GEMM_NUNIT) nb_cols = KR_GEMM_NUNIT;
    for (int nb = n0; nb < n1; nb += nb_cols) {
        int ne = nb + nb_cols < n1 ? nb + nb_cols : n1;
        /* The first row tile brings the W block in from memory; the others find it in L2. */
        int m = 0;
        for (; m + 3 <= M; m += 3)
            for (int n = nb; n < ne; n += 4)
                tile(3, 4, K, A, lda, W, bias, C, ldc, m, 3, n, ne - n < 4 ? ne - n : 4, m == 0);
        if (M - m == 2)
            for (int n = nb; n < ne; n += 4)
                tile(2, 4, K, A, lda, W, bias, C, ldc, m, 2, n, ne - n < 4 ? ne - n : 4, m == 0);
        else if (M - m == 1)
            for (int n = nb; n < ne; n += 8)
                tile(1, 8, K, A, lda, W, bias, C, ldc, m, 1, n, ne - n < 8 ? ne - n : 8, m == 0);
    }
}
#endif
