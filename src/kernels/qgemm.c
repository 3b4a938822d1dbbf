/*
 * kernels/qgemm — the dispatched quantised Linear: picks, per format and CPU, how
 * activations are prepared and which GEMM runs (quant.h); the variants come from the dispatch
 * table (dispatch.h).
 *
 *   INT8                 W8A8: activations → u8 per row, integer dot (VNNI where present).
 *   BF16 + AVX512_BF16   activations → bf16, VDPBF16PS.
 *   BF16 otherwise, FP8, Q4
 *                        weight-only: panels dequantised to f32, the f32 GEMM on them
 *                        (activations scaled by in_scale into scratch first when present).
 *
 * The scratch is one caller buffer: the prepared activations, then one dequantisation panel
 * per thread. Its layout is a pure function of (format, M, nth, CPU), so prepare and run agree
 * on it without passing anything else.
 */

#include "kernels/dispatch.h"
#include "kernels/kernels_internal.h"

/* ~192 KB of f32 weights per panel: the f32 GEMM's own W block size, so a panel stays in L2
 * while every row tile of A passes over it. */
enum { PANEL_FLOATS = 192 * 1024 / 4 };

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

typedef enum path { PATH_INT8, PATH_BF16DOT, PATH_WONLY } path;

static path choose(const kr_qmat *w) {
    if (w->fmt == KR_WFMT_INT8) return PATH_INT8;
    if (w->fmt == KR_WFMT_BF16 && kr_kernels()->qgemm_bf16) return PATH_BF16DOT;
    return PATH_WONLY;
}

typedef struct layout {
    size_t act; /* offset of the prepared activations (0) */
    size_t ascale; /* INT8: per-row scales */
    size_t azero; /* INT8: per-row zero points */
    size_t panels; /* weight-only: first thread panel */
    size_t panel_floats;
    size_t total;
} layout;

static layout plan(const kr_qmat *w, int M, int nth) {
    layout l = { 0 };
    size_t m = M > 0 ? (size_t)M : 0;
    size_t off = 0;
    switch (choose(w)) {
    case PATH_INT8:
        off = align64(m * (size_t)w->kp);
        l.ascale = off;
        off = align64(off + m * sizeof(float));
        l.azero = off;
        off = align64(off + m * sizeof(int32_t));
        break;
    case PATH_BF16DOT: off = align64(m * (size_t)w->kp * sizeof(uint16_t)); break;
    case PATH_WONLY:
        if (w->in_scale) off = align64(m * (size_t)w->k * sizeof(float));
        l.panel_floats = (size_t)(w->k > PANEL_FLOATS ? w->k : PANEL_FLOATS);
        l.panels = off;
        off += (size_t)(nth > 0 ? nth : 1) * align64(l.panel_floats * sizeof(float));
        break;
    }
    l.total = off;
    return l;
}

size_t kr_qgemm_scratch_bytes(const kr_qmat *w, int M, int nth) {
    size_t t = plan(w, M, nth).total;
    return t ? t : 64;
}

int kr_qgemm_any_split(const kr_qmat *w) { return choose(w) != PATH_WONLY; }

void kr_qgemm_reserve(const kr_qmat *w, int M) {
    const kr_kernel_table *t = kr_kernels();
    if (choose(w) == PATH_INT8 && t->qgemm_int8_reserve) t->qgemm_int8_reserve(M, w);
}

int kr_qgemm_needs_prepare(const kr_qmat *w) {
    return choose(w) != PATH_WONLY || w->in_scale != NULL;
}

void kr_qgemm_prepare(const kr_qmat *w, int M, const float *A, int lda, void *scratch, int m0,
                      int m1) {
    if (m1 > M) m1 = M;
    if (m0 >= m1) return;
    layout l = plan(w, M, 1);
    char *s = scratch;
    switch (choose(w)) {
    case PATH_INT8:
        kr_kernels()->quant_act_u8(m0, m1, w->k, w->kp, A, lda, w->in_scale, (uint8_t *)(s + l.act),
                                   (float *)(s + l.ascale), (int32_t *)(s + l.azero));
        break;
    case PATH_BF16DOT:
        kr_kernels()->quant_act_bf16(m0, m1, w->k, w->kp, A, lda, w->in_scale,
                                     (uint16_t *)(s + l.act));
        break;
    case PATH_WONLY:
        if (w->in_scale) {
            float *dst = (float *)(s + l.act);
            for (int m = m0; m < m1; m++)
                for (int j = 0; j < w->k; j++)
                    dst[(size_t)m * (size_t)w->k + (size_t)j] =
                        A[(size_t)m * (size_t)lda + (size_t)j] * w->in_scale[j];
        }
        break;
    }
}

void kr_qgemm_run(const kr_qmat *w, int M, const float *A, int lda, const float *bias, float *C,
                  int ldc, void *scratch, int ith, int nth) {
    if (M <= 0) return;
    layout l = plan(w, M, nth);
    char *s = scratch;
    switch (choose(w)) {
    case PATH_INT8:
        kr_kernels()->qgemm_int8(M, w, (const uint8_t *)(s + l.act), (const float *)(s + l.ascale),
                                 (const int32_t *)(s + l.azero), bias, C, ldc, ith, nth);
        break;
    case PATH_BF16DOT:
        kr_kernels()->qgemm_bf16(M, w, (const uint16_t *)(s + l.act), bias, C, ldc, ith, nth);
        break;
    case PATH_WONLY: {
        const float *a = A;
        int ld = lda;
        if (w->in_scale) {
            a = (const float *)(s + l.act);
            ld = w->k;
        }
        float *panel =
            (float *)(s + l.panels + (size_t)ith * align64(l.panel_floats * sizeof(float)));
        kr_qgemm_wonly(M, w, a, ld, bias, C, ldc, panel, l.panel_floats, ith, nth);
        break;
    }
    }
}
