/*
 * cli/cmd_bench — `kronos bench`: times forecasts on a real-shape model (random weights from
 * gen-random unless --model is given) and compares, in one run, the KV-cached engine with the
 * naive full-recompute path (the reference's algorithm on our kernels) and with the official
 * predictor's figures measured on this machine class (shared anchors). Prints Markdown or JSON.
 * Flag parsing and data loading only: the measuring is kr_bench_run (kronos/eval.h).
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kronos/util.h"
#include "common/limits.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/forecast_flags.h"
#include "cli/parse.h"
#include "common/options.h"
#include "cli/progress.h"
#include "cli/share_paths.h"
#include "kronos.h"
#include "kronos/eval.h"
#include "kronos/series.h"

#define CMD "bench"

/* The ticker shows on terminals only, while a timed run goes. */
static void on_progress(const char *what, int finished, void *user) {
    kr_ticker **t = user;
    if (!finished)
        *t = kr_ticker_start(what);
    else
        kr_ticker_stop(*t);
}

static const kr_cli_opt k_opts[] = {
    { "shape", 's', KR_CLI_TEXT, "NAME", 0, 0, NULL,
      "tiny|mini|small|base random-weight model (default small)" },
    KR_CLI_OPT_MODEL("use this checkpoint (predictor/ + tokenizer/) instead"),
    { "data", 'd', KR_CLI_FILE, "FILE", 0, 0, NULL,
      "candles (default: bundled data/XSHG_5min_600977.csv)" },
    { "lookback", 'l', KR_CLI_INT, "N", 0, 0, NULL, "history rows (default 400)" },
    { "pred-len", 'n', KR_CLI_INT, "N", 0, 0, NULL, "candles to forecast (default 120)" },
    { "paths", 'p', KR_CLI_TEXT, "LIST", 0, 0, NULL, "comma list of path counts (default 1,8)" },
    { "series", 'S', KR_CLI_INT, "N", 0, 0, NULL,
      "series forecast together (default 1); series start up to 250 rows apart" },
    { "lookback-max", 'L', KR_CLI_INT, "N", 0, 0, NULL,
      "with --series: lookbacks spread evenly from --lookback to N" },
    KR_CLI_OPT_THREADS,
    { "repeat", 'r', KR_CLI_INT, "N", 0, 0, NULL,
      "timed repeats of the cached path; the median is reported (default 3)" },
    { "naive", 'N', KR_CLI_FLAG, NULL, 0, 0, NULL,
      "also time the naive full-recompute path (once per path count)" },
    { "window", 'w', KR_CLI_TEXT, "MODE", 0, 0, NULL, "exact (default) or rolling" },
    KR_CLI_OPT_QUANT("weights: f32 (default), bf16, int8, fp8, q4 (quantised at load)"),
    KR_CLI_OPT_KV_DTYPE("KV-cache precision: f32 (default), bf16, int8"),
    { "profile", 'P', KR_CLI_FLAG, NULL, 0, 0, NULL,
      "also print the step profile of each row (GEMM, attention, norms,\nsampling, tokenizer, the "
      "rest; GFLOP/s and GB/s against the peak)" },
    { "json", 'J', KR_CLI_FLAG, NULL, 0, 0, NULL, "print JSON instead of Markdown" },
    KR_CLI_OPT_ALLOW_NONFINITE(
        "load a --model checkpoint even if a weight is NaN or infinite\n(refused by default: such "
        "weights corrupt forecasts)"),
    { "help", 'h', KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

/* The flags of `kronos bench` (common/options.h): its --help, getopt table, completion and man
 * page. */
const kr_cli_command kr_cli_bench_spec = {
    "bench",
    "[--shape mini|small|base] [flags]",
    "time forecasts: KV cache vs full recomputation, paths, shapes",
    "Times forecasts with the KV-cached engine and, with --naive, the full-recompute path\n"
    "(the reference algorithm on the same kernels), in one run, and prints a table.\n",
    k_opts,
    (int)(sizeof k_opts / sizeof k_opts[0]),
    KR_CLI_FLAG,
    16,
    NULL,
    NULL,
};

int kr_cmd_bench(int argc, char **argv) {
    const char *shape = "small", *model_dir = NULL, *data = NULL, *quant = NULL, *kv_dtype = NULL;
    int lookback = 400, lookback_max = 0, pred_len = 120, series = 1, threads = 0, repeat = 3,
        naive = 0, json = 0, profile = 0, allow_nonfinite = 0;
    int paths_list[16] = { 1, 8 }, n_paths = 2;
    kr_window_mode window = KR_WINDOW_EXACT;
    const kr_cli_forecast_flags shared = { .model = &model_dir,
                                           .allow_nonfinite = &allow_nonfinite };
    kr_cli_parse ps;
    kr_cli_parse_begin(&ps, &kr_cli_bench_spec, &shared, argc, argv);
    for (int c; (c = kr_cli_parse_next(&ps)) != 0;) {
        switch (c) {
        case 's':
            if (!kr_random_shape_exists(optarg))
                return kr_cli_usage_error(CMD, "unknown --shape '%s'", optarg);
            shape = optarg;
            break;
        case 'd': data = optarg; break;
        case 'l':
            if (!kr_arg_int(optarg, 2, 1 << 16, &lookback))
                return kr_cli_usage_error(CMD, "bad --lookback '%s'", optarg);
            break;
        case 'L':
            if (!kr_arg_int(optarg, 2, 1 << 16, &lookback_max))
                return kr_cli_usage_error(CMD, "bad --lookback-max '%s'", optarg);
            break;
        case 'n':
            if (!kr_arg_int(optarg, 1, KR_LIMIT_PRED_LEN_CAP, &pred_len))
                return kr_cli_usage_error(CMD, "bad --pred-len '%s'", optarg);
            break;
        case 'p': {
            /* Every comma separates two counts: "1,,2" or "8," is a typo, not "1,2". */
            n_paths = 0;
            for (const char *t = optarg;; t++) {
                char one[32];
                size_t len = strcspn(t, ",");
                if (n_paths >= 16 || len == 0 || len >= sizeof one)
                    return kr_cli_usage_error(
                        CMD, "bad --paths '%s' (1 to 16 counts of 1..4096, comma-separated)",
                        optarg);
                memcpy(one, t, len);
                one[len] = '\0';
                if (!kr_arg_int(one, 1, 4096, &paths_list[n_paths]))
                    return kr_cli_usage_error(
                        CMD, "bad --paths '%s' (1 to 16 counts of 1..4096, comma-separated)",
                        optarg);
                n_paths++;
                t += len;
                if (!*t) break;
            }
            break;
        }
        case 'S':
            if (!kr_arg_int(optarg, 1, 256, &series))
                return kr_cli_usage_error(CMD, "bad --series '%s'", optarg);
            break;
        case KR_OPT_THREADS: /* bench's own message, as its other flags' */
            if (!kr_arg_int(optarg, 1, 1024, &threads))
                return kr_cli_usage_error(CMD, "bad --threads '%s'", optarg);
            break;
        case 'r':
            if (!kr_arg_int(optarg, 1, 1000, &repeat))
                return kr_cli_usage_error(CMD, "bad --repeat '%s'", optarg);
            break;
        case 'N': naive = 1; break;
        case KR_OPT_QUANT:
            if (!kr_arg_quant(optarg))
                return kr_cli_usage_error(CMD, "bad --quant '%s' (f32, bf16, int8, fp8, q4)",
                                          optarg);
            quant = optarg;
            break;
        case KR_OPT_KV_DTYPE:
            if (!kr_arg_kv_dtype(optarg))
                return kr_cli_usage_error(CMD, "bad --kv-dtype '%s' (f32, bf16, int8)", optarg);
            kv_dtype = optarg;
            break;
        case 'w':
            if (!strcmp(optarg, "exact"))
                window = KR_WINDOW_EXACT;
            else if (!strcmp(optarg, "rolling"))
                window = KR_WINDOW_ROLLING;
            else
                return kr_cli_usage_error(CMD, "bad --window '%s'", optarg);
            break;
        case 'J': json = 1; break;
        case 'P': profile = 1; break;
        }
    }
    if (ps.status) return ps.status < 0 ? 0 : ps.status;
    if (optind < argc) return kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    /* Said, not silently dropped: a figure measured on other lookbacks than asked is wrong. */
    if (lookback_max) {
        char v[16];
        snprintf(v, sizeof v, "%d", lookback_max);
        if (series < 2)
            return kr_cli_usage_error(CMD,
                                      "--lookback-max %s spreads the lookbacks of --series N "
                                      "(N >= 2); with one series give --lookback only",
                                      v);
        if (lookback_max < lookback)
            return kr_cli_usage_error(CMD, "--lookback-max %s is below --lookback", v);
    }

    kr_error err = { 0 };
    char msg[1200], dir[PATH_MAX], pred_dir[PATH_MAX], tok_dir[PATH_MAX];
    double gen_s = 0;
    if (!model_dir) {
        /* Random weights are deterministic per (shape, seed): generate once, reuse. */
        double t0 = kr_now_seconds();
        int written = 0;
        if (kr_model_random_cached(shape, 1, dir, sizeof dir, &written, &err) != KR_OK)
            return kr_cli_fail(CMD, err.message);
        if (written) gen_s = kr_now_seconds() - t0;
        model_dir = dir;
    }
    if (kr_resolve_model_dirs(model_dir, NULL, pred_dir, tok_dir, msg, sizeof msg) != 0)
        return kr_cli_fail(CMD, msg);
    kr_candles *cs = NULL;
    char bundled[PATH_MAX];
    if (!data) { /* the bundled 5-minute candles */
        kr_share_path("data/XSHG_5min_600977.csv", bundled, sizeof bundled);
        data = bundled;
    }
    if (kr_candles_read_csv(data, &cs, &err) != KR_OK) return kr_cli_fail(CMD, err.message);
    if (lookback_max < lookback) lookback_max = lookback;
    int64_t stride = series > 1 ? (cs->n - lookback_max - pred_len) / (series - 1) : 0;
    if (stride > 250) stride = 250;
    if (stride < 0 || (series > 1 && stride < 1) || lookback_max + pred_len > cs->n) {
        snprintf(msg, sizeof msg,
                 "%s: %lld rows, too few for --lookback%s %d + --pred-len %d%s (%lld rows needed)",
                 data, (long long)cs->n, lookback_max > lookback ? "-max" : "", lookback_max,
                 pred_len,
                 series > 1 ? " with --series, whose series start a row apart at least" : "",
                 (long long)lookback_max + pred_len + (series > 1 ? series - 1 : 0));
        kr_candles_free(cs);
        return kr_cli_fail(CMD, msg);
    }
    kr_model *m = NULL;
    kr_model_params mp = kr_model_default_params();
    mp.quant = quant;
    mp.allow_nonfinite = allow_nonfinite;
    if (kr_model_load(pred_dir, tok_dir, &mp, &m, &err) != KR_OK) {
        kr_candles_free(cs);
        return kr_cli_fail(CMD, err.message);
    }
    /* No prefix cache: every repeat computes everything, as the reference would. */
    kr_context *ctx = NULL;
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = threads;
    cp.kv_dtype = kv_dtype;
    cp.prefix_cache = 0;
    if (kr_context_create(m, &cp, &ctx, &err) != KR_OK) {
        kr_model_free(m);
        kr_candles_free(cs);
        return kr_cli_fail(CMD, err.message);
    }
    /* Series i: history rows [stride·i, stride·i + lookback_i), future stamps from the next rows. */
    kr_series *ss = calloc((size_t)series, sizeof *ss);
    for (int i = 0; ss && i < series; i++) {
        int lb = series > 1
                     ? lookback + (int)((int64_t)(lookback_max - lookback) * i / (series - 1))
                     : lookback;
        ss[i] = kr_candles_slice(cs, stride * i, lb);
        ss[i].future_timestamps = cs->timestamps + stride * i + lb;
    }
    kr_ticker *ticker = NULL;
    kr_bench_params bp = kr_bench_default_params();
    bp.paths = paths_list;
    bp.n_paths = n_paths;
    bp.pred_len = pred_len;
    bp.repeat = repeat;
    bp.naive = naive;
    bp.window = window;
    bp.label = model_dir == dir ? shape : model_dir;
    bp.shape = model_dir == dir ? shape : NULL;
    bp.lookback = lookback;
    bp.threads = threads;
    bp.weights_generated_seconds = gen_s;
    bp.profile = profile;
    bp.progress = on_progress;
    bp.user = &ticker;
    kr_bench_report *report = NULL;
    int rc = 0;
    if (!ss)
        rc = kr_cli_fail(CMD, "out of memory");
    else if (kr_bench_run(ctx, ss, series, &bp, &report, &err) != KR_OK ||
             kr_bench_write(report, stdout, json, &err) != KR_OK)
        rc = kr_cli_fail(CMD, err.message);
    else if (fflush(stdout) != 0 || ferror(stdout)) /* a full disk, a closed pipe */
        rc = kr_cli_fail(CMD, "stdout: write failed");
    kr_bench_report_free(report);
    free(ss);
    kr_context_free(ctx);
    kr_model_free(m);
    kr_candles_free(cs);
    return rc;
}
