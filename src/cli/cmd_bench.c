/*
 * cli/cmd_bench — `kronos bench`: times forecasts on a real-shape model (random weights from
 * gen-random unless --model is given) and compares, in one run, the KV-cached engine with the
 * naive full-recompute path (the reference's algorithm on our kernels) and with the official
 * predictor's figures measured on this machine class (shared anchors). Prints Markdown or JSON.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "base/timeutil.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/share_paths.h"
#include "engine/context.h"
#include "engine/forecast_internal.h"
#include "engine/profile.h"
#include "kernels/kernels.h"
#include "market/candles.h"
#include "model/weights.h"

#define CMD "bench"

static void usage(FILE *f) {
    fputs(
        "usage: kronos bench [--shape mini|small|base] [flags]\n"
        "\n"
        "Times forecasts with the KV-cached engine and, with --naive, the full-recompute path\n"
        "(the reference algorithm on the same kernels), in one run, and prints a table.\n"
        "\n"
        "  --shape NAME     tiny|mini|small|base random-weight model (default small)\n"
        "  --model DIR      use this checkpoint (predictor/ + tokenizer/) instead\n"
        "  --data FILE      candles (default: bundled data/XSHG_5min_600977.csv)\n"
        "  --lookback N     history rows (default 400)\n"
        "  --pred-len N     candles to forecast (default 120)\n"
        "  --paths LIST     comma list of path counts (default 1,8)\n"
        "  --series N       series forecast together (default 1); series start up to 250 rows "
        "apart\n"
        "  --lookback-max N with --series: lookbacks spread evenly from --lookback to N\n"
        "  --threads N      compute threads (default: all CPUs)\n"
        "  --repeat N       timed repeats of the cached path; the median is reported (default 3)\n"
        "  --naive          also time the naive full-recompute path (once per path count)\n"
        "  --window MODE    exact (default) or rolling\n"
        "  --quant FMT      weights: f32 (default), bf16, int8, fp8, q4 (quantised at load)\n"
        "  --kv-dtype T     KV-cache precision: f32 (default), bf16, int8\n"
        "  --profile        also print the step profile of each row (GEMM, attention, norms,\n"
        "                   sampling, tokenizer, the rest; GFLOP/s and GB/s against the peak)\n"
        "  --json           print JSON instead of Markdown\n"
        "  -h, --help       this text\n",
        f);
}

/* The official KronosPredictor on this machine class (shared/anchors/reference_bench.md,
 * OpenBLAS, 2 threads, lookback 400, pred_len 120): seconds by (shape, paths). */
static double reference_seconds(const char *shape, int lookback, int pred_len, int paths,
                                int series) {
    if (lookback != 400 || pred_len != 120 || series != 1) return 0;
    if (!strcmp(shape, "small") && paths == 1) return 25.3;
    if (!strcmp(shape, "small") && paths == 8) return 236.9; /* row-loop SDPA shim */
    if (!strcmp(shape, "mini") && paths == 1) return 5.4;
    if (!strcmp(shape, "base") && paths == 1) return 202.3;
    return 0;
}

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Approximate FLOPs of the predictor's matrix products per token (weights only). */
static double flops_per_token(const kr_model_info *mi) {
    double d = mi->d_model, ff = mi->ff_dim;
    double per_layer = 4 * d * d + 3 * d * ff;
    double heads = 2.0 * d * 1024 + 2 * d * d * 2; /* s1/s2 heads + dep q/k/v/out (amortised) */
    return 2.0 * (mi->n_layers * per_layer + 2 * d * 2 * d + heads);
}

typedef struct row {
    int paths;
    const char *mode;
    double seconds, tokens_per_s, gflops, rss_mb, ref_s, kv_mb;
    int64_t prefill_tokens, decode_tokens, recomputes;
    kr_step_profile profile; /* of the last repeat */
} row;

static int run_once(kr_context *ctx, const kr_series *s, int n, const kr_forecast_params *p,
                    int naive, double *secs, kr_forecast_stats *stats, kr_error *err) {
    kr_forecast **res = calloc((size_t)n, sizeof *res);
    kr_gen_options opt = { .naive = naive };
    double t0 = kr_now_seconds();
    kr_status st = kr_forecast_run_batch_opt(ctx, s, n, p, NULL, &opt, res, err);
    *secs = kr_now_seconds() - t0;
    memset(stats, 0, sizeof *stats);
    for (int i = 0; i < n && st == KR_OK; i++) {
        kr_forecast_stats one;
        kr_forecast_get_stats(res[i], &one);
        stats->prefill_tokens += one.prefill_tokens;
        stats->decode_tokens += one.decode_tokens;
        stats->window_recomputes += one.window_recomputes;
        stats->kv_bytes += one.kv_bytes;
        kr_step_profile_add(&stats->profile, &one.profile);
    }
    for (int i = 0; i < n; i++) kr_forecast_free(res[i]);
    free(res);
    return st == KR_OK ? 0 : -1;
}

int kr_cmd_bench(int argc, char **argv) {
    static const struct option longopts[] = {
        { "shape", required_argument, NULL, 's' },
        { "model", required_argument, NULL, 'm' },
        { "data", required_argument, NULL, 'd' },
        { "lookback", required_argument, NULL, 'l' },
        { "pred-len", required_argument, NULL, 'n' },
        { "paths", required_argument, NULL, 'p' },
        { "series", required_argument, NULL, 'S' },
        { "threads", required_argument, NULL, 'j' },
        { "lookback-max", required_argument, NULL, 'L' },
        { "repeat", required_argument, NULL, 'r' },
        { "naive", no_argument, NULL, 'N' },
        { "window", required_argument, NULL, 'w' },
        { "json", no_argument, NULL, 'J' },
        { "profile", no_argument, NULL, 'P' },
        { "quant", required_argument, NULL, 'Q' },
        { "kv-dtype", required_argument, NULL, 'K' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *shape = "small", *model_dir = NULL, *data = NULL, *quant = NULL, *kv_dtype = NULL;
    int lookback = 400, lookback_max = 0, pred_len = 120, series = 1, threads = 0, repeat = 3,
        naive = 0, json = 0, profile = 0;
    int paths_list[16] = { 1, 8 }, n_paths = 2;
    kr_window_mode window = KR_WINDOW_EXACT;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (!kr_random_shape_find(optarg))
                return kr_cli_usage_error(CMD, "unknown --shape '%s'", optarg);
            shape = optarg;
            break;
        case 'm': model_dir = optarg; break;
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
            if (!kr_arg_int(optarg, 1, 1 << 16, &pred_len))
                return kr_cli_usage_error(CMD, "bad --pred-len '%s'", optarg);
            break;
        case 'p': {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", optarg);
            n_paths = 0;
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
                if (n_paths >= 16 || !kr_arg_int(t, 1, 4096, &paths_list[n_paths]))
                    return kr_cli_usage_error(CMD, "bad --paths '%s'", optarg);
                n_paths++;
            }
            if (!n_paths) return kr_cli_usage_error(CMD, "bad --paths '%s'", optarg);
            break;
        }
        case 'S':
            if (!kr_arg_int(optarg, 1, 256, &series))
                return kr_cli_usage_error(CMD, "bad --series '%s'", optarg);
            break;
        case 'j':
            if (!kr_arg_int(optarg, 1, 1024, &threads))
                return kr_cli_usage_error(CMD, "bad --threads '%s'", optarg);
            break;
        case 'r':
            if (!kr_arg_int(optarg, 1, 1000, &repeat))
                return kr_cli_usage_error(CMD, "bad --repeat '%s'", optarg);
            break;
        case 'N': naive = 1; break;
        case 'Q':
            if (!kr_arg_quant(optarg))
                return kr_cli_usage_error(CMD, "bad --quant '%s' (f32, bf16, int8, fp8, q4)",
                                          optarg);
            quant = optarg;
            break;
        case 'K':
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
        case 'h': usage(stdout); return 0;
        default: return kr_cli_usage_error(CMD, "%s", "unknown flag");
        }
    }
    if (optind < argc) return kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);

    kr_error err = { 0 };
    char msg[1200], dir[PATH_MAX], pred_dir[PATH_MAX], tok_dir[PATH_MAX];
    double gen_s = 0;
    if (!model_dir) {
        /* Random weights are deterministic per (shape, seed): generate once, reuse. */
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/kronos-bench-%s-seed1", tmp && *tmp ? tmp : "/tmp", shape);
        snprintf(pred_dir, sizeof pred_dir, "%s/predictor/model.safetensors", dir);
        struct stat sb;
        if (stat(pred_dir, &sb) != 0) {
            double t0 = kr_now_seconds();
            if (kr_model_write_random(kr_random_shape_find(shape), 1, dir, &err) != KR_OK)
                return kr_cli_fail(CMD, err.message);
            gen_s = kr_now_seconds() - t0;
        }
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
        kr_candles_free(cs);
        return kr_cli_fail(CMD, "the data file is too short for --series/--lookback/--pred-len");
    }
    kr_model *m = NULL;
    kr_model_params mp = kr_model_default_params();
    mp.quant = quant;
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
    kr_model_info mi;
    kr_model_get_info(m, &mi);
    /* Series i: history rows [stride·i, stride·i + lookback_i), future stamps from the next rows. */
    kr_series *ss = calloc((size_t)series, sizeof *ss);
    for (int i = 0; i < series; i++) {
        int lb = series > 1
                     ? lookback + (int)((int64_t)(lookback_max - lookback) * i / (series - 1))
                     : lookback;
        ss[i] = kr_candles_slice(cs, stride * i, lb);
        ss[i].future_timestamps = cs->timestamps + stride * i + lb;
    }
    row rows[64];
    int n_rows = 0, rc = 0;
    double fpt = flops_per_token(&mi);
    for (int k = 0; k < n_paths && rc == 0; k++) {
        kr_forecast_params p = kr_forecast_default_params();
        p.lookback = 0; /* each series uses all its rows (they are cut to their lookback) */
        p.pred_len = pred_len;
        p.paths = paths_list[k];
        p.window = window;
        p.keep_paths = 1;
        for (int mode = 0; mode < (naive ? 2 : 1) && rc == 0; mode++) {
            int reps = mode == 0 ? repeat : 1;
            double times[1000];
            kr_forecast_stats stats = { 0 };
            for (int r = 0; r < reps; r++) {
                char what[160];
                snprintf(what, sizeof what, "%s, %d paths: run %d of %d",
                         mode == 0 ? "kv-cache" : "naive", p.paths, r + 1, reps);
                kr_ticker *ticker = kr_ticker_start(what); /* terminals only */
                int failed = run_once(ctx, ss, series, &p, mode, &times[r], &stats, &err) != 0;
                kr_ticker_stop(ticker);
                if (failed) {
                    rc = kr_cli_fail(CMD, err.message);
                    break;
                }
            }
            if (rc) break;
            qsort(times, (size_t)reps, sizeof(double), cmp_double);
            row *rw = &rows[n_rows++];
            rw->paths = p.paths;
            rw->mode = mode == 0 ? "kv-cache" : "naive";
            rw->seconds = times[reps / 2];
            rw->tokens_per_s = (double)series * p.paths * pred_len / rw->seconds;
            rw->gflops =
                (double)(stats.prefill_tokens + stats.decode_tokens) * fpt / rw->seconds / 1e9;
            rw->rss_mb = peak_rss_mb();
            rw->ref_s = reference_seconds(shape, lookback, pred_len, p.paths, series);
            rw->prefill_tokens = stats.prefill_tokens;
            rw->decode_tokens = stats.decode_tokens;
            rw->recomputes = stats.window_recomputes;
            rw->kv_mb = stats.kv_bytes / 1048576.0;
            rw->profile = stats.profile;
        }
    }
    /* Every output names the ISA and the peak the figures are to be read against. */
    double peak = rc == 0 ? kr_machine_fma_peak(threads) : 0;
    int n_threads = threads > 0 ? threads : kr_cpu_count();
    if (rc == 0) {
        if (json) {
            cJSON *root = cJSON_CreateObject();
            cJSON_AddStringToObject(root, "shape", model_dir == dir ? shape : model_dir);
            cJSON_AddStringToObject(root, "isa", kr_isa_name(kr_isa_active()));
            cJSON_AddNumberToObject(root, "threads", n_threads);
            cJSON_AddNumberToObject(root, "fma_peak_gflops", peak);
            cJSON_AddNumberToObject(root, "lookback", lookback);
            cJSON_AddNumberToObject(root, "pred_len", pred_len);
            cJSON_AddNumberToObject(root, "series", series);
            cJSON_AddNumberToObject(root, "model_load_seconds", mi.load_seconds);
            cJSON_AddNumberToObject(root, "weight_bytes", (double)mi.weight_bytes);
            cJSON_AddStringToObject(root, "quant", mi.quant);
            cJSON_AddStringToObject(root, "kv_dtype", kv_dtype ? kv_dtype : "f32");
            cJSON_AddNumberToObject(root, "quantize_seconds", mi.quant_seconds);
            cJSON *arr = cJSON_AddArrayToObject(root, "results");
            for (int i = 0; i < n_rows; i++) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddNumberToObject(o, "paths", rows[i].paths);
                cJSON_AddStringToObject(o, "mode", rows[i].mode);
                cJSON_AddNumberToObject(o, "seconds", rows[i].seconds);
                cJSON_AddNumberToObject(o, "tokens_per_second", rows[i].tokens_per_s);
                cJSON_AddNumberToObject(o, "gflops", rows[i].gflops);
                cJSON_AddNumberToObject(o, "peak_rss_mb", rows[i].rss_mb);
                cJSON_AddNumberToObject(o, "kv_cache_mb", rows[i].kv_mb);
                cJSON_AddNumberToObject(o, "prefill_tokens", (double)rows[i].prefill_tokens);
                cJSON_AddNumberToObject(o, "decode_tokens", (double)rows[i].decode_tokens);
                cJSON_AddNumberToObject(o, "window_recomputes", (double)rows[i].recomputes);
                if (rows[i].ref_s > 0)
                    cJSON_AddNumberToObject(o, "reference_seconds", rows[i].ref_s);
                if (profile) {
                    kr_sb sb = { 0 };
                    kr_step_profile_json(&sb, &rows[i].profile);
                    char *text = NULL;
                    if (kr_sb_finish(&sb, &text, NULL) == KR_OK)
                        cJSON_AddItemToObject(o, "profile", cJSON_CreateRaw(text));
                    free(text);
                }
                cJSON_AddItemToArray(arr, o);
            }
            char *text = cJSON_Print(root);
            printf("%s\n", text);
            free(text);
            cJSON_Delete(root);
        } else {
            printf("kronos bench: shape %s (d_model %d, %d layers, %zu params), lookback %d, "
                   "pred_len %d, "
                   "series %d, %s, isa %s, %d threads (FMA peak %.1f GFLOP/s, measured now), "
                   "model load %.1f ms%s\n\n",
                   model_dir == dir ? shape : model_dir, mi.d_model, mi.n_layers, mi.n_params,
                   lookback, pred_len, series,
                   window == KR_WINDOW_EXACT ? "exact window" : "rolling window",
                   kr_isa_name(kr_isa_active()), n_threads, peak, mi.load_seconds * 1e3,
                   gen_s > 0 ? " (weights generated now)" : "");
            printf("weights %s, %.1f MB (quantised at load in %.2f s), KV cache %s\n\n", mi.quant,
                   mi.weight_bytes / 1048576.0, mi.quant_seconds, kv_dtype ? kv_dtype : "f32");
            printf(
                "| paths | path | wall s (median) | tokens/s | ~GFLOP/s | of FMA peak | peak RSS "
                "MB | KV MB | vs naive | official predictor s | speed-up vs official |\n");
            printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
            for (int i = 0; i < n_rows; i++) {
                double naive_s = 0;
                for (int j = 0; j < n_rows; j++)
                    if (rows[j].paths == rows[i].paths && !strcmp(rows[j].mode, "naive"))
                        naive_s = rows[j].seconds;
                char vs[32] = "", ref[32] = "", up[32] = "";
                if (naive_s > 0) snprintf(vs, sizeof vs, "%.1fx", naive_s / rows[i].seconds);
                if (rows[i].ref_s > 0) {
                    snprintf(ref, sizeof ref, "%.1f", rows[i].ref_s);
                    snprintf(up, sizeof up, "%.0fx", rows[i].ref_s / rows[i].seconds);
                }
                printf("| %d | %s | %.3f | %.0f | %.1f | %.0f %% | %.0f | %.0f | %s | %s | %s |\n",
                       rows[i].paths, rows[i].mode, rows[i].seconds, rows[i].tokens_per_s,
                       rows[i].gflops, peak > 0 ? 100.0 * rows[i].gflops / peak : 0.0,
                       rows[i].rss_mb, rows[i].kv_mb, vs, ref, up);
            }
            for (int i = 0; profile && i < n_rows; i++) {
                kr_sb sb = { 0 };
                kr_step_profile_markdown(&sb, &rows[i].profile, peak);
                char *text = NULL;
                if (kr_sb_finish(&sb, &text, NULL) == KR_OK)
                    printf("\nStep profile, %d paths, %s (last repeat):\n\n%s", rows[i].paths,
                           rows[i].mode, text);
                free(text);
            }
        }
    }
    free(ss);
    kr_context_free(ctx);
    kr_model_free(m);
    kr_candles_free(cs);
    return rc;
}
