/*
 * kernels/attention_body.h — the attention driver over KV spans (kernels.h: kr_attend_f32,
 * kr_attend_multi_f32 and kr_attend_causal_f32), written once for both vector widths over the
 * names of simd_width.h. attention_avx2.c and attention_avx512.c define KR_WIDTH_AVX2 /
 * KR_WIDTH_AVX512, include simd_width.h, define struct attn_groups, include this file, and
 * then define what really differs per ISA (declared below):
 *   attn_max            the maximum of a score row, as that ISA's softmax always took it
 *   attn_groups, attn_groups_build, attn_block_scores
 *                       the multi-query kernel's shared-block scores (AVX2: 2-3 queries × 4
 *                       keys per register tile; AVX-512: the same 4 × 4, and groups of 16
 *                       queries in the lanes, attn_qt_avx512.h)
 *   attn_block_values   the shared-block value sums of every query (AVX2: 2-3 queries per
 *                       V load, AVX-512: 4 or 2)
 *   attn_causal_scores, attn_causal_values, attn_causal_by_rows
 *                       the causal kernel's scores and value sums over the same tiles (and, for
 *                       AVX-512 heads wider than its transposed queries, one query at a time)
 *
 * Same three passes as the scalar reference. Scores: each key's q·k is one VW_W-lane
 * accumulator over head_dim (masked tail) reduced by the width's fixed tree (VW_REDUCE), VW_W
 * keys side by side; the grouping of keys never changes a key's score. The exp-sum runs over
 * the scratch array in global key order, and the value sum is one FMA per key in key order for
 * every output lane — so cutting the keys into other spans gives bit-identical output.
 *
 * The multi-query kernel runs those same helpers (scores, exp_sum, fma_key) per query, only
 * with keys outer and queries inner over the shared spans, so each block of shared K/V is read
 * from memory once and from L1 by every other query. Its value sums round-trip through out
 * between blocks (exact), hence it equals the single-query kernel bit for bit.
 */
#ifndef KR_ATTENTION_BODY_H
#define KR_ATTENTION_BODY_H

#include "kernels/kernels.h"
#include "kernels/kernels_internal.h"

#if !defined(VW_W)
#error "include kernels/simd_width.h before kernels/attention_body.h"
#endif

/* Column chunk of the value sums: 8 accumulators of VW_W lanes. */
#define AT_COLS (8 * VW_W)

/* ---- per ISA (defined by the including file, after this one) */

/* max of p[0..n) (n >= 1). */
static float attn_max(const float *p, int n);
/* The shared-block score state of one multi-query tile, built from its queries (the struct
 * is complete before this file). */
typedef struct attn_groups attn_groups;
static void attn_groups_build(attn_groups *g, int nq, const float *const *q, int head_dim);
/* Scores of the nq queries against every key of the block blk: scratch row i, columns
 * col .. col + blk->n for query i. */
static void attn_block_scores(const attn_groups *g, int nq, const float *const *q, int head_dim,
                              float scale, const kr_kv_span *blk, float *scratch,
                              int scratch_stride, int col);
/* out[i] += Σ_j p_ij v_j over the nk value rows at v (vs floats apart) for every query i,
 * p_ij at scratch row i, column col + j. */
static void attn_block_values(int nq, int head_dim, const float *v, int vs, int nk,
                              const float *scratch, int scratch_stride, int col, float *const *out);

/* Scores of the nq queries of a causal tile: scratch row i, columns 0 .. n_keys[i] (and any
 * past it, never read) over the first n_max keys of the spans, in blocks of bk keys (pack:
 * the block copy buffer, kr_attn_rows). */
static void attn_causal_scores(int nq, const float *const *q, int head_dim, float scale,
                               const kr_kv_span *spans, int n_spans, const int *n_keys, int n_max,
                               int bk, float *pack, float *scratch, int scratch_stride);
/* out[i] += Σ_j p_ij v_j over the keys [key0, key0 + nk) at v (vs floats apart) that query i
 * sees (its first n_keys[i]), p_ij at scratch row i, column key0 + j. */
static void attn_causal_values(int nq, int head_dim, const float *v, int vs, int nk, int key0,
                               const int *n_keys, const float *scratch, int scratch_stride,
                               float *const *out);
/* 1 when the causal kernel of this head_dim goes one query at a time through the multi-query
 * kernel (kr_attend_causal_by_rows). */
static int attn_causal_by_rows(int head_dim);

/* ---- written once */

/* Scores of keys [0, nk) (nk <= VW_W) starting at k, into dst. */
KR_INLINE void scores(const float *q, int head_dim, float scale, const float *k, int stride, int nk,
                      float *dst) {
    const float *kp[VW_W];
    for (int j = 0; j < VW_W; j++) kp[j] = k + (size_t)(j < nk ? j : nk - 1) * (size_t)stride;
    VW_V acc[VW_W];
#pragma GCC unroll 16
    for (int j = 0; j < VW_W; j++) acc[j] = VW_ZERO();
    int d = 0;
    for (; d + VW_W <= head_dim; d += VW_W) {
        VW_V qv = VW_LOAD(q + d);
#pragma GCC unroll 16
        for (int j = 0; j < VW_W; j++) acc[VW_R(j)] = VW_FMA(qv, VW_LOAD(kp[j] + d), acc[VW_R(j)]);
    }
    if (d < head_dim) {
        VW_M m = VW_MASK(head_dim - d);
        VW_V qv = VW_LOADM(q + d, m);
#pragma GCC unroll 16
        for (int j = 0; j < VW_W; j++)
            acc[VW_R(j)] = VW_FMA(qv, VW_LOADM(kp[j] + d, m), acc[VW_R(j)]);
    }
    VW_V s = VW_MUL(VW_REDUCE(acc), VW_SET1(scale));
    VW_STOREN(dst, nk, s);
}

/* Scores of every key of span sp into dst, VW_W keys per scores call from the span's start:
 * the single-query kernel's loop, for the multi-query kernel. That one calls it on blocks of a
 * shared span that start at multiples of VW_W, so its groups are the single-query kernel's
 * groups (not that grouping could change a score: each lane of scores depends on its own key
 * only). */
static void span_scores(const float *q, int head_dim, float scale, const kr_kv_span *sp,
                        float *dst) {
    for (int j = 0; j < sp->n; j += VW_W)
        scores(q, head_dim, scale, sp->k + (size_t)j * (size_t)sp->stride, sp->stride,
               sp->n - j < VW_W ? sp->n - j : VW_W, dst + j);
}

/* span_scores over every span of a query's own keys, prefetching as it goes. */
static void own_scores(const float *q, int head_dim, float scale, const kr_kv_span *sp, int ns,
                       float *dst) {
    kr_attn_prefetch_start(sp, ns, 0, head_dim);
    for (int s = 0; s < ns; dst += sp[s].n, s++) {
        kr_attn_prefetch(sp, ns, s, 0, sp[s].n, 0, head_dim);
        span_scores(q, head_dim, scale, &sp[s], dst);
    }
}

/* p[0..n) ← exp(p − max p) in place (n >= 1); returns their sum: VW_W-lane partial sums over
 * the array in key order (full chunks plainly, the tail masked: its missing lanes add +0),
 * then the fixed tree. */
static float exp_sum(float *p, int n) {
    VW_V mv = VW_SET1(attn_max(p, n));
    VW_V acc = VW_ZERO();
    int j = 0;
    for (; j + VW_W <= n; j += VW_W) {
        VW_V e = VW_EXP(VW_SUB(VW_LOAD(p + j), mv));
        acc = VW_ADD(acc, e);
        VW_STORE(p + j, e);
    }
    if (j < n) {
        VW_M m = VW_MASK(n - j);
        VW_V e = VW_EXP(VW_SUB(VW_LOADM(p + j, m), mv));
        e = VW_KEEP(e, m);
        acc = VW_ADD(acc, e);
        VW_STOREM(p + j, m, n - j, e);
    }
    return VW_HSUM(acc);
}

/* acc[c] += p · v[VW_W·c ..] for one key: one FMA per lane, the last chunk masked by tail.
 * The value-sum step of every kernel, so they build the same FMA chain per lane. */
KR_INLINE void fma_key(const int NC, VW_V *acc, VW_M tail, const float *v, float p) {
    VW_V pj = VW_SET1(p);
#pragma GCC unroll 8
    for (int c = 0; c < NC - 1; c++) acc[c] = VW_FMA(pj, VW_LOAD(v + VW_W * c), acc[c]);
    acc[NC - 1] = VW_FMA(pj, VW_LOADM(v + VW_W * (NC - 1), tail), acc[NC - 1]);
}

/* out[d0 .. d0 + dn) = Σ_j p_j v_j[...] / sum over every key of spans, keys in order;
 * dn <= VW_W·NC. The accumulators stay in registers across spans. pf_dim > 0: prefetches the
 * value rows ahead, pf_dim floats of each. */
KR_INLINE void wsum(const int NC, int d0, int dn, const kr_kv_span *spans, int n_spans,
                    const float *p, float sum, int pf_dim, float *out) {
    VW_V acc[8];
#pragma GCC unroll 8
    for (int c = 0; c < NC; c++) acc[c] = VW_ZERO();
    VW_M tail = VW_MASK(dn - VW_W * (NC - 1));
    int n = 0;
    for (int s = 0; s < n_spans; s++) {
        const float *v = spans[s].v + d0;
        for (int j0 = 0; j0 < spans[s].n; j0 += KR_ATTN_PF_ROWS) {
            int j1 = j0 + KR_ATTN_PF_ROWS < spans[s].n ? j0 + KR_ATTN_PF_ROWS : spans[s].n;
            if (pf_dim) kr_attn_prefetch(spans, n_spans, s, j0, KR_ATTN_PF_ROWS, 1, pf_dim);
            for (int j = j0; j < j1; j++, v += spans[s].stride) fma_key(NC, acc, tail, v, p[n++]);
        }
    }
    VW_V sv = VW_SET1(sum);
#pragma GCC unroll 8
    for (int c = 0; c < NC - 1; c++) VW_STORE(out + d0 + VW_W * c, VW_DIV(acc[c], sv));
    VW_STOREM(out + d0 + VW_W * (NC - 1), tail, dn - VW_W * (NC - 1), VW_DIV(acc[NC - 1], sv));
}

void VW_NAME(kr_attend_f32)(const float *q, int head_dim, float scale, const kr_kv_span *spans,
                            int n_spans, float *scratch, float *out) {
    int n = 0;
    kr_attn_prefetch_start(spans, n_spans, 0, head_dim);
    for (int s = 0; s < n_spans; s++)
        for (int j = 0; j < spans[s].n; j += VW_W) {
            int nk = spans[s].n - j < VW_W ? spans[s].n - j : VW_W;
            if (j % KR_ATTN_PF_ROWS == 0)
                kr_attn_prefetch(spans, n_spans, s, j, KR_ATTN_PF_ROWS, 0, head_dim);
            scores(q, head_dim, scale, spans[s].k + (size_t)j * (size_t)spans[s].stride,
                   spans[s].stride, nk, scratch + n);
            n += nk;
        }
    if (n <= 0) { /* outside the contract: same zeros as the scalar reference */
        for (int i = 0; i < head_dim; i++) out[i] = 0.0f;
        return;
    }
    kr_attn_prefetch_start(spans, n_spans, 1, head_dim);
    float total = exp_sum(scratch, n);

    for (int d0 = 0; d0 < head_dim; d0 += AT_COLS) {
        int dn = head_dim - d0 < AT_COLS ? head_dim - d0 : AT_COLS;
        int pf = d0 ? 0 : head_dim; /* the first column chunk brings whole rows in */
        switch ((dn + VW_W - 1) / VW_W) {
        case 1: wsum(1, d0, dn, spans, n_spans, scratch, total, pf, out); break;
        case 2: wsum(2, d0, dn, spans, n_spans, scratch, total, pf, out); break;
        case 3: wsum(3, d0, dn, spans, n_spans, scratch, total, pf, out); break;
        case 4: wsum(4, d0, dn, spans, n_spans, scratch, total, pf, out); break;
        case 5: wsum(5, d0, dn, spans, n_spans, scratch, total, pf, out); break;
        case 6: wsum(6, d0, dn, spans, n_spans, scratch, total, pf, out); break;
        case 7: wsum(7, d0, dn, spans, n_spans, scratch, total, pf, out); break;
        default: wsum(8, d0, dn, spans, n_spans, scratch, total, pf, out); break;
        }
    }
}

/* ---- multi-query */

/* out[0 .. dn) += Σ_j p_j v_j[...] over nk keys (dn <= VW_W·NC): the running sum round-trips
 * through out, which is exact (a float store/load), so a query's FMA chain per lane is the
 * one wsum builds in registers. */
KR_INLINE void wsum_add(const int NC, int dn, const float *v, int stride, int nk, const float *p,
                        float *out) {
    VW_V acc[8];
    VW_M tail = VW_MASK(dn - VW_W * (NC - 1));
#pragma GCC unroll 8
    for (int c = 0; c < NC - 1; c++) acc[c] = VW_LOAD(out + VW_W * c);
    acc[NC - 1] = VW_LOADM(out + VW_W * (NC - 1), tail);
    for (int j = 0; j < nk; j++, v += stride) fma_key(NC, acc, tail, v, p[j]);
#pragma GCC unroll 8
    for (int c = 0; c < NC - 1; c++) VW_STORE(out + VW_W * c, acc[c]);
    VW_STOREM(out + VW_W * (NC - 1), tail, dn - VW_W * (NC - 1), acc[NC - 1]);
}

/* out[0 .. head_dim) += Σ_j p_j v_j over nk keys, in AT_COLS-float column chunks. */
static void values_add(int head_dim, const float *v, int stride, int nk, const float *p,
                       float *out) {
    for (int d0 = 0; d0 < head_dim; d0 += AT_COLS) {
        int dn = head_dim - d0 < AT_COLS ? head_dim - d0 : AT_COLS;
        switch ((dn + VW_W - 1) / VW_W) {
        case 1: wsum_add(1, dn, v + d0, stride, nk, p, out + d0); break;
        case 2: wsum_add(2, dn, v + d0, stride, nk, p, out + d0); break;
        case 3: wsum_add(3, dn, v + d0, stride, nk, p, out + d0); break;
        case 4: wsum_add(4, dn, v + d0, stride, nk, p, out + d0); break;
        case 5: wsum_add(5, dn, v + d0, stride, nk, p, out + d0); break;
        case 6: wsum_add(6, dn, v + d0, stride, nk, p, out + d0); break;
        case 7: wsum_add(7, dn, v + d0, stride, nk, p, out + d0); break;
        default: wsum_add(8, dn, v + d0, stride, nk, p, out + d0); break;
        }
    }
}

/* out[i][0 .. head_dim) = 0 for the nq queries. */
static void zero_outputs(int nq, int head_dim, float *const *out) {
    for (int i = 0; i < nq; i++)
        for (int d = 0; d < head_dim; d += VW_W) VW_STOREN(out[i] + d, head_dim - d, VW_ZERO());
}

/* out[0 .. head_dim) /= sum with the same division wsum ends with (zeros if no keys). */
static void finish(int head_dim, int n_keys, float sum, float *out) {
    VW_V sv = VW_SET1(sum);
    for (int d = 0; d < head_dim; d += VW_W) {
        VW_M m = VW_MASK(head_dim - d);
        VW_V o = n_keys > 0 ? VW_DIV(VW_LOADM(out + d, m), sv) : VW_ZERO();
        VW_STOREM(out + d, m, head_dim - d, o);
    }
}

/* The multi-query kernel for nq <= KR_ATTN_TILE queries: per query the same scores calls,
 * exp_sum over the same scratch values and fma_key chain as kr_attend_f32, run keys-outer /
 * queries-inner over the shared spans. */
static void multi_tile(int nq, const float *const *q, int head_dim, float scale,
                       const kr_kv_span *shared, int n_shared, const kr_kv_span *const *own,
                       const int *n_own, float *scratch, int scratch_stride, float *const *out) {
    const int bk = kr_attn_block_keys(head_dim, VW_W);
    _Alignas(64) float pack[KR_ATTN_PACK];
    float sum[KR_ATTN_TILE];
    int n_keys[KR_ATTN_TILE];
#define ROW(i) (scratch + (size_t)(i) * (size_t)scratch_stride)

    attn_groups g;
    attn_groups_build(&g, nq, q, head_dim);
    int n_sh = 0; /* shared keys: every query's first n_sh scores */
    kr_attn_prefetch_start(shared, n_shared, 0, head_dim);
    for (int s = 0; s < n_shared; n_sh += shared[s].n, s++)
        for (int j0 = 0; j0 < shared[s].n; j0 += bk) {
            int nk = shared[s].n - j0 < bk ? shared[s].n - j0 : bk;
            kr_attn_prefetch(shared, n_shared, s, j0, nk, 0, head_dim);
            kr_kv_span blk = { NULL, NULL, nk, 0 }; /* K rows, in L1 after the first query */
            blk.k =
                kr_attn_rows(shared[s].k, shared[s].stride, j0, nk, head_dim, pack, &blk.stride);
            attn_block_scores(&g, nq, q, head_dim, scale, &blk, scratch, scratch_stride, n_sh + j0);
        }
    kr_attn_prefetch_start(shared, n_shared, 1, head_dim);
    for (int i = 0; i < nq; i++) {
        int ns = own && n_own ? n_own[i] : 0;
        if (ns) own_scores(q[i], head_dim, scale, own[i], ns, ROW(i) + n_sh);
        int n = n_sh;
        for (int s = 0; s < ns; s++) n += own[i][s].n;
        n_keys[i] = n;
        sum[i] = n > 0 ? exp_sum(ROW(i), n) : 0.0f;
    }

    /* Zeroed only now that every score is done, so out[i] may alias q[i]. */
    zero_outputs(nq, head_dim, out);
    for (int s = 0, base = 0; s < n_shared; base += shared[s].n, s++)
        for (int j0 = 0; j0 < shared[s].n; j0 += bk) {
            int nk = shared[s].n - j0 < bk ? shared[s].n - j0 : bk;
            kr_attn_prefetch(shared, n_shared, s, j0, nk, 1, head_dim);
            int vs;
            const float *v =
                kr_attn_rows(shared[s].v, shared[s].stride, j0, nk, head_dim, pack, &vs);
            attn_block_values(nq, head_dim, v, vs, nk, scratch, scratch_stride, base + j0, out);
        }
    for (int i = 0; i < nq; i++) {
        int n = n_sh, ns = own && n_own ? n_own[i] : 0;
        if (ns) kr_attn_prefetch_start(own[i], ns, 1, head_dim);
        for (int s = 0; s < ns; n += own[i][s].n, s++) {
            kr_attn_prefetch(own[i], ns, s, 0, own[i][s].n, 1, head_dim);
            values_add(head_dim, own[i][s].v, own[i][s].stride, own[i][s].n, ROW(i) + n, out[i]);
        }
        finish(head_dim, n_keys[i], sum[i], out[i]);
    }
#undef ROW
}

void VW_NAME(kr_attend_multi_f32)(int nq, const float *const *q, int head_dim, float scale,
                                  const kr_kv_span *shared, int n_shared,
                                  const kr_kv_span *const *own, const int *n_own, float *scratch,
                                  int scratch_stride, float *const *out) {
    for (int t = 0; t < nq; t += KR_ATTN_TILE)
        multi_tile(nq - t < KR_ATTN_TILE ? nq - t : KR_ATTN_TILE, q + t, head_dim, scale, shared,
                   n_shared, own ? own + t : NULL, n_own ? n_own + t : NULL,
                   scratch + (size_t)t * (size_t)scratch_stride, scratch_stride, out + t);
}

/* ---- causal */

/* The causal kernel for nq <= KR_ATTN_TILE queries: every query scored over the tile's reach
 * (a query's scores past its own count are never read), exp_sum over its own count, values
 * keys-outer. Per query: the single-query kernel's scores, exp-sum and FMA chain. */
static void causal_tile(int nq, const float *const *q, int head_dim, float scale,
                        const kr_kv_span *spans, int n_spans, const int *n_keys, float *scratch,
                        int scratch_stride, float *const *out) {
    const int bk = kr_attn_block_keys(head_dim, VW_W);
    _Alignas(64) float pack[KR_ATTN_PACK];
    float sum[KR_ATTN_TILE];
    int n_max = 0;
    for (int i = 0; i < nq; i++) n_max = n_keys[i] > n_max ? n_keys[i] : n_max;
#define ROW(i) (scratch + (size_t)(i) * (size_t)scratch_stride)
    attn_causal_scores(nq, q, head_dim, scale, spans, n_spans, n_keys, n_max, bk, pack, scratch,
                       scratch_stride);
    for (int i = 0; i < nq; i++) sum[i] = n_keys[i] > 0 ? exp_sum(ROW(i), n_keys[i]) : 0.0f;

    /* Zeroed only now that every score is done, so out[i] may alias q[i]. */
    zero_outputs(nq, head_dim, out);
    const kr_kv_span *sp;
    int j0, key0, nk, vs;
    for (kr_key_blocks it = kr_key_blocks_start(spans, n_spans, n_max, bk);
         kr_key_blocks_next(&it, &sp, &j0, &key0, &nk);) {
        const float *v = kr_attn_rows(sp->v, sp->stride, j0, nk, head_dim, pack, &vs);
        attn_causal_values(nq, head_dim, v, vs, nk, key0, n_keys, scratch, scratch_stride, out);
    }
    for (int i = 0; i < nq; i++) finish(head_dim, n_keys[i], sum[i], out[i]);
#undef ROW
}

void VW_NAME(kr_attend_causal_f32)(int nq, const float *const *q, int head_dim, float scale,
                                   const kr_kv_span *spans, int n_spans, const int *n_keys,
                                   float *scratch, int scratch_stride, float *const *out) {
    if (attn_causal_by_rows(head_dim)) {
        kr_attend_causal_by_rows(VW_NAME(kr_attend_multi_f32), nq, q, head_dim, scale, spans,
                                 n_spans, n_keys, scratch, out);
        return;
    }
    for (int t = 0; t < nq; t += KR_ATTN_TILE)
        causal_tile(nq - t < KR_ATTN_TILE ? nq - t : KR_ATTN_TILE, q + t, head_dim, scale, spans,
                    n_spans, n_keys + t, scratch + (size_t)t * (size_t)scratch_stride,
                    scratch_stride, out + t);
}

#endif
