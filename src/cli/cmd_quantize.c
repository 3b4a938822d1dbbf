/*
 * cli/cmd_quantize — `kronos quantize`: loads an f32 checkpoint, optionally calibrates on
 * windows cut from candle files, quantises every Linear and writes a checkpoint
 * (predictor/ + tokenizer/) that loads with no conversion. Flag parsing and window cutting
 * only; the work is kr_model_quantize / kr_model_save_quantized.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kronos/util.h"
#include "cli/args.h"
#include "cli/calib_windows.h"
#include "cli/commands.h"
#include "cli/forecast_flags.h"
#include "cli/parse.h"
#include "common/options.h"
#include "cli/progress.h"
#include "kronos.h"
#include "kronos/series.h"

#define CMD "quantize"
#define MAX_CALIB 32

static const kr_cli_opt k_opts[] = {
    KR_CLI_OPT_MODEL(
        "f32 checkpoint (predictor/ + tokenizer/, or the predictor dir;\ndefault: the bundled demo "
        "model)"),
    KR_CLI_OPT_TOKENIZER("tokenizer dir when --model is the predictor dir"),
    { "quant", 'q', KR_CLI_TEXT, "FMT", 0, 0, NULL,
      "bf16, int8 (W8A8), fp8 (e4m3, W8A16) or q4 (4-bit groups)" },
    { "group", 'g', KR_CLI_INT, "N", 0, 0, NULL, "q4 group size, 32 (default) or 64" },
    { "calib", 'c', KR_CLI_FILE, "CSV", 0, 0, NULL,
      "candles to calibrate on (repeatable): int8 then uses\nSmoothQuant-style smoothing, q4 "
      "AWQ-style channel scales;\nwithout it every format is plain round-to-nearest" },
    { "method", 'M', KR_CLI_TEXT, "M", 0, 0, NULL,
      "rtn, awq (q4), smoothquant (int8) or gptq (q4, int8: GPTQ\nerror compensation from the "
      "calibration inputs); awq,\nsmoothquant and gptq need --calib (default: awq / "
      "smoothquant\nwith --calib, rtn without)" },
    { "damp", 'D', KR_CLI_TEXT, "F", 0, 0, NULL,
      "gptq: damping added to XᵀX's diagonal, a fraction of its\nmean (default 0.01; raised x10 "
      "until XᵀX factorises)" },
    { "windows", 'w', KR_CLI_INT, "N", 1, 256, NULL,
      "calibration windows cut from each file (default 8)" },
    { "lookback", 'l', KR_CLI_INT, "N", 16, 512, NULL,
      "rows per calibration window (default 400)" },
    KR_CLI_OPT_THREADS,
    { "out", 'o', KR_CLI_DIR, "DIR", 0, 0, NULL,
      "output directory (created); a previous DIR/predictor and\nDIR/tokenizer are replaced once "
      "the new pair is complete" },
    KR_CLI_OPT_ALLOW_NONFINITE("quantise a checkpoint even if a weight is NaN or infinite"),
    { "help", 'h', KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

/* The flags of `kronos quantize` (common/options.h): its --help, getopt table, completion and man
 * page. */
const kr_cli_command kr_cli_quantize_spec = {
    "quantize",
    "--quant bf16|int8|fp8|q4 --out DIR [--model DIR] [--tokenizer DIR]\n                       "
    "[--method rtn|awq|smoothquant|gptq] [--calib CSV]... [flags]",
    "write a bf16 / int8 / fp8 / q4 checkpoint, calibrated on candle files",
    "Quantises every Linear of an f32 checkpoint and writes DIR/predictor and\n"
    "DIR/tokenizer (config.json with a \"quantization\" block + model.safetensors), which\n"
    "--model DIR then loads as mapped, with no conversion.\n",
    k_opts,
    (int)(sizeof k_opts / sizeof k_opts[0]),
    KR_CLI_FLAG,
    18,
    NULL,
    NULL,
};

int kr_cmd_quantize(int argc, char **argv) {
    const char *model = NULL, *tokenizer = NULL, *quant = NULL, *out = NULL, *method = NULL;
    double damp = kr_quantize_default_params().gptq_damp;
    const char *calib[MAX_CALIB];
    int n_calib = 0, group = 32, windows = KR_CALIB_DEFAULT_WINDOWS,
        lookback = KR_CALIB_DEFAULT_LOOKBACK, threads = 0, allow_nonfinite = 0;
    const kr_cli_forecast_flags shared = {
        .model = &model,
        .tokenizer = &tokenizer,
        .threads = &threads,
        .allow_nonfinite = &allow_nonfinite,
    };
    kr_cli_parse ps;
    kr_cli_parse_begin(&ps, &kr_cli_quantize_spec, &shared, argc, argv);
    for (int c; (c = kr_cli_parse_next(&ps)) != 0;) {
        /* The integer flags of the table, checked against its ranges. */
        int *counted = c == 'w' ? &windows : c == 'l' ? &lookback : NULL;
        if (counted) {
            if (!kr_cli_opts_int(&kr_cli_quantize_spec, kr_cli_opts_find(&kr_cli_quantize_spec, c),
                                 optarg, counted))
                return 2;
            continue;
        }
        switch (c) {
        case 'q':
            if (!kr_arg_quant(optarg) || strcmp(optarg, "f32") == 0)
                return kr_cli_usage_error(
                    CMD, "--quant must be one of bf16, int8, fp8, q4, got '%s'", optarg);
            quant = optarg;
            break;
        case 'g':
            if (!kr_arg_int(optarg, 32, 64, &group) || (group != 32 && group != 64))
                return kr_cli_usage_error(CMD, "--group must be 32 or 64, got '%s'", optarg);
            break;
        case 'c':
            if (n_calib == MAX_CALIB)
                return kr_cli_usage_error(CMD, "too many --calib files (max 32): '%s'", optarg);
            calib[n_calib++] = optarg;
            break;
        case 'o': out = optarg; break;
        case 'M':
            if (!kr_arg_quant_method(optarg))
                return kr_cli_usage_error(
                    CMD, "--method must be one of rtn, awq, smoothquant, gptq, got '%s'", optarg);
            method = optarg;
            break;
        case 'D':
            if (!kr_arg_double(optarg, 0.0, 1.0, &damp))
                return kr_cli_usage_error(CMD, "--damp must be a number in 0..1, got '%s'", optarg);
            break;
        }
    }
    if (ps.status) return ps.status < 0 ? 0 : ps.status;
    const int group_given = kr_cli_parse_given(&ps, 'g'), damp_given = kr_cli_parse_given(&ps, 'D'),
              windows_given = kr_cli_parse_given(&ps, 'w'),
              lookback_given = kr_cli_parse_given(&ps, 'l');
    if (optind < argc) return kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (!quant) return kr_cli_usage_error(CMD, "--quant is required%s", "");
    if (!out || !*out) return kr_cli_usage_error(CMD, "--out is required%s", "");
    /* A flag the chosen format or method never reads is refused, not silently ignored: the
     * output would not be what the command line asked for. */
    int q4 = !strcmp(quant, "q4"), int8 = !strcmp(quant, "int8");
    if (group_given && !q4)
        return kr_cli_usage_error(CMD, "--group applies to q4 (got --quant %s)", quant);
    if (n_calib > 0 && !q4 && !int8)
        return kr_cli_usage_error(
            CMD, "--calib applies to int8 and q4; %s is plain round-to-nearest", quant);
    if (damp_given && !(method && !strcmp(method, "gptq")))
        return kr_cli_usage_error(CMD, "%s", "--damp applies to --method gptq");
    if ((windows_given || lookback_given) && n_calib == 0)
        return kr_cli_usage_error(CMD, "%s", "--windows and --lookback apply to --calib files");
    const char *mismatch = kr_arg_quant_method_mismatch(method, quant);
    if (mismatch) return kr_cli_usage_error(CMD, "%s", mismatch);
    if (method && strcmp(method, "rtn") != 0 && n_calib == 0)
        return kr_cli_usage_error(CMD, "--method %s needs --calib CSV", method);
    if (method && strcmp(method, "rtn") == 0 && n_calib > 0)
        return kr_cli_usage_error(CMD, "--method rtn uses no --calib (got '%s')", calib[0]);

    char pred_dir[PATH_MAX], tok_dir[PATH_MAX], msg[PATH_MAX + 128];
    int r = kr_resolve_model_dirs(model, tokenizer, pred_dir, tok_dir, msg, sizeof msg);
    if (r == -1) return kr_cli_usage_error(CMD, "%s", msg);
    if (r != 0) return kr_cli_fail(CMD, msg);

    kr_error err = { 0 };
    /* An output that cannot be written, or that is the checkpoint being quantised, is refused
     * before the quantisation (minutes with calibration), not after it. */
    if (kr_model_check_quantized_out(out, pred_dir, tok_dir, &err) != KR_OK)
        return kr_cli_fail(CMD, err.message);
    kr_calib_set cs;
    int rc = 0;
    kr_model *m = NULL;
    if (kr_calib_set_load(calib, n_calib, windows, lookback, &cs, &err) != KR_OK)
        return kr_cli_fail(CMD, err.message);
    kr_model_params mp = kr_model_default_params();
    mp.allow_nonfinite = allow_nonfinite;
    if (rc == 0 && kr_model_load(pred_dir, tok_dir, &mp, &m, &err) != KR_OK) {
        char hint[2 * PATH_MAX + 128], full[sizeof err.message + sizeof hint];
        kr_cli_model_hint(pred_dir, tok_dir, hint, sizeof hint);
        snprintf(full, sizeof full, "%s%s", err.message, hint);
        rc = kr_cli_fail(CMD, full);
    }
    double t0 = kr_now_seconds();
    char what[160];
    snprintf(what, sizeof what, "quantising to %s%s%s (%d calibration windows)", quant,
             method ? " with " : "", method ? method : "", cs.n_series);
    kr_ticker *ticker = rc == 0 ? kr_ticker_start(what) : NULL;
    kr_quantize_params qp = kr_quantize_default_params();
    qp.fmt = quant;
    qp.method = method;
    qp.group = group;
    qp.n_threads = threads;
    qp.gptq_damp = damp;
    kr_model *q = NULL;
    kr_status qst = rc == 0 ? kr_model_quantize(m, &qp, cs.series, cs.n_series, &q, &err) : KR_OK;
    kr_ticker_stop(ticker);
    if (qst != KR_OK) rc = kr_cli_fail(CMD, err.message);
    if (q) { /* the f32 model is done with: the quantised one is saved and described */
        kr_model_free(m);
        m = q;
    }
    double tq = kr_now_seconds() - t0;
    if (rc == 0 && kr_model_save_quantized(m, out, &err) != KR_OK)
        rc = kr_cli_fail(CMD, err.message);
    if (rc == 0) {
        kr_model_info mi;
        kr_model_get_info(m, &mi);
        fprintf(
            stderr,
            "kronos quantize: %s (%s%s) from %s: %d calibration windows, %.2f s; weights %.1f MB; "
            "wrote %s/predictor and %s/tokenizer\n",
            mi.quant, mi.quant_method,
            mi.quant_group ? (group == 64 ? ", group 64" : ", group 32") : "", pred_dir,
            cs.n_series, tq, mi.weight_bytes / 1048576.0, out, out);
    }
    kr_model_free(m);
    kr_calib_set_free(&cs);
    return rc;
}
