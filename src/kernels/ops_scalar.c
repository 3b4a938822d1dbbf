/*
 * kernels/ops_scalar — reference row-wise ops (RMSNorm, RoPE, SiLU·mul, add, softmax).
 */
#include "kernels/kernels.h"

#include <math.h>

void kr_rmsnorm_f32_scalar(int n_rows, int d, const float *x, int ldx, const float *w, float eps,
                           float *y, int ldy) {
    for (int r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * (size_t)ldx;
        float *yr = y + (size_t)r * (size_t)ldy;
        float ss = 0.0f;
        for (int i = 0; i < d; i++) ss += xr[i] * xr[i];
        float inv = 1.0f / sqrtf(ss / (float)d + eps);
        for (int i = 0; i < d; i++) yr[i] = xr[i] * inv * w[i];
    }
}

void kr_rope_f32_scalar(int n_rows, int n_heads, int head_dim, float *x, int ldx, int pos0,
                        const float *inv_freq) {
    int half = head_dim / 2;
    for (int r = 0; r < n_rows; r++) {
        float p = (float)(pos0 + r);
        float *xr = x + (size_t)r * (size_t)ldx;
        for (int i = 0; i < half; i++) {
            float th = p * inv_freq[i];
            float c = cosf(th), s = sinf(th);
            for (int h = 0; h < n_heads; h++) {
                float *xh = xr + (size_t)h * (size_t)head_dim;
                float a = xh[i], b = xh[i + half];
                /* Separate products (no FMA): the SIMD variants do the same, so RoPE is
                 * bit-identical on every ISA. */
                float ac = a * c, bs = b * s, bc = b * c, as = a * s;
                xh[i] = ac - bs;
                xh[i + half] = bc + as;
            }
        }
    }
}

void kr_silu_mul_f32_scalar(int n, const float *a, const float *b, float *out) {
    for (int i = 0; i < n; i++) {
        float x = a[i];
        out[i] = x / (1.0f + expf(-x)) * b[i];
    }
}

void kr_add_f32_scalar(int n, const float *x, float *y) {
    for (int i = 0; i < n; i++) y[i] += x[i];
}

void kr_softmax_f32_scalar(int n, const float *x, float *y) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        y[i] = expf(x[i] - mx);
        sum += y[i];
    }
    for (int i = 0; i < n; i++) y[i] /= sum;
}
