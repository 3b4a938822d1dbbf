/*
 * server/connection — one connection's requests through libmicrohttpd (the callbacks
 * server.c registers), and the reply helpers every handler uses.
 *
 * libmicrohttpd runs one thread per connection (MHD_USE_THREAD_PER_CONNECTION), so a handler
 * may block while its forecast runs — that is what makes the plain JSON path simple — and the
 * scheduler thread only ever touches kr_job objects. Each request walks:
 *   connection  -> registered with the read watchdog (conn_watch.h): headers and body must
 *                  arrive within read_timeout_s, whatever the client trickles;
 *   first call  -> context and request id, framing checks (conflicting Content-Length,
 *                  Transfer-Encoding with Content-Length: 400 and close), route match, early
 *                  refusals (404, 405, 503 draining, 401, 413 by Content-Length, 503 when the
 *                  memory budget cannot take the body) before any body byte is read;
 *   body calls  -> accumulate up to max_body_bytes (413 beyond, for chunked uploads) while
 *                  the memory budget takes them (else read on, drop, answer at the end);
 *   last call   -> a JSON body is scanned (json_body.h) and its parse tree's estimated memory
 *                  admitted against the budget; then the route's handler (handlers.c,
 *                  routes_store.c, routes_analyst.c, static_files.c);
 *   completion  -> cancel if the client left early, HTTP metrics, access log line, memory
 *                  budget back, the next request's read deadline, free.
 *
 * Memory budget: a request holds its body and, while it is parsed, a cJSON tree of ~90 bytes
 * per JSON value (or the candles of CSV text, KR_CSV_ROW_BYTES a line). Both are reserved
 * (cfg.max_request_memory per request -> 413, cfg.max_memory_in_flight in total -> 503 with
 * Retry-After) before they are allocated — the body as its bytes arrive, after a declared
 * length was checked to fit — and given back when the handler drops the body
 * (kr_srv_drop_body) or the request completes. What a handler builds (an analysis' working
 * set, the room for an answer) and the answer itself are held until the request completes;
 * budget.c keeps the accounts. Chunked or declared, a body the budget stops taking half-way
 * is read to its end and dropped, then answered (503 / 413), never cut without an answer.
 */
#include "server/server_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "base/timeutil.h"
#include "server/auth.h"
#include "server/framing.h"
#include "common/json_body.h"
#include "server/routes_analyst.h"
#include "server/routes_backtest.h"
#include "server/routes_store.h"
#include "server/static_files.h"

/* Bytes of an oversized chunked body read and dropped before giving up on the client. */
#define KR_DISCARD_MAX ((size_t)64 << 20)
/* Content-Length / Transfer-Encoding lines looked at by the framing check (more: 400). */
#define KR_MAX_HEADERS 64

/* ------------------------------------------------------------------ replies */

int kr_srv_client_gone(int fd) {
    if (fd < 0) return 0;
    struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return 1;
    if (p.revents & POLLIN) {
        /* Readable: either a pipelined request (data) or an orderly close (0 bytes). */
        char b;
        ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    return 0;
}

enum MHD_Result kr_srv_queue(struct MHD_Connection *mc, kr_conn *c, int status,
                             struct MHD_Response *r, size_t body_len) {
    MHD_add_response_header(r, "X-Request-Id", c->request_id);
    enum MHD_Result ok = MHD_queue_response(mc, (unsigned)status, r);
    MHD_destroy_response(r);
    if (ok == MHD_YES) {
        c->status = status;
        c->bytes_sent = body_len;
    }
    return ok;
}

static enum MHD_Result reply_error_with(struct MHD_Connection *mc, kr_conn *c, int status,
                                        const char *message, const char *name, const char *value);

enum MHD_Result kr_srv_reply(struct MHD_Connection *mc, kr_conn *c, int status,
                             const char *content_type, char *body, size_t len,
                             const char *extra_name, const char *extra_value) {
    /* The answer is held until the request completes; a large answer of a /v1 route that the
     * budget cannot take now is dropped for a 503 (a 413 when it exceeds the whole budget),
     * so clients that never read cannot pile answers up past max_memory_in_flight. */
    char msg[256];
    const int refusable = status < 300 && c->route && c->route->v1;
    int refused = kr_srv_hold_answer(c, body ? len : 0, refusable, msg, sizeof msg);
    if (refused) {
        free(body);
        return kr_srv_reply_refusal(mc, c, refused, msg);
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(body ? len : 0, body ? body : (void *)"",
                                        body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    if (content_type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (extra_name) MHD_add_response_header(r, extra_name, extra_value);
    if (c->warning_header[0]) MHD_add_response_header(r, "X-Kronos-Warning", c->warning_header);
    /* Every answer is what its Content-Type says (never sniffed into HTML), and an HTML report
     * (/v1/analyze "format": "html", served from the page's origin) runs nothing: its own
     * inline style and SVG only, no script, no request, sandboxed. */
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (content_type && !strncmp(content_type, "text/html", 9))
        MHD_add_response_header(r, "Content-Security-Policy",
                                "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                                "sandbox");
    /* Every 429 and 503 kronos answers passes (a full queue or memory budget, a drain, a store
     * that is down): each tells the client, and a load balancer, when to come back. */
    if ((status == 429 || status == 503) &&
        !(extra_name && !strcasecmp(extra_name, MHD_HTTP_HEADER_RETRY_AFTER)))
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (status >= 400 && !c->error[0] && body && len < 8192) {
        /* An error body built elsewhere ({"error": {"message": ...}}): its message is the
         * cause the access log records. */
        cJSON *j = cJSON_ParseWithLength(body, len);
        const cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "message");
        if (cJSON_IsString(m)) snprintf(c->error, sizeof c->error, "%s", m->valuestring);
        cJSON_Delete(j);
    }
    return kr_srv_queue(mc, c, status, r, body ? len : 0);
}

enum MHD_Result kr_srv_reply_error(struct MHD_Connection *mc, kr_conn *c, int status,
                                   const char *message, const char *field) {
    snprintf(c->error, sizeof c->error, "%s", message ? message : kr_api_reason(status));
    char *body = kr_api_error_json(status, message, field);
    return kr_srv_reply(mc, c, status, "application/json", body, body ? strlen(body) : 0, NULL,
                        NULL);
}

/* An error answer with one extra header (Retry-After, Connection: close, Allow, ...). */
static enum MHD_Result reply_error_with(struct MHD_Connection *mc, kr_conn *c, int status,
                                        const char *message, const char *name, const char *value) {
    snprintf(c->error, sizeof c->error, "%s", message);
    char *body = kr_api_error_json(status, message, NULL);
    return kr_srv_reply(mc, c, status, "application/json", body, body ? strlen(body) : 0, name,
                        value);
}

/* A streamed response's reader, counting what it hands libmicrohttpd. The response may
 * outlive the connection's context (libmicrohttpd drops it after the completion callback),
 * so the free callback never touches the context. */
typedef struct stream_wrap {
    kr_conn *c;
    MHD_ContentReaderCallback reader;
    void *cls;
    MHD_ContentReaderFreeCallback free_cb;
} stream_wrap;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_wrap *w = cls;
    ssize_t n = w->reader(w->cls, pos, buf, max);
    if (n > 0) w->c->bytes_sent += (uint64_t)n;
    return n;
}

static void stream_free(void *cls) {
    stream_wrap *w = cls;
    if (w->free_cb) w->free_cb(w->cls);
    free(w);
}

enum MHD_Result kr_srv_stream(struct MHD_Connection *mc, kr_conn *c,
                              MHD_ContentReaderCallback reader, void *cls,
                              MHD_ContentReaderFreeCallback free_cb) {
    stream_wrap *w = malloc(sizeof *w);
    if (!w) {
        if (free_cb) free_cb(cls);
        return MHD_NO;
    }
    *w = (stream_wrap){ c, reader, cls, free_cb };
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, w, stream_free);
    if (!r) {
        stream_free(w);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    /* nginx and friends buffer responses by default, which would defeat streaming. */
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    return kr_srv_queue(mc, c, 200, r, 0);
}

/* ------------------------------------------------------------------ memory budget */

/* What the budget's messages say a body's memory is for. */
#define KR_BODY_WHAT "to read and parse it; send fewer candles"

/* What a request body and its parse may take (budget.c): 0, or the status to answer. */
static int mem_reserve(kr_conn *c, size_t bytes, char *msg, size_t cap) {
    int st = kr_srv_mem_admit(c, bytes, 1, 1, KR_BODY_WHAT, msg, cap);
    if (!st) c->reserved += bytes;
    return st;
}

void kr_srv_drop_body(kr_conn *c) {
    free(c->body);
    c->body = NULL;
    c->len = c->cap = 0;
    kr_srv_mem_release_body(c);
}

enum MHD_Result kr_srv_reply_refusal(struct MHD_Connection *mc, kr_conn *c, int status,
                                     const char *msg) {
    kr_http_metrics_reject(c->srv->http, status == 413 ? "too_large" : "memory");
    /* A 503 says when to come back; a 413 that the connection closes (a body may still be
     * on its way). */
    if (status == 503) return reply_error_with(mc, c, 503, msg, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    return reply_error_with(mc, c, status, msg, MHD_HTTP_HEADER_CONNECTION, "close");
}

/* ------------------------------------------------------------------ first call */

/* The header lines that say where the body ends (every one of them, however many other
 * headers come first), and any whose name holds white space (a misspelt one of those). */
typedef struct header_list {
    int n, overflow;
    int hosts; /* Host header lines */
    const char *names[KR_MAX_HEADERS], *values[KR_MAX_HEADERS];
} header_list;

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value) {
    (void)kind;
    header_list *h = cls;
    if (key && !strcasecmp(key, MHD_HTTP_HEADER_HOST)) h->hosts++;
    if (!key || (strcasecmp(key, "Content-Length") && strcasecmp(key, "Transfer-Encoding") &&
                 !strpbrk(key, " \t")))
        return MHD_YES;
    if (h->n == KR_MAX_HEADERS) {
        h->overflow = 1;
        return MHD_NO;
    }
    h->names[h->n] = key;
    h->values[h->n++] = value;
    return MHD_YES;
}

static void start_request(kr_server *s, struct MHD_Connection *mc, kr_conn *c, const char *method) {
    c->srv = s;
    c->t0 = kr_now_seconds();
    c->t0_wall = (double)time(NULL);
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0) c->t0_wall = ts.tv_sec + ts.tv_nsec * 1e-9;
    c->fd = -1;
    c->queue_wait = -1;
    snprintf(c->method, sizeof c->method, "%s", method ? method : "");
    const char *rid = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "X-Request-Id");
    if (kr_request_id_valid(rid))
        snprintf(c->request_id, sizeof c->request_id, "%s", rid);
    else
        kr_request_id_new(c->request_id);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci) c->fd = ci->connect_fd;
    ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci) c->slot = ci->socket_context;
    ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, c->client,
                      sizeof c->client);
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                      c->client, sizeof c->client);
    }
}

/* Everything decided before the body: the answer, or MHD_YES to read on. */
static enum MHD_Result first_call(kr_server *s, struct MHD_Connection *mc, kr_conn *c,
                                  const char *url, const char *method, const char *version) {
    /* Where the body ends must be unambiguous before anything else is decided. */
    header_list h = { 0 };
    MHD_get_connection_values(mc, MHD_HEADER_KIND, collect_header, &h);
    char msg[256];
    if (h.overflow)
        snprintf(msg, sizeof msg, "more than %d Content-Length / Transfer-Encoding headers",
                 KR_MAX_HEADERS);
    if (h.overflow || kr_http_check_framing(h.n, h.names, h.values, msg, sizeof msg) != 0) {
        kr_http_metrics_reject(s->http, "framing");
        return reply_error_with(mc, c, 400, msg, MHD_HTTP_HEADER_CONNECTION, "close");
    }
    /* RFC 9112 §3.2: more than one Host line is a 400 — a proxy and this server could each
     * take another of them (which virtual host, which cache key the request belongs to). */
    if (h.hosts > 1) {
        kr_http_metrics_reject(s->http, "framing");
        return reply_error_with(mc, c, 400, "more than one Host header", MHD_HTTP_HEADER_CONNECTION,
                                "close");
    }
    /* RFC 9112 §3.2: an HTTP/1.1 request without Host is a 400 (libmicrohttpd answers it). */
    if (version && !strcmp(version, MHD_HTTP_VERSION_1_1) &&
        !MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST)) {
        kr_http_metrics_reject(s->http, "framing");
        return reply_error_with(mc, c, 400, "an HTTP/1.1 request needs a Host header",
                                MHD_HTTP_HEADER_CONNECTION, "close");
    }
    int m = kr_route_match(method, url, &c->route);
    if (m == 404) {
        c->route = NULL;
        return kr_srv_reply_error(mc, c, 404,
                                  "no such route (see GET /v1/models, POST "
                                  "/v1/forecast, /health, /ready, /metrics)",
                                  NULL);
    }
    if (m == 405) {
        /* Every method of the path, whichever route matched first (RFC 9110 §15.5.6: Allow
         * lists what the target resource supports). */
        char allow[64];
        kr_route_allow(url, allow, sizeof allow);
        snprintf(msg, sizeof msg, "%s only accepts %s", c->route->path, allow);
        return reply_error_with(mc, c, 405, msg, MHD_HTTP_HEADER_ALLOW, allow);
    }
    if (c->route->v1) {
        if (kr_server_is_draining(s)) {
            kr_http_metrics_reject(s->http, "draining");
            return reply_error_with(mc, c, 503, "the server is shutting down",
                                    MHD_HTTP_HEADER_CONNECTION, "close");
        }
        if (s->cfg.api_key[0] &&
            !kr_auth_check(
                MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
                s->cfg.api_key)) {
            kr_http_metrics_reject(s->http, "auth");
            return reply_error_with(mc, c, 401,
                                    "missing or wrong API key: send 'Authorization: Bearer <key>'",
                                    MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"kronos\"");
        }
    }
    /* Refuse an oversized body from its declared length, before reading any of it. */
    const char *cl =
        MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end = NULL;
        errno = 0;
        unsigned long long n = strtoull(cl, &end, 10);
        if (errno || end == cl || n > s->cfg.max_body_bytes) {
            kr_http_metrics_reject(s->http, "too_large");
            snprintf(msg, sizeof msg, "request body of %.40s bytes exceeds max_body_bytes (%zu)",
                     cl, s->cfg.max_body_bytes);
            return kr_srv_reply_error(mc, c, 413, msg, NULL);
        }
        /* A body the budget could not hold now is refused before any of it is read; one it
         * can is reserved as its bytes arrive (body_bytes), so a client that declares large
         * bodies and sends nothing holds none of the budget from the others. */
        if (n > 0) {
            int st = kr_srv_mem_admit(c, (size_t)n + 1, 0, 1, KR_BODY_WHAT, msg, sizeof msg);
            if (st) return kr_srv_reply_refusal(mc, c, st, msg);
            c->expected = (size_t)n + 1;
        }
    }
    return MHD_YES;
}

/* ------------------------------------------------------------------ body and dispatch */

static enum MHD_Result reply_too_large(struct MHD_Connection *mc, kr_conn *c) {
    char msg[128];
    snprintf(msg, sizeof msg, "request body exceeds max_body_bytes (%zu)",
             c->srv->cfg.max_body_bytes);
    return kr_srv_reply_error(mc, c, 413, msg, NULL);
}

/* Appends n body bytes. MHD_YES, or the answer when the body cannot be taken. */
static enum MHD_Result body_bytes(struct MHD_Connection *mc, kr_conn *c, const char *upload,
                                  size_t n) {
    kr_server *s = c->srv;
    if (c->refused) {
        c->discarded += n;
        /* A declared body ends at its length (at most max_body_bytes); a chunked one is
         * answered now once it goes on far beyond any honest body. */
        if (!c->expected && c->discarded > KR_DISCARD_MAX)
            return kr_srv_reply_refusal(mc, c, c->refused, c->refusal);
        return MHD_YES;
    }
    if (c->too_large || c->len + n > s->cfg.max_body_bytes) {
        /* A chunked upload past the limit. Answering mid-upload makes most clients see a
         * broken pipe instead of the 413, so keep reading and discarding (memory stays
         * flat) and answer at the end — unless the client keeps going far beyond any
         * honest mistake, then answer now and let the connection close. */
        if (!c->too_large) {
            c->too_large = 1;
            kr_srv_drop_body(c);
            kr_http_metrics_reject(s->http, "too_large");
        }
        c->discarded += n;
        if (c->discarded > KR_DISCARD_MAX) return reply_too_large(mc, c);
        return MHD_YES;
    }
    if (c->cap < c->len + n + 1) {
        /* Grow as the bytes arrive, admitting each growth: up to the declared length, or
         * (chunked) up to max_body_bytes. */
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->len + n + 1) cap *= 2;
        if (cap > s->cfg.max_body_bytes + 1) cap = s->cfg.max_body_bytes + 1;
        if (c->expected && cap > c->expected && c->expected >= c->len + n + 1) cap = c->expected;
        char msg[256];
        int st = mem_reserve(c, cap - c->cap, msg, sizeof msg);
        if (st) {
            /* The budget filled up while this body was on its way (a declared one fit when
             * its headers came; a chunked one grows as it arrives). Read the rest and drop
             * it, then answer: a client still sending would see a broken upload (and a proxy
             * an empty response it may send elsewhere) instead of the 503 or 413. Memory
             * stays flat. */
            c->refused = st;
            snprintf(c->refusal, sizeof c->refusal, "%s", msg);
            kr_srv_drop_body(c);
            return MHD_YES;
        }
        char *nb = realloc(c->body, cap);
        if (!nb) return MHD_NO;
        c->body = nb;
        c->cap = cap;
    }
    memcpy(c->body + c->len, upload, n);
    c->len += n;
    c->body[c->len] = '\0';
    return MHD_YES;
}

/* How a route's body is parsed: JSON, CSV text (a candle upload sent as text/csv), or not
 * at all. */
enum body_kind { BODY_NONE, BODY_JSON, BODY_CSV };

static enum body_kind body_kind(struct MHD_Connection *mc, const kr_conn *c) {
    switch (c->route->id) {
    case KR_ROUTE_FORECAST:
    case KR_ROUTE_ANALYZE:
    case KR_ROUTE_ANALYZE_ALIAS:
    case KR_ROUTE_ANALYZE_BATCH:
    case KR_ROUTE_MODEL_PUT: return BODY_JSON;
    case KR_ROUTE_BACKTEST: return BODY_JSON;
    case KR_ROUTE_CANDLES_POST: {
        const char *ct =
            MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        return ct && (!strncasecmp(ct, "text/csv", 8) || !strncasecmp(ct, "application/csv", 15))
                   ? BODY_CSV
                   : BODY_JSON;
    }
    default: return BODY_NONE;
    }
}

/* A body is sized up before any handler parses it, and what its parse will take admitted
 * against the memory budget: a JSON body is scanned (too many values or CSV lines: 413; a NUL
 * in a string: 400) for its tree and the candles of any CSV text in it; a CSV body is counted
 * in lines (past max_rows: 413) for its candles. */
static enum MHD_Result admit_body(struct MHD_Connection *mc, kr_conn *c) {
    enum body_kind kind = c->body ? body_kind(mc, c) : BODY_NONE;
    if (kind == BODY_NONE) return MHD_YES;
    kr_json_limits jl = kr_api_json_limits(&c->srv->limits);
    size_t bytes;
    kr_api_error aerr = { 0 };
    if (kind == BODY_CSV) {
        size_t lines = kr_csv_lines(c->body, c->len);
        if (lines > jl.max_lines)
            kr_api_error_set(&aerr, 413, "body",
                             "holds %zu CSV lines, more than %zu (%s); split the upload or use "
                             "kronos ingest",
                             lines, jl.max_lines, jl.values_key);
        bytes = lines * (size_t)KR_CSV_ROW_BYTES;
    } else {
        kr_json_scan scan;
        bytes = kr_json_body_scan(c->body, c->len, &jl, &scan, &aerr) == KR_OK
                    ? kr_json_scan_tree_bytes(&scan)
                    : 0;
    }
    if (aerr.status) {
        if (aerr.status == 413) kr_http_metrics_reject(c->srv->http, "too_large");
        return kr_srv_reply_error(mc, c, aerr.status, aerr.message,
                                  aerr.field[0] ? aerr.field : NULL);
    }
    char msg[256];
    int st = mem_reserve(c, bytes, msg, sizeof msg);
    if (st) return kr_srv_reply_refusal(mc, c, st, msg);
    return MHD_YES;
}

/* A store route (list, read, write, delete the candles) is counted like a forecast
 * (c->counted, released when the connection completes), so a drain waits for its answer (at
 * most its request deadline: the store's calls end by it) rather than logging "drained" and
 * stopping the daemon under it. */
static enum MHD_Result store_route(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    kr_server *s = c->srv;
    pthread_mutex_lock(&s->mu);
    c->counted = !s->draining;
    if (c->counted) s->active_jobs++;
    pthread_mutex_unlock(&s->mu);
    switch (c->route->id) {
    case KR_ROUTE_SYMBOLS: return kr_handle_symbols(mc, c);
    case KR_ROUTE_CANDLES_GET: return kr_handle_candles_get(mc, c, url);
    case KR_ROUTE_CANDLES_POST: return kr_handle_candles_post(mc, c, url);
    default: return kr_handle_candles_delete(mc, c, url);
    }
}

static enum MHD_Result dispatch(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    switch (c->route->id) {
    case KR_ROUTE_HEALTH: return kr_handle_health(mc, c);
    case KR_ROUTE_READY: return kr_handle_ready(mc, c);
    case KR_ROUTE_METRICS: return kr_handle_metrics(mc, c);
    case KR_ROUTE_MODELS: return kr_handle_models(mc, c);
    case KR_ROUTE_MODEL_PUT: return kr_handle_model_put(mc, c, url);
    case KR_ROUTE_MODEL_DELETE: return kr_handle_model_delete(mc, c, url);
    case KR_ROUTE_FORECAST: return kr_handle_forecast(mc, c);
    case KR_ROUTE_SYMBOLS:
    case KR_ROUTE_CANDLES_GET:
    case KR_ROUTE_CANDLES_POST:
    case KR_ROUTE_CANDLES_DELETE: return store_route(mc, c, url);
    case KR_ROUTE_ANALYZE:
    case KR_ROUTE_ANALYZE_ALIAS: return kr_handle_analyze(mc, c);
    case KR_ROUTE_ANALYZE_BATCH: return kr_handle_analyze_batch(mc, c);
    case KR_ROUTE_PAGE:
    case KR_ROUTE_ASSETS: return kr_handle_static(mc, c, url);
    case KR_ROUTE_BACKTEST: return kr_handle_backtest_post(mc, c);
    case KR_ROUTE_BACKTEST_GET: return kr_handle_backtest_get(mc, c, url);
    case KR_ROUTE_BACKTEST_DELETE: return kr_handle_backtest_delete(mc, c, url);
    default: return kr_srv_reply_error(mc, c, 500, "unrouted request", NULL);
    }
}

enum MHD_Result kr_srv_on_access(void *cls, struct MHD_Connection *mc, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
    kr_server *s = cls;
    kr_conn *c = *con_cls;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return MHD_NO;
        *con_cls = c;
        start_request(s, mc, c, method);
        kr_http_metrics_in_flight(s->http, 1);
        kr_srv_check_profile(s);
        return first_call(s, mc, c, url, method, version);
    }
    if (*upload_size > 0) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (c->status) return MHD_YES; /* already answered: discard the rest */
        return body_bytes(mc, c, upload, n);
    }
    /* The whole request has arrived: no read deadline while it is handled. */
    kr_conn_watch_received(s->watch, c->slot);
    if (c->status) return MHD_YES; /* answered early; libmicrohttpd sends it */
    if (c->too_large) return reply_too_large(mc, c);
    if (c->refused) return kr_srv_reply_refusal(mc, c, c->refused, c->refusal);
    enum MHD_Result admitted = admit_body(mc, c);
    if (admitted != MHD_YES || c->status) return admitted; /* refused (or failed to) */
    return dispatch(mc, c, url);
}

/* ------------------------------------------------------------------ completion */

void kr_srv_on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)mc;
    kr_server *s = cls;
    kr_conn *c = *con_cls;
    if (!c) return;
    *con_cls = NULL;
    const int sent = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK;
    int status = c->status ? c->status : 499;
    if (c->job || c->counted)
        status = kr_forecast_conn_done(c, sent);
    else if (!sent)
        status = 499;
    if (!sent && !c->status && kr_conn_watch_was_cut(s->watch, c->slot)) {
        status = 408; /* what nginx logs for a request not received in time */
        snprintf(c->error, sizeof c->error,
                 "the request did not arrive within read_timeout_s (%g s)", s->cfg.read_timeout_s);
    } else if (status == 499 && !c->error[0]) {
        snprintf(c->error, sizeof c->error, "the client closed the connection");
    } else if (status >= 400 && !c->error[0]) {
        snprintf(c->error, sizeof c->error, "%s", kr_api_reason(status));
    }
    const double duration = kr_now_seconds() - c->t0;
    kr_http_metrics_record(s->http, kr_route_label(c->route), status, duration);
    kr_http_metrics_in_flight(s->http, -1);
    if (s->access_log) {
        kr_access_entry e = {
            c->t0_wall, c->request_id, c->client, c->method,     kr_route_label(c->route),
            status,     c->bytes_sent, duration,  c->queue_wait, status >= 400 ? c->error : NULL
        };
        kr_access_log_write(s->access_log, &e);
    }
    kr_srv_drop_body(c);
    kr_srv_mem_release_all(c);
    /* A kept-alive connection's next request must arrive within the timeout again. */
    kr_conn_watch_rearm(s->watch, c->slot);
    kr_api_request_free(&c->req);
    kr_sse_free(&c->sse);
    kr_models_release(s->models, c->served); /* its model may be freed now (replaced) */
    free(c);
}

void kr_srv_on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    kr_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = kr_conn_watch_open(s->watch, ci ? ci->connect_fd : -1);
    } else {
        kr_conn_watch_close(s->watch, *socket_context);
        *socket_context = NULL;
    }
}
