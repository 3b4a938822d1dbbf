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

typedef struct kr_kv_store {
    int n_layers;   /* layers stored (the predictor adds one for the s2 cross-attention) */
    int d;          /* floats per row (d_model) */
    int cap;        /* rows per layer */
    float *k, *v;   /* [n_layers][cap][d] */
} kr_kv_store;

kr_status kr_kv_store_init(kr_kv_store *s, int n_layers, int d, int cap, kr_error *err);
void kr_kv_store_release(kr_kv_store *s);
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

/* y[m][n_out] = x[m][n_in]·wᵀ + b on the pool. */
void kr_linear_run(kr_pool *pool, const kr_linear *l, const float *x, int m, int ldx, float *y,
                   int ldy);

/* Runs blocks[0..n_blocks) over x[total][d] (total = Σ chunk n), in place. Store layer of
 * block i is layer0 + i. `causal` is always 1 for Kronos blocks. */
kr_status kr_transformer_run(const kr_block_weights *blocks, int n_blocks, int layer0, int d,
                             int ff_dim, kr_pool *pool, float *x, const kr_chunk *chunks,
                             int n_chunks, kr_error *err);

/* Σ chunk n; validates refs and capacities. */
kr_status kr_chunks_check(const kr_chunk *chunks, int n_chunks, int n_layers_needed,
                          int *total, kr_error *err);

#endif
