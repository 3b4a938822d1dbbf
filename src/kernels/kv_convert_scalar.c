/* kernels/kv_convert_scalar — the reference KV conversions (kv_convert.h); dispatched through
 * dispatch.c. */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kv_convert.h"

static inline uint16_t bf16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

void kr_kv_pack_bf16_scalar(const float *x, uint16_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = bf16_bits(x[i]);
}

void kr_kv_unpack_bf16_scalar(const uint16_t *h, float *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&out[i], &u, sizeof u);
    }
}

void kr_kv_pack_int8_scalar(const float *x, int8_t *q, float *scale, int d, int group) {
    for (int g0 = 0; g0 < d; g0 += group) {
        float amax = 0.0f;
        for (int j = 0; j < group; j++) {
            float a = fabsf(x[g0 + j]);
            if (a > amax) amax = a; /* NaN never wins */
        }
        float sc = amax / 127.0f;
        scale[g0 / group] = sc;
        for (int j = 0; j < group; j++) q[g0 + j] = sc == 0.0f ? 0 : kr_kv_int8_code(x[g0 + j], sc);
    }
}

void kr_kv_unpack_int8_scalar(const int8_t *q, const float *scale, float *out, int d, int group) {
    for (int g0 = 0; g0 < d; g0 += group) {
        float sc = scale[g0 / group];
        for (int j = 0; j < group; j++) out[g0 + j] = (float)q[g0 + j] * sc;
    }
}
