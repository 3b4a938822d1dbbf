/*
 * model/transformer — see transformer.h. Block: x += out(attn(rope(q,k), v)) of RMSNorm1(x);
 * x += w2(silu(w1 h) ⊙ w3 h) with h = RMSNorm2(x). Attention is causal, scale 1/√head_dim.
 */
#include "model/transformer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/attention_plan.h"

#define KR_RMS_EPS 1e-5f

kr_status kr_kv_store_init(kr_kv_store *s, int n_layers, int d, int cap, kr_error *err) {
    memset(s, 0, sizeof *s);
    if (n_layers <= 0 || d <= 0 || cap <= 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kv store: bad size %d×%d×%d", n_layers, cap, d);
    size_t n = (size_t)n_layers * (size_t)cap * (size_t)d;
    s->k = malloc(n * sizeof(float));
    s->v = malloc(n * sizeof(float));
    if (!s->k || !s->v) {
        kr_kv_store_release(s);
        return kr_error_set(err, KR_ERR_NOMEM, "kv store: cannot allocate %zu bytes", 2 * n * sizeof(float));
    }
    s->n_layers = n_layers;
    s->d = d;
    s->cap = cap;
    return KR_OK;
}

void kr_kv_store_release(kr_kv_store *s) {
    if (!s) return;
    free(s->k);
    free(s->v);
    memset(s, 0, sizeof *s);
}

typedef struct gemm_task {
    const kr_linear *l;
    const float *x;
    int m, ldx, ldy;
    float *y;
} gemm_task;

static void gemm_worker(void *ctx, int ith, int nth) {
    const gemm_task *t = ctx;
    kr_gemm_f32(t->m, t->l->n_out, t->l->n_in, t->x, t->ldx, t->l->w, t->l->b, t->y, t->ldy,
                ith, nth);
}

void kr_linear_run(kr_pool *pool, const kr_linear *l, const float *x, int m, int ldx, float *y,
                   int ldy) {
    if (m <= 0) return;
    gemm_task t = {l, x, m, ldx, ldy, y};
    kr_pool_run(pool, gemm_worker, &t);
}

kr_status kr_chunks_check(const kr_chunk *chunks, int n_chunks, int n_layers_needed,
                          int *total, kr_error *err) {
    int sum = 0;
    for (int c = 0; c < n_chunks; c++) {
        const kr_chunk *ch = &chunks[c];
        if (ch->n <= 0 || ch->pos0 < 0 || !ch->out || ch->n_past < 0 || ch->n_past > KR_MAX_PAST_REFS)
            return kr_error_set(err, KR_ERR_INTERNAL, "chunk %d: bad shape", c);
        if (ch->out_start < 0 || ch->out_start + ch->n > ch->out->cap || ch->out->n_layers < n_layers_needed)
            return kr_error_set(err, KR_ERR_INTERNAL, "chunk %d: output rows %d..%d exceed store", c,
                                ch->out_start, ch->out_start + ch->n);
        for (int r = 0; r < ch->n_past; r++) {
            const kr_kv_ref *ref = &ch->past[r];
            if (!ref->store || ref->start < 0 || ref->n < 0 || ref->start + ref->n > ref->store->cap ||
                ref->store->n_layers < n_layers_needed)
                return kr_error_set(err, KR_ERR_INTERNAL, "chunk %d: past ref %d out of range", c, r);
        }
        sum += ch->n;
    }
    *total = sum;
    return KR_OK;
}

kr_status kr_transformer_run(const kr_block_weights *blocks, int n_blocks, int layer0, int d,
                             int ff_dim, kr_pool *pool, float *x, const kr_chunk *chunks,
                             int n_chunks, kr_error *err) {
    int total = 0;
    kr_status st = kr_chunks_check(chunks, n_chunks, layer0 + n_blocks, &total, err);
    if (st != KR_OK) return st;
    if (n_blocks == 0 || total == 0) return KR_OK;

    size_t td = (size_t)total * (size_t)d, tf = (size_t)total * (size_t)ff_dim;
    float *h = malloc(td * sizeof(float));
    float *q = malloc(td * sizeof(float));
    float *kt = malloc(td * sizeof(float));
    float *vt = malloc(td * sizeof(float));
    float *att = malloc(td * sizeof(float));
    float *f1 = malloc(tf * sizeof(float));
    float *f3 = malloc(tf * sizeof(float));
    kr_attn_keys *keys = malloc((size_t)total * sizeof *keys);
    if (!h || !q || !kt || !vt || !att || !f1 || !f3 || !keys) {
        st = kr_error_set(err, KR_ERR_NOMEM, "transformer: out of memory for %d rows", total);
        goto done;
    }
    /* Row i of a chunk sees the chunk's past, then its own rows 0..i (causal). */
    for (int c = 0, row = 0; c < n_chunks; c++)
        for (int i = 0; i < chunks[c].n; i++, row++) {
            kr_attn_keys *k = &keys[row];
            k->n = 0;
            for (int r = 0; r < chunks[c].n_past; r++)
                if (chunks[c].past[r].n > 0) k->ref[k->n++] = chunks[c].past[r];
            k->ref[k->n++] = (kr_kv_ref){chunks[c].out, chunks[c].out_start, i + 1};
        }

    for (int b = 0; b < n_blocks; b++) {
        const kr_block_weights *bw = &blocks[b];
        const kr_attn_weights *aw = &bw->attn;
        int layer = layer0 + b;
        kr_rmsnorm_f32(total, d, x, d, bw->norm1, KR_RMS_EPS, h, d);
        kr_linear_run(pool, &aw->q, h, total, d, q, d);
        kr_linear_run(pool, &aw->k, h, total, d, kt, d);
        kr_linear_run(pool, &aw->v, h, total, d, vt, d);
        for (int c = 0, row = 0; c < n_chunks; c++) {
            const kr_chunk *ch = &chunks[c];
            kr_rope_f32(ch->n, aw->n_heads, aw->head_dim, q + (size_t)row * d, d, ch->pos0, aw->inv_freq);
            kr_rope_f32(ch->n, aw->n_heads, aw->head_dim, kt + (size_t)row * d, d, ch->pos0, aw->inv_freq);
            memcpy(kr_kv_k(ch->out, layer, ch->out_start), kt + (size_t)row * d,
                   (size_t)ch->n * (size_t)d * sizeof(float));
            memcpy(kr_kv_v(ch->out, layer, ch->out_start), vt + (size_t)row * d,
                   (size_t)ch->n * (size_t)d * sizeof(float));
            row += ch->n;
        }
        st = kr_attention_rows(pool, total, keys, layer, aw->n_heads, aw->head_dim, d, q, att, err);
        if (st != KR_OK) goto done;
        kr_linear_run(pool, &aw->out, att, total, d, h, d);
        kr_add_f32((int)td, h, x);

        kr_rmsnorm_f32(total, d, x, d, bw->norm2, KR_RMS_EPS, h, d);
        kr_linear_run(pool, &bw->w1, h, total, d, f1, ff_dim);
        kr_linear_run(pool, &bw->w3, h, total, d, f3, ff_dim);
        kr_silu_mul_f32((int)tf, f1, f3, f1);
        kr_linear_run(pool, &bw->w2, f1, total, ff_dim, h, d);
        kr_add_f32((int)td, h, x);
    }
done:
    free(h); free(q); free(kt); free(vt); free(att); free(f1); free(f3);
    free(keys);
    return st;
}
