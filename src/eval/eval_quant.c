/*
 * eval/eval_quant — what a quantised format costs in accuracy, in numbers. The f32 model and
 * the quantised one see the same real windows:
 *
 *   next-token fidelity (teacher forcing over every window, both predictors on the f32
 *     tokenizer's tokens): top-1 agreement of s1 and s2, mean KL(f32 ‖ quantised);
 *     tokenizer agreement (the quantised tokenizer's own tokens vs f32's);
 *   the draft acceptance a self-speculative decoder would see with the quantised model as
 *     its draft (draft_acceptance.h: same draws, same sampling as the forecasts);
 *   forecast fidelity (same seed, same paths): MAE / MAPE of the mean close path against
 *     f32 and against the candles that followed, direction agreement, a two-sample KS test of
 *     the pooled path returns, ROC-AUC of P(up) against the realised direction for both, the
 *     risk-control KS statistic of P(up) (the distance between its CDFs over windows that went
 *     up and windows that went down) for both, and the Spearman correlation of expected returns across windows and across symbols
 *     (latest window of each file).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "engine/teacher.h"
#include "eval/eval_quant_internal.h"
#include "series/candles.h"
#include "model/model.h"
#include "model/quantize.h"

#define MAX_FILES 256

kr_eval_quant_params kr_eval_quant_default_params(void) {
    kr_eval_quant_params p = { 0 };
    p.windows = 16;
    p.lookback = 256;
    p.pred_len = 24;
    p.paths = 32;
    p.seed = 1;
    return p;
}

/* Logit (= log-probability) lead of the top token over the next best. */
static double top_gap(const float *logits, int n, int top) {
    float second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != top && logits[i] > second) second = logits[i];
    return (double)logits[top] - (double)second;
}

/* The sampling a forecast with default parameters does (run_phases forecasts with them). */
static kr_sampler_params forecast_sampling(void) {
    kr_forecast_params fp = kr_forecast_default_params();
    return (kr_sampler_params){ fp.temperature, fp.top_k, fp.top_p };
}

static kr_status teacher_window(kr_context *ref, kr_context *q, const kr_series *s, int L, int V1,
                                int V2, uint64_t seed, int window, kr_eval_quant_report *r,
                                kr_error *err) {
    size_t n = (size_t)(L - 1);
    int32_t *t1 = malloc((size_t)L * 4), *t2 = malloc((size_t)L * 4), *u1 = malloc((size_t)L * 4),
            *u2 = malloc((size_t)L * 4);
    float *a1 = malloc(n * (size_t)V1 * 4), *a2 = malloc(n * (size_t)V2 * 4);
    float *b1 = malloc(n * (size_t)V1 * 4), *b2 = malloc(n * (size_t)V2 * 4);
    kr_status st = KR_OK;
    if (!t1 || !t2 || !u1 || !u2 || !a1 || !a2 || !b1 || !b2)
        st = kr_error_set(err, KR_ERR_NOMEM, "eval-quant: out of memory");
    if (st == KR_OK) st = kr_teacher_logits(ref, s, L, NULL, NULL, t1, t2, a1, a2, err);
    if (st == KR_OK) st = kr_teacher_logits(q, s, L, t1, t2, u1, u2, b1, b2, err);
    for (size_t t = 0; st == KR_OK && t < n; t++) {
        const float *p1 = a1 + t * (size_t)V1, *q1 = b1 + t * (size_t)V1;
        const float *p2 = a2 + t * (size_t)V2, *q2 = b2 + t * (size_t)V2;
        double k1, k2;
        kr_kl_divergence_logits(p1, q1, V1, &k1);
        kr_kl_divergence_logits(p2, q2, V2, &k2);
        r->kl_s1 += k1;
        r->kl_s2 += k2;
        int top = kr_top1(p1, V1), agree = top == kr_top1(q1, V1);
        r->s1_agree += agree;
        if (top >= 0 && top_gap(p1, V1, top) >= KR_EVAL_DECISIVE_NATS) {
            r->s1_decisive++;
            r->s1_decisive_agree += agree;
        }
        r->s2_agree += kr_top1(p2, V2) == kr_top1(q2, V2);
        r->positions++;
    }
    kr_sampler_params sp = forecast_sampling();
    if (st == KR_OK)
        st = kr_draft_acceptance_add(&r->draft, a1, b1, a2, b2, (int)n, V1, V2, &sp, seed,
                                     (uint64_t)window, err);
    for (int t = 0; st == KR_OK && t < L; t++) {
        r->tok_s1_agree += t1[t] == u1[t];
        r->tok_s2_agree += t2[t] == u2[t];
        r->tok_rows++;
    }
    free(t1);
    free(t2);
    free(u1);
    free(u2);
    free(a1);
    free(a2);
    free(b1);
    free(b2);
    return st;
}

/* Bytes of the predictor's Linears as held: what a decode step streams (the embeddings are
 * read a row per token). 0 when they cannot be listed. */
static size_t predictor_linear_bytes(const kr_context *ctx) {
    /* Listing only reads the Linears; the model stays immutable. */
    kr_predictor_weights *pw = kr_context_model(ctx)->pred;
    kr_named_linear *ls = NULL;
    int n = 0;
    size_t bytes = 0;
    if (kr_predictor_linears(pw, &ls, &n, NULL) != KR_OK) return 0;
    for (int i = 0; i < n; i++) {
        const kr_linear *l = ls[i].l;
        bytes += l->q ? kr_qmat_bytes(l->q) : (size_t)l->n_out * (size_t)l->n_in * sizeof(float);
    }
    free(ls);
    return bytes;
}

/* Return of each path at the horizon, P(up) and the expected return of one forecast. */
static void path_returns(const kr_forecast *f, double last_close, double *ret, double *pup,
                         double *er) {
    int P = kr_forecast_pred_len(f), n = kr_forecast_paths(f), up = 0;
    double sum = 0;
    for (int p = 0; p < n; p++) {
        double c = kr_forecast_path(f, p)[(size_t)(P - 1) * 6 + KR_CLOSE];
        ret[p] = c / last_close - 1.0;
        up += ret[p] > 0;
        sum += ret[p];
    }
    *pup = (double)up / n;
    *er = sum / n;
}

/* The evaluation windows and what followed each; views into the files. */
typedef struct window_set {
    kr_candles *files[MAX_FILES];
    int n_files;
    kr_series *series;
    double *last_close;
    const double **actual; /* [pred_len][6] rows after the window */
    int *file_of;
    int n;
} window_set;

static void window_set_free(window_set *w) {
    for (int f = 0; f < w->n_files; f++) kr_candles_free(w->files[f]);
    free(w->series);
    free(w->last_close);
    free(w->actual);
    free(w->file_of);
}

/* Windows end at evenly spaced rows of each file, each followed by pred_len real candles. */
static kr_status window_set_load(const kr_eval_quant_params *p, window_set *w, kr_error *err) {
    int L = p->lookback, H = p->pred_len, cap = p->n_data * p->windows;
    memset(w, 0, sizeof *w);
    w->series = calloc((size_t)cap, sizeof *w->series);
    w->last_close = calloc((size_t)cap, sizeof *w->last_close);
    w->actual = calloc((size_t)cap, sizeof *w->actual);
    w->file_of = calloc((size_t)cap, sizeof *w->file_of);
    if (!w->series || !w->last_close || !w->actual || !w->file_of)
        return kr_error_set(err, KR_ERR_NOMEM, "eval-quant: out of memory");
    for (int f = 0; f < p->n_data; f++) {
        kr_status st = kr_candles_read_csv(p->data[f], &w->files[f], err);
        if (st != KR_OK) return st;
        w->n_files++;
        int64_t n = w->files[f]->n;
        if (n < L + H)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: %lld rows, a window needs %d + %d",
                                p->data[f], (long long)n, L, H);
        int k = (int)(n - L - H + 1 < p->windows ? n - L - H + 1 : p->windows);
        for (int i = 0; i < k; i++) {
            int64_t end = k == 1 ? n - H : L + (n - H - L) * i / (k - 1);
            w->series[w->n] = kr_candles_slice(w->files[f], end - L, L);
            w->series[w->n].future_timestamps = w->files[f]->timestamps + end;
            w->last_close[w->n] = w->files[f]->values[(size_t)(end - 1) * 6 + KR_CLOSE];
            w->actual[w->n] = w->files[f]->values + (size_t)end * 6;
            w->file_of[w->n] = f;
            w->n++;
        }
    }
    return KR_OK;
}

/* Per-window and pooled figures of both forecasts, reduced into the report's statistics. */
static kr_status compare_forecasts(const window_set *w, kr_forecast **fr, kr_forecast **fq,
                                   const kr_eval_quant_params *p, kr_eval_quant_report *r,
                                   kr_error *err) {
    int nw = w->n, H = p->pred_len;
    double *ret_ref = malloc((size_t)nw * (size_t)p->paths * sizeof(double));
    double *ret_q = malloc((size_t)nw * (size_t)p->paths * sizeof(double));
    double *pup_ref = malloc((size_t)nw * sizeof(double)), *pup_q = malloc((size_t)nw * 8);
    double *er_ref = malloc((size_t)nw * sizeof(double)), *er_q = malloc((size_t)nw * 8);
    double *sym_ref = malloc((size_t)w->n_files * 8), *sym_q = malloc((size_t)w->n_files * 8);
    int *up = malloc((size_t)nw * sizeof(int));
    kr_status st = KR_OK;
    if (!ret_ref || !ret_q || !pup_ref || !pup_q || !er_ref || !er_q || !sym_ref || !sym_q || !up)
        st = kr_error_set(err, KR_ERR_NOMEM, "eval-quant: out of memory");
    for (int i = 0; st == KR_OK && i < nw; i++) {
        const double *mr = kr_forecast_mean(fr[i]), *mq = kr_forecast_mean(fq[i]);
        for (int t = 0; t < H; t++) {
            double a = w->actual[i][(size_t)t * 6 + KR_CLOSE];
            kr_err_acc_add(&r->vs_ref, mq[(size_t)t * 6 + KR_CLOSE], mr[(size_t)t * 6 + KR_CLOSE]);
            kr_err_acc_add(&r->ref_vs_actual, mr[(size_t)t * 6 + KR_CLOSE], a);
            kr_err_acc_add(&r->q_vs_actual, mq[(size_t)t * 6 + KR_CLOSE], a);
        }
        double dr = mr[(size_t)(H - 1) * 6 + KR_CLOSE] - w->last_close[i];
        double dq = mq[(size_t)(H - 1) * 6 + KR_CLOSE] - w->last_close[i];
        r->dir_agree += (dr > 0) == (dq > 0);
        path_returns(fr[i], w->last_close[i], ret_ref + r->n_ret, &pup_ref[i], &er_ref[i]);
        path_returns(fq[i], w->last_close[i], ret_q + r->n_ret, &pup_q[i], &er_q[i]);
        r->n_ret += p->paths;
        up[i] = w->actual[i][(size_t)(H - 1) * 6 + KR_CLOSE] > w->last_close[i];
        if (i == nw - 1 || w->file_of[i + 1] != w->file_of[i]) {
            sym_ref[r->n_sym] = er_ref[i];
            sym_q[r->n_sym] = er_q[i];
            r->n_sym++;
        }
        r->windows++;
    }
    if (st == KR_OK) {
        kr_ks2_test(ret_ref, r->n_ret, ret_q, r->n_ret, &r->ks_d, &r->ks_p);
        kr_roc_auc(pup_ref, up, nw, &r->auc_ref);
        kr_roc_auc(pup_q, up, nw, &r->auc_q);
        kr_ks_separation(pup_ref, up, nw, &r->risk_ks_ref, &r->risk_ks_p_ref, &r->windows_up,
                         &r->windows_down);
        kr_ks_separation(pup_q, up, nw, &r->risk_ks_q, &r->risk_ks_p_q, NULL, NULL);
        kr_spearman(er_ref, er_q, nw, &r->rho_windows);
        kr_spearman(sym_ref, sym_q, r->n_sym, &r->rho_symbols);
    }
    free(ret_ref);
    free(ret_q);
    free(pup_ref);
    free(pup_q);
    free(er_ref);
    free(er_q);
    free(sym_ref);
    free(sym_q);
    free(up);
    return st;
}

static kr_status run_phases(kr_context *ref, kr_context *q, const kr_eval_quant_params *p,
                            const window_set *w, kr_eval_quant_report *r, kr_forecast **fr,
                            kr_forecast **fq, kr_error *err) {
    kr_model_info ri;
    kr_model_get_info(kr_context_model(ref), &ri);
    int V1 = 1 << ri.s1_bits, V2 = 1 << ri.s2_bits;
    char what[160];
    snprintf(what, sizeof what, "teacher-forced logits of %d windows, f32 and %s", w->n,
             r->quant_info.quant);
    if (p->progress) p->progress(what, 0, p->user);
    double t0 = kr_now_seconds();
    kr_status st = KR_OK;
    for (int i = 0; st == KR_OK && i < w->n; i++)
        st = teacher_window(ref, q, &w->series[i], p->lookback, V1, V2, p->seed, i, r, err);
    r->seconds_teacher = kr_now_seconds() - t0;
    if (p->progress) p->progress(what, 1, p->user);
    if (st != KR_OK) return st;

    kr_forecast_params fp = kr_forecast_default_params();
    fp.pred_len = p->pred_len;
    fp.lookback = p->lookback;
    fp.paths = p->paths;
    fp.seed = p->seed;
    fp.keep_paths = 1;
    snprintf(what, sizeof what, "forecasting %d windows x %d paths, f32 and quantised", w->n,
             p->paths);
    if (p->progress) p->progress(what, 0, p->user);
    t0 = kr_now_seconds();
    st = kr_forecast_run_batch(ref, w->series, w->n, &fp, NULL, fr, err);
    if (st == KR_OK) st = kr_forecast_run_batch(q, w->series, w->n, &fp, NULL, fq, err);
    r->seconds_forecast = kr_now_seconds() - t0;
    if (p->progress) p->progress(what, 1, p->user);
    if (st != KR_OK) return st;
    return compare_forecasts(w, fr, fq, p, r, err);
}

kr_status kr_eval_quant_run(kr_context *ref, kr_context *q, const kr_eval_quant_params *p,
                            kr_eval_quant_report **out, kr_error *err) {
    *out = NULL;
    if (!ref || !q || !p || !p->data || p->n_data < 1 || p->n_data > MAX_FILES)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "eval-quant: needs two contexts and 1..%d candle files", MAX_FILES);
    if (p->windows < 1 || p->lookback < 16 || p->lookback > 512 || p->pred_len < 1 || p->paths < 2)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "eval-quant: windows >= 1, lookback 16..512, pred_len >= 1 and paths "
                            ">= 2 (got %d, %d, %d, %d)",
                            p->windows, p->lookback, p->pred_len, p->paths);
    kr_eval_quant_report *r = calloc(1, sizeof *r);
    if (!r) return kr_error_set(err, KR_ERR_NOMEM, "eval-quant: out of memory");
    kr_model_get_info(kr_context_model(q), &r->quant_info);
    r->ref_linear_bytes = predictor_linear_bytes(ref);
    r->quant_linear_bytes = predictor_linear_bytes(q);
    snprintf(r->kv_dtype, sizeof r->kv_dtype, "%s", p->kv_dtype ? p->kv_dtype : "f32");
    r->n_files = p->n_data;
    r->lookback = p->lookback;
    r->pred_len = p->pred_len;
    r->paths = p->paths;
    r->seed = p->seed;

    window_set w;
    kr_status st = window_set_load(p, &w, err);
    kr_forecast **fr = st == KR_OK ? calloc((size_t)w.n, sizeof *fr) : NULL;
    kr_forecast **fq = st == KR_OK ? calloc((size_t)w.n, sizeof *fq) : NULL;
    if (st == KR_OK && (!fr || !fq))
        st = kr_error_set(err, KR_ERR_NOMEM, "eval-quant: out of memory");
    if (st == KR_OK) st = run_phases(ref, q, p, &w, r, fr, fq, err);
    for (int i = 0; fr && fq && i < w.n; i++) {
        kr_forecast_free(fr[i]);
        kr_forecast_free(fq[i]);
    }
    free(fr);
    free(fq);
    window_set_free(&w);
    if (st != KR_OK) {
        free(r);
        return st;
    }
    *out = r;
    return KR_OK;
}

void kr_eval_quant_report_free(kr_eval_quant_report *r) { free(r); }
