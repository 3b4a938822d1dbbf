/*
 * kernels/quant_bf16_avx512 — BF16 × BF16 GEMM with AVX512_BF16 (VDPBF16PS) and the
 * activation rounding that feeds it.
 *
 * Every C element is one 16-lane accumulator: VDPBF16PS adds two bf16 products per lane for
 * each 32-element block of kp, in order, then the fixed tree of kr_reduce16, then + bias. As
 * in gemm_avx512.c the register tile (4×4, 3×4, 2×8 or 1×8) only decides which dots run side
 * by side, so a row's result depends on kp alone — not on M, its position or the thread split.
 * Cache blocking is the same too: the thread's N slice in W blocks of ~192 KB, each swept by
 * all row tiles of A.
 *
 * The file needs AVX512_BF16 at run time: only call it when kr_cpu_has_avx512_bf16().
 */
#include "kernels/quant.h"

#if defined(__x86_64__)
#include "kernels/kernels_internal.h"
#include "kernels/simd_avx512.h"

/* VCVTNE2PS2BF16 rounds like kr_f32_to_bf16 (RNE, NaN quieted by setting bit 6) and treats
 * denormal inputs as zero; quant_bf16_scalar.c flushes them the same way. */
void kr_quant_act_bf16_avx512(int m0, int m1, int k, int kp, const float *A, int lda,
                              const float *in_scale, uint16_t *out) {
    for (int m = m0; m < m1; m++) {
        const float *a = A + (size_t)m * (size_t)lda;
        uint16_t *o = out + (size_t)m * (size_t)kp;
        int j = 0;
        for (; j + 32 <= k; j += 32) {
            __m512 x0 = _mm512_loadu_ps(a + j), x1 = _mm512_loadu_ps(a + j + 16);
            if (in_scale) {
                x0 = _mm512_mul_ps(x0, _mm512_loadu_ps(in_scale + j));
                x1 = _mm512_mul_ps(x1, _mm512_loadu_ps(in_scale + j + 16));
            }
            _mm512_storeu_si512(o + j, (__m512i)_mm512_cvtne2ps_pbh(x1, x0));
        }
        /* The tail block and the padding up to kp: masked-off lanes load as +0 → bf16 0. */
        for (; j < kp; j += 32) {
            int left = k - j;
            __mmask16 k0 = left <= 0 ? 0 : kr_mask16(left);
            __mmask16 k1 = left <= 16 ? 0 : kr_mask16(left - 16);
            __m512 x0 = _mm512_maskz_loadu_ps(k0, a + j);
            __m512 x1 = _mm512_maskz_loadu_ps(k1, a + j + 16);
            if (in_scale) {
                x0 = _mm512_mul_ps(x0, _mm512_maskz_loadu_ps(k0, in_scale + j));
                x1 = _mm512_mul_ps(x1, _mm512_maskz_loadu_ps(k1, in_scale + j + 16));
            }
            __m512i v = (__m512i)_mm512_cvtne2ps_pbh(x1, x0);
            if (j + 32 <= kp)
                _mm512_storeu_si512(o + j, v);
            else /* kp not a multiple of 32: only for callers outside the BF16 format */
                _mm512_mask_storeu_epi16(o + j, (__mmask32)((1ull << (kp - j)) - 1u), v);
        }
    }
}

/* The MR×NR tile at (m0, n0) of which mr×nr elements are real; missing rows and columns
 * reuse the last real one (valid memory, results discarded). */
KR_INLINE void tile(const int MR, const int NR, int kp, const uint16_t *A, const uint16_t *W,
                    const float *bias, float *C, int ldc, int m0, int mr, int n0, int nr) {
    const uint16_t *a[4];
    const uint16_t *w[16];
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++) a[r] = A + (size_t)(m0 + (r < mr ? r : mr - 1)) * (size_t)kp;
#pragma GCC unroll 16
    for (int c = 0; c < NR; c++) w[c] = W + (size_t)(n0 + (c < nr ? c : nr - 1)) * (size_t)kp;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();

    for (int k = 0; k < kp; k += 32) {
        __m512bh av[4];
#pragma GCC unroll 4
        for (int r = 0; r < MR; r++) av[r] = (__m512bh)_mm512_loadu_si512(a[r] + k);
#pragma GCC unroll 16
        for (int c = 0; c < NR; c++) {
            __m512bh wv = (__m512bh)_mm512_loadu_si512(w[c] + k);
#pragma GCC unroll 4
            for (int r = 0; r < MR; r++)
                acc[KR_R16(r * NR + c)] = _mm512_dpbf16_ps(acc[KR_R16(r * NR + c)], av[r], wv);
        }
    }

    kr_store_tile16(MR, NR, acc, bias, C, ldc, m0, mr, n0, nr);
}

static void block(int M, int kp, const uint16_t *A, const uint16_t *W, const float *bias, float *C,
                  int ldc, int nb, int ne) {
    int m = 0;
    for (; m + 4 <= M; m += 4)
        for (int n = nb; n < ne; n += 4)
            tile(4, 4, kp, A, W, bias, C, ldc, m, 4, n, ne - n < 4 ? ne - n : 4);
    switch (M - m) {
    case 3:
        for (int n = nb; n < ne; n += 4)
            tile(3, 4, kp, A, W, bias, C, ldc, m, 3, n, ne - n < 4 ? ne - n : 4);
        break;
    case 2:
        for (int n = nb; n < ne; n += 8)
            tile(2, 8, kp, A, W, bias, C, ldc, m, 2, n, ne - n < 8 ? ne - n : 8);
        break;
    case 1:
        for (int n = nb; n < ne; n += 8)
            tile(1, 8, kp, A, W, bias, C, ldc, m, 1, n, ne - n < 8 ? ne - n : 8);
        break;
    default: break;
    }
}

void kr_qgemm_bf16_avx512bf16(int M, const kr_qmat *w, const uint16_t *abf, const float *bias,
                              float *C, int ldc, int ith, int nth) {
    int n0, n1, kp = w->kp;
    kr_gemm_split(w->n, ith, nth, &n0, &n1);
    if (n0 >= n1 || M <= 0) return;
    const uint16_t *W = w->data;
    int nb_cols = (192 * 1024 / 2) / (kp > 0 ? kp : 1);
    nb_cols = nb_cols / KR_GEMM_NUNIT * KR_GEMM_NUNIT;
    if (nb_cols < KR_GEMM_NUNIT) nb_cols = KR_GEMM_NUNIT;
    for (int nb = n0; nb < n1; nb += nb_cols) {
        int ne = nb + nb_cols < n1 ? nb + nb_cols : n1;
        block(M, kp, abf, W, bias, C, ldc, nb, ne);
    }
}
#endif
