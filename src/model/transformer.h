/*
 * model/transformer — the pre-norm causal transformer block stack shared by the tokenizer's
 * encoder/decoder and the predictor, run over KV stores so that prefill, cached decode,
 * window re-runs and many paths are all the same call.
 *
 * The K (RoPE-rotated) and V rows live in KV stores (model/kv_cache.h); the Linears run on the
 * thread pool through model/linear.h. A chunk is a run of consecutive new tokens of one sequence: it attends, in order, to the
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
#include "model/kv_cache.h"
#include "model/linear.h"
#include "model/weights.h"

#define KR_MAX_PAST_REFS 4

typedef struct kr_chunk {
    int n; /* new tokens (rows of x, consecutive) */
    int pos0; /* RoPE position of the first new token */
    kr_kv_ref past[KR_MAX_PAST_REFS]; /* keys before this chunk, in order */
    int n_past;
    kr_kv_store *out; /* receives this chunk's K/V rows */
    int out_start;
} kr_chunk;

/* A block's Q, K and V projections of the same rows (row stride d), before RoPE. */
typedef struct kr_qkv_rows {
    float *q, *k, *v;
} kr_qkv_rows;

/* RMSNorm1 and the Q/K/V projections of block bw over x[m][d]: exactly what
 * kr_transformer_run computes first for those rows (kernels are row-deterministic), so a
 * caller can keep them for rows it will run again. */
kr_status kr_transformer_qkv(const kr_block_weights *bw, int d, const kr_exec *ex, const float *x,
                             int m, float *q, float *k, float *v, kr_error *err);

/* Runs blocks[0..n_blocks) over x[total][d] (total = Σ chunk n), in place. Store layer of
 * block i is layer0 + i; attention is causal. first (NULL: computed here) gives blocks[0]'s
 * projections of every row (kr_transformer_qkv of x, e.g. gathered from earlier calls): the
 * first block then starts at RoPE, and those buffers are rotated in place and serve as every
 * block's scratch. */
kr_status kr_transformer_run(const kr_block_weights *blocks, int n_blocks, int layer0, int d,
                             int ff_dim, const kr_exec *ex, float *x, const kr_chunk *chunks,
                             int n_chunks, const kr_qkv_rows *first, kr_error *err);

/* Σ chunk n; validates refs and capacities. */
kr_status kr_chunks_check(const kr_chunk *chunks, int n_chunks, int n_layers_needed, int *total,
                          kr_error *err);

#endif
