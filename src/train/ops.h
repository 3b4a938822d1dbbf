/*
 * train/ops — the forward (train mode) and backward passes of the row-wise operations of the
 * Kronos nets, on the trainer's pool: Linear, RMSNorm, RoPE, SwiGLU, inverted dropout,
 * residual adds, cross-entropy and mean squared error.
 *
 * Conventions: activations are row-major [rows][width]; a backward pass adds its parameter
 * gradients into the gradient buffers (micro-batches accumulate) and writes or adds its input
 * gradient as its `accumulate` flag says. Every reduction runs in an order fixed by the
 * shapes (linalg.h), so a step is bit-identical for any thread count.
 */
#ifndef KR_TRAIN_OPS_H
#define KR_TRAIN_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"

#define TR_RMS_EPS 1e-5f

/* A Linear y = x·wᵀ + b (b may be NULL) and its gradients (gw NULL: frozen). */
typedef struct tr_lin {
    float *w, *b; /* [n_out][n_in], [n_out] */
    float *wt; /* [n_in][n_out] w transposed (tr_linear_transpose), what the forward reads */
    float *gw, *gb;
    int n_out, n_in;
} tr_lin;

/* wt = wᵀ (after the weights change). */
void tr_linear_transpose(const tr_lin *l);
/* y[M][n_out] = x[M][n_in]·wᵀ + b (from wt: the NN GEMM, faster than the NT one here). */
void tr_linear_fwd(kr_pool *pool, const tr_lin *l, const float *x, int M, float *y);
/* gw += dyᵀ·x, gb += Σ dy; dx (=, or += with accumulate) dy·w unless dx is NULL. */
void tr_linear_bwd(kr_pool *pool, const tr_lin *l, const float *dy, const float *x, int M,
                   float *dx, int accumulate);

/* RMSNorm over rows of d: rstd[m] = 1/sqrt(mean(x²) + eps), y = (x·rstd)·w. */
void tr_rmsnorm_fwd(kr_pool *pool, int M, int d, const float *x, const float *w, float *y,
                    float *rstd);
/* y from a saved rstd: the forward's values bit for bit. */
void tr_rmsnorm_apply(kr_pool *pool, int M, int d, const float *x, const float *rstd,
                      const float *w, float *y);
/* gw += Σ_m dy·x·rstd; dx (=|+=) rstd·(w⊙dy) − x·rstd³·Σ(w⊙dy⊙x)/d. */
void tr_rmsnorm_bwd(kr_pool *pool, int M, int d, const float *dy, const float *x, const float *rstd,
                    const float *w, float *gw, float *dx, int accumulate);

/* cos/sin of positions [0, n_pos) × head_dim/2 frequencies, as torch's rotary cache builds
 * them (float32 t·inv_freq, then cos and sin). */
typedef struct tr_rope {
    int n_pos, half;
    float *cos, *sin; /* [n_pos][half] */
} tr_rope;
void tr_rope_init(tr_rope *r, int n_pos, int head_dim, const float *inv_freq);
/* In place on n_seq sequences of T rows, each row n_heads × head_dim floats (row stride ld):
 * forward rotates by +θ(position), backward (the transpose) by −θ. */
void tr_rope_fwd(kr_pool *pool, const tr_rope *r, int n_seq, int T, int n_heads, float *x, int ld);
void tr_rope_bwd(kr_pool *pool, const tr_rope *r, int n_seq, int T, int n_heads, float *dx, int ld);

/* g = silu(h1)⊙h3 over n values. */
void tr_swiglu_fwd(kr_pool *pool, size_t n, const float *h1, const float *h3, float *g);
/* From dg: h1 ← dg⊙h3⊙silu'(h1), h3 ← dg⊙silu(h1) (in place: the saved pre-activations
 * become their gradients), and g ← silu(h1)⊙h3 (the forward's activation again, for w2's
 * weight gradient: one pass and one exp per value for both). */
void tr_swiglu_bwd(kr_pool *pool, size_t n, const float *dg, float *h1, float *h3, float *g);

/* Inverted dropout with its own counter-based stream: element j of row r is kept with
 * probability 1 − p (then scaled by 1/(1 − p)) as a pure function of (seed, stream, r, j),
 * so the backward pass regenerates the forward's mask instead of storing it. */
typedef struct tr_dropout {
    float p; /* 0: identity */
    uint64_t seed, stream;
} tr_dropout;
/* 1 if element j of row key `row_key` (tr_dropout_row_key) is kept. */
static inline int tr_dropout_keep(uint64_t row_key, uint32_t threshold, uint64_t j);
uint64_t tr_dropout_row_key(const tr_dropout *d, uint64_t row);
uint32_t tr_dropout_threshold(float p); /* keep iff bits >= threshold */
/* x[r][j] ← keep ? x·1/(1−p) : 0 over M rows of d (row r of this call is row0 + r of the
 * stream); the same call on a gradient is the backward pass. */
void tr_dropout_apply(kr_pool *pool, const tr_dropout *d, int M, int n, float *x, int ld,
                      uint64_t row0);

static inline int tr_dropout_keep(uint64_t row_key, uint32_t threshold, uint64_t j) {
    uint64_t z = row_key + (j + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (uint32_t)(z >> 32) >= threshold;
}

/* y = a + b over n values (y may alias a or b). */
void tr_add(kr_pool *pool, size_t n, const float *a, const float *b, float *y);

/* Cross-entropy of M rows of V logits against targets: logits become softmax probabilities
 * in place and row_loss[m] = −log softmax[target]. */
void tr_softmax_xent(kr_pool *pool, int M, int V, float *logits, const int32_t *targets,
                     double *row_loss);
/* Its gradient, in place: probs ← scale·(probs − onehot(target)). */
void tr_xent_grad(kr_pool *pool, int M, int V, float *probs, const int32_t *targets, float scale);

/* Embedding backward: g[ids[m]][c] += scale·src[m][c] for c < d, rows in order (columns split
 * over the threads, so any thread count gives the same sums). */
void tr_embedding_bwd(kr_pool *pool, int M, int d, const int32_t *ids, int ids_stride,
                      const float *src, int lds, float scale, float *g);

#endif
