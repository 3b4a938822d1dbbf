/* train/block — see block.h. */
#include "train/block.h"

#include "train/linalg.h"

void tr_block_fwd(kr_pool *pool, const tr_block_w *w, tr_block_acts *a, int n_seq, int T,
                  float *x_out, const tr_ws *ws, const tr_block_drops *drops) {
    const int M = n_seq * T, d = w->d;
    const tr_attn_w *at = &w->attn;
    tr_attn_shape shape = { n_seq, T, at->n_heads, at->head_dim, d, 1 };

    tr_rmsnorm_fwd(pool, M, d, a->x_in, w->norm1, ws->xn, a->rstd1);
    tr_linear_fwd(pool, &at->q, ws->xn, M, a->q);
    tr_linear_fwd(pool, &at->k, ws->xn, M, a->k);
    tr_linear_fwd(pool, &at->v, ws->xn, M, a->v);
    tr_rope_fwd(pool, at->rope, n_seq, T, at->n_heads, a->q, d);
    tr_rope_fwd(pool, at->rope, n_seq, T, at->n_heads, a->k, d);
    tr_attention_fwd(pool, &shape, a->q, a->k, a->v, a->att, &drops->attn, ws->attn);
    tr_linear_fwd(pool, &at->o, a->att, M, ws->t);
    tr_dropout_apply(pool, &drops->resid, M, d, ws->t, d, 0);
    tr_add(pool, (size_t)M * (size_t)d, a->x_in, ws->t, a->x_mid);

    tr_rmsnorm_fwd(pool, M, d, a->x_mid, w->norm2, ws->xn, a->rstd2);
    tr_linear_fwd(pool, &w->w1, ws->xn, M, a->h1);
    tr_linear_fwd(pool, &w->w3, ws->xn, M, a->h3);
    tr_swiglu_fwd(pool, (size_t)M * (size_t)w->ff, a->h1, a->h3, ws->ff_a);
    tr_linear_fwd(pool, &w->w2, ws->ff_a, M, ws->t);
    tr_dropout_apply(pool, &drops->ffn, M, d, ws->t, d, 0);
    tr_add(pool, (size_t)M * (size_t)d, a->x_mid, ws->t, x_out);
}

void tr_block_bwd(kr_pool *pool, const tr_block_w *w, tr_block_acts *a, int n_seq, int T, float *dx,
                  const tr_ws *ws, const tr_block_drops *drops) {
    const int M = n_seq * T, d = w->d, ff = w->ff;
    const size_t Md = (size_t)M * (size_t)d;
    const tr_attn_w *at = &w->attn;
    tr_attn_shape shape = { n_seq, T, at->n_heads, at->head_dim, d, 1 };

    /* FFN: x_out = x_mid + drop(w2 g), g = silu(h1)⊙h3 */
    const float *df = dx;
    if (drops->ffn.p > 0.0f) {
        for (size_t i = 0; i < Md; i++) ws->t[i] = dx[i];
        tr_dropout_apply(pool, &drops->ffn, M, d, ws->t, d, 0);
        df = ws->t;
    }
    /* dg = df·w2 first; then one pass gives g again (w2's input) and the gradients of h1, h3 */
    tr_gemm_nn(pool, TR_PART_GEMM_DX, M, ff, d, df, d, w->w2.w, ff, ws->ff_b, ff, 0);
    tr_swiglu_bwd(pool, (size_t)M * (size_t)ff, ws->ff_b, a->h1, a->h3, ws->ff_a);
    tr_linear_bwd(pool, &w->w2, df, ws->ff_a, M, NULL, 0);
    tr_rmsnorm_apply(pool, M, d, a->x_mid, a->rstd2, w->norm2, ws->xn);
    tr_linear_bwd(pool, &w->w1, a->h1, ws->xn, M, ws->datt, 0);
    tr_linear_bwd(pool, &w->w3, a->h3, ws->xn, M, ws->datt, 1);
    tr_rmsnorm_bwd(pool, M, d, ws->datt, a->x_mid, a->rstd2, w->norm2, w->gnorm2, dx, 1);

    /* attention: x_mid = x_in + drop(out_proj(att)) */
    const float *da = dx;
    if (drops->resid.p > 0.0f) {
        for (size_t i = 0; i < Md; i++) ws->t[i] = dx[i];
        tr_dropout_apply(pool, &drops->resid, M, d, ws->t, d, 0);
        da = ws->t;
    }
    tr_linear_bwd(pool, &at->o, da, a->att, M, ws->datt, 0);
    tr_attention_bwd(pool, &shape, a->q, a->k, a->v, a->att, ws->datt, ws->dq, ws->dk, ws->dv,
                     &drops->attn, ws->attn);
    tr_rope_bwd(pool, at->rope, n_seq, T, at->n_heads, ws->dq, d);
    tr_rope_bwd(pool, at->rope, n_seq, T, at->n_heads, ws->dk, d);
    tr_rmsnorm_apply(pool, M, d, a->x_in, a->rstd1, w->norm1, ws->xn);
    tr_linear_bwd(pool, &at->q, ws->dq, ws->xn, M, ws->datt, 0);
    tr_linear_bwd(pool, &at->k, ws->dk, ws->xn, M, ws->datt, 1);
    tr_linear_bwd(pool, &at->v, ws->dv, ws->xn, M, ws->datt, 1);
    tr_rmsnorm_bwd(pool, M, d, ws->datt, a->x_in, a->rstd1, w->norm1, w->gnorm1, dx, 1);
}
