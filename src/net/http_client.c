/* net/http_client — see http_client.h. */
#include "net/http_client.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "base/error.h"
#include "kronos.h"

#define DEFAULT_CONNECT_MS 30000L

struct kr_http_client {
    CURL *curl;
    kr_http_options opt;
    char *token; /* owned copy of opt.bearer_token */
    char user_agent[64];
    char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init_rc = CURLE_FAILED_INIT;

/* curl_global_init is not thread-safe on every libcurl build; once per process is enough. */
static void curl_init_once(void) { g_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

kr_status kr_http_client_create(const kr_http_options *opts, kr_http_client **out, kr_error *err) {
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_http_client_create: out is NULL");
    *out = NULL;
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init_rc != CURLE_OK)
        return kr_error_set(err, KR_ERR_IO, "libcurl: %s", curl_easy_strerror(g_curl_init_rc));
    kr_http_client *c = calloc(1, sizeof *c);
    if (!c) return kr_error_set(err, KR_ERR_NOMEM, "HTTP client: out of memory");
    if (opts) c->opt = *opts;
    if (c->opt.connect_timeout_ms <= 0) c->opt.connect_timeout_ms = DEFAULT_CONNECT_MS;
    if (opts && opts->bearer_token && *opts->bearer_token) {
        c->token = strdup(opts->bearer_token);
        if (!c->token) {
            free(c);
            return kr_error_set(err, KR_ERR_NOMEM, "HTTP client: out of memory");
        }
    }
    c->opt.bearer_token = c->token;
    c->curl = curl_easy_init();
    if (!c->curl) {
        kr_http_client_free(c);
        return kr_error_set(err, KR_ERR_NOMEM, "libcurl: cannot create a handle");
    }
    snprintf(c->user_agent, sizeof c->user_agent, "kronos/%s", kr_version());
    *out = c;
    return KR_OK;
}

void kr_http_client_free(kr_http_client *c) {
    if (!c) return;
    if (c->curl) curl_easy_cleanup(c->curl);
    free(c->token);
    free(c);
}

/* ---------------------------------------------------------------- one transfer */

typedef struct xfer {
    kr_http_client *c;
    const kr_http_request *rq;
    size_t body_bytes;
    int too_big; /* max_body passed */
    int stopped; /* a callback asked to stop */
    int oom; /* body_out could not grow */
} xfer;

static size_t on_header(char *line, size_t size, size_t nmemb, void *user) {
    xfer *x = user;
    size_t len = size * nmemb;
    if (x->rq->on_header && x->rq->on_header(x->rq->user, line, len) != 0) {
        x->stopped = 1;
        return 0;
    }
    return len;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *user) {
    xfer *x = user;
    size_t len = size * nmemb;
    size_t cap = x->c->opt.max_body;
    if (cap && (x->body_bytes > cap || len > cap - x->body_bytes)) {
        x->too_big = 1;
        return 0; /* curl stops with CURLE_WRITE_ERROR */
    }
    x->body_bytes += len;
    if (x->rq->on_body) {
        if (x->rq->on_body(x->rq->user, data, len) != 0) {
            x->stopped = 1;
            return 0;
        }
    } else if (x->rq->body_out) {
        kr_sb_appendn(x->rq->body_out, data, len);
        if (x->rq->body_out->oom) {
            x->oom = 1;
            return 0;
        }
    }
    return len;
}

static int on_xfer(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                   curl_off_t ulnow) {
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    xfer *x = user;
    if (x->rq->on_progress && x->rq->on_progress(x->rq->user) != 0) {
        x->stopped = 1;
        return 1;
    }
    return 0;
}

static int is_transient(CURLcode rc) {
    switch (rc) {
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return 1;
    default: return 0;
    }
}

/* "4 MiB" or "1000 bytes". */
static void fmt_size(size_t n, char *out, size_t cap) {
    if (n >= ((size_t)1 << 20) && n % ((size_t)1 << 20) == 0)
        snprintf(out, cap, "%zu MiB", n >> 20);
    else
        snprintf(out, cap, "%zu bytes", n);
}

/* The reason and status of a failed transfer. */
static kr_status failure(kr_http_client *c, const xfer *x, CURLcode rc, double elapsed_s,
                         kr_http_response *rs) {
    char *why = rs->reason;
    size_t cap = sizeof rs->reason;
    if (x->too_big) {
        char sz[32];
        fmt_size(c->opt.max_body, sz, sizeof sz);
        snprintf(why, cap, "the answer is larger than %s", sz);
        return KR_ERR_FORMAT;
    }
    if (x->oom) {
        snprintf(why, cap, "out of memory for the answer");
        return KR_ERR_NOMEM;
    }
    if (x->stopped || rc == CURLE_ABORTED_BY_CALLBACK) {
        snprintf(why, cap, "stopped by the caller");
        return KR_ERR_CANCELLED;
    }
    rs->transient = is_transient(rc);
    if (rc == CURLE_OPERATION_TIMEDOUT) {
        double total_s = (double)c->opt.timeout_ms / 1000.0;
        if (c->opt.timeout_ms > 0 && elapsed_s >= 0.95 * total_s) {
            snprintf(why, cap, "no complete answer within %g s (timeout)", total_s);
            return KR_ERR_TIMEOUT;
        }
        double connect_s = 0;
        curl_easy_getinfo(c->curl, CURLINFO_CONNECT_TIME, &connect_s);
        if (connect_s <= 0)
            snprintf(why, cap, "cannot connect within %g s",
                     (double)c->opt.connect_timeout_ms / 1000.0);
        else
            snprintf(why, cap, "no data for %ld s (the transfer stalled)", c->opt.stall_timeout_s);
        return KR_ERR_IO;
    }
    if (rc == CURLE_COULDNT_CONNECT) {
        long os = 0;
        curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os);
        if (os == ECONNREFUSED)
            snprintf(why, cap, "connection refused (is the server running?)");
        else
            snprintf(why, cap, "cannot connect: %s",
                     os             ? strerror((int)os)
                     : c->errbuf[0] ? c->errbuf
                                    : curl_easy_strerror(rc));
        return KR_ERR_IO;
    }
    snprintf(why, cap, "%s", c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc));
    return rc == CURLE_OUT_OF_MEMORY ? KR_ERR_NOMEM : KR_ERR_IO;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

kr_status kr_http_perform(kr_http_client *c, const kr_http_request *rq, kr_http_response *rs,
                          kr_error *err) {
    if (!c || !rq || !rs || !rq->url)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_http_perform: NULL argument");
    rs->status = 0;
    rs->redirect_url[0] = rs->reason[0] = '\0';
    rs->transient = 0;
    const char *method = rq->method ? rq->method : "GET";
    char shown[1024];
    kr_http_redact_url(rq->url, shown, sizeof shown);
    int head = !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!head && !post && strcmp(method, "GET"))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s %s: unsupported method", method, shown);

    /* Headers: the token, the caller's, and for a POST no "Expect: 100-continue" round trip
     * (curl adds it to bodies over 1 KiB; a server that ignores it costs a second). */
    struct curl_slist *hl = NULL;
    int oom = 0;
    char auth[4096];
    if (c->token && !rq->omit_token) {
        int n = snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
        if (n < 0 || (size_t)n >= sizeof auth)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "%s %s: the token is too long (%d bytes)",
                                method, shown, n);
        oom |= !(hl = curl_slist_append(hl, auth));
    }
    for (const char *const *h = rq->headers; !oom && h && *h; h++) {
        struct curl_slist *nl = curl_slist_append(hl, *h);
        oom |= !nl;
        if (nl) hl = nl;
    }
    if (!oom && post) {
        struct curl_slist *nl = curl_slist_append(hl, "Expect:");
        oom |= !nl;
        if (nl) hl = nl;
    }
    if (oom) {
        curl_slist_free_all(hl);
        return kr_error_set(err, KR_ERR_NOMEM, "%s %s: out of memory", method, shown);
    }

    CURL *h = c->curl;
    /* Reset between requests so nothing leaks from a HEAD into a GET (NOBODY, RANGE); the
     * connection cache survives it. */
    curl_easy_reset(h);
    c->errbuf[0] = '\0';
    xfer x = { .c = c, .rq = rq };
    curl_easy_setopt(h, CURLOPT_URL, rq->url);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* no SIGALRM for timeouts: callers are threaded */
    curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_xfer);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, rq->on_progress ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->opt.connect_timeout_ms);
    if (c->opt.timeout_ms > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->opt.timeout_ms);
    if (c->opt.stall_timeout_s > 0) {
        /* A transfer that moves no byte for stall_timeout_s is cut (and may be resumed),
         * rather than hanging for ever on a dead connection. */
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, c->opt.stall_timeout_s);
    }
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    if (head) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (post) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body ? rq->body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
    }
    if (rq->range) curl_easy_setopt(h, CURLOPT_RANGE, rq->range);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, rq->max_redirects > 0 ? 1L : 0L);
    if (rq->max_redirects > 0) curl_easy_setopt(h, CURLOPT_MAXREDIRS, (long)rq->max_redirects);

    double t0 = now_s();
    CURLcode rc = curl_easy_perform(h);
    double elapsed = now_s() - t0;
    curl_slist_free_all(hl);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    rs->status = status;
    char *next = NULL;
    if (rq->max_redirects <= 0 && curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &next) == CURLE_OK &&
        next)
        snprintf(rs->redirect_url, sizeof rs->redirect_url, "%s", next);
    if (rc == CURLE_OK) return KR_OK;
    kr_status st = failure(c, &x, rc, elapsed, rs);
    return kr_error_set(err, st, "%s %s: %s", method, shown, rs->reason);
}
