/*
 * The analyst's HTTP routes and the web page's static files, end to end: real servers
 * (src/server) on 127.0.0.1 with ephemeral ports, in this process, over the bundled demo model
 * and a fresh candle store, driven by libcurl.
 *
 *  - POST/GET /v1/candles/{symbol}: JSON and CSV upserts read back exactly; a bad row is a 400
 *    naming it and writes nothing; replacing by timestamp; every refusal names its field;
 *  - DELETE /v1/candles/{symbol}: a range or the whole series, the answer counting what went
 *    and what is left; refusals naming interval / from / to, 404 for no such series, 503 while
 *    another writer holds the lock, the series gone from /v1/symbols;
 *  - GET /v1/symbols;
 *  - POST /v1/analyze on a stored symbol equals the library's kr_analyze on the same rows; the
 *    Markdown and HTML formats; candles in the body;
 *  - POST /v1/analyze/batch: three symbols, one report, ranked by expected return;
 *  - the SSE shape: one progress event per phase and symbol, then the same result as the plain
 *    answer; a failure after the stream started is an "error" event; a client that leaves
 *    mid-stream, and a drain during an analysis;
 *  - static files: index and assets with their types, traversal ("..", %2e%2e, absolute,
 *    hidden names, a symlink out of the root) refused with 404;
 *  - no store configured (503), the API key on the new /v1 routes but not on the page, and
 *    `kronos serve --web-root` refusing a missing directory.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>

#include "http_client.h"
#include "raw_http.h"
#include "engine_helpers.h"
#include "server_fixtures.h"
#include "test_support.h"

#include "analyst/analyze.h"
#include "analyst/render.h"
#include "base/timeutil.h"
#include "kronos.h"
#include "series/candles.h"
#include "store/store.h"
#include "server/router.h"
#include "server/routes_analyst.h"
#include "server/server.h"
#include "server/static_files.h"

#define API_KEY "analyst-key-42"

static kr_model *g_model;
static kr_context *g_ctx; /* forecasts and analyses in the test itself */
static kr_candles *g_aapl, *g_msft;
static const char *g_tmp; /* kr_test_dir(): the store and the web root */
static char g_db[1024], g_web[1024];
static kr_server *g_srv; /* store + web root, no API key */

/* ------------------------------------------------------------------ HTTP client */

typedef kr_http_resp http_resp;

/* One request; path is sent as is (no "../" folding by curl). content_type NULL: JSON. */
static http_resp *http_ct(int port, const char *method, const char *path, const char *body,
                          const char *content_type, const char *auth) {
    http_resp *r = calloc(1, sizeof *r);
    CURLcode cc = kr_test_http_perform(port, method, path, body, content_type, auth, 0, r);
    if (cc != CURLE_OK) fail_msg("%s %s: curl: %s", method, path, curl_easy_strerror(cc));
    return r;
}

static http_resp *http(int port, const char *method, const char *path, const char *body) {
    return http_ct(port, method, path, body, NULL, NULL);
}

#define resp_free kr_http_resp_free
#define error_field kr_http_error_field
#define json_of kr_http_json

#define assert_error kr_assert_http_error

/* ------------------------------------------------------------------ bodies */

typedef kr_sbuf sbuf;
#define sb_printf kr_sb_printf

/* Rows [start, start+n) of c as JSON array rows (7 values). */
static char *rows_json(const kr_candles *c, int64_t start, int64_t n, int wrap) {
    sbuf b = { 0 };
    sb_printf(&b, "%s[", wrap ? "{\"candles\":" : "");
    for (int64_t i = start; i < start + n; i++) {
        char ts[32];
        kr_format_timestamp(c->timestamps[i], c->date_only, ts, sizeof ts);
        const double *v = c->values + i * 6;
        sb_printf(&b, "%s[\"%s\",%.17g,%.17g,%.17g,%.17g,%.17g,%.17g]", i > start ? "," : "", ts,
                  v[0], v[1], v[2], v[3], v[4], v[5]);
    }
    sb_printf(&b, "]%s", wrap ? "}" : "");
    return b.s;
}

static char *rows_csv(const kr_candles *c, int64_t start, int64_t n) {
    sbuf b = { 0 };
    sb_printf(&b, "timestamps,open,high,low,close,volume,amount\n");
    for (int64_t i = start; i < start + n; i++) {
        char ts[32];
        kr_format_timestamp(c->timestamps[i], c->date_only, ts, sizeof ts);
        const double *v = c->values + i * 6;
        sb_printf(&b, "%s,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g\n", ts, v[0], v[1], v[2], v[3], v[4],
                  v[5]);
    }
    return b.s;
}

#define sse_events kr_sse_events

/* A report set's JSON without what differs between two runs of the same analysis: the
 * generation time and the timings. */
static cJSON *stable_report(const char *text) {
    cJSON *root = cJSON_Parse(text);
    if (!root) fail_msg("report is not JSON: %.200s", text);
    cJSON_DeleteItemFromObject(root, "generated_at");
    cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(root, "reports")) {
        cJSON_DeleteItemFromObject(cJSON_GetObjectItem(r, "metadata"), "timing");
    }
    return root;
}

/* ------------------------------------------------------------------ fixtures */

static kr_server_config base_config(void) { return kr_test_server_config(); }

static void write_text(const char *dir, const char *rel, const char *text) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    if (kr_test_write_file(path, text, strlen(text)) != 0) fail_msg("cannot write %s", path);
}

static void store_symbol(const char *symbol, const char *interval, const char *csv) {
    kr_candles *c = NULL;
    kr_store *st = NULL;
    kr_error err = { 0 };
    if (kr_candles_read_csv(csv, &c, &err) != KR_OK || kr_store_open(g_db, &st, &err) != KR_OK ||
        kr_store_upsert(st, symbol, interval, c, &err) != KR_OK)
        fail_msg("store %s: %s", symbol, err.message);
    kr_store_close(st);
    kr_candles_free(c);
}

static int setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    kr_error err = { 0 };
    if (!(g_model = kr_test_demo_model(NULL))) return -1;
    if (kr_candles_read_csv(KR_SOURCE_DIR "/data/AAPL_1d.csv", &g_aapl, &err) != KR_OK ||
        kr_candles_read_csv(KR_SOURCE_DIR "/data/MSFT_1d.csv", &g_msft, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = 2;
    if (kr_context_create(g_model, &cp, &g_ctx, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    g_tmp = kr_test_dir();
    snprintf(g_db, sizeof g_db, "%s/store.db", g_tmp);
    snprintf(g_web, sizeof g_web, "%s/web", g_tmp);
    char dir[1100];
    mkdir(g_web, 0777);
    snprintf(dir, sizeof dir, "%s/assets", g_web);
    mkdir(dir, 0777);
    write_text(g_web, "index.html", "<!doctype html><title>kronos</title>");
    write_text(g_web, "assets/app.js", "export const x = 1;\n");
    write_text(g_web, "assets/style.css", "body{}\n");
    write_text(g_web, "assets/.hidden", "no");
    write_text(g_tmp, "secret.txt", "top secret");
    /* A link out of the root must not be followed; one inside it may. */
    char target[1100], link[1100];
    snprintf(target, sizeof target, "%s/secret.txt", g_tmp);
    snprintf(link, sizeof link, "%s/assets/leak.txt", g_web);
    if (symlink(target, link) != 0) return -1;
    snprintf(target, sizeof target, "%s/assets/app.js", g_web);
    snprintf(link, sizeof link, "%s/assets/alias.js", g_web);
    if (symlink(target, link) != 0) return -1;

    store_symbol("AAPL", "1d", KR_SOURCE_DIR "/data/AAPL_1d.csv");
    store_symbol("MSFT", "1d", KR_SOURCE_DIR "/data/MSFT_1d.csv");
    store_symbol("BTCUSDT", "1h", KR_SOURCE_DIR "/data/BTCUSDT_1h.csv");

    kr_server_config c = base_config();
    snprintf(c.db, sizeof c.db, "%s", g_db);
    snprintf(c.web_root, sizeof c.web_root, "%s", g_web);
    if (kr_server_create(g_model, &c, &g_srv, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_server_free(g_srv);
    kr_context_free(g_ctx);
    g_ctx = NULL;
    kr_model_free(g_model);
    kr_candles_free(g_aapl);
    kr_candles_free(g_msft);
    curl_global_cleanup();
    return 0;
}

/* ------------------------------------------------------------------ tests */

static void test_router(void **state) {
    (void)state;
    const kr_route *r;
    assert_int_equal(kr_route_match("GET", "/v1/candles/AAPL?limit=3", &r), 200);
    assert_int_equal(r->id, KR_ROUTE_CANDLES_GET);
    assert_string_equal(kr_route_label(r), "/v1/candles/"); /* one series for every symbol */
    assert_int_equal(kr_route_match("POST", "/v1/candles/AAPL", &r), 200);
    assert_int_equal(r->id, KR_ROUTE_CANDLES_POST);
    assert_int_equal(kr_route_match("HEAD", "/v1/candles/AAPL", &r), 200);
    assert_int_equal(kr_route_match("DELETE", "/v1/candles/AAPL?interval=1d", &r), 200);
    assert_int_equal(r->id, KR_ROUTE_CANDLES_DELETE);
    assert_int_equal(r->v1, 1); /* the API key, as for the other writes */
    assert_int_equal(kr_route_match("DELETE", "/v1/symbols", &r), 405);
    assert_int_equal(kr_route_match("GET", "/v1/candles/", &r), 404);
    assert_int_equal(kr_route_match("GET", "/v1/candles", &r), 404);
    assert_int_equal(kr_route_match("POST", "/v1/analyze", &r), 200);
    assert_int_equal(r->id, KR_ROUTE_ANALYZE);
    assert_int_equal(kr_route_match("POST", "/v1/analyze/batch", &r), 200);
    assert_int_equal(r->id, KR_ROUTE_ANALYZE_BATCH);
    assert_int_equal(kr_route_match("GET", "/v1/analyze", &r), 405);
    /* The brief's name: an alias with the /v1 rules (API key, drain). */
    assert_int_equal(kr_route_match("POST", "/analyze", &r), 200);
    assert_int_equal(r->id, KR_ROUTE_ANALYZE_ALIAS);
    assert_int_equal(r->v1, 1);
    assert_int_equal(kr_route_match("GET", "/analyze", &r), 405);
    assert_int_equal(kr_route_match("GET", "/v1/symbols", &r), 200);
    assert_int_equal(kr_route_match("GET", "/", &r), 200);
    assert_int_equal(r->id, KR_ROUTE_PAGE);
    assert_int_equal(kr_route_match("GET", "/assets/app.js", &r), 200);
    assert_int_equal(r->id, KR_ROUTE_ASSETS);
    assert_int_equal(kr_route_match("POST", "/", &r), 405);
    assert_int_equal(kr_route_match("GET", "/index.html", &r), 404);
}

/* A second server on the test store whose requests end after 2 s: a request that waits for
 * another writer's lock gives up by its deadline (the store's busy timeout, 10 s, is longer),
 * so the checks of a locked store wait 2 s instead of 10. */
static kr_server *short_deadline_server(void) {
    kr_server_config c = base_config();
    snprintf(c.db, sizeof c.db, "%s", g_db);
    c.request_timeout_s = 2;
    kr_server *s = NULL;
    kr_error err = { 0 };
    if (kr_server_create(g_model, &c, &s, &err) != KR_OK) fail_msg("%s", err.message);
    return s;
}

/* Another writer holding the store's lock past the request's deadline: the upsert is a 503
 * with Retry-After (nothing written; a retry succeeds), not a 500 ("a bug, report it"). */
static void test_candles_writer_busy(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    kr_server *busy = short_deadline_server();
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(g_db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    char *body = rows_json(g_aapl, 0, 3, 1);
    http_resp *r = http(kr_server_port(busy), "POST", "/v1/candles/BUSY.X?interval=1d", body);
    assert_int_equal(r->status, 503);
    assert_string_equal(r->retry_after, "1");
    assert_non_null(strstr(r->body, "locked by another writer"));
    assert_null(strstr(r->body, g_db)); /* the store's path stays on the server */
    assert_non_null(strstr(r->body, "candle store"));
    resp_free(r);
    assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    kr_server_free(busy);
    r = http(port, "POST", "/v1/candles/BUSY.X?interval=1d", body);
    assert_int_equal(r->status, 200);
    resp_free(r);
    free(body);
}

static void test_candles_round_trip(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);

    /* 300 JSON rows in, the same 300 rows out, every number exactly. */
    char *body = rows_json(g_aapl, 0, 300, 1);
    http_resp *r = http(port, "POST", "/v1/candles/RT.X?interval=1d", body);
    free(body);
    assert_int_equal(r->status, 200);
    cJSON *j = json_of(r);
    assert_int_equal(cJSON_GetObjectItem(j, "written")->valueint, 300);
    assert_int_equal(cJSON_GetObjectItem(j, "new")->valueint, 300);
    assert_int_equal(cJSON_GetObjectItem(j, "rows")->valueint, 300);
    assert_string_equal(cJSON_GetObjectItem(j, "first_timestamp")->valuestring, "2014-01-02");
    cJSON_Delete(j);
    resp_free(r);
    /* The newest 10 again, in another case and another spelling of the interval: the same
     * series, nothing new, nothing replaced, and the answer names it as stored. */
    body = rows_json(g_aapl, 290, 10, 1);
    r = http(port, "POST", "/v1/candles/rt.x?interval=24h", body);
    free(body);
    assert_int_equal(r->status, 200);
    j = json_of(r);
    assert_string_equal(cJSON_GetObjectItem(j, "symbol")->valuestring, "RT.X");
    assert_string_equal(cJSON_GetObjectItem(j, "interval")->valuestring, "1d");
    assert_int_equal(cJSON_GetObjectItem(j, "new")->valueint, 0);
    assert_int_equal(cJSON_GetObjectItem(j, "replaced")->valueint, 0);
    assert_int_equal(cJSON_GetObjectItem(j, "unchanged")->valueint, 10);
    assert_int_equal(cJSON_GetObjectItem(j, "rows")->valueint, 300);
    cJSON_Delete(j);
    resp_free(r);

    r = http(port, "GET", "/v1/candles/RT.X?interval=1d&limit=300", NULL);
    assert_int_equal(r->status, 200);
    assert_string_equal(r->content_type, "application/json");
    j = json_of(r);
    cJSON *rows = cJSON_GetObjectItem(j, "candles");
    assert_int_equal(cJSON_GetArraySize(rows), 300);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "columns")), 7);
    int i = 0;
    cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        char ts[32];
        kr_format_timestamp(g_aapl->timestamps[i], 1, ts, sizeof ts);
        assert_string_equal(cJSON_GetArrayItem(row, 0)->valuestring, ts);
        for (int k = 0; k < 6; k++)
            assert_true(cJSON_GetArrayItem(row, k + 1)->valuedouble == g_aapl->values[i * 6 + k]);
        i++;
    }
    cJSON_Delete(j);
    resp_free(r);

    /* A range (both ends included), its newest `limit`: rows 100..109, then 105..109; one with
     * nothing in it is a 404 naming it, a bad end a 400 naming the parameter. */
    char ts_a[32], ts_b[32], path[160];
    kr_format_timestamp(g_aapl->timestamps[100], 1, ts_a, sizeof ts_a);
    kr_format_timestamp(g_aapl->timestamps[109], 1, ts_b, sizeof ts_b);
    for (int limit = 0; limit <= 5; limit += 5) {
        snprintf(path, sizeof path, "/v1/candles/RT.X?from=%s&to=%s%s", ts_a, ts_b,
                 limit ? "&limit=5" : "");
        r = http(port, "GET", path, NULL);
        assert_int_equal(r->status, 200);
        j = json_of(r);
        rows = cJSON_GetObjectItem(j, "candles");
        assert_int_equal(cJSON_GetArraySize(rows), limit ? 5 : 10);
        kr_format_timestamp(g_aapl->timestamps[limit ? 105 : 100], 1, ts_a, sizeof ts_a);
        assert_string_equal(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, 0), 0)->valuestring, ts_a);
        kr_format_timestamp(g_aapl->timestamps[100], 1, ts_a, sizeof ts_a);
        cJSON_Delete(j);
        resp_free(r);
    }
    /* Accept: text/csv: the same rows as CSV, which POST takes back with nothing changed. */
    {
        http_resp *rc = calloc(1, sizeof *rc);
        rc->send_headers[0] = "Accept: text/csv";
        snprintf(path, sizeof path, "/v1/candles/RT.X?from=%s&to=%s", ts_a, ts_b);
        if (kr_test_http_perform(port, "GET", path, NULL, NULL, NULL, 0, rc) != CURLE_OK)
            fail_msg("GET csv");
        assert_int_equal(rc->status, 200);
        assert_non_null(strstr(rc->content_type, "text/csv"));
        assert_int_equal(strncmp(rc->body, "timestamps,open,high,low,close,volume,amount\n", 45),
                         0);
        int lines = 0;
        for (const char *q = rc->body; *q; q++) lines += *q == '\n';
        assert_int_equal(lines, 11);
        r = http_ct(port, "POST", "/v1/candles/RT.X?interval=1d", rc->body, "text/csv", NULL);
        assert_int_equal(r->status, 200);
        j = json_of(r);
        assert_int_equal(cJSON_GetObjectItem(j, "unchanged")->valueint, 10);
        cJSON_Delete(j);
        resp_free(r);
        resp_free(rc);
    }
    r = http(port, "GET", "/v1/candles/RT.X?from=2100-01-01", NULL);
    assert_error(r, 404, "");
    assert_non_null(strstr(r->body, "no candles stored for RT.X 1d from 2100-01-01"));
    resp_free(r);
    r = http(port, "GET", "/v1/candles/RT.X?to=yesterday", NULL);
    assert_error(r, 400, "to");
    resp_free(r);
    /* The parameter is named once ("from: from: cannot parse" before). */
    r = http(port, "GET", "/v1/candles/RT.X?from=x", NULL);
    assert_error(r, 400, "from");
    if (!strstr(r->body, "\"from: cannot parse") || strstr(r->body, "from: from:"))
        fail_msg("%s", r->body);
    resp_free(r);
    /* Empty ends are refused, not read as open: this DELETE once took the whole series. */
    r = http(port, "DELETE", "/v1/candles/RT.X?interval=1d&from=&to=", NULL);
    assert_error(r, 400, "from");
    resp_free(r);
    r = http(port, "GET", "/v1/candles/RT.X?limit=1", NULL);
    assert_int_equal(r->status, 200);
    resp_free(r);

    /* A read in another case names the series as stored, as the upsert's answer does. */
    r = http(port, "GET", "/v1/candles/rt.x?limit=1", NULL);
    assert_int_equal(r->status, 200);
    j = json_of(r);
    assert_string_equal(cJSON_GetObjectItem(j, "symbol")->valuestring, "RT.X");
    cJSON_Delete(j);
    resp_free(r);

    /* ?market= sets the symbol's calendar (as kronos ingest --market), shown by the answer and
     * by /v1/symbols; an unknown market is a 400 naming it, and nothing is written. */
    body = rows_json(g_aapl, 298, 2, 1);
    r = http(port, "POST", "/v1/candles/RT.X?interval=1d&market=nope", body);
    assert_int_equal(r->status, 400);
    assert_string_equal(error_field(r), "market");
    resp_free(r);
    r = http(port, "POST", "/v1/candles/rt.x?interval=1d&market=nyse", body);
    free(body);
    assert_int_equal(r->status, 200);
    j = json_of(r);
    assert_string_equal(cJSON_GetObjectItem(j, "market")->valuestring, "NYSE");
    assert_int_equal(cJSON_GetObjectItem(j, "unchanged")->valueint, 2);
    cJSON_Delete(j);
    resp_free(r);
    r = http(port, "GET", "/v1/symbols", NULL);
    assert_int_equal(r->status, 200);
    j = json_of(r);
    int listed = 0;
    cJSON *entry;
    cJSON_ArrayForEach(entry, cJSON_GetObjectItem(j, "data")) {
        if (strcmp(cJSON_GetObjectItem(entry, "symbol")->valuestring, "RT.X") != 0) continue;
        assert_string_equal(cJSON_GetObjectItem(entry, "market")->valuestring, "NYSE");
        listed++;
    }
    assert_int_equal(listed, 1);
    cJSON_Delete(j);
    resp_free(r);

    /* ?limit= keeps the newest rows. */
    r = http(port, "GET", "/v1/candles/RT.X?limit=2", NULL);
    j = json_of(r);
    rows = cJSON_GetObjectItem(j, "candles");
    assert_int_equal(cJSON_GetArraySize(rows), 2);
    char last[32];
    kr_format_timestamp(g_aapl->timestamps[299], 1, last, sizeof last);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, 1), 0)->valuestring, last);
    cJSON_Delete(j);
    resp_free(r);

    /* A bad row among 50 new ones: 400 naming it, and nothing of the 50 is written. */
    body = rows_json(g_aapl, 300, 50, 1);
    char *p = body;
    for (int k = 0; k < 17; k++) p = strstr(p + 1, "],[");
    p = strchr(p + 3, ','); /* row 17's open */
    p = strchr(p + 1, ','); /* its high */
    memcpy(p + 1, "0.01", 4); /* high 0.01...: below its low */
    r = http(port, "POST", "/v1/candles/RT.X?interval=1d", body);
    free(body);
    assert_error(r, 400, "candles[17].high");
    resp_free(r);
    r = http(port, "GET", "/v1/symbols", NULL);
    assert_non_null(strstr(
        r->body, "\"symbol\":\"RT.X\",\"interval\":\"1d\",\"market\":\"NYSE\",\"rows\":300,"));
    resp_free(r);

    /* CSV: 10 more rows, then the same rows again with another close (replaced by timestamp). */
    char *csv = rows_csv(g_aapl, 300, 10);
    r = http_ct(port, "POST", "/v1/candles/RT.X?interval=1d", csv, "text/csv", NULL);
    assert_int_equal(r->status, 200);
    j = json_of(r);
    assert_int_equal(cJSON_GetObjectItem(j, "rows")->valueint, 310);
    cJSON_Delete(j);
    resp_free(r);
    kr_candles *changed = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_candles_parse_csv(csv, strlen(csv), "t", &changed, &err), KR_OK);
    changed->values[9 * 6 + 3] = changed->values[9 * 6 + 1]; /* close = high */
    char *csv2 = rows_csv(changed, 0, 10);
    r = http_ct(port, "POST", "/v1/candles/RT.X?interval=1d", csv2, "text/csv; charset=utf-8",
                NULL);
    assert_int_equal(r->status, 200);
    resp_free(r);
    r = http(port, "GET", "/v1/candles/RT.X?limit=1", NULL);
    j = json_of(r);
    assert_true(cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "candles"), 0), 4)
                    ->valuedouble == changed->values[9 * 6 + 1]);
    assert_int_equal(cJSON_GetObjectItem(j, "rows")->valueint, 1);
    cJSON_Delete(j);
    resp_free(r);
    kr_candles_free(changed);
    free(csv2);
    free(csv);

    /* A bad CSV line: 400 on "body", the message names the line. */
    r = http_ct(port, "POST", "/v1/candles/RT.X?interval=1d",
                "timestamps,open,high,low,close\n2030-01-01,1,2,1,1.5\n2030-01-02,1,0.5,1,1\n",
                "text/csv", NULL);
    assert_error(r, 400, "body");
    assert_non_null(strstr(r->body, "line 3"));
    resp_free(r);

    /* Every refusal names its field. */
    r = http(port, "POST", "/v1/candles/RT.X", "[]");
    assert_error(r, 400, "interval");
    resp_free(r);
    r = http(port, "POST", "/v1/candles/RT.X?interval=1x", "[]");
    assert_error(r, 400, "interval");
    resp_free(r);
    r = http(port, "POST", "/v1/candles/bad$name?interval=1d", "[]");
    assert_error(r, 400, "symbol");
    resp_free(r);
    r = http(port, "POST", "/v1/candles/RT.X?interval=1d",
             "{\"candles\":[[\"2030-01-01\",1,2,1,1.5]]}");
    assert_error(r, 400, "candles"); /* one JSON row: use CSV */
    assert_non_null(strstr(r->body, "text/csv"));
    resp_free(r);
    r = http(port, "POST", "/v1/candles/RT.X?interval=1d", "{\"rows\":[]}");
    assert_error(r, 400, "rows");
    resp_free(r);
    r = http(port, "POST", "/v1/candles/RT.X?interval=1d", "{\"candles\": [1,");
    assert_error(r, 400, "body");
    resp_free(r);
    r = http(port, "GET", "/v1/candles/RT.X?limit=0", NULL);
    assert_error(r, 400, "limit");
    resp_free(r);
    r = http(port, "GET", "/v1/candles/NOPE", NULL);
    assert_error(r, 404, "");
    resp_free(r);
    r = http(port, "GET", "/v1/candles/RT.X?interval=5m", NULL);
    assert_error(r, 404, "");
    assert_non_null(strstr(r->body, "stored: RT.X 1d"));
    resp_free(r);
}

/* The symbols /v1/symbols lists under symbol (any interval). */
static int listed(int port, const char *symbol) {
    http_resp *r = http(port, "GET", "/v1/symbols", NULL);
    assert_int_equal(r->status, 200);
    cJSON *j = json_of(r);
    int n = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "data")) {
        n += !strcmp(cJSON_GetObjectItem(e, "symbol")->valuestring, symbol);
    }
    cJSON_Delete(j);
    resp_free(r);
    return n;
}

static void test_candles_delete(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    char *body = rows_json(g_aapl, 0, 30, 1);
    http_resp *r = http(port, "POST", "/v1/candles/DEL.X?interval=1d", body);
    free(body);
    assert_int_equal(r->status, 200);
    resp_free(r);
    char first[32], last[32], path[256];
    kr_format_timestamp(g_aapl->timestamps[10], 1, first, sizeof first);
    kr_format_timestamp(g_aapl->timestamps[19], 1, last, sizeof last);

    /* Hostile and malformed requests: nothing deleted. */
    static const struct {
        const char *path, *field;
        int status;
    } bad[] = {
        { "/v1/candles/DEL.X", "interval", 400 },
        { "/v1/candles/DEL.X?interval=1x", "interval", 400 },
        { "/v1/candles/DEL%20X?interval=1d", "symbol", 400 },
        { "/v1/candles/DEL.X?interval=1d&from=2014-13-01", "from", 400 },
        { "/v1/candles/DEL.X?interval=1d&to=yesterday", "to", 400 },
        { "/v1/candles/DEL.X?interval=1d&to=1704412800123.5", "to", 400 },
        { "/v1/candles/DEL.X?interval=1d&from=2015-01-02&to=2014-01-02", "from", 400 },
        { "/v1/candles/DEL.X?interval=1d&from=3000-01-01", "from", 400 },
    };
    char long_from[4200]; /* oversized: a clean 400, its text cut in the message */
    int w = snprintf(long_from, sizeof long_from, "/v1/candles/DEL.X?interval=1d&from=");
    memset(long_from + w, '7', sizeof long_from - (size_t)w - 1);
    long_from[sizeof long_from - 1] = '\0';
    r = http(port, "DELETE", long_from, NULL);
    assert_error(r, 400, "from");
    assert_true(strlen(r->body) < 600);
    resp_free(r);
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        r = http(port, "DELETE", bad[k].path, NULL);
        if (r->status != bad[k].status)
            fail_msg("%s: want %d, got %ld %s", bad[k].path, bad[k].status, r->status, r->body);
        assert_error(r, bad[k].status, bad[k].field);
        resp_free(r);
    }
    r = http(port, "DELETE", "/v1/candles/NOPE.X?interval=1d", NULL);
    assert_int_equal(r->status, 404);
    assert_non_null(strstr(r->body, "nothing was deleted"));
    resp_free(r);

    /* Ten rows out of the middle, the symbol in another case and the interval as 24h. */
    snprintf(path, sizeof path, "/v1/candles/del.x?interval=24h&from=%s&to=%s", first, last);
    r = http(port, "DELETE", path, NULL);
    assert_int_equal(r->status, 200);
    cJSON *j = json_of(r);
    assert_string_equal(cJSON_GetObjectItem(j, "object")->valuestring, "candles.delete");
    assert_string_equal(cJSON_GetObjectItem(j, "symbol")->valuestring, "DEL.X");
    assert_string_equal(cJSON_GetObjectItem(j, "interval")->valuestring, "1d");
    assert_int_equal(cJSON_GetObjectItem(j, "deleted")->valueint, 10);
    assert_string_equal(cJSON_GetObjectItem(j, "first_deleted")->valuestring, first);
    assert_string_equal(cJSON_GetObjectItem(j, "last_deleted")->valuestring, last);
    assert_int_equal(cJSON_GetObjectItem(j, "rows")->valueint, 20);
    cJSON_Delete(j);
    resp_free(r);
    /* Again: the series is there, the range empty: 200 and 0. */
    r = http(port, "DELETE", path, NULL);
    assert_int_equal(r->status, 200);
    j = json_of(r);
    assert_int_equal(cJSON_GetObjectItem(j, "deleted")->valueint, 0);
    assert_null(cJSON_GetObjectItem(j, "first_deleted"));
    assert_int_equal(cJSON_GetObjectItem(j, "rows")->valueint, 20);
    cJSON_Delete(j);
    resp_free(r);
    r = http(port, "GET", "/v1/candles/DEL.X?interval=1d", NULL);
    j = json_of(r);
    assert_int_equal(cJSON_GetObjectItem(j, "rows")->valueint, 20);
    cJSON_Delete(j);
    resp_free(r);

    /* Another writer holds the lock: 503 with Retry-After, the store's path not told. */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(g_db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    kr_server *busy = short_deadline_server();
    r = http(kr_server_port(busy), "DELETE", "/v1/candles/DEL.X?interval=1d", NULL);
    assert_int_equal(r->status, 503);
    assert_string_equal(r->retry_after, "1");
    assert_non_null(strstr(r->body, "nothing was deleted"));
    assert_null(strstr(r->body, g_db));
    resp_free(r);
    kr_server_free(busy);
    assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    /* The rest: the series is gone, also from /v1/symbols. */
    assert_int_equal(listed(port, "DEL.X"), 1);
    r = http(port, "DELETE", "/v1/candles/DEL.X?interval=1d", NULL);
    assert_int_equal(r->status, 200);
    j = json_of(r);
    assert_int_equal(cJSON_GetObjectItem(j, "deleted")->valueint, 20);
    assert_int_equal(cJSON_GetObjectItem(j, "rows")->valueint, 0);
    assert_null(cJSON_GetObjectItem(j, "first_timestamp"));
    cJSON_Delete(j);
    resp_free(r);
    assert_int_equal(listed(port, "DEL.X"), 0);
    r = http(port, "GET", "/v1/candles/DEL.X", NULL);
    assert_int_equal(r->status, 404);
    resp_free(r);
}

static void test_symbols(void **state) {
    (void)state;
    http_resp *r = http(kr_server_port(g_srv), "GET", "/v1/symbols", NULL);
    assert_int_equal(r->status, 200);
    cJSON *j = json_of(r);
    assert_string_equal(cJSON_GetObjectItem(j, "object")->valuestring, "list");
    int seen = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "data")) {
        const char *sym = cJSON_GetObjectItem(e, "symbol")->valuestring;
        if (!strcmp(sym, "AAPL")) {
            seen++;
            assert_string_equal(cJSON_GetObjectItem(e, "interval")->valuestring, "1d");
            assert_int_equal(cJSON_GetObjectItem(e, "rows")->valueint, (int)g_aapl->n);
            assert_string_equal(cJSON_GetObjectItem(e, "last_timestamp")->valuestring,
                                "2025-08-01");
        }
        if (!strcmp(sym, "BTCUSDT")) {
            seen++;
            assert_non_null(strchr(cJSON_GetObjectItem(e, "last_timestamp")->valuestring, ':'));
        }
    }
    assert_int_equal(seen, 2);
    cJSON_Delete(j);
    resp_free(r);
}

/* What kr_analyze gives for the stored AAPL rows with these parameters. */
static char *library_report(const char *symbol, int horizon, int paths, uint64_t seed) {
    kr_store *st = NULL;
    kr_candles *c = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_store_open(g_db, &st, &err), KR_OK);
    assert_int_equal(kr_store_read(st, symbol, "1d", KR_API_CANDLES_MAX, &c, &err), KR_OK);
    kr_store_close(st);
    kr_analyze_params p = kr_analyze_default_params();
    p.horizon = horizon;
    p.paths = paths;
    p.max_paths = paths; /* "paths": N over HTTP is exactly N */
    p.seed = seed;
    p.model_name = "kronos-demo";
    /* The server names its model directories from the checkpoint's own directory on. */
    p.predictor_dir = "kronos-demo/predictor";
    p.tokenizer_dir = "kronos-demo/tokenizer";
    kr_analyze_item it = { symbol, "1d", c, NULL, NULL };
    kr_report_set *set = NULL;
    assert_int_equal(kr_analyze(g_ctx, &it, 1, &p, &set, &err), KR_OK);
    char *text = NULL;
    assert_int_equal(kr_render_json(set, &text, &err), KR_OK);
    kr_report_set_free(set);
    kr_candles_free(c);
    return text;
}

static void test_analyze_stored(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    http_resp *r =
        http(port, "POST", "/v1/analyze",
             "{\"symbol\":\"AAPL\",\"horizon\":10,\"paths\":8,\"seed\":\"7\",\"format\":null}");
    assert_int_equal(r->status, 200);
    assert_string_equal(r->content_type, "application/json");
    assert_null(strchr(r->body, '\n')); /* compact over HTTP */
    cJSON *got = stable_report(r->body);
    char *lib = library_report("AAPL", 10, 8, 7);
    cJSON *want = stable_report(lib);
    free(lib);
    /* The server's numbers are the library's, to the last bit (cJSON prints doubles exactly). */
    if (!cJSON_Compare(got, want, 1)) {
        char *a = cJSON_PrintUnformatted(got), *b = cJSON_PrintUnformatted(want);
        fail_msg("server report differs from kr_analyze:\n%.600s\n%.600s", a, b);
    }
    cJSON *rep = cJSON_GetArrayItem(cJSON_GetObjectItem(got, "reports"), 0);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "forecast"), "horizon")->valueint,
                     10);
    /* Where the server keeps its files is not told to clients, in any format. */
    assert_null(strstr(r->body, KR_SOURCE_DIR));
    cJSON *model = cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "metadata"), "model");
    assert_non_null(model);
    assert_string_equal(cJSON_GetObjectItem(model, "predictor_dir")->valuestring,
                        "kronos-demo/predictor");
    assert_string_equal(cJSON_GetObjectItem(model, "tokenizer_dir")->valuestring,
                        "kronos-demo/tokenizer");
    cJSON_Delete(got);
    cJSON_Delete(want);
    resp_free(r);

    r = http(port, "POST", "/v1/analyze",
             "{\"symbol\":\"AAPL\",\"horizon\":5,\"paths\":4,\"format\":\"md\"}");
    assert_int_equal(r->status, 200);
    assert_string_equal(r->content_type, "text/markdown; charset=utf-8");
    assert_non_null(strstr(r->body, "AAPL"));
    assert_null(strstr(r->body, KR_SOURCE_DIR));
    resp_free(r);
    r = http(port, "POST", "/v1/analyze",
             "{\"symbol\":\"AAPL\",\"horizon\":5,\"paths\":4,\"format\":\"html\"}");
    assert_int_equal(r->status, 200);
    assert_string_equal(r->content_type, "text/html; charset=utf-8");
    assert_non_null(strstr(r->body, "<svg"));
    assert_null(strstr(r->body, KR_SOURCE_DIR));
    /* Served from the page's origin, the report runs nothing: no script, no request. */
    assert_non_null(strstr(r->csp, "default-src 'none'"));
    assert_non_null(strstr(r->csp, "sandbox"));
    assert_string_equal(r->content_type_options, "nosniff");
    resp_free(r);

    /* Refusals name the field. */
    static const struct {
        const char *body, *field;
    } bad[] = {
        { "{\"symbol\":\"NOPE\"}", "symbol" },
        { "{\"symbol\":\"AAPL\",\"interval\":\"1h\"}", "symbol" },
        { "{\"symbol\":\"AAPL\",\"horizon\":0}", "horizon" },
        { "{\"symbol\":\"AAPL\",\"horizon\":600}", "horizon" },
        { "{\"symbol\":\"AAPL\",\"paths\":100000}", "paths" },
        { "{\"symbol\":\"AAPL\",\"calibrate\":51}", "calibrate" },
        { "{\"symbol\":\"AAPL\",\"format\":\"pdf\"}", "format" },
        { "{\"symbol\":\"AAPL\",\"seed\":-1}", "seed" },
        { "{\"symbol\":\"AAPL\",\"top_p\":0}", "top_p" },
        { "{\"symbol\":\"AAPL\",\"horizn\":5}", "horizn" },
        { "{\"symbol\":\"AAPL\",\"symbols\":[\"MSFT\"]}", "symbols" },
        { "{\"symbol\":\"AAPL\",\"symbol\":\"MSFT\"}", "symbol" },
        { "{\"horizon\":5}", "symbol" },
        { "{\"symbol\":\"AAPL\",\"columns\":[\"timestamps\"]}", "columns" },
        { "[1]", "body" },
        { "", "body" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        r = http(port, "POST", "/v1/analyze", bad[k].body);
        if (r->status != 400 || strcmp(error_field(r), bad[k].field) != 0)
            fail_msg("%s: want 400 on %s, got %ld %s", bad[k].body, bad[k].field, r->status,
                     r->body);
        assert_string_equal(r->content_type_options, "nosniff"); /* errors too */
        resp_free(r);
    }
}

static void test_analyze_candles_body(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    char *rows = rows_json(g_msft, g_msft->n - 300, 300, 0);
    size_t cap = strlen(rows) + 256;
    char *body = malloc(cap);
    snprintf(body, cap, "{\"candles\":%s,\"horizon\":5,\"paths\":4,\"seed\":1}", rows);
    http_resp *r = http(port, "POST", "/v1/analyze", body);
    assert_int_equal(r->status, 200);
    cJSON *j = json_of(r);
    cJSON *rep = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "reports"), 0);
    assert_string_equal(cJSON_GetObjectItem(rep, "symbol")->valuestring, "series");
    assert_string_equal(cJSON_GetObjectItem(rep, "interval")->valuestring, "1d"); /* inferred */
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "history"), "rows")->valueint,
                     300);
    cJSON_Delete(j);
    resp_free(r);
    /* Monthly and quarterly bars are named by months, as the store names them ("1mo" and
     * "3mo", not the most common gap "31d" or "13w"). */
    for (int q = 1; q <= 3; q += 2) {
        char csv[16384];
        size_t len = (size_t)snprintf(csv, sizeof csv, "timestamps,open,high,low,close\\n");
        for (int i = 0; i < 96; i++) {
            const int m = i * q;
            const double c = 100 + (i % 9) - (i % 4) * 0.7;
            len +=
                (size_t)snprintf(csv + len, sizeof csv - len, "%d-%02d-01,%.2f,%.2f,%.2f,%.2f\\n",
                                 1990 + m / 12, 1 + m % 12, c - 0.2, c + 1, c - 1, c);
        }
        char mbody[20000];
        snprintf(mbody, sizeof mbody, "{\"candles\":\"%s\",\"horizon\":3,\"paths\":4}", csv);
        r = http(port, "POST", "/v1/analyze", mbody);
        if (r->status != 200) fail_msg("%ld %s", r->status, r->body);
        j = json_of(r);
        rep = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "reports"), 0);
        assert_string_equal(cJSON_GetObjectItem(rep, "interval")->valuestring,
                            q == 1 ? "1mo" : "3mo");
        cJSON_Delete(j);
        resp_free(r);
    }

    /* A label and an interval of the caller's, and a bad row named as in /v1/forecast. */
    snprintf(
        body, cap,
        "{\"symbol\":\"MSFT.test\",\"interval\":\"1w\",\"candles\":%s,\"horizon\":5,\"paths\":4}",
        rows);
    r = http(port, "POST", "/v1/analyze", body);
    assert_int_equal(r->status, 200);
    assert_non_null(strstr(r->body, "\"symbol\":\"MSFT.test\",\"interval\":\"1w\""));
    resp_free(r);
    char *p = strstr(body, "],[");
    p = strchr(p + 3, ',');
    memcpy(p + 1, "-5", 2); /* candles[1].open negative */
    r = http(port, "POST", "/v1/analyze", body);
    assert_error(r, 400, "candles[1].open");
    resp_free(r);
    r = http(port, "POST", "/v1/analyze",
             "{\"candles\":[[\"2024-01-01\",1,2,1,1.5],[\"2024-01-02\",1,2,1,1.5]]}");
    assert_error(r, 400, "candles"); /* too short a history */
    assert_non_null(strstr(r->body, "at least"));
    resp_free(r);
    free(body);
    free(rows);
}

static void test_batch_ranking(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    http_resp *r =
        http(port, "POST", "/v1/analyze/batch",
             "{\"symbols\":[\"MSFT\",\"BTCUSDT\",\"AAPL\"],\"horizon\":6,\"paths\":8,\"seed\":3}");
    assert_int_equal(r->status, 200);
    cJSON *j = json_of(r);
    cJSON *reports = cJSON_GetObjectItem(j, "reports"),
          *ranking = cJSON_GetObjectItem(j, "ranking");
    assert_int_equal(cJSON_GetArraySize(reports), 3);
    assert_int_equal(cJSON_GetArraySize(ranking), 3);
    /* A batch analysis runs in static batches of the server's batch_size, and says so. */
    assert_int_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(j, "engine"), "static_batch_rows")->valueint,
        KR_STATIC_BATCH_ROWS_DEFAULT);
    const char *order[3] = { "MSFT", "BTCUSDT", "AAPL" }; /* reports keep the request's order */
    for (int k = 0; k < 3; k++)
        assert_string_equal(
            cJSON_GetObjectItem(cJSON_GetArrayItem(reports, k), "symbol")->valuestring, order[k]);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetArrayItem(reports, 1), "interval")->valuestring, "1h");
    double prev = 1e300;
    const char *prev_iv = "";
    for (int k = 0; k < 3; k++) {
        cJSON *row = cJSON_GetArrayItem(ranking, k);
        assert_int_equal(cJSON_GetObjectItem(row, "rank")->valueint, k + 1);
        const char *iv = cJSON_GetObjectItem(row, "interval")->valuestring;
        double er = cJSON_GetObjectItem(row, "expected_return_pct")->valuedouble;
        if (!strcmp(iv, prev_iv)) assert_true(er <= prev); /* ranked within an interval */
        prev = er;
        prev_iv = iv;
    }
    cJSON_Delete(j);
    resp_free(r);

    r = http(port, "POST", "/v1/analyze/batch", "{\"symbols\":[\"AAPL\",\"MSFT\",\"AAPL\"]}");
    assert_error(r, 400, "symbols[2]");
    resp_free(r);
    r = http(port, "POST", "/v1/analyze/batch", "{\"symbols\":[]}");
    assert_error(r, 400, "symbols");
    resp_free(r);
    /* A symbol that cannot be loaded is a failure beside the others' reports (never
     * all-or-nothing); names match the store without case. */
    r = http(port, "POST", "/v1/analyze/batch",
             "{\"symbols\":[\"aapl\",\"NOPE\"],\"horizon\":3,\"paths\":4}");
    assert_int_equal(r->status, 200);
    j = json_of(r);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "reports")), 1);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "reports"), 0), "symbol")
            ->valuestring,
        "AAPL");
    cJSON *fail0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "failures"), 0);
    assert_string_equal(cJSON_GetObjectItem(fail0, "symbol")->valuestring, "NOPE");
    assert_non_null(strstr(cJSON_GetObjectItem(fail0, "error")->valuestring, "no candles stored"));
    cJSON_Delete(j);
    resp_free(r);
    r = http(port, "POST", "/v1/analyze/batch", "{\"symbols\":[\"NOPE\"]}");
    assert_int_equal(r->status, 400); /* nothing to report at all */
    assert_non_null(strstr(r->body, "no candles stored for 'NOPE'"));
    resp_free(r);
    r = http(port, "POST", "/v1/analyze/batch",
             "{\"all\":true,\"horizon\":3,\"paths\":4,\"market\":\"nyse\",\"ohlc\":\"raw\"}");
    assert_int_equal(r->status, 200);
    j = json_of(r);
    assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(j, "reports")) >= 2);
    cJSON *fc0 =
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "reports"), 0), "forecast");
    assert_string_equal(cJSON_GetObjectItem(fc0, "market")->valuestring, "NYSE");
    assert_string_equal(cJSON_GetObjectItem(fc0, "calendar")->valuestring,
                        "NYSE (the symbol's market)");
    assert_string_equal(cJSON_GetObjectItem(fc0, "ohlc")->valuestring, "raw");
    cJSON_Delete(j);
    resp_free(r);
    /* No market given or stored: the symbol's suffix names it, and the report says so. */
    r = http(port, "POST", "/v1/analyze/batch",
             "{\"symbols\":[\"BTCUSDT\"],\"horizon\":3,\"paths\":4}");
    assert_int_equal(r->status, 200);
    j = json_of(r);
    fc0 = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "reports"), 0), "forecast");
    assert_string_equal(cJSON_GetObjectItem(fc0, "calendar")->valuestring,
                        "CRYPTO (from the symbol's suffix)");
    cJSON_Delete(j);
    resp_free(r);
    r = http(port, "POST", "/v1/analyze/batch", "{\"all\":true,\"symbols\":[\"AAPL\"]}");
    assert_error(r, 400, "all");
    resp_free(r);
    r = http(port, "POST", "/v1/analyze", "{\"symbol\":\"AAPL\",\"market\":\"LSE\"}");
    assert_error(r, 400, "market");
    resp_free(r);
    r = http(port, "POST", "/v1/analyze/batch", "{\"symbol\":\"AAPL\"}");
    assert_error(r, 400, "symbol");
    resp_free(r);
}

static void test_batch_stream(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    const char *req =
        "\"symbols\":[\"AAPL\",\"MSFT\",\"BTCUSDT\"],\"horizon\":4,\"paths\":4,\"calibrate\":2";
    char body[256];
    snprintf(body, sizeof body, "{%s,\"stream\":true}", req);
    http_resp *r = http(port, "POST", "/v1/analyze/batch", body);
    assert_int_equal(r->status, 200);
    assert_string_equal(r->content_type, "text/event-stream");
    char ev[32][32];
    char *data[32];
    int n = sse_events(r->body, ev, data, 32);
    /* 3 loads, 1 forecast, 3 calibrations, 1 render, then the result. */
    static const char *const phases[8] = { "load",      "load",      "load",      "forecast",
                                           "calibrate", "calibrate", "calibrate", "render" };
    static const char *const symbols[8] = { "AAPL", "MSFT", "BTCUSDT", NULL,
                                            "AAPL", "MSFT", "BTCUSDT", NULL };
    assert_int_equal(n, 9);
    for (int k = 0; k < 8; k++) {
        assert_string_equal(ev[k], "progress");
        cJSON *p = cJSON_Parse(data[k]);
        assert_non_null(p);
        assert_string_equal(cJSON_GetObjectItem(p, "phase")->valuestring, phases[k]);
        assert_int_equal(cJSON_GetObjectItem(p, "step")->valueint, k + 1);
        assert_int_equal(cJSON_GetObjectItem(p, "steps")->valueint, 8);
        cJSON *sym = cJSON_GetObjectItem(p, "symbol");
        if (symbols[k])
            assert_string_equal(sym->valuestring, symbols[k]);
        else
            assert_null(sym);
        assert_true(cJSON_IsString(cJSON_GetObjectItem(p, "message")));
        cJSON_Delete(p);
    }
    assert_string_equal(ev[8], "result");
    assert_null(strchr(data[8], '\n')); /* one data line */
    /* The streamed result is the plain answer. */
    snprintf(body, sizeof body, "{%s}", req);
    http_resp *plain = http(port, "POST", "/v1/analyze/batch", body);
    assert_int_equal(plain->status, 200);
    cJSON *a = stable_report(data[8]), *b = stable_report(plain->body);
    assert_true(cJSON_Compare(a, b, 1));
    cJSON_Delete(a);
    cJSON_Delete(b);
    resp_free(plain);
    for (int k = 0; k < n; k++) free(data[k]);
    resp_free(r);

    /* A problem found once streaming has begun arrives as an "error" event (a single
     * analysis: a batch lists its failures in the result). */
    r = http(port, "POST", "/v1/analyze", "{\"symbol\":\"NOPE\",\"stream\":true}");
    assert_int_equal(r->status, 200);
    n = sse_events(r->body, ev, data, 32);
    assert_true(n >= 2);
    assert_string_equal(ev[n - 1], "error");
    assert_non_null(strstr(data[n - 1], "\"field\":\"symbol\""));
    for (int k = 0; k < n; k++) free(data[k]);
    resp_free(r);
    /* Markdown streams wrapped in JSON. */
    r = http(port, "POST", "/v1/analyze",
             "{\"symbol\":\"AAPL\",\"horizon\":3,\"paths\":2,\"format\":\"md\",\"stream\":true}");
    n = sse_events(r->body, ev, data, 32);
    assert_string_equal(ev[n - 1], "result");
    cJSON *res = cJSON_Parse(data[n - 1]);
    assert_string_equal(cJSON_GetObjectItem(res, "format")->valuestring, "md");
    assert_non_null(strstr(cJSON_GetObjectItem(res, "content")->valuestring, "AAPL"));
    cJSON_Delete(res);
    for (int k = 0; k < n; k++) free(data[k]);
    resp_free(r);
}

static size_t abort_on_progress(char *p, size_t sz, size_t n, void *ud) {
    int *seen = ud;
    (void)p;
    (void)sz;
    *seen = 1;
    return 0; /* the first bytes are a progress event: hang up */
}

/* A client that leaves mid-stream: the analysis it started runs to its end on the worker
 * (kr_analyze has no cancellation point), the connection waits for it, and the server stays
 * healthy. Under ASan this is also the use-after-free check of the task's lifetime. */
static void test_stream_client_leaves(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    CURL *h = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/analyze/batch", port);
    const char *body = "{\"symbols\":[\"AAPL\",\"MSFT\",\"BTCUSDT\"],\"horizon\":8,\"paths\":16,"
                       "\"calibrate\":3,\"stream\":true}";
    int seen = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, abort_on_progress);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &seen);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    assert_int_equal(curl_easy_perform(h), CURLE_WRITE_ERROR);
    curl_easy_cleanup(h);
    assert_true(seen);
    http_resp *r =
        http(port, "POST", "/v1/analyze", "{\"symbol\":\"AAPL\",\"horizon\":3,\"paths\":2}");
    assert_int_equal(r->status, 200);
    resp_free(r);
}

typedef struct stream_client {
    int port;
    sbuf body;
    atomic_int started; /* a progress event arrived (set on curl's thread) */
    long status;
} stream_client;

static size_t keep_stream(char *p, size_t sz, size_t n, void *ud) {
    stream_client *sc = ud;
    sb_printf(&sc->body, "%.*s", (int)(sz * n), p);
    if (strstr(sc->body.s, "event: progress")) sc->started = 1;
    return sz * n;
}

static void *run_stream(void *arg) {
    stream_client *sc = arg;
    CURL *h = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/analyze/batch", sc->port);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS,
                     "{\"symbols\":[\"AAPL\",\"MSFT\"],\"horizon\":8,"
                     "\"paths\":16,\"calibrate\":4,\"stream\":true}");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep_stream);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, sc);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &sc->status);
    curl_easy_cleanup(h);
    return NULL;
}

/* Draining lets an analysis already accepted finish and be answered, and refuses new ones. */
static void test_drain_waits_for_analysis(void **state) {
    (void)state;
    kr_server_config c = base_config();
    snprintf(c.db, sizeof c.db, "%s", g_db);
    kr_server *s = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_server_create(g_model, &c, &s, &err), KR_OK);
    stream_client sc = { .port = kr_server_port(s) };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_stream, &sc), 0);
    for (int i = 0; i < 6000 && !sc.started; i++) usleep(10000);
    assert_true(sc.started);
    kr_server_drain(s, 60);
    http_resp *r = http(sc.port, "POST", "/v1/analyze", "{\"symbol\":\"AAPL\"}");
    assert_int_equal(r->status, 503);
    resp_free(r);
    /* The accepted analysis was still answered in full. */
    pthread_join(th, NULL);
    assert_int_equal(sc.status, 200);
    assert_non_null(strstr(sc.body.s, "event: result"));
    free(sc.body.s);
    kr_server_free(s);
}

/* A streamed batch analysis whose client reads nothing: its final event (a ~6 MB JSON report
 * of 20 series, more than the kernel's socket buffers take, ~4 MB here) counts against
 * max_memory_in_flight until the request completes, as a plain answer does
 * (test_server_hardening shows new bodies then get 503); once the client leaves, the budget
 * is back. */
static void test_unread_stream_holds_budget(void **state) {
    (void)state;
    char db[1100], symbols[512] = "", body[700];
    snprintf(db, sizeof db, "%s/many.db", g_tmp);
    kr_store *st = NULL;
    kr_error err = { 0 };
    if (kr_store_open(db, &st, &err) != KR_OK) fail_msg("%s", err.message);
    for (int i = 0; i < 20; i++) {
        char name[16];
        snprintf(name, sizeof name, "S%d", i);
        if (kr_store_upsert(st, name, "1d", g_msft, &err) != KR_OK) fail_msg("%s", err.message);
        snprintf(symbols + strlen(symbols), sizeof symbols - strlen(symbols), "%s\"%s\"",
                 i ? "," : "", name);
    }
    kr_store_close(st);
    kr_server_config c = base_config();
    snprintf(c.db, sizeof c.db, "%s", db);
    kr_server *s = NULL;
    if (kr_server_create(g_model, &c, &s, &err) != KR_OK) fail_msg("%s", err.message);
    const int port = kr_server_port(s);
    snprintf(body, sizeof body,
             "{\"symbols\":[%s],\"horizon\":256,\"paths\":2,\"format\":\"json\",\"stream\":true}",
             symbols);
    int fd = kr_raw_post_unread(port, "/v1/analyze/batch", body);
    assert_true(fd >= 0);
    const double want = 4 << 20;
    double held = 0;
    for (int i = 0; i < 6000 && held < want; i++) {
        held = kr_http_metric(port, "kronos_http_memory_in_flight_bytes");
        if (held < want) usleep(20000);
    }
    print_message("unread streamed analysis: %.1f MiB held\n", held / (1 << 20));
    assert_true(held >= want);
    close(fd);
    for (int i = 0; i < 500 && held > 0; i++) {
        held = kr_http_metric(port, "kronos_http_memory_in_flight_bytes");
        if (held > 0) usleep(20000);
    }
    assert_true(held == 0);
    kr_server_free(s);
}

static void test_static_files(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    http_resp *r = http(port, "GET", "/", NULL);
    assert_int_equal(r->status, 200);
    assert_string_equal(r->content_type, "text/html; charset=utf-8");
    assert_string_equal(r->body, "<!doctype html><title>kronos</title>");
    assert_non_null(strstr(r->csp, "default-src 'self'"));
    assert_string_equal(r->content_type_options, "nosniff");
    resp_free(r);
    r = http(port, "HEAD", "/", NULL);
    assert_int_equal(r->status, 200);
    assert_null(r->body);
    resp_free(r);
    r = http(port, "GET", "/assets/app.js?v=2", NULL);
    assert_int_equal(r->status, 200);
    assert_string_equal(r->content_type, "text/javascript; charset=utf-8");
    assert_string_equal(r->body, "export const x = 1;\n");
    resp_free(r);
    r = http(port, "GET", "/assets/style.css", NULL);
    assert_string_equal(r->content_type, "text/css; charset=utf-8");
    resp_free(r);
    r = http(port, "GET", "/assets/alias.js", NULL); /* a symlink that stays inside */
    assert_int_equal(r->status, 200);
    resp_free(r);

    static const char *const refused[] = {
        "/assets/missing.js",
        "/assets/../../secret.txt",
        "/assets/%2e%2e/%2e%2e/secret.txt",
        "/assets/..%2f..%2fsecret.txt",
        "/assets//etc/passwd",
        "/assets/./app.js",
        "/assets/.hidden",
        "/assets/leak.txt", /* symlink out of the root */
        "/assets/",
        "/secret.txt",
        "/index.html",
    };
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        r = http(port, "GET", refused[k], NULL);
        if (r->status != 404 || (r->body && strstr(r->body, "secret")))
            fail_msg("%s: want 404, got %ld %s", refused[k], r->status, r->body ? r->body : "");
        resp_free(r);
    }
    r = http(port, "POST", "/", "{}");
    assert_int_equal(r->status, 405);
    resp_free(r);

    /* The pure parts. */
    char out[4096];
    assert_int_equal(kr_static_resolve(g_web, "/", out, sizeof out), 0);
    assert_non_null(strstr(out, "/index.html"));
    assert_int_equal(kr_static_resolve(g_web, "/assets/../index.html", out, sizeof out), 404);
    assert_int_equal(kr_static_resolve("", "/", out, sizeof out), 404);
    assert_int_equal(kr_static_resolve("/nonexistent-root", "/", out, sizeof out), 404);
    assert_string_equal(kr_static_content_type("a/b.svg"), "image/svg+xml");
    assert_string_equal(kr_static_content_type("a.b/c"), "application/octet-stream");
}

static void test_no_store_and_auth(void **state) {
    (void)state;
    kr_server_config c = base_config();
    snprintf(c.api_key, sizeof c.api_key, "%s", API_KEY);
    snprintf(c.web_root, sizeof c.web_root, "%s", g_web);
    kr_server *s = NULL;
    kr_error err = { 0 };
    if (kr_server_create(g_model, &c, &s, &err) != KR_OK) fail_msg("%s", err.message);
    int port = kr_server_port(s);
    http_resp *r = http(port, "GET", "/v1/symbols", NULL);
    assert_int_equal(r->status, 401);
    resp_free(r);
    r = http(port, "GET", "/", NULL); /* the page is public; its /v1 calls carry the key */
    assert_int_equal(r->status, 200);
    resp_free(r);
    r = http_ct(port, "GET", "/v1/symbols", NULL, NULL, API_KEY);
    assert_int_equal(r->status, 503); /* no store configured */
    assert_non_null(strstr(r->body, "--db"));
    resp_free(r);
    r = http_ct(port, "POST", "/v1/analyze", "{\"symbol\":\"AAPL\"}", NULL, API_KEY);
    assert_int_equal(r->status, 503);
    resp_free(r);
    /* A delete is a write like the others: the key first. */
    r = http(port, "DELETE", "/v1/candles/AAPL?interval=1d", NULL);
    assert_int_equal(r->status, 401);
    resp_free(r);
    r = http_ct(port, "DELETE", "/v1/candles/AAPL?interval=1d", NULL, NULL, "wrong-key");
    assert_int_equal(r->status, 401);
    resp_free(r);
    r = http_ct(port, "DELETE", "/v1/candles/AAPL?interval=1d", NULL, NULL, API_KEY);
    assert_int_equal(r->status, 503);
    resp_free(r);
    kr_server_free(s);

    /* A store path that does not exist yet: reads see an empty store and do not create it. */
    c = base_config();
    snprintf(c.db, sizeof c.db, "%s/later.db", g_tmp);
    assert_int_equal(kr_server_create(g_model, &c, &s, &err), KR_OK);
    port = kr_server_port(s);
    r = http(port, "GET", "/v1/symbols", NULL);
    assert_int_equal(r->status, 200);
    assert_string_equal(r->body, "{\"object\":\"list\",\"data\":[]}");
    resp_free(r);
    r = http(port, "GET", "/", NULL);
    assert_int_equal(r->status, 404); /* no web root */
    resp_free(r);
    r = http(port, "DELETE", "/v1/candles/AAPL?interval=1d", NULL);
    assert_int_equal(r->status, 404); /* nothing stored: nothing to delete */
    resp_free(r);
    struct stat sb;
    assert_int_not_equal(stat(c.db, &sb), 0);
    kr_server_free(s);
}

static void test_analyze_parse(void **state) {
    (void)state;
    kr_api_analyze_request q;
    kr_api_error e;
    const char *j =
        "{\"symbol\":\"AAPL\",\"seed\":\"18446744073709551615\",\"format\":\"markdown\","
        "\"temperature\":0.5,\"top_k\":3,\"lookback\":100,\"max_context\":256,\"horizon\":null}";
    assert_int_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &q, &e), KR_OK);
    assert_true(q.params.seed == UINT64_MAX);
    assert_int_equal(q.format, KR_FORMAT_MD);
    assert_int_equal(q.params.horizon, kr_analyze_default_params().horizon);
    assert_int_equal(q.params.max_context, 256);
    assert_int_equal(q.n, 1);
    assert_string_equal(q.symbols[0], "AAPL");
    kr_api_analyze_request_free(&q);
    j = "{\"symbol\":\"AAPL\",\"max_context\":16}"; /* the default horizon 20 does not fit */
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 0, NULL, &q, &e), KR_OK);
    assert_string_equal(e.field, "horizon");
    j = "{\"symbols\":[\"A\",\"bad name\"]}";
    assert_int_not_equal(kr_api_analyze_parse(j, strlen(j), 1, NULL, &q, &e), KR_OK);
    assert_string_equal(e.field, "symbols[1]");
    assert_non_null(strstr(e.message, "symbols[1]: symbol 'bad name'"));
}

/* POST /v1/forecast with "market" (its calendar stamps the bars) and "ohlc": "consistent"
 * (repaired candles before the mean and quantiles); pandas 'split' candles. */
static void test_forecast_market_ohlc(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    /* 5-minute A-share bars from 2024-06-17 13:05 to 2024-06-18 11:25 (47 rows: a forecast
     * needs KR_FORECAST_MIN_ROWS). */
    char body[8192], index[2048] = "", data[4096] = "";
    size_t il = 0, dl = 0;
    for (int k = 0; k < 47; k++) {
        const int day = k < 24 ? 17 : 18;
        const int minute = k < 24 ? 13 * 60 + 5 + 5 * k : 9 * 60 + 35 + 5 * (k - 24);
        il += (size_t)snprintf(index + il, sizeof index - il, "%s\"2024-06-%d %02d:%02d:00\"",
                               k ? "," : "", day, minute / 60, minute % 60);
        dl += (size_t)snprintf(data + dl, sizeof data - dl, "%s[11.27,11.%d,11.26,11.27,%d]",
                               k ? "," : "", 28 + k % 3, 300 + 7 * k);
    }
    snprintf(body, sizeof body,
             "{\"candles\":{\"columns\":[\"Open\",\"High\",\"Low\",\"Close\",\"Volume\"],"
             "\"index\":[%s],\"data\":[%s]},"
             "\"pred_len\":4,\"paths\":8,\"market\":\"sse\",\"ohlc\":\"consistent\"}",
             index, data);
    http_resp *r = http(port, "POST", "/v1/forecast", body);
    assert_int_equal(r->status, 200);
    cJSON *j = json_of(r);
    assert_string_equal(cJSON_GetObjectItem(j, "ohlc")->valuestring, "consistent");
    assert_string_equal(cJSON_GetObjectItem(j, "market")->valuestring, "SSE");
    cJSON *mean = cJSON_GetObjectItem(j, "mean");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(mean, 1), "timestamps")->valuestring,
                        "2024-06-18 13:05:00");
    for (int k = 0; k < 4; k++) {
        cJSON *m = cJSON_GetArrayItem(mean, k);
        double o = cJSON_GetObjectItem(m, "open")->valuedouble,
               h = cJSON_GetObjectItem(m, "high")->valuedouble,
               l = cJSON_GetObjectItem(m, "low")->valuedouble,
               c = cJSON_GetObjectItem(m, "close")->valuedouble;
        assert_true(h >= o && h >= c && l <= o && l <= c);
    }
    cJSON_Delete(j);
    resp_free(r);
    r = http(
        port, "POST", "/v1/forecast",
        "{\"candles\":[[\"2024-06-18 11:15:00\",1,2,0.5,1],[\"2024-06-18 11:20:00\",1,2,0.5,1]],"
        "\"pred_len\":1,\"market\":\"sse\",\"future_timestamps\":[\"2024-06-18 11:30:00\"]}");
    assert_error(r, 400, "market");
    resp_free(r);
    r = http(
        port, "POST", "/v1/forecast",
        "{\"candles\":[[\"2024-06-18 11:15:00\",1,2,0.5,1],[\"2024-06-18 11:20:00\",1,2,0.5,1]],"
        "\"pred_len\":1,\"ohlc\":\"tidy\"}");
    assert_error(r, 400, "ohlc");
    resp_free(r);
}

/* Issue 42 on the HTTP side: a history too short to forecast is refused with the minimum; a
 * forecast stamped past its calendar's last year of holidays says so (field and header); a
 * missing volume column is reported; a bare A-share code gets its exchange suggested. */
static void test_forecast_tells_what_it_assumed(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    http_resp *r = http(port, "POST", "/v1/forecast",
                        "{\"candles\":[[\"2024-01-02\",1,2,0.5,1.5],[\"2024-01-03\",1.5,2,1,1.8],"
                        "[\"2024-01-04\",1.8,2.2,1.6,2]],\"pred_len\":2}");
    assert_error(r, 400, "candles");
    assert_non_null(strstr(r->body, "needs at least 32"));
    resp_free(r);
    /* 40 SSE trading days to Thu 2026-12-31, no volume column. */
    sbuf b = { 0 };
    sb_printf(&b, "{\"pred_len\":3,\"paths\":2,\"market\":\"SSE\",\"candles\":[");
    int64_t t = kr_unix_from_civil(2026, 12, 31, 0, 0, 0);
    char ts[40][16];
    for (int k = 39, day = 0; k >= 0; day++) {
        const int64_t d = t - (int64_t)day * 86400;
        if ((d / 86400 + 3) % 7 >= 5) continue; /* weekends */
        kr_format_timestamp(d, 1, ts[k], sizeof ts[k]);
        k--;
    }
    for (int k = 0; k < 40; k++)
        sb_printf(&b, "%s[\"%s\",10,10.2,9.9,%.2f]", k ? "," : "", ts[k], 10 + 0.01 * (k % 7));
    sb_printf(&b, "]}");
    r = http(port, "POST", "/v1/forecast", b.s);
    free(b.s);
    if (r->status != 200) fail_msg("%ld %s", r->status, r->body);
    cJSON *j = json_of(r);
    cJSON *cal = cJSON_GetObjectItem(j, "calendar");
    assert_non_null(cal);
    assert_string_equal(cJSON_GetObjectItem(cal, "name")->valuestring, "SSE");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(cal, "holidays_known")));
    assert_non_null(strstr(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "warnings"), 0)->valuestring,
                           "through 2026"));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "volume_absent")));
    assert_non_null(strstr(r->kronos_warning, "calendar SSE holidays unknown after 2026"));
    cJSON_Delete(j);
    resp_free(r);
    /* Staleness against the clock over HTTP too: AAPL's last bar is 2025-08-01, at least 338
     * NYSE sessions before any day from 2026-12-07 on. */
    r = http(port, "POST", "/v1/analyze", "{\"symbol\":\"AAPL\",\"horizon\":5,\"paths\":8}");
    if (r->status != 200) fail_msg("%ld %s", r->status, r->body);
    j = json_of(r);
    cJSON *hist =
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "reports"), 0), "history");
    assert_true(cJSON_GetObjectItem(hist, "sessions_ago")->valuedouble >= 338);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(hist, "stale")));
    cJSON_Delete(j);
    resp_free(r);
    /* A bare code: the stored name is suggested. */
    r = http(port, "POST", "/v1/analyze", "{\"stock_code\":\"000333\",\"horizon\":5}");
    assert_error(r, 400, "stock_code");
    assert_non_null(strstr(r->body, "did you mean '000333.SZ'?"));
    resp_free(r);
}

static void test_serve_flags(void **state) {
    (void)state;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/kronos serve --port 0 --web-root %s/does-not-exist 2>&1",
             KR_BINARY_DIR, g_tmp);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char out[1024] = { 0 };
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);
    assert_non_null(strstr(out, "--web-root"));

    /* An unusable --db fails at start-up (exit 1, naming it), before the model loads, instead
     * of starting and answering 500 at the first write. `timeout` turns a server that started
     * anyway into a failure rather than a hung test. */
    char plain[1300];
    snprintf(plain, sizeof plain, "%s/plain-file", g_tmp);
    assert_int_equal(kr_test_write_file(plain, "x", 1), 0);
    const char *dbs[] = { "%s/plain-file/k.db", "/proc/kronos-test.db" };
    const char *why[] = { "not a directory", "not writable" };
    for (int i = 0; i < 2; i++) {
        char db[1400];
        snprintf(db, sizeof db, dbs[i], g_tmp);
        snprintf(cmd, sizeof cmd, "timeout 60 %s/kronos serve --port 0 --db %s 2>&1", KR_BINARY_DIR,
                 db);
        f = popen(cmd, "r");
        assert_non_null(f);
        n = fread(out, 1, sizeof out - 1, f);
        out[n] = '\0';
        st = pclose(f);
        assert_true(WIFEXITED(st));
        if (WEXITSTATUS(st) != 1 || !strstr(out, db) || !strstr(out, why[i]))
            fail_msg("serve --db %s: exit %d, '%s'", db, WEXITSTATUS(st), out);
    }
}

/* POST /analyze {"stock_code": ...} is /v1/analyze {"symbol": ...}: the same report. */
static void test_analyze_alias(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    http_resp *a = http(port, "POST", "/analyze",
                        "{\"stock_code\":\"AAPL\",\"horizon\":10,\"paths\":8,\"seed\":\"7\"}");
    http_resp *b = http(port, "POST", "/v1/analyze",
                        "{\"symbol\":\"AAPL\",\"horizon\":10,\"paths\":8,\"seed\":\"7\"}");
    http_resp *c = http(port, "POST", "/v1/analyze",
                        "{\"stock_code\":\"AAPL\",\"horizon\":10,\"paths\":8,\"seed\":\"7\"}");
    assert_int_equal(a->status, 200);
    assert_int_equal(b->status, 200);
    assert_int_equal(c->status, 200);
    assert_string_equal(a->content_type, "application/json");
    cJSON *ja = stable_report(a->body), *jb = stable_report(b->body), *jc = stable_report(c->body);
    assert_true(
        cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(ja, "engine"), "static_batch_rows")));
    assert_true(cJSON_Compare(ja, jb, 1));
    assert_true(cJSON_Compare(jc, jb, 1));
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    cJSON_Delete(jc);
    resp_free(a);
    resp_free(b);
    resp_free(c);
    static const struct {
        const char *body, *field;
        int status;
    } bad[] = {
        { "{\"stock_code\":\"AAPL\",\"symbol\":\"AAPL\"}", "stock_code", 400 },
        { "{\"stock_code\":7}", "stock_code", 400 },
        { "{\"stock_code\":\"NOPE\"}", "stock_code", 400 },
        { "{\"horizon\":5}", "symbol", 400 },
        /* No llm_url on this server: a narrative cannot be had. */
        { "{\"stock_code\":\"AAPL\",\"narrative\":true}", "narrative", 400 },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        http_resp *r = http(port, "POST", "/analyze", bad[k].body);
        if (r->status != bad[k].status || strcmp(error_field(r), bad[k].field) != 0)
            fail_msg("%s: want %d on %s, got %ld %s", bad[k].body, bad[k].status, bad[k].field,
                     r->status, r->body);
        resp_free(r);
    }
    /* ... and GET /v1/models says so before anyone asks (the web page offers no narrative). */
    http_resp *m = http(port, "GET", "/v1/models", NULL);
    assert_int_equal(m->status, 200);
    cJSON *models = cJSON_Parse(m->body);
    assert_non_null(models);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(models, "narrative")));
    cJSON_Delete(models);
    resp_free(m);
}

/* ------------------------------------------------------------------ stand-in LLM */

#define STAND_IN_TEXT "The sampled forecast paths lean upward, with wide uncertainty."

static atomic_int g_llm_calls;

typedef struct llm_req {
    size_t len;
} llm_req;

static enum MHD_Result llm_access(void *cls, struct MHD_Connection *mc, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **ctx) {
    (void)cls;
    (void)version;
    (void)upload;
    if (!*ctx) {
        *ctx = calloc(1, sizeof(llm_req));
        return *ctx ? MHD_YES : MHD_NO;
    }
    llm_req *q = *ctx;
    if (*upload_size) {
        q->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    int ok = !strcmp(method, "POST") && !strcmp(url, "/api/generate") && q->len > 0;
    atomic_fetch_add(&g_llm_calls, 1);
    const char *body = ok ? "{\"model\":\"gemma3\",\"response\":\"" STAND_IN_TEXT
                            "\",\"done\":true}"
                          : "{\"error\":\"not found\"}";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(mc, ok ? 200 : 404, r);
    MHD_destroy_response(r);
    return ret;
}

static void llm_completed(void *cls, struct MHD_Connection *c, void **ctx,
                          enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    free(*ctx);
    *ctx = NULL;
}

/* A stand-in LLM on a loopback port (handler: llm_access or llm_slow_access; a slow one gets a
 * thread per connection so that its wait holds no other request), and a server config whose
 * llm_url points at it. */
static struct MHD_Daemon *start_llm(MHD_AccessHandlerCallback handler, int thread_per_connection,
                                    kr_server_config *c) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
    if (thread_per_connection) flags |= MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
    struct MHD_Daemon *llm = MHD_start_daemon(
        flags, 0, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a,
        MHD_OPTION_NOTIFY_COMPLETED, llm_completed, NULL, MHD_OPTION_END);
    assert_non_null(llm);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(llm, MHD_DAEMON_INFO_BIND_PORT);
    *c = base_config();
    snprintf(c->db, sizeof c->db, "%s", g_db);
    snprintf(c->llm_url, sizeof c->llm_url, "http://127.0.0.1:%u", (unsigned)di->port);
    return llm;
}

/* The optional narrative over HTTP: the server's llm_url, asked per request with
 * "narrative": true; the report carries the model's text. A dead LLM is an explained
 * absence in a 200 report, never a failed analysis. */
static void test_analyze_narrative(void **state) {
    (void)state;
    kr_server_config c;
    struct MHD_Daemon *llm = start_llm(llm_access, 0, &c);
    c.llm_timeout_s = 30;
    kr_server *s = NULL;
    kr_error err = { 0 };
    if (kr_server_create(g_model, &c, &s, &err) != KR_OK) fail_msg("%s", err.message);
    int port = kr_server_port(s);
    atomic_store(&g_llm_calls, 0);
    /* GET /v1/models names the language model (the default one: no llm_model set), never
     * its URL, and asks it nothing. */
    http_resp *r = http(port, "GET", "/v1/models", NULL);
    assert_int_equal(r->status, 200);
    cJSON *root = cJSON_Parse(r->body);
    assert_non_null(root);
    const cJSON *nm = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "narrative"), "model");
    assert_true(cJSON_IsString(nm));
    assert_string_equal(nm->valuestring, KR_NARRATIVE_DEFAULT_MODEL);
    assert_null(strstr(r->body, c.llm_url));
    assert_int_equal(atomic_load(&g_llm_calls), 0);
    cJSON_Delete(root);
    resp_free(r);
    r = http(port, "POST", "/analyze",
             "{\"stock_code\":\"AAPL\",\"horizon\":5,\"paths\":4,\"narrative\":true}");
    assert_int_equal(r->status, 200);
    assert_int_equal(atomic_load(&g_llm_calls), 1);
    root = cJSON_Parse(r->body);
    cJSON *rep = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "reports"), 0);
    cJSON *n = cJSON_GetObjectItem(rep, "narrative");
    assert_true(cJSON_IsObject(n));
    assert_string_equal(cJSON_GetObjectItem(n, "text")->valuestring, STAND_IN_TEXT);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(n, "warning")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(rep, "narrative_error")));
    /* Where the model runs is not the clients' business. */
    assert_string_equal(cJSON_GetObjectItem(n, "url")->valuestring, "the server's language model");
    assert_null(strstr(r->body, "127.0.0.1"));
    cJSON_Delete(root);
    resp_free(r);
    /* Without the flag no narrative is asked for. */
    r = http(port, "POST", "/v1/analyze", "{\"symbol\":\"AAPL\",\"horizon\":5,\"paths\":4}");
    assert_int_equal(r->status, 200);
    assert_int_equal(atomic_load(&g_llm_calls), 1);
    root = cJSON_Parse(r->body);
    rep = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "reports"), 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(rep, "narrative")));
    cJSON_Delete(root);
    resp_free(r);
    kr_server_free(s);
    MHD_stop_daemon(llm);

    /* The LLM gone: the report still comes, saying why it has no narrative. */
    if (kr_server_create(g_model, &c, &s, &err) != KR_OK) fail_msg("%s", err.message);
    r = http(kr_server_port(s), "POST", "/analyze",
             "{\"stock_code\":\"AAPL\",\"horizon\":5,\"paths\":4,\"narrative\":true}");
    assert_int_equal(r->status, 200);
    root = cJSON_Parse(r->body);
    rep = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "reports"), 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(rep, "narrative")));
    const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(rep, "narrative_error"));
    assert_non_null(why);
    /* The reason without the address: "the server's language model (NAME): ..." */
    if (strncmp(why, "the server's language model (", 29) || strstr(why, "127.0.0.1"))
        fail_msg("narrative_error '%s'", why);
    assert_null(strstr(r->body, "127.0.0.1"));
    cJSON_Delete(root);
    resp_free(r);
    kr_server_free(s);
}

/* An LLM slower than the request deadline: it answers only after LLM_SLOW_S (or when the
 * test is over), one thread per connection. */
#define LLM_SLOW_S 20.0
static atomic_int g_llm_slow_stop;
static atomic_int g_llm_slow_capped; /* an answer came only because LLM_SLOW_S passed */

static enum MHD_Result llm_slow_access(void *cls, struct MHD_Connection *mc, const char *url,
                                       const char *method, const char *version, const char *upload,
                                       size_t *upload_size, void **ctx) {
    (void)cls;
    (void)url;
    (void)method;
    (void)version;
    (void)upload;
    if (!*ctx) {
        *ctx = calloc(1, sizeof(llm_req));
        return *ctx ? MHD_YES : MHD_NO;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    atomic_fetch_add(&g_llm_calls, 1);
    double t = 0;
    for (; t < LLM_SLOW_S && !atomic_load(&g_llm_slow_stop); t += 0.05) usleep(50000);
    if (t >= LLM_SLOW_S) atomic_store(&g_llm_slow_capped, 1);
    static const char body[] =
        "{\"model\":\"gemma3\",\"response\":\"" STAND_IN_TEXT "\",\"done\":true}";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret = MHD_queue_response(mc, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* The request deadline covers the narrative: with an LLM slower than what the analysis left
 * of request_timeout_s (and an llm_timeout_s far longer), the client still gets its report
 * in time, with narrative null and narrative_error saying it timed out. */
static void test_analyze_narrative_deadline(void **state) {
    (void)state;
    atomic_store(&g_llm_slow_stop, 0);
    kr_server_config c;
    struct MHD_Daemon *llm = start_llm(llm_slow_access, 1, &c);
    c.llm_timeout_s = 60;
    c.request_timeout_s = 4;
    kr_server *s = NULL;
    kr_error err = { 0 };
    if (kr_server_create(g_model, &c, &s, &err) != KR_OK) fail_msg("%s", err.message);
    atomic_store(&g_llm_calls, 0);
    http_resp *r = http(kr_server_port(s), "POST", "/analyze",
                        "{\"stock_code\":\"AAPL\",\"horizon\":5,\"paths\":4,\"narrative\":true}");
    assert_int_equal(r->status, 200);
    assert_int_equal(atomic_load(&g_llm_calls), 1);
    cJSON *root = cJSON_Parse(r->body);
    cJSON *rep = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "reports"), 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(rep, "narrative")));
    const cJSON *why = cJSON_GetObjectItem(rep, "narrative_error");
    assert_true(cJSON_IsString(why));
    if (!strstr(why->valuestring, "(timeout)") && !strstr(why->valuestring, "not asked"))
        fail_msg("narrative_error '%s'", why->valuestring);
    cJSON_Delete(root);
    resp_free(r);
    kr_server_free(s);
    atomic_store(&g_llm_slow_stop, 1);
    MHD_stop_daemon(llm);
}

/* Hangs up once the narrative phase has begun. */
static size_t hang_up_at_narrative(char *p, size_t sz, size_t n, void *ud) {
    sbuf *b = ud;
    sb_printf(b, "%.*s", (int)(sz * n), p);
    return strstr(b->s, "\"phase\":\"narrative\"") ? 0 : sz * n;
}

/* A streaming client that leaves while the model is slow stops the wait: the server (whose
 * shutdown joins the analysis) is gone long before the model would have answered. */
static void test_analyze_narrative_client_leaves(void **state) {
    (void)state;
    atomic_store(&g_llm_slow_stop, 0);
    atomic_store(&g_llm_slow_capped, 0);
    kr_server_config c;
    struct MHD_Daemon *llm = start_llm(llm_slow_access, 1, &c);
    c.llm_timeout_s = 60;
    kr_server *s = NULL;
    kr_error err = { 0 };
    if (kr_server_create(g_model, &c, &s, &err) != KR_OK) fail_msg("%s", err.message);
    atomic_store(&g_llm_calls, 0);
    CURL *h = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/analyze", kr_server_port(s));
    sbuf seen = { 0 };
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS,
                     "{\"symbol\":\"AAPL\",\"horizon\":5,\"paths\":4,\"narrative\":true,"
                     "\"stream\":true}");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, hang_up_at_narrative);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &seen);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    assert_int_equal(curl_easy_perform(h), CURLE_WRITE_ERROR);
    curl_easy_cleanup(h);
    free(seen.s);
    /* Whether the model was reached before the leaving was noticed or not, nobody waits for
     * its answer: without the check it would come after LLM_SLOW_S. */
    kr_server_free(s);
    assert_int_equal(atomic_load(&g_llm_slow_capped), 0);
    atomic_store(&g_llm_slow_stop, 1);
    MHD_stop_daemon(llm);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_router),
        cmocka_unit_test(test_analyze_parse),
        cmocka_unit_test(test_candles_round_trip),
        cmocka_unit_test(test_candles_writer_busy),
        cmocka_unit_test(test_candles_delete),
        cmocka_unit_test(test_symbols),
        cmocka_unit_test(test_analyze_stored),
        cmocka_unit_test(test_analyze_alias),
        cmocka_unit_test(test_analyze_narrative),
        cmocka_unit_test(test_analyze_narrative_deadline),
        cmocka_unit_test(test_analyze_narrative_client_leaves),
        cmocka_unit_test(test_analyze_candles_body),
        cmocka_unit_test(test_batch_ranking),
        cmocka_unit_test(test_batch_stream),
        cmocka_unit_test(test_stream_client_leaves),
        cmocka_unit_test(test_drain_waits_for_analysis),
        cmocka_unit_test(test_unread_stream_holds_budget),
        cmocka_unit_test(test_static_files),
        cmocka_unit_test(test_no_store_and_auth),
        cmocka_unit_test(test_serve_flags),
        cmocka_unit_test(test_forecast_market_ohlc),
        cmocka_unit_test(test_forecast_tells_what_it_assumed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
