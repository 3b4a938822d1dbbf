/*
 * eval/draft_acceptance — how often a quantised model, as the draft of a self-speculative
 * decoder, proposes the very token the f32 model samples.
 *
 * Speculative decoding keeps the f32 numbers exactly: the draft proposes K tokens, one f32
 * pass over K + 1 rows scores them, and the draws (counter-based, so the same uniforms) accept
 * the proposals up to the first one f32 would not have drawn, plus f32's own draw there. A
 * decode step streams every weight for one row, so what it buys is f32 weight passes per
 * token: 1 / E_K, where E_K is the tokens a verifying pass yields on average. This measures
 * E_K under teacher forcing: at each position both models' logits, the forecast's sampling
 * parameters and the same two uniforms (s1, s2) decide whether the draft agrees; s2 is
 * conditioned on the window's own next s1 for both models (teacher.h), which is the
 * conditioning a draft that agreed on s1 would use.
 */
#ifndef KR_EVAL_DRAFT_ACCEPTANCE_H
#define KR_EVAL_DRAFT_ACCEPTANCE_H

#include <stdint.h>

#include "kronos.h"
#include "model/sampling.h"

/* Draft lengths K reported. */
#define KR_DRAFT_KS 4
extern const int kr_draft_k[KR_DRAFT_KS];

typedef struct kr_draft_acc {
    int64_t positions, s1_agree, s2_agree, both_agree;
    /* per K: verifying passes counted and the tokens they would yield */
    int64_t rounds[KR_DRAFT_KS], tokens[KR_DRAFT_KS];
} kr_draft_acc;

/* Adds n teacher-forced positions of one window: f32 logits p1 [n][v1], p2 [n][v2], the
 * draft's q1, q2. Position t draws with kr_rng_uniform(seed, stream, 2t) for s1 and 2t + 1
 * for s2, as a forecast's path `stream` does at step t. */
kr_status kr_draft_acceptance_add(kr_draft_acc *acc, const float *p1, const float *q1,
                                  const float *p2, const float *q2, int n, int v1, int v2,
                                  const kr_sampler_params *sp, uint64_t seed, uint64_t stream,
                                  kr_error *err);

/* E_K: tokens per verifying f32 pass (NaN when nothing was counted). */
double kr_draft_tokens_per_pass(const kr_draft_acc *acc, int k_index);

/* Weight bytes streamed per token with draft length K, relative to plain decoding: one f32
 * pass plus K draft passes per E_K tokens; draft_ratio = draft weight bytes / f32's. */
double kr_draft_bytes_per_token(const kr_draft_acc *acc, int k_index, double draft_ratio);

#endif
