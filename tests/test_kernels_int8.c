/* Tests for the W8A8 kernels of quant.h: the activation quantiser and the int8 GEMM.
 *
 * Every variant (scalar, AVX2, AVX-512 with VPDPBUSD and with the VPMADDWD fallback, AMX and
 * the AVX-512 row's entry that picks AMX or VPDPBUSD by M, where the CPU has AMX) must
 * equal the scalar reference bit for bit — quant.h promises cross-ISA identity for INT8 — on
 * odd shapes, thread splits, with and without bias and in_scale. The scalar reference itself
 * is checked against double precision: the quantiser's reconstruction error is at most half a
 * step, and the GEMM matches the product of the dequantised operands up to its few f32
 * roundings. Weights are built here directly (random q, positive scales, row sums, zero
 * padding), so the test depends on nothing but the kernels. */
#include "test_support.h"

#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/qgemm_int8_internal.h"
#include "kernels/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint32_t urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}
static float frand(void) { /* uniform in [-1, 1) */
    return (float)((double)(urand() >> 8) / (double)(1u << 23) - 1.0);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

static int round_up(int x, int a) { return (x + a - 1) / a * a; }

/* ---- Variants. */

typedef struct {
    const char *name;
    kr_quant_act_u8_fn fn;
} quant_variant;

typedef struct {
    const char *name;
    kr_qgemm_int8_fn fn;
    kr_quant_act_u8_fn quant; /* the quantiser of the same ISA */
} gemm_variant;

static quant_variant g_quant[KR_ISA_COUNT];
static int g_n_quant;
static gemm_variant g_gemm[KR_ISA_COUNT + 8];
static int g_n_gemm;

#if defined(__x86_64__)
static void gemm_avx512_vnni(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                             const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                             int nth) {
    kr_qgemm_int8_avx512_impl(M, w, aq, ascale, azero, bias, C, ldc, ith, nth, 1);
}
static void gemm_avx512_madd(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                             const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                             int nth) {
    kr_qgemm_int8_avx512_impl(M, w, aq, ascale, azero, bias, C, ldc, ith, nth, 0);
}
#endif

static void setup_variants(void) {
    g_quant[g_n_quant++] = (quant_variant){ "scalar", kr_quant_act_u8_scalar };
    g_gemm[g_n_gemm++] = (gemm_variant){ "scalar", kr_qgemm_int8_scalar, kr_quant_act_u8_scalar };
    if (kr_isa_supported(KR_ISA_AVX2)) {
        g_quant[g_n_quant++] = (quant_variant){ "avx2", kr_quant_act_u8_avx2 };
        g_gemm[g_n_gemm++] = (gemm_variant){ "avx2", kr_qgemm_int8_avx2, kr_quant_act_u8_avx2 };
        if (kr_cpu_has_avx_vnni())
            g_gemm[g_n_gemm++] =
                (gemm_variant){ "avx2-vnni", kr_qgemm_int8_avxvnni, kr_quant_act_u8_avx2 };
    }
    if (kr_isa_supported(KR_ISA_AVX512)) {
        /* The public entry picks VPDPBUSD from the active level, so make it AVX-512. */
        kr_isa_set(KR_ISA_AVX512);
        g_quant[g_n_quant++] = (quant_variant){ "avx512", kr_quant_act_u8_avx512 };
        g_gemm[g_n_gemm++] =
            (gemm_variant){ "avx512", kr_qgemm_int8_avx512, kr_quant_act_u8_avx512 };
#if defined(__x86_64__)
        g_gemm[g_n_gemm++] =
            (gemm_variant){ "avx512-vpmaddwd", gemm_avx512_madd, kr_quant_act_u8_avx512 };
        if (kr_cpu_has_avx512_vnni())
            g_gemm[g_n_gemm++] =
                (gemm_variant){ "avx512-vpdpbusd", gemm_avx512_vnni, kr_quant_act_u8_avx512 };
#endif
        if (kr_cpu_has_amx_int8()) {
            g_gemm[g_n_gemm++] =
                (gemm_variant){ "avx512-amx", kr_qgemm_int8_amx, kr_quant_act_u8_avx512 };
            /* AMX from some M, VPDPBUSD below: row determinism across that switch. */
            g_gemm[g_n_gemm++] =
                (gemm_variant){ "avx512-dispatched", kr_kernels_for(KR_ISA_AVX512)->qgemm_int8,
                                kr_quant_act_u8_avx512 };
        }
    }
}

/* ---- Test data. */

/* An INT8 weight as quant.h describes it, owning its arrays. */
typedef struct {
    kr_qmat m;
    int8_t *q;
    float *scale;
    int32_t *row_sum;
} test_w;

static void make_w(int n, int k, test_w *t) {
    int kp = round_up(k, 64);
    t->q = xmalloc((size_t)n * (size_t)kp);
    t->scale = xmalloc((size_t)n * sizeof *t->scale);
    t->row_sum = xmalloc((size_t)n * sizeof *t->row_sum);
    for (int r = 0; r < n; r++) {
        int32_t sum = 0;
        for (int j = 0; j < kp; j++) {
            int8_t v = j < k ? (int8_t)((int)(urand() % 255u) - 127) : 0;
            /* Some rows at the extremes of the range, to catch any saturation. */
            if (j < k && r % 11 == 5) v = (int8_t)(j % 2 ? 127 : -127);
            t->q[(size_t)r * kp + j] = v;
            sum += v;
        }
        t->row_sum[r] = sum;
        t->scale[r] = (0.05f + 0.95f * (frand() * 0.5f + 0.5f)) / 127.0f;
    }
    t->m = (kr_qmat){ .fmt = KR_WFMT_INT8,
                      .n = n,
                      .k = k,
                      .kp = kp,
                      .data = t->q,
                      .scale = t->scale,
                      .row_sum = t->row_sum };
}

static void free_w(test_w *t) {
    free(t->q);
    free(t->scale);
    free(t->row_sum);
}

/* Rows of varied kinds: mixed sign, all positive, all negative, all zero, one huge outlier,
 * tiny magnitudes. */
static float *make_a(int M, int k, int lda) {
    float *A = xmalloc((size_t)M * (size_t)lda * sizeof *A);
    for (int m = 0; m < M; m++) {
        float *a = A + (size_t)m * lda;
        int kind = m % 7;
        float mag = kind == 6 ? 1e-3f : 1.0f + (float)(m % 5);
        for (int j = 0; j < lda; j++) {
            float x = frand() * mag;
            if (kind == 1) x = fabsf(x);
            if (kind == 2) x = -fabsf(x) - 0.25f;
            if (kind == 3) x = 0.0f;
            a[j] = x;
        }
        if (kind == 4 && k > 0) a[urand() % (unsigned)k] = (m % 2 ? 1e4f : -3e4f);
        if (kind == 5 && k > 1) a[k / 2] = 0.0f; /* an exact zero inside a mixed row */
    }
    return A;
}

static float *make_in_scale(int k) {
    float *s = xmalloc((size_t)(k ? k : 1) * sizeof *s);
    for (int j = 0; j < k; j++) s[j] = 0.25f + 3.75f * (frand() * 0.5f + 0.5f);
    return s;
}

/* Quantised activations of M rows. */
typedef struct {
    uint8_t *q;
    float *scale;
    int32_t *zero;
} test_act;

static void alloc_act(int M, int kp, test_act *t) {
    t->q = xmalloc((size_t)M * (size_t)kp);
    t->scale = xmalloc((size_t)M * sizeof *t->scale);
    t->zero = xmalloc((size_t)M * sizeof *t->zero);
    memset(t->q, 0xA5, (size_t)M * (size_t)kp); /* padding must be overwritten with 0 */
    for (int m = 0; m < M; m++) {
        t->scale[m] = -1.0f;
        t->zero[m] = -1;
    }
}

static void free_act(test_act *t) {
    free(t->q);
    free(t->scale);
    free(t->zero);
}

static const int k_Ks[] = { 6, 20, 52, 100, 520, 1024 };
static const int k_Ns[] = { 1, 3, 17, 100, 400 };
static const int k_Ms[] = { 1, 2, 3, 5, 7, 8, 17, 64, 65, 130 };

/* ---- (1) The quantiser. */

static void test_quant_variants_identical(void **state) {
    (void)state;
    for (int ki = 0; ki < COUNT(k_Ks); ki++)
        for (int mi = 0; mi < COUNT(k_Ms); mi++)
            for (int use_is = 0; use_is < 2; use_is++) {
                int k = k_Ks[ki], M = k_Ms[mi], kp = round_up(k, 64), lda = k + 3;
                float *A = make_a(M, k, lda);
                float *is = use_is ? make_in_scale(k) : NULL;
                test_act ref, got;
                alloc_act(M, kp, &ref);
                kr_quant_act_u8_scalar(0, M, k, kp, A, lda, is, ref.q, ref.scale, ref.zero);
                for (int v = 0; v < g_n_quant; v++) {
                    alloc_act(M, kp, &got);
                    /* Rows in two slices, as threads would split them. */
                    int mid = M / 3;
                    g_quant[v].fn(0, mid, k, kp, A, lda, is, got.q, got.scale, got.zero);
                    g_quant[v].fn(mid, M, k, kp, A, lda, is, got.q, got.scale, got.zero);
                    for (int m = 0; m < M; m++) {
                        if (memcmp(got.q + (size_t)m * kp, ref.q + (size_t)m * kp, (size_t)kp) ||
                            memcmp(&got.scale[m], &ref.scale[m], sizeof(float)) ||
                            got.zero[m] != ref.zero[m])
                            fail_msg("quant %s k=%d M=%d in_scale=%d: row %d differs",
                                     g_quant[v].name, k, M, use_is, m);
                    }
                    free_act(&got);
                }
                free_act(&ref);
                free(A);
                free(is);
            }
}

/* Rows outside [m0, m1) are not touched. */
static void test_quant_row_slice(void **state) {
    (void)state;
    int M = 9, k = 100, kp = 128;
    float *A = make_a(M, k, k);
    for (int v = 0; v < g_n_quant; v++) {
        test_act t;
        alloc_act(M, kp, &t);
        g_quant[v].fn(3, 6, k, kp, A, k, NULL, t.q, t.scale, t.zero);
        for (int m = 0; m < M; m++) {
            int inside = m >= 3 && m < 6;
            assert_int_equal(t.zero[m] >= 0, inside);
            assert_int_equal(t.scale[m] > 0.0f, inside);
            for (int j = 0; j < kp; j++) {
                uint8_t b = t.q[(size_t)m * kp + j];
                if (!inside) assert_int_equal(b, 0xA5);
                if (inside && j >= k) assert_int_equal(b, 0);
            }
        }
        free_act(&t);
    }
    free(A);
}

/* The scalar quantiser against its definition: reconstruction within half a step, zero
 * exactly representable, all-zero rows give s = 1, z = 0, padding 0. */
static void test_quant_reconstruction(void **state) {
    (void)state;
    for (int ki = 0; ki < COUNT(k_Ks); ki++)
        for (int use_is = 0; use_is < 2; use_is++) {
            int k = k_Ks[ki], M = 130, kp = round_up(k, 64), lda = k;
            float *A = make_a(M, k, lda);
            float *is = use_is ? make_in_scale(k) : NULL;
            test_act t;
            alloc_act(M, kp, &t);
            kr_quant_act_u8_scalar(0, M, k, kp, A, lda, is, t.q, t.scale, t.zero);
            for (int m = 0; m < M; m++) {
                const float *a = A + (size_t)m * lda;
                const uint8_t *q = t.q + (size_t)m * kp;
                float s = t.scale[m];
                int32_t z = t.zero[m];
                assert_true(s > 0.0f);
                assert_true(z >= 0 && z <= 255);
                float lo = 0.0f, hi = 0.0f;
                for (int j = 0; j < k; j++) {
                    float x = is ? a[j] * is[j] : a[j];
                    lo = x < lo ? x : lo;
                    hi = x > hi ? x : hi;
                }
                if (lo == hi) {
                    assert_true(s == 1.0f);
                    assert_int_equal(z, 0);
                }
                if (lo == 0.0f) assert_int_equal(z, 0);
                if (hi == 0.0f && lo < 0.0f) assert_int_equal(z, 255);
                for (int j = 0; j < k; j++) {
                    double x = is ? (double)(a[j] * is[j]) : (double)a[j];
                    double err = fabs(x - (double)s * (double)(q[j] - z));
                    /* Half a step, plus the f32 roundings of 1/s and x·(1/s) (< 1e-4 step). */
                    if (!(err <= (double)s * (0.5 + 1e-4)))
                        fail_msg("k=%d in_scale=%d row %d col %d: x=%.9g q=%d z=%d s=%.9g err "
                                 "%.3g steps",
                                 k, use_is, m, j, x, q[j], z, s, err / s);
                    if (x == 0.0) assert_int_equal(q[j], z);
                }
                for (int j = k; j < kp; j++) assert_int_equal(q[j], 0);
            }
            free_act(&t);
            free(A);
            free(is);
        }
}

/* Halfway cases round to even in every variant (nearbyintf / cvtps under default MXCSR),
 * where round-half-away would differ. */
static void test_quant_ties_to_even(void **state) {
    (void)state;
    enum { K = 40 };
    float a[K];
    /* lo = -100, hi = 155: s = 1 and inv = 1 exactly, z = 100. */
    a[0] = -100.0f;
    a[1] = 155.0f;
    for (int j = 2; j < K; j++) a[j] = (float)(j - 20) + 0.5f;
    for (int v = 0; v < g_n_quant; v++) {
        uint8_t q[64];
        float s;
        int32_t z;
        g_quant[v].fn(0, 1, K, 64, a, K, NULL, q, &s, &z);
        assert_true(s == 1.0f);
        assert_int_equal(z, 100);
        assert_int_equal(q[0], 0);
        assert_int_equal(q[1], 255);
        for (int j = 2; j < K; j++) {
            double t = (double)(j - 20) + 0.5;
            int r = (int)nearbyint(t); /* default mode: ties to even */
            if (q[j] != 100 + r)
                fail_msg("%s: %.1f quantised to %d, want %d", g_quant[v].name, t, q[j] - 100, r);
        }
    }
}

/* ---- (2) GEMM variants against the scalar reference, bit for bit. */

static void run_gemm(kr_qgemm_int8_fn fn, int M, const kr_qmat *w, const test_act *act,
                     const float *bias, float *C, int ldc, int nth) {
    for (int ith = 0; ith < nth; ith++)
        fn(M, w, act->q, act->scale, act->zero, bias, C, ldc, ith, nth);
}

static void test_gemm_variants_identical(void **state) {
    (void)state;
    const float sentinel = 1234.5f;
    int shape = 0;
    for (int ki = 0; ki < COUNT(k_Ks); ki++)
        for (int ni = 0; ni < COUNT(k_Ns); ni++) {
            int k = k_Ks[ki], n = k_Ns[ni], kp = round_up(k, 64);
            test_w w;
            make_w(n, k, &w);
            float *bias = xmalloc((size_t)n * sizeof *bias);
            for (int j = 0; j < n; j++) bias[j] = frand() * 4.0f;
            for (int mi = 0; mi < COUNT(k_Ms); mi++, shape++) {
                int M = k_Ms[mi], lda = k + 1, ldc = n + 3;
                float *A = make_a(M, k, lda);
                float *is = shape % 2 ? make_in_scale(k) : NULL;
                test_act act;
                alloc_act(M, kp, &act);
                kr_quant_act_u8_scalar(0, M, k, kp, A, lda, is, act.q, act.scale, act.zero);
                float *ref = xmalloc((size_t)M * ldc * sizeof *ref);
                float *C = xmalloc((size_t)M * ldc * sizeof *C);
                for (int b = 0; b < 2; b++) {
                    const float *bb = b ? bias : NULL;
                    run_gemm(kr_qgemm_int8_scalar, M, &w.m, &act, bb, ref, ldc, 1);
                    for (int v = 0; v < g_n_gemm; v++)
                        for (int nth = 1; nth <= 3; nth++) {
                            for (size_t i = 0; i < (size_t)M * ldc; i++) C[i] = sentinel;
                            run_gemm(g_gemm[v].fn, M, &w.m, &act, bb, C, ldc, nth);
                            for (int m = 0; m < M; m++) {
                                const float *c = C + (size_t)m * ldc, *r = ref + (size_t)m * ldc;
                                if (memcmp(c, r, (size_t)n * sizeof *c) != 0) {
                                    int j = 0;
                                    while (c[j] == r[j]) j++;
                                    fail_msg("%s k=%d n=%d M=%d nth=%d bias=%d in_scale=%d: "
                                             "C[%d][%d]=%.9g, scalar %.9g",
                                             g_gemm[v].name, k, n, M, nth, b, is != NULL, m, j,
                                             c[j], r[j]);
                                }
                                for (int j = n; j < ldc; j++) assert_true(c[j] == sentinel);
                            }
                        }
                }
                free(A);
                free(is);
                free_act(&act);
                free(ref);
                free(C);
            }
            free(bias);
            free_w(&w);
        }
}

/* Extreme operands: every activation byte 255 or 0 against weights ±127 — the largest
 * products VPMADDWD / VPDPBUSD see; nothing may saturate. M rows: 5 reads the operands in
 * place, 65 takes the widened AVX2 path and AMX. */
static void gemm_extremes_at(int M) {
    enum { n = 37, k = 1024, kp = 1024 };
    test_w w;
    make_w(n, k, &w);
    for (int r = 0; r < n; r++) {
        int32_t sum = 0;
        for (int j = 0; j < kp; j++) {
            int8_t v = (int8_t)((r + j / 3) % 3 == 0 ? -127 : 127);
            w.q[(size_t)r * kp + j] = v;
            sum += v;
        }
        w.row_sum[r] = sum;
    }
    test_act act;
    alloc_act(M, kp, &act);
    for (int m = 0; m < M; m++) {
        for (int j = 0; j < kp; j++) act.q[(size_t)m * kp + j] = (m == 1 && j % 2) ? 0 : 255;
        act.scale[m] = 0.01f * (float)(m + 1);
        act.zero[m] = (m * 60) % 256; /* a u8 zero point */
    }
    float *ref = xmalloc((size_t)M * n * sizeof *ref), *C = xmalloc((size_t)M * n * sizeof *C);
    run_gemm(kr_qgemm_int8_scalar, M, &w.m, &act, NULL, ref, n, 1);
    /* The scalar reference against the integer dot in 64 bits. */
    for (int m = 0; m < M; m++)
        for (int r = 0; r < n; r++) {
            int64_t dot = 0;
            for (int j = 0; j < kp; j++)
                dot += (int64_t)act.q[(size_t)m * kp + j] * w.q[(size_t)r * kp + j];
            dot -= (int64_t)act.zero[m] * w.row_sum[r];
            float want = (act.scale[m] * w.scale[r]) * (float)dot;
            assert_true(ref[m * n + r] == want);
        }
    for (int v = 0; v < g_n_gemm; v++) {
        memset(C, 0, (size_t)M * n * sizeof *C);
        run_gemm(g_gemm[v].fn, M, &w.m, &act, NULL, C, n, 2);
        if (memcmp(C, ref, (size_t)M * n * sizeof *C) != 0)
            fail_msg("%s differs on extreme operands (M=%d)", g_gemm[v].name, M);
    }
    free(ref);
    free(C);
    free_act(&act);
    free_w(&w);
}

static void test_gemm_extremes(void **state) {
    (void)state;
    gemm_extremes_at(5);
    gemm_extremes_at(65);
}

/* A thread slice writes exactly its columns, and the slices cover N. */
static void thread_slices_at(int M);
static void test_gemm_thread_slices_disjoint(void **state) {
    (void)state;
    for (int M = 5; M <= 67; M += 62) /* 67: the widened AVX2 path and AMX */
        thread_slices_at(M);
}

static void thread_slices_at(int M) {
    int n = 100, k = 100, kp = 128;
    test_w w;
    make_w(n, k, &w);
    float *A = make_a(M, k, k);
    test_act act;
    alloc_act(M, kp, &act);
    kr_quant_act_u8_scalar(0, M, k, kp, A, k, NULL, act.q, act.scale, act.zero);
    float *C = xmalloc((size_t)M * n * sizeof *C);
    for (int v = 0; v < g_n_gemm; v++)
        for (int nth = 1; nth <= 5; nth++) {
            int owner[100];
            for (int j = 0; j < n; j++) owner[j] = -1;
            for (int ith = 0; ith < nth; ith++) {
                for (int i = 0; i < M * n; i++) C[i] = NAN;
                g_gemm[v].fn(M, &w.m, act.q, act.scale, act.zero, NULL, C, n, ith, nth);
                for (int j = 0; j < n; j++) {
                    int written = !isnan(C[j]);
                    for (int m = 1; m < M; m++)
                        assert_int_equal(!isnan(C[(size_t)m * n + j]), written);
                    if (written) {
                        assert_int_equal(owner[j], -1);
                        owner[j] = ith;
                    }
                }
            }
            for (int j = 0; j < n; j++) assert_true(owner[j] >= 0);
        }
    free(C);
    free_act(&act);
    free(A);
    free_w(&w);
}

/* ---- (3) The scalar GEMM against the double-precision product of the dequantised operands. */

static void test_gemm_vs_double(void **state) {
    (void)state;
    static const int Ks[] = { 6, 100, 1024 };
    static const int Ns[] = { 3, 100 };
    for (int ki = 0; ki < COUNT(Ks); ki++)
        for (int ni = 0; ni < COUNT(Ns); ni++) {
            int k = Ks[ki], n = Ns[ni], M = 64, kp = round_up(k, 64);
            test_w w;
            make_w(n, k, &w);
            float *bias = xmalloc((size_t)n * sizeof *bias);
            for (int j = 0; j < n; j++) bias[j] = frand() * 2.0f;
            float *A = make_a(M, k, k);
            float *is = make_in_scale(k);
            test_act act;
            alloc_act(M, kp, &act);
            kr_quant_act_u8_scalar(0, M, k, kp, A, k, is, act.q, act.scale, act.zero);
            float *C = xmalloc((size_t)M * n * sizeof *C);
            for (int b = 0; b < 2; b++) {
                const float *bb = b ? bias : NULL;
                run_gemm(kr_qgemm_int8_scalar, M, &w.m, &act, bb, C, n, 1);
                for (int m = 0; m < M; m++)
                    for (int r = 0; r < n; r++) {
                        double p = 0.0, mag = 0.0;
                        for (int j = 0; j < k; j++) {
                            double x = (double)act.scale[m] *
                                       (double)(act.q[(size_t)m * kp + j] - act.zero[m]);
                            double y = (double)w.scale[r] * (double)w.q[(size_t)r * kp + j];
                            p += x * y;
                            mag += fabs(x * y);
                        }
                        double bv = bb ? (double)bb[r] : 0.0;
                        /* Roundings: the int → f32 conversion, ascale·wscale, their product
                         * (3 u on |p|), then the bias add (u on |p| + |bias|); u = 2^-24.
                         * The double sum itself is good to ~k·2^-53 of Σ|terms|. */
                        double tol =
                            2.4e-7 * fabs(p) + 6.0e-8 * (fabs(p) + fabs(bv)) + 1e-13 * mag + 1e-30;
                        double got = (double)C[(size_t)m * n + r];
                        if (!(fabs(got - (p + bv)) <= tol))
                            fail_msg("k=%d n=%d bias=%d: C[%d][%d]=%.9g, dequantised product "
                                     "%.9g (tol %.3g)",
                                     k, n, b, m, r, got, p + bv, tol);
                    }
            }
            free(C);
            free_act(&act);
            free(is);
            free(A);
            free(bias);
            free_w(&w);
        }
}

/* ---- (4) Row determinism: quantising and multiplying row r alone (another address, lda,
 * M = 1) gives the same bits as row r inside M = 64, and sub-batches agree too. */
static void test_row_determinism(void **state) {
    (void)state;
    static const int Ks[] = { 52, 520 };
    static const int Ns[] = { 17, 100 };
    const int M = 64;
    for (int ki = 0; ki < COUNT(Ks); ki++)
        for (int ni = 0; ni < COUNT(Ns); ni++) {
            int k = Ks[ki], n = Ns[ni], kp = round_up(k, 64), lda = k + 5;
            test_w w;
            make_w(n, k, &w);
            float *bias = xmalloc((size_t)n * sizeof *bias);
            for (int j = 0; j < n; j++) bias[j] = frand();
            float *A = make_a(M, k, lda);
            float *is = make_in_scale(k);
            float *full = xmalloc((size_t)M * n * sizeof *full);
            float *sub = xmalloc((size_t)M * n * sizeof *sub);
            float *row = xmalloc(((size_t)k + 1) * sizeof *row);
            float one[100];
            for (int v = 0; v < g_n_gemm; v++) {
                kr_quant_act_u8_fn quant = g_gemm[v].quant;
                test_act act, a1;
                alloc_act(M, kp, &act);
                alloc_act(M, kp, &a1);
                quant(0, M, k, kp, A, lda, is, act.q, act.scale, act.zero);
                run_gemm(g_gemm[v].fn, M, &w.m, &act, bias, full, n, 1);
                for (int r = 0; r < M; r++) {
                    memcpy(row + 1, A + (size_t)r * lda, (size_t)k * sizeof *row);
                    quant(0, 1, k, kp, row + 1, k, is, a1.q, a1.scale, a1.zero);
                    run_gemm(g_gemm[v].fn, 1, &w.m, &a1, bias, one, n, 1 + r % 3);
                    if (memcmp(one, full + (size_t)r * n, (size_t)n * sizeof *one) != 0)
                        fail_msg("%s k=%d n=%d: row %d alone differs from M=64", g_gemm[v].name, k,
                                 n, r);
                }
                static const int subMs[] = { 2, 3, 5, 17 };
                for (int si = 0; si < COUNT(subMs); si++) {
                    int sm = subMs[si], r0 = M - sm - 1;
                    quant(0, sm, k, kp, A + (size_t)r0 * lda, lda, is, a1.q, a1.scale, a1.zero);
                    run_gemm(g_gemm[v].fn, sm, &w.m, &a1, bias, sub, n, 2);
                    if (memcmp(sub, full + (size_t)r0 * n, (size_t)sm * n * sizeof *sub) != 0)
                        fail_msg("%s k=%d n=%d: rows of M=%d differ from M=64", g_gemm[v].name, k,
                                 n, sm);
                }
                free_act(&act);
                free_act(&a1);
            }
            free(row);
            free(sub);
            free(full);
            free(is);
            free(A);
            free(bias);
            free_w(&w);
        }
}

int main(void) {
    setup_variants();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quant_variants_identical),
        cmocka_unit_test(test_quant_row_slice),
        cmocka_unit_test(test_quant_reconstruction),
        cmocka_unit_test(test_quant_ties_to_even),
        cmocka_unit_test(test_gemm_variants_identical),
        cmocka_unit_test(test_gemm_extremes),
        cmocka_unit_test(test_gemm_thread_slices_disjoint),
        cmocka_unit_test(test_gemm_vs_double),
        cmocka_unit_test(test_row_determinism),
    };
    print_message("int8 variants under test:");
    for (int i = 0; i < g_n_gemm; i++) print_message(" %s", g_gemm[i].name);
    print_message("\n");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
