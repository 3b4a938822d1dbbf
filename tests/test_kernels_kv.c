/*
 * KV-cache conversions (kernels/kv_convert.h): every ISA variant gives the scalar reference's
 * bits on odd sizes and on special values (NaN, ±inf, subnormals, rounding ties, all-zero
 * groups); bf16 equals kr_f32_to_bf16; int8 codes reconstruct within scale/2.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kv_convert.h"
#include "kernels/quant.h"
#include "test_support.h"

typedef struct variant {
    kr_isa isa;
    void (*pack_bf16)(const float *, uint16_t *, size_t);
    void (*unpack_bf16)(const uint16_t *, float *, size_t);
    void (*pack_int8)(const float *, int8_t *, float *, int, int);
    void (*unpack_int8)(const int8_t *, const float *, float *, int, int);
} variant;

static const variant k_variants[] = {
    { KR_ISA_AVX2, kr_kv_pack_bf16_avx2, kr_kv_unpack_bf16_avx2, kr_kv_pack_int8_avx2,
      kr_kv_unpack_int8_avx2 },
    { KR_ISA_AVX512, kr_kv_pack_bf16_avx512, kr_kv_unpack_bf16_avx512, kr_kv_pack_int8_avx512,
      kr_kv_unpack_int8_avx512 },
};

static uint64_t g_rng = 0x1234567887654321ull;
static float rnd(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Random values with special ones sprinkled in: NaN, ±inf, subnormals, bf16 ties, zeros. */
static void fill(float *x, size_t n, int specials) {
    for (size_t i = 0; i < n; i++) x[i] = rnd() * (i % 7 == 0 ? 100.0f : 1.0f);
    if (!specials) return;
    for (size_t i = 0; i < n; i += 13) {
        uint32_t u;
        switch ((i / 13) % 6) {
        case 0: x[i] = NAN; break;
        case 1: x[i] = (i & 1) ? INFINITY : -INFINITY; break;
        case 2: x[i] = 1e-40f; break;
        case 3:
            u = 0x3F808000u;
            memcpy(&x[i], &u, 4);
            break; /* exact bf16 tie */
        case 4: x[i] = 0.0f; break;
        default: x[i] = -0.0f; break;
        }
    }
}

static void test_bf16_bit_identical(void **state) {
    (void)state;
    static const size_t sizes[] = { 1, 7, 8, 15, 16, 17, 52, 100, 1000, 1029 };
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        float *x = malloc(n * 4), *back = malloc(n * 4), *back2 = malloc(n * 4);
        uint16_t *ref = malloc(n * 2), *got = malloc(n * 2);
        fill(x, n, 1);
        kr_kv_pack_bf16_scalar(x, ref, n);
        for (size_t i = 0; i < n; i++) assert_int_equal(ref[i], kr_f32_to_bf16(x[i]));
        kr_kv_unpack_bf16_scalar(ref, back, n);
        for (size_t v = 0; v < sizeof k_variants / sizeof k_variants[0]; v++) {
            if (!kr_isa_supported(k_variants[v].isa)) continue;
            memset(got, 0xAB, n * 2);
            k_variants[v].pack_bf16(x, got, n);
            assert_memory_equal(got, ref, n * 2);
            k_variants[v].unpack_bf16(ref, back2, n);
            assert_memory_equal(back2, back, n * 4);
        }
        free(x);
        free(back);
        free(back2);
        free(ref);
        free(got);
    }
}

static void test_int8_bit_identical_and_bounded(void **state) {
    (void)state;
    static const int groups[] = { 8, 13, 16, 52, 64, 100 };
    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
        int group = groups[gi];
        for (int specials = 0; specials < 2; specials++) {
            int d = group * 5;
            float *x = malloc((size_t)d * 4), *back = malloc((size_t)d * 4),
                  *back2 = malloc((size_t)d * 4);
            int8_t *q = malloc((size_t)d), *q2 = malloc((size_t)d);
            float *sc = malloc(5 * 4), *sc2 = malloc(5 * 4);
            fill(x, (size_t)d, specials);
            for (int j = 0; j < group; j++) x[2 * group + j] = 0.0f; /* an all-zero group */
            kr_kv_pack_int8_scalar(x, q, sc, d, group);
            kr_kv_unpack_int8_scalar(q, sc, back, d, group);
            assert_true(sc[2] == 0.0f);
            if (!specials)
                for (int j = 0; j < d; j++)
                    assert_true(fabsf(back[j] - x[j]) <= sc[j / group] * 0.5f * 1.0001f);
            for (size_t v = 0; v < sizeof k_variants / sizeof k_variants[0]; v++) {
                if (!kr_isa_supported(k_variants[v].isa)) continue;
                memset(q2, 0x5A, (size_t)d);
                k_variants[v].pack_int8(x, q2, sc2, d, group);
                assert_memory_equal(q2, q, (size_t)d);
                assert_memory_equal(sc2, sc, 5 * 4);
                k_variants[v].unpack_int8(q, sc, back2, d, group);
                assert_memory_equal(back2, back, (size_t)d * 4);
            }
            free(x);
            free(back);
            free(back2);
            free(q);
            free(q2);
            free(sc);
            free(sc2);
        }
    }
}

/* Halfway codes round to even in every variant: x/scale = k + 0.5 exactly. */
static void test_int8_ties(void **state) {
    (void)state;
    enum { G = 24 };
    float x[G];
    for (int j = 0; j < G; j++) x[j] = (float)(j - 12) + 0.5f;
    x[0] = 127.0f; /* scale = 1 */
    int8_t ref[G], got[G];
    float s1, s2;
    kr_kv_pack_int8_scalar(x, ref, &s1, G, G);
    assert_true(s1 == 1.0f);
    for (int j = 1; j < G; j++) assert_int_equal(ref[j], (int8_t)nearbyintf(x[j]));
    for (size_t v = 0; v < sizeof k_variants / sizeof k_variants[0]; v++) {
        if (!kr_isa_supported(k_variants[v].isa)) continue;
        k_variants[v].pack_int8(x, got, &s2, G, G);
        assert_memory_equal(got, ref, G);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_bit_identical),
        cmocka_unit_test(test_int8_bit_identical_and_bounded),
        cmocka_unit_test(test_int8_ties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
