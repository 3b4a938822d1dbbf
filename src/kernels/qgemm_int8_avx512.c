/*
 * kernels/qgemm_int8_avx512 — W8A8 kernels (quant.h) with AVX-512.
 *
 * GEMM: each C element is one exact int32 dot of a u8 activation row and an s8 weight row,
 * kept in one 16-lane accumulator over kp (a multiple of 64, zero padded, so no tails), summed
 * across lanes, then the f32 epilogue of quant.h. Integer sums are exact, so the tile shape,
 * the reduction tree and the inner product instruction cannot change a result: the output is
 * bit-identical to the scalar reference and across ISAs.
 *
 * Inner product: VPDPBUSD (64 u8×s8 products per instruction) with AVX512_VNNI; otherwise
 * both operands are widened to 16 bits and multiplied with VPMADDWD, whose pair sums
 * (at most 2·255·127) cannot saturate.
 *
 * Register tile 4 A rows × 4 W rows (3×4, 2×8, 1×8 for the last rows), and W blocks sized for
 * L2 swept by every row tile of A, as in gemm_avx512.c: prefill (large M) is compute-bound
 * on the dot instruction with W reused from L2; decode (small M) streams each W byte once.
 * With VNNI, 5 to 8 rows (a decode step of that many paths) take one 8×2 tile instead of two
 * passes of 4×4, so the rows' dots run while W streams in rather than in a second pass over
 * the block from L2 (Kronos-small, 8 paths, lookback 392, int8, Zen 4: median 0.635 → 0.588 s
 * over 8 interleaved rounds; with W already in L2 the 8×2 tile is the slower one).
 * From KR_Q8_PANEL_MIN_M rows the panel path below takes over.
 */
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"

#if defined(__x86_64__)
#include "kernels/kernels_internal.h"
#include "kernels/qgemm_int8_internal.h"
#include "kernels/simd_avx512.h"

/* ---- Activation quantiser. */

KR_INLINE __m512 load_x(const float *a, const float *is, int j) {
    __m512 x = _mm512_loadu_ps(a + j);
    return is ? _mm512_mul_ps(x, _mm512_loadu_ps(is + j)) : x;
}

KR_INLINE __m512 load_x_tail(const float *a, const float *is, int j, __mmask16 km) {
    __m512 x = _mm512_maskz_loadu_ps(km, a + j);
    return is ? _mm512_mul_ps(x, _mm512_maskz_loadu_ps(km, is + j)) : x;
}

/* The per-element formula of kr_q8_quant1 up to the clamp, 16 lanes: the conversion rounds to
 * nearest even under the default MXCSR like nearbyintf does. */
KR_INLINE __m512i quant16_i32(__m512 x, __m512 inv, __m512i z) {
    return _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(x, inv)), z);
}

/* With the integer clamp, as bytes. */
KR_INLINE __m128i quant16(__m512 x, __m512 inv, __m512i z) {
    __m512i v = quant16_i32(x, inv, z);
    v = _mm512_min_epi32(_mm512_max_epi32(v, _mm512_setzero_si512()), _mm512_set1_epi32(255));
    return _mm512_cvtepi32_epi8(v);
}

/* 64 elements from column j. The signed-saturating pack to int16 and the unsigned-saturating
 * pack to u8 clamp every int32 to [0, 255] exactly as max/min do: 4 shuffle uops per 64 bytes
 * (3 packs, 1 permute) where max, min and VPMOVDB (2 uops) take 16. The packs interleave
 * 128-bit lanes, which the permute puts back in column order. */
KR_INLINE __m512i quant64(const float *a, const float *is, int j, __m512 inv, __m512i z) {
    __m512i v0 = quant16_i32(load_x(a, is, j), inv, z);
    __m512i v1 = quant16_i32(load_x(a, is, j + 16), inv, z);
    __m512i v2 = quant16_i32(load_x(a, is, j + 32), inv, z);
    __m512i v3 = quant16_i32(load_x(a, is, j + 48), inv, z);
    __m512i b = _mm512_packus_epi16(_mm512_packs_epi32(v0, v1), _mm512_packs_epi32(v2, v3));
    /* dword 4·L + i of b holds elements 4·L .. 4·L + 3 of v_i */
    const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    return _mm512_permutexvar_epi32(order, b);
}

/* lo = min(0, min x), hi = max(0, max x) of one row. */
KR_INLINE void row_range(const float *a, const float *in_scale, int k, float *lo, float *hi) {
    const int tail = k % 16, kb = k - tail;
    /* min(x, acc) keeps acc when x is NaN, like the scalar `if (x < lo)`; starting at 0 is the
     * min(0, ·) of the definition, and zero-filled tail lanes are then harmless. Two
     * accumulator pairs hide the min/max latency; min/max are exact in any order. */
    __m512 lo0 = _mm512_setzero_ps(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
    int j = 0;
    for (; j + 32 <= kb; j += 32) {
        __m512 x0 = load_x(a, in_scale, j), x1 = load_x(a, in_scale, j + 16);
        lo0 = _mm512_min_ps(x0, lo0);
        hi0 = _mm512_max_ps(x0, hi0);
        lo1 = _mm512_min_ps(x1, lo1);
        hi1 = _mm512_max_ps(x1, hi1);
    }
    for (; j < kb; j += 16) {
        __m512 x = load_x(a, in_scale, j);
        lo0 = _mm512_min_ps(x, lo0);
        hi0 = _mm512_max_ps(x, hi0);
    }
    if (tail) {
        __m512 x = load_x_tail(a, in_scale, kb, kr_mask16(tail));
        lo1 = _mm512_min_ps(x, lo1);
        hi1 = _mm512_max_ps(x, hi1);
    }
    *lo = _mm512_reduce_min_ps(_mm512_min_ps(lo0, lo1));
    *hi = _mm512_reduce_max_ps(_mm512_max_ps(hi0, hi1));
}

KR_INLINE void quant_row(const float *a, const float *in_scale, int k, int kp, float inv, int32_t z,
                         uint8_t *qr) {
    const int tail = k % 16, kb = k - tail;
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512i vz = _mm512_set1_epi32(z);
    int j = 0;
    for (; j + 64 <= kb; j += 64) _mm512_storeu_si512(qr + j, quant64(a, in_scale, j, vinv, vz));
    for (; j < kb; j += 16)
        _mm_storeu_si128((__m128i *)(qr + j), quant16(load_x(a, in_scale, j), vinv, vz));
    if (tail) {
        const __mmask16 km = kr_mask16(tail);
        _mm_mask_storeu_epi8(qr + kb, km, quant16(load_x_tail(a, in_scale, kb, km), vinv, vz));
    }
    if (kp > k) memset(qr + k, 0, (size_t)(kp - k));
}

/* Rows go in blocks: first the range and parameters of every row of the block, then their
 * codes. Between the two passes over one row sits a serial chain (horizontal min and max, two
 * divisions, a rounding: ~80 cycles) that row by row stalled the second pass; across a block
 * it overlaps the next row's first pass. A block is at most ~16 KB of A, so its second pass
 * still reads L1. With the packs above, measured against the row-by-row VPMOVDB version
 * (1 thread, interleaved, best of 300): M = 512, K = 512 0.35 → 0.23 ns per element; K = 832
 * 0.23 → 0.16; M = 64, K = 4096 0.20 → 0.155; M = 8, K = 512 0.22 → 0.14. */
enum { QUANT_BLOCK_FLOATS = 4096, QUANT_BLOCK_ROWS = 8 };

void kr_quant_act_u8_avx512(int m0, int m1, int k, int kp, const float *A, int lda,
                            const float *in_scale, uint8_t *q, float *scale, int32_t *zero) {
    int rows = k > 0 ? QUANT_BLOCK_FLOATS / k : QUANT_BLOCK_ROWS;
    rows = rows < 1 ? 1 : rows > QUANT_BLOCK_ROWS ? QUANT_BLOCK_ROWS : rows;
    for (int mb = m0; mb < m1; mb += rows) {
        const int me = mb + rows < m1 ? mb + rows : m1;
        float inv[QUANT_BLOCK_ROWS];
        for (int m = mb; m < me; m++) {
            float lo, hi;
            row_range(A + (size_t)m * (size_t)lda, in_scale, k, &lo, &hi);
            kr_q8_row_params(lo, hi, &scale[m], &inv[m - mb], &zero[m]);
        }
        for (int m = mb; m < me; m++)
            quant_row(A + (size_t)m * (size_t)lda, in_scale, k, kp, inv[m - mb], zero[m],
                      q + (size_t)m * (size_t)kp);
    }
}

/* ---- GEMM. */

/* kr_reduce16's lane layout on int32 (the tree is irrelevant here: integer sums are exact). */
KR_INLINE __m512i reduce16_epi32(const __m512i x[16]) {
    __m512i y[8], z[4];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        y[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(x[2 * i], x[2 * i + 1], 0x44),
                                _mm512_shuffle_i32x4(x[2 * i], x[2 * i + 1], 0xEE));
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        z[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(y[2 * i], y[2 * i + 1], 0x88),
                                _mm512_shuffle_i32x4(y[2 * i], y[2 * i + 1], 0xDD));
#define SHUF(a, b, imm) \
    _mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), imm))
    __m512i w0 = _mm512_add_epi32(SHUF(z[0], z[1], 0x44), SHUF(z[0], z[1], 0xEE));
    __m512i w1 = _mm512_add_epi32(SHUF(z[2], z[3], 0x44), SHUF(z[2], z[3], 0xEE));
    return _mm512_add_epi32(SHUF(w0, w1, 0x88), SHUF(w0, w1, 0xDD));
#undef SHUF
}

/* The same for 8 vectors (the 1×8 tile), at about half the shuffles of reduce16_epi32 with
 * zeros: lane o of the result is the lane-sum of x[o], o < 8 (lanes 8-15 undefined). */
KR_INLINE __m512i reduce8_epi32(const __m512i x[8]) {
    __m512i y[4], z[2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) /* 256-bit halves: x[2i] in blocks 0-1, x[2i+1] in 2-3 */
        y[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(x[2 * i], x[2 * i + 1], 0x44),
                                _mm512_shuffle_i32x4(x[2 * i], x[2 * i + 1], 0xEE));
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) /* 128-bit block b of z[i] holds x[4i + b] */
        z[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(y[2 * i], y[2 * i + 1], 0x88),
                                _mm512_shuffle_i32x4(y[2 * i], y[2 * i + 1], 0xDD));
#define SHUF(a, b, imm) \
    _mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), imm))
    /* block b: lanes 0-1 hold x[b], lanes 2-3 x[b + 4] */
    __m512i w = _mm512_add_epi32(SHUF(z[0], z[1], 0x44), SHUF(z[0], z[1], 0xEE));
    /* block b: lane 0 = x[b], lane 1 = x[b + 4] */
    __m512i v = _mm512_add_epi32(SHUF(w, w, 0x88), SHUF(w, w, 0xDD));
#undef SHUF
    return _mm512_permutexvar_epi32(
        _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 13, 9, 5, 1, 12, 8, 4, 0), v);
}

/* VPDPBUSD acc += Σ4 a(u8)·w(s8) per int32 lane. Through asm rather than the intrinsic: GCC 12
 * gives the intrinsic's tied accumulator a fresh register each time, so the 4×4 loop carried a
 * register copy per instruction and the 2×8 one spilled accumulators to the stack. */
KR_INLINE __m512i dpbusd(__m512i acc, __m512i a, __m512i w) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(w));
    return acc;
}

/* acc + p with the sum kept in acc's register (the intrinsic got a register copy per add in
 * the loops below, as with dpbusd). */
KR_INLINE __m512i add_tied(__m512i acc, __m512i p) {
    __asm__("vpaddd %1, %0, %0" : "+v"(acc) : "v"(p));
    return acc;
}

/* W rows ahead that the first row tile prefetches, once per 64-byte line: it streams W from
 * memory in rows (kp bytes) too short for the hardware prefetcher (see gemm_avx512.c). */
enum { KR_PREFETCH_ROWS = 8 };

/* Computes the MR×NR tile at (m0, n0) of which mr×nr elements are real: missing rows and
 * columns reuse the last real one (valid memory, results discarded). With pf, also prefetches
 * the W rows KR_PREFETCH_ROWS below (a hint: never a fault past the end of W). */
KR_INLINE void tile(const int MR, const int NR, const int VNNI, const kr_q8_gemm *g, int m0, int mr,
                    int n0, int nr, int pf) {
    const size_t kp = (size_t)g->kp;
    const uint8_t *a[8];
    const int8_t *w[8];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) a[r] = g->aq + (size_t)(m0 + (r < mr ? r : mr - 1)) * kp;
#pragma GCC unroll 8
    for (int c = 0; c < NR; c++) w[c] = g->wq + (size_t)(n0 + (c < nr ? c : nr - 1)) * kp;
        /* Accumulator of output o: reduce16_epi32 wants it at KR_R16(o) to return it in lane o,
         * reduce8_epi32 (one row of 8) at o. */
#define SLOT(o) (MR * NR <= 8 ? (o) : KR_R16(o))
    __m512i acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_si512();

    if (VNNI) {
        for (size_t k = 0; k < kp; k += 64) {
            __m512i av[8];
#pragma GCC unroll 8
            for (int r = 0; r < MR; r++) av[r] = _mm512_loadu_si512(a[r] + k);
            if (pf)
#pragma GCC unroll 8
                for (int c = 0; c < NR; c++)
                    _mm_prefetch((const char *)(w[c] + k + KR_PREFETCH_ROWS * kp), _MM_HINT_T0);
#pragma GCC unroll 8
            for (int c = 0; c < NR; c++) {
                __m512i wv = _mm512_loadu_si512(w[c] + k);
#pragma GCC unroll 8
                for (int r = 0; r < MR; r++)
                    acc[SLOT(r * NR + c)] = dpbusd(acc[SLOT(r * NR + c)], av[r], wv);
            }
        }
    } else {
        /* 32 bytes a step: unrolled to 64, GCC widens both halves up front and spills. */
        for (size_t k = 0; k < kp; k += 32) {
            __m512i av[4];
#pragma GCC unroll 4
            for (int r = 0; r < MR; r++)
                av[r] = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(a[r] + k)));
            if (pf && k % 64 == 0)
#pragma GCC unroll 8
                for (int c = 0; c < NR; c++)
                    _mm_prefetch((const char *)(w[c] + k + KR_PREFETCH_ROWS * kp), _MM_HINT_T0);
#pragma GCC unroll 8
            for (int c = 0; c < NR; c++) {
                __m512i wv = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(w[c] + k)));
#pragma GCC unroll 4
                for (int r = 0; r < MR; r++)
                    acc[SLOT(r * NR + c)] =
                        add_tied(acc[SLOT(r * NR + c)], _mm512_madd_epi16(av[r], wv));
            }
        }
    }

    /* Lane L = r·NR + c of dot is the integer dot of C[m0 + r][n0 + c]; the epilogue runs on
     * all 16 lanes at once with per-lane row / column operands gathered by permutes. */
#undef SLOT
    __m512i dot = MR * NR <= 8 ? reduce8_epi32(acc) : reduce16_epi32(acc);
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i ridx = _mm512_srli_epi32(iota, NR == 2 ? 1 : NR == 4 ? 2 : 3);
    const __m512i cidx = _mm512_and_si512(iota, _mm512_set1_epi32(NR - 1));
    const __mmask16 rm = kr_mask16(mr), cm = kr_mask16(nr);
    __m512i az = _mm512_permutexvar_epi32(ridx, _mm512_maskz_loadu_epi32(rm, g->azero + m0));
    __m512 as = _mm512_permutexvar_ps(ridx, _mm512_maskz_loadu_ps(rm, g->ascale + m0));
    __m512i rs = _mm512_permutexvar_epi32(cidx, _mm512_maskz_loadu_epi32(cm, g->rsum + n0));
    __m512 ws = _mm512_permutexvar_ps(cidx, _mm512_maskz_loadu_ps(cm, g->wscale + n0));
    __m512i d = _mm512_sub_epi32(dot, _mm512_mullo_epi32(az, rs));
    __m512 v = _mm512_mul_ps(_mm512_mul_ps(as, ws), _mm512_cvtepi32_ps(d));
    if (g->bias)
        v = _mm512_add_ps(v, _mm512_permutexvar_ps(cidx, _mm512_maskz_loadu_ps(cm, g->bias + n0)));
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        if (r >= mr) break;
        __m512 row =
            r ? _mm512_permutexvar_ps(_mm512_add_epi32(iota, _mm512_set1_epi32(r * NR)), v) : v;
        _mm512_mask_storeu_ps(g->C + (size_t)(m0 + r) * (size_t)g->ldc + n0, cm, row);
    }
}

/* Every row tile of A against W rows [nb, ne). The first row tile brings the W block in
 * from memory (and prefetches); the others find it in L2. */
KR_INLINE void block(const int VNNI, const kr_q8_gemm *g, int M, int nb, int ne) {
    if (VNNI && M > 4 && M <= 8) { /* see the file comment */
        for (int n = nb; n < ne; n += 2) tile(8, 2, VNNI, g, 0, M, n, ne - n < 2 ? ne - n : 2, 1);
        return;
    }
    int m = 0;
    for (; m + 4 <= M; m += 4)
        for (int n = nb; n < ne; n += 4)
            tile(4, 4, VNNI, g, m, 4, n, ne - n < 4 ? ne - n : 4, m == 0);
    int pf = m == 0;
    switch (M - m) {
    case 3:
        for (int n = nb; n < ne; n += 4) tile(3, 4, VNNI, g, m, 3, n, ne - n < 4 ? ne - n : 4, pf);
        break;
    case 2:
        for (int n = nb; n < ne; n += 8) tile(2, 8, VNNI, g, m, 2, n, ne - n < 8 ? ne - n : 8, pf);
        break;
    case 1:
        for (int n = nb; n < ne; n += 8) tile(1, 8, VNNI, g, m, 1, n, ne - n < 8 ? ne - n : 8, pf);
        break;
    default: break;
    }
}

/* Separate non-inlined instances so each inner loop is compiled for one instruction. */
static void block_vnni(const kr_q8_gemm *g, int M, int nb, int ne) { block(1, g, M, nb, ne); }
static void block_madd(const kr_q8_gemm *g, int M, int nb, int ne) { block(0, g, M, nb, ne); }

/* ---- Panel path (VPDPBUSD, M >= KR_Q8_PANEL_MIN_M). The row-dot tiles above end every 4×4
 * tile with a 16-way reduction and a permuting epilogue, ~50 vector ops per 128 VPDPBUSD at
 * K = 512, which holds them near 75 % of the instruction's peak. Here each W block is first
 * repacked into panels of 16 columns (for every 4 k, the 16 columns' 4 bytes side by side), so
 * that a VPDPBUSD of 4 broadcast activation bytes against one panel row adds into 16 outputs
 * of one row at once: an 8-row × 48-column tile keeps 24 accumulators over all of K and needs
 * no reduction; the epilogue works on whole rows. The sums are the same exact integers, hence
 * the same bits. The repacking costs N·kp bytes of copying per call against M·N·kp/64
 * VPDPBUSDs, so it starts at KR_Q8_PANEL_MIN_M rows; decode keeps the row-dot tiles, which
 * read W in place. Measured on 1 Zen 4 core, Kronos-small's shapes (GOPS, peak ~462; the 8×48
 * tile alone 440): row-dot 330-380 at any M from 8; panels 301-332 at M = 32, 344-385 at 64,
 * 368-396 at 128, 375-427 at 1330. */
enum { KR_Q8_PANEL_MIN_M = 64, KR_Q8_PANEL_MR = 8, KR_Q8_PANEL_NV = 3 };

static size_t panel_scratch_bytes(int kp) {
    return (size_t)kr_q8_block_cols(kp, KR_GEMM_NUNIT) * (size_t)kp;
}

void kr_qgemm_int8_avx512_reserve(int M, const kr_qmat *w) {
    if (M >= KR_Q8_PANEL_MIN_M && w->kp > 0 && kr_cpu_has_avx512_vnni())
        (void)kr_thread_scratch(KR_SCRATCH_QGEMM_PANELS, panel_scratch_bytes(w->kp));
}

/* W rows [nb, ne) into panels at dst, panel p (columns nb + 16p ..) at dst + p·16·kp. */
static void pack_panels(const int8_t *wq, size_t kp, int nb, int ne, int8_t *dst) {
    for (int p0 = nb; p0 < ne; p0 += 16)
        kr_q8_pack_panel16(wq + (size_t)p0 * kp, kp, ne - p0 < 16 ? ne - p0 : 16,
                           dst + (size_t)(p0 - nb) * kp);
}

/* Rows m0 .. m0 + mr (mr <= 8; rows past mr repeat the last, computed and not stored) × the NV
 * panels at pw, whose first column is n0 and of which ncols columns are real. */
KR_INLINE void panel_tile(const int NV, const kr_q8_gemm *g, const int8_t *pw, int m0, int mr,
                          int n0, int ncols) {
    const size_t kp = (size_t)g->kp, pstride = 16 * kp;
    const uint8_t *a[KR_Q8_PANEL_MR];
#pragma GCC unroll 8
    for (int r = 0; r < KR_Q8_PANEL_MR; r++)
        a[r] = g->aq + (size_t)(m0 + (r < mr ? r : mr - 1)) * kp;
    __m512i acc[KR_Q8_PANEL_MR][KR_Q8_PANEL_NV];
#pragma GCC unroll 8
    for (int r = 0; r < KR_Q8_PANEL_MR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_si512();
    for (size_t j = 0; j < kp / 4; j++) {
        __m512i wv[KR_Q8_PANEL_NV];
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) wv[v] = _mm512_load_si512(pw + v * pstride + j * 64);
#pragma GCC unroll 8
        for (int r = 0; r < KR_Q8_PANEL_MR; r++) {
            int32_t a4;
            memcpy(&a4, a[r] + 4 * j, sizeof a4);
            __m512i av = _mm512_set1_epi32(a4);
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++) acc[r][v] = dpbusd(acc[r][v], av, wv[v]);
        }
    }
    /* The row-dot tiles' epilogue per element: (dot − azero·row_sum), then (as·ws)·that + b. */
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++) {
        int c0 = n0 + 16 * v, nc = ncols - 16 * v;
        if (nc <= 0) break;
        __mmask16 cm = kr_mask16(nc);
        __m512i rs = _mm512_maskz_loadu_epi32(cm, g->rsum + c0);
        __m512 ws = _mm512_maskz_loadu_ps(cm, g->wscale + c0);
        __m512 b = g->bias ? _mm512_maskz_loadu_ps(cm, g->bias + c0) : _mm512_setzero_ps();
        for (int r = 0; r < mr; r++) {
            __m512i d = _mm512_sub_epi32(
                acc[r][v], _mm512_mullo_epi32(_mm512_set1_epi32(g->azero[m0 + r]), rs));
            __m512 x = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(g->ascale[m0 + r]), ws),
                                     _mm512_cvtepi32_ps(d));
            if (g->bias) x = _mm512_add_ps(x, b);
            _mm512_mask_storeu_ps(g->C + (size_t)(m0 + r) * (size_t)g->ldc + c0, cm, x);
        }
    }
}

/* Columns [n0, n1) on the panel path; 0 when its buffer cannot be had. */
static int gemm_panels(int M, const kr_q8_gemm *g, int n0, int n1) {
    const int nb_cols = kr_q8_block_cols(g->kp, KR_GEMM_NUNIT);
    int8_t *pw = kr_thread_scratch(KR_SCRATCH_QGEMM_PANELS, panel_scratch_bytes(g->kp));
    if (!pw) return 0;
    const size_t pstride = 16 * (size_t)g->kp;
    for (int nb = n0; nb < n1; nb += nb_cols) {
        int ne = nb + nb_cols < n1 ? nb + nb_cols : n1, np = (ne - nb + 15) / 16;
        pack_panels(g->wq, (size_t)g->kp, nb, ne, pw);
        for (int m = 0; m < M; m += KR_Q8_PANEL_MR) {
            int mr = M - m < KR_Q8_PANEL_MR ? M - m : KR_Q8_PANEL_MR;
            for (int p = 0; p < np; p += KR_Q8_PANEL_NV) {
                const int8_t *pp = pw + (size_t)p * pstride;
                int c0 = nb + 16 * p, nc = ne - c0;
                switch (np - p < KR_Q8_PANEL_NV ? np - p : KR_Q8_PANEL_NV) {
                case 1: panel_tile(1, g, pp, m, mr, c0, nc); break;
                case 2: panel_tile(2, g, pp, m, mr, c0, nc); break;
                default: panel_tile(3, g, pp, m, mr, c0, nc); break;
                }
            }
        }
    }
    return 1;
}

void kr_qgemm_int8_avx512_impl(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                               const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                               int nth, int use_vnni) {
    int n0, n1;
    kr_q8_gemm g;
    if (!kr_q8_gemm_start(M, w, aq, ascale, azero, bias, C, ldc, ith, nth, &g, &n0, &n1)) return;
    if (use_vnni && M >= KR_Q8_PANEL_MIN_M && gemm_panels(M, &g, n0, n1)) return;
    int nb_cols = kr_q8_block_cols(w->kp, KR_GEMM_NUNIT);
    for (int nb = n0; nb < n1; nb += nb_cols) {
        int ne = nb + nb_cols < n1 ? nb + nb_cols : n1;
        if (use_vnni)
            block_vnni(&g, M, nb, ne);
        else
            block_madd(&g, M, nb, ne);
    }
}

void kr_qgemm_int8_avx512(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                          const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                          int nth) {
    kr_qgemm_int8_avx512_impl(M, w, aq, ascale, azero, bias, C, ldc, ith, nth,
                              kr_cpu_has_avx512_vnni());
}
#endif
