/* train/attention — see attention.h. */
#include "train/attention.h"

#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "train/linalg.h"

size_t tr_attn_scratch_floats(int T, int head_dim) {
    /* K and V of one head transposed ([head_dim][T], the B of Q·Kᵀ and dO·Vᵀ), then the
     * block's scores / probabilities, their gradient and the dropped probabilities. */
    size_t f = 2 * (size_t)T * (size_t)head_dim + 3 * (size_t)TR_ATTN_BLOCK * (size_t)T;
    return (f + 15) / 16 * 16;
}

typedef struct attn_job {
    const tr_attn_shape *s;
    const float *q, *k, *v, *out, *dout;
    float *o, *dq, *dk, *dv;
    const tr_dropout *drop;
    float *scratch;
    size_t per_thread;
    int backward;
} attn_job;

/* One head's rows of a [rows][ld] matrix, transposed to [head_dim][T] and scaled: the B of
 * S = Q·(scale·K)ᵀ (the score scale folded into the copy instead of a pass over the scores).
 * In 16 × 16 blocks, so that both sides walk whole cache lines. */
static void gather_head_t(const float *src, int T, int hd, int ld, float scale, float *dst) {
    enum { TB = 16 };
    for (int t0 = 0; t0 < T; t0 += TB) {
        int t1 = t0 + TB < T ? t0 + TB : T;
        for (int c0 = 0; c0 < hd; c0 += TB) {
            int c1 = c0 + TB < hd ? c0 + TB : hd;
            for (int c = c0; c < c1; c++) {
                float *d = dst + (size_t)c * (size_t)T;
                for (int t = t0; t < t1; t++)
                    d[t] = src[(size_t)t * (size_t)ld + (size_t)c] * scale;
            }
        }
    }
}

/* Probabilities of the query block [i0, i0 + rows) over keys [0, nk) into S (ld T): scaled
 * scores (Kt carries the scale), mask, softmax; masked entries 0. */
static void block_probs(const tr_attn_shape *s, const float *Q, const float *Kt, int i0, int rows,
                        int nk, float *S) {
    const int hd = s->head_dim, T = s->T;
    kr_gemm_nn_f32(rows, nk, hd, Q + (size_t)i0 * (size_t)s->ld, s->ld, Kt, T, S, T, 0, 0, 1);
    for (int r = 0; r < rows; r++) {
        float *row = S + (size_t)r * (size_t)T;
        int valid = s->causal ? i0 + r + 1 : nk;
        kr_softmax_f32(valid, row, row);
        for (int c = valid; c < nk; c++) row[c] = 0.0f;
    }
}

/* Inverted dropout of the block's probabilities from src into dst (may alias). */
static void block_dropout(const tr_dropout *d, uint64_t row0, int rows, int nk, int T,
                          const float *src, float *dst) {
    const float scale = 1.0f / (1.0f - d->p);
    const uint32_t th = tr_dropout_threshold(d->p);
    for (int r = 0; r < rows; r++) {
        uint64_t key = tr_dropout_row_key(d, row0 + (uint64_t)r);
        const float *a = src + (size_t)r * (size_t)T;
        float *b = dst + (size_t)r * (size_t)T;
        for (int c = 0; c < nk; c++)
            b[c] = d->p < 1.0f && tr_dropout_keep(key, th, (uint64_t)c) ? a[c] * scale : 0.0f;
    }
}

static void head_task(const attn_job *j, int task, float *scr) {
    const tr_attn_shape *s = j->s;
    const int T = s->T, hd = s->head_dim, ld = s->ld;
    const int seq = task / s->n_heads, head = task % s->n_heads;
    const size_t base = (size_t)seq * (size_t)T * (size_t)ld + (size_t)head * (size_t)hd;
    const float scale = 1.0f / sqrtf((float)hd);
    const int dropping = j->drop && j->drop->p > 0.0f;
    const uint64_t drow0 = (uint64_t)task * (uint64_t)T;
    float *Kt = scr, *Vt = Kt + (size_t)T * (size_t)hd, *S = Vt + (size_t)T * (size_t)hd;
    float *dP = S + (size_t)TR_ATTN_BLOCK * (size_t)T, *Pd = dP + (size_t)TR_ATTN_BLOCK * (size_t)T;
    const float *Q = j->q + base, *K = j->k + base, *V = j->v + base;
    gather_head_t(K, T, hd, ld, scale, Kt);

    if (!j->backward) {
        float *O = j->o + base;
        for (int i0 = 0; i0 < T; i0 += TR_ATTN_BLOCK) {
            int rows = T - i0 < TR_ATTN_BLOCK ? T - i0 : TR_ATTN_BLOCK;
            int nk = s->causal ? i0 + rows : T;
            block_probs(s, Q, Kt, i0, rows, nk, S);
            if (dropping) block_dropout(j->drop, drow0 + (uint64_t)i0, rows, nk, T, S, S);
            kr_gemm_nn_f32(rows, hd, nk, S, T, V, ld, O + (size_t)i0 * (size_t)ld, ld, 0, 0, 1);
        }
        return;
    }

    gather_head_t(V, T, hd, ld, 1.0f, Vt);
    const float *O = j->out + base, *dO = j->dout + base;
    float *dQ = j->dq + base, *dK = j->dk + base, *dV = j->dv + base;
    for (int t = 0; t < T; t++) {
        memset(dK + (size_t)t * (size_t)ld, 0, (size_t)hd * sizeof(float));
        memset(dV + (size_t)t * (size_t)ld, 0, (size_t)hd * sizeof(float));
    }
    for (int i0 = 0; i0 < T; i0 += TR_ATTN_BLOCK) {
        int rows = T - i0 < TR_ATTN_BLOCK ? T - i0 : TR_ATTN_BLOCK;
        int nk = s->causal ? i0 + rows : T;
        const float *dOb = dO + (size_t)i0 * (size_t)ld;
        block_probs(s, Q, Kt, i0, rows, nk, S);
        const float *P_used = S;
        if (dropping) {
            block_dropout(j->drop, drow0 + (uint64_t)i0, rows, nk, T, S, Pd);
            P_used = Pd;
        }
        /* dP (of the probabilities that multiplied V) = dO·Vᵀ; dV += P_usedᵀ·dO */
        kr_gemm_nn_f32(rows, nk, hd, dOb, ld, Vt, T, dP, T, 0, 0, 1);
        kr_gemm_tn_f32(nk, hd, rows, P_used, T, dOb, ld, dV, ld, 1, 0, 1);
        if (dropping) block_dropout(j->drop, drow0 + (uint64_t)i0, rows, nk, T, dP, dP);
        /* softmax backward: dS = P ⊙ (dP − Σ dO⊙O), then the score scale */
        for (int r = 0; r < rows; r++) {
            const float *o = O + (size_t)(i0 + r) * (size_t)ld, *go = dOb + (size_t)r * (size_t)ld;
            float dsum = 0.0f;
            for (int c = 0; c < hd; c++) dsum += go[c] * o[c];
            const float *p = S + (size_t)r * (size_t)T;
            float *g = dP + (size_t)r * (size_t)T;
            int valid = s->causal ? i0 + r + 1 : nk;
            for (int c = 0; c < valid; c++) g[c] = p[c] * (g[c] - dsum) * scale;
            for (int c = valid; c < nk; c++) g[c] = 0.0f;
        }
        kr_gemm_nn_f32(rows, hd, nk, dP, T, K, ld, dQ + (size_t)i0 * (size_t)ld, ld, 0, 0, 1);
        kr_gemm_tn_f32(nk, hd, rows, dP, T, Q + (size_t)i0 * (size_t)ld, ld, dK, ld, 1, 0, 1);
    }
}

static void attn_region(void *p, int ith, int nth) {
    const attn_job *j = p;
    float *scr = j->scratch + (size_t)ith * j->per_thread;
    int tasks = j->s->n_seq * j->s->n_heads;
    for (int t = ith; t < tasks; t += nth) head_task(j, t, scr);
}

void tr_attention_fwd(kr_pool *pool, const tr_attn_shape *s, const float *q, const float *k,
                      const float *v, float *out, const tr_dropout *drop, float *scratch) {
    attn_job j = { .s = s,
                   .q = q,
                   .k = k,
                   .v = v,
                   .o = out,
                   .drop = drop,
                   .scratch = scratch,
                   .per_thread = tr_attn_scratch_floats(s->T, s->head_dim) };
    kr_pool_run_part(pool, TR_PART_ATTN_FWD, attn_region, &j);
}

void tr_attention_bwd(kr_pool *pool, const tr_attn_shape *s, const float *q, const float *k,
                      const float *v, const float *out, const float *dout, float *dq, float *dk,
                      float *dv, const tr_dropout *drop, float *scratch) {
    attn_job j = { .s = s,
                   .q = q,
                   .k = k,
                   .v = v,
                   .out = out,
                   .dout = dout,
                   .dq = dq,
                   .dk = dk,
                   .dv = dv,
                   .drop = drop,
                   .scratch = scratch,
                   .per_thread = tr_attn_scratch_floats(s->T, s->head_dim),
                   .backward = 1 };
    kr_pool_run_part(pool, TR_PART_ATTN_BWD, attn_region, &j);
}
