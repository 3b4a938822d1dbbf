/*
 * kronos/eval.h — measuring the engine: how fast it forecasts (bench) and what a quantised
 * model costs in accuracy against its f32 original (eval-quant).
 *
 * Both run on contexts the caller creates (kronos.h), so they measure exactly what a program
 * using the library would get; `kronos bench` and `kronos eval-quant` are thin front ends.
 * Reports are opaque; write them as Markdown or JSON.
 */
#ifndef KRONOS_EVAL_H
#define KRONOS_EVAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kronos.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called when a long phase starts (finished 0) and ends (finished 1); `what` says what runs.
 * The CLI shows a ticker on terminals; may be NULL. */
typedef void (*kr_eval_progress)(const char *what, int finished, void *user);

/* ---- bench ---------------------------------------------------------------------------- */

typedef struct kr_bench_params {
    const int *paths; /* path counts to time, one table row (two with naive) each */
    int n_paths;
    int pred_len; /* candles to forecast */
    int repeat; /* timed repeats of the cached path; the median is reported */
    int naive; /* also time the full-recompute path (the reference algorithm), once */
    kr_window_mode window;
    /* Descriptive, for the report: the random shape's name or the model directory, and the
     * history rows given (the series are cut to their lookback by the caller). */
    const char *label;
    const char *shape; /* a random shape name ("small"...) to compare with the official
                          predictor's anchors, or NULL */
    int lookback;
    int threads;
    double weights_generated_seconds; /* > 0 when the random weights were written just now */
    kr_eval_progress progress;
    void *user;
    int profile; /* the report adds each row's step profile (kr_step_profile, last repeat) */
} kr_bench_params;

typedef struct kr_bench_report kr_bench_report;

KR_API kr_bench_params kr_bench_default_params(void);
/* Times forecasts of n_series series on ctx (best created with prefix_cache 0, so every
 * repeat computes everything as the reference would). */
KR_API kr_status kr_bench_run(kr_context *ctx, const kr_series *series, int n_series,
                              const kr_bench_params *params, kr_bench_report **out, kr_error *err);
/* Markdown table (json 0) or a JSON document (json 1). Either names the ISA and the machine's
 * FMA peak, measured when the run started (kr_machine_fma_peak). */
KR_API kr_status kr_bench_write(const kr_bench_report *report, FILE *f, int json, kr_error *err);
KR_API void kr_bench_report_free(kr_bench_report *report);

/* ---- eval-quant ----------------------------------------------------------------------- */

typedef struct kr_eval_quant_params {
    const char *const *data; /* candle CSV files; windows are cut from each */
    int n_data;
    int windows; /* per file, evenly spaced, each followed by pred_len real candles */
    int lookback; /* rows per window, 16..512 */
    int pred_len;
    int paths; /* sample paths per forecast, >= 2 */
    uint64_t seed;
    const char *kv_dtype; /* label of the quantised context's KV precision (NULL: f32) */
    kr_eval_progress progress;
    void *user;
} kr_eval_quant_params;

typedef struct kr_eval_quant_report kr_eval_quant_report;

KR_API kr_eval_quant_params kr_eval_quant_default_params(void);
/* Compares the model of `quant` with the f32 model of `ref` on the same windows: teacher-forced
 * next-token agreement and KL, forecast error against f32 and against what happened, direction
 * agreement, a KS test of path returns, ROC-AUC of P(up) and the risk-control KS of P(up)
 * (separation of windows that went up from those that went down) for both models, rank
 * correlation of expected returns.
 * Errors name the file. */
KR_API kr_status kr_eval_quant_run(kr_context *ref, kr_context *quant,
                                   const kr_eval_quant_params *params, kr_eval_quant_report **out,
                                   kr_error *err);
KR_API kr_status kr_eval_quant_write_markdown(const kr_eval_quant_report *report, FILE *f,
                                              kr_error *err);
KR_API kr_status kr_eval_quant_write_json(const kr_eval_quant_report *report, FILE *f,
                                          kr_error *err);
KR_API void kr_eval_quant_report_free(kr_eval_quant_report *report);
/* The windows the report rests on: params.windows per file, fewer where a file is too short
 * for that many (0 for NULL). */
KR_API int64_t kr_eval_quant_report_windows(const kr_eval_quant_report *report);

/* ---- acceptance gates ------------------------------------------------------------------
 * A JSON object of thresholds (deploy/quant-gate.json documents each); any subset may be
 * given, plus an optional "description" string:
 *   s1_top1_agreement_min, s2_top1_agreement_min   teacher-forced top-1 agreement, 0..1
 *   s1_kl_max, s2_kl_max                           mean KL(f32 ‖ quant), nats
 *   ks_p_value_min                                 KS p-value of the path returns at horizon
 *   roc_auc_drop_max                               ROC-AUC of P(up), f32 − quant
 *   rank_correlation_min                           Spearman of expected returns over windows
 *   risk_ks_drop_max                               risk-control KS of P(up), f32 − quant
 * An unknown or repeated key, a value that is not a number or out of range, or an object with
 * no gate is refused naming the file and key. */
typedef struct kr_quant_gate kr_quant_gate;
KR_API kr_status kr_quant_gate_load(const char *path, kr_quant_gate **out, kr_error *err);
/* text[0..len) (need not be NUL-terminated); origin names it in errors. */
KR_API kr_status kr_quant_gate_parse(const char *text, size_t len, const char *origin,
                                     kr_quant_gate **out, kr_error *err);
KR_API void kr_quant_gate_free(kr_quant_gate *gate);
/* Checks the report against every gate of the file; *failed = gates that do not hold (a
 * figure that is NaN fails). The results join the report's Markdown and JSON. */
KR_API kr_status kr_eval_quant_apply_gate(kr_eval_quant_report *report, const kr_quant_gate *gate,
                                          int *failed, kr_error *err);
/* One line per failed gate: its key, the figure, the threshold and by how much it missed. */
KR_API kr_status kr_eval_quant_write_gate_failures(const kr_eval_quant_report *report, FILE *f,
                                                   kr_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_EVAL_H */
