/* Tests for KRONOS_ISA: the variant is chosen once per process, so each case runs in a
 * forked child that sets the variable before its first kernel call. */
#include "test_support.h"

#include "kernels/kernels.h"

#include <stdlib.h>

/* kr_isa_best() in a fresh child with KRONOS_ISA = value (NULL: unset). */
static int best_probe(void) {
    kr_isa best = kr_isa_best();
    /* The dispatched entry points must use it from the first call. */
    return kr_isa_active() == best ? (int)best : 100;
}

static int best_with_env(const char *value) {
    const kr_test_env env[] = { { "KRONOS_ISA", value } };
    return kr_test_in_child(env, 1, best_probe);
}

static void test_env_override(void **state) {
    (void)state;
    int native = best_with_env(NULL);
    assert_true(native >= KR_ISA_SCALAR && native < KR_ISA_COUNT);
    assert_int_equal(best_with_env("scalar"), KR_ISA_SCALAR);
    assert_int_equal(best_with_env("avx2"), native < KR_ISA_AVX2 ? native : KR_ISA_AVX2);
    /* Never above what the CPU runs. */
    assert_int_equal(best_with_env("avx512"), native);
    /* Unknown or empty values are ignored. */
    assert_int_equal(best_with_env("sse9"), native);
    assert_int_equal(best_with_env(""), native);
}

int main(void) {
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_env_override) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
