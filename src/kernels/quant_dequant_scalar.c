/*
 * kernels/quant_dequant_scalar — reference dequantiser, any CPU.
 *
 * This file defines the exact value of every dequantised weight; the SIMD variants must give
 * the same bits:
 *   BF16  the bf16 widened (exact);
 *   INT8  scale[n] · (float)q;
 *   FP8   e4m3(q) · scale[n] (e4m3 exact in f32, so one rounding); NaN bytes give the fixed
 *         NaN of kr_e4m3_to_f32 without the multiply (a NaN's payload must not depend on which
 *         operand the hardware propagates);
 *   Q4    f16(gscale) · (float)(q − zero) (the integer difference is exact, one rounding).
 */
#include "kernels/quant.h"

#include <string.h>

static void row_bf16(const uint16_t *src, int k, float *out) {
    for (int j = 0; j < k; j++) out[j] = kr_bf16_to_f32(src[j]);
}

static void row_int8(const int8_t *src, int k, float s, float *out) {
    for (int j = 0; j < k; j++) out[j] = s * (float)src[j];
}

static void row_fp8(const uint8_t *src, int k, float s, float *out) {
    for (int j = 0; j < k; j++) {
        float v = kr_e4m3_to_f32(src[j]);
        out[j] = (src[j] & 0x7F) == 0x7F ? v : v * s;
    }
}

static void row_q4(const uint8_t *src, int k, int group, const uint16_t *gs, const uint8_t *gz,
                   float *out) {
    for (int j = 0; j < k; j++) {
        int i = j & 31;
        uint8_t b = src[(j - i) / 2 + (i & 15)];
        int q = i < 16 ? (b & 15) : (b >> 4);
        int g = j / group;
        out[j] = kr_f16_to_f32(gs[g]) * (float)(q - (int)gz[g]);
    }
}

void kr_dequant_rows_scalar(const kr_qmat *w, int r0, int r1, float *out, int ldo) {
    int k = w->k, kp = w->kp > 0 ? w->kp : w->k;
    for (int r = r0; r < r1; r++) {
        float *o = out + (size_t)(r - r0) * (size_t)ldo;
        size_t ro = (size_t)r * (size_t)kp;
        switch (w->fmt) {
        case KR_WFMT_F32: memcpy(o, (const float *)w->data + ro, (size_t)k * sizeof *o); break;
        case KR_WFMT_BF16: row_bf16((const uint16_t *)w->data + ro, k, o); break;
        case KR_WFMT_INT8: row_int8((const int8_t *)w->data + ro, k, w->scale[r], o); break;
        case KR_WFMT_FP8: row_fp8((const uint8_t *)w->data + ro, k, w->scale[r], o); break;
        case KR_WFMT_Q4: {
            size_t go = (size_t)r * (size_t)(kp / w->group);
            row_q4((const uint8_t *)w->data + ro / 2, k, w->group, w->gscale + go, w->gzero + go,
                   o);
            break;
        }
        default: break;
        }
    }
}
