/*
 * eval/eval_quant_internal — the eval-quant report: everything measured, accumulated over
 * windows (eval_quant.c fills it, eval_quant_report.c writes it).
 */
#ifndef KR_EVAL_QUANT_INTERNAL_H
#define KR_EVAL_QUANT_INTERNAL_H

#include <cjson/cJSON.h>

#include "analyst/fidelity_stats.h"
#include "eval/draft_acceptance.h"
#include "kronos/eval.h"

/* A position where f32's best s1 token leads the runner-up by less than this many nats is a
 * near-tie: any perturbation may swap them, and the swap changes the sampled distribution by
 * almost nothing. Agreement is reported over all positions and over the decisive rest. */
#define KR_EVAL_DECISIVE_NATS 0.1

/* Gates a file may set (quant_gate.c). */
#define KR_EVAL_GATES 8

typedef struct kr_eval_gate_result {
    int def; /* index into quant_gate.c's table */
    double value, threshold;
    int pass;
} kr_eval_gate_result;

struct kr_eval_quant_report {
    /* what was compared */
    kr_model_info quant_info;
    char kv_dtype[16];
    int n_files, lookback, pred_len, paths;
    uint64_t seed;
    /* next-token fidelity */
    int64_t positions, s1_agree, s2_agree, tok_rows, tok_s1_agree, tok_s2_agree;
    int64_t s1_decisive, s1_decisive_agree;
    double kl_s1, kl_s2;
    /* the quantised model as a speculative draft of the f32 one */
    kr_draft_acc draft;
    size_t ref_linear_bytes, quant_linear_bytes; /* the predictors' Linears as held */
    /* forecast fidelity */
    kr_err_acc vs_ref, q_vs_actual, ref_vs_actual;
    int64_t dir_agree, windows;
    int64_t n_ret;
    int n_sym;
    double ks_d, ks_p, auc_ref, auc_q, rho_windows, rho_symbols;
    /* risk control: KS distance between the P(up) of windows that went up and down */
    double risk_ks_ref, risk_ks_p_ref, risk_ks_q, risk_ks_p_q;
    int64_t windows_up, windows_down;
    double seconds_teacher, seconds_forecast;
    /* acceptance gates (kr_eval_quant_apply_gate) */
    int gated, n_gates;
    kr_eval_gate_result gates[KR_EVAL_GATES];
    char gate_origin[256];
};

/* The gates' part of the reports (nothing when no gate was applied). */
void kr_eval_gate_write_markdown(const kr_eval_quant_report *r, FILE *md);
void kr_eval_gate_add_json(const kr_eval_quant_report *r, cJSON *root);

#endif
