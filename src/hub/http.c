/* hub/http — see http.h. */
#include "hub/http.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/error.h"

kr_status kr_hub_http_open(kr_hub_http *h, const char *token, long connect_timeout_s,
                           long stall_timeout_s, kr_error *err) {
    memset(h, 0, sizeof *h);
    if (token && strlen(token) > 4000)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "HF_TOKEN is too long (%zu bytes)",
                            strlen(token));
    /* A line break inside would end the Authorization header and start another one: refused
     * (without echoing the token), not sent. */
    for (const char *p = token; p && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "the access token (HF_TOKEN, or the one 'huggingface-cli login' "
                                "saved) holds a control character at byte %zu (a line break?)",
                                (size_t)(p - token));
    kr_http_options o = {
        .connect_timeout_ms = connect_timeout_s * 1000,
        .stall_timeout_s = stall_timeout_s,
        .bearer_token = token,
    };
    return kr_http_client_create(&o, &h->client, err);
}

void kr_hub_http_close(kr_hub_http *h) {
    if (!h) return;
    kr_http_client_free(h->client);
    h->client = NULL;
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

static int on_header(void *user, const char *line, size_t len) {
    kr_hub_meta_header(user, line, len);
    return 0;
}

static int is_redirect(long status) {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* The "scheme://host:port" part of url (user:password@ dropped, lower-cased) into out[n]. */
static void url_origin(const char *url, char *out, size_t n) {
    char plain[4096];
    kr_http_redact_url(url, plain, sizeof plain);
    const char *p = strstr(plain, "://");
    size_t len = p ? (size_t)(p + 3 - plain) + strcspn(p + 3, "/?#") : 0;
    if (len >= n) len = n - 1;
    for (size_t i = 0; i < len; i++) out[i] = (char)tolower((unsigned char)plain[i]);
    out[len] = '\0';
}

kr_status kr_hub_http_head(kr_hub_http *h, const char *url, kr_hub_meta *m, int *transient,
                           kr_error *err) {
    kr_hub_meta_init(m);
    *transient = 0;
    char cur[4096], origin[512], hop_origin[512];
    snprintf(cur, sizeof cur, "%s", url);
    url_origin(url, origin, sizeof origin);
    for (int hop = 0; hop < 10; hop++) {
        /* Redirects are followed here, not by curl, so curl's rule of sending the token to
         * the first host only must be applied here: a hop to another origin goes without. */
        url_origin(cur, hop_origin, sizeof hop_origin);
        kr_http_request rq = { .method = "HEAD",
                               .url = cur,
                               .omit_token = strcmp(hop_origin, origin) != 0,
                               .on_header = on_header,
                               .user = m };
        kr_http_response rs;
        kr_status st = kr_http_perform(h->client, &rq, &rs, err);
        if (st != KR_OK) {
            *transient = rs.transient;
            return st;
        }
        m->status = rs.status;
        if (!is_redirect(m->status) || m->commit[0] || m->linked_etag[0]) return KR_OK;
        /* A redirect without metadata (a renamed repo, a mirror): the answer is further on. */
        if (!rs.redirect_url[0]) return KR_OK;
        snprintf(cur, sizeof cur, "%s", rs.redirect_url);
    }
    char shown[4096];
    kr_http_redact_url(url, shown, sizeof shown);
    return kr_error_set(err, KR_ERR_IO, "HEAD %s: too many redirects", shown);
}

typedef struct get_ctx {
    kr_hub_sink *sink;
    kr_hub_meta *meta;
    int started; /* the first body byte of the final response was seen */
    int discard; /* an error response: its body is not the file */
    int write_errno; /* errno of a failed write, 0 if none */
    int cancelled; /* the sink's on_bytes asked to stop */
    char bad[256]; /* why the body was refused (size or range contradiction) */
} get_ctx;

/* Decides, at the first body byte, where the body goes; returns 0 to refuse it. */
static int start_body(get_ctx *g) {
    kr_hub_sink *s = g->sink;
    kr_hub_meta *m = g->meta;
    g->started = 1;
    if (m->status == 206) {
        if (m->range_start < 0) {
            snprintf(g->bad, sizeof g->bad,
                     "asked for bytes from %" PRId64
                     ", the server's 206 answer has no usable Content-Range",
                     s->offset);
            return 0;
        }
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

/* The body's bytes into the partial file; non-zero stops the transfer (the reason is kept in
 * g for kr_hub_http_get). */
static int on_body(void *user, const char *ptr, size_t len) {
    get_ctx *g = user;
    if (!g->started && !start_body(g)) return 1;
    if (g->discard) return 0;
    kr_hub_sink *s = g->sink;
    if (s->expected >= 0 && s->offset + (int64_t)len > s->expected) {
        snprintf(g->bad, sizeof g->bad, "the server sent more than the expected %" PRId64 " bytes",
                 s->expected);
        return 1;
    }
    for (size_t done = 0; done < len;) {
        ssize_t w = pwrite(s->fd, ptr + done, len - done, (off_t)(s->offset + (int64_t)done));
        if (w < 0) {
            if (errno == EINTR) continue;
            g->write_errno = errno;
            return 1;
        }
        done += (size_t)w;
    }
    s->offset += (int64_t)len;
    return 0;
}

static int on_progress(void *user) {
    get_ctx *g = user;
    kr_hub_sink *s = g->sink;
    if (!s->on_bytes || g->discard) return 0;
    if (s->on_bytes(s->user, s->offset)) {
        g->cancelled = 1;
        return 1;
    }
    return 0;
}

/* The body callback and the header one share the request's user pointer: headers go to the
 * meta of the context. */
static int on_get_header(void *user, const char *line, size_t len) {
    get_ctx *g = user;
    return on_header(g->meta, line, len);
}

kr_status kr_hub_http_get(kr_hub_http *h, const char *url, kr_hub_sink *s, kr_hub_meta *m,
                          int *transient, kr_error *err) {
    kr_hub_meta_init(m);
    *transient = 0;
    get_ctx g = { .sink = s, .meta = m };
    char range[48];
    if (s->offset > 0) snprintf(range, sizeof range, "%" PRId64 "-", s->offset);
    kr_http_request rq = {
        .method = "GET",
        .url = url,
        .range = s->offset > 0 ? range : NULL,
        .max_redirects = 10,
        .on_header = on_get_header,
        .on_body = on_body,
        .on_progress = on_progress,
        .user = &g,
    };
    kr_http_response rs;
    kr_error perr = { 0 };
    kr_status st = kr_http_perform(h->client, &rq, &rs, &perr);
    if (rs.status) m->status = rs.status;
    /* Why a callback stopped the transfer is known here, not in the client. */
    if (g.write_errno)
        return kr_error_set(err, KR_ERR_IO, "cannot write %s: %s", s->path,
                            strerror(g.write_errno));
    char shown[4096];
    kr_http_redact_url(url, shown, sizeof shown); /* no user:password@ in messages */
    if (g.bad[0]) return kr_error_set(err, KR_ERR_FORMAT, "GET %s: %s", shown, g.bad);
    if (g.cancelled) return kr_error_set(err, KR_ERR_CANCELLED, "GET %s: cancelled", shown);
    if (st != KR_OK) {
        *transient = rs.transient;
        if (err) *err = perr;
        return st;
    }
    /* An empty 200 body never reaches on_body: the restart from 0 still applies. */
    if (!g.started && m->status == 200 && s->offset > 0) {
        if (ftruncate(s->fd, 0) != 0)
            return kr_error_set(err, KR_ERR_IO, "cannot truncate %s: %s", s->path, strerror(errno));
        s->offset = 0;
    }
    return KR_OK;
}
