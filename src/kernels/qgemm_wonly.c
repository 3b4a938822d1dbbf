/*
 * kernels/qgemm_wonly — weight-only quantised GEMM: dequantise a panel of W rows into f32,
 * multiply it with the dispatched f32 GEMM, repeat.
 *
 * Exactness: the dequantised rows are the same bits on every ISA, and kr_gemm_f32 computes
 * each C element with a reduction order fixed by K alone, so running it panel by panel (each
 * panel's columns as a whole N) gives exactly kr_gemm_f32 on the fully dequantised W,
 * whatever the panel size or thread split.
 *
 * Panels hold whole KR_GEMM_NUNIT units when they can, so the GEMM's register tiles are not
 * cut short at every panel edge.
 */
#include "kernels/quant.h"

#include "kernels/kernels_internal.h"

void kr_qgemm_wonly(int M, const kr_qmat *w, const float *A, int lda, const float *bias, float *C,
                    int ldc, float *panel, size_t panel_floats, int ith, int nth) {
    int n0, n1, k = w->k;
    kr_gemm_split(w->n, ith, nth, &n0, &n1);
    if (n0 >= n1 || M <= 0) return;
    /* quant.h requires a panel of at least one row (qgemm.c always plans one); a smaller one
     * cannot hold a row, so nothing is computed rather than writing past it. */
    if (panel_floats < (size_t)k) return;
    int slice = n1 - n0;
    size_t fit = panel_floats / (size_t)k;
    int P = fit < (size_t)slice ? (int)fit : slice;
    if (P < 1) P = 1;
    if (P >= KR_GEMM_NUNIT) P -= P % KR_GEMM_NUNIT;
    for (int n = n0; n < n1; n += P) {
        int p = n1 - n < P ? n1 - n : P;
        kr_dequant_rows(w, n, n + p, panel, k);
        kr_gemm_f32(M, p, k, A, lda, panel, bias ? bias + n : NULL, C + n, ldc, 0, 1);
    }
}
