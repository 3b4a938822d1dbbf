/*
 * The server under an adversarial review's defects (issue 11), each against a real server in
 * this process on 127.0.0.1 (libcurl, or raw sockets for what libcurl will not send):
 *  - a 504 sent while the engine is stuck is counted as 504, not 499;
 *  - GET /metrics shows the queue as it is now, not as of the engine's last step;
 *  - conflicting Content-Length / Transfer-Encoding with Content-Length: 400 and close;
 *  - bytes after the JSON body, a NUL in a JSON string, analysis caps: 400 naming the field,
 *    on every JSON route;
 *  - the memory budget: a request over max_request_memory is a 413, one that does not fit in
 *    max_memory_in_flight a 503 with Retry-After;
 *  - slow clients: hundreds of idle sockets from one address leave /health reachable (per-IP
 *    limit), a trickling client is cut at read_timeout_s, and sockets from many addresses are
 *    cut at the deadline so /health recovers;
 *  - X-Request-Id on every answer (given or generated), the access log's JSON lines, the
 *    process metrics, the non-loopback warning and the "port in use" message.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "http_client.h"
#include "raw_http.h"
#include "server_fixtures.h"
#include "test_support.h"

#include "base/timeutil.h"
#include "kernels/kernels.h"
#include "kronos.h"
#include "series/candles.h"
#include "server/server.h"

static kr_model *g_model;
static kr_candles *g_candles;

typedef kr_http_resp http_resp;

static http_resp *http_opts(int port, const char *method, const char *path, const char *body,
                            const char *rid) {
    http_resp *r = calloc(1, sizeof *r);
    r->send_request_id = rid;
    CURLcode cc = kr_test_http_perform(port, method, path, body, NULL, NULL, 0, r);
    if (cc != CURLE_OK) fail_msg("%s %s: curl: %s", method, path, curl_easy_strerror(cc));
    return r;
}

static http_resp *http(int port, const char *method, const char *path, const char *body) {
    return http_opts(port, method, path, body, NULL);
}

#define metric_in kr_metric_in
#define metric_value kr_http_metric
#define forecast_body(start, n, extra) kr_http_forecast_body(g_candles, start, n, extra)

/* Log lines of a server, for the tests that read them. */
typedef struct log_capture {
    pthread_mutex_t mu;
    char text[16384];
    size_t len;
} log_capture;

static void capture_log(void *user, const char *line) {
    log_capture *lc = user;
    if (!lc) return;
    pthread_mutex_lock(&lc->mu);
    int n = snprintf(lc->text + lc->len, sizeof lc->text - lc->len, "%s\n", line);
    if (n > 0 && lc->len + (size_t)n < sizeof lc->text) lc->len += (size_t)n;
    pthread_mutex_unlock(&lc->mu);
}

static kr_server_config base_config(log_capture *lc) {
    kr_server_config c = kr_test_server_config();
    c.sched.log = capture_log;
    c.sched.log_user = lc;
    return c;
}

static kr_server *start_server(const kr_server_config *cfg) {
    return kr_test_server_start(g_model, cfg);
}

static int setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    kr_error err = { 0 };
    if (!(g_model = kr_test_demo_model(NULL))) return -1;
    if (kr_candles_read_csv(KR_SOURCE_DIR "/data/XSHG_5min_600977.csv", &g_candles, &err) !=
        KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_candles_free(g_candles);
    kr_model_free(g_model);
    curl_global_cleanup();
    return 0;
}

/* ------------------------------------------------------------------ defect 2: 504 vs 499 */

/* A gate a scheduler callback waits at: while it is shut, the scheduler thread is stuck. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open, entered;
} gate;

static void gate_cb(void *user, const kr_event *ev) {
    gate *g = user;
    if (ev->kind != KR_EVENT_STARTED) {
        if (ev->kind == KR_EVENT_DONE) kr_forecast_free(ev->result);
        return;
    }
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void test_stuck_engine_504_counted(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    kr_server_config c = base_config(NULL);
    snprintf(c.access_log, sizeof c.access_log, "%s/access.log", dir);
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);

    /* Stall the scheduler thread inside a request's STARTED callback. */
    gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
    kr_series series = kr_candles_slice(g_candles, 0, 64);
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 2;
    uint64_t id = 0;
    kr_error err = { 0 };
    kr_request_params rp = kr_request_default_params();
    rp.on_event = gate_cb;
    rp.user = &g;
    assert_int_equal(kr_submit(kr_server_context(s), &series, &p, &rp, &id, &err), KR_OK);
    pthread_mutex_lock(&g.mu);
    while (!g.entered) pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);

    /* The engine cannot run this request's deadline: the server's own guard answers 504. */
    char *body = forecast_body(100, 80, "\"pred_len\":3,\"timeout_s\":0.2");
    http_resp *r = http(port, "POST", "/v1/forecast", body);
    assert_int_equal(r->status, 504);
    assert_non_null(strstr(r->body, "\"code\":504"));
    kr_http_resp_free(r);
    free(body);
    /* Counted as what was sent. */
    double n504 = -1;
    for (int i = 0; i < 200 && n504 < 1; i++) {
        n504 =
            metric_value(port, "kronos_http_requests_total{route=\"/v1/forecast\",code=\"504\"}");
        if (n504 < 1) usleep(10000);
    }
    assert_true(n504 == 1);
    assert_true(
        metric_value(port, "kronos_http_requests_total{route=\"/v1/forecast\",code=\"499\"}") < 0);

    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    kr_cancel(kr_server_context(s), id);
    kr_server_free(s);

    /* The access log says the same, with the cause. */
    char path[4200], text[8192];
    snprintf(path, sizeof path, "%s/access.log", dir);
    kr_test_slurp(path, text, sizeof text);
    const char *line = strstr(text, "\"route\":\"/v1/forecast\"");
    if (!line) fail_msg("no forecast line in the access log: %s", text);
    assert_non_null(strstr(line, "\"status\":504"));
    assert_non_null(strstr(line, "\"error\":\"request_timeout_s passed\""));
    unlink(path);
    rmdir(dir);
}

/* ------------------------------------------------------------------ /metrics is current */

typedef struct ended {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    kr_status status;
} ended;

static void on_end(void *user, const kr_event *ev) {
    ended *e = user;
    if (ev->kind != KR_EVENT_DONE && ev->kind != KR_EVENT_FAILED) return;
    if (ev->kind == KR_EVENT_DONE) kr_forecast_free(ev->result);
    pthread_mutex_lock(&e->mu);
    e->done = 1;
    e->status = ev->kind == KR_EVENT_DONE ? KR_OK : ev->error.status;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* GET /metrics shows the queue as it is: a request waiting out a batch wait is waiting. The
 * page rendered the registry as the engine thread last published it at a step boundary, and a
 * lone newcomer's batch wait publishes nothing, so it read kronos_requests_waiting 0 (as did
 * the block pool's gauges after an idle engine handed blocks back). */
static void test_metrics_show_the_queue_now(void **state) {
    (void)state;
    kr_server_config c = base_config(NULL);
    c.sched.batch_wait_ms = 60000; /* a lone request waits a minute for company */
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);
    assert_true(metric_value(port, "kronos_requests_waiting") == 0);
    ended e = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, KR_OK };
    kr_series series = kr_candles_slice(g_candles, 0, 64);
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 2;
    uint64_t id = 0;
    kr_error err = { 0 };
    kr_request_params rp = kr_request_default_params();
    rp.on_event = on_end;
    rp.user = &e;
    assert_int_equal(kr_submit(kr_server_context(s), &series, &p, &rp, &id, &err), KR_OK);
    assert_true(metric_value(port, "kronos_requests_waiting") == 1);
    assert_true(metric_value(port, "kronos_requests_running") == 0);
    kr_cancel(kr_server_context(s), id);
    pthread_mutex_lock(&e.mu);
    while (!e.done) pthread_cond_wait(&e.cv, &e.mu);
    pthread_mutex_unlock(&e.mu);
    assert_int_equal(e.status, KR_ERR_CANCELLED);
    assert_true(metric_value(port, "kronos_requests_waiting") == 0);
    kr_server_free(s);
}

/* ------------------------------------------------------------------ defect 6: framing */

/* Sends raw bytes, returns the status answered and whether the server then closed. */
static int raw_exchange(int port, const char *req, int *closed) {
    int fd = kr_raw_connect(NULL, port);
    assert_true(fd >= 0);
    kr_raw_send(fd, req, strlen(req));
    char buf[8192];
    kr_raw_read(fd, buf, sizeof buf, 10.0, closed);
    close(fd);
    return kr_raw_status(buf);
}

static void test_framing(void **state) {
    (void)state;
    kr_server_config c = base_config(NULL);
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);
    /* The classic smuggling pair: the first length hides a second request in the body. */
    const char *smuggle =
        "POST /v1/forecast HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 5\r\nContent-Length: 57\r\n\r\n"
        "{\"a\":GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
    int closed = 0;
    assert_int_equal(raw_exchange(port, smuggle, &closed), 400);
    assert_true(closed);
    const char *te_cl = "POST /v1/forecast HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                        "Content-Length: 3\r\n\r\n0\r\n\r\n";
    assert_int_equal(raw_exchange(port, te_cl, &closed), 400);
    assert_true(closed);
    const char *bad_cl =
        "POST /v1/forecast HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\n12345";
    assert_int_equal(raw_exchange(port, bad_cl, &closed), 400);
    /* Two Host lines (issue 38): a proxy and the server could each take another one. */
    const char *two_hosts = "GET /v1/models HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n";
    assert_int_equal(raw_exchange(port, two_hosts, &closed), 400);
    assert_true(closed);
    /* One Host line is answered ("Connection: close": the read ends with the answer instead of
     * waiting out its 10 s on a kept connection). */
    assert_int_equal(raw_exchange(port,
                                  "GET /v1/models HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
                                  &closed),
                     200);
    /* Many other headers first do not hide the conflict. */
    kr_sbuf padded = { 0 };
    kr_sb_printf(&padded, "POST /v1/forecast HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 150; i++) kr_sb_printf(&padded, "X-Pad-%d: %d\r\n", i, i);
    kr_sb_printf(&padded, "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}");
    assert_int_equal(raw_exchange(port, padded.s, &closed), 400);
    assert_true(closed);
    free(padded.s);
    /* A coding other than one "chunked" leaves the end to the connection's close (the server
     * used to wait read_timeout_s, then log 408): refused at once. */
    static const char *const te_values[] = { "gzip, chunked", "gzip", "identity",
                                             "chunked, chunked", "chunked " };
    for (size_t i = 0; i < sizeof te_values / sizeof te_values[0]; i++) {
        char req[256];
        snprintf(req, sizeof req,
                 "POST /v1/forecast HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: %s\r\n\r\n"
                 "2\r\n{}\r\n0\r\n\r\n",
                 te_values[i]);
        assert_int_equal(raw_exchange(port, req, &closed), 400);
        assert_true(closed);
    }
    const char *te_twice = "POST /v1/forecast HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
                           "\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
    assert_int_equal(raw_exchange(port, te_twice, &closed), 400);
    /* "Content-Length : N" is no length to libmicrohttpd, so its body used to run as a second
     * request; a proxy may read it as the length. */
    const char *spaced = "POST /v1/forecast HTTP/1.1\r\nHost: x\r\nContent-Length : 39\r\n\r\n"
                         "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
    char buf[8192];
    int fd = kr_raw_connect(NULL, port);
    assert_true(fd >= 0);
    kr_raw_send(fd, spaced, strlen(spaced));
    kr_raw_read(fd, buf, sizeof buf, 10.0, &closed);
    close(fd);
    assert_int_equal(kr_raw_status(buf), 400);
    assert_true(closed);
    assert_null(strstr(buf, "\"object\":\"list\"")); /* no /v1/models answer after it */
    /* Chunked alone still works (in any case). */
    const char *chunked = "POST /v1/forecast HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          "application/json\r\nTransfer-Encoding: Chunked\r\n"
                          "Connection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
    assert_int_equal(raw_exchange(port, chunked, &closed), 400); /* {} lacks candles: a 400 */
    fd = kr_raw_connect(NULL, port);
    kr_raw_send(fd, chunked, strlen(chunked));
    kr_raw_read(fd, buf, sizeof buf, 10.0, &closed);
    close(fd);
    assert_non_null(strstr(buf, "candles"));
    /* HTTP/1.1 without Host is a 400 (RFC 9112 §3.2); HTTP/1.0 needs none. */
    assert_int_equal(
        raw_exchange(port, "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n", &closed), 400);
    assert_int_equal(raw_exchange(port, "GET /health HTTP/1.0\r\n\r\n", &closed), 200);
    /* The same length twice is one length (RFC 9110 allows the repeat). */
    const char *same =
        "GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\n"
        "Connection: close\r\n\r\n";
    assert_int_equal(raw_exchange(port, same, &closed), 200);
    assert_true(metric_value(port, "kronos_http_rejected_total{reason=\"framing\"}") >= 2);
    kr_server_free(s);
}

/* ------------------------------------------------------------------ defects 7, 11, 1 */

static void test_json_routes_refuse(void **state) {
    (void)state;
    kr_server_config c = base_config(NULL);
    c.max_horizon = 30;
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);
    char *fc = forecast_body(0, KR_FORECAST_MIN_ROWS, "\"pred_len\":2");
    size_t n = strlen(fc);
    char *fc_tail = malloc(n + 8);
    snprintf(fc_tail, n + 8, "%sxyz", fc);
    static const struct {
        const char *path, *field, *needle;
        const char *body; /* NULL: the forecast body with a tail */
    } k_cases[] = {
        { "/v1/forecast", "body", "after the JSON document", NULL },
        { "/v1/analyze", "body", "after the JSON document", "{\"symbol\":\"AAPL\"}xyz" },
        { "/v1/analyze/batch", "body", "after the JSON document", "{\"symbols\":[\"AAPL\"]} {}" },
        { "/v1/candles/AAPL?interval=1d", "body", "after the JSON document",
          "[[\"2024-01-02\",1,2,1,1],[\"2024-01-03\",1,2,1,1]]]" },
        { "/v1/analyze", "symbol", "NUL", "{\"symbol\":\"AAPL\\u0000.TO\"}" },
        { "/v1/analyze/batch", "symbols[0]", "NUL", "{\"symbols\":[\"A\\u0000\"]}" },
        { "/v1/analyze", "horizon", "1..30 (max_horizon), got 400",
          "{\"symbol\":\"AAPL\",\"horizon\":400}" },
        { "/v1/analyze", "calibrate", "0..10 (max_calibrate), got 50",
          "{\"symbol\":\"AAPL\",\"horizon\":5,\"calibrate\":50}" },
    };
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        http_resp *r =
            http(port, "POST", k_cases[i].path, k_cases[i].body ? k_cases[i].body : fc_tail);
        if (r->status != 400 || strcmp(kr_http_error_field(r), k_cases[i].field) != 0 ||
            !strstr(r->body, k_cases[i].needle))
            fail_msg("%s case %zu: %ld %s", k_cases[i].path, i, r->status, r->body);
        kr_http_resp_free(r);
    }
    /* Without the tail the same forecast is fine. */
    http_resp *r = http(port, "POST", "/v1/forecast", fc);
    assert_int_equal(r->status, 200);
    kr_http_resp_free(r);
    free(fc);
    free(fc_tail);
    kr_server_free(s);
}

/* ------------------------------------------------------------------ defect 4: memory */

static void test_memory_budget(void **state) {
    (void)state;
    kr_server_config c = base_config(NULL);
    c.max_request_memory = (size_t)1 << 20;
    c.max_memory_in_flight = (size_t)1 << 20;
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);
    /* ~600 KB of short rows: the body fits, its parse tree (~7 MB) does not: 413. */
    kr_sbuf b = { 0 };
    kr_sb_printf(&b, "{\"pred_len\":1,\"candles\":[");
    for (int i = 0; i < 30000; i++)
        kr_sb_printf(&b, "%s[%d,1,2,1,1]", i ? "," : "", 1700000000 + i * 60);
    kr_sb_printf(&b, "]}");
    http_resp *r = http(port, "POST", "/v1/forecast", b.s);
    if (r->status != 413 || !strstr(r->body, "max_request_memory"))
        fail_msg("%ld %s", r->status, r->body);
    kr_http_resp_free(r);
    free(b.s);
    /* A client that announces a 700 KB body holds only what it has sent: its first byte a few
     * KB, so announcing (and not sending) cannot lock others out of the budget; another
     * client's 700 KB still fits. */
    const char *mem = "kronos_http_memory_in_flight_bytes";
    double t0 = kr_now_seconds();
    while (metric_value(port, mem) != 0 && kr_now_seconds() - t0 < 10) usleep(10000);
    assert_true(metric_value(port, mem) == 0);
    int hold = kr_raw_connect(NULL, port);
    const char *head = "POST /v1/forecast HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       "Content-Length: 700000\r\n\r\n{";
    kr_raw_send(hold, head, strlen(head));
    while (metric_value(port, mem) == 0 && kr_now_seconds() - t0 < 10) usleep(10000);
    assert_true(metric_value(port, mem) > 0 && metric_value(port, mem) < 100000);
    const char *second = "POST /v1/forecast HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         "application/json\r\nContent-Length: 700000\r\nExpect: "
                         "100-continue\r\n\r\n";
    int fd = kr_raw_connect(NULL, port);
    kr_raw_send(fd, second, strlen(second));
    char buf[4096];
    int closed;
    kr_raw_read(fd, buf, sizeof buf, 2.0, &closed);
    close(fd);
    assert_int_equal(kr_raw_status(buf), 100); /* go ahead */
    /* Once it has sent 600 KB of its body it holds them, and another 700 KB body no longer
     * fits: 503 with Retry-After, before that body is read. */
    size_t pad = 600000;
    char *spaces = malloc(pad);
    memset(spaces, ' ', pad);
    kr_raw_send(hold, spaces, pad);
    free(spaces);
    while (metric_value(port, mem) < 600000 && kr_now_seconds() - t0 < 10) usleep(10000);
    assert_true(metric_value(port, mem) >= 600000);
    fd = kr_raw_connect(NULL, port);
    kr_raw_send(fd, second, strlen(second));
    kr_raw_read(fd, buf, sizeof buf, 5.0, &closed);
    close(fd);
    assert_int_equal(kr_raw_status(buf), 503);
    assert_non_null(strstr(buf, "Retry-After: 1"));
    assert_non_null(strstr(buf, "max_memory_in_flight"));
    close(hold);
    /* Once the holder is gone its reservation is back. */
    while (metric_value(port, mem) != 0 && kr_now_seconds() - t0 < 20) usleep(10000);
    assert_true(metric_value(port, mem) == 0);
    char *ok = forecast_body(0, 40, "\"pred_len\":2");
    r = http(port, "POST", "/v1/forecast", ok);
    assert_int_equal(r->status, 200);
    kr_http_resp_free(r);
    free(ok);
    assert_true(metric_value(port, "kronos_http_rejected_total{reason=\"memory\"}") >= 1);
    kr_server_free(s);
}

/* ------------------------------------------------------------------ defect 5: slow clients */

typedef struct health_probe {
    int port, ok, tries;
} health_probe;

static void probe_health(health_probe *h, int tries) {
    h->ok = 0;
    for (h->tries = 0; h->tries < tries && !h->ok; h->tries++) {
        http_resp r = { 0 };
        r.timeout_ms = 2000;
        CURLcode cc = kr_test_http_perform(h->port, "GET", "/health", NULL, NULL, NULL, 0, &r);
        h->ok = cc == CURLE_OK && r.status == 200;
        free(r.body);
        if (!h->ok) usleep(100000);
    }
}

static void test_idle_sockets_one_address(void **state) {
    (void)state;
    kr_server_config c = base_config(NULL);
    c.max_connections = 64;
    c.max_connections_per_ip = 16;
    c.read_timeout_s = 60; /* only the per-address limit protects here */
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);
    enum { N_IDLE = 300 };
    int fds[N_IDLE], opened = 0;
    for (int i = 0; i < N_IDLE; i++) {
        fds[i] = kr_raw_connect("127.0.0.2", port);
        if (fds[i] >= 0) {
            opened++;
            kr_raw_send(fds[i], "GET /health HTTP/1.1\r\nHo", 24); /* a request never finished */
        }
    }
    assert_true(opened >= 200); /* the kernel accepts; the server keeps 16 of them */
    health_probe h = { port, 0, 0 };
    probe_health(&h, 5);
    assert_true(h.ok);
    assert_int_equal(h.tries, 1); /* at once, not after some timeout */
    for (int i = 0; i < N_IDLE; i++)
        if (fds[i] >= 0) close(fds[i]);
    kr_server_free(s);
}

static void test_trickle_cut_at_deadline(void **state) {
    (void)state;
    kr_server_config c = base_config(NULL);
    c.read_timeout_s = 1.0;
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);
    /* One byte every 100 ms: libmicrohttpd's idle timeout never fires, the deadline does.
     * The clock starts before the connection: the server's starts at accept. */
    double t0 = kr_now_seconds();
    int fd = kr_raw_connect("127.0.0.3", port);
    const char *req = "POST /v1/forecast HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
                      "{\"pred_len\":1,\"candles\":[[\"2024-01-02\",1,2,1,1]]}";
    size_t sent = 0, n = strlen(req);
    int cut = 0;
    for (; sent < n && !cut; sent++) {
        if (kr_raw_send(fd, req + sent, 1) != 0) cut = 1;
        char b[256];
        int closed = 0;
        kr_raw_read(fd, b, sizeof b, 0.1, &closed);
        if (closed) cut = 1;
    }
    double took = kr_now_seconds() - t0;
    fprintf(stderr, "trickle: cut %d after %zu of %zu bytes, %.2f s\n", cut, sent, n, took);
    assert_true(cut);
    assert_true(sent < n);
    assert_true(took >= 1.0); /* not before the deadline */
    close(fd);
    double cuts = -1;
    for (int i = 0; i < 50 && cuts < 1; i++) {
        cuts = metric_value(port, "kronos_http_rejected_total{reason=\"read_timeout\"}");
        if (cuts < 1) usleep(20000);
    }
    assert_true(cuts >= 1);
    kr_server_free(s);
}

/* Sockets from many addresses (no per-address limit helps) fill every connection slot; the
 * deadline frees them, so /health answers again while the attackers still hold their
 * sockets open. */
static void test_many_addresses_recover(void **state) {
    (void)state;
    kr_server_config c = base_config(NULL);
    c.max_connections = 32;
    c.max_connections_per_ip = 4;
    c.read_timeout_s = 1.0;
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);
    enum { N_ADDR = 40, PER = 4 };
    int fds[N_ADDR * PER];
    int n = 0;
    for (int a = 0; a < N_ADDR; a++) {
        char ip[32];
        snprintf(ip, sizeof ip, "127.0.1.%d", a + 1);
        for (int k = 0; k < PER; k++) {
            int fd = kr_raw_connect(ip, port);
            if (fd >= 0) kr_raw_send(fd, "GET /health HTTP/1.1\r\n", 22);
            fds[n++] = fd;
        }
    }
    health_probe h = { port, 0, 0 };
    probe_health(&h, 100);
    fprintf(stderr, "many addresses: /health answered after %d tries\n", h.tries);
    assert_true(h.ok);
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]);
    kr_server_free(s);
}

/* ------------------------------------------------------------------ operations */

static void test_request_ids(void **state) {
    (void)state;
    kr_server_config c = base_config(NULL);
    snprintf(c.api_key, sizeof c.api_key, "k");
    c.max_body_bytes = 4096;
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);
    /* Generated on every kind of answer, different each time. */
    const struct {
        const char *method, *path, *body;
        long status;
    } k_answers[] = {
        { "GET", "/health", NULL, 200 },  { "GET", "/nope", NULL, 404 },
        { "PUT", "/health", NULL, 405 },  { "GET", "/v1/models", NULL, 401 },
        { "GET", "/metrics", NULL, 200 }, { "GET", "/", NULL, 404 },
    };
    char seen[8][128];
    for (size_t i = 0; i < sizeof k_answers / sizeof k_answers[0]; i++) {
        http_resp *r = http(port, k_answers[i].method, k_answers[i].path, k_answers[i].body);
        assert_int_equal(r->status, k_answers[i].status);
        assert_int_equal(strlen(r->request_id), 16);
        for (size_t j = 0; j < i; j++) assert_string_not_equal(seen[j], r->request_id);
        snprintf(seen[i], sizeof seen[i], "%s", r->request_id);
        kr_http_resp_free(r);
    }
    /* A sane client id is echoed, on errors too; anything else is replaced. */
    http_resp *r = http_opts(port, "GET", "/v1/models", NULL, "trace-42.a_b:c");
    assert_int_equal(r->status, 401);
    assert_string_equal(r->request_id, "trace-42.a_b:c");
    kr_http_resp_free(r);
    r = http_opts(port, "GET", "/health", NULL, "bad id with spaces");
    assert_int_equal(strlen(r->request_id), 16);
    kr_http_resp_free(r);
    char long_id[100];
    memset(long_id, 'a', 65);
    long_id[65] = '\0';
    r = http_opts(port, "GET", "/health", NULL, long_id);
    assert_int_equal(strlen(r->request_id), 16);
    kr_http_resp_free(r);
    /* A 413 refused from Content-Length carries it as well. */
    char big[5000];
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    r = http_opts(port, "POST", "/v1/forecast", big, "too-big-1");
    assert_int_equal(r->status, 401); /* the key is checked first */
    assert_string_equal(r->request_id, "too-big-1");
    kr_http_resp_free(r);
    kr_server_free(s);

    /* Streams too. */
    c = base_config(NULL);
    s = start_server(&c);
    char *body = forecast_body(0, 40, "\"pred_len\":2,\"stream\":true");
    r = http_opts(kr_server_port(s), "POST", "/v1/forecast", body, "stream-7");
    assert_int_equal(r->status, 200);
    assert_non_null(strstr(r->body, "event: result"));
    assert_string_equal(r->request_id, "stream-7");
    kr_http_resp_free(r);
    free(body);
    kr_server_free(s);
}

static void test_access_log(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    kr_server_config c = base_config(NULL);
    snprintf(c.access_log, sizeof c.access_log, "%s/access.log", dir);
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);
    char *ok = forecast_body(0, 40, "\"pred_len\":2");
    http_resp *r1 = http_opts(port, "POST", "/v1/forecast", ok, "ok-1");
    assert_int_equal(r1->status, 200);
    http_resp *r2 = http_opts(port, "POST", "/v1/forecast", "{\"pred_len\":0}", "bad-1");
    assert_int_equal(r2->status, 400);
    http_resp *r3 = http(port, "GET", "/does/not/exist", NULL);
    assert_int_equal(r3->status, 404);
    char *st = forecast_body(0, 40, "\"pred_len\":3,\"stream\":true");
    http_resp *r4 = http_opts(port, "POST", "/v1/forecast", st, "st-1");
    assert_int_equal(r4->status, 200);
    /* A failure answered from a body built elsewhere (the analysis: no store configured). */
    http_resp *r5 = http_opts(port, "POST", "/v1/analyze", "{\"symbol\":\"AAPL\"}", "an-1");
    assert_int_equal(r5->status, 503);
    kr_server_free(s); /* completes and flushes every line */

    char path[4200], text[16384];
    snprintf(path, sizeof path, "%s/access.log", dir);
    kr_test_slurp(path, text, sizeof text);
    int lines = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        cJSON *j = cJSON_Parse(line);
        if (!j) fail_msg("not a JSON line: %s", line);
        const char *keys[] = { "time",  "request_id", "client", "method",
                               "route", "status",     "bytes",  "duration_s" };
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (!cJSON_GetObjectItem(j, keys[k])) fail_msg("no %s in %s", keys[k], line);
        const char *t = cJSON_GetObjectItem(j, "time")->valuestring;
        assert_int_equal(strlen(t), 24); /* 2025-01-02T03:04:05.678Z */
        assert_int_equal(t[23], 'Z');
        assert_string_equal(cJSON_GetObjectItem(j, "client")->valuestring, "127.0.0.1");
        const char *rid = cJSON_GetObjectItem(j, "request_id")->valuestring;
        int status = (int)cJSON_GetObjectItem(j, "status")->valuedouble;
        double bytes = cJSON_GetObjectItem(j, "bytes")->valuedouble;
        if (!strcmp(rid, "ok-1")) {
            assert_int_equal(status, 200);
            assert_true(bytes == (double)r1->len);
            assert_non_null(cJSON_GetObjectItem(j, "queue_wait_s"));
            assert_null(cJSON_GetObjectItem(j, "error"));
            assert_string_equal(cJSON_GetObjectItem(j, "route")->valuestring, "/v1/forecast");
            assert_string_equal(cJSON_GetObjectItem(j, "method")->valuestring, "POST");
        } else if (!strcmp(rid, "bad-1")) {
            assert_int_equal(status, 400);
            assert_true(bytes == (double)r2->len);
            assert_null(cJSON_GetObjectItem(j, "queue_wait_s"));
            assert_non_null(strstr(cJSON_GetObjectItem(j, "error")->valuestring, "candles"));
        } else if (!strcmp(rid, "an-1")) {
            assert_int_equal(status, 503);
            assert_non_null(
                strstr(cJSON_GetObjectItem(j, "error")->valuestring, "no candle store"));
        } else if (!strcmp(rid, "st-1")) {
            assert_int_equal(status, 200);
            assert_true(bytes == (double)r4->len); /* every streamed byte counted */
            assert_non_null(cJSON_GetObjectItem(j, "queue_wait_s"));
        } else {
            assert_int_equal(status, 404);
            assert_string_equal(cJSON_GetObjectItem(j, "route")->valuestring, "other");
            assert_string_equal(rid, r3->request_id);
        }
        cJSON_Delete(j);
    }
    assert_int_equal(lines, 5);
    kr_http_resp_free(r1);
    kr_http_resp_free(r2);
    kr_http_resp_free(r3);
    kr_http_resp_free(r4);
    kr_http_resp_free(r5);
    free(ok);
    free(st);
    unlink(path);
    rmdir(dir);
}

static void test_process_metrics(void **state) {
    (void)state;
    kr_server_config c = base_config(NULL);
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);
    char *body = forecast_body(300, 100, "\"pred_len\":2");
    for (int i = 0; i < 2; i++) { /* the second is a prefix-cache hit */
        http_resp *r = http(port, "POST", "/v1/forecast", body);
        assert_int_equal(r->status, 200);
        kr_http_resp_free(r);
    }
    free(body);
    http_resp *r = http(port, "GET", "/metrics", NULL);
    const char *m = r->body;
    double cpu = metric_in(m, "process_cpu_seconds_total");
    double rss = metric_in(m, "process_resident_memory_bytes");
    double fds = metric_in(m, "process_open_fds");
    double start = metric_in(m, "process_start_time_seconds");
    fprintf(stderr, "cpu %.2f s, rss %.0f MB, fds %.0f, start %.0f\n", cpu, rss / 1e6, fds, start);
    assert_true(cpu > 0);
    /* RSS as the kernel reports it right now (VmRSS), within a factor of two. */
    char status[8192];
    kr_test_slurp("/proc/self/status", status, sizeof status);
    const char *vm = strstr(status, "VmRSS:");
    assert_non_null(vm);
    double vmrss = strtod(vm + 6, NULL) * 1024;
    assert_true(rss > vmrss / 2 && rss < vmrss * 2);
    assert_true(fds >= 3 && fds < 10000);
    double now = (double)time(NULL);
    assert_true(start > now - 86400 && start <= now + 1);
    char build[256];
    snprintf(build, sizeof build, "kronos_build_info{version=\"%s\",isa=\"%s\"}", kr_version(),
             kr_isa_name(kr_isa_active()));
    assert_true(metric_in(m, build) == 1);
    double q = metric_in(m, "kronos_prefix_cache_queried_tokens_total");
    double h = metric_in(m, "kronos_prefix_cache_hit_tokens_total");
    double ratio = metric_in(m, "kronos_prefix_cache_hit_ratio");
    fprintf(stderr, "prefix cache: %g of %g tokens, ratio %g\n", h, q, ratio);
    assert_true(q > 0 && h > 0);
    assert_true(fabs(ratio - h / q) < 1e-9);
    assert_non_null(strstr(m, "# TYPE process_cpu_seconds_total counter"));
    kr_http_resp_free(r);
    kr_server_free(s);
}

/* ------------------------------------------------------------------ defect 11: start-up */

static void test_bind_warnings(void **state) {
    (void)state;
    log_capture lc = { PTHREAD_MUTEX_INITIALIZER, { 0 }, 0 };
    kr_server_config c = base_config(&lc);
    snprintf(c.host, sizeof c.host, "0.0.0.0");
    kr_server *s = start_server(&c);
    kr_server_free(s);
    if (!strstr(lc.text, "WARNING") || !strstr(lc.text, "WITHOUT an API key"))
        fail_msg("no warning in: %s", lc.text);
    /* With a key, or on loopback, no warning. */
    log_capture quiet = { PTHREAD_MUTEX_INITIALIZER, { 0 }, 0 };
    c = base_config(&quiet);
    snprintf(c.host, sizeof c.host, "0.0.0.0");
    snprintf(c.api_key, sizeof c.api_key, "k");
    kr_server_free(start_server(&c));
    c = base_config(&quiet);
    kr_server_free(start_server(&c));
    assert_null(strstr(quiet.text, "WARNING"));

    /* A port in use: the message names the port asked for and the reason. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    socklen_t al = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &al);
    int busy = ntohs(a.sin_port);
    log_capture lp = { PTHREAD_MUTEX_INITIALIZER, { 0 }, 0 };
    c = base_config(&lp);
    c.port = busy;
    kr_server *none = NULL;
    kr_error err = { 0 };
    assert_int_not_equal(kr_server_create(g_model, &c, &none, &err), KR_OK);
    assert_null(none);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d: Address already in use", busy);
    if (!strstr(err.message, want)) fail_msg("message: %s", err.message);
    assert_null(strstr(lp.text, "port 0"));
    assert_null(strstr(err.message, "port 0"));
    close(fd);
}

/* Clients that ask for large forecasts and never read them: each answer holds the memory
 * budget until its request completes, and room for it is taken before the forecast runs, so
 * once unread answers hold the budget a new large forecast gets 503 before any compute
 * (issue 38, item 4) while a small one still fits; once they leave, the budget is back. An
 * answer larger than the whole budget is a 413 up front. Streamed, what is held is the room
 * and the finished result waiting in its job (the stream's reader, which would take it, runs
 * only when the socket has room) or, once taken, the final event in the stream's buffer. */
static void unread_answer_holds_budget(int stream) {
    kr_server_config c = base_config(NULL);
    c.max_memory_in_flight = (size_t)2 << 20;
    c.max_request_memory = (size_t)1 << 20;
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);
    /* Each answer is ~0.8 MB of JSON (64 kept paths of 64 steps), the room reserved for it
     * ~0.96 MB: two fit one after the other, a third's room does not fit beside two held. */
    char *body = forecast_body(0, 64,
                               stream ? "\"pred_len\":64,\"paths\":64,\"return_paths\":true,"
                                        "\"stream\":true"
                                      : "\"pred_len\":64,\"paths\":64,\"return_paths\":true");
    const char *mem = "kronos_http_memory_in_flight_bytes";
    int fd[2];
    double held = 0;
    for (int k = 0; k < 2; k++) {
        fd[k] = kr_raw_post_unread(port, "/v1/forecast", body);
        assert_true(fd[k] >= 0);
        const double want = 500000.0 * (k + 1);
        for (int i = 0; i < 15000 && held < want; i++) {
            held = metric_value(port, mem);
            if (held < want) usleep(20000);
        }
        assert_true(held >= want);
    }
    fprintf(stderr, "two unread %s answers: %.2f MiB held\n", stream ? "streamed" : "plain",
            held / (1 << 20));
    /* A third large answer does not fit: 503 before it runs. */
    http_resp *r = http(port, "POST", "/v1/forecast", body);
    if (r->status != 503 || !strstr(r->body, "max_memory_in_flight") ||
        strcmp(r->retry_after, "1") != 0)
        fail_msg("while unread answers hold the budget: %ld %s", r->status, r->body);
    kr_http_resp_free(r);
    char *small_body = forecast_body(0, 40, "\"pred_len\":2");
    r = http(port, "POST", "/v1/forecast", small_body);
    assert_int_equal(r->status, 200);
    kr_http_resp_free(r);
    for (int k = 0; k < 2; k++) close(fd[k]); /* they leave: the answers go, the budget is back */
    for (int i = 0; i < 500 && held > 0; i++) {
        held = metric_value(port, mem);
        if (held > 0) usleep(20000);
    }
    assert_true(held == 0);
    r = http(port, "POST", "/v1/forecast", body);
    assert_int_equal(r->status, 200);
    kr_http_resp_free(r);
    /* An answer larger than the whole budget (~6 MB: 256 paths of 128 steps) could never be
     * held: 413 up front, naming it. */
    char *huge = forecast_body(0, 64, "\"pred_len\":128,\"paths\":256,\"return_paths\":true");
    r = http(port, "POST", "/v1/forecast", huge);
    if (r->status != 413 || !strstr(r->body, "max_memory_in_flight"))
        fail_msg("an answer past the whole budget: %ld %s", r->status, r->body);
    kr_http_resp_free(r);
    free(huge);
    free(small_body);
    free(body);
    kr_server_free(s);
}

static void test_unread_answer_holds_budget(void **state) {
    (void)state;
    unread_answer_holds_budget(0);
}

static void test_unread_stream_holds_budget(void **state) {
    (void)state;
    unread_answer_holds_budget(1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stuck_engine_504_counted),
        cmocka_unit_test(test_metrics_show_the_queue_now),
        cmocka_unit_test(test_framing),
        cmocka_unit_test(test_json_routes_refuse),
        cmocka_unit_test(test_memory_budget),
        cmocka_unit_test(test_idle_sockets_one_address),
        cmocka_unit_test(test_trickle_cut_at_deadline),
        cmocka_unit_test(test_many_addresses_recover),
        cmocka_unit_test(test_request_ids),
        cmocka_unit_test(test_access_log),
        cmocka_unit_test(test_process_metrics),
        cmocka_unit_test(test_bind_warnings),
        cmocka_unit_test(test_unread_answer_holds_budget),
        cmocka_unit_test(test_unread_stream_holds_budget),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
