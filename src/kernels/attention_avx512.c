/*
 * kernels/attention_avx512 — single-query attention over KV spans with AVX-512.
 *
 * Same three passes as the scalar reference. Scores: each key's q·k is one 16-lane
 * accumulator over head_dim (masked tail) reduced by the fixed tree, 16 keys side by side;
 * the grouping of keys never changes a key's score. The exp-sum runs over the scratch array
 * in global key order, and the value sum is one FMA per key in key order for every output
 * lane — so cutting the keys into other spans gives bit-identical output.
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include "kernels/simd_avx512.h"

/* Scores of keys [0, nk) (nk <= 16) starting at k, into dst. */
static void scores16(const float *q, int head_dim, float scale, const float *k, int stride, int nk,
                     float *dst) {
    const float *kp[16];
    for (int j = 0; j < 16; j++) kp[j] = k + (size_t)(j < nk ? j : nk - 1) * (size_t)stride;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
    int d = 0;
    for (; d + 16 <= head_dim; d += 16) {
        __m512 qv = _mm512_loadu_ps(q + d);
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++)
            acc[KR_R16(j)] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(kp[j] + d), acc[KR_R16(j)]);
    }
    if (d < head_dim) {
        __mmask16 m = kr_mask16(head_dim - d);
        __m512 qv = _mm512_maskz_loadu_ps(m, q + d);
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++)
            acc[KR_R16(j)] =
                _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, kp[j] + d), acc[KR_R16(j)]);
    }
    __m512 s = _mm512_mul_ps(kr_reduce16(acc), _mm512_set1_ps(scale));
    _mm512_mask_storeu_ps(dst, kr_mask16(nk), s);
}

/* out[d0 .. d0 + 16·NC) (last chunk masked to dn) = Σ_j p_j v_j[...], keys in order. */
KR_INLINE void wsum(const int NC, int d0, int dn, const kr_kv_span *spans, int n_spans,
                    const float *p, float sum, float *out) {
    __m512 acc[8];
#pragma GCC unroll 8
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    __mmask16 tail = kr_mask16(dn - 16 * (NC - 1));
    int n = 0;
    for (int s = 0; s < n_spans; s++) {
        const float *v = spans[s].v + d0;
        for (int j = 0; j < spans[s].n; j++, v += spans[s].stride) {
            __m512 pj = _mm512_set1_ps(p[n++]);
#pragma GCC unroll 8
            for (int c = 0; c < NC - 1; c++)
                acc[c] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + 16 * c), acc[c]);
            acc[NC - 1] =
                _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(tail, v + 16 * (NC - 1)), acc[NC - 1]);
        }
    }
    __m512 is = _mm512_set1_ps(sum);
#pragma GCC unroll 8
    for (int c = 0; c < NC - 1; c++) _mm512_storeu_ps(out + d0 + 16 * c, _mm512_div_ps(acc[c], is));
    _mm512_mask_storeu_ps(out + d0 + 16 * (NC - 1), tail, _mm512_div_ps(acc[NC - 1], is));
}

void kr_attend_f32_avx512(const float *q, int head_dim, float scale, const kr_kv_span *spans,
                          int n_spans, float *scratch, float *out) {
    int n = 0;
    for (int s = 0; s < n_spans; s++)
        for (int j = 0; j < spans[s].n; j += 16) {
            int nk = spans[s].n - j < 16 ? spans[s].n - j : 16;
            scores16(q, head_dim, scale, spans[s].k + (size_t)j * (size_t)spans[s].stride,
                     spans[s].stride, nk, scratch + n);
            n += nk;
        }
    if (n <= 0) { /* outside the contract: same zeros as the scalar reference */
        for (int i = 0; i < head_dim; i++) out[i] = 0.0f;
        return;
    }

    __m512 mx = _mm512_set1_ps(-__builtin_inff());
    for (int j = 0; j < n; j += 16)
        mx = _mm512_mask_max_ps(mx, kr_mask16(n - j), mx,
                                _mm512_maskz_loadu_ps(kr_mask16(n - j), scratch + j));
    __m512 mv = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16) {
        __mmask16 m = kr_mask16(n - j);
        __m512 e = kr_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scratch + j), mv));
        e = _mm512_maskz_mov_ps(m, e);
        sum = _mm512_add_ps(sum, e);
        _mm512_mask_storeu_ps(scratch + j, m, e);
    }
    float total = kr_hsum16(sum);

    for (int d0 = 0; d0 < head_dim; d0 += 128) {
        int dn = head_dim - d0 < 128 ? head_dim - d0 : 128;
        switch ((dn + 15) / 16) {
        case 1: wsum(1, d0, dn, spans, n_spans, scratch, total, out); break;
        case 2: wsum(2, d0, dn, spans, n_spans, scratch, total, out); break;
        case 3: wsum(3, d0, dn, spans, n_spans, scratch, total, out); break;
        case 4: wsum(4, d0, dn, spans, n_spans, scratch, total, out); break;
        case 5: wsum(5, d0, dn, spans, n_spans, scratch, total, out); break;
        case 6: wsum(6, d0, dn, spans, n_spans, scratch, total, out); break;
        case 7: wsum(7, d0, dn, spans, n_spans, scratch, total, out); break;
        default: wsum(8, d0, dn, spans, n_spans, scratch, total, out); break;
        }
    }
}
#endif
