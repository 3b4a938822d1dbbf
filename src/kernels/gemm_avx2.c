/*
 * kernels/gemm_avx2 — C = A·Wᵀ + bias with AVX2+FMA ([N×K] row-major W).
 *
 * Same scheme as gemm_avx512.c with 8 lanes: each C element is one 8-lane accumulator over
 * k blocks in order (masked tail), reduced by the fixed tree of kr_reduce8, then + bias. The
 * tile (3 A rows × 4 W rows; 2×4 or 1×8 for the last rows) fits the 16 ymm registers and
 * never changes a result, which keeps the determinism contract of kernels.h.
 *
 * Packing (as in gemm_avx512.c, from KR_PACK_MIN_M rows): weights mapped from a file are only
 * float-aligned, and half the 32-byte loads of a row 16 bytes off a line straddle two lines
 * (measured on one thread: 512×512×1024 67.5 against 78.9 GFLOP/s aligned). So a large-M call
 * copies each W block once into 32-byte-aligned micro-panels (4 rows interleaved per k block of
 * 8, tail and missing rows zero-filled), and each 3-row tile of A likewise unless its rows are
 * aligned in place already. A zero lane adds 0·0, as the masked tail does: same bits.
 */
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include "kernels/kernels_internal.h"
#include "kernels/simd_avx2.h"

#include <stdint.h>

/* Accumulator slot of output o (row-major in the tile): outputs 0-7 reduce into the first
 * vector, 8-15 into the second, each in lane o % 8. */
#define SLOT(o) ((o) < 8 ? KR_R8(o) : 8 + KR_R8((o)-8))

/* Keeps a loaded W vector in a register: without this GCC folds the load into each of the
 * MR FMAs that use it, and the loop becomes load-bound. */
#define KR_IN_REG(v) __asm__("" : "+x"(v))

/* W rows ahead that the first row tile prefetches into L2, once per 64-byte line: it streams
 * W from memory, in rows too short for the hardware prefetcher (see gemm_avx512.c for the
 * distance and the L2 hint). */
enum { KR_PREFETCH_ROWS = 16 };

/* Reduces the MR×NR tile's accumulators (output o = r·NR + c at acc[SLOT(o)]) and stores
 * its mr×nr real elements at C[m0..][n0..] with the bias added. */
KR_INLINE void store_tile(const int MR, const int NR, const __m256 acc[16], const float *bias,
                          float *C, int ldc, int m0, int mr, int n0, int nr) {
    /* Lane o % 8 of s[o / 8] is output o = r·NR + c, i.e. C[m0 + r][n0 + c] before bias. */
    __m256 s[2];
    s[0] = kr_reduce8(acc);
    s[1] = MR * NR > 8 ? kr_reduce8(acc + 8) : s[0];
    __m256i nm = kr_mask8(nr);
    if (NR == 8) {
        if (bias) s[0] = _mm256_add_ps(s[0], _mm256_maskload_ps(bias + n0, nm));
        kr_store8(C + (size_t)m0 * (size_t)ldc + n0, s[0], nr);
    } else {
        __m128i nm4 = _mm256_castsi256_si128(nm);
        __m128 b = bias ? _mm_maskload_ps(bias + n0, nm4) : _mm_setzero_ps();
#pragma GCC unroll 3
        for (int r = 0; r < MR; r++) {
            if (r >= mr) break;
            __m128 v =
                r % 2 ? _mm256_extractf128_ps(s[r / 2], 1) : _mm256_castps256_ps128(s[r / 2]);
            if (bias) v = _mm_add_ps(v, b);
            kr_store4(C + (size_t)(m0 + r) * (size_t)ldc + n0, v, nr);
        }
    }
}

/* Computes the MR×NR tile at (m0, n0) of which mr×nr elements are real: missing rows and
 * columns reuse the last real one (valid memory, results discarded). MR·NR <= 16 with
 * MR A vectors + 1 W vector + MR·NR accumulators fitting the 16 ymm registers. With pf, also
 * prefetches the W rows KR_PREFETCH_ROWS below (a hint: never a fault past the end of W). */
KR_INLINE void tile(const int MR, const int NR, int K, const float *A, int lda, const float *W,
                    const float *bias, float *C, int ldc, int m0, int mr, int n0, int nr, int pf) {
    const float *a[3];
    const float *w[8];
#pragma GCC unroll 3
    for (int r = 0; r < MR; r++) a[r] = A + (size_t)(m0 + (r < mr ? r : mr - 1)) * (size_t)lda;
#pragma GCC unroll 8
    for (int c = 0; c < NR; c++) w[c] = W + (size_t)(n0 + (c < nr ? c : nr - 1)) * (size_t)K;
    __m256 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm256_setzero_ps();

    int k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 av[3];
#pragma GCC unroll 3
        for (int r = 0; r < MR; r++) av[r] = _mm256_loadu_ps(a[r] + k);
        if (pf && k % 16 == 0)
#pragma GCC unroll 8
            for (int c = 0; c < NR; c++)
                _mm_prefetch((const char *)(w[c] + k + (size_t)KR_PREFETCH_ROWS * (size_t)K),
                             _MM_HINT_T1);
#pragma GCC unroll 8
        for (int c = 0; c < NR; c++) {
            __m256 wv = _mm256_loadu_ps(w[c] + k);
            if (MR > 1) KR_IN_REG(wv);
#pragma GCC unroll 3
            for (int r = 0; r < MR; r++)
                acc[SLOT(r * NR + c)] = _mm256_fmadd_ps(av[r], wv, acc[SLOT(r * NR + c)]);
        }
    }
    if (k < K) {
        __m256i km = kr_mask8(K - k);
        __m256 av[3];
#pragma GCC unroll 3
        for (int r = 0; r < MR; r++) av[r] = _mm256_maskload_ps(a[r] + k, km);
#pragma GCC unroll 8
        for (int c = 0; c < NR; c++) {
            __m256 wv = _mm256_maskload_ps(w[c] + k, km);
#pragma GCC unroll 3
            for (int r = 0; r < MR; r++)
                acc[SLOT(r * NR + c)] = _mm256_fmadd_ps(av[r], wv, acc[SLOT(r * NR + c)]);
        }
    }

    store_tile(MR, NR, acc, bias, C, ldc, m0, mr, n0, nr);
}

/* ---- Packed path. A panel holds `rows` rows of K floats as nkb k blocks of rows × 8 floats
 * (row r of block b at b·rows·8 + r·8), 32-byte aligned; lanes past K and rows past the real
 * ones are zero. */

/* Rows from which a W block is packed when rows of A or W are not 32-byte aligned in place.
 * Measured on one thread, W 16 bytes off a line (GFLOP/s): ×1536×512 M = 16 48 packed against
 * 57 in place, M = 32 64 against 66; 64×512×1024 72 against 67; 512×512×1024 79 against 69.
 * End to end the 64-row decode of 64 paths gained nothing (1.91 against 1.87 s, 8 rounds), so
 * packing starts at the window re-run's sizes. Aligned operands stay in place (512×512×1024:
 * 80 against 79 packed). */
enum { KR_PACK_MIN_M = 128 };

static int aligned32(const float *A, int lda, const float *W, int K) {
    return (uintptr_t)A % 32 == 0 && lda % 8 == 0 && (uintptr_t)W % 32 == 0 && K % 8 == 0;
}

/* Copies rows [r0, r0 + nr) (nr <= rows) of src (ld floats apart) into panel dst. */
KR_INLINE void pack_panel(const int rows, float *dst, const float *src, size_t ld, int r0, int nr,
                          int K) {
    const int nkb = (K + 7) / 8;
    for (int r = 0; r < rows; r++) {
        float *d = dst + (size_t)r * 8;
        if (r >= nr) {
            for (int b = 0; b < nkb; b++)
                _mm256_store_ps(d + (size_t)b * rows * 8, _mm256_setzero_ps());
            continue;
        }
        const float *x = src + (size_t)(r0 + r) * ld;
        int b = 0;
        for (; b < K / 8; b++)
            _mm256_store_ps(d + (size_t)b * rows * 8, _mm256_loadu_ps(x + b * 8));
        if (b < nkb)
            _mm256_store_ps(d + (size_t)b * rows * 8,
                            _mm256_maskload_ps(x + b * 8, kr_mask8(K - b * 8)));
    }
}

/* The 3×4 tile of A rows a[0..2] (k block b at a[r] + b·a_step: a packed panel's rows with
 * a_step 24, or aligned rows in place with a_step 8) and packed W panel pw (rows n0..): the
 * in-place tile's FMAs in the same order. */
static void tile_packed(int nkb, const float *const a[3], size_t a_step, const float *pw,
                        const float *bias, float *C, int ldc, int m0, int mr, int n0, int nr) {
    __m256 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm256_setzero_ps();
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2];
    for (int b = 0; b < nkb; b++, a0 += a_step, a1 += a_step, a2 += a_step, pw += 32) {
        __m256 av[3] = { _mm256_load_ps(a0), _mm256_load_ps(a1), _mm256_load_ps(a2) };
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256 wv = _mm256_load_ps(pw + 8 * c);
            KR_IN_REG(wv);
#pragma GCC unroll 3
            for (int r = 0; r < 3; r++)
                acc[SLOT(r * 4 + c)] = _mm256_fmadd_ps(av[r], wv, acc[SLOT(r * 4 + c)]);
        }
    }
    store_tile(3, 4, acc, bias, C, ldc, m0, mr, n0, nr);
}

/* W rows per block: ~192 KB of W (the in-place path's block too). */
static int block_cols(int K) {
    int nb_cols = (192 * 1024 / 4) / K / KR_GEMM_NUNIT * KR_GEMM_NUNIT;
    return nb_cols < KR_GEMM_NUNIT ? KR_GEMM_NUNIT : nb_cols;
}

/* The packing buffer of a K: one W block of 4-row panels and one 3-row A panel. */
static size_t scratch_bytes(int K) {
    size_t kf = (size_t)(K + 7) / 8 * 8;
    return ((size_t)block_cols(K) / 4 * 4 * kf + 3 * kf) * sizeof(float);
}

void kr_gemm_f32_reserve_avx2(int M, int K) {
    if (M >= KR_PACK_MIN_M && K > 0) (void)kr_thread_scratch(KR_SCRATCH_GEMM_F32, scratch_bytes(K));
}

/* W rows [nb, ne) packed into panels at pw, then every 3-row tile of A against them: read in
 * place when its rows are 32-byte aligned (packing them costs ~5 % at K = 1024, measured),
 * else packed into pa. */
static void block_packed(int M, int K, const float *A, int lda, const float *W, const float *bias,
                         float *C, int ldc, int nb, int ne, float *pw, float *pa) {
    const int nkb = (K + 7) / 8;
    const size_t panel = (size_t)nkb * 32; /* floats of a 4-row W panel */
    const int a_in_place = (uintptr_t)A % 32 == 0 && lda % 8 == 0 && K % 8 == 0;
    for (int n = nb; n < ne; n += 4)
        pack_panel(4, pw + (size_t)(n - nb) / 4 * panel, W, (size_t)K, n, ne - n < 4 ? ne - n : 4,
                   K);
    for (int m = 0; m < M; m += 3) {
        int mr = M - m < 3 ? M - m : 3;
        const float *a[3];
        size_t a_step = 8;
        if (a_in_place && mr == 3) {
            for (int r = 0; r < 3; r++) a[r] = A + (size_t)(m + r) * (size_t)lda;
        } else {
            pack_panel(3, pa, A, (size_t)lda, m, mr, K);
            for (int r = 0; r < 3; r++) a[r] = pa + 8 * r;
            a_step = 24;
        }
        for (int n = nb; n < ne; n += 4)
            tile_packed(nkb, a, a_step, pw + (size_t)(n - nb) / 4 * panel, bias, C, ldc, m, mr, n,
                        ne - n < 4 ? ne - n : 4);
    }
}

void kr_gemm_f32_avx2(int M, int N, int K, const float *A, int lda, const float *W,
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
    /* W block of ~192 KB reused from L2 across all row tiles (see gemm_avx512.c). */
    const int nb_cols = block_cols(K);
    float *pw = NULL;
    if (M >= KR_PACK_MIN_M && !aligned32(A, lda, W, K))
        pw = kr_thread_scratch(KR_SCRATCH_GEMM_F32, scratch_bytes(K));
    for (int nb = n0; nb < n1; nb += nb_cols) {
        int ne = nb + nb_cols < n1 ? nb + nb_cols : n1;
        if (pw) { /* else no scratch: A and W in place, the same bits */
            block_packed(M, K, A, lda, W, bias, C, ldc, nb, ne, pw,
                         pw + (size_t)nb_cols / 4 * 4 * ((size_t)(K + 7) / 8 * 8));
            continue;
        }
        /* The first row tile brings the W block in from memory; the others find it in L2. */
        int m = 0;
        for (; m + 3 <= M; m += 3)
            for (int n = nb; n < ne; n += 4)
                tile(3, 4, K, A, lda, W, bias, C, ldc, m, 3, n, ne - n < 4 ? ne - n : 4, m == 0);
        if (M - m == 2)
            for (int n = nb; n < ne; n += 4)
                tile(2, 4, K, A, lda, W, bias, C, ldc, m, 2, n, ne - n < 4 ? ne - n : 4, m == 0);
        else if (M - m == 1)
            for (int n = nb; n < ne; n += 8)
                tile(1, 8, K, A, lda, W, bias, C, ldc, m, 1, n, ne - n < 8 ? ne - n : 8, m == 0);
    }
}
#endif
