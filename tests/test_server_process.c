/*
 * The `kronos serve` executable as a child process (issue 11):
 *  - SIGHUP drains like SIGTERM (a stream in flight completes) and exits 0;
 *  - a second SIGTERM during a drain stops the process at once, by that signal;
 *  - with --drain-delay, a signal turns /ready 503 at once while requests are still served
 *    (a load balancer takes the replica out before it refuses anything), then it drains;
 *  - every flag in `kronos serve --help` is also a config-file key, and the documented
 *    config check (`--check-config`) exits 0 on a good file and 2 naming the key otherwise;
 *  - 50 concurrent bodies of max_body_bytes ({"pred_len":1,"candles":[0,0,0,...]}) keep the
 *    server's peak RSS (VmHWM) under its start-up RSS + max_memory_in_flight + 64 MiB.
 */
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "http_client.h"
#include "serve_proc.h"
#include "test_support.h"

#include "base/timeutil.h"
#include "series/candles.h"

#define DEMO KR_SOURCE_DIR "/models/kronos-demo"

static kr_candles *g_candles;

/* ------------------------------------------------------------------ helpers */

typedef kr_serve_proc proc;
#define spawn kr_serve_spawn
#define spawn_serving kr_serve_start
#define read_err_until kr_serve_read_err
#define wait_child kr_serve_wait
#define metric_value kr_http_metric
#define forecast_body(start, n, extra) kr_http_forecast_body(g_candles, start, n, extra)

typedef struct job {
    int port;
    const char *body;
    kr_http_resp resp;
    CURLcode cc;
} job;

static void *job_run(void *arg) {
    job *j = arg;
    j->cc = kr_test_http_perform(j->port, "POST", "/v1/forecast", j->body, NULL, NULL, 0, &j->resp);
    return NULL;
}

/* Waits until the server has a request running or queued. */
static void wait_accepted(int port) {
    double t0 = kr_now_seconds();
    while (metric_value(port, "kronos_requests_running") +
                   metric_value(port, "kronos_requests_waiting") <
               1 &&
           kr_now_seconds() - t0 < 30)
        usleep(5000);
}

static int setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    kr_error err = { 0 };
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
    curl_global_cleanup();
    return 0;
}

/* ------------------------------------------------------------------ signals (defect 8) */

static void test_sighup_drains(void **state) {
    (void)state;
    proc p;
    const char *args[] = { "--port", "0", "--no-tune", NULL };
    spawn_serving(&p, args);
    char *body = forecast_body(200, 300, "\"pred_len\":80,\"paths\":32,\"stream\":true");
    job j = { p.port, body, { 0 }, CURLE_OK };
    pthread_t th;
    pthread_create(&th, NULL, job_run, &j);
    wait_accepted(p.port);
    kill(p.pid, SIGHUP);
    pthread_join(th, NULL);
    /* The stream in flight was not cut: every step, then the result. */
    assert_int_equal(j.cc, CURLE_OK);
    assert_int_equal(j.resp.status, 200);
    assert_non_null(strstr(j.resp.body, "event: result"));
    int st = wait_child(&p, 60);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) fail_msg("status %d: %s", st, p.err);
    assert_non_null(strstr(p.err, "SIGHUP: draining"));
    assert_non_null(strstr(p.err, "stopped"));
    free(j.resp.body);
    free(body);
}

/* The models served now (GET /v1/models), or -1. */
static int models_served(int port) {
    kr_http_resp *r = calloc(1, sizeof *r);
    int n = -1;
    if (kr_test_http_perform(port, "GET", "/v1/models", NULL, NULL, NULL, 0, r) == CURLE_OK &&
        r->status == 200) {
        cJSON *j = cJSON_Parse(r->body);
        n = cJSON_GetArraySize(cJSON_GetObjectItem(j, "data"));
        cJSON_Delete(j);
    }
    kr_http_resp_free(r);
    return n;
}

/* With --config, SIGHUP reads the file again and serves the models it lists; the server goes
 * on serving (a later SIGTERM drains). */
static void test_sighup_reloads_models(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char cfg[4200];
    snprintf(cfg, sizeof cfg, "%s/serve.json", dir);
    const char *two = "{\"models\": {\"alt\": {\"model\": \"" DEMO "\"}}, \"max_models\": 2}";
    assert_int_equal(kr_test_write_file(cfg, two, strlen(two)), 0);
    proc p;
    const char *args[] = { "--port", "0", "--config", cfg, NULL };
    spawn_serving(&p, args);
    assert_int_equal(models_served(p.port), 2);
    const char *one = "{\"max_models\": 2}";
    assert_int_equal(kr_test_write_file(cfg, one, strlen(one)), 0);
    kill(p.pid, SIGHUP);
    read_err_until(&p, "SIGHUP: models reloaded", 60);
    assert_int_equal(models_served(p.port), 1);
    kill(p.pid, SIGTERM);
    int st = wait_child(&p, 60);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) fail_msg("status %d: %s", st, p.err);
    unlink(cfg);
    rmdir(dir);
}

static void test_drain_delay_keeps_serving(void **state) {
    (void)state;
    proc p;
    const char *args[] = { "--port", "0", "--no-tune", "--drain-delay", "3", NULL };
    spawn_serving(&p, args);
    kr_http_resp r = { 0 };
    assert_int_equal(kr_test_http_perform(p.port, "GET", "/ready", NULL, NULL, NULL, 0, &r),
                     CURLE_OK);
    assert_int_equal(r.status, 200);
    free(r.body);
    kill(p.pid, SIGTERM);
    assert_non_null(read_err_until(&p, "refusing new requests in 3.0 s", 30));
    /* Inside the delay: not ready, yet a new forecast is answered. */
    memset(&r, 0, sizeof r);
    assert_int_equal(kr_test_http_perform(p.port, "GET", "/ready", NULL, NULL, NULL, 0, &r),
                     CURLE_OK);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "draining"));
    free(r.body);
    char *body = forecast_body(100, 64, "\"pred_len\":2,\"paths\":1");
    memset(&r, 0, sizeof r);
    assert_int_equal(kr_test_http_perform(p.port, "POST", "/v1/forecast", body, NULL, NULL, 0, &r),
                     CURLE_OK);
    if (r.status != 200) fail_msg("forecast during the drain delay: %ld %s", r.status, r.body);
    free(r.body);
    free(body);
    int st = wait_child(&p, 60);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) fail_msg("status %d: %s", st, p.err);
    assert_non_null(strstr(p.err, "drained"));
}

static void test_second_signal_stops_at_once(void **state) {
    (void)state;
    proc p;
    const char *args[] = { "--port", "0", "--no-tune", NULL };
    spawn_serving(&p, args);
    /* A long forecast (seconds): the drain would wait for it. */
    char *body = forecast_body(100, 200, "\"pred_len\":300,\"paths\":128");
    job j = { p.port, body, { 0 }, CURLE_OK };
    pthread_t th;
    pthread_create(&th, NULL, job_run, &j);
    wait_accepted(p.port);
    kill(p.pid, SIGTERM);
    assert_non_null(read_err_until(&p, "SIGTERM: draining", 30));
    double t0 = kr_now_seconds();
    kill(p.pid, SIGTERM);
    int st = wait_child(&p, 120);
    double took = kr_now_seconds() - t0;
    pthread_join(th, NULL);
    fprintf(stderr, "second SIGTERM: the process ended %.2f s later\n", took);
    /* It died by the second signal, before the forecast in flight could finish. */
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM)) fail_msg("status %d: %s", st, p.err);
    assert_non_null(strstr(p.err, "second SIGTERM during the drain: stopping now"));
    assert_true(j.cc != CURLE_OK || j.resp.status != 200);
    free(j.resp.body);
    free(body);
}

/* ------------------------------------------------------------------ flags and config keys */

/* Runs kronos serve with args (stdout and stderr captured). */
static const kr_test_run *serve_run(const char *dir, const char *args) {
    char full[8192];
    snprintf(full, sizeof full, "serve %s", args);
    return kr_test_kronos(dir, "", full);
}

/* A config value for each flag's key, so that a flag added without a key (or without a value
 * here) fails this test. */
static const char *value_for(const char *key, const char *dir, char *buf, size_t cap) {
    static const struct {
        const char *key, *value;
    } k_values[] = {
        { "model", "\"" DEMO "/predictor\"" },
        { "tokenizer", "\"" DEMO "/tokenizer\"" },
        { "host", "\"127.0.0.1\"" },
        { "port", "0" },
        { "quant", "\"f32\"" },
        { "kv_dtype", "\"bf16\"" },
        { "threads", "1" },
        { "kv_budget", "\"64MiB\"" },
        { "tune", "false" },
        { "request_timeout_s", "30" },
        { "drain_delay_s", "0.5" },
        { "allow_nonfinite_weights", "false" },
        { "no_mmap", "true" },
    };
    for (size_t i = 0; i < sizeof k_values / sizeof k_values[0]; i++)
        if (!strcmp(key, k_values[i].key)) return k_values[i].value;
    if (!strcmp(key, "api_key_file"))
        snprintf(buf, cap, "\"%s/key\"", dir);
    else if (!strcmp(key, "db"))
        snprintf(buf, cap, "\"%s/store.db\"", dir);
    else if (!strcmp(key, "web_root"))
        snprintf(buf, cap, "\"%s\"", dir);
    else if (!strcmp(key, "access_log"))
        snprintf(buf, cap, "\"%s/access.log\"", dir);
    else
        return NULL;
    return buf;
}

static void test_every_flag_is_a_key(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char path[4200];
    snprintf(path, sizeof path, "%s/key", dir);
    assert_int_equal(kr_test_write_file(path, "s3cret\n", 7), 0);
    const kr_test_run *h = serve_run(dir, "--help");
    assert_int_equal(h->code, 0);
    char *help = strdup(h->out);
    kr_sbuf cfg = { 0 };
    kr_sb_printf(&cfg, "{");
    int keys = 0;
    for (char *line = strtok(help, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "  --", 4) != 0) continue;
        char flag[64];
        if (sscanf(line + 4, "%63[a-z0-9-]", flag) != 1) continue;
        /* --config and --check-config are about the file itself; --help is not a setting. */
        if (!strcmp(flag, "config") || !strcmp(flag, "check-config") || !strcmp(flag, "help"))
            continue;
        char key[64];
        if (!strcmp(flag, "no-tune"))
            snprintf(key, sizeof key, "tune");
        else if (!strcmp(flag, "request-timeout"))
            snprintf(key, sizeof key, "request_timeout_s");
        else if (!strcmp(flag, "drain-delay"))
            snprintf(key, sizeof key, "drain_delay_s");
        else {
            snprintf(key, sizeof key, "%s", flag);
            for (char *c = key; *c; c++)
                if (*c == '-') *c = '_';
        }
        char buf[4300];
        const char *v = value_for(key, dir, buf, sizeof buf);
        if (!v) fail_msg("--%s: no config key value known to this test (key '%s')", flag, key);
        kr_sb_printf(&cfg, "%s\"%s\":%s", keys++ ? "," : "", key, v);
    }
    kr_sb_printf(&cfg, "}");
    free(help);
    fprintf(stderr, "%d flags as keys: %s\n", keys, cfg.s);
    assert_true(keys >= 14);
    snprintf(path, sizeof path, "%s/all.json", dir);
    assert_int_equal(kr_test_write_file(path, cfg.s, cfg.len), 0);
    char args[4400];
    snprintf(args, sizeof args, "--config %s --check-config", path);
    const kr_test_run *r = serve_run(dir, args);
    if (r->code != 0) fail_msg("exit %d: %s%s", r->code, r->out, r->err);
    /* The keys took effect (db and web_root used to be refused). */
    char want[4300];
    snprintf(want, sizeof want, "db          %s/store.db", dir);
    assert_non_null(strstr(r->out, want));
    snprintf(want, sizeof want, "web root    %s\n", dir);
    assert_non_null(strstr(r->out, want));
    snprintf(want, sizeof want, "access log  %s/access.log", dir);
    assert_non_null(strstr(r->out, want));
    assert_non_null(strstr(r->out, "quant       f32, kv bf16"));
    free(cfg.s);
    const char *files[] = { "key", "all.json", "stdout", "stderr" };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void test_check_config_as_documented(void **state) {
    (void)state;
    /* The command deploy/README.md tells operators to run. */
    char readme[32768];
    kr_test_slurp(KR_SOURCE_DIR "/deploy/README.md", readme, sizeof readme);
    assert_non_null(strstr(readme, "kronos serve --config /etc/kronos/kronos-serve.json "
                                   "--check-config"));
    assert_non_null(strstr(readme, "exits 0"));
    const char *dir = kr_test_fresh_dir();
    char key[4200], args[8800], bad[4200];
    snprintf(key, sizeof key, "%s/api-key", dir);
    assert_int_equal(kr_test_write_file(key, "k3y\n", 4), 0);
    /* The shipped config, with the key file where this test keeps it: exit 0, settings shown. */
    snprintf(args, sizeof args,
             "--config " KR_SOURCE_DIR "/deploy/kronos-serve.json --api-key-file %s --check-config",
             key);
    const kr_test_run *r = serve_run(dir, args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    assert_non_null(strstr(r->out, "config OK"));
    assert_non_null(strstr(r->out, "listen      127.0.0.1:8080"));
    /* The scheduler's settings in effect, the shipped profiles by name and time. */
    if (!strstr(r->out, "batch wait 50 ms") || !strstr(r->out, "backfill on") ||
        !strstr(r->out, "tuner on") || !strstr(r->out, "profiles    4 (pre-market 08:30-09:30") ||
        !strstr(r->out, "narrative   off (no llm_url)"))
        fail_msg("scheduler settings not shown: %s", r->out);
    /* Its key file missing: exit 2 naming the key. */
    r = serve_run(dir, "--config " KR_SOURCE_DIR "/deploy/kronos-serve.json --check-config");
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "api_key_file: /etc/kronos/api-key"));
    /* A bad value: exit 2 naming the file and the key. */
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    assert_int_equal(kr_test_write_file(bad, "{\"read_timeout_s\": 0}", 21), 0);
    snprintf(args, sizeof args, "--config %s --check-config", bad);
    r = serve_run(dir, args);
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "bad.json: read_timeout_s: must be a number in (0, 3600]"));
    assert_null(strstr(r->out, "config OK"));
    unlink(key);
    unlink(bad);
    snprintf(key, sizeof key, "%s/stdout", dir);
    unlink(key);
    snprintf(key, sizeof key, "%s/stderr", dir);
    unlink(key);
    rmdir(dir);
}

/* ------------------------------------------------------------------ memory (defect 4) */

/* kB of a /proc/PID/status field ("VmHWM:", "VmRSS:"), or -1. */
static double proc_kb(pid_t pid, const char *field) {
    char path[64], text[8192];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    kr_test_slurp(path, text, sizeof text);
    const char *f = strstr(text, field);
    return f ? strtod(f + strlen(field), NULL) : -1;
}

#define N_BIG 50

static void test_rss_bound_under_big_bodies(void **state) {
    (void)state;
    const size_t in_flight_mib = 64;
    const char *dir = kr_test_fresh_dir();
    char cfg_path[4200], args_cfg[4300];
    snprintf(cfg_path, sizeof cfg_path, "%s/serve.json", dir);
    char cfg[256];
    int n = snprintf(cfg, sizeof cfg,
                     "{\"max_request_memory\":\"32MiB\",\"max_memory_in_flight\":\"%zuMiB\","
                     "\"max_connections\":128}",
                     in_flight_mib);
    assert_int_equal(kr_test_write_file(cfg_path, cfg, (size_t)n), 0);
    snprintf(args_cfg, sizeof args_cfg, "%s", cfg_path);
    const char *args[] = { "--port", "0", "--no-tune", "--config", args_cfg, NULL };
    proc p;
    spawn_serving(&p, args);
    double base_kb = proc_kb(p.pid, "VmHWM:");
    assert_true(base_kb > 0);

    /* One 8 MiB body (the default max_body_bytes), shared by every client thread. */
    const size_t body_bytes = (size_t)8 << 20;
    char *body = malloc(body_bytes + 1);
    size_t len = (size_t)sprintf(body, "{\"pred_len\":1,\"candles\":[");
    while (len + 4 < body_bytes) body[len++] = '0', body[len++] = ',';
    body[len++] = '0';
    body[len++] = ']';
    body[len++] = '}';
    body[len] = '\0';
    job jobs[N_BIG];
    pthread_t th[N_BIG];
    for (int i = 0; i < N_BIG; i++) {
        jobs[i] = (job){ p.port, body, { 0 }, CURLE_OK };
        jobs[i].resp.expect_continue = 1;
    }
    for (int i = 0; i < N_BIG; i++) pthread_create(&th[i], NULL, job_run, &jobs[i]);
    for (int i = 0; i < N_BIG; i++) pthread_join(th[i], NULL);
    int too_large = 0, busy = 0;
    for (int i = 0; i < N_BIG; i++) {
        if (jobs[i].cc != CURLE_OK) fail_msg("client %d: %s", i, curl_easy_strerror(jobs[i].cc));
        if (jobs[i].resp.status == 413)
            too_large++;
        else if (jobs[i].resp.status == 503 && !strcmp(jobs[i].resp.retry_after, "1"))
            busy++;
        else
            fail_msg("client %d: %ld %.300s", i, jobs[i].resp.status, jobs[i].resp.body);
        free(jobs[i].resp.body);
    }
    double peak_kb = proc_kb(p.pid, "VmHWM:");
    double now_kb = proc_kb(p.pid, "VmRSS:");
    const double bound_kb = base_kb + (double)(in_flight_mib + 64) * 1024;
    fprintf(stderr,
            "%d x 8 MiB bodies: %d refused as too many values (413), %d as over the memory "
            "budget (503); RSS at start %.0f MiB, peak %.0f MiB, after %.0f MiB, bound %.0f "
            "MiB\n",
            N_BIG, too_large, busy, base_kb / 1024, peak_kb / 1024, now_kb / 1024, bound_kb / 1024);
    assert_int_equal(too_large + busy, N_BIG);
    assert_true(too_large >= 1);
    /* The bound holds for the server's own memory. Under AddressSanitizer the quarantine keeps
     * the freed bodies resident by design (peaks of 131-157 MiB against 158 seen here), so the
     * sanitizer run checks the answers and the survival, the release run the bound. */
#if !KR_TEST_ASAN
    assert_true(peak_kb < bound_kb);
#endif
    /* Still serving. */
    kr_http_resp r = { 0 };
    assert_int_equal(kr_test_http_perform(p.port, "GET", "/health", NULL, NULL, NULL, 0, &r),
                     CURLE_OK);
    assert_int_equal(r.status, 200);
    free(r.body);
    kill(p.pid, SIGTERM);
    int st = wait_child(&p, 60);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    free(body);
    unlink(cfg_path);
    rmdir(dir);
}

/* A client POSTing CSV candle text: in a forecast's "candles" string, or as a text/csv
 * upload to the candle store. */
typedef struct csv_job {
    int port, upload;
    const char *body;
    kr_http_resp resp;
    CURLcode cc;
} csv_job;

static void *csv_job_run(void *arg) {
    csv_job *j = arg;
    j->cc = j->upload ? kr_test_http_perform(j->port, "POST", "/v1/candles/BIG?interval=1s",
                                             j->body, "text/csv", NULL, 0, &j->resp)
                      : kr_test_http_perform(j->port, "POST", "/v1/forecast", j->body, NULL, NULL,
                                             0, &j->resp);
    return NULL;
}

#define N_CSV 24

/* CSV text parses into ~16 times its bytes of candles (a 10-byte row into a 56-byte one,
 * doubled while the arrays grow), outside the JSON tree the scan estimates: it used to be
 * admitted for nothing, and 60 such bodies took the server past 1.2 GB. Now each CSV line is
 * admitted for what its row may take, and the bound holds for them too, in a forecast's
 * "candles" string and in a text/csv upload. */
static void test_rss_bound_under_csv_bodies(void **state) {
    (void)state;
    const size_t in_flight_mib = 64;
    const char *dir = kr_test_fresh_dir();
    char cfg_path[4200], db[4200];
    snprintf(cfg_path, sizeof cfg_path, "%s/serve.json", dir);
    snprintf(db, sizeof db, "%s/store.db", dir);
    char cfg[256];
    int n = snprintf(cfg, sizeof cfg,
                     "{\"max_request_memory\":\"64MiB\",\"max_memory_in_flight\":\"%zuMiB\","
                     "\"max_rows\":1000000,\"max_connections\":128}",
                     in_flight_mib);
    assert_int_equal(kr_test_write_file(cfg_path, cfg, (size_t)n), 0);
    const char *args[] = { "--port", "0", "--no-tune", "--config", cfg_path, "--db", db, NULL };
    proc p;
    spawn_serving(&p, args);
    double base_kb = proc_kb(p.pid, "VmHWM:");
    assert_true(base_kb > 0);

    /* ~7.5 MiB of rows "1000000000,1,1,1,1": ~400k candles a body. */
    const size_t rows = 400000;
    size_t cap = rows * 24 + 256;
    char *csv = malloc(cap), *json = malloc(cap + rows * 2);
    size_t len = (size_t)sprintf(csv, "timestamps,open,high,low,close\n");
    for (size_t i = 0; i < rows; i++)
        len += (size_t)sprintf(csv + len, "%zu,1,1,1,1\n", (size_t)1000000000 + i);
    size_t jl = (size_t)sprintf(json, "{\"pred_len\":1,\"candles\":\"");
    for (size_t i = 0; i < len; i++) {
        if (csv[i] == '\n')
            json[jl++] = '\\', json[jl++] = 'n';
        else
            json[jl++] = csv[i];
    }
    jl += (size_t)sprintf(json + jl, "\"}");
    assert_true(jl < ((size_t)8 << 20));

    int answered[600] = { 0 };
    for (int upload = 0; upload < 2; upload++) {
        csv_job jobs[N_CSV];
        pthread_t th[N_CSV];
        for (int i = 0; i < N_CSV; i++) {
            jobs[i] = (csv_job){ p.port, upload, upload ? csv : json, { 0 }, CURLE_OK };
            jobs[i].resp.expect_continue = 1;
        }
        for (int i = 0; i < N_CSV; i++) pthread_create(&th[i], NULL, csv_job_run, &jobs[i]);
        for (int i = 0; i < N_CSV; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < N_CSV; i++) {
            if (jobs[i].cc != CURLE_OK)
                fail_msg("client %d: %s", i, curl_easy_strerror(jobs[i].cc));
            long st = jobs[i].resp.status;
            /* Served, or refused for memory (503 + Retry-After); 400 would be a forecast's
             * own verdict on the candles, 503 a store writer's lock. */
            if (st != 200 && st != 400 && !(st == 503 && !strcmp(jobs[i].resp.retry_after, "1")))
                fail_msg("client %d: %ld %.300s", i, st, jobs[i].resp.body);
            if (st >= 0 && st < 600) answered[st]++;
            free(jobs[i].resp.body);
        }
    }
    double peak_kb = proc_kb(p.pid, "VmHWM:");
    const double bound_kb = base_kb + (double)(in_flight_mib + 64) * 1024;
    fprintf(stderr,
            "%d CSV forecasts + %d CSV uploads of %zu rows: %d served, %d refused (400), %d "
            "over the memory budget (503); RSS at start %.0f MiB, peak %.0f MiB, bound %.0f "
            "MiB\n",
            N_CSV, N_CSV, rows, answered[200], answered[400], answered[503], base_kb / 1024,
            peak_kb / 1024, bound_kb / 1024);
    assert_true(answered[503] >= 1);
#if !KR_TEST_ASAN
    assert_true(peak_kb < bound_kb);
#endif
    /* Alone, each fits the budget and is served. */
    for (int upload = 0; upload < 2; upload++) {
        csv_job one = { p.port, upload, upload ? csv : json, { 0 }, CURLE_OK };
        csv_job_run(&one);
        assert_int_equal(one.cc, CURLE_OK);
        if (one.resp.status != 200) fail_msg("alone: %ld %.300s", one.resp.status, one.resp.body);
        free(one.resp.body);
    }
    kill(p.pid, SIGTERM);
    int st = wait_child(&p, 60);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    free(csv);
    free(json);
    unlink(cfg_path);
    unlink(db);
    char aux[4300];
    snprintf(aux, sizeof aux, "%s-wal", db);
    unlink(aux);
    snprintf(aux, sizeof aux, "%s-shm", db);
    unlink(aux);
    rmdir(dir);
}

/* ------------------------------------------------------------------ the harness itself */

/* 'R', 'S', 'Z'... from /proc/PID/stat, or 0 when the process is gone. */
static char proc_state(pid_t pid) {
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    text[0] = '\0';
    kr_test_slurp(path, text, sizeof text);
    const char *close = strrchr(text, ')');
    return close && close[1] == ' ' ? close[2] : 0;
}

/* A test that ends without stopping the server it started (a failed assertion longjmps past its
 * kill) must not leave it running: it would hold ctest's output pipe and hang the whole run
 * (the CI timeout of 2026-12-02). Here a child test process starts a server and exits at once. */
static void test_server_dies_with_its_test(void **state) {
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t test = fork();
    assert_true(test >= 0);
    if (test == 0) {
        close(fds[0]);
        proc p;
        const char *args[] = { "--port", "0", "--no-tune", NULL };
        spawn_serving(&p, args);
        ssize_t w = write(fds[1], &p.pid, sizeof p.pid);
        _exit(w == (ssize_t)sizeof p.pid ? 0 : 1);
    }
    close(fds[1]);
    pid_t server = 0;
    assert_int_equal(read(fds[0], &server, sizeof server), (ssize_t)sizeof server);
    close(fds[0]);
    int st = 0;
    assert_int_equal(waitpid(test, &st, 0), test);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* Gone, or a zombie waiting for whoever adopted it: not serving either way. */
    double t0 = kr_now_seconds();
    char s;
    while ((s = proc_state(server)) != 0 && s != 'Z' && kr_now_seconds() - t0 < 10) usleep(10000);
    if (s != 0 && s != 'Z') {
        kill(server, SIGKILL);
        fail_msg("the server (pid %d) outlived the test that started it (state %c)", (int)server,
                 s);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sighup_drains),
        cmocka_unit_test(test_sighup_reloads_models),
        cmocka_unit_test(test_second_signal_stops_at_once),
        cmocka_unit_test(test_drain_delay_keeps_serving),
        cmocka_unit_test(test_every_flag_is_a_key),
        cmocka_unit_test(test_check_config_as_documented),
        cmocka_unit_test(test_rss_bound_under_big_bodies),
        cmocka_unit_test(test_rss_bound_under_csv_bodies),
        cmocka_unit_test(test_server_dies_with_its_test),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
