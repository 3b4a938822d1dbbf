/*
 * kernels/quant_dequant_avx2 — dequantiser with AVX2 + F16C, bit-identical to the scalar one
 * (quant_dequant_scalar.c defines the values): the block decoders of quant_dequant_body.h at
 * 8 lanes, and the q4 rows.
 */
#include "kernels/quant.h"

#if defined(__x86_64__)
#define KR_WIDTH_AVX2
#include "kernels/simd_width.h"

#include <string.h>

KR_INLINE __m256 qd_bf16(const uint16_t *src) {
    __m128i h = _mm_loadu_si128((const __m128i *)src);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

KR_INLINE __m256 qd_int8(const int8_t *src, __m256 sv) {
    __m128i b = _mm_loadl_epi64((const __m128i *)src);
    return _mm256_mul_ps(sv, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)));
}

/* 8 e4m3 bytes → value · s1 (· s2 unless fused). Sign-extended, (x << 7) has the sign in
 * bits 15 and 14 and the magnitude in 7..13; clearing bit 14 leaves the f16 with the same
 * bits moved up 7, i.e. the value / 256, which F16C widens exactly. NaN bytes (0x7F / 0xFF)
 * get kr_e4m3_to_f32's fixed NaN: the byte's sign over 0x7FC00000. */
KR_INLINE __m256 qd_fp8(const uint8_t *src, __m256 s1, __m256 s2, int fused, int check_nan) {
    __m128i b = _mm_loadl_epi64((const __m128i *)src);
    __m128i x = _mm_slli_epi16(_mm_cvtepi8_epi16(b), 7);
    __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(_mm_and_si128(x, _mm_set1_epi16((short)0xBF80))), s1);
    if (!fused) v = _mm256_mul_ps(v, s2);
    if (check_nan) {
        __m128i nan =
            _mm_cmpeq_epi8(_mm_or_si128(b, _mm_set1_epi8((char)0x80)), _mm_set1_epi8((char)0xFF));
        if (_mm_movemask_epi8(nan) & 0xFF) {
            __m256i bi = _mm256_cvtepi8_epi32(b);
            __m256i sign = _mm256_and_si256(bi, _mm256_set1_epi32((int)0x80000000u));
            __m256 q = _mm256_castsi256_ps(_mm256_or_si256(sign, _mm256_set1_epi32(0x7FC00000)));
            v = _mm256_blendv_ps(v, q, _mm256_castsi256_ps(_mm256_cvtepi8_epi32(nan)));
        }
    }
    return v;
}

/* Whether any of the 32 bytes at src is an e4m3 NaN. */
KR_INLINE int qd_fp8_has_nan(const uint8_t *src) {
    const __m256i m7f = _mm256_set1_epi8(0x7F);
    __m256i x = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)src), m7f);
    return _mm256_movemask_epi8(_mm256_cmpeq_epi8(x, m7f)) != 0;
}

/* One 32-element run (16 bytes): element i < 16 in the low nibble of byte i, element 16 + i
 * in its high nibble. (float)q − (float)zero is exact, so each value is the scalar
 * s · (float)(q − zero). */
KR_INLINE void q4_8(__m256i q, __m256 sv, __m256 zv, float *o, int j, int k) {
    __m256 v = _mm256_mul_ps(sv, _mm256_sub_ps(_mm256_cvtepi32_ps(q), zv));
    if (j + 8 <= k)
        _mm256_storeu_ps(o + j, v);
    else if (j < k)
        VW_STOREN(o + j, k - j, v);
}

KR_INLINE void run32(const uint8_t *src, __m256 sv, __m256 zv, float *o, int j0, int k) {
    const __m256i m0f = _mm256_set1_epi32(0x0F);
    __m256i x0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(src + j0 / 2)));
    __m256i x1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(src + j0 / 2 + 8)));
    q4_8(_mm256_and_si256(x0, m0f), sv, zv, o, j0, k);
    q4_8(_mm256_and_si256(x1, m0f), sv, zv, o, j0 + 8, k);
    q4_8(_mm256_srli_epi32(x0, 4), sv, zv, o, j0 + 16, k);
    q4_8(_mm256_srli_epi32(x1, 4), sv, zv, o, j0 + 24, k);
}

static void row_q4(const uint8_t *src, int k, int group, const uint16_t *gs, const uint8_t *gz,
                   float *o) {
    int groups = (k + group - 1) / group;
    for (int g = 0; g < groups; g++) {
        __m256 sv = _mm256_set1_ps(_cvtsh_ss(gs[g])), zv = _mm256_set1_ps((float)gz[g]);
        int j0 = g * group;
        run32(src, sv, zv, o, j0, k);
        if (group == 64 && j0 + 32 < k) run32(src, sv, zv, o, j0 + 32, k);
    }
}

#include "kernels/quant_dequant_body.h"
#endif
