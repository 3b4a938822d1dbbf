/*
 * analyst/fidelity_stats against exact reference values.
 *
 * Where the reference values come from (none from SciPy, which is not installed here):
 *   - KS statistic D: the empirical CDFs evaluated at every pooled point with Python Fractions,
 *     straight from the definition (not the merge used by the code).
 *   - KS exact p-values: Python with exact rational arithmetic, by three independent routes
 *     that were checked against each other first —
 *       (a) brute force over all C(m+n, m) orderings of the pooled sample (m, n <= 9),
 *       (b) integer counts of the lattice paths that stay strictly inside |i/m - j/n| < D,
 *           1 - count / C(m+n, n) (used up to 700 x 1000 and 3 x 5000),
 *       (c) for m == n, the Gnedenko–Korolyuk reflection formula
 *           P(D >= h/n) = 2 Σ_{k>=1} (-1)^{k-1} C(2n, n-kh) / C(2n, n).
 *     (a) == (b) for every attainable D at 3x4, 5x5, 6x9 and (b) == (c) for all n <= 8, h <= n.
 *     These are the quantity SciPy's ks_2samp(method='exact') computes.
 *   - Q_KS and the asymptotic p-value: the alternating series with 200 terms in 60-digit
 *     Python Decimal; the 0.10 / 0.05 / 0.01 points are the classical Kolmogorov critical
 *     values 1.2238 / 1.3581 / 1.6276 found in every table.
 *   - KL divergence: log-softmax and the sum in 60-digit Python Decimal on the same float32
 *     logits (the perturbed ones rounded to float32 as the C float addition rounds them).
 *   - AUC, KS separation, Spearman, MAE / MAPE: by hand, derivations in the comments.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/fidelity_stats.h"
#include "test_support.h"

static void expect_rel(double got, double want, double rtol, const char *what) {
    if (!(fabs(got - want) <= rtol * fabs(want)))
        fail_msg("%s: got %.17g, want %.17g (rel err %.3g)", what, got, want,
                 fabs(got - want) / fabs(want));
}

static void ks(const double *a, int64_t na, const double *b, int64_t nb, double *d, double *p) {
    assert_int_equal(kr_ks2_test(a, na, b, nb, d, p), KR_OK);
}

/* ---------------------------------------------------------------- KS */

static void test_ks_statistic_with_ties(void **state) {
    (void)state;
    /* F_a at 1,2,3,4: 1/4, 3/4, 1, 1;  F_b: 0, 3/4, 3/4, 1  → |diff| 1/4, 0, 1/4, 0: D = 1/4.
     * Stepping one element at a time instead of one value would see a at 1,2,2 against no b
     * yet and report 3/4. 1/4 is the smallest D a 4x4 pair can have, so p = 1. */
    double a[] = { 2, 3, 1, 2 }, b[] = { 4, 2, 2, 2 }, d, p;
    const double a0[] = { 2, 3, 1, 2 };
    ks(a, 4, b, 4, &d, &p);
    assert_true(d == 0.25);
    assert_true(p == 1.0);
    assert_memory_equal(a, a0, sizeof a); /* inputs are not sorted in place */
    /* Symmetric in its arguments. */
    double d2, p2;
    ks(b, 4, a, 4, &d2, &p2);
    assert_true(d2 == d && p2 == p);
    /* ±inf are ordinary values: F_a at -inf,0,1,2,3,inf = 1/3,2/3,2/3,2/3,2/3,1, F_b = 0,0,1/3,
     * 2/3,1,1 → D = 2/3; 3x3 Gnedenko–Korolyuk with h = 2: 2·C(6,1)/C(6,3) = 12/20. */
    const double ai[] = { INFINITY, 0, -INFINITY }, bi[] = { 1, 2, 3 };
    ks(ai, 3, bi, 3, &d, &p);
    expect_rel(d, 2.0 / 3.0, 1e-15, "inf D");
    expect_rel(p, 0.6, 1e-14, "inf p");
}

static void test_ks_identical_and_disjoint(void **state) {
    (void)state;
    double d, p;
    const double x[] = { 3, 1, 2, 5, 4 };
    ks(x, 5, x, 5, &d, &p);
    assert_true(d == 0.0 && p == 1.0);
    const double ones3[] = { 1, 1, 1 }, ones2[] = { 1, 1 };
    ks(ones3, 3, ones2, 2, &d, &p);
    assert_true(d == 0.0 && p == 1.0);

    /* D = 1 only on the two orderings that put one whole sample first: p = 2 / C(m+n, m). */
    const double lo5[] = { 1, 2, 3, 4, 5 }, hi5[] = { 6, 7, 8, 9, 10 };
    ks(lo5, 5, hi5, 5, &d, &p);
    assert_true(d == 1.0);
    expect_rel(p, 2.0 / 252.0, 1e-13, "5x5 disjoint");
    ks(hi5, 5, lo5, 5, &d, &p);
    assert_true(d == 1.0);
    expect_rel(p, 2.0 / 252.0, 1e-13, "5x5 disjoint reversed");
    ks(lo5, 3, hi5, 4, &d, &p);
    assert_true(d == 1.0);
    expect_rel(p, 2.0 / 35.0, 1e-13, "3x4 disjoint");
    double lo20[20], hi20[20];
    for (int k = 0; k < 20; k++) lo20[k] = k, hi20[k] = 100 + k;
    ks(lo20, 20, hi20, 20, &d, &p);
    assert_true(d == 1.0);
    expect_rel(p, 2.0 / 137846528820.0, 1e-12, "20x20 disjoint"); /* C(40,20) = 137846528820 */
}

static void test_ks_exact_known_answers(void **state) {
    (void)state;
    double d, p;
    /* Brute force over all 792 orderings: D = 16/35, P(D' >= D) = 43/99. */
    const double a5[] = { 0.1, 0.5, 0.9, 1.3, 2.0 }, b7[] = { 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 1.0 };
    ks(a5, 5, b7, 7, &d, &p);
    expect_rel(d, 16.0 / 35.0, 1e-15, "5x7 D");
    expect_rel(p, 43.0 / 99.0, 1e-13, "5x7 p");

    /* a_k = 3k (k < 40), b_k = 2k + s (k < 60); D exact, p from integer path counts. */
    static const struct {
        int s;
        double d, p;
    } c4060[] = { { 20, 11.0 / 60.0, 0.36603030964577876 },
                  { 30, 4.0 / 15.0, 0.057654794656171765 },
                  { 40, 7.0 / 20.0, 0.0044299695161290273 } };
    double a[1000], b[5000];
    for (int c = 0; c < 3; c++) {
        for (int k = 0; k < 40; k++) a[k] = 3 * k;
        for (int k = 0; k < 60; k++) b[k] = 2 * k + c4060[c].s;
        ks(a, 40, b, 60, &d, &p);
        expect_rel(d, c4060[c].d, 1e-15, "40x60 D");
        expect_rel(p, c4060[c].p, 1e-12, "40x60 p");
    }

    /* a_k = 10k (k < 700), b_k = 7k + 350 (k < 1000): D = 359/7000, integer path counts. */
    for (int k = 0; k < 700; k++) a[k] = 10 * k;
    for (int k = 0; k < 1000; k++) b[k] = 7 * k + 350;
    ks(a, 700, b, 1000, &d, &p);
    expect_rel(d, 359.0 / 7000.0, 1e-15, "700x1000 D");
    expect_rel(p, 0.22044992360935686, 1e-11, "700x1000 p");

    /* Very unequal sizes, where the asymptotic formula would be poor (en ~ 1.7):
     * a = {100.5, 200.5, 4000.5}, b_k = k (k < 5000): D = 9397/15000. */
    const double a3[] = { 100.5, 200.5, 4000.5 };
    for (int k = 0; k < 5000; k++) b[k] = k;
    ks(a3, 3, b, 5000, &d, &p);
    expect_rel(d, 9397.0 / 15000.0, 1e-15, "3x5000 D");
    expect_rel(p, 0.11049346216697259, 1e-11, "3x5000 p");

    /* m = n = 1000, b shifted by h: D = h/1000, p by Gnedenko–Korolyuk. h = 300 checks that a
     * p far below 1e-16 keeps its relative accuracy (1 - P(inside) would round to 0). */
    static const struct {
        int h;
        double p;
    } gk[] = { { 60, 0.054626665107015249 },
               { 100, 8.9742775673130065e-05 },
               { 300, 4.2317122818691784e-40 } };
    for (int c = 0; c < 3; c++) {
        for (int k = 0; k < 1000; k++) a[k] = k, b[k] = k + gk[c].h;
        ks(a, 1000, b, 1000, &d, &p);
        expect_rel(d, gk[c].h / 1000.0, 1e-15, "1000x1000 D");
        expect_rel(p, gk[c].p, 1e-11, "1000x1000 p");
    }
}

static void test_ks_asymptotic(void **state) {
    (void)state;
    /* The classical critical values: Q_KS(1.2238479) = 0.10, (1.3580986) = 0.05,
     * (1.6276236) = 0.01; the 60-digit series gives the values to 17 digits. */
    static const struct {
        double lambda, q;
    } tab[] = { { 0.5, 0.96394524366487511 },        { 1.0, 0.2699996716773545 },
                { 1.2238479, 0.09999998542556697 },  { 1.3580986, 0.050000010680280788 },
                { 1.6276236, 0.010000000749940367 }, { 2.0, 0.00067092525577969533 },
                { 3.0, 3.0459959489425258e-08 } };
    for (size_t k = 0; k < sizeof tab / sizeof tab[0]; k++)
        expect_rel(kr_ks_sf(tab[k].lambda), tab[k].q, 1e-13, "Q_KS");
    assert_true(fabs(kr_ks_sf(1.358) - 0.05) < 3e-4); /* the 3-decimal table entry */
    assert_true(kr_ks_sf(0.0) == 1.0 && kr_ks_sf(-1.0) == 1.0 && kr_ks_sf(0.1) == 1.0);
    assert_true(kr_ks_sf(40.0) == 0.0);
    assert_true(isnan(kr_ks_sf(NAN)));
    /* Continuous across the switch between the two series at 1.18. */
    assert_true(fabs(kr_ks_sf(1.18 - 1e-12) - kr_ks_sf(1.18 + 1e-12)) < 1e-11);

    /* 5000 x 5000 = 2.5e7 cells > KR_KS_EXACT_MAX_CELLS: a_k = k, b_k = k + 150, D = 0.03,
     * en = 50, λ = (50 + 0.12 + 0.11/50)·0.03 = 1.503666, Q_KS(λ) from the 60-digit series. */
    static double a[5000], b[5000];
    for (int k = 0; k < 5000; k++) a[k] = k, b[k] = k + 150;
    double d, p;
    ks(a, 5000, b, 5000, &d, &p);
    expect_rel(d, 0.03, 1e-15, "5000x5000 D");
    expect_rel(p, 0.021734009616853119, 1e-12, "5000x5000 asymptotic p");
    /* The exact value here (Gnedenko–Korolyuk) is 0.022212962837199764: the approximation is
     * within a few percent, which is what the header promises beyond the exact range. */
    assert_true(fabs(p - 0.022212962837199764) < 0.03 * 0.022212962837199764);
}

static void test_ks_degenerate(void **state) {
    (void)state;
    const double x[] = { 1, 2, 3 }, xn[] = { 1, NAN, 3 };
    double d = 0, p = 0;
    ks(x, 3, x, 0, &d, &p);
    assert_true(isnan(d) && isnan(p));
    ks(x, 0, x, 3, &d, &p);
    assert_true(isnan(d) && isnan(p));
    ks(x, 3, xn, 3, &d, &p);
    assert_true(isnan(d) && isnan(p));
    ks(xn, 3, x, 3, &d, &p);
    assert_true(isnan(d) && isnan(p));
    /* one value each: D is 0 or 1, and either ordering is equally likely */
    ks(x, 1, x + 1, 1, &d, &p);
    assert_true(d == 1.0 && p == 1.0);
    assert_int_equal(kr_ks2_test(x, 3, x, 3, NULL, &p), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_ks2_test(x, 3, x, 3, &d, NULL), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_ks2_test(x, -1, x, 3, &d, &p), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_ks2_test(NULL, 3, x, 3, &d, &p), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_ks2_test(x, 3, x, (int64_t)INT32_MAX + 1, &d, &p), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_ks2_test(NULL, 0, NULL, 0, &d, &p), KR_OK);
}

/* ---------------------------------------------------------------- AUC */

static void test_roc_auc(void **state) {
    (void)state;
    double auc;
    const double s[] = { 0.1, 0.2, 0.8, 0.9 };
    const int y[] = { 0, 0, 1, 1 }, yr[] = { 1, 1, 0, 0 };
    assert_int_equal(kr_roc_auc(s, y, 4, &auc), KR_OK);
    assert_true(auc == 1.0);
    assert_int_equal(kr_roc_auc(s, yr, 4, &auc), KR_OK);
    assert_true(auc == 0.0);
    const double tied[] = { 0.3, 0.3, 0.3, 0.3 };
    assert_int_equal(kr_roc_auc(tied, y, 4, &auc), KR_OK);
    assert_true(auc == 0.5);
    /* scikit-learn's roc_auc_score documentation example: 0.75. */
    const double sk[] = { 0.1, 0.4, 0.35, 0.8 };
    assert_int_equal(kr_roc_auc(sk, y, 4, &auc), KR_OK);
    assert_true(auc == 0.75);
    /* Ties across classes. Positives 1, 2, 3 against negatives 1, 2; pairs (pos vs neg):
     * 1v1 ½, 1v2 0, 2v1 1, 2v2 ½, 3v1 1, 3v2 1 → 4/6. By ranks: 1,1 → 1.5; 2,2 → 3.5; 3 → 5;
     * positive rank sum 1.5 + 3.5 + 5 = 10, U = 10 - 3·4/2 = 4, AUC = 4/(3·2). */
    const double st[] = { 1, 1, 2, 2, 3 };
    const int yt[] = { 0, 1, 0, 1, 1 };
    assert_int_equal(kr_roc_auc(st, yt, 5, &auc), KR_OK);
    expect_rel(auc, 4.0 / 6.0, 1e-15, "auc ties");
    /* scores .1 .4 .35 .8 .4, labels 0 0 1 1 1: ranks 1, 3.5, 2, 5, 3.5; positive sum 10.5,
     * U = 10.5 - 6 = 4.5, AUC = 4.5/6. */
    const double s5[] = { 0.1, 0.4, 0.35, 0.8, 0.4 };
    const int y5[] = { 0, 0, 1, 1, 1 };
    assert_int_equal(kr_roc_auc(s5, y5, 5, &auc), KR_OK);
    assert_true(auc == 0.75);

    /* Degenerate: one class, empty, NaN score → NaN; a label other than 0/1 → error. */
    const int one[] = { 1, 1, 1, 1 };
    assert_int_equal(kr_roc_auc(s, one, 4, &auc), KR_OK);
    assert_true(isnan(auc));
    auc = 0;
    assert_int_equal(kr_roc_auc(NULL, NULL, 0, &auc), KR_OK);
    assert_true(isnan(auc));
    const double sn[] = { 0.1, NAN, 0.8, 0.9 };
    assert_int_equal(kr_roc_auc(sn, y, 4, &auc), KR_OK);
    assert_true(isnan(auc));
    const int bad[] = { 0, 2, 1, 1 }, neg[] = { 0, -1, 1, 1 };
    assert_int_equal(kr_roc_auc(s, bad, 4, &auc), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_roc_auc(s, neg, 4, &auc), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_roc_auc(s, y, 4, NULL), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_roc_auc(s, y, -1, &auc), KR_ERR_INVALID_ARG);
}

/* ---------------------------------------------------------------- KS separation */

static void test_ks_separation(void **state) {
    (void)state;
    double d, p, d2, p2;
    int64_t np = -1, nn = -1;
    /* Perfect separation: every up window scores above every down one. */
    const double s[] = { 0.6, 0.1, 0.9, 0.2, 0.7 };
    const int y[] = { 1, 0, 1, 0, 1 };
    assert_int_equal(kr_ks_separation(s, y, 5, &d, &p, &np, &nn), KR_OK);
    assert_true(d == 1.0);
    assert_int_equal(np, 3);
    assert_int_equal(nn, 2);
    /* By hand, ties across classes (P(up) is a fraction of paths, so ties are the rule): up
     * {.5 .75 .75 1}, down {.25 .5 .75}. F_up − F_down after each value: .25: 0 − 1/3; .5:
     * 1/4 − 2/3 = −5/12; .75: 3/4 − 1 = −1/4; 1: 0 → D = 5/12. The p-value is the two-sample
     * test's on the split scores, whatever order the windows come in. */
    const double t[] = { 0.75, 0.25, 0.5, 1.0, 0.5, 0.75, 0.75 };
    const int yt[] = { 1, 0, 1, 1, 0, 0, 1 };
    assert_int_equal(kr_ks_separation(t, yt, 7, &d, &p, NULL, NULL), KR_OK);
    expect_rel(d, 5.0 / 12.0, 1e-15, "separation D");
    const double up[] = { 0.75, 0.5, 1.0, 0.75 }, down[] = { 0.25, 0.5, 0.75 };
    ks(up, 4, down, 3, &d2, &p2);
    assert_true(d == d2 && p == p2);
    /* No separation: the same scores in both classes. */
    const double same[] = { 0.3, 0.3, 0.6, 0.6 };
    const int ys[] = { 1, 0, 1, 0 };
    assert_int_equal(kr_ks_separation(same, ys, 4, &d, &p, NULL, NULL), KR_OK);
    assert_true(d == 0.0 && p == 1.0);
    /* Degenerate: one class or a NaN → NaN; a bad label → error. */
    const int all_up[] = { 1, 1, 1, 1, 1 };
    assert_int_equal(kr_ks_separation(s, all_up, 5, &d, &p, &np, &nn), KR_OK);
    assert_true(isnan(d) && isnan(p));
    assert_int_equal(nn, 0);
    const double sn[] = { 0.6, NAN, 0.9, 0.2, 0.7 };
    assert_int_equal(kr_ks_separation(sn, y, 5, &d, &p, NULL, NULL), KR_OK);
    assert_true(isnan(d));
    const int bad[] = { 1, 0, 2, 0, 1 };
    assert_int_equal(kr_ks_separation(s, bad, 5, &d, &p, NULL, NULL), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_ks_separation(s, y, 5, NULL, &p, NULL, NULL), KR_ERR_INVALID_ARG);
}

/* ---------------------------------------------------------------- Spearman */

static void test_spearman(void **state) {
    (void)state;
    double r;
    /* No ties: d = -1, 1, -1, 1, 0, Σd² = 4, 1 - 6·4/(5·24) = 0.8. */
    const double x[] = { 1, 2, 3, 4, 5 }, y[] = { 2, 1, 4, 3, 5 };
    assert_int_equal(kr_spearman(x, y, 5, &r), KR_OK);
    expect_rel(r, 0.8, 1e-15, "spearman no ties");
    /* Ties in y: ranks of 5,6,7,8,7 are 1, 2, 3.5, 5, 3.5; centred (mean 3) x: -2..2,
     * y: -2, -1, .5, 2, .5 → sxy = 8, sxx = 10, syy = 9.5, ρ = 8/sqrt(95). */
    const double yt[] = { 5, 6, 7, 8, 7 };
    assert_int_equal(kr_spearman(x, yt, 5, &r), KR_OK);
    expect_rel(r, 8.0 / sqrt(95.0), 1e-15, "spearman ties in y");
    /* Ties in both: x 1,1,2,3 → 1.5,1.5,3,4; y 1,2,2,2 → 1,3,3,3; centred on 2.5:
     * sxy = 1.5 - .5 + .25 + .75 = 2, sxx = 4.5, syy = 3, ρ = 2/sqrt(13.5). */
    const double xb[] = { 1, 1, 2, 3 }, yb[] = { 1, 2, 2, 2 };
    assert_int_equal(kr_spearman(xb, yb, 4, &r), KR_OK);
    expect_rel(r, 2.0 / sqrt(13.5), 1e-15, "spearman ties in both");
    /* Only the order matters: a monotone transform gives 1, a reversal -1. */
    double e[5], rev[5];
    for (int k = 0; k < 5; k++) e[k] = exp(3.0 * x[k]), rev[k] = -x[k] * x[k];
    assert_int_equal(kr_spearman(x, e, 5, &r), KR_OK);
    assert_true(r == 1.0);
    assert_int_equal(kr_spearman(x, rev, 5, &r), KR_OK);
    assert_true(r == -1.0);
    /* Degenerate → NaN. */
    const double c[] = { 2, 2, 2, 2, 2 }, xn[] = { 1, 2, NAN, 4, 5 };
    assert_int_equal(kr_spearman(x, c, 5, &r), KR_OK);
    assert_true(isnan(r));
    assert_int_equal(kr_spearman(c, x, 5, &r), KR_OK);
    assert_true(isnan(r));
    assert_int_equal(kr_spearman(x, y, 1, &r), KR_OK);
    assert_true(isnan(r));
    assert_int_equal(kr_spearman(xn, y, 5, &r), KR_OK);
    assert_true(isnan(r));
    assert_int_equal(kr_spearman(x, y, 5, NULL), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_spearman(NULL, y, 5, &r), KR_ERR_INVALID_ARG);
}

/* ---------------------------------------------------------------- logits */

static void test_kl_divergence(void **state) {
    (void)state;
    double kl;
    const float p[] = { 1.5f, -0.25f, 3.0f, 0.0f, -2.0f, 0.75f, 2.25f, -1.0f };
    assert_int_equal(kr_kl_divergence_logits(p, p, 8, &kl), KR_OK);
    assert_true(kl == 0.0);
    /* softmax ignores a common offset */
    float p100[8];
    for (int k = 0; k < 8; k++) p100[k] = p[k] + 100.0f;
    assert_int_equal(kr_kl_divergence_logits(p, p100, 8, &kl), KR_OK);
    assert_true(kl >= 0.0 && kl < 1e-15);

    /* P = (½, ½), Q = (1, e)/(1+e): KL = ½ ln(½(1+e)) + ½ ln(½(1+e)/e) = ln((1+e)/2) - ½. */
    const float p2[] = { 0.0f, 0.0f }, q2[] = { 0.0f, 1.0f };
    assert_int_equal(kr_kl_divergence_logits(p2, q2, 2, &kl), KR_OK);
    expect_rel(kl, log((1.0 + M_E) / 2.0) - 0.5, 1e-14, "kl two-outcome");
    expect_rel(kl, 0.12011450695827752, 1e-14, "kl two-outcome (decimal)");

    /* Nearly equal logits, q_k = p_k + 2^-s·(k mod 3 - 1), the quantisation regime: KL falls as
     * 2^-2s and must keep its relative accuracy. The textbook Σ p (log p - log q) in double is
     * off by 4e-4 (relative) at s = 20 and comes out negative at s = 26. */
    static const struct {
        int s;
        double kl;
    } near[] = { { 12, 2.7753478815702149e-08 },
                 { 20, 4.2349716606588181e-13 },
                 { 26, 2.8120668380559282e-18 } };
    for (int c = 0; c < 3; c++) {
        float q[8];
        for (int k = 0; k < 8; k++) q[k] = p[k] + ldexpf(1.0f, -near[c].s) * (float)(k % 3 - 1);
        assert_int_equal(kr_kl_divergence_logits(p, q, 8, &kl), KR_OK);
        expect_rel(kl, near[c].kl, 1e-13, "kl near");
    }
    /* Far apart, both directions (KL is not symmetric). */
    const float q8[] = { 0.5f, 2.0f, -1.0f, 1.25f, 0.0f, -3.5f, 4.0f, 1.0f };
    assert_int_equal(kr_kl_divergence_logits(p, q8, 8, &kl), KR_OK);
    expect_rel(kl, 2.5204327606023593, 1e-13, "kl far");
    assert_int_equal(kr_kl_divergence_logits(q8, p, 8, &kl), KR_OK);
    expect_rel(kl, 1.0779047168416254, 1e-13, "kl far reversed");
    /* Logits far beyond exp's range: P ≈ (1, e^-1000), Q ≈ (e^-1000, 1), KL = 1000 to double
     * precision (the e^-1000 terms are far below an ulp). */
    const float pb[] = { 1000.0f, 0.0f }, qb[] = { 0.0f, 1000.0f };
    assert_int_equal(kr_kl_divergence_logits(pb, qb, 2, &kl), KR_OK);
    expect_rel(kl, 1000.0, 1e-15, "kl big logits");

    /* Masked outcomes: P = (1, 0), Q = (½, ½) → ln 2; Q = 0 where P > 0 → +inf. */
    const float pm[] = { 0.0f, -INFINITY }, qz[] = { 0.0f, 0.0f }, qm[] = { 0.0f, -INFINITY };
    assert_int_equal(kr_kl_divergence_logits(pm, qz, 2, &kl), KR_OK);
    expect_rel(kl, log(2.0), 1e-15, "kl masked p");
    assert_int_equal(kr_kl_divergence_logits(qz, qm, 2, &kl), KR_OK);
    assert_true(isinf(kl) && kl > 0);
    /* Q's mass where P is masked counts: small (Q(out) ~ 2%), dominant (Q(in) = e^-1000 beside
     * 1: KL = 1000 + log1p(e^-1000)) and larger than the rest (decimal reference). */
    const float p3[] = { 0.0f, 1.0f, -INFINITY }, q3[] = { 0.5f, 0.0f, -3.0f };
    assert_int_equal(kr_kl_divergence_logits(p3, q3, 3, &kl), KR_OK);
    expect_rel(kl, 0.27602533375908223, 1e-14, "kl masked, small outside mass");
    const float qd[] = { -1000.0f, 0.0f };
    assert_int_equal(kr_kl_divergence_logits(pm, qd, 2, &kl), KR_OK);
    expect_rel(kl, 1000.0, 1e-15, "kl masked, vanishing inside mass");
    const float p4[] = { 0.0f, -INFINITY, -INFINITY }, q4[] = { 0.0f, 5.0f, 4.5f };
    assert_int_equal(kr_kl_divergence_logits(p4, q4, 3, &kl), KR_OK);
    expect_rel(kl, 5.478262311448824, 1e-14, "kl masked, mostly outside");
    /* Undefined → NaN: no outcomes, NaN or +inf logit, a side with every outcome masked. */
    const float pn[] = { 0.0f, NAN }, pi[] = { INFINITY, 0.0f },
                all_masked[] = { -INFINITY, -INFINITY };
    assert_int_equal(kr_kl_divergence_logits(p2, q2, 0, &kl), KR_OK);
    assert_true(isnan(kl));
    assert_int_equal(kr_kl_divergence_logits(pn, q2, 2, &kl), KR_OK);
    assert_true(isnan(kl));
    assert_int_equal(kr_kl_divergence_logits(p2, pn, 2, &kl), KR_OK);
    assert_true(isnan(kl));
    assert_int_equal(kr_kl_divergence_logits(pi, q2, 2, &kl), KR_OK);
    assert_true(isnan(kl));
    assert_int_equal(kr_kl_divergence_logits(all_masked, q2, 2, &kl), KR_OK);
    assert_true(isnan(kl));
    assert_int_equal(kr_kl_divergence_logits(p2, all_masked, 2, &kl), KR_OK);
    assert_true(isnan(kl));
    assert_int_equal(kr_kl_divergence_logits(p2, q2, 2, NULL), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_kl_divergence_logits(NULL, q2, 2, &kl), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_kl_divergence_logits(p2, q2, -1, &kl), KR_ERR_INVALID_ARG);
}

static void test_top1(void **state) {
    (void)state;
    const float a[] = { 1.0f, 3.0f, 3.0f, 2.0f }, b[] = { NAN, 1.0f, 2.0f }, c[] = { NAN, NAN };
    const float d[] = { -INFINITY, -INFINITY }, e[] = { -5.0f };
    assert_int_equal(kr_top1(a, 4), 1);
    assert_int_equal(kr_top1(b, 3), 2);
    assert_int_equal(kr_top1(c, 2), -1);
    assert_int_equal(kr_top1(d, 2), 0);
    assert_int_equal(kr_top1(e, 1), 0);
    assert_int_equal(kr_top1(a, 0), -1);
    assert_int_equal(kr_top1(NULL, 4), -1);
}

/* ---------------------------------------------------------------- error accumulators */

static void test_err_acc(void **state) {
    (void)state;
    kr_err_acc acc = { 0 };
    assert_true(isnan(kr_err_acc_mae(&acc)) && isnan(kr_err_acc_mape(&acc)));
    /* |err|: 10, 5, 10, 0.5, 1 - 1e-13. APE: 10/100, 5/100, 10/100 (negative reference: |ref|);
     * the last two references are below 1e-12 and count for the MAE only.
     * MAE = (26.5 - 1e-13)/5, MAPE = 100·0.25/3. */
    kr_err_acc_add(&acc, 110, 100);
    kr_err_acc_add(&acc, 95, 100);
    kr_err_acc_add(&acc, -90, -100);
    kr_err_acc_add(&acc, 0.5, 0);
    kr_err_acc_add(&acc, 1, 1e-13);
    assert_true(acc.n == 5 && acc.n_ape == 3);
    expect_rel(kr_err_acc_mae(&acc), (26.5 - 1e-13) / 5.0, 1e-15, "mae");
    expect_rel(kr_err_acc_mape(&acc), 100.0 * 0.25 / 3.0, 1e-15, "mape");
    /* Exactly at the threshold the reference counts. */
    kr_err_acc t = { 0 };
    kr_err_acc_add(&t, 2e-12, 1e-12);
    assert_true(t.n_ape == 1);
    expect_rel(kr_err_acc_mape(&t), 100.0, 1e-12, "mape at threshold");
    /* Only unusable references: MAE defined, MAPE NaN. */
    kr_err_acc z = { 0 };
    kr_err_acc_add(&z, 3, 0);
    assert_true(kr_err_acc_mae(&z) == 3.0 && isnan(kr_err_acc_mape(&z)));
    /* A NaN forecast poisons both; a NaN reference too. */
    kr_err_acc_add(&acc, NAN, 100);
    assert_true(isnan(kr_err_acc_mae(&acc)) && isnan(kr_err_acc_mape(&acc)));
    kr_err_acc r = { 0 };
    kr_err_acc_add(&r, 1, NAN);
    assert_true(isnan(kr_err_acc_mae(&r)) && isnan(kr_err_acc_mape(&r)));
    /* NULL is harmless. */
    kr_err_acc_add(NULL, 1, 2);
    assert_true(isnan(kr_err_acc_mae(NULL)) && isnan(kr_err_acc_mape(NULL)));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ks_statistic_with_ties),
        cmocka_unit_test(test_ks_identical_and_disjoint),
        cmocka_unit_test(test_ks_exact_known_answers),
        cmocka_unit_test(test_ks_asymptotic),
        cmocka_unit_test(test_ks_degenerate),
        cmocka_unit_test(test_roc_auc),
        cmocka_unit_test(test_ks_separation),
        cmocka_unit_test(test_spearman),
        cmocka_unit_test(test_kl_divergence),
        cmocka_unit_test(test_top1),
        cmocka_unit_test(test_err_acc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
