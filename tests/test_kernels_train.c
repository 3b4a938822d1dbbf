/* Tests for the training kernels (kernels/train_kernels.h): every SIMD variant against the
 * scalar reference on odd sizes. Attention: head_dim 13, 16, 52, 64, 128; sequences of 1, 5,
 * 33 and 101 rows (not multiples of a block), causal and full, with and without dropout on the
 * probabilities; each variant deterministic (the same call twice, bit for bit); columns
 * outside the head untouched. Row passes: widths 1 to 1000 that are no multiple of 16; the
 * ones without a reduction across lanes (column sums, RMSNorm's re-application, RoPE, the
 * cross-entropy gradient, AdamW) bit for bit, the others to float rounding; nothing written
 * past a row. */
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

/* ---------------------------------------------------------------- row passes */

typedef struct row_ops {
    void (*fwd)(int, int, const float *, const float *, float, float *, float *);
    void (*apply)(int, int, const float *, const float *, const float *, float *);
    void (*bwd)(int, int, const float *, const float *, const float *, const float *, float *, int);
    void (*gw)(int, int, int, int, const float *, const float *, const float *, float *);
    void (*colsum)(int, int, int, int, const float *, float *);
    void (*swiglu)(int, const float *, float *, float *, float *);
    void (*rope)(int, int, int, float *, int, const float *, const float *, float);
    double (*xent)(int, float *, int);
    void (*xent_grad)(int, float *, int, float);
    void (*adamw)(size_t, const kr_adamw *, float *, const float *, float *, float *);
} row_ops;

#define ROW_OPS(sfx)                                                                       \
    {                                                                                      \
        kr_rmsnorm_fwd_rows_##sfx, kr_rmsnorm_apply_rows_##sfx, kr_rmsnorm_bwd_rows_##sfx, \
            kr_rmsnorm_gw_cols_##sfx, kr_colsum_add_cols_##sfx, kr_swiglu_bwd_##sfx,       \
            kr_rope_rows_##sfx, kr_softmax_xent_row_##sfx, kr_xent_grad_row_##sfx,         \
            kr_adamw_f32_##sfx                                                             \
    }
static const row_ops k_ops[KR_ISA_COUNT] = { ROW_OPS(scalar), ROW_OPS(avx2), ROW_OPS(avx512) };

/* n values of got within rel·max|want| (+ a floor) of want; exact when rel is 0 */
static void close_to(const char *what, kr_isa isa, int d, const float *got, const float *want,
                     size_t n, double rel) {
    double mag = 0.0, err = 0.0;
    for (size_t i = 0; i < n; i++) {
        mag = fmax(mag, fabs(want[i]));
        err = fmax(err, fabs((double)got[i] - (double)want[i]));
    }
    if (rel == 0.0 ? memcmp(got, want, n * sizeof *got) != 0 : !(err <= rel * mag + 1e-7))
        fail_msg("%s %s d %d: off by %.3g (max %.3g)", kr_isa_name(isa), what, d, err, mag);
}

static float *copy_of(const float *x, size_t n) {
    float *c = malloc((n + 1) * sizeof *c);
    memcpy(c, x, n * sizeof *c);
    c[n] = 7.0f; /* a sentinel past the end */
    return c;
}

static void row_ops_case(int d) {
    const int rows = 7;
    const size_t n = (size_t)rows * (size_t)d;
    float *x = rand_buf(n, 2.0f), *dy = rand_buf(n, 1.0f), *w = rand_buf((size_t)d, 1.0f);
    float *y0 = copy_of(x, n), *r0 = copy_of(x, rows), *dx0 = copy_of(dy, n);
    float *gw0 = copy_of(w, (size_t)d), *cs0 = copy_of(w, (size_t)d);
    k_ops[0].fwd(rows, d, x, w, 1e-5f, y0, r0);
    k_ops[0].bwd(rows, d, dy, x, r0, w, dx0, 1);
    k_ops[0].gw(rows, d, 1, d, dy, x, r0, gw0);
    k_ops[0].colsum(rows, d, 0, d, x, cs0);
    for (int isa = 1; isa < KR_ISA_COUNT; isa++) {
        if (!kr_isa_supported((kr_isa)isa)) continue;
        const row_ops *o = &k_ops[isa];
        float *y = copy_of(x, n), *r = copy_of(x, rows), *dx = copy_of(dy, n);
        float *gw = copy_of(w, (size_t)d), *cs = copy_of(w, (size_t)d), *ya = copy_of(x, n);
        o->fwd(rows, d, x, w, 1e-5f, y, r);
        close_to("rmsnorm", (kr_isa)isa, d, y, y0, n + 1, 1e-6);
        close_to("rmsnorm rstd", (kr_isa)isa, d, r, r0, rows + 1, 1e-6);
        o->apply(rows, d, x, r0, w, ya);
        close_to("rmsnorm apply", (kr_isa)isa, d, ya, y0, n + 1, 0);
        o->bwd(rows, d, dy, x, r0, w, dx, 1);
        close_to("rmsnorm dx", (kr_isa)isa, d, dx, dx0, n + 1, 1e-6);
        o->gw(rows, d, 1, d, dy, x, r0, gw);
        close_to("rmsnorm gw", (kr_isa)isa, d, gw, gw0, (size_t)d + 1, 0);
        o->colsum(rows, d, 0, d, x, cs);
        close_to("colsum", (kr_isa)isa, d, cs, cs0, (size_t)d + 1, 0);
        free(y), free(r), free(dx), free(gw), free(cs), free(ya);
    }
    free(x), free(dy), free(w), free(y0), free(r0), free(dx0), free(gw0), free(cs0);
}

static void elementwise_case(int n) {
    float *dg = rand_buf((size_t)n, 1.0f), *h1 = rand_buf((size_t)n, 6.0f),
          *h3 = rand_buf((size_t)n, 1.0f);
    float *a1 = copy_of(h1, (size_t)n), *a3 = copy_of(h3, (size_t)n), *g0 = copy_of(h1, (size_t)n);
    k_ops[0].swiglu(n, dg, a1, a3, g0);
    /* RoPE: n_heads 3 of head_dim n (n even: half n/2), 5 rows */
    const int half = n / 2, heads = 3, rows = 5, ld = heads * 2 * half + 3;
    float *rx = rand_buf((size_t)rows * ld, 1.0f), *cs = rand_buf((size_t)rows * half + 1, 1.0f),
          *sn = rand_buf((size_t)rows * half + 1, 1.0f);
    float *rx0 = copy_of(rx, (size_t)rows * ld);
    if (half) k_ops[0].rope(rows, heads, half, rx0, ld, cs, sn, -1.0f);
    /* cross-entropy over n logits, target n/3 */
    float *lg = rand_buf((size_t)n, 20.0f), *p0 = copy_of(lg, (size_t)n);
    double l0 = k_ops[0].xent(n, p0, n / 3);
    float *gp0 = copy_of(p0, (size_t)n);
    k_ops[0].xent_grad(n, gp0, n / 3, 0.37f);
    /* AdamW */
    kr_adamw ad = { 0.8f, 0.999f, 0.9f, 0.1f, 0.95f, 0.05f, 0.3f, 1e-8f, -1e-3f };
    float *pw = rand_buf((size_t)n, 1.0f), *pm = rand_buf((size_t)n, 0.1f),
          *pv = rand_buf((size_t)n, 0.1f);
    for (int i = 0; i < n; i++) pv[i] = fabsf(pv[i]);
    float *w0 = copy_of(pw, (size_t)n), *m0 = copy_of(pm, (size_t)n), *v0 = copy_of(pv, (size_t)n);
    k_ops[0].adamw((size_t)n, &ad, w0, dg, m0, v0);
    for (int isa = 1; isa < KR_ISA_COUNT; isa++) {
        if (!kr_isa_supported((kr_isa)isa)) continue;
        const row_ops *o = &k_ops[isa];
        float *b1 = copy_of(h1, (size_t)n), *b3 = copy_of(h3, (size_t)n),
              *g = copy_of(h1, (size_t)n);
        o->swiglu(n, dg, b1, b3, g);
        close_to("swiglu dh1", (kr_isa)isa, n, b1, a1, (size_t)n + 1, 1e-6);
        close_to("swiglu dh3", (kr_isa)isa, n, b3, a3, (size_t)n + 1, 1e-6);
        close_to("swiglu g", (kr_isa)isa, n, g, g0, (size_t)n + 1, 1e-6);
        float *r = copy_of(rx, (size_t)rows * ld);
        if (half) o->rope(rows, heads, half, r, ld, cs, sn, -1.0f);
        close_to("rope", (kr_isa)isa, n, r, rx0, (size_t)rows * ld + 1, 0);
        float *p = copy_of(lg, (size_t)n);
        double l = o->xent(n, p, n / 3);
        close_to("softmax", (kr_isa)isa, n, p, p0, (size_t)n + 1, 1e-6);
        if (!(fabs(l - l0) <= 1e-6 * (1 + fabs(l0))))
            fail_msg("%s xent %d: loss %.9g, want %.9g", kr_isa_name((kr_isa)isa), n, l, l0);
        float *gp = copy_of(p0, (size_t)n);
        o->xent_grad(n, gp, n / 3, 0.37f);
        close_to("xent grad", (kr_isa)isa, n, gp, gp0, (size_t)n + 1, 0);
        float *w1 = copy_of(pw, (size_t)n), *m1 = copy_of(pm, (size_t)n),
              *v1 = copy_of(pv, (size_t)n);
        o->adamw((size_t)n, &ad, w1, dg, m1, v1);
        close_to("adamw w", (kr_isa)isa, n, w1, w0, (size_t)n + 1, 0);
        close_to("adamw m", (kr_isa)isa, n, m1, m0, (size_t)n + 1, 0);
        close_to("adamw v", (kr_isa)isa, n, v1, v0, (size_t)n + 1, 0);
        free(b1), free(b3), free(g), free(r), free(p), free(gp), free(w1), free(m1), free(v1);
    }
    free(dg), free(h1), free(h3), free(a1), free(a3), free(g0), free(rx), free(cs), free(sn);
    free(rx0), free(lg), free(p0), free(gp0), free(pw), free(pm), free(pv), free(w0), free(m0);
    free(v0);
}

static void test_row_ops_vs_scalar(void **state) {
    (void)state;
    static const int ds[] = { 1, 2, 13, 52, 208, 1000, 1024 };
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) {
        row_ops_case(ds[i]);
        elementwise_case(ds[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attn_head_vs_scalar),
        cmocka_unit_test(test_attn_head_dispatch),
        cmocka_unit_test(test_row_ops_vs_scalar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
