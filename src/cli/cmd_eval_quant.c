/*
 * cli/cmd_eval_quant — `kronos eval-quant`: what a quantised format costs in accuracy, in
 * numbers (kronos/eval.h says which). Flag parsing and model loading only: the evaluation is
 * kr_eval_quant_run.
 *
 * Output: Markdown on stdout (or --markdown FILE) and JSON with --json FILE.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/calib_windows.h"
#include "cli/commands.h"
#include "cli/forecast_flags.h"
#include "cli/parse.h"
#include "common/options.h"
#include "cli/progress.h"
#include "cli/share_paths.h"
#include "kronos.h"
#include "kronos/eval.h"

#define CMD "eval-quant"
#define MAX_FILES 32

typedef struct opts {
    const char *model, *tokenizer, *quant, *quant_model, *kv_dtype, *json, *markdown, *method,
        *gate;
    const char *data[MAX_FILES], *calib[MAX_FILES];
    int n_data, n_calib, group, windows, lookback, pred_len, paths, threads, allow_nonfinite;
    uint64_t seed;
} opts;

static const kr_cli_opt k_opts[] = {
    KR_CLI_OPT_MODEL("f32 checkpoint (default: the bundled demo model)"),
    KR_CLI_OPT_TOKENIZER("tokenizer dir when --model is the predictor dir"),
    KR_CLI_OPT_QUANT("bf16, int8, fp8, q4 (quantised at load) or f32 (with --kv-dtype)"),
    { "quant-model", 'Q', KR_CLI_DIR, "DIR", 0, 0, NULL,
      "a kronos quantize checkpoint to evaluate instead" },
    { "group", 'g', KR_CLI_INT, "N", 0, 0, NULL, "q4 group size, 32 (default) or 64" },
    { "calib", 'c', KR_CLI_FILE, "CSV", 0, 0, NULL,
      "calibrate the quantisation on this file (repeatable), with\nkronos quantize's default "
      "windows" },
    { "method", 'E', KR_CLI_TEXT, "M", 0, 0, NULL,
      "rtn, awq (q4), smoothquant (int8) or gptq (q4, int8), as\nkronos quantize --method "
      "(awq/smoothquant/gptq need --calib)" },
    { "gate", 'G', KR_CLI_FILE, "FILE", 0, 0, NULL,
      "acceptance thresholds (JSON, e.g. deploy/quant-gate.json):\nprints each failed gate and by "
      "how much, exits 3" },
    KR_CLI_OPT_KV_DTYPE("KV-cache precision of the quantised run (f32, bf16, int8)"),
    { "data", 'd', KR_CLI_FILE, "CSV", 0, 0, NULL,
      "evaluation candles (repeatable; default: the bundled data/)" },
    { "windows", 'w', KR_CLI_INT, "N", 1, 1000, NULL, "windows per file (default 16)" },
    { "lookback", 'l', KR_CLI_INT, "N", 16, 512, NULL, "rows per window (default 256)" },
    { "pred-len", 'n', KR_CLI_INT, "N", 1, 512, NULL, "forecast horizon (default 24)" },
    { "paths", 'p', KR_CLI_INT, "N", 2, 4096, NULL, "sample paths per forecast (default 32)" },
    KR_CLI_OPT_SEED("sampling seed, decimal or 0x hex (default 1)"),
    KR_CLI_OPT_THREADS,
    { "json", 'J', KR_CLI_FILE, "FILE", 0, 0, NULL, "write the results as JSON" },
    { "markdown", 'M', KR_CLI_FILE, "FILE", 0, 0, NULL,
      "write the Markdown there instead of stdout" },
    KR_CLI_OPT_ALLOW_NONFINITE("load the checkpoints even if a weight is NaN or infinite\n(refused "
                               "by default: such weights "
                               "corrupt forecasts)"),
    { "help", 'h', KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

/* The flags of `kronos eval-quant` (common/options.h): its --help, getopt table, completion and man
 * page. */
const kr_cli_command kr_cli_eval_quant_spec = {
    "eval-quant",
    "--quant FMT [--model DIR] [--data CSV]... [flags]",
    "measure what a quantised format costs in accuracy against f32",
    "Compares a quantised model with its f32 original on real windows of candle files:\n"
    "next-token agreement and KL, forecast error against f32 and against what happened,\n"
    "direction agreement, KS test of path returns, ROC-AUC and risk-control KS of P(up)\n"
    "for both, rank correlation of expected returns, and the quantised model as the draft\n"
    "of an exact speculative decoder (shared-draw agreement, tokens per f32 pass).\n"
    "Prints Markdown; --json writes the numbers. With --gate, exits 3 when a gate fails\n"
    "(1: error, 2: usage).\n",
    k_opts,
    (int)(sizeof k_opts / sizeof k_opts[0]),
    KR_CLI_FLAG,
    19,
    NULL,
    NULL,
};

static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->group = 32;
    o->windows = 16;
    o->lookback = 256;
    o->pred_len = 24;
    o->paths = 32;
    o->seed = 1;
    const kr_cli_forecast_flags shared = {
        .model = &o->model,
        .tokenizer = &o->tokenizer,
        .quant = &o->quant,
        .kv_dtype = &o->kv_dtype,
        .seed = &o->seed,
        .threads = &o->threads,
        .allow_nonfinite = &o->allow_nonfinite,
    };
    kr_cli_parse ps;
    kr_cli_parse_begin(&ps, &kr_cli_eval_quant_spec, &shared, argc, argv);
    for (int c; (c = kr_cli_parse_next(&ps)) != 0;) {
        /* The integer flags of the table, checked against its ranges. */
        int *counted = c == 'w'   ? &o->windows
                       : c == 'l' ? &o->lookback
                       : c == 'n' ? &o->pred_len
                       : c == 'p' ? &o->paths
                                  : NULL;
        if (counted) {
            if (!kr_cli_opts_int(&kr_cli_eval_quant_spec,
                                 kr_cli_opts_find(&kr_cli_eval_quant_spec, c), optarg, counted))
                return 2;
            continue;
        }
        switch (c) {
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
        case 'd':
            if (o->n_data == MAX_FILES)
                return kr_cli_usage_error(CMD, "too many --data files: '%s'", optarg);
            o->data[o->n_data++] = optarg;
            break;
        case 'J': o->json = optarg; break;
        case 'M': o->markdown = optarg; break;
        case 'E':
            if (!kr_arg_quant_method(optarg))
                return kr_cli_usage_error(
                    CMD, "--method must be one of rtn, awq, smoothquant, gptq, got '%s'", optarg);
            o->method = optarg;
            break;
        case 'G': o->gate = optarg; break;
        }
    }
    if (ps.status) return ps.status;
    if (optind < argc) return kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (!o->quant && !o->quant_model)
        return kr_cli_usage_error(CMD, "--quant or --quant-model is required%s", "");
    if (o->quant && o->quant_model)
        return kr_cli_usage_error(CMD,
                                  "--quant %s and --quant-model exclude each other (a quantised "
                                  "checkpoint keeps its own format)",
                                  o->quant);
    if (o->method && (o->quant_model || !o->quant))
        return kr_cli_usage_error(CMD, "--method %s quantises --quant FMT, not --quant-model",
                                  o->method);
    const char *mismatch = kr_arg_quant_method_mismatch(o->method, o->quant);
    if (mismatch) return kr_cli_usage_error(CMD, "%s", mismatch);
    if (o->method && strcmp(o->method, "rtn") != 0 && !o->n_calib)
        return kr_cli_usage_error(CMD, "--method %s needs --calib CSV", o->method);
    if (o->method && strcmp(o->method, "rtn") == 0 && o->n_calib)
        return kr_cli_usage_error(CMD, "--method rtn uses no --calib (got '%s')", o->calib[0]);
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

/* The ticker shows on terminals only, while a phase runs. */
static void on_progress(const char *what, int finished, void *user) {
    kr_ticker **t = user;
    if (!finished)
        *t = kr_ticker_start(what);
    else
        kr_ticker_stop(*t);
}

static int write_reports(const opts *o, const kr_eval_quant_report *r, kr_error *err) {
    char msg[PATH_MAX + 128];
    FILE *md = o->markdown ? fopen(o->markdown, "w") : stdout;
    if (!md) {
        snprintf(msg, sizeof msg, "%s: cannot write: %s", o->markdown, strerror(errno));
        return kr_cli_fail(CMD, msg);
    }
    kr_status st = kr_eval_quant_write_markdown(r, md, err);
    /* stdout too: a full disk or a closed pipe shows only when the buffer is flushed, and
     * must not pass for a written report. */
    if ((md != stdout ? fclose(md) : fflush(md)) != 0 && st == KR_OK) {
        snprintf(msg, sizeof msg, "%s: write failed", o->markdown ? o->markdown : "stdout");
        return kr_cli_fail(CMD, msg);
    }
    if (st != KR_OK) return kr_cli_fail(CMD, err->message);
    if (!o->json) return 0;
    FILE *js = fopen(o->json, "w");
    if (!js) {
        snprintf(msg, sizeof msg, "%s: cannot write: %s", o->json, strerror(errno));
        return kr_cli_fail(CMD, msg);
    }
    st = kr_eval_quant_write_json(r, js, err);
    if (fclose(js) != 0 && st == KR_OK) {
        snprintf(msg, sizeof msg, "%s: write failed", o->json);
        return kr_cli_fail(CMD, msg);
    }
    return st == KR_OK ? 0 : kr_cli_fail(CMD, err->message);
}

/* A --quant-model made from another checkpoint than --model (the default --model is the
 * bundled demo) would be compared with a model it never was: every number of the report
 * meaningless. kronos quantize keeps the architecture, the parameter count and the provenance
 * keys, so any difference there gives it away. */
static kr_status check_same_model(const kr_model *ref, const kr_model *q, const char *ref_dir,
                                  const char *q_dir, kr_error *err) {
    kr_model_info a, b;
    kr_model_get_info(ref, &a);
    kr_model_get_info(q, &b);
    const struct {
        const char *name;
        long long ref, q;
    } dims[] = {
        { "d_model", a.d_model, b.d_model },
        { "n_layers", a.n_layers, b.n_layers },
        { "n_heads", a.n_heads, b.n_heads },
        { "ff_dim", a.ff_dim, b.ff_dim },
        { "tokenizer d_model", a.tok_d_model, b.tok_d_model },
        { "tokenizer n_heads", a.tok_n_heads, b.tok_n_heads },
        { "tokenizer ff_dim", a.tok_ff_dim, b.tok_ff_dim },
        { "tokenizer encoder blocks", a.tok_enc_blocks, b.tok_enc_blocks },
        { "tokenizer decoder blocks", a.tok_dec_blocks, b.tok_dec_blocks },
        { "s1_bits", a.s1_bits, b.s1_bits },
        { "s2_bits", a.s2_bits, b.s2_bits },
        { "learn_te", a.learn_te, b.learn_te },
        { "parameters", (long long)a.n_params, (long long)b.n_params },
        { "demo", a.demo, b.demo },
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].ref != dims[i].q)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "--quant-model %s was not made from --model %s: %s %lld there, "
                                "%lld here (pass the f32 checkpoint it was quantised from as "
                                "--model)",
                                q_dir, ref_dir, dims[i].name, dims[i].q, dims[i].ref);
    if (strcmp(a.source, b.source) != 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "--quant-model %s was not made from --model %s: their config.json "
                            "\"source\" differ (pass the f32 checkpoint it was quantised from as "
                            "--model)",
                            q_dir, ref_dir);
    return KR_OK;
}

static kr_status load_models(const opts *o, const char *pred_dir, const char *tok_dir,
                             kr_model **ref, kr_model **q, kr_error *err) {
    kr_model_params mp = kr_model_default_params();
    mp.allow_nonfinite = o->allow_nonfinite;
    kr_status st = kr_model_load(pred_dir, tok_dir, &mp, ref, err);
    if (st != KR_OK) return st;
    if (o->quant_model) {
        char qp[PATH_MAX], qt[PATH_MAX], msg[PATH_MAX + 128];
        int r = kr_resolve_model_dirs(o->quant_model, NULL, qp, qt, msg, sizeof msg);
        if (r == -2) return kr_error_set(err, KR_ERR_INVALID_ARG, "%s", msg); /* hub name */
        if (r != 0)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "--quant-model %s: not a kronos quantize output (a directory "
                                "holding predictor/ and tokenizer/)",
                                o->quant_model);
        if ((st = kr_model_load(qp, qt, &mp, q, err)) != KR_OK) return st;
        return check_same_model(*ref, *q, pred_dir, o->quant_model, err);
    }
    if (!o->n_calib) {
        mp.quant = o->quant;
        mp.quant_group = o->group;
        return kr_model_load(pred_dir, tok_dir, &mp, q, err);
    }
    kr_calib_set cs;
    if ((st = kr_calib_set_load(o->calib, o->n_calib, KR_CALIB_DEFAULT_WINDOWS,
                                KR_CALIB_DEFAULT_LOOKBACK, &cs, err)) != KR_OK)
        return st;
    kr_quantize_params qp = kr_quantize_default_params();
    qp.fmt = o->quant;
    qp.method = o->method;
    qp.group = o->group;
    qp.n_threads = o->threads;
    /* A quantised copy of the reference, which stays f32. */
    st = kr_model_quantize(*ref, &qp, cs.series, cs.n_series, q, err);
    kr_calib_set_free(&cs);
    return st;
}

int kr_cmd_eval_quant(int argc, char **argv) {
    opts o;
    int pr = parse(argc, argv, &o);
    if (pr) return pr < 0 ? 0 : pr;
    /* The evaluation takes minutes: learn that a report cannot be written before it. */
    if ((o.json && kr_cli_check_writable(CMD, o.json)) ||
        (o.markdown && kr_cli_check_writable(CMD, o.markdown)))
        return 1;
    char pred_dir[PATH_MAX], tok_dir[PATH_MAX], msg[PATH_MAX + 128];
    int r0 = kr_resolve_model_dirs(o.model, o.tokenizer, pred_dir, tok_dir, msg, sizeof msg);
    if (r0 == -1) return kr_cli_usage_error(CMD, "%s", msg);
    if (r0 != 0) return kr_cli_fail(CMD, msg);

    kr_error err = { 0 };
    kr_model *ref = NULL, *q = NULL;
    kr_context *ref_ctx = NULL, *q_ctx = NULL;
    kr_quant_gate *gate = NULL;
    int rc = 0, failed = 0;
    /* A bad gate file fails before the (long) evaluation, not after it. */
    if (o.gate && kr_quant_gate_load(o.gate, &gate, &err) != KR_OK)
        return kr_cli_fail(CMD, err.message);
    if (load_models(&o, pred_dir, tok_dir, &ref, &q, &err) != KR_OK) {
        char hint[2 * PATH_MAX + 128], full[sizeof err.message + sizeof hint];
        kr_cli_model_hint(pred_dir, tok_dir, hint, sizeof hint);
        snprintf(full, sizeof full, "%s%s", err.message, hint);
        rc = kr_cli_fail(CMD, full);
    }
    /* The reference runs with f32 KV, the quantised model with --kv-dtype. */
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = o.threads;
    if (rc == 0 && kr_context_create(ref, &cp, &ref_ctx, &err) != KR_OK)
        rc = kr_cli_fail(CMD, err.message);
    cp.kv_dtype = o.kv_dtype;
    if (rc == 0 && kr_context_create(q, &cp, &q_ctx, &err) != KR_OK)
        rc = kr_cli_fail(CMD, err.message);
    kr_ticker *ticker = NULL;
    kr_eval_quant_params ep = kr_eval_quant_default_params();
    ep.data = o.data;
    ep.n_data = o.n_data;
    ep.windows = o.windows;
    ep.lookback = o.lookback;
    ep.pred_len = o.pred_len;
    ep.paths = o.paths;
    ep.seed = o.seed;
    ep.kv_dtype = o.kv_dtype;
    ep.progress = on_progress;
    ep.user = &ticker;
    kr_eval_quant_report *report = NULL;
    if (rc == 0 && kr_eval_quant_run(ref_ctx, q_ctx, &ep, &report, &err) != KR_OK)
        rc = kr_cli_fail(CMD, err.message);
    /* A short file gives fewer windows than asked: the report counts them, the user should
     * not have to read it to learn that the figures rest on less than --windows said. */
    int64_t evaluated = rc == 0 ? kr_eval_quant_report_windows(report) : 0;
    if (rc == 0 && evaluated < (int64_t)o.windows * o.n_data)
        fprintf(stderr,
                "kronos %s: note: %lld windows evaluated, fewer than the %d asked (--windows %d x "
                "%d file%s): a file is too short for that many windows of --lookback %d + "
                "--pred-len %d rows\n",
                CMD, (long long)evaluated, o.windows * o.n_data, o.windows, o.n_data,
                o.n_data == 1 ? "" : "s", o.lookback, o.pred_len);
    if (rc == 0 && gate && kr_eval_quant_apply_gate(report, gate, &failed, &err) != KR_OK)
        rc = kr_cli_fail(CMD, err.message);
    if (rc == 0) rc = write_reports(&o, report, &err);
    if (rc == 0 && gate) {
        kr_eval_quant_write_gate_failures(report, stderr, &err);
        if (failed) {
            fprintf(stderr, "kronos %s: %s: %d gate%s failed\n", CMD, o.gate, failed,
                    failed == 1 ? "" : "s");
            rc = 3;
        } else {
            fprintf(stderr, "kronos %s: %s: every gate holds\n", CMD, o.gate);
        }
    }
    kr_quant_gate_free(gate);
    kr_eval_quant_report_free(report);
    kr_context_free(ref_ctx);
    kr_context_free(q_ctx);
    kr_model_free(ref);
    kr_model_free(q);
    return rc;
}
