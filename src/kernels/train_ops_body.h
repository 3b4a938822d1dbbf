/*
 * kernels/train_ops_body.h — the row-wise passes of a training step (train_kernels.h), written
 * once for both vector widths over the names of simd_width.h. train_ops_avx2.c and
 * train_ops_avx512.c include that, define TO_NAME(x) (x with the ISA's suffix) and include
 * this file.
 *
 * Row reductions (sums of squares, the RMSNorm backward's dot, the softmax's max and sum) keep
 * VW_W lane sums in the row's order and add them up with VW_HSUM, so a row's result depends on
 * its length only. Column sums add row after row, one lane per column. AdamW uses no fused
 * multiply-add and IEEE sqrt and division, so it gives the scalar reference's bits.
 */
#include <math.h>
#include <string.h>

#include "kernels/train_kernels.h"

/* The statements after nc for n floats, VW_W at a time: c the offset, nc the lanes (the tail
 * masked). */
#define TO_FOR_LANES(n, c, nc, ...)                 \
    for (int c = 0; c < (n); c += VW_W) {           \
        const int nc = (n)-c < VW_W ? (n)-c : VW_W; \
        __VA_ARGS__;                                \
    }

static float TO_NAME(sum_squares)(const float *x, int d) {
    VW_V acc = VW_ZERO();
    TO_FOR_LANES(d, c, nc, {
        VW_V v = VW_LOADN(x + c, nc);
        acc = VW_FMA(v, v, acc);
    })
    return VW_HSUM(acc);
}

/* y = (x·r)·w */
static void TO_NAME(scale_row)(const float *x, float r, const float *w, float *y, int d) {
    const VW_V rv = VW_SET1(r);
    TO_FOR_LANES(d, c, nc,
                 VW_STOREN(y + c, nc, VW_MUL(VW_MUL(VW_LOADN(x + c, nc), rv), VW_LOADN(w + c, nc))))
}

void TO_NAME(kr_rmsnorm_fwd_rows)(int n_rows, int d, const float *x, const float *w, float eps,
                                  float *y, float *rstd) {
    for (int m = 0; m < n_rows; m++, x += d, y += d) {
        float r = 1.0f / sqrtf(TO_NAME(sum_squares)(x, d) / (float)d + eps);
        rstd[m] = r;
        TO_NAME(scale_row)(x, r, w, y, d);
    }
}

void TO_NAME(kr_rmsnorm_apply_rows)(int n_rows, int d, const float *x, const float *rstd,
                                    const float *w, float *y) {
    for (int m = 0; m < n_rows; m++, x += d, y += d) TO_NAME(scale_row)(x, rstd[m], w, y, d);
}

void TO_NAME(kr_rmsnorm_bwd_rows)(int n_rows, int d, const float *dy, const float *x,
                                  const float *rstd, const float *w, float *dx, int accumulate) {
    for (int m = 0; m < n_rows; m++, x += d, dy += d, dx += d) {
        VW_V acc = VW_ZERO();
        TO_FOR_LANES(d, c, nc, {
            VW_V wdy = VW_MUL(VW_LOADN(w + c, nc), VW_LOADN(dy + c, nc));
            acc = VW_FMA(wdy, VW_LOADN(x + c, nc), acc);
        })
        const float r = rstd[m], k = VW_HSUM(acc) / (float)d * r * r * r;
        const VW_V rv = VW_SET1(r), kv = VW_SET1(k);
        TO_FOR_LANES(d, c, nc, {
            VW_V wdy = VW_MUL(VW_LOADN(w + c, nc), VW_LOADN(dy + c, nc));
            VW_V g = VW_SUB(VW_MUL(rv, wdy), VW_MUL(VW_LOADN(x + c, nc), kv));
            VW_STOREN(dx + c, nc, accumulate ? VW_ADD(VW_LOADN(dx + c, nc), g) : g);
        })
    }
}

void TO_NAME(kr_rmsnorm_gw_cols)(int n_rows, int d, int c0, int c1, const float *dy, const float *x,
                                 const float *rstd, float *gw) {
    for (int c = c0; c < c1; c += VW_W) {
        const int nc = c1 - c < VW_W ? c1 - c : VW_W;
        VW_V acc = VW_LOADN(gw + c, nc);
        for (int m = 0; m < n_rows; m++) {
            size_t o = (size_t)m * (size_t)d + (size_t)c;
            VW_V xr = VW_MUL(VW_LOADN(x + o, nc), VW_SET1(rstd[m]));
            acc = VW_ADD(acc, VW_MUL(VW_LOADN(dy + o, nc), xr));
        }
        VW_STOREN(gw + c, nc, acc);
    }
}

void TO_NAME(kr_colsum_add_cols)(int n_rows, int ld, int c0, int c1, const float *x, float *out) {
    /* four column vectors at a time: four independent chains per row */
    int c = c0;
    for (; c + 4 * VW_W <= c1; c += 4 * VW_W) {
        VW_V a0 = VW_LOAD(out + c), a1 = VW_LOAD(out + c + VW_W);
        VW_V a2 = VW_LOAD(out + c + 2 * VW_W), a3 = VW_LOAD(out + c + 3 * VW_W);
        for (int m = 0; m < n_rows; m++) {
            const float *r = x + (size_t)m * (size_t)ld + (size_t)c;
            a0 = VW_ADD(a0, VW_LOAD(r));
            a1 = VW_ADD(a1, VW_LOAD(r + VW_W));
            a2 = VW_ADD(a2, VW_LOAD(r + 2 * VW_W));
            a3 = VW_ADD(a3, VW_LOAD(r + 3 * VW_W));
        }
        VW_STORE(out + c, a0);
        VW_STORE(out + c + VW_W, a1);
        VW_STORE(out + c + 2 * VW_W, a2);
        VW_STORE(out + c + 3 * VW_W, a3);
    }
    for (; c < c1; c += VW_W) {
        const int nc = c1 - c < VW_W ? c1 - c : VW_W;
        VW_V a = VW_LOADN(out + c, nc);
        for (int m = 0; m < n_rows; m++)
            a = VW_ADD(a, VW_LOADN(x + (size_t)m * (size_t)ld + (size_t)c, nc));
        VW_STOREN(out + c, nc, a);
    }
}

void TO_NAME(kr_swiglu_bwd)(int n, const float *dg, float *h1, float *h3, float *g) {
    const VW_V one = VW_SET1(1.0f);
    TO_FOR_LANES(n, i, ni, {
        VW_V x = VW_LOADN(h1 + i, ni), u = VW_LOADN(h3 + i, ni), d = VW_LOADN(dg + i, ni);
        VW_V sig = VW_DIV(one, VW_ADD(one, VW_EXP(VW_SUB(VW_ZERO(), x))));
        VW_V silu = VW_MUL(x, sig);
        VW_STOREN(g + i, ni, VW_MUL(silu, u));
        VW_V dsilu = VW_MUL(sig, VW_ADD(one, VW_MUL(x, VW_SUB(one, sig))));
        VW_STOREN(h1 + i, ni, VW_MUL(VW_MUL(d, u), dsilu));
        VW_STOREN(h3 + i, ni, VW_MUL(d, silu));
    })
}

void TO_NAME(kr_rope_rows)(int n_rows, int n_heads, int half, float *x, int ld, const float *cos,
                           const float *sin, float sign) {
    const VW_V sg = VW_SET1(sign);
    for (int r = 0; r < n_rows; r++, x += ld, cos += half, sin += half)
        for (int h = 0; h < n_heads; h++) {
            float *lo = x + (size_t)h * (size_t)(2 * half), *hi = lo + half;
            TO_FOR_LANES(half, i, ni, {
                VW_V a = VW_LOADN(lo + i, ni), b = VW_LOADN(hi + i, ni);
                VW_V c = VW_LOADN(cos + i, ni), s = VW_MUL(sg, VW_LOADN(sin + i, ni));
                VW_STOREN(lo + i, ni, VW_SUB(VW_MUL(a, c), VW_MUL(b, s)));
                VW_STOREN(hi + i, ni, VW_ADD(VW_MUL(b, c), VW_MUL(a, s)));
            })
        }
}

double TO_NAME(kr_softmax_xent_row)(int V, float *x, int target) {
    VW_V mxv = VW_SET1(-INFINITY);
    TO_FOR_LANES(
        V, c, nc,
        mxv = VW_MAX(mxv, VW_BLEND(VW_LANES(0, nc), VW_LOADN(x + c, nc), VW_SET1(-INFINITY))))
    float lanes[VW_W], mx = -INFINITY;
    VW_STORE(lanes, mxv);
    for (int i = 0; i < VW_W; i++) mx = lanes[i] > mx ? lanes[i] : mx;
    const float gap = mx - x[target];
    const VW_V m = VW_SET1(mx);
    VW_V sum = VW_ZERO();
    TO_FOR_LANES(V, c, nc, {
        VW_V e = VW_BLEND(VW_LANES(0, nc), VW_EXP(VW_SUB(VW_LOADN(x + c, nc), m)), VW_ZERO());
        VW_STOREN(x + c, nc, e);
        sum = VW_ADD(sum, e);
    })
    const float total = VW_HSUM(sum);
    const VW_V r = VW_SET1(1.0f / total);
    TO_FOR_LANES(V, c, nc, VW_STOREN(x + c, nc, VW_MUL(VW_LOADN(x + c, nc), r)))
    return (double)gap + log((double)total);
}

void TO_NAME(kr_xent_grad_row)(int V, float *p, int target, float scale) {
    p[target] -= 1.0f;
    const VW_V s = VW_SET1(scale);
    TO_FOR_LANES(V, c, nc, VW_STOREN(p + c, nc, VW_MUL(VW_LOADN(p + c, nc), s)))
}

void TO_NAME(kr_adamw_f32)(size_t n, const kr_adamw *a, float *w, const float *g, float *m,
                           float *v) {
    const VW_V clip = VW_SET1(a->clip_scale), decay = VW_SET1(a->decay);
    const VW_V b1 = VW_SET1(a->beta1), omb1 = VW_SET1(a->one_m_beta1);
    const VW_V b2 = VW_SET1(a->beta2), omb2 = VW_SET1(a->one_m_beta2);
    const VW_V bc2 = VW_SET1(a->bc2_sqrt), eps = VW_SET1(a->eps), step = VW_SET1(a->neg_step);
    for (size_t i = 0; i < n; i += VW_W) {
        const int ni = n - i < VW_W ? (int)(n - i) : VW_W;
        VW_V gi = VW_MUL(VW_LOADN(g + i, ni), clip);
        VW_V wi = VW_MUL(VW_LOADN(w + i, ni), decay);
        VW_V mi = VW_ADD(VW_MUL(VW_LOADN(m + i, ni), b1), VW_MUL(gi, omb1));
        VW_V vi = VW_ADD(VW_MUL(VW_LOADN(v + i, ni), b2), VW_MUL(VW_MUL(omb2, gi), gi));
        VW_V denom = VW_ADD(VW_DIV(VW_SQRT(vi), bc2), eps);
        VW_STOREN(m + i, ni, mi);
        VW_STOREN(v + i, ni, vi);
        VW_STOREN(w + i, ni, VW_ADD(wi, VW_MUL(step, VW_DIV(mi, denom))));
    }
}
