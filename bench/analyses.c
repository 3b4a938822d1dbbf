/*
 * analyses — what one engine for every caller buys (issue: model/context split), measured on
 * one in-process `kronos serve` over the bundled demo model and candles (not part of ctest).
 *
 *   1. Ten POST /v1/analyze one after the other, then the same ten at once: total wall time
 *      of each, and their ratio (analyses join the continuous batch).
 *   2. /v1/forecast latency (p50, p95 of N requests sent one at a time at a fixed pace), alone
 *      and while a heavy analysis runs; the heavy analysis' status (its deadline is the
 *      server's request_timeout_s: a 504 when it cannot finish).
 *
 *   analyses [--timeout S] [--forecasts N] [--heavy JSON]
 * Output: Markdown on stdout.
 */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <curl/curl.h>

#include "base/threadpool.h"
#include "base/timeutil.h"
#include "kronos.h"
#include "series/candles.h"
#include "store/store.h"
#include "server/server.h"

typedef struct reply {
    long status;
    double seconds;
} reply;

static size_t discard(void *p, size_t s, size_t n, void *u) {
    (void)p;
    (void)u;
    return s * n;
}

static reply post(int port, const char *path, const char *body, long timeout_s) {
    reply r = { 0, 0 };
    CURL *h = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
    double t0 = kr_now_seconds();
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    r.seconds = kr_now_seconds() - t0;
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return r;
}

typedef struct job {
    int port;
    const char *path;
    char body[512];
    long timeout_s;
    reply r;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    j->r = post(j->port, j->path, j->body, j->timeout_s);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* User + system CPU seconds of the whole process (server, engine and client threads). */
static double process_cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static double quantile(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)ceil(q * n) - 1;
    return v[i < 0 ? 0 : i];
}

static const char *const k_symbols[] = { "AAPL", "MSFT", "BTCUSDT", "600977" };
static const char *const k_files[] = { "AAPL_1d.csv", "MSFT_1d.csv", "BTCUSDT_1h.csv",
                                       "XSHG_5min_600977.csv" };
static const char *const k_intervals[] = { "1d", "1d", "1h", "5m" };

static int g_paths = 32; /* --paths; 0: the analyst's adaptive default */

static void analysis_body(int k, char *out, size_t cap) {
    /* Different symbols, lookbacks and seeds: ten distinct windows, no prefix-cache reuse. */
    char paths[32] = "";
    if (g_paths > 0) snprintf(paths, sizeof paths, ",\"paths\":%d", g_paths);
    snprintf(out, cap, "{\"symbol\":\"%s\",\"horizon\":20%s,\"lookback\":%d,\"seed\":%d}",
             k_symbols[k % 4], paths, 200 + 10 * k, k);
}

/* Forecast latencies, one request at a time every `pace` seconds. */
static void forecast_latencies(int port, const kr_candles *c, int n, double pace, double *lat,
                               long *ok) {
    char *body = malloc(1 << 20);
    *ok = 0;
    for (int i = 0; i < n; i++) {
        double t0 = kr_now_seconds();
        int64_t start = 100 + 7 * i;
        size_t len = (size_t)snprintf(body, 1 << 20,
                                      "{\"pred_len\":12,\"paths\":1,\"seed\":%d,\"candles\":[", i);
        for (int64_t r = start; r < start + 200; r++) {
            const double *v = c->values + r * 6;
            len += (size_t)snprintf(body + len, (1 << 20) - len,
                                    "%s[%lld,%.6f,%.6f,%.6f,%.6f,%.3f]", r > start ? "," : "",
                                    (long long)c->timestamps[r], v[0], v[1], v[2], v[3], v[4]);
        }
        snprintf(body + len, (1 << 20) - len, "]}");
        reply r = post(port, "/v1/forecast", body, 120);
        lat[i] = r.seconds;
        *ok += r.status == 200;
        double wait = pace - (kr_now_seconds() - t0);
        if (wait > 0) usleep((useconds_t)(wait * 1e6));
    }
    free(body);
}

int main(int argc, char **argv) {
    double timeout = 30;
    int n_forecasts = 40;
    const char *heavy = "{\"symbol\":\"AAPL\",\"horizon\":400,\"paths\":256,\"lookback\":1000,"
                        "\"max_context\":1024,\"calibrate\":3}";
    static const struct option longopts[] = { { "timeout", required_argument, NULL, 't' },
                                              { "forecasts", required_argument, NULL, 'n' },
                                              { "heavy", required_argument, NULL, 'H' },
                                              { "paths", required_argument, NULL, 'p' },
                                              { NULL, 0, NULL, 0 } };
    for (int c; (c = getopt_long(argc, argv, "", longopts, NULL)) != -1;) {
        if (c == 't')
            timeout = atof(optarg);
        else if (c == 'n')
            n_forecasts = atoi(optarg);
        else if (c == 'H')
            heavy = optarg;
        else if (c == 'p')
            g_paths = atoi(optarg);
        else
            return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    kr_error err = { 0 };
    char db[] = "/tmp/kronos-bench-analyses-XXXXXX";
    int fd = mkstemp(db);
    if (fd < 0) return 1;
    close(fd);
    unlink(db);
    kr_store *store = NULL;
    if (kr_store_open(db, &store, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    kr_candles *fc = NULL;
    for (int i = 0; i < 4; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/data/%s", KR_SOURCE_DIR, k_files[i]);
        kr_candles *c = NULL;
        if (kr_candles_read_csv(path, &c, &err) != KR_OK ||
            kr_store_upsert(store, k_symbols[i], k_intervals[i], c, &err) != KR_OK) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        if (i == 3)
            fc = c;
        else
            kr_candles_free(c);
    }
    kr_store_close(store);

    kr_model *model = NULL;
    if (kr_model_load(KR_SOURCE_DIR "/models/kronos-demo/predictor",
                      KR_SOURCE_DIR "/models/kronos-demo/tokenizer", NULL, &model, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    kr_server_config cfg;
    kr_server_config_defaults(&cfg);
    cfg.port = 0;
    cfg.request_timeout_s = timeout;
    /* The per-request caps would refuse the heavy analysis outright (400): lift them, so it
     * runs into its deadline instead, as it would on a server configured to allow it. */
    cfg.max_horizon = 1024;
    cfg.max_pred_len = 1024;
    cfg.max_lookback = 4096;
    cfg.max_analyze_paths = 4096;
    cfg.sched.tune = 0;
    snprintf(cfg.db, sizeof cfg.db, "%s", db);
    snprintf(cfg.model, sizeof cfg.model, "%s", KR_SOURCE_DIR "/models/kronos-demo/predictor");
    kr_server *srv = NULL;
    if (kr_server_create(model, &cfg, &srv, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    int port = kr_server_port(srv);
    printf("## Analyses and forecasts on one engine (demo model, %d threads, request_timeout_s "
           "%g)\n\n",
           kr_cpu_count(), timeout);

    /* 1. ten analyses, sequential then concurrent */
    job jobs[10];
    for (int k = 0; k < 10; k++) {
        jobs[k] = (job){ port, "/v1/analyze", "", 300, { 0, 0 } };
        analysis_body(k, jobs[k].body, sizeof jobs[k].body);
    }
    (void)post(port, "/v1/analyze", jobs[0].body, 300); /* warm-up (page cache, store) */
    double t0 = kr_now_seconds(), cpu0 = process_cpu_seconds();
    int seq_ok = 0;
    for (int k = 0; k < 10; k++) {
        run_job(&jobs[k]);
        seq_ok += jobs[k].r.status == 200;
    }
    double seq = kr_now_seconds() - t0, seq_cpu = process_cpu_seconds() - cpu0;
    /* Other seeds for the concurrent round: no result is served from the prefix cache's
     * identical windows more than in the sequential one. */
    for (int k = 0; k < 10; k++) {
        size_t len = strlen(jobs[k].body);
        snprintf(jobs[k].body + len - 1, sizeof jobs[k].body - len + 1, ",\"top_p\":0.89}");
    }
    pthread_t th[10];
    t0 = kr_now_seconds();
    cpu0 = process_cpu_seconds();
    for (int k = 0; k < 10; k++) pthread_create(&th[k], NULL, run_job, &jobs[k]);
    int con_ok = 0;
    double con_max = 0;
    for (int k = 0; k < 10; k++) {
        pthread_join(th[k], NULL);
        con_ok += jobs[k].r.status == 200;
        if (jobs[k].r.seconds > con_max) con_max = jobs[k].r.seconds;
    }
    double con = kr_now_seconds() - t0, con_cpu = process_cpu_seconds() - cpu0;
    if (g_paths > 0)
        printf(
            "| 10 analyses (horizon 20, %d paths) | wall time | answered 200 | CPU s (process) | "
            "cores busy |\n",
            g_paths);
    else
        printf("| 10 analyses (horizon 20, adaptive paths) | wall time | answered 200 | CPU s "
               "(process) | cores busy |\n");
    printf("|---|---:|---:|---:|---:|\n");
    printf("| one after another | %.2f s | %d/10 | %.2f | %.2f |\n", seq, seq_ok, seq_cpu,
           seq_cpu / seq);
    printf("| all at once | %.2f s (slowest %.2f s) | %d/10 | %.2f | %.2f |\n", con, con_max,
           con_ok, con_cpu, con_cpu / con);
    printf("| speed-up | **%.2fx** | | CPU per analysis %.2fx | |\n\n", seq / con,
           seq_cpu / con_cpu);
    /* The speed-up is (cores busy at once / cores busy one after another) x (CPU per analysis
     * one after another / at once): on a machine of C cores the first factor is at most
     * C / (cores busy one after another). */

    /* 2. forecast latency alone, then beside a heavy analysis */
    double *alone = calloc((size_t)n_forecasts, sizeof *alone),
           *beside = calloc((size_t)n_forecasts, sizeof *beside);
    long ok_alone = 0, ok_beside = 0;
    forecast_latencies(port, fc, n_forecasts, 0.1, alone, &ok_alone);
    job h = { port, "/v1/analyze", "", (long)timeout + 60, { 0, 0 } };
    snprintf(h.body, sizeof h.body, "%s", heavy);
    pthread_t ht;
    pthread_create(&ht, NULL, run_job, &h);
    usleep(500000); /* the heavy analysis is admitted and running */
    forecast_latencies(port, fc, n_forecasts, 0.1, beside, &ok_beside);
    pthread_join(ht, NULL);
    double a50 = quantile(alone, n_forecasts, 0.5), a95 = quantile(alone, n_forecasts, 0.95);
    double b50 = quantile(beside, n_forecasts, 0.5), b95 = quantile(beside, n_forecasts, 0.95);
    printf("| /v1/forecast, 1 path, 12 steps, one every 100 ms | p50 | p95 | answered 200 |\n"
           "|---|---:|---:|---:|\n");
    printf("| alone | %.3f s | %.3f s | %ld/%d |\n", a50, a95, ok_alone, n_forecasts);
    printf("| while the heavy analysis runs | %.3f s | %.3f s | %ld/%d |\n", b50, b95, ok_beside,
           n_forecasts);
    printf("| p95 ratio | | **%.2fx** | |\n\n", b95 / a95);
    printf("Heavy analysis `%s`: HTTP %ld after %.1f s (deadline %g s).\n", heavy, h.r.status,
           h.r.seconds, timeout);
    kr_server_free(srv);
    kr_model_free(model);
    kr_candles_free(fc);
    unlink(db);
    free(alone);
    free(beside);
    curl_global_cleanup();
    return 0;
}
