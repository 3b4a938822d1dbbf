/*
 * kernels/attention_scalar — reference attention over KV spans, any CPU.
 *
 * Three passes in key order (scores, exp + sum, weighted sum of values), so the result
 * depends only on the keys' sequence, never on how they are cut into spans. The single- and
 * multi-query kernels are built from the same three helpers below, and every step they take
 * per query is the same arithmetic in the same order: that is what makes
 * kr_attend_multi_f32_scalar bit-identical to kr_attend_f32_scalar.
 */
#include "kernels/kernels.h"
#include "kernels/kernels_internal.h"

#include <math.h>

/* scale · q·k, products summed in index order. */
static float score(const float *q, const float *k, int head_dim, float scale) {
    float d = 0.0f;
    for (int i = 0; i < head_dim; i++) d += q[i] * k[i];
    return d * scale;
}

/* s[0..n) ← exp(s − max s) in place; returns the sum, added in key order. n >= 1. */
static float exp_sum(float *s, int n) {
    float mx = -INFINITY;
    for (int j = 0; j < n; j++)
        if (s[j] > mx) mx = s[j];
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        s[j] = expf(s[j] - mx);
        sum += s[j];
    }
    return sum;
}

/* out[i] += p_j · v_j[i] for keys j = 0..nk−1 in order (out holds the running sum). */
static void add_values(const float *v, int stride, int nk, const float *p, int head_dim,
                       float *out) {
    for (int j = 0; j < nk; j++, v += stride)
        for (int i = 0; i < head_dim; i++) out[i] += p[j] * v[i];
}

static void zero(float *out, int n) {
    for (int i = 0; i < n; i++) out[i] = 0.0f;
}

static void divide(float *out, int n, float sum) {
    for (int i = 0; i < n; i++) out[i] /= sum;
}

void kr_attend_f32_scalar(const float *q, int head_dim, float scale, const kr_kv_span *spans,
                          int n_spans, float *scratch, float *out) {
    int n = 0;
    for (int s = 0; s < n_spans; s++)
        for (int j = 0; j < spans[s].n; j++)
            scratch[n++] =
                score(q, spans[s].k + (size_t)j * (size_t)spans[s].stride, head_dim, scale);
    zero(out, head_dim);
    if (n == 0) return; /* outside the contract; zeros beat 0/0 NaNs spreading downstream */
    float sum = exp_sum(scratch, n);
    n = 0;
    for (int s = 0; s < n_spans; s++) {
        add_values(spans[s].v, spans[s].stride, spans[s].n, scratch + n, head_dim, out);
        n += spans[s].n;
    }
    divide(out, head_dim, sum);
}

/* kr_attend_multi_f32_scalar for nq <= KR_ATTN_TILE queries. Same steps per query as
 * kr_attend_f32_scalar (score, exp_sum, add_values in key order, divide); only the loop
 * nest differs — keys outer, queries inner — and out[i] holds each running value sum between
 * key blocks exactly as it does in the single-query kernel. */
static void multi_tile(int nq, const float *const *q, int head_dim, float scale,
                       const kr_kv_span *shared, int n_shared, const kr_kv_span *const *own,
                       const int *n_own, float *scratch, int scratch_stride, float *const *out) {
    const int bk = kr_attn_block_keys(head_dim, 1);
    float pack[KR_ATTN_PACK];
    float sum[KR_ATTN_TILE];
    int n_keys[KR_ATTN_TILE];
#define ROW(i) (scratch + (size_t)(i) * (size_t)scratch_stride)

    int n_sh = 0; /* shared keys: every query's first n_sh scores */
    for (int s = 0; s < n_shared; n_sh += shared[s].n, s++)
        for (int j0 = 0; j0 < shared[s].n; j0 += bk) {
            int nk = shared[s].n - j0 < bk ? shared[s].n - j0 : bk, ks;
            const float *k =
                kr_attn_rows(shared[s].k, shared[s].stride, j0, nk, head_dim, pack, &ks);
            for (int i = 0; i < nq; i++)
                for (int j = 0; j < nk; j++) ROW(i)
            [n_sh + j0 + j] = score(q[i], k + (size_t)j * (size_t)ks, head_dim, scale);
        }
    for (int i = 0; i < nq; i++) {
        int n = n_sh, ns = own && n_own ? n_own[i] : 0;
        for (int s = 0; s < ns; s++)
            for (int j = 0; j < own[i][s].n; j++) ROW(i)
        [n++] = score(q[i], own[i][s].k + (size_t)j * (size_t)own[i][s].stride, head_dim, scale);
        n_keys[i] = n;
        sum[i] = n > 0 ? exp_sum(ROW(i), n) : 0.0f;
    }

    /* Zeroed only now that every score is done, so out[i] may alias q[i]. */
    for (int i = 0; i < nq; i++) zero(out[i], head_dim);
    for (int s = 0, base = 0; s < n_shared; base += shared[s].n, s++)
        for (int j0 = 0; j0 < shared[s].n; j0 += bk) {
            int nk = shared[s].n - j0 < bk ? shared[s].n - j0 : bk, vs;
            const float *v =
                kr_attn_rows(shared[s].v, shared[s].stride, j0, nk, head_dim, pack, &vs);
            for (int i = 0; i < nq; i++)
                add_values(v, vs, nk, ROW(i) + base + j0, head_dim, out[i]);
        }
    for (int i = 0; i < nq; i++) {
        int n = n_sh, ns = own && n_own ? n_own[i] : 0;
        for (int s = 0; s < ns; s++) {
            add_values(own[i][s].v, own[i][s].stride, own[i][s].n, ROW(i) + n, head_dim, out[i]);
            n += own[i][s].n;
        }
        if (n_keys[i] > 0) divide(out[i], head_dim, sum[i]);
    }
#undef ROW
}

void kr_attend_multi_f32_scalar(int nq, const float *const *q, int head_dim, float scale,
                                const kr_kv_span *shared, int n_shared,
                                const kr_kv_span *const *own, const int *n_own, float *scratch,
                                int scratch_stride, float *const *out) {
    for (int t = 0; t < nq; t += KR_ATTN_TILE)
        multi_tile(nq - t < KR_ATTN_TILE ? nq - t : KR_ATTN_TILE, q + t, head_dim, scale, shared,
                   n_shared, own ? own + t : NULL, n_own ? n_own + t : NULL,
                   scratch + (size_t)t * (size_t)scratch_stride, scratch_stride, out + t);
}

/* One query at a time: the reference needs no other order. */
void kr_attend_causal_f32_scalar(int nq, const float *const *q, int head_dim, float scale,
                                 const kr_kv_span *spans, int n_spans, const int *n_keys,
                                 float *scratch, int scratch_stride, float *const *out) {
    (void)scratch_stride;
    kr_attend_causal_by_rows(kr_attend_multi_f32_scalar, nq, q, head_dim, scale, spans, n_spans,
                             n_keys, scratch, out);
}
