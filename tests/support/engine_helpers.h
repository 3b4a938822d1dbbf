/*
 * Helpers for the tests that run forecasts (header-only: only tests linking the engine
 * include it). A model is loaded with a context of its own, as a program would.
 */
#ifndef KR_TEST_ENGINE_HELPERS_H
#define KR_TEST_ENGINE_HELPERS_H

#include <stdio.h>

#include "engine/context.h"
#include "kronos.h"
#include "kronos/market.h"
#include "test_support.h"

typedef struct kr_test_engine {
    kr_model *model;
    kr_context *ctx;
} kr_test_engine;

/* A context on m with n_threads (0: all CPUs) and kv_dtype (NULL: f32); fails the test when
 * it cannot be created. */
static inline kr_context *kr_test_context(const kr_model *m, int n_threads, const char *kv_dtype) {
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = n_threads;
    cp.kv_dtype = kv_dtype;
    kr_context *ctx = NULL;
    kr_error err = { 0 };
    if (kr_context_create(m, &cp, &ctx, &err) != KR_OK) fail_msg("context: %s", err.message);
    return ctx;
}

/* Loads root/predictor + root/tokenizer (params may be NULL) with a context. */
static inline kr_test_engine kr_test_engine_load(const char *root, const kr_model_params *params,
                                                 int n_threads, const char *kv_dtype) {
    char pred[1100], tok[1100];
    snprintf(pred, sizeof pred, "%s/predictor", root);
    snprintf(tok, sizeof tok, "%s/tokenizer", root);
    kr_test_engine e = { NULL, NULL };
    kr_error err = { 0 };
    if (kr_model_load(pred, tok, params, &e.model, &err) != KR_OK)
        fail_msg("load %s: %s", root, err.message);
    e.ctx = kr_test_context(e.model, n_threads, kv_dtype);
    return e;
}

static inline void kr_test_engine_free(kr_test_engine *e) {
    kr_context_free(e->ctx);
    kr_model_free(e->model);
    e->ctx = NULL;
    e->model = NULL;
}

/* One forecast with generation options (naive recomputation, an observer). */
static inline kr_forecast *kr_test_run_opt(kr_context *ctx, const kr_series *s,
                                           const kr_forecast_params *p, const kr_gen_options *opt) {
    kr_forecast *f = NULL;
    kr_error err = { 0 };
    if (kr_forecast_run_batch_opt(ctx, s, 1, p, NULL, opt, &f, &err) != KR_OK)
        fail_msg("forecast: %s", err.message);
    return f;
}

/* The bundled demo model and the regression fixture's candles, for the tests whose setup is
 * just that. Returns 0, or -1 when either cannot be loaded (a cmocka setup's failure). */
static inline int kr_test_load_demo(kr_model **model, kr_candles **data) {
    char pred[1024], tok[1024];
    snprintf(pred, sizeof pred, "%s/models/kronos-demo/predictor", KR_SOURCE_DIR);
    snprintf(tok, sizeof tok, "%s/models/kronos-demo/tokenizer", KR_SOURCE_DIR);
    kr_error err = { 0 };
    if (kr_model_load(pred, tok, NULL, model, &err) != KR_OK) return -1;
    if (kr_candles_read_csv(kr_test_fixture("regression_input.csv"), data, &err) != KR_OK)
        return -1;
    return 0;
}

#endif
