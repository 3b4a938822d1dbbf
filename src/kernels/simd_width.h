/*
 * kernels/simd_width.h — the one set of vector names over the two x86 widths, for kernels
 * written once for both (the *_body.h and *_simd.h files): an *_avx512.c file defines
 * KR_WIDTH_AVX512, an *_avx2.c file KR_WIDTH_AVX2, then includes this and the body; each file
 * keeps its own ISA flags (CMake kr_isa_flags), so the compiler makes the two copies.
 *
 *   VW_V, VW_W           the vector type and its float lanes
 *   VW_M, VW_LANES(lo, hi)   a lane mask, and the one of lanes i with lo <= i < hi (either
 *                        bound may fall outside 0 .. VW_W)
 *   VW_LOAD(p), VW_STORE(p, v), VW_LOADN(p, n), VW_STOREN(p, n, v) (the first n lanes: the
 *                        rest read as 0 and are not written; n may exceed VW_W), VW_BCAST(p),
 *                        VW_SET1(x), VW_ZERO()
 *   VW_FMA(a, b, c) = a·b + c, VW_ADD, VW_SUB, VW_MUL, VW_DIV, VW_MAX, VW_SQRT
 *   VW_EXP(x)            expf to ~1 ulp (kr_exp16 / kr_exp8)
 *   VW_BLEND(m, a, b)    a in the lanes of m, b elsewhere;  VW_GT(a, b) the mask of a > b
 *   VW_HSUM(v)           the sum of v's lanes, in the ISA's one reduction tree
 *   VW_REDUCE(x), VW_R(o) the lane sums of VW_W vectors at once, by the same tree: output o
 *                        (in lane o) sums the vector at x[VW_R(o)] (kr_reduce16 / kr_reduce8)
 *   VW_STOREM(p, m, n, v) VW_STOREN with m = VW_MASK(n) at hand (AVX-512 stores by m)
 *   VW_MASK(n), VW_LOADM(p, m), VW_KEEP(v, m)  the mask of the first n lanes (n may exceed
 *                        VW_W), a load of m's lanes (0 elsewhere), v in m's lanes (0 elsewhere)
 *   VW_NAME(x)           x with the ISA's suffix (x_avx512, x_avx2)
 *   VW_ROW_MAX(x, n)     max of x[0..n) as the width's row softmax (kr_softmax_f32) takes it
 *
 * Every name maps to the very instruction the hand-written kernels used, and the reductions
 * keep each width's one tree (simd_avx2.h, simd_avx512.h): the results are the bits they were
 * (tests/test_kernels*.c compare every variant with the scalar reference). In the style of
 * ggml's simd-mappings.h; where the instructions really differ (the GEMM micro-tiles, VNNI and
 * AMX, the attention score tiles) the files stay per ISA.
 *   VW_TRANSPOSE(r)      r[i][j] ↔ r[j][i] over VW_W vectors
 */
#ifndef KR_SIMD_WIDTH_H
#define KR_SIMD_WIDTH_H

#include <immintrin.h>

#if defined(KR_WIDTH_AVX512)
#include "kernels/simd_avx512.h"

KR_INLINE __mmask16 kr_lanes16(int lo, int hi) {
    __mmask16 h = hi <= 0 ? (__mmask16)0 : kr_mask16(hi);
    __mmask16 l = lo <= 0 ? (__mmask16)0 : kr_mask16(lo);
    return (__mmask16)(h & (__mmask16)~l);
}

#define VW_V __m512
#define VW_W 16
#define VW_M __mmask16
#define VW_LANES(lo, hi) kr_lanes16((lo), (hi))
#define VW_LOAD(p) _mm512_loadu_ps(p)
#define VW_STORE(p, v) _mm512_storeu_ps((p), (v))
#define VW_LOADN(p, n) _mm512_maskz_loadu_ps(kr_mask16(n), (p))
#define VW_STOREN(p, n, v) _mm512_mask_storeu_ps((p), kr_mask16(n), (v))
#define VW_STOREM(p, m, n, v) _mm512_mask_storeu_ps((p), (m), (v))
#define VW_BCAST(p) _mm512_set1_ps(*(p))
#define VW_SET1(x) _mm512_set1_ps(x)
#define VW_ZERO() _mm512_setzero_ps()
#define VW_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define VW_ADD(a, b) _mm512_add_ps((a), (b))
#define VW_SUB(a, b) _mm512_sub_ps((a), (b))
#define VW_MUL(a, b) _mm512_mul_ps((a), (b))
#define VW_DIV(a, b) _mm512_div_ps((a), (b))
#define VW_MAX(a, b) _mm512_max_ps((a), (b))
#define VW_SQRT(a) _mm512_sqrt_ps(a)
#define VW_EXP(x) kr_exp16(x)
#define VW_BLEND(m, a, b) _mm512_mask_blend_ps((m), (b), (a))
#define VW_GT(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_GT_OQ)
#define VW_HSUM(v) kr_hsum16(v)
#define VW_TRANSPOSE(r) kr_transpose16(r)
#define VW_REDUCE(x) kr_reduce16(x)
#define VW_R(o) KR_R16(o)
#define VW_MASK(n) kr_mask16(n)
#define VW_LOADM(p, m) _mm512_maskz_loadu_ps((m), (p))
#define VW_KEEP(v, m) _mm512_maskz_mov_ps((m), (v))
#define VW_NAME(x) x##_avx512
#define VW_ROW_MAX(x, n) kr_row_max16((x), (n))

KR_INLINE float kr_row_max16(const float *x, int n) {
    __m512 mx = _mm512_set1_ps(-__builtin_inff());
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = kr_mask16(n - i);
        mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, x + i));
    }
    return _mm512_reduce_max_ps(mx);
}

#elif defined(KR_WIDTH_AVX2)
#include "kernels/simd_avx2.h"

KR_INLINE __m256i kr_lanes8(int lo, int hi) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i below_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), iota);
    __m256i below_lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(lo), iota);
    return _mm256_andnot_si256(below_lo, below_hi);
}

#define VW_V __m256
#define VW_W 8
#define VW_M __m256i
#define VW_LANES(lo, hi) kr_lanes8((lo), (hi))
#define VW_LOAD(p) _mm256_loadu_ps(p)
#define VW_STORE(p, v) _mm256_storeu_ps((p), (v))
#define VW_LOADN(p, n) _mm256_maskload_ps((p), kr_mask8(n))
#define VW_STOREN(p, n, v) kr_store8((p), (v), (n))
#define VW_STOREM(p, m, n, v) kr_store8((p), (v), (n))
#define VW_BCAST(p) _mm256_broadcast_ss(p)
#define VW_SET1(x) _mm256_set1_ps(x)
#define VW_ZERO() _mm256_setzero_ps()
#define VW_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define VW_ADD(a, b) _mm256_add_ps((a), (b))
#define VW_SUB(a, b) _mm256_sub_ps((a), (b))
#define VW_MUL(a, b) _mm256_mul_ps((a), (b))
#define VW_DIV(a, b) _mm256_div_ps((a), (b))
#define VW_MAX(a, b) _mm256_max_ps((a), (b))
#define VW_SQRT(a) _mm256_sqrt_ps(a)
#define VW_EXP(x) kr_exp8(x)
#define VW_BLEND(m, a, b) _mm256_blendv_ps((b), (a), _mm256_castsi256_ps(m))
#define VW_GT(a, b) _mm256_castps_si256(_mm256_cmp_ps((a), (b), _CMP_GT_OQ))
#define VW_HSUM(v) kr_hsum8(v)
#define VW_TRANSPOSE(r) kr_transpose8(r)
#define VW_REDUCE(x) kr_reduce8(x)
#define VW_R(o) KR_R8(o)
#define VW_MASK(n) kr_mask8(n)
#define VW_LOADM(p, m) _mm256_maskload_ps((p), (m))
#define VW_KEEP(v, m) _mm256_and_ps((v), _mm256_castsi256_ps(m))
#define VW_NAME(x) x##_avx2
#define VW_ROW_MAX(x, n) kr_row_max8((x), (n))

KR_INLINE float kr_row_max8(const float *x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

#else
#error "define KR_WIDTH_AVX512 or KR_WIDTH_AVX2 before including kernels/simd_width.h"
#endif

#endif
