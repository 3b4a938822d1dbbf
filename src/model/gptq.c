/* model/gptq — see gptq.h. */
#include "model/gptq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kernels/kernels.h"

/* ---------------------------------------------------------------- the Hessian */

/* Below this many rows an add is a few rank-1 updates; above, one GEMM of the transposed
 * rows with themselves (the prefill's hundreds of rows per call). */
enum { GEMM_MIN_ROWS = 16 };

kr_status kr_gptq_hessian_init(kr_gptq_hessian *h, int k, kr_error *err) {
    memset(h, 0, sizeof *h);
    h->bad_row = -1;
    if (k < 1) return kr_error_set(err, KR_ERR_INVALID_ARG, "gptq: bad input width %d", k);
    h->k = k;
    h->xtx = calloc((size_t)k * (size_t)k, sizeof *h->xtx);
    if (!h->xtx) return kr_error_set(err, KR_ERR_NOMEM, "gptq: out of memory for a %d² Hessian", k);
    return KR_OK;
}

void kr_gptq_hessian_release(kr_gptq_hessian *h) {
    if (!h) return;
    free(h->xtx);
    memset(h, 0, sizeof *h);
    h->bad_row = -1;
}

static int row_finite(const float *x, int k, int *bad_col) {
    for (int j = 0; j < k; j++)
        if (!isfinite(x[j])) {
            *bad_col = j;
            return 0;
        }
    return 1;
}

static void add_rank1(kr_gptq_hessian *h, const float *x) {
    int k = h->k;
    for (int i = 0; i < k; i++) {
        double xi = x[i];
        if (xi == 0.0) continue;
        double *hr = h->xtx + (size_t)i * (size_t)k;
        for (int j = i; j < k; j++) hr[j] += xi * (double)x[j];
    }
}

void kr_gptq_hessian_add(kr_gptq_hessian *h, const float *x, int m, int ldx) {
    if (!h || !h->xtx || m <= 0) return;
    int k = h->k, n_ok = 0;
    /* Finite rows only: one NaN would poison every entry it meets. */
    int *ok = malloc((size_t)m * sizeof *ok);
    if (!ok) {
        h->oom = 1;
        return;
    }
    for (int r = 0; r < m; r++) {
        int col;
        if (row_finite(x + (size_t)r * (size_t)ldx, k, &col)) {
            ok[n_ok++] = r;
        } else if (h->bad_row < 0) {
            h->bad_row = h->rows + r;
            h->bad_col = col;
        }
    }
    h->rows += m;
    if (n_ok < GEMM_MIN_ROWS) {
        for (int i = 0; i < n_ok; i++) add_rank1(h, x + (size_t)ok[i] * (size_t)ldx);
        free(ok);
        return;
    }
    float *xt = malloc((size_t)k * (size_t)n_ok * sizeof *xt);
    float *c = malloc((size_t)k * (size_t)k * sizeof *c);
    if (!xt || !c) {
        h->oom = 1;
    } else {
        for (int r = 0; r < n_ok; r++) {
            const float *row = x + (size_t)ok[r] * (size_t)ldx;
            for (int j = 0; j < k; j++) xt[(size_t)j * (size_t)n_ok + (size_t)r] = row[j];
        }
        /* C = Xᵀ·X: kr_gemm_f32 multiplies by the transpose of its [N×K] operand. */
        kr_gemm_f32(k, k, n_ok, xt, n_ok, xt, NULL, c, k, 0, 1);
        for (int i = 0; i < k; i++) {
            double *hr = h->xtx + (size_t)i * (size_t)k;
            const float *cr = c + (size_t)i * (size_t)k;
            for (int j = i; j < k; j++) hr[j] += cr[j];
        }
    }
    free(xt);
    free(c);
    free(ok);
}

/* ---------------------------------------------------------------- factorising */

kr_gptq_params kr_gptq_default_params(void) {
    kr_gptq_params p = { .damp = 0.01, .tile_rows = 16 };
    return p;
}

/* R upper triangular with a = R·Rᵀ (Cholesky taken from the last index down). Then
 * U = R⁻¹ is upper triangular with UᵀU = R⁻ᵀR⁻¹ = a⁻¹: the factor GPTQ needs, without
 * forming a⁻¹. Returns 0, or -1 if a pivot is not positive (a not positive definite). */
static int ul_cholesky(const double *a, int k, double *r) {
    memset(r, 0, (size_t)k * (size_t)k * sizeof *r);
    for (int j = k - 1; j >= 0; j--) {
        const double *rj = r + (size_t)j * (size_t)k;
        double v = a[(size_t)j * (size_t)k + (size_t)j];
        for (int l = j + 1; l < k; l++) v -= rj[l] * rj[l];
        /* Relative test: an exactly singular matrix leaves rounding noise (~1e-16 of the
         * diagonal) here rather than 0, and dividing by it would blow the factor up. */
        if (!(v > 1e-10 * a[(size_t)j * (size_t)k + (size_t)j]) || !isfinite(v)) return -1;
        double d = sqrt(v);
        r[(size_t)j * (size_t)k + (size_t)j] = d;
        for (int i = 0; i < j; i++) {
            double *ri = r + (size_t)i * (size_t)k;
            double s = a[(size_t)i * (size_t)k + (size_t)j];
            for (int l = j + 1; l < k; l++) s -= ri[l] * rj[l];
            ri[j] = s / d;
        }
    }
    return 0;
}

/* u (float, [k][k], upper triangle) = R⁻¹, through its transpose v (lower, row-major so the
 * back-substitution reads rows). */
static void upper_inverse(const double *r, int k, double *v, float *u) {
    memset(v, 0, (size_t)k * (size_t)k * sizeof *v);
    for (int c = 0; c < k; c++) {
        double *vc = v + (size_t)c * (size_t)k;
        vc[c] = 1.0 / r[(size_t)c * (size_t)k + (size_t)c];
        for (int i = c - 1; i >= 0; i--) {
            const double *ri = r + (size_t)i * (size_t)k;
            double s = 0.0;
            for (int l = i + 1; l <= c; l++) s += ri[l] * vc[l];
            vc[i] = -s / ri[i];
        }
    }
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++)
            u[(size_t)i * (size_t)k + (size_t)j] =
                j >= i ? (float)v[(size_t)j * (size_t)k + (size_t)i] : 0.0f;
}

/* U of the damped H. An input that was 0 in every row has a zero row and column: its
 * diagonal becomes 1 so H is invertible there, and its weights are plain round-to-nearest
 * (nothing couples them to the other inputs). */
static kr_status factor(const kr_gptq_hessian *h, double damp0, float *u, kr_gptq_stats *st,
                        kr_error *err) {
    int k = h->k;
    size_t kk = (size_t)k * (size_t)k;
    double *a = malloc(kk * sizeof *a), *r = malloc(kk * sizeof *r);
    kr_status s = KR_OK;
    if (!a || !r) s = kr_error_set(err, KR_ERR_NOMEM, "gptq: out of memory for a %d² Hessian", k);
    double mean = 0.0;
    for (int i = 0; s == KR_OK && i < k; i++) {
        double hii = h->xtx[(size_t)i * (size_t)k + (size_t)i];
        if (!(hii > 0.0)) st->dead_inputs++;
        mean += hii > 0.0 ? hii : 1.0;
    }
    mean /= k;
    int ok = 0;
    for (double damp = damp0; s == KR_OK && !ok && damp <= 1.0;
         damp = damp > 0.0 ? damp * 10.0 : 0.01) {
        for (int i = 0; i < k; i++)
            for (int j = i; j < k; j++) {
                double v = h->xtx[(size_t)i * (size_t)k + (size_t)j];
                if (j == i) v = (v > 0.0 ? v : 1.0) + damp * mean;
                a[(size_t)i * (size_t)k + (size_t)j] = a[(size_t)j * (size_t)k + (size_t)i] = v;
            }
        if (ul_cholesky(a, k, r) == 0) {
            ok = 1;
            st->damp_used = damp;
        }
    }
    if (s == KR_OK && !ok)
        s = kr_error_set(err, KR_ERR_INVALID_ARG,
                         "gptq: the calibration Hessian (%d inputs, %lld rows) is not positive "
                         "definite even with damping 1.0 × its mean diagonal",
                         k, (long long)h->rows);
    if (s == KR_OK) upper_inverse(r, k, a, u); /* a reused as scratch */
    for (size_t i = 0; s == KR_OK && i < kk; i++)
        if (!isfinite(u[i]))
            s = kr_error_set(err, KR_ERR_INVALID_ARG,
                             "gptq: the inverse calibration Hessian overflows float (%d inputs)",
                             k);
    free(a);
    free(r);
    return s;
}

/* ---------------------------------------------------------------- quantising the rows */

typedef struct job {
    kr_wfmt fmt;
    int n, k, group, groups, tile_rows;
    const float *w, *u;
    int8_t *codes;
    float *row_scale; /* INT8 */
    uint16_t *gscale; /* Q4 */
    uint8_t *gzero;
    /* per thread: first failure */
    int *fail_row, *fail_group, *oom;
} job;

static float row_absmax(const float *x, int k) {
    float m = 0.0f;
    for (int j = 0; j < k; j++) m = fmaxf(m, fabsf(x[j]));
    return m;
}

/* Quantises rows [r0, r1) with the weights in work ([r1 - r0][k], modified). Returns the
 * failing row (and *fail_group) or -1. */
static int quantize_tile(const job *jb, int r0, int r1, float *work, float *qs, int *qz,
                         int *fail_group) {
    int k = jb->k, t = r1 - r0;
    for (int r = 0; r < t; r++) {
        memcpy(work + (size_t)r * (size_t)k, jb->w + (size_t)(r0 + r) * (size_t)k,
               (size_t)k * sizeof *work);
        if (jb->fmt == KR_WFMT_INT8) {
            qs[r] = row_absmax(work + (size_t)r * (size_t)k, k) / 127.0f;
            jb->row_scale[r0 + r] = qs[r];
            qz[r] = 0;
        }
    }
    for (int i = 0; i < k; i++) {
        if (jb->fmt == KR_WFMT_Q4 && i % jb->group == 0) {
            int g = i / jb->group, len = k - i < jb->group ? k - i : jb->group;
            for (int r = 0; r < t; r++) {
                size_t gi = (size_t)(r0 + r) * (size_t)jb->groups + (size_t)g;
                if (kr_q4_group_params(work + (size_t)r * (size_t)k + i, len, &jb->gscale[gi],
                                       &jb->gzero[gi]) != 0) {
                    *fail_group = g;
                    return r0 + r;
                }
                qs[r] = kr_f16_to_f32(jb->gscale[gi]);
                qz[r] = jb->gzero[gi];
            }
        }
        const float *ui = jb->u + (size_t)i * (size_t)k;
        float d = ui[i];
        for (int r = 0; r < t; r++) {
            float *wr = work + (size_t)r * (size_t)k;
            float x = wr[i], xq;
            int code;
            if (!isfinite(x)) {
                *fail_group = jb->fmt == KR_WFMT_Q4 ? i / jb->group : -1;
                return r0 + r;
            }
            if (jb->fmt == KR_WFMT_INT8) {
                float v = qs[r] > 0.0f ? nearbyintf(x / qs[r]) : 0.0f;
                code = v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v;
                xq = qs[r] * (float)code;
            } else {
                code = kr_q4_code(x, qs[r], qz[r]);
                xq = qs[r] * (float)(code - qz[r]);
            }
            jb->codes[(size_t)(r0 + r) * (size_t)k + (size_t)i] = (int8_t)code;
            float e = (x - xq) / d;
            for (int j = i + 1; j < k; j++) wr[j] -= e * ui[j];
        }
    }
    return -1;
}

static void rows_worker(void *ctx, int ith, int nth) {
    const job *jb = ctx;
    jb->fail_row[ith] = -1;
    int tiles = (jb->n + jb->tile_rows - 1) / jb->tile_rows;
    float *work = malloc((size_t)jb->tile_rows * (size_t)jb->k * sizeof *work);
    float *qs = malloc((size_t)jb->tile_rows * sizeof *qs);
    int *qz = malloc((size_t)jb->tile_rows * sizeof *qz);
    if (!work || !qs || !qz) jb->oom[ith] = 1;
    for (int tl = ith; !jb->oom[ith] && jb->fail_row[ith] < 0 && tl < tiles; tl += nth) {
        int r0 = tl * jb->tile_rows, r1 = r0 + jb->tile_rows < jb->n ? r0 + jb->tile_rows : jb->n;
        jb->fail_row[ith] = quantize_tile(jb, r0, r1, work, qs, qz, &jb->fail_group[ith]);
    }
    free(work);
    free(qs);
    free(qz);
}

static kr_status check_args(kr_wfmt fmt, int n, int k, const float *w, const kr_gptq_hessian *h,
                            int *group, const kr_gptq_params *p, kr_error *err) {
    if (fmt != KR_WFMT_INT8 && fmt != KR_WFMT_Q4)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "gptq: quantises to int8 or q4, not %s",
                            kr_wfmt_name(fmt));
    if (n < 1 || k < 1 || !w || !h || !h->xtx)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "gptq: bad weight (n=%d, k=%d) or no Hessian",
                            n, k);
    if (h->k != k)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "gptq: the calibration Hessian is for %d inputs, the weight has %d",
                            h->k, k);
    if (h->oom)
        return kr_error_set(err, KR_ERR_NOMEM,
                            "gptq: calibration ran out of memory accumulating the Hessian");
    if (h->bad_row >= 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "gptq: calibration input row %lld column %d is not finite",
                            (long long)h->bad_row, h->bad_col);
    if (h->rows < 1)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "gptq: no calibration rows reached this layer (%d inputs)", k);
    if (!(p->damp >= 0.0 && p->damp <= 1.0))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "gptq: damp %g is not in [0, 1]", p->damp);
    if (p->tile_rows < 1)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "gptq: tile_rows %d < 1", p->tile_rows);
    if (fmt == KR_WFMT_Q4) {
        if (*group == 0) *group = KR_Q4_GROUP_DEFAULT;
        if (*group != 32 && *group != 64)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "gptq: q4 group %d (must be 32 or 64)",
                                *group);
    }
    for (int r = 0; r < n; r++)
        for (int j = 0; j < k; j++)
            if (!isfinite(w[(size_t)r * (size_t)k + (size_t)j]))
                return kr_error_set(err, KR_ERR_INVALID_ARG,
                                    "gptq: weight row %d column %d is not finite", r, j);
    return KR_OK;
}

kr_status kr_gptq_quantize(kr_wfmt fmt, int n, int k, const float *w, const kr_gptq_hessian *h,
                           int group, const kr_gptq_params *params, kr_pool *pool,
                           kr_qmat_owned *out, kr_gptq_stats *stats, kr_error *err) {
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "gptq: out is NULL");
    memset(out, 0, sizeof *out);
    kr_gptq_params p = params ? *params : kr_gptq_default_params();
    kr_gptq_stats st_local = { 0 };
    kr_gptq_stats *st = stats ? stats : &st_local;
    memset(st, 0, sizeof *st);
    kr_status s = check_args(fmt, n, k, w, h, &group, &p, err);
    if (s != KR_OK) return s;
    int groups = fmt == KR_WFMT_Q4 ? (k + group - 1) / group : 0;
    int nth = kr_pool_size(pool);
    size_t kk = (size_t)k * (size_t)k;
    float *u = malloc(kk * sizeof *u);
    int8_t *codes = malloc((size_t)n * (size_t)k);
    float *row_scale = fmt == KR_WFMT_INT8 ? malloc((size_t)n * sizeof *row_scale) : NULL;
    uint16_t *gscale = groups ? malloc((size_t)n * (size_t)groups * sizeof *gscale) : NULL;
    uint8_t *gzero = groups ? malloc((size_t)n * (size_t)groups) : NULL;
    int *fail = calloc((size_t)nth * 3, sizeof *fail);
    if (!u || !codes || !fail || (fmt == KR_WFMT_INT8 && !row_scale) ||
        (groups && (!gscale || !gzero)))
        s = kr_error_set(err, KR_ERR_NOMEM, "gptq: out of memory (%d × %d weight)", n, k);
    if (s == KR_OK) s = factor(h, p.damp, u, st, err);
    if (s == KR_OK) {
        job jb = { fmt,       n,      k,     group, groups,     p.tile_rows,   w, u, codes,
                   row_scale, gscale, gzero, fail,  fail + nth, fail + 2 * nth };
        kr_pool_run(pool, rows_worker, &jb);
        for (int t = 0; s == KR_OK && t < nth; t++) {
            if (jb.oom[t])
                s = kr_error_set(err, KR_ERR_NOMEM, "gptq: out of memory");
            else if (jb.fail_row[t] >= 0)
                s = kr_error_set(err, KR_ERR_INVALID_ARG,
                                 "gptq: row %d group %d: the error-compensated weights left the "
                                 "format's range",
                                 jb.fail_row[t], jb.fail_group[t]);
        }
    }
    if (s == KR_OK)
        s = kr_qmat_from_codes(fmt, n, k, group, codes, row_scale, gscale, gzero, out, err);
    free(u);
    free(codes);
    free(row_scale);
    free(gscale);
    free(gzero);
    free(fail);
    return s;
}
