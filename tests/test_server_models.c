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
#include <unistd.h>

#include "engine_helpers.h"
#include "http_client.h"
#include "series/candles.h"
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
    const char *ladder = "{\"models\": {\"s\": {\"model\": \"/m\", \"precisions\": ["
                         "{\"quant\": \"int8\", \"gate_report\": \"/r/int8.json\"},"
                         "{\"quant\": \"q4\", \"method\": \"gptq\", \"model\": \"/m-q4\","
                         " \"gate_report\": \"/r/q4.json\"}]}},"
                         " \"profiles\": [{\"name\": \"p\", \"from\": \"09:00\", \"to\": "
                         "\"10:00\", \"precision_floor\": \"int8\"}]}";
    kr_server_config_defaults(&c);
    assert_int_equal(kr_server_config_parse(ladder, strlen(ladder), "cfg", &c, &err), KR_OK);
    assert_int_equal(c.models[0].n_precisions, 2);
    assert_string_equal(c.models[0].precisions[1].method, "gptq");
    assert_string_equal(c.profiles[0].precision_floor, "int8");
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
        { "{\"models\": {\"a\": {\"model\": \"x\", \"precisions\": [{\"quant\": \"int8\"}]}}}",
          "needs \"gate_report\"" },
        { "{\"models\": {\"a\": {\"model\": \"x\", \"precisions\": [{\"quant\": \"f32\", "
          "\"gate_report\": \"r\"}]}}}",
          "quant must be one of bf16, fp8, int8, q4" },
        { "{\"models\": {\"a\": {\"model\": \"x\", \"precisions\": [{\"quant\": \"q4\", "
          "\"gate_report\": \"r\"}, {\"quant\": \"int8\", \"gate_report\": \"r\"}]}}}",
          "lower than the one above" },
        { "{\"models\": {\"a\": {\"model\": \"x\", \"precisions\": [{\"quant\": \"q4\", "
          "\"method\": \"gptq\", \"gate_report\": \"r\"}]}}}",
          "a gptq precision needs its checkpoint" },
        { "{\"profiles\": [{\"name\": \"p\", \"from\": \"09:00\", \"to\": \"10:00\", "
          "\"precision_floor\": \"int4\"}]}",
          "precision_floor: must be one of" },
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

typedef struct one_forecast {
    int port;
    kr_http_resp *r;
} one_forecast;

static void *forecast_alt(void *arg) {
    one_forecast *f = arg;
    char *body = kr_http_forecast_body(g_candles, 100, 96, "\"pred_len\": 3, \"model\": \"alt\"");
    f->r = call(f->port, "POST", "/v1/forecast", body, KEY);
    free(body);
    return NULL;
}

static const char *precision_of(const kr_http_resp *r) {
    static char p[32];
    cJSON *j = cJSON_Parse(r->body);
    const cJSON *v = cJSON_GetObjectItem(j, "precision");
    snprintf(p, sizeof p, "%s", cJSON_IsString(v) ? v->valuestring : "");
    cJSON_Delete(j);
    return p;
}

/* The ladder wired through the server: a gated int8 rung; the rule driven by hand on a
 * simulated clock (the server's own ticks off: tune false) against a real queue held by a
 * gate on the f32 engine; new requests move, the one queued stays; the profile's floor moves
 * them back at once; a rung whose report failed its gate is refused. */
static void test_precision_ladder(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char pass[4200], failed[4200];
    snprintf(pass, sizeof pass, "%s/int8-pass.json", dir);
    snprintf(failed, sizeof failed, "%s/q4-fail.json", dir);
    const char *ok_doc =
        "{\"quant\":\"int8\",\"method\":\"rtn\",\"gates\":{\"passed\":true,\"failed\":0}}";
    const char *bad_doc =
        "{\"quant\":\"q4\",\"method\":\"rtn\",\"gates\":{\"passed\":false,\"failed\":2}}";
    assert_int_equal(kr_test_write_file(pass, ok_doc, strlen(ok_doc)), 0);
    assert_int_equal(kr_test_write_file(failed, bad_doc, strlen(bad_doc)), 0);
    kr_server_config c = two_models();
    c.sched.tune = 0;
    c.sched.tune_window_s = 10;
    c.sched.tune_relax_s = 20;
    c.models[0].n_precisions = 1;
    snprintf(c.models[0].precisions[0].quant, 16, "int8");
    snprintf(c.models[0].precisions[0].gate_report, 1024, "%s", pass);
    kr_server *s = kr_test_server_start(g_model, &c);
    int port = kr_server_port(s);
    one_forecast first = { port, NULL };
    forecast_alt(&first);
    assert_int_equal(first.r->status, 200);
    assert_string_equal(precision_of(first.r), "f32");
    kr_http_resp_free(first.r);

    kr_served *e = kr_models_acquire(s->models, "alt");
    assert_int_equal(e->n_rungs, 2);
    assert_string_equal(e->rung[1].precision, "int8");
    kr_test_gate g;
    kr_test_gate_close(&g, e->rung[0].ctx);
    one_forecast queued = { port, NULL };
    pthread_t th;
    pthread_create(&th, NULL, forecast_alt, &queued);
    kr_context_stats st;
    do {
        usleep(2000);
        kr_context_get_stats(e->rung[0].ctx, &st);
    } while (st.waiting < 1 || st.queue_oldest_wait_seconds < 0.01);
    /* Pressure for the window: down one rung; the rung's queue is what counts. */
    kr_models_ladder_tick(s->models, 1000.0, "", 0.005, NULL, NULL);
    assert_int_equal(atomic_load(&e->active), 0);
    kr_models_ladder_tick(s->models, 1011.0, "", 0.005, NULL, NULL);
    assert_int_equal(atomic_load(&e->active), 1);
    one_forecast moved = { port, NULL };
    forecast_alt(&moved); /* runs on the int8 engine while the f32 one is held */
    assert_int_equal(moved.r->status, 200);
    assert_string_equal(precision_of(moved.r), "int8");
    kr_http_resp_free(moved.r);
    assert_true(
        kr_http_metric(port,
                       "kronos_precision_decisions_total{direction=\"down\",model=\"alt\"}") == 1);
    assert_true(
        kr_http_metric(port, "kronos_precision_requests_total{model=\"alt\",precision=\"int8\"}") ==
        1);
    /* A profile allowing f32 only: back up at once. */
    kr_models_ladder_tick(s->models, 1012.0, "f32", 0.005, NULL, NULL);
    assert_int_equal(atomic_load(&e->active), 0);
    kr_test_gate_open(&g);
    pthread_join(th, NULL);
    assert_int_equal(queued.r->status, 200);
    assert_string_equal(precision_of(queued.r), "f32"); /* it stayed where it started */
    kr_http_resp_free(queued.r);
    kr_models_release(s->models, e);

    /* A precision whose report failed its gate is not served. */
    char spec[5000];
    snprintf(spec, sizeof spec,
             "{\"model\": \"%s\", \"precisions\": [{\"quant\": \"q4\", \"gate_report\": \"%s\"}]}",
             KR_SOURCE_DIR "/models/kronos-demo", failed);
    kr_http_resp *r = call(port, "POST", "/v1/models/gated", spec, KEY);
    assert_int_equal(r->status, 400);
    assert_non_null(strstr(r->body, "did not pass the gate"));
    kr_http_resp_free(r);
    snprintf(spec, sizeof spec,
             "{\"model\": \"%s\", \"precisions\": [{\"quant\": \"q4\", \"gate_report\": \"%s\"}]}",
             KR_SOURCE_DIR "/models/kronos-demo", pass); /* a report about other weights */
    r = call(port, "POST", "/v1/models/gated", spec, KEY);
    assert_int_equal(r->status, 400);
    assert_non_null(strstr(r->body, "not q4"));
    kr_http_resp_free(r);
    kr_server_free(s);
    unlink(pass);
    unlink(failed);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_models),
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_reload_under_load),
        cmocka_unit_test(test_precision_ladder),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
