/*
 * model/predictor — the Kronos autoregressive predictor's forward passes.
 *
 *   embed:   fusion_proj([emb_s1[s1]·√d ‖ emb_s2[s2]·√d]) + time embedding
 *            (hour + weekday + day + month + minute table rows, stamps truncated to int)
 *   blocks:  n_layers pre-norm causal blocks (transformer.h), then RMSNorm → `context`
 *   s1:      head_s1(context)
 *   s2:      dependency-aware layer: a 4-head cross-attention whose single query is
 *            emb_s1[sampled s1] (unscaled), keys/values every context row of the window, with
 *            no mask and no rotation; s2 = head_s2(RMSNorm_dep(context_last + attn)).
 *
 * The predictor's KV stores have n_layers + 1 layers: the extra layer (index n_layers) holds
 * the cross-attention's K/V of each context row, so s2 also reuses cached rows.
 */
#ifndef KR_MODEL_PREDICTOR_H
#define KR_MODEL_PREDICTOR_H

#include <stdint.h>

#include "model/transformer.h"

/* Rows of the window visible to one s2 query (dep-layer K/V), in order. */
typedef struct kr_kv_view {
    kr_kv_ref ref[KR_MAX_PAST_REFS + 1];
    int n;
} kr_kv_view;

static inline int kr_predictor_store_layers(const kr_predictor_weights *w) {
    return w->cfg.n_layers + 1;
}

/* A row's first stage: its embedding x and the first block's Q, K, V of it before RoPE,
 * recorded as [x | q | k | v] (KR_FIRST_STAGE_FLOATS(d) floats). It depends on the token and
 * its stamp only, not on the position or the rows around it, so a caller that runs a token
 * again (an exact window past max_context re-runs its tokens at new positions every step) can
 * keep it instead of paying the fusion and Q/K/V projections a second time. */
#define KR_FIRST_STAGE_FLOATS(d) (4 * (size_t)(d))

/* Per row r of a forward call: keep[r] a record of that row from an earlier call, used as is
 * (or NULL: computed); save[r] where to record the row once computed (or NULL). */
typedef struct kr_first_stage {
    const float *const *keep;
    float *const *save;
} kr_first_stage;

/* Runs chunks of new tokens: s1/s2 ids [total], stamps [total][5] (minute, hour, weekday, day,
 * month). Writes context[total][d] and each chunk's K/V rows (all layers + dep layer).
 * records (NULL: none) reuses and saves first-stage records per row; the context and K/V rows
 * are bit-identical either way. */
kr_status kr_predictor_forward(const kr_predictor_weights *w, const kr_exec *ex,
                               const kr_chunk *chunks, int n_chunks, const int32_t *s1,
                               const int32_t *s2, const float *stamps,
                               const kr_first_stage *records, float *context, kr_error *err);

/* logits[m][2^s1_bits] = head_s1(context rows). */
kr_status kr_predictor_s1_logits(const kr_predictor_weights *w, const kr_exec *ex,
                                 const float *context, int m, int ld, float *logits, kr_error *err);

/* For m queries: s2 logits [m][2^s2_bits] given the sampled s1 of each, the context row of the
 * last window position (ctx_last, row stride ld) and the window's dep-layer rows (views[m]). */
kr_status kr_predictor_s2_logits(const kr_predictor_weights *w, const kr_exec *ex, int m,
                                 const int32_t *s1, const float *ctx_last, int ld,
                                 const kr_kv_view *views, float *logits, kr_error *err);

/* Debug taps for the golden tests (NULL when unused): token and time embeddings. */
kr_status kr_predictor_embed(const kr_predictor_weights *w, const kr_exec *ex, int n,
                             const int32_t *s1, const int32_t *s2, const float *stamps, float *x,
                             float *tok_emb_dbg, float *time_emb_dbg, kr_error *err);

#endif
