/*
 * kernels/attention_avx2 — single-query, multi-query and causal attention over KV spans with
 * AVX2+FMA.
 *
 * The driver is attention_body.h at 8 lanes: per-key dots reduced by the fixed tree (8 keys
 * side by side), exp-sum over scratch in global key order, value sum one FMA per key in key
 * order — so the output does not depend on how keys are cut into spans. Here only what is
 * AVX2's own: the row maximum of the softmax, the shared blocks' scores two or three queries ×
 * four keys per register tile (scores_qx4, the same per-key tree), and their value sums two or
 * three queries per V load; each equals the single-query kernel bit for bit.
 */
#include "kernels/kernels.h"
#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#define KR_WIDTH_AVX2
#include "kernels/simd_width.h"

/* No per-tile state: the shared blocks' scores are register tiles over the queries as they
 * are. */
struct attn_groups {
    int unused;
};

#include "kernels/attention_body.h"

/* max of p[0..n), VW_W lanes at a time: one scalar compare per key was a chain of dependent
 * maxss, ~4 cycles a key, more than the exps after it. max_ps(x, m) is x > m ? x : m, the
 * scalar rule per lane (a NaN key is skipped, a NaN p[0] stays), and the lanes merge by the
 * same rule; only the sign of a zero maximum can depend on the order, and p − (±0) is the
 * same float for every p, so the exps are too. Masked-off lanes keep m. */
static float attn_max(const float *p, int n) {
    __m256 m8 = _mm256_set1_ps(p[0]);
    for (int j = 0; j < n; j += 8) {
        __m256 x;
        if (j + 8 <= n) {
            x = _mm256_loadu_ps(p + j);
        } else {
            __m256i m = kr_mask8(n - j);
            x = _mm256_blendv_ps(m8, _mm256_maskload_ps(p + j, m), _mm256_castsi256_ps(m));
        }
        m8 = _mm256_max_ps(x, m8);
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, m8);
    float mx = lanes[0];
    for (int l = 1; l < 8; l++) mx = lanes[l] > mx ? lanes[l] : mx;
    return mx;
}

static void attn_groups_build(attn_groups *g, int nq, const float *const *q, int head_dim) {
    (void)nq, (void)q, (void)head_dim;
    g->unused = 0;
}

/* Scores of NQ (2 or 3) queries against keys [0, nk) (nk <= 4) starting at k: dst[r][c] for
 * query r and key c. For the multi-query and causal kernels' shared blocks: NQ q and 4 K loads
 * feed 4·NQ FMAs where scores spends 9 loads on 8, and the 3-query tile fills the 16
 * registers (12 accumulators, 3 q, 1 K). Queries 0-1 reduce together; query 2's four
 * accumulators reduce beside four zero ones (the tree adds a lane only to lanes of its own
 * accumulator). Each score is still one 8-lane accumulator over head_dim, the same masked tail
 * and the same tree (kr_reduce8 treats every lane alike), times scale — scores' value bit
 * for bit. */
KR_INLINE void scores_qx4(const int NQ, const float *const *q, int head_dim, float scale,
                          const float *k, int stride, int nk, float *const *dst) {
#define SLOT(r, c) ((r) < 2 ? KR_R8(4 * (r) + (c)) : 8 + KR_R8(c))
    const float *kp[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) kp[c] = k + (size_t)(c < nk ? c : nk - 1) * (size_t)stride;
    __m256 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm256_setzero_ps();
    int d = 0;
    for (; d + 8 <= head_dim; d += 8) {
        __m256 qv[3];
#pragma GCC unroll 3
        for (int r = 0; r < NQ; r++) qv[r] = _mm256_loadu_ps(q[r] + d);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256 kv = _mm256_loadu_ps(kp[c] + d);
#pragma GCC unroll 3
            for (int r = 0; r < NQ; r++)
                acc[SLOT(r, c)] = _mm256_fmadd_ps(qv[r], kv, acc[SLOT(r, c)]);
        }
    }
    if (d < head_dim) {
        __m256i m = kr_mask8(head_dim - d);
        __m256 qv[3];
#pragma GCC unroll 3
        for (int r = 0; r < NQ; r++) qv[r] = _mm256_maskload_ps(q[r] + d, m);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256 kv = _mm256_maskload_ps(kp[c] + d, m);
#pragma GCC unroll 3
            for (int r = 0; r < NQ; r++)
                acc[SLOT(r, c)] = _mm256_fmadd_ps(qv[r], kv, acc[SLOT(r, c)]);
        }
    }
#undef SLOT
    __m256 vs = _mm256_set1_ps(scale);
    /* Lanes 0-3 are query 0's scores, lanes 4-7 query 1's. */
    __m256 s = _mm256_mul_ps(kr_reduce8(acc), vs);
    kr_store4(dst[0], _mm256_castps256_ps128(s), nk);
    kr_store4(dst[1], _mm256_extractf128_ps(s, 1), nk);
    if (NQ == 3) {
        s = _mm256_mul_ps(kr_reduce8(acc + 8), vs);
        kr_store4(dst[2], _mm256_castps256_ps128(s), nk);
    }
}

/* Scores of the nq queries against every key of one shared block: rows + i·row_stride + j
 * for query i and key j. Queries in threes through scores_qx4, a last pair through the same,
 * an odd one through span_scores. */
static void block_scores(int nq, const float *const *q, int head_dim, float scale,
                         const kr_kv_span *blk, float *rows, int row_stride) {
    for (int i = 0; i < nq;) {
        int g = nq - i >= 3 ? 3 : nq - i;
        float *row = rows + (size_t)i * (size_t)row_stride;
        if (g == 1) {
            span_scores(q[i], head_dim, scale, blk, row);
            break;
        }
        for (int j = 0; j < blk->n; j += 4) {
            float *dst[3] = { row + j, row + row_stride + j, row + 2 * (size_t)row_stride + j };
            const float *k = blk->k + (size_t)j * (size_t)blk->stride;
            int nk = blk->n - j < 4 ? blk->n - j : 4;
            if (g == 3)
                scores_qx4(3, q + i, head_dim, scale, k, blk->stride, nk, dst);
            else
                scores_qx4(2, q + i, head_dim, scale, k, blk->stride, nk, dst);
        }
        i += g;
    }
}

static void attn_block_scores(const attn_groups *g, int nq, const float *const *q, int head_dim,
                              float scale, const kr_kv_span *blk, float *scratch,
                              int scratch_stride, int col) {
    (void)g;
    block_scores(nq, q, head_dim, scale, blk, scratch + col, scratch_stride);
}

/* wsum_add for NQ (2 or 3) queries over the same keys: each V chunk is loaded once for all,
 * and the queries' accumulators are independent FMA chains — one query's 8 are
 * latency-bound, two queries' 8 only just cover the latency, three queries' 12 hide it. Each
 * query's chain per lane is exactly wsum_add's; the columns go in 32-float chunks so the
 * accumulators, the broadcasts and the V vector fit the 16 registers. */
KR_INLINE void wsum_addq(const int NQ, const int NC, int dn, const float *v, int stride, int nk,
                         const float *const *p, float *const *o) {
    __m256 a[3][4];
    __m256i tail = kr_mask8(dn - 8 * (NC - 1));
#pragma GCC unroll 3
    for (int r = 0; r < NQ; r++) {
#pragma GCC unroll 4
        for (int c = 0; c < NC - 1; c++) a[r][c] = _mm256_loadu_ps(o[r] + 8 * c);
        a[r][NC - 1] = _mm256_maskload_ps(o[r] + 8 * (NC - 1), tail);
    }
    for (int j = 0; j < nk; j++, v += stride) {
        __m256 pj[3];
#pragma GCC unroll 3
        for (int r = 0; r < NQ; r++) pj[r] = _mm256_set1_ps(p[r][j]);
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            __m256 x = c < NC - 1 ? _mm256_loadu_ps(v + 8 * c)
                                  : _mm256_maskload_ps(v + 8 * (NC - 1), tail);
#pragma GCC unroll 3
            for (int r = 0; r < NQ; r++) a[r][c] = _mm256_fmadd_ps(pj[r], x, a[r][c]);
        }
    }
#pragma GCC unroll 3
    for (int r = 0; r < NQ; r++) {
#pragma GCC unroll 4
        for (int c = 0; c < NC - 1; c++) _mm256_storeu_ps(o[r] + 8 * c, a[r][c]);
        kr_store8(o[r] + 8 * (NC - 1), a[r][NC - 1], dn - 8 * (NC - 1));
    }
}

KR_INLINE void values_addq(const int NQ, int head_dim, const float *v, int stride, int nk,
                           const float *const *p, float *const *o) {
    for (int d0 = 0; d0 < head_dim; d0 += 32) {
        int dn = head_dim - d0 < 32 ? head_dim - d0 : 32;
        float *oo[3] = { o[0] + d0, o[1] + d0, NQ == 3 ? o[2] + d0 : NULL };
        switch ((dn + 7) / 8) {
        case 1: wsum_addq(NQ, 1, dn, v + d0, stride, nk, p, oo); break;
        case 2: wsum_addq(NQ, 2, dn, v + d0, stride, nk, p, oo); break;
        case 3: wsum_addq(NQ, 3, dn, v + d0, stride, nk, p, oo); break;
        default: wsum_addq(NQ, 4, dn, v + d0, stride, nk, p, oo); break;
        }
    }
}

/* Values of g (1-3) queries over the same nk keys: p[r] their probabilities, o[r] their
 * outputs. */
static void values_group(int g, int head_dim, const float *v, int stride, int nk,
                         const float *const *p, float *const *o) {
    if (g == 3)
        values_addq(3, head_dim, v, stride, nk, p, o);
    else if (g == 2)
        values_addq(2, head_dim, v, stride, nk, p, o);
    else
        values_add(head_dim, v, stride, nk, p[0], o[0]);
}

static void attn_block_values(int nq, int head_dim, const float *v, int vs, int nk,
                              const float *scratch, int scratch_stride, int col,
                              float *const *out) {
    for (int i = 0, g; i < nq; i += g) {
        g = nq - i >= 3 ? 3 : nq - i;
        const float *p[3];
        for (int r = 0; r < 3; r++)
            p[r] = scratch + (size_t)(i + (r < g ? r : 0)) * (size_t)scratch_stride + col;
        values_group(g, head_dim, v, vs, nk, p, out + i);
    }
}

/* ---- causal */

/* Values of the nq queries over keys [key0, key0 + nk) at v, query i taking the first
 * clamp(n_keys[i] − key0, 0, nk): what a group of up to three shares through values_group,
 * each query's rest after it — the same FMA chain per lane in key order. */
static void attn_causal_values(int nq, int head_dim, const float *v, int vs, int nk, int key0,
                               const int *n_keys, const float *scratch, int scratch_stride,
                               float *const *out) {
#define ROW(i) (scratch + (size_t)(i) * (size_t)scratch_stride + key0)
    int c[KR_ATTN_TILE];
    kr_causal_counts(nq, n_keys, key0, nk, c);
    for (int i = 0, g; i < nq; i += g) {
        g = nq - i >= 3 ? 3 : nq - i;
        int lo = c[i];
        for (int r = 1; r < g; r++) lo = c[i + r] < lo ? c[i + r] : lo;
        const float *p[3];
        for (int r = 0; r < 3; r++) p[r] = ROW(i + (r < g ? r : 0));
        if (lo > 0) values_group(g, head_dim, v, vs, lo, p, out + i);
        for (int r = 0; r < g; r++)
            if (c[i + r] > lo)
                values_add(head_dim, v + (size_t)lo * (size_t)vs, vs, c[i + r] - lo,
                           ROW(i + r) + lo, out[i + r]);
    }
#undef ROW
}

static void attn_causal_scores(int nq, const float *const *q, int head_dim, float scale,
                               const kr_kv_span *spans, int n_spans, const int *n_keys, int n_max,
                               int bk, float *pack, float *scratch, int scratch_stride) {
    (void)n_keys;
    const kr_kv_span *sp;
    int j0, key0, nk;
    for (kr_key_blocks it = kr_key_blocks_start(spans, n_spans, n_max, bk);
         kr_key_blocks_next(&it, &sp, &j0, &key0, &nk);) {
        kr_kv_span blk = { NULL, NULL, nk, 0 };
        blk.k = kr_attn_rows(sp->k, sp->stride, j0, nk, head_dim, pack, &blk.stride);
        block_scores(nq, q, head_dim, scale, &blk, scratch + key0, scratch_stride);
    }
}

static int attn_causal_by_rows(int head_dim) {
    (void)head_dim;
    return 0;
}
#endif
