/*
 * eval/backtest_stats — the statistics a backtest's scores rest on, each a pure function with
 * one definition (docs/backtest.md quotes them): the CRPS of an empirical distribution, the
 * quantile (pinball) loss, the randomised PIT, Pearson correlation, the Student t
 * distribution, the Newey-West (HAC) variance of a mean, the Diebold-Mariano test with the
 * Harvey-Leybourne-Newbold correction, and the circular block bootstrap's resampling.
 *
 * No state is kept between calls; nothing here knows about models or candles.
 */
#ifndef KR_EVAL_BACKTEST_STATS_H
#define KR_EVAL_BACKTEST_STATS_H

#include <stdint.h>

/* CRPS of the empirical distribution of sorted[n] (ascending) at the outcome y, exact:
 *   CRPS = (1/n) Σ_i |x_i - y| - (1/(2 n²)) Σ_i Σ_j |x_i - x_j|
 *        = (1/n) Σ_i |x_i - y| - (1/n²) Σ_i (2i - n - 1) x_(i)      (i = 1..n, sorted)
 * (Gneiting & Raftery 2007; for n = 1 it is |x - y|). NaN when n < 1 or y is NaN. */
double kr_bt_crps_sorted(const double *sorted, int n, double y);

/* The quantile (pinball) loss of the q-quantile forecast xq at the outcome y:
 *   rho_q(y - xq) = (y - xq) (q - 1[y < xq])  (>= 0). */
double kr_bt_pinball(double q, double xq, double y);

/* The randomised probability integral transform of y under the empirical distribution of
 * sorted[n]: (below + u1 * (ties + 1)) / (n + 1) with below = #{x < y}, ties = #{x == y} and
 * u1 uniform in [0, 1): uniform on [0, 1] when y is exchangeable with the samples (the rank
 * histogram of ensemble verification, made continuous). */
double kr_bt_pit(const double *sorted, int n, double y, double u1);

/* Pearson correlation of x[n] and y[n]; w (may be NULL) are non-negative weights (a
 * bootstrap's multiplicities). NaN when fewer than 2 weighted points or either is constant. */
double kr_bt_pearson(const double *x, const double *y, const double *w, int64_t n);

/* Student t: P(|T| >= |t|) with df degrees of freedom (two-sided p-value), through the
 * regularised incomplete beta function I_{df/(df+t²)}(df/2, 1/2). NaN for df <= 0 or NaN t. */
double kr_bt_t_two_sided_p(double t, double df);
/* The regularised incomplete beta function I_x(a, b), a, b > 0, x in [0, 1] (continued
 * fraction, modified Lentz); NaN outside. */
double kr_bt_betainc(double a, double b, double x);

/* Newey-West (HAC) long-run variance of the mean's numerator: gamma_0 + 2 Σ_{j=1..lags}
 * (1 - j / (lags + 1)) gamma_j, with gamma_j = (1/n) Σ_t (d_t - mean)(d_{t-j} - mean) (Bartlett
 * weights: never negative). The variance of the mean is that / n. NaN when n < 2. */
double kr_bt_hac_variance(const double *d, int n, int lags);

/* A Diebold-Mariano test of equal accuracy from the loss differentials d[n] (loss of the
 * forecast minus loss of the baseline, in time order) of h-step forecasts whose errors overlap
 * `lags` = h - 1 origins:
 *   DM  = mean(d) / sqrt(hac(d, lags) / n)
 *   HLN = DM * sqrt((n + 1 - 2h + h (h - 1) / n) / n)   (Harvey, Leybourne & Newbold 1997)
 *   p   = two-sided, Student t with n - 1 degrees of freedom, at HLN.
 * Every field NaN when n < 3 or the variance is not positive (identical losses). */
typedef struct kr_bt_dm {
    int n, lags;
    double mean_diff; /* mean(d): < 0 when the forecast's loss is lower */
    double dm, hln, p_value;
} kr_bt_dm;
void kr_bt_dm_test(const double *d, int n, int lags, kr_bt_dm *out);

/* One circular block bootstrap resample (Politis & Romano 1992) of n units in blocks of b:
 * ceil(n / b) block starts drawn uniformly (from the counter-based stream (seed, rep)), each
 * block b consecutive units wrapping past the end, the last block cut so n units are drawn.
 * counts[n] receives how often each unit was drawn (they sum to n). */
void kr_bt_block_counts(int n, int b, uint64_t seed, uint64_t rep, int *counts);

/* The q-quantile of v[n] (sorted in place; NaN entries dropped first), numpy's linear rule;
 * NaN when no value is finite. */
double kr_bt_percentile(double *v, int n, double q);

#endif
