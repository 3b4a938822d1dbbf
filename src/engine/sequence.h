/*
 * engine/sequence — one request's sequence group (kr_seq: one series forecast with `paths`
 * sample paths and its own parameters) through the phases of a request, one function per
 * phase; the batch planner (engine/batch.h) turns a phase's work into rows of a step, and the
 * step (engine/generate.h) runs them.
 *
 * A group moves through phases:
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
 *
 * The phases' functions, in the order a request meets them:
 *   kr_seq_create        allocate the stores (scheduler admission, engine/admission.c)
 *   kr_seq_admit         ADMIT: encode the history, take what the prefix cache has
 *   kr_seq_prefill_done  PREFILL -> GENERATE: offer the window to the prefix cache
 *   kr_seq_begin_step    GENERATE: fix the window of the next generation step
 *   kr_seq_step_done     after sampling: next step, or DECODE once pred_len tokens are drawn
 *   kr_seq_start_decode  DECODE: the decoder's history context (or the cache's)
 *   kr_seq_decode_done   DECODE -> DONE: offer the decoder context to the cache
 *   kr_seq_free
 * Engine-internal: the struct is visible to the planner and the step, nothing outside engine/.
 */
#ifndef KR_ENGINE_SEQUENCE_H
#define KR_ENGINE_SEQUENCE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/prefix_cache.h"
#include "model/predictor.h"
#include "model/sampling.h"

/* Observes every sampled token (tests, debugging). Pointers valid during the call only. */
typedef void (*kr_step_observer)(void *user, int group, int path, int step, const float *s1_logits,
                                 const float *s2_logits, int s1, int s2, int window_start,
                                 int window_len);

typedef struct kr_seq_options {
    int naive; /* recompute the whole window for every path at every step */
    kr_step_observer observer; /* may be NULL */
    void *observer_user;
    int index; /* passed to the observer as `group` */
} kr_seq_options;

/* Inputs of one group, already normalised (see forecast.c). Borrowed until the group ends. */
typedef struct kr_seq_input {
    int hist_len; /* history rows (tokens) */
    const float *x_norm; /* [hist_len][6] */
    const float *stamps; /* [hist_len + pred_len][5]: history then future */
    uint64_t seed;
} kr_seq_input;

/* Outputs of one group; arrays allocated by the caller. */
typedef struct kr_seq_output {
    int32_t *hist_s1, *hist_s2; /* [hist_len] */
    int32_t *gen_s1, *gen_s2; /* [paths][pred_len] */
    float *pred_norm; /* [paths][pred_len][6] decoded, normalised space */
    int64_t prefill_tokens, cached_tokens, decode_tokens, window_recomputes, reused_tokens;
    size_t kv_bytes; /* predictor KV memory held by the group (and its kept first stages) */
    double seconds_prefill, seconds_decode, seconds_tokenizer;
    kr_engine_profile profile; /* the engine steps the group took part in (when profiling) */
} kr_seq_output;

enum kr_seq_phase { KR_SEQ_ADMIT = 0, KR_SEQ_PREFILL, KR_SEQ_GENERATE, KR_SEQ_DECODE, KR_SEQ_DONE };

/* Where the KV rows of the current generation step's window live. */
enum kr_seq_layout {
    /* The prefilled window plus each path's generated rows: while the window has not slid,
     * and always in rolling mode (where the oldest rows just stop being attended to). */
    KR_LAYOUT_CACHED = 0,
    /* Exact mode past max_context: the reference re-runs the trailing window from position
     * 0, so its history part is recomputed into rerun_hist once per step and each path's
     * generated part on top of it into `generated`. */
    KR_LAYOUT_RERUN = 1,
    /* Naive mode (tests, benchmarks): every path recomputes its whole window every step. */
    KR_LAYOUT_NAIVE = 2
};

/* Its state: the phase, and per phase where the rows of its windows live. */
struct kr_seq {
    const kr_seq_input *in;
    kr_seq_output *out;
    kr_seq_options opt;
    int pred_len, paths, max_context, exact;
    uint64_t first_path; /* random stream of path 0 */
    kr_sampler_params sampling;
    int hist_len; /* history tokens (L) */
    int window_start0; /* first history token of the initial window */
    int window_len0; /* tokens of the initial window (<= max_context) */
    int d, vocab1;
    int phase;
    int step; /* generation steps completed: tokens sampled per path */

    /* PREFILL */
    kr_prefix *cached_window; /* the whole initial window, from the prefix cache, or NULL */
    int cached_rows; /* window rows served by cached_window */
    kr_prefix *own_window; /* window rows [cached_rows, window_len0) (row 0 = window row
                               * cached_rows); the rows of a partial cache hit are its first
                               * blocks, by reference */
    int prefilled; /* window rows ready (>= cached_rows) */

    /* GENERATE: the step in progress */
    int step_begun;
    int layout, win_start, win_len; /* the step's window: first token, tokens */
    int rerun_done; /* LAYOUT_RERUN: history rows re-run for this step */
    int next_path; /* paths below it are planned for sampling this step */
    int path_rows_done; /* rows of next_path's chunk already computed */
    kr_kv_store rerun_hist; /* exact mode: history part of a re-run window */
    kr_kv_store generated; /* paths x pred_len rows: the generated tokens */
    kr_kv_store naive; /* naive mode: paths x max_context rows */
    /* Exact mode with re-runs: the first stage (kr_first_stage) of every row a re-run will
     * see again, recorded the first time the row is computed: history tokens of the initial
     * window (slot t - window_start0), then each path's generated tokens (slot window_len0 +
     * p·pred_len + j). stage_ok marks the slots holding a record. */
    float *stage;
    unsigned char *stage_ok;
    size_t stage_bytes;
    float *logits; /* [paths][vocab1] s1 logits at each path's window end */
    float *ctx; /* [paths][d] context row there */

    /* DECODE */
    int dec_started;
    int dec_start; /* first token of the final window */
    kr_prefix *dec_history; /* decoder K/V of the final window's history tokens, or NULL */
    int dec_history_fresh; /* computed here: offered to the cache once complete */
    int dec_history_done; /* its rows computed */
    kr_kv_store dec_paths; /* decoder K/V of each path's rows */
    int dec_path_rows; /* rows per path in dec_paths (pred_len; naive: the window) */
    int dec_next_path, dec_path_rows_done;
};
typedef struct kr_seq kr_seq;

/* Creates a group (allocates its KV stores and per-path state); caller owns it. */
kr_status kr_seq_create(const kr_engine *eng, const kr_seq_input *in, kr_seq_output *out,
                        const kr_forecast_params *params, const kr_seq_options *opt, kr_seq **group,
                        kr_error *err);
void kr_seq_free(kr_seq *g);
int kr_seq_done(const kr_seq *g);
/* Generation steps completed (0..pred_len): every path has sampled that many tokens. */
int kr_seq_steps(const kr_seq *g);
/* In the generation phase (sampling steps), as opposed to prefill or decode. */
int kr_seq_generating(const kr_seq *g);
/* Rows of work left before the group's current phase or generation step completes (prefill
 * rows, re-run rows, path rows, decode rows); at least 1 while the group is not done. */
int64_t kr_seq_pending_rows(const kr_seq *g);
/* Bytes of the KV blocks the group holds; a prefill the prefix cache also holds, and the
 * blocks a window took from a cached one, are left to the cache's account. */
size_t kr_seq_kv_bytes(const kr_seq *g);

/* The most KV memory a group of these parameters over hist_len history rows holds at once
 * (what kr_seq_kv_bytes can reach: its window, generated rows and re-run state while it
 * samples, its decoder stores while it decodes), before any prefix cache sharing; computed
 * without allocating, so a scheduler can budget a request before it creates the group. */
size_t kr_seq_kv_peak_bytes(const kr_engine *eng, int hist_len, const kr_forecast_params *params,
                            int naive);

/* ---------------------------------------------------------------- phases */

/* ADMIT: encodes the history (or takes the encoding the prefix cache has) and takes what it
 * can of the initial window from the prefix cache; then PREFILL, or GENERATE at once when the
 * whole window was cached (naive mode: GENERATE). */
kr_status kr_seq_admit(const kr_engine *eng, kr_seq *g, const kr_prefix_hooks *hooks,
                       kr_error *err);
/* PREFILL -> GENERATE once every window row is computed; a window prefilled entirely by this
 * group is offered to the prefix cache (hooks may be NULL). Returns 1 when it moved. */
int kr_seq_prefill_done(kr_seq *g, const kr_prefix_hooks *hooks);
/* GENERATE: fixes the window of generation step i (>= 1, or 0 in naive mode) and counts its
 * work. */
void kr_seq_begin_step(kr_seq *g, int i);
/* After a step's sampling: once the last path of the generation step is sampled, the next
 * step; after pred_len steps DECODE, the predictor's stores released. */
void kr_seq_step_done(kr_seq *g);
/* DECODE: sets up the decode of the final windows (the history part's decoder K/V from the
 * prefix cache or to be computed, each path's rows on top). */
kr_status kr_seq_start_decode(const kr_engine *eng, kr_seq *g, const kr_prefix_hooks *hooks,
                              kr_error *err);
/* DECODE -> DONE once every path is decoded; a freshly computed decoder context is offered to
 * the cache. */
void kr_seq_decode_done(kr_seq *g, const kr_prefix_hooks *hooks);

/* ---------------------------------------------------------------- windows */

/* The first token of the window of the step that samples token hist_len + i. */
int kr_seq_window_start(const kr_seq *g, int i);
/* Refs to the prefilled window rows [from, to) (cached part, then its own part), appended to
 * refs[*n]. */
void kr_seq_window_refs(kr_kv_ref *refs, int *n, const kr_seq *g, int from, int to);
/* The first-stage record slot of token `index` (history, or generated by `path`), or -1 when
 * none is kept. */
long kr_seq_stage_slot(const kr_seq *g, int path, int index);
/* The dep-layer rows visible to path p's s2 query at the current step. */
void kr_seq_s2_view(const kr_seq *g, int p, kr_kv_view *v);

#endif
