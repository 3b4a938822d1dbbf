/*
 * kronos.h — public C API of the kronos inference engine.
 *
 * Kronos is a family of foundation models for financial K-lines (OHLCV candles). This
 * library loads the public Hugging Face checkpoints (tokenizer + predictor directories,
 * each `config.json` + `model.safetensors`), reproduces the official PyTorch predictor's
 * numbers and forecasts candles with a KV cache, shared prefill and many sample paths.
 *
 * Two objects, as in llama.h:
 *   kr_model    the weights. Immutable once loaded: any number of threads and contexts use
 *               one model at the same time, with no lock.
 *   kr_context  what running needs: a thread pool, a workspace allocated once from the batch
 *               limits, the KV block pool and prefix cache, and the engine thread that batches
 *               every request submitted to it (continuous batching). Several contexts may run
 *               on one model at once (e.g. one per worker, or a low-priority one for offline
 *               scoring).
 * Every forecast goes through a context's batching API: kr_submit (asynchronous: events by
 * callback, cancel, deadline, priority) or the synchronous kr_forecast_run /
 * kr_forecast_run_batch built on it, so deadlines, cancellation, back-pressure and metrics
 * hold for every caller alike.
 *
 * Thread safety:
 *   - kr_model: every function may be called from any thread at any time, except
 *     kr_model_quantize, which changes the weights and is load-time only (it fails with
 *     KR_ERR_INVALID_ARG while a context exists on the model, and kr_context_create fails
 *     with KR_ERR_BUSY while it runs), and kr_model_free (after every context on it is freed).
 *   - kr_context: kr_submit, kr_cancel, kr_forecast_run*, kr_context_get_stats,
 *     kr_context_set_limits and kr_context_metrics may be called from any thread at once.
 *     kr_context_drain and kr_context_free from one thread, not from a callback.
 *   - Callbacks (events, abort checks, logs) run on the context's engine thread: keep them
 *     short, and do not call kr_context_drain/free or kr_forecast_run* from them (kr_submit
 *     and kr_cancel are fine).
 *   - kr_forecast results are immutable: read them from any thread.
 *
 * Numbers: results are bit-for-bit deterministic. A seeded request returns the same paths
 * whatever else is batched with it, on any number of threads, through any of the APIs.
 *
 * Conventions (as in libuv / llama.h):
 *   - Every fallible function returns a kr_status (kronos/status.h): 0 ok, negative on
 *     error, detail in a caller-supplied kr_error (may be NULL); no global error state.
 *   - Handles are opaque; each create/load has a free, and free(NULL) is a no-op.
 *   - Ownership is stated on each function: "caller owns" or "borrowed".
 *   - Dimension names are the model's: d_model, n_layers, n_heads, max_context, pred_len, paths.
 */
#ifndef KRONOS_H
#define KRONOS_H

#include <stddef.h>
#include <stdint.h>

#include "kronos/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- version */

#define KRONOS_VERSION_MAJOR 0
#define KRONOS_VERSION_MINOR 3
#define KRONOS_VERSION_PATCH 0
#define KRONOS_VERSION "0.3.0"
/* Encoded as major * 10000 + minor * 100 + patch, for #if comparisons. */
#define KRONOS_VERSION_NUMBER \
    (KRONOS_VERSION_MAJOR * 10000 + KRONOS_VERSION_MINOR * 100 + KRONOS_VERSION_PATCH)

/* The library's version string (the one it was built as; may differ from KRONOS_VERSION of
 * the header a program was compiled with). */
KR_API const char *kr_version(void);

/* ---------------------------------------------------------------- model */

typedef struct kr_model kr_model; /* tokenizer + predictor pair, immutable after load */

typedef struct kr_model_params {
    /* Weight format: NULL or "f32" keeps the checkpoint as stored (a kronos quantize
     * checkpoint stays in its format); "bf16", "int8", "fp8" or "q4" quantises every Linear
     * of an f32 checkpoint at load, round-to-nearest (kronos quantize adds calibration). */
    const char *quant;
    int quant_group; /* q4 group size, 32 or 64; <= 0: 32 */
    /* 0 (default): a NaN or infinite weight (quantised scales included) fails the load with
     * KR_ERR_MODEL naming the tensor and element; 1: load the checkpoint unchecked. */
    int allow_nonfinite;
    /* 0 (default): model.safetensors is mapped: the load is lazy and processes serving one
     * checkpoint share its pages, but the file must not be truncated or rewritten in place
     * while the model lives (a touched page that is gone faults the process with SIGBUS).
     * 1: both files are read into memory at load, and the model no longer depends on them. */
    int no_mmap;
} kr_model_params;

KR_API kr_model_params kr_model_default_params(void);

/* Loads a predictor directory and a tokenizer directory (Hugging Face layout: config.json +
 * model.safetensors). F32 tensors are used in place from the mmapped file; F16/BF16 are
 * converted to f32 at load. Every tensor the architecture needs is checked for presence,
 * dtype, shape and (unless params->allow_nonfinite) NaN / infinite values; errors name the
 * file and the tensor. config.json and model.safetensors must be regular files (a FIFO or a
 * device is refused, never waited on).
 * On success *out is set; caller owns it, free with kr_model_free. */
KR_API kr_status kr_model_load(const char *predictor_dir, const char *tokenizer_dir,
                               const kr_model_params *params, kr_model **out, kr_error *err);
/* After every context on the model has been freed. */
KR_API void kr_model_free(kr_model *model);

typedef struct kr_model_info {
    int d_model, n_layers, n_heads, ff_dim; /* predictor shape */
    int tok_d_model, tok_n_heads, tok_ff_dim; /* tokenizer shape */
    int tok_enc_blocks, tok_dec_blocks; /* = n_enc_layers - 1, n_dec_layers - 1 */
    int s1_bits, s2_bits;
    int learn_te;
    size_t n_params; /* predictor + tokenizer parameters used at inference */
    size_t weight_bytes; /* bytes of weights as held in memory (after quantisation) */
    double load_seconds; /* wall time of kr_model_load and of any kr_model_quantize after it
                            (quantisation included) */
    char quant[8]; /* weight format of the Linears: "f32", "bf16", "int8", "fp8", "q4" */
    char quant_method[16]; /* "rtn", "smoothquant", "awq", "gptq" ("" for f32) */
    int quant_group; /* q4 group size (0 otherwise) */
    double quant_seconds; /* part of load_seconds spent quantising (0 if none) */
    int demo; /* predictor config.json "intended_use": "demo" or "test": runs the software,
                 is no forecasting model (reports and the server say so) */
    char source[256]; /* predictor config.json "source" (where the weights come from), or "" */
} kr_model_info;

KR_API void kr_model_get_info(const kr_model *model, kr_model_info *info);

/* ---------------------------------------------------------------- series (input candles) */

/* Column order used everywhere: open, high, low, close, volume, amount. */
enum { KR_OPEN = 0, KR_HIGH, KR_LOW, KR_CLOSE, KR_VOLUME, KR_AMOUNT, KR_N_FEATURES };

/* The fewest history rows a forecast should rest on: the model sees each series normalised by
 * its own mean and standard deviation over the lookback, and fewer rows than this pin neither
 * down (the standard error of a std over n rows is ~1/sqrt(2n): 12 % at 32 rows, 41 % at 3),
 * so the same candles would be read at another scale. The CLI warns below it, the HTTP API
 * refuses it (400), as `kronos analyze` does. */
#define KR_FORECAST_MIN_ROWS 32

/* A candle history. Borrowed by the forecast calls (copied by kr_submit); values are as read
 * (double), the engine converts them to float32 exactly as the reference does. */
typedef struct kr_series {
    int64_t n; /* rows */
    const int64_t *timestamps; /* [n] seconds since 1970-01-01, naive wall-clock as UTC */
    const double *values; /* [n][6] open, high, low, close, volume, amount */
    int has_volume; /* 0: volume and amount are filled with 0 */
    int has_amount; /* 0: amount = volume * mean(open, high, low, close) */
    const int64_t *future_timestamps; /* [pred_len] stamps of the candles to forecast, or NULL
                                         to infer them from the history (interval, weekdays,
                                         session hours) */
} kr_series;

/* ---------------------------------------------------------------- forecast parameters */

typedef enum kr_window_mode {
    KR_WINDOW_EXACT = 0, /* past max_context: re-run the trailing window (the reference) */
    KR_WINDOW_ROLLING = 1 /* past max_context: sliding KV cache (approximation, opt-in) */
} kr_window_mode;

/* How the window is normalised (docs/api.md, "norm"). */
typedef enum kr_norm_mode {
    KR_NORM_EXACT = 0, /* mean and std over the whole window (the reference) */
    /* Statistics fixed at an anchor, the window as first seen; the window then grows by a row a
     * bar (inside the rows given, up to max_context) and keeps its earlier tokens, refreshed
     * every norm_refresh bars (an approximation, opt-in; its price is in README.md) */
    KR_NORM_ANCHORED = 1
} kr_norm_mode;

typedef struct kr_forecast_params {
    int pred_len; /* candles to generate (> 0) */
    int lookback; /* rows of history used; <= 0: all rows up to max_context */
    int max_context; /* predictor window (default 512) */
    int paths; /* sample paths (default 1) */
    float temperature; /* default 1.0 */
    int top_k; /* default 0 (off); 1 = greedy */
    float top_p; /* in (0, 1], default 0.9 (1: off) */
    uint64_t seed; /* RNG seed; each path has its own stream */
    kr_window_mode window; /* default exact */
    float clip; /* normalised-input clip (default 5) */
    int keep_paths; /* non-zero: keep every path's candles and tokens in the result */
    int first_path; /* random stream of path 0 (default 0): paths [first_path,
                              first_path + paths) of a larger run, so a run can be extended
                              with more paths that equal those of one bigger run */
    /* 1: the series' values are already normalised as the reference normalises them
     * ((x - mean) / (std + 1e-5) per column over the lookback: what its
     * auto_regressive_inference takes), so the engine only clips them to ±clip, and every
     * result (mean, paths, quantiles) stays in that normalised scale. 0 (default): raw
     * candles, normalised here and the results denormalised. */
    int prenormalized;
    kr_norm_mode norm; /* default exact; anchored needs a context (kr_submit and the calls
                          over it): it remembers the anchors */
    int norm_refresh; /* anchored: a new anchor after this many bars (<= 0: 16) */
} kr_forecast_params;

KR_API kr_forecast_params kr_forecast_default_params(void);

/* ---------------------------------------------------------------- context */

typedef struct kr_context kr_context;
typedef struct kr_forecast kr_forecast; /* result; caller owns, free with kr_forecast_free */

/* Polled by the engine thread; returns non-zero to stop (see where it is used). */
typedef int (*kr_abort_callback)(void *user);
/* A log line (no trailing newline) from the engine thread: lifecycle and tuner decisions. */
typedef void (*kr_log_callback)(void *user, const char *line);

typedef struct kr_context_params {
    int n_threads; /* compute threads, the engine thread included; <= 0: online CPUs */
    const char *kv_dtype; /* KV-cache precision: NULL or "f32", "bf16" (half), "int8" (a quarter) */
    /* Batching. An engine step computes at most about max_batch_tokens rows (prefill rows,
     * one row per decoding path, re-run windows), shared among the running requests by
     * priority; a request's step may spread over several engine steps. */
    int max_batch_tokens; /* 1 .. 16777216 (2^24), default 4096 */
    int max_running; /* requests in the running batch: 1 .. 65536, default 64 */
    int max_queue; /* waiting requests before kr_submit says KR_ERR_BUSY: 1 .. 1048576 (2^20),
                      default 256. Requests the next admission will start into free running
                      slots are not counted: an idle engine takes max_running + max_queue. */
    int batch_wait_ms; /* a lone new request waits this long for company: 0 .. 60000 (default
                          0; servers: 20-100) */
    size_t kv_budget_bytes; /* KV memory for running requests (each charged its peak from
                               admission on) + prefix cache; 0: 25% of RAM */
    int prefix_cache; /* reuse identical context windows across requests (default 1) */
    int static_batching; /* admit a new batch only when the running one has finished
                               (offline baseline; default 0 = continuous) */
    /* When higher-priority work runs, lower-priority requests get at most this share of an
     * engine step's rows (and at least background_min_rows), so a heavy job slows but does
     * not stall interactive ones (default 0.5, 8). */
    double background_share;
    int background_min_rows;
    /* When only lower-priority (< KR_PRIORITY_NORMAL) work runs, an engine step computes at
     * most this many rows (default 256), so an interactive request arriving meanwhile waits
     * for a short step, not a max_batch_tokens one. */
    int background_step_rows;
    int tune; /* adaptive tuner of batch_wait_ms, max_batch_tokens, max_running and the
                 prefix-cache budget (default 0; rules in docs/api.md, "The tuner") */
    double target_queue_p95_s; /* tuner objectives (defaults 0.1 s, 2 s) */
    double target_ttft_p95_s;
    /* Polled once per engine step: non-zero fails every queued and running request with
     * KR_ERR_CANCELLED (e.g. a global shutdown flag). May be NULL. */
    kr_abort_callback abort_callback;
    void *abort_user;
    kr_log_callback log; /* may be NULL */
    void *log_user;
    /* How long a tuner signal must hold before it acts: pressure (queue wait or TTFT over
     * target) tune_window_s, relief tune_relax_s (<= 0: 300 s and 600 s). */
    double tune_window_s, tune_relax_s;
    /* Step profile (kr_step_profile in the stats): 1 (default) on, 0 off. Costs two clock
     * reads per kernel call, well under 1 % of a step. */
    int profile;
    /* When the first waiting request does not fit the KV budget, a smaller one behind it may
     * start first if that does not delay the first one's estimated start (EASY backfilling,
     * engine/admission.c). Not delayed in engine steps: the backfilled rows share each step's
     * compute, so the first one's wait in seconds can grow (bench/admission measures both).
     * 1 (default) on; 0: strict order (priority, then arrival), the queue waiting behind a
     * request that waits for memory. */
    int backfill;
} kr_context_params;

KR_API kr_context_params kr_context_default_params(void);

/* Creates a context on a model (borrowed: must outlive the context) and starts its engine
 * thread. The workspace is sized from the batch limits here, so the steady-state decode loop
 * allocates nothing. A limit out of its range fails with KR_ERR_INVALID_ARG naming the field
 * and the value; KR_ERR_BUSY while kr_model_quantize runs on the model. Caller owns *out;
 * free with kr_context_free. */
KR_API kr_status kr_context_create(const kr_model *model, const kr_context_params *params,
                                   kr_context **out, kr_error *err);
/* Stops accepting (kr_submit answers KR_ERR_BUSY "shutting down"), lets queued and running
 * requests finish for up to timeout_s seconds (< 0, INFINITY, NaN or over a century: no
 * limit), then cancels the rest (their FAILED events say so) and stops the engine thread.
 * KR_ERR_TIMEOUT when it had to cancel. Idempotent. */
KR_API kr_status kr_context_drain(kr_context *ctx, double timeout_s);
/* Cancels whatever is still queued or running (FAILED events are delivered), stops the
 * engine thread and frees. */
KR_API void kr_context_free(kr_context *ctx);
/* The model the context runs (borrowed). */
KR_API const kr_model *kr_context_model(const kr_context *ctx);

/* ---------------------------------------------------------------- requests */

typedef enum kr_event_kind {
    KR_EVENT_STARTED = 0, /* admitted into the running batch (queue wait known) */
    KR_EVENT_STEP = 1, /* one more token sampled for every path (progress; the last, step
                             == pred_len, comes before the tokenizer decodes the paths) */
    KR_EVENT_DONE = 2, /* result ready: event.result, owned by the receiver (see kr_event) */
    KR_EVENT_FAILED = 3 /* error: cancelled, timed out, rejected, invalid, internal */
} kr_event_kind;

/* Per-request statistics, filled from STARTED on. */
typedef struct kr_request_stats {
    int64_t prefill_tokens; /* context rows run through the predictor (re-runs included) */
    int64_t cached_tokens; /* context rows taken from the prefix cache instead */
    int64_t generated_tokens; /* tokens sampled, all paths */
    double queue_seconds; /* submission to admission */
    double ttft_seconds; /* submission to the first sampled step */
    double total_seconds; /* submission to now / to the end */
} kr_request_stats;

typedef struct kr_event {
    kr_event_kind kind;
    uint64_t id;
    int index; /* position in a kr_forecast_run_batch call (0 for kr_submit) */
    int step, pred_len; /* steps sampled so far, of pred_len */
    /* DONE from kr_submit: the receiver owns it (kr_forecast_free); with no on_event the
     * engine frees it. DONE forwarded by kr_forecast_run_batch: NULL (the result is
     * returned in out[index]). */
    kr_forecast *result;
    kr_error error; /* FAILED */
    kr_request_stats stats;
} kr_event;

/* Called on the engine thread. After DONE or FAILED no further event comes for the request. */
typedef void (*kr_event_callback)(void *user, const kr_event *event);

/* Priorities: higher runs first and takes the step budget first; equal priorities share it
 * round-robin. */
enum {
    KR_PRIORITY_BACKGROUND = -10,
    KR_PRIORITY_LOW = -1,
    KR_PRIORITY_NORMAL = 0,
    KR_PRIORITY_HIGH = 1
};

typedef struct kr_request_params {
    double deadline_s; /* > 0: fail with KR_ERR_TIMEOUT when not done that many seconds after
                          submission (queued or running); <= 0: none; NaN is refused
                          (KR_ERR_INVALID_ARG) */
    int priority; /* default KR_PRIORITY_NORMAL */
    kr_event_callback on_event; /* may be NULL (a DONE result is then freed by the engine) */
    void *user;
    /* Polled once per engine step while the request is queued or running: non-zero cancels
     * it (KR_ERR_CANCELLED), e.g. "the client has gone". May be NULL. */
    kr_abort_callback should_abort;
    void *abort_user;
    /* kr_forecast_run_batch: when the context's queue is full, wait for room (default 1: a
     * batch larger than the queue is fed as it drains) or fail at once with KR_ERR_BUSY (0:
     * a server answering 429). kr_submit never waits. */
    int wait_for_room;
    /* kr_forecast_run_batch: run the series in static batches of at most this many rows
     * (series x paths; at least one series a batch), each finished before the next is
     * submitted: offline scoring with bounded memory (kr_static_batch_series tells the
     * series per batch). 0 (default): submit every series at once. */
    int static_batch_rows;
    /* > 0: when this request reaches an idle engine first, it waits this long for company
     * instead of the context's batch_wait_ms (offline scoring: a long wait lets concurrent
     * jobs fill one static batch, whatever the time-of-day profile says); 0: the context's.
     * 0 .. 60000. */
    int batch_wait_ms;
    /* kronos' own tests and benchmarks only (engine/sequence.h: naive recomputation, an
     * observer of every sampled token); NULL for every other caller. */
    const struct kr_seq_options *seq_options;
} kr_request_params;

/* The offline commands' static batch size (kronos forecast / analyze --batch-size, the
 * server's batch analyses), in series x paths rows; measured in
 * bench/results/serving-tradeoff-2026-12-01.md. */
#define KR_STATIC_BATCH_ROWS_DEFAULT 64

/* Series per static batch for kr_request_params.static_batch_rows (n_series when <= 0). */
KR_API int kr_static_batch_series(int batch_rows, int paths, int n_series);

KR_API kr_request_params kr_request_default_params(void);

/* A ready-made kr_abort_callback for should_abort / abort_callback: non-zero once the int at
 * `flag` (an atomic_int, or an aligned int another thread sets with one store) is non-zero;
 * NULL never aborts. For bindings whose own callback would be costly on the engine thread (a
 * Python one takes the interpreter's lock at every engine step). */
KR_API int kr_abort_flag(void *flag);

/* Queues a forecast of one series. The series and params are validated here (errors name the
 * field and row) and copied. KR_ERR_BUSY when the queue is full or the context is draining:
 * retry later. KR_ERR_INVALID_ARG (saying how much) when the forecast needs more KV memory
 * than the context's whole kv_budget_bytes: it could never start. Once queued, a request is
 * admitted when its peak KV memory fits the budget beside the running ones. *id (may be NULL) identifies it for kr_cancel and in its events. */
KR_API kr_status kr_submit(kr_context *ctx, const kr_series *series,
                           const kr_forecast_params *params, const kr_request_params *request,
                           uint64_t *id, kr_error *err);
/* Cancels a queued or running request: its FAILED event (KR_ERR_CANCELLED) follows and its
 * KV memory is freed. Unknown or finished ids are ignored, and so is every call once
 * kr_context_drain has returned. */
KR_API void kr_cancel(kr_context *ctx, uint64_t id);

/* ---------------------------------------------------------------- synchronous forecasts */

/* Runs one forecast through the context and waits for it: normalise -> encode -> prefill
 * once -> fork into `paths` -> generate pred_len steps -> decode -> denormalise. */
KR_API kr_status kr_forecast_run(kr_context *ctx, const kr_series *series,
                                 const kr_forecast_params *params, kr_forecast **out,
                                 kr_error *err);

/* Several independent series (batch / backtest mode), any mix of lengths, batched together;
 * out[i] receives series i, equal to what kr_forecast_run gives for it. Errors name the
 * series ("series 3: row 17, field 'close': ..."); on an error no result is returned.
 * request (NULL: kr_request_default_params()) gives one deadline for the whole batch, a
 * priority, an abort check and progress events (event.index = the series); the first failure
 * cancels the rest. request->on_event receives every event of every series, DONE with
 * event.result NULL: the results are out[]'s alone (freed by the call itself when the batch
 * fails). (Until 0.3 the call with request was kr_forecast_run_batch_ex.) */
KR_API kr_status kr_forecast_run_batch(kr_context *ctx, const kr_series *series, int n_series,
                                       const kr_forecast_params *params,
                                       const kr_request_params *request, kr_forecast **out,
                                       kr_error *err);

/* ---------------------------------------------------------------- results */

KR_API void kr_forecast_free(kr_forecast *f);

KR_API int kr_forecast_pred_len(const kr_forecast *f);
KR_API int kr_forecast_paths(const kr_forecast *f);
/* History rows the model saw. */
KR_API int kr_forecast_lookback(const kr_forecast *f);
/* Leading history rows the normalisation statistics were taken over: the lookback in exact
 * mode, the anchor's rows in anchored mode. */
KR_API int kr_forecast_norm_rows(const kr_forecast *f);
/* Heap bytes the result holds: what keeping it costs (a server budgets results waiting for
 * their clients by it). 0 for NULL. */
KR_API size_t kr_forecast_bytes(const kr_forecast *f);
/* Borrowed, valid until kr_forecast_free. */
KR_API const int64_t *kr_forecast_timestamps(const kr_forecast *f); /* [pred_len] */
KR_API const double *kr_forecast_mean(const kr_forecast *f); /* [pred_len][6] */
/* [pred_len][6] candles of one path; NULL if paths were not kept. */
KR_API const double *kr_forecast_path(const kr_forecast *f, int path);
/* [pred_len] generated token ids of one path. */
KR_API const int32_t *kr_forecast_path_s1(const kr_forecast *f, int path);
KR_API const int32_t *kr_forecast_path_s2(const kr_forecast *f, int path);
/* [lookback] token ids of the history the model saw. */
KR_API const int32_t *kr_forecast_history_s1(const kr_forecast *f);
KR_API const int32_t *kr_forecast_history_s2(const kr_forecast *f);
/* Linear-interpolated quantile q in [0,1] across paths, per step and feature, into
 * out[pred_len][6]. Needs kept paths. */
KR_API kr_status kr_forecast_quantile(const kr_forecast *f, double q, double *out, kr_error *err);

/* The step profile: where the engine steps' time went, part by part. Parts are exclusive
 * (their seconds add up to seconds_steps, KR_PART_OTHER being the remainder); the predictor's
 * kernels are in GEMM / ATTENTION / NORM_ACT, the tokenizer's whole passes in TOK_ENCODE /
 * TOK_DECODE. FLOPs and bytes are what the part's work needs (2 per multiply-add; weights as
 * stored plus activations; attention as if each row read its keys), so flops / seconds is
 * the rate it ran at. */
typedef enum kr_profile_part {
    KR_PART_GEMM =
        0, /* the predictor's Linear layers (blocks, embedding fusion, heads, s2 layer) */
    KR_PART_ATTENTION, /* the predictor's self-attention and the s2 cross-attention */
    KR_PART_NORM_ACT, /* RMSNorm, RoPE, SwiGLU, residual adds, embeddings, KV-row writes */
    KR_PART_SAMPLING, /* the draws: temperature, top-k / top-p, softmax, multinomial */
    KR_PART_TOK_ENCODE, /* the tokenizer's encoder over the history */
    KR_PART_TOK_DECODE, /* the tokenizer's decoder over the paths */
    KR_PART_OTHER, /* the rest: scheduling, batch building, copies, thread hand-offs */
    KR_PART_COUNT
} kr_profile_part;

typedef struct kr_profile_entry {
    double seconds, flops, bytes;
    int64_t calls;
} kr_profile_entry;

typedef struct kr_step_profile {
    int enabled; /* 0: the context runs without the profile (kr_context_params.profile) */
    double seconds_steps; /* wall time of the engine steps (of the forecast: those it was in) */
    kr_profile_entry part[KR_PART_COUNT];
    /* Exact mode past max_context: the predictor passes of the steps that re-ran the window
     * (a view across GEMM / ATTENTION / NORM_ACT, not an extra part). */
    kr_profile_entry rerun;
    int64_t pool_regions; /* parallel regions run on the thread pool (round trips) */
    double seconds_pool_wait; /* of the parts' time: the engine thread waiting for the others at
                               * the end of a region (imbalance and hand-off latency) */
} kr_step_profile;
/* "gemm", "attention", "norm_act", "sampling", "tokenizer_encode", "tokenizer_decode",
 * "other"; NULL out of range. */
KR_API const char *kr_profile_part_name(int part);

/* Statistics of the run: tokens and timing. */
typedef struct kr_forecast_stats {
    int64_t prefill_tokens; /* tokens run through the predictor as prefill */
    int64_t cached_tokens; /* context tokens taken from the prefix cache instead */
    int64_t decode_tokens; /* tokens run one at a time (per path) */
    int64_t window_recomputes; /* exact-mode window re-runs past max_context */
    /* Re-run tokens (counted in prefill_tokens) whose embedding and first block's Q/K/V were
     * kept from the token's earlier pass instead of computed again: the same numbers, less
     * work. */
    int64_t reused_tokens;
    /* Predictor memory the forecast held: its KV cache, plus the kept first-stage rows of an
     * exact window past max_context (4·d_model floats a token). */
    size_t kv_bytes;
    double seconds_total, seconds_prefill, seconds_decode, seconds_tokenizer;
    double seconds_queue; /* waiting for admission */
    double seconds_ttft; /* submission to the first sampled step */
    /* The engine steps this forecast took part in. A step batched with other requests counts
     * whole for each of them, as seconds_prefill / _decode do. */
    kr_step_profile profile;
} kr_forecast_stats;
KR_API void kr_forecast_get_stats(const kr_forecast *f, kr_forecast_stats *stats);

/* ---------------------------------------------------------------- context state */

typedef struct kr_context_stats {
    int running, waiting, draining;
    size_t kv_bytes_used, kv_bytes_budget, prefix_cache_bytes;
    size_t prefix_cache_decoder_bytes; /* of prefix_cache_bytes: tokenizer-decoder contexts */
    int64_t prefix_queried_tokens, prefix_hit_tokens;
    int batch_wait_ms, max_batch_tokens, max_running, max_queue; /* current (tuned) values */
    int static_batching;
    int64_t steps; /* engine steps run */
    int64_t completed, failed; /* requests finished either way */
    size_t workspace_bytes; /* the arena's size */
    int64_t workspace_grows; /* times a step needed more than the sizing foresaw */
    int n_threads;
    char kv_dtype[8];
    kr_step_profile profile; /* every engine step since the context was created */
    /* Requests started ahead of an earlier one that waited for KV memory, which they did
     * not delay (backfilling: they end before it could start, or leave it room). */
    int64_t backfilled;
    double queue_oldest_wait_seconds; /* the longest-waiting queued request's wait (0: none) */
} kr_context_stats;
/* running, waiting, queue_oldest_wait_seconds, completed, failed, kv_bytes_used of running
 * requests and the limits are current (a request is counted before its result reaches the caller); the other
 * figures are as of the last engine step (the engine thread publishes them at each step's
 * end, so any thread reads them without racing it). */
KR_API void kr_context_get_stats(kr_context *ctx, kr_context_stats *stats);
/* Returns once the engine thread has come round between two steps: a liveness probe, e.g.
 * for a service manager's watchdog (a probe that does not return means a stuck engine).
 * Waits for at most the step in progress. KR_ERR_BUSY once the engine is shutting down. */
KR_API kr_status kr_context_ping(kr_context *ctx, kr_error *err);

/* Limits that can change while running (time-of-day profiles, operators). A field < 0 (or 0
 * for max_batch_tokens / max_running / max_queue, NaN or < 0 for the targets) keeps the
 * current value; the others must be in kr_context_params' ranges. The new values are in
 * force (and in kr_context_get_stats) when the call returns; the engine's next step and the
 * tuner, which continues from them, take them at the next step boundary. Logged with the
 * reason. KR_ERR_INVALID_ARG when a value is out of range: then nothing changes, and the
 * log callback gets the field and the value. */
typedef struct kr_context_limits {
    int batch_wait_ms, max_batch_tokens, max_running, max_queue;
    int static_batching; /* -1 keep, 0 continuous, 1 static */
    double target_queue_p95_s, target_ttft_p95_s;
} kr_context_limits;
KR_API kr_context_limits kr_context_limits_keep(void);
KR_API kr_status kr_context_set_limits(kr_context *ctx, const kr_context_limits *limits,
                                       const char *reason);

/* The context's metrics in Prometheus text format (TTFT, inter-step latency, queue wait,
 * batch size, busy ratio, KV usage, prefix-cache hits, request outcomes): the queue, the
 * limits, running requests and KV use as of the call, the rest as of the last engine step.
 * Caller frees *out. */
KR_API kr_status kr_context_metrics(kr_context *ctx, char **out, kr_error *err);

/* ---------------------------------------------------------------- quantisation */

/* How kr_model_quantize quantises (kr_quantize_default_params, then set fmt). */
typedef struct kr_quantize_params {
    const char *fmt; /* "bf16", "int8", "fp8", "q4" (required) */
    /* NULL or "auto": calibrated (n_calib > 0): smoothquant for int8, awq for q4; otherwise
     * rtn. "rtn": round-to-nearest, calibration series unused. "awq": q4,
     * "smoothquant": int8 (as above). "gptq": q4 or int8, GPTQ second-order error
     * compensation from every calibration row's inputs (XᵀX per Linear). awq, smoothquant and
     * gptq need calibration series. */
    const char *method;
    int group; /* q4 group size, 32 or 64; <= 0: 32 */
    int n_threads; /* calibration and GPTQ threads; <= 0: all CPUs */
    double gptq_damp; /* GPTQ: added to XᵀX's diagonal, as a fraction of its mean (0.01) */
} kr_quantize_params;
KR_API kr_quantize_params kr_quantize_default_params(void);

/* A new model: src's checkpoint with every Linear quantised to params->fmt ("bf16", "int8",
 * "fp8", "q4"; q4 group 32 or 64, <= 0: 32). src is not changed: contexts may keep running on
 * it meanwhile, and it must be freed on its own (kr_model_free). The new model reads src's
 * checkpoint files again (mapped, so sharing their pages with src): they must still be there.
 * With calibration series (n_calib > 0) the new model first forecasts each of them (on a
 * temporary context of params->n_threads) while recording every Linear's inputs, then chooses
 * per Linear the smoothing factors (int8, SmoothQuant-style) or activation-aware channel scales
 * (q4, AWQ-style) that minimise the Linear's output error on the recorded inputs (no scaling
 * is one of the candidates, so calibration never does worse on them than round-to-nearest), or
 * compensates each Linear's rounding by GPTQ. KR_ERR_INVALID_ARG for a src already quantised,
 * a bad format, group or method, or n_calib < 0. Caller owns *out (kr_model_free). (Until 0.3
 * kr_model_quantize changed its model in place and refused while contexts lived on it.) */
KR_API kr_status kr_model_quantize(const kr_model *src, const kr_quantize_params *params,
                                   const kr_series *calib, int n_calib, kr_model **out,
                                   kr_error *err);
/* Writes a quantised model as out_dir/predictor and out_dir/tokenizer (config.json +
 * model.safetensors) that kr_model_load maps without converting anything. Both are written into
 * a staging directory inside out_dir and moved into place when complete: whenever the process
 * dies, out_dir holds the previous pair, the new one, or an incomplete one that fails to load,
 * never a mix. Saves into one out_dir at once (threads, processes) install their pairs one after
 * the other (an flock of out_dir). Refused as kr_model_check_quantized_out refuses. */
KR_API kr_status kr_model_save_quantized(const kr_model *model, const char *out_dir, kr_error *err);
/* Whether out_dir can take a quantised copy of the checkpoint in predictor_dir + tokenizer_dir
 * (either may be NULL), checked before the (possibly long) quantisation: KR_ERR_INVALID_ARG
 * when out_dir is empty, is one of those directories or its predictor/ or tokenizer/ is (the
 * save would replace the original), or an existing out_dir/predictor or out_dir/tokenizer holds
 * anything a save does not write; KR_ERR_IO when out_dir cannot be created or written. Creates
 * out_dir. */
KR_API kr_status kr_model_check_quantized_out(const char *out_dir, const char *predictor_dir,
                                              const char *tokenizer_dir, kr_error *err);

/* ---------------------------------------------------------------- checkpoint tensors */

/* The tensors of one checkpoint directory (its model.safetensors, mapped read-only), by the
 * names the file gives them: the official state_dict's ("embedding.emb_s1.weight",
 * "transformer.0.self_attn.q_proj.bias", "tokenizer.bsq.basis", ...). For bindings that
 * expose a model's parameters (the Python package's parameters() / state_dict()), and for
 * inspecting a checkpoint. Independent of kr_model: a predictor or a tokenizer alone.
 *
 * Floating-point tensors are given as f32: F32 ones 4-byte aligned in the file in place (no
 * copy), F16 / BF16 / F64 / unaligned F32 ones converted at open; integer tensors (the BSQ
 * bases) as int64. A checkpoint written by kronos quantize (its Linears stored as int8 /
 * fp8 / q4 / bf16 qweight with their scales) is KR_ERR_UNSUPPORTED at open, saying so: open
 * the f32 checkpoint it was made from. Thread safety: immutable once open; read it from any
 * thread. */
typedef struct kr_checkpoint kr_checkpoint;

#define KR_TENSOR_MAX_DIMS 8

typedef struct kr_tensor_view {
    const char *name; /* borrowed, valid until kr_checkpoint_free */
    const char *dtype; /* of data: "F32" or "I64" */
    const char *stored_dtype; /* as in the file: "F32", "BF16", "F16", "F64", "I64", "I32" */
    int ndim; /* 0 (a scalar) .. KR_TENSOR_MAX_DIMS */
    int64_t shape[KR_TENSOR_MAX_DIMS];
    int64_t numel;
    /* [numel] elements, row-major, read-only (the file's mapping is PROT_READ: a write
     * faults); valid until kr_checkpoint_free. NULL when numel is 0. */
    const void *data;
    /* 1: a buffer of the official module (a rotary inv_freq, the BSQ bases: integer), which
     * torch's state_dict() holds but parameters() does not; 0: a parameter. */
    int is_buffer;
    int converted; /* 1: converted or copied at open; 0: the file's own bytes */
} kr_tensor_view;

/* Opens dir/model.safetensors (validated as kr_model_load validates it; a FIFO or device is
 * refused). Errors name the file and the tensor. Caller owns *out (kr_checkpoint_free). */
KR_API kr_status kr_checkpoint_open(const char *dir, kr_checkpoint **out, kr_error *err);
KR_API void kr_checkpoint_free(kr_checkpoint *ck);
/* Tensors in the order of the file's header. */
KR_API int kr_checkpoint_tensor_count(const kr_checkpoint *ck);
/* Tensor `index` (0 .. count - 1); KR_ERR_INVALID_ARG out of range. */
KR_API kr_status kr_checkpoint_tensor(const kr_checkpoint *ck, int index, kr_tensor_view *out,
                                      kr_error *err);

/* ---------------------------------------------------------------- random-weight checkpoints */

/* Checkpoints with deterministic random weights and the tensor names, shapes and dtypes of a
 * real one, for tests and benchmarks without the public weights: shapes "tiny", "mini",
 * "small", "base". Non-zero if the name is one of them. */
KR_API int kr_random_shape_exists(const char *shape);
/* Writes out_dir/tokenizer and out_dir/predictor (config.json + model.safetensors), creating
 * the directories; the same shape and seed always give identical files. */
KR_API kr_status kr_model_write_random_shape(const char *shape, uint64_t seed, const char *out_dir,
                                             kr_error *err);
/* The random checkpoint of (shape, seed) that benchmarks share: dir receives
 * $TMPDIR/kronos-bench-<shape>-seed<seed> (/tmp without TMPDIR), written there unless its
 * predictor is already; *written (may be NULL) says whether this call wrote it. */
KR_API kr_status kr_model_random_cached(const char *shape, uint64_t seed, char *dir,
                                        size_t dir_size, int *written, kr_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_H */
