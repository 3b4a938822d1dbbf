/*
 * kernels/train_ops_scalar — the reference row-wise passes of a training step
 * (train_kernels.h), any CPU; the SIMD variants (train_ops_body.h) are tested against them.
 */
#include <math.h>
#include <string.h>

#include "kernels/train_kernels.h"

void kr_rmsnorm_fwd_rows_scalar(int n_rows, int d, const float *x, const float *w, float eps,
                                float *y, float *rstd) {
    for (int m = 0; m < n_rows; m++, x += d, y += d) {
        float ss = 0.0f;
        for (int c = 0; c < d; c++) ss += x[c] * x[c];
        float r = 1.0f / sqrtf(ss / (float)d + eps);
        rstd[m] = r;
        for (int c = 0; c < d; c++) y[c] = (x[c] * r) * w[c];
    }
}

void kr_rmsnorm_apply_rows_scalar(int n_rows, int d, const float *x, const float *rstd,
                                  const float *w, float *y) {
    for (int m = 0; m < n_rows; m++, x += d, y += d)
        for (int c = 0; c < d; c++) y[c] = (x[c] * rstd[m]) * w[c];
}

void kr_rmsnorm_bwd_rows_scalar(int n_rows, int d, const float *dy, const float *x,
                                const float *rstd, const float *w, float *dx, int accumulate) {
    for (int m = 0; m < n_rows; m++, x += d, dy += d, dx += d) {
        float r = rstd[m], dot = 0.0f;
        for (int c = 0; c < d; c++) dot += (w[c] * dy[c]) * x[c];
        float k = dot / (float)d * r * r * r;
        for (int c = 0; c < d; c++) {
            float g = r * (w[c] * dy[c]) - x[c] * k;
            dx[c] = accumulate ? dx[c] + g : g;
        }
    }
}

void kr_rmsnorm_gw_cols_scalar(int n_rows, int d, int c0, int c1, const float *dy, const float *x,
                               const float *rstd, float *gw) {
    for (int m = 0; m < n_rows; m++, x += d, dy += d)
        for (int c = c0; c < c1; c++) gw[c] += dy[c] * (x[c] * rstd[m]);
}

void kr_colsum_add_cols_scalar(int n_rows, int ld, int c0, int c1, const float *x, float *out) {
    for (int m = 0; m < n_rows; m++, x += ld)
        for (int c = c0; c < c1; c++) out[c] += x[c];
}

void kr_swiglu_bwd_scalar(int n, const float *dg, float *h1, float *h3, float *g) {
    for (int i = 0; i < n; i++) {
        float x = h1[i], u = h3[i];
        float sig = 1.0f / (1.0f + expf(-x)), silu = x * sig;
        g[i] = silu * u;
        h1[i] = (dg[i] * u) * (sig * (1.0f + x * (1.0f - sig)));
        h3[i] = dg[i] * silu;
    }
}

void kr_rope_rows_scalar(int n_rows, int n_heads, int half, float *x, int ld, const float *cos,
                         const float *sin, float sign) {
    for (int r = 0; r < n_rows; r++, x += ld, cos += half, sin += half)
        for (int h = 0; h < n_heads; h++) {
            float *lo = x + (size_t)h * (size_t)(2 * half), *hi = lo + half;
            for (int i = 0; i < half; i++) {
                float a = lo[i], b = hi[i], c = cos[i], s = sign * sin[i];
                float ac = a * c, bs = b * s, bc = b * c, as = a * s;
                lo[i] = ac - bs;
                hi[i] = bc + as;
            }
        }
}

double kr_softmax_xent_row_scalar(int V, float *x, int target) {
    float mx = x[0];
    for (int c = 1; c < V; c++) mx = x[c] > mx ? x[c] : mx;
    const float gap = mx - x[target];
    float sum = 0.0f;
    for (int c = 0; c < V; c++) {
        x[c] = expf(x[c] - mx);
        sum += x[c];
    }
    const float r = 1.0f / sum;
    for (int c = 0; c < V; c++) x[c] *= r;
    return (double)gap + log((double)sum);
}

void kr_xent_grad_row_scalar(int V, float *p, int target, float scale) {
    p[target] -= 1.0f;
    for (int c = 0; c < V; c++) p[c] *= scale;
}

void kr_adamw_f32_scalar(size_t n, const kr_adamw *a, float *w, const float *g, float *m,
                         float *v) {
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * a->clip_scale;
        w[i] = w[i] * a->decay;
        m[i] = m[i] * a->beta1 + gi * a->one_m_beta1;
        v[i] = v[i] * a->beta2 + a->one_m_beta2 * gi * gi;
        float denom = sqrtf(v[i]) / a->bc2_sqrt + a->eps;
        w[i] = w[i] + a->neg_step * (m[i] / denom);
    }
}
