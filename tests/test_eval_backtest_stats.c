/*
 * The backtest's statistics (eval/backtest_stats) against independent computations: the
 * sorted-sample CRPS against its double-sum definition and, for many Gaussian samples, against
 * the closed-form Gaussian CRPS; the pinball loss and PIT on hand cases; the incomplete beta and
 * Student t against closed forms; the Newey-West variance and the Diebold-Mariano test (with
 * the Harvey-Leybourne-Newbold correction) against hand-computed cases; the circular block
 * bootstrap's percentile interval of a mean covering the truth at about its nominal rate over
 * many seeds.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/stats.h"
#include "base/rng.h"
#include "eval/backtest_stats.h"
#include "test_support.h"

/* A standard normal draw from the counter-based stream (Box-Muller). */
static double gauss(uint64_t seed, uint64_t stream, uint64_t k) {
    double u1 = kr_rng_uniform(seed, stream, 2 * k), u2 = kr_rng_uniform(seed, stream, 2 * k + 1);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static double crps_double_sum(const double *x, int n, double y) {
    double a = 0, b = 0;
    for (int i = 0; i < n; i++) {
        a += fabs(x[i] - y);
        for (int j = 0; j < n; j++) b += fabs(x[i] - x[j]);
    }
    return a / n - b / (2.0 * n * n);
}

static void test_crps_definition(void **state) {
    (void)state;
    double x[37];
    for (int trial = 0; trial < 20; trial++) {
        const int n = 1 + trial * 2 % 37;
        for (int i = 0; i < n; i++) x[i] = gauss(7, (uint64_t)trial, (uint64_t)i) * 3 + 1;
        const double y = gauss(8, (uint64_t)trial, 0);
        const double want = crps_double_sum(x, n, y);
        kr_stat_sort(x, n);
        assert_true(fabs(kr_bt_crps_sorted(x, n, y) - want) < 1e-12 * (1 + fabs(want)));
    }
    /* A perfect forecast (every sample at the outcome) scores 0; a point forecast its error. */
    double same[5] = { 2.5, 2.5, 2.5, 2.5, 2.5 };
    assert_true(fabs(kr_bt_crps_sorted(same, 5, 2.5)) < 1e-15);
    double one = 3.0;
    assert_true(fabs(kr_bt_crps_sorted(&one, 1, 1.25) - 1.75) < 1e-15);
    assert_true(isnan(kr_bt_crps_sorted(x, 0, 1.0)));
}

/* CRPS of N(mu, sigma^2) at y (Gneiting & Raftery 2007, eq. 5). */
static double crps_gaussian(double mu, double sigma, double y) {
    const double z = (y - mu) / sigma;
    const double pdf = exp(-0.5 * z * z) / sqrt(2 * M_PI), cdf = 0.5 * erfc(-z / sqrt(2));
    return sigma * (z * (2 * cdf - 1) + 2 * pdf - 1 / sqrt(M_PI));
}

static void test_crps_gaussian(void **state) {
    (void)state;
    const int n = 200000;
    double *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    const double mu = 0.3, sigma = 1.7;
    for (int i = 0; i < n; i++) x[i] = mu + sigma * gauss(42, 1, (uint64_t)i);
    kr_stat_sort(x, n);
    const double ys[] = { -2.0, 0.3, 1.0, 4.5 };
    for (size_t k = 0; k < sizeof ys / sizeof ys[0]; k++) {
        const double want = crps_gaussian(mu, sigma, ys[k]), got = kr_bt_crps_sorted(x, n, ys[k]);
        /* The sampling error of 200,000 draws is about 0.1 % of sigma. */
        assert_true(fabs(got - want) < 0.01 * want + 0.002 * sigma);
    }
    free(x);
}

static void test_pinball_pit(void **state) {
    (void)state;
    assert_true(fabs(kr_bt_pinball(0.9, 10.0, 12.0) - 1.8) < 1e-12); /* under: 0.9 * 2 */
    assert_true(fabs(kr_bt_pinball(0.9, 10.0, 8.0) - 0.2) < 1e-12); /* over: 0.1 * 2 */
    assert_true(kr_bt_pinball(0.5, 3.0, 3.0) == 0.0);
    const double s[3] = { 1, 2, 3 };
    assert_true(fabs(kr_bt_pit(s, 3, 2.5, 0.25) - (2 + 0.25) / 4.0) < 1e-15);
    assert_true(fabs(kr_bt_pit(s, 3, 2.0, 0.5) - (1 + 0.5 * 2) / 4.0) < 1e-15); /* a tie */
    assert_true(fabs(kr_bt_pit(s, 3, 0.0, 0.99) - 0.99 / 4.0) < 1e-15);
}

static void test_beta_and_t(void **state) {
    (void)state;
    /* I_x(1, 1) = x; I_0.5(2, 3) = P(Bin(4, 1/2) >= 2) = 11/16. */
    assert_true(fabs(kr_bt_betainc(1, 1, 0.3) - 0.3) < 1e-12);
    assert_true(fabs(kr_bt_betainc(2, 3, 0.5) - 11.0 / 16) < 1e-12);
    /* I_0.8(5, 2) = P(Bin(6, 0.8) >= 5) = 6 0.8^5 0.2 + 0.8^6 (the other branch of the
     * continued fraction). */
    assert_true(fabs(kr_bt_betainc(5, 2, 0.8) - (6 * pow(0.8, 5) * 0.2 + pow(0.8, 6))) < 1e-12);
    /* t with 1 df is Cauchy: p = 1 - (2 / pi) atan|t|; with 2 df: p = 1 - |t| / sqrt(2 + t^2). */
    const double ts[] = { 0.0, 0.5, 1.0, 2.5, 10.0 };
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        const double t = ts[i];
        assert_true(fabs(kr_bt_t_two_sided_p(t, 1) - (1 - 2 / M_PI * atan(t))) < 1e-10);
        assert_true(fabs(kr_bt_t_two_sided_p(-t, 2) - (1 - t / sqrt(2 + t * t))) < 1e-10);
    }
    /* Large df: the normal's two-sided 5 % point. */
    assert_true(fabs(kr_bt_t_two_sided_p(1.959964, 1e7) - 0.05) < 1e-5);
    assert_true(isnan(kr_bt_t_two_sided_p(1.0, 0)));
}

static void test_pearson(void **state) {
    (void)state;
    const double x[4] = { 1, 2, 3, 4 }, y[4] = { 2, 4, 6, 8 }, z[4] = { 4, 3, 2, 1 };
    assert_true(fabs(kr_bt_pearson(x, y, NULL, 4) - 1) < 1e-12);
    assert_true(fabs(kr_bt_pearson(x, z, NULL, 4) + 1) < 1e-12);
    /* Weights are multiplicities: weight 2 on a point = the point twice. */
    const double a[3] = { 1, 2, 5 }, b[3] = { 1, 3, 4 }, w[3] = { 2, 1, 1 };
    const double a2[4] = { 1, 1, 2, 5 }, b2[4] = { 1, 1, 3, 4 };
    assert_true(fabs(kr_bt_pearson(a, b, w, 3) - kr_bt_pearson(a2, b2, NULL, 4)) < 1e-12);
    const double c[3] = { 1, 1, 1 };
    assert_true(isnan(kr_bt_pearson(a, c, NULL, 3)));
}

static void test_hac_and_dm(void **state) {
    (void)state;
    /* n = 3, no lags: hand-computed HLN statistic sqrt(7) and its t(2) p-value 1 - sqrt(7)/3. */
    const double d3[3] = { 1, 2, 4 };
    kr_bt_dm t;
    kr_bt_dm_test(d3, 3, 0, &t);
    assert_true(fabs(t.mean_diff - 7.0 / 3) < 1e-12);
    assert_true(fabs(t.dm - (7.0 / 3) / sqrt(14.0 / 27)) < 1e-12);
    assert_true(fabs(t.hln - sqrt(7.0)) < 1e-12);
    assert_true(fabs(t.p_value - (1 - sqrt(7.0) / 3)) < 1e-10);
    /* One lag (h = 2): gamma0 1.04, gamma1 -0.792, Bartlett weight 1/2: variance 0.248;
     * DM = 0.6 / sqrt(0.248 / 5); HLN factor sqrt(0.48); p from t(4) by numerical integration
     * (0.135376110642337, also the closed form of t(4)). */
    const double d5[5] = { 1, -1, 2, 0, 1 };
    assert_true(fabs(kr_bt_hac_variance(d5, 5, 1) - 0.248) < 1e-12);
    kr_bt_dm_test(d5, 5, 1, &t);
    assert_true(fabs(t.dm - 2.694079530401622) < 1e-9);
    assert_true(fabs(t.hln - 1.8665130505147645) < 1e-9);
    assert_true(fabs(t.p_value - 0.135376110642337) < 1e-9);
    /* Identical losses: no test. */
    const double zero[6] = { 0 };
    kr_bt_dm_test(zero, 6, 1, &t);
    assert_true(isnan(t.p_value) && t.mean_diff == 0);
    kr_bt_dm_test(d5, 2, 0, &t);
    assert_true(isnan(t.dm));
}

static void test_block_counts(void **state) {
    (void)state;
    int c[50];
    for (int rep = 0; rep < 30; rep++) {
        kr_bt_block_counts(50, 7, 3, (uint64_t)rep, c);
        int sum = 0;
        for (int i = 0; i < 50; i++) sum += c[i];
        assert_int_equal(sum, 50);
    }
    kr_bt_block_counts(50, 50, 3, 0, c); /* one block of everything */
    for (int i = 0; i < 50; i++) assert_int_equal(c[i], 1);
    /* The same (seed, rep) draws the same resample. */
    int d[50];
    kr_bt_block_counts(50, 4, 11, 5, c);
    kr_bt_block_counts(50, 4, 11, 5, d);
    assert_memory_equal(c, d, sizeof c);
}

/* The bootstrap's percentile interval of a mean (the machinery of every interval in the
 * report) covers the true mean at about its nominal 95 % over many seeds: loose bounds, since
 * a percentile interval of 60 values runs a little short. */
static void test_bootstrap_coverage(void **state) {
    (void)state;
    const int n = 60, B = 400, trials = 300;
    double x[60], reps[400];
    int counts[60], covered = 0;
    for (int trial = 0; trial < trials; trial++) {
        /* AR(1) with phi 0.3: dependent, as overlapping origins are; mean 0. */
        double prev = 0;
        for (int i = 0; i < n; i++) {
            prev = 0.3 * prev + gauss(99, (uint64_t)trial, (uint64_t)i);
            x[i] = prev;
        }
        for (int b = 0; b < B; b++) {
            kr_bt_block_counts(n, 4, (uint64_t)trial * 7919 + 1, (uint64_t)b, counts);
            double s = 0;
            for (int i = 0; i < n; i++) s += counts[i] * x[i];
            reps[b] = s / n;
        }
        const double lo = kr_bt_percentile(reps, B, 0.025), hi = kr_bt_percentile(reps, B, 0.975);
        covered += lo <= 0 && 0 <= hi;
    }
    const double rate = (double)covered / trials;
    assert_true(rate > 0.85 && rate < 0.99);
}

static void test_percentile(void **state) {
    (void)state;
    double v[5] = { 5, NAN, 1, 3, INFINITY };
    assert_true(fabs(kr_bt_percentile(v, 5, 0.5) - 3) < 1e-15); /* of {1, 3, 5} */
    double w[2] = { NAN, NAN };
    assert_true(isnan(kr_bt_percentile(w, 2, 0.5)));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crps_definition), cmocka_unit_test(test_crps_gaussian),
        cmocka_unit_test(test_pinball_pit),     cmocka_unit_test(test_beta_and_t),
        cmocka_unit_test(test_pearson),         cmocka_unit_test(test_hac_and_dm),
        cmocka_unit_test(test_block_counts),    cmocka_unit_test(test_bootstrap_coverage),
        cmocka_unit_test(test_percentile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
