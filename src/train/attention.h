/*
 * train/attention — multi-head scaled dot-product attention over whole sequences, forward
 * and backward, threaded over (sequence, head): softmax(scale·q·kᵀ [+ causal mask])·v with
 * optional inverted dropout on the probabilities, as torch's scaled_dot_product_attention
 * (math path) computes it.
 *
 * Nothing of size T² is kept between the passes: queries go in blocks of TR_ATTN_BLOCK rows,
 * each block's scores and probabilities live in a thread's scratch, and the backward pass
 * recomputes them with the very same calls (so bit for bit the forward's probabilities) and
 * regenerates the dropout mask from its stream.
 */
#ifndef KR_TRAIN_ATTENTION_H
#define KR_TRAIN_ATTENTION_H

#include <stddef.h>

#include "base/threadpool.h"
#include "train/ops.h"

/* Queries per block: a multiple of both register tiles' rows (12, 6) and of 32 columns, so the
 * block's GEMMs have no edge tiles; 96 measured ~5 % faster than 64 at T = 512, head_dim 64
 * (fewer calls and packings against more masked scores computed). */
#define TR_ATTN_BLOCK 96

typedef struct tr_attn_shape {
    int n_seq, T; /* sequences of T rows; rows of all sequences are consecutive */
    int n_heads, head_dim;
    int ld; /* floats between rows of q, k, v, out and their gradients (n_heads·head_dim) */
    int causal; /* 1: query i sees keys 0..i */
} tr_attn_shape;

/* Floats of scratch each thread needs for a T. */
size_t tr_attn_scratch_floats(int T, int head_dim);

/* out = attention(q, k, v). drop may be NULL (its rows are (seq·n_heads + head)·T + i).
 * scratch: nth × tr_attn_scratch_floats(T, head_dim) floats. */
void tr_attention_fwd(kr_pool *pool, const tr_attn_shape *s, const float *q, const float *k,
                      const float *v, float *out, const tr_dropout *drop, float *scratch);
/* dq, dk, dv (overwritten) from dout, given the forward's inputs and output. */
void tr_attention_bwd(kr_pool *pool, const tr_attn_shape *s, const float *q, const float *k,
                      const float *v, const float *out, const float *dout, float *dq, float *dk,
                      float *dv, const tr_dropout *drop, float *scratch);

#endif
