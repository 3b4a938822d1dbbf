/*
 * kernels/kv_convert — the KV cache's storage formats (--kv-dtype): f32 rows to and from bf16
 * (round to nearest even, the bits of kr_f32_to_bf16, NaN kept NaN) and int8 with one scale per
 * group of `group` values (symmetric: scale = max|x| / 127, code = round-to-nearest-even(x /
 * scale) clamped to ±127, NaN codes as 0, an all-zero group gets scale 0 and codes 0).
 *
 * They run over every referenced key row of every layer at every decode step. Every variant
 * gives bit-identical results (division, rounding and the max are exact operations), so a
 * cached decode still equals a recomputation on any CPU.
 */
#ifndef KR_KERNELS_KV_CONVERT_H
#define KR_KERNELS_KV_CONVERT_H

#include <stddef.h>
#include <stdint.h>

/* Dispatched (dispatch.h). int8: d values of one row, d a multiple of group. */
void kr_kv_pack_bf16(const float *x, uint16_t *out, size_t n);
void kr_kv_unpack_bf16(const uint16_t *h, float *out, size_t n);
void kr_kv_pack_int8(const float *x, int8_t *q, float *scale, int d, int group);
void kr_kv_unpack_int8(const int8_t *q, const float *scale, float *out, int d, int group);

#define KR_KV_CONVERT_VARIANT(isa)                                                         \
    void kr_kv_pack_bf16_##isa(const float *x, uint16_t *out, size_t n);                   \
    void kr_kv_unpack_bf16_##isa(const uint16_t *h, float *out, size_t n);                 \
    void kr_kv_pack_int8_##isa(const float *x, int8_t *q, float *scale, int d, int group); \
    void kr_kv_unpack_int8_##isa(const int8_t *q, const float *scale, float *out, int d, int group);
KR_KV_CONVERT_VARIANT(scalar)
KR_KV_CONVERT_VARIANT(avx2)
KR_KV_CONVERT_VARIANT(avx512)
#undef KR_KV_CONVERT_VARIANT

/* One value's int8 code for scale sc, the formula every variant computes (the SIMD ones
 * vectorised, their tails with this). */
/* Adding and subtracting 1.5·2^23 rounds |v| < 2^22 to an integer exactly like nearbyintf in
 * the default rounding mode; the SIMD variants use the same two additions. */
static inline int8_t kr_kv_int8_code(float x, float sc) {
    const float magic = 12582912.0f;
    float t = (x / sc + magic) - magic;
    if (t != t) return 0;
    if (t > 127.0f) t = 127.0f;
    if (t < -127.0f) t = -127.0f;
    return (int8_t)(int)t;
}

#endif
