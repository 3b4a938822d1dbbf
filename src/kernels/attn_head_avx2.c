/*
 * kernels/attn_head_avx2 — attention of one head over a sequence (train_kernels.h) with AVX2
 * + FMA: blocks of 24 queries in three vectors, 4-key score tiles, the loop nest of
 * attn_head_body.h.
 */
#include "kernels/train_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/simd_avx2.h"

/* Lanes i with lo <= i < hi (either bound may fall outside 0 .. 8). */
KR_INLINE __m256i lanes8(int lo, int hi) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i below_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), iota);
    __m256i below_lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(lo), iota);
    return _mm256_andnot_si256(below_lo, below_hi);
}

#define AH_V __m256
#define AH_W 8
#define AH_ACC 12
#define AH_M __m256i
#define AH_LANES(lo, hi) lanes8((lo), (hi))
#define AH_LOAD(p) _mm256_loadu_ps(p)
#define AH_STORE(p, v) _mm256_storeu_ps((p), (v))
#define AH_LOADN(p, n) _mm256_maskload_ps((p), kr_mask8(n))
#define AH_STOREN(p, n, v) kr_store8((p), (v), (n))
#define AH_BCAST(p) _mm256_broadcast_ss(p)
#define AH_SET1(x) _mm256_set1_ps(x)
#define AH_ZERO() _mm256_setzero_ps()
#define AH_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define AH_ADD(a, b) _mm256_add_ps((a), (b))
#define AH_SUB(a, b) _mm256_sub_ps((a), (b))
#define AH_MUL(a, b) _mm256_mul_ps((a), (b))
#define AH_DIV(a, b) _mm256_div_ps((a), (b))
#define AH_MAX(a, b) _mm256_max_ps((a), (b))
#define AH_EXP(x) kr_exp8(x)
#define AH_BLEND(m, a, b) _mm256_blendv_ps((b), (a), _mm256_castsi256_ps(m))
#define AH_GT(a, b) _mm256_castps_si256(_mm256_cmp_ps((a), (b), _CMP_GT_OQ))
#define AH_HSUM(v) kr_hsum8(v)
#define AH_TRANSPOSE(r) kr_transpose8(r)
#define AH_NAME(x) x##_avx2_ah
#include "kernels/attn_head_body.h"

void kr_attn_head_fwd_avx2(const kr_attn_head *h, const float *q, const float *k, const float *v,
                           float *out, float *scratch) {
    kr_attn_head_fwd_avx2_ah(h, q, k, v, out, scratch);
}

void kr_attn_head_bwd_avx2(const kr_attn_head *h, const float *q, const float *k, const float *v,
                           const float *out, const float *dout, float *dq, float *dk, float *dv,
                           float *scratch) {
    kr_attn_head_bwd_avx2_ah(h, q, k, v, out, dout, dq, dk, dv, scratch);
}
#endif
