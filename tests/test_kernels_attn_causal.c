/* Tests for kr_attend_causal_f32: for every variant, query i's output must equal kr_attend_f32
 * of the same ISA over the first n_keys[i] keys bit for bit (memcmp) — whatever nq (one lane
 * group, a partial one, past the 64-query tile), head_dim (64 and 52 as the models, odd ones,
 * and one past the lane-transposed scorer's 128), the cut of the keys into spans and the
 * counts (causal ascending, shuffled, zero, all). K/V rows are laid out as the engine's:
 * [positions][d_model], the head at column h·head_dim. */
#include "test_support.h"

#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_SPANS = 256, MAX_NQ = 80 };

static uint64_t g_rng = 0xC2B2AE3D27D4EB4Full;
static uint32_t urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}
static float *rand_buf(size_t n, float scale) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = scale * (float)((double)(urand() >> 8) / (double)(1u << 23) - 1.0);
    return p;
}

typedef struct {
    const char *name;
    kr_isa isa;
    kr_attend_f32_fn single;
    kr_attend_causal_f32_fn causal;
} variant;
static variant g_vars[2 * KR_ISA_COUNT];
static int g_n_vars;

/* Keys [0, n) of rows k/v cut into pieces of 1..max_piece, an empty span slipped in. */
static int cut_spans(const float *k, const float *v, int n, int stride, int max_piece,
                     kr_kv_span *out) {
    int ns = 0;
    for (int j = 0; j < n;) {
        int len = 1 + (int)(urand() % (unsigned)max_piece);
        if (len > n - j) len = n - j;
        out[ns++] = (kr_kv_span){ k + (size_t)j * stride, v + (size_t)j * stride, len, stride };
        if (ns == 1) out[ns++] = (kr_kv_span){ k, v, 0, stride };
        j += len;
        assert_true(ns < MAX_SPANS);
    }
    return ns;
}

/* The spans cut after their first n keys; returns the count. */
static int prefix_spans(const kr_kv_span *sp, int ns, int n, kr_kv_span *out) {
    int m = 0;
    for (int s = 0; s < ns && n > 0; s++) {
        out[m] = sp[s];
        if (out[m].n > n) out[m].n = n;
        n -= out[m++].n;
    }
    return m;
}

typedef enum { COUNTS_CAUSAL, COUNTS_SHUFFLED } counts_kind;

/* One case: nq queries of head 1 over n_total keys, counts of the given kind. */
static void check_case(int nq, int hd, int n_total, counts_kind kind, int max_piece) {
    int n_heads = hd == 64 ? 8 : 3; /* d_model 512 for 64: the kernels copy such rows */
    int d = n_heads * hd, off = hd;
    float *k = rand_buf((size_t)n_total * d, 1.0f), *v = rand_buf((size_t)n_total * d, 1.0f);
    float *q = rand_buf((size_t)nq * d, 3.0f);
    float *got = malloc((size_t)nq * d * sizeof *got), *want = malloc((size_t)hd * sizeof *want);
    float *scratch = malloc((size_t)nq * (n_total + 1) * sizeof *scratch);
    static kr_kv_span spans[MAX_SPANS], cut[MAX_SPANS];
    assert_true(got && want && scratch && nq <= MAX_NQ);
    int ns = cut_spans(k + off, v + off, n_total, d, max_piece, spans);

    int n_keys[MAX_NQ];
    for (int i = 0; i < nq; i++) {
        if (kind == COUNTS_CAUSAL) { /* a re-run window: row i sees n0 + i + 1 keys */
            int n0 = n_total - nq > 0 ? n_total - nq : 0;
            n_keys[i] = n0 + i + 1 < n_total ? n0 + i + 1 : n_total;
        } else { /* any order; every 7th none, every 5th all */
            n_keys[i] = i % 7 == 3   ? 0
                        : i % 5 == 1 ? n_total
                                     : (int)(urand() % (unsigned)(n_total + 1));
        }
    }
    const float *qp[MAX_NQ];
    float *op[MAX_NQ];
    for (int i = 0; i < nq; i++) {
        qp[i] = q + (size_t)i * d + off;
        op[i] = got + (size_t)i * d + off;
    }
    for (int vi = 0; vi < g_n_vars; vi++) {
        kr_isa_set(g_vars[vi].isa);
        memset(got, 0x7f, (size_t)nq * d * sizeof *got);
        g_vars[vi].causal(nq, qp, hd, 0.125f, spans, ns, n_keys, scratch, n_total + 1, op);
        for (int i = 0; i < nq; i++) {
            int m = prefix_spans(spans, ns, n_keys[i], cut);
            g_vars[vi].single(qp[i], hd, 0.125f, cut, m, scratch, want);
            if (memcmp(want, op[i], (size_t)hd * sizeof *want) != 0)
                fail_msg("%s: nq %d head_dim %d keys %d (%s), query %d of %d keys differs",
                         g_vars[vi].name, nq, hd, n_total,
                         kind == COUNTS_CAUSAL ? "causal" : "shuffled", i, n_keys[i]);
        }
    }
    free(k);
    free(v);
    free(q);
    free(got);
    free(want);
    free(scratch);
}

static void test_causal_matches_single(void **state) {
    (void)state;
    static const int hds[] = { 64, 52, 17, 7, 128, 136 };
    static const int nqs[] = { 1, 3, 16, 17, 32, 45, 70 };
    for (size_t h = 0; h < sizeof hds / sizeof hds[0]; h++)
        for (size_t n = 0; n < sizeof nqs / sizeof nqs[0]; n++) {
            check_case(nqs[n], hds[h], 300, COUNTS_CAUSAL, 70);
            check_case(nqs[n], hds[h], 41, COUNTS_SHUFFLED, 9);
        }
}

/* Fewer keys than queries, single keys, one span of one key. */
static void test_causal_small_windows(void **state) {
    (void)state;
    for (int n = 1; n <= 20; n += 3) {
        check_case(24, 64, n, COUNTS_CAUSAL, 1);
        check_case(24, 52, n, COUNTS_SHUFFLED, 4);
    }
}

/* out[i] may alias q[i]: the same bits as into separate rows. */
static void test_causal_out_aliases_q(void **state) {
    (void)state;
    enum { NQ = 21, HD = 52, D = 3 * HD, N = 90 };
    float *k = rand_buf((size_t)N * D, 1.0f), *v = rand_buf((size_t)N * D, 1.0f);
    float *q = rand_buf((size_t)NQ * D, 3.0f), *qo = malloc((size_t)NQ * D * sizeof *qo);
    float *want = malloc((size_t)NQ * D * sizeof *want), *scratch = malloc(NQ * N * sizeof(float));
    assert_true(qo && want && scratch);
    kr_kv_span sp = { k + HD, v + HD, N, D };
    int n_keys[NQ];
    const float *qp[NQ], *qop[NQ];
    float *wp[NQ], *op[NQ];
    for (int i = 0; i < NQ; i++) {
        n_keys[i] = N - NQ + i + 1;
        qp[i] = q + (size_t)i * D + HD;
        wp[i] = want + (size_t)i * D + HD;
        qop[i] = op[i] = qo + (size_t)i * D + HD;
    }
    for (int vi = 0; vi < g_n_vars; vi++) {
        kr_isa_set(g_vars[vi].isa);
        g_vars[vi].causal(NQ, qp, HD, 0.2f, &sp, 1, n_keys, scratch, N, wp);
        memcpy(qo, q, (size_t)NQ * D * sizeof *qo);
        g_vars[vi].causal(NQ, qop, HD, 0.2f, &sp, 1, n_keys, scratch, N, op);
        for (int i = 0; i < NQ; i++) assert_memory_equal(wp[i], op[i], (size_t)HD * sizeof(float));
    }
    free(k);
    free(v);
    free(q);
    free(qo);
    free(want);
    free(scratch);
}

int main(void) {
    static const struct {
        kr_isa isa;
        const char *name;
        kr_attend_f32_fn single;
        kr_attend_causal_f32_fn causal;
    } all[KR_ISA_COUNT] = {
        { KR_ISA_SCALAR, "scalar", kr_attend_f32_scalar, kr_attend_causal_f32_scalar },
        { KR_ISA_AVX2, "avx2", kr_attend_f32_avx2, kr_attend_causal_f32_avx2 },
        { KR_ISA_AVX512, "avx512", kr_attend_f32_avx512, kr_attend_causal_f32_avx512 },
    };
    static char names[KR_ISA_COUNT][32];
    for (int i = 0; i < KR_ISA_COUNT; i++) {
        if (!kr_isa_supported(all[i].isa)) continue;
        g_vars[g_n_vars++] = (variant){ all[i].name, all[i].isa, all[i].single, all[i].causal };
        snprintf(names[i], sizeof names[i], "dispatched %s", all[i].name);
        g_vars[g_n_vars++] = (variant){ names[i], all[i].isa, kr_attend_f32, kr_attend_causal_f32 };
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_causal_matches_single),
        cmocka_unit_test(test_causal_small_windows),
        cmocka_unit_test(test_causal_out_aliases_q),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
