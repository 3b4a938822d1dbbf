/*
 * model/transformer — see transformer.h. Block: x += out(attn(rope(q,k), v)) of RMSNorm1(x);
 * x += w2(silu(w1 h) ⊙ w3 h) with h = RMSNorm2(x). Attention is causal, scale 1/√head_dim.
 */
#include "model/transformer.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/attention_plan.h"
#include "model/quantize.h"
#include "kernels/kv_convert.h"

#define KR_RMS_EPS 1e-5f

#define KVB KR_KV_BLOCK_ROWS

kr_status kr_kv_store_init(kr_kv_store *s, int n_layers, int d, int cap, kr_error *err) {
    return kr_kv_store_init_dtype(s, n_layers, d, cap, KR_KV_F32, 0, err);
}

kr_status kr_kv_store_init_dtype(kr_kv_store *s, int n_layers, int d, int cap, kr_kv_dtype dtype,
                                 int group, kr_error *err) {
    memset(s, 0, sizeof *s);
    if (n_layers <= 0 || d <= 0 || cap <= 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kv store: bad size %d×%d×%d", n_layers, cap,
                            d);
    if (dtype != KR_KV_F32 && dtype != KR_KV_BF16 && dtype != KR_KV_INT8)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kv store: unknown dtype %d", (int)dtype);
    if (dtype == KR_KV_INT8 && (group <= 0 || d % group != 0))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kv store: int8 group %d does not divide %d",
                            group, d);
    s->n_layers = n_layers;
    s->d = d;
    s->cap = cap;
    s->dtype = dtype;
    s->group = dtype == KR_KV_INT8 ? group : 0;
    s->elt = dtype == KR_KV_F32    ? sizeof(float)
             : dtype == KR_KV_BF16 ? sizeof(uint16_t)
                                   : sizeof(int8_t);
    size_t values = (size_t)n_layers * KVB * (size_t)d;
    size_t scales = dtype == KR_KV_INT8 ? values / (size_t)group * sizeof(float) : 0;
    /* Each region starts on a cache line, as a separately allocated array would. */
    size_t vb = (values * s->elt + 63) / 64 * 64, sb = (scales + 63) / 64 * 64;
    s->v_off = vb;
    s->sk_off = 2 * vb;
    s->sv_off = 2 * vb + sb;
    s->block_bytes = 2 * vb + 2 * sb;
    s->n_blocks = (cap + KVB - 1) / KVB;
    s->blocks = calloc((size_t)s->n_blocks, sizeof *s->blocks);
    int ok = s->blocks != NULL;
    for (int i = 0; ok && i < s->n_blocks; i++)
        ok = (s->blocks[i] = kr_kv_block_alloc(s->block_bytes)) != NULL;
    if (!ok) {
        size_t bytes = (size_t)s->n_blocks * s->block_bytes;
        kr_kv_store_release(s);
        return kr_error_set(err, KR_ERR_NOMEM, "kv store: cannot allocate %zu bytes", bytes);
    }
    return KR_OK;
}

void kr_kv_store_release(kr_kv_store *s) {
    if (!s) return;
    for (int i = 0; s->blocks && i < s->n_blocks; i++) kr_kv_block_unref(s->blocks[i]);
    free(s->blocks);
    memset(s, 0, sizeof *s);
}

size_t kr_kv_store_bytes(const kr_kv_store *s) {
    size_t n = 0;
    for (int i = 0; s->blocks && i < s->n_blocks; i++)
        if (s->blocks[i]) n++;
    return n * s->block_bytes;
}

int kr_kv_store_row_refs(const kr_kv_store *s, int row) {
    return kr_kv_block_refs(s->blocks[row / KVB]);
}

/* Rows [r, r + n) of every layer of one block, raw (codes and scales as stored). */
static void copy_block_rows(const kr_kv_store *s, unsigned char *dst, const unsigned char *src,
                            int r, int n) {
    size_t row_bytes = (size_t)s->d * s->elt,
           srow = s->group ? (size_t)(s->d / s->group) * sizeof(float) : 0;
    for (int l = 0; l < s->n_layers; l++) {
        size_t i = (size_t)l * KVB + (size_t)r;
        memcpy(dst + i * row_bytes, src + i * row_bytes, (size_t)n * row_bytes);
        memcpy(dst + s->v_off + i * row_bytes, src + s->v_off + i * row_bytes,
               (size_t)n * row_bytes);
        if (srow) {
            memcpy(dst + s->sk_off + i * srow, src + s->sk_off + i * srow, (size_t)n * srow);
            memcpy(dst + s->sv_off + i * srow, src + s->sv_off + i * srow, (size_t)n * srow);
        }
    }
}

kr_status kr_kv_store_share_prefix(kr_kv_store *dst, const kr_kv_store *src, int rows,
                                   kr_error *err) {
    if (dst->n_layers != src->n_layers || dst->d != src->d || dst->dtype != src->dtype ||
        dst->group != src->group || rows < 0 || rows > src->cap || rows > dst->cap)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "kv store: cannot share %d rows between stores of "
                            "different shapes",
                            rows);
    int whole = rows / KVB, part = rows % KVB;
    if (part > 0 && dst->blocks[whole] == src->blocks[whole]) part = 0; /* already shared */
    if (part > 0 && kr_kv_block_refs(dst->blocks[whole]) > 1) {
        /* The copy must not land in a block another store still reads. */
        kr_kv_block *own = kr_kv_block_alloc(dst->block_bytes);
        if (!own)
            return kr_error_set(err, KR_ERR_NOMEM, "kv store: cannot allocate %zu bytes",
                                dst->block_bytes);
        copy_block_rows(dst, own->data, dst->blocks[whole]->data, 0, KVB);
        kr_kv_block_unref(dst->blocks[whole]);
        dst->blocks[whole] = own;
    }
    for (int i = 0; i < whole; i++) {
        if (dst->blocks[i] == src->blocks[i]) continue;
        kr_kv_block_ref(src->blocks[i]);
        kr_kv_block_unref(dst->blocks[i]);
        dst->blocks[i] = src->blocks[i];
    }
    if (part > 0) copy_block_rows(dst, dst->blocks[whole]->data, src->blocks[whole]->data, 0, part);
    return KR_OK;
}

/* Rows [row, row + n) of one block of a layer: the unit a conversion runs over, since rows
 * are contiguous only within a block. */
static void write_rows(kr_kv_store *s, int layer, int row, const float *k_rows, const float *v_rows,
                       int n) {
    size_t values = (size_t)n * (size_t)s->d;
    if (s->dtype == KR_KV_F32) {
        memcpy(kr_kv_row(s, 0, layer, row), k_rows, values * sizeof(float));
        memcpy(kr_kv_row(s, 1, layer, row), v_rows, values * sizeof(float));
    } else if (s->dtype == KR_KV_BF16) {
        kr_kv_pack_bf16(k_rows, kr_kv_row(s, 0, layer, row), values);
        kr_kv_pack_bf16(v_rows, kr_kv_row(s, 1, layer, row), values);
    } else {
        int d = s->d, ns = d / s->group;
        int8_t *qk = kr_kv_row(s, 0, layer, row), *qv = kr_kv_row(s, 1, layer, row);
        float *sk = kr_kv_row_scales(s, 0, layer, row), *sv = kr_kv_row_scales(s, 1, layer, row);
        for (int r = 0; r < n; r++) {
            kr_kv_pack_int8(k_rows + (size_t)r * d, qk + (size_t)r * d, sk + (size_t)r * ns, d,
                            s->group);
            kr_kv_pack_int8(v_rows + (size_t)r * d, qv + (size_t)r * d, sv + (size_t)r * ns, d,
                            s->group);
        }
    }
}

static void read_rows(const kr_kv_store *s, int layer, int row, int n, float *k_out, float *v_out) {
    size_t values = (size_t)n * (size_t)s->d;
    if (s->dtype == KR_KV_F32) {
        memcpy(k_out, kr_kv_row(s, 0, layer, row), values * sizeof(float));
        memcpy(v_out, kr_kv_row(s, 1, layer, row), values * sizeof(float));
    } else if (s->dtype == KR_KV_BF16) {
        kr_kv_unpack_bf16(kr_kv_row(s, 0, layer, row), k_out, values);
        kr_kv_unpack_bf16(kr_kv_row(s, 1, layer, row), v_out, values);
    } else {
        int d = s->d, ns = d / s->group;
        const int8_t *qk = kr_kv_row(s, 0, layer, row), *qv = kr_kv_row(s, 1, layer, row);
        const float *sk = kr_kv_row_scales(s, 0, layer, row),
                    *sv = kr_kv_row_scales(s, 1, layer, row);
        for (int r = 0; r < n; r++) {
            kr_kv_unpack_int8(qk + (size_t)r * d, sk + (size_t)r * ns, k_out + (size_t)r * d, d,
                              s->group);
            kr_kv_unpack_int8(qv + (size_t)r * d, sv + (size_t)r * ns, v_out + (size_t)r * d, d,
                              s->group);
        }
    }
}

void kr_kv_store_write(kr_kv_store *s, int layer, int row, const float *k_rows, const float *v_rows,
                       int n_rows) {
    size_t d = (size_t)s->d;
    for (int done = 0; done < n_rows;) {
        int r = row + done, n = KVB - r % KVB;
        if (n > n_rows - done) n = n_rows - done;
        write_rows(s, layer, r, k_rows + (size_t)done * d, v_rows + (size_t)done * d, n);
        done += n;
    }
}

void kr_kv_store_read(const kr_kv_store *s, int layer, int row, int n_rows, float *k_out,
                      float *v_out) {
    size_t d = (size_t)s->d;
    for (int done = 0; done < n_rows;) {
        int r = row + done, n = KVB - r % KVB;
        if (n > n_rows - done) n = n_rows - done;
        read_rows(s, layer, r, n, k_out + (size_t)done * d, v_out + (size_t)done * d);
        done += n;
    }
}

typedef struct gemm_task {
    const kr_linear *l;
    const float *x;
    int m, ldx, ldy;
    float *y;
    void *scratch; /* quantised: kr_qgemm scratch */
} gemm_task;

static void gemm_worker(void *ctx, int ith, int nth) {
    const gemm_task *t = ctx;
    kr_gemm_f32(t->m, t->l->n_out, t->l->n_in, t->x, t->ldx, t->l->w, t->l->b, t->y, t->ldy, ith,
                nth);
}

static void qprepare_worker(void *ctx, int ith, int nth) {
    const gemm_task *t = ctx;
    int m0 = (int)((long long)t->m * ith / nth), m1 = (int)((long long)t->m * (ith + 1) / nth);
    kr_qgemm_prepare(t->l->q, t->m, t->x, t->ldx, t->scratch, m0, m1);
}

static void qgemm_worker(void *ctx, int ith, int nth) {
    const gemm_task *t = ctx;
    kr_qgemm_run(t->l->q, t->m, t->x, t->ldx, t->l->b, t->y, t->ldy, t->scratch, ith, nth);
}

/* What the profile counts for y[m][n_out] = x·wᵀ + b: 2·m·n_out·n_in FLOPs; the weight bytes
 * (as stored) plus the activations read and written. */
static void prof_linear(const kr_exec *ex, const kr_linear *l, int m, double t0) {
    if (!ex->prof) return;
    double wbytes = l->q ? (double)kr_qmat_bytes(l->q) : 4.0 * l->n_out * l->n_in;
    kr_prof_end(ex->prof, KR_PROF_PART_GEMM, t0, 2.0 * m * l->n_out * l->n_in,
                wbytes + 4.0 * m * (l->n_in + l->n_out));
}

kr_status kr_linear_run(const kr_exec *ex, const kr_linear *l, const float *x, int m, int ldx,
                        float *y, int ldy, kr_error *err) {
    if (m <= 0) return KR_OK;
    if (l->stats) kr_act_stats_add(l->stats, x, m, ldx);
    double t0 = kr_prof_begin(ex->prof);
    gemm_task t = { l, x, m, ldx, ldy, y, NULL };
    if (!l->q) {
        kr_pool_run(ex->pool, gemm_worker, &t);
        prof_linear(ex, l, m, t0);
        return KR_OK;
    }
    size_t bytes = kr_qgemm_scratch_bytes(l->q, m, kr_pool_size(ex->pool));
    size_t mark = kr_arena_mark(ex->arena);
    t.scratch = kr_arena_alloc(ex->arena, bytes);
    if (!t.scratch)
        return kr_error_set(err, KR_ERR_NOMEM,
                            "linear %d×%d: out of memory for %zu bytes of "
                            "quantised-GEMM scratch",
                            l->n_out, l->n_in, bytes);
    /* Activation preparation is split over rows, the GEMM over output columns. */
    if (kr_qgemm_needs_prepare(l->q)) kr_pool_run(ex->pool, qprepare_worker, &t);
    kr_pool_run(ex->pool, qgemm_worker, &t);
    kr_arena_release(ex->arena, mark);
    prof_linear(ex, l, m, t0);
    return KR_OK;
}

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

kr_status kr_transformer_run(const kr_block_weights *blocks, int n_blocks, int layer0, int d,
                             int ff_dim, const kr_exec *ex, float *x, const kr_chunk *chunks,
                             int n_chunks, kr_error *err) {
    int total = 0;
    kr_status st = kr_chunks_check(chunks, n_chunks, layer0 + n_blocks, &total, err);
    if (st != KR_OK) return st;
    if (n_blocks == 0 || total == 0) return KR_OK;

    size_t td = (size_t)total * (size_t)d, tf = (size_t)total * (size_t)ff_dim;
    size_t mark = kr_arena_mark(ex->arena);
    float *h = KR_ARENA_NEW(ex->arena, float, td);
    float *q = KR_ARENA_NEW(ex->arena, float, td);
    float *kt = KR_ARENA_NEW(ex->arena, float, td);
    float *vt = KR_ARENA_NEW(ex->arena, float, td);
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

    for (int b = 0; b < n_blocks; b++) {
        const kr_block_weights *bw = &blocks[b];
        const kr_attn_weights *aw = &bw->attn;
        int layer = layer0 + b;
        double t0 = kr_prof_begin(ex->prof);
        kr_rmsnorm_f32(total, d, x, d, bw->norm1, KR_RMS_EPS, h, d);
        kr_prof_end(ex->prof, KR_PROF_PART_NORM_ACT, t0, 4.0 * (double)td, 8.0 * (double)td);
        if ((st = kr_linear_run(ex, &aw->q, h, total, d, q, d, err)) != KR_OK ||
            (st = kr_linear_run(ex, &aw->k, h, total, d, kt, d, err)) != KR_OK ||
            (st = kr_linear_run(ex, &aw->v, h, total, d, vt, d, err)) != KR_OK)
            goto done;
        t0 = kr_prof_begin(ex->prof);
        for (int c = 0, row = 0; c < n_chunks; c++) {
            const kr_chunk *ch = &chunks[c];
            kr_rope_f32(ch->n, aw->n_heads, aw->head_dim, q + (size_t)row * d, d, ch->pos0,
                        aw->inv_freq);
            kr_rope_f32(ch->n, aw->n_heads, aw->head_dim, kt + (size_t)row * d, d, ch->pos0,
                        aw->inv_freq);
            kr_kv_store_write(ch->out, layer, ch->out_start, kt + (size_t)row * d,
                              vt + (size_t)row * d, ch->n);
            row += ch->n;
        }
        kr_prof_end(ex->prof, KR_PROF_PART_NORM_ACT, t0, 6.0 * (double)td, 24.0 * (double)td);
        st = kr_attention_rows(ex, total, keys, layer, aw->n_heads, aw->head_dim, d, q, att, err);
        if (st != KR_OK) goto done;
        if ((st = kr_linear_run(ex, &aw->out, att, total, d, h, d, err)) != KR_OK) goto done;
        t0 = kr_prof_begin(ex->prof);
        kr_add_f32((int)td, h, x);
        kr_rmsnorm_f32(total, d, x, d, bw->norm2, KR_RMS_EPS, h, d);
        kr_prof_end(ex->prof, KR_PROF_PART_NORM_ACT, t0, 5.0 * (double)td, 20.0 * (double)td);
        if ((st = kr_linear_run(ex, &bw->w1, h, total, d, f1, ff_dim, err)) != KR_OK ||
            (st = kr_linear_run(ex, &bw->w3, h, total, d, f3, ff_dim, err)) != KR_OK)
            goto done;
        t0 = kr_prof_begin(ex->prof);
        kr_silu_mul_f32((int)tf, f1, f3, f1);
        kr_prof_end(ex->prof, KR_PROF_PART_NORM_ACT, t0, 5.0 * (double)tf, 12.0 * (double)tf);
        if ((st = kr_linear_run(ex, &bw->w2, f1, total, ff_dim, h, d, err)) != KR_OK) goto done;
        t0 = kr_prof_begin(ex->prof);
        kr_add_f32((int)td, h, x);
        kr_prof_end(ex->prof, KR_PROF_PART_NORM_ACT, t0, (double)td, 12.0 * (double)td);
    }
done:
    kr_arena_release(ex->arena, mark);
    return st;
}
