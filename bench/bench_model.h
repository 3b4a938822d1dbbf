/*
 * bench/bench_model.h — the model directories a bench tool runs on: --model DIR, else the
 * random checkpoint of --shape (kr_model_random_cached), else the bundled demo model.
 * Included by the tools that take those flags (every .c file of bench/ is its own program).
 */
#ifndef KR_BENCH_MODEL_H
#define KR_BENCH_MODEL_H

#include <limits.h>
#include <stdio.h>

#include "kronos.h"

typedef struct bench_model_dirs {
    char root[PATH_MAX]; /* the directory resolved */
    char predictor[PATH_MAX + 16];
    char tokenizer[PATH_MAX + 16];
} bench_model_dirs;

static inline kr_status bench_model_dirs_resolve(const char *model_dir, const char *shape,
                                                 bench_model_dirs *out, kr_error *err) {
    if (!model_dir && shape) {
        kr_status st = kr_model_random_cached(shape, 1, out->root, sizeof out->root, NULL, err);
        if (st != KR_OK) return st;
        model_dir = out->root;
    }
    if (!model_dir) model_dir = KR_SOURCE_DIR "/models/kronos-demo";
    if (model_dir != out->root) snprintf(out->root, sizeof out->root, "%s", model_dir);
    snprintf(out->predictor, sizeof out->predictor, "%s/predictor", model_dir);
    snprintf(out->tokenizer, sizeof out->tokenizer, "%s/tokenizer", model_dir);
    return KR_OK;
}

#endif
