/*
 * kernels/gemm_nn_body.h — C (+)= op(A)·B with B as stored (kernels.h: the NN and TN GEMMs),
 * written once for both vector widths. gemm_nn_avx2.c and gemm_nn_avx512.c define, then
 * include this file:
 *   GNN_V, GNN_W        the vector type and its float lanes
 *   GNN_MR              rows of the register tile (the tile is GNN_MR × 2·GNN_W)
 *   GNN_LOAD(p), GNN_STORE(p, v), GNN_FMA(a, b, c) = a·b + c, GNN_BCAST(p), GNN_ZERO()
 *   GNN_LOADN(p, n)     the first n lanes from p, the rest 0 (reads n floats only)
 *   GNN_STOREN(p, n, v) the first n lanes to p (writes n floats only)
 *   GNN_TRANSPOSE(r)    r[i][j] ↔ r[j][i] over an array of GNN_W vectors
 *   GNN_NAME(x)         x with the ISA's suffix
 *
 * The BLIS loop nest: a thread takes its columns of N (kr_gemm_split), and for each block of
 * KC values of k packs its B rows into strips of 2·GNN_W columns (zero-padded), then for each
 * block of MC rows packs A into tiles of GNN_MR rows interleaved by k (zero-padded), and runs
 * the register tile over every (strip, tile): per k one broadcast of each A value against the
 * two B vectors. A strip (KC × 2·GNN_W floats, 32 KB for AVX-512) stays in L1 across the tiles
 * of an MC block, the A block in L2.
 *
 * Every C element is one lane: its old value (accumulate, or a later k block) or 0, then one
 * fused multiply-add per k in order; stored and reloaded between k blocks, which changes no
 * bit. So its value depends on K and the data only (kernels.h's contract), and the fallback
 * without scratch (fmaf in the same order) gives the same bits.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels_internal.h"

#define GNN_NR (2 * GNN_W)

enum { GNN_KC = 256, GNN_MC = GNN_MR * 16, GNN_NC = 1024 };

/* One full GNN_MR × GNN_NR tile over kc values of k from packed a (kc × MR) and b (kc × NR). */
static inline __attribute__((always_inline)) void
GNN_NAME(tile)(int kc, const float *a, const float *b, float *c, int ldc, int load_c) {
    GNN_V acc[GNN_MR][2];
#pragma GCC unroll 16
    for (int r = 0; r < GNN_MR; r++) {
        acc[r][0] = load_c ? GNN_LOAD(c + (size_t)r * (size_t)ldc) : GNN_ZERO();
        acc[r][1] = load_c ? GNN_LOAD(c + (size_t)r * (size_t)ldc + GNN_W) : GNN_ZERO();
    }
    for (int k = 0; k < kc; k++, a += GNN_MR, b += GNN_NR) {
        GNN_V b0 = GNN_LOAD(b), b1 = GNN_LOAD(b + GNN_W);
#pragma GCC unroll 16
        for (int r = 0; r < GNN_MR; r++) {
            GNN_V ar = GNN_BCAST(a + r);
            acc[r][0] = GNN_FMA(ar, b0, acc[r][0]);
            acc[r][1] = GNN_FMA(ar, b1, acc[r][1]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < GNN_MR; r++) {
        GNN_STORE(c + (size_t)r * (size_t)ldc, acc[r][0]);
        GNN_STORE(c + (size_t)r * (size_t)ldc + GNN_W, acc[r][1]);
    }
}

/* B rows [k0, k0 + kc) × columns [n0, n0 + nc) into strips of NR columns, k-major. */
static void GNN_NAME(pack_b)(int kc, int nc, const float *B, int ldb, int k0, int n0, float *bp) {
    for (int s = 0; s < nc; s += GNN_NR) {
        int w = nc - s < GNN_NR ? nc - s : GNN_NR;
        float *d = bp + (size_t)s * (size_t)kc;
        const float *src = B + (size_t)k0 * (size_t)ldb + (size_t)(n0 + s);
        if (w == GNN_NR) {
            for (int k = 0; k < kc; k++, d += GNN_NR, src += ldb) {
                GNN_STORE(d, GNN_LOAD(src));
                GNN_STORE(d + GNN_W, GNN_LOAD(src + GNN_W));
            }
        } else {
            int w0 = w < GNN_W ? w : GNN_W, w1 = w - w0;
            for (int k = 0; k < kc; k++, d += GNN_NR, src += ldb) {
                GNN_STORE(d, GNN_LOADN(src, w0));
                GNN_STORE(d + GNN_W, w1 > 0 ? GNN_LOADN(src + GNN_W, w1) : GNN_ZERO());
            }
        }
    }
}

/* op(A) rows [m0, m0 + mc) × k [k0, k0 + kc) into tiles of MR rows, k-major within a tile:
 * for NN, W×W blocks of (rows, k) transposed in registers. */
static void GNN_NAME(pack_a)(int trans, int mc, int kc, const float *A, int lda, int m0, int k0,
                             float *ap) {
    for (int t = 0; t < mc; t += GNN_MR) {
        int h = mc - t < GNN_MR ? mc - t : GNN_MR;
        float *d = ap + (size_t)t * (size_t)kc;
        if (trans) { /* A stored [K][M]: a tile's MR values of one k are contiguous */
            const float *src = A + (size_t)k0 * (size_t)lda + (size_t)(m0 + t);
            for (int k = 0; k < kc; k++, d += GNN_MR, src += lda)
                GNN_STOREN(d, GNN_MR, GNN_LOADN(src, h));
            continue;
        }
        const float *rows = A + (size_t)(m0 + t) * (size_t)lda + (size_t)k0;
        for (int kb = 0; kb < kc; kb += GNN_W) {
            int kn = kc - kb < GNN_W ? kc - kb : GNN_W;
            GNN_V r[GNN_W];
#pragma GCC unroll 16
            for (int i = 0; i < GNN_W; i++)
                r[i] =
                    i < h ? GNN_LOADN(rows + (size_t)i * (size_t)lda + (size_t)kb, kn) : GNN_ZERO();
            GNN_TRANSPOSE(r);
            for (int j = 0; j < kn; j++) GNN_STOREN(d + (size_t)(kb + j) * GNN_MR, GNN_MR, r[j]);
        }
    }
}

/* Without scratch: every element in place, fmaf in the packed path's order (same bits). */
static void GNN_NAME(unpacked)(int trans, int M, int K, const float *A, int lda, const float *B,
                               int ldb, float *C, int ldc, int accumulate, int n0, int n1) {
    for (int m = 0; m < M; m++)
        for (int n = n0; n < n1; n++) {
            float *c = C + (size_t)m * (size_t)ldc + (size_t)n;
            float acc = accumulate ? *c : 0.0f;
            for (int k = 0; k < K; k++) {
                float a = trans ? A[(size_t)k * (size_t)lda + (size_t)m]
                                : A[(size_t)m * (size_t)lda + (size_t)k];
                acc = fmaf(a, B[(size_t)k * (size_t)ldb + (size_t)n], acc);
            }
            *c = acc;
        }
}

static void GNN_NAME(gemm)(int trans, int M, int N, int K, const float *A, int lda, const float *B,
                           int ldb, float *C, int ldc, int accumulate, int ith, int nth) {
    int n0, n1;
    kr_gemm_split(N, ith, nth, &n0, &n1);
    if (n0 >= n1 || M <= 0) return;
    if (K <= 0) {
        if (!accumulate)
            for (int m = 0; m < M; m++)
                memset(C + (size_t)m * (size_t)ldc + (size_t)n0, 0,
                       (size_t)(n1 - n0) * sizeof(float));
        return;
    }
    const size_t b_floats = (size_t)GNN_KC * GNN_NC, a_floats = (size_t)GNN_KC * GNN_MC;
    float *bp = kr_thread_scratch(KR_SCRATCH_GEMM_NN, (b_floats + a_floats) * sizeof(float));
    if (!bp) {
        GNN_NAME(unpacked)(trans, M, K, A, lda, B, ldb, C, ldc, accumulate, n0, n1);
        return;
    }
    float *ap = bp + b_floats;
    float edge[GNN_MR * GNN_NR];
    for (int nb = n0; nb < n1; nb += GNN_NC) {
        int nc = n1 - nb < GNN_NC ? n1 - nb : GNN_NC;
        for (int k0 = 0; k0 < K; k0 += GNN_KC) {
            int kc = K - k0 < GNN_KC ? K - k0 : GNN_KC;
            int load_c = accumulate || k0 > 0;
            GNN_NAME(pack_b)(kc, nc, B, ldb, k0, nb, bp);
            for (int mb = 0; mb < M; mb += GNN_MC) {
                int mc = M - mb < GNN_MC ? M - mb : GNN_MC;
                GNN_NAME(pack_a)(trans, mc, kc, A, lda, mb, k0, ap);
                for (int s = 0; s < nc; s += GNN_NR) {
                    int w = nc - s < GNN_NR ? nc - s : GNN_NR;
                    const float *bs = bp + (size_t)s * (size_t)kc;
                    for (int t = 0; t < mc; t += GNN_MR) {
                        int h = mc - t < GNN_MR ? mc - t : GNN_MR;
                        const float *at = ap + (size_t)t * (size_t)kc;
                        float *c = C + (size_t)(mb + t) * (size_t)ldc + (size_t)(nb + s);
                        if (w == GNN_NR && h == GNN_MR) {
                            GNN_NAME(tile)(kc, at, bs, c, ldc, load_c);
                            continue;
                        }
                        /* an edge tile runs on a full-size copy of its real part */
                        for (int r = 0; r < GNN_MR; r++)
                            for (int j = 0; j < GNN_NR; j++)
                                edge[r * GNN_NR + j] = load_c && r < h && j < w
                                                           ? c[(size_t)r * (size_t)ldc + (size_t)j]
                                                           : 0.0f;
                        GNN_NAME(tile)(kc, at, bs, edge, GNN_NR, load_c);
                        for (int r = 0; r < h; r++)
                            memcpy(c + (size_t)r * (size_t)ldc, edge + r * GNN_NR,
                                   (size_t)w * sizeof(float));
                    }
                }
            }
        }
    }
}
