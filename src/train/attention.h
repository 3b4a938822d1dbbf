/*
 * train/attention — multi-head scaled dot-product attention over whole sequences, forward
 * and backward, threaded over (sequence, head): softmax(scale·q·kᵀ [+ causal mask])·v with
 * optional inverted dropout on the probabilities, as torch's scaled_dot_product_attention
 * (math path) computes it.
 *
 * Each (sequence, head) is one call of the kernels' kr_attn_head_fwd / _bwd
 * (kernels/train_kernels.h), which keep nothing of size T² and recompute the probabilities in
 * the backward pass, bit for bit the forward's; the dropout mask is regenerated from its
 * stream. A thread takes whole (sequence, head) pairs, so results do not depend on how many
 * threads there are.
 */
#ifndef KR_TRAIN_ATTENTION_H
#define KR_TRAIN_ATTENTION_H

#include <stddef.h>

#include "base/threadpool.h"
#include "train/ops.h"

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
