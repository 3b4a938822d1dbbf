/* Tests for model/sampling: kr_sampler_filter's top-p set equals an independent reference
 * (every probability sorted by (value desc, index asc) with qsort, the cumulative sum over that
 * order, the cut where it first exceeds top_p), on flat, peaked and tied logits; and
 * kr_sampler_draw returns the token the reference's inverse CDF picks. The golden test checks
 * the masks against the official code on four vectors; this one covers the shapes that make
 * the filter sort many tokens, and ties, where only a stable order keeps the cut the same. */
#include "test_support.h"

#include "base/workspace.h"
#include "model/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V = 1024 };

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static double urand01(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}

typedef struct ref_item {
    float v;
    int i;
} ref_item;

static int ref_cmp(const void *a, const void *b) {
    const ref_item *x = a, *y = b;
    if (x->v > y->v) return -1;
    if (x->v < y->v) return 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* The top-p keep mask as defined (sampling.h): softmax of logits / T, sorted, position j kept
 * while the sum of the probabilities before it is <= top_p. */
static int ref_top_p(const float *logits, float temperature, float top_p, unsigned char *keep) {
    float scaled[V], probs[V], mx, sum = 0.0f;
    for (int i = 0; i < V; i++) scaled[i] = logits[i] / temperature;
    mx = scaled[0];
    for (int i = 1; i < V; i++)
        if (scaled[i] > mx) mx = scaled[i];
    for (int i = 0; i < V; i++) {
        probs[i] = expf(scaled[i] - mx);
        sum += probs[i];
    }
    static ref_item it[V];
    for (int i = 0; i < V; i++) it[i] = (ref_item){ probs[i], i };
    qsort(it, V, sizeof it[0], ref_cmp);
    float cum = 0.0f;
    int cut = V;
    for (int j = 0; j < V; j++) {
        if (j > 0 && cum > top_p) {
            cut = j;
            break;
        }
        cum += it[j].v / sum;
    }
    memset(keep, 0, V);
    for (int j = 0; j < cut; j++) keep[it[j].i] = 1;
    return cut;
}

/* Logits of one of four shapes: flat (random small weights: top-p keeps most tokens), peaked,
 * a few values repeated (ties at the cut), and exactly equal runs. */
static void make_logits(int shape, float *l) {
    for (int i = 0; i < V; i++) {
        double u = urand01();
        switch (shape) {
        case 0: l[i] = (float)(0.3 * (u - 0.5)); break;
        case 1: l[i] = (float)(8.0 * u * u * u); break;
        case 2: l[i] = (float)((int)(u * 6.0)) * 0.25f; break;
        default: l[i] = i % 7 == 0 ? 1.0f : (float)(u * 1e-3); break;
        }
    }
}

static void test_top_p_matches_reference(void **state) {
    (void)state;
    kr_exec *ex = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_exec_create(1, 1 << 20, &ex, &err), KR_OK);
    kr_sampler_scratch sc;
    assert_int_equal(kr_sampler_scratch_init(&sc, V, ex->arena, &err), KR_OK);
    static const float top_ps[] = { 0.05f, 0.5f, 0.9f, 0.99f, 0.999999f };
    static const float temps[] = { 0.5f, 1.0f, 1.7f };
    float logits[V];
    unsigned char want[V];
    for (int round = 0; round < 40; round++)
        for (int shape = 0; shape < 4; shape++) {
            make_logits(shape, logits);
            for (int a = 0; a < (int)(sizeof top_ps / sizeof top_ps[0]); a++)
                for (int t = 0; t < (int)(sizeof temps / sizeof temps[0]); t++) {
                    kr_sampler_params p = { temps[t], 0, top_ps[a] };
                    int n_ref = ref_top_p(logits, p.temperature, p.top_p, want);
                    int n = kr_sampler_filter(logits, &p, &sc);
                    if (n != n_ref || memcmp(sc.keep, want, V) != 0)
                        fail_msg("round %d shape %d top_p %g T %g: kept %d, reference %d", round,
                                 shape, (double)p.top_p, (double)p.temperature, n, n_ref);
                    /* The draw walks the kept tokens in index order over their renormalised
                     * probabilities: for u in [0, 1) it lands on a kept token, and u = 0 on the
                     * first kept one. */
                    int first = 0;
                    while (!want[first]) first++;
                    assert_int_equal(kr_sampler_draw(logits, &p, 0.0, &sc), first);
                    int tok = kr_sampler_draw(logits, &p, urand01(), &sc);
                    assert_true(tok >= 0 && tok < V && want[tok]);
                }
        }
    kr_exec_free(ex);
}

/* A temperature so small that logits / T overflows float (~1e-38 passes every "> 0" check)
 * samples greedily: a token of the top logit (tied ones share), whatever u, top_k and top_p. Before, inf - inf made the
 * probabilities NaN and the draw returned the last token (1023 in every path). */
static void test_tiny_temperature_is_greedy(void **state) {
    (void)state;
    kr_exec *ex = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_exec_create(1, 1 << 20, &ex, &err), KR_OK);
    kr_sampler_scratch sc;
    assert_int_equal(kr_sampler_scratch_init(&sc, V, ex->arena, &err), KR_OK);
    float logits[V];
    for (int shape = 0; shape < 4; shape++) {
        make_logits(shape, logits);
        int best = 0;
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        static const float temps[] = { 1e-38f, 1e-45f };
        static const float top_ps[] = { 1.0f, 0.9f };
        static const int top_ks[] = { 0, 5 };
        for (int t = 0; t < 2; t++)
            for (int a = 0; a < 2; a++)
                for (int k = 0; k < 2; k++) {
                    kr_sampler_params p = { temps[t], top_ks[k], top_ps[a] };
                    for (int r = 0; r < 8; r++) {
                        const double u = r == 0 ? 0.0 : r == 7 ? 0.999999 : urand01();
                        const int tok = kr_sampler_draw(logits, &p, u, &sc);
                        if (tok < 0 || tok >= V || logits[tok] != logits[best])
                            fail_msg("shape %d T %g top_k %d top_p %g u %g: token %d, top %d",
                                     shape, (double)p.temperature, p.top_k, (double)p.top_p, u, tok,
                                     best);
                    }
                }
    }
    kr_exec_free(ex);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_top_p_matches_reference),
        cmocka_unit_test(test_tiny_temperature_is_greedy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
