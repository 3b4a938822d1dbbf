/*
 * kernels/dispatch: the one dispatch table. Every row a CPU runs is complete (every family has
 * a variant, and it is that ISA's own), the active row follows KRONOS_ISA (in a fresh child,
 * as the choice is made once per process) and kr_isa_set, and the CPU-feature entries (the
 * AVX512_BF16 products, the AMX int8 GEMM picker) are present exactly when
 * kr_cpu_has_avx512_bf16 / kr_cpu_has_amx_int8 say so; KRONOS_AMX=0 removes the latter.
 * kr_cpu_has_avx_vnni names the AVX2 row's VNNI GEMM; KRONOS_AVXVNNI=0 removes it.
 */
#include "test_support.h"

#include <stdlib.h>

#include "kernels/dispatch.h"

/* Row r holds ISA r's variants, named by suffix. */
#define EXPECT_ROW(t, sfx)                                                    \
    do {                                                                      \
        assert_ptr_equal((t)->gemm_f32, kr_gemm_f32_##sfx);                   \
        assert_ptr_equal((t)->attend_f32, kr_attend_f32_##sfx);               \
        assert_ptr_equal((t)->attend_multi_f32, kr_attend_multi_f32_##sfx);   \
        assert_ptr_equal((t)->attend_causal_f32, kr_attend_causal_f32_##sfx); \
        assert_ptr_equal((t)->rmsnorm_f32, kr_rmsnorm_f32_##sfx);             \
        assert_ptr_equal((t)->rope_f32, kr_rope_f32_##sfx);                   \
        assert_ptr_equal((t)->silu_mul_f32, kr_silu_mul_f32_##sfx);           \
        assert_ptr_equal((t)->add_f32, kr_add_f32_##sfx);                     \
        assert_ptr_equal((t)->softmax_f32, kr_softmax_f32_##sfx);             \
        assert_ptr_equal((t)->dequant_rows, kr_dequant_rows_##sfx);           \
        assert_ptr_equal((t)->quant_act_u8, kr_quant_act_u8_##sfx);           \
        assert_ptr_equal((t)->kv_pack_bf16, kr_kv_pack_bf16_##sfx);           \
        assert_ptr_equal((t)->kv_unpack_bf16, kr_kv_unpack_bf16_##sfx);       \
        assert_ptr_equal((t)->kv_pack_int8, kr_kv_pack_int8_##sfx);           \
        assert_ptr_equal((t)->kv_unpack_int8, kr_kv_unpack_int8_##sfx);       \
        assert_ptr_equal((t)->fma_burn, kr_fma_burn_##sfx);                   \
    } while (0)

/* kr_cpu_has_amx_int8 answers for the active level; this asks for the AVX-512 one. */
static int amx_usable(void) {
    kr_isa was = kr_isa_active();
    if (kr_isa_set(KR_ISA_AVX512) != KR_ISA_AVX512) return 0;
    int amx = kr_cpu_has_amx_int8();
    kr_isa_set(was);
    return amx;
}

/* kr_cpu_has_avx_vnni answers for the active level; this asks for the AVX2 one. */
static int avxvnni_usable(void) {
    kr_isa was = kr_isa_active();
    if (kr_isa_set(KR_ISA_AVX2) != KR_ISA_AVX2) return 0;
    int vnni = kr_cpu_has_avx_vnni();
    kr_isa_set(was);
    return vnni;
}

static void check_row(const kr_kernel_table *t, kr_isa isa) {
    assert_non_null(t);
    assert_int_equal(t->isa, isa);
    switch (isa) {
    case KR_ISA_SCALAR:
        EXPECT_ROW(t, scalar);
        assert_ptr_equal(t->qgemm_int8, kr_qgemm_int8_scalar);
        break;
    case KR_ISA_AVX2:
        EXPECT_ROW(t, avx2);
        /* With AVX-VNNI the row's int8 GEMM is the VPDPBUSD one; else VPMADDWD. */
        assert_ptr_equal(t->qgemm_int8,
                         avxvnni_usable() ? kr_qgemm_int8_avxvnni : kr_qgemm_int8_avx2);
        break;
    default:
        EXPECT_ROW(t, avx512);
        /* With AMX the row's int8 GEMM picks AMX or VPDPBUSD by M; else it is VPDPBUSD. */
        assert_ptr_equal(t->qgemm_int8,
                         amx_usable() ? kr_qgemm_int8_avx512_auto : kr_qgemm_int8_avx512);
        break;
    }
}

static void test_rows_complete(void **state) {
    (void)state;
    for (int i = 0; i < KR_ISA_COUNT; i++) {
        kr_isa isa = (kr_isa)i;
        const kr_kernel_table *t = kr_kernels_for(isa);
        if (!kr_isa_supported(isa)) {
            assert_null(t);
            continue;
        }
        check_row(t, isa);
        /* The bf16 products only where the CPU has them, and then both. */
        int bf16 = isa == KR_ISA_AVX512 && kr_isa_set(KR_ISA_AVX512) == KR_ISA_AVX512 &&
                   kr_cpu_has_avx512_bf16();
        assert_int_equal(t->qgemm_bf16 != NULL, bf16);
        assert_int_equal(t->quant_act_bf16 != NULL, bf16);
    }
    kr_isa_set(kr_isa_best());
}

static void test_active_row_follows_isa_set(void **state) {
    (void)state;
    kr_isa best = kr_isa_best();
    for (int i = 0; i <= (int)best; i++) {
        if (!kr_isa_supported((kr_isa)i)) continue;
        assert_int_equal(kr_isa_set((kr_isa)i), i);
        assert_ptr_equal(kr_kernels(), kr_kernels_for((kr_isa)i));
        check_row(kr_kernels(), (kr_isa)i);
        /* A dispatched entry point runs that row: the probe reports its width's FLOPs. */
        assert_true(kr_fma_burn((kr_isa)i, 10) > 0.0);
    }
    kr_isa_set(best);
    assert_ptr_equal(kr_kernels(), kr_kernels_for(best));
}

/* The row a fresh process picks with KRONOS_ISA = value (NULL: unset); its ISA as the exit
 * code. Only meaningful while this process has not used the table itself (a forked child
 * inherits the choice): this test runs first. */
static int row_probe(void) {
    const kr_kernel_table *t = kr_kernels(); /* the very first use */
    return t == kr_kernels_for(t->isa) && t->isa == kr_isa_active() ? (int)t->isa : 100;
}

static int row_with_env(const char *value) {
    const kr_test_env env[] = { { "KRONOS_ISA", value } };
    return kr_test_in_child(env, 1, row_probe);
}

static void test_env_picks_the_row(void **state) {
    (void)state;
    int native = row_with_env(NULL);
    assert_true(native >= KR_ISA_SCALAR && native < KR_ISA_COUNT);
    assert_int_equal(row_with_env("scalar"), KR_ISA_SCALAR);
    assert_int_equal(row_with_env("avx2"), native < KR_ISA_AVX2 ? native : KR_ISA_AVX2);
    assert_int_equal(row_with_env("avx512"), native);
}

/* What a fresh process with KRONOS_AMX = value (NULL: unset) makes of AMX: bit 0 the AVX-512
 * row holds the picker, bit 1 kr_cpu_has_amx_int8 at the AVX-512 level. */
static int amx_probe(void) {
    const kr_kernel_table *t = kr_kernels_for(KR_ISA_AVX512);
    int row = t && t->qgemm_int8 == kr_qgemm_int8_avx512_auto;
    return row | (amx_usable() << 1);
}

static int amx_with_env(const char *value) {
    const kr_test_env env[] = { { "KRONOS_AMX", value }, { "KRONOS_ISA", NULL } };
    return kr_test_in_child(env, 2, amx_probe);
}

static void test_env_amx_off(void **state) {
    (void)state;
    int native = amx_with_env(NULL);
    assert_true(native == 0 || native == 3); /* the picker exactly when AMX is usable */
    assert_int_equal(amx_with_env("0"), 0);
    assert_int_equal(amx_with_env("1"), native);
    print_message("AMX-INT8 %s on this machine\n", native ? "usable" : "not usable");
}

/* The same for KRONOS_AVXVNNI: bit 0 the AVX2 row holds the AVX-VNNI GEMM, bit 1
 * kr_cpu_has_avx_vnni at the AVX2 level. */
static int avxvnni_probe(void) {
    const kr_kernel_table *t = kr_kernels_for(KR_ISA_AVX2);
    int row = t && t->qgemm_int8 == kr_qgemm_int8_avxvnni;
    return row | ((t && kr_cpu_has_avx_vnni()) << 1);
}

static int avxvnni_with_env(const char *value) {
    const kr_test_env env[] = { { "KRONOS_AVXVNNI", value }, { "KRONOS_ISA", "avx2" } };
    return kr_test_in_child(env, 2, avxvnni_probe);
}

static void test_env_avxvnni_off(void **state) {
    (void)state;
    int native = avxvnni_with_env(NULL);
    assert_true(native == 0 || native == 3); /* the VNNI GEMM exactly when the CPU has it */
    assert_int_equal(avxvnni_with_env("0"), 0);
    assert_int_equal(avxvnni_with_env("1"), native);
    print_message("AVX-VNNI %s on this machine\n", native ? "usable" : "not usable");
}

/* The peak probe: a positive, finite rate on every ISA this CPU runs (on one thread and on a
 * pool), 0 for one it does not. */
static void test_fma_peak_probe(void **state) {
    (void)state;
    kr_pool *pool = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_pool_create(2, &pool, &err), KR_OK);
    for (int i = 0; i < KR_ISA_COUNT; i++) {
        double one = kr_fma_peak_gflops(NULL, (kr_isa)i, 3);
        double two = kr_fma_peak_gflops(pool, (kr_isa)i, 1);
        if (kr_isa_supported((kr_isa)i)) {
            assert_true(one > 0 && one < 1e6);
            assert_true(two > 0 && two < 1e6);
        } else {
            assert_true(one == 0 && two == 0);
        }
    }
    assert_true(kr_fma_peak_gflops(NULL, (kr_isa)KR_ISA_COUNT, 1) == 0);
    kr_pool_free(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_picks_the_row), /* first: before this process picks a row */
        cmocka_unit_test(test_env_amx_off),       cmocka_unit_test(test_env_avxvnni_off),
        cmocka_unit_test(test_rows_complete),     cmocka_unit_test(test_active_row_follows_isa_set),
        cmocka_unit_test(test_fma_peak_probe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
