/*
 * model/transformer — the pre-norm causal transformer block stack shared by the tokenizer's
 * encoder/decoder and the predictor, run over KV stores so that prefill, cached decode,
 * window re-runs and many paths are all the same call.
 *
 * A kr_kv_store holds K (RoPE-rotated) and V rows for n_layers layers × cap positions. A
 * chunk is a run of consecutive new tokens of one sequence: it attends, in order, to the
 * rows named by its `past` refs (any stores: a shared context prefix, then its own path's
 * rows), then causally to its own rows, which are written to `out` at `out_start`.
 * Because kernels are deterministic per row (kernels.h), a chunk's result does not depend on
 * which other chunks share the call, nor on how its past is split across refs.
 */
#ifndef KR_MODEL_TRANSFORMER_H
#define KR_MODEL_TRANSFORMER_H

#include <stddef.h>

#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "kronos.h"
#include "model/weights.h"

/* Precision of the K/V rows a store holds (kr_model_params.kv_dtype).
 *   F32   rows as computed.
 *   BF16  each value rounded to bf16 (round to nearest even, kr_f32_to_bf16): half the bytes.
 *   INT8  symmetric per group of `group` consecutive values of a row: scale = max|x| / 127,
 *         q = round-to-nearest-even(x / scale) clamped to ±127, x ≈ q · scale (scale 0 for an
 *         all-zero group): a quarter of the bytes plus one f32 scale per group.
 * Conversion is row-local, so a row reads back the same whatever call wrote it or which rows
 * share the store: cached decode still equals full recomputation bit for bit within a dtype. */
typedef enum kr_kv_dtype { KR_KV_F32 = 0, KR_KV_BF16, KR_KV_INT8 } kr_kv_dtype;

typedef struct kr_kv_store {
    int n_layers;   /* layers stored (the predictor adds one for the s2 cross-attention) */
    int d;          /* values per row (d_model) */
    int cap;        /* rows per layer */
    kr_kv_dtype dtype;
    /* INT8: values per scale. It divides the head_dim of every layer using the store, so no
     * scale spans two heads: with the self-attention head_dim it is exactly per head there,
     * and finer on the predictor's dep layer, whose 4 heads are wider. */
    int group;
    float *k, *v;   /* F32: [n_layers][cap][d]; NULL otherwise */
    void *qk, *qv;  /* BF16: uint16_t, INT8: int8_t [n_layers][cap][d]; NULL for F32 */
    float *sk, *sv; /* INT8: [n_layers][cap][d / group]; NULL otherwise */
} kr_kv_store;

/* An F32 store. */
kr_status kr_kv_store_init(kr_kv_store *s, int n_layers, int d, int cap, kr_error *err);
/* A store of any dtype; group (INT8 only, ignored otherwise) must divide d. */
kr_status kr_kv_store_init_dtype(kr_kv_store *s, int n_layers, int d, int cap,
                                 kr_kv_dtype dtype, int group, kr_error *err);
void kr_kv_store_release(kr_kv_store *s);
/* Bytes the store holds (rows and scales): what the KV budget is charged. 0 when released. */
size_t kr_kv_store_bytes(const kr_kv_store *s);
/* Stores K and V rows [row, row + n_rows) of a layer from k_rows / v_rows (row stride d),
 * converting to the store's dtype. */
void kr_kv_store_write(kr_kv_store *s, int layer, int row, const float *k_rows,
                       const float *v_rows, int n_rows);
/* The f32 values of rows [row, row + n_rows) of a layer into k_out / v_out (row stride d):
 * a copy for F32, the dequantised rows otherwise (the values attention uses). */
void kr_kv_store_read(const kr_kv_store *s, int layer, int row, int n_rows, float *k_out,
                      float *v_out);
/* F32 stores only: rows in place. */
static inline float *kr_kv_k(const kr_kv_store *s, int layer, int row) {
    return s->k + ((size_t)layer * (size_t)s->cap + (size_t)row) * (size_t)s->d;
}
static inline float *kr_kv_v(const kr_kv_store *s, int layer, int row) {
    return s->v + ((size_t)layer * (size_t)s->cap + (size_t)row) * (size_t)s->d;
}

/* Rows [start, start+n) of a store (same rows in every layer). */
typedef struct kr_kv_ref {
    const kr_kv_store *store;
    int start, n;
} kr_kv_ref;

#define KR_MAX_PAST_REFS 4

typedef struct kr_chunk {
    int n;                               /* new tokens (rows of x, consecutive) */
    int pos0;                            /* RoPE position of the first new token */
    kr_kv_ref past[KR_MAX_PAST_REFS];    /* keys before this chunk, in order */
    int n_past;
    kr_kv_store *out;                    /* receives this chunk's K/V rows */
    int out_start;
} kr_chunk;

/* y[m][n_out] = x[m][n_in]·wᵀ + b on the pool, with the f32 or the quantised weight (the
 * latter needs scratch: fails only when that cannot be allocated). Records x into l->stats
 * when calibrating. */
kr_status kr_linear_run(kr_pool *pool, const kr_linear *l, const float *x, int m, int ldx,
                        float *y, int ldy, kr_error *err);

/* Runs blocks[0..n_blocks) over x[total][d] (total = Σ chunk n), in place. Store layer of
 * block i is layer0 + i. `causal` is always 1 for Kronos blocks. */
kr_status kr_transformer_run(const kr_block_weights *blocks, int n_blocks, int layer0, int d,
                             int ff_dim, kr_pool *pool, float *x, const kr_chunk *chunks,
                             int n_chunks, kr_error *err);

/* Σ chunk n; validates refs and capacities. */
kr_status kr_chunks_check(const kr_chunk *chunks, int n_chunks, int n_layers_needed,
                          int *total, kr_error *err);

#endif
