/*
 * analyst/fidelity_stats — the statistics behind the quantisation fidelity report ("does the
 * quantised model predict like the f32 one?"): a two-sample Kolmogorov–Smirnov test on the
 * forecast distributions, ROC AUC, KS separation and Spearman correlation of scores, KL divergence and top-1
 * agreement of next-token logits, and running MAE / MAPE accumulators.
 *
 * All functions are pure (no global state, nothing kept between calls) and compute in double.
 * Conventions shared by the functions that return a kr_status:
 *   - KR_ERR_INVALID_ARG: an output pointer is NULL, a count is negative, a data pointer is
 *     NULL while its count is positive, or (kr_roc_auc) a label is not 0 or 1. Outputs are
 *     left untouched.
 *   - KR_ERR_NOMEM: a scratch allocation failed. Outputs are set to NaN.
 *   - KR_OK otherwise. Input the statistic is undefined for (too few values, a single class,
 *     a constant series, a NaN anywhere in the input) is not an error: the result is NaN, so a
 *     report shows "n/a" for that cell instead of failing, and a quantised model that emits
 *     NaN shows up as NaN rather than being filtered away.
 */
#ifndef KR_ANALYST_FIDELITY_STATS_H
#define KR_ANALYST_FIDELITY_STATS_H

#include <stdint.h>

#include "kronos.h"

/* Up to this many lattice cells (na * nb) the KS p-value is exact; beyond it, asymptotic. */
#define KR_KS_EXACT_MAX_CELLS 10000000LL

/*
 * Two-sample, two-sided Kolmogorov–Smirnov test of "a and b come from the same continuous
 * distribution". *statistic = D = sup_x |F_a(x) - F_b(x)| over the empirical CDFs, with tied
 * values (within or across samples) stepped over together. *p_value = P(D' >= D) under the
 * null hypothesis:
 *   - exact when na * nb <= KR_KS_EXACT_MAX_CELLS: the fraction of the C(na+nb, na) equally
 *     likely orderings of the pooled sample whose path reaches |F_a - F_b| >= D — the same
 *     quantity as SciPy's ks_2samp(method='exact'). It is accumulated as a probability
 *     (a weighted average at each lattice point), so it neither overflows nor cancels; a
 *     p-value below ~1e-308 underflows to 0. Ties make the true null distribution discrete
 *     and the exact p-value conservative, as in SciPy.
 *   - asymptotic otherwise: p = Q_KS((en + 0.12 + 0.11/en) * D), en = sqrt(na nb / (na + nb))
 *     (Stephens' small-sample correction), Q_KS as in kr_ks_sf. Note SciPy's 'asymp' method
 *     uses a different approximation (the one-sample distribution at n = round(en^2)), so
 *     beyond the exact range the two agree only to a few percent of p.
 * Degenerate: na or nb == 0, or a NaN in either sample → both outputs NaN (KR_OK). Identical
 * samples → D = 0, p = 1. Each of na, nb must be <= INT32_MAX (else KR_ERR_INVALID_ARG).
 * The inputs are not modified (sorted copies are used).
 */
kr_status kr_ks2_test(const double *a, int64_t na, const double *b, int64_t nb, double *statistic,
                      double *p_value);

/* Kolmogorov's limiting survival function Q_KS(λ) = 2 Σ_{j>=1} (-1)^{j-1} exp(-2 j² λ²), the
 * probability that sqrt(n)·D_n exceeds λ as n → ∞. 1 for λ <= 0, NaN for NaN; in [0, 1]. */
double kr_ks_sf(double lambda);

/*
 * Area under the ROC curve of `score` for the binary `label` (1 = positive, 0 = negative):
 * the Mann–Whitney probability that a random positive scores above a random negative, ties
 * counting one half — tied scores get their average rank. A label other than 0 or 1 is
 * KR_ERR_INVALID_ARG. *auc = NaN when only one class is present (n == 0 included) or a
 * score is NaN.
 */
kr_status kr_roc_auc(const double *score, const int *label, int64_t n, double *auc);

/*
 * The risk-control KS statistic: how well `score` separates the outcomes of `label` (1 = the
 * window went up, 0 = down). *statistic = sup_s |F_1(s) − F_0(s)| between the empirical CDFs
 * of the scores of the two classes (the Kolmogorov–Smirnov distance banks use to rate a
 * score's separation: 0 = none, 1 = perfect); *p_value = kr_ks2_test's p of "both classes'
 * scores come from one distribution". *n_pos / *n_neg (optional) receive the class sizes.
 * A label other than 0 or 1 is KR_ERR_INVALID_ARG; a single class, n == 0 or a NaN score give
 * NaN outputs.
 */
kr_status kr_ks_separation(const double *score, const int *label, int64_t n, double *statistic,
                           double *p_value, int64_t *n_pos, int64_t *n_neg);

/*
 * Spearman rank correlation: the Pearson correlation of the average ranks of x and of y
 * (ties share their mean rank, as SciPy's spearmanr). *rho = NaN when n < 2, when x or y is
 * constant (all ties) or when any value is NaN. Clamped to [-1, 1].
 */
kr_status kr_spearman(const double *x, const double *y, int64_t n, double *rho);

/*
 * KL(P || Q) in nats between P = softmax(p_logits) and Q = softmax(q_logits), both of length
 * n, computed in double from the logits (log-sum-exp, no exp of an unshifted logit). The sum
 * is arranged as log1p of non-negative terms, so the result is >= 0 by construction and keeps
 * its relative accuracy when P and Q nearly agree (KL ~ 1e-12 and below), which is the regime
 * a fidelity report lives in. A logit of -inf is a masked outcome (probability 0); P > 0 where
 * Q == 0 gives +inf. *kl = NaN when n == 0, a logit is NaN or +inf, or all of one side's
 * logits are -inf.
 */
kr_status kr_kl_divergence_logits(const float *p_logits, const float *q_logits, int n, double *kl);

/* Index of the largest logit, the first one on ties; NaN entries are skipped. -1 when n < 1,
 * logits is NULL or every entry is NaN. */
int kr_top1(const float *logits, int n);

/*
 * Running forecast-error accumulator. Zero-initialise (`kr_err_acc acc = {0};`) and add
 * (predicted, reference) pairs; accumulators of separate workers combine by adding fields.
 */
typedef struct kr_err_acc {
    double sum_abs; /* Σ |predicted - reference| */
    double
        sum_ape; /* Σ |predicted - reference| / |reference|, over pairs with a usable reference */
    int64_t n; /* pairs added */
    int64_t n_ape; /* pairs that entered sum_ape */
} kr_err_acc;

/* Below this |reference| a percentage error is meaningless (a price of 0, a flat return) and
 * the pair is left out of the MAPE — it still counts for the MAE. */
#define KR_ERR_ACC_APE_MIN_REF 1e-12

/* Adds one pair. A NaN in either value is added as is, so it turns the MAE (and, for a NaN
 * reference, the MAPE) into NaN rather than disappearing. NULL acc: no-op. */
void kr_err_acc_add(kr_err_acc *acc, double predicted, double reference);
/* Mean absolute error; NaN when no pair was added (or acc is NULL). */
double kr_err_acc_mae(const kr_err_acc *acc);
/* Mean absolute percentage error in percent (100 · sum_ape / n_ape); NaN when no pair had a
 * usable reference (or acc is NULL). */
double kr_err_acc_mape(const kr_err_acc *acc);

#endif
