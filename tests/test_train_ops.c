/*
 * Finite-difference checks of every backward pass of the train layer (train/ops.h,
 * train/attention.h) on odd sizes: head_dim 52, 101 positions (past one 96-query block, not a
 * multiple of 16), widths 13 and 208, on 3 threads and on every ISA.
 *
 * Each op's float backward, fed dy = r for a random r, is the gradient of L = Σ r·y. The
 * reference is the central difference of L computed by a double-precision mirror of the op's
 * forward (h = 1e-5, so its own error is ~1e-9): the float gradient must agree to 2e-5 of the
 * largest gradient of the tensor (float rounding is ~1e-6; a wrong term, scale or index is off
 * by orders more). Coordinates are sampled, every one of a small tensor.
 */
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "train/attention.h"
#include "train/ops.h"

#define H_FD 1e-5
#define TOL 2e-5

static uint64_t g_rng = 0x853c49e6748fea9bull;
static double urand(void) { /* [-1, 1) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_rng >> 11) / 4503599627370496.0 - 1.0;
}

static float *rnd(size_t n, double scale) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = (float)(urand() * scale);
    return p;
}

static double *to_d(const float *f, size_t n) {
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = f[i];
    return d;
}

static kr_pool *g_pool;

/* The mirror forward: L(x) with every input in double, one of them perturbed by the caller. */
typedef double (*loss_fn)(void *ctx);

/* Compares the float gradient g of tensor x (n values, its double copy xd used by the loss)
 * with central differences at `samples` coordinates (all when n <= samples). */
static void check(const char *what, double *xd, size_t n, const float *g, loss_fn L, void *ctx,
                  int samples) {
    double gmax = 0.0;
    for (size_t i = 0; i < n; i++) gmax = fmax(gmax, fabs(g[i]));
    assert_true(gmax > 0.0);
    double worst = 0.0;
    for (int s = 0; s < (n <= (size_t)samples ? (int)n : samples); s++) {
        size_t i =
            n <= (size_t)samples ? (size_t)s : (size_t)((urand() + 1.0) / 2.0 * (double)n) % n;
        double keep = xd[i];
        xd[i] = keep + H_FD;
        double up = L(ctx);
        xd[i] = keep - H_FD;
        double down = L(ctx);
        xd[i] = keep;
        double num = (up - down) / (2 * H_FD);
        double e = fabs(num - (double)g[i]) / gmax;
        worst = fmax(worst, e);
        if (!(e <= TOL))
            fail_msg("%s[%zu] on %s: backward %.9g, finite difference %.9g (%.3g of max %.3g)",
                     what, i, kr_isa_name(kr_isa_active()), (double)g[i], num, e, gmax);
    }
    print_message("  %-22s %-6s max error %.2e of max |grad|\n", what, kr_isa_name(kr_isa_active()),
                  worst);
}

/* ---------------------------------------------------------------- Linear */

typedef struct lin_ctx {
    int M, in, out;
    double *x, *w, *b, *r;
} lin_ctx;

static double lin_loss(void *p) {
    lin_ctx *c = p;
    double L = 0;
    for (int m = 0; m < c->M; m++)
        for (int o = 0; o < c->out; o++) {
            double y = c->b[o];
            for (int k = 0; k < c->in; k++) y += c->x[m * c->in + k] * c->w[o * c->in + k];
            L += c->r[m * c->out + o] * y;
        }
    return L;
}

static void linear_case(void) {
    const int M = 37, in = 52, out = 13;
    float *x = rnd((size_t)M * in, 1), *w = rnd((size_t)out * in, 0.3), *b = rnd(out, 0.3);
    float *r = rnd((size_t)M * out, 1), *y = malloc((size_t)M * out * 4),
          *wt = malloc((size_t)out * in * 4);
    float *gw = calloc((size_t)out * in, 4), *gb = calloc(out, 4), *dx = rnd((size_t)M * in, 1);
    tr_lin l = { .w = w, .b = b, .wt = wt, .gw = gw, .gb = gb, .n_out = out, .n_in = in };
    tr_linear_transpose(&l);
    tr_linear_fwd(g_pool, &l, x, M, y);
    tr_linear_bwd(g_pool, &l, r, x, M, dx, 0);
    lin_ctx c = { M,
                  in,
                  out,
                  to_d(x, (size_t)M * in),
                  to_d(w, (size_t)out * in),
                  to_d(b, out),
                  to_d(r, (size_t)M * out) };
    /* the forward itself against the mirror */
    for (int m = 0; m < M; m++)
        for (int o = 0; o < out; o++) {
            double ref = c.b[o];
            for (int k = 0; k < in; k++) ref += c.x[m * in + k] * c.w[o * in + k];
            assert_true(fabs(ref - y[m * out + o]) < 1e-5);
        }
    check("linear dx", c.x, (size_t)M * in, dx, lin_loss, &c, 60);
    check("linear dW", c.w, (size_t)out * in, gw, lin_loss, &c, 60);
    check("linear db", c.b, out, gb, lin_loss, &c, 60);
    /* accumulate: the input gradient added to what is there, the weights' to theirs */
    float *dx2 = malloc((size_t)M * in * 4), gb1[13];
    memcpy(gb1, gb, sizeof gb1);
    for (int i = 0; i < M * in; i++) dx2[i] = 1.0f;
    tr_linear_bwd(g_pool, &l, r, x, M, dx2, 1);
    for (int i = 0; i < M * in; i++) assert_true(fabsf(dx2[i] - (1.0f + dx[i])) < 1e-5f);
    for (int i = 0; i < out; i++) assert_true(fabsf(gb[i] - 2.0f * gb1[i]) < 1e-5f);
    free(x), free(w), free(b), free(r), free(y), free(wt), free(gw), free(gb), free(dx), free(dx2);
    free(c.x), free(c.w), free(c.b), free(c.r);
}

/* ---------------------------------------------------------------- RMSNorm */

typedef struct norm_ctx {
    int M, d;
    double *x, *w, *r;
} norm_ctx;

static double norm_loss(void *p) {
    norm_ctx *c = p;
    double L = 0;
    for (int m = 0; m < c->M; m++) {
        double ss = 0;
        for (int k = 0; k < c->d; k++) ss += c->x[m * c->d + k] * c->x[m * c->d + k];
        double rs = 1.0 / sqrt(ss / c->d + 1e-5);
        for (int k = 0; k < c->d; k++) L += c->r[m * c->d + k] * c->x[m * c->d + k] * rs * c->w[k];
    }
    return L;
}

static void rmsnorm_case(void) {
    const int M = 19, d = 208;
    float *x = rnd((size_t)M * d, 1.5), *w = rnd(d, 1), *r = rnd((size_t)M * d, 1);
    float *y = malloc((size_t)M * d * 4), *rstd = malloc((size_t)M * 4), *gw = calloc(d, 4);
    float *dx = malloc((size_t)M * d * 4), *y2 = malloc((size_t)M * d * 4);
    tr_rmsnorm_fwd(g_pool, M, d, x, w, y, rstd);
    tr_rmsnorm_apply(g_pool, M, d, x, rstd, w, y2);
    assert_memory_equal(y, y2, (size_t)M * d * 4); /* the saved rstd gives the same bits */
    tr_rmsnorm_bwd(g_pool, M, d, r, x, rstd, w, gw, dx, 0);
    norm_ctx c = { M, d, to_d(x, (size_t)M * d), to_d(w, d), to_d(r, (size_t)M * d) };
    check("rmsnorm dx", c.x, (size_t)M * d, dx, norm_loss, &c, 80);
    check("rmsnorm dw", c.w, d, gw, norm_loss, &c, 80);
    free(x), free(w), free(r), free(y), free(rstd), free(gw), free(dx), free(y2);
    free(c.x), free(c.w), free(c.r);
}

/* ---------------------------------------------------------------- RoPE */

typedef struct rope_ctx {
    const tr_rope *rp;
    int n_seq, T, heads, hd;
    double *x, *r;
} rope_ctx;

static double rope_loss(void *p) {
    rope_ctx *c = p;
    const int half = c->hd / 2, d = c->heads * c->hd;
    double L = 0;
    for (int row = 0; row < c->n_seq * c->T; row++) {
        int t = row % c->T;
        for (int h = 0; h < c->heads; h++)
            for (int i = 0; i < half; i++) {
                size_t at = (size_t)row * d + (size_t)h * c->hd + i;
                double cs = c->rp->cos[t * half + i], sn = c->rp->sin[t * half + i];
                double a = c->x[at], b = c->x[at + half];
                L += c->r[at] * (a * cs - b * sn) + c->r[at + half] * (b * cs + a * sn);
            }
    }
    return L;
}

static void rope_case(void) {
    const int n_seq = 2, T = 23, heads = 3, hd = 52, d = heads * hd;
    float inv[26];
    for (int i = 0; i < hd / 2; i++) inv[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)hd);
    tr_rope rp;
    rp.cos = malloc((size_t)T * hd / 2 * 4);
    rp.sin = malloc((size_t)T * hd / 2 * 4);
    tr_rope_init(&rp, T, hd, inv);
    float *x = rnd((size_t)n_seq * T * d, 1), *r = rnd((size_t)n_seq * T * d, 1);
    float *dx = malloc((size_t)n_seq * T * d * 4);
    memcpy(dx, r, (size_t)n_seq * T * d * 4);
    tr_rope_bwd(g_pool, &rp, n_seq, T, heads, dx, d);
    rope_ctx c = {
        &rp, n_seq, T, heads, hd, to_d(x, (size_t)n_seq * T * d), to_d(r, (size_t)n_seq * T * d)
    };
    check("rope dx", c.x, (size_t)n_seq * T * d, dx, rope_loss, &c, 100);
    /* backward ∘ forward = identity (a rotation) */
    float *y = malloc((size_t)n_seq * T * d * 4);
    memcpy(y, x, (size_t)n_seq * T * d * 4);
    tr_rope_fwd(g_pool, &rp, n_seq, T, heads, y, d);
    tr_rope_bwd(g_pool, &rp, n_seq, T, heads, y, d);
    assert_true(kr_test_max_abs_diff(x, y, (size_t)n_seq * T * d) < 1e-5);
    free(rp.cos), free(rp.sin), free(x), free(r), free(dx), free(y), free(c.x), free(c.r);
}

/* ---------------------------------------------------------------- SwiGLU */

typedef struct swi_ctx {
    size_t n;
    double *a, *b, *r;
} swi_ctx;

static double swi_loss(void *p) {
    swi_ctx *c = p;
    double L = 0;
    for (size_t i = 0; i < c->n; i++) L += c->r[i] * c->a[i] / (1 + exp(-c->a[i])) * c->b[i];
    return L;
}

static void swiglu_case(void) {
    const size_t n = 256 * 3 + 77; /* whole chunks over the threads, then a tail */
    float *a = rnd(n, 4), *b = rnd(n, 2), *r = rnd(n, 1), *g = malloc(n * 4);
    tr_swiglu_fwd(g_pool, n, a, b, g);
    swi_ctx c = { n, to_d(a, n), to_d(b, n), to_d(r, n) };
    for (size_t i = 0; i < n; i++)
        assert_true(fabs(g[i] - c.a[i] / (1 + exp(-c.a[i])) * c.b[i]) < 1e-5);
    float *g2 = malloc(n * 4);
    tr_swiglu_bwd(g_pool, n, r, a, b, g2); /* a, b become their gradients, g2 the activation */
    for (size_t i = 0; i < n; i++) assert_true(fabsf(g2[i] - g[i]) <= 1e-6f * (1 + fabsf(g[i])));
    free(g2);
    check("swiglu dh1", c.a, n, a, swi_loss, &c, 120);
    check("swiglu dh3", c.b, n, b, swi_loss, &c, 120);
    free(a), free(b), free(r), free(g), free(c.a), free(c.b), free(c.r);
}

/* ---------------------------------------------------------------- attention */

typedef struct attn_ctx {
    tr_attn_shape s;
    const tr_dropout *drop;
    double *q, *k, *v, *r;
} attn_ctx;

static double attn_loss(void *p) {
    attn_ctx *c = p;
    const tr_attn_shape *s = &c->s;
    const int T = s->T, hd = s->head_dim;
    double scale = (double)(1.0f / sqrtf((float)hd)), L = 0;
    double *sc = malloc((size_t)T * sizeof *sc);
    float keep_scale = c->drop ? 1.0f / (1.0f - c->drop->p) : 1.0f;
    uint32_t th = c->drop ? tr_dropout_threshold(c->drop->p) : 0;
    for (int b = 0; b < s->n_seq; b++)
        for (int h = 0; h < s->n_heads; h++)
            for (int i = 0; i < T; i++) {
                size_t qi = ((size_t)b * T + i) * s->ld + (size_t)h * hd;
                int nk = s->causal ? i + 1 : T;
                double mx = -1e300, sum = 0;
                for (int j = 0; j < nk; j++) {
                    size_t kj = ((size_t)b * T + j) * s->ld + (size_t)h * hd;
                    double dot = 0;
                    for (int e = 0; e < hd; e++) dot += c->q[qi + e] * c->k[kj + e];
                    sc[j] = dot * scale;
                    mx = fmax(mx, sc[j]);
                }
                for (int j = 0; j < nk; j++) sum += (sc[j] = exp(sc[j] - mx));
                uint64_t key =
                    c->drop ? tr_dropout_row_key(c->drop, ((uint64_t)b * s->n_heads + h) * T + i)
                            : 0;
                for (int j = 0; j < nk; j++) {
                    double pj = sc[j] / sum;
                    if (c->drop) pj = tr_dropout_keep(key, th, (uint64_t)j) ? pj * keep_scale : 0.0;
                    size_t vj = ((size_t)b * T + j) * s->ld + (size_t)h * hd;
                    for (int e = 0; e < hd; e++) L += c->r[qi + e] * pj * c->v[vj + e];
                }
            }
    free(sc);
    return L;
}

static void attention_case(int causal, const tr_dropout *drop) {
    const int n_seq = 2, T = 101, heads = 4, hd = 52, d = heads * hd;
    const size_t n = (size_t)n_seq * T * d;
    float *q = rnd(n, 0.6), *k = rnd(n, 0.6), *v = rnd(n, 1), *r = rnd(n, 1);
    float *o = malloc(n * 4), *dq = malloc(n * 4), *dk = malloc(n * 4), *dv = malloc(n * 4);
    float *scr = malloc((size_t)kr_pool_size(g_pool) * tr_attn_scratch_floats(T, hd) * 4);
    attn_ctx c = {
        { n_seq, T, heads, hd, d, causal }, drop, to_d(q, n), to_d(k, n), to_d(v, n), to_d(r, n)
    };
    tr_attention_fwd(g_pool, &c.s, q, k, v, o, drop, scr);
    tr_attention_bwd(g_pool, &c.s, q, k, v, o, r, dq, dk, dv, drop, scr);
    char name[64];
    const char *kind = drop ? "dropout" : causal ? "causal" : "full";
    snprintf(name, sizeof name, "attention %s dq", kind);
    check(name, c.q, n, dq, attn_loss, &c, 20);
    snprintf(name, sizeof name, "attention %s dk", kind);
    check(name, c.k, n, dk, attn_loss, &c, 20);
    snprintf(name, sizeof name, "attention %s dv", kind);
    check(name, c.v, n, dv, attn_loss, &c, 20);
    free(q), free(k), free(v), free(r), free(o), free(dq), free(dk), free(dv), free(scr);
    free(c.q), free(c.k), free(c.v), free(c.r);
}

/* ---------------------------------------------------------------- cross-entropy */

typedef struct ce_ctx {
    int M, V;
    double *x;
    const int32_t *t;
} ce_ctx;

static double ce_loss(void *p) {
    ce_ctx *c = p;
    double L = 0;
    for (int m = 0; m < c->M; m++) {
        double mx = -1e300, s = 0;
        for (int j = 0; j < c->V; j++) mx = fmax(mx, c->x[m * c->V + j]);
        for (int j = 0; j < c->V; j++) s += exp(c->x[m * c->V + j] - mx);
        L += log(s) + mx - c->x[m * c->V + c->t[m]];
    }
    return L;
}

static void xent_case(void) {
    const int M = 11, V = 37;
    float *x = rnd((size_t)M * V, 6);
    int32_t t[11];
    for (int m = 0; m < M; m++) t[m] = (m * 7) % V;
    x[3 * V + t[3]] = -60.0f; /* a target far below the rest: p_t underflows in float */
    ce_ctx c = { M, V, to_d(x, (size_t)M * V), t };
    double rows[11];
    tr_softmax_xent(g_pool, M, V, x, t, rows);
    double sum = 0;
    for (int m = 0; m < M; m++) sum += rows[m];
    assert_true(fabs(sum - ce_loss(&c)) < 1e-5 * fabs(sum));
    tr_xent_grad(g_pool, M, V, x, t, 1.0f);
    check("cross-entropy dlogits", c.x, (size_t)M * V, x, ce_loss, &c, 400);
    free(x), free(c.x);
}

/* ---------------------------------------------------------------- embedding, dropout */

static void embedding_case(void) {
    const int M = 41, d = 52, rows = 9;
    int32_t ids[41 * 3];
    for (int m = 0; m < M; m++) ids[m * 3] = (m * 5) % rows; /* strided ids, repeats */
    float *src = rnd((size_t)M * 60, 1), *g = calloc((size_t)rows * d, 4);
    tr_embedding_bwd(g_pool, M, d, ids, 3, src, 60, 2.5f, g);
    for (int i = 0; i < rows; i++)
        for (int c = 0; c < d; c++) {
            double ref = 0;
            for (int m = 0; m < M; m++)
                if (ids[m * 3] == i) ref += 2.5 * src[m * 60 + c];
            assert_true(fabs(ref - g[i * d + c]) < 1e-5);
        }
    free(src), free(g);
}

/* Dropout is linear: its backward is itself (the same mask from the same stream). */
static void dropout_linear_case(void) {
    const int M = 33, n = 45;
    tr_dropout dr = { 0.3f, 99, 7 };
    float *x = rnd((size_t)M * n, 1), *y = malloc((size_t)M * n * 4);
    memcpy(y, x, (size_t)M * n * 4);
    tr_dropout_apply(g_pool, &dr, M, n, y, n, 5);
    uint32_t th = tr_dropout_threshold(0.3f);
    for (int m = 0; m < M; m++) {
        uint64_t key = tr_dropout_row_key(&dr, 5 + (uint64_t)m);
        for (int c = 0; c < n; c++) {
            float want =
                tr_dropout_keep(key, th, (uint64_t)c) ? x[m * n + c] * (1.0f / 0.7f) : 0.0f;
            assert_true(y[m * n + c] == want);
        }
    }
    free(x), free(y);
}

/* ---------------------------------------------------------------- runner */

static void each_isa(void (*fn)(void)) {
    kr_isa best = kr_isa_best();
    for (int isa = 0; isa <= (int)best; isa++) {
        if (!kr_isa_supported((kr_isa)isa)) continue;
        kr_isa_set((kr_isa)isa);
        fn();
    }
    kr_isa_set(best);
}

static void attention_all(void) {
    tr_dropout dr = { 0.25f, 1234, 77 };
    attention_case(1, NULL);
    attention_case(0, NULL);
    attention_case(1, &dr);
}

static void test_linear(void **s) { (void)s, each_isa(linear_case); }
static void test_rmsnorm(void **s) { (void)s, each_isa(rmsnorm_case); }
static void test_rope(void **s) { (void)s, each_isa(rope_case); }
static void test_swiglu(void **s) { (void)s, each_isa(swiglu_case); }
static void test_attention(void **s) { (void)s, each_isa(attention_all); }
static void test_xent(void **s) { (void)s, each_isa(xent_case); }
static void test_embedding(void **s) { (void)s, embedding_case(); }
static void test_dropout_linear(void **s) { (void)s, dropout_linear_case(); }

static int setup(void **s) {
    (void)s;
    kr_error err = { 0 };
    return kr_pool_create(3, &g_pool, &err) == KR_OK ? 0 : -1;
}

static int teardown(void **s) {
    (void)s;
    kr_pool_free(g_pool);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),    cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),      cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_attention), cmocka_unit_test(test_xent),
        cmocka_unit_test(test_embedding), cmocka_unit_test(test_dropout_linear),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
