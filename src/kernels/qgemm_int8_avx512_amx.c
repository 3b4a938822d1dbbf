/*
 * kernels/qgemm_int8_avx512_amx — the W8A8 GEMM (quant.h) on Intel AMX (AMX-TILE + AMX-INT8),
 * for prefill-sized M; dispatch.c decides when it runs.
 *
 * TDPBUSD adds to a 16×16 int32 tile of C the products of a 16-row × 64-byte u8 tile of A and
 * a "B" tile of s8 W whose row g holds, for each of 16 columns n, the four bytes
 * k = 4g .. 4g + 3 of W[n]: W's 64-byte row chunks transposed in 4-byte units. A Linear
 * weight is stored [n][kp], so each thread first packs its own N slice into such panels
 * (16 columns × kp: one 1 KB tile per 64 k, columns past the slice zero) in a per-thread
 * buffer, then sweeps 32-row blocks of A over pairs of panels: 2×2 C tiles (tmm0-3), A in
 * tmm4-5, B in tmm6-7, so each k step is 4 tile loads for 4 TDPBUSD. A slice whose panels
 * pass ~1 MB is done in N blocks, so the panels stay in L2 while every A block passes.
 *
 * The last rows: 16..31 left take one 16-row block; fewer than 16 are copied into a
 * zero-padded 16-row buffer, as a tile load always reads 16 rows and aq ends at row M.
 *
 * Exactness: each dot is an exact int32 sum (TDPBUSD does not saturate; kp·255·127 fits in
 * int32 for kp below 66 000, as in every variant), so neither the tiles nor the k order can
 * change it; the epilogue is kr_qgemm_int8_scalar's f32 expression in the same order. The
 * output is bit-identical to every other variant.
 */
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_internal.h"
#include "kernels/qgemm_int8_internal.h"
#include "kernels/quant.h"

#if defined(__x86_64__) && defined(__AMX_TILE__) && defined(__AMX_INT8__)
#include "kernels/simd_avx512.h"

const int kr_qgemm_int8_amx_built = 1;

enum {
    TILE_ROWS = 16, /* rows of every tile */
    TILE_K = 64, /* k per tile: an A tile row, or a B tile's 16 rows of 4 */
    TILE_BYTES = 1024, /* one tile: 16 rows × 64 bytes */
    BLOCK_ROWS = 32, /* A rows per block: two A tiles */
    BLOCK_COLS = 32, /* C columns per block: two B panels */
    PACK_MAX_BYTES = 1 << 20, /* panels per N block: half the 2 MB L2, A blocks beside */
};

/* LDTILECFG's 64-byte operand, palette 1. */
typedef struct tile_config {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16]; /* bytes per row of tile i */
    uint8_t rows[16];
} tile_config;
_Static_assert(sizeof(tile_config) == 64, "LDTILECFG reads 64 bytes");

/* Tiles 0-7 all 16 rows × 64 bytes. A constant object: GCC's _tile_loadconfig asm names only
 * 8 bytes of its operand, so stores that built a local one could be dropped as dead. */
static const tile_config k_tile_config = {
    .palette = 1,
    .colsb = { 64, 64, 64, 64, 64, 64, 64, 64 },
    .rows = { TILE_ROWS, TILE_ROWS, TILE_ROWS, TILE_ROWS, TILE_ROWS, TILE_ROWS, TILE_ROWS,
              TILE_ROWS },
};

typedef struct q8amx {
    const float *ascale, *wscale, *bias;
    const int32_t *azero, *rsum;
    float *C;
    int ldc;
} q8amx;

/* The MR×NR C tiles (MR, NR in {1, 2}) of A rows a (16·MR of them, lda apart) against the NR
 * panels at b (panel_bytes apart), left in tmm0-3. */
KR_INLINE void tiles(const int MR, const int NR, const uint8_t *a, size_t lda, const int8_t *b,
                     size_t panel_bytes, size_t kp) {
    /* GCC's _tile_loadd asm does not declare that it reads memory: without this barrier the
     * stores that packed b (or copied the A tail) could be moved past the loads. */
    __asm__ volatile("" ::: "memory");
    _tile_zero(0);
    if (NR > 1) _tile_zero(1);
    if (MR > 1) _tile_zero(2);
    if (MR > 1 && NR > 1) _tile_zero(3);
    const uint8_t *a1 = a + TILE_ROWS * lda;
    const int8_t *b1 = b + panel_bytes;
    for (size_t k = 0; k < kp; k += TILE_K) {
        const size_t kb = k / TILE_K * TILE_BYTES;
        _tile_loadd(4, a + k, lda);
        _tile_loadd(6, b + kb, 64);
        if (MR > 1) _tile_loadd(5, a1 + k, lda);
        if (NR > 1) _tile_loadd(7, b1 + kb, 64);
        _tile_dpbusd(0, 4, 6);
        if (NR > 1) _tile_dpbusd(1, 4, 7);
        if (MR > 1) _tile_dpbusd(2, 5, 6);
        if (MR > 1 && NR > 1) _tile_dpbusd(3, 5, 7);
    }
}

/* The C tiles of `tiles` as int32 at cb, BLOCK_COLS per row. */
KR_INLINE void store_tiles(const int MR, const int NR, int32_t *cb) {
    const size_t ldcb = BLOCK_COLS * sizeof(int32_t);
    _tile_stored(0, cb, ldcb);
    if (NR > 1) _tile_stored(1, cb + 16, ldcb);
    if (MR > 1) _tile_stored(2, cb + TILE_ROWS * BLOCK_COLS, ldcb);
    if (MR > 1 && NR > 1) _tile_stored(3, cb + TILE_ROWS * BLOCK_COLS + 16, ldcb);
}

/* A C block whose dots wait at cb for the epilogue: rows [m, m + rows) × columns
 * [n, n + cols); rows 0 when there is none. */
typedef struct pending {
    int m, rows, n, cols;
} pending;

/* The pending block's C from its int32 dots: the expression of kr_qgemm_int8_scalar, 16
 * columns a vector. */
static void epilogue(const q8amx *g, const int32_t *cb, pending b) {
    const int halves = b.cols > 16 ? 2 : 1;
    __mmask16 cm[2];
    __m512i rs[2];
    __m512 ws[2], bs[2];
    for (int h = 0; h < halves; h++) {
        const int n = b.n + 16 * h;
        cm[h] = kr_mask16(b.cols - 16 * h);
        rs[h] = _mm512_maskz_loadu_epi32(cm[h], g->rsum + n);
        ws[h] = _mm512_maskz_loadu_ps(cm[h], g->wscale + n);
        bs[h] = g->bias ? _mm512_maskz_loadu_ps(cm[h], g->bias + n) : _mm512_setzero_ps();
    }
    for (int r = 0; r < b.rows; r++) {
        const __m512i az = _mm512_set1_epi32(g->azero[b.m + r]);
        const __m512 as = _mm512_set1_ps(g->ascale[b.m + r]);
        float *c = g->C + (size_t)(b.m + r) * (size_t)g->ldc + b.n;
        for (int h = 0; h < halves; h++) {
            __m512i dot = _mm512_load_si512(cb + BLOCK_COLS * r + 16 * h);
            __m512i d = _mm512_sub_epi32(dot, _mm512_mullo_epi32(az, rs[h]));
            __m512 v = _mm512_mul_ps(_mm512_mul_ps(as, ws[h]), _mm512_cvtepi32_ps(d));
            /* no + 0 without a bias: it would turn -0 into +0 */
            if (g->bias) v = _mm512_add_ps(v, bs[h]);
            _mm512_mask_storeu_ps(c + 16 * h, cm[h], v);
        }
    }
}

/* Rows [m, m + rows) of the block at a (16·MR rows readable) against every panel pair of the
 * N block [nb, ne) packed at pb. Program order per pair: its tiles, the epilogue of the
 * previous pair (whose dots wait at cb), then the tile store into cb. The TMUL runs the tiles
 * while the vector ports run that epilogue, which, after the store instead, would wait for
 * the whole k loop (measured interleaved, N = K = 512: M = 512 1.67-1.82 → 1.80-1.88 TOPS,
 * M = 64 1.25-1.36 → 1.31-1.39). Slower, and so not done: packing each pair just before its
 * first tiles (M = 16..64 by 6-13 %: the tile loads wait for the packing stores), spreading
 * the epilogue rows over the k steps (M = 512 1.58 TOPS). */
KR_INLINE void row_block(const int MR, const q8amx *g, const uint8_t *a, size_t kp, int m, int rows,
                         const int8_t *pb, int nb, int ne, int32_t *cb, pending *pend) {
    const size_t panel_bytes = TILE_ROWS * kp;
    const int np = (ne - nb + 15) / 16;
    for (int p = 0; p < np; p += 2) {
        const int8_t *b = pb + (size_t)p * panel_bytes;
        const int n = nb + 16 * p, pair = np - p > 1;
        if (pair)
            tiles(MR, 2, a, kp, b, panel_bytes, kp);
        else
            tiles(MR, 1, a, kp, b, panel_bytes, kp);
        if (pend->rows) epilogue(g, cb, *pend);
        if (pair)
            store_tiles(MR, 2, cb);
        else
            store_tiles(MR, 1, cb);
        *pend = (pending){ m, rows, n, ne - n < BLOCK_COLS ? ne - n : BLOCK_COLS };
    }
}

/* Columns per N block of a slice of `cols` columns: all, unless their panels pass
 * PACK_MAX_BYTES. */
static int n_block(const kr_qmat *w, int cols) {
    const size_t kp = (size_t)w->kp;
    if (kp > 0 && (size_t)cols * kp > PACK_MAX_BYTES) {
        cols = (int)(PACK_MAX_BYTES / kp) / BLOCK_COLS * BLOCK_COLS;
        if (cols < BLOCK_COLS) cols = BLOCK_COLS;
    }
    return cols;
}

/* The thread's buffer for N blocks of block_cols: B panels, the tail rows of A, a C block. */
static size_t scratch_bytes(const kr_qmat *w, int block_cols) {
    const size_t kp = (size_t)w->kp;
    return (size_t)((block_cols + 15) / 16) * TILE_ROWS * kp + TILE_ROWS * kp +
           BLOCK_ROWS * BLOCK_COLS * 4;
}

void kr_qgemm_int8_amx_reserve(const kr_qmat *w) {
    (void)kr_thread_scratch(KR_SCRATCH_QGEMM_AMX, scratch_bytes(w, n_block(w, w->n)));
}

void kr_qgemm_int8_amx(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                       const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                       int nth) {
    int n0, n1;
    kr_gemm_split(w->n, ith, nth, &n0, &n1);
    if (n0 >= n1 || M <= 0) return;
    const size_t kp = (size_t)w->kp;
    const size_t panel_bytes = TILE_ROWS * kp;
    const int block_cols = n_block(w, n1 - n0);
    const size_t pack_bytes = (size_t)((block_cols + 15) / 16) * panel_bytes;
    const size_t tail_bytes = TILE_ROWS * kp;
    uint8_t *buf = kr_thread_scratch(KR_SCRATCH_QGEMM_AMX, scratch_bytes(w, block_cols));
    if (!buf) {
        kr_qgemm_int8_avx512(M, w, aq, ascale, azero, bias, C, ldc, ith, nth);
        return;
    }
    int8_t *pb = (int8_t *)buf;
    uint8_t *atail = buf + pack_bytes;
    int32_t *cb = (int32_t *)(atail + tail_bytes);

    const int m32 = M / BLOCK_ROWS * BLOCK_ROWS;
    const int m16 = M - m32 >= TILE_ROWS ? m32 + TILE_ROWS : m32;
    const int rem = M - m16;
    if (rem) {
        memcpy(atail, aq + (size_t)m16 * kp, (size_t)rem * kp);
        memset(atail + (size_t)rem * kp, 0, (size_t)(TILE_ROWS - rem) * kp);
    }

    const q8amx g = { ascale, w->scale, bias, azero, w->row_sum, C, ldc };
    const int8_t *wq = (const int8_t *)w->data;
    _tile_loadconfig(&k_tile_config);
    pending pend = { 0, 0, 0, 0 };
    for (int nb = n0; nb < n1; nb += block_cols) {
        const int ne = nb + block_cols < n1 ? nb + block_cols : n1;
        for (int n = nb; n < ne; n += 16)
            kr_q8_pack_panel16(wq + (size_t)n * kp, kp, ne - n < 16 ? ne - n : 16,
                               pb + (size_t)(n - nb) / 16 * panel_bytes);
        for (int m = 0; m < m32; m += BLOCK_ROWS)
            row_block(2, &g, aq + (size_t)m * kp, kp, m, BLOCK_ROWS, pb, nb, ne, cb, &pend);
        if (m16 > m32)
            row_block(1, &g, aq + (size_t)m32 * kp, kp, m32, TILE_ROWS, pb, nb, ne, cb, &pend);
        if (rem) row_block(1, &g, atail, kp, m16, rem, pb, nb, ne, cb, &pend);
    }
    if (pend.rows) epilogue(&g, cb, pend);
    _tile_release();
}

#else

/* Not built for AMX (off x86-64, or a compiler without -mamx-int8): dispatch never picks it
 * (kr_cpu_has_amx_int8() is 0), and a direct call still gives the right result. */
const int kr_qgemm_int8_amx_built = 0;

void kr_qgemm_int8_amx_reserve(const kr_qmat *w) { (void)w; }

void kr_qgemm_int8_amx(int M, const kr_qmat *w, const uint8_t *aq, const float *ascale,
                       const int32_t *azero, const float *bias, float *C, int ldc, int ith,
                       int nth) {
    kr_qgemm_int8_avx512(M, w, aq, ascale, azero, bias, C, ldc, ith, nth);
}

#endif
