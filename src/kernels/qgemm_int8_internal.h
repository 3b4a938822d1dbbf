/*
 * kernels/qgemm_int8_internal.h — pieces of the W8A8 kernels (quant.h) shared by the scalar,
 * AVX2 and AVX-512 files (not part of the API).
 *
 * The per-row quantisation parameters and the per-element formula live here once, so every
 * variant evaluates literally the same scalar expressions for them; the vector paths only
 * reproduce the per-element formula lane by lane (multiplies, RNE conversion, integer clamp:
 * all exact or correctly rounded, hence bit-identical).
 */
#ifndef KR_QGEMM_INT8_INTERNAL_H
#define KR_QGEMM_INT8_INTERNAL_H

#include <math.h>
#include <stdint.h>

#include "kernels/quant.h"

/* Row scale, its inverse and the zero point from the row's lo = min(0, min x) and
 * hi = max(0, max x). */
static inline void kr_q8_row_params(float lo, float hi, float *s, float *inv, int32_t *z) {
    float sc = (hi - lo) / 255.0f;
    if (hi == lo) sc = 1.0f;
    float iv = 1.0f / sc;
    int32_t zp = (int32_t)nearbyintf(-lo * iv);
    *s = sc;
    *inv = iv;
    *z = zp < 0 ? 0 : zp > 255 ? 255 : zp;
}

static inline uint8_t kr_q8_quant1(float x, float inv, int32_t z) {
    int32_t v = (int32_t)nearbyintf(x * inv) + z;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* 1 when qgemm_int8_avx512_amx.c was compiled with AMX (x86-64 and a compiler that has
 * -mamx-int8); otherwise kr_qgemm_int8_amx is a stand-in that dispatch never picks. */
extern const int kr_qgemm_int8_amx_built;
/* 1 when qgemm_int8_avx2.c holds the AVX-VNNI variant (x86-64 and a compiler that emits
 * AVX-VNNI: GCC 11, clang 12 on); otherwise kr_qgemm_int8_avxvnni is the AVX2 GEMM. */
extern const int kr_qgemm_int8_avxvnni_built;
#if defined(__x86_64__) && ((defined(__clang__) && __clang_major__ >= 12) || \
                            (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define KR_AVXVNNI_BUILT 1
#else
#define KR_AVXVNNI_BUILT 0
#endif
/* Allocates the calling thread's AMX buffer at the size any slice of w needs. */
void kr_qgemm_int8_amx_reserve(const kr_qmat *w);
/* Allocates the calling thread's buffer of kr_qgemm_int8_avx2 for M rows of w (none below
 * the M it widens from). */
void kr_qgemm_int8_avx2_reserve(int M, const kr_qmat *w);
/* The same for kr_qgemm_int8_avxvnni (its panel buffer, from the M it repacks W at). */
void kr_qgemm_int8_avxvnni_reserve(int M, const kr_qmat *w);
/* The same for kr_qgemm_int8_avx512 (its panel buffer, from the M it repacks W at). */
void kr_qgemm_int8_avx512_reserve(int M, const kr_qmat *w);

#if defined(__x86_64__)
/* kr_qgemm_int8_avx512 with the inner product chosen by the caller: use_vnni = 1 runs
 * VPDPBUSD (needs AVX512_VNNI), 0 the AVX512BW VPMADDWD path. Both give the same bits; the
 * flag exists so tests can run the fallback on CPUs that have VNNI. */
void kr_qgemm_int8_avx512_impl(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                               const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                               int nth, int use_vnni);
#endif

#if defined(__x86_64__)
#include "kernels/kernels_internal.h"

/* The operands of one W8A8 GEMM call as the x86 tiles read them. */
typedef struct kr_q8_gemm {
    const uint8_t *aq;
    const int8_t *wq;
    int kp;
    const float *ascale, *wscale, *bias;
    const int32_t *azero, *rsum;
    float *C;
    int ldc;
} kr_q8_gemm;

/* The start of kr_qgemm_int8_*: this thread's W rows [*n0, *n1) and the call's operands in
 * *g; 0 when the thread has no rows (or M none). */
static inline int kr_q8_gemm_start(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                                   const int32_t *azero, const float *bias, float *C, int ldc,
                                   int ith, int nth, kr_q8_gemm *g, int *n0, int *n1) {
    kr_gemm_split(w->n, ith, nth, n0, n1);
    if (*n0 >= *n1 || M <= 0) return 0;
    *g = (kr_q8_gemm){
        aq, (const int8_t *)w->data, w->kp, ascale, w->scale, bias, azero, w->row_sum, C, ldc
    };
    return 1;
}

/* W rows per block when W is read in place: ~192 KB, reused from L2 across all row tiles
 * (see qgemm_int8_avx512.c); a multiple of the split unit. empty: the rows when kp is 0. */
static inline int kr_q8_block_cols(int kp, int empty) {
    int nb_cols = kp > 0 ? 192 * 1024 / kp : empty;
    nb_cols = nb_cols / KR_GEMM_NUNIT * KR_GEMM_NUNIT;
    return nb_cols < KR_GEMM_NUNIT ? KR_GEMM_NUNIT : nb_cols;
}
#endif

#if defined(__AVX512F__)
#include "kernels/simd_avx512.h"

/* W rows w[0 .. nc) (nc <= 16, rows `kp` bytes apart; the panel's other columns zero) as one
 * 16-column panel at dst, kp·16 bytes: for every 4 k, the 16 columns' 4 bytes side by side —
 * one VPDPBUSD operand, or (64 k at a time, 1 KB) one AMX B tile. Shared by the AVX-512
 * panel path and the AMX kernel. */
static inline void kr_q8_pack_panel16(const int8_t *w, size_t kp, int nc, int8_t *dst) {
    for (size_t k = 0; k < kp; k += 64, dst += 1024) {
        __m512i r[16];
#pragma GCC unroll 16
        for (int c = 0; c < 16; c++)
            r[c] = c < nc ? _mm512_loadu_si512(w + (size_t)c * kp + k) : _mm512_setzero_si512();
        kr_transpose16_epi32(r);
#pragma GCC unroll 16
        for (int g = 0; g < 16; g++) _mm512_store_si512(dst + 64 * g, r[g]);
    }
}
#endif

#endif
