/*
 * bench_load_check — what the NaN / infinity check of every weight costs at load
 * (kr_model_params.allow_nonfinite = 0, the default, against 1), on a checkpoint directory.
 *
 *   bench_load_check --model DIR [--tokenizer DIR] [--reps N]
 *
 * DIR is a predictor/ + tokenizer/ directory (e.g. `kronos gen-random --shape base`). The
 * loads alternate (unchecked, checked) N times (default 7) after one warm-up pair, so both
 * see a warm page cache; each column is the median load time. The scan alone (every float
 * tensor of the predictor file, pages already resident) is timed too, as bytes per second.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "kronos.h"
#include "model/finite.h"
#include "model/safetensors.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double load_once(const char *pred, const char *tok, int allow) {
    kr_model_params p = kr_model_default_params();
    p.allow_nonfinite = allow;
    kr_model *m = NULL;
    kr_error err = { 0 };
    double t0 = now_s();
    if (kr_model_load(pred, tok, &p, &m, &err) != KR_OK) {
        fprintf(stderr, "bench_load_check: %s\n", err.message);
        exit(1);
    }
    double t = now_s() - t0;
    kr_model_free(m);
    return t;
}

int main(int argc, char **argv) {
    const char *model = NULL, *tokenizer = NULL;
    int reps = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc)
            tokenizer = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_load_check --model DIR [--tokenizer DIR] [--reps N]\n");
            return 2;
        }
    }
    if (!model || reps < 1 || reps > 101) {
        fprintf(stderr, "usage: bench_load_check --model DIR [--tokenizer DIR] [--reps N]\n");
        return 2;
    }
    char pred[PATH_MAX], tok[PATH_MAX], st_path[PATH_MAX];
    snprintf(pred, sizeof pred, tokenizer ? "%s" : "%s/predictor", model);
    snprintf(tok, sizeof tok, "%s", tokenizer ? tokenizer : model);
    if (!tokenizer) snprintf(tok, sizeof tok, "%s/tokenizer", model);
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", pred);

    load_once(pred, tok, 1); /* warm the page cache */
    load_once(pred, tok, 0);
    double *off = malloc((size_t)reps * sizeof *off), *on = malloc((size_t)reps * sizeof *on);
    for (int r = 0; r < reps; r++) {
        off[r] = load_once(pred, tok, 1);
        on[r] = load_once(pred, tok, 0);
    }
    double t_off = median(off, reps), t_on = median(on, reps);

    /* The scan alone over resident pages. */
    kr_safetensors *st = NULL;
    kr_error err = { 0 };
    if (kr_st_open(st_path, &st, &err) != KR_OK) {
        fprintf(stderr, "bench_load_check: %s\n", err.message);
        return 1;
    }
    size_t bytes = 0;
    volatile int64_t sink = 0;
    for (int i = 0; i < kr_st_count(st); i++) { /* fault every page in first */
        const kr_st_tensor *t = kr_st_at(st, i);
        for (size_t b = 0; b < t->nbytes; b += 4096) sink += ((const char *)t->data)[b];
        bytes += t->nbytes;
    }
    double *scan = malloc((size_t)reps * sizeof *scan);
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (int i = 0; i < kr_st_count(st); i++) {
            const kr_st_tensor *t = kr_st_at(st, i);
            sink += kr_first_nonfinite(t->data, t->dtype, t->numel);
        }
        scan[r] = now_s() - t0;
    }
    double t_scan = median(scan, reps);
    kr_st_close(st);

    printf("model: %s\n", model);
    printf("load, unchecked (allow_nonfinite=1): %.3f s (median of %d)\n", t_off, reps);
    printf("load, checked (default):             %.3f s (median of %d)\n", t_on, reps);
    printf("check's cost at load:                %.3f s (x%.2f)\n", t_on - t_off, t_on / t_off);
    printf("scan alone, resident pages:          %.3f s for %.1f MB of %s = %.1f GB/s\n", t_scan,
           (double)bytes / 1e6, "predictor weights", (double)bytes / t_scan / 1e9);
    printf("(kernels ISA of this CPU: %s; the scan is plain C auto-vectorised for the build's "
           "baseline ISA)\n",
           kr_isa_name(kr_isa_best()));
    free(off);
    free(on);
    free(scan);
    return 0;
}
