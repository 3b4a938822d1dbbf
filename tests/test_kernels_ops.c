/* Tests for attention and the row-wise kernels: every supported variant against the scalar
 * reference, the scalar reference against double precision, and the invariances the engine
 * relies on (span splitting, row batching) checked bit for bit. */
#include "test_support.h"

#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static kr_isa g_variants[KR_ISA_COUNT];
static int g_n_variants;

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 40) / (double)(1ull << 23) - 1.0);
}
static float *rand_buf(size_t n, float scale) {
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = scale * frand();
    return p;
}
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* |got - want| <= rel·|want| + abs, with a readable failure. */
static void expect_close(const char *what, kr_isa isa, int i, double got, double want, double rel,
                         double abs_tol) {
    if (!(fabs(got - want) <= rel * fabs(want) + abs_tol))
        fail_msg("%s (%s) [%d]: got %.9g want %.9g", what, kr_isa_name(isa), i, got, want);
}

/* ---- attention */

enum { MAX_KEYS = 300, MAX_HD = 208 };

static void attend_double(const float *q, int hd, float scale, const float *k, const float *v,
                          int n, int stride, double *out) {
    double s[MAX_KEYS], mx = -INFINITY, sum = 0.0;
    for (int j = 0; j < n; j++) {
        double d = 0.0;
        for (int i = 0; i < hd; i++) d += (double)q[i] * k[(size_t)j * stride + i];
        s[j] = d * scale;
        if (s[j] > mx) mx = s[j];
    }
    for (int j = 0; j < n; j++) sum += (s[j] = exp(s[j] - mx));
    for (int i = 0; i < hd; i++) {
        double o = 0.0;
        for (int j = 0; j < n; j++) o += s[j] * v[(size_t)j * stride + i];
        out[i] = o / sum;
    }
}

static void test_attention_vs_reference(void **state) {
    (void)state;
    static const int hds[] = { 8, 52, 64, 128, 208 };
    static const int ns[] = { 1, 7, 37, 300 };
    float scratch[MAX_KEYS], ref[MAX_HD], got[MAX_HD];
    double dref[MAX_HD];
    for (int hi = 0; hi < COUNT(hds); hi++)
        for (int ni = 0; ni < COUNT(ns); ni++) {
            int hd = hds[hi], n = ns[ni], stride = 3 * hd + 5;
            float scale = 1.0f / sqrtf((float)hd);
            /* Larger q spreads the scores over a wide range (sharp and flat softmax). */
            float *q = rand_buf((size_t)hd, 4.0f), *k = rand_buf((size_t)n * stride, 1.0f);
            float *v = rand_buf((size_t)n * stride, 1.0f);
            kr_kv_span span = { k, v, n, stride };
            kr_attend_f32_scalar(q, hd, scale, &span, 1, scratch, ref);
            attend_double(q, hd, scale, k, v, n, stride, dref);
            for (int i = 0; i < hd; i++)
                expect_close("attend scalar vs double", KR_ISA_SCALAR, i, ref[i], dref[i], 1e-5,
                             1e-5);
            for (int vi = 0; vi < g_n_variants; vi++) {
                kr_isa_set(g_variants[vi]);
                kr_attend_f32(q, hd, scale, &span, 1, scratch, got);
                for (int i = 0; i < hd; i++)
                    expect_close("attend vs scalar", g_variants[vi], i, got[i], ref[i], 2e-6, 2e-6);
            }
            free(q);
            free(k);
            free(v);
        }
}

/* Cuts n keys into spans of `piece` keys (the last one shorter). */
static int make_spans(const float *k, const float *v, int n, int stride, int piece,
                      kr_kv_span *out) {
    int ns = 0;
    for (int j = 0; j < n; j += piece) {
        out[ns].k = k + (size_t)j * stride;
        out[ns].v = v + (size_t)j * stride;
        out[ns].n = n - j < piece ? n - j : piece;
        out[ns].stride = stride;
        ns++;
    }
    return ns;
}

static void test_attention_span_split_bit_exact(void **state) {
    (void)state;
    static const int hds[] = { 8, 52, 208 };
    static const int pieces[] = { 1, 5, 16, 17, 3 };
    kr_kv_span spans[MAX_KEYS];
    float scratch[MAX_KEYS], whole[MAX_HD], split[MAX_HD];
    for (int hi = 0; hi < COUNT(hds); hi++) {
        int hd = hds[hi], n = 100, stride = 2 * hd + 3;
        float *q = rand_buf((size_t)hd, 2.0f), *k = rand_buf((size_t)n * stride, 1.0f);
        float *v = rand_buf((size_t)n * stride, 1.0f);
        for (int vi = 0; vi < g_n_variants; vi++) {
            kr_isa_set(g_variants[vi]);
            kr_kv_span one = { k, v, n, stride };
            kr_attend_f32(q, hd, 0.125f, &one, 1, scratch, whole);
            for (int pi = 0; pi < COUNT(pieces); pi++) {
                int ns = make_spans(k, v, n, stride, pieces[pi], spans);
                kr_attend_f32(q, hd, 0.125f, spans, ns, scratch, split);
                if (memcmp(whole, split, (size_t)hd * sizeof *whole) != 0)
                    fail_msg("%s head_dim=%d: spans of %d differ from one span",
                             kr_isa_name(g_variants[vi]), hd, pieces[pi]);
            }
            /* Empty spans in between change nothing either. */
            kr_kv_span gaps[3] = { { k, v, 40, stride },
                                   { k, v, 0, stride },
                                   { k + 40 * stride, v + 40 * stride, 60, stride } };
            kr_attend_f32(q, hd, 0.125f, gaps, 3, scratch, split);
            assert_memory_equal(whole, split, (size_t)hd * sizeof *whole);
        }
        free(q);
        free(k);
        free(v);
    }
}

/* ---- row-wise ops */

static void test_rmsnorm(void **state) {
    (void)state;
    static const int ds[] = { 8, 52, 256, 832, 1003 };
    const int rows = 5;
    for (int di = 0; di < COUNT(ds); di++) {
        int d = ds[di], ld = d + 3;
        float *x = rand_buf((size_t)rows * ld, 3.0f), *w = rand_buf((size_t)d, 1.0f);
        float *ref = malloc((size_t)rows * ld * sizeof *ref),
              *got = malloc((size_t)rows * ld * sizeof *got);
        float *one = malloc((size_t)d * sizeof *one);
        assert_true(ref && got && one);
        kr_rmsnorm_f32_scalar(rows, d, x, ld, w, 1e-5f, ref, ld);
        for (int r = 0; r < rows; r++) {
            double ss = 0.0;
            for (int i = 0; i < d; i++) ss += (double)x[r * ld + i] * x[r * ld + i];
            double inv = 1.0 / sqrt(ss / d + 1e-5);
            for (int i = 0; i < d; i++)
                expect_close("rmsnorm scalar vs double", KR_ISA_SCALAR, i, ref[r * ld + i],
                             x[r * ld + i] * inv * w[i], 1e-5, 1e-7);
        }
        for (int vi = 0; vi < g_n_variants; vi++) {
            kr_isa_set(g_variants[vi]);
            kr_rmsnorm_f32(rows, d, x, ld, w, 1e-5f, got, ld);
            for (int r = 0; r < rows; r++)
                for (int i = 0; i < d; i++)
                    expect_close("rmsnorm vs scalar", g_variants[vi], i, got[r * ld + i],
                                 ref[r * ld + i], 2e-6, 1e-7);
            for (int r = 0; r < rows; r++) { /* a row alone == the row in a batch */
                kr_rmsnorm_f32(1, d, x + (size_t)r * ld, ld, w, 1e-5f, one, d);
                assert_memory_equal(one, got + (size_t)r * ld, (size_t)d * sizeof *one);
            }
        }
        free(x);
        free(w);
        free(ref);
        free(got);
        free(one);
    }
}

static void test_rope(void **state) {
    (void)state;
    static const int hds[] = { 52, 8, 128 };
    static const int pos0s[] = { 0, 397, 4000 };
    const int rows = 7, heads = 3;
    for (int hi = 0; hi < COUNT(hds); hi++)
        for (int pi = 0; pi < COUNT(pos0s); pi++) {
            int hd = hds[hi], half = hd / 2, ld = heads * hd + 4, pos0 = pos0s[pi];
            float inv_freq[64];
            for (int i = 0; i < half; i++)
                inv_freq[i] = powf(10000.0f, -2.0f * (float)i / (float)hd);
            float *x = rand_buf((size_t)rows * ld, 2.0f);
            float *ref = malloc((size_t)rows * ld * sizeof *ref),
                  *got = malloc((size_t)rows * ld * sizeof *got);
            assert_true(ref && got);
            memcpy(ref, x, (size_t)rows * ld * sizeof *x);
            kr_rope_f32_scalar(rows, heads, hd, ref, ld, pos0, inv_freq);
            for (int r = 0; r < rows; r++)
                for (int h = 0; h < heads; h++)
                    for (int i = 0; i < half; i++) {
                        float th = (float)(pos0 + r) * inv_freq[i];
                        const float *xh = x + (size_t)r * ld + h * hd;
                        double a = xh[i], b = xh[i + half], c = cos((double)th),
                               s = sin((double)th);
                        double tol = 2e-6 * (fabs(a) + fabs(b));
                        expect_close("rope lo", KR_ISA_SCALAR, i, ref[r * ld + h * hd + i],
                                     a * c - b * s, 0.0, tol);
                        expect_close("rope hi", KR_ISA_SCALAR, i, ref[r * ld + h * hd + i + half],
                                     b * c + a * s, 0.0, tol);
                    }
            for (int vi = 0; vi < g_n_variants; vi++) {
                kr_isa_set(g_variants[vi]);
                memcpy(got, x, (size_t)rows * ld * sizeof *x);
                kr_rope_f32(rows, heads, hd, got, ld, pos0, inv_freq);
                /* Documented as bit-identical on every ISA (libm cos/sin, no FMA). */
                assert_memory_equal(got, ref, (size_t)rows * ld * sizeof *got);
                memcpy(got, x, (size_t)rows * ld * sizeof *x);
                for (int r = 0; r < rows; r++)
                    kr_rope_f32(1, heads, hd, got + (size_t)r * ld, ld, pos0 + r, inv_freq);
                assert_memory_equal(got, ref, (size_t)rows * ld * sizeof *got);
            }
            free(x);
            free(ref);
            free(got);
        }
}

static void test_silu_mul(void **state) {
    (void)state;
    static const int ns[] = { 1, 15, 16, 17, 1031 };
    for (int ni = 0; ni < COUNT(ns); ni++) {
        int n = ns[ni];
        float *a = rand_buf((size_t)n, 20.0f), *b = rand_buf((size_t)n, 2.0f);
        if (n > 4) {
            a[0] = -100.0f;
            a[1] = 100.0f;
            a[2] = -87.5f;
            a[3] = 0.0f;
        }
        float *ref = malloc((size_t)n * sizeof *ref), *got = malloc((size_t)n * sizeof *got);
        assert_true(ref && got);
        kr_silu_mul_f32_scalar(n, a, b, ref);
        for (int i = 0; i < n; i++)
            expect_close("silu scalar vs double", KR_ISA_SCALAR, i, ref[i],
                         a[i] / (1.0 + exp(-(double)a[i])) * b[i], 1e-6, 1e-37);
        for (int vi = 0; vi < g_n_variants; vi++) {
            kr_isa_set(g_variants[vi]);
            kr_silu_mul_f32(n, a, b, got);
            for (int i = 0; i < n; i++)
                expect_close("silu vs scalar", g_variants[vi], i, got[i], ref[i], 2e-6, 1e-37);
            memcpy(got, a, (size_t)n * sizeof *a); /* out aliases a */
            kr_silu_mul_f32(n, got, b, got);
            for (int i = 0; i < n; i++)
                expect_close("silu in place", g_variants[vi], i, got[i], ref[i], 2e-6, 1e-37);
        }
        free(a);
        free(b);
        free(ref);
        free(got);
    }
}

static void test_add(void **state) {
    (void)state;
    static const int ns[] = { 1, 7, 16, 33, 1031 };
    for (int ni = 0; ni < COUNT(ns); ni++) {
        int n = ns[ni];
        float *x = rand_buf((size_t)n + 1, 1.0f), *y = rand_buf((size_t)n + 1, 1.0f);
        float *got = malloc(((size_t)n + 1) * sizeof *got);
        assert_non_null(got);
        for (int vi = 0; vi < g_n_variants; vi++) {
            kr_isa_set(g_variants[vi]);
            memcpy(got, y, ((size_t)n + 1) * sizeof *y);
            kr_add_f32(n, x, got);
            for (int i = 0; i < n; i++) assert_true(got[i] == y[i] + x[i]);
            assert_true(got[n] == y[n]); /* nothing past n */
        }
        free(x);
        free(y);
        free(got);
    }
}

static void test_softmax(void **state) {
    (void)state;
    static const int ns[] = { 1, 7, 16, 17, 1024, 1031 };
    for (int ni = 0; ni < COUNT(ns); ni++) {
        int n = ns[ni];
        float *x = rand_buf((size_t)n, 30.0f);
        float *ref = malloc((size_t)n * sizeof *ref), *got = malloc((size_t)n * sizeof *got);
        assert_true(ref && got);
        kr_softmax_f32_scalar(n, x, ref);
        double mx = -INFINITY, sum = 0.0;
        for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
        for (int i = 0; i < n; i++) sum += exp((double)x[i] - mx);
        for (int i = 0; i < n; i++)
            expect_close("softmax scalar vs double", KR_ISA_SCALAR, i, ref[i],
                         exp((double)x[i] - mx) / sum, 1e-5, 1e-37);
        for (int vi = 0; vi < g_n_variants; vi++) {
            kr_isa_set(g_variants[vi]);
            kr_softmax_f32(n, x, got);
            for (int i = 0; i < n; i++)
                expect_close("softmax vs scalar", g_variants[vi], i, got[i], ref[i], 2e-6, 1e-37);
            memcpy(got, x, (size_t)n * sizeof *x); /* y aliases x */
            kr_softmax_f32(n, got, got);
            for (int i = 0; i < n; i++)
                expect_close("softmax in place", g_variants[vi], i, got[i], ref[i], 2e-6, 1e-37);
        }
        free(x);
        free(ref);
        free(got);
    }
}

/* Masked logits (-inf, as top-k sampling produces) get exactly zero probability. */
static void test_softmax_masked(void **state) {
    (void)state;
    float x[37], y[37];
    for (int i = 0; i < 37; i++) x[i] = i % 3 ? -INFINITY : 0.1f * (float)i;
    for (int vi = 0; vi < g_n_variants; vi++) {
        kr_isa_set(g_variants[vi]);
        kr_softmax_f32(37, x, y);
        double sum = 0.0;
        for (int i = 0; i < 37; i++) {
            if (i % 3)
                assert_true(y[i] == 0.0f);
            else
                assert_true(y[i] > 0.0f);
            sum += y[i];
        }
        assert_true(fabs(sum - 1.0) < 1e-5);
    }
}

/* ---- writes stay inside the output (the partial stores of the vector tails) */

static const float k_guard = -7777.25f;

/* buf[from .. to) still holds the guard. */
static void expect_guard(const char *what, kr_isa isa, int n, const float *buf, size_t from,
                         size_t to) {
    for (size_t i = from; i < to; i++)
        if (buf[i] != k_guard)
            fail_msg("%s (%s) n=%d: wrote %g at %zu, past its output", what, kr_isa_name(isa), n,
                     buf[i], i);
}

/* Every length 1..40 and the d/head_dim the models use, on every variant: the last vector of a
 * row is partial (1..7 or 1..15 floats) and must write exactly its floats, neither fewer (the
 * results are compared elsewhere) nor one more. Rows are laid out with a gap of guards. */
static void test_no_write_past_the_output(void **state) {
    (void)state;
    enum { GAP = 19, MAXN = 208 };
    float a[MAXN], b[MAXN], out[2 * (MAXN + GAP)], w[MAXN], scratch[MAX_KEYS];
    for (int i = 0; i < MAXN; i++) a[i] = frand(), b[i] = frand(), w[i] = frand();
    float *k = rand_buf((size_t)64 * MAXN, 1.0f), *v = rand_buf((size_t)64 * MAXN, 1.0f);
    for (int vi = 0; vi < g_n_variants; vi++) {
        kr_isa isa = g_variants[vi];
        kr_isa_set(isa);
        for (int n = 1; n <= MAXN; n = n < 40 ? n + 1 : n == 40 ? 52 : n == 52 ? 64 : n + 72) {
            const size_t all = (size_t)COUNT(out);
            for (size_t i = 0; i < all; i++) out[i] = k_guard;
            kr_silu_mul_f32(n, a, b, out);
            expect_guard("silu_mul", isa, n, out, (size_t)n, all);

            for (size_t i = 0; i < all; i++) out[i] = k_guard;
            kr_softmax_f32(n, a, out);
            expect_guard("softmax", isa, n, out, (size_t)n, all);

            for (size_t i = 0; i < all; i++) out[i] = k_guard;
            kr_rmsnorm_f32(2, n, a, 0, w, 1e-5f, out, n + GAP);
            expect_guard("rmsnorm row 0", isa, n, out, (size_t)n, (size_t)n + GAP);
            expect_guard("rmsnorm row 1", isa, n, out, (size_t)2 * n + GAP, all);

            /* RoPE rewrites head_dim floats per head in place: two heads, the guards after. */
            if (n % 2 == 0 && n / 2 <= 64) {
                float inv_freq[64];
                for (int i = 0; i < n / 2; i++) inv_freq[i] = 1.0f / (float)(i + 1);
                for (size_t i = 0; i < all; i++) out[i] = k_guard;
                memcpy(out, a, (size_t)n * sizeof *a);
                memcpy(out + n, a, (size_t)n * sizeof *a);
                kr_rope_f32(1, 2, n, out, 2 * n, 5, inv_freq);
                expect_guard("rope", isa, n, out, (size_t)2 * n, all);
            }

            /* Attention output: head_dim floats, 1..40 keys (partial score vectors too). */
            int nk = n <= 40 ? n : 37;
            kr_kv_span span = { k, v, nk, n };
            for (size_t i = 0; i < all; i++) out[i] = k_guard;
            kr_attend_f32(a, n, 0.125f, &span, 1, scratch, out);
            expect_guard("attend", isa, n, out, (size_t)n, all);
            const float *qs[2] = { a, b };
            float *outs[2] = { out, out + n + GAP };
            for (size_t i = 0; i < all; i++) out[i] = k_guard;
            kr_attend_multi_f32(2, qs, n, 0.125f, &span, 1, NULL, NULL, scratch, nk, outs);
            expect_guard("attend_multi row 0", isa, n, out, (size_t)n, (size_t)n + GAP);
            expect_guard("attend_multi row 1", isa, n, out, (size_t)2 * n + GAP, all);
        }
    }
    free(k);
    free(v);
}

int main(void) {
    for (int i = 0; i < KR_ISA_COUNT; i++)
        if (kr_isa_supported((kr_isa)i)) g_variants[g_n_variants++] = (kr_isa)i;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_vs_reference),
        cmocka_unit_test(test_attention_span_split_bit_exact),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_silu_mul),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_softmax_masked),
        cmocka_unit_test(test_no_write_past_the_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
