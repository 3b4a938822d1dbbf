/* Tests for kr_attend_multi_f32: for every variant, each query's output must equal
 * kr_attend_f32 of the same ISA over shared ++ own spans bit for bit (memcmp) — whatever nq,
 * head_dim and the cut of the keys into spans — and be within 2e-6 (relative to max |v|; 5e-6
 * for the scalar reference) of a double-precision reference. K/V are laid out as the
 * engine's: rows of a [positions][d_model] matrix, the head at column h·head_dim, stride
 * d_model; each query (sample path) has its own rows too. */
#include "test_support.h"

#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_OWN = 20, MAX_SPANS = 64, MAX_NQ = 70 };

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}
static float frand(void) { /* uniform in [-1, 1) */
    return (float)((double)(urand() >> 8) / (double)(1u << 23) - 1.0);
}
static float *rand_buf(size_t n, float scale) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = scale * frand();
    return p;
}
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* One variant under test: its single- and multi-query kernels (dispatched ones included, with
 * kr_isa_set choosing what they run). */
typedef struct {
    const char *name;
    kr_isa isa;
    kr_attend_f32_fn single;
    kr_attend_multi_f32_fn multi;
} variant;
static variant g_vars[2 * KR_ISA_COUNT];
static int g_n_vars;

/* A batch of nq queries of one forecast: shared K/V [n_sh][d], each query's own K/V
 * [MAX_OWN][d], queries and outputs [nq][d], d = n_heads · head_dim. */
typedef struct {
    int nq, hd, n_heads, d, n_sh, max_keys;
    float *k, *v, *ok, *ov, *q;
    int n_own_keys[MAX_NQ];
} batch;

static void batch_init(batch *b, int nq, int hd, int n_sh) {
    b->nq = nq;
    b->hd = hd;
    /* d_model 512 (a power of two bytes per row, as Kronos-small) for head_dim 64 and 128:
     * the kernels copy such blocks to dodge L1 set conflicts; other widths are read in place.
     * Both paths must give the same bits. */
    b->n_heads = hd == 64 || hd == 128 ? 512 / hd : 3;
    b->d = b->n_heads * hd;
    b->n_sh = n_sh;
    size_t d = (size_t)b->d;
    b->k = rand_buf((size_t)n_sh * d, 1.0f);
    b->v = rand_buf((size_t)n_sh * d, 1.0f);
    b->ok = rand_buf((size_t)nq * MAX_OWN * d, 1.0f);
    b->ov = rand_buf((size_t)nq * MAX_OWN * d, 1.0f);
    /* Larger q spreads the scores over a wide range (sharp and flat softmax). */
    b->q = rand_buf((size_t)nq * d, 3.0f);
    b->max_keys = 0;
    for (int i = 0; i < nq; i++) {
        /* 0..20 own keys, different per query; every 4th query has none. */
        b->n_own_keys[i] = i % 4 == 0 ? 0 : (int)((7u * (unsigned)i + urand() % 5u) % 21u);
        if (n_sh + b->n_own_keys[i] > b->max_keys) b->max_keys = n_sh + b->n_own_keys[i];
    }
}

static void batch_free(batch *b) {
    free(b->k);
    free(b->v);
    free(b->ok);
    free(b->ov);
    free(b->q);
}

/* Spans over keys [0, n) of rows k/v (head column offset already applied): pieces of random
 * length 1..max_piece, with an empty span slipped in. Returns the count. */
static int cut_spans(const float *k, const float *v, int n, int stride, int max_piece,
                     kr_kv_span *out) {
    int ns = 0;
    for (int j = 0; j < n;) {
        int len = 1 + (int)(urand() % (unsigned)max_piece);
        if (len > n - j) len = n - j;
        out[ns++] = (kr_kv_span){ k + (size_t)j * stride, v + (size_t)j * stride, len, stride };
        if (ns == 1) out[ns++] = (kr_kv_span){ k, v, 0, stride };
        j += len;
    }
    return ns;
}

/* Spans of batch b for head h: shared ones and each query's own ones. */
typedef struct {
    kr_kv_span shared[MAX_SPANS];
    int n_shared;
    kr_kv_span own[MAX_NQ][4];
    const kr_kv_span *own_p[MAX_NQ];
    int n_own[MAX_NQ];
} span_set;

static void make_spans(const batch *b, int h, span_set *ss) {
    int off = h * b->hd;
    /* Up to ~6 shared pieces; 400 keys get cuts that are and are not multiples of 16. */
    int piece = b->n_sh / 5 + 1;
    ss->n_shared = cut_spans(b->k + off, b->v + off, b->n_sh, b->d, piece, ss->shared);
    assert_true(ss->n_shared <= MAX_SPANS);
    for (int i = 0; i < b->nq; i++) {
        const float *ok = b->ok + (size_t)i * MAX_OWN * b->d + off;
        const float *ov = b->ov + (size_t)i * MAX_OWN * b->d + off;
        int n = b->n_own_keys[i];
        ss->own_p[i] = ss->own[i];
        if (n == 0) { /* no own span at all, or one empty span */
            ss->n_own[i] = i % 8 == 0 ? 0 : 1;
            ss->own[i][0] = (kr_kv_span){ ok, ov, 0, b->d };
        } else if (n == 1 || i % 3 == 0) {
            ss->n_own[i] = 1;
            ss->own[i][0] = (kr_kv_span){ ok, ov, n, b->d };
        } else { /* two spans, as a path's cache split over two KV blocks */
            int a = n / 2 + 1;
            ss->n_own[i] = 2;
            ss->own[i][0] = (kr_kv_span){ ok, ov, a, b->d };
            ss->own[i][1] =
                (kr_kv_span){ ok + (size_t)a * b->d, ov + (size_t)a * b->d, n - a, b->d };
        }
    }
}

/* Double-precision attention of q over spans. Returns max |v| over the keys: the unit the
 * float error is measured in. The output is a convex combination of the v rows, and an error
 * in a key's score moves it by about p_j·|v_j − out|, so |v| — not |out|, which can be near
 * zero — is the scale a relative tolerance means. */
static double attend_double(const float *q, int hd, float scale, const kr_kv_span *spans, int ns,
                            double *out) {
    int n = 0;
    for (int s = 0; s < ns; s++) n += spans[s].n;
    double *p = malloc((size_t)(n ? n : 1) * sizeof *p), mx = -INFINITY, sum = 0.0;
    assert_non_null(p);
    n = 0;
    for (int s = 0; s < ns; s++)
        for (int j = 0; j < spans[s].n; j++) {
            const float *k = spans[s].k + (size_t)j * spans[s].stride;
            double d = 0.0;
            for (int i = 0; i < hd; i++) d += (double)q[i] * k[i];
            p[n] = d * scale;
            if (p[n] > mx) mx = p[n];
            n++;
        }
    for (int j = 0; j < n; j++) sum += (p[j] = exp(p[j] - mx));
    double vmax = 0.0;
    for (int i = 0; i < hd; i++) out[i] = 0.0;
    n = 0;
    for (int s = 0; s < ns; s++)
        for (int j = 0; j < spans[s].n; j++, n++) {
            const float *v = spans[s].v + (size_t)j * spans[s].stride;
            for (int i = 0; i < hd; i++) {
                out[i] += p[n] / sum * v[i];
                vmax = fabs((double)v[i]) > vmax ? fabs((double)v[i]) : vmax;
            }
        }
    free(p);
    return vmax;
}

/* Runs every variant on batch b (for head 0 and the last head), comparing each
 * query against the same ISA's single-query kernel (memcmp) and the double reference. */
static void check_batch(const batch *b) {
    const int hd = b->hd, d = b->d, nq = b->nq;
    const float scale = 1.0f / sqrtf((float)hd);
    const int stride = b->max_keys + 3; /* a loose stride: rows need not be packed */
    static span_set ss;
    float *scratch = malloc((size_t)nq * stride * sizeof *scratch);
    float *scratch1 = malloc((size_t)(b->max_keys + 1) * sizeof *scratch1);
    float *out = malloc((size_t)nq * d * sizeof *out), *one = malloc((size_t)hd * sizeof *one);
    double *dref = malloc((size_t)nq * hd * sizeof *dref);
    double vmax[MAX_NQ];
    assert_true(scratch && scratch1 && out && one && dref);
    const int heads[] = { 0, b->n_heads - 1 };
    for (int hi = 0; hi < COUNT(heads); hi++) {
        int h = heads[hi], off = h * hd;
        make_spans(b, h, &ss);
        const float *qp[MAX_NQ];
        float *op[MAX_NQ];
        kr_kv_span all[MAX_SPANS + 4];
        for (int i = 0; i < nq; i++) {
            qp[i] = b->q + (size_t)i * d + off;
            op[i] = out + (size_t)i * d + off;
            memcpy(all, ss.shared, (size_t)ss.n_shared * sizeof *all);
            memcpy(all + ss.n_shared, ss.own[i], (size_t)ss.n_own[i] * sizeof *all);
            vmax[i] = attend_double(qp[i], hd, scale, all, ss.n_shared + ss.n_own[i],
                                    dref + (size_t)i * hd);
        }
        for (int vi = 0; vi < g_n_vars; vi++) {
            const variant *var = &g_vars[vi];
            kr_isa_set(var->isa);
            /* Sentinels: the kernel must write only its head's columns. */
            for (size_t x = 0; x < (size_t)nq * d; x++) out[x] = 12345.0f;
            var->multi(nq, qp, hd, scale, ss.shared, ss.n_shared, ss.own_p, ss.n_own, scratch,
                       stride, op);
            for (int i = 0; i < nq; i++) {
                for (int c = 0; c < d; c++)
                    if ((c < off || c >= off + hd) && out[(size_t)i * d + c] != 12345.0f)
                        fail_msg("%s: query %d wrote column %d outside head %d", var->name, i, c,
                                 h);
                memcpy(all, ss.shared, (size_t)ss.n_shared * sizeof *all);
                memcpy(all + ss.n_shared, ss.own[i], (size_t)ss.n_own[i] * sizeof *all);
                var->single(qp[i], hd, scale, all, ss.n_shared + ss.n_own[i], scratch1, one);
                if (memcmp(one, op[i], (size_t)hd * sizeof *one) != 0) {
                    int e = 0; /* first differing element (bits, so -0 vs +0 counts) */
                    while (e < hd - 1 && memcmp(&one[e], &op[i][e], sizeof one[e]) == 0) e++;
                    fail_msg("%s nq=%d hd=%d shared=%d (%d spans) head %d query %d (own %d): "
                             "[%d] multi %.9g != single %.9g",
                             var->name, nq, hd, b->n_sh, ss.n_shared, h, i, b->n_own_keys[i], e,
                             op[i][e], one[e]);
                }
                /* 2e-6 of max |v| (worst seen: 7e-7). The scalar reference sums a dot product
                 * of up to 208 terms one by one and reaches 2.1e-6 at head_dim 208 — its
                 * single-query kernel's error, which multi reproduces bit for bit — so it
                 * gets 5e-6. */
                const double tol = (var->isa == KR_ISA_SCALAR ? 5e-6 : 2e-6) * vmax[i];
                for (int c = 0; c < hd; c++) {
                    double want = dref[(size_t)i * hd + c];
                    if (!(fabs(op[i][c] - want) <= tol))
                        fail_msg("%s nq=%d hd=%d shared=%d query %d [%d]: %.9g vs double %.9g "
                                 "(max |v| %.3g)",
                                 var->name, nq, hd, b->n_sh, i, c, op[i][c], want, vmax[i]);
                }
            }
        }
    }
    free(scratch);
    free(scratch1);
    free(out);
    free(one);
    free(dref);
}

static void test_multi_bit_identical(void **state) {
    (void)state;
    static const int nqs[] = { 1, 2, 3, 8, 13, 29, 32, 33 };
    static const int hds[] = { 8, 52, 64, 128, 208 };
    static const int shs[] = { 1, 15, 16, 17, 400 };
    for (int hi = 0; hi < COUNT(hds); hi++)
        for (int si = 0; si < COUNT(shs); si++)
            for (int ni = 0; ni < COUNT(nqs); ni++) {
                batch b;
                batch_init(&b, nqs[ni], hds[hi], shs[si]);
                check_batch(&b);
                batch_free(&b);
            }
}

/* More queries than one internal pass takes (the kernels tile queries by 64). */
static void test_multi_many_queries(void **state) {
    (void)state;
    batch b;
    batch_init(&b, 70, 52, 37);
    check_batch(&b);
    batch_free(&b);
}

/* Only shared keys: own / n_own may be NULL. And a query with no keys at all gets zeros,
 * like kr_attend_f32. */
static void test_multi_no_own_and_empty(void **state) {
    (void)state;
    enum { HD = 64, NQ = 5, NS = 40 };
    float *k = rand_buf((size_t)NS * HD, 1.0f), *v = rand_buf((size_t)NS * HD, 1.0f);
    float *q = rand_buf((size_t)NQ * HD, 2.0f);
    float out[NQ][HD], one[HD], scratch[NQ * NS], scratch1[NS];
    const float *qp[NQ];
    float *op[NQ];
    for (int i = 0; i < NQ; i++) {
        qp[i] = q + i * HD;
        op[i] = out[i];
    }
    kr_kv_span sh[2] = { { k, v, 23, HD }, { k + 23 * HD, v + 23 * HD, NS - 23, HD } };
    for (int vi = 0; vi < g_n_vars; vi++) {
        kr_isa_set(g_vars[vi].isa);
        g_vars[vi].multi(NQ, qp, HD, 0.125f, sh, 2, NULL, NULL, scratch, NS, op);
        for (int i = 0; i < NQ; i++) {
            g_vars[vi].single(qp[i], HD, 0.125f, sh, 2, scratch1, one);
            assert_memory_equal(one, out[i], sizeof one);
        }
        /* No shared keys and no own keys: zeros (no NaN from 0/0). */
        const kr_kv_span *own[NQ] = { NULL };
        int n_own[NQ] = { 0 };
        memset(out, 0x7f, sizeof out);
        g_vars[vi].multi(NQ, qp, HD, 0.125f, sh, 0, own, n_own, scratch, NS, op);
        for (int i = 0; i < NQ; i++)
            for (int c = 0; c < HD; c++) assert_true(out[i][c] == 0.0f);
    }
    free(k);
    free(v);
    free(q);
}

/* out[i] may alias q[i] (the engine could overwrite a head's query with its output). */
static void test_multi_out_aliases_q(void **state) {
    (void)state;
    batch b;
    batch_init(&b, 9, 52, 100);
    static span_set ss;
    make_spans(&b, 1, &ss);
    const int hd = b.hd, d = b.d, stride = b.max_keys;
    float *scratch = malloc((size_t)b.nq * stride * sizeof *scratch);
    float *want = malloc((size_t)b.nq * d * sizeof *want),
          *qo = malloc((size_t)b.nq * d * sizeof *qo);
    assert_true(scratch && want && qo);
    const float *qp[MAX_NQ], *qop[MAX_NQ];
    float *wp[MAX_NQ], *op[MAX_NQ];
    for (int i = 0; i < b.nq; i++) {
        qp[i] = b.q + (size_t)i * d + hd;
        wp[i] = want + (size_t)i * d + hd;
        qop[i] = op[i] = qo + (size_t)i * d + hd;
    }
    for (int vi = 0; vi < g_n_vars; vi++) {
        kr_isa_set(g_vars[vi].isa);
        g_vars[vi].multi(b.nq, qp, hd, 0.2f, ss.shared, ss.n_shared, ss.own_p, ss.n_own, scratch,
                         stride, wp);
        memcpy(qo, b.q, (size_t)b.nq * d * sizeof *qo);
        g_vars[vi].multi(b.nq, qop, hd, 0.2f, ss.shared, ss.n_shared, ss.own_p, ss.n_own, scratch,
                         stride, op);
        for (int i = 0; i < b.nq; i++)
            assert_memory_equal(wp[i], op[i], (size_t)hd * sizeof(float));
    }
    free(scratch);
    free(want);
    free(qo);
    batch_free(&b);
}

int main(void) {
    static const struct {
        kr_isa isa;
        const char *name;
        kr_attend_f32_fn single;
        kr_attend_multi_f32_fn multi;
    } all[KR_ISA_COUNT] = {
        { KR_ISA_SCALAR, "scalar", kr_attend_f32_scalar, kr_attend_multi_f32_scalar },
        { KR_ISA_AVX2, "avx2", kr_attend_f32_avx2, kr_attend_multi_f32_avx2 },
        { KR_ISA_AVX512, "avx512", kr_attend_f32_avx512, kr_attend_multi_f32_avx512 },
    };
    static char names[KR_ISA_COUNT][32];
    for (int i = 0; i < KR_ISA_COUNT; i++) {
        if (!kr_isa_supported(all[i].isa)) continue;
        g_vars[g_n_vars++] = (variant){ all[i].name, all[i].isa, all[i].single, all[i].multi };
        snprintf(names[i], sizeof names[i], "dispatched %s", all[i].name);
        g_vars[g_n_vars++] = (variant){ names[i], all[i].isa, kr_attend_f32, kr_attend_multi_f32 };
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multi_bit_identical),
        cmocka_unit_test(test_multi_many_queries),
        cmocka_unit_test(test_multi_no_own_and_empty),
        cmocka_unit_test(test_multi_out_aliases_q),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
