/*
 * kernels/quant_dequant_avx512 — dequantiser with AVX-512, bit-identical to the scalar one
 * (quant_dequant_scalar.c defines the values): the block decoders of quant_dequant_body.h at
 * 16 lanes, and the q4 rows by table lookup.
 *
 * It runs on the M = 1 decode path right before the GEMM reads the rows back from L1/L2, so
 * it has to cost little more than streaming the packed bytes in.
 */
#include "kernels/quant.h"

#if defined(__x86_64__)
#define KR_WIDTH_AVX512
#include "kernels/simd_width.h"

#include <string.h>

KR_INLINE __m512 qd_bf16(const uint16_t *src) {
    __m256i h = _mm256_loadu_si256((const __m256i *)src);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

KR_INLINE __m512 qd_int8(const int8_t *src, __m512 sv) {
    __m128i b = _mm_loadu_si128((const __m128i *)src);
    return _mm512_mul_ps(sv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)));
}

/* 16 e4m3 bytes → the f16s with the same bits moved up 7 (value / 256), widened exactly. With
 * the byte sign-extended, bits 15 and 14 of (x << 7) both hold the sign and bits 7..13 the
 * magnitude; clearing bit 14 leaves the f16. */
KR_INLINE __m512 e4m3_div256(__m128i b) {
    __m256i x = _mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7);
    return _mm512_cvtph_ps(_mm256_and_si256(x, _mm256_set1_epi16((short)0xBF80)));
}

/* NaN bytes (0x7F / 0xFF, which the path above decodes as ±480) get kr_e4m3_to_f32's
 * fixed NaN: the byte's sign over 0x7FC00000. */
KR_INLINE __m512 fix_nan(__m512 v, __m128i b) {
    __mmask16 nan =
        _mm_cmpeq_epi8_mask(_mm_or_si128(b, _mm_set1_epi8((char)0x80)), _mm_set1_epi8((char)0xFF));
    __m512i sign = _mm512_slli_epi32(_mm512_srli_epi32(_mm512_cvtepu8_epi32(b), 7), 31);
    __m512i q = _mm512_or_si512(sign, _mm512_set1_epi32(0x7FC00000));
    return _mm512_mask_mov_ps(v, nan, _mm512_castsi512_ps(q));
}

KR_INLINE __m512 qd_fp8(const uint8_t *src, __m512 s1, __m512 s2, int fused, int check_nan) {
    __m128i b = _mm_loadu_si128((const __m128i *)src);
    __m512 v = _mm512_mul_ps(e4m3_div256(b), s1);
    if (!fused) v = _mm512_mul_ps(v, s2);
    if (check_nan) v = fix_nan(v, b);
    return v;
}

/* Whether any of the 64 bytes at src is an e4m3 NaN. */
KR_INLINE int qd_fp8_has_nan(const uint8_t *src) {
    const __m512i m7f = _mm512_set1_epi8(0x7F);
    return _mm512_cmpeq_epi8_mask(_mm512_and_si512(_mm512_loadu_si512(src), m7f), m7f) != 0;
}

/* A run of 32 elements (16 bytes): low nibbles are elements 0..15, high nibbles 16..31.
 * vpermps reads only the low 4 bits of each index, so a nibble picks its value out of the
 * group's 16-entry table of s · (q − zero) without being masked, and the high nibble needs
 * only a shift. The tables' inputs (s as f32, zero as float) are converted 16 groups at a
 * time; (float)q − (float)zero is exact, so each entry is the scalar s · (float)(q − zero). */
KR_INLINE void run32(const uint8_t *src, __m512 lut, float *o, int j0, int k) {
    __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(src + j0 / 2)));
    __m512 lo = _mm512_permutexvar_ps(x, lut);
    __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), lut);
    if (j0 + 32 <= k) {
        _mm512_storeu_ps(o + j0, lo);
        _mm512_storeu_ps(o + j0 + 16, hi);
    } else {
        VW_STOREN(o + j0, k - j0, lo); /* j0 < k: the caller only passes runs that start before k */
        if (j0 + 16 < k) VW_STOREN(o + j0 + 16, k - (j0 + 16), hi);
    }
}

static void row_q4(const uint8_t *src, int k, int group, const uint16_t *gs, const uint8_t *gz,
                   float *o) {
    const __m512 iota = _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    int groups = (k + group - 1) / group;
    float sv[16], zv[16];
    for (int g0 = 0; g0 < groups; g0 += 16) {
        int ng = groups - g0 < 16 ? groups - g0 : 16;
        __mmask16 gm = kr_mask16(ng);
        _mm512_storeu_ps(sv, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(gm, gs + g0)));
        __m512i z = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(gm, gz + g0));
        _mm512_storeu_ps(zv, _mm512_cvtepi32_ps(z));
        for (int g = 0; g < ng; g++) {
            __m512 lut =
                _mm512_mul_ps(_mm512_set1_ps(sv[g]), _mm512_sub_ps(iota, _mm512_set1_ps(zv[g])));
            int j0 = (g0 + g) * group;
            run32(src, lut, o, j0, k);
            if (group == 64 && j0 + 32 < k) run32(src, lut, o, j0 + 32, k);
        }
    }
}

#include "kernels/quant_dequant_body.h"
#endif
