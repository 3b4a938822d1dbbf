/*
 * The continuous-batching scheduler: concurrent seeded requests equal the same requests run
 * alone, a repeated window comes from the prefix cache with identical results, cancellation
 * frees KV, a full queue says busy, deadlines fail, draining finishes what was accepted, and
 * the metrics registry renders valid Prometheus text.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/forecast_internal.h"
#include "engine/scheduler.h"
#include "market/candles.h"
#include "test_support.h"

static kr_model *g_model;
static kr_candles *g_data;

typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, steps, started;
    kr_status status;
    kr_forecast *result;
    int64_t cached_tokens;
} waiter;

static void waiter_init(waiter *w) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
}

static void on_event(void *user, const kr_sched_event *ev) {
    waiter *w = user;
    pthread_mutex_lock(&w->lock);
    if (ev->kind == KR_SCHED_STARTED) w->started = 1;
    if (ev->kind == KR_SCHED_STEP) w->steps++;
    if (ev->kind == KR_SCHED_DONE || ev->kind == KR_SCHED_FAILED) {
        w->done = 1;
        w->status = ev->kind == KR_SCHED_DONE ? KR_OK : ev->error.status;
        w->result = ev->result;
        w->cached_tokens = ev->cached_tokens;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
}

static void wait_done(waiter *w) {
    pthread_mutex_lock(&w->lock);
    while (!w->done) pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

static int setup(void **state) {
    (void)state;
    char pred[1024], tok[1024];
    snprintf(pred, sizeof pred, "%s/models/kronos-demo/predictor", KR_SOURCE_DIR);
    snprintf(tok, sizeof tok, "%s/models/kronos-demo/tokenizer", KR_SOURCE_DIR);
    kr_error err = { 0 };
    if (kr_model_load(pred, tok, NULL, &g_model, &err) != KR_OK) return -1;
    if (kr_candles_read_csv(kr_test_fixture("regression_input.csv"), &g_data, &err) != KR_OK)
        return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_model_free(g_model);
    kr_candles_free(g_data);
    return 0;
}

static kr_forecast_params params_for(int k) {
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 6 + k % 5;
    p.paths = 1 + k % 4;
    p.seed = 100 + (uint64_t)k;
    p.max_context = 128;
    return p;
}

static kr_series series_for(int k) { return kr_candles_slice(g_data, 37 * k, 60 + 13 * (k % 7)); }

static void expect_same(const kr_forecast *a, const kr_forecast *b) {
    assert_int_equal(a->paths, b->paths);
    assert_int_equal(a->pred_len, b->pred_len);
    assert_memory_equal(a->gen_s1, b->gen_s1, (size_t)a->paths * a->pred_len * sizeof(int32_t));
    assert_memory_equal(a->gen_s2, b->gen_s2, (size_t)a->paths * a->pred_len * sizeof(int32_t));
    assert_memory_equal(a->pred_norm, b->pred_norm,
                        (size_t)a->paths * a->pred_len * 6 * sizeof(float));
}

static void test_concurrent_equals_alone(void **state) {
    (void)state;
    kr_metrics *metrics = NULL;
    kr_sched *s = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_metrics_create(&metrics, &err), KR_OK);
    kr_sched_params sp = kr_sched_default_params();
    sp.max_batch_tokens = 96; /* forces chunked prefill */
    assert_int_equal(kr_sched_create(g_model, metrics, &sp, &s, &err), KR_OK);
    enum { N = 12 };
    waiter w[N];
    for (int k = 0; k < N; k++) {
        waiter_init(&w[k]);
        kr_series ser = series_for(k);
        kr_forecast_params p = params_for(k);
        if (kr_sched_submit(s, &ser, &p, 0, on_event, &w[k], NULL, &err) != KR_OK)
            fail_msg("%s", err.message);
    }
    for (int k = 0; k < N; k++) {
        wait_done(&w[k]);
        assert_int_equal(w[k].status, KR_OK);
        assert_int_equal(w[k].steps, params_for(k).pred_len - 1);
        kr_series ser = series_for(k);
        kr_forecast_params p = params_for(k);
        kr_forecast *alone = NULL;
        assert_int_equal(kr_forecast_run(g_model, &ser, &p, &alone, &err), KR_OK);
        expect_same(alone, w[k].result);
        kr_forecast_free(alone);
        kr_forecast_free(w[k].result);
    }
    /* Every distinct history left its tokenizer-decoder context in the cache too. */
    kr_sched_stats ss;
    kr_sched_get_stats(s, &ss);
    assert_true(ss.prefix_cache_decoder_bytes > 0);
    /* The same window again: taken from the prefix cache (predictor window and decoder
     * context), same paths and the same decoded candles bit for bit. */
    waiter again;
    waiter_init(&again);
    kr_series ser = series_for(3);
    kr_forecast_params p = params_for(3);
    assert_int_equal(kr_sched_submit(s, &ser, &p, 0, on_event, &again, NULL, &err), KR_OK);
    wait_done(&again);
    assert_int_equal(again.status, KR_OK);
    assert_true(again.cached_tokens == ser.n);
    kr_forecast *alone = NULL;
    assert_int_equal(kr_forecast_run(g_model, &ser, &p, &alone, &err), KR_OK);
    expect_same(alone, again.result);
    kr_forecast_stats fs;
    kr_forecast_get_stats(again.result, &fs);
    assert_int_equal(fs.prefill_tokens, 0);
    kr_forecast_free(alone);
    kr_forecast_free(again.result);

    char *text = NULL;
    assert_int_equal(kr_metrics_render(metrics, &text, NULL, &err), KR_OK);
    assert_non_null(strstr(text, "# TYPE kronos_time_to_first_step_seconds histogram"));
    assert_non_null(strstr(text, "kronos_requests_total{outcome=\"ok\"} 13"));
    assert_non_null(strstr(text, "kronos_prefix_cache_hit_tokens_total"));
    /* The prefix cache still holds a window: its blocks are in use. */
    const char *blocks = strstr(text, "\nkronos_kv_blocks_used ");
    assert_non_null(blocks);
    assert_true(atof(blocks + strlen("\nkronos_kv_blocks_used ")) > 0);
    assert_non_null(strstr(text, "kronos_kv_blocks_free"));
    free(text);
    kr_sched_free(s);
    kr_metrics_free(metrics);
}

static void test_cancel_busy_deadline_drain(void **state) {
    (void)state;
    kr_metrics *metrics = NULL;
    kr_sched *s = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_metrics_create(&metrics, &err), KR_OK);
    kr_sched_params sp = kr_sched_default_params();
    sp.max_queue = 2;
    sp.max_running = 1;
    sp.prefix_cache = 0;
    sp.batch_wait_ms = 0;
    assert_int_equal(kr_sched_create(g_model, metrics, &sp, &s, &err), KR_OK);
    kr_series ser = kr_candles_slice(g_data, 0, 100);
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 100;
    p.paths = 8;
    kr_forecast_params long_p = p; /* runs long enough to be cancelled mid-way */
    long_p.pred_len = 400;
    long_p.max_context = 512;
    waiter a, b, c;
    waiter_init(&a);
    waiter_init(&b);
    waiter_init(&c);
    uint64_t id_a = 0;
    assert_int_equal(kr_sched_submit(s, &ser, &long_p, 0, on_event, &a, &id_a, &err), KR_OK);
    /* Wait until a runs, then fill the queue. */
    for (int i = 0; i < 2000 && !a.started; i++) usleep(1000);
    assert_true(a.started);
    assert_int_equal(kr_sched_submit(s, &ser, &p, 0.01, on_event, &b, NULL, &err), KR_OK);
    assert_int_equal(kr_sched_submit(s, &ser, &p, 0, on_event, &c, NULL, &err), KR_OK);
    waiter d;
    waiter_init(&d);
    assert_int_equal(kr_sched_submit(s, &ser, &p, 0, on_event, &d, NULL, &err), KR_ERR_BUSY);
    /* b's deadline passes while it waits behind a; then cancel a: it fails as cancelled and
     * its KV is freed. */
    usleep(30000);
    kr_sched_cancel(s, id_a);
    wait_done(&a);
    assert_int_equal(a.status, KR_ERR_CANCELLED);
    wait_done(&b);
    assert_int_equal(b.status, KR_ERR_TIMEOUT);
    /* Draining finishes the accepted request and refuses new ones. */
    kr_sched_drain(s);
    assert_true(c.done);
    assert_int_equal(c.status, KR_OK);
    kr_forecast_free(c.result);
    kr_sched_stats st;
    kr_sched_get_stats(s, &st);
    assert_int_equal(st.kv_bytes_used, 0);
    assert_int_equal(st.running, 0);
    assert_int_equal(kr_sched_submit(s, &ser, &p, 0, on_event, &d, NULL, &err), KR_ERR_BUSY);
    kr_sched_free(s);
    kr_metrics_free(metrics);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_equals_alone),
        cmocka_unit_test(test_cancel_busy_deadline_drain),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
