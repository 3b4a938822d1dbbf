/*
 * kernels/attn_qt_avx512.h — attention scores with the queries in the lanes (AVX-512), for the
 * multi-query and causal kernels of attention_avx512.c (included there only).
 *
 * A score is fixed bit for bit by the single-query kernel: lane l of one 16-lane accumulator
 * sums q[d]·k[d] over d ≡ l (mod 16) in order of d (one FMA each, from +0; lanes past
 * head_dim add +0 as the masked tail's 0·0 does), then kr_reduce16's tree adds the 16 lane
 * sums: t_j = (x_j + x_{8+j}) + (x_{4+j} + x_{12+j}), score = (t_0 + t_2) + (t_1 + t_3), times
 * scale. scores4x4 gets there with 16 FMAs per 8 loads but then spends 30 shuffles per 16
 * scores on the tree, which holds it near 60 % of the FMA peak.
 *
 * Here lane i holds query i of 16: the queries' dims are transposed once per tile
 * (qt[d·16 + i] = q_i[d]), and each of a key's 16 lane sums becomes a vector over the queries,
 * FMAs of a qt row with the key's element broadcast (embedded in the FMA). The tree is then
 * plain vector adds, in the same order, and one 16×16 transpose per 16 keys turns the
 * key-major scores into the query rows the softmax reads. Each score is the same arithmetic
 * in the same order, hence bit-identical; padded dims cost no FMAs (head_dim 52 does 52 per
 * score, not 64). Four keys share each qt row load.
 */
#ifndef KR_ATTN_QT_AVX512_H
#define KR_ATTN_QT_AVX512_H

#include "kernels/kernels_internal.h"
#include "kernels/simd_avx512.h"

/* The transposed queries of one lane group: head_dim rounded up to 16 rows of 16 lanes. */
enum { KR_QT_MAX_DIM = 128, KR_QT_LANES = 16 };

/* qt[d·16 + i] = q[i][d] for i < nq, d < head_dim; zero up to the next multiple of 16 and for
 * lanes nq .. 15 (those lanes' scores are computed and never stored). */
static inline void kr_qt_build16(float *qt, const float *const *q, int nq, int head_dim) {
    int dp = (head_dim + 15) & ~15;
    for (int d0 = 0; d0 < dp; d0 += 16) {
        __m512 r[16];
        for (int i = 0; i < 16; i++)
            r[i] = i < nq ? _mm512_maskz_loadu_ps(kr_mask16(head_dim - d0), q[i] + d0)
                          : _mm512_setzero_ps();
        kr_transpose16(r);
        for (int j = 0; j < 16; j++) _mm512_store_ps(qt + (size_t)(d0 + j) * 16, r[j]);
    }
}

/* Lane sums of residue l for four keys k0..k3: p_c = Σ_{d ≡ l} qt[d]·k_c[d], from +0, then
 * +0 for each padded d, as the single-query accumulator's lane l. */
#define KR_QT_RES4(l, p0, p1, p2, p3)                                   \
    do {                                                                \
        p0 = p1 = p2 = p3 = _mm512_setzero_ps();                        \
        _Pragma("GCC unroll 8") for (int d_ = (l); d_ < dp; d_ += 16) { \
            if (d_ < hd) {                                              \
                __m512 qv_ = _mm512_load_ps(qt + (size_t)d_ * 16);      \
                p0 = _mm512_fmadd_ps(qv_, _mm512_set1_ps(k0[d_]), p0);  \
                p1 = _mm512_fmadd_ps(qv_, _mm512_set1_ps(k1[d_]), p1);  \
                p2 = _mm512_fmadd_ps(qv_, _mm512_set1_ps(k2[d_]), p2);  \
                p3 = _mm512_fmadd_ps(qv_, _mm512_set1_ps(k3[d_]), p3);  \
            } else {                                                    \
                p0 = _mm512_add_ps(p0, _mm512_setzero_ps());            \
                p1 = _mm512_add_ps(p1, _mm512_setzero_ps());            \
                p2 = _mm512_add_ps(p2, _mm512_setzero_ps());            \
                p3 = _mm512_add_ps(p3, _mm512_setzero_ps());            \
            }                                                           \
        }                                                               \
    } while (0)

#define KR_QT_ADD4(a0, a1, a2, a3, b0, b1, b2, b3) \
    do {                                           \
        a0 = _mm512_add_ps(a0, b0);                \
        a1 = _mm512_add_ps(a1, b1);                \
        a2 = _mm512_add_ps(a2, b2);                \
        a3 = _mm512_add_ps(a3, b3);                \
    } while (0)

/* t_j = (x_j + x_{8+j}) + (x_{4+j} + x_{12+j}) for four keys. The empty asm makes the next
 * qt loads depend on this group's result, so GCC evaluates the tree group by group instead
 * of hoisting all 16 residues' loads and FMAs first and spilling them (measured: 25 → 80
 * GFLOP/s on one Zen 4 core). */
#define KR_QT_TREE4(j, t0, t1, t2, t3)                                  \
    do {                                                                \
        __m512 x0, x1, x2, x3, y0, y1, y2, y3;                          \
        KR_QT_RES4(j, t0, t1, t2, t3);                                  \
        KR_QT_RES4(8 + j, x0, x1, x2, x3);                              \
        KR_QT_ADD4(t0, t1, t2, t3, x0, x1, x2, x3);                     \
        KR_QT_RES4(4 + j, y0, y1, y2, y3);                              \
        KR_QT_RES4(12 + j, x0, x1, x2, x3);                             \
        KR_QT_ADD4(y0, y1, y2, y3, x0, x1, x2, x3);                     \
        KR_QT_ADD4(t0, t1, t2, t3, y0, y1, y2, y3);                     \
        __asm__("" : "+v"(t0), "+v"(t1), "+v"(t2), "+v"(t3), "+r"(qt)); \
    } while (0)

/* Scores of the 16 lanes of qt against keys [0, nk) (1 <= nk <= 16) at k, `stride` floats
 * apart: dst[i][j] for lanes i < nq. In the last group of four keys, keys past nk repeat the
 * last one; groups past it are skipped. Either way their lanes are masked off the stores. */
KR_INLINE void kr_qt_scores16(const int hd, const float *qt_in, float scale, const float *k,
                              int stride, int nk, float *const *dst, int nq) {
    const int dp = (hd + 15) & ~15;
    const float *qt = qt_in;
    _Alignas(64) float s[16 * 16];
    __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 1
    for (int j0 = 0; j0 < 16; j0 += 4) {
        /* Not hoisted: 64 qt rows do not fit the registers (see KR_QT_TREE4). */
        __asm__("" : "+r"(qt));
        const float *k0 = k + (size_t)(j0 < nk ? j0 : nk - 1) * (size_t)stride;
        const float *k1 = k + (size_t)(j0 + 1 < nk ? j0 + 1 : nk - 1) * (size_t)stride;
        const float *k2 = k + (size_t)(j0 + 2 < nk ? j0 + 2 : nk - 1) * (size_t)stride;
        const float *k3 = k + (size_t)(j0 + 3 < nk ? j0 + 3 : nk - 1) * (size_t)stride;
        __m512 u0, u1, u2, u3, v0, v1, v2, v3, w0, w1, w2, w3;
        KR_QT_TREE4(0, u0, u1, u2, u3);
        KR_QT_TREE4(2, v0, v1, v2, v3);
        KR_QT_ADD4(u0, u1, u2, u3, v0, v1, v2, v3);
        KR_QT_TREE4(1, w0, w1, w2, w3);
        KR_QT_TREE4(3, v0, v1, v2, v3);
        KR_QT_ADD4(w0, w1, w2, w3, v0, v1, v2, v3);
        KR_QT_ADD4(u0, u1, u2, u3, w0, w1, w2, w3);
        _mm512_store_ps(s + (j0 + 0) * 16, _mm512_mul_ps(u0, sc));
        _mm512_store_ps(s + (j0 + 1) * 16, _mm512_mul_ps(u1, sc));
        _mm512_store_ps(s + (j0 + 2) * 16, _mm512_mul_ps(u2, sc));
        _mm512_store_ps(s + (j0 + 3) * 16, _mm512_mul_ps(u3, sc));
        if (j0 + 4 >= nk) break;
    }
    __m512 r[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) r[j] = _mm512_load_ps(s + j * 16);
    kr_transpose16(r); /* r[i]: lane i's scores, key j in lane j */
    __mmask16 m = kr_mask16(nk);
    for (int i = 0; i < nq; i++) _mm512_mask_storeu_ps(dst[i], m, r[i]);
}

#undef KR_QT_TREE4
#undef KR_QT_ADD4
#undef KR_QT_RES4

#endif
