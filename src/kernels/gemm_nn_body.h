/*
 * kernels/gemm_nn_body.h — C (+)= op(A)·B with B as stored (kernels.h: the NN and TN GEMMs),
 * written once for both vector widths over the names of simd_width.h. gemm_nn_avx2.c and
 * gemm_nn_avx512.c define KR_WIDTH_AVX2 / KR_WIDTH_AVX512, include simd_width.h, define
 *   GNN_MR              rows of the register tile (the tile is GNN_MR × 2·VW_W)
 *   GNN_STOREN(p, n, v) the first n lanes to p (writes n floats only)
 * and may define
 *   GNN_PACK_A_TILE(rows, lda, d)  GNN_MR rows × VW_W values of k of an NN A (rows at lda)
 *                       into d as pack_a lays them out (faster than the generic transpose)
 *
 * The BLIS loop nest: a thread takes its rows or columns (kr_gemm_nn_split: the larger side
 * is cut, so each thread packs only its part of the larger operand), and for each block of KC
 * values of k packs its B rows into strips of 2·VW_W columns (zero-padded), then for each
 * block of MC rows packs A into tiles of GNN_MR rows interleaved by k (zero-padded), and runs
 * the register tile over every (tile, strip): per k one broadcast of each A value against the
 * two B vectors. A tile (GNN_MR × KC floats, 12 KB for AVX-512) stays in L1 while the strips
 * of the B block stream from L2 past it (the order BLIS uses: the broadcast operand is the
 * one kept close), the A block in L2 too.
 *
 * Every C element is one lane: its old value (accumulate, or a later k block), its column's
 * bias (kr_gemm_nn_bias_f32) or 0, then one
 * fused multiply-add per k in order; stored and reloaded between k blocks, which changes no
 * bit. So its value depends on K and the data only (kernels.h's contract), and the fallback
 * without scratch (fmaf in the same order) gives the same bits.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels_internal.h"

#define GNN_NR (2 * VW_W)

enum { GNN_KC = 256, GNN_MC = GNN_MR * 16, GNN_NC = 1024 };

/* One full GNN_MR × GNN_NR tile over kc values of k from packed a (kc × MR) and b (kc × NR),
 * from C (load_c), else from the NR values at init (the bias) in every row, else from 0. */
static inline __attribute__((always_inline)) void VW_NAME(tile)(int kc, const float *a,
                                                                const float *b, float *c, int ldc,
                                                                int load_c, const float *init) {
    VW_V acc[GNN_MR][2];
    const VW_V i0 = init ? VW_LOAD(init) : VW_ZERO(), i1 = init ? VW_LOAD(init + VW_W) : i0;
#pragma GCC unroll 16
    for (int r = 0; r < GNN_MR; r++) {
        acc[r][0] = load_c ? VW_LOAD(c + (size_t)r * (size_t)ldc) : i0;
        acc[r][1] = load_c ? VW_LOAD(c + (size_t)r * (size_t)ldc + VW_W) : i1;
    }
    for (int k = 0; k < kc; k++, a += GNN_MR, b += GNN_NR) {
        VW_V b0 = VW_LOAD(b), b1 = VW_LOAD(b + VW_W);
#pragma GCC unroll 16
        for (int r = 0; r < GNN_MR; r++) {
            VW_V ar = VW_BCAST(a + r);
            acc[r][0] = VW_FMA(ar, b0, acc[r][0]);
            acc[r][1] = VW_FMA(ar, b1, acc[r][1]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < GNN_MR; r++) {
        VW_STORE(c + (size_t)r * (size_t)ldc, acc[r][0]);
        VW_STORE(c + (size_t)r * (size_t)ldc + VW_W, acc[r][1]);
    }
}

/* B rows [k0, k0 + kc) × columns [n0, n0 + nc) into strips of NR columns, k-major. Row by
 * row, so that the reads run along B's rows (a strip at a time would read a few lines per
 * row at B's stride, which the hardware prefetchers do not follow across pages: the
 * operands of a weight gradient come from memory). */
static void VW_NAME(pack_b)(int kc, int nc, const float *B, int ldb, int k0, int n0, float *bp) {
    const int full = nc / GNN_NR * GNN_NR, w = nc - full;
    const int w0 = w < VW_W ? w : VW_W, w1 = w - w0;
    const size_t strip = (size_t)kc * GNN_NR;
    for (int k = 0; k < kc; k++) {
        const float *src = B + (size_t)(k0 + k) * (size_t)ldb + (size_t)n0;
        float *d = bp + (size_t)k * GNN_NR;
        for (int s = 0; s < full; s += GNN_NR, d += strip) {
            VW_STORE(d, VW_LOAD(src + s));
            VW_STORE(d + VW_W, VW_LOAD(src + s + VW_W));
        }
        if (w) {
            VW_STORE(d, VW_LOADN(src + full, w0));
            VW_STORE(d + VW_W, w1 > 0 ? VW_LOADN(src + full + VW_W, w1) : VW_ZERO());
        }
    }
}

/* op(A) rows [m0, m0 + mc) × k [k0, k0 + kc) into tiles of MR rows, k-major within a tile:
 * for NN, W×W blocks of (rows, k) transposed in registers; for TN (A stored [K][M], a tile's
 * MR values of one k contiguous) row by row of A, as pack_b. */
static void VW_NAME(pack_a)(int trans, int mc, int kc, const float *A, int lda, int m0, int k0,
                            float *ap) {
    if (trans) {
        const size_t tile = (size_t)kc * GNN_MR;
        for (int k = 0; k < kc; k++) {
            const float *src = A + (size_t)(k0 + k) * (size_t)lda + (size_t)m0;
            float *d = ap + (size_t)k * GNN_MR;
            for (int t = 0; t < mc; t += GNN_MR, d += tile) {
                int h = mc - t < GNN_MR ? mc - t : GNN_MR;
                GNN_STOREN(d, GNN_MR, VW_LOADN(src + t, h));
            }
        }
        return;
    }
    for (int t = 0; t < mc; t += GNN_MR) {
        int h = mc - t < GNN_MR ? mc - t : GNN_MR;
        float *d = ap + (size_t)t * (size_t)kc;
        const float *rows = A + (size_t)(m0 + t) * (size_t)lda + (size_t)k0;
        int kb = 0;
#ifdef GNN_PACK_A_TILE
        if (h == GNN_MR)
            for (; kb + VW_W <= kc; kb += VW_W)
                GNN_PACK_A_TILE(rows + kb, lda, d + (size_t)kb * GNN_MR);
#endif
        for (; kb < kc; kb += VW_W) {
            int kn = kc - kb < VW_W ? kc - kb : VW_W;
            VW_V r[VW_W];
#pragma GCC unroll 16
            for (int i = 0; i < VW_W; i++)
                r[i] =
                    i < h ? VW_LOADN(rows + (size_t)i * (size_t)lda + (size_t)kb, kn) : VW_ZERO();
            VW_TRANSPOSE(r);
            for (int j = 0; j < kn; j++) GNN_STOREN(d + (size_t)(kb + j) * GNN_MR, GNN_MR, r[j]);
        }
    }
}

/* Without scratch: every element in place, fmaf in the packed path's order (same bits). */
static void VW_NAME(unpacked)(int trans, int M, int K, const float *A, int lda, const float *B,
                              int ldb, const float *bias, float *C, int ldc, int accumulate, int n0,
                              int n1) {
    for (int m = 0; m < M; m++)
        for (int n = n0; n < n1; n++) {
            float *c = C + (size_t)m * (size_t)ldc + (size_t)n;
            float acc = accumulate ? *c : bias ? bias[n] : 0.0f;
            for (int k = 0; k < K; k++) {
                float a = trans ? A[(size_t)k * (size_t)lda + (size_t)m]
                                : A[(size_t)m * (size_t)lda + (size_t)k];
                acc = fmaf(a, B[(size_t)k * (size_t)ldb + (size_t)n], acc);
            }
            *c = acc;
        }
}

static void VW_NAME(gemm)(int trans, int M, int N, int K, const float *A, int lda, const float *B,
                          int ldb, const float *bias, float *C, int ldc, int accumulate, int ith,
                          int nth) {
    int m0, m1, n0, n1;
    kr_gemm_nn_split(M, N, ith, nth, &m0, &m1, &n0, &n1);
    if (n0 >= n1 || m0 >= m1) return;
    /* this thread's rows as a GEMM of their own: A's rows (NN) or columns (TN), C's rows */
    A += trans ? (size_t)m0 : (size_t)m0 * (size_t)lda;
    C += (size_t)m0 * (size_t)ldc;
    M = m1 - m0;
    if (K <= 0) {
        if (!accumulate)
            for (int m = 0; m < M; m++) {
                float *c = C + (size_t)m * (size_t)ldc + (size_t)n0;
                if (bias)
                    memcpy(c, bias + n0, (size_t)(n1 - n0) * sizeof(float));
                else
                    memset(c, 0, (size_t)(n1 - n0) * sizeof(float));
            }
        return;
    }
    const size_t b_floats = (size_t)GNN_KC * GNN_NC, a_floats = (size_t)GNN_KC * GNN_MC;
    float *bp = kr_thread_scratch(KR_SCRATCH_GEMM_NN, (b_floats + a_floats) * sizeof(float));
    if (!bp) {
        VW_NAME(unpacked)(trans, M, K, A, lda, B, ldb, bias, C, ldc, accumulate, n0, n1);
        return;
    }
    float *ap = bp + b_floats;
    float edge[GNN_MR * GNN_NR];
    for (int nb = n0; nb < n1; nb += GNN_NC) {
        int nc = n1 - nb < GNN_NC ? n1 - nb : GNN_NC;
        for (int k0 = 0; k0 < K; k0 += GNN_KC) {
            int kc = K - k0 < GNN_KC ? K - k0 : GNN_KC;
            int load_c = accumulate || k0 > 0;
            const float *init = load_c ? NULL : bias; /* the first k block starts from it */
            VW_NAME(pack_b)(kc, nc, B, ldb, k0, nb, bp);
            for (int mb = 0; mb < M; mb += GNN_MC) {
                int mc = M - mb < GNN_MC ? M - mb : GNN_MC;
                VW_NAME(pack_a)(trans, mc, kc, A, lda, mb, k0, ap);
                for (int t = 0; t < mc; t += GNN_MR) {
                    int h = mc - t < GNN_MR ? mc - t : GNN_MR;
                    const float *at = ap + (size_t)t * (size_t)kc;
                    for (int s = 0; s < nc; s += GNN_NR) {
                        int w = nc - s < GNN_NR ? nc - s : GNN_NR;
                        const float *bs = bp + (size_t)s * (size_t)kc;
                        float *c = C + (size_t)(mb + t) * (size_t)ldc + (size_t)(nb + s);
                        if (w == GNN_NR && h == GNN_MR) {
                            VW_NAME(tile)(kc, at, bs, c, ldc, load_c, init ? init + nb + s : NULL);
                            continue;
                        }
                        /* an edge tile runs on a full-size copy of its real part */
                        for (int r = 0; r < GNN_MR; r++)
                            for (int j = 0; j < GNN_NR; j++)
                                edge[r * GNN_NR + j] = r >= h || j >= w ? 0.0f
                                                       : load_c
                                                           ? c[(size_t)r * (size_t)ldc + (size_t)j]
                                                       : init ? init[nb + s + j]
                                                              : 0.0f;
                        VW_NAME(tile)(kc, at, bs, edge, GNN_NR, 1, NULL);
                        for (int r = 0; r < h; r++)
                            memcpy(c + (size_t)r * (size_t)ldc, edge + r * GNN_NR,
                                   (size_t)w * sizeof(float));
                    }
                }
            }
        }
    }
}

void VW_NAME(kr_gemm_nn_f32)(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                             float *C, int ldc, int accumulate, int ith, int nth) {
    VW_NAME(gemm)(0, M, N, K, A, lda, B, ldb, NULL, C, ldc, accumulate, ith, nth);
}

void VW_NAME(kr_gemm_tn_f32)(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                             float *C, int ldc, int accumulate, int ith, int nth) {
    VW_NAME(gemm)(1, M, N, K, A, lda, B, ldb, NULL, C, ldc, accumulate, ith, nth);
}

void VW_NAME(kr_gemm_nn_bias_f32)(int M, int N, int K, const float *A, int lda, const float *B,
                                  int ldb, const float *bias, float *C, int ldc, int ith, int nth) {
    VW_NAME(gemm)(0, M, N, K, A, lda, B, ldb, bias, C, ldc, 0, ith, nth);
}
