/* HTTP client helpers for the server tests — see http_client.h. */
#include "http_client.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "base/timeutil.h"
#include "series/candles.h"

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    kr_http_resp *r = ud;
    size_t k = sz * n;
    char *nb = realloc(r->body, r->len + k + 1);
    if (!nb) return 0;
    r->body = nb;
    memcpy(r->body + r->len, p, k);
    r->len += k;
    r->body[r->len] = '\0';
    if (r->abort_after_progress) {
        int count = 0;
        for (const char *q = r->body; (q = strstr(q, "event: progress")); q++) count++;
        /* Atomic: a test may watch it from another thread while the stream is read. */
        __atomic_store_n(&r->progress_seen, count, __ATOMIC_SEQ_CST);
        if (count >= r->abort_after_progress) return 0; /* abort: curl closes the socket */
    }
    return k;
}

static void copy_header(const char *line, size_t n, const char *name, char *out, size_t cap) {
    size_t nl = strlen(name);
    if (n <= nl || strncasecmp(line, name, nl) != 0) return;
    const char *v = line + nl;
    size_t vn = n - nl;
    while (vn && *v == ' ') v++, vn--;
    while (vn && (v[vn - 1] == '\r' || v[vn - 1] == '\n')) vn--;
    snprintf(out, cap, "%.*s", (int)vn, v);
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud) {
    kr_http_resp *r = ud;
    size_t k = sz * n;
    copy_header(p, k, "Retry-After:", r->retry_after, sizeof r->retry_after);
    copy_header(p, k, "Allow:", r->allow, sizeof r->allow);
    copy_header(p, k, "Content-Type:", r->content_type, sizeof r->content_type);
    copy_header(p, k, "WWW-Authenticate:", r->www_auth, sizeof r->www_auth);
    copy_header(p, k, "Content-Security-Policy:", r->csp, sizeof r->csp);
    copy_header(p, k, "X-Content-Type-Options:", r->content_type_options,
                sizeof r->content_type_options);
    copy_header(p, k, "X-Request-Id:", r->request_id, sizeof r->request_id);
    copy_header(p, k, "Connection:", r->connection, sizeof r->connection);
    copy_header(p, k, "ETag:", r->etag, sizeof r->etag);
    copy_header(p, k, "Last-Modified:", r->last_modified, sizeof r->last_modified);
    copy_header(p, k, "Accept-Ranges:", r->accept_ranges, sizeof r->accept_ranges);
    copy_header(p, k, "Cache-Control:", r->cache_control, sizeof r->cache_control);
    copy_header(p, k, "Content-Length:", r->content_length, sizeof r->content_length);
    copy_header(p, k, "X-Kronos-Warning:", r->kronos_warning, sizeof r->kronos_warning);
    return k;
}

typedef struct chunked_src {
    size_t left;
} chunked_src;

static size_t on_read(char *buf, size_t sz, size_t n, void *ud) {
    chunked_src *s = ud;
    size_t k = sz * n < s->left ? sz * n : s->left;
    memset(buf, ' ', k);
    s->left -= k;
    return k;
}

CURLcode kr_test_http_perform(int port, const char *method, const char *path, const char *body,
                              const char *content_type, const char *auth, size_t chunked_bytes,
                              kr_http_resp *r) {
    CURL *h = curl_easy_init();
    char url[2048], hdr[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct curl_slist *hl = NULL;
    snprintf(hdr, sizeof hdr, "Content-Type: %s", content_type ? content_type : "application/json");
    hl = curl_slist_append(hl, hdr);
    /* No "Expect: 100-continue" unless asked for: a server that refuses a body before reading
     * it answers such a client cleanly instead of resetting a connection mid-upload. */
    if (!r->expect_continue) hl = curl_slist_append(hl, "Expect:");
    if (auth) {
        snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", auth);
        hl = curl_slist_append(hl, hdr);
    }
    if (r->send_request_id) {
        snprintf(hdr, sizeof hdr, "X-Request-Id: %s", r->send_request_id);
        hl = curl_slist_append(hl, hdr);
    }
    for (size_t i = 0; i < sizeof r->send_headers / sizeof r->send_headers[0]; i++) {
        if (!r->send_headers[i]) break;
        hl = curl_slist_append(hl, r->send_headers[i]);
    }
    chunked_src src = { chunked_bytes };
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (chunked_bytes) {
        hl = curl_slist_append(hl, "Transfer-Encoding: chunked");
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, &src);
    } else if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    if (!strcmp(method, "HEAD")) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, r->timeout_ms > 0 ? r->timeout_ms : 300000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    CURLcode cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    return cc;
}

void kr_http_resp_free(kr_http_resp *r) {
    if (!r) return;
    free(r->body);
    free(r);
}

const char *kr_http_error_field(const kr_http_resp *r) {
    static char out[256];
    out[0] = '\0';
    cJSON *root = cJSON_Parse(r->body ? r->body : "");
    cJSON *f = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "error"), "field");
    if (cJSON_IsString(f)) snprintf(out, sizeof out, "%s", f->valuestring);
    cJSON_Delete(root);
    return out;
}

cJSON *kr_http_json(const kr_http_resp *r) {
    cJSON *root = cJSON_Parse(r->body ? r->body : "");
    if (!root) fail_msg("not JSON (HTTP %ld): %.300s", r->status, r->body ? r->body : "(null)");
    return root;
}

void kr_sb_printf(kr_sbuf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (b->s && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + (size_t)n + 1) cap *= 2;
        b->s = realloc(b->s, cap);
        b->cap = cap;
    }
}

int kr_sse_events(const char *body, char ev[][32], char **data, int max) {
    int n = 0;
    const char *p = body;
    while (p && *p && n < max) {
        const char *end = strstr(p, "\n\n");
        if (!end) break;
        ev[n][0] = '\0';
        kr_sbuf d = { 0 };
        for (const char *line = p; line < end;) {
            const char *nl = memchr(line, '\n', (size_t)(end - line));
            if (!nl) nl = end;
            if (!strncmp(line, "event: ", 7))
                snprintf(ev[n], 32, "%.*s", (int)(nl - line - 7), line + 7);
            else if (!strncmp(line, "data: ", 6))
                kr_sb_printf(&d, "%s%.*s", d.len ? "\n" : "", (int)(nl - line - 6), line + 6);
            line = nl + 1;
        }
        if (ev[n][0])
            data[n++] = d.s ? d.s : strdup("");
        else
            free(d.s);
        p = end + 2;
    }
    return n;
}

double kr_metric_in(const char *text, const char *series) {
    size_t n = strlen(series);
    for (const char *line = text; line && *line;) {
        if (!strncmp(line, series, n) && line[n] == ' ') return strtod(line + n + 1, NULL);
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    return -1;
}

double kr_http_metric(int port, const char *series) {
    kr_http_resp r = { 0 };
    double v = -1;
    if (kr_test_http_perform(port, "GET", "/metrics", NULL, NULL, NULL, 0, &r) == CURLE_OK &&
        r.status == 200)
        v = kr_metric_in(r.body, series);
    free(r.body);
    return v;
}

char *kr_http_forecast_body(const struct kr_candles *c, int64_t start, int64_t n,
                            const char *extra) {
    kr_sbuf b = { 0 };
    kr_sb_printf(&b, "{\"candles\":[");
    for (int64_t i = start; i < start + n; i++) {
        char ts[32];
        kr_format_timestamp(c->timestamps[i], 0, ts, sizeof ts);
        const double *v = c->values + i * 6;
        kr_sb_printf(&b, "%s[\"%s\",%.17g,%.17g,%.17g,%.17g,%.17g,%.17g]", i > start ? "," : "", ts,
                     v[0], v[1], v[2], v[3], v[4], v[5]);
    }
    kr_sb_printf(&b, "],%s}", extra);
    return b.s;
}
