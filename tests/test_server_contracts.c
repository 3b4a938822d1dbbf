/*
 * HTTP contracts of `kronos serve` that a review found broken, each against a real in-process
 * server (demo model, ephemeral port, a fresh store and web root), hostile inputs included:
 *
 *  - "all": true on /v1/analyze/batch takes every stored series up to max_symbols (the
 *    config's, not a compiled 64) and refuses more with a 400 naming "all" and the limit;
 *  - a 405's Allow header and message list every method of the path (GET, HEAD, POST, DELETE on
 *    /v1/candles/{symbol});
 *  - "paths" is exactly that many paths, whatever max_paths says (as kronos analyze);
 *  - the horizon bound is max_context - 2;
 *  - a batch where nothing can be analysed names its field (symbols[0], or all), plain and
 *    streamed;
 *  - a symlink inside the web root to a hidden file (or into a hidden directory) is a 404;
 *  - static files carry ETag and Last-Modified and answer If-None-Match / If-Modified-Since
 *    with 304; no Range support is advertised;
 *  - error bodies never name the server's store path (the server's logs do).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "http_client.h"
#include "raw_http.h"
#include "server_fixtures.h"
#include "test_support.h"

#include "kronos.h"
#include "series/candles.h"
#include "store/store.h"
#include "server/analyst_request.h"
#include "server/router.h"
#include "server/server.h"
#include "server/static_files.h"

static kr_model *g_model;
static const char *g_tmp; /* kr_test_dir() */
static char g_db[1024], g_web[1024];
static kr_server *g_srv; /* g_db + g_web, defaults */

typedef kr_http_resp http_resp;

static http_resp *http_h(int port, const char *method, const char *path, const char *body,
                         const char *h1, const char *h2) {
    http_resp *r = calloc(1, sizeof *r);
    r->send_headers[0] = h1;
    r->send_headers[1] = h1 ? h2 : NULL;
    CURLcode cc = kr_test_http_perform(port, method, path, body, NULL, NULL, 0, r);
    if (cc != CURLE_OK) fail_msg("%s %s: curl: %s", method, path, curl_easy_strerror(cc));
    return r;
}

static http_resp *http(int port, const char *method, const char *path, const char *body) {
    return http_h(port, method, path, body, NULL, NULL);
}

#define assert_error kr_assert_http_error

/* The error message of a JSON error body (static buffer). */
static const char *error_message(const char *body) {
    static char out[1024];
    out[0] = '\0';
    cJSON *j = cJSON_Parse(body ? body : "");
    cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "message");
    if (cJSON_IsString(m)) snprintf(out, sizeof out, "%s", m->valuestring);
    cJSON_Delete(j);
    return out;
}

static void write_text(const char *path, const char *text) {
    if (kr_test_write_file(path, text, strlen(text)) != 0) fail_msg("cannot write %s", path);
}

/* Stores n rows of AAPL (the newest) as symbol/interval in db. */
static void store_rows(const char *db, const char *symbol, const char *interval, int64_t n) {
    static kr_candles *aapl;
    kr_error err = { 0 };
    if (!aapl && kr_candles_read_csv(KR_SOURCE_DIR "/data/AAPL_1d.csv", &aapl, &err) != KR_OK)
        fail_msg("AAPL: %s", err.message);
    if (n > aapl->n) n = aapl->n;
    kr_candles part = *aapl; /* a view of the newest n rows */
    part.timestamps += aapl->n - n;
    part.values += (aapl->n - n) * 6;
    part.n = n;
    kr_store *st = NULL;
    if (kr_store_open(db, &st, &err) != KR_OK ||
        kr_store_upsert(st, symbol, interval, &part, &err) != KR_OK)
        fail_msg("store %s: %s", symbol, err.message);
    kr_store_close(st);
}

static kr_server *start(const char *db, int max_symbols) {
    kr_server_config c = kr_test_server_config();
    snprintf(c.db, sizeof c.db, "%s", db);
    snprintf(c.web_root, sizeof c.web_root, "%s", g_web);
    if (max_symbols) c.max_symbols = max_symbols;
    return kr_test_server_start(g_model, &c);
}

static int setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (!(g_model = kr_test_demo_model(NULL))) return -1;
    g_tmp = kr_test_dir();
    snprintf(g_db, sizeof g_db, "%s/store.db", g_tmp);
    snprintf(g_web, sizeof g_web, "%s/web", g_tmp);
    char p[1200], q[1200];
    mkdir(g_web, 0777);
    snprintf(p, sizeof p, "%s/assets", g_web);
    mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/index.html", g_web);
    write_text(p, "<!doctype html><title>kronos</title>");
    snprintf(p, sizeof p, "%s/assets/app.js", g_web);
    write_text(p, "export const x = 1;\n");
    /* Hidden things inside the root, and visible names that lead to them. */
    snprintf(p, sizeof p, "%s/.secret", g_web);
    write_text(p, "top secret");
    snprintf(p, sizeof p, "%s/.git", g_web);
    mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/.git/config", g_web);
    write_text(p, "[remote] url = secret");
    snprintf(p, sizeof p, "%s/assets/visible.txt", g_web);
    if (symlink("../.secret", p) != 0) return -1;
    snprintf(p, sizeof p, "%s/assets/config.txt", g_web);
    if (symlink("../.git/config", p) != 0) return -1;
    snprintf(p, sizeof p, "%s/assets/repo", g_web); /* a directory link */
    if (symlink("../.git", p) != 0) return -1;
    snprintf(p, sizeof p, "%s/assets/fine.js", g_web); /* a visible target stays served */
    snprintf(q, sizeof q, "%s/assets/app.js", g_web);
    if (symlink(q, p) != 0) return -1;

    store_rows(g_db, "AAPL", "1d", 400);
    store_rows(g_db, "SHORT", "1d", 3);
    g_srv = start(g_db, 0);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_server_free(g_srv);
    kr_model_free(g_model);
    curl_global_cleanup();
    return 0;
}

/* ------------------------------------------------------------------ 1. "all" and max_symbols */

static void test_all_respects_max_symbols(void **state) {
    (void)state;
    char db[1100];
    /* 64 series (the default max_symbols): every one is in the answer, as a report or a
     * failure; nothing is dropped. */
    snprintf(db, sizeof db, "%s/many.db", g_tmp);
    store_rows(db, "AAPL", "1d", 200);
    for (int i = 1; i < 64; i++) {
        char sym[16];
        snprintf(sym, sizeof sym, "S%02d", i);
        store_rows(db, sym, "1d", 3); /* too short: listed as failures, no forecast */
    }
    kr_server *s = start(db, 0);
    int port = kr_server_port(s);
    const char *body = "{\"all\":true,\"horizon\":2,\"paths\":2}";
    http_resp *r = http(port, "POST", "/v1/analyze/batch", body);
    assert_int_equal(r->status, 200);
    cJSON *j = kr_http_json(r);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "reports")), 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "failures")), 63);
    cJSON_Delete(j);
    kr_http_resp_free(r);

    /* One more series than may be analysed: a 400 naming "all" and the limit, not the first
     * 64 silently. */
    store_rows(db, "S64", "1d", 3);
    r = http(port, "POST", "/v1/analyze/batch", body);
    assert_error(r, 400, "all");
    const char *m = error_message(r->body);
    assert_non_null(strstr(m, "max_symbols (64)"));
    assert_non_null(strstr(m, "65 series"));
    assert_int_equal(strncmp(m, "all: ", 5), 0);
    kr_http_resp_free(r);
    /* The same streamed: the error event names the field. */
    r = http(port, "POST", "/v1/analyze/batch", "{\"all\":true,\"horizon\":2,\"stream\":true}");
    assert_int_equal(r->status, 200);
    char ev[16][32];
    char *data[16];
    int n = kr_sse_events(r->body, ev, data, 16);
    assert_true(n >= 1);
    assert_string_equal(ev[n - 1], "error");
    assert_non_null(strstr(data[n - 1], "\"field\":\"all\""));
    assert_non_null(strstr(data[n - 1], "max_symbols (64)"));
    for (int k = 0; k < n; k++) free(data[k]);
    kr_http_resp_free(r);
    kr_server_free(s);

    /* The config's max_symbols is the limit, not the compiled one: 2 here. */
    snprintf(db, sizeof db, "%s/three.db", g_tmp);
    store_rows(db, "AAA", "1d", 200);
    store_rows(db, "BBB", "1d", 200);
    s = start(db, 2);
    port = kr_server_port(s);
    r = http(port, "POST", "/v1/analyze/batch", body);
    assert_int_equal(r->status, 200);
    j = kr_http_json(r);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "reports")), 2);
    cJSON_Delete(j);
    kr_http_resp_free(r);
    store_rows(db, "BBB", "1h", 200); /* a second interval is another series */
    r = http(port, "POST", "/v1/analyze/batch", body);
    assert_error(r, 400, "all");
    assert_non_null(
        strstr(error_message(r->body), "3 series are stored, more than max_symbols (2)"));
    kr_http_resp_free(r);
    /* A list is held to the same limit. */
    r = http(port, "POST", "/v1/analyze/batch", "{\"symbols\":[\"AAA\",\"BBB\",\"CCC\"]}");
    assert_error(r, 400, "symbols");
    kr_http_resp_free(r);
    kr_server_free(s);

    /* Hostile spellings of "all". */
    port = kr_server_port(g_srv);
    static const char *const bad[] = {
        "{\"all\":1}",
        "{\"all\":\"true\"}",
        "{\"all\":true,\"symbols\":[]}",
        "{\"all\":true,\"all\":true}",
        "{\"all\":[true]}",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        r = http(port, "POST", "/v1/analyze/batch", bad[k]);
        if (r->status != 400) fail_msg("%s: want 400, got %ld %s", bad[k], r->status, r->body);
        kr_http_resp_free(r);
    }
    r = http(port, "POST", "/v1/analyze/batch", "{\"all\":false}");
    assert_error(r, 400, "symbols"); /* all: false asks for nothing */
    kr_http_resp_free(r);
}

/* ------------------------------------------------------------------ 2. Allow */

static void test_allow_lists_every_method(void **state) {
    (void)state;
    char a[64];
    assert_int_equal(kr_route_allow("/v1/candles/AAPL?interval=1d", a, sizeof a),
                     strlen("GET, HEAD, POST, DELETE"));
    assert_string_equal(a, "GET, HEAD, POST, DELETE");
    kr_route_allow("/", a, sizeof a);
    assert_string_equal(a, "GET, HEAD");
    kr_route_allow("/v1/analyze", a, sizeof a);
    assert_string_equal(a, "POST");
    kr_route_allow("/assets/x.js", a, sizeof a);
    assert_string_equal(a, "GET, HEAD");
    assert_int_equal(kr_route_allow("/nope", a, sizeof a), 0);
    assert_string_equal(a, "");
    assert_int_equal(kr_route_allow("/v1/candles/", a, sizeof a), 0); /* no symbol: no route */
    /* A short buffer holds whole methods only; none at all is no crash. */
    kr_route_allow("/v1/candles/AAPL", a, 10);
    assert_string_equal(a, "GET, HEAD");
    kr_route_allow("/v1/candles/AAPL", a, 3);
    assert_string_equal(a, "");
    assert_int_equal(kr_route_allow("/v1/candles/AAPL", NULL, 0), 0);
    assert_int_equal(kr_route_allow(NULL, a, sizeof a), 0);

    int port = kr_server_port(g_srv);
    static const struct {
        const char *method, *path, *allow;
    } cases[] = {
        { "PUT", "/v1/candles/AAPL?interval=1d", "GET, HEAD, POST, DELETE" },
        { "PATCH", "/v1/candles/%5EGSPC", "GET, HEAD, POST, DELETE" },
        { "OPTIONS", "/", "GET, HEAD" },
        { "GET", "/v1/forecast", "POST" },
        { "DELETE", "/v1/analyze/batch", "POST" },
        { "POST", "/assets/app.js", "GET, HEAD" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        http_resp *r = http(port, cases[k].method, cases[k].path, NULL);
        if (r->status != 405 || strcmp(r->allow, cases[k].allow) != 0)
            fail_msg("%s %s: want 405 Allow '%s', got %ld '%s'", cases[k].method, cases[k].path,
                     cases[k].allow, r->status, r->allow);
        assert_non_null(strstr(error_message(r->body), cases[k].allow));
        kr_http_resp_free(r);
    }
}

/* ------------------------------------------------------------------ 3. paths, 4. horizon */

static void test_paths_exact_and_horizon_bound(void **state) {
    (void)state;
    kr_api_analyze_request q;
    kr_api_error e;
    const char *j = "{\"symbol\":\"AAPL\",\"horizon\":5,\"paths\":4,\"max_paths\":2}";
    assert_int_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &q, &e), KR_OK);
    assert_int_equal(q.params.paths, 4); /* never lowered to max_paths */
    kr_api_analyze_request_free(&q);
    j = "{\"symbol\":\"AAPL\",\"max_paths\":2}"; /* the adaptive default's first round is */
    assert_int_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &q, &e), KR_OK);
    assert_int_equal(q.params.paths, 2);
    assert_int_equal(q.params.max_paths, 2);
    kr_api_analyze_request_free(&q);
    j = "{\"symbol\":\"AAPL\",\"paths\":0}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &q, &e), KR_OK);
    assert_string_equal(e.field, "paths");
    j = "{\"symbol\":\"AAPL\",\"paths\":4,\"max_paths\":0}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &q, &e), KR_OK);
    assert_string_equal(e.field, "max_paths");
    j = "{\"symbol\":\"AAPL\",\"paths\":4,\"max_paths\":1e9}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &q, &e), KR_OK);
    assert_string_equal(e.field, "max_paths");

    /* Over HTTP the report says 4 paths ran. */
    http_resp *r = http(kr_server_port(g_srv), "POST", "/v1/analyze",
                        "{\"symbol\":\"AAPL\",\"horizon\":5,\"paths\":4,\"max_paths\":2}");
    assert_int_equal(r->status, 200);
    cJSON *root = kr_http_json(r);
    cJSON *params = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "reports"), 0),
                            "metadata"),
        "params");
    assert_int_equal(cJSON_GetObjectItem(params, "paths")->valueint, 4);
    cJSON_Delete(root);
    kr_http_resp_free(r);

    /* The horizon bound the docs state: max_context - 2 fits, max_context - 1 does not. */
    j = "{\"symbol\":\"AAPL\",\"max_context\":200,\"horizon\":198}";
    assert_int_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &q, &e), KR_OK);
    kr_api_analyze_request_free(&q);
    j = "{\"symbol\":\"AAPL\",\"max_context\":200,\"horizon\":199}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &q, &e), KR_OK);
    assert_string_equal(e.field, "horizon");
    assert_non_null(strstr(e.message, "max_context - 2 (198)"));
    /* The library's own checks are named too: a calibration lookback too short for its band. */
    j = "{\"symbol\":\"AAPL\",\"horizon\":20,\"lookback\":21,\"calibrate\":2}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &q, &e), KR_OK);
    assert_string_equal(e.field, "lookback");
    assert_non_null(strstr(e.message, "lookback: 21 is too short to calibrate"));
}

/* ------------------------------------------------------------------ 5. batch failure field */

static void test_batch_failure_names_field(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    static const char *const bodies[] = {
        "{\"symbols\":[\"NOPE\"]}",
        "{\"symbols\":[\"NOPE\",\"NADA\"]}",
        "{\"symbols\":[\"SHORT\"],\"horizon\":5,\"paths\":2}", /* too few rows */
        "{\"symbols\":[\"nope\",\"SHORT\"],\"interval\":\"1d\",\"horizon\":5}",
        "{\"symbols\":[\"AAPL\"],\"interval\":\"5m\"}", /* no such interval */
    };
    for (size_t k = 0; k < sizeof bodies / sizeof bodies[0]; k++) {
        http_resp *r = http(port, "POST", "/v1/analyze/batch", bodies[k]);
        if (r->status != 400 || strcmp(kr_http_error_field(r), "symbols[0]") != 0)
            fail_msg("%s: want 400 symbols[0], got %ld %s", bodies[k], r->status, r->body);
        assert_int_equal(strncmp(error_message(r->body), "symbols[0]: ", 12), 0);
        assert_null(strstr(error_message(r->body) + 12, "symbols[0]: ")); /* not twice */
        kr_http_resp_free(r);
    }
    /* Streamed: the error event carries the field too. */
    http_resp *r =
        http(port, "POST", "/v1/analyze/batch", "{\"symbols\":[\"NOPE\"],\"stream\":true}");
    assert_int_equal(r->status, 200);
    char ev[16][32];
    char *data[16];
    int n = kr_sse_events(r->body, ev, data, 16);
    assert_true(n >= 2);
    assert_string_equal(ev[n - 1], "error");
    cJSON *j = cJSON_Parse(data[n - 1]);
    cJSON *err = cJSON_GetObjectItem(j, "error");
    assert_string_equal(cJSON_GetObjectItem(err, "field")->valuestring, "symbols[0]");
    assert_int_equal(cJSON_GetObjectItem(err, "code")->valueint, 400);
    assert_int_equal(strncmp(cJSON_GetObjectItem(err, "message")->valuestring, "symbols[0]: ", 12),
                     0);
    cJSON_Delete(j);
    for (int k = 0; k < n; k++) free(data[k]);
    kr_http_resp_free(r);

    /* "all" over a store where nothing can be analysed: the field is "all". */
    char db[1100];
    snprintf(db, sizeof db, "%s/short.db", g_tmp);
    store_rows(db, "TINY", "1d", 3);
    kr_server *s = start(db, 0);
    r = http(kr_server_port(s), "POST", "/v1/analyze/batch", "{\"all\":true,\"horizon\":5}");
    assert_error(r, 400, "all");
    assert_int_equal(strncmp(error_message(r->body), "all: ", 5), 0);
    kr_http_resp_free(r);
    kr_server_free(s);
}

/* ------------------------------------------------------------------ 6. hidden targets */

static void test_static_hidden_targets(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    static const char *const refused[] = {
        "/assets/visible.txt", /* -> ../.secret */
        "/assets/config.txt", /* -> ../.git/config */
        "/assets/repo/config", /* a directory link into .git */
        "/assets/repo/../visible.txt", "/assets/%2e%2e/.secret", "/assets/visible.txt%00.js",
    };
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        http_resp *r = http(port, "GET", refused[k], NULL);
        if (r->status != 404 || (r->body && strstr(r->body, "secret")))
            fail_msg("%s: want 404, got %ld %s", refused[k], r->status, r->body ? r->body : "");
        kr_http_resp_free(r);
    }
    http_resp *r = http(port, "GET", "/assets/fine.js", NULL);
    assert_int_equal(r->status, 200);
    assert_string_equal(r->body, "export const x = 1;\n");
    kr_http_resp_free(r);

    char out[4096];
    assert_int_equal(kr_static_resolve(g_web, "/assets/visible.txt", out, sizeof out), 404);
    assert_int_equal(kr_static_resolve(g_web, "/assets/repo/config", out, sizeof out), 404);
    assert_int_equal(kr_static_resolve(g_web, "/assets/fine.js", out, sizeof out), 0);
    /* The root itself may sit under a hidden directory: only names below it count. */
    char hidden_root[1200], p[1300];
    snprintf(hidden_root, sizeof hidden_root, "%s/.local/web", g_tmp);
    snprintf(p, sizeof p, "%s/.local", g_tmp);
    mkdir(p, 0777);
    mkdir(hidden_root, 0777);
    snprintf(p, sizeof p, "%s/index.html", hidden_root);
    write_text(p, "ok");
    assert_int_equal(kr_static_resolve(hidden_root, "/", out, sizeof out), 0);
}

/* ------------------------------------------------------------------ 7. validators */

static void test_static_validators_pure(void **state) {
    (void)state;
    time_t t;
    const time_t want = 784111777; /* 1994-11-06 08:49:37 UTC */
    assert_int_equal(kr_http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT", &t), 0);
    assert_true(t == want);
    assert_int_equal(kr_http_date_parse("Sunday, 06-Nov-94 08:49:37 GMT", &t), 0);
    assert_true(t == want);
    assert_int_equal(kr_http_date_parse("Sun Nov  6 08:49:37 1994", &t), 0);
    assert_true(t == want);
    char buf[64];
    kr_http_date_format(want, buf, sizeof buf);
    assert_string_equal(buf, "Sun, 06 Nov 1994 08:49:37 GMT");
    assert_int_equal(kr_http_date_parse("Sat, 01 Jan 2000 00:00:00 GMT", &t), 0);
    assert_true(t == 946684800);
    static const char *const bad[] = {
        "",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, +6 Nov 1994 08:49:37 GMT",
        "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sun, 06 Foo 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:61:37 GMT",
        "Sun, 06 Nov 1960 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT trailing",
        "Sun, 06 Nov 1994 08:49:37 GM",
        "Sunday, 06-Nov-9x 08:49:37 GMT",
        "Sun Nov  x 08:49:37 1994",
        "1994-11-06T08:49:37Z",
        "784111777",
        ",",
        ", ",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        if (kr_http_date_parse(bad[k], &t) == 0) fail_msg("'%s' parsed as a date", bad[k]);
    assert_int_equal(kr_http_date_parse(NULL, &t), -1);
    char longs[300];
    memset(longs, 'A', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    assert_int_equal(kr_http_date_parse(longs, &t), -1);

    const char *etag = "W/\"1a-2b-3c.4d\"";
    assert_true(kr_static_etag_matches("W/\"1a-2b-3c.4d\"", etag));
    assert_true(kr_static_etag_matches("\"1a-2b-3c.4d\"", etag)); /* weak comparison */
    assert_true(kr_static_etag_matches("*", etag));
    assert_true(kr_static_etag_matches("  * ", etag));
    assert_true(kr_static_etag_matches("\"x\", W/\"1a-2b-3c.4d\"", etag));
    assert_true(kr_static_etag_matches("\"x\",W/\"1a-2b-3c.4d\" ,", etag));
    assert_false(kr_static_etag_matches("\"x\"", etag));
    assert_false(kr_static_etag_matches("", etag));
    assert_false(kr_static_etag_matches("W/", etag));
    assert_false(kr_static_etag_matches("\"1a-2b-3c.4d", etag)); /* unterminated */
    assert_false(kr_static_etag_matches("1a-2b-3c.4d", etag)); /* unquoted */
    assert_false(kr_static_etag_matches("\"x\"junk, \"1a-2b-3c.4d\"", etag));
    assert_false(kr_static_etag_matches("*x", etag));
    assert_false(kr_static_etag_matches("\"1a-2b-3c.4\"", etag));
    assert_false(kr_static_etag_matches(NULL, etag));
    assert_false(kr_static_etag_matches("*", NULL));
}

static void test_static_conditional_requests(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    http_resp *r = http(port, "GET", "/assets/app.js", NULL);
    assert_int_equal(r->status, 200);
    assert_int_equal(strncmp(r->etag, "W/\"", 3), 0);
    assert_int_equal(strlen(r->last_modified), 29);
    assert_string_equal(r->cache_control, "no-cache");
    assert_string_equal(r->accept_ranges, ""); /* no Range support, none advertised */
    char etag[128], lm[64], h1[256], h2[256];
    snprintf(etag, sizeof etag, "%s", r->etag);
    snprintf(lm, sizeof lm, "%s", r->last_modified);
    kr_http_resp_free(r);

    /* If-None-Match: the tag, the tag in a list, "*", the strong spelling: 304, no body, the
     * same validators. */
    const char *opaque = etag + 2;
    char list[300];
    snprintf(list, sizeof list, "\"other\", %s", etag);
    const char *matching[4] = { etag, list, "*", opaque };
    for (int k = 0; k < 4; k++) {
        snprintf(h1, sizeof h1, "If-None-Match: %s", matching[k]);
        r = http_h(port, "GET", "/assets/app.js", NULL, h1, NULL);
        if (r->status != 304) fail_msg("%s: want 304, got %ld", h1, r->status);
        assert_true(r->len == 0);
        assert_string_equal(r->etag, etag);
        assert_string_equal(r->last_modified, lm);
        assert_string_equal(r->cache_control, "no-cache");
        kr_http_resp_free(r);
    }
    /* HEAD the same way, and plain HEAD says what GET says. */
    snprintf(h1, sizeof h1, "If-None-Match: %s", etag);
    r = http_h(port, "HEAD", "/assets/app.js", NULL, h1, NULL);
    assert_int_equal(r->status, 304);
    assert_string_equal(r->etag, etag);
    kr_http_resp_free(r);
    r = http(port, "HEAD", "/assets/app.js", NULL);
    assert_int_equal(r->status, 200);
    assert_string_equal(r->etag, etag);
    assert_string_equal(r->last_modified, lm);
    assert_string_equal(r->content_length, "20");
    kr_http_resp_free(r);

    /* If-Modified-Since: at or after the file's time is a 304; before, or garbage, the file. */
    snprintf(h1, sizeof h1, "If-Modified-Since: %s", lm);
    r = http_h(port, "GET", "/assets/app.js", NULL, h1, NULL);
    assert_int_equal(r->status, 304);
    kr_http_resp_free(r);
    time_t t;
    assert_int_equal(kr_http_date_parse(lm, &t), 0);
    char earlier[64];
    kr_http_date_format(t - 1, earlier, sizeof earlier);
    snprintf(h1, sizeof h1, "If-Modified-Since: %s", earlier);
    r = http_h(port, "GET", "/assets/app.js", NULL, h1, NULL);
    assert_int_equal(r->status, 200);
    assert_string_equal(r->body, "export const x = 1;\n");
    kr_http_resp_free(r);

    /* Not matching, malformed, or If-None-Match that does not match beside an
     * If-Modified-Since that would (If-None-Match decides): the full answer. */
    snprintf(h2, sizeof h2, "If-Modified-Since: %s", lm);
    static const char *const full[] = {
        "If-None-Match: \"nope\"",
        "If-None-Match: garbage",
        "If-None-Match: W/",
        "If-None-Match: \"unterminated",
        "If-None-Match: ,,,",
        "If-Modified-Since: yesterday",
        "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMTX",
    };
    for (size_t k = 0; k < sizeof full / sizeof full[0]; k++) {
        r = http_h(port, "GET", "/assets/app.js", NULL, full[k], k == 0 ? h2 : NULL);
        if (r->status != 200) fail_msg("%s: want 200, got %ld", full[k], r->status);
        assert_string_equal(r->body, "export const x = 1;\n");
        assert_string_equal(r->etag, etag);
        kr_http_resp_free(r);
    }
    /* The page itself too, with its security headers on the 200. */
    r = http(port, "GET", "/", NULL);
    assert_int_equal(r->status, 200);
    snprintf(h1, sizeof h1, "If-None-Match: %s", r->etag);
    kr_http_resp_free(r);
    r = http_h(port, "GET", "/", NULL, h1, NULL);
    assert_int_equal(r->status, 304);
    kr_http_resp_free(r);

    /* A rebuilt file has another tag: the old one gets the new content. */
    char path[1200];
    snprintf(path, sizeof path, "%s/assets/app.js", g_web);
    write_text(path, "export const x = 22;\n");
    snprintf(h1, sizeof h1, "If-None-Match: %s", etag);
    r = http_h(port, "GET", "/assets/app.js", NULL, h1, NULL);
    assert_int_equal(r->status, 200);
    assert_string_equal(r->body, "export const x = 22;\n");
    assert_string_not_equal(r->etag, etag);
    kr_http_resp_free(r);
    write_text(path, "export const x = 1;\n");

    /* On the wire: a 304 has no body, and the connection stays usable. */
    int fd = kr_raw_connect(NULL, port);
    assert_true(fd >= 0);
    char req[512], buf[4096];
    snprintf(req, sizeof req,
             "GET /assets/app.js HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\n\r\n"
             "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_int_equal(kr_raw_send(fd, req, strlen(req)), 0);
    int closed = 0;
    kr_raw_read(fd, buf, sizeof buf, 10.0, &closed);
    close(fd);
    assert_int_equal(kr_raw_status(buf), 304);
    char *second = strstr(buf + 1, "HTTP/1.1 200");
    assert_non_null(second); /* the next answer follows the 304's headers directly */
    assert_non_null(strstr(buf, "\r\n\r\nHTTP/1.1 200"));
}

/* ------------------------------------------------------------------ 8. no store paths */

static char g_log[8192];
static void capture_log(void *user, const char *line) {
    (void)user;
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "%s\n", line);
}

static void test_errors_hide_store_path(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    /* A 400 from the store itself: rows without the volume the stored ones have. */
    char *body = NULL;
    {
        kr_sbuf b = { 0 };
        kr_sb_printf(&b, "[[\"2030-01-01\",1,2,1,1.5,10],[\"2030-01-02\",1,2,1,1.5,10]]");
        body = b.s;
    }
    http_resp *r = http(port, "POST", "/v1/candles/VOL?interval=1d", body);
    assert_int_equal(r->status, 200);
    kr_http_resp_free(r);
    free(body);
    r = http(port, "POST", "/v1/candles/VOL?interval=1d",
             "[[\"2030-01-03\",1,2,1,1.5],[\"2030-01-04\",1,2,1,1.5]]");
    assert_int_equal(r->status, 400);
    assert_null(strstr(r->body, g_tmp));
    assert_non_null(strstr(r->body, "candle store"));
    assert_non_null(strstr(r->body, "volume"));
    kr_http_resp_free(r);

    /* A store that is not a database: every route's 500 without the path, which the server
     * log keeps (the access log records what the client was told). */
    char db[1100], logf[1100];
    snprintf(db, sizeof db, "%s/broken.db", g_tmp);
    snprintf(logf, sizeof logf, "%s/access.log", g_tmp);
    write_text(db, "this is not an SQLite database, not at all, not even close......");
    kr_server_config c = kr_test_server_config();
    snprintf(c.db, sizeof c.db, "%s", db);
    snprintf(c.access_log, sizeof c.access_log, "%s", logf);
    g_log[0] = '\0';
    c.sched.log = capture_log;
    kr_server *s = kr_test_server_start(g_model, &c);
    port = kr_server_port(s);
    static const struct {
        const char *method, *path, *body;
    } reqs[] = {
        { "GET", "/v1/symbols", NULL },
        { "GET", "/v1/candles/AAPL", NULL },
        { "POST", "/v1/candles/AAPL?interval=1d",
          "[[\"2030-01-03\",1,2,1,1.5],[\"2030-01-04\",1,2,1,1.5]]" },
        { "POST", "/v1/analyze", "{\"symbol\":\"AAPL\"}" },
        { "POST", "/v1/analyze/batch", "{\"symbols\":[\"AAPL\"]}" },
        { "POST", "/v1/analyze/batch", "{\"all\":true}" },
        { "POST", "/v1/analyze", "{\"symbol\":\"AAPL\",\"stream\":true}" },
    };
    for (size_t k = 0; k < sizeof reqs / sizeof reqs[0]; k++) {
        r = http(port, reqs[k].method, reqs[k].path, reqs[k].body);
        if (r->status < 400 && !strstr(r->body ? r->body : "", "event: error"))
            fail_msg("%s %s: want an error, got %ld %s", reqs[k].method, reqs[k].path, r->status,
                     r->body ? r->body : "");
        if (r->body && (strstr(r->body, g_tmp) || strstr(r->body, "broken.db")))
            fail_msg("%s %s: the body names the store path: %s", reqs[k].method, reqs[k].path,
                     r->body);
        kr_http_resp_free(r);
    }
    kr_server_free(s);
    assert_non_null(strstr(g_log, db)); /* the operator sees which file */
    char text[16384];
    kr_test_slurp(logf, text, sizeof text);
    assert_non_null(strstr(text, "\"status\":500"));
    assert_null(strstr(text, db));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_respects_max_symbols),
        cmocka_unit_test(test_allow_lists_every_method),
        cmocka_unit_test(test_paths_exact_and_horizon_bound),
        cmocka_unit_test(test_batch_failure_names_field),
        cmocka_unit_test(test_static_hidden_targets),
        cmocka_unit_test(test_static_validators_pure),
        cmocka_unit_test(test_static_conditional_requests),
        cmocka_unit_test(test_errors_hide_store_path),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
