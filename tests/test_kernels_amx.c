/* Tests for the AMX int8 GEMM (kr_qgemm_int8_amx, quant.h): called directly, it equals
 * kr_qgemm_int8_scalar bit for bit on every row-tail case (M around 16 and 32), N tails inside
 * a panel and a panel pair, K tails of the 64-byte tiles, with and without bias, on 1-3
 * threads, with the extreme codes (activations 0 / 255, weights ±127). Activations and
 * weights end at a PROT_NONE page: tile loads are not seen by AddressSanitizer, and the
 * kernel must never read past row M of aq (nor past its W slice). Skipped on CPUs without
 * AMX-INT8 (or with KRONOS_AMX=0). */
#include "test_support.h"

#include "kernels/kernels.h"
#include "kernels/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}

static int round_up(int x, int a) { return (x + a - 1) / a * a; }

/* `bytes` readable bytes that end exactly where a PROT_NONE page begins. */
typedef struct guarded {
    void *map;
    size_t map_bytes;
    void *p;
} guarded;

static void *guarded_alloc(guarded *g, size_t bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t data_pages = (bytes + page - 1) / page;
    g->map_bytes = (data_pages + 1) * page;
    g->map = mmap(NULL, g->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(g->map != MAP_FAILED);
    char *guard = (char *)g->map + data_pages * page;
    assert_int_equal(mprotect(guard, page, PROT_NONE), 0);
    g->p = guard - bytes;
    return g->p;
}

static void guarded_free(guarded *g) { munmap(g->map, g->map_bytes); }

/* An INT8 weight (quant.h) with random codes; every 7th row alternates ±127, the largest
 * products. Padding columns zero, as the format says. */
typedef struct test_w {
    kr_qmat m;
    guarded data;
    float *scale;
    int32_t *row_sum;
} test_w;

static void make_w(int n, int k, test_w *t) {
    int kp = round_up(k, 64);
    int8_t *q = guarded_alloc(&t->data, (size_t)n * (size_t)kp);
    t->scale = malloc((size_t)n * sizeof *t->scale);
    t->row_sum = malloc((size_t)n * sizeof *t->row_sum);
    assert_non_null(t->scale);
    assert_non_null(t->row_sum);
    for (int r = 0; r < n; r++) {
        int32_t sum = 0;
        for (int j = 0; j < kp; j++) {
            int v = j < k ? (int)(urand() % 255u) - 127 : 0;
            if (j < k && r % 7 == 3) v = j % 2 ? 127 : -127;
            q[(size_t)r * kp + j] = (int8_t)v;
            sum += v;
        }
        t->row_sum[r] = sum;
        t->scale[r] = (float)(1 + urand() % 1000) * 1e-5f;
    }
    t->m = (kr_qmat){ .fmt = KR_WFMT_INT8,
                      .n = n,
                      .k = k,
                      .kp = kp,
                      .data = q,
                      .scale = t->scale,
                      .row_sum = t->row_sum };
}

static void free_w(test_w *t) {
    guarded_free(&t->data);
    free(t->scale);
    free(t->row_sum);
}

/* Quantised activations of M rows as the quantiser leaves them (padding 0), with rows of
 * every code 255, every code 0, and 0 / 255 alternating among the random ones. */
typedef struct test_act {
    guarded data;
    uint8_t *q;
    float *scale;
    int32_t *zero;
} test_act;

static void make_act(int M, int k, int kp, test_act *t) {
    t->q = guarded_alloc(&t->data, (size_t)M * (size_t)kp);
    t->scale = malloc((size_t)M * sizeof *t->scale);
    t->zero = malloc((size_t)M * sizeof *t->zero);
    assert_non_null(t->scale);
    assert_non_null(t->zero);
    for (int m = 0; m < M; m++) {
        uint8_t *a = t->q + (size_t)m * kp;
        for (int j = 0; j < kp; j++) {
            int v = (int)(urand() & 255u);
            if (m % 5 == 1) v = 255;
            if (m % 5 == 2) v = 0;
            if (m % 5 == 3) v = j % 2 ? 255 : 0;
            a[j] = (uint8_t)(j < k ? v : 0);
        }
        t->scale[m] = (float)(1 + urand() % 1000) * 1e-4f;
        t->zero[m] = (int32_t)(urand() % 256u);
    }
}

static void free_act(test_act *t) {
    guarded_free(&t->data);
    free(t->scale);
    free(t->zero);
}

static int g_have_amx;

static int setup(void **state) {
    (void)state;
    /* kr_cpu_has_amx_int8 answers for the active level, and AMX needs AVX-512. */
    if (kr_isa_supported(KR_ISA_AVX512)) kr_isa_set(KR_ISA_AVX512);
    g_have_amx = kr_cpu_has_amx_int8();
    if (!g_have_amx)
        print_message("AMX-INT8 not usable here (CPU, OS grant or KRONOS_AMX=0): tests skip\n");
    return 0;
}

/* C rows [0, M) of ldc = n + 3 floats after running fn on every slice of nth: each of the n
 * columns equals ref, the 3 beyond are untouched. */
static void check_amx(int M, const test_w *w, const test_act *act, const float *bias,
                      const float *ref, int nth, float *C) {
    const int n = w->m.n, ldc = n + 3;
    const float sentinel = -7777.25f;
    for (size_t i = 0; i < (size_t)M * ldc; i++) C[i] = sentinel;
    for (int ith = 0; ith < nth; ith++)
        kr_qgemm_int8_amx(M, &w->m, act->q, act->scale, act->zero, bias, C, ldc, ith, nth);
    for (int m = 0; m < M; m++) {
        const float *c = C + (size_t)m * ldc, *r = ref + (size_t)m * ldc;
        if (memcmp(c, r, (size_t)n * sizeof *c) != 0) {
            int j = 0;
            while (!memcmp(&c[j], &r[j], sizeof *c)) j++;
            fail_msg("amx M=%d n=%d k=%d nth=%d bias=%d: C[%d][%d]=%.9g, scalar %.9g", M, n, w->m.k,
                     nth, bias != NULL, m, j, c[j], r[j]);
        }
        for (int j = n; j < ldc; j++)
            if (c[j] != sentinel) fail_msg("amx M=%d n=%d: wrote C[%d][%d]", M, n, m, j);
    }
}

static void run_shape(int M, int n, int k, float *C, float *ref) {
    int kp = round_up(k, 64), ldc = n + 3;
    test_w w;
    make_w(n, k, &w);
    test_act act;
    make_act(M, k, kp, &act);
    float *bias = malloc((size_t)n * sizeof *bias);
    assert_non_null(bias);
    for (int j = 0; j < n; j++) bias[j] = (float)((int)(urand() % 2001u) - 1000) * 1e-3f;
    for (int b = 0; b < 2; b++) {
        const float *bb = b ? bias : NULL;
        for (size_t i = 0; i < (size_t)M * ldc; i++) ref[i] = -7777.25f;
        kr_qgemm_int8_scalar(M, &w.m, act.q, act.scale, act.zero, bb, ref, ldc, 0, 1);
        for (int nth = 1; nth <= 3; nth++) check_amx(M, &w, &act, bb, ref, nth, C);
    }
    free(bias);
    free_act(&act);
    free_w(&w);
}

/* Every M tail (the 32-row blocks, one 16-row block, the copied partial block) against N tails
 * (inside one panel, one panel of a pair, exact pairs) and K tails of the tiles. */
static void test_amx_equals_scalar(void **state) {
    (void)state;
    if (!g_have_amx) skip();
    static const int Ms[] = { 1, 2, 15, 16, 17, 31, 32, 33, 47, 64, 70 };
    static const int Ns[] = { 16, 48, 100, 1024 };
    static const int Ks[] = { 1, 63, 64, 65, 200, 512, 832 };
    float *C = malloc((size_t)70 * (1024 + 3) * sizeof *C);
    float *ref = malloc((size_t)70 * (1024 + 3) * sizeof *ref);
    assert_non_null(C);
    assert_non_null(ref);
    for (int ki = 0; ki < COUNT(Ks); ki++)
        for (int ni = 0; ni < COUNT(Ns); ni++)
            for (int mi = 0; mi < COUNT(Ms); mi++) run_shape(Ms[mi], Ns[ni], Ks[ki], C, ref);
    free(C);
    free(ref);
}

/* A W slice whose panels pass the kernel's ~1 MB goes in N blocks: 2000 × 1024 bytes on one
 * thread is two blocks, the last not a multiple of 32 columns; the 1100-column slices of 2
 * threads, and the 3-thread split, cut blocks elsewhere. */
static void test_amx_n_blocks(void **state) {
    (void)state;
    if (!g_have_amx) skip();
    static const int Ms[] = { 17, 40 };
    float *C = malloc((size_t)40 * (2000 + 3) * sizeof *C);
    float *ref = malloc((size_t)40 * (2000 + 3) * sizeof *ref);
    assert_non_null(C);
    assert_non_null(ref);
    for (int mi = 0; mi < COUNT(Ms); mi++) {
        run_shape(Ms[mi], 2000, 1000, C, ref);
        run_shape(Ms[mi], 1100, 2100, C, ref);
    }
    free(C);
    free(ref);
}

/* Repeated calls with shrinking and growing shapes reuse the thread's buffer and reload the
 * tile configuration each call: results stay exact in any order. */
static void test_amx_buffer_reuse(void **state) {
    (void)state;
    if (!g_have_amx) skip();
    float *C = malloc((size_t)64 * (1024 + 3) * sizeof *C);
    float *ref = malloc((size_t)64 * (1024 + 3) * sizeof *ref);
    assert_non_null(C);
    assert_non_null(ref);
    run_shape(64, 1024, 832, C, ref);
    run_shape(33, 16, 64, C, ref);
    run_shape(64, 1024, 832, C, ref);
    run_shape(5, 100, 1, C, ref);
    free(C);
    free(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_amx_equals_scalar),
        cmocka_unit_test(test_amx_n_blocks),
        cmocka_unit_test(test_amx_buffer_reuse),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
