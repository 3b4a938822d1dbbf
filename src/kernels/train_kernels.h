/*
 * kernels/train_kernels — the inner loops of a training step that are not GEMMs (kernels.h has
 * those): attention of one head over a whole sequence, forward and backward, as the train
 * layer runs it for every (sequence, head).
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
