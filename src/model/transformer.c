/*
 * model/transformer — see transformer.h. Block: x += out(attn(rope(q,k), v)) of RMSNorm1(x);
 * x += w2(silu(w1 h) ⊙ w3 h) with h = RMSNorm2(x). Attention is causal, scale 1/√head_dim.
 */
#include "model/transformer.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/attention_plan.h"
#include "model/quantize.h"
#include "kernels/kv_convert.h"

#define KR_RMS_EPS 1e-5f

kr_status kr_chunks_check(const kr_chunk *chunks, int n_chunks, int n_layers_needed, int *total,
                          kr_error *err) {
    int sum = 0;
    for (int c = 0; c < n_chunks; c++) {
        const kr_chunk *ch = &chunks[c];
        if (ch->n <= 0 || ch->pos0 < 0 || !ch->out || ch->n_past < 0 ||
            ch->n_past > KR_MAX_PAST_REFS)
            return kr_error_set(err, KR_ERR_INTERNAL, "chunk %d: bad shape", c);
        if (ch->out_start < 0 || ch->out_start + ch->n > ch->out->cap ||
            ch->out->n_layers < n_layers_needed)
            return kr_error_set(err, KR_ERR_INTERNAL, "chunk %d: output rows %d..%d exceed store",
                                c, ch->out_start, ch->out_start + ch->n);
        for (int r = 0; r < ch->n_past; r++) {
            const kr_kv_ref *ref = &ch->past[r];
            if (!ref->store || ref->start < 0 || ref->n < 0 ||
                ref->start + ref->n > ref->store->cap || ref->store->n_layers < n_layers_needed)
                return kr_error_set(err, KR_ERR_INTERNAL, "chunk %d: past ref %d out of range", c,
                                    r);
        }
        sum += ch->n;
    }
    *total = sum;
    return KR_OK;
}

/* The row-wise work between a layer's GEMMs. Rows are independent (kernels.h: a row's result
 * never depends on the rows beside it), so large calls split rows over the pool; each op is
 * the same kernel call on the same row either way. Fusing the residual add with the norm that
 * reads its result, and the RoPE with the KV write, makes one pass over the rows instead of
 * two while they are in cache. */
typedef enum row_op {
    ROW_NORM1, /* h = RMSNorm1(x) */
    ROW_ROPE_KV, /* rotate q and k; write k, v to the chunk's store */
    ROW_ADD_NORM2, /* x += h; h = RMSNorm2(x) */
    ROW_SILU, /* f1 = silu(f1) ⊙ f3 */
    ROW_ADD, /* x += h */
} row_op;

typedef struct row_task {
    row_op op;
    const kr_block_weights *bw;
    const kr_chunk *chunks;
    int n_chunks, total, d, ff_dim, layer;
    float *x, *h, *q, *kt, *vt, *f1, *f3;
} row_task;

/* RoPE and the KV write for rows [r0, r1) of the call, each in its chunk's positions. */
static void rope_kv_rows(const row_task *t, int r0, int r1) {
    const kr_attn_weights *aw = &t->bw->attn;
    size_t d = (size_t)t->d;
    for (int c = 0, base = 0; c < t->n_chunks && base < r1; base += t->chunks[c].n, c++) {
        const kr_chunk *ch = &t->chunks[c];
        int a = r0 > base ? r0 - base : 0, b = r1 - base < ch->n ? r1 - base : ch->n;
        if (a >= b) continue;
        size_t row = (size_t)(base + a);
        kr_rope_f32(b - a, aw->n_heads, aw->head_dim, t->q + row * d, t->d, ch->pos0 + a,
                    aw->inv_freq);
        kr_rope_f32(b - a, aw->n_heads, aw->head_dim, t->kt + row * d, t->d, ch->pos0 + a,
                    aw->inv_freq);
        kr_kv_store_write(ch->out, t->layer, ch->out_start + a, t->kt + row * d, t->vt + row * d,
                          b - a);
    }
}

static void row_worker(void *ctx, int ith, int nth) {
    const row_task *t = ctx;
    int r0 = (int)((long long)t->total * ith / nth),
        r1 = (int)((long long)t->total * (ith + 1) / nth);
    if (r0 >= r1) return;
    size_t d = (size_t)t->d, off = (size_t)r0 * d, n = (size_t)(r1 - r0);
    switch (t->op) {
    case ROW_NORM1:
        kr_rmsnorm_f32(r1 - r0, t->d, t->x + off, t->d, t->bw->norm1, KR_RMS_EPS, t->h + off, t->d);
        break;
    case ROW_ROPE_KV: rope_kv_rows(t, r0, r1); break;
    case ROW_ADD_NORM2:
        kr_add_f32((int)(n * d), t->h + off, t->x + off);
        kr_rmsnorm_f32(r1 - r0, t->d, t->x + off, t->d, t->bw->norm2, KR_RMS_EPS, t->h + off, t->d);
        break;
    case ROW_SILU: {
        size_t fo = (size_t)r0 * (size_t)t->ff_dim;
        kr_silu_mul_f32((int)(n * (size_t)t->ff_dim), t->f1 + fo, t->f3 + fo, t->f1 + fo);
        break;
    }
    case ROW_ADD: kr_add_f32((int)(n * d), t->h + off, t->x + off); break;
    }
}

/* Values per row an op touches, and the profile's FLOP and byte counts per value. */
static void row_op_costs(const row_task *t, double *values, double *flops, double *bytes) {
    double td = (double)t->total * t->d, tf = (double)t->total * t->ff_dim;
    *values = *flops = *bytes = 0;
    switch (t->op) {
    case ROW_NORM1: *values = td, *flops = 4.0 * td, *bytes = 8.0 * td; break;
    case ROW_ROPE_KV: *values = td, *flops = 6.0 * td, *bytes = 24.0 * td; break;
    case ROW_ADD_NORM2: *values = td, *flops = 5.0 * td, *bytes = 20.0 * td; break;
    case ROW_SILU: *values = tf, *flops = 5.0 * tf, *bytes = 12.0 * tf; break;
    case ROW_ADD: *values = td, *flops = td, *bytes = 12.0 * td; break;
    }
}

/* Row ops below this many values (64 rows of d_model 512: decode steps) stay on the caller,
 * where a pool round trip of a few µs would cost about what splitting them saves. */
#define KR_POOL_MIN_ROW_VALUES (1 << 15)

static void run_rows(const kr_exec *ex, row_task *t, row_op op) {
    t->op = op;
    double t0 = kr_prof_begin(ex->prof), values, flops, bytes;
    row_op_costs(t, &values, &flops, &bytes);
    kr_pool_run_if_worth(ex->pool, row_worker, t, values, KR_POOL_MIN_ROW_VALUES);
    kr_prof_end(ex->prof, KR_PROF_PART_NORM_ACT, t0, flops, bytes);
}

/* RMSNorm1 and the Q/K/V projections of one block over m rows: what every block does first. */
static kr_status block_qkv(const kr_exec *ex, row_task *rt, const kr_block_weights *bw, int m,
                           float *q, float *k, float *v, kr_error *err) {
    const kr_attn_weights *aw = &bw->attn;
    int d = rt->d;
    rt->bw = bw;
    run_rows(ex, rt, ROW_NORM1);
    const kr_linear *qkv[3] = { &aw->q, &aw->k, &aw->v };
    float *qkv_out[3] = { q, k, v };
    const int ld3[3] = { d, d, d };
    return kr_linear_run_multi(ex, 3, qkv, rt->h, m, d, qkv_out, ld3, err);
}

kr_status kr_transformer_qkv(const kr_block_weights *bw, int d, const kr_exec *ex, const float *x,
                             int m, float *q, float *k, float *v, kr_error *err) {
    if (m <= 0) return KR_OK;
    size_t mark = kr_arena_mark(ex->arena);
    float *h = KR_ARENA_NEW(ex->arena, float, (size_t)m *(size_t)d);
    kr_status st;
    if (!h) {
        st = kr_error_set(err, KR_ERR_NOMEM, "transformer: out of memory for %d rows", m);
    } else {
        /* The row op only reads x here (ROW_NORM1 writes h). */
        row_task rt = { .total = m, .d = d, .x = (float *)x, .h = h };
        st = block_qkv(ex, &rt, bw, m, q, k, v, err);
    }
    kr_arena_release(ex->arena, mark);
    return st;
}

kr_status kr_transformer_run(const kr_block_weights *blocks, int n_blocks, int layer0, int d,
                             int ff_dim, const kr_exec *ex, float *x, const kr_chunk *chunks,
                             int n_chunks, const kr_qkv_rows *first, kr_error *err) {
    int total = 0;
    kr_status st = kr_chunks_check(chunks, n_chunks, layer0 + n_blocks, &total, err);
    if (st != KR_OK) return st;
    if (n_blocks == 0 || total == 0) return KR_OK;

    size_t td = (size_t)total * (size_t)d, tf = (size_t)total * (size_t)ff_dim;
    size_t mark = kr_arena_mark(ex->arena);
    float *h = KR_ARENA_NEW(ex->arena, float, td);
    /* With the first block's projections given, their buffers serve every block. */
    float *q = first ? first->q : KR_ARENA_NEW(ex->arena, float, td);
    float *kt = first ? first->k : KR_ARENA_NEW(ex->arena, float, td);
    float *vt = first ? first->v : KR_ARENA_NEW(ex->arena, float, td);
    float *att = KR_ARENA_NEW(ex->arena, float, td);
    float *f1 = KR_ARENA_NEW(ex->arena, float, tf);
    float *f3 = KR_ARENA_NEW(ex->arena, float, tf);
    kr_attn_keys *keys = KR_ARENA_NEW(ex->arena, kr_attn_keys, total);
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
            k->ref[k->n++] = (kr_kv_ref){ chunks[c].out, chunks[c].out_start, i + 1 };
        }

    row_task rt = { .chunks = chunks,
                    .n_chunks = n_chunks,
                    .total = total,
                    .d = d,
                    .ff_dim = ff_dim,
                    .x = x,
                    .h = h,
                    .q = q,
                    .kt = kt,
                    .vt = vt,
                    .f1 = f1,
                    .f3 = f3 };
    for (int b = 0; b < n_blocks; b++) {
        const kr_block_weights *bw = &blocks[b];
        const kr_attn_weights *aw = &bw->attn;
        int layer = layer0 + b;
        rt.bw = bw;
        rt.layer = layer;
        if ((b > 0 || !first) && (st = block_qkv(ex, &rt, bw, total, q, kt, vt, err)) != KR_OK)
            goto done;
        run_rows(ex, &rt, ROW_ROPE_KV);
        st = kr_attention_rows(ex, total, keys, layer, aw->n_heads, aw->head_dim, d, q, att, err);
        if (st != KR_OK) goto done;
        if ((st = kr_linear_run(ex, &aw->out, att, total, d, h, d, err)) != KR_OK) goto done;
        run_rows(ex, &rt, ROW_ADD_NORM2);
        const kr_linear *gate_up[2] = { &bw->w1, &bw->w3 };
        float *gate_up_out[2] = { f1, f3 };
        const int ldf[2] = { ff_dim, ff_dim };
        if ((st = kr_linear_run_multi(ex, 2, gate_up, h, total, d, gate_up_out, ldf, err)) != KR_OK)
            goto done;
        run_rows(ex, &rt, ROW_SILU);
        if ((st = kr_linear_run(ex, &bw->w2, f1, total, ff_dim, h, d, err)) != KR_OK) goto done;
        run_rows(ex, &rt, ROW_ADD);
    }
done:
    kr_arena_release(ex->arena, mark);
    return st;
}
