/*
 * server/server — lifecycle and the libmicrohttpd glue (see server.h).
 *
 * Threading: libmicrohttpd runs one thread per connection (MHD_USE_THREAD_PER_CONNECTION), so
 * a handler may block while its forecast runs — that is what makes the plain JSON path simple
 * — and the engine thread only ever touches kr_job objects. Each request walks:
 *   first call  -> context, route match, early refusals (404, 405, 503 draining, 401, 413 by
 *                  Content-Length) before any body byte is read;
 *   body calls  -> accumulate up to max_body_bytes (413 beyond, for chunked uploads);
 *   last call   -> the route's handler (handlers.c);
 *   completion  -> cancel if the client left early, HTTP metrics, free.
 */
#include "server/server_internal.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "server/auth.h"
#include "server/routes_analyst.h"
#include "server/static_files.h"

/* ------------------------------------------------------------------ helpers */

void kr_srv_log(kr_server *s, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (s && s->cfg.sched.log)
        s->cfg.sched.log(s->cfg.sched.log_user, line);
    else
        fprintf(stderr, "kronos serve: %s\n", line);
}

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

enum MHD_Result kr_srv_reply(struct MHD_Connection *mc, kr_conn *c, int status,
                             const char *content_type, char *body, size_t len,
                             const char *extra_name, const char *extra_value) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(body ? len : 0, body ? body : (void *)"",
                                        body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    if (content_type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (extra_name) MHD_add_response_header(r, extra_name, extra_value);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ok = MHD_queue_response(mc, (unsigned)status, r);
    MHD_destroy_response(r);
    if (ok == MHD_YES) c->status = status;
    return ok;
}

enum MHD_Result kr_srv_reply_error(struct MHD_Connection *mc, kr_conn *c, int status,
                                   const char *message, const char *field) {
    char *body = kr_api_error_json(status, message, field);
    return kr_srv_reply(mc, c, status, "application/json", body, body ? strlen(body) : 0, NULL,
                        NULL);
}

/* Applies the time-of-day profile that covers the current local time (checked at most once
 * a second, on whichever connection thread comes by). */
static void check_profile(kr_server *s) {
    if (s->cfg.n_profiles == 0) return;
    double now = kr_now_seconds();
    pthread_mutex_lock(&s->mu);
    if (now - s->profile_checked_at < 1.0 && s->profile_checked_at > 0) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->profile_checked_at = now;
    time_t t = time(NULL);
    struct tm lt;
    localtime_r(&t, &lt);
    const kr_server_profile *p = kr_server_profile_at(&s->cfg, lt.tm_hour * 60 + lt.tm_min);
    int idx = p ? (int)(p - s->cfg.profiles) : -1, prev = s->active_profile;
    s->active_profile = idx;
    pthread_mutex_unlock(&s->mu);
    if (idx == prev) return;
    if (prev >= 0) kr_http_metrics_profile(s->http, s->cfg.profiles[prev].name, 0);
    if (p) kr_http_metrics_profile(s->http, p->name, 1);
    kr_context_params eff = kr_server_profile_apply(&s->cfg.sched, p);
    kr_srv_log(s, "profile %s in effect (batch_wait_ms %d, max_batch_tokens %d, max_running %d)",
               p ? p->name : "base", eff.batch_wait_ms, eff.max_batch_tokens, eff.max_running);
    char reason[96];
    snprintf(reason, sizeof reason, "time-of-day profile %s", p ? p->name : "base");
    kr_context_limits lim = kr_context_limits_keep();
    lim.batch_wait_ms = eff.batch_wait_ms;
    lim.max_batch_tokens = eff.max_batch_tokens;
    lim.max_running = eff.max_running;
    lim.max_queue = eff.max_queue;
    lim.target_queue_p95_s = eff.target_queue_p95_s;
    lim.target_ttft_p95_s = eff.target_ttft_p95_s;
    kr_context_set_limits(s->ctx, &lim, reason);
    if (s->cfg.on_profile) s->cfg.on_profile(s->cfg.on_profile_user, p, &eff);
}

/* ------------------------------------------------------------------ libmicrohttpd callbacks */

/* Bytes of an oversized chunked body read and dropped before giving up on the client. */
#define KR_DISCARD_MAX ((size_t)64 << 20)

static enum MHD_Result reply_too_large(struct MHD_Connection *mc, kr_conn *c) {
    char msg[128];
    snprintf(msg, sizeof msg, "request body exceeds max_body_bytes (%zu)",
             c->srv->cfg.max_body_bytes);
    return kr_srv_reply_error(mc, c, 413, msg, NULL);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
    kr_server *s = cls;
    kr_conn *c = *con_cls;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return MHD_NO;
        *con_cls = c;
        c->srv = s;
        c->t0 = kr_now_seconds();
        c->fd = -1;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci) c->fd = ci->connect_fd;
        kr_http_metrics_in_flight(s->http, 1);
        check_profile(s);

        int m = kr_route_match(method, url, &c->route);
        if (m == 404) {
            c->route = NULL;
            return kr_srv_reply_error(mc, c, 404,
                                      "no such route (see GET /v1/models, POST "
                                      "/v1/forecast, /health, /ready, /metrics)",
                                      NULL);
        }
        if (m == 405) {
            char msg[128];
            snprintf(msg, sizeof msg, "%s only accepts %s", c->route->path, c->route->method);
            char *body = kr_api_error_json(405, msg, NULL);
            return kr_srv_reply(mc, c, 405, "application/json", body, body ? strlen(body) : 0,
                                MHD_HTTP_HEADER_ALLOW,
                                !strcmp(c->route->method, "GET") ? "GET, HEAD" : c->route->method);
        }
        if (c->route->v1) {
            pthread_mutex_lock(&s->mu);
            int draining = s->draining;
            pthread_mutex_unlock(&s->mu);
            if (draining) {
                kr_http_metrics_reject(s->http, "draining");
                char *body = kr_api_error_json(503, "the server is shutting down", NULL);
                return kr_srv_reply(mc, c, 503, "application/json", body, body ? strlen(body) : 0,
                                    MHD_HTTP_HEADER_CONNECTION, "close");
            }
            if (s->cfg.api_key[0] &&
                !kr_auth_check(
                    MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
                    s->cfg.api_key)) {
                kr_http_metrics_reject(s->http, "auth");
                char *body = kr_api_error_json(401,
                                               "missing or wrong API key: send "
                                               "'Authorization: Bearer <key>'",
                                               NULL);
                return kr_srv_reply(mc, c, 401, "application/json", body, body ? strlen(body) : 0,
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
                char msg[128];
                snprintf(msg, sizeof msg, "request body of %s bytes exceeds max_body_bytes (%zu)",
                         cl, s->cfg.max_body_bytes);
                return kr_srv_reply_error(mc, c, 413, msg, NULL);
            }
        }
        return MHD_YES;
    }
    (void)version; /* HTTP/1.0 and 1.1 are handled alike */

    if (*upload_size > 0) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (c->status) return MHD_YES; /* already answered: discard the rest */
        if (c->too_large || c->len + n > s->cfg.max_body_bytes) {
            /* A chunked upload past the limit. Answering mid-upload makes most clients see a
             * broken pipe instead of the 413, so keep reading and discarding (memory stays
             * flat) and answer at the end — unless the client keeps going far beyond any
             * honest mistake, then answer now and let the connection close. */
            if (!c->too_large) {
                c->too_large = 1;
                free(c->body);
                c->body = NULL;
                c->len = c->cap = 0;
                kr_http_metrics_reject(s->http, "too_large");
            }
            c->discarded += n;
            if (c->discarded > KR_DISCARD_MAX) return reply_too_large(mc, c);
            return MHD_YES;
        }
        if (c->cap < c->len + n + 1) {
            size_t cap = c->cap ? c->cap : 4096;
            while (cap < c->len + n + 1) cap *= 2;
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
    if (c->status) return MHD_YES; /* answered early; libmicrohttpd sends it */
    if (c->too_large) return reply_too_large(mc, c);

    switch (c->route->id) {
    case KR_ROUTE_HEALTH: return kr_handle_health(mc, c);
    case KR_ROUTE_READY: return kr_handle_ready(mc, c);
    case KR_ROUTE_METRICS: return kr_handle_metrics(mc, c);
    case KR_ROUTE_MODELS: return kr_handle_models(mc, c);
    case KR_ROUTE_FORECAST: return kr_handle_forecast(mc, c);
    case KR_ROUTE_SYMBOLS: return kr_handle_symbols(mc, c);
    case KR_ROUTE_CANDLES_GET: return kr_handle_candles_get(mc, c, url);
    case KR_ROUTE_CANDLES_POST: return kr_handle_candles_post(mc, c, url);
    case KR_ROUTE_ANALYZE: return kr_handle_analyze(mc, c);
    case KR_ROUTE_ANALYZE_BATCH: return kr_handle_analyze_batch(mc, c);
    case KR_ROUTE_PAGE:
    case KR_ROUTE_ASSETS: return kr_handle_static(mc, c, url);
    default: return kr_srv_reply_error(mc, c, 500, "unrouted request", NULL);
    }
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)mc;
    kr_server *s = cls;
    kr_conn *c = *con_cls;
    if (!c) return;
    *con_cls = NULL;
    int status = c->status ? c->status : 499;
    if (c->job || c->counted)
        status = kr_forecast_conn_done(c, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    else if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !c->status)
        status = 499;
    kr_http_metrics_record(s->http, kr_route_label(c->route), status, kr_now_seconds() - c->t0);
    kr_http_metrics_in_flight(s->http, -1);
    free(c->body);
    kr_api_request_free(&c->req);
    kr_sse_free(&c->sse);
    free(c);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
    kr_srv_log(cls, "http: %s", line);
}

/* ------------------------------------------------------------------ lifecycle */

/* "kronos-demo" from ".../kronos-demo/predictor" or ".../Kronos-small". */
static void model_name_of(const char *dir, char *out, size_t cap) {
    char buf[KR_SERVER_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", dir && *dir ? dir : "kronos");
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
    char *base = strrchr(buf, '/');
    if (base && !strcmp(base + 1, "predictor") && base != buf) {
        *base = '\0';
        char *parent = strrchr(buf, '/');
        snprintf(out, cap, "%s", parent ? parent + 1 : buf);
        return;
    }
    snprintf(out, cap, "%s", base ? base + 1 : buf);
}

static kr_status start_daemon(kr_server *s, kr_error *err) {
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", s->cfg.port);
    int gai = getaddrinfo(s->cfg.host, port, &hints, &ai);
    if (gai != 0 || !ai)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "host: cannot resolve '%s': %s", s->cfg.host,
                            gai_strerror(gai));
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_access, s, MHD_OPTION_EXTERNAL_LOGGER,
                                 mhd_log, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon)
        return kr_error_set(err, KR_ERR_IO,
                            "cannot listen on %s:%d (in use, or not an address "
                            "of this machine?)",
                            s->cfg.host, s->cfg.port);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di && di->port ? di->port : s->cfg.port;
    return KR_OK;
}

kr_status kr_server_create(const kr_model *model, const kr_server_config *cfg, kr_server **out,
                           kr_error *err) {
    if (!model || !cfg || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_server_create: NULL argument");
    *out = NULL;
    kr_status st = kr_server_config_validate(cfg, err);
    if (st != KR_OK) return st;
    kr_server *s = calloc(1, sizeof *s);
    if (!s) return kr_error_set(err, KR_ERR_NOMEM, "server: out of memory");
    s->cfg = *cfg;
    s->model = model;
    s->active_profile = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle, NULL);
    if (!s->cfg.api_key[0] && s->cfg.api_key_file[0] &&
        (st = kr_auth_load_key_file(s->cfg.api_key_file, s->cfg.api_key, sizeof s->cfg.api_key,
                                    err)) != KR_OK)
        goto fail;
    model_name_of(s->cfg.model, s->model_name, sizeof s->model_name);
    s->model_desc.name = s->model_name;
    s->model_desc.quant = s->cfg.quant;
    s->model_desc.kv_dtype = s->cfg.kv_dtype;
    kr_model_get_info(model, &s->model_desc.info);

    if ((st = kr_metrics_create(&s->metrics, err)) != KR_OK) goto fail;
    if (!(s->http = kr_http_metrics_create(s->metrics))) {
        st = kr_error_set(err, KR_ERR_NOMEM, "server: out of memory");
        goto fail;
    }
    kr_context_params cp = s->cfg.sched;
    cp.n_threads = s->cfg.threads;
    cp.kv_dtype = s->cfg.kv_dtype;
    if ((st = kr_context_create_ex(model, &cp, s->metrics, &s->ctx, err)) != KR_OK) goto fail;
    if ((st = start_daemon(s, err)) != KR_OK) goto fail;
    check_profile(s);
    *out = s;
    return KR_OK;
fail:
    kr_server_free(s);
    return st;
}

kr_status kr_server_attach_shadow(kr_server *s, kr_model *f32_model, double sample, kr_error *err) {
    if (!s || s->drift) {
        kr_model_free(f32_model);
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "drift: no server, or a shadow is attached already");
    }
    return kr_drift_create(f32_model, sample, s->metrics, &s->drift, err);
}

kr_drift *kr_server_drift(kr_server *s) { return s ? s->drift : NULL; }

int kr_server_port(const kr_server *s) { return s ? s->port : 0; }
kr_context *kr_server_context(kr_server *s) { return s ? s->ctx : NULL; }
kr_metrics *kr_server_metrics(kr_server *s) { return s ? s->metrics : NULL; }

int kr_server_is_draining(kr_server *s) {
    pthread_mutex_lock(&s->mu);
    int d = s->draining;
    pthread_mutex_unlock(&s->mu);
    return d;
}

void kr_server_drain(kr_server *s, double grace_s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    if (s->draining) {
        /* A second caller waits for the first one's drain to finish. */
        while (!s->drained) pthread_cond_wait(&s->idle, &s->mu);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->draining = 1;
    pthread_mutex_unlock(&s->mu);
    kr_http_metrics_draining(s->http, 1);
    kr_srv_log(s, "draining: refusing new requests, finishing the accepted ones");
    /* Accepted requests (forecasts, and analyses, which submit several batches in turn) get
     * grace_s to finish while the engine keeps accepting their work; then the engine drains,
     * cancelling what is left (its clients get 504/499), so a drain is bounded even behind a
     * heavy analysis. */
    double deadline = kr_now_seconds() + (grace_s > 0 ? grace_s : 0);
    struct timespec dl;
    pthread_mutex_lock(&s->mu);
    while (s->active_jobs > 0) {
        double left_s = deadline - kr_now_seconds();
        if (left_s <= 0) break;
        clock_gettime(CLOCK_REALTIME, &dl);
        double t = (double)dl.tv_sec + dl.tv_nsec * 1e-9 + (left_s < 0.25 ? left_s : 0.25);
        dl.tv_sec = (time_t)t;
        dl.tv_nsec = (long)((t - (double)dl.tv_sec) * 1e9);
        pthread_cond_timedwait(&s->idle, &s->mu, &dl);
    }
    pthread_mutex_unlock(&s->mu);
    double left_s = deadline - kr_now_seconds();
    if (s->ctx && kr_context_drain(s->ctx, left_s > 0 ? left_s : 0) == KR_ERR_TIMEOUT)
        kr_srv_log(s, "drain: cancelled the requests still running after %.0f s", grace_s);

    /* The engine has posted every result; give the connections a moment to send them. */
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 1;
    pthread_mutex_lock(&s->mu);
    while (s->active_jobs > 0)
        if (pthread_cond_timedwait(&s->idle, &s->mu, &dl) == ETIMEDOUT) break;
    int left = s->active_jobs;
    s->drained = 1;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
    if (left)
        kr_srv_log(s, "drained with %d response(s) still unsent after %.0f s", left, grace_s);
    else
        kr_srv_log(s, "drained");
}

void kr_server_free(kr_server *s) {
    if (!s) return;
    if (s->daemon) {
        kr_server_drain(s, s->cfg.request_timeout_s);
        MHD_stop_daemon(s->daemon);
    }
    kr_context_free(s->ctx);
    kr_drift_free(s->drift);
    kr_http_metrics_free(s->http);
    kr_metrics_free(s->metrics);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
