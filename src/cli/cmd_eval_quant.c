/*
 * cli/cmd_eval_quant — `kronos eval-quant`: what a quantised format costs in accuracy, in
 * numbers. The f32 model and the quantised one see the same real windows:
 *
 *   next-token fidelity (teacher forcing over every window, both predictors on the f32
 *     tokenizer's tokens): top-1 agreement of s1 and s2, mean KL(f32 ‖ quantised);
 *     tokenizer agreement (the quantised tokenizer's own tokens vs f32's);
 *   forecast fidelity (same seed, same paths): MAE / MAPE of the mean close path against
 *     f32 and against the candles that followed, direction agreement, a two-sample KS test of
 *     the pooled path returns, ROC-AUC of P(up) against the realised direction for both, and
 *     the Spearman correlation of expected returns across windows and across symbols
 *     (latest window of each file).
 *
 * Output: Markdown on stdout (or --markdown FILE) and JSON with --json FILE.
 */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "analyst/fidelity_stats.h"
#include "base/error.h"
#include "base/timeutil.h"
#include "cli/args.h"
#include "cli/calib_windows.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/share_paths.h"
#include "engine/teacher.h"
#include "kronos.h"
#include "market/candles.h"

#define CMD "eval-quant"
#define MAX_FILES 32

static void usage(FILE *f) {
    fputs("usage: kronos eval-quant --quant FMT [--model DIR] [--data CSV]... [flags]\n"
          "\n"
          "Compares a quantised model with its f32 original on real windows of candle files:\n"
          "next-token agreement and KL, forecast error against f32 and against what happened,\n"
          "direction agreement, KS test of path returns, ROC-AUC of P(up), rank correlation of\n"
          "expected returns. Prints Markdown; --json writes the numbers.\n"
          "\n"
          "  --model DIR         f32 checkpoint (default: the bundled demo model)\n"
          "  --tokenizer DIR     tokenizer dir when --model is the predictor dir\n"
          "  --quant FMT         bf16, int8, fp8, q4 (quantised at load) or f32 (with --kv-dtype)\n"
          "  --quant-model DIR   a kronos quantize checkpoint to evaluate instead\n"
          "  --group N           q4 group size, 32 (default) or 64\n"
          "  --calib CSV         calibrate the quantisation on this file (repeatable), with\n"
          "                      kronos quantize's default windows\n"
          "  --kv-dtype T        KV-cache precision of the quantised run (f32, bf16, int8)\n"
          "  --data CSV          evaluation candles (repeatable; default: the bundled data/)\n"
          "  --windows N         windows per file (default 16)\n"
          "  --lookback N        rows per window (default 256)\n"
          "  --pred-len N        forecast horizon (default 24)\n"
          "  --paths N           sample paths per forecast (default 32)\n"
          "  --seed S            sampling seed (default 1)\n"
          "  --threads N         compute threads (default: all CPUs)\n"
          "  --json FILE         write the results as JSON\n"
          "  --markdown FILE     write the Markdown there instead of stdout\n"
          "  -h, --help          this text\n",
          f);
}

typedef struct opts {
    const char *model, *tokenizer, *quant, *quant_model, *kv_dtype, *json, *markdown;
    const char *data[MAX_FILES], *calib[MAX_FILES];
    int n_data, n_calib, group, windows, lookback, pred_len, paths, threads;
    uint64_t seed;
} opts;

static int parse(int argc, char **argv, opts *o) {
    static const struct option longopts[] = {
        { "model", required_argument, NULL, 'm' },
        { "tokenizer", required_argument, NULL, 't' },
        { "quant", required_argument, NULL, 'q' },
        { "quant-model", required_argument, NULL, 'Q' },
        { "group", required_argument, NULL, 'g' },
        { "calib", required_argument, NULL, 'c' },
        { "kv-dtype", required_argument, NULL, 'K' },
        { "data", required_argument, NULL, 'd' },
        { "windows", required_argument, NULL, 'w' },
        { "lookback", required_argument, NULL, 'l' },
        { "pred-len", required_argument, NULL, 'n' },
        { "paths", required_argument, NULL, 'p' },
        { "seed", required_argument, NULL, 's' },
        { "threads", required_argument, NULL, 'j' },
        { "json", required_argument, NULL, 'J' },
        { "markdown", required_argument, NULL, 'M' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    memset(o, 0, sizeof *o);
    o->group = 32;
    o->windows = 16;
    o->lookback = 256;
    o->pred_len = 24;
    o->paths = 32;
    o->seed = 1;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 't': o->tokenizer = optarg; break;
        case 'q':
            if (!kr_arg_quant(optarg))
                return kr_cli_usage_error(
                    CMD, "--quant must be one of f32, bf16, int8, fp8, q4, got '%s'", optarg);
            o->quant = optarg;
            break;
        case 'Q': o->quant_model = optarg; break;
        case 'g':
            if (!kr_arg_int(optarg, 32, 64, &o->group) || (o->group != 32 && o->group != 64))
                return kr_cli_usage_error(CMD, "--group must be 32 or 64, got '%s'", optarg);
            break;
        case 'c':
            if (o->n_calib == MAX_FILES)
                return kr_cli_usage_error(CMD, "too many --calib files: '%s'", optarg);
            o->calib[o->n_calib++] = optarg;
            break;
        case 'K':
            if (!kr_arg_kv_dtype(optarg))
                return kr_cli_usage_error(
                    CMD, "--kv-dtype must be one of f32, bf16, int8, got '%s'", optarg);
            o->kv_dtype = optarg;
            break;
        case 'd':
            if (o->n_data == MAX_FILES)
                return kr_cli_usage_error(CMD, "too many --data files: '%s'", optarg);
            o->data[o->n_data++] = optarg;
            break;
        case 'w':
            if (!kr_arg_int(optarg, 1, 1000, &o->windows))
                return kr_cli_usage_error(CMD, "--windows must be an integer in 1..1000, got '%s'",
                                          optarg);
            break;
        case 'l':
            if (!kr_arg_int(optarg, 16, 512, &o->lookback))
                return kr_cli_usage_error(CMD, "--lookback must be an integer in 16..512, got '%s'",
                                          optarg);
            break;
        case 'n':
            if (!kr_arg_int(optarg, 1, 512, &o->pred_len))
                return kr_cli_usage_error(CMD, "--pred-len must be an integer in 1..512, got '%s'",
                                          optarg);
            break;
        case 'p':
            if (!kr_arg_int(optarg, 2, 4096, &o->paths))
                return kr_cli_usage_error(CMD, "--paths must be an integer in 2..4096, got '%s'",
                                          optarg);
            break;
        case 's':
            if (!kr_arg_u64(optarg, &o->seed))
                return kr_cli_usage_error(CMD, "bad --seed '%s'", optarg);
            break;
        case 'j':
            if (!kr_arg_int(optarg, 1, 1024, &o->threads))
                return kr_cli_usage_error(CMD, "--threads must be an integer in 1..1024, got '%s'",
                                          optarg);
            break;
        case 'J': o->json = optarg; break;
        case 'M': o->markdown = optarg; break;
        case 'h': usage(stdout); return -1;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) return kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (!o->quant && !o->quant_model)
        return kr_cli_usage_error(CMD, "--quant or --quant-model is required%s", "");
    if (!o->n_data) {
        static const char *const bundled[] = { "XSHG_5min_600977.csv", "AAPL_1d.csv", "MSFT_1d.csv",
                                               "BTCUSDT_1h.csv" };
        static char paths[4][PATH_MAX];
        for (int i = 0; i < 4; i++) {
            char rel[64];
            snprintf(rel, sizeof rel, "data/%s", bundled[i]);
            kr_share_path(rel, paths[i], sizeof paths[i]);
            o->data[o->n_data++] = paths[i];
        }
    }
    return 0;
}

/* Everything measured, accumulated over windows. */
/* A position where f32's best s1 token leads the runner-up by less than this many nats is a
 * near-tie: any perturbation may swap them, and the swap changes the sampled distribution by
 * almost nothing. Agreement is reported over all positions and over the decisive rest. */
#define DECISIVE_NATS 0.1

typedef struct results {
    int64_t positions, s1_agree, s2_agree, tok_rows, tok_s1_agree, tok_s2_agree;
    int64_t s1_decisive, s1_decisive_agree;
    double kl_s1, kl_s2;
    kr_err_acc vs_ref, q_vs_actual, ref_vs_actual;
    int64_t dir_agree, windows;
    double *ret_ref, *ret_q; /* pooled path returns */
    int64_t n_ret;
    double *pup_ref, *pup_q, *er_ref, *er_q; /* per window */
    int *up;
    double *sym_er_ref, *sym_er_q; /* latest window of each file */
    int n_sym;
    double ks_d, ks_p, auc_ref, auc_q, rho_windows, rho_symbols;
    double seconds_teacher, seconds_forecast;
} results;

/* Logit (= log-probability) lead of the top token over the next best. */
static double top_gap(const float *logits, int n, int top) {
    float second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != top && logits[i] > second) second = logits[i];
    return (double)logits[top] - (double)second;
}

static kr_status teacher_window(kr_context *ref, kr_context *q, const kr_series *s, int L, int V1,
                                int V2, results *r, kr_error *err) {
    size_t n = (size_t)(L - 1);
    int32_t *t1 = malloc((size_t)L * 4), *t2 = malloc((size_t)L * 4), *u1 = malloc((size_t)L * 4),
            *u2 = malloc((size_t)L * 4);
    float *a1 = malloc(n * (size_t)V1 * 4), *a2 = malloc(n * (size_t)V2 * 4);
    float *b1 = malloc(n * (size_t)V1 * 4), *b2 = malloc(n * (size_t)V2 * 4);
    kr_status st = KR_OK;
    if (!t1 || !t2 || !u1 || !u2 || !a1 || !a2 || !b1 || !b2)
        st = kr_error_set(err, KR_ERR_NOMEM, "out of memory");
    if (st == KR_OK) st = kr_teacher_logits(ref, s, L, NULL, NULL, t1, t2, a1, a2, err);
    if (st == KR_OK) st = kr_teacher_logits(q, s, L, t1, t2, u1, u2, b1, b2, err);
    for (size_t t = 0; st == KR_OK && t < n; t++) {
        const float *p1 = a1 + t * (size_t)V1, *q1 = b1 + t * (size_t)V1;
        const float *p2 = a2 + t * (size_t)V2, *q2 = b2 + t * (size_t)V2;
        double k1, k2;
        kr_kl_divergence_logits(p1, q1, V1, &k1);
        kr_kl_divergence_logits(p2, q2, V2, &k2);
        r->kl_s1 += k1;
        r->kl_s2 += k2;
        int top = kr_top1(p1, V1), agree = top == kr_top1(q1, V1);
        r->s1_agree += agree;
        if (top >= 0 && top_gap(p1, V1, top) >= DECISIVE_NATS) {
            r->s1_decisive++;
            r->s1_decisive_agree += agree;
        }
        r->s2_agree += kr_top1(p2, V2) == kr_top1(q2, V2);
        r->positions++;
    }
    for (int t = 0; st == KR_OK && t < L; t++) {
        r->tok_s1_agree += t1[t] == u1[t];
        r->tok_s2_agree += t2[t] == u2[t];
        r->tok_rows++;
    }
    free(t1);
    free(t2);
    free(u1);
    free(u2);
    free(a1);
    free(a2);
    free(b1);
    free(b2);
    return st;
}

/* Return of each path at the horizon, P(up) and the expected return of one forecast. */
static void path_returns(const kr_forecast *f, double last_close, double *ret, double *pup,
                         double *er) {
    int P = kr_forecast_pred_len(f), n = kr_forecast_paths(f), up = 0;
    double sum = 0;
    for (int p = 0; p < n; p++) {
        double c = kr_forecast_path(f, p)[(size_t)(P - 1) * 6 + KR_CLOSE];
        ret[p] = c / last_close - 1.0;
        up += ret[p] > 0;
        sum += ret[p];
    }
    *pup = (double)up / n;
    *er = sum / n;
}

static void add_json(cJSON *o, const char *k, double v) {
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static void write_reports(const opts *o, const kr_model_info *qi, const results *r, FILE *md) {
    double np = (double)(r->positions ? r->positions : 1),
           nt = (double)(r->tok_rows ? r->tok_rows : 1);
    double nw = (double)(r->windows ? r->windows : 1);
    char label[64];
    snprintf(label, sizeof label, "%s%s%s, kv %s", qi->quant, qi->quant_method[0] ? " " : "",
             qi->quant_method, o->kv_dtype ? o->kv_dtype : "f32");
    fprintf(md, "### %s vs f32\n\n", label);
    fprintf(
        md,
        "%d files, %lld windows of %d rows, horizon %d, %d paths, seed %llu; weights %.1f MB\n\n",
        o->n_data, (long long)r->windows, o->lookback, o->pred_len, o->paths,
        (unsigned long long)o->seed, qi->weight_bytes / 1048576.0);
    fprintf(md, "| metric | value |\n|---|---:|\n");
    fprintf(md, "| s1 top-1 agreement (teacher-forced, %lld positions) | %.2f%% |\n",
            (long long)r->positions, 100.0 * (double)r->s1_agree / np);
    fprintf(md,
            "| s1 top-1 agreement where f32's top-1 leads by >= %.1f nats (%.1f%% of positions) | "
            "%.2f%% |\n",
            DECISIVE_NATS, 100.0 * (double)r->s1_decisive / np,
            r->s1_decisive ? 100.0 * (double)r->s1_decisive_agree / (double)r->s1_decisive : NAN);
    fprintf(md, "| s2 top-1 agreement | %.2f%% |\n", 100.0 * (double)r->s2_agree / np);
    fprintf(md, "| mean KL(f32 ‖ quant) s1 | %.5f |\n", r->kl_s1 / np);
    fprintf(md, "| mean KL(f32 ‖ quant) s2 | %.5f |\n", r->kl_s2 / np);
    fprintf(md, "| tokenizer s1 / s2 token agreement | %.2f%% / %.2f%% |\n",
            100.0 * (double)r->tok_s1_agree / nt, 100.0 * (double)r->tok_s2_agree / nt);
    fprintf(md, "| mean-path close MAE vs f32 | %.6g |\n", kr_err_acc_mae(&r->vs_ref));
    fprintf(md, "| mean-path close MAPE vs f32 | %.3f%% |\n", kr_err_acc_mape(&r->vs_ref));
    fprintf(md, "| MAPE vs actual: f32 / quant | %.3f%% / %.3f%% |\n",
            kr_err_acc_mape(&r->ref_vs_actual), kr_err_acc_mape(&r->q_vs_actual));
    fprintf(md, "| direction agreement (mean path at horizon) | %.2f%% |\n",
            100.0 * (double)r->dir_agree / nw);
    fprintf(md,
            "| KS two-sample, path returns at horizon (n = %lld each) | D = %.4f, p = %.4f%s |\n",
            (long long)r->n_ret, r->ks_d, r->ks_p,
            r->ks_p < 0.05 ? " (rejects at 5%)" : " (not rejected at 5%)");
    fprintf(md, "| ROC-AUC of P(up) vs realised direction: f32 / quant | %.4f / %.4f |\n",
            r->auc_ref, r->auc_q);
    fprintf(md, "| Spearman of expected returns across windows | %.4f |\n", r->rho_windows);
    fprintf(md, "| Spearman of expected returns across symbols (%d, latest window) | %.4f |\n",
            r->n_sym, r->rho_symbols);
    fprintf(md, "\n");

    if (!o->json) return;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "quant", qi->quant);
    cJSON_AddStringToObject(root, "method", qi->quant_method);
    cJSON_AddStringToObject(root, "kv_dtype", o->kv_dtype ? o->kv_dtype : "f32");
    cJSON_AddNumberToObject(root, "weight_bytes", (double)qi->weight_bytes);
    cJSON_AddNumberToObject(root, "files", o->n_data);
    cJSON_AddNumberToObject(root, "windows", (double)r->windows);
    cJSON_AddNumberToObject(root, "lookback", o->lookback);
    cJSON_AddNumberToObject(root, "pred_len", o->pred_len);
    cJSON_AddNumberToObject(root, "paths", o->paths);
    cJSON *tok = cJSON_AddObjectToObject(root, "next_token");
    cJSON_AddNumberToObject(tok, "positions", (double)r->positions);
    add_json(tok, "s1_top1_agreement", (double)r->s1_agree / np);
    add_json(tok, "s2_top1_agreement", (double)r->s2_agree / np);
    add_json(tok, "s1_decisive_fraction", (double)r->s1_decisive / np);
    add_json(tok, "s1_top1_agreement_decisive",
             r->s1_decisive ? (double)r->s1_decisive_agree / (double)r->s1_decisive : NAN);
    add_json(tok, "s1_mean_kl", r->kl_s1 / np);
    add_json(tok, "s2_mean_kl", r->kl_s2 / np);
    add_json(tok, "tokenizer_s1_agreement", (double)r->tok_s1_agree / nt);
    add_json(tok, "tokenizer_s2_agreement", (double)r->tok_s2_agree / nt);
    cJSON *fc = cJSON_AddObjectToObject(root, "forecast");
    add_json(fc, "mae_vs_f32", kr_err_acc_mae(&r->vs_ref));
    add_json(fc, "mape_vs_f32_percent", kr_err_acc_mape(&r->vs_ref));
    add_json(fc, "mape_vs_actual_f32_percent", kr_err_acc_mape(&r->ref_vs_actual));
    add_json(fc, "mape_vs_actual_quant_percent", kr_err_acc_mape(&r->q_vs_actual));
    add_json(fc, "mae_vs_actual_f32", kr_err_acc_mae(&r->ref_vs_actual));
    add_json(fc, "mae_vs_actual_quant", kr_err_acc_mae(&r->q_vs_actual));
    add_json(fc, "direction_agreement", (double)r->dir_agree / nw);
    cJSON *ks = cJSON_AddObjectToObject(fc, "ks_path_returns");
    add_json(ks, "statistic", r->ks_d);
    add_json(ks, "p_value", r->ks_p);
    cJSON_AddNumberToObject(ks, "n", (double)r->n_ret);
    add_json(fc, "roc_auc_f32", r->auc_ref);
    add_json(fc, "roc_auc_quant", r->auc_q);
    add_json(fc, "spearman_expected_return_windows", r->rho_windows);
    add_json(fc, "spearman_expected_return_symbols", r->rho_symbols);
    cJSON_AddNumberToObject(root, "seconds_teacher", r->seconds_teacher);
    cJSON_AddNumberToObject(root, "seconds_forecast", r->seconds_forecast);
    char *text = cJSON_Print(root);
    FILE *f = fopen(o->json, "w");
    if (f) {
        fprintf(f, "%s\n", text);
        fclose(f);
    } else {
        fprintf(stderr, "kronos %s: cannot write %s\n", CMD, o->json);
    }
    free(text);
    cJSON_Delete(root);
}

static kr_status load_models(const opts *o, const char *pred_dir, const char *tok_dir,
                             kr_model **ref, kr_model **q, kr_error *err) {
    kr_model_params mp = kr_model_default_params();
    kr_status st = kr_model_load(pred_dir, tok_dir, &mp, ref, err);
    if (st != KR_OK) return st;
    if (o->quant_model) {
        char qp[PATH_MAX], qt[PATH_MAX], msg[PATH_MAX + 128];
        if (kr_resolve_model_dirs(o->quant_model, NULL, qp, qt, msg, sizeof msg) != 0)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "%s", msg);
        return kr_model_load(qp, qt, &mp, q, err);
    }
    if (!o->n_calib) {
        mp.quant = o->quant;
        mp.quant_group = o->group;
        return kr_model_load(pred_dir, tok_dir, &mp, q, err);
    }
    if ((st = kr_model_load(pred_dir, tok_dir, &mp, q, err)) != KR_OK) return st;
    kr_calib_set cs;
    if ((st = kr_calib_set_load(o->calib, o->n_calib, KR_CALIB_DEFAULT_WINDOWS,
                                KR_CALIB_DEFAULT_LOOKBACK, &cs, err)) != KR_OK)
        return st;
    st = kr_model_quantize(*q, o->quant, o->group, cs.series, cs.n_series, o->threads, err);
    kr_calib_set_free(&cs);
    return st;
}

int kr_cmd_eval_quant(int argc, char **argv) {
    opts o;
    int pr = parse(argc, argv, &o);
    if (pr) return pr < 0 ? 0 : pr;
    char pred_dir[PATH_MAX], tok_dir[PATH_MAX], msg[PATH_MAX + 128];
    int r0 = kr_resolve_model_dirs(o.model, o.tokenizer, pred_dir, tok_dir, msg, sizeof msg);
    if (r0 == -1) return kr_cli_usage_error(CMD, "%s", msg);
    if (r0 != 0) return kr_cli_fail(CMD, msg);

    kr_error err = { 0 };
    kr_model *ref = NULL, *q = NULL;
    kr_candles *files[MAX_FILES] = { 0 };
    int rc = 0, L = o.lookback, H = o.pred_len;
    int cap = o.n_data * o.windows;
    kr_series *ws = calloc((size_t)cap, sizeof *ws);
    double *last_close = calloc((size_t)cap, sizeof *last_close);
    const double **actual = calloc((size_t)cap, sizeof *actual);
    int *file_of = calloc((size_t)cap, sizeof *file_of);
    kr_forecast **fr = calloc((size_t)cap, sizeof *fr), **fq = calloc((size_t)cap, sizeof *fq);
    results r = { 0 };
    int nw = 0;
    if (!ws || !last_close || !actual || !file_of || !fr || !fq)
        rc = kr_cli_fail(CMD, "out of memory");
    if (rc == 0 && load_models(&o, pred_dir, tok_dir, &ref, &q, &err) != KR_OK)
        rc = kr_cli_fail(CMD, err.message);
    /* The reference runs with f32 KV, the quantised model with --kv-dtype. */
    kr_context *ref_ctx = NULL, *q_ctx = NULL;
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = o.threads;
    if (rc == 0 && kr_context_create(ref, &cp, &ref_ctx, &err) != KR_OK)
        rc = kr_cli_fail(CMD, err.message);
    cp.kv_dtype = o.kv_dtype;
    if (rc == 0 && kr_context_create(q, &cp, &q_ctx, &err) != KR_OK)
        rc = kr_cli_fail(CMD, err.message);
    /* Windows end at evenly spaced rows, each followed by H real candles. */
    for (int f = 0; rc == 0 && f < o.n_data; f++) {
        if (kr_candles_read_csv(o.data[f], &files[f], &err) != KR_OK) {
            rc = kr_cli_fail(CMD, err.message);
            break;
        }
        int64_t n = files[f]->n;
        if (n < L + H) {
            snprintf(msg, sizeof msg, "%s: %lld rows, a window needs %d + %d", o.data[f],
                     (long long)n, L, H);
            rc = kr_cli_fail(CMD, msg);
            break;
        }
        int w = (int)(n - L - H + 1 < o.windows ? n - L - H + 1 : o.windows);
        for (int i = 0; i < w; i++) {
            int64_t end = w == 1 ? n - H : L + (n - H - L) * i / (w - 1);
            ws[nw] = kr_candles_slice(files[f], end - L, L);
            ws[nw].future_timestamps = files[f]->timestamps + end;
            last_close[nw] = files[f]->values[(size_t)(end - 1) * 6 + KR_CLOSE];
            actual[nw] = files[f]->values + (size_t)end * 6;
            file_of[nw] = f;
            nw++;
        }
    }
    kr_model_info ri, qi;
    if (rc == 0) {
        kr_model_get_info(ref, &ri);
        kr_model_get_info(q, &qi);
    }
    int V1 = rc == 0 ? 1 << ri.s1_bits : 0, V2 = rc == 0 ? 1 << ri.s2_bits : 0;
    double t0 = kr_now_seconds();
    char what[160];
    snprintf(what, sizeof what, "teacher-forced logits of %d windows, f32 and %s", nw,
             o.quant ? o.quant : "quantised");
    kr_ticker *ticker = rc == 0 ? kr_ticker_start(what) : NULL; /* terminals only */
    for (int i = 0; rc == 0 && i < nw; i++)
        if (teacher_window(ref_ctx, q_ctx, &ws[i], L, V1, V2, &r, &err) != KR_OK)
            rc = kr_cli_fail(CMD, err.message);
    kr_ticker_stop(ticker);
    r.seconds_teacher = kr_now_seconds() - t0;

    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = H;
    p.lookback = L;
    p.paths = o.paths;
    p.seed = o.seed;
    p.keep_paths = 1;
    t0 = kr_now_seconds();
    snprintf(what, sizeof what, "forecasting %d windows x %d paths, f32 and quantised", nw,
             o.paths);
    ticker = rc == 0 ? kr_ticker_start(what) : NULL;
    if (rc == 0 && kr_forecast_run_batch(ref_ctx, ws, nw, &p, fr, &err) != KR_OK)
        rc = kr_cli_fail(CMD, err.message);
    if (rc == 0 && kr_forecast_run_batch(q_ctx, ws, nw, &p, fq, &err) != KR_OK)
        rc = kr_cli_fail(CMD, err.message);
    kr_ticker_stop(ticker);
    r.seconds_forecast = kr_now_seconds() - t0;
    if (rc == 0) {
        r.ret_ref = malloc((size_t)nw * (size_t)o.paths * sizeof(double));
        r.ret_q = malloc((size_t)nw * (size_t)o.paths * sizeof(double));
        r.pup_ref = malloc((size_t)nw * sizeof(double));
        r.pup_q = malloc((size_t)nw * sizeof(double));
        r.er_ref = malloc((size_t)nw * sizeof(double));
        r.er_q = malloc((size_t)nw * sizeof(double));
        r.up = malloc((size_t)nw * sizeof(int));
        r.sym_er_ref = malloc((size_t)o.n_data * sizeof(double));
        r.sym_er_q = malloc((size_t)o.n_data * sizeof(double));
        if (!r.ret_ref || !r.ret_q || !r.pup_ref || !r.pup_q || !r.er_ref || !r.er_q || !r.up ||
            !r.sym_er_ref || !r.sym_er_q)
            rc = kr_cli_fail(CMD, "out of memory");
    }
    for (int i = 0; rc == 0 && i < nw; i++) {
        const double *mr = kr_forecast_mean(fr[i]), *mq = kr_forecast_mean(fq[i]);
        for (int t = 0; t < H; t++) {
            double a = actual[i][(size_t)t * 6 + KR_CLOSE];
            kr_err_acc_add(&r.vs_ref, mq[(size_t)t * 6 + KR_CLOSE], mr[(size_t)t * 6 + KR_CLOSE]);
            kr_err_acc_add(&r.ref_vs_actual, mr[(size_t)t * 6 + KR_CLOSE], a);
            kr_err_acc_add(&r.q_vs_actual, mq[(size_t)t * 6 + KR_CLOSE], a);
        }
        double dr = mr[(size_t)(H - 1) * 6 + KR_CLOSE] - last_close[i];
        double dq = mq[(size_t)(H - 1) * 6 + KR_CLOSE] - last_close[i];
        r.dir_agree += (dr > 0) == (dq > 0);
        path_returns(fr[i], last_close[i], r.ret_ref + r.n_ret, &r.pup_ref[i], &r.er_ref[i]);
        path_returns(fq[i], last_close[i], r.ret_q + r.n_ret, &r.pup_q[i], &r.er_q[i]);
        r.n_ret += o.paths;
        r.up[i] = actual[i][(size_t)(H - 1) * 6 + KR_CLOSE] > last_close[i];
        if (i == nw - 1 || file_of[i + 1] != file_of[i]) {
            r.sym_er_ref[r.n_sym] = r.er_ref[i];
            r.sym_er_q[r.n_sym] = r.er_q[i];
            r.n_sym++;
        }
        r.windows++;
    }
    if (rc == 0) {
        kr_ks2_test(r.ret_ref, r.n_ret, r.ret_q, r.n_ret, &r.ks_d, &r.ks_p);
        kr_roc_auc(r.pup_ref, r.up, nw, &r.auc_ref);
        kr_roc_auc(r.pup_q, r.up, nw, &r.auc_q);
        kr_spearman(r.er_ref, r.er_q, nw, &r.rho_windows);
        kr_spearman(r.sym_er_ref, r.sym_er_q, r.n_sym, &r.rho_symbols);
        FILE *md = stdout;
        if (o.markdown && !(md = fopen(o.markdown, "w"))) {
            snprintf(msg, sizeof msg, "%s: cannot create", o.markdown);
            rc = kr_cli_fail(CMD, msg);
        } else {
            write_reports(&o, &qi, &r, md);
            if (md != stdout) fclose(md);
        }
    }
    for (int i = 0; i < nw; i++) {
        kr_forecast_free(fr ? fr[i] : NULL);
        kr_forecast_free(fq ? fq[i] : NULL);
    }
    free(r.ret_ref);
    free(r.ret_q);
    free(r.pup_ref);
    free(r.pup_q);
    free(r.er_ref);
    free(r.er_q);
    free(r.up);
    free(r.sym_er_ref);
    free(r.sym_er_q);
    free(ws);
    free(last_close);
    free(actual);
    free(file_of);
    free(fr);
    free(fq);
    for (int f = 0; f < o.n_data; f++) kr_candles_free(files[f]);
    kr_context_free(ref_ctx);
    kr_context_free(q_ctx);
    kr_model_free(ref);
    kr_model_free(q);
    return rc;
}
