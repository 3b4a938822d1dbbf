/*
 * eval/eval_quant_report — the eval-quant report as Markdown (a table to read) and JSON (the
 * numbers, NaN as null).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "base/json_out.h"
#include "eval/eval_quant_internal.h"

static double ratio(int64_t num, int64_t den) { return den ? (double)num / (double)den : NAN; }

/* The draft's predictor Linear bytes over f32's (NaN without both). */
static double draft_ratio(const kr_eval_quant_report *r) {
    return r->ref_linear_bytes && r->quant_linear_bytes
               ? (double)r->quant_linear_bytes / (double)r->ref_linear_bytes
               : NAN;
}

/* Figures for the Markdown through one format each, with "n/a" for a figure that could not be
 * measured (NaN: one class of outcomes, no positions): never "nan" or "+nan" in a table. The
 * strings live in the pool until it wraps, enough for one fprintf. */
typedef struct fig_pool {
    char s[16][48];
    int next;
} fig_pool;

static const char *fig(fig_pool *p, const char *fmt, double v) {
    char *b = p->s[p->next++ % 16];
    if (!isfinite(v))
        snprintf(b, sizeof p->s[0], "n/a");
    else
        snprintf(b, sizeof p->s[0], fmt, v);
    return b;
}

static void write_draft_markdown(const kr_eval_quant_report *r, FILE *md) {
    const kr_draft_acc *a = &r->draft;
    double beta = draft_ratio(r);
    fig_pool fp = { .next = 0 };
    fprintf(md,
            "As the draft of a self-speculative decoder (exact: f32 verifies, the same draws "
            "decide; teacher-forced over the %lld positions, sampling as the forecasts): the "
            "draft draws f32's s1 at %s, its s2 at %s, both at %s of positions. "
            "The draft's predictor Linears are %s of f32's bytes.\n\n",
            (long long)a->positions, fig(&fp, "%.2f%%", 100.0 * ratio(a->s1_agree, a->positions)),
            fig(&fp, "%.2f%%", 100.0 * ratio(a->s2_agree, a->positions)),
            fig(&fp, "%.2f%%", 100.0 * ratio(a->both_agree, a->positions)), fig(&fp, "%.3f", beta));
    fprintf(md, "| draft length K | tokens per f32 pass | weight bytes per token vs plain |\n"
                "|---:|---:|---:|\n");
    for (int k = 0; k < KR_DRAFT_KS; k++)
        fprintf(md, "| %d | %s | %s |\n", kr_draft_k[k],
                fig(&fp, "%.3f", kr_draft_tokens_per_pass(a, k)),
                fig(&fp, "%.3f", kr_draft_bytes_per_token(a, k, beta)));
    fprintf(md, "\n");
}

kr_status kr_eval_quant_write_markdown(const kr_eval_quant_report *r, FILE *md, kr_error *err) {
    if (!r || !md) return kr_error_set(err, KR_ERR_INVALID_ARG, "eval-quant: no report or file");
    const kr_model_info *qi = &r->quant_info;
    fig_pool fp = { .next = 0 };
    const double pos = r->positions ? (double)r->positions : NAN;
    fprintf(md, "### %s%s%s, kv %s vs f32\n\n", qi->quant, qi->quant_method[0] ? " " : "",
            qi->quant_method, r->kv_dtype);
    fprintf(
        md,
        "%d files, %lld windows of %d rows, horizon %d, %d paths, seed %llu; weights %.1f MB\n\n",
        r->n_files, (long long)r->windows, r->lookback, r->pred_len, r->paths,
        (unsigned long long)r->seed, qi->weight_bytes / 1048576.0);
    fprintf(md, "| metric | value |\n|---|---:|\n");
    fprintf(md, "| s1 top-1 agreement (teacher-forced, %lld positions) | %s |\n",
            (long long)r->positions, fig(&fp, "%.2f%%", 100.0 * ratio(r->s1_agree, r->positions)));
    fprintf(md,
            "| s1 top-1 agreement where f32's top-1 leads by >= %.1f nats (%s of positions) | "
            "%s |\n",
            KR_EVAL_DECISIVE_NATS, fig(&fp, "%.1f%%", 100.0 * ratio(r->s1_decisive, r->positions)),
            fig(&fp, "%.2f%%", 100.0 * ratio(r->s1_decisive_agree, r->s1_decisive)));
    fprintf(md, "| s2 top-1 agreement | %s |\n",
            fig(&fp, "%.2f%%", 100.0 * ratio(r->s2_agree, r->positions)));
    fprintf(md, "| mean KL(f32 ‖ quant) s1 | %s |\n", fig(&fp, "%.5f", r->kl_s1 / pos));
    fprintf(md, "| mean KL(f32 ‖ quant) s2 | %s |\n", fig(&fp, "%.5f", r->kl_s2 / pos));
    fprintf(md, "| tokenizer s1 / s2 token agreement | %s / %s |\n",
            fig(&fp, "%.2f%%", 100.0 * ratio(r->tok_s1_agree, r->tok_rows)),
            fig(&fp, "%.2f%%", 100.0 * ratio(r->tok_s2_agree, r->tok_rows)));
    fprintf(md, "| mean-path close MAE vs f32 | %s |\n",
            fig(&fp, "%.6g", kr_err_acc_mae(&r->vs_ref)));
    fprintf(md, "| mean-path close MAPE vs f32 | %s |\n",
            fig(&fp, "%.3f%%", kr_err_acc_mape(&r->vs_ref)));
    fprintf(md, "| MAPE vs actual: f32 / quant | %s / %s |\n",
            fig(&fp, "%.3f%%", kr_err_acc_mape(&r->ref_vs_actual)),
            fig(&fp, "%.3f%%", kr_err_acc_mape(&r->q_vs_actual)));
    fprintf(md, "| direction agreement (mean path at horizon) | %s |\n",
            fig(&fp, "%.2f%%", 100.0 * ratio(r->dir_agree, r->windows)));
    fprintf(md, "| KS two-sample, path returns at horizon (n = %lld each) | D = %s, p = %s%s |\n",
            (long long)r->n_ret, fig(&fp, "%.4f", r->ks_d), fig(&fp, "%.4f", r->ks_p),
            !isfinite(r->ks_p) ? " (not measurable)"
            : r->ks_p < 0.05   ? " (rejects at 5%)"
                               : " (not rejected at 5%)");
    fprintf(md, "| ROC-AUC of P(up) vs realised direction: f32 / quant | %s / %s |\n",
            fig(&fp, "%.4f", r->auc_ref), fig(&fp, "%.4f", r->auc_q));
    fprintf(md, "| Spearman of expected returns across windows | %s |\n",
            fig(&fp, "%.4f", r->rho_windows));
    fprintf(md, "| Spearman of expected returns across symbols (%d, latest window) | %s |\n",
            r->n_sym, fig(&fp, "%.4f", r->rho_symbols));
    fprintf(md, "\n");
    fprintf(md,
            "Risk control — how P(up) separates the %lld windows that went up from the %lld "
            "that went down (KS: the largest distance between the two groups' CDFs of P(up)):\n\n",
            (long long)r->windows_up, (long long)r->windows_down);
    fprintf(md, "| measure | f32 | quant | quant − f32 |\n|---|---:|---:|---:|\n");
    fprintf(md, "| KS statistic | %s | %s | %s |\n", fig(&fp, "%.4f", r->risk_ks_ref),
            fig(&fp, "%.4f", r->risk_ks_q), fig(&fp, "%+.4f", r->risk_ks_q - r->risk_ks_ref));
    fprintf(md, "| KS p-value | %s | %s | |\n", fig(&fp, "%.4f", r->risk_ks_p_ref),
            fig(&fp, "%.4f", r->risk_ks_p_q));
    fprintf(md, "| ROC-AUC | %s | %s | %s |\n", fig(&fp, "%.4f", r->auc_ref),
            fig(&fp, "%.4f", r->auc_q), fig(&fp, "%+.4f", r->auc_q - r->auc_ref));
    fprintf(md, "\n");
    write_draft_markdown(r, md);
    kr_eval_gate_write_markdown(r, md);
    if (ferror(md)) return kr_error_set(err, KR_ERR_IO, "eval-quant: writing the report failed");
    return KR_OK;
}

kr_status kr_eval_quant_write_json(const kr_eval_quant_report *r, FILE *f, kr_error *err) {
    if (!r || !f) return kr_error_set(err, KR_ERR_INVALID_ARG, "eval-quant: no report or file");
    const kr_model_info *qi = &r->quant_info;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "quant", qi->quant);
    cJSON_AddStringToObject(root, "method", qi->quant_method);
    cJSON_AddStringToObject(root, "kv_dtype", r->kv_dtype);
    cJSON_AddNumberToObject(root, "weight_bytes", (double)qi->weight_bytes);
    cJSON_AddNumberToObject(root, "files", r->n_files);
    cJSON_AddNumberToObject(root, "windows", (double)r->windows);
    cJSON_AddNumberToObject(root, "lookback", r->lookback);
    cJSON_AddNumberToObject(root, "pred_len", r->pred_len);
    cJSON_AddNumberToObject(root, "paths", r->paths);
    cJSON *tok = cJSON_AddObjectToObject(root, "next_token");
    cJSON_AddNumberToObject(tok, "positions", (double)r->positions);
    kr_json_add_num(tok, "s1_top1_agreement", ratio(r->s1_agree, r->positions));
    kr_json_add_num(tok, "s2_top1_agreement", ratio(r->s2_agree, r->positions));
    kr_json_add_num(tok, "s1_decisive_fraction", ratio(r->s1_decisive, r->positions));
    kr_json_add_num(tok, "s1_top1_agreement_decisive", ratio(r->s1_decisive_agree, r->s1_decisive));
    kr_json_add_num(tok, "s1_mean_kl", r->positions ? r->kl_s1 / (double)r->positions : NAN);
    kr_json_add_num(tok, "s2_mean_kl", r->positions ? r->kl_s2 / (double)r->positions : NAN);
    kr_json_add_num(tok, "tokenizer_s1_agreement", ratio(r->tok_s1_agree, r->tok_rows));
    kr_json_add_num(tok, "tokenizer_s2_agreement", ratio(r->tok_s2_agree, r->tok_rows));
    cJSON *draft = cJSON_AddObjectToObject(root, "speculative_draft");
    const kr_draft_acc *da = &r->draft;
    cJSON_AddNumberToObject(draft, "positions", (double)da->positions);
    kr_json_add_num(draft, "s1_draw_agreement", ratio(da->s1_agree, da->positions));
    kr_json_add_num(draft, "s2_draw_agreement", ratio(da->s2_agree, da->positions));
    kr_json_add_num(draft, "token_draw_agreement", ratio(da->both_agree, da->positions));
    kr_json_add_num(draft, "weight_bytes_ratio", draft_ratio(r));
    cJSON *per_k = cJSON_AddArrayToObject(draft, "by_draft_length");
    for (int k = 0; k < KR_DRAFT_KS; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "k", kr_draft_k[k]);
        kr_json_add_num(o, "tokens_per_f32_pass", kr_draft_tokens_per_pass(da, k));
        kr_json_add_num(o, "weight_bytes_per_token_vs_plain",
                        kr_draft_bytes_per_token(da, k, draft_ratio(r)));
        cJSON_AddItemToArray(per_k, o);
    }
    cJSON *fc = cJSON_AddObjectToObject(root, "forecast");
    kr_json_add_num(fc, "mae_vs_f32", kr_err_acc_mae(&r->vs_ref));
    kr_json_add_num(fc, "mape_vs_f32_percent", kr_err_acc_mape(&r->vs_ref));
    kr_json_add_num(fc, "mape_vs_actual_f32_percent", kr_err_acc_mape(&r->ref_vs_actual));
    kr_json_add_num(fc, "mape_vs_actual_quant_percent", kr_err_acc_mape(&r->q_vs_actual));
    kr_json_add_num(fc, "mae_vs_actual_f32", kr_err_acc_mae(&r->ref_vs_actual));
    kr_json_add_num(fc, "mae_vs_actual_quant", kr_err_acc_mae(&r->q_vs_actual));
    kr_json_add_num(fc, "direction_agreement", ratio(r->dir_agree, r->windows));
    cJSON *ks = cJSON_AddObjectToObject(fc, "ks_path_returns");
    kr_json_add_num(ks, "statistic", r->ks_d);
    kr_json_add_num(ks, "p_value", r->ks_p);
    cJSON_AddNumberToObject(ks, "n", (double)r->n_ret);
    kr_json_add_num(fc, "roc_auc_f32", r->auc_ref);
    kr_json_add_num(fc, "roc_auc_quant", r->auc_q);
    kr_json_add_num(fc, "spearman_expected_return_windows", r->rho_windows);
    kr_json_add_num(fc, "spearman_expected_return_symbols", r->rho_symbols);
    cJSON *risk = cJSON_AddObjectToObject(root, "risk_control");
    cJSON_AddNumberToObject(risk, "windows_up", (double)r->windows_up);
    cJSON_AddNumberToObject(risk, "windows_down", (double)r->windows_down);
    kr_json_add_num(risk, "ks_f32", r->risk_ks_ref);
    kr_json_add_num(risk, "ks_quant", r->risk_ks_q);
    kr_json_add_num(risk, "ks_p_value_f32", r->risk_ks_p_ref);
    kr_json_add_num(risk, "ks_p_value_quant", r->risk_ks_p_q);
    kr_json_add_num(risk, "roc_auc_f32", r->auc_ref);
    kr_json_add_num(risk, "roc_auc_quant", r->auc_q);
    kr_eval_gate_add_json(r, root);
    cJSON_AddNumberToObject(root, "seconds_teacher", r->seconds_teacher);
    cJSON_AddNumberToObject(root, "seconds_forecast", r->seconds_forecast);
    char *text = cJSON_Print(root);
    kr_status st = KR_OK;
    if (!text)
        st = kr_error_set(err, KR_ERR_NOMEM, "eval-quant: out of memory");
    else if (fprintf(f, "%s\n", text) < 0 || ferror(f))
        st = kr_error_set(err, KR_ERR_IO, "eval-quant: writing the JSON failed");
    free(text);
    cJSON_Delete(root);
    return st;
}

int64_t kr_eval_quant_report_windows(const kr_eval_quant_report *report) {
    return report ? report->windows : 0;
}
