/*
 * engine/generate — autoregressive generation for a batch of sequence groups.
 *
 * A group is one series forecast with `paths` sample paths. Its context is encoded and
 * prefilled once (shared by all paths); then every step advances all live paths of all
 * groups in one batched forward pass; at the end the tokenizer decodes each path's window,
 * with the window's history prefix decoded once per group.
 *
 * Window semantics (max_context C): while the window still starts where the prefill started,
 * the cached path is used — bit-identical to recomputation, because kernels are
 * row-deterministic. Past C, exact mode re-runs the trailing window like the reference (the
 * history part once per group, each path's generated part on top of it); rolling mode keeps
 * the cache and lets the oldest keys fall out (an approximation, opt-in).
 */
#ifndef KR_ENGINE_GENERATE_H
#define KR_ENGINE_GENERATE_H

#include <stdint.h>

#include "kronos.h"
#include "model/model.h"

/* Observes every step (tests, debugging). Pointers valid during the call only. */
typedef void (*kr_step_observer)(void *user, int group, int path, int step,
                                 const float *s1_logits, const float *s2_logits, int s1, int s2,
                                 int window_start, int window_len);

typedef struct kr_gen_options {
    int naive;                  /* recompute the whole window for every path at every step */
    kr_step_observer observer;  /* may be NULL */
    void *observer_user;
    const int32_t *const *force_s1; /* [group] -> [paths][pred_len] teacher-forced ids, or NULL */
    const int32_t *const *force_s2;
} kr_gen_options;

/* Inputs of one group, already normalised (see forecast.c). */
typedef struct kr_gen_input {
    int L;                  /* history rows (tokens) */
    const float *x_norm;    /* [L][6] */
    const float *stamps;    /* [L + pred_len][5]: history then future */
    uint64_t seed;
} kr_gen_input;

/* Outputs of one group; arrays allocated by the caller. */
typedef struct kr_gen_output {
    int32_t *hist_s1, *hist_s2;  /* [L] */
    int32_t *gen_s1, *gen_s2;    /* [paths][pred_len] */
    float *pred_norm;            /* [paths][pred_len][6] decoded, normalised space */
    int64_t prefill_tokens, decode_tokens, window_recomputes;
    double seconds_prefill, seconds_decode, seconds_tokenizer;
} kr_gen_output;

kr_status kr_generate(kr_model *model, const kr_gen_input *in, kr_gen_output *out, int n_groups,
                      const kr_forecast_params *params, const kr_gen_options *opt,
                      kr_error *err);

#endif
