/*
 * POST /v1/backtest and its job routes, end to end on a real server (127.0.0.1, ephemeral
 * port) over the tiny random model and a fresh candle store:
 *  - a job runs to "done" and its JSON result equals kr_backtest_run on the same candles with
 *    the same parameters (the library's figures, through the server's engine); Markdown,
 *    HTML and CSV results; the status and its URLs;
 *  - the event stream: progress events, then the final "result" event;
 *  - the result of a running job is a 409, DELETE cancels it (state "cancelled"), DELETE of a
 *    finished one forgets it (404 after);
 *  - refusals naming the field (unknown field, paths 1, an unknown symbol, too much work),
 *    unknown and malformed ids, methods the routes do not take, more running jobs than the
 *    server runs (429), and a server freed (drained) while a job runs stops it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "engine_helpers.h"
#include "http_client.h"
#include "server_fixtures.h"
#include "test_support.h"

#include "base/timeutil.h"
#include "kronos.h"
#include "kronos/backtest.h"
#include "series/candles.h"
#include "store/store.h"
#include "server/routes_backtest.h"
#include "server/server.h"
#include "server/server_internal.h"

static kr_model *g_model;
static kr_context *g_ctx;
static kr_candles *g_aapl;
static const char *g_tmp;
static char g_db[1024];
static kr_server *g_srv;

static kr_http_resp *http(int port, const char *method, const char *path, const char *body) {
    kr_http_resp *r = calloc(1, sizeof *r);
    CURLcode cc = kr_test_http_perform(port, method, path, body, NULL, NULL, 0, r);
    if (cc != CURLE_OK) fail_msg("%s %s: curl: %s", method, path, curl_easy_strerror(cc));
    return r;
}

static kr_server_config config_on(const char *db) {
    kr_server_config c = kr_test_server_config();
    snprintf(c.model, sizeof c.model, "%s", kr_test_fixture("tiny/predictor"));
    snprintf(c.tokenizer, sizeof c.tokenizer, "%s", kr_test_fixture("tiny/tokenizer"));
    snprintf(c.db, sizeof c.db, "%s", db);
    c.threads = 2;
    return c;
}

static int setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char pred[1100], tok[1100];
    snprintf(pred, sizeof pred, "%s", kr_test_fixture("tiny/predictor"));
    snprintf(tok, sizeof tok, "%s", kr_test_fixture("tiny/tokenizer"));
    kr_error err = { 0 };
    if (kr_model_load(pred, tok, NULL, &g_model, &err) != KR_OK) return -1;
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = 2;
    if (kr_context_create(g_model, &cp, &g_ctx, &err) != KR_OK) return -1;
    if (kr_candles_read_csv(kr_test_fixture("csv/aapl_1d_2019.csv"), &g_aapl, &err) != KR_OK)
        return -1;
    g_tmp = kr_test_fresh_dir();
    snprintf(g_db, sizeof g_db, "%s/store.db", g_tmp);
    kr_store *st = NULL;
    if (kr_store_open(g_db, &st, &err) != KR_OK ||
        kr_store_upsert(st, "AAPL", "1d", g_aapl, &err) != KR_OK)
        return -1;
    kr_store_close(st);
    kr_server_config c = config_on(g_db);
    g_srv = kr_test_server_start(g_model, &c);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_server_free(g_srv);
    kr_context_free(g_ctx);
    kr_model_free(g_model);
    kr_candles_free(g_aapl);
    curl_global_cleanup();
    return 0;
}

/* Starts a job; returns its id (static buffer). */
static const char *start(int port, const char *body) {
    static char id[64];
    kr_http_resp *r = http(port, "POST", "/v1/backtest", body);
    if (r->status != 202) fail_msg("POST /v1/backtest: %ld %s", r->status, r->body);
    cJSON *j = kr_http_json(r);
    snprintf(id, sizeof id, "%s", cJSON_GetObjectItem(j, "id")->valuestring);
    assert_int_equal((int)strlen(id), 32);
    assert_string_equal(cJSON_GetObjectItem(j, "state")->valuestring, "running");
    char want[128];
    snprintf(want, sizeof want, "/v1/backtest/%s/result", id);
    assert_string_equal(cJSON_GetObjectItem(j, "result_url")->valuestring, want);
    cJSON_Delete(j);
    kr_http_resp_free(r);
    return id;
}

/* Polls the status until the state is not "running" (at most 300 s); returns the state. */
static const char *wait_state(int port, const char *id) {
    static char state[32];
    char path[128];
    snprintf(path, sizeof path, "/v1/backtest/%s", id);
    const double t0 = kr_now_seconds();
    for (;;) {
        kr_http_resp *r = http(port, "GET", path, NULL);
        assert_int_equal(r->status, 200);
        cJSON *j = kr_http_json(r);
        snprintf(state, sizeof state, "%s", cJSON_GetObjectItem(j, "state")->valuestring);
        cJSON_Delete(j);
        kr_http_resp_free(r);
        if (strcmp(state, "running")) return state;
        if (kr_now_seconds() - t0 > 300) fail_msg("job %s still running after 300 s", id);
        usleep(50 * 1000);
    }
}

#define SMALL_BODY "{\"symbols\":[\"aapl\"],\"horizon\":5,\"paths\":4,\"bootstrap\":40,\"seed\":3}"

static void test_done_equals_library(void **state) {
    (void)state;
    const int port = kr_server_port(g_srv);
    char id[64], path[160];
    snprintf(id, sizeof id, "%s", start(port, SMALL_BODY));
    assert_string_equal(wait_state(port, id), "done");
    snprintf(path, sizeof path, "/v1/backtest/%s/result", id);
    kr_http_resp *r = http(port, "GET", path, NULL);
    assert_int_equal(r->status, 200);
    assert_non_null(strstr(r->content_type, "application/json"));
    cJSON *got = kr_http_json(r);
    kr_http_resp_free(r);

    /* The same run through the library on the same rows. */
    kr_backtest_params p = kr_backtest_default_params();
    p.horizon = 5;
    p.paths = 4;
    p.bootstrap = 40;
    p.seed = 3;
    kr_backtest_series s = { "AAPL", "1d", g_aapl, NULL };
    kr_backtest_report *rep = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_backtest_run(g_ctx, &s, 1, &p, &rep, &err), KR_OK);
    char *text = NULL;
    assert_int_equal(kr_backtest_render(rep, KR_BACKTEST_JSON, &text, &err), KR_OK);
    cJSON *want = cJSON_Parse(text);
    free(text);
    kr_backtest_report_free(rep);
    const char *keys[] = { "pooled", "by_step", "pit", "relative", "significance" };
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (!cJSON_Compare(cJSON_GetObjectItem(got, keys[k]), cJSON_GetObjectItem(want, keys[k]),
                           1))
            fail_msg("%s differs between the server and the library", keys[k]);
    assert_int_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(got, "counts"), "forecasts")->valueint,
        cJSON_GetObjectItem(cJSON_GetObjectItem(want, "counts"), "forecasts")->valueint);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(got, "symbols")->child, "symbol")->valuestring,
        "AAPL"); /* the stored spelling */
    cJSON_Delete(got);
    cJSON_Delete(want);

    static const struct {
        const char *q, *ct, *needle;
    } formats[] = { { "md", "text/markdown", "## Verdict" },
                    { "html", "text/html", "<svg" },
                    { "csv", "text/csv", "symbol,interval,origin" } };
    for (size_t k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "/v1/backtest/%s/result?format=%s", id, formats[k].q);
        r = http(port, "GET", path, NULL);
        assert_int_equal(r->status, 200);
        assert_non_null(strstr(r->content_type, formats[k].ct));
        assert_non_null(strstr(r->body, formats[k].needle));
        kr_http_resp_free(r);
    }
    snprintf(path, sizeof path, "/v1/backtest/%s/result?format=pdf", id);
    r = http(port, "GET", path, NULL);
    kr_assert_http_error(r, 400, "format");
    kr_http_resp_free(r);

    /* The event stream of a finished job: its final event at once. */
    snprintf(path, sizeof path, "/v1/backtest/%s/events", id);
    r = http(port, "GET", path, NULL);
    assert_int_equal(r->status, 200);
    assert_non_null(strstr(r->body, "event: result"));
    kr_http_resp_free(r);

    /* DELETE forgets it. */
    snprintf(path, sizeof path, "/v1/backtest/%s", id);
    r = http(port, "DELETE", path, NULL);
    assert_int_equal(r->status, 200);
    assert_non_null(strstr(r->body, "\"deleted\":true"));
    kr_http_resp_free(r);
    r = http(port, "GET", path, NULL);
    assert_int_equal(r->status, 404);
    kr_http_resp_free(r);
}

#define BIG_BODY                                                                           \
    "{\"symbols\":[\"AAPL\"],\"horizon\":20,\"every\":1,\"paths\":128,\"min_history\":32," \
    "\"bootstrap\":0}"

/* With the server's engine held (a gate task on its engine thread), a job stays running. */
static void test_running_and_cancel(void **state) {
    (void)state;
    const int port = kr_server_port(g_srv);
    char id[64], path[160];
    kr_test_gate gate;
    kr_test_gate_close(&gate, g_srv->ctx);
    snprintf(id, sizeof id, "%s", start(port, SMALL_BODY));
    snprintf(path, sizeof path, "/v1/backtest/%s/result", id);
    kr_http_resp *r = http(port, "GET", path, NULL);
    assert_int_equal(r->status, 409);
    assert_non_null(strstr(r->body, "still running"));
    kr_http_resp_free(r);
    /* The event stream starts with the current progress. */
    snprintf(path, sizeof path, "/v1/backtest/%s/events", id);
    r = calloc(1, sizeof *r);
    r->abort_after_progress = 1;
    kr_test_http_perform(port, "GET", path, NULL, NULL, NULL, 0, r);
    assert_int_equal(r->progress_seen, 1);
    assert_non_null(strstr(r->body, "\"state\":\"running\""));
    kr_http_resp_free(r);
    snprintf(path, sizeof path, "/v1/backtest/%s", id);
    r = http(port, "DELETE", path, NULL);
    assert_int_equal(r->status, 202);
    assert_non_null(strstr(r->body, "\"state\":\"cancelling\""));
    kr_http_resp_free(r);
    kr_test_gate_open(&gate);
    assert_string_equal(wait_state(port, id), "cancelled");
    snprintf(path, sizeof path, "/v1/backtest/%s/result", id);
    r = http(port, "GET", path, NULL);
    assert_int_equal(r->status, 409);
    assert_non_null(strstr(r->body, "cancelled"));
    kr_http_resp_free(r);
    snprintf(path, sizeof path, "/v1/backtest/%s", id);
    kr_http_resp_free(http(port, "DELETE", path, NULL));
}

typedef struct stream_arg {
    int port;
    char path[160];
    kr_http_resp r;
} stream_arg;

static void *stream_thread(void *arg) {
    stream_arg *a = arg;
    kr_test_http_perform(a->port, "GET", a->path, NULL, NULL, NULL, 0, &a->r);
    return NULL;
}

/* A stream followed to the end: progress while the run is held, then the final event. */
static void test_events_to_the_end(void **state) {
    (void)state;
    const int port = kr_server_port(g_srv);
    kr_test_gate gate;
    kr_test_gate_close(&gate, g_srv->ctx);
    char id[64];
    snprintf(id, sizeof id, "%s", start(port, SMALL_BODY));
    stream_arg a = { .port = port };
    snprintf(a.path, sizeof a.path, "/v1/backtest/%s/events", id);
    a.r.abort_after_progress = 1 << 20; /* never: only counts */
    pthread_t t;
    pthread_create(&t, NULL, stream_thread, &a);
    while (__atomic_load_n(&a.r.progress_seen, __ATOMIC_SEQ_CST) < 1) usleep(10 * 1000);
    kr_test_gate_open(&gate);
    pthread_join(t, NULL);
    assert_int_equal(a.r.status, 200);
    assert_non_null(strstr(a.r.content_type, "text/event-stream"));
    const char *result = strstr(a.r.body, "event: result");
    assert_non_null(result);
    assert_true(strstr(a.r.body, "event: progress") < result);
    assert_non_null(strstr(result, "\"state\":\"done\""));
    free(a.r.body);
    char path[160];
    snprintf(path, sizeof path, "/v1/backtest/%s", id);
    kr_http_resp_free(http(port, "DELETE", path, NULL));
}

static void test_refusals(void **state) {
    (void)state;
    const int port = kr_server_port(g_srv);
    kr_http_resp *r = http(port, "POST", "/v1/backtest", "{\"symbols\":[\"AAPL\"],\"horizn\":5}");
    kr_assert_http_error(r, 400, "horizn");
    kr_http_resp_free(r);
    r = http(port, "POST", "/v1/backtest", "{\"symbols\":[\"AAPL\"],\"paths\":1}");
    kr_assert_http_error(r, 400, "paths");
    kr_http_resp_free(r);
    r = http(port, "POST", "/v1/backtest", "{\"symbols\":[\"NOPE\"]}");
    kr_assert_http_error(r, 404, "symbols[0]");
    kr_http_resp_free(r);
    r = http(port, "POST", "/v1/backtest", "{}");
    kr_assert_http_error(r, 400, "symbols");
    kr_http_resp_free(r);
    r = http(port, "POST", "/v1/backtest",
             "{\"symbols\":[\"AAPL\"],\"every\":2,\"origins\":[\"2019-06-03\"]}");
    kr_assert_http_error(r, 400, "origins");
    kr_http_resp_free(r);
    /* 1400 rows, an origin at every bar, 256 paths x 256 steps: past the work cap. */
    kr_sbuf b = { 0 };
    kr_sb_printf(&b, "{\"candles\":[");
    for (int i = 0; i < 1400; i++)
        kr_sb_printf(&b, "%s[%lld,10,11,9,10,100,1000]", i ? "," : "", 1546387200LL + i * 86400LL);
    kr_sb_printf(&b, "],\"every\":1,\"paths\":256,\"horizon\":256,\"min_history\":2}");
    r = http(port, "POST", "/v1/backtest", b.s);
    kr_assert_http_error(r, 400, "candles");
    assert_non_null(strstr(r->body, "path-steps"));
    kr_http_resp_free(r);
    /* Few paths, but origins x steps past the scores' memory cap. */
    char *at = strstr(b.s, "],\"every\"");
    snprintf(at, strlen(at) + 1, "],\"every\":1,\"paths\":2,\"horizon\":200,\"min_history\":2}");
    r = http(port, "POST", "/v1/backtest", b.s);
    kr_assert_http_error(r, 400, "candles");
    assert_non_null(strstr(r->body, "MiB"));
    kr_http_resp_free(r);
    free(b.s);
    r = http(port, "POST", "/v1/backtest", "{\"symbols\":[\"AAPL\"],\"strategy\":{\"k\":-1}}");
    kr_assert_http_error(r, 400, "strategy");
    kr_http_resp_free(r);
    r = http(port, "GET", "/v1/backtest/0123456789abcdef0123456789abcdef", NULL);
    assert_int_equal(r->status, 404);
    kr_http_resp_free(r);
    r = http(port, "GET", "/v1/backtest/../../etc/passwd", NULL);
    assert_int_equal(r->status, 404);
    kr_http_resp_free(r);
    r = http(port, "GET", "/v1/backtest/0123456789abcdef0123456789abcdef/other", NULL);
    assert_int_equal(r->status, 404);
    kr_http_resp_free(r);
    r = http(port, "PUT", "/v1/backtest", "{}");
    assert_int_equal(r->status, 405);
    kr_http_resp_free(r);
    r = http(port, "GET", "/v1/backtest", NULL);
    assert_int_equal(r->status, 405);
    kr_http_resp_free(r);
}

static void test_too_many_running(void **state) {
    (void)state;
    const int port = kr_server_port(g_srv);
    char ids[KR_BT_JOBS_RUNNING][64], path[160];
    kr_test_gate gate;
    kr_test_gate_close(&gate, g_srv->ctx);
    for (int i = 0; i < KR_BT_JOBS_RUNNING; i++)
        snprintf(ids[i], sizeof ids[i], "%s", start(port, SMALL_BODY));
    kr_http_resp *r = http(port, "POST", "/v1/backtest", SMALL_BODY);
    assert_int_equal(r->status, 429);
    assert_true(r->retry_after[0] != 0);
    assert_non_null(strstr(r->body, "running"));
    kr_http_resp_free(r);
    for (int i = 0; i < KR_BT_JOBS_RUNNING; i++) {
        snprintf(path, sizeof path, "/v1/backtest/%s", ids[i]);
        kr_http_resp_free(http(port, "DELETE", path, NULL));
    }
    kr_test_gate_open(&gate);
    for (int i = 0; i < KR_BT_JOBS_RUNNING; i++) {
        assert_string_equal(wait_state(port, ids[i]), "cancelled");
        snprintf(path, sizeof path, "/v1/backtest/%s", ids[i]);
        kr_http_resp_free(http(port, "DELETE", path, NULL)); /* forgotten */
    }
}

/* A job's histories outlive the request that sent them: they are charged to
 * max_memory_in_flight, and a job whose histories could never fit is refused (413). */
static void test_histories_charged(void **state) {
    (void)state;
    char csv[1100], db[1100];
    snprintf(csv, sizeof csv, "%s/big.csv", g_tmp);
    snprintf(db, sizeof db, "%s/big.db", g_tmp);
    FILE *f = fopen(csv, "w");
    assert_non_null(f);
    fprintf(f, "timestamps,open,high,low,close,volume,amount\n");
    for (int i = 0; i < 8000; i++)
        fprintf(f, "%lld,10,11,9,10,100,1000\n", 946684800LL + i * 86400LL);
    fclose(f);
    kr_candles *big = NULL;
    kr_store *st = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_candles_read_csv(csv, &big, &err), KR_OK);
    assert_int_equal(kr_store_open(db, &st, &err), KR_OK);
    assert_int_equal(kr_store_upsert(st, "BIG", "1d", big, &err), KR_OK);
    assert_int_equal(kr_store_upsert(st, "AAPL", "1d", g_aapl, &err), KR_OK);
    kr_store_close(st);
    kr_candles_free(big);
    kr_server_config c = config_on(db);
    c.max_memory_in_flight = c.max_request_memory = 1 << 20; /* ~6,500 rows of history */
    kr_server *s = kr_test_server_start(g_model, &c);
    kr_http_resp *r = http(kr_server_port(s), "POST", "/v1/backtest",
                           "{\"symbols\":[\"BIG\"],\"every\":1000,\"paths\":2,\"horizon\":2}");
    assert_int_equal(r->status, 413);
    assert_non_null(strstr(r->body, "backtest's histories"));
    kr_http_resp_free(r);
    /* ~250 rows fit: the job runs to its end. */
    const char *id = start(kr_server_port(s), SMALL_BODY);
    assert_string_equal(wait_state(kr_server_port(s), id), "done");
    kr_server_free(s);
}

/* A server freed while a backtest runs cancels it and returns. */
static void test_free_while_running(void **state) {
    (void)state;
    kr_server_config c = config_on(g_db);
    kr_server *s = kr_test_server_start(g_model, &c);
    start(kr_server_port(s), BIG_BODY);
    usleep(200 * 1000);
    kr_server_free(s); /* returns: the drain cancelled the job, the worker was joined */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_done_equals_library), cmocka_unit_test(test_running_and_cancel),
        cmocka_unit_test(test_events_to_the_end),   cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_too_many_running),    cmocka_unit_test(test_free_while_running),
        cmocka_unit_test(test_histories_charged),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
