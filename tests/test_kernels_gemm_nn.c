/* Tests for the NN and TN GEMMs (C (+)= A·B, Aᵀ·B with B as stored; kernels.h): every supported
 * variant against a double-precision reference on odd shapes and strides, with and without
 * accumulation; and the determinism contract bit for bit — a row's values do not depend on M,
 * on the rows around it, on N's tiling or on the thread split. */
#include "test_support.h"

#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 40) / (double)(1ull << 23) - 1.0);
}

static float *rand_buf(size_t n) {
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

typedef void (*gemm_fn)(int, int, int, const float *, int, const float *, int, float *, int, int,
                        int, int);

/* Every ith of nth, serially, on `isa`. */
static void run(kr_isa isa, int trans, int M, int N, int K, const float *A, int lda, const float *B,
                int ldb, float *C, int ldc, int acc, int nth) {
    assert_int_equal(kr_isa_set(isa), isa);
    for (int ith = 0; ith < nth; ith++)
        (trans ? kr_gemm_tn_f32 : kr_gemm_nn_f32)(M, N, K, A, lda, B, ldb, C, ldc, acc, ith, nth);
}

static void test_vs_double(void **state) {
    (void)state;
    static const int dims[] = { 1, 3, 12, 13, 31, 52, 67, 258 };
    const int nd = sizeof dims / sizeof dims[0];
    for (int isa = 0; isa < KR_ISA_COUNT; isa++) {
        if (!kr_isa_supported((kr_isa)isa)) continue;
        for (int trans = 0; trans < 2; trans++)
            for (int im = 0; im < nd; im++)
                for (int in = 0; in < nd; in += 2)
                    for (int ik = 0; ik < nd; ik += 3) {
                        int M = dims[im], N = dims[(in + im) % nd], K = dims[ik] + 260 * (ik == 6);
                        int lda = (trans ? M : K) + 3, ldb = N + 5, ldc = N + 7;
                        float *A = rand_buf((size_t)(trans ? K : M) * lda);
                        float *Bm = rand_buf((size_t)K * ldb);
                        float *C = rand_buf((size_t)M * ldc);
                        float *C0 = malloc((size_t)M * ldc * sizeof *C0);
                        memcpy(C0, C, (size_t)M * ldc * sizeof *C0);
                        int acc = (im + in + ik) % 2;
                        run((kr_isa)isa, trans, M, N, K, A, lda, Bm, ldb, C, ldc, acc, 1 + im % 3);
                        for (int m = 0; m < M; m++)
                            for (int n = 0; n < ldc; n++) {
                                float got = C[(size_t)m * ldc + n];
                                if (n >= N) { /* columns past N untouched */
                                    assert_true(got == C0[(size_t)m * ldc + n]);
                                    continue;
                                }
                                double ref = acc ? C0[(size_t)m * ldc + n] : 0.0, mag = fabs(ref);
                                for (int k = 0; k < K; k++) {
                                    double a =
                                        trans ? A[(size_t)k * lda + m] : A[(size_t)m * lda + k];
                                    double p = a * Bm[(size_t)k * ldb + n];
                                    ref += p;
                                    mag += fabs(p);
                                }
                                if (!(fabs(got - ref) <= 1e-6 * mag + 1e-7))
                                    fail_msg("%s %s M%d N%d K%d acc%d: C[%d][%d] = %.9g, want %.9g",
                                             kr_isa_name((kr_isa)isa), trans ? "TN" : "NN", M, N, K,
                                             acc, m, n, got, ref);
                            }
                        free(A);
                        free(Bm);
                        free(C);
                        free(C0);
                    }
    }
    kr_isa_set(kr_isa_best());
}

/* A row's bits alone == in a batch; any thread split == one thread; NN == TN of Aᵀ. M 41 < N:
 * threads split N; M 301 > N: threads split M (kr_gemm_nn_split), at row cuts that are not
 * multiples of the packing blocks. */
static void determinism_case(int M) {
    const int N = 77, K = 300;
    float *A = rand_buf((size_t)M * K), *At = malloc((size_t)K * M * sizeof(float));
    float *Bm = rand_buf((size_t)K * N);
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) At[(size_t)k * M + m] = A[(size_t)m * K + k];
    float *full = malloc((size_t)M * N * sizeof(float)),
          *other = malloc((size_t)M * N * sizeof(float));
    for (int isa = 0; isa < KR_ISA_COUNT; isa++) {
        if (!kr_isa_supported((kr_isa)isa)) continue;
        run((kr_isa)isa, 0, M, N, K, A, K, Bm, N, full, N, 0, 1);
        for (int nth = 2; nth <= 7; nth += 5) {
            run((kr_isa)isa, 0, M, N, K, A, K, Bm, N, other, N, 0, nth);
            assert_memory_equal(full, other, (size_t)M * N * sizeof(float));
        }
        run((kr_isa)isa, 1, M, N, K, At, M, Bm, N, other, N, 0, 3);
        assert_memory_equal(full, other, (size_t)M * N * sizeof(float));
        for (int r = 0; r < M; r += 7) { /* one row alone */
            float row[77]; /* N */
            run((kr_isa)isa, 0, 1, N, K, A + (size_t)r * K, K, Bm, N, row, N, 0, 2);
            assert_memory_equal(row, full + (size_t)r * N, sizeof row);
        }
        /* accumulating twice == accumulating once into a copy of the first result */
        memcpy(other, full, (size_t)M * N * sizeof(float));
        run((kr_isa)isa, 0, M, N, K, A, K, Bm, N, other, N, 1, 2);
        float *twice = malloc((size_t)M * N * sizeof(float));
        memcpy(twice, full, (size_t)M * N * sizeof(float));
        run((kr_isa)isa, 0, M, N, K, A, K, Bm, N, twice, N, 1, 1);
        assert_memory_equal(twice, other, (size_t)M * N * sizeof(float));
        free(twice);
    }
    kr_isa_set(kr_isa_best());
    free(A);
    free(At);
    free(Bm);
    free(full);
    free(other);
}

static void test_determinism(void **state) {
    (void)state;
    determinism_case(41);
    determinism_case(301);
}

/* C = bias + A·B gives the bits of copying the bias into C and accumulating, on every ISA and
 * thread split (both ways of cutting: M < N and M > N), edge tiles included. */
static void test_bias(void **state) {
    (void)state;
    static const int shapes[][3] = { { 37, 77, 300 }, { 301, 45, 19 }, { 5, 1, 3 } };
    for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++) {
        const int M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2], ldc = N + 3;
        float *A = rand_buf((size_t)M * K), *Bm = rand_buf((size_t)K * N), *bias = rand_buf(N);
        float *want = malloc((size_t)M * ldc * sizeof(float)),
              *got = malloc((size_t)M * ldc * sizeof(float));
        for (int isa = 0; isa < KR_ISA_COUNT; isa++) {
            if (!kr_isa_supported((kr_isa)isa)) continue;
            for (int i = 0; i < M * ldc; i++) want[i] = got[i] = 9.0f;
            for (int m = 0; m < M; m++) memcpy(want + (size_t)m * ldc, bias, N * sizeof(float));
            run((kr_isa)isa, 0, M, N, K, A, K, Bm, N, want, ldc, 1, 1);
            for (int nth = 1; nth <= 3; nth++) {
                for (int ith = 0; ith < nth; ith++)
                    kr_gemm_nn_bias_f32(M, N, K, A, K, Bm, N, bias, got, ldc, ith, nth);
                assert_memory_equal(got, want, (size_t)M * ldc * sizeof(float));
            }
        }
        kr_isa_set(kr_isa_best());
        free(A), free(Bm), free(bias), free(want), free(got);
    }
}

/* The dispatched names call the active row's variant. */
static void test_dispatch(void **state) {
    (void)state;
    static const gemm_fn nn[KR_ISA_COUNT] = { kr_gemm_nn_f32_scalar, kr_gemm_nn_f32_avx2,
                                              kr_gemm_nn_f32_avx512 };
    const int M = 5, N = 33, K = 17;
    float *A = rand_buf((size_t)M * K), *Bm = rand_buf((size_t)K * N);
    float c1[5 * 33], c2[5 * 33];
    for (int isa = 0; isa < KR_ISA_COUNT; isa++) {
        if (!kr_isa_supported((kr_isa)isa)) continue;
        run((kr_isa)isa, 0, M, N, K, A, K, Bm, N, c1, N, 0, 1);
        nn[isa](M, N, K, A, K, Bm, N, c2, N, 0, 0, 1);
        assert_memory_equal(c1, c2, sizeof c1);
    }
    kr_isa_set(kr_isa_best());
    free(A);
    free(Bm);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vs_double),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_bias),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
