/*
 * rolling_vs_exact — what `--window rolling` costs against `--window exact` (not part of
 * ctest; results in bench/results/rolling-vs-exact-*.md).
 *
 * Past max_context exact mode re-runs the trailing window from position 0 at every step, as
 * the reference does; rolling mode keeps a sliding KV cache, so its later rows were computed
 * at other positions and with longer pasts than a re-run would give them. Both modes draw
 * path k of a window from the same random stream (seed, path, step), so while their logits
 * agree they sample the same tokens; a token that differs shows where the approximation has
 * moved a draw. Over many windows of the bundled candles (lookback = max_context, so every
 * step after the first slides the window) it reports, in one run:
 *   - token agreement per step: the share of (window, path) pairs whose s1 and s2 are equal
 *     at that step, and the share still identical up to it; sampled paths and greedy (top-k 1);
 *   - a two-sample KS test of the path returns at the horizon (close / last close − 1, every
 *     path of every window pooled, exact vs rolling);
 *   - the MAPE of the mean path's close against the candles that followed, in each mode, and
 *     their paired difference (with its standard error over windows);
 *   - the wall time of each mode.
 *
 *   rolling_vs_exact [--model DIR | --shape tiny|mini|small|base] [--data CSV]...
 *                    [--windows N] [--max-context N] [--pred-len N] [--paths N]
 *                    [--threads N] [--json]
 */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/fidelity_stats.h"
#include "base/timeutil.h"
#include "kernels/kernels.h"
#include "bench_model.h"
#include "kronos.h"
#include "series/candles.h"
#include "model/weights.h"

#define MAX_FILES 8

static void die(const char *what, const kr_error *err) {
    fprintf(stderr, "rolling_vs_exact: %s: %s\n", what, err ? err->message : "");
    exit(1);
}

typedef struct mode_run {
    kr_forecast **f; /* [windows] */
    double seconds;
} mode_run;

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        { "model", required_argument, NULL, 'm' },
        { "shape", required_argument, NULL, 's' },
        { "data", required_argument, NULL, 'd' },
        { "windows", required_argument, NULL, 'w' },
        { "max-context", required_argument, NULL, 'c' },
        { "pred-len", required_argument, NULL, 'n' },
        { "paths", required_argument, NULL, 'p' },
        { "threads", required_argument, NULL, 'j' },
        { "json", no_argument, NULL, 'J' },
        { NULL, 0, NULL, 0 },
    };
    const char *model_dir = NULL, *shape = NULL, *files[MAX_FILES];
    int n_files = 0, windows = 24, max_context = 512, pred_len = 48, paths = 16, threads = 0,
        json = 0, c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': model_dir = optarg; break;
        case 's': shape = optarg; break;
        case 'd':
            if (n_files < MAX_FILES) files[n_files++] = optarg;
            break;
        case 'w': windows = atoi(optarg); break;
        case 'c': max_context = atoi(optarg); break;
        case 'n': pred_len = atoi(optarg); break;
        case 'p': paths = atoi(optarg); break;
        case 'j': threads = atoi(optarg); break;
        case 'J': json = 1; break;
        default:
            fprintf(stderr, "usage: rolling_vs_exact [--model DIR | --shape S] [--data CSV]... "
                            "[--windows N] [--max-context N] [--pred-len N] [--paths N] "
                            "[--threads N] [--json]\n");
            return 2;
        }
    }
    if (windows < 1 || max_context < 8 || pred_len < 2 || paths < 1) {
        fprintf(stderr, "rolling_vs_exact: bad sizes\n");
        return 2;
    }
    if (n_files == 0) {
        static const char *bundled[] = { KR_SOURCE_DIR "/data/XSHG_5min_600977.csv",
                                         KR_SOURCE_DIR "/data/AAPL_1d.csv",
                                         KR_SOURCE_DIR "/data/MSFT_1d.csv",
                                         KR_SOURCE_DIR "/data/BTCUSDT_1h.csv" };
        for (int i = 0; i < 4; i++) files[n_files++] = bundled[i];
    }
    kr_error err = { 0 };
    bench_model_dirs md;
    if (bench_model_dirs_resolve(model_dir, shape, &md, &err) != KR_OK) die("gen-random", &err);
    const char *pred = md.predictor, *tok = md.tokenizer;
    kr_model *m = NULL;
    if (kr_model_load(pred, tok, NULL, &m, &err) != KR_OK) die("load", &err);
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = threads;
    cp.prefix_cache = 0;
    kr_context *ctx = NULL;
    if (kr_context_create(m, &cp, &ctx, &err) != KR_OK) die("context", &err);

    /* Windows spread evenly over each file: history [start, start + max_context), the
     * next pred_len rows are the future. */
    kr_candles *data[MAX_FILES];
    kr_series *series = calloc((size_t)windows, sizeof *series);
    const double **future = calloc((size_t)windows, sizeof *future);
    for (int i = 0; i < n_files; i++)
        if (kr_candles_read_csv(files[i], &data[i], &err) != KR_OK) die(files[i], &err);
    for (int w = 0; w < windows; w++) {
        const kr_candles *cs = data[w % n_files];
        int per_file = (windows - w % n_files + n_files - 1) / n_files, k = w / n_files;
        int64_t room = cs->n - max_context - pred_len;
        if (room < 0) {
            fprintf(stderr, "rolling_vs_exact: %s is too short\n", files[w % n_files]);
            return 1;
        }
        int64_t start = per_file > 1 ? room * k / (per_file - 1) : room;
        series[w] = kr_candles_slice(cs, start, max_context);
        series[w].future_timestamps = cs->timestamps + start + max_context;
        future[w] = cs->values + (size_t)(start + max_context) * KR_N_FEATURES;
    }

    /* [0] sampled exact, [1] sampled rolling, [2] greedy exact, [3] greedy rolling */
    mode_run runs[4];
    for (int r = 0; r < 4; r++) {
        kr_forecast_params p = kr_forecast_default_params();
        p.pred_len = pred_len;
        p.max_context = max_context;
        p.paths = r < 2 ? paths : 1;
        if (r >= 2) p.top_k = 1;
        p.window = r % 2 ? KR_WINDOW_ROLLING : KR_WINDOW_EXACT;
        p.keep_paths = 1;
        runs[r].f = calloc((size_t)windows, sizeof *runs[r].f);
        double t0 = kr_now_seconds();
        for (int w = 0; w < windows; w++) {
            p.seed = 1000 + (uint64_t)w;
            if (kr_forecast_run(ctx, &series[w], &p, &runs[r].f[w], &err) != KR_OK)
                die("forecast", &err);
        }
        runs[r].seconds = kr_now_seconds() - t0;
    }

    /* Token agreement per step. */
    double *same[2], *prefix[2];
    for (int g = 0; g < 2; g++) {
        same[g] = calloc((size_t)pred_len, sizeof(double));
        prefix[g] = calloc((size_t)pred_len, sizeof(double));
        int np = g == 0 ? paths : 1;
        for (int w = 0; w < windows; w++)
            for (int k = 0; k < np; k++) {
                const kr_forecast *a = runs[2 * g].f[w], *b = runs[2 * g + 1].f[w];
                const int32_t *a1 = kr_forecast_path_s1(a, k), *a2 = kr_forecast_path_s2(a, k),
                              *b1 = kr_forecast_path_s1(b, k), *b2 = kr_forecast_path_s2(b, k);
                int intact = 1;
                for (int t = 0; t < pred_len; t++) {
                    int eq = a1[t] == b1[t] && a2[t] == b2[t];
                    intact &= eq;
                    same[g][t] += eq;
                    prefix[g][t] += intact;
                }
            }
        for (int t = 0; t < pred_len; t++) {
            same[g][t] /= (double)windows * np;
            prefix[g][t] /= (double)windows * np;
        }
    }
    /* Path returns at the horizon, and the mean path's MAPE against what followed. */
    int64_t n_ret = (int64_t)windows * paths;
    double *ret[2] = { malloc((size_t)n_ret * sizeof(double)),
                       malloc((size_t)n_ret * sizeof(double)) };
    double mape[2] = { 0, 0 }, diff_sum = 0, diff_sq = 0;
    for (int w = 0; w < windows; w++) {
        double last = series[w].values[(size_t)(series[w].n - 1) * KR_N_FEATURES + KR_CLOSE];
        double e[2];
        for (int r = 0; r < 2; r++) {
            const kr_forecast *f = runs[r].f[w];
            for (int k = 0; k < paths; k++)
                ret[r][(int64_t)w * paths + k] =
                    kr_forecast_path(f, k)[(size_t)(pred_len - 1) * KR_N_FEATURES + KR_CLOSE] /
                        last -
                    1.0;
            const double *mean = kr_forecast_mean(f);
            double s = 0;
            for (int t = 0; t < pred_len; t++) {
                double truth = future[w][(size_t)t * KR_N_FEATURES + KR_CLOSE];
                s += fabs(mean[(size_t)t * KR_N_FEATURES + KR_CLOSE] - truth) / fabs(truth);
            }
            e[r] = 100.0 * s / pred_len;
            mape[r] += e[r] / windows;
        }
        diff_sum += e[1] - e[0];
        diff_sq += (e[1] - e[0]) * (e[1] - e[0]);
    }
    double ks_d = NAN, ks_p = NAN;
    kr_ks2_test(ret[0], n_ret, ret[1], n_ret, &ks_d, &ks_p);
    double diff = diff_sum / windows,
           diff_se = windows > 1 ? sqrt((diff_sq / windows - diff * diff) / (windows - 1)) : NAN;

    kr_model_info mi;
    kr_model_get_info(m, &mi);
    const char *name = shape ? shape : md.root;
    if (json) {
        printf("{\"model\":\"%s\",\"d_model\":%d,\"n_layers\":%d,\"isa\":\"%s\",\"windows\":%d,"
               "\"max_context\":%d,\"lookback\":%d,\"pred_len\":%d,\"paths\":%d,",
               name, mi.d_model, mi.n_layers, kr_isa_name(kr_isa_active()), windows, max_context,
               max_context, pred_len, paths);
        for (int g = 0; g < 2; g++) {
            printf("\"%s\":{\"same_token\":[", g ? "greedy" : "sampled");
            for (int t = 0; t < pred_len; t++) printf("%s%.4f", t ? "," : "", same[g][t]);
            printf("],\"identical_so_far\":[");
            for (int t = 0; t < pred_len; t++) printf("%s%.4f", t ? "," : "", prefix[g][t]);
            printf("]},");
        }
        printf("\"ks_path_returns\":{\"statistic\":%.6f,\"p_value\":%.6g,\"n\":%lld},"
               "\"mape_exact\":%.4f,\"mape_rolling\":%.4f,\"mape_difference\":%.4f,"
               "\"mape_difference_se\":%.4f,\"seconds_exact\":%.3f,\"seconds_rolling\":%.3f}\n",
               ks_d, ks_p, (long long)n_ret, mape[0], mape[1], diff, diff_se, runs[0].seconds,
               runs[1].seconds);
    } else {
        printf("### %s (d_model %d, %d layers), isa %s\n\n", name, mi.d_model, mi.n_layers,
               kr_isa_name(kr_isa_active()));
        printf("%d windows (lookback = max_context = %d, pred_len %d) over %d files; %d sampled "
               "paths (T 1.0, top-p 0.9) and 1 greedy path per window, same seed in both "
               "modes.\n\n",
               windows, max_context, pred_len, n_files, paths);
        printf("| step | same token, sampled | identical so far, sampled | same token, greedy | "
               "identical so far, greedy |\n|---:|---:|---:|---:|---:|\n");
        for (int t = 0; t < pred_len; t++) {
            if (!(t < 4 || t == 7 || t == 15 || t == 23 || t == 31 || t == pred_len - 1)) continue;
            printf("| %d | %.1f %% | %.1f %% | %.1f %% | %.1f %% |\n", t + 1, 100 * same[0][t],
                   100 * prefix[0][t], 100 * same[1][t], 100 * prefix[1][t]);
        }
        double mean_same[2] = { 0, 0 };
        for (int g = 0; g < 2; g++) {
            for (int t = 0; t < pred_len; t++) mean_same[g] += same[g][t] / pred_len;
        }
        printf("| mean | %.1f %% | | %.1f %% | |\n\n", 100 * mean_same[0], 100 * mean_same[1]);
        printf("| measure | exact | rolling |\n|---|---:|---:|\n");
        printf("| MAPE of the mean path's close vs the actual candles | %.3f %% | %.3f %% |\n",
               mape[0], mape[1]);
        printf("| wall time, all windows (sampled paths) | %.2f s | %.2f s |\n\n", runs[0].seconds,
               runs[1].seconds);
        printf("MAPE difference rolling − exact: %+.3f points (standard error %.3f over %d "
               "windows). KS two-sample test of the path returns at the horizon (n = %lld "
               "each): D = %.4f, p = %.4f%s.\n\n",
               diff, diff_se, windows, (long long)n_ret, ks_d, ks_p,
               ks_p < 0.05 ? " (rejects at 5 %)" : " (not rejected at 5 %)");
    }
    for (int r = 0; r < 4; r++) {
        for (int w = 0; w < windows; w++) kr_forecast_free(runs[r].f[w]);
        free(runs[r].f);
    }
    for (int g = 0; g < 2; g++) {
        free(same[g]);
        free(prefix[g]);
    }
    free(ret[0]);
    free(ret[1]);
    free(series);
    free(future);
    for (int i = 0; i < n_files; i++) kr_candles_free(data[i]);
    kr_context_free(ctx);
    kr_model_free(m);
    return 0;
}
