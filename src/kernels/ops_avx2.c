/*
 * kernels/ops_avx2 — row-wise ops (RMSNorm, RoPE, SiLU·mul, add, softmax) with AVX2+FMA.
 *
 * Element-wise or per-row reductions only, so a row's result never depends on its batch.
 * RoPE uses libm cos/sin and separate products, bit-identical to the scalar variant.
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include "kernels/simd_avx2.h"

#include <math.h>

void kr_rmsnorm_f32_avx2(int n_rows, int d, const float *x, int ldx, const float *w, float eps,
                         float *y, int ldy) {
    for (int r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * (size_t)ldx;
        float *yr = y + (size_t)r * (size_t)ldy;
        __m256 ss = _mm256_setzero_ps();
        for (int i = 0; i < d; i += 8) {
            __m256 v = _mm256_maskload_ps(xr + i, kr_mask8(d - i));
            ss = _mm256_fmadd_ps(v, v, ss);
        }
        __m256 inv = _mm256_set1_ps(1.0f / sqrtf(kr_hsum8(ss) / (float)d + eps));
        for (int i = 0; i < d; i += 8) {
            __m256i m = kr_mask8(d - i);
            __m256 v = _mm256_mul_ps(_mm256_maskload_ps(xr + i, m), inv);
            kr_store8(yr + i, _mm256_mul_ps(v, _mm256_maskload_ps(w + i, m)), d - i);
        }
    }
}

void kr_rope_f32_avx2(int n_rows, int n_heads, int head_dim, float *x, int ldx, int pos0,
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
                for (int i = 0; i < ni; i += 8) {
                    __m256i m = kr_mask8(ni - i);
                    __m256 c = _mm256_maskload_ps(cs + i, m), s = _mm256_maskload_ps(sn + i, m);
                    __m256 a = _mm256_maskload_ps(lo + i, m), b = _mm256_maskload_ps(hi + i, m);
                    __m256 na = _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s));
                    __m256 nb = _mm256_add_ps(_mm256_mul_ps(b, c), _mm256_mul_ps(a, s));
                    kr_store8(lo + i, na, ni - i);
                    kr_store8(hi + i, nb, ni - i);
                }
            }
        }
    }
}

void kr_silu_mul_f32_avx2(int n, const float *a, const float *b, float *out) {
    const __m256 one = _mm256_set1_ps(1.0f);
    for (int i = 0; i < n; i += 8) {
        __m256i m = kr_mask8(n - i);
        __m256 x = _mm256_maskload_ps(a + i, m);
        __m256 e = kr_exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, e));
        kr_store8(out + i, _mm256_mul_ps(s, _mm256_maskload_ps(b + i, m)), n - i);
    }
}

void kr_add_f32_avx2(int n, const float *x, float *y) {
    for (int i = 0; i < n; i += 8) {
        __m256i m = kr_mask8(n - i);
        __m256 v = _mm256_add_ps(_mm256_maskload_ps(y + i, m), _mm256_maskload_ps(x + i, m));
        kr_store8(y + i, v, n - i);
    }
}

void kr_softmax_f32_avx2(int n, const float *x, float *y) {
    if (n <= 0) return;
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    __m256 mv = _mm256_set1_ps(mx);
    __m256 sum = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        __m256i m = kr_mask8(n - i);
        __m256 e = kr_exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), mv));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
        sum = _mm256_add_ps(sum, e);
        kr_store8(y + i, e, n - i);
    }
    __m256 tv = _mm256_set1_ps(kr_hsum8(sum));
    for (int i = 0; i < n; i += 8) {
        __m256i m = kr_mask8(n - i);
        kr_store8(y + i, _mm256_div_ps(_mm256_maskload_ps(y + i, m), tv), n - i);
    }
}
#endif
