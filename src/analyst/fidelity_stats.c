/* analyst/fidelity_stats — see fidelity_stats.h. */
#include "analyst/fidelity_stats.h"

#include <math.h>
#include <stdlib.h>

#include "analyst/stats.h"

static int any_nan(const double *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (isnan(x[i])) return 1;
    return 0;
}

/* ---------------------------------------------------------------- ranks */

typedef struct value_index {
    double v;
    int64_t i;
} value_index;

static int cmp_value_index(const void *pa, const void *pb) {
    const value_index *a = pa, *b = pb;
    if (a->v != b->v) return (a->v > b->v) - (a->v < b->v);
    /* The index as tie-break only makes the order reproducible across qsort implementations;
     * tied values get the same rank whatever their order. */
    return (a->i > b->i) - (a->i < b->i);
}

/* 1-based ranks of NaN-free x, tied values sharing the mean of the ranks they span. */
static kr_status average_ranks(const double *x, int64_t n, double *ranks) {
    value_index *vi = malloc((size_t)(n > 0 ? n : 1) * sizeof *vi);
    if (!vi) return KR_ERR_NOMEM;
    for (int64_t k = 0; k < n; k++) vi[k] = (value_index){ x[k], k };
    qsort(vi, (size_t)n, sizeof *vi, cmp_value_index);
    for (int64_t lo = 0; lo < n;) {
        int64_t hi = lo + 1;
        while (hi < n && vi[hi].v == vi[lo].v) hi++;
        /* positions lo..hi-1 hold ranks lo+1..hi, whose mean is (lo + 1 + hi) / 2 */
        double r = 0.5 * (double)(lo + 1 + hi);
        for (int64_t k = lo; k < hi; k++) ranks[vi[k].i] = r;
        lo = hi;
    }
    free(vi);
    return KR_OK;
}

/* ---------------------------------------------------------------- Kolmogorov–Smirnov */

double kr_ks_sf(double lambda) {
    if (isnan(lambda)) return NAN;
    if (lambda <= 0.0) return 1.0;
    double q;
    if (lambda < 1.18) {
        /* The alternating series converges slowly (and cancels) for small λ; the Jacobi theta
         * transform of the same function, 1 - sqrt(2π)/λ Σ_{k>=1} exp(-(2k-1)² π² / (8λ²)),
         * converges in a handful of terms there. 1.18 is where both need about as many. */
        const double c = -M_PI * M_PI / (8.0 * lambda * lambda);
        double s = 0.0;
        for (int k = 1; k <= 20; k++) {
            double t = exp(c * (double)((2 * k - 1) * (2 * k - 1)));
            s += t;
            if (t < 1e-17 * s) break;
        }
        q = 1.0 - sqrt(2.0 * M_PI) / lambda * s;
    } else {
        double s = 0.0, sign = 1.0;
        for (int j = 1; j <= 100; j++) {
            double t = exp(-2.0 * (double)j * (double)j * lambda * lambda);
            s += sign * t;
            if (t <= 1e-17 * s) break;
            sign = -sign;
        }
        q = 2.0 * s;
    }
    return q < 0.0 ? 0.0 : q > 1.0 ? 1.0 : q;
}

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Floor and ceiling of p / q for q > 0 and any sign of p (C's '/' truncates toward zero). */
static int64_t floor_div(int64_t p, int64_t q) { return p >= 0 ? p / q : -((-p + q - 1) / q); }
static int64_t ceil_div(int64_t p, int64_t q) { return p >= 0 ? (p + q - 1) / q : -((-p) / q); }

/*
 * P(D >= h / lcm(m, n)) for two samples of sizes m and n under the null hypothesis. The pooled
 * ordering is a monotone lattice path from (0,0) to (m,n), each of the C(m+n, n) paths equally
 * likely; the path's point (i, j) has F_a - F_b = i/m - j/n, i.e. (i·ng - j·mg) / lcm with
 * mg = m/g, ng = n/g. V(i, j) is the fraction of the paths from (0,0) to (i,j) that have
 * already touched |i·ng - j·mg| >= h: 1 on such points, and elsewhere the average of its two
 * predecessors weighted by how many paths arrive through each,
 *   V(i, j) = (i·V(i-1, j) + j·V(i, j-1)) / (i + j),
 * since C(i+j-1, i-1) / C(i+j, i) = i / (i+j). Working with these fractions instead of path
 * counts keeps every value in [0, 1] (no overflow, where counts reach C(20000, 10000) ~ 1e6019)
 * and sums only non-negative terms (no cancellation, so a small p keeps its relative accuracy,
 * unlike 1 - P(inside)). Only the band of points inside the boundary changes from column to
 * column; one array of n + 1 values indexed by j holds the current column.
 */
static kr_status ks2_exact_sf(int64_t m, int64_t n, int64_t h, double *p) {
    if (h <= 0) {
        *p = 1.0;
        return KR_OK;
    }
    if (m < n) {
        int64_t t = m;
        m = n;
        n = t;
    }
    int64_t g = gcd64(m, n), mg = m / g, ng = n / g;
    double *v = malloc((size_t)(n + 1) * sizeof *v);
    if (!v) return KR_ERR_NOMEM;
    /* Column i = 0: from (0,0) straight up; inside while j·mg < h, and nothing is touched. */
    for (int64_t j = 0; j <= n; j++) v[j] = j * mg < h ? 0.0 : 1.0;
    int64_t prev_lo = 0;
    for (int64_t i = 1; i <= m; i++) {
        /* Inside: i·ng - h < j·mg < i·ng + h. Both ends only move up as i grows. */
        int64_t lo = floor_div(i * ng - h, mg) + 1, hi = ceil_div(i * ng + h, mg) - 1;
        if (lo < 0) lo = 0;
        if (hi > n) hi = n;
        if (lo > hi) { /* a column with no inside point: every path crosses the boundary */
            free(v);
            *p = 1.0;
            return KR_OK;
        }
        /* Points that fell below the band are now boundary points; above it they already are
         * (never written since the initial column). */
        for (int64_t j = prev_lo; j < lo; j++) v[j] = 1.0;
        const double di = (double)i;
        for (int64_t j = lo; j <= hi; j++)
            if (j > 0) v[j] = (di * v[j] + (double)j * v[j - 1]) / (di + (double)j);
        /* j == 0 is reached only along the bottom edge: V(i,0) = V(i-1,0), already in v[0]. */
        prev_lo = lo;
    }
    double r = v[n];
    free(v);
    *p = r < 0.0 ? 0.0 : r > 1.0 ? 1.0 : r;
    return KR_OK;
}

kr_status kr_ks2_test(const double *a, int64_t na, const double *b, int64_t nb, double *statistic,
                      double *p_value) {
    if (!statistic || !p_value || na < 0 || nb < 0 || na > INT32_MAX || nb > INT32_MAX ||
        (na > 0 && !a) || (nb > 0 && !b))
        return KR_ERR_INVALID_ARG;
    *statistic = NAN;
    *p_value = NAN;
    if (na == 0 || nb == 0 || any_nan(a, na) || any_nan(b, nb)) return KR_OK;

    double *sa = malloc((size_t)(na + nb) * sizeof *sa);
    if (!sa) return KR_ERR_NOMEM;
    double *sb = sa + na;
    for (int64_t k = 0; k < na; k++) sa[k] = a[k];
    for (int64_t k = 0; k < nb; k++) sb[k] = b[k];
    kr_stat_sort(sa, na);
    kr_stat_sort(sb, nb);

    /* F_a - F_b at a point where i of a and j of b are <= x is (i·nb - j·na) / (na·nb); kept
     * as that integer numerator so D is exact and the lattice boundary needs no rounding.
     * Both CDFs are stepped past every copy of a value before comparing: with ties, the
     * positions between copies are not points of either CDF. Once one sample is used up the
     * difference only shrinks, so the loop may stop there. */
    int64_t i = 0, j = 0, dmax = 0;
    while (i < na && j < nb) {
        double x = sa[i] < sb[j] ? sa[i] : sb[j];
        while (i < na && sa[i] <= x) i++;
        while (j < nb && sb[j] <= x) j++;
        int64_t d = i * nb - j * na;
        if (d < 0) d = -d;
        if (d > dmax) dmax = d;
    }
    free(sa);

    const double d = (double)dmax / ((double)na * (double)nb);
    *statistic = d;
    if (na * nb <= KR_KS_EXACT_MAX_CELLS) {
        /* In units of 1/lcm(na, nb) = g/(na·nb) the statistic is the integer dmax / g. */
        kr_status st = ks2_exact_sf(na, nb, dmax / gcd64(na, nb), p_value);
        if (st != KR_OK) *p_value = NAN;
        return st;
    }
    const double en = sqrt((double)na * (double)nb / ((double)na + (double)nb));
    *p_value = kr_ks_sf((en + 0.12 + 0.11 / en) * d);
    return KR_OK;
}

/* ---------------------------------------------------------------- ROC AUC, Spearman */

kr_status kr_roc_auc(const double *score, const int *label, int64_t n, double *auc) {
    if (!auc || n < 0 || (n > 0 && (!score || !label))) return KR_ERR_INVALID_ARG;
    for (int64_t k = 0; k < n; k++)
        if (label[k] != 0 && label[k] != 1) return KR_ERR_INVALID_ARG;
    *auc = NAN;
    int64_t npos = 0;
    for (int64_t k = 0; k < n; k++) npos += label[k];
    const int64_t nneg = n - npos;
    if (npos == 0 || nneg == 0 || any_nan(score, n)) return KR_OK;

    double *rank = malloc((size_t)n * sizeof *rank);
    if (!rank) return KR_ERR_NOMEM;
    kr_status st = average_ranks(score, n, rank);
    if (st == KR_OK) {
        /* Ranks are multiples of 1/2, so this sum is exact in double far beyond any n here. */
        double rsum = 0.0;
        for (int64_t k = 0; k < n; k++)
            if (label[k]) rsum += rank[k];
        /* Mann–Whitney U of the positives: their rank sum minus the smallest it could be. */
        double u = rsum - 0.5 * (double)npos * (double)(npos + 1);
        *auc = u / ((double)npos * (double)nneg);
    }
    free(rank);
    return st;
}

kr_status kr_ks_separation(const double *score, const int *label, int64_t n, double *statistic,
                           double *p_value, int64_t *n_pos, int64_t *n_neg) {
    if (!statistic || !p_value || n < 0 || (n > 0 && (!score || !label))) return KR_ERR_INVALID_ARG;
    int64_t npos = 0;
    for (int64_t k = 0; k < n; k++) {
        if (label[k] != 0 && label[k] != 1) return KR_ERR_INVALID_ARG;
        npos += label[k];
    }
    if (n_pos) *n_pos = npos;
    if (n_neg) *n_neg = n - npos;
    *statistic = NAN;
    *p_value = NAN;
    if (npos == 0 || npos == n) return KR_OK;
    double *pos = malloc((size_t)n * sizeof *pos);
    if (!pos) return KR_ERR_NOMEM;
    double *neg = pos + npos;
    int64_t ip = 0, in = 0;
    for (int64_t k = 0; k < n; k++) {
        if (label[k])
            pos[ip++] = score[k];
        else
            neg[in++] = score[k];
    }
    kr_status st = kr_ks2_test(pos, npos, neg, n - npos, statistic, p_value);
    free(pos);
    return st;
}

kr_status kr_spearman(const double *x, const double *y, int64_t n, double *rho) {
    if (!rho || n < 0 || (n > 0 && (!x || !y))) return KR_ERR_INVALID_ARG;
    *rho = NAN;
    if (n < 2 || any_nan(x, n) || any_nan(y, n)) return KR_OK;

    double *rx = malloc((size_t)(2 * n) * sizeof *rx);
    if (!rx) return KR_ERR_NOMEM;
    double *ry = rx + n;
    kr_status st = average_ranks(x, n, rx);
    if (st == KR_OK) st = average_ranks(y, n, ry);
    if (st == KR_OK) {
        /* Average ranks always have mean (n+1)/2; centring on it exactly avoids a pass. */
        const double mean = 0.5 * (double)(n + 1);
        double sxy = 0.0, sxx = 0.0, syy = 0.0;
        for (int64_t k = 0; k < n; k++) {
            double dx = rx[k] - mean, dy = ry[k] - mean;
            sxy += dx * dy;
            sxx += dx * dx;
            syy += dy * dy;
        }
        if (sxx > 0.0 && syy > 0.0) {
            double r = sxy / sqrt(sxx * syy);
            *rho = r < -1.0 ? -1.0 : r > 1.0 ? 1.0 : r;
        }
    }
    free(rx);
    return st;
}

/* ---------------------------------------------------------------- logits */

/* φ(x) = e^{-x} - 1 + x >= 0. Near 0 the three terms cancel down to ~x²/2, so there it is the
 * Taylor series Σ_{k>=2} (-x)^k / k!; 18 terms reach double precision for |x| <= 0.5. */
static double phi_small(double x) {
    /* With y = -x: (y²/2)(1 + y/3 (1 + y/4 (1 + ... (1 + y/18)))). */
    const double y = -x;
    double s = 1.0;
    for (int k = 18; k >= 3; k--) s = 1.0 + y * s / (double)k;
    return 0.5 * y * y * s;
}

/* e_k = (pl_k - ql_k) - μ, see below. */
static double kl_e(float pl, float ql, double mu) { return ((double)pl - (double)ql) - mu; }

kr_status kr_kl_divergence_logits(const float *p_logits, const float *q_logits, int n, double *kl) {
    if (!kl || n < 0 || (n > 0 && (!p_logits || !q_logits))) return KR_ERR_INVALID_ARG;
    *kl = NAN;
    if (n == 0) return KR_OK;
    double pmax = -INFINITY, qmax = -INFINITY;
    int q_masked_under_p = 0;
    for (int k = 0; k < n; k++) {
        double pl = p_logits[k], ql = q_logits[k];
        if (isnan(pl) || isnan(ql) || pl == INFINITY || ql == INFINITY) return KR_OK;
        if (pl > pmax) pmax = pl;
        if (ql > qmax) qmax = ql;
        if (pl > -INFINITY && ql == -INFINITY) q_masked_under_p = 1;
    }
    if (pmax == -INFINITY || qmax == -INFINITY) return KR_OK;
    if (q_masked_under_p) {
        *kl = INFINITY;
        return KR_OK;
    }

    /* P from its logits: p_k = exp(pl_k - pmax) / sp, log p_k = pl_k - pmax - log sp. */
    double sp = 0.0;
    for (int k = 0; k < n; k++) sp += exp((double)p_logits[k] - pmax);
    const double log_sp = log(sp);

    /* With d_k = pl_k - ql_k, any constant μ and e_k = d_k - μ, the two normalising constants
     * cancel into KL = Σ p_k e_k + log Σ p_k e^{-e_k} (sums over P's support). Taking
     * μ = Σ p_k d_k zeroes the first sum, and with Σ p_k = 1 the second becomes
     *   KL = log1p(Σ p_k φ(e_k)),  φ(x) = e^{-x} - 1 + x >= 0,
     * a sum of non-negative terms: no subtraction of two nearly equal cross-entropies, hence
     * >= 0 and accurate even when P and Q differ in the last bits of the logits. The rounding
     * that leaves Σ p_k e_k slightly off zero moves the result only at second order. */
    double mu = 0.0;
    for (int k = 0; k < n; k++) {
        if (p_logits[k] == -INFINITY) continue;
        double pk = exp((double)p_logits[k] - pmax) / sp;
        mu += pk * kl_e(p_logits[k], q_logits[k], 0.0);
    }
    /* t_k = log(p_k e^{-e_k}), so KL = log Σ e^{t_k} >= max t_k. Once that is above 1 there is
     * no small difference left to protect, and only the log-domain sum avoids overflow (the
     * terms reach e^KL: KL > 709 is reachable with logits a few hundred apart). */
    double tmax = -INFINITY;
    for (int k = 0; k < n; k++) {
        if (p_logits[k] == -INFINITY) continue; /* p_k = 0: no contribution */
        double logp = (double)p_logits[k] - pmax - log_sp, e = kl_e(p_logits[k], q_logits[k], mu);
        if (logp - e > tmax) tmax = logp - e;
    }
    double r, s = 0.0;
    for (int k = 0; k < n; k++) {
        if (p_logits[k] == -INFINITY) continue;
        double logp = (double)p_logits[k] - pmax - log_sp, e = kl_e(p_logits[k], q_logits[k], mu);
        if (tmax > 1.0)
            s += exp(logp - e - tmax);
        else if (fabs(e) <= 0.5)
            s += exp(logp) * phi_small(e);
        else /* p_k e^{-e} in the log domain: p_k may have underflowed while the product has not */
            s += exp(logp - e) + exp(logp) * (e - 1.0);
    }
    r = tmax > 1.0 ? tmax + log(s) : log1p(s);

    /* All of the above sees only P's support S, i.e. Q renormalised on S. Q's mass outside S
     * (where P has -inf logits) adds -log Q(S) = log(1 + Q(out)/Q(in)) > 0, taken from the
     * log-sum-exp of each part so neither a small outside mass nor a vanishing inside one
     * loses its digits. */
    double in_max = -INFINITY, out_max = -INFINITY;
    for (int k = 0; k < n; k++) {
        double ql = q_logits[k];
        if (p_logits[k] > -INFINITY) {
            if (ql > in_max) in_max = ql;
        } else if (ql > out_max) {
            out_max = ql;
        }
    }
    if (out_max > -INFINITY) {
        double s_in = 0.0, s_out = 0.0;
        for (int k = 0; k < n; k++) {
            if (p_logits[k] > -INFINITY)
                s_in += exp((double)q_logits[k] - in_max);
            else
                s_out += exp((double)q_logits[k] - out_max);
        }
        const double x = (out_max + log(s_out)) - (in_max + log(s_in));
        r += x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
    }
    *kl = r > 0.0 ? r : 0.0;
    return KR_OK;
}

int kr_top1(const float *logits, int n) {
    if (!logits || n < 1) return -1;
    int best = -1;
    for (int k = 0; k < n; k++) {
        if (isnan(logits[k])) continue;
        if (best < 0 || logits[k] > logits[best]) best = k;
    }
    return best;
}

/* ---------------------------------------------------------------- forecast errors */

void kr_err_acc_add(kr_err_acc *acc, double predicted, double reference) {
    if (!acc) return;
    double err = fabs(predicted - reference);
    acc->sum_abs += err;
    acc->n++;
    /* Written as !(a < b) so a NaN reference is kept (and poisons the MAPE) rather than
     * silently skipped as "too small". */
    if (!(fabs(reference) < KR_ERR_ACC_APE_MIN_REF)) {
        acc->sum_ape += err / fabs(reference);
        acc->n_ape++;
    }
}

double kr_err_acc_mae(const kr_err_acc *acc) {
    if (!acc || acc->n < 1) return NAN;
    return acc->sum_abs / (double)acc->n;
}

double kr_err_acc_mape(const kr_err_acc *acc) {
    if (!acc || acc->n_ape < 1) return NAN;
    return 100.0 * acc->sum_ape / (double)acc->n_ape;
}
