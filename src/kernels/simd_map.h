/*
 * kernels/simd_map — one vector vocabulary over both SIMD widths (as ggml's simd-mappings.h):
 * a kernel family whose AVX2 and AVX-512 variants are the same algorithm at two widths is
 * written once, over these names, in a template header (ops_simd.h, calibrate_simd.h) that
 * ops_avx2.c / ops_avx512.c include after defining KR_SIMD_WIDTH to 8 or 16. Each *_avx2.c /
 * *_avx512.c file keeps its own ISA flags (CMake kr_isa_flags), so the compiler makes the two
 * copies. Where the instructions really differ (the GEMM micro-tiles, VNNI and AMX, the
 * 16-query attention tiles) the files stay per ISA.
 *
 * Every name maps to the very instruction the hand-written file used, and the reductions
 * (kr_v_hsum) keep each width's one tree (simd_avx2.h, simd_avx512.h): the results are the
 * bits they were (tests/test_kernels*.c compare every variant with the scalar reference).
 *
 *   kr_vf, kr_vmask         a vector of KR_VL floats, a lane mask
 *   KR_SIMD(name)           name##_avx2 or name##_avx512: the variant's function name
 *   kr_v_zero, kr_v_set1, kr_v_add, kr_v_sub, kr_v_mul, kr_v_div, kr_v_fmadd
 *   kr_v_mask(n)            lanes [0, n) (n may exceed KR_VL)
 *   kr_v_load(m, p)         lanes of m from p, 0 elsewhere (reads nothing outside m)
 *   kr_v_store(p, v, m, n)  lanes [0, n) of v to p (m = kr_v_mask(n)), nothing past them
 *   kr_v_keep(v, m)         v in the lanes of m, 0 elsewhere
 *   kr_v_hsum(v)            the sum of the lanes, by the width's reduction tree
 *   kr_v_exp(v)             expf to ~1 ulp (the width's Cephes polynomial)
 *   kr_v_row_max(x, n)      max of x[0..n) as the width's softmax always took it
 */
#ifndef KR_KERNELS_SIMD_MAP_H
#define KR_KERNELS_SIMD_MAP_H

#if !defined(KR_SIMD_WIDTH)
#error "define KR_SIMD_WIDTH (8: AVX2, 16: AVX-512) before including kernels/simd_map.h"
#endif

#if KR_SIMD_WIDTH == 16
#include "kernels/simd_avx512.h"

typedef __m512 kr_vf;
typedef __mmask16 kr_vmask;
#define KR_VL 16
#define KR_SIMD(name) name##_avx512
#define kr_v_zero() _mm512_setzero_ps()
#define kr_v_set1(x) _mm512_set1_ps(x)
#define kr_v_add(a, b) _mm512_add_ps(a, b)
#define kr_v_sub(a, b) _mm512_sub_ps(a, b)
#define kr_v_mul(a, b) _mm512_mul_ps(a, b)
#define kr_v_div(a, b) _mm512_div_ps(a, b)
#define kr_v_fmadd(a, b, c) _mm512_fmadd_ps(a, b, c)
#define kr_v_mask(n) kr_mask16(n)
#define kr_v_load(m, p) _mm512_maskz_loadu_ps(m, p)
#define kr_v_store(p, v, m, n) _mm512_mask_storeu_ps(p, m, v)
#define kr_v_keep(v, m) _mm512_maskz_mov_ps(m, v)
#define kr_v_hsum(v) kr_hsum16(v)
#define kr_v_exp(v) kr_exp16(v)

KR_INLINE float kr_v_row_max(const float *x, int n) {
    __m512 mx = _mm512_set1_ps(-__builtin_inff());
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = kr_mask16(n - i);
        mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, x + i));
    }
    return _mm512_reduce_max_ps(mx);
}

#elif KR_SIMD_WIDTH == 8
#include "kernels/simd_avx2.h"

typedef __m256 kr_vf;
typedef __m256i kr_vmask;
#define KR_VL 8
#define KR_SIMD(name) name##_avx2
#define kr_v_zero() _mm256_setzero_ps()
#define kr_v_set1(x) _mm256_set1_ps(x)
#define kr_v_add(a, b) _mm256_add_ps(a, b)
#define kr_v_sub(a, b) _mm256_sub_ps(a, b)
#define kr_v_mul(a, b) _mm256_mul_ps(a, b)
#define kr_v_div(a, b) _mm256_div_ps(a, b)
#define kr_v_fmadd(a, b, c) _mm256_fmadd_ps(a, b, c)
#define kr_v_mask(n) kr_mask8(n)
#define kr_v_load(m, p) _mm256_maskload_ps(p, m)
/* Never VMASKMOVPS to store (microcoded on AMD Zen): kr_store8 writes the lanes plainly. */
#define kr_v_store(p, v, m, n) kr_store8(p, v, n)
#define kr_v_keep(v, m) _mm256_and_ps(v, _mm256_castsi256_ps(m))
#define kr_v_hsum(v) kr_hsum8(v)
#define kr_v_exp(v) kr_exp8(v)

KR_INLINE float kr_v_row_max(const float *x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

#else
#error "KR_SIMD_WIDTH must be 8 (AVX2) or 16 (AVX-512)"
#endif

#endif
