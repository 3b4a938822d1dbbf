/*
 * server/server — lifecycle (see server.h): the listening socket, libmicrohttpd's daemon with
 * the connection limits (max_connections, max_connections_per_ip), the read watchdog, the
 * access log, drain and free. What happens to each connection and request is in
 * connection.c.
 */
#include "server/routes_backtest.h"
#include "server/server_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "server/auth.h"

/* /ready's probe of a PostgreSQL store: how long one may take (capped by the request timeout)
 * and how long its answer stands. */
#define KR_STORE_PROBE_S 1.0
#define KR_STORE_PROBE_TTL_S 1.0

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

typedef struct limits_job {
    const kr_context_limits *lim;
    const char *reason;
} limits_job;

static void set_limits_one(void *user, kr_served *e, int is_default) {
    (void)is_default;
    const limits_job *j = user;
    if (!e->main) kr_context_set_limits(e->ctx, j->lim, j->reason);
}

/* The models beside the main one follow the profiles too. */
static void set_limits_all(kr_server *s, const kr_context_limits *lim, const char *reason) {
    if (!s->models) return;
    limits_job j = { lim, reason };
    kr_models_each(s->models, set_limits_one, &j);
}

/* Applies the time-of-day profile that covers the current time in the profiles' zone (checked
 * at most once a second, by the watchdog's tick and by whichever connection thread comes by). */
void kr_srv_check_profile(kr_server *s) {
    if (s->cfg.n_profiles == 0) return;
    double now = kr_now_seconds();
    pthread_mutex_lock(&s->mu);
    if (now - s->profile_checked_at < 1.0 && s->profile_checked_at > 0) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->profile_checked_at = now;
    int64_t utc = (int64_t)time(NULL);
    int minute;
    if (s->have_tz) {
        int64_t local = utc + kr_tz_offset(&s->tz, utc);
        minute = (int)((((local % 86400) + 86400) % 86400) / 60);
    } else if (kr_server_profile_minute(&s->cfg, utc, &minute, NULL) != KR_OK) {
        minute = 0; /* unreachable: the zone was checked at start */
    }
    const kr_server_profile *p = kr_server_profile_at(&s->cfg, minute);
    int idx = p ? (int)(p - s->cfg.profiles) : -1, prev = s->active_profile;
    s->active_profile = idx;
    pthread_mutex_unlock(&s->mu);
    if (idx == prev) return;
    kr_http_metrics_profile(s->http, prev >= 0 ? s->cfg.profiles[prev].name : "base", 0);
    kr_http_metrics_profile(s->http, p ? p->name : "base", 1);
    kr_context_params eff = kr_server_profile_apply(&s->cfg.sched, p);
    const char *zone = kr_server_profile_zone(&s->cfg);
    kr_srv_log(s,
               "profile %s in effect at %02d:%02d %s (batch_wait_ms %d, max_batch_tokens %d, "
               "max_running %d, max_queue %d, %s batching, targets queue p95 %.3f s, TTFT p95 "
               "%.3f s%s)",
               p ? p->name : "base", minute / 60, minute % 60, zone[0] ? zone : "local time",
               eff.batch_wait_ms, eff.max_batch_tokens, eff.max_running, eff.max_queue,
               eff.static_batching ? "static" : "continuous", eff.target_queue_p95_s,
               eff.target_ttft_p95_s,
               (p ? p->latency_tight : s->cfg.latency_tight) ? ", latency_mode tight" : "");
    char reason[96];
    snprintf(reason, sizeof reason, "time-of-day profile %s", p ? p->name : "base");
    kr_context_limits lim = kr_context_limits_keep();
    lim.batch_wait_ms = eff.batch_wait_ms;
    lim.max_batch_tokens = eff.max_batch_tokens;
    lim.max_running = eff.max_running;
    lim.max_queue = eff.max_queue;
    lim.static_batching = eff.static_batching;
    lim.target_queue_p95_s = eff.target_queue_p95_s;
    lim.target_ttft_p95_s = eff.target_ttft_p95_s;
    kr_context_set_limits(s->ctx, &lim, reason);
    set_limits_all(s, &lim, reason);
    if (s->cfg.on_profile) s->cfg.on_profile(s->cfg.on_profile_user, p, &eff);
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

/* A model directory as clients see it in reports: from the checkpoint's own directory on
 * ("kronos-demo/predictor"), or from a hub cache's "models--ORG--NAME" on, so that the report
 * still names the repository and revision. Where the server keeps its files (/home/..,
 * /opt/..) is none of a client's business, as with the candle store's path. */
static void public_dir_of(const char *dir, char *out, size_t cap) {
    char buf[KR_SERVER_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", dir ? dir : "");
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
    const char *hub = strstr(buf, "models--");
    if (hub && (hub == buf || hub[-1] == '/')) {
        snprintf(out, cap, "%s", hub);
        return;
    }
    char *base = strrchr(buf, '/');
    if (base && (!strcmp(base + 1, "predictor") || !strcmp(base + 1, "tokenizer"))) {
        *base = '\0';
        char *parent = strrchr(buf, '/');
        *base = '/';
        base = parent;
    }
    snprintf(out, cap, "%s", base ? base + 1 : buf);
}

/* 1 for an address only this machine can reach (127/8, ::1, ::ffff:127/104). */
static int is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24) ==
               127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return 0;
}

/* The listening socket, bound here rather than by libmicrohttpd so a failure names the
 * address and port asked for and the reason ("Address already in use"). */
static int listen_on(const char *host, int port, const struct addrinfo *ai, kr_error *err) {
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        kr_error_set(err, KR_ERR_IO, "cannot listen on %s:%d: %s", host, port, strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
        int e = errno;
        close(fd);
        kr_error_set(err,
                     e == EADDRINUSE                     ? KR_ERR_BUSY
                     : e == EADDRNOTAVAIL || e == EACCES ? KR_ERR_INVALID_ARG
                                                         : KR_ERR_IO,
                     "cannot listen on %s:%d: %s%s", host, port, strerror(e),
                     e == EADDRINUSE      ? " (another process has the port; pick another "
                                            "with --port, or 0 for any free one)"
                     : e == EADDRNOTAVAIL ? " (not an address of this machine)"
                     : e == EACCES        ? " (a port below 1024 needs privileges: use a higher "
                                            "one behind a proxy)"
                                          : "");
        return -1;
    }
    return fd;
}

static kr_status resolve(const char *host, int port, struct addrinfo **ai, kr_error *err) {
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    *ai = NULL;
    int gai = getaddrinfo(host, port_s, &hints, ai);
    if (gai != 0 || !*ai)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "host: cannot resolve '%s': %s", host,
                            gai_strerror(gai));
    return KR_OK;
}

kr_status kr_server_check_listen(const kr_server_config *cfg, kr_error *err) {
    struct addrinfo *ai = NULL;
    kr_status st = resolve(cfg->host, cfg->port, &ai, err);
    if (st != KR_OK) return st;
    int fd = listen_on(cfg->host, cfg->port, ai, err);
    freeaddrinfo(ai);
    if (fd < 0) return err ? err->status : KR_ERR_IO;
    close(fd);
    return KR_OK;
}

static kr_status start_daemon(kr_server *s, kr_error *err) {
    struct addrinfo *ai = NULL;
    kr_status st = resolve(s->cfg.host, s->cfg.port, &ai, err);
    if (st != KR_OK) return st;
    int fd = listen_on(s->cfg.host, s->cfg.port, ai, err);
    int loopback = is_loopback(ai->ai_addr);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    freeaddrinfo(ai);
    if (fd < 0) return err ? err->status : KR_ERR_IO;
    /* libmicrohttpd closes the listening socket when it stops. */
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, kr_srv_on_access, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED, kr_srv_on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, kr_srv_on_connection, s, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)s->cfg.max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)s->cfg.max_connections_per_ip, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
        MHD_OPTION_END);
    if (!s->daemon) {
        close(fd);
        return kr_error_set(err, KR_ERR_IO, "cannot start the HTTP server on %s:%d", s->cfg.host,
                            s->cfg.port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di && di->port ? di->port : s->cfg.port;
    if (!loopback && !s->cfg.api_key[0])
        kr_srv_log(s,
                   "WARNING: listening on %s:%d, an address other machines can reach, WITHOUT an "
                   "API key: anyone who reaches it can run forecasts and write to the candle "
                   "store. Set api_key_file (--api-key-file), or bind 127.0.0.1 behind a proxy.",
                   s->cfg.host, s->port);
    return KR_OK;
}

static void ladder_log(void *user, const char *line) { kr_srv_log(user, "%s", line); }

/* The precision ladders (server/models.h) under the profile in force, with the tuner on. */
static void ladder_tick(kr_server *s) {
    if (!s->cfg.sched.tune || !s->models) return;
    pthread_mutex_lock(&s->mu);
    const int idx = s->active_profile;
    pthread_mutex_unlock(&s->mu);
    const kr_server_profile *p = idx >= 0 ? &s->cfg.profiles[idx] : NULL;
    const double target =
        p && p->target_queue_p95_s >= 0 ? p->target_queue_p95_s : s->cfg.sched.target_queue_p95_s;
    kr_models_ladder_tick(s->models, kr_now_seconds(), p ? p->precision_floor : "", target,
                          ladder_log, s);
}

/* The watchdog's tick: profiles switch at their time even when no request comes. */
static void on_watch_tick(void *user) {
    kr_srv_check_profile(user);
    ladder_tick(user);
}

/* A request cut by the read watchdog (conn_watch.h). */
static void on_read_cut(void *user) {
    kr_server *s = user;
    kr_http_metrics_reject(s->http, "read_timeout");
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
    const char *zone = kr_server_profile_zone(&s->cfg);
    if (zone[0] && (st = kr_tz_load(zone, &s->tz, err)) != KR_OK) {
        free(s);
        return st;
    }
    s->have_tz = zone[0] != 0;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle, NULL);
    if (!s->cfg.api_key[0] && s->cfg.api_key_file[0] &&
        (st = kr_auth_load_key_file(s->cfg.api_key_file, s->cfg.api_key, sizeof s->cfg.api_key,
                                    err)) != KR_OK)
        goto fail;
    char exposed[KR_SERVER_PATH_MAX + 200];
    if (kr_auth_key_file_exposed(s->cfg.api_key_file, exposed, sizeof exposed))
        kr_srv_log(s, "%s", exposed);
    model_name_of(s->cfg.model, s->model_name, sizeof s->model_name);
    public_dir_of(s->cfg.model, s->predictor_shown, sizeof s->predictor_shown);
    public_dir_of(s->cfg.tokenizer, s->tokenizer_shown, sizeof s->tokenizer_shown);
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
    if (kr_server_shadow_planned(model, &s->cfg)) {
        /* kv_budget is the process's KV memory: the f32 shadow's cache comes out of it. The
         * default quarter holds a sample of up to a quarter of an f32-KV server's largest
         * request; a sample that does not fit is skipped and counted. */
        size_t total = cp.kv_budget_bytes;
        if (total == 0 && (st = kr_server_parse_kv_budget("25%", &total, err)) != KR_OK) goto fail;
        s->shadow_kv_budget = (size_t)((double)total * s->cfg.drift_kv_share);
        cp.kv_budget_bytes = total - s->shadow_kv_budget;
    }
    /* Several models share the KV budget fairly: each context gets an equal share. */
    const int max_models = s->cfg.max_models > 0 ? s->cfg.max_models : 1 + s->cfg.n_models;
    size_t kv_share = 0;
    if (max_models > 1) {
        size_t total = cp.kv_budget_bytes;
        if (total == 0 && (st = kr_server_parse_kv_budget("25%", &total, err)) != KR_OK) goto fail;
        kv_share = total / (size_t)max_models;
        cp.kv_budget_bytes = kv_share;
    }
    if ((st = kr_context_create_ex(model, &cp, s->metrics, &s->ctx, err)) != KR_OK) goto fail;
    if ((st = kr_models_create(s->model_name, model, s->ctx, &s->model_desc, &s->cfg, kv_share,
                               &s->models, err)) != KR_OK)
        goto fail;
    kr_models_set_metrics(s->models, s->metrics);
    if (s->cfg.n_models > 0 || s->cfg.default_model[0]) {
        if ((st = kr_models_apply(s->models, &s->cfg, err)) != KR_OK) goto fail;
        kr_srv_log(s, "serving %d models (default '%s')", 1 + s->cfg.n_models,
                   s->cfg.default_model[0] ? s->cfg.default_model : s->model_name);
    }
    if (!(s->pmetrics = kr_process_metrics_create(s->metrics))) {
        st = kr_error_set(err, KR_ERR_NOMEM, "server: out of memory");
        goto fail;
    }
    if (s->cfg.access_log[0] &&
        (st = kr_access_log_open(s->cfg.access_log, &s->access_log, err)) != KR_OK)
        goto fail;
    s->limits = kr_api_default_limits();
    s->limits.max_paths = s->cfg.max_paths;
    s->limits.max_pred_len = s->cfg.max_pred_len;
    s->limits.max_context = s->cfg.max_context_limit;
    s->limits.max_context_key = "max_context_limit";
    s->limits.max_rows = s->cfg.max_rows;
    s->limits.max_rows_key = "max_rows";
    s->limits.max_horizon = s->cfg.max_horizon;
    s->limits.max_analyze_paths = s->cfg.max_analyze_paths;
    s->limits.max_lookback = s->cfg.max_lookback;
    s->limits.max_calibrate = s->cfg.max_calibrate;
    s->limits.default_norm = !strcmp(s->cfg.norm, "anchored") ? KR_NORM_ANCHORED : KR_NORM_EXACT;
    s->limits.default_norm_refresh = s->cfg.norm_refresh_bars;
    s->limits.max_symbols = s->cfg.max_symbols;
    if (!(s->backtests = kr_bt_jobs_create(s))) {
        st = kr_error_set(err, KR_ERR_NOMEM, "server: out of memory");
        goto fail;
    }
    if ((st = kr_conn_watch_create(s->cfg.read_timeout_s, on_read_cut, s, &s->watch, err)) != KR_OK)
        goto fail;
    /* /ready's probe of the store: within a load balancer's health check timeout (HAProxy's
     * 2 s in deploy/haproxy.cfg), answered for a second. */
    const double probe_s =
        s->cfg.request_timeout_s < KR_STORE_PROBE_S ? s->cfg.request_timeout_s : KR_STORE_PROBE_S;
    if (s->cfg.db[0] &&
        !(s->store_health = kr_store_health_create(s->cfg.db, probe_s, KR_STORE_PROBE_TTL_S))) {
        st = kr_error_set(err, KR_ERR_NOMEM, "server: out of memory");
        goto fail;
    }
    if ((st = start_daemon(s, err)) != KR_OK) goto fail;
    if (s->cfg.n_profiles > 0) kr_http_metrics_profile(s->http, "base", 1);
    kr_srv_check_profile(s);
    kr_conn_watch_set_tick(s->watch, on_watch_tick, s);
    *out = s;
    return KR_OK;
fail:
    kr_server_free(s);
    return st;
}

int kr_server_shadow_planned(const kr_model *model, const kr_server_config *cfg) {
    if (!model || !cfg || !(cfg->drift_sample > 0)) return 0;
    kr_model_info mi;
    kr_model_get_info(model, &mi);
    int weights_quantised = strcmp(mi.quant, "f32") != 0;
    /* Weights quantised on disk have no f32 original to shadow; quantised at load they do. */
    if (weights_quantised && mi.quant_seconds <= 0) return 0;
    return weights_quantised || strcmp(cfg->kv_dtype, "f32") != 0;
}

kr_status kr_server_attach_shadow(kr_server *s, kr_model *f32_model, double sample, kr_error *err) {
    if (!s || kr_server_drift(s) || !s->shadow_kv_budget) {
        kr_model_free(f32_model);
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            s && !kr_server_drift(s)
                                ? "drift: the server planned no shadow (f32 weights and KV, or "
                                  "drift_sample 0)"
                                : "drift: no server, or a shadow is attached already");
    }
    kr_drift *d = NULL;
    kr_status st = kr_drift_create(f32_model, sample, s->shadow_kv_budget, s->metrics, &d, err);
    if (st == KR_OK) atomic_store_explicit(&s->drift, d, memory_order_release);
    return st;
}

kr_status kr_server_reopen_logs(kr_server *s, kr_error *err) {
    return s ? kr_access_log_reopen(s->access_log, err) : KR_OK;
}

kr_drift *kr_server_drift(kr_server *s) {
    return s ? atomic_load_explicit(&s->drift, memory_order_acquire) : NULL;
}

int kr_server_port(const kr_server *s) { return s ? s->port : 0; }
kr_context *kr_server_context(kr_server *s) { return s ? s->ctx : NULL; }
kr_metrics *kr_server_metrics(kr_server *s) { return s ? s->metrics : NULL; }

int kr_server_is_draining(kr_server *s) {
    pthread_mutex_lock(&s->mu);
    int d = s->draining;
    pthread_mutex_unlock(&s->mu);
    return d;
}

int kr_server_is_leaving(kr_server *s) {
    pthread_mutex_lock(&s->mu);
    int d = s->leaving || s->draining;
    pthread_mutex_unlock(&s->mu);
    return d;
}

/* Draining the other models' engines: their accepted requests were waited for above. */
static void drain_one(void *user, kr_served *e, int is_default) {
    (void)user;
    (void)is_default;
    if (!e->main) kr_context_drain(e->ctx, 1.0);
}

void kr_server_drain(kr_server *s, double grace_s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    const double delay_s = s->cfg.drain_delay_s;
    const int announce = !s->leaving && !s->draining && delay_s > 0;
    s->leaving = 1;
    pthread_mutex_unlock(&s->mu);
    if (announce) {
        /* Health checks see 503 now and take this replica out; what they still send in the
         * meantime is served, so the switch loses no request. */
        kr_http_metrics_draining(s->http, 1);
        kr_srv_log(s, "leaving: /ready answers 503, refusing new requests in %.1f s", delay_s);
        struct timespec ts = { (time_t)delay_s, (long)((delay_s - (double)(time_t)delay_s) * 1e9) };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
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
    /* Backtests are offline jobs of minutes: a drain cancels them (their state says so). */
    kr_bt_jobs_cancel_all(s->backtests);
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
    if (s->models) kr_models_each(s->models, drain_one, NULL);

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

kr_status kr_server_reload_models(kr_server *s, const kr_server_config *cfg, kr_error *err) {
    if (!s || !cfg) return kr_error_set(err, KR_ERR_INVALID_ARG, "reload: NULL argument");
    kr_status st = kr_server_config_validate(cfg, err);
    if (st == KR_OK) st = kr_models_apply(s->models, cfg, err);
    int served = 0, loads = 0, unloads = 0;
    kr_models_counts(s->models, &served, &loads, &unloads);
    kr_srv_log(s, "models reloaded%s%s: %d served (%d loads, %d unloads so far)",
               st == KR_OK ? "" : ", stopped: ", st == KR_OK ? "" : err->message, served, loads,
               unloads);
    return st;
}

void kr_server_free(kr_server *s) {
    if (!s) return;
    if (s->daemon) {
        kr_server_drain(s, s->cfg.request_timeout_s);
        MHD_stop_daemon(s->daemon);
    }
    kr_conn_watch_free(s->watch); /* after the daemon: every connection is closed */
    kr_bt_jobs_free(s->backtests); /* before the engine: a worker may still submit to it */
    kr_store_health_free(s->store_health);
    kr_access_log_close(s->access_log);
    kr_process_metrics_free(s->pmetrics);
    kr_models_free(s->models); /* the other models' contexts and weights; not the main one's */
    kr_context_free(s->ctx);
    kr_drift_free(kr_server_drift(s));
    kr_http_metrics_free(s->http);
    kr_metrics_free(s->metrics);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
