/*
 * kernels/attention_avx2 — single-query attention over KV spans with AVX2+FMA.
 *
 * Mirrors attention_avx512.c with 8 lanes: per-key dots reduced by the fixed tree (8 keys
 * side by side), exp-sum over scratch in global key order, value sum one FMA per key in key
 * order — so the output does not depend on how keys are cut into spans.
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include "kernels/simd_avx2.h"

/* Scores of keys [0, nk) (nk <= 8) starting at k, into dst. */
static void scores8(const float *q, int head_dim, float scale, const float *k, int stride, int nk,
                    float *dst) {
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
    _mm256_maskstore_ps(dst, kr_mask8(nk), s);
}

/* out[d0 .. d0 + 8·NC) (last chunk masked to dn) = Σ_j p_j v_j[...] / sum, keys in order. */
KR_INLINE void wsum(const int NC, int d0, int dn, const kr_kv_span *spans, int n_spans,
                    const float *p, float sum, float *out) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    __m256i tail = kr_mask8(dn - 8 * (NC - 1));
    int n = 0;
    for (int s = 0; s < n_spans; s++) {
        const float *v = spans[s].v + d0;
        for (int j = 0; j < spans[s].n; j++, v += spans[s].stride) {
            __m256 pj = _mm256_set1_ps(p[n++]);
#pragma GCC unroll 8
            for (int c = 0; c < NC - 1; c++)
                acc[c] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8 * c), acc[c]);
            acc[NC - 1] =
                _mm256_fmadd_ps(pj, _mm256_maskload_ps(v + 8 * (NC - 1), tail), acc[NC - 1]);
        }
    }
    __m256 sv = _mm256_set1_ps(sum);
#pragma GCC unroll 8
    for (int c = 0; c < NC - 1; c++) _mm256_storeu_ps(out + d0 + 8 * c, _mm256_div_ps(acc[c], sv));
    _mm256_maskstore_ps(out + d0 + 8 * (NC - 1), tail, _mm256_div_ps(acc[NC - 1], sv));
}

void kr_attend_f32_avx2(const float *q, int head_dim, float scale, const kr_kv_span *spans,
                        int n_spans, float *scratch, float *out) {
    int n = 0;
    for (int s = 0; s < n_spans; s++)
        for (int j = 0; j < spans[s].n; j += 8) {
            int nk = spans[s].n - j < 8 ? spans[s].n - j : 8;
            scores8(q, head_dim, scale, spans[s].k + (size_t)j * (size_t)spans[s].stride,
                    spans[s].stride, nk, scratch + n);
            n += nk;
        }
    if (n <= 0) { /* outside the contract: same zeros as the scalar reference */
        for (int i = 0; i < head_dim; i++) out[i] = 0.0f;
        return;
    }

    float mx = scratch[0];
    for (int j = 1; j < n; j++) mx = scratch[j] > mx ? scratch[j] : mx;
    __m256 mv = _mm256_set1_ps(mx);
    __m256 acc = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8) {
        __m256i m = kr_mask8(n - j);
        __m256 e = kr_exp8(_mm256_sub_ps(_mm256_maskload_ps(scratch + j, m), mv));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
        acc = _mm256_add_ps(acc, e);
        _mm256_maskstore_ps(scratch + j, m, e);
    }
    float total = kr_hsum8(acc);

    for (int d0 = 0; d0 < head_dim; d0 += 64) {
        int dn = head_dim - d0 < 64 ? head_dim - d0 : 64;
        switch ((dn + 7) / 8) {
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
