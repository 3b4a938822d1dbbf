/*
 * model/transformer — the pre-norm causal transformer block stack shared by the tokenizer's
 * encoder/decoder and the predictor, run over KV stores so that prefill, cached decode,
 * window re-runs and many paths are all the same call.
 *
 * A kr_kv_store holds K (RoPE-rotated) and V rows for n_layers layers × cap positions, in
 * reference-counted blocks of KR_KV_BLOCK_ROWS rows (kv_pool.h). A
 * chunk is a run of consecutive new tokens of one sequence: it attends, in order, to the
 * rows named by its `past` refs (any stores: a shared context prefix, then its own path's
 * rows), then causally to its own rows, which are written to `out` at `out_start`.
 * Because kernels are deterministic per row (kernels.h), a chunk's result does not depend on
 * which other chunks share the call, nor on how its past is split across refs.
 */
#ifndef KR_MODEL_TRANSFORMER_H
#define KR_MODEL_TRANSFORMER_H

#include <stddef.h>

#include "base/workspace.h"
#include "kernels/kernels.h"
#include "kronos.h"
#include "model/kv_pool.h"
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

/* Rows per KV block. A store is a table of blocks: row r of layer l lives in block r / B at
 * (l, r % B), so a block holds B consecutive rows of every layer of the store. Blocks are
 * reference counted (kv_pool.h): stores may share the blocks of a common prefix. */
#define KR_KV_BLOCK_ROWS 16

typedef struct kr_kv_store {
    int n_layers; /* layers stored (the predictor adds one for the s2 cross-attention) */
    int d; /* values per row (d_model) */
    int cap; /* rows per layer */
    kr_kv_dtype dtype;
    /* INT8: values per scale. It divides the head_dim of every layer using the store, so no
     * scale spans two heads: with the self-attention head_dim it is exactly per head there,
     * and finer on the predictor's dep layer, whose 4 heads are wider. */
    int group;
    /* Values from one row of a layer to the next within a block: d for BF16 and INT8; for F32
     * d rounded up to an odd number of 64-byte lines (kr_kv_f32_stride), which attention reads
     * in place, so that the rows of one head spread over every L1 set instead of a few. */
    int stride;
    int n_blocks; /* ceil(cap / KR_KV_BLOCK_ROWS) */
    kr_kv_block **blocks; /* [n_blocks], each held with one reference */
    size_t elt; /* bytes per stored value: 4 f32, 2 bf16, 1 int8 */
    /* Byte offsets in a block's payload: K values [n_layers][B][stride], then V values, then
     * (INT8) K scales [n_layers][B][d / group], then V scales. */
    size_t v_off, sk_off, sv_off, block_bytes;
} kr_kv_store;

/* An F32 store. */
kr_status kr_kv_store_init(kr_kv_store *s, int n_layers, int d, int cap, kr_error *err);
/* A store of any dtype; group (INT8 only, ignored otherwise) must divide d. All its blocks are
 * allocated here, so a store never fails later for want of memory. */
kr_status kr_kv_store_init_dtype(kr_kv_store *s, int n_layers, int d, int cap, kr_kv_dtype dtype,
                                 int group, kr_error *err);
/* Bytes the blocks of such a store take (what kr_kv_store_bytes says once it is initialised),
 * without allocating them; 0 for a shape kr_kv_store_init_dtype refuses. */
size_t kr_kv_store_bytes_for(int n_layers, int d, int cap, kr_kv_dtype dtype, int group);
/* Drops the store's block references (a block shared with another store lives on). */
void kr_kv_store_release(kr_kv_store *s);
/* Bytes of the blocks the store holds (rows and scales, whole blocks, shared ones included):
 * what the KV budget is charged. 0 when released. */
size_t kr_kv_store_bytes(const kr_kv_store *s);
/* Bytes of the blocks only this store holds (one reference): a block shared with another
 * store is left to that store's account. */
size_t kr_kv_store_unshared_bytes(const kr_kv_store *s);
/* Makes rows [0, rows) of dst those of src: whole blocks by reference (dst drops its own),
 * a partial last block by copy. Stores must have the same shape and dtype. Shared rows are
 * read-only from then on in both stores: rows of a shared block must not be written. */
kr_status kr_kv_store_share_prefix(kr_kv_store *dst, const kr_kv_store *src, int rows,
                                   kr_error *err);
/* dst = rows [0, rows) of src by reference: its first ceil(rows / block) blocks, each with a
 * reference taken (a view for a cache entry that keeps only a window's head; read-only, as
 * shared rows are). dst must be zeroed; release it as any store. */
kr_status kr_kv_store_view_head(kr_kv_store *dst, const kr_kv_store *src, int rows, kr_error *err);
/* Holders of the block containing row `row` (tests, diagnostics). */
int kr_kv_store_row_refs(const kr_kv_store *s, int row);
/* Stores K and V rows [row, row + n_rows) of a layer from k_rows / v_rows (row stride d),
 * converting to the store's dtype. */
void kr_kv_store_write(kr_kv_store *s, int layer, int row, const float *k_rows, const float *v_rows,
                       int n_rows);
/* The f32 values of rows [row, row + n_rows) of a layer into k_out / v_out (row stride d):
 * a copy for F32, the dequantised rows otherwise (the values attention uses). */
void kr_kv_store_read(const kr_kv_store *s, int layer, int row, int n_rows, float *k_out,
                      float *v_out);

/* Row stride (in floats) of f32 rows of d values that are read in place by attention: d
 * rounded up to whole 64-byte lines, plus one line when that count is even. Rows a power of
 * two bytes apart (d_model 512: 2 KB) all start in the same few L1 sets, so a block of keys
 * evicts itself before the next query reads it; an odd line count walks every set. */
static inline int kr_kv_f32_stride(int d) {
    int lines = (d + 15) / 16;
    return (lines % 2 ? lines : lines + 1) * 16;
}

/* Where one row of a layer lives: which = 0 for K, 1 for V. Rows are evenly spaced within a
 * block only: row + 1 is at the returned address + stride values when row + 1 is in the same
 * block (row % KR_KV_BLOCK_ROWS < KR_KV_BLOCK_ROWS - 1), elsewhere otherwise. */
static inline void *kr_kv_row(const kr_kv_store *s, int which, int layer, int row) {
    size_t i = (size_t)layer * KR_KV_BLOCK_ROWS + (size_t)(row % KR_KV_BLOCK_ROWS);
    return s->blocks[row / KR_KV_BLOCK_ROWS]->data + (which ? s->v_off : 0) +
           i * (size_t)s->stride * s->elt;
}
/* INT8 stores: the d / group scales of one row (which as above). */
static inline float *kr_kv_row_scales(const kr_kv_store *s, int which, int layer, int row) {
    size_t i = (size_t)layer * KR_KV_BLOCK_ROWS + (size_t)(row % KR_KV_BLOCK_ROWS);
    return (float *)(s->blocks[row / KR_KV_BLOCK_ROWS]->data + (which ? s->sv_off : s->sk_off)) +
           i * (size_t)(s->d / s->group);
}
/* F32 stores: one row in place (see kr_kv_row for its neighbours, s->stride apart). */
static inline float *kr_kv_k(const kr_kv_store *s, int layer, int row) {
    return (float *)kr_kv_row(s, 0, layer, row);
}
static inline float *kr_kv_v(const kr_kv_store *s, int layer, int row) {
    return (float *)kr_kv_row(s, 1, layer, row);
}

/* Rows [start, start+n) of a store (same rows in every layer). */
typedef struct kr_kv_ref {
    const kr_kv_store *store;
    int start, n;
} kr_kv_ref;

#define KR_MAX_PAST_REFS 4

typedef struct kr_chunk {
    int n; /* new tokens (rows of x, consecutive) */
    int pos0; /* RoPE position of the first new token */
    kr_kv_ref past[KR_MAX_PAST_REFS]; /* keys before this chunk, in order */
    int n_past;
    kr_kv_store *out; /* receives this chunk's K/V rows */
    int out_start;
} kr_chunk;

/* y[m][n_out] = x[m][n_in]·wᵀ + b on the pool, with the f32 or the quantised weight (the
 * latter needs scratch: fails only when that cannot be allocated). Records x into l->stats
 * when calibrating. */
kr_status kr_linear_run(const kr_exec *ex, const kr_linear *l, const float *x, int m, int ldx,
                        float *y, int ldy, kr_error *err);

/* kr_linear_run for n (<= 4) Linears of the same input x (same n_in): y[i] = x·l[i]ᵀ + b, in
 * one parallel region, each output equal to its own kr_linear_run. */
kr_status kr_linear_run_multi(const kr_exec *ex, int n, const kr_linear *const *l, const float *x,
                              int m, int ldx, float *const *y, const int *ldy, kr_error *err);

/* Runs blocks[0..n_blocks) over x[total][d] (total = Σ chunk n), in place. Store layer of
 * block i is layer0 + i. `causal` is always 1 for Kronos blocks. */
kr_status kr_transformer_run(const kr_block_weights *blocks, int n_blocks, int layer0, int d,
                             int ff_dim, const kr_exec *ex, float *x, const kr_chunk *chunks,
                             int n_chunks, kr_error *err);

/* A block's Q, K and V projections of the same rows (row stride d), before RoPE. */
typedef struct kr_qkv_rows {
    float *q, *k, *v;
} kr_qkv_rows;

/* RMSNorm1 and the Q/K/V projections of block bw over x[m][d]: exactly what
 * kr_transformer_run computes first for those rows (kernels are row-deterministic), so a
 * caller can keep them for rows it will run again. */
kr_status kr_transformer_qkv(const kr_block_weights *bw, int d, const kr_exec *ex, const float *x,
                             int m, float *q, float *k, float *v, kr_error *err);

/* kr_transformer_run with blocks[0]'s projections of every row given (kr_transformer_qkv of
 * x, e.g. gathered from earlier calls): the first block starts at RoPE. The buffers are
 * rotated in place and serve as every block's scratch. */
kr_status kr_transformer_run_from_qkv(const kr_block_weights *blocks, int n_blocks, int layer0,
                                      int d, int ff_dim, const kr_exec *ex, float *x,
                                      const kr_chunk *chunks, int n_chunks,
                                      const kr_qkv_rows *first, kr_error *err);

/* Σ chunk n; validates refs and capacities. */
kr_status kr_chunks_check(const kr_chunk *chunks, int n_chunks, int n_layers_needed, int *total,
                          kr_error *err);

#endif
