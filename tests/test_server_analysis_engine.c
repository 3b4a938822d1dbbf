/*
 * Analyses go through the server's engine context like forecasts (issue: one engine for every
 * caller; the review's "analyses are unbounded"): a heavy analysis ends with 504 at the
 * request timeout, a client that gives up cancels its analysis' forecasts in the engine, a
 * full queue answers 429 with Retry-After, /v1/forecast requests keep being answered while a
 * heavy (low-priority) analysis runs, and a drain cancels what outlives its bound. Orderings
 * and counters, never wall-clock thresholds.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "engine_helpers.h"
#include "http_client.h"
#include "series/candles.h"
#include "store/store.h"
#include "server/server.h"
#include "server_fixtures.h"
#include "test_support.h"

static kr_model *g_model;
static kr_candles *g_aapl;
static char g_db[1100];

/* A report this heavy takes the demo model far longer than any timeout used here. */
#define HEAVY "{\"symbol\":\"AAPL\",\"horizon\":200,\"paths\":512,\"lookback\":400,\"calibrate\":3}"

static int setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    kr_error err = { 0 };
    const char *dir = kr_test_fresh_dir();
    snprintf(g_db, sizeof g_db, "%s/store.db", dir);
    kr_store *st = NULL;
    if (!(g_model = kr_test_demo_model(NULL))) return -1;
    if (kr_candles_read_csv(KR_SOURCE_DIR "/data/AAPL_1d.csv", &g_aapl, &err) != KR_OK ||
        kr_store_open(g_db, &st, &err) != KR_OK ||
        kr_store_upsert(st, "AAPL", "1d", g_aapl, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    kr_store_close(st);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_candles_free(g_aapl);
    kr_model_free(g_model);
    curl_global_cleanup();
    return 0;
}

static kr_server *start(double timeout_s, int max_running, int max_queue) {
    kr_server_config c = kr_test_server_config();
    c.request_timeout_s = timeout_s;
    c.sched.max_running = max_running;
    c.sched.max_queue = max_queue;
    c.sched.tune = 0;
    snprintf(c.db, sizeof c.db, "%s", g_db);
    return kr_test_server_start(g_model, &c);
}

typedef struct call {
    int port;
    const char *path;
    const char *body;
    long timeout_ms;
    kr_http_resp r;
    CURLcode cc;
} call;

static void *run_call(void *arg) {
    call *c = arg;
    c->r.timeout_ms = c->timeout_ms;
    c->cc =
        kr_test_http_perform(c->port, "POST", c->path, c->body, "application/json", NULL, 0, &c->r);
    return NULL;
}

static int engine_idle(kr_server *s) {
    kr_context_stats st;
    kr_context_get_stats(kr_server_context(s), &st);
    return st.running == 0 && st.waiting == 0;
}

static void wait_idle(kr_server *s) {
    for (int i = 0; i < 3000 && !engine_idle(s); i++) usleep(10000);
    assert_true(engine_idle(s));
}

/* The heavy analysis' forecasts run in the engine until the request timeout, then 504. */
static void test_heavy_analysis_504(void **state) {
    (void)state;
    kr_server *s = start(1.0, 64, 256);
    int port = kr_server_port(s);
    double timeouts0 = kr_http_metric(port, "kronos_requests_total{outcome=\"timeout\"}");
    call c = { port, "/v1/analyze", HEAVY, 0, { 0 }, CURLE_OK };
    run_call(&c);
    assert_int_equal(c.cc, CURLE_OK);
    assert_int_equal(c.r.status, 504);
    assert_non_null(strstr(c.r.body, "\"code\":504"));
    /* The engine counted its forecasts as timed out: they were in the engine, not beside it. */
    assert_true(kr_http_metric(port, "kronos_requests_total{outcome=\"timeout\"}") >=
                timeouts0 + 1);
    free(c.r.body);
    wait_idle(s);
    kr_server_free(s);
}

/* A client that gives up cancels its analysis in the engine (at its next step). */
static void test_client_gone_cancels(void **state) {
    (void)state;
    kr_server *s = start(300, 64, 256);
    int port = kr_server_port(s);
    double cancelled0 = kr_http_metric(port, "kronos_requests_total{outcome=\"cancelled\"}");
    call c = { port, "/v1/analyze", HEAVY, 500, { 0 }, CURLE_OK };
    run_call(&c);
    assert_int_equal(c.cc, CURLE_OPERATION_TIMEDOUT);
    free(c.r.body);
    /* Long before the heavy report could have finished, its forecasts are gone. */
    wait_idle(s);
    double cancelled = 0;
    for (int i = 0; i < 500 && cancelled < cancelled0 + 1; i++) {
        cancelled = kr_http_metric(port, "kronos_requests_total{outcome=\"cancelled\"}");
        usleep(10000);
    }
    assert_true(cancelled >= cancelled0 + 1);
    kr_server_free(s);
}

/* With one running slot and one queue place, concurrent analyses beyond them get 429 with
 * Retry-After; the rest are answered. */
static void test_full_queue_429(void **state) {
    (void)state;
    kr_server *s = start(300, 1, 1);
    int port = kr_server_port(s);
    enum { N = 6 };
    call c[N];
    pthread_t th[N];
    const char *body = "{\"symbol\":\"AAPL\",\"horizon\":20,\"paths\":64}";
    for (int k = 0; k < N; k++) {
        c[k] = (call){ port, "/v1/analyze", body, 0, { 0 }, CURLE_OK };
        pthread_create(&th[k], NULL, run_call, &c[k]);
    }
    int ok = 0, busy = 0;
    for (int k = 0; k < N; k++) {
        pthread_join(th[k], NULL);
        if (c[k].r.status == 200) ok++;
        if (c[k].r.status == 429) {
            busy++;
            assert_string_equal(c[k].r.retry_after, "1");
        }
        free(c[k].r.body);
    }
    print_message("max_running 1, max_queue 1: %d analyses answered, %d refused with 429\n", ok,
                  busy);
    assert_true(ok >= 1);
    assert_true(busy >= 1);
    assert_int_equal(ok + busy, N);
    kr_server_free(s);
}

/* Forecasts are answered while a heavy analysis runs at the lower analysis priority: every
 * one of them finishes before it. */
static void test_forecasts_beside_heavy_analysis(void **state) {
    (void)state;
    kr_server *s = start(300, 64, 256);
    int port = kr_server_port(s);
    call heavy = { port, "/v1/analyze", HEAVY, 0, { 0 }, CURLE_OK };
    pthread_t th;
    pthread_create(&th, NULL, run_call, &heavy);
    double w0 = kr_now_seconds();
    for (int i = 0; i < 500; i++) { /* until its forecasts are in the engine */
        kr_context_stats st;
        kr_context_get_stats(kr_server_context(s), &st);
        if (st.running > 0) break;
        usleep(10000);
    }
    print_message("analysis in the engine after %.3f s\n", kr_now_seconds() - w0);
    for (int k = 0; k < 5; k++) {
        char *body =
            kr_http_forecast_body(g_aapl, 100 + 50 * k, 200, "\"pred_len\":12,\"paths\":4");
        kr_http_resp r = { 0 };
        double f0 = kr_now_seconds();
        kr_test_http_perform(port, "POST", "/v1/forecast", body, "application/json", NULL, 0, &r);
        print_message("forecast %d beside the analysis: %.3f s\n", k, kr_now_seconds() - f0);
        assert_int_equal(r.status, 200);
        free(r.body);
        free(body);
        kr_context_stats st;
        kr_context_get_stats(kr_server_context(s), &st);
        assert_true(st.running >= 1); /* the analysis is still running */
    }
    /* A drain with a short bound cancels the analysis rather than waiting for it. */
    double t0 = kr_now_seconds();
    kr_server_drain(s, 0.5);
    pthread_join(th, NULL);
    print_message("drain with the heavy analysis running: %.2f s, analysis answered %ld\n",
                  kr_now_seconds() - t0, heavy.r.status);
    assert_true(heavy.r.status == 504 || heavy.r.status == 503 || heavy.r.status == 499);
    free(heavy.r.body);
    kr_server_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heavy_analysis_504),
        cmocka_unit_test(test_client_gone_cancels),
        cmocka_unit_test(test_full_queue_429),
        cmocka_unit_test(test_forecasts_beside_heavy_analysis),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
