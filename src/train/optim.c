/*
 * train/optim — one optimizer step as the official loops take it (torch 1.13 semantics):
 *
 *   total = ‖(‖g_i‖)_i‖  (clip_grad_norm_: the L2 norm of every gradient together)
 *   g *= min(1, clip / (total + 1e-6))
 *   lr, beta1 = OneCycleLR(step)      cosine, two phases; beta1 cycled (cycle_momentum)
 *   AdamW (single-tensor path):  p *= 1 − lr·wd;  m = β1·m + (1 − β1)·g;  v = β2·v + (1 − β2)·g²
 *                               p += −lr/(1 − β1^t) · m / (√v / √(1 − β2^t) + eps)
 *
 * in float32 element by element as torch's kernels do, the scalars rounded to float where
 * torch rounds them. Frozen parameters (the fixed time embeddings) have no gradient: torch
 * skips them in the norm and in AdamW, and so does this.
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "kernels/train_kernels.h"
#include "train/linalg.h"
#include "train/trainer_internal.h"

/* torch's _annealing_cos */
static double anneal_cos(double start, double end, double pct) {
    return end + (start - end) / 2.0 * (cos(M_PI * pct) + 1.0);
}

/* OneCycleLR (three_phase false) at step_num: the rate (and beta1 in *momentum). */
static double onecycle(const kr_train_params *p, long step_num, double *momentum) {
    const double initial = p->lr / p->div_factor, min_lr = initial / p->final_div_factor;
    const double end0 = p->pct_start * (double)p->total_steps - 1.0;
    const double end1 = (double)p->total_steps - 1.0;
    const double s = (double)step_num;
    double start_step = 0.0, pct;
    if (s <= end0) {
        pct = end0 > start_step ? (s - start_step) / (end0 - start_step) : 1.0;
        if (momentum) *momentum = anneal_cos(p->max_momentum, p->base_momentum, pct);
        return anneal_cos(initial, p->lr, pct);
    }
    start_step = end0;
    pct = end1 > start_step ? (s - start_step) / (end1 - start_step) : 1.0;
    if (momentum) *momentum = anneal_cos(p->base_momentum, p->max_momentum, pct);
    return anneal_cos(p->lr, min_lr, pct);
}

double tr_onecycle_lr(const kr_train_params *p, long step) { return onecycle(p, step, NULL); }

/* ---------------------------------------------------------------- the gradient norm */

typedef struct norm_job {
    const float *g;
    size_t n;
    double *partial;
} norm_job;

static void norm_chunks(void *p, int c0, int c1) {
    const norm_job *j = p;
    for (int c = c0; c < c1; c++) {
        size_t a = (size_t)c * TR_NORM_CHUNK,
               b = a + TR_NORM_CHUNK < j->n ? a + TR_NORM_CHUNK : j->n;
        double s = 0.0;
        for (size_t i = a; i < b; i++) s += (double)j->g[i] * (double)j->g[i];
        j->partial[c] = s;
    }
}

/* ---------------------------------------------------------------- AdamW */

typedef struct adam_job {
    kr_trainer *tr;
    kr_adamw a;
} adam_job;

static void adam_region(void *p, int ith, int nth) {
    const adam_job *j = p;
    kr_trainer *tr = j->tr;
    for (int t = 0; t < tr->n_tensors; t++) {
        const tr_param *prm = &tr->tensors[t];
        if (!prm->trainable) continue;
        /* whole lines of 16 floats per thread (a tensor starts on a line) */
        size_t lines = (prm->n + 15) / 16;
        size_t a = lines * (size_t)ith / (size_t)nth * 16,
               b = lines * (size_t)(ith + 1) / (size_t)nth * 16;
        b = b < prm->n ? b : prm->n;
        if (a >= b) continue;
        kr_adamw_f32(b - a, &j->a, tr->p + prm->off + a, tr->g + prm->off + a, tr->m + prm->off + a,
                     tr->v + prm->off + a);
    }
}

kr_status tr_optimizer_step(kr_trainer *tr, kr_train_step_info *out, kr_error *err) {
    const kr_train_params *p = &tr->params;
    if (tr->steps >= p->total_steps)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "optimizer step %ld: the schedule has total_steps %ld", tr->steps + 1,
                            p->total_steps);
    /* total gradient norm (padding and frozen tensors hold zeros) */
    int chunks = (int)((tr->n_floats + TR_NORM_CHUNK - 1) / TR_NORM_CHUNK);
    double *partial = tr->norm_partial;
    norm_job nj = { tr->g, tr->n_floats, partial };
    tr_for_rows(tr->pool, TR_PART_OPTIM, chunks, norm_chunks, &nj);
    double sq = 0.0;
    for (int c = 0; c < chunks; c++) sq += partial[c];
    double total = sqrt(sq);
    if (!isfinite(total)) {
        kr_trainer_zero_grad(tr);
        return kr_error_set(err, KR_ERR_NUMERIC,
                            "optimizer step %ld: the gradient norm is %s (nothing updated, the "
                            "gradients are discarded)",
                            tr->steps + 1, isnan(total) ? "NaN" : "infinite");
    }
    float clip_scale = 1.0f;
    if (p->clip_norm > 0.0) {
        float coef = (float)p->clip_norm / ((float)total + 1e-6f);
        if (coef < 1.0f) clip_scale = coef;
    }
    double beta1 = p->beta1;
    double lr = onecycle(p, tr->steps, p->cycle_momentum ? &beta1 : NULL);
    double t = (double)(tr->steps + 1);
    double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(p->beta2, t);
    adam_job aj = { .tr = tr,
                    .a = {
                        .clip_scale = clip_scale,
                        .decay = (float)(1.0 - lr * p->weight_decay),
                        .beta1 = (float)beta1,
                        .one_m_beta1 = (float)(1.0 - beta1),
                        .beta2 = (float)p->beta2,
                        .one_m_beta2 = (float)(1.0 - p->beta2),
                        .bc2_sqrt = (float)sqrt(bc2),
                        .eps = (float)p->eps,
                        .neg_step = (float)(-(lr / bc1)),
                    } };
    kr_pool_run_part(tr->pool, TR_PART_OPTIM, adam_region, &aj);
    kr_trainer_zero_grad(tr);
    tr->steps++;
    if (out) {
        out->step = tr->steps;
        out->lr = lr;
        out->grad_norm = total;
    }
    return KR_OK;
}
