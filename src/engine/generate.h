/*
 * engine/generate — autoregressive generation for any set of sequence groups, advanced one
 * engine step at a time within a row budget per group (continuous batching with bounded
 * steps).
 *
 * A group is one series forecast with `paths` sample paths and its own parameters. It moves
 * through phases:
 *   ADMIT     its history is encoded by the tokenizer (or found in the prefix cache);
 *   PREFILL   its context window is prefilled once for all paths, in chunks of at most its
 *             budget, possibly partly or wholly taken from a prefix cache;
 *   GENERATE  each generation step samples one token per path: the window ending at the
 *             previous token is brought up to date (one row per path while the KV cache
 *             holds the window; past max_context in exact mode the trailing window's history
 *             part once, then each path's generated part on top of it), each path's s1 is
 *             sampled from its logits and s2 from the dependency-aware layer;
 *   DECODE    the tokenizer decodes each path's final window (its history part once);
 *   DONE.
 * A generation step's rows may spread over several engine steps (paths in turns, the
 * re-run history in chunks, a long path chunk in pieces), so one heavy group never makes an
 * engine step longer than the budgets the scheduler hands out; what is computed does not
 * change, only when.
 *
 * Results never depend on the budgets or on which groups share a step: kernels are
 * row-deterministic, a chunk's rows do not depend on how its past is split into references,
 * and each path draws from its own random stream (seed, path, step).
 */
#ifndef KR_ENGINE_GENERATE_H
#define KR_ENGINE_GENERATE_H

#include <stdint.h>

#include "base/workspace.h"
#include "kronos.h"
#include "model/model.h"
#include "model/transformer.h"

/* The step profile as the engine accumulates it (exported as kr_step_profile): the parts
 * (kernel probes of the model layer, sampling and the tokenizer passes timed here), the
 * steps' wall time, the window re-runs and the thread pool's round trips. */
typedef struct kr_gen_profile {
    int enabled;
    kr_prof parts;
    double seconds_steps;
    kr_prof_entry rerun;
    int64_t pool_regions;
    double seconds_pool_wait;
} kr_gen_profile;

/* What generation runs with: the weights, the context's threads and workspace, the KV
 * precision, and the profile every step adds to (NULL: off; ex.prof is then NULL too, else
 * &profile->parts). Owned by the context. */
typedef struct kr_engine {
    const kr_model *model;
    kr_exec ex;
    kr_kv_dtype kv_dtype;
    kr_gen_profile *profile;
} kr_engine;

/* The public form: OTHER is the steps' time outside the parts. */
void kr_gen_profile_export(const kr_gen_profile *p, kr_step_profile *out);

/* Observes every sampled token (tests, debugging). Pointers valid during the call only. */
typedef void (*kr_step_observer)(void *user, int group, int path, int step, const float *s1_logits,
                                 const float *s2_logits, int s1, int s2, int window_start,
                                 int window_len);

typedef struct kr_gen_options {
    int naive; /* recompute the whole window for every path at every step */
    kr_step_observer observer; /* may be NULL */
    void *observer_user;
    int index; /* passed to the observer as `group` */
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
    int64_t prefill_tokens, cached_tokens, decode_tokens, window_recomputes, reused_tokens;
    size_t kv_bytes; /* predictor KV memory held by the group (and its kept first stages) */
    double seconds_prefill, seconds_decode, seconds_tokenizer;
    kr_gen_profile profile; /* the engine steps the group took part in (when profiling) */
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

/* Creates a group (allocates its KV stores and per-path state); caller owns it. */
kr_status kr_gen_group_create(const kr_engine *eng, const kr_gen_input *in, kr_gen_output *out,
                              const kr_forecast_params *params, const kr_gen_options *opt,
                              kr_gen_group **group, kr_error *err);
void kr_gen_group_free(kr_gen_group *g);
int kr_gen_group_done(const kr_gen_group *g);
/* Generation steps completed (0..pred_len): every path has sampled that many tokens. */
int kr_gen_group_steps(const kr_gen_group *g);
/* In the generation phase (sampling steps), as opposed to prefill or decode. */
int kr_gen_group_generating(const kr_gen_group *g);
/* Rows of work left before the group's current phase or generation step completes (prefill
 * rows, re-run rows, path rows, decode rows); at least 1 while the group is not done. */
int64_t kr_gen_group_pending_rows(const kr_gen_group *g);
/* Bytes of the KV blocks the group holds; a prefill the prefix cache also holds, and the
 * blocks a window took from a cached one, are left to the cache's account. */
size_t kr_gen_group_kv_bytes(const kr_gen_group *g);

/* The most KV memory a group of these parameters over hist_len history rows holds at once
 * (what kr_gen_group_kv_bytes can reach: its window, generated rows and re-run state while it
 * samples, its decoder stores while it decodes), before any prefix cache sharing; computed
 * without allocating, so a scheduler can budget a request before it creates the group. */
size_t kr_gen_kv_peak_bytes(const kr_engine *eng, int hist_len, const kr_forecast_params *params,
                            int naive);

/* Runs one engine step: every group with budget[k] > 0 advances by up to that many rows of
 * work (and by at least one unit of work — a prefill row, a path's chunk piece, a sampling
 * round — even when its next unit is larger); groups with budget 0 wait. New groups are
 * encoded first. hooks (may be NULL) connect the prefix cache. */
kr_status kr_gen_step(const kr_engine *eng, kr_gen_group **groups, const int64_t *budget,
                      int n_groups, const kr_prefix_hooks *hooks, kr_error *err);

#endif
