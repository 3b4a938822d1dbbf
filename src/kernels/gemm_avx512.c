/*
 * kernels/gemm_avx512 — C = A·Wᵀ + bias with AVX-512 ([N×K] row-major W).
 *
 * Every C element is one dot product kept in one 16-lane accumulator: k blocks of 16 in
 * order, the K tail as a zero-filled block, then the fixed tree of kr_reduce16, then + bias.
 * A register tile (4 A rows × 4 W rows; 3×4, 2×8 or 1×8 for the last rows of the unpacked
 * path) only decides which dots run side by side, so a row's result never depends on M, its
 * position or the thread split — the determinism contract of kernels.h.
 *
 * Cache blocking: a thread walks its N slice in blocks of W rows of half the L2 and, inside a
 * block, sweeps all row tiles of A, so the W block is reused from L2 across M while the 4 A
 * rows of a tile stay in L1 across the block.
 *
 * Packing (M large, see KR_PACK_MIN_M): the W block is copied once into 64-byte-aligned
 * micro-panels (4 rows interleaved per k block, tail and missing rows zero-filled) and each A
 * row tile likewise, so the tile reads two sequential aligned streams. Weights mapped from a
 * file are only float-aligned, and a 64-byte load that straddles two cache lines costs two
 * load slots: with 8 loads per 16 FMAs that alone held the kernel near 60-70 % of the FMA
 * peak. The copy is N·K floats per call against M·N·K FMAs, so small M (decode) reads W in
 * place. Copies and zeros (0·0 added to a lane, as the masked tail did) change no value. The
 * buffer (one W block + one A tile, ~520 KB) is per thread, allocated once and kept.
 *
 * A caller that runs several GEMMs on one A, or cuts N into more slices than threads, packs A
 * once (kr_gemm_f32_pack_a) instead of every slice repacking every row tile: that copy is M·K
 * floats per W block, 6-12 % of the packed GEMM's time at the re-run shapes (perf).
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include "kernels/kernels_internal.h"
#include "kernels/simd_avx512.h"

#include <stdint.h>

/* Rows of A from which the W block is packed (below, W is read in place): always from 64 rows;
 * from 16 when rows of A or W straddle cache lines in place. Packing N·K floats costs about
 * what M <= 32 rows of in-place aligned FMAs lose to it (measured: 32×1024×512 193 GFLOP/s in
 * place vs 171 packed when aligned; 139 vs 168 when W starts 16 bytes off a line). */
enum { KR_PACK_MIN_M = 64, KR_PACK_MIN_M_SPLIT = 16 };

static int aligned64(const float *A, int lda, const float *W, int K) {
    return (uintptr_t)A % 64 == 0 && lda % 16 == 0 && (uintptr_t)W % 64 == 0 && K % 16 == 0;
}

/* W rows ahead that the first row tile of the unpacked path prefetches: it streams W from
 * memory (decode reads every weight once per step), and W rows of 2-3 KB are too short for
 * the hardware prefetcher, which stops at 4 KB pages, to run ahead of 4-8 concurrent streams
 * (measured, 2 threads, 104 MB of 1024×512 weights: M = 4 2.4-4.3 ms vs 4.5-6.0 per sweep,
 * M = 8 4.7-6.1 vs 6.3-8.7; M = 1 about the same). The prefetch goes to L2 (T1), 16 rows
 * ahead: into L1 (T0) each one holds one of the core's few L1 miss buffers until its line
 * arrives, which caps the lines in flight below what DRAM needs to stream at full rate while
 * the FMAs run. Zen 4, 2 threads, Kronos-small's decode GEMMs with cold weights (84 MB a
 * step): M = 1 2.8-3.2 → 2.0-2.9 ms, M = 4 3.4-3.6 → 2.1-2.9, M = 8 4.4-4.6 → 3.1-3.6
 * (T0 and 8 rows → T1 and 16; 12 or 24 rows read the same as 16). */
enum { KR_PREFETCH_ROWS = 16 };

/* Computes the MR×NR tile at (m0, n0) of which mr×nr elements are real: missing rows and
 * columns reuse the last real one (valid memory, results discarded). With pf, also prefetches
 * the W rows KR_PREFETCH_ROWS below (a prefetch past the end of W is a hint, never a fault). */
KR_INLINE void tile(const int MR, const int NR, int K, const float *A, int lda, const float *W,
                    const float *bias, float *C, int ldc, int m0, int mr, int n0, int nr, int pf) {
    const float *a[4];
    const float *w[16];
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++) a[r] = A + (size_t)(m0 + (r < mr ? r : mr - 1)) * (size_t)lda;
#pragma GCC unroll 16
    for (int c = 0; c < NR; c++) w[c] = W + (size_t)(n0 + (c < nr ? c : nr - 1)) * (size_t)K;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();

    int k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 av[4];
#pragma GCC unroll 4
        for (int r = 0; r < MR; r++) av[r] = _mm512_loadu_ps(a[r] + k);
        if (pf)
#pragma GCC unroll 16
            for (int c = 0; c < NR; c++)
                _mm_prefetch((const char *)(w[c] + k + (size_t)KR_PREFETCH_ROWS * (size_t)K),
                             _MM_HINT_T1);
#pragma GCC unroll 16
        for (int c = 0; c < NR; c++) {
            __m512 wv = _mm512_loadu_ps(w[c] + k);
#pragma GCC unroll 4
            for (int r = 0; r < MR; r++)
                acc[KR_R16(r * NR + c)] = _mm512_fmadd_ps(av[r], wv, acc[KR_R16(r * NR + c)]);
        }
    }
    if (k < K) {
        __mmask16 km = kr_mask16(K - k);
        __m512 av[4];
#pragma GCC unroll 4
        for (int r = 0; r < MR; r++) av[r] = _mm512_maskz_loadu_ps(km, a[r] + k);
#pragma GCC unroll 16
        for (int c = 0; c < NR; c++) {
            __m512 wv = _mm512_maskz_loadu_ps(km, w[c] + k);
#pragma GCC unroll 4
            for (int r = 0; r < MR; r++)
                acc[KR_R16(r * NR + c)] = _mm512_fmadd_ps(av[r], wv, acc[KR_R16(r * NR + c)]);
        }
    }

    kr_store_tile16(MR, NR, acc, bias, C, ldc, m0, mr, n0, nr);
}

/* Every row tile of A against W rows [nb, ne). The first row tile brings the W block in
 * from memory (and prefetches); the others find it in L2. */
static void block(int M, int K, const float *A, int lda, const float *W, const float *bias,
                  float *C, int ldc, int nb, int ne) {
    int m = 0;
    for (; m + 4 <= M; m += 4)
        for (int n = nb; n < ne; n += 4)
            tile(4, 4, K, A, lda, W, bias, C, ldc, m, 4, n, ne - n < 4 ? ne - n : 4, m == 0);
    int pf = m == 0;
    switch (M - m) {
    case 3:
        for (int n = nb; n < ne; n += 4)
            tile(3, 4, K, A, lda, W, bias, C, ldc, m, 3, n, ne - n < 4 ? ne - n : 4, pf);
        break;
    case 2:
        for (int n = nb; n < ne; n += 8)
            tile(2, 8, K, A, lda, W, bias, C, ldc, m, 2, n, ne - n < 8 ? ne - n : 8, pf);
        break;
    case 1:
        /* 8 W rows, not 16: fewer concurrent streams keep the hardware prefetchers ahead
         * in this bandwidth-bound case (measured ~10% faster on Zen4). */
        for (int n = nb; n < ne; n += 8)
            tile(1, 8, K, A, lda, W, bias, C, ldc, m, 1, n, ne - n < 8 ? ne - n : 8, pf);
        break;
    default: break;
    }
}

/* ---- Packed path. A panel holds `rows` rows of K floats as nkb k blocks of rows × 16
 * floats (row r of block b at b·rows·16 + r·16), 64-byte aligned; lanes past K and rows past
 * the real ones are zero. */

/* Copies rows [r0, r0 + nr) (nr <= rows) of src (ld floats apart) into panel dst. */
KR_INLINE void pack_panel(const int rows, float *dst, const float *src, size_t ld, int r0, int nr,
                          int K) {
    int nkb = (K + 15) / 16;
    for (int r = 0; r < rows; r++) {
        float *d = dst + (size_t)r * 16;
        if (r >= nr) {
            for (int b = 0; b < nkb; b++)
                _mm512_store_ps(d + (size_t)b * rows * 16, _mm512_setzero_ps());
            continue;
        }
        const float *x = src + (size_t)(r0 + r) * ld;
        int b = 0;
        for (; b < K / 16; b++)
            _mm512_store_ps(d + (size_t)b * rows * 16, _mm512_loadu_ps(x + b * 16));
        if (b < nkb)
            _mm512_store_ps(d + (size_t)b * rows * 16,
                            _mm512_maskz_loadu_ps(kr_mask16(K - b * 16), x + b * 16));
    }
}

/* Long K: a 4-row A panel of K floats and the W panel streaming past it stop fitting L1 together
 * (K = 2048: 32 KB each against 48 KB), so every tile would read both from L2. From
 * KR_KCHUNK_MIN_BLOCKS k blocks the tiles of a W block run KR_KCHUNK_BLOCKS k blocks at a time,
 * A's chunk staying in L1 across all W panels, each tile's 16 accumulators parked in `spill`
 * between chunks. A float stored and loaded back is the same float, and each lane still adds
 * its k blocks in order, so the result is the unchunked tile's bit for bit. */
enum { KR_KCHUNK_MIN_BLOCKS = 96, KR_KCHUNK_BLOCKS = 32, KR_KCHUNK_MAX_PANELS = 24 };

/* k blocks [b0, b1) of the 4×4 tile of packed A panel pa (rows m0..) and packed W panel pw
 * (rows n0..), both given at block 0: accumulators from spill (zero at b0 = 0), back to spill
 * unless b1 = nkb, where the tile is reduced and stored. */
KR_INLINE void tile_packed_part(int b0, int b1, int nkb, const float *pa, const float *pw,
                                __m512 *spill, const float *bias, float *C, int ldc, int m0, int mr,
                                int n0, int nr) {
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        acc[i] = b0 ? _mm512_load_ps((const float *)&spill[i]) : _mm512_setzero_ps();
    pa += (size_t)b0 * 64;
    pw += (size_t)b0 * 64;
    for (int b = b0; b < b1; b++, pa += 64, pw += 64) {
        __m512 av[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) av[r] = _mm512_load_ps(pa + r * 16);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m512 wv = _mm512_load_ps(pw + c * 16);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
                acc[KR_R16(r * 4 + c)] = _mm512_fmadd_ps(av[r], wv, acc[KR_R16(r * 4 + c)]);
        }
    }
    if (b1 == nkb) {
        kr_store_tile16(4, 4, acc, bias, C, ldc, m0, mr, n0, nr);
        return;
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) _mm512_store_ps((float *)&spill[i], acc[i]);
}

/* The whole tile: every k block, no spill. */
static void tile_packed(int nkb, const float *pa, const float *pw, const float *bias, float *C,
                        int ldc, int m0, int mr, int n0, int nr) {
    tile_packed_part(0, nkb, nkb, pa, pw, NULL, bias, C, ldc, m0, mr, n0, nr);
}

/* W rows [nb, ne) packed into 4-row panels at pw, then every 4-row tile of A against them:
 * tile t of A read from pa_all when the caller packed A once for the call (tile t at t panels
 * in), else packed here into pa. */
static void block_packed(int M, int K, const float *A, int lda, const float *pa_all, const float *W,
                         const float *bias, float *C, int ldc, int nb, int ne, float *pw,
                         float *pa) {
    int nkb = (K + 15) / 16;
    size_t panel = (size_t)nkb * 64;
    for (int n = nb; n < ne; n += 4)
        pack_panel(4, pw + (size_t)(n - nb) / 4 * panel, W, (size_t)K, n, ne - n < 4 ? ne - n : 4,
                   K);
    for (int m = 0; m < M; m += 4) {
        int mr = M - m < 4 ? M - m : 4;
        const float *a = pa_all + (size_t)m / 4 * panel;
        if (!pa_all) {
            pack_panel(4, pa, A, (size_t)lda, m, mr, K);
            a = pa;
        }
        if (nkb < KR_KCHUNK_MIN_BLOCKS || (ne - nb + 3) / 4 > KR_KCHUNK_MAX_PANELS) {
            for (int n = nb; n < ne; n += 4)
                tile_packed(nkb, a, pw + (size_t)(n - nb) / 4 * panel, bias, C, ldc, m, mr, n,
                            ne - n < 4 ? ne - n : 4);
            continue;
        }
        __m512 spill[KR_KCHUNK_MAX_PANELS * 16];
        for (int b0 = 0; b0 < nkb; b0 += KR_KCHUNK_BLOCKS) {
            int b1 = b0 + KR_KCHUNK_BLOCKS < nkb ? b0 + KR_KCHUNK_BLOCKS : nkb;
            for (int n = nb; n < ne; n += 4)
                tile_packed_part(b0, b1, nkb, a, pw + (size_t)(n - nb) / 4 * panel,
                                 spill + (n - nb) / 4 * 16, bias, C, ldc, m, mr, n,
                                 ne - n < 4 ? ne - n : 4);
        }
    }
}

/* W rows per cache block: ~512 KB of W, half the L2. Fewer blocks mean fewer sweeps (and
 * packings) of A, which does not fit L2 next to it (measured 192 KB → 512 KB: 400×832×2048
 * 112 → 172 GFLOP/s, 400×1024×512 189 → 197; 704 KB loses again). */
static int block_cols(int K) {
    int nb_cols = (512 * 1024 / 4) / K;
    nb_cols = nb_cols / KR_GEMM_NUNIT * KR_GEMM_NUNIT;
    return nb_cols < KR_GEMM_NUNIT ? KR_GEMM_NUNIT : nb_cols;
}

/* The packing buffer of a K: one W block of panels and one A panel. */
static size_t scratch_bytes(int K) {
    size_t panel = (size_t)(K + 15) / 16 * 64;
    return ((size_t)block_cols(K) / 4 * panel + panel) * sizeof(float);
}

void kr_gemm_f32_reserve_avx512(int M, int K) {
    if (M >= KR_PACK_MIN_M_SPLIT && K > 0)
        (void)kr_thread_scratch(KR_SCRATCH_GEMM_F32, scratch_bytes(K));
}

/* The GEMM on A in place (pa_all NULL) or on A packed by kr_gemm_f32_pack_a_avx512. */
static void gemm(int M, int N, int K, const float *A, int lda, const float *pa_all, const float *W,
                 const float *bias, float *C, int ldc, int ith, int nth) {
    int n0, n1;
    kr_gemm_split(N, ith, nth, &n0, &n1);
    if (n0 >= n1 || M <= 0) return;
    if (K <= 0) {
        for (int m = 0; m < M; m++)
            for (int n = n0; n < n1; n++)
                C[(size_t)m * (size_t)ldc + (size_t)n] = bias ? 0.0f + bias[n] : 0.0f;
        return;
    }
    int nb_cols = block_cols(K);
    float *pw = NULL, *pa = NULL;
    if (pa_all || M >= KR_PACK_MIN_M || (M >= KR_PACK_MIN_M_SPLIT && !aligned64(A, lda, W, K))) {
        pw = kr_thread_scratch(KR_SCRATCH_GEMM_F32, scratch_bytes(K));
        pa = pw ? pw + (size_t)nb_cols / 4 * ((size_t)(K + 15) / 16 * 64) : NULL;
    }
    if (!pw) pa_all = NULL; /* no scratch for the W block: A in place, the same bits */
    for (int nb = n0; nb < n1; nb += nb_cols) {
        int ne = nb + nb_cols < n1 ? nb + nb_cols : n1;
        if (pw)
            block_packed(M, K, A, lda, pa_all, W, bias, C, ldc, nb, ne, pw, pa);
        else
            block(M, K, A, lda, W, bias, C, ldc, nb, ne);
    }
}

void kr_gemm_f32_avx512(int M, int N, int K, const float *A, int lda, const float *W,
                        const float *bias, float *C, int ldc, int ith, int nth) {
    gemm(M, N, K, A, lda, NULL, W, bias, C, ldc, ith, nth);
}

size_t kr_gemm_f32_packed_a_floats_avx512(int M, int K) {
    if (M < KR_PACK_MIN_M || K <= 0) return 0;
    return (size_t)(M + 3) / 4 * (size_t)((K + 15) / 16) * 64;
}

void kr_gemm_f32_pack_a_avx512(int M, int K, const float *A, int lda, float *pa, int m0, int m1) {
    size_t panel = (size_t)((K + 15) / 16) * 64;
    if (m1 > M) m1 = M;
    for (int m = m0; m < m1; m += 4)
        pack_panel(4, pa + (size_t)m / 4 * panel, A, (size_t)lda, m, M - m < 4 ? M - m : 4, K);
}

void kr_gemm_f32_packed_avx512(int M, int N, int K, const float *A, int lda, const float *pa,
                               const float *W, const float *bias, float *C, int ldc, int ith,
                               int nth) {
    gemm(M, N, K, A, lda, pa, W, bias, C, ldc, ith, nth);
}
#endif
