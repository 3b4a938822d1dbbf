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
#include "kernels/quant_dequant_internal.h"

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

static const kr_dequant_row_fns k_rows = { row_bf16, row_int8, row_fp8, row_q4 };

void kr_dequant_rows_scalar(const kr_qmat *w, int r0, int r1, float *out, int ldo) {
    kr_dequant_rows_with(&k_rows, w, r0, r1, out, ldo);
}
