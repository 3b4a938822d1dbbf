/*
 * kernels/quant_bf16_scalar — the BF16 × BF16 path's references: activation rounding to bf16
 * and the plain f32 sum of the bf16 products.
 *
 * Activation rounding matches VCVTNEPS2BF16 bit for bit, which is kr_f32_to_bf16 except that
 * the instruction treats f32 denormal inputs as zero (DAZ, regardless of MXCSR). Those inputs
 * (|x| < 2^-126) become a zero of the same sign here too, so the scalar and AVX-512 variants
 * agree on every input; VDPBF16PS would flush a bf16 denormal anyway, so no product changes.
 */
#include "kernels/quant.h"

#include "kernels/kernels_internal.h"

#include <string.h>

static uint16_t act_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7F800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);
    return kr_f32_to_bf16(x);
}

void kr_quant_act_bf16_scalar(int m0, int m1, int k, int kp, const float *A, int lda,
                              const float *in_scale, uint16_t *out) {
    for (int m = m0; m < m1; m++) {
        const float *a = A + (size_t)m * (size_t)lda;
        uint16_t *o = out + (size_t)m * (size_t)kp;
        for (int j = 0; j < k; j++) o[j] = act_bf16(in_scale ? a[j] * in_scale[j] : a[j]);
        for (int j = k; j < kp; j++) o[j] = 0;
    }
}

void kr_qgemm_bf16_scalar(int M, const kr_qmat *w, const uint16_t *abf, const float *bias, float *C,
                          int ldc, int ith, int nth) {
    int n0, n1, kp = w->kp;
    kr_gemm_split(w->n, ith, nth, &n0, &n1);
    const uint16_t *W = w->data;
    for (int m = 0; m < M; m++) {
        const uint16_t *a = abf + (size_t)m * (size_t)kp;
        float *c = C + (size_t)m * (size_t)ldc;
        for (int n = n0; n < n1; n++) {
            const uint16_t *wr = W + (size_t)n * (size_t)kp;
            float s = 0.0f;
            for (int j = 0; j < kp; j++) s += kr_bf16_to_f32(a[j]) * kr_bf16_to_f32(wr[j]);
            c[n] = bias ? s + bias[n] : s;
        }
    }
}
