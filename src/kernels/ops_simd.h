/*
 * kernels/ops_simd — row-wise ops (RMSNorm, RoPE, SiLU·mul, add, softmax), written once over
 * kernels/simd_map.h and compiled per ISA by ops_avx2.c (KR_SIMD_WIDTH 8) and ops_avx512.c
 * (16). Included by those two files only.
 *
 * All are element-wise or reduce within one row, so a row's result never depends on how many
 * rows come with it. RoPE takes cos/sin from libm (a vector sin/cos would not match the
 * reference's 1-ulp values) and rotates with separate products like the scalar code, which
 * makes it bit-identical to the scalar variant.
 */
#include <math.h>

#include "kernels/kernels.h"
#include "kernels/simd_map.h"

void KR_SIMD(kr_rmsnorm_f32)(int n_rows, int d, const float *x, int ldx, const float *w, float eps,
                             float *y, int ldy) {
    for (int r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * (size_t)ldx;
        float *yr = y + (size_t)r * (size_t)ldy;
        kr_vf ss = kr_v_zero();
        for (int i = 0; i < d; i += KR_VL) {
            kr_vf v = kr_v_load(kr_v_mask(d - i), xr + i);
            ss = kr_v_fmadd(v, v, ss);
        }
        kr_vf inv = kr_v_set1(1.0f / sqrtf(kr_v_hsum(ss) / (float)d + eps));
        for (int i = 0; i < d; i += KR_VL) {
            kr_vmask m = kr_v_mask(d - i);
            kr_vf v = kr_v_mul(kr_v_load(m, xr + i), inv);
            kr_v_store(yr + i, kr_v_mul(v, kr_v_load(m, w + i)), m, d - i);
        }
    }
}

void KR_SIMD(kr_rope_f32)(int n_rows, int n_heads, int head_dim, float *x, int ldx, int pos0,
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
                for (int i = 0; i < ni; i += KR_VL) {
                    kr_vmask m = kr_v_mask(ni - i);
                    kr_vf c = kr_v_load(m, cs + i), s = kr_v_load(m, sn + i);
                    kr_vf a = kr_v_load(m, lo + i), b = kr_v_load(m, hi + i);
                    kr_vf na = kr_v_sub(kr_v_mul(a, c), kr_v_mul(b, s));
                    kr_vf nb = kr_v_add(kr_v_mul(b, c), kr_v_mul(a, s));
                    kr_v_store(lo + i, na, m, ni - i);
                    kr_v_store(hi + i, nb, m, ni - i);
                }
            }
        }
    }
}

void KR_SIMD(kr_silu_mul_f32)(int n, const float *a, const float *b, float *out) {
    const kr_vf one = kr_v_set1(1.0f);
    for (int i = 0; i < n; i += KR_VL) {
        kr_vmask m = kr_v_mask(n - i);
        kr_vf x = kr_v_load(m, a + i);
        kr_vf e = kr_v_exp(kr_v_sub(kr_v_zero(), x));
        kr_vf s = kr_v_div(x, kr_v_add(one, e));
        kr_v_store(out + i, kr_v_mul(s, kr_v_load(m, b + i)), m, n - i);
    }
}

void KR_SIMD(kr_add_f32)(int n, const float *x, float *y) {
    for (int i = 0; i < n; i += KR_VL) {
        kr_vmask m = kr_v_mask(n - i);
        kr_v_store(y + i, kr_v_add(kr_v_load(m, y + i), kr_v_load(m, x + i)), m, n - i);
    }
}

void KR_SIMD(kr_softmax_f32)(int n, const float *x, float *y) {
    if (n <= 0) return;
    kr_vf mv = kr_v_set1(kr_v_row_max(x, n));
    kr_vf sum = kr_v_zero();
    for (int i = 0; i < n; i += KR_VL) {
        kr_vmask m = kr_v_mask(n - i);
        kr_vf e = kr_v_keep(kr_v_exp(kr_v_sub(kr_v_load(m, x + i), mv)), m);
        sum = kr_v_add(sum, e);
        kr_v_store(y + i, e, m, n - i);
    }
    kr_vf tv = kr_v_set1(kr_v_hsum(sum));
    for (int i = 0; i < n; i += KR_VL) {
        kr_vmask m = kr_v_mask(n - i);
        kr_v_store(y + i, kr_v_div(kr_v_load(m, y + i), tv), m, n - i);
    }
}
