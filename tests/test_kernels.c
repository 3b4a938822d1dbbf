/* Tests for the GEMM kernels and dispatch: every supported variant against a double-precision
 * reference on odd shapes, and the determinism contract checked bit for bit (a row alone ==
 * the same row in a batch; the thread split changes nothing). */
#include "test_support.h"

#include "base/threadpool.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static kr_isa g_variants[KR_ISA_COUNT];
static int g_n_variants;

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
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

/* Runs C = A·Wᵀ + bias on `isa` with every ith of nth called serially. */
static void gemm(kr_isa isa, int M, int N, int K, const float *A, int lda, const float *W,
                 const float *bias, float *C, int ldc, int nth) {
    assert_int_equal(kr_isa_set(isa), isa);
    for (int ith = 0; ith < nth; ith++) kr_gemm_f32(M, N, K, A, lda, W, bias, C, ldc, ith, nth);
}

static void test_dispatch_api(void **state) {
    (void)state;
    assert_true(kr_isa_supported(KR_ISA_SCALAR));
    assert_false(kr_isa_supported((kr_isa)-1));
    assert_false(kr_isa_supported(KR_ISA_COUNT));
    kr_isa best = kr_isa_best();
    assert_true(kr_isa_supported(best));
    /* Nothing above the best is supported, unless KRONOS_ISA lowered the best (it honours it:
     * the suite must also pass as `KRONOS_ISA=avx2 ctest`). */
    const char *forced = getenv("KRONOS_ISA");
    if (!forced || !*forced)
        for (int i = best + 1; i < KR_ISA_COUNT; i++) assert_false(kr_isa_supported((kr_isa)i));
    assert_string_equal(kr_isa_name(KR_ISA_SCALAR), "scalar");
    assert_string_equal(kr_isa_name(KR_ISA_AVX2), "avx2");
    assert_string_equal(kr_isa_name(KR_ISA_AVX512), "avx512");
    assert_int_equal(kr_isa_set(KR_ISA_SCALAR), KR_ISA_SCALAR);
    assert_int_equal(kr_isa_active(), KR_ISA_SCALAR);
    assert_int_equal(kr_isa_set(KR_ISA_COUNT), KR_ISA_SCALAR); /* ignored */
    assert_int_equal(kr_isa_set(best), best);
#if defined(__x86_64__)
    /* This suite runs on AVX-512 CI hardware; make sure detection did not silently fail. */
    if (getenv("KRONOS_EXPECT_AVX512")) assert_true(kr_isa_supported(KR_ISA_AVX512));
#endif
}

/* The dispatched entry point must call the per-ISA function of the active variant. */
static void test_dispatch_routes(void **state) {
    (void)state;
    static const kr_gemm_f32_fn fns[KR_ISA_COUNT] = { kr_gemm_f32_scalar, kr_gemm_f32_avx2,
                                                      kr_gemm_f32_avx512 };
    int M = 3, N = 37, K = 29;
    float *A = rand_buf((size_t)M * K), *W = rand_buf((size_t)N * K);
    float c1[3 * 37], c2[3 * 37];
    for (int v = 0; v < g_n_variants; v++) {
        gemm(g_variants[v], M, N, K, A, K, W, NULL, c1, N, 1);
        fns[g_variants[v]](M, N, K, A, K, W, NULL, c2, N, 0, 1);
        assert_memory_equal(c1, c2, sizeof c1);
    }
    free(A);
    free(W);
}

static const int k_Ms[] = { 1, 2, 3, 5, 17, 64, 400 };
static const int k_Ns[] = { 1, 7, 20, 52, 1024 };
static const int k_Ks[] = { 6, 20, 52, 64, 208, 513 };
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void test_gemm_vs_double(void **state) {
    (void)state;
    const float sentinel = 1234.5f;
    int shape = 0;
    for (int mi = 0; mi < COUNT(k_Ms); mi++)
        for (int ni = 0; ni < COUNT(k_Ns); ni++)
            for (int ki = 0; ki < COUNT(k_Ks); ki++, shape++) {
                int M = k_Ms[mi], N = k_Ns[ni], K = k_Ks[ki];
                int lda = K + 3, ldc = N + 5;
                int nth = 1 + shape % 3;
                float *A = rand_buf((size_t)M * lda), *W = rand_buf((size_t)N * K);
                float *bias = shape % 2 ? rand_buf((size_t)N) : NULL;
                double *ref = malloc((size_t)M * N * sizeof *ref),
                       *mag = malloc((size_t)M * N * sizeof *mag);
                float *C = malloc((size_t)M * ldc * sizeof *C);
                assert_true(ref && mag && C);
                for (int m = 0; m < M; m++)
                    for (int n = 0; n < N; n++) {
                        double s = bias ? bias[n] : 0.0, g = bias ? fabs(bias[n]) : 0.0;
                        for (int k = 0; k < K; k++) {
                            double p = (double)A[(size_t)m * lda + k] * W[(size_t)n * K + k];
                            s += p;
                            g += fabs(p);
                        }
                        ref[(size_t)m * N + n] = s;
                        mag[(size_t)m * N + n] = g;
                    }
                for (int v = 0; v < g_n_variants; v++) {
                    for (size_t i = 0; i < (size_t)M * ldc; i++) C[i] = sentinel;
                    gemm(g_variants[v], M, N, K, A, lda, W, bias, C, ldc, nth);
                    for (int m = 0; m < M; m++) {
                        for (int n = 0; n < N; n++) {
                            double d = fabs(C[(size_t)m * ldc + n] - ref[(size_t)m * N + n]);
                            if (!(d <= 1e-5 * mag[(size_t)m * N + n]))
                                fail_msg(
                                    "%s M=%d N=%d K=%d nth=%d bias=%d: C[%d][%d]=%.9g ref %.9g",
                                    kr_isa_name(g_variants[v]), M, N, K, nth, bias != NULL, m, n,
                                    C[(size_t)m * ldc + n], ref[(size_t)m * N + n]);
                        }
                        for (int n = N; n < ldc; n++) /* row padding untouched */
                            assert_true(C[(size_t)m * ldc + n] == sentinel);
                    }
                }
                free(A);
                free(W);
                free(bias);
                free(ref);
                free(mag);
                free(C);
            }
}

/* Lanes of the accumulator each variant keeps per C element (scalar: one plain float sum). */
static int variant_lanes(kr_isa isa) {
    return isa == KR_ISA_AVX512 ? 16 : isa == KR_ISA_AVX2 ? 8 : 1;
}

/* One C element the way a `lanes`-wide variant must compute it, written independently of the
 * kernels: lane l sums a[k]·w[k] over k ≡ l (mod lanes) in order with fmaf (the tail block
 * zero-filled, so 0·0 is added), then lanes i and i + h are added for h = lanes/2, …, 1 (the
 * kr_hsum16 / kr_hsum8 tree), then the bias. The scalar variant is one unfused sum. */
static float ref_element(int lanes, int K, const float *a, const float *w, const float *bias,
                         int n) {
    float acc[16] = { 0 };
    if (lanes == 1) {
        for (int k = 0; k < K; k++) {
            float p = a[k] * w[k];
            acc[0] = acc[0] + p;
        }
    } else {
        for (int k0 = 0; k0 < K; k0 += lanes)
            for (int l = 0; l < lanes; l++) {
                int k = k0 + l;
                acc[l] = fmaf(k < K ? a[k] : 0.0f, k < K ? w[k] : 0.0f, acc[l]);
            }
        for (int h = lanes / 2; h >= 1; h /= 2)
            for (int i = 0; i < h; i++) acc[i] = acc[i] + acc[i + h];
    }
    return bias ? acc[0] + bias[n] : acc[0];
}

/* Every variant == ref_element bit for bit on odd shapes, with and without bias, on 1 and 3
 * threads, with rows in place misaligned and (K a multiple of 16) 64-byte aligned — both sides
 * of the kernels' packing choices —, and with only W misaligned. */
static void test_gemm_exact_tree(void **state) {
    (void)state;
    static const int Ms[] = { 1, 3, 8, 13, 17, 65, 400 }; /* 8, 13: the 8-row decode tile */
    static const int Ns[] = { 37, 300 };
    /* 1537: 97 k blocks, the AVX-512 packed path's K chunks (32 + 32 + 32 + 1) */
    static const int Ks[] = { 52, 100, 513, 832, 1537 };
    for (int ki = 0; ki < COUNT(Ks); ki++)
        for (int ni = 0; ni < COUNT(Ns); ni++)
            for (int mi = 0; mi < COUNT(Ms); mi++)
                for (int layout = 0; layout < 3; layout++) {
                    int M = Ms[mi], N = Ns[ni], K = Ks[ki];
                    if (layout >= 1 && K % 16) continue;
                    if (K > 1024 && M != 65) continue; /* the long K: one packed M is enough */
                    /* layout 0: A and W one float past a 64-byte line, lda odd; 1: both
                     * aligned; 2: A aligned, W one float off (the AVX2 kernel packs W only) */
                    int lda = layout ? K : K + 1, off = layout == 1 ? 0 : 1;
                    int off_a = layout ? 0 : 1;
                    float *Ab = NULL, *Wb = NULL;
                    assert_int_equal(
                        posix_memalign((void **)&Ab, 64, ((size_t)M * lda + 16) * sizeof(float)),
                        0);
                    assert_int_equal(
                        posix_memalign((void **)&Wb, 64, ((size_t)N * K + 16) * sizeof(float)), 0);
                    float *A = Ab + off_a, *W = Wb + off;
                    for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = frand();
                    for (size_t i = 0; i < (size_t)N * K; i++) W[i] = frand();
                    float *bias = rand_buf((size_t)N);
                    float *ref = malloc((size_t)M * N * sizeof *ref),
                          *C = malloc((size_t)M * N * sizeof *C);
                    assert_true(ref && C);
                    for (int v = 0; v < g_n_variants; v++) {
                        kr_isa isa = g_variants[v];
                        for (int b = 0; b < 2; b++) {
                            const float *bs = b ? bias : NULL;
                            for (int m = 0; m < M; m++)
                                for (int n = 0; n < N; n++)
                                    ref[(size_t)m * N + n] =
                                        ref_element(variant_lanes(isa), K, A + (size_t)m * lda,
                                                    W + (size_t)n * K, bs, n);
                            for (int nth = 1; nth <= 3; nth += 2) {
                                memset(C, 0xFF, (size_t)M * N * sizeof *C);
                                gemm(isa, M, N, K, A, lda, W, bs, C, N, nth);
                                if (memcmp(C, ref, (size_t)M * N * sizeof *C) != 0)
                                    fail_msg("%s M=%d N=%d K=%d layout=%d bias=%d nth=%d: not the "
                                             "exact per-element tree",
                                             kr_isa_name(isa), M, N, K, layout, b, nth);
                            }
                        }
                    }
                    free(Ab);
                    free(Wb);
                    free(bias);
                    free(ref);
                    free(C);
                }
}

/* Row r of an M-row product == the product of row r alone (stored elsewhere, with another
 * alignment and lda), and nth = 1, 2, 3 agree — bit for bit, for every variant. */
static void test_gemm_determinism(void **state) {
    (void)state;
    static const int Ns[] = { 20, 52, 1024 };
    static const int subMs[] = { 2, 3, 5, 17 };
    const int M = 64;
    for (int ki = 0; ki < COUNT(k_Ks); ki++)
        for (int ni = 0; ni < COUNT(Ns); ni++) {
            int K = k_Ks[ki], N = Ns[ni], lda = K + 7;
            float *A = rand_buf((size_t)M * lda), *W = rand_buf((size_t)N * K);
            float *bias = rand_buf((size_t)N);
            float *full = malloc((size_t)M * N * sizeof *full),
                  *other = malloc((size_t)M * N * sizeof *other);
            float *row = malloc(((size_t)K + 1) * sizeof *row),
                  *one = malloc((size_t)N * sizeof *one);
            assert_true(full && other && row && one);
            for (int v = 0; v < g_n_variants; v++) {
                kr_isa isa = g_variants[v];
                gemm(isa, M, N, K, A, lda, W, bias, full, N, 1);
                for (int r = 0; r < M; r++) {
                    memcpy(row + 1, A + (size_t)r * lda, (size_t)K * sizeof *row);
                    gemm(isa, 1, N, K, row + 1, K, W, bias, one, N, 1 + r % 3);
                    if (memcmp(one, full + (size_t)r * N, (size_t)N * sizeof *one) != 0)
                        fail_msg("%s K=%d N=%d: row %d alone differs from M=64", kr_isa_name(isa),
                                 K, N, r);
                }
                for (int si = 0; si < COUNT(subMs); si++) {
                    int sm = subMs[si], r0 = M - sm - 1;
                    gemm(isa, sm, N, K, A + (size_t)r0 * lda, lda, W, bias, other, N, 2);
                    if (memcmp(other, full + (size_t)r0 * N, (size_t)sm * N * sizeof *other) != 0)
                        fail_msg("%s K=%d N=%d: rows of M=%d differ from M=64", kr_isa_name(isa), K,
                                 N, sm);
                }
                for (int nth = 2; nth <= 3; nth++) {
                    gemm(isa, M, N, K, A, lda, W, bias, other, N, nth);
                    if (memcmp(other, full, (size_t)M * N * sizeof *other) != 0)
                        fail_msg("%s K=%d N=%d: nth=%d differs from nth=1", kr_isa_name(isa), K, N,
                                 nth);
                }
            }
            free(A);
            free(W);
            free(bias);
            free(full);
            free(other);
            free(row);
            free(one);
        }
}

/* A thread slice never writes outside its columns: run each ith alone into a fresh buffer. */
static void test_gemm_thread_slices_disjoint(void **state) {
    (void)state;
    int M = 5, N = 100, K = 33;
    float *A = rand_buf((size_t)M * K), *W = rand_buf((size_t)N * K);
    float *C = malloc((size_t)M * N * sizeof *C);
    assert_non_null(C);
    for (int v = 0; v < g_n_variants; v++) {
        kr_isa_set(g_variants[v]);
        for (int nth = 1; nth <= 5; nth++) {
            int owner[100];
            for (int n = 0; n < N; n++) owner[n] = -1;
            for (int ith = 0; ith < nth; ith++) {
                for (int i = 0; i < M * N; i++) C[i] = NAN;
                kr_gemm_f32(M, N, K, A, K, W, NULL, C, N, ith, nth);
                for (int n = 0; n < N; n++) {
                    int written = !isnan(C[n]);
                    for (int m = 1; m < M; m++)
                        assert_int_equal(!isnan(C[(size_t)m * N + n]), written);
                    if (written) {
                        assert_int_equal(owner[n], -1);
                        owner[n] = ith;
                    }
                }
            }
            for (int n = 0; n < N; n++) assert_true(owner[n] >= 0);
        }
    }
    free(A);
    free(W);
    free(C);
}

/* The GEMM on A packed once (kr_gemm_f32_pack_a, rows packed in uneven parts as threads
 * would) == kr_gemm_f32 bit for bit, on 1 and on 7 slices of N; the packing writes nothing
 * past the size it asked for. Variants that read A in place ask for 0 floats. */
static void test_gemm_packed_a(void **state) {
    (void)state;
    static const int Ms[] = { 1, 63, 64, 65, 67, 400 };
    static const int Ns[] = { 37, 300 };
    static const int Ks[] = { 52, 100, 513, 832, 1537, 2048 }; /* the last two in K chunks */
    for (int v = 0; v < g_n_variants; v++) {
        kr_isa isa = g_variants[v];
        for (int mi = 0; mi < COUNT(Ms); mi++)
            for (int ni = 0; ni < COUNT(Ns); ni++)
                for (int ki = 0; ki < COUNT(Ks); ki++) {
                    int M = Ms[mi], N = Ns[ni], K = Ks[ki], lda = K + 1;
                    kr_isa_set(isa);
                    size_t floats = kr_gemm_f32_packed_a_floats(M, K);
                    if (isa != KR_ISA_AVX512 || M < 64) {
                        assert_int_equal(floats, 0);
                        continue;
                    }
                    assert_true(floats >= (size_t)M * (size_t)K);
                    float *A = rand_buf((size_t)M * lda + 1) + 1, *W = rand_buf((size_t)N * K);
                    float *bias = rand_buf((size_t)N), *pa = NULL;
                    assert_int_equal(posix_memalign((void **)&pa, 64, (floats + 64) * sizeof *pa),
                                     0);
                    for (size_t i = 0; i < floats + 64; i++) pa[i] = 1234.5f;
                    int tiles = (M + 3) / 4, cut1 = tiles / 3 * 4, cut2 = (tiles - 1) * 4;
                    kr_gemm_f32_pack_a(M, K, A, lda, pa, cut2, M);
                    kr_gemm_f32_pack_a(M, K, A, lda, pa, 0, cut1);
                    kr_gemm_f32_pack_a(M, K, A, lda, pa, cut1, cut2);
                    for (size_t i = floats; i < floats + 64; i++) assert_true(pa[i] == 1234.5f);
                    float *ref = malloc((size_t)M * N * sizeof *ref),
                          *C = malloc((size_t)M * N * sizeof *C);
                    assert_true(ref && C);
                    gemm(isa, M, N, K, A, lda, W, bias, ref, N, 1);
                    for (int nth = 1; nth <= 7; nth += 6) {
                        memset(C, 0xFF, (size_t)M * N * sizeof *C);
                        for (int ith = 0; ith < nth; ith++)
                            kr_gemm_f32_packed(M, N, K, A, lda, pa, W, bias, C, N, ith, nth);
                        if (memcmp(C, ref, (size_t)M * N * sizeof *C) != 0)
                            fail_msg("%s M=%d N=%d K=%d nth=%d: packed A differs", kr_isa_name(isa),
                                     M, N, K, nth);
                    }
                    free(A - 1);
                    free(W);
                    free(bias);
                    free(pa);
                    free(ref);
                    free(C);
                }
    }
}

typedef struct {
    int M, N, K;
    const float *A, *W, *bias;
    float *C;
} gemm_job;

static void gemm_slice(void *p, int ith, int nth) {
    gemm_job *j = p;
    kr_gemm_f32(j->M, j->N, j->K, j->A, j->K, j->W, j->bias, j->C, j->N, ith, nth);
}

/* Slices run concurrently on a real pool (races show under TSan/ASan) and still match the
 * serial result bit for bit. */
static void test_gemm_on_pool(void **state) {
    (void)state;
    int M = 17, N = 200, K = 77;
    float *A = rand_buf((size_t)M * K), *W = rand_buf((size_t)N * K), *bias = rand_buf((size_t)N);
    float *ref = malloc((size_t)M * N * sizeof *ref), *C = malloc((size_t)M * N * sizeof *C);
    assert_true(ref && C);
    for (int v = 0; v < g_n_variants; v++) {
        gemm(g_variants[v], M, N, K, A, K, W, bias, ref, N, 1);
        for (int t = 2; t <= 3; t++) {
            kr_pool *pool = NULL;
            assert_int_equal(kr_pool_create(t, &pool, NULL), KR_OK);
            gemm_job j = { M, N, K, A, W, bias, C };
            for (int rep = 0; rep < 20; rep++) {
                memset(C, 0, (size_t)M * N * sizeof *C);
                kr_pool_run(pool, gemm_slice, &j);
                assert_memory_equal(C, ref, (size_t)M * N * sizeof *C);
            }
            kr_pool_free(pool);
        }
    }
    free(A);
    free(W);
    free(bias);
    free(ref);
    free(C);
}

int main(void) {
    for (int i = 0; i < KR_ISA_COUNT; i++)
        if (kr_isa_supported((kr_isa)i)) g_variants[g_n_variants++] = (kr_isa)i;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch_api),    cmocka_unit_test(test_dispatch_routes),
        cmocka_unit_test(test_gemm_vs_double),  cmocka_unit_test(test_gemm_determinism),
        cmocka_unit_test(test_gemm_exact_tree), cmocka_unit_test(test_gemm_thread_slices_disjoint),
        cmocka_unit_test(test_gemm_on_pool),    cmocka_unit_test(test_gemm_packed_a),
    };
    print_message("kernel variants under test:");
    for (int i = 0; i < g_n_variants; i++) print_message(" %s", kr_isa_name(g_variants[i]));
    print_message("\n");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
