/*
 * kernels/qgemm_int8_scalar — reference W8A8 kernels (quant.h), any CPU.
 *
 * Plain loops: the SIMD variants must equal these bit for bit, and the tests check these
 * against a double-precision product of the dequantised operands.
 */
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/qgemm_int8_internal.h"
#include "kernels/quant.h"

void kr_quant_act_u8_scalar(int m0, int m1, int k, int kp, const float *A, int lda,
                            const float *in_scale, uint8_t *q, float *scale, int32_t *zero) {
    for (int m = m0; m < m1; m++) {
        const float *a = A + (size_t)m * (size_t)lda;
        uint8_t *qr = q + (size_t)m * (size_t)kp;
        /* Starting from 0 is the min(0, ·) / max(0, ·) of the definition: zero must be
         * representable so padding and exact zeros cost nothing in the dot. */
        float lo = 0.0f, hi = 0.0f;
        for (int j = 0; j < k; j++) {
            float x = in_scale ? a[j] * in_scale[j] : a[j];
            if (x < lo) lo = x;
            if (x > hi) hi = x;
        }
        float s, inv;
        int32_t z;
        kr_q8_row_params(lo, hi, &s, &inv, &z);
        for (int j = 0; j < k; j++)
            qr[j] = kr_q8_quant1(in_scale ? a[j] * in_scale[j] : a[j], inv, z);
        if (kp > k) memset(qr + k, 0, (size_t)(kp - k));
        scale[m] = s;
        zero[m] = z;
    }
}

void kr_qgemm_int8_scalar(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                          const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                          int nth) {
    int n0, n1;
    kr_gemm_split(w->n, ith, nth, &n0, &n1);
    const int kp = w->kp;
    const int8_t *wq = (const int8_t *)w->data;
    for (int m = 0; m < M; m++) {
        const uint8_t *a = aq + (size_t)m * (size_t)kp;
        float *c = C + (size_t)m * (size_t)ldc;
        for (int n = n0; n < n1; n++) {
            const int8_t *r = wq + (size_t)n * (size_t)kp;
            int32_t acc = 0;
            for (int j = 0; j < kp; j++) acc += (int32_t)a[j] * (int32_t)r[j];
            /* Separate statements: no compiler may fuse these into an FMA, which the
             * vector epilogues (explicit mul, then add) would not match. */
            float s = ascale[m] * w->scale[n];
            float v = s * (float)(acc - azero[m] * w->row_sum[n]);
            if (bias) v += bias[n];
            c[n] = v;
        }
    }
}
