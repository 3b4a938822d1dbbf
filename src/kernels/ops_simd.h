/*
 * kernels/ops_simd — row-wise ops (RMSNorm, RoPE, SiLU·mul, add, softmax), written once over
 * kernels/simd_width.h and compiled per ISA by ops_avx2.c (KR_WIDTH_AVX2) and ops_avx512.c
 * (KR_WIDTH_AVX512). Included by those two files only.
 *
 * All are element-wise or reduce within one row, so a row's result never depends on how many
 * rows come with it. RoPE takes cos/sin from libm (a vector sin/cos would not match the
 * reference's 1-ulp values) and rotates with separate products like the scalar code, which
 * makes it bit-identical to the scalar variant.
 */
#include <math.h>

#include "kernels/kernels.h"
#include "kernels/simd_width.h"

void VW_NAME(kr_rmsnorm_f32)(int n_rows, int d, const float *x, int ldx, const float *w, float eps,
                             float *y, int ldy) {
    for (int r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * (size_t)ldx;
        float *yr = y + (size_t)r * (size_t)ldy;
        VW_V ss = VW_ZERO();
        for (int i = 0; i < d; i += VW_W) {
            VW_V v = VW_LOADM(xr + i, VW_MASK(d - i));
            ss = VW_FMA(v, v, ss);
        }
        VW_V inv = VW_SET1(1.0f / sqrtf(VW_HSUM(ss) / (float)d + eps));
        for (int i = 0; i < d; i += VW_W) {
            VW_M m = VW_MASK(d - i);
            VW_V v = VW_MUL(VW_LOADM(xr + i, m), inv);
            VW_STOREM(yr + i, m, d - i, VW_MUL(v, VW_LOADM(w + i, m)));
        }
    }
}

void VW_NAME(kr_rope_f32)(int n_rows, int n_heads, int head_dim, float *x, int ldx, int pos0,
                          const float *inv_freq) {
    enum { CH = 64 };
    float cs[CH], sn[CH];
    int half = head_dim / 2;
    for (int r = 0; r < n_rows; r++) {
        float p = (float)(pos0 + r);
        float *xr = x + (size_t)r * (size_t)ldx;
        for (int i0 = 0; i0 < half; i0 += CH) {
            int ni = half - i0 < CH ? half - i0 : CH;
            for (int i = 0; i < ni; i++) {
                float th = p * inv_freq[i0 + i];
                cs[i] = cosf(th);
                sn[i] = sinf(th);
            }
            for (int h = 0; h < n_heads; h++) {
                float *lo = xr + (size_t)h * (size_t)head_dim + i0, *hi = lo + half;
                for (int i = 0; i < ni; i += VW_W) {
                    VW_M m = VW_MASK(ni - i);
                    VW_V c = VW_LOADM(cs + i, m), s = VW_LOADM(sn + i, m);
                    VW_V a = VW_LOADM(lo + i, m), b = VW_LOADM(hi + i, m);
                    VW_V na = VW_SUB(VW_MUL(a, c), VW_MUL(b, s));
                    VW_V nb = VW_ADD(VW_MUL(b, c), VW_MUL(a, s));
                    VW_STOREM(lo + i, m, ni - i, na);
                    VW_STOREM(hi + i, m, ni - i, nb);
                }
            }
        }
    }
}

void VW_NAME(kr_silu_mul_f32)(int n, const float *a, const float *b, float *out) {
    const VW_V one = VW_SET1(1.0f);
    for (int i = 0; i < n; i += VW_W) {
        VW_M m = VW_MASK(n - i);
        VW_V x = VW_LOADM(a + i, m);
        VW_V e = VW_EXP(VW_SUB(VW_ZERO(), x));
        VW_V s = VW_DIV(x, VW_ADD(one, e));
        VW_STOREM(out + i, m, n - i, VW_MUL(s, VW_LOADM(b + i, m)));
    }
}

void VW_NAME(kr_add_f32)(int n, const float *x, float *y) {
    for (int i = 0; i < n; i += VW_W) {
        VW_M m = VW_MASK(n - i);
        VW_STOREM(y + i, m, n - i, VW_ADD(VW_LOADM(y + i, m), VW_LOADM(x + i, m)));
    }
}

void VW_NAME(kr_softmax_f32)(int n, const float *x, float *y) {
    if (n <= 0) return;
    VW_V mv = VW_SET1(VW_ROW_MAX(x, n));
    VW_V sum = VW_ZERO();
    for (int i = 0; i < n; i += VW_W) {
        VW_M m = VW_MASK(n - i);
        VW_V e = VW_KEEP(VW_EXP(VW_SUB(VW_LOADM(x + i, m), mv)), m);
        sum = VW_ADD(sum, e);
        VW_STOREM(y + i, m, n - i, e);
    }
    VW_V tv = VW_SET1(VW_HSUM(sum));
    for (int i = 0; i < n; i += VW_W) {
        VW_M m = VW_MASK(n - i);
        VW_STOREM(y + i, m, n - i, VW_DIV(VW_LOADM(y + i, m), tv));
    }
}
