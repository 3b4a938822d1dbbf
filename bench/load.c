/*
 * load — open-loop load benchmark for `kronos serve` (not part of ctest).
 *
 * A single-threaded libcurl-multi client sends forecasts of windows of the bundled 600977.SH
 * candles with Poisson arrivals (exponential gaps, seeded) at several rates, each for a
 * bounded time, never waiting for answers before sending the next request (open loop: a slow
 * server sees its queue grow, as it would in production). Per rate it reports throughput,
 * p50/p95/p99 latency, the mean engine batch (sample paths per step, from the server's
 * kronos_batch_size histogram) and the prefix-cache hit rate (from its token counters).
 *
 * By default it starts the server itself, in this process on 127.0.0.1 with an ephemeral
 * port, three times: (a) one request at a time (max_running 1), (b) static batching, (c)
 * continuous batching with the tuner; with --url it measures that server instead. Then it
 * forecasts ten different "symbols" (ten disjoint windows stand in for ten stocks, one data
 * file being bundled) at once and one after the other. Output: Markdown tables.
 *
 * Traffic (--traffic):
 *   fixed  every request one of --windows fixed windows, repeated at random (the old figure:
 *          94-100 % cache hits, which no live deployment sees);
 *   bar    bar by bar: --symbols series (segments of the bundled data files, one symbol each),
 *          each request the next bar of one symbol: its window one candle later than its last,
 *          so every request is new;
 *   mixed  bar-by-bar traffic with a --repeat-share of requests (default 0.3) that ask again
 *          for a symbol's latest window, as a dashboard or an analysis page does (same symbol,
 *          same bar, same seed).
 * A bar request sends the symbol's last --history rows (default: the lookback) and asks for
 * --lookback of them; with --norm anchored it asks for anchored normalisation (docs/api.md),
 * whose windows grow from the lookback inside the history sent.
 *
 *   load [--url URL [--api-key KEY]] [--seconds S] [--rates 2,4,8] [--paths N]
 *        [--pred-len N] [--lookback N] [--windows N] [--seed S] [--modes one,static,continuous]
 *        [--fixed-len] [--traffic fixed|bar|mixed] [--repeat-share F] [--symbols N]
 *        [--history N] [--norm exact|anchored] [--model-name NAME]
 *        [--precisions Q:REPORT[,Q:REPORT]] [--tune-window S]
 *
 * --precisions serves the model (in-process) under the name "m" with a precision ladder
 * (quantised at load, each with the eval-quant --gate report it passed) and sends every request
 * to "m"; without it, "m" has no ladder: the on / off comparison. --tune-window sets the
 * tuner's windows (pressure S, relief 2 S) so a short run sees the ladder move.
 */

#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "base/timeutil.h"
#include "kronos.h"
#include "series/candles.h"
#include "server/server.h"

#define MAX_RATES 16

typedef enum traffic { TRAFFIC_FIXED, TRAFFIC_BAR, TRAFFIC_MIXED } traffic;

typedef struct opts {
    const char *url, *api_key, *modes, *model;
    const char *model_name; /* the request's "model" field (NULL: none) */
    double seconds;
    traffic traffic;
    double repeat_share; /* mixed: share of requests repeating a symbol's latest window */
    int symbols, history, anchored;
    const char *precisions; /* "int8:REPORT,q4:REPORT" */
    double tune_window;
    double kv_budget_mb; /* > 0: the server's kv_budget (small: a pool that must evict) */
    double rates[MAX_RATES];
    int n_rates;
    int paths, pred_len, lookback, windows;
    int fixed_len; /* every request has pred_len (default: a mix around it) */
    unsigned long long seed;
} opts;

/* ------------------------------------------------------------------ small helpers */

typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->s && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *ns = realloc(b->s, cap);
        if (!ns) return;
        b->s = ns;
        b->cap = cap;
    }
}

/* splitmix64: a seeded, portable stream for the arrival times and window choice. */
static unsigned long long rng_next(unsigned long long *s) {
    unsigned long long z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double rng_unit(unsigned long long *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(const double *sorted, int n, double q) {
    if (n == 0) return NAN;
    double pos = q * (n - 1);
    int i = (int)pos;
    if (i + 1 >= n) return sorted[n - 1];
    return sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]);
}

/* A forecast body for rows [start, start+n). Caller frees. */
static char *window_body(const kr_candles *c, int64_t start, int64_t n, const opts *o, int pred_len,
                         unsigned long long seed) {
    sbuf b = { 0 };
    sb_printf(&b, "{\"pred_len\":%d,\"paths\":%d,\"seed\":%llu,", pred_len, o->paths, seed);
    if (o->traffic != TRAFFIC_FIXED && n > o->lookback)
        sb_printf(&b, "\"lookback\":%d,", o->lookback);
    if (o->anchored) sb_printf(&b, "\"norm\":\"anchored\",");
    if (o->model_name) sb_printf(&b, "\"model\":\"%s\",", o->model_name);
    sb_printf(&b, "\"candles\":[");
    for (int64_t i = start; i < start + n; i++) {
        char ts[32];
        kr_format_timestamp(c->timestamps[i], 0, ts, sizeof ts);
        const double *v = c->values + i * 6;
        sb_printf(&b, "%s[\"%s\",%.10g,%.10g,%.10g,%.10g,%.10g,%.10g]", i > start ? "," : "", ts,
                  v[0], v[1], v[2], v[3], v[4], v[5]);
    }
    sb_printf(&b, "]}");
    return b.s;
}

/* ------------------------------------------------------------------ HTTP */

typedef struct req {
    CURL *h;
    struct curl_slist *hdr;
    double t_send;
    char *body; /* borrowed */
    sbuf answer; /* the response body (its usage and timing are read) */
} req;

static size_t keep_answer(char *p, size_t sz, size_t n, void *ud) {
    sb_printf(&((req *)ud)->answer, "%.*s", (int)(sz * n), p);
    return sz * n;
}

/* The number after "key": in a JSON answer, or NAN. */
static double answer_number(const char *json, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *at = json ? strstr(json, pat) : NULL;
    return at ? strtod(at + strlen(pat), NULL) : NAN;
}

static req *req_new(const char *url, const char *key, char *body) {
    req *r = calloc(1, sizeof *r);
    r->h = curl_easy_init();
    r->body = body;
    char path[512], auth[300];
    snprintf(path, sizeof path, "%s/v1/forecast", url);
    r->hdr = curl_slist_append(NULL, "Content-Type: application/json");
    r->hdr = curl_slist_append(r->hdr, "Expect:");
    if (key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        r->hdr = curl_slist_append(r->hdr, auth);
    }
    curl_easy_setopt(r->h, CURLOPT_URL, path);
    curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, r->hdr);
    curl_easy_setopt(r->h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(r->h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, keep_answer);
    curl_easy_setopt(r->h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->h, CURLOPT_PRIVATE, r);
    curl_easy_setopt(r->h, CURLOPT_TIMEOUT, 300L);
    curl_easy_setopt(r->h, CURLOPT_NOSIGNAL, 1L);
    return r;
}

static void req_free(req *r) {
    free(r->answer.s);
    curl_slist_free_all(r->hdr);
    curl_easy_cleanup(r->h);
    free(r);
}

static size_t collect(char *p, size_t sz, size_t n, void *ud) {
    sb_printf(ud, "%.*s", (int)(sz * n), p);
    return sz * n;
}

typedef struct scrape {
    double batch_sum, batch_count, hit, queried;
    double cache_rules[4]; /* tuner decisions: cache_low_hit, _shorten, _rewarm, _restore */
    double precision[2]; /* ladder moves of "m": down, up */
} scrape;

static const char *const k_cache_rules[4] = { "cache_low_hit", "cache_shorten", "cache_rewarm",
                                              "cache_restore" };

/* Sum of every sample line of `name` whose labels contain `needle` (every one when NULL). */
static double series_sum(const char *text, const char *name, const char *needle) {
    size_t n = strlen(name);
    double sum = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (!strncmp(line, name, n) && (line[n] == '{' || line[n] == ' ')) {
            const char *sp = memchr(line, ' ', len);
            if (sp && (!needle || (memmem(line, (size_t)(sp - line), needle, strlen(needle)))))
                sum += strtod(sp + 1, NULL);
        }
        line = nl ? nl + 1 : NULL;
    }
    return sum;
}

static double series(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *line = text; line && *line;) {
        if (!strncmp(line, name, n) && line[n] == ' ') return strtod(line + n + 1, NULL);
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}

static scrape scrape_metrics(const char *url) {
    scrape s = { 0 };
    sbuf b = { 0 };
    char path[512];
    snprintf(path, sizeof path, "%s/metrics", url);
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, path);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (curl_easy_perform(h) == CURLE_OK && b.s) {
        s.batch_sum = series(b.s, "kronos_batch_size_sum");
        s.batch_count = series(b.s, "kronos_batch_size_count");
        s.hit = series(b.s, "kronos_prefix_cache_hit_tokens_total");
        s.queried = series(b.s, "kronos_prefix_cache_queried_tokens_total");
        for (int i = 0; i < 4; i++) {
            char needle[64];
            snprintf(needle, sizeof needle, "rule=\"%s\"", k_cache_rules[i]);
            s.cache_rules[i] = series_sum(b.s, "kronos_tuner_decisions_total", needle);
        }
        s.precision[0] = series_sum(b.s, "kronos_precision_decisions_total", "direction=\"down\"");
        s.precision[1] = series_sum(b.s, "kronos_precision_decisions_total", "direction=\"up\"");
    }
    curl_easy_cleanup(h);
    free(b.s);
    return s;
}

/* ------------------------------------------------------------------ one run */

typedef struct result {
    int sent, ok, errors;
    double elapsed, p50, p95, p99, mean_batch, hit_rate;
    double ttft_p50, ttft_p95; /* from the answers' timing.ttft_seconds */
    double prefill_per_req, cached_per_req; /* mean context rows computed / reused per answer */
    int bar_requests, repeat_requests; /* of sent, by kind (bar / mixed traffic) */
    double cache_rules[4], precision[2]; /* decisions during the run (scrape) */
    char first_error[160]; /* status and message of the first failed request */
} result;

/* Sends bodies[idx[i]] at arrival times at[i] (seconds from start), open loop, and waits for
 * every answer. */
static result run_schedule(const char *url, const char *key, char **bodies, const int *idx,
                           const double *at, int n) {
    result res = { 0 };
    scrape before = scrape_metrics(url);
    CURLM *m = curl_multi_init();
    /* Open loop: never queue on the client side. */
    curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
    double *lat = malloc((size_t)(n > 0 ? n : 1) * sizeof *lat);
    double *ttft = malloc((size_t)(n > 0 ? n : 1) * sizeof *ttft);
    int n_ttft = 0;
    double prefill = 0, cached = 0;
    double t0 = kr_now_seconds(), last_done = t0;
    int next = 0, running = 0, done = 0;
    while (done < n) {
        double now = kr_now_seconds() - t0;
        while (next < n && at[next] <= now) {
            req *r = req_new(url, key, bodies[idx[next]]);
            r->t_send = kr_now_seconds();
            curl_multi_add_handle(m, r->h);
            next++;
            res.sent++;
        }
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            req *r = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
            long code = 0;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            double t = kr_now_seconds();
            if (msg->data.result == CURLE_OK && code == 200) {
                lat[res.ok++] = t - r->t_send;
                double tt = answer_number(r->answer.s, "ttft_seconds");
                if (tt >= 0) ttft[n_ttft++] = tt;
                double pf = answer_number(r->answer.s, "prefill_tokens"),
                       ca = answer_number(r->answer.s, "cached_tokens");
                if (pf >= 0) prefill += pf;
                if (ca >= 0) cached += ca;
            } else {
                if (!res.errors++)
                    snprintf(res.first_error, sizeof res.first_error, "%ld %.120s (curl %d)", code,
                             r->answer.s ? r->answer.s : "", (int)msg->data.result);
            }
            last_done = t;
            curl_multi_remove_handle(m, r->h);
            req_free(r);
            done++;
        }
        int wait_ms = 100;
        if (next < n) {
            double dt = at[next] - (kr_now_seconds() - t0);
            wait_ms = dt <= 0 ? 0 : (int)(dt * 1000) + 1;
            if (wait_ms > 100) wait_ms = 100;
        }
        if (done < n) curl_multi_poll(m, NULL, 0, wait_ms, NULL);
    }
    curl_multi_cleanup(m);
    scrape after = scrape_metrics(url);
    res.elapsed = last_done - t0;
    qsort(lat, (size_t)res.ok, sizeof *lat, cmp_double);
    res.p50 = percentile(lat, res.ok, 0.50);
    res.p95 = percentile(lat, res.ok, 0.95);
    res.p99 = percentile(lat, res.ok, 0.99);
    double bc = after.batch_count - before.batch_count;
    res.mean_batch = bc > 0 ? (after.batch_sum - before.batch_sum) / bc : NAN;
    double q = after.queried - before.queried;
    res.hit_rate = q > 0 ? (after.hit - before.hit) / q : NAN;
    for (int i = 0; i < 4; i++) res.cache_rules[i] = after.cache_rules[i] - before.cache_rules[i];
    for (int i = 0; i < 2; i++) res.precision[i] = after.precision[i] - before.precision[i];
    qsort(ttft, (size_t)n_ttft, sizeof *ttft, cmp_double);
    res.ttft_p50 = percentile(ttft, n_ttft, 0.50);
    res.ttft_p95 = percentile(ttft, n_ttft, 0.95);
    res.prefill_per_req = res.ok ? prefill / res.ok : NAN;
    res.cached_per_req = res.ok ? cached / res.ok : NAN;
    free(ttft);
    free(lat);
    return res;
}

/* Bar-by-bar traffic: symbols over segments of the bundled data files, each with a cursor (the
 * next bar to close) that every bar request moves one candle on. */
typedef struct symbol {
    const kr_candles *c;
    int64_t lo, hi; /* rows [lo, hi) of c are the symbol's */
    int64_t cursor; /* the window ends before this row */
    int last; /* index of the body of its latest window in the run's list (-1: none yet) */
} symbol;

typedef struct feed {
    kr_candles *files[8];
    int n_files;
    symbol *sym;
    int n_sym;
} feed;

static const char *const k_files[] = { "XSHG_5min_600977.csv", "AAPL_1d.csv", "MSFT_1d.csv",
                                       "BTCUSDT_1h.csv" };

static void feed_free(feed *f) {
    for (int i = 0; i < f->n_files; i++) kr_candles_free(f->files[i]);
    free(f->sym);
    memset(f, 0, sizeof *f);
}

/* Reads the data files and cuts them into o->symbols segments, each long enough for the
 * history and some bars. */
static int feed_open(feed *f, const opts *o) {
    memset(f, 0, sizeof *f);
    kr_error err = { 0 };
    for (size_t i = 0; i < sizeof k_files / sizeof k_files[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/data/%s", KR_SOURCE_DIR, k_files[i]);
        if (kr_candles_read_csv(path, &f->files[f->n_files], &err) != KR_OK) {
            fprintf(stderr, "load: %s\n", err.message);
            feed_free(f);
            return -1;
        }
        f->n_files++;
    }
    f->sym = calloc((size_t)o->symbols, sizeof *f->sym);
    int per_file = (o->symbols + f->n_files - 1) / f->n_files;
    for (int k = 0; k < o->symbols; k++) {
        const kr_candles *c = f->files[k % f->n_files];
        int64_t seg = c->n / per_file, j = k / f->n_files;
        if (seg < o->history + 8) {
            fprintf(stderr,
                    "load: --symbols %d leaves segments of %lld rows, too few for "
                    "--history %d\n",
                    o->symbols, (long long)seg, o->history);
            feed_free(f);
            return -1;
        }
        f->sym[k] = (symbol){ c, j * seg, (j + 1) * seg, j * seg + o->history, -1 };
    }
    f->n_sym = o->symbols;
    return 0;
}

/* Poisson arrivals at `rate` for `seconds`. Fixed traffic: each a random one of n_windows
 * bodies. Bar / mixed traffic: bodies made as the symbols' bars close (see the top). */
static result run_rate(const char *url, const char *key, char **bodies, int n_windows, double rate,
                       double seconds, unsigned long long seed, feed *fd, const opts *o) {
    int cap = (int)(rate * seconds * 2 + 16), n = 0;
    double *at = calloc((size_t)cap, sizeof *at);
    int *idx = calloc((size_t)cap, sizeof *idx);
    char **own = o->traffic == TRAFFIC_FIXED ? NULL : calloc((size_t)cap, sizeof *own);
    int n_own = 0, n_bar = 0, n_repeat = 0;
    unsigned long long s = seed;
    static const int k_mix[5] = { 1, 2, 4, 8, 16 }; /* quarters of pred_len */
    for (double t = -log(1.0 - rng_unit(&s)) / rate; t < seconds && n < cap;
         t += -log(1.0 - rng_unit(&s)) / rate) {
        at[n] = t;
        if (!own) {
            idx[n++] = (int)(rng_next(&s) % (unsigned long long)n_windows);
            continue;
        }
        symbol *sy = &fd->sym[rng_next(&s) % (unsigned long long)fd->n_sym];
        if (o->traffic == TRAFFIC_MIXED && rng_unit(&s) < o->repeat_share && sy->last >= 0) {
            idx[n++] = sy->last; /* the same symbol and bar asked again */
            n_repeat++;
            continue;
        }
        if (++sy->cursor > sy->hi) sy->cursor = sy->lo + o->history; /* segment used up */
        int pl = o->fixed_len ? o->pred_len : o->pred_len * k_mix[n_bar % 5] / 4;
        own[n_own] = window_body(sy->c, sy->cursor - o->history, o->history, o, pl < 1 ? 1 : pl,
                                 o->seed + (unsigned long long)sy->cursor);
        sy->last = n_own;
        idx[n++] = n_own++;
        n_bar++;
    }
    result r = run_schedule(url, key, own ? own : bodies, idx, at, n);
    r.bar_requests = n_bar;
    r.repeat_requests = n_repeat;
    for (int i = 0; i < n_own; i++) free(own[i]);
    for (int i = 0; own && i < fd->n_sym; i++) fd->sym[i].last = -1;
    free(own);
    free(at);
    free(idx);
    return r;
}

/* ------------------------------------------------------------------ main */

typedef struct mode {
    const char *name, *label;
    int max_running, static_batching, tune;
} mode;

static const mode k_modes[] = {
    { "one", "(a) one at a time", 1, 0, 0 },
    { "static", "(b) static batching", 64, 1, 0 },
    { "continuous", "(c) continuous + tuner", 64, 0, 1 },
};

static void print_row(const char *label, double rate, const result *r) {
    printf("| %s | %.1f | %d | %d | %d | %.2f | %.3f | %.3f | %.3f | %.3f | %.3f | %.1f | %.0f%% | "
           "%.1f | %.1f |\n",
           label, rate, r->sent, r->ok, r->errors, r->elapsed > 0 ? r->ok / r->elapsed : 0.0,
           r->p50, r->p95, r->p99, r->ttft_p50, r->ttft_p95, r->mean_batch, r->hit_rate * 100,
           r->prefill_per_req, r->cached_per_req);
    if (r->errors) printf("|  | first error: %s | | | | | | | | | | | | | |\n", r->first_error);
    if (r->cache_rules[0] + r->cache_rules[1] + r->cache_rules[2] + r->cache_rules[3] > 0 ||
        r->precision[0] + r->precision[1] > 0)
        printf("|  | tuner during the run: cache grow %.0f, shorten %.0f, rewarm %.0f, restore "
               "%.0f; precision down %.0f, up %.0f | | | | | | | | | | | | | |\n",
               r->cache_rules[0], r->cache_rules[1], r->cache_rules[2], r->cache_rules[3],
               r->precision[0], r->precision[1]);
    fflush(stdout);
}

static void symbols_run(const char *url, const char *key, const kr_candles *c, const opts *o) {
    enum { N_SYM = 10 };
    char *bodies[N_SYM];
    int idx[N_SYM];
    double at[N_SYM];
    /* Ten disjoint windows; a fresh seed so none is in the prefix cache yet. */
    int64_t span = c->n / N_SYM;
    for (int i = 0; i < N_SYM; i++) {
        int64_t len = o->lookback < span ? o->lookback : span;
        bodies[i] = window_body(c, i * span + (span - len), len, o, o->pred_len,
                                o->seed + 7777 + (unsigned)i);
        idx[i] = i;
        at[i] = 0;
    }
    double t0 = kr_now_seconds();
    result all = run_schedule(url, key, bodies, idx, at, N_SYM);
    double t_all = kr_now_seconds() - t0;
    /* One after the other: new seeds and shifted windows, so the cache does not help it. */
    for (int i = 0; i < N_SYM; i++) {
        free(bodies[i]);
        int64_t len = o->lookback < span - 1 ? o->lookback : span - 1;
        bodies[i] = window_body(c, i * span + (span - len) - 1, len, o, o->pred_len,
                                o->seed + 8888 + (unsigned)i);
    }
    double t_seq = 0;
    int seq_ok = 0;
    for (int i = 0; i < N_SYM; i++) {
        double t1 = kr_now_seconds();
        result one = run_schedule(url, key, bodies, &idx[i], at, 1);
        t_seq += kr_now_seconds() - t1;
        seq_ok += one.ok;
    }
    printf("\n| 10 symbols (%d paths x %d steps, lookback %d) | ok | wall (s) |\n|---|---|---|\n",
           o->paths, o->pred_len, o->lookback);
    printf("| at once (10 concurrent requests) | %d | %.2f |\n", all.ok, t_all);
    printf("| one after the other | %d | %.2f |\n", seq_ok, t_seq);
    printf("| speedup | | %.2fx |\n", t_all > 0 ? t_seq / t_all : 0.0);
    for (int i = 0; i < N_SYM; i++) free(bodies[i]);
}

static void usage(FILE *f) {
    fputs("usage: load [--url URL [--api-key KEY]] [--seconds S] [--rates R1,R2,...]\n"
          "            [--paths N] [--pred-len N] [--lookback N] [--windows N] [--seed S]\n"
          "            [--modes one,static,continuous] [--fixed-len] [--model DIR]\n"
          "            [--traffic fixed|bar|mixed] [--repeat-share F] [--symbols N]\n"
          "            [--history N] [--norm exact|anchored] [--model-name NAME] [--no-ten]\n",
          f);
}

static void quiet(void *u, const char *line) {
    (void)u;
    (void)line;
}

int main(int argc, char **argv) {
    opts o = { 0 };
    o.seconds = 20;
    o.rates[0] = 5, o.rates[1] = 15, o.rates[2] = 30;
    o.n_rates = 3;
    o.paths = 8;
    o.pred_len = 12;
    o.lookback = 128;
    o.windows = 48;
    o.seed = 1;
    o.modes = "one,static,continuous";
    o.repeat_share = 0.3;
    o.symbols = 24;
    int no_ten = 0;
    const char *traffic_name = "fixed", *norm_name = "exact";
    static const struct option lo[] = {
        { "traffic", required_argument, NULL, 'T' },
        { "repeat-share", required_argument, NULL, 'R' },
        { "symbols", required_argument, NULL, 'Y' },
        { "history", required_argument, NULL, 'H' },
        { "norm", required_argument, NULL, 'N' },
        { "model-name", required_argument, NULL, 'A' },
        { "no-ten", no_argument, NULL, '0' },
        { "precisions", required_argument, NULL, 'P' },
        { "tune-window", required_argument, NULL, 'W' },
        { "kv-budget-mb", required_argument, NULL, 'K' },
        { "url", required_argument, NULL, 'u' },
        { "api-key", required_argument, NULL, 'k' },
        { "seconds", required_argument, NULL, 's' },
        { "rates", required_argument, NULL, 'r' },
        { "paths", required_argument, NULL, 'p' },
        { "pred-len", required_argument, NULL, 'n' },
        { "lookback", required_argument, NULL, 'l' },
        { "windows", required_argument, NULL, 'w' },
        { "seed", required_argument, NULL, 'S' },
        { "modes", required_argument, NULL, 'm' },
        { "model", required_argument, NULL, 'M' },
        { "fixed-len", no_argument, NULL, 'F' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (ch) {
        case 'u': o.url = optarg; break;
        case 'k': o.api_key = optarg; break;
        case 's': o.seconds = atof(optarg); break;
        case 'r': {
            o.n_rates = 0;
            char buf[256];
            snprintf(buf, sizeof buf, "%s", optarg);
            for (char *t = strtok(buf, ","); t && o.n_rates < MAX_RATES; t = strtok(NULL, ","))
                o.rates[o.n_rates++] = atof(t);
            break;
        }
        case 'p': o.paths = atoi(optarg); break;
        case 'n': o.pred_len = atoi(optarg); break;
        case 'l': o.lookback = atoi(optarg); break;
        case 'w': o.windows = atoi(optarg); break;
        case 'S': o.seed = strtoull(optarg, NULL, 10); break;
        case 'm': o.modes = optarg; break;
        case 'M': o.model = optarg; break;
        case 'F': o.fixed_len = 1; break;
        case 'T': traffic_name = optarg; break;
        case 'R': o.repeat_share = atof(optarg); break;
        case 'Y': o.symbols = atoi(optarg); break;
        case 'H': o.history = atoi(optarg); break;
        case 'N': norm_name = optarg; break;
        case 'A': o.model_name = optarg; break;
        case '0': no_ten = 1; break;
        case 'P': o.precisions = optarg; break;
        case 'W': o.tune_window = atof(optarg); break;
        case 'K': o.kv_budget_mb = atof(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (o.seconds <= 0 || o.n_rates == 0 || o.paths < 1 || o.pred_len < 1 || o.lookback < 2 ||
        o.windows < 1) {
        usage(stderr);
        return 2;
    }
    for (int i = 0; i < o.n_rates; i++)
        if (!(o.rates[i] > 0)) {
            fprintf(stderr, "load: rates must be positive\n");
            return 2;
        }
    if (!strcmp(traffic_name, "fixed"))
        o.traffic = TRAFFIC_FIXED;
    else if (!strcmp(traffic_name, "bar"))
        o.traffic = TRAFFIC_BAR;
    else if (!strcmp(traffic_name, "mixed"))
        o.traffic = TRAFFIC_MIXED;
    else {
        fprintf(stderr, "load: --traffic must be fixed, bar or mixed\n");
        return 2;
    }
    if (strcmp(norm_name, "exact") && strcmp(norm_name, "anchored")) {
        fprintf(stderr, "load: --norm must be exact or anchored\n");
        return 2;
    }
    o.anchored = !strcmp(norm_name, "anchored");
    if (o.history <= 0) o.history = o.lookback;
    if (o.history < o.lookback || o.symbols < 1 || !(o.repeat_share >= 0 && o.repeat_share <= 1)) {
        fprintf(stderr, "load: need --history >= --lookback, --symbols >= 1, --repeat-share in "
                        "[0, 1]\n");
        return 2;
    }
    feed fd = { 0 };
    if (o.traffic != TRAFFIC_FIXED && feed_open(&fd, &o) != 0) return 1;

    kr_error err = { 0 };
    kr_candles *c = NULL;
    if (kr_candles_read_csv(KR_SOURCE_DIR "/data/XSHG_5min_600977.csv", &c, &err) != KR_OK) {
        fprintf(stderr, "load: %s\n", err.message);
        return 1;
    }
    if (c->n < o.lookback + o.windows) {
        fprintf(stderr, "load: the data has %lld rows, too few for --lookback %d --windows %d\n",
                (long long)c->n, o.lookback, o.windows);
        kr_candles_free(c);
        return 2;
    }
    /* The request mix: `windows` distinct windows (repeats hit the prefix cache), with
     * horizons of pred_len x {1/4, 1/2, 1, 2, 4} unless --fixed-len: real clients ask for
     * different horizons, and that is where a static batch waits for its longest member. */
    static const int k_mix[5] = { 1, 2, 4, 8, 16 }; /* quarters */
    char **bodies = calloc((size_t)o.windows, sizeof *bodies);
    unsigned long long s = o.seed;
    for (int i = 0; i < o.windows; i++) {
        int64_t start = (int64_t)(rng_next(&s) % (unsigned long long)(c->n - o.lookback));
        int pl = o.fixed_len ? o.pred_len : o.pred_len * k_mix[i % 5] / 4;
        bodies[i] = window_body(c, start, o.lookback, &o, pl < 1 ? 1 : pl, o.seed + (unsigned)i);
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    printf("# kronos serve load test: %d paths, pred_len %s%d, lookback %d, %.0f s per rate, "
           "Poisson arrivals (seed %llu)\n\n",
           o.paths, o.fixed_len ? "" : "mix x{1/4,1/2,1,2,4} of ", o.pred_len, o.lookback,
           o.seconds, o.seed);
    if (o.traffic == TRAFFIC_FIXED)
        printf("Traffic: fixed, %d distinct windows repeated at random.\n\n", o.windows);
    else
        printf("Traffic: %s, %d symbols, each bar request the symbol's last %d rows (one bar "
               "later than its last)%s; %.0f %% of requests repeat a symbol's latest window; "
               "norm %s.\n\n",
               traffic_name, o.symbols, o.history,
               o.history > o.lookback ? " with a lookback field" : "",
               o.traffic == TRAFFIC_MIXED ? o.repeat_share * 100 : 0.0, norm_name);
    printf("| mode | rate (req/s) | sent | ok | errors | throughput (req/s) | p50 (s) | p95 (s) | "
           "p99 (s) | TTFT p50 (s) | TTFT p95 (s) | mean batch (paths/step) | cache hit | "
           "prefill rows/req | cached rows/req |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");

    int rc = 0;
    if (o.url) {
        for (int k = 0; k < o.n_rates; k++) {
            result r = run_rate(o.url, o.api_key, bodies, o.windows, o.rates[k], o.seconds,
                                o.seed + (unsigned)k, &fd, &o);
            print_row(o.url, o.rates[k], &r);
        }
        if (!no_ten) symbols_run(o.url, o.api_key, c, &o);
    } else {
        kr_model *model = NULL;
        kr_model_params mp = kr_model_default_params();
        char pred[4096], tok[4096];
        /* --model DIR: a directory holding predictor/ and tokenizer/ (e.g. from gen-random). */
        snprintf(pred, sizeof pred, "%s/predictor",
                 o.model ? o.model : KR_SOURCE_DIR "/models/kronos-demo");
        snprintf(tok, sizeof tok, "%s/tokenizer",
                 o.model ? o.model : KR_SOURCE_DIR "/models/kronos-demo");
        if (kr_model_load(pred, tok, &mp, &model, &err) != KR_OK) {
            fprintf(stderr, "load: %s\n", err.message);
            rc = 1;
        }
        for (size_t mi = 0; rc == 0 && mi < sizeof k_modes / sizeof k_modes[0]; mi++) {
            const mode *md = &k_modes[mi];
            if (!strstr(o.modes, md->name)) continue;
            kr_server_config cfg;
            kr_server_config_defaults(&cfg);
            cfg.port = 0;
            cfg.sched.max_running = md->max_running;
            cfg.sched.static_batching = md->static_batching;
            cfg.sched.tune = md->tune;
            cfg.sched.max_queue = 4096;
            /* Every simulated client is this process's one address, and an overloaded server
             * holds many connections open at once: past max_connections they would be refused
             * (curl 52/56), which measures the listener, not the engine. */
            cfg.max_connections_per_ip = 0;
            cfg.max_connections = 8192;
            cfg.sched.log = quiet;
            if (o.kv_budget_mb > 0)
                cfg.sched.kv_budget_bytes = (size_t)(o.kv_budget_mb * 1048576.0);
            if (o.tune_window > 0) {
                cfg.sched.tune_window_s = o.tune_window;
                cfg.sched.tune_relax_s = 2 * o.tune_window;
            }
            if (o.model_name && !strcmp(o.model_name, "m")) {
                /* The model again under "m", with the ladder when asked. */
                cfg.n_models = 1;
                snprintf(cfg.models[0].name, sizeof cfg.models[0].name, "m");
                snprintf(cfg.models[0].model, sizeof cfg.models[0].model, "%s",
                         o.model ? o.model : KR_SOURCE_DIR "/models/kronos-demo");
                char list[2048];
                snprintf(list, sizeof list, "%s", o.precisions ? o.precisions : "");
                for (char *t = strtok(list, ","); t && cfg.models[0].n_precisions < 3;
                     t = strtok(NULL, ",")) {
                    char *colon = strchr(t, ':');
                    if (!colon) continue;
                    *colon = 0;
                    kr_server_precision *pr =
                        &cfg.models[0].precisions[cfg.models[0].n_precisions++];
                    snprintf(pr->quant, sizeof pr->quant, "%s", t);
                    snprintf(pr->gate_report, sizeof pr->gate_report, "%s", colon + 1);
                }
            }
            kr_server *srv = NULL;
            if (kr_server_create(model, &cfg, &srv, &err) != KR_OK) {
                fprintf(stderr, "load: %s\n", err.message);
                rc = 1;
                break;
            }
            char url[64];
            snprintf(url, sizeof url, "http://127.0.0.1:%d", kr_server_port(srv));
            /* Each mode starts from the same bars, on a server with an empty cache. */
            feed_free(&fd);
            if (o.traffic != TRAFFIC_FIXED && feed_open(&fd, &o) != 0) rc = 1;
            for (int k = 0; rc == 0 && k < o.n_rates; k++) {
                result r = run_rate(url, NULL, bodies, o.windows, o.rates[k], o.seconds,
                                    o.seed + (unsigned)k, &fd, &o);
                print_row(md->label, o.rates[k], &r);
            }
            if (!no_ten && !strcmp(md->name, "continuous")) symbols_run(url, NULL, c, &o);
            kr_server_free(srv);
        }
        kr_model_free(model);
    }
    for (int i = 0; i < o.windows; i++) free(bodies[i]);
    free(bodies);
    feed_free(&fd);
    kr_candles_free(c);
    curl_global_cleanup();
    return rc;
}
