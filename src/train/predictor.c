/*
 * train/predictor — the Kronos predictor in train mode (Kronos.forward without teacher
 * forcing, then DualHead.compute_loss), forward and backward:
 *
 *   x = fusion(emb_s1[s1]·√d ‖ emb_s2[s2]·√d) + time embedding; token dropout
 *   x = blocks(x); context = RMSNorm(x); s1_logits = proj_s1(context)
 *   sibling = emb_s1[sampled_s1]          (drawn from softmax(s1_logits), or injected)
 *   y = context + out(attn(rope(q(sibling)), rope(k(context)), v(context)))   4 heads, causal
 *   s2_logits = proj_s2(RMSNorm_dep(y));  loss = (ce(s1_logits) + ce(s2_logits)) / 2
 *
 * In train mode the dependency-aware layer's query has all T positions, so its rotary cache
 * covers positions 0..T−1 and rotates q and k (at inference, one query: no rotation), and its
 * cross-attention is causal (is_causal = self.training).
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "train/linalg.h"
#include "train/trainer_internal.h"

static const int k_te_rows[TR_TE_FIELDS] = { 60, 24, 7, 32, 13 };
/* TemporalEmbedding sums hour + weekday + day + month + minute, in that order; stamp fields are
 * minute, hour, weekday, day, month. */
static const int k_te_order[TR_TE_FIELDS] = { 1, 2, 3, 4, 0 };

/* Dropout sites: one stream each per micro-batch. */
enum { SITE_TOKEN = 1, SITE_BLOCK0 = 16 };

static uint64_t site_stream(uint64_t micro, int site) {
    return kr_mix64((micro << 12) ^ (uint64_t)site ^ 0x7472616e5f64726full);
}

void tr_predictor_layout(kr_trainer *tr, tr_slab *s, int M) {
    tr_predictor *pr = &tr->pr;
    const kr_predictor_config *c = &tr->pcfg;
    const size_t d = (size_t)c->d_model, ff = (size_t)c->ff_dim, m = (size_t)M;
    const size_t v1 = (size_t)1 << c->s1_bits, v2 = (size_t)1 << c->s2_bits;
    tr_take_stack(s, c->n_layers, m, d, ff, pr->stream, pr->acts);
    float *f[16];
    f[0] = tr_take(s, m * 2 * d); /* emb_cat */
    f[1] = tr_take(s, m); /* rstd_f */
    f[2] = tr_take(s, m * d); /* context */
    f[3] = tr_take(s, m * v1);
    f[4] = tr_take(s, m * v2);
    f[5] = tr_take(s, m * d); /* sibling */
    f[6] = tr_take(s, m * d); /* dep q, k, v, att, y */
    f[7] = tr_take(s, m * d);
    f[8] = tr_take(s, m * d);
    f[9] = tr_take(s, m * d);
    f[10] = tr_take(s, m * d);
    f[11] = tr_take(s, m); /* dep_rstd */
    f[12] = tr_take(s, m * d); /* x2 */
    f[13] = tr_take(s, m * d); /* dcontext */
    f[14] = tr_take(s, m * d); /* dstream */
    f[15] = tr_take(s, m * 2 * d); /* demb */
    double *l1 = (double *)tr_take(s, 2 * m), *l2 = (double *)tr_take(s, 2 * m);
    int32_t *ids[5];
    for (int i = 0; i < 5; i++) ids[i] = (int32_t *)tr_take(s, m);
    int32_t *stamp = (int32_t *)tr_take(s, m * TR_TE_FIELDS);
    if (!s->base) return;
    pr->emb_cat = f[0];
    pr->rstd_f = f[1];
    pr->context = f[2];
    pr->logits1 = f[3];
    pr->logits2 = f[4];
    pr->sibling = f[5];
    pr->dep_q = f[6];
    pr->dep_k = f[7];
    pr->dep_v = f[8];
    pr->dep_att = f[9];
    pr->dep_y = f[10];
    pr->dep_rstd = f[11];
    pr->x2 = f[12];
    pr->dcontext = f[13];
    pr->dstream = f[14];
    pr->demb = f[15];
    pr->loss1 = l1;
    pr->loss2 = l2;
    pr->in_s1 = ids[0];
    pr->in_s2 = ids[1];
    pr->tgt_s1 = ids[2];
    pr->tgt_s2 = ids[3];
    pr->sampled = ids[4];
    pr->stamp = stamp;
}

/* ---------------------------------------------------------------- inputs */

static kr_status take_inputs(kr_trainer *tr, const kr_train_batch *b, kr_error *err) {
    tr_predictor *pr = &tr->pr;
    const int T = b->len - 1, v1 = 1 << tr->pcfg.s1_bits, v2 = 1 << tr->pcfg.s2_bits;
    static const char *const fields[TR_TE_FIELDS] = { "minute", "hour", "weekday", "day", "month" };
    for (int w = 0; w < b->n; w++)
        for (int t = 0; t < b->len; t++) {
            size_t src = (size_t)w * (size_t)b->len + (size_t)t;
            int32_t a = b->s1[src], c = b->s2[src];
            if (a < 0 || a >= v1 || c < 0 || c >= v2)
                return kr_error_set(err, KR_ERR_INVALID_ARG,
                                    "training batch: window %d row %d: token (%d, %d) out of "
                                    "range [0, %d) × [0, %d)",
                                    w, t, (int)a, (int)c, v1, v2);
            size_t m = (size_t)w * (size_t)T + (size_t)t;
            if (t < T) {
                pr->in_s1[m] = a;
                pr->in_s2[m] = c;
                for (int f = 0; f < TR_TE_FIELDS; f++) {
                    int32_t v = b->stamp[src * TR_TE_FIELDS + (size_t)f];
                    if (v < 0 || v >= k_te_rows[f])
                        return kr_error_set(err, KR_ERR_INVALID_ARG,
                                            "training batch: window %d row %d: time field %s = "
                                            "%d out of range [0, %d)",
                                            w, t, fields[f], (int)v, k_te_rows[f]);
                    pr->stamp[m * TR_TE_FIELDS + (size_t)f] = v;
                }
                if (b->sampled_s1) {
                    int32_t sm = b->sampled_s1[m];
                    if (sm < 0 || sm >= v1)
                        return kr_error_set(err, KR_ERR_INVALID_ARG,
                                            "training batch: window %d position %d: sampled s1 "
                                            "%d out of range [0, %d)",
                                            w, t, (int)sm, v1);
                    pr->sampled[m] = sm;
                }
            }
            if (t > 0) {
                pr->tgt_s1[m - 1] = a;
                pr->tgt_s2[m - 1] = c;
            }
        }
    return KR_OK;
}

/* ---------------------------------------------------------------- embeddings */

typedef struct emb_job {
    kr_trainer *tr;
    int M;
} emb_job;

/* emb_cat = emb_s1[s1]·√d ‖ emb_s2[s2]·√d */
static void emb_rows(void *p, int r0, int r1) {
    const emb_job *j = p;
    const tr_predictor *pr = &j->tr->pr;
    const int d = j->tr->pcfg.d_model;
    const float scale = (float)sqrt((double)d);
    for (int m = r0; m < r1; m++) {
        const float *a = pr->emb_s1 + (size_t)pr->in_s1[m] * (size_t)d;
        const float *b = pr->emb_s2 + (size_t)pr->in_s2[m] * (size_t)d;
        float *o = pr->emb_cat + (size_t)m * 2 * (size_t)d;
        for (int c = 0; c < d; c++) o[c] = a[c] * scale;
        for (int c = 0; c < d; c++) o[d + c] = b[c] * scale;
    }
}

/* x += hour + weekday + day + month + minute (summed first, in that order) */
static void time_rows(void *p, int r0, int r1) {
    const emb_job *j = p;
    const tr_predictor *pr = &j->tr->pr;
    const int d = j->tr->pcfg.d_model;
    for (int m = r0; m < r1; m++) {
        float *x = pr->stream[0] + (size_t)m * (size_t)d;
        const int32_t *st = pr->stamp + (size_t)m * TR_TE_FIELDS;
        const float *r[TR_TE_FIELDS];
        for (int k = 0; k < TR_TE_FIELDS; k++) {
            int f = k_te_order[k];
            r[k] = pr->te[f] + (size_t)st[f] * (size_t)d;
        }
        for (int c = 0; c < d; c++) x[c] += (((r[0][c] + r[1][c]) + r[2][c]) + r[3][c]) + r[4][c];
    }
}

/* sibling = emb_s1[sampled], unscaled */
static void sibling_rows(void *p, int r0, int r1) {
    const emb_job *j = p;
    const tr_predictor *pr = &j->tr->pr;
    const int d = j->tr->pcfg.d_model;
    for (int m = r0; m < r1; m++)
        memcpy(pr->sibling + (size_t)m * (size_t)d, pr->emb_s1 + (size_t)pr->sampled[m] * (size_t)d,
               (size_t)d * sizeof(float));
}

/* sampled[m] ~ probs row m (softmax of the s1 logits): inverse CDF of one uniform draw of
 * the (seed, stream, row) counter stream, so the draw depends on nothing else. */
typedef struct draw_job {
    kr_trainer *tr;
    uint64_t stream;
} draw_job;

static void draw_rows(void *p, int r0, int r1) {
    const draw_job *j = p;
    tr_predictor *pr = &j->tr->pr;
    const int V = 1 << j->tr->pcfg.s1_bits;
    for (int m = r0; m < r1; m++) {
        const float *pb = pr->logits1 + (size_t)m * (size_t)V;
        double total = 0.0;
        for (int c = 0; c < V; c++) total += pb[c];
        double u = kr_rng_uniform(j->tr->params.seed, j->stream, (uint64_t)m) * total, cum = 0.0;
        int pick = V - 1;
        for (int c = 0; c < V; c++) {
            cum += pb[c];
            if (u < cum && pb[c] > 0.0f) {
                pick = c;
                break;
            }
        }
        pr->sampled[m] = pick;
    }
}

static double mean_of(const double *v, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += v[i];
    return n ? s / n : 0.0;
}

/* ---------------------------------------------------------------- the pass */

kr_status tr_predictor_run(kr_trainer *tr, const kr_train_batch *b, double grad_scale,
                           int official_eval, uint64_t rng_stream, kr_train_losses *out,
                           kr_error *err) {
    tr_predictor *pr = &tr->pr;
    const kr_predictor_config *c = &tr->pcfg;
    kr_pool *pool = tr->pool;
    const int n = b->n, T = b->len - 1, M = n * T, d = c->d_model, L = c->n_layers;
    const int v1 = 1 << c->s1_bits, v2 = 1 << c->s2_bits;
    const int train = grad_scale != 0.0;
    kr_status rc = take_inputs(tr, b, err);
    if (rc != KR_OK) return rc;
    emb_job ej = { tr, M };

    /* dropout sites of this micro-batch (all off when evaluating or use_dropout is 0) */
    const int drop = train && tr->params.use_dropout;
    tr_dropout tok = { drop ? tr->hyper.token_drop : 0.0f, tr->params.seed,
                       site_stream(tr->micro, SITE_TOKEN) };
    tr_block_drops bd[64];
    for (int i = 0; i < L && i < 64; i++) {
        uint64_t s0 = site_stream(tr->micro, SITE_BLOCK0 + 3 * i);
        bd[i].attn = (tr_dropout){ drop ? tr->hyper.attn_drop : 0.0f, tr->params.seed, s0 };
        bd[i].resid = (tr_dropout){ drop ? tr->hyper.resid_drop : 0.0f, tr->params.seed, s0 + 1 };
        bd[i].ffn = (tr_dropout){ drop ? tr->hyper.ffn_drop : 0.0f, tr->params.seed, s0 + 2 };
    }

    /* embeddings, blocks, final norm, s1 head */
    tr_for_rows(pool, TR_PART_EMBED, M, emb_rows, &ej);
    tr_linear_fwd(pool, &pr->fusion, pr->emb_cat, M, pr->stream[0]);
    tr_for_rows(pool, TR_PART_EMBED, M, time_rows, &ej);
    tr_dropout_apply(pool, &tok, M, d, pr->stream[0], d, 0);
    for (int i = 0; i < L; i++)
        tr_block_fwd(pool, &pr->blocks[i], &pr->acts[i], n, T, pr->stream[i + 1], &tr->ws, &bd[i]);
    tr_rmsnorm_fwd(pool, M, d, pr->stream[L], pr->norm, pr->context, pr->rstd_f);
    tr_linear_fwd(pool, &pr->head_s1, pr->context, M, pr->logits1);
    tr_softmax_xent(pool, M, v1, pr->logits1, pr->tgt_s1, pr->loss1);

    /* s2 path: the sibling ids, the dependency-aware layer, the s2 head */
    if (!b->sampled_s1) {
        draw_job dj = { tr, rng_stream };
        tr_for_rows(pool, TR_PART_LOSS, M, draw_rows, &dj);
    }
    tr_for_rows(pool, TR_PART_EMBED, M, sibling_rows, &ej);
    const tr_attn_w *dep = &pr->dep;
    tr_attn_shape dshape = { n, T, dep->n_heads, dep->head_dim, d, !official_eval };
    tr_linear_fwd(pool, &dep->q, pr->sibling, M, pr->dep_q);
    tr_linear_fwd(pool, &dep->k, pr->context, M, pr->dep_k);
    tr_linear_fwd(pool, &dep->v, pr->context, M, pr->dep_v);
    tr_rope_fwd(pool, dep->rope, n, T, dep->n_heads, pr->dep_q, d);
    tr_rope_fwd(pool, dep->rope, n, T, dep->n_heads, pr->dep_k, d);
    tr_attention_fwd(pool, &dshape, pr->dep_q, pr->dep_k, pr->dep_v, pr->dep_att, NULL,
                     tr->ws.attn);
    tr_linear_fwd(pool, &dep->o, pr->dep_att, M, tr->ws.t);
    tr_add(pool, (size_t)M * (size_t)d, pr->context, tr->ws.t, pr->dep_y);
    tr_rmsnorm_fwd(pool, M, d, pr->dep_y, pr->dep_norm, pr->x2, pr->dep_rstd);
    tr_linear_fwd(pool, &pr->head_s2, pr->x2, M, pr->logits2);
    tr_softmax_xent(pool, M, v2, pr->logits2, pr->tgt_s2, pr->loss2);

    memset(out, 0, sizeof *out);
    out->ce_s1 = mean_of(pr->loss1, M);
    out->ce_s2 = mean_of(pr->loss2, M);
    out->loss = (out->ce_s1 + out->ce_s2) / 2.0;
    out->tokens = M;
    if (!train) return KR_OK;

    /* backward: each cross-entropy is a mean over M rows, weighted 1/2, times grad_scale */
    const float gs = (float)(0.5 * grad_scale / (double)M);
    tr_xent_grad(pool, M, v1, pr->logits1, pr->tgt_s1, gs);
    tr_xent_grad(pool, M, v2, pr->logits2, pr->tgt_s2, gs);
    tr_ws *ws = &tr->ws;
    tr_linear_bwd(pool, &pr->head_s2, pr->logits2, pr->x2, M, ws->datt, 0);
    tr_rmsnorm_bwd(pool, M, d, ws->datt, pr->dep_y, pr->dep_rstd, pr->dep_norm, pr->gdep_norm,
                   pr->dcontext, 0);
    tr_linear_bwd(pool, &dep->o, pr->dcontext, pr->dep_att, M, ws->datt, 0);
    tr_attention_bwd(pool, &dshape, pr->dep_q, pr->dep_k, pr->dep_v, pr->dep_att, ws->datt, ws->dq,
                     ws->dk, ws->dv, NULL, ws->attn);
    tr_rope_bwd(pool, dep->rope, n, T, dep->n_heads, ws->dq, d);
    tr_rope_bwd(pool, dep->rope, n, T, dep->n_heads, ws->dk, d);
    tr_linear_bwd(pool, &dep->q, ws->dq, pr->sibling, M, ws->t, 0);
    tr_embedding_bwd(pool, M, d, pr->sampled, 1, ws->t, d, 1.0f, pr->gemb_s1);
    tr_linear_bwd(pool, &dep->k, ws->dk, pr->context, M, pr->dcontext, 1);
    tr_linear_bwd(pool, &dep->v, ws->dv, pr->context, M, pr->dcontext, 1);
    tr_linear_bwd(pool, &pr->head_s1, pr->logits1, pr->context, M, pr->dcontext, 1);
    tr_rmsnorm_bwd(pool, M, d, pr->dcontext, pr->stream[L], pr->rstd_f, pr->norm, pr->gnorm,
                   pr->dstream, 0);
    for (int i = L - 1; i >= 0; i--)
        tr_block_bwd(pool, &pr->blocks[i], &pr->acts[i], n, T, pr->dstream, ws, &bd[i]);
    tr_dropout_apply(pool, &tok, M, d, pr->dstream, d, 0);
    for (int f = 0; f < TR_TE_FIELDS; f++)
        tr_embedding_bwd(pool, M, d, pr->stamp + f, TR_TE_FIELDS, pr->dstream, d, 1.0f, pr->gte[f]);
    tr_linear_bwd(pool, &pr->fusion, pr->dstream, pr->emb_cat, M, pr->demb, 0);
    const float sq = (float)sqrt((double)d);
    tr_embedding_bwd(pool, M, d, pr->in_s1, 1, pr->demb, 2 * d, sq, pr->gemb_s1);
    tr_embedding_bwd(pool, M, d, pr->in_s2, 1, pr->demb + d, 2 * d, sq, pr->gemb_s2);
    return KR_OK;
}
