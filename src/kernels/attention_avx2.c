/*
 * kernels/attention_avx2 — single- and multi-query attention over KV spans with AVX2+FMA.
 *
 * Mirrors attention_avx512.c with 8 lanes: per-key dots reduced by the fixed tree (8 keys
 * side by side), exp-sum over scratch in global key order, value sum one FMA per key in key
 * order — so the output does not depend on how keys are cut into spans. The multi-query
 * kernel runs the same helpers per query (the shared blocks' scores two queries × four keys
 * per register tile: scores_qx4, the same per-key tree), keys outer / queries inner over the
 * shared spans (see attention_avx512.c), and equals the single-query kernel bit for bit.
 */
#include "kernels/kernels.h"
#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx2.h"

/* Scores of keys [0, nk) (nk <= 8) starting at k, into dst. */
KR_INLINE void scores8(const float *q, int head_dim, float scale, const float *k, int stride,
                       int nk, float *dst) {
    const float *kp[8];
    for (int j = 0; j < 8; j++) kp[j] = k + (size_t)(j < nk ? j : nk - 1) * (size_t)stride;
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
    int d = 0;
    for (; d + 8 <= head_dim; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + d);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[KR_R8(j)] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kp[j] + d), acc[KR_R8(j)]);
    }
    if (d < head_dim) {
        __m256i m = kr_mask8(head_dim - d);
        __m256 qv = _mm256_maskload_ps(q + d, m);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[KR_R8(j)] = _mm256_fmadd_ps(qv, _mm256_maskload_ps(kp[j] + d, m), acc[KR_R8(j)]);
    }
    __m256 s = _mm256_mul_ps(kr_reduce8(acc), _mm256_set1_ps(scale));
    kr_store8(dst, s, nk);
}

/* Scores of every key of span sp into dst, 8 keys per scores8 call from the span's start:
 * the single-query kernel's loop, for the multi-query kernel. That one calls it on blocks of a
 * shared span that start at multiples of 8, so its groups are the single-query kernel's
 * groups (not that grouping could change a score: each lane of scores8 depends on its own key
 * only). */
static void span_scores(const float *q, int head_dim, float scale, const kr_kv_span *sp,
                        float *dst) {
    for (int j = 0; j < sp->n; j += 8)
        scores8(q, head_dim, scale, sp->k + (size_t)j * (size_t)sp->stride, sp->stride,
                sp->n - j < 8 ? sp->n - j : 8, dst + j);
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

/* Scores of NQ (2 or 3) queries against keys [0, nk) (nk <= 4) starting at k: dst[r][c] for
 * query r and key c. For the multi-query and causal kernels' shared blocks: NQ q and 4 K loads
 * feed 4·NQ FMAs where scores8 spends 9 loads on 8, and the 3-query tile fills the 16
 * registers (12 accumulators, 3 q, 1 K). Queries 0-1 reduce together; query 2's four
 * accumulators reduce beside four zero ones (the tree adds a lane only to lanes of its own
 * accumulator). Each score is still one 8-lane accumulator over head_dim, the same masked tail
 * and the same tree (kr_reduce8 treats every lane alike), times scale — scores8's value bit
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

/* p[0..n) ← exp(p − max p) in place (n >= 1); returns their sum: 8-lane partial sums over
 * the array in key order, then the fixed tree. */
static float exp_sum8(float *p, int n) {
    /* The maximum 8 lanes at a time: one scalar compare per key was a chain of dependent
     * maxss, ~4 cycles a key, more than the exps after it. max_ps(x, m) is x > m ? x : m, the
     * scalar rule per lane (a NaN key is skipped, a NaN p[0] stays), and the lanes merge by the
     * same rule; only the sign of a zero maximum can depend on the order, and p − (±0) is the
     * same float for every p, so the exps are too. Masked-off lanes keep m. */
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
    __m256 mv = _mm256_set1_ps(mx);
    /* Full chunks plainly, the tail masked (its missing lanes add +0, as before). */
    __m256 acc = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 e = kr_exp8(_mm256_sub_ps(_mm256_loadu_ps(p + j), mv));
        acc = _mm256_add_ps(acc, e);
        _mm256_storeu_ps(p + j, e);
    }
    if (j < n) {
        __m256i m = kr_mask8(n - j);
        __m256 e = kr_exp8(_mm256_sub_ps(_mm256_maskload_ps(p + j, m), mv));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
        acc = _mm256_add_ps(acc, e);
        kr_store8(p + j, e, n - j);
    }
    return kr_hsum8(acc);
}

/* acc[c] += p · v[8c ..] for one key: one FMA per lane, the last chunk masked by tail. The
 * value-sum step of both kernels, so they build the same FMA chain per lane. */
KR_INLINE void fma_key(const int NC, __m256 *acc, __m256i tail, const float *v, float p) {
    __m256 pj = _mm256_set1_ps(p);
#pragma GCC unroll 8
    for (int c = 0; c < NC - 1; c++)
        acc[c] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8 * c), acc[c]);
    acc[NC - 1] = _mm256_fmadd_ps(pj, _mm256_maskload_ps(v + 8 * (NC - 1), tail), acc[NC - 1]);
}

/* out[d0 .. d0 + dn) = Σ_j p_j v_j[...] / sum over every key of spans, keys in order;
 * dn <= 8·NC. The accumulators stay in registers across spans. pf_dim > 0: prefetches the
 * value rows ahead, pf_dim floats of each. */
KR_INLINE void wsum(const int NC, int d0, int dn, const kr_kv_span *spans, int n_spans,
                    const float *p, float sum, int pf_dim, float *out) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    __m256i tail = kr_mask8(dn - 8 * (NC - 1));
    int n = 0;
    for (int s = 0; s < n_spans; s++) {
        const float *v = spans[s].v + d0;
        for (int j0 = 0; j0 < spans[s].n; j0 += KR_ATTN_PF_ROWS) {
            int j1 = j0 + KR_ATTN_PF_ROWS < spans[s].n ? j0 + KR_ATTN_PF_ROWS : spans[s].n;
            if (pf_dim) kr_attn_prefetch(spans, n_spans, s, j0, KR_ATTN_PF_ROWS, 1, pf_dim);
            for (int j = j0; j < j1; j++, v += spans[s].stride) fma_key(NC, acc, tail, v, p[n++]);
        }
    }
    __m256 sv = _mm256_set1_ps(sum);
#pragma GCC unroll 8
    for (int c = 0; c < NC - 1; c++) _mm256_storeu_ps(out + d0 + 8 * c, _mm256_div_ps(acc[c], sv));
    kr_store8(out + d0 + 8 * (NC - 1), _mm256_div_ps(acc[NC - 1], sv), dn - 8 * (NC - 1));
}

void kr_attend_f32_avx2(const float *q, int head_dim, float scale, const kr_kv_span *spans,
                        int n_spans, float *scratch, float *out) {
    int n = 0;
    kr_attn_prefetch_start(spans, n_spans, 0, head_dim);
    for (int s = 0; s < n_spans; s++)
        for (int j = 0; j < spans[s].n; j += 8) {
            int nk = spans[s].n - j < 8 ? spans[s].n - j : 8;
            if (j % KR_ATTN_PF_ROWS == 0)
                kr_attn_prefetch(spans, n_spans, s, j, KR_ATTN_PF_ROWS, 0, head_dim);
            scores8(q, head_dim, scale, spans[s].k + (size_t)j * (size_t)spans[s].stride,
                    spans[s].stride, nk, scratch + n);
            n += nk;
        }
    if (n <= 0) { /* outside the contract: same zeros as the scalar reference */
        for (int i = 0; i < head_dim; i++) out[i] = 0.0f;
        return;
    }
    kr_attn_prefetch_start(spans, n_spans, 1, head_dim);
    float total = exp_sum8(scratch, n);

    for (int d0 = 0; d0 < head_dim; d0 += 64) {
        int dn = head_dim - d0 < 64 ? head_dim - d0 : 64;
        int pf = d0 ? 0 : head_dim; /* the first column chunk brings whole rows in */
        switch ((dn + 7) / 8) {
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

/* out[0 .. dn) += Σ_j p_j v_j[...] over nk keys (dn <= 8·NC): the running sum round-trips
 * through out, which is exact (a float store/load), so a query's FMA chain per lane is the
 * one wsum builds in registers. */
KR_INLINE void wsum_add(const int NC, int dn, const float *v, int stride, int nk, const float *p,
                        float *out) {
    __m256 acc[8];
    __m256i tail = kr_mask8(dn - 8 * (NC - 1));
#pragma GCC unroll 8
    for (int c = 0; c < NC - 1; c++) acc[c] = _mm256_loadu_ps(out + 8 * c);
    acc[NC - 1] = _mm256_maskload_ps(out + 8 * (NC - 1), tail);
    for (int j = 0; j < nk; j++, v += stride) fma_key(NC, acc, tail, v, p[j]);
#pragma GCC unroll 8
    for (int c = 0; c < NC - 1; c++) _mm256_storeu_ps(out + 8 * c, acc[c]);
    kr_store8(out + 8 * (NC - 1), acc[NC - 1], dn - 8 * (NC - 1));
}

/* out[0 .. head_dim) += Σ_j p_j v_j over nk keys, in 64-float column chunks. */
static void values_add(int head_dim, const float *v, int stride, int nk, const float *p,
                       float *out) {
    for (int d0 = 0; d0 < head_dim; d0 += 64) {
        int dn = head_dim - d0 < 64 ? head_dim - d0 : 64;
        switch ((dn + 7) / 8) {
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

/* out[0 .. head_dim) /= sum with the same division wsum ends with (zeros if no keys). */
static void finish(int head_dim, int n_keys, float sum, float *out) {
    __m256 sv = _mm256_set1_ps(sum);
    for (int d = 0; d < head_dim; d += 8) {
        __m256i m = kr_mask8(head_dim - d);
        __m256 o =
            n_keys > 0 ? _mm256_div_ps(_mm256_maskload_ps(out + d, m), sv) : _mm256_setzero_ps();
        kr_store8(out + d, o, head_dim - d);
    }
}

/* The multi-query kernel for nq <= KR_ATTN_TILE queries: per query the same scores8 calls,
 * exp_sum8 over the same scratch values and fma_key chain as kr_attend_f32_avx2, run
 * keys-outer / queries-inner over the shared spans. */
static void multi_tile(int nq, const float *const *q, int head_dim, float scale,
                       const kr_kv_span *shared, int n_shared, const kr_kv_span *const *own,
                       const int *n_own, float *scratch, int scratch_stride, float *const *out) {
    const int bk = kr_attn_block_keys(head_dim, 8);
    _Alignas(64) float pack[KR_ATTN_PACK];
    float sum[KR_ATTN_TILE];
    int n_keys[KR_ATTN_TILE];
#define ROW(i) (scratch + (size_t)(i) * (size_t)scratch_stride)

    int n_sh = 0; /* shared keys: every query's first n_sh scores */
    kr_attn_prefetch_start(shared, n_shared, 0, head_dim);
    for (int s = 0; s < n_shared; n_sh += shared[s].n, s++)
        for (int j0 = 0; j0 < shared[s].n; j0 += bk) {
            int nk = shared[s].n - j0 < bk ? shared[s].n - j0 : bk;
            kr_attn_prefetch(shared, n_shared, s, j0, nk, 0, head_dim);
            kr_kv_span blk = { NULL, NULL, nk, 0 }; /* K rows, in L1 after the first query */
            blk.k =
                kr_attn_rows(shared[s].k, shared[s].stride, j0, nk, head_dim, pack, &blk.stride);
            block_scores(nq, q, head_dim, scale, &blk, ROW(0) + n_sh + j0, scratch_stride);
        }
    kr_attn_prefetch_start(shared, n_shared, 1, head_dim);
    for (int i = 0; i < nq; i++) {
        int ns = own && n_own ? n_own[i] : 0;
        if (ns) own_scores(q[i], head_dim, scale, own[i], ns, ROW(i) + n_sh);
        int n = n_sh;
        for (int s = 0; s < ns; s++) n += own[i][s].n;
        n_keys[i] = n;
        sum[i] = n > 0 ? exp_sum8(ROW(i), n) : 0.0f;
    }

    /* Zeroed only now that every score is done, so out[i] may alias q[i]. */
    for (int i = 0; i < nq; i++)
        for (int d = 0; d < head_dim; d += 8)
            kr_store8(out[i] + d, _mm256_setzero_ps(), head_dim - d);
    for (int s = 0, base = 0; s < n_shared; base += shared[s].n, s++)
        for (int j0 = 0; j0 < shared[s].n; j0 += bk) {
            int nk = shared[s].n - j0 < bk ? shared[s].n - j0 : bk;
            kr_attn_prefetch(shared, n_shared, s, j0, nk, 1, head_dim);
            int vs;
            const float *v =
                kr_attn_rows(shared[s].v, shared[s].stride, j0, nk, head_dim, pack, &vs);
            for (int i = 0, g; i < nq; i += g) {
                g = nq - i >= 3 ? 3 : nq - i;
                const float *p[3];
                for (int r = 0; r < 3; r++) p[r] = ROW(i + (r < g ? r : 0)) + base + j0;
                values_group(g, head_dim, v, vs, nk, p, out + i);
            }
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

void kr_attend_multi_f32_avx2(int nq, const float *const *q, int head_dim, float scale,
                              const kr_kv_span *shared, int n_shared, const kr_kv_span *const *own,
                              const int *n_own, float *scratch, int scratch_stride,
                              float *const *out) {
    for (int t = 0; t < nq; t += KR_ATTN_TILE)
        multi_tile(nq - t < KR_ATTN_TILE ? nq - t : KR_ATTN_TILE, q + t, head_dim, scale, shared,
                   n_shared, own ? own + t : NULL, n_own ? n_own + t : NULL,
                   scratch + (size_t)t * (size_t)scratch_stride, scratch_stride, out + t);
}

/* ---- causal */

/* Values of the nq queries over keys [key0, key0 + nk) at v, query i taking the first
 * clamp(n_keys[i] − key0, 0, nk): what a group of up to three shares through values_group,
 * each query's rest after it — the same FMA chain per lane in key order. */
static void causal_values(int nq, int head_dim, const float *v, int vs, int nk, int key0,
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

/* The causal kernel for nq <= KR_ATTN_TILE queries: every query scored over the tile's
 * reach with block_scores (a query's scores past its own count are never read), exp_sum8
 * over its own count, values keys-outer. Per query: the single-query kernel's arithmetic. */
static void causal_tile(int nq, const float *const *q, int head_dim, float scale,
                        const kr_kv_span *spans, int n_spans, const int *n_keys, float *scratch,
                        int scratch_stride, float *const *out) {
    const int bk = kr_attn_block_keys(head_dim, 8);
    _Alignas(64) float pack[KR_ATTN_PACK];
    float sum[KR_ATTN_TILE];
    int n_max = 0;
    for (int i = 0; i < nq; i++) n_max = n_keys[i] > n_max ? n_keys[i] : n_max;
#define ROW(i) (scratch + (size_t)(i) * (size_t)scratch_stride)
    const kr_kv_span *sp;
    int j0, key0, nk, vs;
    for (kr_key_blocks it = kr_key_blocks_start(spans, n_spans, n_max, bk);
         kr_key_blocks_next(&it, &sp, &j0, &key0, &nk);) {
        kr_kv_span blk = { NULL, NULL, nk, 0 };
        blk.k = kr_attn_rows(sp->k, sp->stride, j0, nk, head_dim, pack, &blk.stride);
        block_scores(nq, q, head_dim, scale, &blk, ROW(0) + key0, scratch_stride);
    }
    for (int i = 0; i < nq; i++) sum[i] = n_keys[i] > 0 ? exp_sum8(ROW(i), n_keys[i]) : 0.0f;

    /* Zeroed only now that every score is done, so out[i] may alias q[i]. */
    for (int i = 0; i < nq; i++)
        for (int d = 0; d < head_dim; d += 8)
            kr_store8(out[i] + d, _mm256_setzero_ps(), head_dim - d);
    for (kr_key_blocks it = kr_key_blocks_start(spans, n_spans, n_max, bk);
         kr_key_blocks_next(&it, &sp, &j0, &key0, &nk);) {
        const float *v = kr_attn_rows(sp->v, sp->stride, j0, nk, head_dim, pack, &vs);
        causal_values(nq, head_dim, v, vs, nk, key0, n_keys, scratch, scratch_stride, out);
    }
    for (int i = 0; i < nq; i++) finish(head_dim, n_keys[i], sum[i], out[i]);
#undef ROW
}

void kr_attend_causal_f32_avx2(int nq, const float *const *q, int head_dim, float scale,
                               const kr_kv_span *spans, int n_spans, const int *n_keys,
                               float *scratch, int scratch_stride, float *const *out) {
    for (int t = 0; t < nq; t += KR_ATTN_TILE)
        causal_tile(nq - t < KR_ATTN_TILE ? nq - t : KR_ATTN_TILE, q + t, head_dim, scale, spans,
                    n_spans, n_keys + t, scratch + (size_t)t * (size_t)scratch_stride,
                    scratch_stride, out + t);
}

#else
/* Off x86-64 the name still links (dispatch never selects it there). */
void kr_attend_multi_f32_avx2(int nq, const float *const *q, int head_dim, float scale,
                              const kr_kv_span *shared, int n_shared, const kr_kv_span *const *own,
                              const int *n_own, float *scratch, int scratch_stride,
                              float *const *out) {
    kr_attend_multi_f32_scalar(nq, q, head_dim, scale, shared, n_shared, own, n_own, scratch,
                               scratch_stride, out);
}

void kr_attend_causal_f32_avx2(int nq, const float *const *q, int head_dim, float scale,
                               const kr_kv_span *spans, int n_spans, const int *n_keys,
                               float *scratch, int scratch_stride, float *const *out) {
    kr_attend_causal_f32_scalar(nq, q, head_dim, scale, spans, n_spans, n_keys, scratch,
                                scratch_stride, out);
}
#endif
