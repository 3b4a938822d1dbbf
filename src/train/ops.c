/* train/ops — see ops.h. */
#include "train/ops.h"

#include <math.h>
#include <string.h>

#include "base/rng.h"
#include "kernels/kernels.h"
#include "kernels/train_kernels.h"
#include "train/linalg.h"

/* ---------------------------------------------------------------- Linear */

void tr_linear_transpose(const tr_lin *l) {
    enum { TB = 32 }; /* blocks that stay in L1 on both sides */
    for (int i0 = 0; i0 < l->n_out; i0 += TB)
        for (int j0 = 0; j0 < l->n_in; j0 += TB) {
            int i1 = i0 + TB < l->n_out ? i0 + TB : l->n_out;
            int j1 = j0 + TB < l->n_in ? j0 + TB : l->n_in;
            for (int i = i0; i < i1; i++)
                for (int j = j0; j < j1; j++)
                    l->wt[(size_t)j * (size_t)l->n_out + (size_t)i] =
                        l->w[(size_t)i * (size_t)l->n_in + (size_t)j];
        }
}

void tr_linear_fwd(kr_pool *pool, const tr_lin *l, const float *x, int M, float *y) {
    if (l->b)
        tr_gemm_nn_bias(pool, TR_PART_GEMM_FWD, M, l->n_out, l->n_in, x, l->n_in, l->wt, l->n_out,
                        l->b, y, l->n_out);
    else
        tr_gemm_nn(pool, TR_PART_GEMM_FWD, M, l->n_out, l->n_in, x, l->n_in, l->wt, l->n_out, y,
                   l->n_out, 0);
}

void tr_linear_bwd(kr_pool *pool, const tr_lin *l, const float *dy, const float *x, int M,
                   float *dx, int accumulate) {
    if (l->gw)
        tr_gemm_tn(pool, TR_PART_GEMM_DW, l->n_out, l->n_in, M, dy, l->n_out, x, l->n_in, l->gw,
                   l->n_in, 1);
    if (l->gb) tr_colsum_add(pool, TR_PART_GEMM_DW, M, l->n_out, dy, l->n_out, l->gb);
    if (dx)
        tr_gemm_nn(pool, TR_PART_GEMM_DX, M, l->n_in, l->n_out, dy, l->n_out, l->w, l->n_in, dx,
                   l->n_in, accumulate);
}

/* ---------------------------------------------------------------- RMSNorm */

typedef struct norm_job {
    int d, accumulate;
    const float *x, *w, *dy, *rstd_in;
    float *y, *rstd, *dx, *gw;
} norm_job;

static void norm_fwd_rows(void *p, int r0, int r1) {
    const norm_job *j = p;
    const size_t o = (size_t)r0 * (size_t)j->d;
    kr_rmsnorm_fwd_rows(r1 - r0, j->d, j->x + o, j->w, TR_RMS_EPS, j->y + o, j->rstd + r0);
}

void tr_rmsnorm_fwd(kr_pool *pool, int M, int d, const float *x, const float *w, float *y,
                    float *rstd) {
    norm_job j = { .d = d, .x = x, .w = w, .y = y, .rstd = rstd };
    tr_for_rows(pool, TR_PART_NORM, M, norm_fwd_rows, &j);
}

static void norm_apply_rows(void *p, int r0, int r1) {
    const norm_job *j = p;
    const size_t o = (size_t)r0 * (size_t)j->d;
    kr_rmsnorm_apply_rows(r1 - r0, j->d, j->x + o, j->rstd_in + r0, j->w, j->y + o);
}

void tr_rmsnorm_apply(kr_pool *pool, int M, int d, const float *x, const float *rstd,
                      const float *w, float *y) {
    norm_job j = { .d = d, .x = x, .w = w, .y = y, .rstd_in = rstd };
    tr_for_rows(pool, TR_PART_NORM, M, norm_apply_rows, &j);
}

static void norm_bwd_rows(void *p, int r0, int r1) {
    const norm_job *j = p;
    const size_t o = (size_t)r0 * (size_t)j->d;
    kr_rmsnorm_bwd_rows(r1 - r0, j->d, j->dy + o, j->x + o, j->rstd_in + r0, j->w, j->dx + o,
                        j->accumulate);
}

typedef struct norm_gw_job {
    const norm_job *j;
    int M;
} norm_gw_job;

static void norm_gw_cols(void *p, int c0, int c1) {
    const norm_gw_job *g = p;
    const norm_job *j = g->j;
    kr_rmsnorm_gw_cols(g->M, j->d, c0, c1, j->dy, j->x, j->rstd_in, j->gw);
}

void tr_rmsnorm_bwd(kr_pool *pool, int M, int d, const float *dy, const float *x, const float *rstd,
                    const float *w, float *gw, float *dx, int accumulate) {
    norm_job j = { .d = d,
                   .accumulate = accumulate,
                   .x = x,
                   .w = w,
                   .dy = dy,
                   .rstd_in = rstd,
                   .dx = dx,
                   .gw = gw };
    if (gw) {
        norm_gw_job g = { &j, M };
        tr_for_cols(pool, TR_PART_NORM, d, norm_gw_cols, &g);
    }
    if (dx) tr_for_rows(pool, TR_PART_NORM, M, norm_bwd_rows, &j);
}

/* ---------------------------------------------------------------- RoPE */

void tr_rope_init(tr_rope *r, int n_pos, int head_dim, const float *inv_freq) {
    r->n_pos = n_pos;
    r->half = head_dim / 2;
    for (int t = 0; t < n_pos; t++)
        for (int i = 0; i < r->half; i++) {
            float th = (float)t * inv_freq[i];
            r->cos[(size_t)t * (size_t)r->half + (size_t)i] = cosf(th);
            r->sin[(size_t)t * (size_t)r->half + (size_t)i] = sinf(th);
        }
}

typedef struct rope_job {
    const tr_rope *r;
    int T, n_heads, ld;
    float sign; /* +1 forward, −1 backward */
    float *x;
} rope_job;

static void rope_rows(void *p, int r0, int r1) {
    const rope_job *j = p;
    const int half = j->r->half;
    /* runs of rows within one sequence: positions r % T onward, consecutive in the tables */
    for (int row = r0; row < r1;) {
        const int t = row % j->T, n = j->T - t < r1 - row ? j->T - t : r1 - row;
        kr_rope_rows(n, j->n_heads, half, j->x + (size_t)row * (size_t)j->ld, j->ld,
                     j->r->cos + (size_t)t * (size_t)half, j->r->sin + (size_t)t * (size_t)half,
                     j->sign);
        row += n;
    }
}

void tr_rope_fwd(kr_pool *pool, const tr_rope *r, int n_seq, int T, int n_heads, float *x, int ld) {
    rope_job j = { r, T, n_heads, ld, 1.0f, x };
    tr_for_rows(pool, TR_PART_ROPE, n_seq * T, rope_rows, &j);
}

void tr_rope_bwd(kr_pool *pool, const tr_rope *r, int n_seq, int T, int n_heads, float *dx,
                 int ld) {
    rope_job j = { r, T, n_heads, ld, -1.0f, dx };
    tr_for_rows(pool, TR_PART_ROPE, n_seq * T, rope_rows, &j);
}

/* ---------------------------------------------------------------- SwiGLU */

typedef struct swiglu_job {
    const float *h1c, *h3c, *dg;
    float *h1, *h3, *g;
} swiglu_job;

static void swiglu_fwd_rows(void *p, int r0, int r1) {
    const swiglu_job *j = p;
    size_t a = (size_t)r0 * 256, b = (size_t)r1 * 256;
    kr_silu_mul_f32((int)(b - a), j->h1c + a, j->h3c + a, j->g + a);
}

/* Split in chunks of 256 values (the tail chunk shorter) so a thread's range is whole. */
static void chunked(kr_pool *pool, tr_part part, size_t n, tr_rows_fn fn, void *ctx,
                    void (*tail)(void *, size_t, size_t)) {
    size_t full = n / 256;
    if (full) tr_for_rows(pool, part, (int)full, fn, ctx);
    if (full * 256 < n) tail(ctx, full * 256, n);
}

static void swiglu_fwd_tail(void *p, size_t a, size_t b) {
    const swiglu_job *j = p;
    kr_silu_mul_f32((int)(b - a), j->h1c + a, j->h3c + a, j->g + a);
}

void tr_swiglu_fwd(kr_pool *pool, size_t n, const float *h1, const float *h3, float *g) {
    swiglu_job j = { .h1c = h1, .h3c = h3, .g = g };
    chunked(pool, TR_PART_SWIGLU, n, swiglu_fwd_rows, &j, swiglu_fwd_tail);
}

static void swiglu_bwd_range(void *p, size_t a, size_t b) {
    const swiglu_job *j = p;
    kr_swiglu_bwd((int)(b - a), j->dg + a, j->h1 + a, j->h3 + a, j->g + a);
}

static void swiglu_bwd_rows(void *p, int r0, int r1) {
    swiglu_bwd_range(p, (size_t)r0 * 256, (size_t)r1 * 256);
}

void tr_swiglu_bwd(kr_pool *pool, size_t n, const float *dg, float *h1, float *h3, float *g) {
    swiglu_job j = { .dg = dg, .h1 = h1, .h3 = h3, .g = g };
    chunked(pool, TR_PART_SWIGLU, n, swiglu_bwd_rows, &j, swiglu_bwd_range);
}

/* ---------------------------------------------------------------- dropout */

uint64_t tr_dropout_row_key(const tr_dropout *d, uint64_t row) {
    return kr_rng_u64(d->seed, d->stream, row);
}

uint32_t tr_dropout_threshold(float p) {
    double t = (double)p * 4294967296.0;
    return t >= 4294967295.0 ? 0xffffffffu : (uint32_t)t;
}

typedef struct drop_job {
    const tr_dropout *d;
    int n, ld;
    float *x;
    uint64_t row0;
} drop_job;

static void drop_rows(void *p, int r0, int r1) {
    const drop_job *j = p;
    const float p_drop = j->d->p;
    const float scale = 1.0f / (1.0f - p_drop);
    const uint32_t th = tr_dropout_threshold(p_drop);
    for (int r = r0; r < r1; r++) {
        uint64_t key = tr_dropout_row_key(j->d, j->row0 + (uint64_t)r);
        float *x = j->x + (size_t)r * (size_t)j->ld;
        for (int c = 0; c < j->n; c++)
            x[c] = p_drop >= 1.0f                          ? 0.0f
                   : tr_dropout_keep(key, th, (uint64_t)c) ? x[c] * scale
                                                           : 0.0f;
    }
}

void tr_dropout_apply(kr_pool *pool, const tr_dropout *d, int M, int n, float *x, int ld,
                      uint64_t row0) {
    if (!d || d->p <= 0.0f) return;
    drop_job j = { d, n, ld, x, row0 };
    tr_for_rows(pool, TR_PART_ELEMENTWISE, M, drop_rows, &j);
}

/* ---------------------------------------------------------------- add */

typedef struct add_job {
    const float *a, *b;
    float *y;
} add_job;

static void add_range(void *p, size_t s, size_t e) {
    const add_job *j = p;
    for (size_t i = s; i < e; i++) j->y[i] = j->a[i] + j->b[i];
}

static void add_rows(void *p, int r0, int r1) { add_range(p, (size_t)r0 * 256, (size_t)r1 * 256); }

void tr_add(kr_pool *pool, size_t n, const float *a, const float *b, float *y) {
    add_job j = { a, b, y };
    chunked(pool, TR_PART_ELEMENTWISE, n, add_rows, &j, add_range);
}

/* ---------------------------------------------------------------- cross-entropy */

typedef struct ce_job {
    int V, d, ids_stride, lds;
    float *logits;
    const int32_t *targets;
    float scale;
    double *row_loss;
    const float *src;
    float *g;
} ce_job;

static void xent_rows(void *p, int r0, int r1) {
    const ce_job *j = p;
    for (int m = r0; m < r1; m++)
        j->row_loss[m] =
            kr_softmax_xent_row(j->V, j->logits + (size_t)m * (size_t)j->V, j->targets[m]);
}

void tr_softmax_xent(kr_pool *pool, int M, int V, float *logits, const int32_t *targets,
                     double *row_loss) {
    ce_job j = { .V = V, .logits = logits, .targets = targets, .row_loss = row_loss };
    tr_for_rows(pool, TR_PART_LOSS, M, xent_rows, &j);
}

static void xent_grad_rows(void *p, int r0, int r1) {
    const ce_job *j = p;
    for (int m = r0; m < r1; m++)
        kr_xent_grad_row(j->V, j->logits + (size_t)m * (size_t)j->V, j->targets[m], j->scale);
}

void tr_xent_grad(kr_pool *pool, int M, int V, float *probs, const int32_t *targets, float scale) {
    ce_job j = { .V = V, .logits = probs, .targets = targets, .scale = scale };
    tr_for_rows(pool, TR_PART_LOSS, M, xent_grad_rows, &j);
}

/* ---------------------------------------------------------------- embedding */

static void emb_cols(void *p, int c0, int c1) {
    const ce_job *j = p;
    for (int m = 0; m < j->V; m++) {
        const float *s = j->src + (size_t)m * (size_t)j->lds;
        float *g = j->g + (size_t)j->targets[(size_t)m * (size_t)j->ids_stride] * (size_t)j->d;
        for (int c = c0; c < c1; c++) g[c] += j->scale * s[c];
    }
}

void tr_embedding_bwd(kr_pool *pool, int M, int d, const int32_t *ids, int ids_stride,
                      const float *src, int lds, float scale, float *g) {
    if (!g) return;
    ce_job j = { .V = M,
                 .d = d,
                 .ids_stride = ids_stride,
                 .lds = lds,
                 .targets = ids,
                 .scale = scale,
                 .src = src,
                 .g = g };
    tr_for_cols(pool, TR_PART_EMBED, d, emb_cols, &j);
}
