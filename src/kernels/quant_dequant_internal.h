/*
 * kernels/quant_dequant_internal.h — the row walk every kr_dequant_rows_* variant shares: it
 * locates row r of each format (quant.h layouts) and hands it to the variant's row decoder.
 * Only the decoders differ per ISA.
 */
#ifndef KR_KERNELS_QUANT_DEQUANT_INTERNAL_H
#define KR_KERNELS_QUANT_DEQUANT_INTERNAL_H

#include <string.h>

#include "kernels/quant.h"

typedef struct kr_dequant_row_fns {
    void (*bf16)(const uint16_t *src, int k, float *out);
    void (*int8)(const int8_t *src, int k, float scale, float *out);
    void (*fp8)(const uint8_t *src, int k, float scale, float *out);
    void (*q4)(const uint8_t *src, int k, int group, const uint16_t *gscale, const uint8_t *gzero,
               float *out);
} kr_dequant_row_fns;

static inline void kr_dequant_rows_with(const kr_dequant_row_fns *f, const kr_qmat *w, int r0,
                                        int r1, float *out, int ldo) {
    int k = w->k, kp = w->kp > 0 ? w->kp : w->k;
    for (int r = r0; r < r1; r++) {
        float *o = out + (size_t)(r - r0) * (size_t)ldo;
        size_t ro = (size_t)r * (size_t)kp;
        switch (w->fmt) {
        case KR_WFMT_F32: memcpy(o, (const float *)w->data + ro, (size_t)k * sizeof *o); break;
        case KR_WFMT_BF16: f->bf16((const uint16_t *)w->data + ro, k, o); break;
        case KR_WFMT_INT8: f->int8((const int8_t *)w->data + ro, k, w->scale[r], o); break;
        case KR_WFMT_FP8: f->fp8((const uint8_t *)w->data + ro, k, w->scale[r], o); break;
        case KR_WFMT_Q4: {
            size_t go = (size_t)r * (size_t)(kp / w->group);
            f->q4((const uint8_t *)w->data + ro / 2, k, w->group, w->gscale + go, w->gzero + go, o);
            break;
        }
        default: break;
        }
    }
}

#endif
