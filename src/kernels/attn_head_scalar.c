/*
 * kernels/attn_head_scalar — the reference attention of one head over a sequence
 * (train_kernels.h), any CPU: one query at a time, its scores, softmax and weighted sums in
 * key order. The SIMD variants (attn_head_body.h) are tested against it.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/train_kernels.h"

size_t kr_attn_head_scratch_floats(int T, int head_dim) {
    /* The largest variant's (attn_head_body.h): K and V contiguous and packed in tiles, the
     * block's transposed queries, output gradients and their rows, scores, their gradients and
     * the dropped probabilities, the per-query sums; each part 64-byte aligned. */
    size_t rows = (size_t)T + KR_AH_ROWS_MAX, hd = (size_t)head_dim;
    size_t f = 4 * (rows * hd + 16) + 4 * (hd * KR_AH_QB_MAX + 16) +
               3 * (rows * KR_AH_QB_MAX + KR_AH_ROWS_MAX + 16) + KR_AH_QB_MAX + 16;
    return f < 3 * (size_t)T + 48 ? 3 * (size_t)T + 48 : f;
}

/* Probabilities of query i over its keys [0, nk) into p (nk floats): the forward's and the
 * backward's, computed by this one function. */
static void probs(const kr_attn_head *h, const float *qi, const float *k, int nk, float *p) {
    const int hd = h->head_dim;
    float mx = -INFINITY;
    for (int j = 0; j < nk; j++) {
        const float *kj = k + (size_t)j * (size_t)h->ld;
        float s = 0.0f;
        for (int c = 0; c < hd; c++) s += qi[c] * kj[c];
        p[j] = s * h->scale;
        mx = p[j] > mx ? p[j] : mx;
    }
    float sum = 0.0f;
    for (int j = 0; j < nk; j++) {
        p[j] = expf(p[j] - mx);
        sum += p[j];
    }
    float r = 1.0f / sum;
    for (int j = 0; j < nk; j++) p[j] *= r;
}

static int keys_of(const kr_attn_head *h, int i) { return h->causal ? i + 1 : h->T; }

void kr_attn_head_fwd_scalar(const kr_attn_head *h, const float *q, const float *k, const float *v,
                             float *out, float *scratch) {
    const int hd = h->head_dim;
    for (int i = 0; i < h->T; i++) {
        const int nk = keys_of(h, i);
        probs(h, q + (size_t)i * (size_t)h->ld, k, nk, scratch);
        if (h->drop) h->drop(h->drop_ctx, i, 0, nk, scratch, 1);
        float *o = out + (size_t)i * (size_t)h->ld;
        for (int c = 0; c < hd; c++) o[c] = 0.0f;
        for (int j = 0; j < nk; j++) {
            const float *vj = v + (size_t)j * (size_t)h->ld;
            for (int c = 0; c < hd; c++) o[c] += scratch[j] * vj[c];
        }
    }
}

void kr_attn_head_bwd_scalar(const kr_attn_head *h, const float *q, const float *k, const float *v,
                             const float *out, const float *dout, float *dq, float *dk, float *dv,
                             float *scratch) {
    const int hd = h->head_dim, T = h->T;
    const size_t ld = (size_t)h->ld;
    float *p = scratch, *pd = p + T, *ds = pd + T;
    for (int t = 0; t < T; t++) {
        memset(dk + (size_t)t * ld, 0, (size_t)hd * sizeof(float));
        memset(dv + (size_t)t * ld, 0, (size_t)hd * sizeof(float));
    }
    for (int i = 0; i < T; i++) {
        const int nk = keys_of(h, i);
        const float *qi = q + (size_t)i * ld, *go = dout + (size_t)i * ld,
                    *o = out + (size_t)i * ld;
        probs(h, qi, k, nk, p);
        memcpy(pd, p, (size_t)nk * sizeof(float));
        if (h->drop) h->drop(h->drop_ctx, i, 0, nk, pd, 1);
        /* dP of the probabilities that multiplied v (through the dropout back to p) */
        for (int j = 0; j < nk; j++) {
            const float *vj = v + (size_t)j * ld;
            float s = 0.0f;
            for (int c = 0; c < hd; c++) s += go[c] * vj[c];
            ds[j] = s;
        }
        if (h->drop) h->drop(h->drop_ctx, i, 0, nk, ds, 1);
        /* softmax backward: dS = P ⊙ (dP − Σ dO⊙O), times the score scale */
        float dsum = 0.0f;
        for (int c = 0; c < hd; c++) dsum += go[c] * o[c];
        for (int j = 0; j < nk; j++) ds[j] = p[j] * (ds[j] - dsum) * h->scale;
        float *gq = dq + (size_t)i * ld;
        for (int c = 0; c < hd; c++) gq[c] = 0.0f;
        for (int j = 0; j < nk; j++) {
            const float *kj = k + (size_t)j * ld;
            float *gk = dk + (size_t)j * ld, *gv = dv + (size_t)j * ld;
            for (int c = 0; c < hd; c++) {
                gq[c] += ds[j] * kj[c];
                gk[c] += ds[j] * qi[c];
                gv[c] += pd[j] * go[c];
            }
        }
    }
}
