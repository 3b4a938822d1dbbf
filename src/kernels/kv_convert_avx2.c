/* kernels/kv_convert_avx2 — kv_convert.h with AVX2: 8 values per step; tails run the scalar
 * formula on the same operations, so the same bits. */
#include "kernels/kv_convert.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

void kr_kv_pack_bf16_avx2(const float *x, uint16_t *out, size_t n) {
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF);
    const __m256i quiet = _mm256_set1_epi32(0x0040), abs = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i inf = _mm256_set1_epi32(0x7F800000);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        __m256i hi = _mm256_srli_epi32(u, 16);
        __m256i rne = _mm256_srli_epi32(
            _mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(hi, one)), 16);
        /* |u| as a signed int is non-negative, so the signed compare is the unsigned one */
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
        __m256i r = _mm256_blendv_epi8(rne, _mm256_or_si256(hi, quiet), nan);
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i *)(out + i), _mm256_castsi256_si128(packed));
    }
    if (i < n) kr_kv_pack_bf16_scalar(x + i, out + i, n - i); /* the same bits */
}

void kr_kv_unpack_bf16_avx2(const uint16_t *h, float *out, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + i)));
        _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&out[i], &u, sizeof u);
    }
}

void kr_kv_pack_int8_avx2(const float *x, int8_t *q, float *scale, int d, int group) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256 magic = _mm256_set1_ps(12582912.0f), hi = _mm256_set1_ps(127.0f),
                 lo = _mm256_set1_ps(-127.0f);
    for (int g0 = 0; g0 < d; g0 += group) {
        const float *xg = x + g0;
        int8_t *qg = q + g0;
        __m256 m = _mm256_setzero_ps();
        int j = 0;
        /* max(a, m) returns m when a is NaN: a NaN never wins, as in the scalar loop. */
        for (; j + 8 <= group; j += 8)
            m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xg + j), absmask), m);
        float lanes[8], amax = 0.0f;
        _mm256_storeu_ps(lanes, m);
        for (int t = 0; t < 8; t++)
            if (lanes[t] > amax) amax = lanes[t];
        for (; j < group; j++) {
            float a = fabsf(xg[j]);
            if (a > amax) amax = a;
        }
        float sc = amax / 127.0f;
        scale[g0 / group] = sc;
        if (sc == 0.0f) {
            memset(qg, 0, (size_t)group);
            continue;
        }
        __m256 scv = _mm256_set1_ps(sc);
        for (j = 0; j + 8 <= group; j += 8) {
            __m256 t = _mm256_sub_ps(
                _mm256_add_ps(_mm256_div_ps(_mm256_loadu_ps(xg + j), scv), magic), magic);
            __m256 nan = _mm256_cmp_ps(t, t, _CMP_UNORD_Q);
            t = _mm256_blendv_ps(t, hi, _mm256_cmp_ps(t, hi, _CMP_GT_OQ));
            t = _mm256_blendv_ps(t, lo, _mm256_cmp_ps(t, lo, _CMP_LT_OQ));
            t = _mm256_blendv_ps(t, _mm256_setzero_ps(), nan);
            int32_t c[8];
            _mm256_storeu_si256((__m256i *)c, _mm256_cvttps_epi32(t));
            for (int u = 0; u < 8; u++) qg[j + u] = (int8_t)c[u];
        }
        for (; j < group; j++) qg[j] = kr_kv_int8_code(xg[j], sc);
    }
}

void kr_kv_unpack_int8_avx2(const int8_t *q, const float *scale, float *out, int d, int group) {
    for (int g0 = 0; g0 < d; g0 += group) {
        float s = scale[g0 / group];
        __m256 sc = _mm256_set1_ps(s);
        const int8_t *qg = q + g0;
        float *og = out + g0;
        int j = 0;
        for (; j + 8 <= group; j += 8) {
            __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(qg + j)));
            _mm256_storeu_ps(og + j, _mm256_mul_ps(_mm256_cvtepi32_ps(v), sc));
        }
        for (; j < group; j++) og[j] = (float)qg[j] * s;
    }
}
#endif
