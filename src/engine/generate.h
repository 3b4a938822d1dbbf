/*
 * engine/generate — autoregressive generation, one step at a time, for any set of sequence
 * groups (continuous batching) or for a fixed batch (kr_generate).
 *
 * A group is one series forecast with `paths` sample paths and its own parameters. On
 * admission its history is encoded; its context window is prefilled once (shared by all its
 * paths; possibly in chunks across steps, possibly partly taken from a prefix cache); then
 * each step advances every live path of every group in one batched forward pass; when a
 * group reaches pred_len its paths are decoded by the tokenizer (the window's history prefix
 * once per group) and the group is done.
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
#include "model/transformer.h"

/* Observes every step (tests, debugging). Pointers valid during the call only. */
typedef void (*kr_step_observer)(void *user, int group, int path, int step, const float *s1_logits,
                                 const float *s2_logits, int s1, int s2, int window_start,
                                 int window_len);

typedef struct kr_gen_options {
    int naive; /* recompute the whole window for every path at every step */
    kr_step_observer observer; /* may be NULL */
    void *observer_user;
} kr_gen_options;

/* Inputs of one group, already normalised (see forecast.c). Borrowed until the group ends. */
typedef struct kr_gen_input {
    int L; /* history rows (tokens) */
    const float *x_norm; /* [L][6] */
    const float *stamps; /* [L + pred_len][5]: history then future */
    uint64_t seed;
} kr_gen_input;

/* Outputs of one group; arrays allocated by the caller. */
typedef struct kr_gen_output {
    int32_t *hist_s1, *hist_s2; /* [L] */
    int32_t *gen_s1, *gen_s2; /* [paths][pred_len] */
    float *pred_norm; /* [paths][pred_len][6] decoded, normalised space */
    int64_t prefill_tokens, cached_tokens, decode_tokens, window_recomputes;
    size_t kv_bytes; /* predictor KV memory held by the group */
    double seconds_prefill, seconds_decode, seconds_tokenizer;
} kr_gen_output;

/* A prefilled context window that later groups with the same window may reuse
 * (engine/prefix_cache.c). Immutable once published; shared by reference count. */
typedef struct kr_prefix {
    kr_kv_store kv; /* rows [0, n) of the window, all predictor layers + dep layer */
    int n; /* rows */
    float *logits; /* [V1] s1 logits of the last row */
    float *ctx; /* [d] context row of the last row */
    int refs; /* owners (cache + groups); free at 0 */
} kr_prefix;

/* Looks up / offers prefilled windows. lookup returns a prefix whose first *rows rows equal
 * the group's window (tokens, stamps; *rows a multiple of the block size or the whole
 * window) with a reference taken, or NULL; publish offers a freshly prefilled window. */
typedef struct kr_prefix_hooks {
    kr_prefix *(*lookup)(void *user, const int32_t *s1, const int32_t *s2, const float *stamps,
                         int n, int *rows);
    void (*publish)(void *user, kr_prefix *p, const int32_t *s1, const int32_t *s2,
                    const float *stamps);
    /* The tokenizer's encoding of an identical normalised history (x_norm [L][6]) can be
     * reused too: returns 1 and fills s1/s2 [L] on a hit. May be NULL. */
    int (*encode_lookup)(void *user, const float *x_norm, int L, int32_t *s1, int32_t *s2);
    void (*encode_publish)(void *user, const float *x_norm, int L, const int32_t *s1,
                           const int32_t *s2);
    /* The tokenizer decoder's K/V of a window's history tokens [n] (whole matches only; the
     * kr_prefix's kv has the tokenizer's layers, logits and ctx unused). May be NULL. */
    kr_prefix *(*dec_lookup)(void *user, const int32_t *s1, const int32_t *s2, int n);
    void (*dec_publish)(void *user, kr_prefix *p, const int32_t *s1, const int32_t *s2);
    void *user;
} kr_prefix_hooks;

void kr_prefix_release(kr_prefix *p);

typedef struct kr_gen_group kr_gen_group;

/* Creates a group (allocates its KV stores); caller owns it. */
kr_status kr_gen_group_create(kr_model *model, const kr_gen_input *in, kr_gen_output *out,
                              const kr_forecast_params *params, const kr_gen_options *opt,
                              kr_gen_group **group, kr_error *err);
void kr_gen_group_free(kr_gen_group *g);
int kr_gen_group_done(const kr_gen_group *g);
/* Steps sampled so far (0..pred_len). */
int kr_gen_group_steps(const kr_gen_group *g);
/* Bytes of the KV blocks the group holds; a prefill the prefix cache also holds is left to
 * the cache's account. */
size_t kr_gen_group_kv_bytes(const kr_gen_group *g);

typedef struct kr_gen_step_params {
    int max_prefill_rows; /* prefill rows per step across groups (<= 0: unlimited) */
    const kr_prefix_hooks *prefix; /* may be NULL */
} kr_gen_step_params;

/* Advances every not-done group by one step: new groups are encoded and (partly) prefilled,
 * running groups sample one token per path, groups reaching pred_len are decoded. A group's
 * results never depend on which other groups share the step. */
kr_status kr_gen_step(kr_model *model, kr_gen_group **groups, int n_groups,
                      const kr_gen_step_params *sp, kr_error *err);

/* Runs a fixed batch to completion (each group with the same params). */
kr_status kr_generate(kr_model *model, const kr_gen_input *in, kr_gen_output *out, int n_groups,
                      const kr_forecast_params *params, const kr_gen_options *opt, kr_error *err);

#endif
