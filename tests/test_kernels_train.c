/* Tests for the training kernels (kernels/train_kernels.h): every SIMD variant against the
 * scalar reference on odd sizes (head_dim 13, 16, 52, 64, 128; sequences of 1, 5, 33 and 101
 * rows, not multiples of a block), causal and full, with and without dropout on the
 * probabilities; each variant deterministic (the same call twice, bit for bit); rows and
 * columns outside the head untouched. */
#include "test_support.h"

#include "kernels/kernels.h"
#include "kernels/train_kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 40) / (double)(1ull << 23) - 1.0);
}

static float *rand_buf(size_t n, float scale) {
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = frand() * scale;
    return p;
}

/* A pure keep/drop pattern of (query, key) with keep factor 2 (rate 0.5). */
static void drop_half(void *ctx, int query, int key0, int n, float *p, int stride) {
    (void)ctx;
    for (int t = 0; t < n; t++) {
        uint32_t hsh = (uint32_t)(query * 2654435761u) ^ (uint32_t)((key0 + t) * 40503u);
        hsh ^= hsh >> 13;
        hsh *= 0x5bd1e995u;
        p[(size_t)t * (size_t)stride] *= (hsh >> 15) & 1 ? 2.0f : 0.0f;
    }
}

static const kr_attn_head_fwd_fn k_fwd[KR_ISA_COUNT] = { kr_attn_head_fwd_scalar,
                                                         kr_attn_head_fwd_avx2,
                                                         kr_attn_head_fwd_avx512 };
static const kr_attn_head_bwd_fn k_bwd[KR_ISA_COUNT] = { kr_attn_head_bwd_scalar,
                                                         kr_attn_head_bwd_avx2,
                                                         kr_attn_head_bwd_avx512 };

/* max |a − b| over the head's columns of T rows, and max |b| */
static void diff(const float *a, const float *b, int T, int hd, int ld, double *err, double *mag) {
    *err = *mag = 0.0;
    for (int t = 0; t < T; t++)
        for (int c = 0; c < hd; c++) {
            size_t i = (size_t)t * (size_t)ld + (size_t)c;
            *err = fmax(*err, fabs((double)a[i] - (double)b[i]));
            *mag = fmax(*mag, fabs((double)b[i]));
        }
}

/* Columns of the row buffers outside the head (ld > hd) keep their sentinel. */
static void untouched(const float *x, int T, int hd, int ld) {
    for (int t = 0; t < T; t++)
        for (int c = hd; c < ld; c++) assert_true(x[(size_t)t * (size_t)ld + (size_t)c] == 7.0f);
}

static void attn_case(int T, int hd, int causal, int dropping) {
    const int ld = hd + 5; /* rows of a wider matrix, not a multiple of 16 apart */
    const size_t n = (size_t)T * (size_t)ld;
    float *q = rand_buf(n, 1.5f), *k = rand_buf(n, 1.5f), *v = rand_buf(n, 1.0f),
          *g = rand_buf(n, 1.0f);
    kr_attn_head h = { .T = T,
                       .head_dim = hd,
                       .ld = ld,
                       .causal = causal,
                       .scale = 1.0f / sqrtf((float)hd),
                       .drop = dropping ? drop_half : NULL };
    float *scr = aligned_alloc(64, (kr_attn_head_scratch_floats(T, hd) * 4 + 63) / 64 * 64);
    float *ref[4], *got[4], *again[4]; /* out, dq, dk, dv */
    for (int i = 0; i < 4; i++) {
        ref[i] = malloc(n * 4), got[i] = malloc(n * 4), again[i] = malloc(n * 4);
        for (size_t e = 0; e < n; e++) ref[i][e] = got[i][e] = again[i][e] = 7.0f;
    }
    k_fwd[0](&h, q, k, v, ref[0], scr);
    k_bwd[0](&h, q, k, v, ref[0], g, ref[1], ref[2], ref[3], scr);
    for (int isa = 1; isa < KR_ISA_COUNT; isa++) {
        if (!kr_isa_supported((kr_isa)isa)) continue;
        for (int rep = 0; rep < 2; rep++) {
            float **o = rep ? again : got;
            k_fwd[isa](&h, q, k, v, o[0], scr);
            /* the backward from the reference's output, so only its own rounding differs */
            k_bwd[isa](&h, q, k, v, ref[0], g, o[1], o[2], o[3], scr);
        }
        static const char *const what[4] = { "out", "dq", "dk", "dv" };
        for (int i = 0; i < 4; i++) {
            double err, mag;
            diff(got[i], ref[i], T, hd, ld, &err, &mag);
            if (!(err <= 2e-5 * mag + 1e-6)) /* inputs are O(1) */
                fail_msg("%s T%d hd%d causal%d drop%d: %s off by %.3g (max %.3g)",
                         kr_isa_name((kr_isa)isa), T, hd, causal, dropping, what[i], err, mag);
            assert_memory_equal(got[i], again[i], n * 4);
            untouched(got[i], T, hd, ld);
        }
    }
    for (int i = 0; i < 4; i++) free(ref[i]), free(got[i]), free(again[i]);
    free(q), free(k), free(v), free(g), free(scr);
}

static void test_attn_head_vs_scalar(void **state) {
    (void)state;
    static const int Ts[] = { 1, 5, 33, 101 }, hds[] = { 13, 16, 52, 64, 128 };
    for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++)
        for (size_t b = 0; b < sizeof hds / sizeof *hds; b++)
            for (int causal = 0; causal < 2; causal++) attn_case(Ts[a], hds[b], causal, 0);
    attn_case(101, 52, 1, 1);
    attn_case(33, 64, 0, 1);
}

/* The dispatched names run the active variant. */
static void test_attn_head_dispatch(void **state) {
    (void)state;
    const int T = 9, hd = 20;
    float *q = rand_buf((size_t)T * hd, 1), *k = rand_buf((size_t)T * hd, 1),
          *v = rand_buf((size_t)T * hd, 1);
    float a[9 * 20], b[9 * 20];
    float *scr = aligned_alloc(64, (kr_attn_head_scratch_floats(T, hd) * 4 + 63) / 64 * 64);
    kr_attn_head h = { .T = T, .head_dim = hd, .ld = hd, .causal = 1, .scale = 0.25f };
    for (int isa = 0; isa < KR_ISA_COUNT; isa++) {
        if (!kr_isa_supported((kr_isa)isa)) continue;
        kr_isa_set((kr_isa)isa);
        kr_attn_head_fwd(&h, q, k, v, a, scr);
        k_fwd[isa](&h, q, k, v, b, scr);
        assert_memory_equal(a, b, sizeof a);
    }
    kr_isa_set(kr_isa_best());
    free(q), free(k), free(v), free(scr);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attn_head_vs_scalar),
        cmocka_unit_test(test_attn_head_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
