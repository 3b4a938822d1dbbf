/*
 * kernels/attn_head_body.h — attention of one head over a sequence (train_kernels.h), forward
 * and backward, written once for both vector widths over the names of simd_width.h.
 * attn_head_avx2.c and attn_head_avx512.c include that, define
 *   AH_ACC               accumulators a register tile holds (24 AVX-512, 12 AVX2)
 *   AH_NAME(x)           x with the ISA's suffix
 * and include this file.
 *
 * The queries are in the vector lanes. A block of QB = 3·VW_W queries is transposed once
 * (qt[c][i] = scale·q_i[c]); its scores against every key it sees come out key-major,
 * st[j][i] = Σ_c k_j[c]·qt[c][i], from a GEMM register tile (AH_ACC/3 keys × the three
 * vectors) over K packed in tiles of keys (kp). The softmax then runs down the key rows with
 * plain vector max / exp / add — every lane a query, no horizontal sums — and leaves the
 * block's exponentials e = exp(s − max) key-major with each query's r = 1/Σe aside, which is
 * how the products after it want them:
 *   out rows  O[i][c] = r_i·Σ_j e[j][i]·v_j[c]    broadcast st[j][i] (row j, lane i) × v_j
 *   dQ rows   dQ[i][c] = Σ_j dS[j][i]·k_j[c]
 *   dK, dV    dK[j][c] += Σ_i dS[j][i]·q_i[c]     broadcast st[j][i] (row j of the block) × q_i
 * all rank-1 updates of register tiles of (rows × head_dim vectors), head_dim cut in chunks of
 * at most 4 vectors with AH_ACC / chunk rows, which divide QB (only the sequence's last block
 * has a ragged tile). The normalisation is never a pass of its own: the forward scales O's
 * rows by r, the backward works with r·dO — dV += eᵀ·(r·dO), dP' = (r·dO)·Vᵀ = r·dP and
 * dS = e ⊙ (dP' − r·Σ dO⊙O)·scale, which is P ⊙ (dP − Σ dO⊙O)·scale. K, V and the block's
 * rows are copied to contiguous rows first (rows of a [T][d_model] matrix are a power-of-two
 * stride apart and would fight over a few L1 sets). The backward recomputes the scores and the
 * softmax with the same calls as the forward, so its exponentials are the forward's bit for
 * bit.
 *
 * Each output is one fixed chain of operations: O and dQ over the keys in order, dK and dV over
 * the queries in order (block after block), a score over c in order — so results depend on
 * the shapes and the data only.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/train_kernels.h"

#define AH_QB (3 * VW_W)
#define AH_R1 (AH_ACC / 3) /* keys per score tile */

/* ---------------------------------------------------------------- register tiles */

/* c[r][·] (+)= Σ_{k<n} a[r·ARS + k·AKS] · b[k·ldb + ·] for r < R over CV vectors of columns,
 * the last vector's first `last` lanes only; row r's sums times rs[r] when rs is given. */
#define AH_TILE(NAME, R, CV, ARS, AKS)                                                            \
    static void AH_NAME(NAME)(int n, const float *a, const float *b, int ldb, int last, float *c, \
                              int ldc, int load_c, const float *rs) {                             \
        VW_V acc[R][CV];                                                                          \
        _Pragma("GCC unroll 24") for (int r = 0; r < R; r++) {                                    \
            _Pragma("GCC unroll 4") for (int v = 0; v < CV; v++) {                                \
                const float *cp = c + (size_t)r * (size_t)ldc + v * VW_W;                         \
                acc[r][v] = !load_c ? VW_ZERO() : v == CV - 1 ? VW_LOADN(cp, last) : VW_LOAD(cp); \
            }                                                                                     \
        }                                                                                         \
        for (int k = 0; k < n; k++, a += (AKS), b += ldb) {                                       \
            VW_V bv[CV];                                                                          \
            _Pragma("GCC unroll 4") for (int v = 0; v < CV; v++) bv[v] =                          \
                v == CV - 1 ? VW_LOADN(b + v * VW_W, last) : VW_LOAD(b + v * VW_W);               \
            _Pragma("GCC unroll 24") for (int r = 0; r < R; r++) {                                \
                VW_V ar = VW_BCAST(a + r * (ARS));                                                \
                _Pragma("GCC unroll 4") for (int v = 0; v < CV; v++) acc[r][v] =                  \
                    VW_FMA(ar, bv[v], acc[r][v]);                                                 \
            }                                                                                     \
        }                                                                                         \
        if (rs) {                                                                                 \
            _Pragma("GCC unroll 24") for (int r = 0; r < R; r++) {                                \
                VW_V sr = VW_BCAST(rs + r);                                                       \
                _Pragma("GCC unroll 4") for (int v = 0; v < CV; v++) acc[r][v] =                  \
                    VW_MUL(acc[r][v], sr);                                                        \
            }                                                                                     \
        }                                                                                         \
        _Pragma("GCC unroll 24") for (int r = 0; r < R; r++) {                                    \
            _Pragma("GCC unroll 4") for (int v = 0; v < CV; v++) {                                \
                float *cp = c + (size_t)r * (size_t)ldc + v * VW_W;                               \
                if (v == CV - 1)                                                                  \
                    VW_STOREN(cp, last, acc[r][v]);                                               \
                else                                                                              \
                    VW_STORE(cp, acc[r][v]);                                                      \
            }                                                                                     \
        }                                                                                         \
    }

/* scores: AH_R1 keys of a packed tile (a[c·R1 + r]) × the block's three query vectors */
AH_TILE(score_tile, AH_R1, 3, 1, AH_R1)
/* query rows × head_dim: a = st + first query, a[r + j·QB] */
AH_TILE(rows_tile1, AH_ACC, 1, 1, AH_QB)
AH_TILE(rows_tile2, AH_ACC / 2, 2, 1, AH_QB)
AH_TILE(rows_tile3, AH_ACC / 3, 3, 1, AH_QB)
AH_TILE(rows_tile4, AH_ACC / 4, 4, 1, AH_QB)
/* key rows × head_dim: a = st + first key's row, a[r·QB + i] */
AH_TILE(keys_tile1, AH_ACC, 1, AH_QB, 1)
AH_TILE(keys_tile2, AH_ACC / 2, 2, AH_QB, 1)
AH_TILE(keys_tile3, AH_ACC / 3, 3, AH_QB, 1)
AH_TILE(keys_tile4, AH_ACC / 4, 4, AH_QB, 1)

typedef void (*AH_NAME(tile_fn))(int n, const float *a, const float *b, int ldb, int last, float *c,
                                 int ldc, int load_c, const float *rs);

/* A tile of which only `rows` rows are real (the others would fall outside C): run on a
 * full-size copy, then copy the real rows back. */
static void AH_NAME(edge_tile)(AH_NAME(tile_fn) fn, int CV, int rows, int n, const float *a,
                               const float *b, int ldb, int last, float *c, int ldc, int load_c,
                               const float *rs) {
    float edge[KR_AH_ROWS_MAX * 4 * VW_W], rs_edge[KR_AH_ROWS_MAX];
    const int w = (CV - 1) * VW_W + last, lde = CV * VW_W;
    memset(edge, 0, sizeof edge);
    memset(rs_edge, 0, sizeof rs_edge);
    if (load_c)
        for (int r = 0; r < rows; r++)
            memcpy(edge + r * lde, c + (size_t)r * (size_t)ldc, (size_t)w * sizeof(float));
    if (rs) memcpy(rs_edge, rs, (size_t)rows * sizeof(float));
    fn(n, a, b, ldb, last, edge, lde, load_c, rs ? rs_edge : NULL);
    for (int r = 0; r < rows; r++)
        memcpy(c + (size_t)r * (size_t)ldc, edge + r * lde, (size_t)w * sizeof(float));
}

/* C rows [0, n_rows) (ldc) (+)= Σ_{k<n} a·b over head_dim columns: `keys` 0 for query rows
 * (a[r + k·QB]: O, dQ; row r times rs[r] when rs is given), 1 for key rows (a[r·QB + k]: dK,
 * dV); b rows are head_dim apart. */
static void AH_NAME(head_rows)(int keys, int n_rows, int n, const float *a, const float *b, int hd,
                               float *c, int ldc, int load_c, const float *rs) {
    static const AH_NAME(tile_fn) rows_fns[4] = { AH_NAME(rows_tile1), AH_NAME(rows_tile2),
                                                  AH_NAME(rows_tile3), AH_NAME(rows_tile4) };
    static const AH_NAME(tile_fn) keys_fns[4] = { AH_NAME(keys_tile1), AH_NAME(keys_tile2),
                                                  AH_NAME(keys_tile3), AH_NAME(keys_tile4) };
    const int nv = (hd + VW_W - 1) / VW_W;
    for (int v0 = 0; v0 < nv; v0 += 4) {
        const int cv = nv - v0 < 4 ? nv - v0 : 4, R = AH_ACC / cv;
        const int c0 = v0 * VW_W, rest = hd - c0 - (cv - 1) * VW_W;
        const int last = rest < VW_W ? rest : VW_W; /* lanes of the chunk's last vector */
        AH_NAME(tile_fn) fn = keys ? keys_fns[cv - 1] : rows_fns[cv - 1];
        for (int r0 = 0; r0 < n_rows; r0 += R) {
            const float *ar = a + (keys ? (size_t)r0 * AH_QB : (size_t)r0);
            float *cr = c + (size_t)r0 * (size_t)ldc + (size_t)c0;
            const float *rr = rs ? rs + r0 : NULL;
            if (n_rows - r0 >= R)
                fn(n, ar, b + c0, hd, last, cr, ldc, load_c, rr);
            else
                AH_NAME(edge_tile)
            (fn, cv, n_rows - r0, n, ar, b + c0, hd, last, cr, ldc, load_c, rr);
        }
    }
}

/* ---------------------------------------------------------------- packing */

/* dst[t][c] = src[t·ld + c]: n rows of hd floats made contiguous. */
static void AH_NAME(copy_rows)(const float *src, int ld, int n, int hd, float *dst) {
    for (int t = 0; t < n; t++, src += ld, dst += hd) {
        int c = 0;
        for (; c + VW_W <= hd; c += VW_W) VW_STORE(dst + c, VW_LOAD(src + c));
        if (c < hd) VW_STOREN(dst + c, hd - c, VW_LOADN(src + c, hd - c));
    }
}

/* dst[c·ldd + r] = scale·src[r·hd + c] for rows r < n (contiguous, hd floats) and c < hd, lanes
 * n .. lanes − 1 of each dst row zero (lanes <= VW_W): VW_W × VW_W blocks through registers. */
static void AH_NAME(transpose_rows)(const float *src, int n, int hd, float scale, float *dst,
                                    int ldd, int lanes) {
    const VW_V s = VW_SET1(scale);
    for (int r0 = 0; r0 < lanes; r0 += VW_W)
        for (int c0 = 0; c0 < hd; c0 += VW_W) {
            const int nc = hd - c0 < VW_W ? hd - c0 : VW_W;
            VW_V x[VW_W];
            for (int i = 0; i < VW_W; i++)
                x[i] = r0 + i < n
                           ? VW_MUL(VW_LOADN(src + (size_t)(r0 + i) * (size_t)hd + c0, nc), s)
                           : VW_ZERO();
            VW_TRANSPOSE(x);
            const int w = lanes - r0 < VW_W ? lanes - r0 : VW_W;
            for (int j = 0; j < nc; j++)
                VW_STOREN(dst + (size_t)(c0 + j) * (size_t)ldd + r0, w, x[j]);
        }
}

/* Contiguous rows [0, n) into tiles of R1 rows, c-major within a tile (rows past n zero):
 * the broadcast side of score_tile. */
static void AH_NAME(pack_tiles)(const float *rows, int n, int hd, float *dst) {
    for (int t0 = 0; t0 < n; t0 += AH_R1) AH_NAME(transpose_rows)
    (rows + (size_t)t0 * (size_t)hd, n - t0 < AH_R1 ? n - t0 : AH_R1, hd, 1.0f,
     dst + (size_t)t0 * (size_t)hd, AH_R1, AH_R1);
}

/* dst[c][i] = scale·src[i][c] for the block's nq rows (contiguous), zero lanes nq .. QB − 1. */
static void AH_NAME(transpose_block)(const float *src, int nq, int hd, float scale, float *dst) {
    AH_NAME(transpose_rows)(src, nq, hd, scale, dst, AH_QB, AH_QB);
}

/* ---------------------------------------------------------------- the block's softmax */

typedef struct AH_NAME(block) {
    const kr_attn_head *h;
    int i0, nq, nk; /* queries [i0, i0 + nq), keys [0, nk) */
} AH_NAME(block);

/* Lanes (queries) of vector v of row j that see key j. */
static inline VW_M AH_NAME(visible)(const AH_NAME(block) * b, int j, int v) {
    int lo = b->h->causal ? j - b->i0 - v * VW_W : 0;
    return VW_LANES(lo, b->nq - v * VW_W);
}

/* st (nk rows of QB scores) → e = exp(s − the query's max), exactly 0 where the query does not
 * see the key; rq[i] = 1 / Σ_j e (0 for lanes past the sequence, which see nothing). Every
 * query of a whole block sees the keys before its first: only the diagonal rows (and a short
 * last block) need the mask. */
static void AH_NAME(softmax)(const AH_NAME(block) * b, float *st, float *rq) {
    const int open = b->nq == AH_QB ? (b->h->causal ? b->i0 : b->nk) : 0;
    for (int v = 0; v < 3; v++) {
        float *col = st + v * VW_W;
        VW_V mx = VW_SET1(-INFINITY), sum = VW_ZERO();
        for (int j = 0; j < open; j++) mx = VW_MAX(mx, VW_LOAD(col + (size_t)j * AH_QB));
        for (int j = open; j < b->nk; j++)
            mx = VW_MAX(mx, VW_BLEND(AH_NAME(visible)(b, j, v), VW_LOAD(col + (size_t)j * AH_QB),
                                     VW_SET1(-INFINITY)));
        for (int j = 0; j < open; j++) {
            VW_V e = VW_EXP(VW_SUB(VW_LOAD(col + (size_t)j * AH_QB), mx));
            VW_STORE(col + (size_t)j * AH_QB, e);
            sum = VW_ADD(sum, e);
        }
        for (int j = open; j < b->nk; j++) {
            VW_V e = VW_EXP(VW_SUB(VW_LOAD(col + (size_t)j * AH_QB), mx));
            e = VW_BLEND(AH_NAME(visible)(b, j, v), e, VW_ZERO());
            VW_STORE(col + (size_t)j * AH_QB, e);
            sum = VW_ADD(sum, e);
        }
        VW_STORE(rq + v * VW_W,
                 VW_BLEND(VW_GT(sum, VW_ZERO()), VW_DIV(VW_SET1(1.0f), sum), VW_ZERO()));
    }
}

/* st = the block's exponentials, rq their queries' 1/Σ: scores from packed K (kp) and the
 * block's transposed queries. */
static void AH_NAME(probs)(const AH_NAME(block) * b, const float *kp, const float *qt, float *st,
                           float *rq) {
    const int hd = b->h->head_dim;
    for (int j0 = 0; j0 < b->nk; j0 += AH_R1) AH_NAME(score_tile)
    (hd, kp + (size_t)j0 * (size_t)hd, qt, AH_QB, VW_W, st + (size_t)j0 * AH_QB, AH_QB, 0, NULL);
    AH_NAME(softmax)(b, st, rq);
}

/* The dropout of the block's (query, key) entries; a factor of the probabilities, so of e. */
static void AH_NAME(dropout)(const AH_NAME(block) * b, float *st) {
    for (int i = 0; i < b->nq; i++) b->h->drop(b->h->drop_ctx, b->i0 + i, 0, b->nk, st + i, AH_QB);
}

/* ---------------------------------------------------------------- scratch */

typedef struct AH_NAME(scratch) {
    float *kc, *kp, *vc, *vp; /* [T][hd] contiguous K, V; packed in tiles */
    float *qt, *gt, *qc, *gc; /* the block's scale·Qᵀ, (r·dO)ᵀ [hd][QB]; Q, r·dO rows [QB][hd] */
    float *st, *dp, *pd; /* [T + slack][QB]: e, dP' then dS, the dropped e */
    float *dsum, *rq; /* [QB] r·Σ dO⊙O, r = 1/Σ e per query */
} AH_NAME(scratch);

static float *AH_NAME(take)(float **p, size_t n) {
    float *r = *p;
    *p += (n + 15) / 16 * 16;
    return r;
}

static AH_NAME(scratch) AH_NAME(carve)(const kr_attn_head *h, float *s) {
    const size_t rows = (size_t)h->T + KR_AH_ROWS_MAX, hd = (size_t)h->head_dim;
    AH_NAME(scratch) x;
    x.kc = AH_NAME(take)(&s, rows * hd);
    x.kp = AH_NAME(take)(&s, rows * hd);
    x.vc = AH_NAME(take)(&s, rows * hd);
    x.vp = AH_NAME(take)(&s, rows * hd);
    x.qt = AH_NAME(take)(&s, hd * KR_AH_QB_MAX);
    x.gt = AH_NAME(take)(&s, hd * KR_AH_QB_MAX);
    x.qc = AH_NAME(take)(&s, hd * KR_AH_QB_MAX);
    x.gc = AH_NAME(take)(&s, hd * KR_AH_QB_MAX);
    /* the score tiles write up to a whole tile past nk; edge tiles read a tile's rows past */
    x.st = AH_NAME(take)(&s, rows * KR_AH_QB_MAX + KR_AH_ROWS_MAX);
    x.dp = AH_NAME(take)(&s, rows * KR_AH_QB_MAX + KR_AH_ROWS_MAX);
    x.pd = AH_NAME(take)(&s, rows * KR_AH_QB_MAX + KR_AH_ROWS_MAX);
    x.dsum = AH_NAME(take)(&s, KR_AH_QB_MAX);
    x.rq = AH_NAME(take)(&s, KR_AH_QB_MAX);
    return x;
}

/* ---------------------------------------------------------------- forward, backward */

static AH_NAME(block) AH_NAME(block_at)(const kr_attn_head *h, int i0) {
    AH_NAME(block) b = { h, i0, h->T - i0 < AH_QB ? h->T - i0 : AH_QB, 0 };
    b.nk = h->causal ? i0 + b.nq : h->T;
    return b;
}

void AH_NAME(kr_attn_head_fwd)(const kr_attn_head *h, const float *q, const float *k,
                               const float *v, float *out, float *scratch) {
    const int T = h->T, hd = h->head_dim;
    const size_t ld = (size_t)h->ld;
    AH_NAME(scratch) s = AH_NAME(carve)(h, scratch);
    AH_NAME(copy_rows)(k, h->ld, T, hd, s.kc);
    AH_NAME(pack_tiles)(s.kc, T, hd, s.kp);
    AH_NAME(copy_rows)(v, h->ld, T, hd, s.vc);
    for (int i0 = 0; i0 < T; i0 += AH_QB) {
        AH_NAME(block) b = AH_NAME(block_at)(h, i0);
        AH_NAME(copy_rows)(q + (size_t)i0 * ld, h->ld, b.nq, hd, s.qc);
        AH_NAME(transpose_block)(s.qc, b.nq, hd, h->scale, s.qt);
        AH_NAME(probs)(&b, s.kp, s.qt, s.st, s.rq);
        if (h->drop) AH_NAME(dropout)(&b, s.st);
        AH_NAME(head_rows)(0, b.nq, b.nk, s.st, s.vc, hd, out + (size_t)i0 * ld, h->ld, 0, s.rq);
    }
}

void AH_NAME(kr_attn_head_bwd)(const kr_attn_head *h, const float *q, const float *k,
                               const float *v, const float *out, const float *dout, float *dq,
                               float *dk, float *dv, float *scratch) {
    const int T = h->T, hd = h->head_dim;
    const size_t ld = (size_t)h->ld;
    AH_NAME(scratch) s = AH_NAME(carve)(h, scratch);
    AH_NAME(copy_rows)(k, h->ld, T, hd, s.kc);
    AH_NAME(pack_tiles)(s.kc, T, hd, s.kp);
    AH_NAME(copy_rows)(v, h->ld, T, hd, s.vc);
    AH_NAME(pack_tiles)(s.vc, T, hd, s.vp);
    for (int t = 0; t < T; t++) {
        memset(dk + (size_t)t * ld, 0, (size_t)hd * sizeof(float));
        memset(dv + (size_t)t * ld, 0, (size_t)hd * sizeof(float));
    }
    const VW_V scale = VW_SET1(h->scale);
    for (int i0 = 0; i0 < T; i0 += AH_QB) {
        AH_NAME(block) b = AH_NAME(block_at)(h, i0);
        AH_NAME(copy_rows)(q + (size_t)i0 * ld, h->ld, b.nq, hd, s.qc);
        AH_NAME(transpose_block)(s.qc, b.nq, hd, h->scale, s.qt);
        AH_NAME(probs)(&b, s.kp, s.qt, s.st, s.rq);
        /* the block's r·dO rows (and transposed), r·Σ dO⊙O per query */
        for (int i = 0; i < AH_QB; i++) {
            float d = 0.0f;
            if (i < b.nq) {
                const float *g = dout + (size_t)(i0 + i) * ld, *o = out + (size_t)(i0 + i) * ld;
                float *gr = s.gc + (size_t)i * (size_t)hd;
                const VW_V r = VW_SET1(s.rq[i]);
                VW_V acc = VW_ZERO();
                for (int c = 0; c < hd; c += VW_W) {
                    const int nc = hd - c < VW_W ? hd - c : VW_W;
                    VW_V x = VW_MUL(VW_LOADN(g + c, nc), r);
                    VW_STOREN(gr + c, nc, x);
                    acc = VW_FMA(x, VW_LOADN(o + c, nc), acc);
                }
                d = VW_HSUM(acc);
            }
            s.dsum[i] = d;
        }
        AH_NAME(transpose_block)(s.gc, b.nq, hd, 1.0f, s.gt);
        const float *used = s.st; /* the exponentials that (times r) multiplied V */
        if (h->drop) {
            memcpy(s.pd, s.st, (size_t)b.nk * AH_QB * sizeof(float));
            AH_NAME(dropout)(&b, s.pd);
            used = s.pd;
        }
        /* dV += usedᵀ·(r·dO);  dP' = (r·dO)·Vᵀ key-major, back through the dropout */
        AH_NAME(head_rows)(1, b.nk, b.nq, used, s.gc, hd, dv, h->ld, 1, NULL);
        for (int j0 = 0; j0 < b.nk; j0 += AH_R1) AH_NAME(score_tile)
        (hd, s.vp + (size_t)j0 * (size_t)hd, s.gt, AH_QB, VW_W, s.dp + (size_t)j0 * AH_QB, AH_QB, 0,
         NULL);
        if (h->drop) AH_NAME(dropout)(&b, s.dp);
        /* softmax backward: dS = e ⊙ (dP' − r·Σ dO⊙O), times the score scale */
        for (int j = 0; j < b.nk; j++)
            for (int w = 0; w < 3; w++) {
                float *g = s.dp + (size_t)j * AH_QB + w * VW_W;
                const float *e = s.st + (size_t)j * AH_QB + w * VW_W;
                VW_V x = VW_MUL(VW_LOAD(e), VW_SUB(VW_LOAD(g), VW_LOAD(s.dsum + w * VW_W)));
                VW_STORE(g, VW_MUL(x, scale));
            }
        /* dQ = dS·K (the block's rows, whole);  dK += dSᵀ·Q */
        AH_NAME(head_rows)(0, b.nq, b.nk, s.dp, s.kc, hd, dq + (size_t)i0 * ld, h->ld, 0, NULL);
        AH_NAME(head_rows)(1, b.nk, b.nq, s.dp, s.qc, hd, dk, h->ld, 1, NULL);
    }
}
