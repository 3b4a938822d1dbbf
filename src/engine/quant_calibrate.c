/*
 * engine/quant_calibrate — kr_model_quantize / kr_model_save_quantized (kronos.h).
 *
 * Calibration runs real forecasts (prefill, decode, s2 head, tokenizer decode: every Linear
 * sees the inputs it sees in service) with each Linear's inputs recorded, then picks per
 * Linear the column scales whose quantised output is closest to the f32 output on a sample
 * of those inputs. The candidates are the published recipes with their usual exponent range:
 *   int8 (W8A8)  SmoothQuant: s_j = max|X_j|^α / max|W_j|^(1-α) moves activation outliers
 *                into the weights, which per-row int8 tolerates better than per-token int8;
 *   q4           AWQ: s_j = mean|X_j|^α protects the weight columns that meet large
 *                activations from 4-bit rounding.
 * "No scaling" is always a candidate, so on the calibration data the chosen scales are never
 * worse than round-to-nearest.
 * GPTQ (q4, int8; model/gptq.h) instead accumulates every Linear's XᵀX over all the
 * calibration rows and quantises each weight with second-order error compensation. A Linear
 * no calibration row reached (none in the shipped architectures) is round-to-nearest.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "kronos.h"
#include "base/threadpool.h"
#include "engine/context.h"
#include "model/gptq.h"
#include "model/model.h"
#include "model/quantize.h"

enum { SAMPLE_ROWS = 256 };

typedef enum method { M_AUTO, M_RTN, M_AWQ, M_SMOOTHQUANT, M_GPTQ } method;

typedef struct net {
    kr_named_linear *ls;
    int n;
    kr_act_stats *stats;
    float **scales;
    kr_gptq_hessian *hess; /* GPTQ only */
    kr_qmat_owned **ready; /* GPTQ only: the quantised weights (malloc'd) */
} net;

static void net_release(net *t) {
    for (int i = 0; i < t->n; i++) {
        t->ls[i].l->stats = NULL;
        if (t->stats) kr_act_stats_release(&t->stats[i]);
        if (t->scales) free(t->scales[i]);
        if (t->hess) kr_gptq_hessian_release(&t->hess[i]);
        if (t->ready && t->ready[i]) {
            kr_qmat_owned_free(t->ready[i]);
            free(t->ready[i]);
        }
    }
    free(t->ls);
    free(t->stats);
    free(t->scales);
    free(t->hess);
    free(t->ready);
    memset(t, 0, sizeof *t);
}

static kr_status net_attach(net *t, uint64_t seed, int gptq, kr_error *err) {
    t->stats = calloc((size_t)t->n, sizeof *t->stats);
    t->scales = calloc((size_t)t->n, sizeof *t->scales);
    if (gptq) {
        t->hess = calloc((size_t)t->n, sizeof *t->hess);
        t->ready = calloc((size_t)t->n, sizeof *t->ready);
    }
    if (!t->stats || !t->scales || (gptq && (!t->hess || !t->ready)))
        return kr_error_set(err, KR_ERR_NOMEM, "calibration: out of memory");
    for (int i = 0; i < t->n; i++) {
        /* GPTQ needs no row sample (it has every row in XᵀX). */
        kr_status st = kr_act_stats_init(&t->stats[i], t->ls[i].l->n_in, gptq ? 0 : SAMPLE_ROWS,
                                         seed + (uint64_t)i, err);
        if (st == KR_OK && gptq) {
            st = kr_gptq_hessian_init(&t->hess[i], t->ls[i].l->n_in, err);
            t->stats[i].hessian = &t->hess[i];
        }
        if (st != KR_OK) {
            kr_error_prefix(err, "calibration: Linear '%s'", t->ls[i].name);
            return st;
        }
        t->ls[i].l->stats = &t->stats[i];
    }
    return KR_OK;
}

/* GPTQ-quantises into t->ready every Linear that saw calibration rows and is not kept bf16. */
static kr_status gptq_net(net *t, kr_wfmt fmt, int group, double damp, kr_pool *pool,
                          kr_error *err) {
    kr_gptq_params gp = kr_gptq_default_params();
    gp.damp = damp;
    for (int i = 0; i < t->n; i++) {
        const kr_linear *l = t->ls[i].l;
        if (kr_model_linear_keeps_bf16(t->ls[i].name, fmt) || t->hess[i].rows == 0) continue;
        kr_qmat_owned *q = calloc(1, sizeof *q);
        if (!q) return kr_error_set(err, KR_ERR_NOMEM, "gptq: out of memory");
        kr_status st = kr_gptq_quantize(fmt, l->n_out, l->n_in, l->w, &t->hess[i], group, &gp, pool,
                                        q, NULL, err);
        if (st != KR_OK) {
            free(q);
            kr_error_prefix(err, "quantize: Linear '%s'", t->ls[i].name);
            return st;
        }
        t->ready[i] = q;
        /* The Hessian is done with: give its memory back before the next one is factorised. */
        kr_gptq_hessian_release(&t->hess[i]);
    }
    return KR_OK;
}

/* Σ (quantised − f32)² of the Linear's output on the sampled rows with column scales cs. */
static kr_status output_error(const kr_linear *l, kr_wfmt fmt, int group, const float *cs,
                              const kr_act_stats *s, const float *yref, float *y, double *out,
                              kr_error *err) {
    kr_qmat_owned q;
    kr_status st = kr_qmat_quantize(fmt, l->n_out, l->n_in, l->w, cs, group, &q, err);
    if (st != KR_OK) return st;
    size_t bytes = kr_qgemm_scratch_bytes(&q.m, s->n_sample, 1);
    void *scratch = NULL;
    if (posix_memalign(&scratch, 64, bytes) != 0) {
        kr_qmat_owned_free(&q);
        return kr_error_set(err, KR_ERR_NOMEM, "calibration: out of memory");
    }
    kr_qgemm_prepare(&q.m, s->n_sample, s->sample, s->k, scratch, 0, s->n_sample);
    kr_qgemm_run(&q.m, s->n_sample, s->sample, s->k, NULL, y, l->n_out, scratch, 0, 1);
    double e = 0;
    for (size_t i = 0; i < (size_t)s->n_sample * (size_t)l->n_out; i++) {
        double d = (double)y[i] - (double)yref[i];
        e += d * d;
    }
    *out = e;
    free(scratch);
    kr_qmat_owned_free(&q);
    return KR_OK;
}

static void candidate_scales(const kr_linear *l, const kr_act_stats *s, kr_wfmt fmt, double alpha,
                             const float *wmax, float *cs) {
    int k = l->n_in;
    double lo = INFINITY, hi = 0;
    for (int j = 0; j < k; j++) {
        double v;
        if (fmt == KR_WFMT_INT8) {
            double x = fmax(s->max_abs[j], 1e-5), w = fmax(wmax[j], 1e-5);
            v = pow(x, alpha) / pow(w, 1.0 - alpha);
        } else {
            double x = fmax(s->sum_abs[j] / (double)(s->rows ? s->rows : 1), 1e-5);
            v = pow(x, alpha);
        }
        v = fmin(fmax(v, 1e-4), 1e4);
        cs[j] = (float)v;
        lo = fmin(lo, v);
        hi = fmax(hi, v);
    }
    /* Only the relative scale of the columns matters; centring it keeps the weights (and so
     * the per-row quantisation scales) in their usual range. */
    double mid = sqrt(lo * hi);
    if (mid > 0)
        for (int j = 0; j < k; j++) cs[j] = (float)fmin(fmax(cs[j] / mid, 1e-4), 1e4);
}

/* Chooses t->scales[i] (NULL = none) for every Linear that saw inputs. */
static kr_status choose_scales(net *t, kr_wfmt fmt, int group, kr_error *err) {
    static const double k_int8_alpha[] = { 0.25, 0.5, 0.75 };
    static const double k_q4_alpha[] = { 0.2, 0.4, 0.5, 0.6, 0.8 };
    const double *alphas = fmt == KR_WFMT_INT8 ? k_int8_alpha : k_q4_alpha;
    int n_alpha = fmt == KR_WFMT_INT8 ? 3 : 5;
    for (int i = 0; i < t->n; i++) {
        const kr_linear *l = t->ls[i].l;
        const kr_act_stats *s = &t->stats[i];
        if (s->n_sample == 0) continue;
        size_t ny = (size_t)s->n_sample * (size_t)l->n_out;
        float *yref = malloc(ny * sizeof *yref), *y = malloc(ny * sizeof *y);
        float *wmax = calloc((size_t)l->n_in, sizeof *wmax);
        float *cs = malloc((size_t)l->n_in * sizeof *cs);
        kr_status st = KR_OK;
        if (!yref || !y || !wmax || !cs)
            st = kr_error_set(err, KR_ERR_NOMEM, "calibration: out of memory");
        if (st == KR_OK) {
            kr_gemm_f32(s->n_sample, l->n_out, l->n_in, s->sample, s->k, l->w, NULL, yref, l->n_out,
                        0, 1);
            for (int r = 0; r < l->n_out; r++)
                for (int j = 0; j < l->n_in; j++)
                    wmax[j] = fmaxf(wmax[j], fabsf(l->w[(size_t)r * (size_t)l->n_in + (size_t)j]));
        }
        double best = 0;
        if (st == KR_OK) st = output_error(l, fmt, group, NULL, s, yref, y, &best, err);
        for (int a = 0; st == KR_OK && a < n_alpha; a++) {
            double e;
            candidate_scales(l, s, fmt, alphas[a], wmax, cs);
            st = output_error(l, fmt, group, cs, s, yref, y, &e, err);
            if (st == KR_OK && e < best) {
                best = e;
                if (!t->scales[i]) t->scales[i] = malloc((size_t)l->n_in * sizeof(float));
                if (!t->scales[i])
                    st = kr_error_set(err, KR_ERR_NOMEM, "calibration: out of memory");
                else
                    memcpy(t->scales[i], cs, (size_t)l->n_in * sizeof(float));
            }
        }
        free(yref);
        free(y);
        free(wmax);
        free(cs);
        if (st != KR_OK) return st;
    }
    return KR_OK;
}

static kr_status calibrate(kr_model *m, kr_wfmt fmt, method meth, const kr_series *calib,
                           int n_calib, int n_threads, net *tok, net *pred, kr_error *err) {
    int gptq = meth == M_GPTQ;
    kr_status st = net_attach(tok, 1, gptq, err);
    if (st == KR_OK) st = net_attach(pred, 1001, gptq, err);
    if (st != KR_OK) return st;
    /* Short forecasts: the prefill supplies most rows; a few steps and two paths make the
     * decode, the s2 head and the tokenizer decoder record their inputs too. */
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 8;
    p.paths = 2;
    p.seed = 7;
    kr_forecast **out = calloc((size_t)n_calib, sizeof *out);
    if (!out) return kr_error_set(err, KR_ERR_NOMEM, "calibration: out of memory");
    /* A context of its own, without the prefix cache: every window's rows are computed, so
     * every Linear sees them. The model has no other context (load-time only). */
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = n_threads;
    cp.prefix_cache = 0;
    kr_context *ctx = NULL;
    st = kr_context_create(m, &cp, &ctx, err);
    /* One window at a time: batched, the engine's step composition (and so the order and
     * grouping in which the Linears see rows) would depend on timing, and with it the AWQ
     * sample and the rounding of GPTQ's XᵀX sums: the same inputs gave different weights. */
    for (int i = 0; st == KR_OK && i < n_calib; i++)
        st = kr_forecast_run(ctx, &calib[i], &p, &out[i], err);
    kr_context_free(ctx);
    for (int i = 0; i < n_calib; i++) kr_forecast_free(out[i]);
    free(out);
    for (int i = 0; i < tok->n; i++) tok->ls[i].l->stats = NULL;
    for (int i = 0; i < pred->n; i++) pred->ls[i].l->stats = NULL;
    if (st != KR_OK) {
        kr_error_prefix(err, "calibration forecast");
        return st;
    }
    if (fmt != KR_WFMT_INT8 && fmt != KR_WFMT_Q4) return KR_OK;
    int group = m->info.quant_group;
    if (gptq) return KR_OK; /* quantised by the caller, from the Hessians */
    if ((st = choose_scales(tok, fmt, group, err)) != KR_OK) return st;
    return choose_scales(pred, fmt, group, err);
}

kr_quantize_params kr_quantize_default_params(void) {
    kr_quantize_params p = {
        .fmt = NULL, .method = NULL, .group = 0, .n_threads = 0, .gptq_damp = 0.01
    };
    return p;
}

static kr_status parse_method(const char *name, kr_wfmt fmt, int n_calib, method *out,
                              kr_error *err) {
    static const char *const names[] = { "auto", "rtn", "awq", "smoothquant", "gptq" };
    int found = -1;
    for (int i = 0; i < 5; i++)
        if (!name || strcmp(name, names[i]) == 0) {
            found = name ? i : 0;
            break;
        }
    if (found < 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "quantize: method '%s' is not one of rtn, awq, smoothquant, gptq",
                            name);
    *out = (method)found;
    const char *fn = kr_wfmt_name(fmt);
    if (*out == M_AWQ && fmt != KR_WFMT_Q4)
        return kr_error_set(
            err, KR_ERR_INVALID_ARG, "quantize: method awq applies to q4, not %s%s", fn,
            fmt == KR_WFMT_INT8 ? " (int8's calibrated method is smoothquant)" : "");
    if (*out == M_SMOOTHQUANT && fmt != KR_WFMT_INT8)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "quantize: method smoothquant applies to int8, not %s", fn);
    if (*out == M_GPTQ && fmt != KR_WFMT_Q4 && fmt != KR_WFMT_INT8)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "quantize: method gptq applies to q4 and int8, not %s", fn);
    if ((*out == M_AWQ || *out == M_SMOOTHQUANT || *out == M_GPTQ) && n_calib <= 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "quantize: method %s needs calibration series (kronos quantize "
                            "--calib CSV)",
                            names[found]);
    if (*out == M_AUTO)
        *out = n_calib <= 0          ? M_RTN
               : fmt == KR_WFMT_Q4   ? M_AWQ
               : fmt == KR_WFMT_INT8 ? M_SMOOTHQUANT
                                     : M_RTN;
    return KR_OK;
}

/* Quantises m, a model no one else holds yet, in place. */
static kr_status quantize_own(kr_model *m, const kr_quantize_params *params, const kr_series *calib,
                              int n_calib, kr_error *err) {
    const char *fmt_name = params->fmt;
    int group = params->group, n_threads = params->n_threads;
    kr_wfmt fmt;
    if (kr_wfmt_parse(fmt_name, &fmt) != 0 || fmt == KR_WFMT_F32)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "quantize: format '%s' is not one of bf16, int8, fp8, q4", fmt_name);
    if (group <= 0) group = KR_Q4_GROUP_DEFAULT;
    if (group != 32 && group != 64)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "quantize: q4 group %d is not 32 or 64",
                            group);
    method meth = M_AUTO;
    kr_status st = parse_method(params->method, fmt, n_calib, &meth, err);
    if (st != KR_OK) return st;
    if (meth == M_GPTQ && !(params->gptq_damp >= 0.0 && params->gptq_damp <= 1.0))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "quantize: gptq damp %g is not in [0, 1]",
                            params->gptq_damp);
    double t0 = kr_now_seconds();
    net tok = { 0 }, pred = { 0 };
    st = kr_tokenizer_linears(m->tok, &tok.ls, &tok.n, err);
    if (st == KR_OK) st = kr_predictor_linears(m->pred, &pred.ls, &pred.n, err);
    static const char *const method_names[] = { "rtn", "rtn", "awq", "smoothquant", "gptq" };
    if (st == KR_OK && meth != M_RTN) {
        m->info.quant_group = group; /* read by calibrate */
        st = calibrate(m, fmt, meth, calib, n_calib, n_threads, &tok, &pred, err);
    }
    if (st == KR_OK && meth == M_GPTQ) {
        kr_pool *pool = NULL;
        st = kr_pool_create(n_threads, &pool, err);
        if (st == KR_OK) st = gptq_net(&tok, fmt, group, params->gptq_damp, pool, err);
        if (st == KR_OK) st = gptq_net(&pred, fmt, group, params->gptq_damp, pool, err);
        kr_pool_free(pool);
    }
    if (st == KR_OK)
        st = kr_model_quantize_linears(m, fmt, group, (const float *const *)tok.scales,
                                       (const float *const *)pred.scales, tok.ready, pred.ready,
                                       method_names[meth], err);
    net_release(&tok);
    net_release(&pred);
    if (st == KR_OK) m->info.quant_seconds = kr_now_seconds() - t0;
    return st;
}

kr_status kr_model_quantize(const kr_model *src, const kr_quantize_params *params,
                            const kr_series *calib, int n_calib, kr_model **out, kr_error *err) {
    if (out) *out = NULL;
    if (!src || !params || !params->fmt || !out || (n_calib > 0 && !calib))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_model_quantize: NULL argument");
    if (n_calib < 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "quantize: n_calib must be >= 0 (0: no calibration), got %d", n_calib);
    /* The weights change on a model of its own, which no context reads yet: src, and whatever
     * runs on it, is not touched. */
    kr_model *m = NULL;
    kr_status st = kr_model_load_f32_copy(src, &m, err);
    if (st == KR_OK) st = quantize_own(m, params, calib, n_calib, err);
    if (st != KR_OK) {
        kr_model_free(m);
        return st;
    }
    *out = m;
    return KR_OK;
}

kr_status kr_model_save_quantized(const kr_model *m, const char *out_dir, kr_error *err) {
    if (!m || !out_dir)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_model_save_quantized: NULL argument");
    if (!m->pred->blocks[0].w1.q)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "save: the model is not quantised");
    return kr_quantized_pair_save(m->pred, m->tok, m->info.quant_method, out_dir, err);
}
