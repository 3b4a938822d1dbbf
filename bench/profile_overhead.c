/*
 * profile_overhead — what the always-on step profile costs (not part of ctest): the same
 * forecasts on two contexts of one model, kr_context_params.profile on and off, interleaved
 * run by run so both see the same machine load; prints the median wall time of each and their
 * ratio, and checks that the results are byte-identical.
 *
 *   profile_overhead [--model DIR] [--data CSV] [--lookback N] [--pred-len N] [--paths N]
 *                    [--repeat N] [--threads N]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "kernels/kernels.h"
#include "kronos.h"
#include "series/candles.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        { "model", required_argument, NULL, 'm' },    { "data", required_argument, NULL, 'd' },
        { "lookback", required_argument, NULL, 'l' }, { "pred-len", required_argument, NULL, 'n' },
        { "paths", required_argument, NULL, 'p' },    { "repeat", required_argument, NULL, 'r' },
        { "threads", required_argument, NULL, 'j' },  { NULL, 0, NULL, 0 },
    };
    const char *model_dir = KR_SOURCE_DIR "/models/kronos-demo",
               *data = KR_SOURCE_DIR "/data/XSHG_5min_600977.csv";
    int lookback = 400, pred_len = 60, paths = 1, repeat = 7, threads = 0, c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': model_dir = optarg; break;
        case 'd': data = optarg; break;
        case 'l': lookback = atoi(optarg); break;
        case 'n': pred_len = atoi(optarg); break;
        case 'p': paths = atoi(optarg); break;
        case 'r': repeat = atoi(optarg); break;
        case 'j': threads = atoi(optarg); break;
        default: fprintf(stderr, "profile_overhead: bad flag\n"); return 2;
        }
    }
    if (repeat < 1 || repeat > 1000) repeat = 7;
    char pred[4096], tok[4096];
    snprintf(pred, sizeof pred, "%s/predictor", model_dir);
    snprintf(tok, sizeof tok, "%s/tokenizer", model_dir);
    kr_error err = { 0 };
    kr_model *m = NULL;
    kr_candles *cs = NULL;
    if (kr_model_load(pred, tok, NULL, &m, &err) != KR_OK ||
        kr_candles_read_csv(data, &cs, &err) != KR_OK) {
        fprintf(stderr, "profile_overhead: %s\n", err.message);
        return 1;
    }
    kr_context *ctx[2] = { NULL, NULL };
    for (int i = 0; i < 2; i++) {
        kr_context_params cp = kr_context_default_params();
        cp.n_threads = threads;
        cp.prefix_cache = 0;
        cp.profile = i == 0; /* [0] on, [1] off */
        if (kr_context_create(m, &cp, &ctx[i], &err) != KR_OK) {
            fprintf(stderr, "profile_overhead: %s\n", err.message);
            return 1;
        }
    }
    kr_series s = kr_candles_slice(cs, 0, lookback);
    s.future_timestamps = cs->timestamps + lookback;
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = pred_len;
    p.paths = paths;
    p.keep_paths = 1;
    double *t[2] = { calloc((size_t)repeat, sizeof(double)),
                     calloc((size_t)repeat, sizeof(double)) };
    int same = 1;
    for (int r = 0; r < repeat; r++) {
        kr_forecast *f[2];
        for (int k = 0; k < 2; k++) {
            int i = (r + k) % 2; /* alternate which goes first */
            double t0 = kr_now_seconds();
            if (kr_forecast_run(ctx[i], &s, &p, &f[i], &err) != KR_OK) {
                fprintf(stderr, "profile_overhead: %s\n", err.message);
                return 1;
            }
            t[i][r] = kr_now_seconds() - t0;
        }
        for (int k = 0; k < paths; k++)
            same &= !memcmp(kr_forecast_path(f[0], k), kr_forecast_path(f[1], k),
                            (size_t)pred_len * KR_N_FEATURES * sizeof(double));
        kr_forecast_free(f[0]);
        kr_forecast_free(f[1]);
    }
    qsort(t[0], (size_t)repeat, sizeof(double), cmp_double);
    qsort(t[1], (size_t)repeat, sizeof(double), cmp_double);
    double on = t[0][repeat / 2], off = t[1][repeat / 2];
    printf("| %s | %d | %d | %d | %s | %.4f | %.4f | %.3f | %s |\n", model_dir, lookback, pred_len,
           paths, kr_isa_name(kr_isa_active()), on, off, on / off,
           same ? "identical" : "DIFFERENT");
    free(t[0]);
    free(t[1]);
    kr_context_free(ctx[0]);
    kr_context_free(ctx[1]);
    kr_model_free(m);
    kr_candles_free(cs);
    return same ? 0 : 1;
}
