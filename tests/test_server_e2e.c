/*
 * The HTTP server end to end: real servers (src/server) on 127.0.0.1 with ephemeral ports,
 * in this process, over the bundled demo model, driven by libcurl.
 *
 *  - routes, auth (401), 404, 405, 400 naming field and row, 413 (declared and chunked);
 *  - 50 concurrent seeded requests each equal to the same request run alone, and to the
 *    library's kr_forecast_run;
 *  - a repeated window is served from the prefix cache (usage.cached_tokens, /metrics);
 *  - SSE: one progress event per step, then the result;
 *  - 504 on a tiny deadline; 429 + Retry-After on a tiny queue;
 *  - a client that aborts a stream cancels it and its KV returns to the cache-only level;
 *  - drain: /ready and new requests 503, the in-flight request still completes with 200;
 *  - the `kronos serve` process: ephemeral port, SIGTERM drains and exits 0, bad flags and
 *    config files exit 2 naming the problem.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "http_client.h"
#include "serve_proc.h"
#include "server/drift.h"
#include "engine_helpers.h"
#include "server_fixtures.h"
#include "test_support.h"

#include "base/timeutil.h"
#include "kronos.h"
#include "series/candles.h"
#include "server/server.h"

#define API_KEY "test-key-0123"

static kr_model *g_model;
static kr_candles *g_candles;
static kr_server *g_srv; /* the shared server: API key, 256 KiB body limit */

/* ------------------------------------------------------------------ HTTP client */

typedef kr_http_resp http_resp;

/* One request (see kr_test_http_perform); auth: the bearer key or NULL. */
static CURLcode http_ex(int port, const char *method, const char *path, const char *body,
                        const char *auth, size_t chunked_bytes, http_resp *r) {
    return kr_test_http_perform(port, method, path, body, NULL, auth, chunked_bytes, r);
}

static http_resp *http(int port, const char *method, const char *path, const char *body,
                       const char *auth) {
    http_resp *r = calloc(1, sizeof *r);
    CURLcode cc = http_ex(port, method, path, body, auth, 0, r);
    if (cc != CURLE_OK) fail_msg("%s %s: curl: %s", method, path, curl_easy_strerror(cc));
    return r;
}

#define resp_free kr_http_resp_free
#define error_field kr_http_error_field

/* Value of one exact series line in a /metrics scrape, or -1 when absent. */
static double metric_value(int port, const char *series) {
    http_resp *r = http(port, "GET", "/metrics", NULL, NULL);
    assert_int_equal(r->status, 200);
    double v = kr_metric_in(r->body, series);
    resp_free(r);
    return v;
}

/* ------------------------------------------------------------------ request bodies */

typedef kr_sbuf sbuf;
#define sb_printf kr_sb_printf

/* {"candles": rows [start, start+n) of the bundled data, <extra>}; caller frees. */
#define forecast_body(start, n, extra) kr_http_forecast_body(g_candles, start, n, extra)

#define json_of kr_http_json

/* ------------------------------------------------------------------ fixtures */

static kr_server *start_server(const kr_server_config *cfg) {
    return kr_test_server_start(g_model, cfg);
}

static kr_server_config base_config(void) { return kr_test_server_config(); }

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
    kr_server_config c = base_config();
    snprintf(c.api_key, sizeof c.api_key, "%s", API_KEY);
    c.max_body_bytes = 256 * 1024;
    kr_server *s = NULL;
    if (kr_server_create(g_model, &c, &s, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    g_srv = s;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    kr_server_free(g_srv);
    kr_candles_free(g_candles);
    kr_model_free(g_model);
    curl_global_cleanup();
    return 0;
}

/* ------------------------------------------------------------------ tests */

static void test_routes_auth_errors(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    http_resp *r = http(port, "GET", "/health", NULL, NULL);
    assert_int_equal(r->status, 200);
    resp_free(r);
    r = http(port, "GET", "/ready", NULL, NULL);
    assert_int_equal(r->status, 200);
    assert_non_null(strstr(r->body, "ready"));
    resp_free(r);
    r = http(port, "HEAD", "/ready", NULL, NULL);
    assert_int_equal(r->status, 200);
    resp_free(r);

    /* /v1 needs the key; /health and /metrics do not. */
    r = http(port, "GET", "/v1/models", NULL, NULL);
    assert_int_equal(r->status, 401);
    assert_non_null(strstr(r->www_auth, "Bearer"));
    resp_free(r);
    r = http(port, "GET", "/v1/models", NULL, "wrong-key");
    assert_int_equal(r->status, 401);
    resp_free(r);
    r = http(port, "POST", "/v1/forecast", "{}", API_KEY "x");
    assert_int_equal(r->status, 401);
    resp_free(r);
    r = http(port, "GET", "/v1/models", NULL, API_KEY);
    assert_int_equal(r->status, 200);
    assert_non_null(strstr(r->content_type, "application/json"));
    cJSON *root = json_of(r);
    assert_string_equal(
        cJSON_GetArrayItem(cJSON_GetObjectItem(root, "data"), 0)->child->valuestring,
        "kronos-demo");
    cJSON_Delete(root);
    resp_free(r);

    r = http(port, "GET", "/v2/whatever", NULL, API_KEY);
    assert_int_equal(r->status, 404);
    assert_non_null(strstr(r->body, "\"code\":404"));
    resp_free(r);
    r = http(port, "GET", "/v1/forecast", NULL, API_KEY);
    assert_int_equal(r->status, 405);
    assert_string_equal(r->allow, "POST");
    resp_free(r);
    r = http(port, "DELETE", "/health", NULL, NULL);
    assert_int_equal(r->status, 405);
    assert_string_equal(r->allow, "GET, HEAD");
    resp_free(r);

    /* 400s name the field and the row. */
    r = http(port, "POST", "/v1/forecast", "{\"pred_len\": 3,", API_KEY);
    assert_int_equal(r->status, 400);
    assert_string_equal(error_field(r), "body");
    resp_free(r);
    sbuf b = { 0 };
    sb_printf(&b, "{\"pred_len\":3,\"candles\":[");
    for (int i = 0; i < 20; i++)
        sb_printf(&b, "%s[%lld,10,%s,9.3,9.5,100]", i ? "," : "", 1718700000LL + i * 300LL,
                  i == 17 ? "9.1" : "10.5");
    sb_printf(&b, "]}");
    r = http(port, "POST", "/v1/forecast", b.s, API_KEY);
    assert_int_equal(r->status, 400);
    assert_string_equal(error_field(r), "candles[17].high");
    assert_non_null(strstr(r->body, "candles[17].high: 9.1 is below low 9.3"));
    resp_free(r);
    free(b.s);
    char *body = forecast_body(0, 30, "\"pred_len\":3,\"paths\":100000");
    r = http(port, "POST", "/v1/forecast", body, API_KEY);
    assert_int_equal(r->status, 400);
    assert_string_equal(error_field(r), "paths");
    resp_free(r);
    free(body);
    r = http(port, "POST", "/v1/forecast", NULL, API_KEY);
    assert_int_equal(r->status, 400);
    assert_string_equal(error_field(r), "body");
    resp_free(r);
}

static void test_body_too_large(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    /* Declared length over the limit: refused before the body is read. */
    size_t n = 300 * 1024;
    char *big = malloc(n + 1);
    memset(big, ' ', n);
    memcpy(big, "{\"pred_len\":1}", 14);
    big[n] = '\0';
    http_resp *r = calloc(1, sizeof *r);
    http_ex(port, "POST", "/v1/forecast", big, API_KEY, 0, r);
    assert_int_equal(r->status, 413);
    assert_non_null(strstr(r->body, "max_body_bytes"));
    resp_free(r);
    free(big);
    /* Chunked upload (no length): refused once it grows past the limit. */
    r = calloc(1, sizeof *r);
    http_ex(port, "POST", "/v1/forecast", NULL, API_KEY, n, r);
    assert_int_equal(r->status, 413);
    resp_free(r);
    /* Within the limit a chunked body is read normally (and then is bad JSON). */
    r = calloc(1, sizeof *r);
    http_ex(port, "POST", "/v1/forecast", NULL, API_KEY, 1000, r);
    assert_int_equal(r->status, 400);
    resp_free(r);
    r = http(port, "GET", "/health", NULL, NULL);
    assert_int_equal(r->status, 200);
    resp_free(r);
    assert_true(metric_value(port, "kronos_http_rejected_total{reason=\"too_large\"}") >= 2);
}

/* ---- 50 concurrent == alone */

#define N_CONC 50

typedef struct conc_job {
    int port;
    char *body;
    http_resp resp;
} conc_job;

static void *conc_run(void *arg) {
    conc_job *j = arg;
    http_ex(j->port, "POST", "/v1/forecast", j->body, API_KEY, 0, &j->resp);
    return NULL;
}

/* The parts of a response that must not depend on batching: mean, quantiles, paths. */
static char *result_part(const char *body) {
    cJSON *root = cJSON_Parse(body);
    if (!root) fail_msg("not JSON: %.200s", body);
    cJSON *keep = cJSON_CreateObject();
    cJSON_AddItemToObject(keep, "mean", cJSON_DetachItemFromObject(root, "mean"));
    cJSON_AddItemToObject(keep, "quantiles", cJSON_DetachItemFromObject(root, "quantiles"));
    cJSON_AddItemToObject(keep, "paths", cJSON_DetachItemFromObject(root, "paths"));
    char *s = cJSON_PrintUnformatted(keep);
    cJSON_Delete(keep);
    cJSON_Delete(root);
    return s;
}

static char *conc_body(int i) {
    char extra[256];
    snprintf(extra, sizeof extra,
             "\"pred_len\":%d,\"paths\":%d,\"seed\":%d,\"return_paths\":true,\"top_k\":%d",
             6 + i % 5, 2 + i % 3, 1000 + i, i % 2 ? 0 : 20);
    /* Ten different windows of different lengths, each used by five requests. */
    return forecast_body(100 + (i % 10) * 37, 48 + (i % 10) * 9, extra);
}

static void test_concurrent_equals_alone(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    conc_job *jobs = calloc(N_CONC, sizeof *jobs);
    pthread_t th[N_CONC];
    for (int i = 0; i < N_CONC; i++) {
        jobs[i].port = port;
        jobs[i].body = conc_body(i);
    }
    for (int i = 0; i < N_CONC; i++) pthread_create(&th[i], NULL, conc_run, &jobs[i]);
    for (int i = 0; i < N_CONC; i++) pthread_join(th[i], NULL);
    double batch_sum = metric_value(port, "kronos_batch_size_sum");
    double batch_count = metric_value(port, "kronos_batch_size_count");
    assert_true(batch_count > 0);
    for (int i = 0; i < N_CONC; i++) {
        if (jobs[i].resp.status != 200)
            fail_msg("request %d: %ld %.300s", i, jobs[i].resp.status, jobs[i].resp.body);
        http_resp *alone = http(port, "POST", "/v1/forecast", jobs[i].body, API_KEY);
        assert_int_equal(alone->status, 200);
        char *a = result_part(jobs[i].resp.body), *b = result_part(alone->body);
        if (strcmp(a, b) != 0) fail_msg("request %d differs in a batch from alone", i);
        free(a);
        free(b);
        resp_free(alone);
        free(jobs[i].body);
        free(jobs[i].resp.body);
    }
    free(jobs);
    /* The concurrent phase really batched: mean batch size above one path. */
    fprintf(stderr, "concurrent phase: mean batch size %.2f\n", batch_sum / batch_count);
    assert_true(batch_sum / batch_count > 1.0);
}

/* The server's answer equals the library's offline forecast for the same request. */
static void test_server_matches_library(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    char *body =
        forecast_body(300, 120, "\"pred_len\":7,\"paths\":3,\"seed\":99,\"return_paths\":true");
    http_resp *r = http(port, "POST", "/v1/forecast", body, API_KEY);
    assert_int_equal(r->status, 200);
    kr_forecast_params p = kr_forecast_default_params();
    p.pred_len = 7;
    p.paths = 3;
    p.seed = 99;
    p.keep_paths = 1;
    kr_series s = kr_candles_slice(g_candles, 300, 120);
    kr_forecast *fc = NULL;
    kr_error err = { 0 };
    kr_context *ctx = kr_test_context(g_model, 2, NULL);
    assert_int_equal(kr_forecast_run(ctx, &s, &p, &fc, &err), KR_OK);
    kr_context_free(ctx);
    cJSON *root = json_of(r);
    cJSON *mean = cJSON_GetObjectItem(root, "mean");
    const double *mv = kr_forecast_mean(fc);
    for (int i = 0; i < 7; i++)
        for (int c = 0; c < 6; c++) {
            static const char *k_cols[] = { "open", "high", "low", "close", "volume", "amount" };
            double got = cJSON_GetObjectItem(cJSON_GetArrayItem(mean, i), k_cols[c])->valuedouble;
            if (got != mv[i * 6 + c])
                fail_msg("mean[%d].%s: server %.17g, library %.17g", i, k_cols[c], got,
                         mv[i * 6 + c]);
        }
    cJSON *p1 = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "paths"), 1);
    cJSON *s1 = cJSON_GetObjectItem(p1, "s1");
    for (int i = 0; i < 7; i++)
        assert_int_equal((int)cJSON_GetArrayItem(s1, i)->valuedouble,
                         kr_forecast_path_s1(fc, 1)[i]);
    cJSON_Delete(root);
    kr_forecast_free(fc);
    resp_free(r);
    free(body);
}

/* The bytes of a forecast JSON from "params" up to (not including) ",\"usage\"": the part both
 * writers share exactly. What legitimately differs is around it: the head members (the CLI's
 * "input" and "model", the server's "id", "object" and "model"), "timing" (wall clock) and in
 * "usage" the split between prefill_tokens and cached_tokens (a prefix-cache hit moves tokens
 * from one to the other). */
static char *forecast_part(const char *json, long long *usage_sum, long long *decode) {
    const char *a = strstr(json, "\"params\":"), *b = strstr(json, ",\"usage\":");
    if (!a || !b || b < a) fail_msg("no params..usage in %.300s", json);
    char *s = strndup(a, (size_t)(b - a));
    cJSON *root = cJSON_Parse(json);
    cJSON *u = cJSON_GetObjectItem(root, "usage");
    *usage_sum = (long long)(cJSON_GetObjectItem(u, "prefill_tokens")->valuedouble +
                             cJSON_GetObjectItem(u, "cached_tokens")->valuedouble);
    *decode = (long long)cJSON_GetObjectItem(u, "decode_tokens")->valuedouble;
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "timing"), "total_seconds"));
    cJSON_Delete(root);
    return s;
}

/* One forecast serializer: `kronos forecast --format json` and POST /v1/forecast print the
 * same forecast part byte for byte (same candles, parameters and seed). */
static void test_cli_and_http_print_alike(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char csv[4200];
    snprintf(csv, sizeof csv, "%s/in.csv", dir);
    sbuf text = { 0 };
    sb_printf(&text, "timestamps,open,high,low,close,volume,amount\n");
    for (int64_t i = 700; i < 900; i++) {
        char ts[32];
        kr_format_timestamp(g_candles->timestamps[i], 0, ts, sizeof ts);
        const double *v = g_candles->values + i * 6;
        sb_printf(&text, "%s,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g\n", ts, v[0], v[1], v[2], v[3],
                  v[4], v[5]);
    }
    assert_int_equal(kr_test_write_file(csv, text.s, text.len), 0);
    char args[8600];
    snprintf(args, sizeof args,
             "forecast --input %s --pred-len 9 --paths 5 --seed 12345678901234567890 "
             "--top-k 30 --temperature 0.7 --quantiles 0.1,0.5,0.9,0.5 --ohlc raw --format json",
             csv);
    const kr_test_run *run = kr_test_kronos(dir, "", args);
    if (run->code != 0) fail_msg("kronos forecast: %s", run->err);
    long long cli_sum, cli_decode, http_sum, http_decode;
    char *cli = forecast_part(run->out, &cli_sum, &cli_decode);

    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "candles", text.s);
    cJSON_AddNumberToObject(req, "pred_len", 9);
    cJSON_AddNumberToObject(req, "paths", 5);
    cJSON_AddStringToObject(req, "seed", "12345678901234567890");
    cJSON_AddNumberToObject(req, "top_k", 30);
    cJSON_AddNumberToObject(req, "temperature", 0.7);
    cJSON_AddItemToObject(req, "quantiles",
                          cJSON_CreateDoubleArray((double[]){ 0.1, 0.5, 0.9, 0.5 }, 4));
    cJSON_AddTrueToObject(req, "return_paths");
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    http_resp *r = http(kr_server_port(g_srv), "POST", "/v1/forecast", body, API_KEY);
    if (r->status != 200) fail_msg("%ld %.300s", r->status, r->body);
    char *srv = forecast_part(r->body, &http_sum, &http_decode);
    if (strcmp(cli, srv) != 0) {
        size_t i = 0;
        while (cli[i] && cli[i] == srv[i]) i++;
        fail_msg("CLI and HTTP differ at byte %zu:\n cli  ...%.120s\n http ...%.120s", i,
                 cli + (i > 40 ? i - 40 : 0), srv + (i > 40 ? i - 40 : 0));
    }
    assert_true(strstr(cli, "\"lookback\":200,") != NULL); /* the rows the model saw */
    assert_true(strstr(cli, "\"seed\":\"12345678901234567890\"") != NULL);
    assert_true(strstr(cli, "\"temperature\":0.7,") != NULL);
    assert_int_equal(cli_sum, http_sum);
    assert_int_equal(cli_decode, http_decode);
    assert_true(cli_decode > 0);
    /* The CLI's head: the input and the model. */
    assert_true(!strncmp(run->out, "{\"input\":\"", 10));
    free(cli);
    free(srv);
    free(body);
    resp_free(r);
    free(text.s);
    unlink(csv);
    char p[4300];
    snprintf(p, sizeof p, "%s/stdout", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/stderr", dir);
    unlink(p);
    rmdir(dir);
}

static void test_prefix_cache_reuse(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    double hits0 = metric_value(port, "kronos_prefix_cache_hit_tokens_total");
    assert_true(hits0 >= 0);
    char *body = forecast_body(1500, 200, "\"pred_len\":4,\"paths\":2,\"seed\":1");
    http_resp *a = http(port, "POST", "/v1/forecast", body, API_KEY);
    assert_int_equal(a->status, 200);
    http_resp *b = http(port, "POST", "/v1/forecast", body, API_KEY);
    assert_int_equal(b->status, 200);
    cJSON *ja = json_of(a), *jb = json_of(b);
    cJSON *ua = cJSON_GetObjectItem(ja, "usage"), *ub = cJSON_GetObjectItem(jb, "usage");
    double cached_a = cJSON_GetObjectItem(ua, "cached_tokens")->valuedouble;
    double cached_b = cJSON_GetObjectItem(ub, "cached_tokens")->valuedouble;
    double prefill_a = cJSON_GetObjectItem(ua, "prefill_tokens")->valuedouble;
    fprintf(stderr, "first: prefill %g cached %g; second: cached %g\n", prefill_a, cached_a,
            cached_b);
    assert_true(prefill_a > 0);
    assert_true(cached_b > 0);
    assert_true(cached_b > cached_a);
    assert_int_equal(cJSON_GetObjectItem(ub, "generated_tokens")->valuedouble, 8);
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(jb, "timing"), "ttft_seconds"));
    /* Same seed, same window: the cached run gives the same forecast. */
    char *ra = result_part(a->body), *rb = result_part(b->body);
    assert_string_equal(ra, rb);
    free(ra);
    free(rb);
    double hits1 = metric_value(port, "kronos_prefix_cache_hit_tokens_total");
    assert_true(hits1 >= hits0 + cached_b);
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    resp_free(a);
    resp_free(b);
    free(body);
}

/* Served KV big enough for one 400-row, 24-path forecast; a quarter of it is not. */
#define KV_SMALL_BUDGET (6u << 20)

/* A quantised model with an f32 shadow: every sampled forecast is re-run on f32 and the KS
 * statistic of the path returns lands in kronos_quant_drift; drift_sample 0.5 samples every
 * second forecast. */
static void test_quant_drift_metric(void **state) {
    (void)state;
    kr_error err = { 0 };
    kr_model *q = kr_test_demo_model("q4"), *shadow = kr_test_demo_model(NULL);
    assert_non_null(q);
    assert_non_null(shadow);
    kr_server_config c = base_config();
    c.drift_sample = 0.5;
    c.sched.kv_budget_bytes = (size_t)64 << 20;
    kr_server *s = NULL;
    assert_true(kr_server_shadow_planned(q, &c));
    if (kr_server_create(q, &c, &s, &err) != KR_OK) fail_msg("%s", err.message);
    assert_int_equal(kr_server_attach_shadow(s, shadow, c.drift_sample, &err), KR_OK);
    int port = kr_server_port(s);
    assert_true(metric_value(port, "kronos_quant_drift_samples_total") == 0);
    /* The shadow's f32 KV comes out of kv_budget: a quarter for it, the rest served. */
    assert_true(metric_value(port, "kronos_quant_drift_kv_budget_bytes") == (16 << 20));
    assert_true(metric_value(port, "kronos_kv_cache_budget_bytes") == (48 << 20));
    /* drift_kv_share sets that share: an eighth here. */
    {
        kr_server_config c8 = c;
        c8.drift_kv_share = 0.125;
        kr_server *s8 = NULL;
        if (kr_server_create(q, &c8, &s8, &err) != KR_OK) fail_msg("%s", err.message);
        const int port8 = kr_server_port(s8);
        assert_true(metric_value(port8, "kronos_kv_cache_budget_bytes") == (56 << 20));
        kr_model *shadow8 = kr_test_demo_model(NULL);
        assert_int_equal(kr_server_attach_shadow(s8, shadow8, c8.drift_sample, &err), KR_OK);
        assert_true(metric_value(port8, "kronos_quant_drift_kv_budget_bytes") == (8 << 20));
        kr_server_free(s8);
    }
    for (int i = 0; i < 4; i++) {
        char *body = forecast_body(300 + 50 * i, 200, "\"pred_len\":6,\"paths\":24,\"seed\":5");
        http_resp *r = http(port, "POST", "/v1/forecast", body, NULL);
        assert_int_equal(r->status, 200);
        resp_free(r);
        free(body);
    }
    kr_drift_flush(kr_server_drift(s));
    assert_true(metric_value(port, "kronos_quant_drift_samples_total") == 2);
    double ks = metric_value(port, "kronos_quant_drift");
    double p = metric_value(port, "kronos_quant_drift_p_value");
    fprintf(stderr, "drift: KS %.3f p %.3f\n", ks, p);
    assert_true(ks >= 0 && ks <= 1);
    assert_true(p >= 0 && p <= 1);
    assert_true(metric_value(port, "kronos_quant_drift_ks_count") == 2);
    kr_server_free(s);

    /* A sample whose f32 KV does not fit the shadow's share is skipped and counted, never run
     * beyond it; the forecast itself is answered. */
    c.drift_sample = 1.0;
    c.sched.kv_budget_bytes = (size_t)KV_SMALL_BUDGET;
    shadow = kr_test_demo_model(NULL);
    if (kr_server_create(q, &c, &s, &err) != KR_OK) fail_msg("%s", err.message);
    assert_int_equal(kr_server_attach_shadow(s, shadow, c.drift_sample, &err), KR_OK);
    port = kr_server_port(s);
    char *body = forecast_body(300, 400, "\"pred_len\":6,\"paths\":24,\"seed\":5");
    http_resp *r = http(port, "POST", "/v1/forecast", body, NULL);
    if (r->status != 200) fail_msg("%ld %s", r->status, r->body);
    resp_free(r);
    free(body);
    kr_drift_flush(kr_server_drift(s));
    fprintf(stderr, "small budget: samples %.0f dropped %.0f\n",
            metric_value(port, "kronos_quant_drift_samples_total"),
            metric_value(port, "kronos_quant_drift_dropped_total"));
    assert_true(metric_value(port, "kronos_quant_drift_samples_total") == 0);
    assert_true(metric_value(port, "kronos_quant_drift_dropped_total") == 1);
    kr_server_free(s);

    /* f32 weights and KV: no shadow, nothing set aside. */
    c.drift_sample = 0.5;
    assert_false(kr_server_shadow_planned(g_model, &c));
    if (kr_server_create(g_model, &c, &s, &err) != KR_OK) fail_msg("%s", err.message);
    shadow = kr_test_demo_model(NULL);
    assert_int_equal(kr_server_attach_shadow(s, shadow, c.drift_sample, &err), KR_ERR_INVALID_ARG);
    assert_true(metric_value(kr_server_port(s), "kronos_kv_cache_budget_bytes") ==
                (double)KV_SMALL_BUDGET);
    kr_server_free(s);
    kr_model_free(q);
}

/* Splits an SSE body into (event, data) pairs; returns the count. */
static int sse_events(const char *body, char ev[][32], char **data, int max) {
    int n = 0;
    const char *p = body;
    while (p && *p && n < max) {
        const char *end = strstr(p, "\n\n");
        if (!end) break;
        ev[n][0] = '\0';
        data[n] = NULL;
        for (const char *line = p; line < end;) {
            const char *nl = memchr(line, '\n', (size_t)(end - line));
            size_t ln = nl ? (size_t)(nl - line) : (size_t)(end - line);
            if (!strncmp(line, "event: ", 7)) snprintf(ev[n], 32, "%.*s", (int)(ln - 7), line + 7);
            if (!strncmp(line, "data: ", 6)) data[n] = strndup(line + 6, ln - 6);
            line += ln + 1;
        }
        if (ev[n][0] || data[n]) n++;
        p = end + 2;
    }
    return n;
}

static void test_stream_shape(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    const int P = 9;
    char extra[128];
    snprintf(extra, sizeof extra, "\"pred_len\":%d,\"paths\":4,\"seed\":3,\"stream\":true", P);
    char *body = forecast_body(800, 150, extra);
    http_resp *r = http(port, "POST", "/v1/forecast", body, API_KEY);
    assert_int_equal(r->status, 200);
    assert_string_equal(r->content_type, "text/event-stream");
    char ev[64][32];
    char *data[64];
    int n = sse_events(r->body, ev, data, 64);
    assert_int_equal(n, P + 1);
    for (int k = 0; k < P; k++) {
        assert_string_equal(ev[k], "progress");
        char want[64];
        snprintf(want, sizeof want, "{\"step\":%d,\"pred_len\":%d}", k + 1, P);
        assert_string_equal(data[k], want);
    }
    assert_string_equal(ev[P], "result");
    cJSON *res = cJSON_Parse(data[P]);
    assert_non_null(res);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(res, "mean")), P);
    cJSON_Delete(res);
    /* The streamed result equals the plain one. */
    char *plain_body = forecast_body(800, 150, "\"pred_len\":9,\"paths\":4,\"seed\":3");
    http_resp *plain = http(port, "POST", "/v1/forecast", plain_body, API_KEY);
    char *a = result_part(plain->body), *b = result_part(data[P]);
    assert_string_equal(a, b);
    free(a);
    free(b);
    for (int k = 0; k < n; k++) free(data[k]);
    resp_free(plain);
    free(plain_body);
    resp_free(r);
    free(body);
}

static void test_deadline_504(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    char *body = forecast_body(0, 300, "\"pred_len\":200,\"paths\":64,\"timeout_s\":0.001");
    http_resp *r = http(port, "POST", "/v1/forecast", body, API_KEY);
    assert_int_equal(r->status, 504);
    assert_non_null(strstr(r->body, "\"code\":504"));
    resp_free(r);
    free(body);
    /* Streamed: the deadline arrives as an error event. */
    body =
        forecast_body(0, 300, "\"pred_len\":200,\"paths\":64,\"timeout_s\":0.001,\"stream\":true");
    r = http(port, "POST", "/v1/forecast", body, API_KEY);
    assert_int_equal(r->status, 200);
    assert_non_null(strstr(r->body, "event: error"));
    assert_non_null(strstr(r->body, "\"code\":504"));
    assert_null(strstr(r->body, "event: result"));
    resp_free(r);
    free(body);
}

static int kv_settled(kr_context_stats *st) {
    kr_context_get_stats(kr_server_context(g_srv), st);
    return st->running == 0 && st->waiting == 0;
}

static void test_cancel_frees_kv(void **state) {
    (void)state;
    int port = kr_server_port(g_srv);
    double cancelled0 = metric_value(port, "kronos_requests_total{outcome=\"cancelled\"}");
    char *body =
        forecast_body(500, 400, "\"pred_len\":400,\"paths\":128,\"seed\":5,\"stream\":true");
    http_resp *r = calloc(1, sizeof *r);
    r->abort_after_progress = 3;
    CURLcode cc = http_ex(port, "POST", "/v1/forecast", body, API_KEY, 0, r);
    assert_int_equal(cc, CURLE_WRITE_ERROR); /* we hung up */
    assert_true(r->progress_seen >= 3);
    assert_null(strstr(r->body, "event: result"));
    /* The scheduler drops the request at its next step; its KV goes, the cache stays. */
    kr_context_stats st;
    double t0 = kr_now_seconds();
    while (!kv_settled(&st) && kr_now_seconds() - t0 < 20) usleep(10000);
    assert_int_equal(st.running, 0);
    assert_int_equal(st.waiting, 0);
    fprintf(stderr, "after cancel: kv_bytes_used %zu, prefix_cache_bytes %zu (%.2f s)\n",
            st.kv_bytes_used, st.prefix_cache_bytes, kr_now_seconds() - t0);
    assert_int_equal(st.kv_bytes_used, st.prefix_cache_bytes);
    /* It was cancelled, not run to the end. */
    double cancelled1 = -1;
    for (int i = 0; i < 100 && cancelled1 < cancelled0 + 1; i++) {
        cancelled1 = metric_value(port, "kronos_requests_total{outcome=\"cancelled\"}");
        usleep(10000);
    }
    assert_true(cancelled1 >= cancelled0 + 1);
    /* The engine thread may count the cancel before the connection's thread counts the 499. */
    double closed = -1;
    for (int i = 0; i < 100 && closed < 1; i++) {
        closed =
            metric_value(port, "kronos_http_requests_total{route=\"/v1/forecast\",code=\"499\"}");
        if (closed < 1) usleep(10000);
    }
    assert_true(closed >= 1);
    resp_free(r);
    free(body);

    /* A plain (non-streaming) request whose client gives up: noticed while waiting. */
    body = forecast_body(600, 400, "\"pred_len\":400,\"paths\":128,\"seed\":6");
    http_resp sink = { 0 };
    sink.timeout_ms = 300;
    assert_int_equal(http_ex(port, "POST", "/v1/forecast", body, API_KEY, 0, &sink),
                     CURLE_OPERATION_TIMEDOUT);
    free(sink.body);
    t0 = kr_now_seconds();
    while (!kv_settled(&st) && kr_now_seconds() - t0 < 20) usleep(10000);
    fprintf(stderr, "plain request abandoned: settled after %.2f s\n", kr_now_seconds() - t0);
    assert_int_equal(st.running + st.waiting, 0);
    assert_int_equal(st.kv_bytes_used, st.prefix_cache_bytes);
    double cancelled2 = -1;
    for (int i = 0; i < 100 && cancelled2 < cancelled1 + 1; i++) {
        cancelled2 = metric_value(port, "kronos_requests_total{outcome=\"cancelled\"}");
        usleep(10000);
    }
    assert_true(cancelled2 >= cancelled1 + 1);
    free(body);
}

/* ---- 429 on a tiny queue */

#define N_BUSY 8

static void test_busy_429(void **state) {
    (void)state;
    kr_server_config c = base_config();
    c.sched.max_queue = 1;
    c.sched.max_running = 1;
    c.sched.tune = 0;
    kr_server *s = start_server(&c);
    conc_job jobs[N_BUSY];
    pthread_t th[N_BUSY];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < N_BUSY; i++) {
        jobs[i].port = kr_server_port(s);
        jobs[i].body = forecast_body(100 + i, 200, "\"pred_len\":60,\"paths\":16");
    }
    for (int i = 0; i < N_BUSY; i++) pthread_create(&th[i], NULL, conc_run, &jobs[i]);
    for (int i = 0; i < N_BUSY; i++) pthread_join(th[i], NULL);
    int ok = 0, busy = 0;
    for (int i = 0; i < N_BUSY; i++) {
        if (jobs[i].resp.status == 200)
            ok++;
        else if (jobs[i].resp.status == 429) {
            busy++;
            assert_string_equal(jobs[i].resp.retry_after, "1");
            assert_non_null(strstr(jobs[i].resp.body, "\"code\":429"));
        } else {
            fail_msg("request %d: unexpected %ld %.200s", i, jobs[i].resp.status,
                     jobs[i].resp.body);
        }
        free(jobs[i].body);
        free(jobs[i].resp.body);
    }
    fprintf(stderr, "max_queue 1: %d ok, %d busy\n", ok, busy);
    assert_true(ok >= 1);
    assert_true(busy >= 1);
    assert_true(metric_value(kr_server_port(s), "kronos_http_rejected_total{reason=\"busy\"}") ==
                busy);
    kr_server_free(s);
}

/* ---- time-of-day profiles */

static char g_profile_log[512];

static void profile_log(void *user, const char *line) {
    (void)user;
    if (strstr(line, "profile ") && strstr(line, "in effect"))
        snprintf(g_profile_log, sizeof g_profile_log, "%s", line);
}

/* Every key of the profile in force reaches the running scheduler and shows in /metrics and
 * in the log (two profiles cover the whole day in UTC, so one is always in force). */
static void test_profiles_apply(void **state) {
    (void)state;
    kr_server_config c = base_config();
    const char *doc = "{\"timezone\":\"UTC\",\"max_running\":8,\"profiles\":["
                      "{\"name\":\"am\",\"from\":\"00:00\",\"to\":\"12:00\",\"max_running\":1,"
                      "\"max_queue\":3,\"static_batching\":true,\"latency_mode\":\"tight\","
                      "\"max_batch_tokens\":1024},"
                      "{\"name\":\"pm\",\"from\":\"12:00\",\"to\":\"00:00\",\"max_running\":1,"
                      "\"max_queue\":3,\"static_batching\":true,\"latency_mode\":\"tight\","
                      "\"max_batch_tokens\":1024}]}";
    kr_error err = { 0 };
    if (kr_server_config_parse(doc, strlen(doc), "cfg", &c, &err) != KR_OK)
        fail_msg("%s", err.message);
    c.sched.log = profile_log;
    g_profile_log[0] = '\0';
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);
    assert_true(metric_value(port, "kronos_scheduler_max_running") == 1);
    assert_true(metric_value(port, "kronos_scheduler_max_queue") == 3);
    assert_true(metric_value(port, "kronos_scheduler_static_batching") == 1);
    assert_true(metric_value(port, "kronos_scheduler_max_batch_tokens") == 1024);
    assert_true(metric_value(port, "kronos_scheduler_batch_wait_seconds") == 0.015);
    assert_true(metric_value(port, "kronos_server_profile_active{profile=\"base\"}") == 0);
    double am = metric_value(port, "kronos_server_profile_active{profile=\"am\"}"),
           pm = metric_value(port, "kronos_server_profile_active{profile=\"pm\"}");
    assert_true((am == 1) != (pm == 1)); /* exactly one in force */
    assert_non_null(strstr(g_profile_log, "UTC (batch_wait_ms 15, max_batch_tokens 1024, "
                                          "max_running 1, max_queue 3, static batching"));
    assert_non_null(strstr(g_profile_log, "latency_mode tight"));
    /* It serves under those limits. */
    char *body = forecast_body(100, 120, "\"pred_len\":4,\"paths\":2");
    http_resp *r = http(port, "POST", "/v1/forecast", body, API_KEY);
    free(body);
    assert_int_equal(r->status, 200);
    resp_free(r);
    kr_server_free(s);
}

/* ---- drain */

typedef struct drain_arg {
    kr_server *s;
    double seconds;
} drain_arg;

static void *drain_run(void *arg) {
    drain_arg *d = arg;
    double t0 = kr_now_seconds();
    kr_server_drain(d->s, 300); /* generous: under ASan on a loaded machine the job takes long */
    d->seconds = kr_now_seconds() - t0;
    return NULL;
}

static void test_drain(void **state) {
    (void)state;
    kr_server_config c = base_config();
    kr_server *s = start_server(&c);
    int port = kr_server_port(s);
    conc_job inflight = { port,
                          forecast_body(200, 300, "\"pred_len\":150,\"paths\":32,\"seed\":8"),
                          { 0 } };
    pthread_t th, dth;
    pthread_create(&th, NULL, conc_run, &inflight);
    kr_context_stats st;
    double t0 = kr_now_seconds();
    do {
        usleep(2000);
        kr_context_get_stats(kr_server_context(s), &st);
    } while (st.running == 0 && kr_now_seconds() - t0 < 10);
    assert_int_equal(st.running, 1);

    drain_arg d = { s, 0 };
    pthread_create(&dth, NULL, drain_run, &d);
    t0 = kr_now_seconds();
    while (!kr_server_is_draining(s) && kr_now_seconds() - t0 < 5) usleep(1000);
    http_resp *r = http(port, "GET", "/ready", NULL, NULL);
    assert_int_equal(r->status, 503);
    assert_non_null(strstr(r->body, "draining"));
    resp_free(r);
    r = http(port, "GET", "/health", NULL, NULL);
    assert_int_equal(r->status, 200);
    resp_free(r);
    char *body = forecast_body(0, 50, "\"pred_len\":2");
    r = http(port, "POST", "/v1/forecast", body, NULL);
    assert_int_equal(r->status, 503);
    /* A draining replica's refusal says when to come back, as every 429/503 does: a load
     * balancer (or a client) retries elsewhere. */
    assert_string_equal(r->retry_after, "1");
    resp_free(r);
    free(body);

    pthread_join(th, NULL);
    if (inflight.resp.status != 200)
        fail_msg("in-flight: %ld %.200s", inflight.resp.status, inflight.resp.body);
    cJSON *root = cJSON_Parse(inflight.resp.body);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "mean")), 150);
    cJSON_Delete(root);
    pthread_join(dth, NULL);
    fprintf(stderr, "drain took %.2f s\n", d.seconds);
    free(inflight.body);
    free(inflight.resp.body);
    kr_server_free(s);
}

/* ---- the kronos serve process */

typedef kr_serve_proc proc;
#define spawn_serve kr_serve_spawn
#define read_err_until kr_serve_read_err

/* Waits for the process; its exit code, or -1 (killed after timeout_s, or killed by a signal). */
static int wait_exit(proc *p, double timeout_s) {
    int st = kr_serve_wait(p, timeout_s);
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_serve_process(void **state) {
    (void)state;
    proc p;
    const char *args[] = { "--port", "0", "--no-tune", "--request-timeout", "60", NULL };
    spawn_serve(&p, args);
    const char *l = read_err_until(&p, "listening on http://127.0.0.1:", 30);
    if (!l) fail_msg("no 'listening on' line: %s", p.err);
    int port = atoi(l + strlen("listening on http://127.0.0.1:"));
    assert_true(port > 0);
    http_resp *r = http(port, "GET", "/ready", NULL, NULL);
    assert_int_equal(r->status, 200);
    resp_free(r);
    /* SIGTERM with a request in flight: it is answered, then the process exits 0. */
    conc_job inflight = { port, forecast_body(200, 300, "\"pred_len\":120,\"paths\":32"), { 0 } };
    pthread_t th;
    pthread_create(&th, NULL, conc_run, &inflight);
    /* Wait until the server has accepted it (running or queued), then stop the process. */
    double t0 = kr_now_seconds();
    while (metric_value(port, "kronos_requests_running") +
                   metric_value(port, "kronos_requests_waiting") <
               1 &&
           kr_now_seconds() - t0 < 20)
        usleep(5000);
    kill(p.pid, SIGTERM);
    pthread_join(th, NULL);
    assert_int_equal(inflight.resp.status, 200);
    assert_int_equal(wait_exit(&p, 60), 0);
    assert_non_null(strstr(p.err, "draining"));
    free(inflight.body);
    free(inflight.resp.body);

    /* Usage errors exit 2 and say what is wrong. */
    const char *quant[] = { "--quant", "int4", NULL };
    spawn_serve(&p, quant);
    assert_int_equal(wait_exit(&p, 30), 2);
    assert_non_null(strstr(p.err, "--quant must be one of f32, bf16, int8, fp8, q4, got 'int4'"));
    const char *tmp = kr_test_fresh_dir();
    char cfg[4200];
    snprintf(cfg, sizeof cfg, "%s/serve.json", tmp);
    assert_int_equal(kr_test_write_file(cfg, "{\"batch_wait_ms\": -1}", 21), 0);
    const char *badcfg[] = { "--config", cfg, NULL };
    spawn_serve(&p, badcfg);
    assert_int_equal(wait_exit(&p, 30), 2);
    assert_non_null(strstr(p.err, "serve.json: batch_wait_ms: must be an integer in 0..60000"));
    const char *badport[] = { "--port", "99999", NULL };
    spawn_serve(&p, badport);
    assert_int_equal(wait_exit(&p, 30), 2);
    assert_non_null(strstr(p.err, "--port"));
    unlink(cfg);
    rmdir(tmp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes_auth_errors),
        cmocka_unit_test(test_body_too_large),
        cmocka_unit_test(test_concurrent_equals_alone),
        cmocka_unit_test(test_server_matches_library),
        cmocka_unit_test(test_cli_and_http_print_alike),
        cmocka_unit_test(test_prefix_cache_reuse),
        cmocka_unit_test(test_quant_drift_metric),
        cmocka_unit_test(test_stream_shape),
        cmocka_unit_test(test_deadline_504),
        cmocka_unit_test(test_cancel_frees_kv),
        cmocka_unit_test(test_busy_429),
        cmocka_unit_test(test_profiles_apply),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_serve_process),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
