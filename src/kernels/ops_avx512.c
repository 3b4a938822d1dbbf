/*
 * kernels/ops_avx512 — row-wise ops (RMSNorm, RoPE, SiLU·mul, add, softmax) with AVX-512.
 *
 * All are element-wise or reduce within one row, so a row's result never depends on how
 * many rows come with it. RoPE takes cos/sin from libm (a vector sin/cos would not match
 * the reference's 1-ulp values) and rotates with separate products like the scalar code,
 * which makes it bit-identical to the scalar variant.
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include "kernels/simd_avx512.h"

#include <math.h>

void kr_rmsnorm_f32_avx512(int n_rows, int d, const float *x, int ldx, const float *w, float eps,
                           float *y, int ldy) {
    for (int r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * (size_t)ldx;
        float *yr = y + (size_t)r * (size_t)ldy;
        __m512 ss = _mm512_setzero_ps();
        for (int i = 0; i < d; i += 16) {
            __m512 v = _mm512_maskz_loadu_ps(kr_mask16(d - i), xr + i);
            ss = _mm512_fmadd_ps(v, v, ss);
        }
        __m512 inv = _mm512_set1_ps(1.0f / sqrtf(kr_hsum16(ss) / (float)d + eps));
        for (int i = 0; i < d; i += 16) {
            __mmask16 m = kr_mask16(d - i);
            __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, xr + i), inv);
            _mm512_mask_storeu_ps(yr + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i)));
        }
    }
}

void kr_rope_f32_avx512(int n_rows, int n_heads, int head_dim, float *x, int ldx, int pos0,
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
                for (int i = 0; i < ni; i += 16) {
                    __mmask16 m = kr_mask16(ni - i);
                    __m512 c = _mm512_maskz_loadu_ps(m, cs + i),
                           s = _mm512_maskz_loadu_ps(m, sn + i);
                    __m512 a = _mm512_maskz_loadu_ps(m, lo + i),
                           b = _mm512_maskz_loadu_ps(m, hi + i);
                    __m512 na = _mm512_sub_ps(_mm512_mul_ps(a, c), _mm512_mul_ps(b, s));
                    __m512 nb = _mm512_add_ps(_mm512_mul_ps(b, c), _mm512_mul_ps(a, s));
                    _mm512_mask_storeu_ps(lo + i, m, na);
                    _mm512_mask_storeu_ps(hi + i, m, nb);
                }
            }
        }
    }
}

void kr_silu_mul_f32_avx512(int n, const float *a, const float *b, float *out) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = kr_mask16(n - i);
        __m512 x = _mm512_maskz_loadu_ps(m, a + i);
        __m512 e = kr_exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, b + i)));
    }
}

void kr_add_f32_avx512(int n, const float *x, float *y) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = kr_mask16(n - i);
        __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

void kr_softmax_f32_avx512(int n, const float *x, float *y) {
    if (n <= 0) return;
    __m512 mx = _mm512_set1_ps(-__builtin_inff());
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = kr_mask16(n - i);
        mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, x + i));
    }
    __m512 mv = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = kr_mask16(n - i);
        __m512 e =
            _mm512_maskz_mov_ps(m, kr_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mv)));
        sum = _mm512_add_ps(sum, e);
        _mm512_mask_storeu_ps(y + i, m, e);
    }
    __m512 tv = _mm512_set1_ps(kr_hsum16(sum));
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = kr_mask16(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(_mm512_maskz_loadu_ps(m, y + i), tv));
    }
}
#endif
