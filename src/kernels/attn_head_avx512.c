/*
 * kernels/attn_head_avx512 — attention of one head over a sequence (train_kernels.h) with
 * AVX-512: blocks of 48 queries in three vectors, 8-key score tiles, the loop nest of
 * attn_head_body.h.
 */
#include "kernels/train_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/simd_avx512.h"

/* Lanes i with lo <= i < hi (either bound may fall outside 0 .. 16). */
KR_INLINE __mmask16 lanes16(int lo, int hi) {
    __mmask16 h = hi <= 0 ? (__mmask16)0 : kr_mask16(hi);
    __mmask16 l = lo <= 0 ? (__mmask16)0 : kr_mask16(lo);
    return (__mmask16)(h & (__mmask16)~l);
}

#define AH_V __m512
#define AH_W 16
#define AH_ACC 24
#define AH_M __mmask16
#define AH_LANES(lo, hi) lanes16((lo), (hi))
#define AH_LOAD(p) _mm512_loadu_ps(p)
#define AH_STORE(p, v) _mm512_storeu_ps((p), (v))
#define AH_LOADN(p, n) _mm512_maskz_loadu_ps(kr_mask16(n), (p))
#define AH_STOREN(p, n, v) _mm512_mask_storeu_ps((p), kr_mask16(n), (v))
#define AH_BCAST(p) _mm512_set1_ps(*(p))
#define AH_SET1(x) _mm512_set1_ps(x)
#define AH_ZERO() _mm512_setzero_ps()
#define AH_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define AH_ADD(a, b) _mm512_add_ps((a), (b))
#define AH_SUB(a, b) _mm512_sub_ps((a), (b))
#define AH_MUL(a, b) _mm512_mul_ps((a), (b))
#define AH_DIV(a, b) _mm512_div_ps((a), (b))
#define AH_MAX(a, b) _mm512_max_ps((a), (b))
#define AH_EXP(x) kr_exp16(x)
#define AH_BLEND(m, a, b) _mm512_mask_blend_ps((m), (b), (a))
#define AH_GT(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_GT_OQ)
#define AH_HSUM(v) kr_hsum16(v)
#define AH_TRANSPOSE(r) kr_transpose16(r)
#define AH_NAME(x) x##_avx512_ah
#include "kernels/attn_head_body.h"

void kr_attn_head_fwd_avx512(const kr_attn_head *h, const float *q, const float *k, const float *v,
                             float *out, float *scratch) {
    kr_attn_head_fwd_avx512_ah(h, q, k, v, out, scratch);
}

void kr_attn_head_bwd_avx512(const kr_attn_head *h, const float *q, const float *k, const float *v,
                             const float *out, const float *dout, float *dq, float *dk, float *dv,
                             float *scratch) {
    kr_attn_head_bwd_avx512_ah(h, q, k, v, out, dout, dq, dk, dv, scratch);
}
#endif
