/*
 * Helpers for the tests that run forecasts (header-only: only tests linking the engine
 * include it). A model is loaded with a context of its own, as a program would.
 */
#ifndef KR_TEST_ENGINE_HELPERS_H
#define KR_TEST_ENGINE_HELPERS_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "engine/context.h"
#include "kronos.h"
#include "kronos/series.h"
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
                                           const kr_forecast_params *p, const kr_seq_options *opt) {
    kr_forecast *f = NULL;
    kr_error err = { 0 };
    kr_request_params rp = kr_request_default_params();
    rp.seq_options = opt;
    if (kr_forecast_run_batch(ctx, s, 1, p, &rp, &f, &err) != KR_OK)
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

/* A task that holds a context's engine thread until opened: what is submitted meanwhile
 * queues, so one admission round sees all of it. kr_test_gate_close returns once the engine
 * is held; kr_test_gate_open lets it go and joins the thread that queued the task. */
typedef struct kr_test_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, open;
    kr_context *ctx;
    pthread_t thread;
} kr_test_gate;

static inline kr_status kr_test_gate_task(void *user, const kr_engine *eng, kr_error *err) {
    (void)eng;
    (void)err;
    kr_test_gate *g = user;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    return KR_OK;
}

static inline void *kr_test_gate_thread(void *arg) {
    kr_test_gate *g = arg;
    kr_context_run_task(g->ctx, kr_test_gate_task, g, NULL);
    return NULL;
}

static inline void kr_test_gate_close(kr_test_gate *g, kr_context *ctx) {
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->ctx = ctx;
    pthread_create(&g->thread, NULL, kr_test_gate_thread, g);
    pthread_mutex_lock(&g->mu);
    while (!g->entered) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static inline void kr_test_gate_open(kr_test_gate *g) {
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

#endif
