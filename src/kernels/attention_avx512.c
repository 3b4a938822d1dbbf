/*
 * kernels/attention_avx512 — single-query, multi-query and causal attention over KV spans with
 * AVX-512.
 *
 * The driver is attention_body.h at 16 lanes (the scalar reference's three passes; see there
 * why cutting the keys into other spans gives bit-identical output). Here only what is
 * AVX-512's own: the row maximum of the softmax; the shared blocks' scores, four queries × four
 * keys per register tile (scores4x4, the same per-key tree) or sixteen queries in the lanes
 * (attn_qt_avx512.h, also the causal kernel's scores); and their value sums four or two
 * queries per V load. Each equals the single-query kernel bit for bit.
 */
#include "kernels/kernels.h"
#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#define KR_WIDTH_AVX512
#include "kernels/attn_qt_avx512.h"
#include "kernels/simd_width.h"

/* Lane groups of one tile: up to KR_ATTN_TILE / 16 groups of 16 queries, transposed. */
typedef struct qt_groups {
    int n; /* groups */
    int nq[KR_ATTN_TILE / KR_QT_LANES]; /* queries in each */
    _Alignas(64) float qt[KR_ATTN_TILE / KR_QT_LANES][KR_QT_MAX_DIM * KR_QT_LANES];
} qt_groups;

/* The shared blocks' scores of one multi-query tile: whole lane groups of 16 queries and a
 * last group of 12 or more with the queries in the lanes (attn_qt_avx512.h), the n_qt queries
 * before the rest; fewer would leave too many lanes idle, and go through block_scores. */
struct attn_groups {
    int n_qt;
    qt_groups qt;
};

#include "kernels/attention_body.h"

/* max of p[0..n), 16 lanes at a time (masked-off lanes keep −inf). */
static float attn_max(const float *p, int n) {
    __m512 mx = _mm512_set1_ps(-__builtin_inff());
    for (int j = 0; j < n; j += 16)
        mx = _mm512_mask_max_ps(mx, kr_mask16(n - j), mx,
                                _mm512_maskz_loadu_ps(kr_mask16(n - j), p + j));
    return _mm512_reduce_max_ps(mx);
}

/* Scores of 4 queries against keys [0, nk) (nk <= 4) starting at k: dst[r][c] for query r
 * and key c. The multi-query kernel's shared blocks: 4 q and 4 K loads feed 16 FMAs where
 * scores spends 17 loads, and one reduction serves 16 scores. Each score is still one
 * 16-lane accumulator over head_dim, the same masked tail and the same tree (kr_reduce16
 * treats every lane alike), times scale — scores' value bit for bit. */
KR_INLINE void scores4x4(const float *const *q, int head_dim, float scale, const float *k,
                         int stride, int nk, float *const *dst) {
    const float *kp[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) kp[c] = k + (size_t)(c < nk ? c : nk - 1) * (size_t)stride;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    int d = 0;
    for (; d + 16 <= head_dim; d += 16) {
        __m512 qv[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) qv[r] = _mm512_loadu_ps(q[r] + d);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m512 kv = _mm512_loadu_ps(kp[c] + d);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
                acc[KR_R16(4 * r + c)] = _mm512_fmadd_ps(qv[r], kv, acc[KR_R16(4 * r + c)]);
        }
    }
    if (d < head_dim) {
        __mmask16 m = kr_mask16(head_dim - d);
        __m512 qv[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) qv[r] = _mm512_maskz_loadu_ps(m, q[r] + d);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m512 kv = _mm512_maskz_loadu_ps(m, kp[c] + d);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
                acc[KR_R16(4 * r + c)] = _mm512_fmadd_ps(qv[r], kv, acc[KR_R16(4 * r + c)]);
        }
    }
    /* Lanes 4r .. 4r + 3 (the r-th 128-bit part) are query r's scores. */
    __m512 s = _mm512_mul_ps(kr_reduce16(acc), _mm512_set1_ps(scale));
    __mmask8 km = (__mmask8)((1u << nk) - 1u);
    _mm_mask_storeu_ps(dst[0], km, _mm512_extractf32x4_ps(s, 0));
    _mm_mask_storeu_ps(dst[1], km, _mm512_extractf32x4_ps(s, 1));
    _mm_mask_storeu_ps(dst[2], km, _mm512_extractf32x4_ps(s, 2));
    _mm_mask_storeu_ps(dst[3], km, _mm512_extractf32x4_ps(s, 3));
}

/* Scores of the nq queries against every key of one shared block: dst(i) + j for query i and
 * key j. Queries in fours through scores4x4, the rest through span_scores. */
static void block_scores(int nq, const float *const *q, int head_dim, float scale,
                         const kr_kv_span *blk, float *rows, int row_stride) {
    int i = 0;
    for (; i + 4 <= nq; i += 4) {
        float *dst[4];
        for (int j = 0; j < blk->n; j += 4) {
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) dst[r] = rows + (size_t)(i + r) * (size_t)row_stride + j;
            scores4x4(q + i, head_dim, scale, blk->k + (size_t)j * (size_t)blk->stride, blk->stride,
                      blk->n - j < 4 ? blk->n - j : 4, dst);
        }
    }
    for (; i < nq; i++)
        span_scores(q[i], head_dim, scale, blk, rows + (size_t)i * (size_t)row_stride);
}

/* kr_qt_scores16 with head_dim a constant where the models have it (64: Kronos-small,
 * -mini and the tokenizers; 52: Kronos-base), so its loops unroll. */
static void qt_scores(int head_dim, const float *qt, float scale, const float *k, int stride,
                      int nk, float *const *dst, int nq) {
    switch (head_dim) {
    case 64: kr_qt_scores16(64, qt, scale, k, stride, nk, dst, nq); break;
    case 52: kr_qt_scores16(52, qt, scale, k, stride, nk, dst, nq); break;
    default: kr_qt_scores16(head_dim, qt, scale, k, stride, nk, dst, nq); break;
    }
}

/* Transposes queries [0, nq) into lane groups of 16 (the last may be partial). */
static void qt_groups_build(qt_groups *g, int nq, const float *const *q, int head_dim) {
    g->n = 0;
    for (int i = 0; i < nq; i += KR_QT_LANES, g->n++) {
        g->nq[g->n] = nq - i < KR_QT_LANES ? nq - i : KR_QT_LANES;
        kr_qt_build16(g->qt[g->n], q + i, g->nq[g->n], head_dim);
    }
}

/* Scores of lane group gi against the nk keys (nk <= the 16-key groups' sum) at k: column
 * col of rows row0, row0 + row_stride, ... (one per query of the group). */
static void qt_group_scores(const qt_groups *g, int gi, int head_dim, float scale, const float *k,
                            int stride, int nk, float *row0, int row_stride, int col) {
    float *dst[KR_QT_LANES];
    for (int j = 0; j < nk; j += 16) {
        for (int i = 0; i < g->nq[gi]; i++)
            dst[i] = row0 + (size_t)i * (size_t)row_stride + col + j;
        qt_scores(head_dim, g->qt[gi], scale, k + (size_t)j * (size_t)stride, stride,
                  nk - j < 16 ? nk - j : 16, dst, g->nq[gi]);
    }
}

static void attn_groups_build(attn_groups *g, int nq, const float *const *q, int head_dim) {
    g->n_qt = 0;
    if (head_dim <= KR_QT_MAX_DIM) g->n_qt = nq % KR_QT_LANES >= 12 ? nq : nq - nq % KR_QT_LANES;
    if (g->n_qt) qt_groups_build(&g->qt, g->n_qt, q, head_dim);
}

static void attn_block_scores(const attn_groups *g, int nq, const float *const *q, int head_dim,
                              float scale, const kr_kv_span *blk, float *scratch,
                              int scratch_stride, int col) {
    for (int gi = 0; g->n_qt && gi < g->qt.n; gi++)
        qt_group_scores(&g->qt, gi, head_dim, scale, blk->k, blk->stride, blk->n,
                        scratch + (size_t)(gi * KR_QT_LANES) * (size_t)scratch_stride,
                        scratch_stride, col);
    if (g->n_qt < nq)
        block_scores(nq - g->n_qt, q + g->n_qt, head_dim, scale, blk,
                     scratch + (size_t)g->n_qt * (size_t)scratch_stride + col, scratch_stride);
}

/* wsum_add for two queries over the same keys: each V chunk is loaded once for both, and the
 * two queries' accumulators are independent FMA chains, so twice as many are in flight (one
 * query's chains are latency-bound). Each query's chain per lane is exactly wsum_add's. */
KR_INLINE void wsum_add2(const int NC, int dn, const float *v, int stride, int nk, const float *pa,
                         const float *pb, float *oa, float *ob) {
    __m512 a[8], b[8];
    __mmask16 tail = kr_mask16(dn - 16 * (NC - 1));
#pragma GCC unroll 8
    for (int c = 0; c < NC - 1; c++) {
        a[c] = _mm512_loadu_ps(oa + 16 * c);
        b[c] = _mm512_loadu_ps(ob + 16 * c);
    }
    a[NC - 1] = _mm512_maskz_loadu_ps(tail, oa + 16 * (NC - 1));
    b[NC - 1] = _mm512_maskz_loadu_ps(tail, ob + 16 * (NC - 1));
    for (int j = 0; j < nk; j++, v += stride) {
        __m512 ja = _mm512_set1_ps(pa[j]), jb = _mm512_set1_ps(pb[j]);
#pragma GCC unroll 8
        for (int c = 0; c < NC; c++) {
            __m512 x = c < NC - 1 ? _mm512_loadu_ps(v + 16 * c)
                                  : _mm512_maskz_loadu_ps(tail, v + 16 * (NC - 1));
            a[c] = _mm512_fmadd_ps(ja, x, a[c]);
            b[c] = _mm512_fmadd_ps(jb, x, b[c]);
        }
    }
#pragma GCC unroll 8
    for (int c = 0; c < NC - 1; c++) {
        _mm512_storeu_ps(oa + 16 * c, a[c]);
        _mm512_storeu_ps(ob + 16 * c, b[c]);
    }
    _mm512_mask_storeu_ps(oa + 16 * (NC - 1), tail, a[NC - 1]);
    _mm512_mask_storeu_ps(ob + 16 * (NC - 1), tail, b[NC - 1]);
}

static void values_add2(int head_dim, const float *v, int stride, int nk, const float *pa,
                        const float *pb, float *oa, float *ob) {
    for (int d0 = 0; d0 < head_dim; d0 += 128) {
        int dn = head_dim - d0 < 128 ? head_dim - d0 : 128;
        const float *vv = v + d0;
        float *a = oa + d0, *b = ob + d0;
        switch ((dn + 15) / 16) {
        case 1: wsum_add2(1, dn, vv, stride, nk, pa, pb, a, b); break;
        case 2: wsum_add2(2, dn, vv, stride, nk, pa, pb, a, b); break;
        case 3: wsum_add2(3, dn, vv, stride, nk, pa, pb, a, b); break;
        case 4: wsum_add2(4, dn, vv, stride, nk, pa, pb, a, b); break;
        case 5: wsum_add2(5, dn, vv, stride, nk, pa, pb, a, b); break;
        case 6: wsum_add2(6, dn, vv, stride, nk, pa, pb, a, b); break;
        case 7: wsum_add2(7, dn, vv, stride, nk, pa, pb, a, b); break;
        default: wsum_add2(8, dn, vv, stride, nk, pa, pb, a, b); break;
        }
    }
}

/* wsum_add for four queries over the same keys (head_dim <= 64, NC <= 4): each V chunk
 * loaded once feeds four FMAs, and 4·NC independent chains keep both FMA pipes busy. Each
 * query's chain per lane is exactly wsum_add's. */
KR_INLINE void wsum_add4(const int NC, int dn, const float *v, int stride, int nk,
                         const float *const *p, float *const *o) {
    __m512 acc[4][4];
    __mmask16 tail = kr_mask16(dn - 16 * (NC - 1));
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
#pragma GCC unroll 4
        for (int c = 0; c < NC - 1; c++) acc[r][c] = _mm512_loadu_ps(o[r] + 16 * c);
        acc[r][NC - 1] = _mm512_maskz_loadu_ps(tail, o[r] + 16 * (NC - 1));
    }
    for (int j = 0; j < nk; j++, v += stride) {
        __m512 x[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++)
            x[c] = c < NC - 1 ? _mm512_loadu_ps(v + 16 * c)
                              : _mm512_maskz_loadu_ps(tail, v + 16 * (NC - 1));
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            __m512 pj = _mm512_set1_ps(p[r][j]);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) acc[r][c] = _mm512_fmadd_ps(pj, x[c], acc[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
#pragma GCC unroll 4
        for (int c = 0; c < NC - 1; c++) _mm512_storeu_ps(o[r] + 16 * c, acc[r][c]);
        _mm512_mask_storeu_ps(o[r] + 16 * (NC - 1), tail, acc[r][NC - 1]);
    }
}

/* values_add for four queries; only for head_dim <= 64. */
static void values_add4(int head_dim, const float *v, int stride, int nk, const float *const *p,
                        float *const *o) {
    switch ((head_dim + 15) / 16) {
    case 1: wsum_add4(1, head_dim, v, stride, nk, p, o); break;
    case 2: wsum_add4(2, head_dim, v, stride, nk, p, o); break;
    case 3: wsum_add4(3, head_dim, v, stride, nk, p, o); break;
    default: wsum_add4(4, head_dim, v, stride, nk, p, o); break;
    }
}

static void attn_block_values(int nq, int head_dim, const float *v, int vs, int nk,
                              const float *scratch, int scratch_stride, int col,
                              float *const *out) {
#define ROW(i) (scratch + (size_t)(i) * (size_t)scratch_stride + col)
    int i = 0;
    if (head_dim <= 64)
        for (; i + 3 < nq; i += 4) {
            const float *p4[4] = { ROW(i), ROW(i + 1), ROW(i + 2), ROW(i + 3) };
            values_add4(head_dim, v, vs, nk, p4, out + i);
        }
    for (; i + 1 < nq; i += 2)
        values_add2(head_dim, v, vs, nk, ROW(i), ROW(i + 1), out[i], out[i + 1]);
    if (i < nq) values_add(head_dim, v, vs, nk, ROW(i), out[i]);
#undef ROW
}

/* ---- causal */

/* Values of the nq queries over keys [key0, key0 + nk) at v (rows vs floats apart), query i
 * taking the first c_i = clamp(n_keys[i] − key0, 0, nk) of them: the count all of a pair or
 * quad share goes through values_add2/values_add4 and each query's rest after it, which is
 * the same FMA chain per lane in key order. */
static void attn_causal_values(int nq, int head_dim, const float *v, int vs, int nk, int key0,
                               const int *n_keys, const float *scratch, int scratch_stride,
                               float *const *out) {
#define ROW(i) (scratch + (size_t)(i) * (size_t)scratch_stride + key0)
    int c[KR_ATTN_TILE];
    kr_causal_counts(nq, n_keys, key0, nk, c);
    int i = 0, step = head_dim <= 64 ? 4 : 2;
    for (; i + step <= nq; i += step) {
        int lo = c[i];
        for (int r = 1; r < step; r++) lo = c[i + r] < lo ? c[i + r] : lo;
        if (lo > 0 && step == 4) {
            const float *p4[4] = { ROW(i), ROW(i + 1), ROW(i + 2), ROW(i + 3) };
            values_add4(head_dim, v, vs, lo, p4, out + i);
        } else if (lo > 0) {
            values_add2(head_dim, v, vs, lo, ROW(i), ROW(i + 1), out[i], out[i + 1]);
        }
        for (int r = 0; r < step; r++)
            if (c[i + r] > lo)
                values_add(head_dim, v + (size_t)lo * (size_t)vs, vs, c[i + r] - lo,
                           ROW(i + r) + lo, out[i + r]);
    }
    for (; i < nq; i++)
        if (c[i] > 0) values_add(head_dim, v, vs, c[i], ROW(i), out[i]);
#undef ROW
}

/* The causal scores for head_dim <= KR_QT_MAX_DIM: the queries in lanes, each group of 16
 * over its own reach (a query's scores past its own count are computed with its group's and
 * never read); keys outer, so a block is read into L1 once for every group. */
static void attn_causal_scores(int nq, const float *const *q, int head_dim, float scale,
                               const kr_kv_span *spans, int n_spans, const int *n_keys, int n_max,
                               int bk, float *pack, float *scratch, int scratch_stride) {
    int reach[KR_ATTN_TILE / KR_QT_LANES];
    qt_groups g;
    qt_groups_build(&g, nq, q, head_dim);
    for (int gi = 0; gi < g.n; gi++) {
        reach[gi] = 0;
        for (int i = 0; i < g.nq[gi]; i++) {
            int n = n_keys[gi * KR_QT_LANES + i];
            reach[gi] = n > reach[gi] ? n : reach[gi];
        }
    }
    const kr_kv_span *sp;
    int j0, key0, nk, ks;
    for (kr_key_blocks it = kr_key_blocks_start(spans, n_spans, n_max, bk);
         kr_key_blocks_next(&it, &sp, &j0, &key0, &nk);) {
        const float *k = kr_attn_rows(sp->k, sp->stride, j0, nk, head_dim, pack, &ks);
        for (int gi = 0; gi < g.n; gi++)
            if (reach[gi] > key0)
                qt_group_scores(&g, gi, head_dim, scale, k, ks,
                                nk < reach[gi] - key0 ? nk : reach[gi] - key0,
                                scratch + (size_t)(gi * KR_QT_LANES) * (size_t)scratch_stride,
                                scratch_stride, key0);
    }
}

/* Wider heads than the transposed queries hold go one query at a time. */
static int attn_causal_by_rows(int head_dim) { return head_dim > KR_QT_MAX_DIM; }
#endif
