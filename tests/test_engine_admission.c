/*
 * Admission under a KV budget (engine/admission.c): a request waiting for memory does not
 * hold back a smaller one behind it that ends before it could start (backfilling), while one
 * that would delay it waits; the backfilled request's numbers equal those it has alone; and
 * the queue's longest wait is that of its oldest request, not of its most urgent one.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "engine/context_internal.h"
#include "engine/forecast_internal.h"
#include "engine_helpers.h"
#include "series/candles.h"
#include "test_support.h"

static kr_model *g_model;
static kr_candles *g_data;
static atomic_int g_seq;

typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, start_seq, done_seq;
    kr_status status;
    kr_forecast *result;
} waiter;

static void on_event(void *user, const kr_event *ev) {
    waiter *w = user;
    pthread_mutex_lock(&w->lock);
    if (ev->kind == KR_EVENT_STARTED) w->start_seq = atomic_fetch_add(&g_seq, 1);
    if (ev->kind == KR_EVENT_DONE || ev->kind == KR_EVENT_FAILED) {
        w->done = 1;
        w->done_seq = atomic_fetch_add(&g_seq, 1);
        w->status = ev->kind == KR_EVENT_DONE ? KR_OK : ev->error.status;
        w->result = ev->result;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
}

static void waiter_init(waiter *w) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
}

static void wait_done(waiter *w) {
    pthread_mutex_lock(&w->lock);
    while (!w->done) pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

static int setup(void **state) {
    (void)state;
    return kr_test_load_demo(&g_model, &g_data);
}

static int teardown(void **state) {
    (void)state;
    kr_model_free(g_model);
    kr_candles_free(g_data);
    return 0;
}

typedef struct job {
    int start, rows, paths, pred_len;
    kr_series series;
    kr_forecast_params p;
    size_t peak;
} job;

static job job_make(const kr_context *ctx, int start, int rows, int paths, int pred_len) {
    job j = { start,
              rows,
              paths,
              pred_len,
              kr_candles_slice(g_data, start, rows),
              kr_forecast_default_params(),
              0 };
    j.p.paths = paths;
    j.p.pred_len = pred_len;
    j.p.seed = 7 + (uint64_t)start;
    j.peak = kr_seq_kv_peak_bytes(&ctx->eng, rows, &j.p, 0);
    return j;
}

static void submit(kr_context *ctx, const job *j, waiter *w) {
    waiter_init(w);
    kr_request_params rp = kr_request_default_params();
    rp.on_event = on_event;
    rp.user = w;
    kr_error err = { 0 };
    if (kr_submit(ctx, &j->series, &j->p, &rp, NULL, &err) != KR_OK)
        fail_msg("submit: %s", err.message);
}

static kr_context *context_with(size_t kv_budget, int backfill, int max_batch_tokens) {
    kr_context_params cp = kr_context_default_params();
    cp.backfill = backfill;
    cp.max_batch_tokens = max_batch_tokens;
    cp.n_threads = 2;
    cp.kv_budget_bytes = kv_budget;
    cp.prefix_cache = 0; /* the budget is the running set's alone */
    cp.tune = 0; /* the limits stay as set */
    cp.batch_wait_ms = 0;
    cp.max_running = 8;
    kr_context *ctx = NULL;
    kr_error err = { 0 };
    if (kr_context_create(g_model, &cp, &ctx, &err) != KR_OK) fail_msg("%s", err.message);
    return ctx;
}

static kr_context *context_for(size_t kv_budget) { return context_with(kv_budget, 1, 4096); }

/* Queued together in this order under a budget of exactly A + S2:
 *   A  runs first (nothing else runs);
 *   H  does not fit beside A: the head, reserved for when A ends;
 *   S1 fits beside A and ends long before A: started past H (backfilled);
 *   S2 fits beside A but runs long past A's end, and beside H it does not fit: it would delay
 *      H, so it waits — for H to end, as it does not fit beside it.
 * Before backfilling, S1 waited for A to end too. */
static void test_short_request_passes_one_waiting_for_memory(void **state) {
    (void)state;
    kr_context *probe = context_for((size_t)1 << 30);
    job a = job_make(probe, 0, 100, 8, 40), h = job_make(probe, 200, 200, 32, 20),
        s1 = job_make(probe, 500, 60, 1, 4), s2 = job_make(probe, 700, 60, 4, 120);
    kr_context_free(probe);
    size_t budget = a.peak + s2.peak;
    if (!(h.peak > a.peak && h.peak > s2.peak && h.peak <= budget && s1.peak <= s2.peak))
        fail_msg("the jobs' KV peaks no longer make the case: A %zu, H %zu, S1 %zu, S2 %zu", a.peak,
                 h.peak, s1.peak, s2.peak);

    kr_context *ctx = context_for(budget);
    kr_test_gate g;
    kr_test_gate_close(&g, ctx);
    atomic_store(&g_seq, 0);
    waiter wa, wh, w1, w2;
    submit(ctx, &a, &wa);
    submit(ctx, &h, &wh);
    submit(ctx, &s1, &w1);
    submit(ctx, &s2, &w2);
    kr_test_gate_open(&g);
    waiter *all[4] = { &wa, &wh, &w1, &w2 };
    for (int k = 0; k < 4; k++) {
        wait_done(all[k]);
        assert_int_equal(all[k]->status, KR_OK);
    }
    assert_true(w1.start_seq < wa.done_seq); /* S1 ran beside A */
    assert_true(w1.done_seq < wh.start_seq); /* and was done before H could start */
    assert_true(wa.done_seq < wh.start_seq); /* H started when A's memory came back */
    assert_true(wh.done_seq < w2.start_seq); /* S2 was not let in ahead of H */
    kr_context_stats st;
    kr_context_get_stats(ctx, &st);
    assert_int_equal(st.backfilled, 1);
    assert_true(st.queue_oldest_wait_seconds == 0);

    /* Started early, the same numbers as alone. */
    kr_context *solo = context_for(budget);
    kr_forecast *one = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_forecast_run(solo, &s1.series, &s1.p, &one, &err), KR_OK);
    assert_memory_equal(one->gen_s1, w1.result->gen_s1, (size_t)s1.paths * s1.pred_len * 4);
    assert_memory_equal(one->pred_norm, w1.result->pred_norm,
                        (size_t)s1.paths * s1.pred_len * 6 * sizeof(float));
    kr_forecast_free(one);
    kr_context_free(solo);
    for (int k = 0; k < 4; k++) kr_forecast_free(all[k]->result);
    kr_context_free(ctx);
}

/* The same queue with backfilling off: strict order, S1 waits behind H like everything else. */
static void test_backfill_off_keeps_strict_order(void **state) {
    (void)state;
    kr_context *probe = context_for((size_t)1 << 30);
    job a = job_make(probe, 0, 100, 8, 40), h = job_make(probe, 200, 200, 32, 20),
        s1 = job_make(probe, 500, 60, 1, 4);
    kr_context_free(probe);
    /* S1 fits beside A, H does not, and H fits alone. */
    size_t budget = h.peak > a.peak + s1.peak ? h.peak : a.peak + s1.peak;
    if (!(h.peak > s1.peak))
        fail_msg("the jobs' KV peaks no longer make the case: A %zu, H %zu, S1 %zu", a.peak, h.peak,
                 s1.peak);

    kr_context *ctx = context_with(budget, 0, 4096);
    kr_test_gate g;
    kr_test_gate_close(&g, ctx);
    atomic_store(&g_seq, 0);
    waiter wa, wh, w1;
    submit(ctx, &a, &wa);
    submit(ctx, &h, &wh);
    submit(ctx, &s1, &w1);
    kr_test_gate_open(&g);
    waiter *all[3] = { &wa, &wh, &w1 };
    for (int k = 0; k < 3; k++) {
        wait_done(all[k]);
        assert_int_equal(all[k]->status, KR_OK);
    }
    assert_true(wa.done_seq < wh.start_seq); /* H waited for A's memory */
    assert_true(wh.start_seq < w1.start_seq); /* and S1 for H, though it fitted beside A */
    kr_context_stats st;
    kr_context_get_stats(ctx, &st);
    assert_int_equal(st.backfilled, 0);
    for (int k = 0; k < 3; k++) kr_forecast_free(all[k]->result);
    kr_context_free(ctx);
}

/* Whether `id` is in the running set; the engine is held by a gate. */
static int is_running(kr_context *ctx, uint64_t id) {
    pthread_mutex_lock(&ctx->lock);
    int found = 0;
    for (int i = 0; i < ctx->n_running; i++) found |= ctx->running[i]->id == id;
    pthread_mutex_unlock(&ctx->lock);
    return found;
}

/* Estimates can be wrong: here A's re-run windows (lookback 500, 120 steps, past the demo
 * model's 512-row context from step 13 on) each take several engine steps at 64 rows a step,
 * while the estimate counts one. Once H has waited twice its first estimate plus the margin,
 * a short request that the estimate alone would let in (it fits beside A and ends long before
 * A's estimated end) must wait for H: the bound that keeps a wrong estimate from delaying H
 * for ever. */
static void test_backfill_stops_once_the_head_waited_past_its_bound(void **state) {
    (void)state;
    enum { ROWS_PER_STEP = 64 };
    kr_context *probe = context_for((size_t)1 << 30);
    job a = job_make(probe, 0, 500, 1, 120), h = job_make(probe, 600, 200, 32, 4),
        late = job_make(probe, 900, 60, 1, 2);
    kr_context_free(probe);
    size_t budget = a.peak + late.peak;
    if (!(h.peak > late.peak && h.peak <= budget))
        fail_msg("the jobs' KV peaks no longer make the case: A %zu, H %zu, late %zu", a.peak,
                 h.peak, late.peak);

    kr_context *ctx = context_with(budget, 1, ROWS_PER_STEP);
    kr_test_gate g;
    kr_test_gate_close(&g, ctx);
    atomic_store(&g_seq, 0);
    waiter wa, wh, wl;
    submit(ctx, &a, &wa);
    submit(ctx, &h, &wh);
    uint64_t a_id = ctx->next_id - 1, h_id = ctx->next_id; /* ids count up from 1 */
    kr_test_gate_open(&g);
    /* Hold the engine between steps once it is past H's bound, A still running. */
    for (;;) {
        kr_test_gate_close(&g, ctx);
        assert_true(is_running(ctx, a_id));
        if (ctx->hol_id == h_id && ctx->steps > ctx->hol_until_step) break;
        kr_test_gate_open(&g);
        usleep(1000);
    }
    /* A is far from done: the estimate would let `late` in beside it. */
    pthread_mutex_lock(&ctx->lock);
    assert_true(kr_seq_steps(ctx->running[0]->group) + 3 < a.pred_len);
    pthread_mutex_unlock(&ctx->lock);
    submit(ctx, &late, &wl);
    kr_test_gate_open(&g);
    waiter *all[3] = { &wa, &wh, &wl };
    for (int k = 0; k < 3; k++) {
        wait_done(all[k]);
        assert_int_equal(all[k]->status, KR_OK);
    }
    assert_true(wa.done_seq < wh.start_seq);
    assert_true(wh.start_seq < wl.start_seq); /* not backfilled past the bound */
    for (int k = 0; k < 3; k++) kr_forecast_free(all[k]->result);
    kr_context_free(ctx);
}

/* A low-priority request queued before a high-priority one sits behind it, yet its wait is
 * the queue's longest: what the tuner and the kronos_queue_oldest_wait_seconds gauge see. */
static void test_oldest_wait_is_the_oldest_request(void **state) {
    (void)state;
    kr_context *ctx = context_for((size_t)1 << 30);
    kr_test_gate g;
    kr_test_gate_close(&g, ctx);
    job low = job_make(ctx, 0, 80, 1, 4), high = job_make(ctx, 100, 80, 1, 4);
    waiter wl, wh;
    kr_request_params rp = kr_request_default_params();
    rp.on_event = on_event;
    waiter_init(&wl);
    rp.user = &wl;
    rp.priority = KR_PRIORITY_LOW;
    kr_error err = { 0 };
    assert_int_equal(kr_submit(ctx, &low.series, &low.p, &rp, NULL, &err), KR_OK);
    double low_queued = kr_now_seconds();
    usleep(50 * 1000);
    waiter_init(&wh);
    rp.user = &wh;
    rp.priority = KR_PRIORITY_HIGH;
    assert_int_equal(kr_submit(ctx, &high.series, &high.p, &rp, NULL, &err), KR_OK);
    double before = kr_now_seconds();
    kr_context_stats st;
    kr_context_get_stats(ctx, &st);
    assert_int_equal(st.waiting, 2);
    /* At least the low one's wait, which is 50 ms more than the high one (the head) has. */
    assert_true(st.queue_oldest_wait_seconds >= before - low_queued);
    pthread_mutex_lock(&ctx->lock);
    assert_true(ctx->wait_head->rp.priority == KR_PRIORITY_HIGH);
    pthread_mutex_unlock(&ctx->lock);
    kr_test_gate_open(&g);
    wait_done(&wl);
    wait_done(&wh);
    assert_true(wh.start_seq < wl.start_seq);
    kr_forecast_free(wl.result);
    kr_forecast_free(wh.result);
    kr_context_get_stats(ctx, &st);
    assert_true(st.queue_oldest_wait_seconds == 0);
    kr_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_request_passes_one_waiting_for_memory),
        cmocka_unit_test(test_backfill_off_keeps_strict_order),
        cmocka_unit_test(test_backfill_stops_once_the_head_waited_past_its_bound),
        cmocka_unit_test(test_oldest_wait_is_the_oldest_request),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
