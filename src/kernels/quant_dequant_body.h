/*
 * kernels/quant_dequant_body.h — the row decoders of kr_dequant_rows (quant.h) for bf16, int8
 * and fp8, written once for both vector widths over the names of simd_width.h; the row walk is
 * quant_dequant_internal.h's. quant_dequant_avx2.c and quant_dequant_avx512.c define
 * KR_WIDTH_AVX2 / KR_WIDTH_AVX512, include simd_width.h, define what differs per ISA
 *   qd_bf16(src)         VW_W bf16 values as floats
 *   qd_int8(src, sv)     VW_W int8 codes times sv
 *   qd_fp8(src, s1, s2, fused, check_nan)  VW_W e4m3 bytes as value · s1 (· s2 unless fused),
 *                        NaN bytes as kr_e4m3_to_f32's NaN when check_nan
 *   qd_fp8_has_nan(src)  whether any of 4·VW_W bytes is an e4m3 NaN (0x7F / 0xFF)
 *   row_q4               the whole q4 row decoder (a table lookup on AVX-512)
 * and include this file.
 *
 * Loads never need masks: rows are padded to kp (a multiple of 32), so every VW_W-element block
 * that starts before k lies in the row; only stores past k are masked (VW_STOREN). Each
 * element is the scalar decoder's value (quant_dequant_scalar.c), bit for bit.
 */
#ifndef KR_QUANT_DEQUANT_BODY_H
#define KR_QUANT_DEQUANT_BODY_H

#include <math.h>

#include "kernels/quant.h"
#include "kernels/quant_dequant_internal.h"

#if !defined(VW_W)
#error "include kernels/simd_width.h before kernels/quant_dequant_body.h"
#endif

static void row_bf16(const uint16_t *src, int k, float *o) {
    int j = 0;
    for (; j + VW_W <= k; j += VW_W) VW_STORE(o + j, qd_bf16(src + j));
    if (j < k) VW_STOREN(o + j, k - j, qd_bf16(src + j));
}

static void row_int8(const int8_t *src, int k, float s, float *o) {
    VW_V sv = VW_SET1(s);
    int j = 0;
    for (; j + VW_W <= k; j += VW_W) VW_STORE(o + j, qd_int8(src + j, sv));
    if (j < k) VW_STOREN(o + j, k - j, qd_int8(src + j, sv));
}

static void row_fp8(const uint8_t *src, int k, float s, float *o) {
    /* (f · 256) · s is one rounding of the exact product, and so is f · (256 · s) whenever
     * 256 · s is itself exact, i.e. unless a finite s overflows when scaled; only then are
     * the two multiplies kept. */
    int fused = !(isfinite(s) && !isfinite(s * 256.0f));
    VW_V s1 = VW_SET1(fused ? s * 256.0f : 256.0f), s2 = VW_SET1(s);
    /* NaN bytes never come out of kr_qmat_quantize: look for them once per 4·VW_W bytes and
     * take the fix-up path only where there is one. */
    int j = 0;
    for (; j + 4 * VW_W <= k; j += 4 * VW_W) {
        int nan = qd_fp8_has_nan(src + j);
#pragma GCC unroll 4
        for (int i = 0; i < 4 * VW_W; i += VW_W)
            VW_STORE(o + j + i, qd_fp8(src + j + i, s1, s2, fused, nan));
    }
    for (; j + VW_W <= k; j += VW_W) VW_STORE(o + j, qd_fp8(src + j, s1, s2, fused, 1));
    if (j < k) VW_STOREN(o + j, k - j, qd_fp8(src + j, s1, s2, fused, 1));
}

static const kr_dequant_row_fns k_rows = { row_bf16, row_int8, row_fp8, row_q4 };

void VW_NAME(kr_dequant_rows)(const kr_qmat *w, int r0, int r1, float *out, int ldo) {
    kr_dequant_rows_with(&k_rows, w, r0, r1, out, ldo);
}

#endif
