/*
 * model/transformer — see transformer.h. Block: x += out(attn(rope(q,k), v)) of RMSNorm1(x);
 * x += w2(silu(w1 h) ⊙ w3 h) with h = RMSNorm2(x). Attention is causal, scale 1/√head_dim.
 */
#include "model/transformer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

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

/* One attention work item per (row, head); rows are mapped back to their chunk. */
typedef struct attn_task {
    const kr_chunk *chunks;
    const int *row_chunk;   /* [total] chunk index of each row */
    const int *row_first;   /* [total] first row of that chunk */
    int total, n_heads, head_dim, d, layer;
    float scale;
    const float *q;         /* [total][d] rotated queries */
    float *out;             /* [total][d] */
    float *scratch;         /* [nth][max_keys] */
    int max_keys;
} attn_task;

static void attn_worker(void *ctx, int ith, int nth) {
    const attn_task *t = ctx;
    int items = t->total * t->n_heads;
    int per = (items + nth - 1) / nth;
    int begin = ith * per, end = begin + per < items ? begin + per : items;
    float *scratch = t->scratch + (size_t)ith * (size_t)t->max_keys;
    for (int it = begin; it < end; it++) {
        int row = it / t->n_heads, h = it % t->n_heads;
        const kr_chunk *ch = &t->chunks[t->row_chunk[row]];
        int i = row - t->row_first[row]; /* index inside the chunk */
        kr_kv_span spans[KR_MAX_PAST_REFS + 1];
        int ns = 0;
        for (int r = 0; r < ch->n_past; r++) {
            const kr_kv_ref *ref = &ch->past[r];
            if (ref->n == 0) continue;
            spans[ns].k = kr_kv_k(ref->store, t->layer, ref->start) + h * t->head_dim;
            spans[ns].v = kr_kv_v(ref->store, t->layer, ref->start) + h * t->head_dim;
            spans[ns].n = ref->n;
            spans[ns].stride = ref->store->d;
            ns++;
        }
        spans[ns].k = kr_kv_k(ch->out, t->layer, ch->out_start) + h * t->head_dim;
        spans[ns].v = kr_kv_v(ch->out, t->layer, ch->out_start) + h * t->head_dim;
        spans[ns].n = i + 1;
        spans[ns].stride = ch->out->d;
        ns++;
        kr_attend_f32(t->q + (size_t)row * t->d + h * t->head_dim, t->head_dim, t->scale, spans, ns,
                      scratch, t->out + (size_t)row * t->d + h * t->head_dim);
    }
}

kr_status kr_transformer_run(const kr_block_weights *blocks, int n_blocks, int layer0, int d,
                             int ff_dim, kr_pool *pool, float *x, const kr_chunk *chunks,
                             int n_chunks, kr_error *err) {
    int total = 0;
    kr_status st = kr_chunks_check(chunks, n_chunks, layer0 + n_blocks, &total, err);
    if (st != KR_OK) return st;
    if (n_blocks == 0 || total == 0) return KR_OK;

    int max_keys = 0;
    for (int c = 0; c < n_chunks; c++) {
        int keys = chunks[c].n;
        for (int r = 0; r < chunks[c].n_past; r++) keys += chunks[c].past[r].n;
        if (keys > max_keys) max_keys = keys;
    }
    int nth = kr_pool_size(pool);
    size_t td = (size_t)total * (size_t)d, tf = (size_t)total * (size_t)ff_dim;
    float *h = malloc(td * sizeof(float));
    float *q = malloc(td * sizeof(float));
    float *kt = malloc(td * sizeof(float));
    float *vt = malloc(td * sizeof(float));
    float *att = malloc(td * sizeof(float));
    float *f1 = malloc(tf * sizeof(float));
    float *f3 = malloc(tf * sizeof(float));
    float *scratch = malloc((size_t)nth * (size_t)max_keys * sizeof(float));
    int *row_chunk = malloc((size_t)total * sizeof(int));
    int *row_first = malloc((size_t)total * sizeof(int));
    if (!h || !q || !kt || !vt || !att || !f1 || !f3 || !scratch || !row_chunk || !row_first) {
        st = kr_error_set(err, KR_ERR_NOMEM, "transformer: out of memory for %d rows", total);
        goto done;
    }
    for (int c = 0, row = 0; c < n_chunks; c++)
        for (int i = 0; i < chunks[c].n; i++, row++) {
            row_chunk[row] = c;
            row_first[row] = row - i;
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
        attn_task at = {chunks, row_chunk, row_first, total, aw->n_heads, aw->head_dim, d, layer,
                        1.0f / sqrtf((float)aw->head_dim), q, att, scratch, max_keys};
        kr_pool_run(pool, attn_worker, &at);
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
    free(scratch); free(row_chunk); free(row_first);
    return st;
}
