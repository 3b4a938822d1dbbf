/*
 * Several models in one server (server/models.h): the config's "models", the "model" field
 * of a forecast, GET /v1/models, per-model metric labels, POST / DELETE /v1/models/{name}
 * (API key), and a model replaced again and again while clients keep forecasting on it: zero
 * failed requests, every answer from a whole model (old or new), and the replaced weights
 * freed once their last request has ended. Counts are bounded; nothing waits on a clock.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_client.h"
#include "market/candles.h"
#include "server/config.h"
#include "server/server_internal.h"
#include "server_fixtures.h"
#include "test_support.h"

#define KEY "models-test-key"

static kr_model *g_model;
static kr_candles *g_candles;

static int setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    kr_error err = { 0 };
    if (!(g_model = kr_test_demo_model(NULL))) return -1;
    return kr_candles_read_csv(KR_SOURCE_DIR "/data/XSHG_5min_600977.csv", &g_candles, &err) ==
                   KR_OK
               ? 0
               : -1;
}

static int teardown(void **state) {
    (void)state;
    kr_candles_free(g_candles);
    kr_model_free(g_model);
    curl_global_cleanup();
    return 0;
}

static kr_http_resp *call(int port, const char *method, const char *path, const char *body,
                          const char *key) {
    kr_http_resp *r = calloc(1, sizeof *r);
    CURLcode cc = kr_test_http_perform(port, method, path, body, NULL, key, 0, r);
    if (cc != CURLE_OK) fail_msg("%s %s: %s", method, path, curl_easy_strerror(cc));
    return r;
}

static kr_server_config two_models(void) {
    kr_server_config c = kr_test_server_config();
    snprintf(c.api_key, sizeof c.api_key, "%s", KEY);
    c.n_models = 1;
    snprintf(c.models[0].name, sizeof c.models[0].name, "alt");
    snprintf(c.models[0].model, sizeof c.models[0].model, "%s",
             KR_SOURCE_DIR "/models/kronos-demo");
    c.max_models = 3;
    return c;
}

static void test_config_models(void **state) {
    (void)state;
    kr_server_config c;
    kr_server_config_defaults(&c);
    kr_error err = { 0 };
    const char *doc =
        "{\"models\": {\"small-int8\": {\"model\": \"/m/small\", \"quant\": \"int8\"},"
        " \"small\": {\"model\": \"/m/small\", \"kv_dtype\": \"bf16\"}},"
        " \"default_model\": \"small\", \"max_models\": 4}";
    assert_int_equal(kr_server_config_parse(doc, strlen(doc), "cfg", &c, &err), KR_OK);
    assert_int_equal(c.n_models, 2);
    assert_string_equal(c.models[0].name, "small-int8");
    assert_string_equal(c.models[0].quant, "int8");
    assert_string_equal(c.models[1].kv_dtype, "bf16");
    assert_string_equal(c.default_model, "small");
    assert_int_equal(c.max_models, 4);
    static const struct {
        const char *doc, *needle;
    } bad[] = {
        { "{\"models\": []}", "models: must be an object" },
        { "{\"models\": {\"a/b\": {\"model\": \"x\"}}}", "a model name is" },
        { "{\"models\": {\"a\": {}}}", "needs \"model\"" },
        { "{\"models\": {\"a\": {\"model\": \"x\", \"quant\": \"int4\"}}}", "quant must be" },
        { "{\"models\": {\"a\": {\"model\": \"x\", \"kv\": \"f32\"}}}", "unknown key" },
        { "{\"models\": {\"a\": {\"model\": \"x\"}, \"b\": {\"model\": \"y\"}}, \"max_models\": 2}",
          "max_models (2)" },
        { "{\"default_model\": \"../x\"}", "default_model" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kr_server_config_defaults(&c);
        memset(&err, 0, sizeof err);
        assert_int_not_equal(
            kr_server_config_parse(bad[i].doc, strlen(bad[i].doc), "cfg", &c, &err), KR_OK);
        if (!strstr(err.message, bad[i].needle))
            fail_msg("%s: '%s' lacks '%s'", bad[i].doc, err.message, bad[i].needle);
    }
}

static void test_routes(void **state) {
    (void)state;
    kr_server_config c = two_models();
    kr_server *s = kr_test_server_start(g_model, &c);
    int port = kr_server_port(s);
    kr_http_resp *r = call(port, "GET", "/v1/models", NULL, KEY);
    assert_int_equal(r->status, 200);
    cJSON *j = kr_http_json(r);
    cJSON *data = cJSON_GetObjectItem(j, "data");
    assert_int_equal(cJSON_GetArraySize(data), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(data, 1), "id")->valuestring, "alt");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(data, 0), "default")));
    cJSON_Delete(j);
    kr_http_resp_free(r);

    char *body = kr_http_forecast_body(g_candles, 0, 64, "\"pred_len\": 3, \"model\": \"alt\"");
    r = call(port, "POST", "/v1/forecast", body, KEY);
    assert_int_equal(r->status, 200);
    j = kr_http_json(r);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "model"), "name")->valuestring,
                        "alt");
    cJSON_Delete(j);
    kr_http_resp_free(r);
    free(body);
    /* Its engine reports under its name. */
    assert_true(kr_http_metric(port, "kronos_requests_total{model=\"alt\",outcome=\"ok\"}") == 1);
    assert_true(kr_http_metric(port, "kronos_prefill_tokens_total{model=\"alt\"}") >= 1);
    assert_true(kr_http_metric(port, "kronos_requests_total{outcome=\"ok\"}") == 0);
    body = kr_http_forecast_body(g_candles, 0, 64, "\"pred_len\": 3, \"model\": \"nope\"");
    r = call(port, "POST", "/v1/forecast", body, KEY);
    kr_assert_http_error(r, 404, "model");
    kr_http_resp_free(r);
    free(body);

    /* Management: the key, a body, names. */
    const char *spec = "{\"model\": \"" KR_SOURCE_DIR "/models/kronos-demo\", \"quant\": \"int8\"}";
    r = call(port, "POST", "/v1/models/third", spec, NULL);
    assert_int_equal(r->status, 401);
    kr_http_resp_free(r);
    r = call(port, "POST", "/v1/models/third", "{\"model\": 3}", KEY);
    assert_int_equal(r->status, 400);
    kr_http_resp_free(r);
    r = call(port, "POST", "/v1/models/third", "{\"model\": \"/no/such/dir\"}", KEY);
    assert_int_equal(r->status, 400);
    kr_http_resp_free(r);
    r = call(port, "POST", "/v1/models/third", spec, KEY);
    assert_int_equal(r->status, 200);
    kr_http_resp_free(r);
    r = call(port, "POST", "/v1/models/fourth", spec, KEY); /* max_models 3 */
    assert_int_equal(r->status, 409);
    kr_http_resp_free(r);
    r = call(port, "POST", "/v1/models/kronos-demo", spec, KEY); /* the main model stays */
    assert_int_equal(r->status, 409);
    kr_http_resp_free(r);
    r = call(port, "DELETE", "/v1/models/third", NULL, KEY);
    assert_int_equal(r->status, 200);
    kr_http_resp_free(r);
    r = call(port, "DELETE", "/v1/models/third", NULL, KEY);
    assert_int_equal(r->status, 404);
    kr_http_resp_free(r);
    kr_server_free(s);

    /* Without an API key configured, models cannot be managed at all. */
    c = two_models();
    c.api_key[0] = 0;
    s = kr_test_server_start(g_model, &c);
    r = call(kr_server_port(s), "POST", "/v1/models/third", spec, NULL);
    assert_int_equal(r->status, 403);
    kr_http_resp_free(r);
    kr_server_free(s);
}

enum { CLIENTS = 3, PER_CLIENT = 16, RELOADS = 4 };

typedef struct client {
    int port;
    int ok, failed;
    char last_error[256];
    atomic_int *done;
} client;

static void *client_run(void *arg) {
    client *cl = arg;
    for (int i = 0; i < PER_CLIENT; i++) {
        char extra[128];
        snprintf(extra, sizeof extra,
                 "\"pred_len\": 4, \"paths\": 2, \"seed\": %d, \"model\": \"alt\"", i);
        char *body = kr_http_forecast_body(g_candles, 40 * i, 96, extra);
        kr_http_resp *r = calloc(1, sizeof *r);
        CURLcode cc = kr_test_http_perform(cl->port, "POST", "/v1/forecast", body, NULL, KEY, 0, r);
        if (cc == CURLE_OK && r->status == 200) {
            cl->ok++;
        } else {
            cl->failed++;
            snprintf(cl->last_error, sizeof cl->last_error, "%ld %s", r->status,
                     r->body ? r->body : curl_easy_strerror(cc));
        }
        kr_http_resp_free(r);
        free(body);
        atomic_fetch_add(cl->done, 1);
    }
    return NULL;
}

static void test_reload_under_load(void **state) {
    (void)state;
    kr_server_config c = two_models();
    kr_server *s = kr_test_server_start(g_model, &c);
    int port = kr_server_port(s);
    atomic_int done = 0;
    client cl[CLIENTS];
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        cl[i] = (client){ port, 0, 0, "", &done };
        pthread_create(&th[i], NULL, client_run, &cl[i]);
    }
    /* Replace "alt" while the clients run: through the API, then through the config path
     * SIGHUP takes (a changed quant counts as a new model). */
    for (int k = 0; k < RELOADS; k++) {
        const char *spec = k % 2 ? "{\"model\": \"" KR_SOURCE_DIR "/models/kronos-demo\"}"
                                 : "{\"model\": \"" KR_SOURCE_DIR
                                   "/models/kronos-demo\", \"quant\": \"int8\"}";
        kr_http_resp *r = call(port, "POST", "/v1/models/alt", spec, KEY);
        if (r->status != 200) fail_msg("reload %d: %ld %s", k, r->status, r->body);
        kr_http_resp_free(r);
    }
    kr_server_config next = two_models();
    snprintf(next.models[0].quant, sizeof next.models[0].quant, "bf16");
    kr_error err = { 0 };
    assert_int_equal(kr_server_reload_models(s, &next, &err), KR_OK);
    assert_int_equal(kr_server_reload_models(s, &next, &err), KR_OK); /* unchanged: no reload */
    for (int i = 0; i < CLIENTS; i++) pthread_join(th[i], NULL);
    int ok = 0;
    for (int i = 0; i < CLIENTS; i++) {
        if (cl[i].failed)
            fail_msg("client %d: %d failed, last: %s", i, cl[i].failed, cl[i].last_error);
        ok += cl[i].ok;
    }
    assert_int_equal(ok, CLIENTS * PER_CLIENT);
    /* Every replaced model was freed after its last request. */
    assert_int_equal(kr_models_retired(s->models), 0);
    int served = 0, loads = 0, unloads = 0;
    kr_models_counts(s->models, &served, &loads, &unloads);
    assert_int_equal(served, 2);
    assert_int_equal(loads, 1 + RELOADS + 1);
    kr_http_resp *r = call(port, "GET", "/v1/models", NULL, KEY);
    cJSON *j = kr_http_json(r);
    cJSON *alt = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 1);
    assert_string_equal(cJSON_GetObjectItem(alt, "quant")->valuestring, "bf16");
    cJSON_Delete(j);
    kr_http_resp_free(r);
    /* A config without the model unloads it. */
    next.n_models = 0;
    assert_int_equal(kr_server_reload_models(s, &next, &err), KR_OK);
    char *body = kr_http_forecast_body(g_candles, 0, 64, "\"pred_len\": 3, \"model\": \"alt\"");
    r = call(port, "POST", "/v1/forecast", body, KEY);
    assert_int_equal(r->status, 404);
    kr_http_resp_free(r);
    free(body);
    kr_server_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_models),
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_reload_under_load),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
