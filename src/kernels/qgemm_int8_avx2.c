/*
 * kernels/qgemm_int8_avx2 — W8A8 kernels (quant.h) with AVX2.
 *
 * Same scheme as qgemm_int8_avx512.c with 8 lanes. The inner product widens both operands to
 * 16 bits and uses VPMADDWD: its pair sums (at most 2·255·127) are exact. VPMADDUBSW would
 * multiply the bytes directly but saturates its 16-bit pair sums (255·127·2 > 32767), which
 * would break exactness and the cross-ISA identity of quant.h.
 *
 * Register tile 2 A rows × 4 W rows (1×8 for a last odd row): 8 accumulators, the widened A
 * rows, one widened W vector and the product fit the 16 ymm registers without spills (3×4
 * would need 17).
 *
 * Widened once (M >= Q8_WIDE_MIN_M): read in place, the tile widens every vector it loads —
 * per 16 k, 6 VPMOVZXBW/VPMOVSXBW (all on the one shuffle port) next to 8 VPMADDWD and 8
 * VPADDD —, which held the int8 GEMM near the f32 one on compute-bound shapes. So
 * from Q8_WIDE_MIN_M rows the W block is widened to int16 once per call into 4-row panels and
 * each 2-row tile of A once per block (M·K against M·N·K/16 products), and the loop is loads,
 * VPMADDWD and VPADDD only. Same integers, same sums: the same bits. Measured on one thread
 * (Sapphire Rapids run as AVX2), 512×1536×512: 96 against 85 GOP/s, 1366×512×1024: 100
 * against 89. That is close to what VPMADDWD allows: 2 vector-ALU uops per 16 products,
 * against the f32 GEMM's 1 FMA per 8, so at most ~1.5× f32 on 3 vector ports; VPMADDUBSW
 * would double it only with 7-bit activations (see above).
 */
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"

#if defined(__x86_64__)
#include "kernels/kernels_internal.h"
#include "kernels/qgemm_int8_internal.h"
#include "kernels/simd_avx2.h"

/* ---- Activation quantiser. */

KR_INLINE __m256 load_x(const float *a, const float *is, int j) {
    __m256 x = _mm256_loadu_ps(a + j);
    return is ? _mm256_mul_ps(x, _mm256_loadu_ps(is + j)) : x;
}

/* kr_q8_quant1 on 8 lanes before the clamp (RNE conversion under the default MXCSR, like
 * nearbyintf). */
KR_INLINE __m256i quant8(__m256 x, __m256 inv, __m256i z) {
    return _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(x, inv)), z);
}

void kr_quant_act_u8_avx2(int m0, int m1, int k, int kp, const float *A, int lda,
                          const float *in_scale, uint8_t *q, float *scale, int32_t *zero) {
    const int kb = k - k % 8;
    const __m256i km = kr_mask8(k - kb);
    /* Undoes the in-lane interleave of the two pack steps below. */
    const __m256i unpack = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int m = m0; m < m1; m++) {
        const float *a = A + (size_t)m * (size_t)lda;
        uint8_t *qr = q + (size_t)m * (size_t)kp;
        /* As in the AVX-512 file: min(x, acc) ignores NaN like the scalar compare, starting
         * at 0 is the min(0, ·) of the definition, and masked-off lanes load as 0. */
        __m256 lo0 = _mm256_setzero_ps(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
        int j = 0;
        for (; j + 16 <= kb; j += 16) {
            __m256 x0 = load_x(a, in_scale, j), x1 = load_x(a, in_scale, j + 8);
            lo0 = _mm256_min_ps(x0, lo0);
            hi0 = _mm256_max_ps(x0, hi0);
            lo1 = _mm256_min_ps(x1, lo1);
            hi1 = _mm256_max_ps(x1, hi1);
        }
        for (; j < kb; j += 8) {
            __m256 x = load_x(a, in_scale, j);
            lo0 = _mm256_min_ps(x, lo0);
            hi0 = _mm256_max_ps(x, hi0);
        }
        if (kb < k) {
            __m256 x = _mm256_maskload_ps(a + kb, km);
            if (in_scale) x = _mm256_mul_ps(x, _mm256_maskload_ps(in_scale + kb, km));
            lo1 = _mm256_min_ps(x, lo1);
            hi1 = _mm256_max_ps(x, hi1);
        }
        __m256 lo8 = _mm256_min_ps(lo0, lo1), hi8 = _mm256_max_ps(hi0, hi1);
        __m128 lo4 = _mm_min_ps(_mm256_castps256_ps128(lo8), _mm256_extractf128_ps(lo8, 1));
        __m128 hi4 = _mm_max_ps(_mm256_castps256_ps128(hi8), _mm256_extractf128_ps(hi8, 1));
        lo4 = _mm_min_ps(lo4, _mm_movehl_ps(lo4, lo4));
        hi4 = _mm_max_ps(hi4, _mm_movehl_ps(hi4, hi4));
        float lo = _mm_cvtss_f32(_mm_min_ss(lo4, _mm_shuffle_ps(lo4, lo4, 1)));
        float hi = _mm_cvtss_f32(_mm_max_ss(hi4, _mm_shuffle_ps(hi4, hi4, 1)));

        float s, inv;
        int32_t z;
        kr_q8_row_params(lo, hi, &s, &inv, &z);
        const __m256 vinv = _mm256_set1_ps(inv);
        const __m256i vz = _mm256_set1_epi32(z);
        /* Signed 32→16 then unsigned 16→8 saturation is exactly clamp(v, 0, 255). */
        for (j = 0; j + 32 <= k; j += 32) {
            __m256i v0 = quant8(load_x(a, in_scale, j), vinv, vz);
            __m256i v1 = quant8(load_x(a, in_scale, j + 8), vinv, vz);
            __m256i v2 = quant8(load_x(a, in_scale, j + 16), vinv, vz);
            __m256i v3 = quant8(load_x(a, in_scale, j + 24), vinv, vz);
            __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(v0, v1), _mm256_packs_epi32(v2, v3));
            _mm256_storeu_si256((__m256i *)(qr + j), _mm256_permutevar8x32_epi32(b, unpack));
        }
        for (; j < k; j++) qr[j] = kr_q8_quant1(in_scale ? a[j] * in_scale[j] : a[j], inv, z);
        if (kp > k) memset(qr + k, 0, (size_t)(kp - k));
        scale[m] = s;
        zero[m] = z;
    }
}

/* ---- GEMM. */

/* kr_reduce8's lane layout on int32 (any tree gives the same exact integer sums). */
KR_INLINE __m256i reduce8_epi32(const __m256i x[8]) {
    __m256i y[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        y[i] = _mm256_add_epi32(_mm256_permute2x128_si256(x[2 * i], x[2 * i + 1], 0x20),
                                _mm256_permute2x128_si256(x[2 * i], x[2 * i + 1], 0x31));
#define SHUF(a, b, imm) \
    _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), imm))
    __m256i w0 = _mm256_add_epi32(SHUF(y[0], y[1], 0x44), SHUF(y[0], y[1], 0xEE));
    __m256i w1 = _mm256_add_epi32(SHUF(y[2], y[3], 0x44), SHUF(y[2], y[3], 0xEE));
    return _mm256_add_epi32(SHUF(w0, w1, 0x88), SHUF(w0, w1, 0xDD));
#undef SHUF
}

/* The integer dots of an MR×NR tile (MR·NR = 8; acc[KR_R8(r·NR + c)] for C[m0 + r][n0 + c])
 * to floats at C: zero point, scales, bias; mr×nr of them are real. */
KR_INLINE void store_tile(const int MR, const int NR, const __m256i acc[8], const kr_q8_gemm *g,
                          int m0, int mr, int n0, int nr) {
    /* Lane L = r·NR + c of dot is the integer dot of C[m0 + r][n0 + c]. */
    __m256i dot = reduce8_epi32(acc);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i ridx = _mm256_srli_epi32(iota, NR == 2 ? 1 : NR == 4 ? 2 : 3);
    const __m256i cidx = _mm256_and_si256(iota, _mm256_set1_epi32(NR - 1));
    const __m256i rm = kr_mask8(mr), cm = kr_mask8(nr);
    __m256i az = _mm256_permutevar8x32_epi32(_mm256_maskload_epi32(g->azero + m0, rm), ridx);
    __m256 as = _mm256_permutevar8x32_ps(_mm256_maskload_ps(g->ascale + m0, rm), ridx);
    __m256i rs = _mm256_permutevar8x32_epi32(_mm256_maskload_epi32(g->rsum + n0, cm), cidx);
    __m256 ws = _mm256_permutevar8x32_ps(_mm256_maskload_ps(g->wscale + n0, cm), cidx);
    __m256i d = _mm256_sub_epi32(dot, _mm256_mullo_epi32(az, rs));
    __m256 v = _mm256_mul_ps(_mm256_mul_ps(as, ws), _mm256_cvtepi32_ps(d));
    if (g->bias)
        v = _mm256_add_ps(v, _mm256_permutevar8x32_ps(_mm256_maskload_ps(g->bias + n0, cm), cidx));
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++) {
        if (r >= mr) break;
        __m256 row =
            r ? _mm256_permutevar8x32_ps(v, _mm256_add_epi32(iota, _mm256_set1_epi32(r * NR))) : v;
        kr_store8(g->C + (size_t)(m0 + r) * (size_t)g->ldc + n0, row, nr);
    }
}

/* The A and W rows of an MR×NR tile at (m0, n0) of which mr×nr are real: missing rows and
 * columns reuse the last real one (valid memory, results discarded). */
KR_INLINE void tile_rows(const int MR, const int NR, const kr_q8_gemm *g, int m0, int mr, int n0,
                         int nr, const uint8_t **a, const int8_t **w) {
    const size_t kp = (size_t)g->kp;
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++) a[r] = g->aq + (size_t)(m0 + (r < mr ? r : mr - 1)) * kp;
#pragma GCC unroll 8
    for (int c = 0; c < NR; c++) w[c] = g->wq + (size_t)(n0 + (c < nr ? c : nr - 1)) * kp;
}

/* The MR×NR tile (MR·NR = 8) at (m0, n0) (tile_rows). */
KR_INLINE void tile(const int MR, const int NR, const kr_q8_gemm *g, int m0, int mr, int n0,
                    int nr) {
    const size_t kp = (size_t)g->kp;
    const uint8_t *a[2];
    const int8_t *w[8];
    tile_rows(MR, NR, g, m0, mr, n0, nr, a, w);
    __m256i acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_si256();

    for (size_t k = 0; k < kp; k += 16) {
        __m256i av[2];
#pragma GCC unroll 2
        for (int r = 0; r < MR; r++)
            av[r] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(a[r] + k)));
#pragma GCC unroll 8
        for (int c = 0; c < NR; c++) {
            __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w[c] + k)));
#pragma GCC unroll 2
            for (int r = 0; r < MR; r++)
                acc[KR_R8(r * NR + c)] =
                    _mm256_add_epi32(acc[KR_R8(r * NR + c)], _mm256_madd_epi16(av[r], wv));
        }
    }

    store_tile(MR, NR, acc, g, m0, mr, n0, nr);
}

/* ---- Widened path. A panel holds `rows` rows as kp/16 k blocks of rows × 16 int16 (row r
 * of block b at b·rows·16 + r·16); rows past the real ones are zero (their dots are
 * discarded). */

enum {
    /* Rows from which widening once beats widening per load. One thread, ×1536×512, GOP/s:
     * M = 16 79 widened against 85 in place, 32 86 against 84-87, 64 89 against 86; 64 paths'
     * decode (64 rows) end to end 1.66 against 1.83 s. */
    Q8_WIDE_MIN_M = 64,
    Q8_WIDE_BLOCK_BYTES = 192 * 1024, /* widened W rows per block: reused from L2 across M */
};

/* Rows [r0, r0 + nr) (nr <= rows) of the kp-byte rows at src, widened into panel dst: u8 rows
 * zero-extended (A), s8 rows sign-extended (W). */
KR_INLINE void widen_panel(const int rows, const int is_signed, int16_t *dst, const void *src,
                           size_t kp, int r0, int nr) {
    const uint8_t *base = (const uint8_t *)src + (size_t)r0 * kp;
    for (int r = 0; r < rows; r++) {
        int16_t *d = dst + 16 * r;
        if (r >= nr) {
            for (size_t k = 0; k < kp; k += 16, d += 16 * rows)
                _mm256_store_si256((__m256i *)d, _mm256_setzero_si256());
            continue;
        }
        const uint8_t *row = base + (size_t)r * kp;
        for (size_t k = 0; k < kp; k += 16, d += 16 * rows) {
            __m128i b = _mm_loadu_si128((const __m128i *)(row + k));
            _mm256_store_si256((__m256i *)d,
                               is_signed ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b));
        }
    }
}

/* The 2×4 tile from a widened 2-row A panel and a widened 4-row W panel: the in-place tile's
 * products and sums. */
static void tile_wide(const kr_q8_gemm *g, const int16_t *pa, const int16_t *pw, int m0, int mr,
                      int n0, int nr) {
    __m256i acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_si256();
    for (int b = 0; b < g->kp / 16; b++, pa += 32, pw += 64) {
        __m256i a0 = _mm256_load_si256((const __m256i *)pa);
        __m256i a1 = _mm256_load_si256((const __m256i *)(pa + 16));
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i wv = _mm256_load_si256((const __m256i *)(pw + 16 * c));
            acc[KR_R8(c)] = _mm256_add_epi32(acc[KR_R8(c)], _mm256_madd_epi16(a0, wv));
            acc[KR_R8(4 + c)] = _mm256_add_epi32(acc[KR_R8(4 + c)], _mm256_madd_epi16(a1, wv));
        }
    }
    store_tile(2, 4, acc, g, m0, mr, n0, nr);
}

/* W rows per widened block: a multiple of the split unit. */
static int wide_block_cols(int kp) {
    int nb = kp > 0 ? Q8_WIDE_BLOCK_BYTES / (2 * kp) : KR_GEMM_NUNIT;
    nb = nb / KR_GEMM_NUNIT * KR_GEMM_NUNIT;
    return nb < KR_GEMM_NUNIT ? KR_GEMM_NUNIT : nb;
}

/* The per-thread buffer: one widened W block and one widened A panel. */
static size_t wide_scratch_bytes(int kp) {
    return ((size_t)wide_block_cols(kp) + 2) * (size_t)kp * sizeof(int16_t);
}

void kr_qgemm_int8_avx2_reserve(int M, const kr_qmat *w) {
    if (M >= Q8_WIDE_MIN_M && w->kp > 0)
        (void)kr_thread_scratch(KR_SCRATCH_QGEMM_WIDE, wide_scratch_bytes(w->kp));
}

/* Columns [n0, n1) on the widened path; 0 when the buffer cannot be had. */
static int gemm_wide(int M, const kr_q8_gemm *g, int n0, int n1) {
    const int nb_cols = wide_block_cols(g->kp);
    int16_t *pw = kr_thread_scratch(KR_SCRATCH_QGEMM_WIDE, wide_scratch_bytes(g->kp));
    if (!pw) return 0;
    int16_t *pa = pw + (size_t)nb_cols * (size_t)g->kp;
    const size_t panel = 4 * (size_t)g->kp; /* int16 per 4-row W panel */
    for (int nb = n0; nb < n1; nb += nb_cols) {
        int ne = nb + nb_cols < n1 ? nb + nb_cols : n1;
        for (int n = nb; n < ne; n += 4)
            widen_panel(4, 1, pw + (size_t)(n - nb) / 4 * panel, g->wq, (size_t)g->kp, n,
                        ne - n < 4 ? ne - n : 4);
        for (int m = 0; m < M; m += 2) {
            int mr = M - m < 2 ? M - m : 2;
            widen_panel(2, 0, pa, g->aq, (size_t)g->kp, m, mr);
            for (int n = nb; n < ne; n += 4)
                tile_wide(g, pa, pw + (size_t)(n - nb) / 4 * panel, m, mr, n,
                          ne - n < 4 ? ne - n : 4);
        }
    }
    return 1;
}

void kr_qgemm_int8_avx2(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                        const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                        int nth) {
    int n0, n1;
    kr_q8_gemm g;
    if (!kr_q8_gemm_start(M, w, aq, ascale, azero, bias, C, ldc, ith, nth, &g, &n0, &n1)) return;
    if (M >= Q8_WIDE_MIN_M && gemm_wide(M, &g, n0, n1)) return;
    int nb_cols = kr_q8_block_cols(w->kp, n1 - n0);
    for (int nb = n0; nb < n1; nb += nb_cols) {
        int ne = nb + nb_cols < n1 ? nb + nb_cols : n1;
        int m = 0;
        for (; m + 2 <= M; m += 2)
            for (int n = nb; n < ne; n += 4) tile(2, 4, &g, m, 2, n, ne - n < 4 ? ne - n : 4);
        if (m < M)
            for (int n = nb; n < ne; n += 8) tile(1, 8, &g, m, 1, n, ne - n < 8 ? ne - n : 8);
    }
}

/* ---- AVX-VNNI (VEX VPDPBUSD on ymm: Alder Lake and later client cores, Sierra Forest, and
 * Sapphire Rapids run as AVX2). One instruction multiplies 32 u8·s8 pairs and adds each group
 * of 4 products to an int32 lane with no intermediate saturation: the same exact integers as
 * VPMADDWD, 4× the products per instruction and no widening. Below Q8V_PANEL_MIN_M rows W is
 * read in place, in blocks of ~192 KB kept in L2 across all row tiles. Tile 3 A rows × 4 W
 * rows: 12 accumulators, 3 A vectors and 1 W vector fill the 16 registers, and 12 VPDPBUSD
 * chains cover the instruction's latency (a 4×2 tile with 8 ran 306 GOP/s against 341); 1×8
 * for one row (decode), where W streams from memory once per step. */
#if KR_AVXVNNI_BUILT
const int kr_qgemm_int8_avxvnni_built = 1;
#define KR_TARGET_AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

/* VEX VPDPBUSD acc += Σ4 a(u8)·w(s8) per int32 lane, for both tiles below. Through asm rather
 * than the intrinsic, as in qgemm_int8_avx512.c: GCC 12 gives the intrinsic's tied
 * accumulator a fresh register each time, and the panel tile then stored every accumulator to
 * the stack every step. */
KR_TARGET_AVXVNNI static inline __attribute__((always_inline)) __m256i
dpbusd_vex(__m256i acc, __m256i a, __m256i w) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(w));
    return acc;
}

/* The MR×NR tile (MR·NR <= 12) at (m0, n0) (tile_rows). Output r·NR + c of the
 * first 8 accumulates in acc[KR_R8(r·NR + c)], the next 4 (3×4's third row) in
 * acc[8 + KR_R8(c)], stored as a 1×4 tile beside three zero accumulators. */
KR_TARGET_AVXVNNI static inline __attribute__((always_inline)) void
tile_vnni(const int MR, const int NR, const kr_q8_gemm *g, int m0, int mr, int n0, int nr) {
    const size_t kp = (size_t)g->kp;
    const uint8_t *a[3];
    const int8_t *w[8];
    tile_rows(MR, NR, g, m0, mr, n0, nr, a, w);
    __m256i acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm256_setzero_si256();
    for (size_t k = 0; k < kp; k += 32) {
        __m256i av[3];
#pragma GCC unroll 3
        for (int r = 0; r < MR; r++) av[r] = _mm256_loadu_si256((const __m256i *)(a[r] + k));
#pragma GCC unroll 8
        for (int c = 0; c < NR; c++) {
            __m256i wv = _mm256_loadu_si256((const __m256i *)(w[c] + k));
#pragma GCC unroll 3
            for (int r = 0; r < MR; r++) {
                int o = r * NR + c, slot = o < 8 ? KR_R8(o) : 8 + KR_R8(o - 8);
                acc[slot] = dpbusd_vex(acc[slot], av[r], wv);
            }
        }
    }
    if (MR * NR <= 8) {
        store_tile(MR, NR, acc, g, m0, mr, n0, nr);
        return;
    }
    store_tile(2, 4, acc, g, m0, mr < 2 ? mr : 2, n0, nr);
    if (mr > 2) store_tile(1, 4, acc + 8, g, m0 + 2, 1, n0, nr);
}

/* ---- AVX-VNNI panel path (M >= Q8V_PANEL_MIN_M). The row-dot tile above ends every 12 dots
 * with two 8-way reductions and a permuting epilogue, ~70 vector ops per 192 VPDPBUSD at
 * K = 512. Here each W block is first repacked into panels of 8 columns (for every 4 k, the 8
 * columns' 4 bytes side by side), so a VPDPBUSD of 4 broadcast activation bytes against one
 * panel row adds into 8 outputs of one row: a 4-row × 24-column tile keeps 12 accumulators
 * over all of K and needs no reduction, and the epilogue works on whole rows, with the
 * row-dot epilogue's operations per element. Same exact integers, same bits (as the AVX-512
 * panel path in qgemm_int8_avx512.c). The repacking costs N·kp bytes per call. */
enum { Q8V_PANEL_MIN_M = 32, Q8V_MR = 4, Q8V_NV = 3 };

static size_t vnni_panel_bytes(int kp) { return (size_t)kr_q8_block_cols(kp, 0) * (size_t)kp; }

void kr_qgemm_int8_avxvnni_reserve(int M, const kr_qmat *w) {
    if (M >= Q8V_PANEL_MIN_M && w->kp > 0)
        (void)kr_thread_scratch(KR_SCRATCH_QGEMM_PANELS, vnni_panel_bytes(w->kp));
}

/* r[i] lane j ↔ r[j] lane i on 32-bit lanes. */
KR_TARGET_AVXVNNI static inline __attribute__((always_inline)) void transpose8_epi32(__m256i r[8]) {
    __m256i t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        u[4 * h] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x20);
        r[4 + i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x31);
    }
}

/* W rows w[0 .. nc) (nc <= 8, rows kp bytes apart; the panel's other columns zero) as one
 * 8-column panel at dst, kp·8 bytes: the 4 bytes of k group j of column c at dst + 32j + 4c. */
KR_TARGET_AVXVNNI static void pack_panel8(const int8_t *w, size_t kp, int nc, int8_t *dst) {
    for (size_t k = 0; k < kp; k += 32, dst += 256) {
        __m256i r[8];
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++)
            r[c] = c < nc ? _mm256_loadu_si256((const __m256i *)(w + (size_t)c * kp + k))
                          : _mm256_setzero_si256();
        transpose8_epi32(r);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) _mm256_storeu_si256((__m256i *)(dst + 32 * j), r[j]);
    }
}

/* Rows m0 .. m0 + mr (mr <= 4; rows past mr repeat the last, computed and not stored) × the NV
 * panels at pw, whose first column is n0 and of which ncols columns are real. */
KR_TARGET_AVXVNNI static inline __attribute__((always_inline)) void
panel_tile_vnni(const int NV, const kr_q8_gemm *g, const int8_t *pw, int m0, int mr, int n0,
                int ncols) {
    const size_t kp = (size_t)g->kp, pstride = 8 * kp;
    const uint8_t *a[Q8V_MR];
#pragma GCC unroll 4
    for (int r = 0; r < Q8V_MR; r++) a[r] = g->aq + (size_t)(m0 + (r < mr ? r : mr - 1)) * kp;
    __m256i acc[Q8V_MR][Q8V_NV];
#pragma GCC unroll 4
    for (int r = 0; r < Q8V_MR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) acc[r][v] = _mm256_setzero_si256();
    for (size_t j = 0; j < kp / 4; j++) {
        __m256i wv[Q8V_NV];
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            wv[v] = _mm256_loadu_si256((const __m256i *)(pw + v * pstride + j * 32));
#pragma GCC unroll 4
        for (int r = 0; r < Q8V_MR; r++) {
            int32_t a4;
            memcpy(&a4, a[r] + 4 * j, sizeof a4);
            __m256i av = _mm256_set1_epi32(a4);
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++) acc[r][v] = dpbusd_vex(acc[r][v], av, wv[v]);
        }
    }
    /* store_tile's operations per element: (dot − azero·row_sum), then (as·ws)·that + b. */
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++) {
        int c0 = n0 + 8 * v, nc = ncols - 8 * v;
        if (nc <= 0) break;
        __m256i cm = kr_mask8(nc);
        __m256i rs = _mm256_maskload_epi32(g->rsum + c0, cm);
        __m256 ws = _mm256_maskload_ps(g->wscale + c0, cm);
        __m256 b = g->bias ? _mm256_maskload_ps(g->bias + c0, cm) : _mm256_setzero_ps();
        for (int r = 0; r < mr; r++) {
            __m256i d = _mm256_sub_epi32(
                acc[r][v], _mm256_mullo_epi32(_mm256_set1_epi32(g->azero[m0 + r]), rs));
            __m256 x = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(g->ascale[m0 + r]), ws),
                                     _mm256_cvtepi32_ps(d));
            if (g->bias) x = _mm256_add_ps(x, b);
            kr_store8(g->C + (size_t)(m0 + r) * (size_t)g->ldc + c0, x, nc);
        }
    }
}

/* Columns [n0, n1) on the panel path; 0 when its buffer cannot be had. */
KR_TARGET_AVXVNNI static int gemm_panels_vnni(int M, const kr_q8_gemm *g, int n0, int n1) {
    const int nb_cols = kr_q8_block_cols(g->kp, 0);
    int8_t *pw = kr_thread_scratch(KR_SCRATCH_QGEMM_PANELS, vnni_panel_bytes(g->kp));
    if (!pw) return 0;
    const size_t kp = (size_t)g->kp, pstride = 8 * kp;
    for (int nb = n0; nb < n1; nb += nb_cols) {
        int ne = nb + nb_cols < n1 ? nb + nb_cols : n1, np = (ne - nb + 7) / 8;
        for (int p = 0; p < np; p++)
            pack_panel8(g->wq + (size_t)(nb + 8 * p) * kp, kp,
                        ne - nb - 8 * p < 8 ? ne - nb - 8 * p : 8, pw + (size_t)p * pstride);
        for (int m = 0; m < M; m += Q8V_MR) {
            int mr = M - m < Q8V_MR ? M - m : Q8V_MR;
            for (int p = 0; p < np; p += Q8V_NV) {
                const int8_t *pp = pw + (size_t)p * pstride;
                int c0 = nb + 8 * p, nc = ne - c0;
                switch (np - p < Q8V_NV ? np - p : Q8V_NV) {
                case 1: panel_tile_vnni(1, g, pp, m, mr, c0, nc); break;
                case 2: panel_tile_vnni(2, g, pp, m, mr, c0, nc); break;
                default: panel_tile_vnni(3, g, pp, m, mr, c0, nc); break;
                }
            }
        }
    }
    return 1;
}

KR_TARGET_AVXVNNI void kr_qgemm_int8_avxvnni(int M, const kr_qmat *w, const uint8_t *aq,
                                             const float *ascale, const int32_t *azero,
                                             const float *bias, float *C, int ldc, int ith,
                                             int nth) {
    int n0, n1;
    kr_q8_gemm g;
    if (!kr_q8_gemm_start(M, w, aq, ascale, azero, bias, C, ldc, ith, nth, &g, &n0, &n1)) return;
    if (M >= Q8V_PANEL_MIN_M && gemm_panels_vnni(M, &g, n0, n1)) return;
    int nb_cols = kr_q8_block_cols(w->kp, n1 - n0);
    for (int nb = n0; nb < n1; nb += nb_cols) {
        int ne = nb + nb_cols < n1 ? nb + nb_cols : n1;
        if (M == 1) {
            for (int n = nb; n < ne; n += 8) tile_vnni(1, 8, &g, 0, 1, n, ne - n < 8 ? ne - n : 8);
            continue;
        }
        for (int m = 0; m < M; m += 3)
            for (int n = nb; n < ne; n += 4)
                tile_vnni(3, 4, &g, m, M - m < 3 ? M - m : 3, n, ne - n < 4 ? ne - n : 4);
    }
}
#else
const int kr_qgemm_int8_avxvnni_built = 0;
void kr_qgemm_int8_avxvnni_reserve(int M, const kr_qmat *w) { kr_qgemm_int8_avx2_reserve(M, w); }
void kr_qgemm_int8_avxvnni(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                           const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                           int nth) {
    kr_qgemm_int8_avx2(M, w, aq, ascale, azero, bias, C, ldc, ith, nth);
}
#endif
#endif
