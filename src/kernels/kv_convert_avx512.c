/* kernels/kv_convert_avx512 — kv_convert.h with AVX-512: 16 values per step, masked tails;
 * the same operations as the scalar reference, so the same bits. */
#include "kernels/kv_convert.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/simd_avx512.h"

static inline __m256i bf16_bits16(__m512 x) {
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i rne = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    __m512i nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
    __mmask16 is_nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                               _mm512_set1_epi32(0x7F800000));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rne, nan));
}

void kr_kv_pack_bf16_avx512(const float *x, uint16_t *out, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(out + i), bf16_bits16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = kr_mask16((int)(n - i));
        _mm256_mask_storeu_epi16(out + i, m, bf16_bits16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

void kr_kv_unpack_bf16_avx512(const uint16_t *h, float *out, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(h + i)));
        _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
    }
    if (i < n) {
        __mmask16 m = kr_mask16((int)(n - i));
        __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, h + i));
        _mm512_mask_storeu_ps(out + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
    }
}

static inline __m128i int8_codes16(__m512 x, __m512 sc) {
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    __m512 t = _mm512_sub_ps(_mm512_add_ps(_mm512_div_ps(x, sc), magic), magic);
    __mmask16 nan = _mm512_cmp_ps_mask(t, t, _CMP_UNORD_Q);
    /* Compare-and-blend, not min/max: those return an operand, not NaN, for a NaN input. */
    t = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(t, _mm512_set1_ps(127.0f), _CMP_GT_OQ), t,
                             _mm512_set1_ps(127.0f));
    t = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(t, _mm512_set1_ps(-127.0f), _CMP_LT_OQ), t,
                             _mm512_set1_ps(-127.0f));
    t = _mm512_mask_blend_ps(nan, t, _mm512_setzero_ps());
    return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(t));
}

void kr_kv_pack_int8_avx512(const float *x, int8_t *q, float *scale, int d, int group) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    for (int g0 = 0; g0 < d; g0 += group) {
        const float *xg = x + g0;
        __m512 m = _mm512_setzero_ps();
        int j = 0;
        /* max(a, m) returns m when a is NaN: a NaN never wins, as in the scalar loop. */
        for (; j + 16 <= group; j += 16)
            m = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(xg + j), absmask), m);
        if (j < group) {
            __mmask16 k = kr_mask16(group - j);
            m = _mm512_max_ps(_mm512_and_ps(_mm512_maskz_loadu_ps(k, xg + j), absmask), m);
        }
        float amax = _mm512_reduce_max_ps(m);
        float sc = amax / 127.0f;
        scale[g0 / group] = sc;
        int8_t *qg = q + g0;
        if (sc == 0.0f) {
            for (j = 0; j < group; j++) qg[j] = 0;
            continue;
        }
        __m512 scv = _mm512_set1_ps(sc);
        for (j = 0; j + 16 <= group; j += 16)
            _mm_storeu_si128((__m128i *)(qg + j), int8_codes16(_mm512_loadu_ps(xg + j), scv));
        if (j < group) {
            __mmask16 k = kr_mask16(group - j);
            _mm_mask_storeu_epi8(qg + j, k, int8_codes16(_mm512_maskz_loadu_ps(k, xg + j), scv));
        }
    }
}

void kr_kv_unpack_int8_avx512(const int8_t *q, const float *scale, float *out, int d, int group) {
    for (int g0 = 0; g0 < d; g0 += group) {
        __m512 sc = _mm512_set1_ps(scale[g0 / group]);
        const int8_t *qg = q + g0;
        float *og = out + g0;
        int j = 0;
        for (; j + 16 <= group; j += 16) {
            __m512 v = _mm512_cvtepi32_ps(
                _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(qg + j))));
            _mm512_storeu_ps(og + j, _mm512_mul_ps(v, sc));
        }
        if (j < group) {
            __mmask16 k = kr_mask16(group - j);
            __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, qg + j)));
            _mm512_mask_storeu_ps(og + j, k, _mm512_mul_ps(v, sc));
        }
    }
}
#endif
