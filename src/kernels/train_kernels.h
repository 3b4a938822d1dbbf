/*
 * kernels/train_kernels — the inner loops of a training step that are not GEMMs (kernels.h has
 * those): attention of one head over a whole sequence, forward and backward, as the train
 * layer runs it for every (sequence, head); the row-wise passes (RMSNorm, SwiGLU, RoPE,
 * softmax cross-entropy, bias sums) and AdamW.
 *
 * Dispatched through the one kernel table (dispatch.h) like every family: a scalar reference
 * (always built) and AVX2 / AVX-512 variants, tested against the reference on odd sizes.
 * Within one ISA a result depends only on the shapes and the data (never on the thread that
 * runs it), so a training step stays bit-identical for any thread count; across ISAs results
 * differ by float rounding.
 */
#ifndef KR_KERNELS_TRAIN_KERNELS_H
#define KR_KERNELS_TRAIN_KERNELS_H

#include <stddef.h>

/* ---- Attention of one head over one sequence of T rows (queries and keys are the same rows):
 * out = softmax(scale·q·kᵀ [causal: query i sees keys 0..i]) · v, as torch's
 * scaled_dot_product_attention (math path) computes it; the backward gives dq, dk, dv from
 * dout. q, k, v, out and the gradients are rows of head_dim floats, ld floats apart (one head's
 * columns of [T][n_heads·head_dim] matrices).
 *
 * Dropout on the probabilities (optional): drop(ctx, query, key0, n, p, stride) multiplies the
 * probabilities p[t·stride] of keys key0 + t (t < n) of that query by their keep factor (0 or
 * 1/(1 − rate)); it must be a pure function of (query, key), since the backward calls it again
 * on the same probabilities and on their gradients. NULL: none.
 *
 * Nothing of size T² is kept: the backward recomputes the probabilities, bit for bit the
 * forward's. scratch: kr_attn_head_scratch_floats(T, head_dim) floats, 64-byte aligned. */
typedef void (*kr_attn_drop_fn)(void *ctx, int query, int key0, int n, float *p, int stride);
typedef struct kr_attn_head {
    int T, head_dim, ld;
    int causal;
    float scale;
    kr_attn_drop_fn drop; /* NULL: no dropout */
    void *drop_ctx;
} kr_attn_head;

size_t kr_attn_head_scratch_floats(int T, int head_dim);
void kr_attn_head_fwd(const kr_attn_head *h, const float *q, const float *k, const float *v,
                      float *out, float *scratch);
/* dq, dk, dv are overwritten. */
void kr_attn_head_bwd(const kr_attn_head *h, const float *q, const float *k, const float *v,
                      const float *out, const float *dout, float *dq, float *dk, float *dv,
                      float *scratch);

/* ---- The row-wise passes of a training step. Rows are d floats, consecutive unless a stride
 * is given; every reduction runs in an order fixed by the shapes (per row, or per column over
 * the rows in order), so a caller that splits rows (or columns) over threads gets the same
 * bits for any split. */

/* RMSNorm: rstd[m] = 1/sqrt(Σx²/d + eps), y = (x·rstd)·w. */
void kr_rmsnorm_fwd_rows(int n_rows, int d, const float *x, const float *w, float eps, float *y,
                         float *rstd);
/* y from a saved rstd: the forward's y bit for bit. */
void kr_rmsnorm_apply_rows(int n_rows, int d, const float *x, const float *rstd, const float *w,
                           float *y);
/* dx (= or, with accumulate, +=) rstd·(w⊙dy) − x·rstd³·Σ(w⊙dy⊙x)/d. */
void kr_rmsnorm_bwd_rows(int n_rows, int d, const float *dy, const float *x, const float *rstd,
                         const float *w, float *dx, int accumulate);
/* gw[c] += Σ_m dy[m][c]·(x[m][c]·rstd[m]) for c in [c0, c1), m in order. */
void kr_rmsnorm_gw_cols(int n_rows, int d, int c0, int c1, const float *dy, const float *x,
                        const float *rstd, float *gw);
/* out[c] += Σ_m x[m·ld + c] for c in [c0, c1), m in order (a bias gradient). */
void kr_colsum_add_cols(int n_rows, int ld, int c0, int c1, const float *x, float *out);
/* SwiGLU backward over n values, in place: from dg, h1 ← dg·h3·silu'(h1), h3 ← dg·silu(h1),
 * g ← silu(h1)·h3 (torch's silu_backward: σ·(1 + x·(1 − σ))). */
void kr_swiglu_bwd(int n, const float *dg, float *h1, float *h3, float *g);
/* Half-split RoPE from tables, in place: row r (n_heads heads of 2·half floats, rows ld apart)
 * turns by the angle of cos[r·half + i], sign·sin[r·half + i]:
 * x[i] ← x[i]·c − x[i+half]·s, x[i+half] ← x[i+half]·c + x[i]·s (separate products). */
void kr_rope_rows(int n_rows, int n_heads, int half, float *x, int ld, const float *cos,
                  const float *sin, float sign);
/* Softmax of V logits in place (probabilities) and −log p[target], computed as
 * max − x_t + log Σ exp(x − max) (exact for any logit gap). */
double kr_softmax_xent_row(int V, float *x, int target);
/* The cross-entropy gradient from the probabilities, in place: p ← scale·(p − onehot). */
void kr_xent_grad_row(int V, float *p, int target, float scale);
/* AdamW over n parameters (torch's single-tensor float32 arithmetic, no fused multiply-adds,
 * so every variant gives the scalar reference's bits): gi = g·clip_scale; w ← w·decay;
 * m ← m·beta1 + gi·(1 − beta1); v ← v·beta2 + (1 − beta2)·gi·gi;
 * w ← w + neg_step·(m / (sqrt(v)/bc2_sqrt + eps)). */
typedef struct kr_adamw {
    float clip_scale, decay, beta1, one_m_beta1, beta2, one_m_beta2, bc2_sqrt, eps, neg_step;
} kr_adamw;
void kr_adamw_f32(size_t n, const kr_adamw *a, float *w, const float *g, float *m, float *v);

#define KR_TRAIN_OPS_VARIANTS(sfx)                                                                 \
    void kr_rmsnorm_fwd_rows_##sfx(int n_rows, int d, const float *x, const float *w, float eps,   \
                                   float *y, float *rstd);                                         \
    void kr_rmsnorm_apply_rows_##sfx(int n_rows, int d, const float *x, const float *rstd,         \
                                     const float *w, float *y);                                    \
    void kr_rmsnorm_bwd_rows_##sfx(int n_rows, int d, const float *dy, const float *x,             \
                                   const float *rstd, const float *w, float *dx, int accumulate);  \
    void kr_rmsnorm_gw_cols_##sfx(int n_rows, int d, int c0, int c1, const float *dy,              \
                                  const float *x, const float *rstd, float *gw);                   \
    void kr_colsum_add_cols_##sfx(int n_rows, int ld, int c0, int c1, const float *x, float *out); \
    void kr_swiglu_bwd_##sfx(int n, const float *dg, float *h1, float *h3, float *g);              \
    void kr_rope_rows_##sfx(int n_rows, int n_heads, int half, float *x, int ld, const float *cos, \
                            const float *sin, float sign);                                         \
    double kr_softmax_xent_row_##sfx(int V, float *x, int target);                                 \
    void kr_xent_grad_row_##sfx(int V, float *p, int target, float scale);                         \
    void kr_adamw_f32_##sfx(size_t n, const kr_adamw *a, float *w, const float *g, float *m,       \
                            float *v);
KR_TRAIN_OPS_VARIANTS(scalar)
KR_TRAIN_OPS_VARIANTS(avx2)
KR_TRAIN_OPS_VARIANTS(avx512)
#undef KR_TRAIN_OPS_VARIANTS

typedef void (*kr_attn_head_fwd_fn)(const kr_attn_head *h, const float *q, const float *k,
                                    const float *v, float *out, float *scratch);
typedef void (*kr_attn_head_bwd_fn)(const kr_attn_head *h, const float *q, const float *k,
                                    const float *v, const float *out, const float *dout, float *dq,
                                    float *dk, float *dv, float *scratch);
#define KR_ATTN_HEAD_VARIANTS(sfx)                                                              \
    void kr_attn_head_fwd_##sfx(const kr_attn_head *h, const float *q, const float *k,          \
                                const float *v, float *out, float *scratch);                    \
    void kr_attn_head_bwd_##sfx(const kr_attn_head *h, const float *q, const float *k,          \
                                const float *v, const float *out, const float *dout, float *dq, \
                                float *dk, float *dv, float *scratch);
KR_ATTN_HEAD_VARIANTS(scalar)
KR_ATTN_HEAD_VARIANTS(avx2)
KR_ATTN_HEAD_VARIANTS(avx512)
#undef KR_ATTN_HEAD_VARIANTS

#endif
