/* hub/http — see http.h. */
#include "hub/http.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/error.h"

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init_rc = CURLE_FAILED_INIT;

/* curl_global_init is not guaranteed thread-safe on every libcurl build; once is enough. */
static void curl_init_once(void) { g_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

kr_status kr_hub_http_open(kr_hub_http *h, const char *token, long connect_timeout_s,
                           long stall_timeout_s, kr_error *err) {
    memset(h, 0, sizeof *h);
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init_rc != CURLE_OK)
        return kr_error_set(err, KR_ERR_IO, "libcurl: %s", curl_easy_strerror(g_curl_init_rc));
    h->curl = curl_easy_init();
    if (!h->curl) return kr_error_set(err, KR_ERR_NOMEM, "libcurl: cannot create a handle");
    h->connect_timeout_s = connect_timeout_s;
    h->stall_timeout_s = stall_timeout_s;
    snprintf(h->user_agent, sizeof h->user_agent, "kronos/%s", kr_version());
    if (token && *token) {
        char line[4096];
        int len = snprintf(line, sizeof line, "Authorization: Bearer %s", token);
        if (len < 0 || (size_t)len >= sizeof line) {
            kr_hub_http_close(h);
            return kr_error_set(err, KR_ERR_INVALID_ARG, "HF_TOKEN is too long (%d bytes)", len);
        }
        h->headers = curl_slist_append(NULL, line);
        if (!h->headers) {
            kr_hub_http_close(h);
            return kr_error_set(err, KR_ERR_NOMEM, "libcurl: out of memory");
        }
    }
    return KR_OK;
}

void kr_hub_http_close(kr_hub_http *h) {
    if (!h) return;
    if (h->curl) curl_easy_cleanup(h->curl);
    curl_slist_free_all(h->headers);
    h->curl = NULL;
    h->headers = NULL;
}

void kr_hub_meta_init(kr_hub_meta *m) {
    memset(m, 0, sizeof *m);
    m->linked_size = m->content_length = m->range_start = m->range_total = -1;
}

/* Copies a header value (trimmed) into dst[cap]. */
static void copy_value(char *dst, size_t cap, const char *v, size_t len) {
    while (len && (*v == ' ' || *v == '\t')) v++, len--;
    while (len && isspace((unsigned char)v[len - 1])) len--;
    if (len >= cap) len = cap - 1;
    memcpy(dst, v, len);
    dst[len] = '\0';
}

static int64_t parse_i64(const char *s) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0) return -1;
    return (int64_t)v;
}

void kr_hub_meta_header(kr_hub_meta *m, const char *line, size_t len) {
    /* A status line starts the headers of the next response of a redirect chain: fields that
     * describe "the" response are reset, the hub's metadata (first hop) is kept. */
    if (len > 5 && !strncmp(line, "HTTP/", 5)) {
        /* The line is not NUL-terminated (libcurl's contract): parse a bounded copy. */
        char status[64];
        copy_value(status, sizeof status, line, len);
        const char *sp = strchr(status, ' ');
        m->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        m->etag[0] = '\0';
        m->content_length = m->range_start = m->range_total = -1;
        return;
    }
    const char *colon = memchr(line, ':', len);
    if (!colon) return;
    size_t name_len = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vlen = len - name_len - 1;
    char value[512];
    copy_value(value, sizeof value, v, vlen);
#define IS(name) (name_len == sizeof(name) - 1 && !strncasecmp(line, name, name_len))
    if (IS("X-Repo-Commit")) {
        if (!m->commit[0]) copy_value(m->commit, sizeof m->commit, v, vlen);
    } else if (IS("X-Linked-Etag")) {
        if (!m->linked_etag[0]) copy_value(m->linked_etag, sizeof m->linked_etag, v, vlen);
    } else if (IS("X-Linked-Size")) {
        if (m->linked_size < 0) m->linked_size = parse_i64(value);
    } else if (IS("ETag")) {
        copy_value(m->etag, sizeof m->etag, v, vlen);
    } else if (IS("Content-Length")) {
        m->content_length = parse_i64(value);
    } else if (IS("Content-Range")) {
        /* "bytes START-END/TOTAL" (TOTAL may be "*"). */
        long long a, b;
        char total[32];
        if (sscanf(value, "bytes %lld-%lld/%31s", &a, &b, total) == 3 && a >= 0) {
            m->range_start = a;
            m->range_total = strcmp(total, "*") ? parse_i64(total) : -1;
        }
    } else if (IS("X-Error-Code")) {
        copy_value(m->error_code, sizeof m->error_code, v, vlen);
    } else if (IS("X-Error-Message")) {
        copy_value(m->error_message, sizeof m->error_message, v, vlen);
    }
#undef IS
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *user) {
    size_t len = size * nmemb;
    kr_hub_meta_header(user, line, len);
    return len;
}

/* Options every request gets; the handle is reset in between so nothing leaks from a HEAD
 * into a GET (NOBODY, RANGE), while its connection cache survives. */
static void common_options(kr_hub_http *h, const char *url, kr_hub_meta *m) {
    CURL *c = h->curl;
    curl_easy_reset(c);
    h->errbuf[0] = '\0';
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->errbuf);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, h->user_agent);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h->headers);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, m);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, h->connect_timeout_s);
    /* A transfer that moves no byte for stall_timeout_s is cut and later resumed, rather than
     * hanging for ever on a dead connection. */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, h->stall_timeout_s);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
}

static kr_status transport_error(kr_hub_http *h, CURLcode rc, const char *what, const char *url,
                                 kr_error *err) {
    return kr_error_set(err, KR_ERR_IO, "%s %s: %s", what, url,
                        h->errbuf[0] ? h->errbuf : curl_easy_strerror(rc));
}

static int is_redirect(long status) {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

kr_status kr_hub_http_head(kr_hub_http *h, const char *url, kr_hub_meta *m, kr_error *err) {
    kr_hub_meta_init(m);
    char cur[4096];
    snprintf(cur, sizeof cur, "%s", url);
    for (int hop = 0; hop < 10; hop++) {
        common_options(h, cur, m);
        curl_easy_setopt(h->curl, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(h->curl, CURLOPT_FOLLOWLOCATION, 0L);
        CURLcode rc = curl_easy_perform(h->curl);
        if (rc != CURLE_OK) return transport_error(h, rc, "HEAD", cur, err);
        curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &m->status);
        if (!is_redirect(m->status) || m->commit[0] || m->linked_etag[0]) return KR_OK;
        /* A redirect without metadata (a renamed repo, a mirror): the answer is further on. */
        char *next = NULL;
        curl_easy_getinfo(h->curl, CURLINFO_REDIRECT_URL, &next);
        if (!next) return KR_OK;
        snprintf(cur, sizeof cur, "%s", next);
    }
    return kr_error_set(err, KR_ERR_IO, "HEAD %s: too many redirects", url);
}

typedef struct get_ctx {
    kr_hub_sink *sink;
    kr_hub_meta *meta;
    int started; /* the first body byte of the final response was seen */
    int discard; /* an error response: its body is not the file */
    int write_errno; /* errno of a failed write, 0 if none */
    char bad[256]; /* why the body was refused (size or range contradiction) */
} get_ctx;

/* Decides, at the first body byte, where the body goes; returns 0 to refuse it. */
static int start_body(get_ctx *g) {
    kr_hub_sink *s = g->sink;
    kr_hub_meta *m = g->meta;
    g->started = 1;
    if (m->status == 206) {
        if (m->range_start != s->offset) {
            snprintf(g->bad, sizeof g->bad,
                     "asked for bytes from %" PRId64 ", the server sent from %" PRId64, s->offset,
                     m->range_start);
            return 0;
        }
        if (s->expected >= 0 && m->range_total >= 0 && m->range_total != s->expected) {
            snprintf(g->bad, sizeof g->bad,
                     "the server's Content-Range says %" PRId64 " bytes, expected %" PRId64,
                     m->range_total, s->expected);
            return 0;
        }
    } else if (m->status == 200) {
        /* Range ignored (or not asked): the body is the whole file. */
        if (s->offset > 0 && ftruncate(s->fd, 0) != 0) {
            g->write_errno = errno;
            return 0;
        }
        s->offset = 0;
        if (s->expected >= 0 && m->content_length >= 0 && m->content_length != s->expected) {
            snprintf(g->bad, sizeof g->bad, "the server sends %" PRId64 " bytes, expected %" PRId64,
                     m->content_length, s->expected);
            return 0;
        }
    } else {
        g->discard = 1;
    }
    return 1;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *user) {
    get_ctx *g = user;
    size_t len = size * nmemb;
    if (!g->started && !start_body(g)) return 0;
    if (g->discard) return len;
    kr_hub_sink *s = g->sink;
    if (s->expected >= 0 && s->offset + (int64_t)len > s->expected) {
        snprintf(g->bad, sizeof g->bad, "the server sent more than the expected %" PRId64 " bytes",
                 s->expected);
        return 0;
    }
    for (size_t done = 0; done < len;) {
        ssize_t w = pwrite(s->fd, ptr + done, len - done, (off_t)(s->offset + (int64_t)done));
        if (w < 0) {
            if (errno == EINTR) continue;
            g->write_errno = errno;
            return 0;
        }
        done += (size_t)w;
    }
    s->offset += (int64_t)len;
    return len;
}

static int on_xfer(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                   curl_off_t ulnow) {
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    get_ctx *g = user;
    kr_hub_sink *s = g->sink;
    if (!s->on_bytes || g->discard) return 0;
    return s->on_bytes(s->user, s->offset) ? 1 : 0;
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

kr_status kr_hub_http_get(kr_hub_http *h, const char *url, kr_hub_sink *s, kr_hub_meta *m,
                          int *transient, kr_error *err) {
    kr_hub_meta_init(m);
    *transient = 0;
    get_ctx g = { .sink = s, .meta = m };
    common_options(h, url, m);
    CURL *c = h->curl;
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_xfer);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &g);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    char range[48];
    if (s->offset > 0) {
        snprintf(range, sizeof range, "%" PRId64 "-", s->offset);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    }
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (status) m->status = status;
    if (g.write_errno)
        return kr_error_set(err, KR_ERR_IO, "cannot write %s: %s", s->path,
                            strerror(g.write_errno));
    if (g.bad[0]) return kr_error_set(err, KR_ERR_FORMAT, "GET %s: %s", url, g.bad);
    if (rc == CURLE_ABORTED_BY_CALLBACK)
        return kr_error_set(err, KR_ERR_CANCELLED, "GET %s: cancelled", url);
    if (rc != CURLE_OK) {
        *transient = is_transient(rc);
        return transport_error(h, rc, "GET", url, err);
    }
    /* An empty 200 body never reaches on_body: the restart from 0 still applies. */
    if (!g.started && m->status == 200 && s->offset > 0) {
        if (ftruncate(s->fd, 0) != 0)
            return kr_error_set(err, KR_ERR_IO, "cannot truncate %s: %s", s->path, strerror(errno));
        s->offset = 0;
    }
    return KR_OK;
}
