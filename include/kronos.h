/*
 * kronos.h — public C API of the kronos inference engine.
 *
 * Kronos is a family of foundation models for financial K-lines (OHLCV candles). This
 * library loads the public Hugging Face checkpoints (tokenizer + predictor directories,
 * each `config.json` + `model.safetensors`), reproduces the official PyTorch predictor's
 * numbers and forecasts candles with a KV cache, shared prefill and many sample paths.
 *
 * Conventions (as in libuv / llama.h):
 *   - Every fallible function returns a kr_status: 0 ok, negative on error. Detail goes into
 *     a caller-supplied kr_error (may be NULL); there is no global error state.
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

/* Library version string, e.g. "0.1.0". */
const char *kr_version(void);

/* ---------------------------------------------------------------- model */

typedef struct kr_model kr_model; /* tokenizer + predictor pair, immutable after load */

typedef struct kr_model_params {
    int n_threads; /* worker threads for compute; <= 0: number of online CPUs */
    /* Weight format: NULL or "f32" keeps the checkpoint as stored (a kronos quantize
     * checkpoint stays in its format); "bf16", "int8", "fp8" or "q4" quantises every Linear
     * of an f32 checkpoint at load, round-to-nearest (kronos quantize adds calibration). */
    const char *quant;
    int quant_group; /* q4 group size, 32 or 64; <= 0: 32 */
    /* KV-cache precision: NULL or "f32", "bf16" (half the memory), "int8" (a quarter). */
    const char *kv_dtype;
} kr_model_params;

kr_model_params kr_model_default_params(void);

/* Loads a predictor directory and a tokenizer directory (Hugging Face layout: config.json +
 * model.safetensors). F32 tensors are used in place from the mmapped file; F16/BF16 are
 * converted to f32 at load. Every tensor the architecture needs is checked for presence,
 * dtype and shape; errors name the file and the tensor.
 * On success *out is set; caller owns it, free with kr_model_free. */
kr_status kr_model_load(const char *predictor_dir, const char *tokenizer_dir,
                        const kr_model_params *params, kr_model **out, kr_error *err);
void kr_model_free(kr_model *model);

typedef struct kr_model_info {
    int d_model, n_layers, n_heads, ff_dim; /* predictor shape */
    int tok_d_model, tok_n_heads, tok_ff_dim; /* tokenizer shape */
    int tok_enc_blocks, tok_dec_blocks; /* = n_enc_layers - 1, n_dec_layers - 1 */
    int s1_bits, s2_bits;
    int learn_te;
    size_t n_params; /* predictor + tokenizer parameters used at inference */
    size_t weight_bytes; /* bytes of weights as held in memory (after quantisation) */
    double load_seconds; /* wall time of kr_model_load (quantisation included) */
    char quant[8]; /* weight format of the Linears: "f32", "bf16", "int8", "fp8", "q4" */
    char quant_method[16]; /* "rtn", "smoothquant", "awq" ("" for f32) */
    int quant_group; /* q4 group size (0 otherwise) */
    double quant_seconds; /* part of load_seconds spent quantising (0 if none) */
    char kv_dtype[8]; /* "f32", "bf16", "int8" */
    int demo; /* predictor config.json "intended_use": "demo" or "test": runs the software,
                 is no forecasting model (reports and the server say so) */
    char source[256]; /* predictor config.json "source" (where the weights come from), or "" */
} kr_model_info;

void kr_model_get_info(const kr_model *model, kr_model_info *info);

/* ---------------------------------------------------------------- series (input candles) */

/* Column order used everywhere: open, high, low, close, volume, amount. */
enum { KR_OPEN = 0, KR_HIGH, KR_LOW, KR_CLOSE, KR_VOLUME, KR_AMOUNT, KR_N_FEATURES };

/* A candle history. Borrowed by the forecast calls; values are as read (double), the
 * engine converts them to float32 exactly as the reference does. */
typedef struct kr_series {
    int64_t n; /* rows */
    const int64_t *timestamps; /* [n] seconds since 1970-01-01, naive wall-clock taken as UTC */
    const double *values; /* [n][6] open, high, low, close, volume, amount */
    int has_volume; /* 0: volume and amount are filled with 0 */
    int has_amount; /* 0: amount = volume * mean(open, high, low, close) */
    const int64_t *future_timestamps; /* [pred_len] stamps of the candles to forecast, or NULL
                                         to infer them from the history (interval, weekdays,
                                         session hours) */
} kr_series;

/* ---------------------------------------------------------------- quantisation */

/* Quantises every Linear of an f32 model in place to fmt ("bf16", "int8", "fp8", "q4";
 * q4 group 32 or 64, <= 0: 32). With calibration series (n_calib > 0) the model first
 * forecasts each of them while recording every Linear's inputs, then chooses per Linear the
 * smoothing factors (int8, SmoothQuant-style) or activation-aware channel scales (q4,
 * AWQ-style) that minimise the Linear's output error on the recorded inputs (no scaling is
 * one of the candidates, so calibration never does worse on them than round-to-nearest).
 * Not while forecasts run on the model. */
kr_status kr_model_quantize(kr_model *model, const char *fmt, int group, const kr_series *calib,
                            int n_calib, kr_error *err);
/* Writes a quantised model as out_dir/predictor and out_dir/tokenizer (config.json +
 * model.safetensors) that kr_model_load maps without converting anything. */
kr_status kr_model_save_quantized(const kr_model *model, const char *out_dir, kr_error *err);

/* ---------------------------------------------------------------- forecasting */

typedef enum kr_window_mode {
    KR_WINDOW_EXACT = 0, /* past max_context: re-run the trailing window (the reference) */
    KR_WINDOW_ROLLING = 1 /* past max_context: sliding KV cache (approximation, opt-in) */
} kr_window_mode;

typedef struct kr_forecast_params {
    int pred_len; /* candles to generate (> 0) */
    int lookback; /* rows of history used; <= 0: all rows up to max_context */
    int max_context; /* predictor window (default 512) */
    int paths; /* sample paths (default 1) */
    float temperature; /* default 1.0 */
    int top_k; /* default 0 (off); 1 = greedy */
    float top_p; /* default 0.9 */
    uint64_t seed; /* RNG seed; each path has its own stream */
    kr_window_mode window; /* default exact */
    float clip; /* normalised-input clip (default 5) */
    int keep_paths; /* non-zero: keep every path's candles and tokens in the result */
    int first_path; /* random stream of path 0 (default 0): paths [first_path,
                                first_path + paths) of a larger run, so a run can be extended
                                with more paths that equal those of one bigger run */
} kr_forecast_params;

kr_forecast_params kr_forecast_default_params(void);

typedef struct kr_forecast kr_forecast; /* result; caller owns, free with kr_forecast_free */

/* Runs one forecast: normalise -> encode -> prefill once -> fork into `paths` -> generate
 * pred_len steps -> decode -> denormalise. Thread-safe on a shared model. */
kr_status kr_forecast_run(kr_model *model, const kr_series *series,
                          const kr_forecast_params *params, kr_forecast **out, kr_error *err);

/* Several independent series in one call (batch / backtest mode); out[i] receives series i.
 * Any mix of lengths. Each result equals the one kr_forecast_run gives for that series. */
kr_status kr_forecast_run_batch(kr_model *model, const kr_series *series, int n_series,
                                const kr_forecast_params *params, kr_forecast **out, kr_error *err);
void kr_forecast_free(kr_forecast *f);

int kr_forecast_pred_len(const kr_forecast *f);
int kr_forecast_paths(const kr_forecast *f);
/* Borrowed, valid until kr_forecast_free. */
const int64_t *kr_forecast_timestamps(const kr_forecast *f); /* [pred_len] */
const double *kr_forecast_mean(const kr_forecast *f); /* [pred_len][6], denormalised */
/* [pred_len][6] candles of one path; NULL if paths were not kept. */
const double *kr_forecast_path(const kr_forecast *f, int path);
/* [pred_len] generated token ids of one path; NULL if paths were not kept. */
const int32_t *kr_forecast_path_s1(const kr_forecast *f, int path);
const int32_t *kr_forecast_path_s2(const kr_forecast *f, int path);
/* Linear-interpolated quantile q in [0,1] across paths, per step and feature, into
 * out[pred_len][6]. Needs kept paths. */
kr_status kr_forecast_quantile(const kr_forecast *f, double q, double *out, kr_error *err);

/* Statistics of the run: tokens and timing. */
typedef struct kr_forecast_stats {
    int64_t prefill_tokens; /* tokens run through the predictor as prefill */
    int64_t cached_tokens; /* context tokens taken from the prefix cache instead */
    int64_t decode_tokens; /* tokens run one at a time (per path) */
    int64_t window_recomputes; /* exact-mode window re-runs past max_context */
    size_t kv_bytes; /* KV cache memory the forecast held (predictor) */
    double seconds_total, seconds_prefill, seconds_decode, seconds_tokenizer;
} kr_forecast_stats;
void kr_forecast_get_stats(const kr_forecast *f, kr_forecast_stats *stats);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_H */
