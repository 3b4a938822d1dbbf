/*
 * train/block — one pre-norm transformer block (TransformerBlock of the reference) in train
 * mode: x_mid = x + drop(out(attn(rope(q), rope(k), v) of RMSNorm1(x))),
 * x_out = x_mid + drop(w2(silu(w1 h) ⊙ w3 h)) with h = RMSNorm2(x_mid), causal attention.
 *
 * The forward keeps what the backward needs in a tr_block_acts (the normalised inputs are
 * recomputed from the saved rstd instead); the backward adds the parameter gradients and turns
 * dx_out into dx_in in place.
 */
#ifndef KR_TRAIN_BLOCK_H
#define KR_TRAIN_BLOCK_H

#include "train/attention.h"
#include "train/ops.h"

typedef struct tr_attn_w {
    tr_lin q, k, v, o;
    int n_heads, head_dim;
    const tr_rope *rope;
} tr_attn_w;

typedef struct tr_block_w {
    int d, ff;
    float *norm1, *gnorm1, *norm2, *gnorm2; /* [d] */
    tr_attn_w attn;
    tr_lin w1, w2, w3; /* no biases */
} tr_block_w;

/* What one forward pass of a block keeps, for rows M = n_seq·T (buffers sized for the most). */
typedef struct tr_block_acts {
    float *x_in; /* [M][d] the block's input (the previous block's output buffer) */
    float *rstd1, *rstd2; /* [M] */
    float *q, *k, *v; /* [M][d] after RoPE (q, k) */
    float *att; /* [M][d] attention output, before out_proj */
    float *x_mid; /* [M][d] */
    float *h1, *h3; /* [M][ff] w1·h, w3·h (their gradients after the backward) */
} tr_block_acts;

/* Scratch shared by every block (and the heads around them). */
typedef struct tr_ws {
    float *xn, *t, *datt, *dq, *dk, *dv; /* [M][d_max] */
    float *ff_a, *ff_b; /* [M][ff_max] */
    float *attn; /* nth × tr_attn_scratch_floats */
} tr_ws;

typedef struct tr_block_drops {
    tr_dropout attn, resid, ffn;
} tr_block_drops;

/* x_out[M][d] from a->x_in. */
void tr_block_fwd(kr_pool *pool, const tr_block_w *w, tr_block_acts *a, int n_seq, int T,
                  float *x_out, const tr_ws *ws, const tr_block_drops *drops);
/* dx[M][d]: the gradient of x_out in, of x_in out. */
void tr_block_bwd(kr_pool *pool, const tr_block_w *w, tr_block_acts *a, int n_seq, int T, float *dx,
                  const tr_ws *ws, const tr_block_drops *drops);

#endif
