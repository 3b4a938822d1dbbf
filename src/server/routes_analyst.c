/*
 * server/routes_analyst — the candle store and the analyst's reports over HTTP (see
 * routes_analyst.h for the routes and how an analysis shares the model with the scheduler).
 *
 * The request bodies are parsed in server/analyst_request, with the field readers and the
 * candle parser of /v1/forecast.
 */
#include "server/routes_analyst.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "analyst/narrative.h"
#include "analyst/text.h"
#include "base/error.h"
#include "base/timeutil.h"

/* How often a streaming connection looks at its socket while the analysis runs, seconds. */
#define POLL_S 0.1
/* SSE comment interval while nothing else is sent (as for streamed forecasts). */
#define KEEPALIVE_S 15.0
#define CANDLES_PREFIX "/v1/candles/"

/* ------------------------------------------------------------------ store access */

/* What the client is told of a candle store's message. The store names its file first
 * ("/srv/kronos/k.db: AAPL 1d: ...", a PostgreSQL URL with its password masked), which tells
 * any client where and how the server keeps its data: every occurrence of that name becomes
 * "candle store" (the access log records that too: it is what the client was told). The
 * full message of a 5xx, the operator's to act on, goes to the server log (log_store_error). */
static void scrub_store_message(const kr_server *s, const char *msg, char *out, size_t cap) {
    char shown[sizeof s->cfg.db];
    kr_store_display_name(s->cfg.db, shown, sizeof shown);
    const size_t sn = strlen(shown);
    size_t o = 0;
    if (cap == 0) return;
    for (const char *p = msg ? msg : ""; *p && o + 1 < cap;) {
        if (sn > 0 && !strncmp(p, shown, sn)) {
            int w = snprintf(out + o, cap - o, "candle store");
            o = w < 0 || (size_t)w >= cap - o ? cap - 1 : o + (size_t)w;
            p += sn;
            continue;
        }
        out[o++] = *p++;
    }
    out[o] = '\0';
}

/* The HTTP status of a store failure that is not the request's fault: 503 (with Retry-After)
 * when a retry can succeed — another writer held the lock past the busy timeout, or the
 * database is down or restarting — else 500. */
static int store_failure_status(kr_status st) {
    return st == KR_ERR_BUSY || st == KR_ERR_UNAVAILABLE ? 503 : 500;
}

/* What the client gets of a store's error: the scrubbed message, or for a database that
 * cannot be reached a fixed text (libpq's words name hosts and socket paths; the log has
 * them). */
static void store_message_for_client(const kr_server *s, kr_status st, const char *msg, char *out,
                                     size_t cap) {
    if (st == KR_ERR_UNAVAILABLE)
        snprintf(out, cap, "the candle store's database cannot be reached; retry later");
    else
        scrub_store_message(s, msg, out, cap);
}

/* A store's error message on the server's side: the 5xx ones (a broken or unreachable
 * store) are the operator's to see, with the path the client no longer gets. */
static void log_store_error(kr_server *s, int status, const char *msg) {
    if (status >= 500) kr_srv_log(s, "candle store error (HTTP %d): %s", status, msg);
}

/* The store for a request: NULL with a reply status when there is none (yet). must_exist: a
 * read of a file that is not there answers "nothing stored" instead of creating it. */
static kr_store *open_store(kr_server *s, int must_exist, int *status, kr_api_error *err) {
    *status = 0;
    if (!s->cfg.db[0]) {
        *status = 503;
        kr_api_error_set(err, 503, NULL, "no candle store: start kronos serve with --db FILE");
        return NULL;
    }
    struct stat sb;
    if (must_exist && !kr_store_is_url(s->cfg.db) && stat(s->cfg.db, &sb) != 0)
        return NULL; /* empty: status stays 0 */
    kr_store *st = NULL;
    kr_error e = { 0 };
    if (kr_store_open(s->cfg.db, &st, &e) != KR_OK) {
        *status = store_failure_status(e.status);
        log_store_error(s, *status, e.message);
        char msg[sizeof e.message];
        store_message_for_client(s, e.status, e.message, msg, sizeof msg);
        /* A database that answers but refuses (a changed password, a dropped database):
         * libpq's words name hosts and socket paths, the operator finds them in the log. */
        if (e.status == KR_ERR_IO && kr_store_is_url(s->cfg.db))
            snprintf(msg, sizeof msg,
                     "the candle store's database refused the connection (the reason is in the "
                     "server log)");
        kr_api_error_set(err, *status, NULL, "%s", msg);
        return NULL;
    }
    return st;
}

/* "AAPL 1d, 1h" style list of a symbol's intervals, or of every stored series. */
static void stored_list(const kr_store_entry *e, int64_t n, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < n && len + 80 < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s %s", i ? ", " : "", e[i].symbol,
                                e[i].interval);
    if (n == 0) snprintf(buf, cap, "none");
}

/* Picks the stored interval for symbol: `want` when given, else the only or the most recently
 * updated one (kr_store_list's order), as `kronos analyze` does. 0 and *out set, or an HTTP
 * status with err filled (field names the symbol's place in the request). */
static int pick_interval(kr_server *s, kr_store *store, const char *symbol, const char *want,
                         const char *field, int not_found_status, char *out, size_t cap,
                         char *market, size_t market_cap, kr_api_error *err) {
    kr_store_entry *e = NULL;
    int64_t n = 0;
    kr_error ke = { 0 };
    if (store && kr_store_list(store, symbol, &e, &n, &ke) != KR_OK) {
        const int code = store_failure_status(ke.status);
        log_store_error(s, code, ke.message);
        char msg[sizeof ke.message];
        store_message_for_client(s, ke.status, ke.message, msg, sizeof msg);
        kr_api_error_set(err, code, NULL, "%s", msg);
        return code;
    }
    char list[512];
    int status = 0;
    if (n == 0) {
        kr_api_error_set(
            err, not_found_status, field,
            "no candles stored for '%s' (add some with POST /v1/candles/%s?interval=1d "
            "or kronos ingest)",
            symbol, symbol);
        status = not_found_status;
    } else if (want && want[0]) {
        const kr_store_entry *hit = kr_store_find_entry(e, n, NULL, want);
        if (!hit) {
            stored_list(e, n, list, sizeof list);
            kr_api_error_set(err, not_found_status, field, "'%s' has no '%s' candles; stored: %s",
                             symbol, want, list);
            status = not_found_status;
        } else {
            snprintf(out, cap, "%s", hit->interval);
        }
    } else {
        snprintf(out, cap, "%s", e[0].interval);
    }
    if (market) snprintf(market, market_cap, "%s", n > 0 ? e[0].market : "");
    free(e);
    return status;
}

/* ------------------------------------------------------------------ replies */

static enum MHD_Result reply_api_error(struct MHD_Connection *mc, kr_conn *c,
                                       const kr_api_error *e) {
    int status = e->status ? e->status : 400;
    /* A configured store's 503 (open_store, pick_interval) passes: say when to retry. */
    if (status == 503 && c->srv->cfg.db[0]) {
        snprintf(c->error, sizeof c->error, "%s", e->message);
        char *body = kr_api_error_json(503, e->message, NULL);
        return kr_srv_reply(mc, c, 503, "application/json", body, body ? strlen(body) : 0,
                            MHD_HTTP_HEADER_RETRY_AFTER, "1");
    }
    return kr_srv_reply_error(mc, c, status, e->message, e->field[0] ? e->field : NULL);
}

/* A candle store's error: 503 + Retry-After when another writer held the lock past the busy
 * timeout (nothing was written; a retry succeeds) or the database cannot be reached, `bad`
 * (400 / 404) for what the request got wrong, 500 for the rest. */
static enum MHD_Result reply_store_error(struct MHD_Connection *mc, kr_conn *c, kr_status st,
                                         const char *message, int bad, const char *field) {
    char msg[sizeof((kr_error *)0)->message];
    store_message_for_client(c->srv, st, message, msg, sizeof msg);
    if (store_failure_status(st) == 503) {
        log_store_error(c->srv, 503, message);
        snprintf(c->error, sizeof c->error, "%s", msg);
        char *body = kr_api_error_json(503, msg, NULL);
        return kr_srv_reply(mc, c, 503, "application/json", body, body ? strlen(body) : 0,
                            MHD_HTTP_HEADER_RETRY_AFTER, "1");
    }
    int code = st == KR_ERR_INVALID_ARG || st == KR_ERR_FORMAT ? bad : 500;
    log_store_error(c->srv, code, message);
    return kr_srv_reply_error(mc, c, code, msg, code == 400 ? field : NULL);
}

static enum MHD_Result reply_json(struct MHD_Connection *mc, kr_conn *c, char *body) {
    if (!body) return kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
    return kr_srv_reply(mc, c, 200, "application/json", body, strlen(body), NULL, NULL);
}

/* Shortest text that reads back as exactly x (x is finite: stored candles are validated). */
static void append_num(kr_sb *sb, double x) {
    char b[40];
    snprintf(b, sizeof b, "%.15g", x);
    if (strtod(b, NULL) != x) snprintf(b, sizeof b, "%.17g", x);
    kr_sb_append(sb, b);
}

static void format_ts(int64_t t, int daily, char *buf, int cap) {
    kr_format_timestamp(t, daily && t % 86400 == 0, buf, cap);
}

/* ------------------------------------------------------------------ GET /v1/symbols */

enum MHD_Result kr_handle_symbols(struct MHD_Connection *mc, kr_conn *c) {
    kr_api_error aerr = { 0 };
    int status;
    kr_store *store = open_store(c->srv, 1, &status, &aerr);
    if (status) return reply_api_error(mc, c, &aerr);
    kr_store_entry *e = NULL;
    int64_t n = 0;
    kr_error ke = { 0 };
    if (store && kr_store_list(store, NULL, &e, &n, &ke) != KR_OK) {
        kr_store_close(store);
        return reply_store_error(mc, c, ke.status, ke.message, 500, NULL);
    }
    kr_store_close(store);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    char a[32], b[32];
    for (int64_t i = 0; i < n; i++) {
        int daily = kr_store_interval_seconds(e[i].interval) >= 86400;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "symbol", e[i].symbol);
        cJSON_AddStringToObject(o, "interval", e[i].interval);
        cJSON_AddNumberToObject(o, "rows", (double)e[i].rows);
        format_ts(e[i].first_ts, daily, a, sizeof a);
        format_ts(e[i].last_ts, daily, b, sizeof b);
        cJSON_AddStringToObject(o, "first_timestamp", a);
        cJSON_AddStringToObject(o, "last_timestamp", b);
        cJSON_AddNumberToObject(o, "updated_at", (double)e[i].updated_at);
        cJSON_AddItemToArray(data, o);
    }
    free(e);
    char *body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return reply_json(mc, c, body);
}

/* ------------------------------------------------------------------ /v1/candles/{symbol} */

/* The symbol from the path; 0, or 400 with err set. */
static int path_symbol(const char *url, char *out, size_t cap, kr_api_error *err) {
    const char *sym = url + strlen(CANDLES_PREFIX);
    return kr_api_store_name(sym, "symbol", 0, out, cap, err) == KR_OK ? 0 : 400;
}

/* An optional name from the query string; 0, or 400 with err set. */
static int query_interval(struct MHD_Connection *mc, char *out, size_t cap, kr_api_error *err) {
    const char *v = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "interval");
    out[0] = '\0';
    if (!v) return 0;
    return kr_api_store_name(v, "interval", 1, out, cap, err) == KR_OK ? 0 : 400;
}

/* {"object":"candles","symbol","interval","rows","columns":[...],"candles":[[ts,o,h,l,c,v,a]]}:
 * rows of arrays, a layout /v1/forecast and POST /v1/candles take, so what is read can be
 * posted back ({"candles", "columns"}). Volume and amount appear only when stored. */
static char *candles_json(const char *symbol, const char *interval, const kr_candles *cs) {
    static const char *const k_cols[7] = { "timestamps", "open",   "high",  "low",
                                           "close",      "volume", "amount" };
    int ncols = 5 + (cs->has_volume ? 1 + (cs->has_amount ? 1 : 0) : 0);
    kr_sb sb = { 0 };
    kr_sb_appendf(&sb,
                  "{\"object\":\"candles\",\"symbol\":\"%s\",\"interval\":\"%s\",\"rows\":%lld,"
                  "\"columns\":[",
                  symbol, interval, (long long)cs->n);
    for (int k = 0; k < ncols; k++) kr_sb_appendf(&sb, "%s\"%s\"", k ? "," : "", k_cols[k]);
    kr_sb_append(&sb, "],\"candles\":[");
    char ts[32];
    for (int64_t i = 0; i < cs->n; i++) {
        kr_format_timestamp(cs->timestamps[i], cs->date_only, ts, sizeof ts);
        kr_sb_appendf(&sb, "%s[\"%s\"", i ? "," : "", ts);
        for (int k = 0; k < ncols - 1; k++) {
            kr_sb_append(&sb, ",");
            append_num(&sb, cs->values[i * 6 + k]);
        }
        kr_sb_append(&sb, "]");
    }
    kr_sb_append(&sb, "]}");
    char *out = NULL;
    kr_error e;
    if (kr_sb_finish(&sb, &out, &e) != KR_OK) return NULL;
    return out;
}

enum MHD_Result kr_handle_candles_get(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    kr_api_error aerr = { 0 };
    char symbol[KR_STORE_NAME_MAX + 1], want[KR_STORE_NAME_MAX + 1],
        interval[KR_STORE_NAME_MAX + 1];
    int limit = 0;
    if (path_symbol(url, symbol, sizeof symbol, &aerr) ||
        kr_api_candles_query(MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "interval"),
                             MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "limit"), want,
                             sizeof want, &limit, &aerr) != KR_OK)
        return reply_api_error(mc, c, &aerr);
    int status;
    kr_store *store = open_store(c->srv, 1, &status, &aerr);
    if (status) return reply_api_error(mc, c, &aerr);
    if (pick_interval(c->srv, store, symbol, want, NULL, 404, interval, sizeof interval, NULL, 0,
                      &aerr)) {
        kr_store_close(store);
        return reply_api_error(mc, c, &aerr);
    }
    kr_candles *cs = NULL;
    kr_error ke = { 0 };
    kr_status st = kr_store_read(store, symbol, interval, limit, &cs, &ke);
    kr_store_close(store);
    if (st != KR_OK) return reply_store_error(mc, c, st, ke.message, 404, NULL);
    char *body = candles_json(symbol, interval, cs);
    kr_candles_free(cs);
    return reply_json(mc, c, body);
}

/* text/csv (or application/csv) bodies go to the CSV reader; anything else is JSON. */
static int body_is_csv(struct MHD_Connection *mc) {
    const char *ct = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    return ct && (!strncasecmp(ct, "text/csv", 8) || !strncasecmp(ct, "application/csv", 15));
}

enum MHD_Result kr_handle_candles_post(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    kr_api_error aerr = { 0 };
    char symbol[KR_STORE_NAME_MAX + 1], interval[KR_STORE_NAME_MAX + 1];
    if (path_symbol(url, symbol, sizeof symbol, &aerr) ||
        query_interval(mc, interval, sizeof interval, &aerr))
        return reply_api_error(mc, c, &aerr);
    if (!interval[0])
        return kr_srv_reply_error(mc, c, 400,
                                  "interval: required as a query parameter "
                                  "(?interval=1d, 5m, 1h, ...)",
                                  "interval");
    kr_candles *cs = NULL;
    if (kr_api_candles_parse(c->body, c->len, body_is_csv(mc), &c->srv->limits, &cs, &aerr) !=
        KR_OK)
        return reply_api_error(mc, c, &aerr);
    kr_srv_drop_body(c); /* parsed: its budget goes back before a wait for the write lock */
    int status;
    kr_store *store = open_store(c->srv, 0, &status, &aerr);
    if (!store) {
        kr_candles_free(cs);
        return reply_api_error(mc, c, &aerr);
    }
    /* The store validates again and writes in one transaction: all rows or none. */
    kr_error ke = { 0 };
    kr_store_upsert_stats counts = { 0 };
    kr_status st = kr_store_upsert_ex(store, symbol, interval, cs, &counts, &ke);
    int64_t written = cs->n;
    kr_candles_free(cs);
    kr_store_entry *e = NULL;
    int64_t n = 0;
    if (st == KR_OK) st = kr_store_list(store, symbol, &e, &n, &ke);
    kr_store_close(store);
    if (st != KR_OK) {
        free(e);
        return reply_store_error(mc, c, st, ke.message, 400, "candles");
    }
    const kr_store_entry *mine = kr_store_find_entry(e, n, NULL, interval);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "candles.upsert");
    /* The series' stored spelling: "aapl" joins AAPL, "5min" joins 5m. */
    cJSON_AddStringToObject(root, "symbol", mine ? mine->symbol : symbol);
    cJSON_AddStringToObject(root, "interval", mine ? mine->interval : interval);
    cJSON_AddNumberToObject(root, "written", (double)written);
    cJSON_AddNumberToObject(root, "new", (double)counts.added);
    cJSON_AddNumberToObject(root, "replaced", (double)counts.replaced);
    cJSON_AddNumberToObject(root, "unchanged", (double)counts.unchanged);
    if (mine) {
        int daily = kr_store_interval_seconds(interval) >= 86400;
        char a[32], b[32];
        format_ts(mine->first_ts, daily, a, sizeof a);
        format_ts(mine->last_ts, daily, b, sizeof b);
        cJSON_AddNumberToObject(root, "rows", (double)mine->rows);
        cJSON_AddStringToObject(root, "first_timestamp", a);
        cJSON_AddStringToObject(root, "last_timestamp", b);
    }
    free(e);
    char *body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return reply_json(mc, c, body);
}

/* ------------------------------------------------------------------ DELETE /v1/candles */

/* {"object":"candles.delete","symbol","interval","deleted","first_deleted","last_deleted",
 * "rows","first_timestamp","last_timestamp"}: what went and what is left ("rows": 0 and no
 * stamps when the series is gone). */
static char *delete_json(const kr_store_delete_stats *d) {
    const int daily = kr_store_interval_seconds(d->interval) >= 86400;
    char a[32], b[32];
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "candles.delete");
    cJSON_AddStringToObject(root, "symbol", d->symbol);
    cJSON_AddStringToObject(root, "interval", d->interval);
    cJSON_AddNumberToObject(root, "deleted", (double)d->deleted);
    if (d->deleted > 0) {
        format_ts(d->first_deleted, daily, a, sizeof a);
        format_ts(d->last_deleted, daily, b, sizeof b);
        cJSON_AddStringToObject(root, "first_deleted", a);
        cJSON_AddStringToObject(root, "last_deleted", b);
    }
    cJSON_AddNumberToObject(root, "rows", (double)d->rows_left);
    if (d->rows_left > 0) {
        format_ts(d->first_left, daily, a, sizeof a);
        format_ts(d->last_left, daily, b, sizeof b);
        cJSON_AddStringToObject(root, "first_timestamp", a);
        cJSON_AddStringToObject(root, "last_timestamp", b);
    }
    char *body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return body;
}

enum MHD_Result kr_handle_candles_delete(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    kr_api_error aerr = { 0 };
    char symbol[KR_STORE_NAME_MAX + 1], interval[KR_STORE_NAME_MAX + 1];
    if (path_symbol(url, symbol, sizeof symbol, &aerr) ||
        query_interval(mc, interval, sizeof interval, &aerr))
        return reply_api_error(mc, c, &aerr);
    if (!interval[0])
        return kr_srv_reply_error(mc, c, 400,
                                  "interval: required as a query parameter "
                                  "(?interval=1d, 5m, 1h, ...): a delete names one series",
                                  "interval");
    const char *from = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "from");
    const char *to = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "to");
    int64_t from_ts, to_ts;
    kr_error ke = { 0 };
    if (kr_store_parse_range(from, to, "from", "to", &from_ts, &to_ts, &ke) != KR_OK) {
        char msg[sizeof ke.message];
        kr_json_sanitize(ke.message, msg, sizeof msg);
        /* The message starts with the parameter it is about. */
        const char *field = !strncmp(ke.message, "to:", 3) ? "to" : "from";
        return kr_srv_reply_error(mc, c, 400, msg, field);
    }
    int status;
    kr_store *store = open_store(c->srv, 1, &status, &aerr);
    if (status) return reply_api_error(mc, c, &aerr);
    kr_store_delete_stats d = { 0 };
    kr_status st =
        store ? kr_store_delete(store, symbol, interval, from_ts, to_ts, &d, &ke) : KR_OK;
    kr_store_close(store);
    if (st != KR_OK) return reply_store_error(mc, c, st, ke.message, 400, "interval");
    if (!d.symbol[0])
        return kr_srv_reply_error(mc, c, 404,
                                  "no such series: nothing is stored under this symbol and "
                                  "interval (GET /v1/symbols lists what is); nothing was deleted",
                                  NULL);
    return reply_json(mc, c, delete_json(&d));
}

/* ------------------------------------------------------------------ analyses */

/* One analysis request from parse to answer. The plain path runs it on the connection's
 * thread; the streamed one on a worker thread that the connection's content reader waits for
 * (and joins: the worker borrows the model, which must not outlive the connection). */
typedef struct analyze_task {
    kr_server *srv;
    kr_api_analyze_request req;
    kr_candles *cs[KR_API_MAX_SYMBOLS]; /* histories read from the store (owned) */
    char intervals[KR_API_MAX_SYMBOLS][KR_STORE_NAME_MAX + 1];
    char want[KR_API_MAX_SYMBOLS][KR_STORE_NAME_MAX + 1]; /* "all": each series' interval */
    char names[KR_API_MAX_SYMBOLS][KR_STORE_NAME_MAX + 1]; /* stored spellings */
    char markets[KR_API_MAX_SYMBOLS][KR_STORE_MARKET_MAX];
    char errors[KR_API_MAX_SYMBOLS][512]; /* per-symbol load failures (batch) */
    kr_analyze_item items[KR_API_MAX_SYMBOLS];
    /* outcome */
    int status; /* HTTP status */
    int retry_after; /* 429, 503: tell the client when to retry */
    char *body; /* report text or error JSON (owned) */
    const char *content_type;
    /* streaming: events for the connection, guarded by mu */
    int streaming;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    kr_sse_buf sse;
    int step, steps; /* progress numbering, 1..steps */
    int done; /* final event queued */
    int thread_started, joined;
    pthread_t thread;
    int fd; /* the client's socket, for disconnects */
    atomic_int abandoned; /* the client has gone: the engine cancels the forecasts */
    double last_write;
    double started; /* kr_now_seconds() when the analysis began: the request deadline's origin */
} analyze_task;

static analyze_task *task_new(kr_server *s) {
    analyze_task *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->srv = s;
    t->fd = -1;
    t->started = kr_now_seconds();
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    return t;
}

static void task_join(analyze_task *t) {
    if (t->thread_started && !t->joined) {
        pthread_join(t->thread, NULL);
        t->joined = 1;
    }
}

static void task_free(analyze_task *t) {
    if (!t) return;
    task_join(t);
    for (int i = 0; i < KR_API_MAX_SYMBOLS; i++) kr_candles_free(t->cs[i]);
    kr_api_analyze_request_free(&t->req);
    free(t->body);
    kr_sse_free(&t->sse);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* Queues one SSE progress event (streaming only):
 * {"phase": "load|forecast|calibrate|render", "step": k, "steps": N, "symbol"?, "message"}. */
static void emit(analyze_task *t, const char *phase, const char *symbol, const char *message) {
    if (!t->streaming) return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "phase", phase);
    pthread_mutex_lock(&t->mu);
    cJSON_AddNumberToObject(o, "step", ++t->step);
    cJSON_AddNumberToObject(o, "steps", t->steps);
    if (symbol) cJSON_AddStringToObject(o, "symbol", symbol);
    cJSON_AddStringToObject(o, "message", message);
    char *data = cJSON_PrintUnformatted(o);
    if (data) kr_sse_event(&t->sse, "progress", data);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    free(data);
    cJSON_Delete(o);
}

static void on_analyze_progress(void *user, int step, int n_steps, const char *what) {
    analyze_task *t = user;
    if (step >= n_steps) return; /* "done": the render phase follows */
    emit(t, step == 0 ? "forecast" : "calibrate", step == 0 ? NULL : t->items[step - 1].symbol,
         what);
}

/* Polled by the engine thread once per step while the analysis' forecasts are queued or
 * running: a client that has gone cancels them. */
static int task_should_abort(void *user) {
    analyze_task *t = user;
    if (atomic_load(&t->abandoned)) return 1;
    if (kr_srv_client_gone(t->fd)) {
        atomic_store(&t->abandoned, 1);
        return 1;
    }
    return 0;
}

/* The analysis' error answer (the plain body, or a stream's "error" event). Messages that may
 * carry a store's words lose its path (scrub_store_message); such a 5xx is logged whole. */
static void task_fail(analyze_task *t, int status, const char *message, const char *field) {
    char msg[1024];
    scrub_store_message(t->srv, message, msg, sizeof msg);
    if (status >= 500 && strcmp(msg, message) != 0) log_store_error(t->srv, status, message);
    t->status = status;
    if (status == 503) t->retry_after = 1; /* draining, overload, the store: all pass */
    free(t->body);
    t->body = kr_api_error_json(status, msg, field && field[0] ? field : NULL);
    t->content_type = "application/json";
}

/* A batch where no symbol could be analysed is the request's fault at symbols[0] (or "all"):
 * kr_analyze then reports the first symbol's failure, and every symbol failed, so index 0.
 * The error names that field and its message starts with it, as every field error does. */
static void task_fail_batch(analyze_task *t, int status, const char *message) {
    const char *field = t->req.all ? "all" : "symbols[0]";
    size_t fn = strlen(field);
    char msg[1024];
    if (!strncmp(message, field, fn) && message[fn] == ':')
        snprintf(msg, sizeof msg, "%s", message);
    else
        snprintf(msg, sizeof msg, "%s: %s", field, message);
    task_fail(t, status, msg, field);
}

/* Reads the histories (or takes the body's candles), runs the analyst, renders the report.
 * Leaves the outcome in t->status / body / content_type. */
static void task_run(analyze_task *t) {
    kr_server *s = t->srv;
    kr_api_analyze_request *r = &t->req;
    kr_api_error aerr = { 0 };
    kr_error err = { 0 };
    char field[40], msg[256];
    if (r->candles) {
        snprintf(t->intervals[0], sizeof t->intervals[0], "%s", r->interval);
        t->items[0] = (kr_analyze_item){ r->symbols[0], t->intervals[0], r->candles, NULL,
                                         r->market[0] ? r->market : NULL };
    } else {
        int status;
        kr_store *store = open_store(s, 1, &status, &aerr);
        if (status) {
            task_fail(t, status, aerr.message, NULL);
            return;
        }
        if (r->all) {
            /* Every stored series: each symbol with each of its intervals. */
            kr_store_entry *e = NULL;
            int64_t n = 0;
            if (store && kr_store_list(store, NULL, &e, &n, &err) != KR_OK) {
                kr_store_close(store);
                const int code = store_failure_status(err.status);
                log_store_error(s, code, err.message);
                store_message_for_client(s, err.status, err.message, msg, sizeof msg);
                task_fail(t, code, msg, NULL);
                return;
            }
            /* The same cap as a list of symbols (the config's max_symbols, itself at most the
             * compiled KR_API_MAX_SYMBOLS): more stored series than that is refused, naming
             * the limit, never cut silently to the first ones. */
            int cap = s->limits.max_symbols;
            if (cap < 1 || cap > KR_API_MAX_SYMBOLS) cap = KR_API_MAX_SYMBOLS;
            if (n > cap) {
                free(e);
                kr_store_close(store);
                snprintf(msg, sizeof msg,
                         "all: %lld series are stored, more than max_symbols (%d) one analysis "
                         "takes; name up to %d in symbols instead",
                         (long long)n, cap, cap);
                task_fail(t, 400, msg, "all");
                return;
            }
            r->n = 0;
            for (int64_t i = 0; i < n; i++, r->n++) {
                snprintf(r->symbols[r->n], sizeof r->symbols[0], "%s", e[i].symbol);
                snprintf(t->want[r->n], sizeof t->want[0], "%s", e[i].interval);
            }
            free(e);
            if (r->n == 0) {
                kr_store_close(store);
                task_fail(t, 400, "all: nothing is stored (add candles with POST /v1/candles)",
                          "all");
                return;
            }
            pthread_mutex_lock(&t->mu);
            t->steps = r->n + 2 + (r->params.calibrate > 0 ? r->n : 0);
            pthread_mutex_unlock(&t->mu);
        }
        const int64_t need = kr_analyze_min_rows(&r->params);
        for (int i = 0; i < r->n; i++) {
            const char *sym = r->symbols[i];
            /* "all" names no symbols: its series' errors name the field that asked for them. */
            if (r->batch && r->all)
                snprintf(field, sizeof field, "all");
            else if (r->batch)
                snprintf(field, sizeof field, "symbols[%d]", i);
            else
                snprintf(field, sizeof field, "symbol");
            snprintf(msg, sizeof msg, "reading %s", sym);
            emit(t, "load", sym, msg);
            /* A batch reports a symbol it cannot load beside the others' reports; a single
             * analysis answers with the error. */
            const char *want = t->want[i][0] ? t->want[i] : r->interval;
            if (pick_interval(s, store, sym, want, field, 400, t->intervals[i],
                              sizeof t->intervals[i], t->markets[i], sizeof t->markets[i], &aerr)) {
                if (!r->batch) {
                    kr_store_close(store);
                    task_fail(t, aerr.status, aerr.message, aerr.field);
                    return;
                }
                snprintf(t->errors[i], sizeof t->errors[i], "%s", aerr.message);
                t->items[i] = (kr_analyze_item){ sym, want ? want : "", NULL, t->errors[i], NULL };
                continue;
            }
            /* Symbols ignore case: the report carries the stored spelling. */
            if (kr_store_canonical_symbol(store, sym, t->names[i], sizeof t->names[i], &err) !=
                    KR_OK ||
                kr_store_read(store, sym, t->intervals[i], KR_API_CANDLES_MAX, &t->cs[i], &err) !=
                    KR_OK) {
                if (!r->batch) {
                    kr_store_close(store);
                    const int code = store_failure_status(err.status);
                    log_store_error(s, code, err.message);
                    store_message_for_client(s, err.status, err.message, msg, sizeof msg);
                    task_fail(t, code, msg, NULL);
                    return;
                }
                store_message_for_client(s, err.status, err.message, t->errors[i],
                                         sizeof t->errors[i]);
                t->items[i] = (kr_analyze_item){ sym, t->intervals[i], NULL, t->errors[i], NULL };
                continue;
            }
            if (t->cs[i]->n < need) {
                snprintf(msg, sizeof msg,
                         "%s: %s %s has %lld rows, at least %lld needed for "
                         "horizon %d%s",
                         field, t->names[i], t->intervals[i], (long long)t->cs[i]->n,
                         (long long)need, r->params.horizon,
                         r->params.calibrate ? " and calibrate" : "");
                if (!r->batch) {
                    kr_store_close(store);
                    task_fail(t, 400, msg, field);
                    return;
                }
                snprintf(t->errors[i], sizeof t->errors[i], "%s", msg);
                t->items[i] =
                    (kr_analyze_item){ t->names[i], t->intervals[i], NULL, t->errors[i], NULL };
                continue;
            }
            const char *market = r->market[0] ? r->market : t->markets[i];
            t->items[i] = (kr_analyze_item){ t->names[i], t->intervals[i], t->cs[i], NULL,
                                             market[0] ? market : NULL };
        }
        kr_store_close(store);
    }

    kr_analyze_params p = r->params;
    p.model_name = s->model_name;
    p.predictor_dir = s->predictor_shown;
    p.tokenizer_dir = s->tokenizer_shown;
    /* A batch of symbols is offline-style scoring: static batches (the report says which). */
    if (r->batch) p.static_batch_rows = s->cfg.batch_size;
    if (t->streaming) {
        p.progress = on_analyze_progress;
        p.progress_user = t;
    }
    /* The forecasts join the engine's continuous batch like /v1/forecast requests, at the
     * analysis priority, within the request timeout, cancelled when the client goes. */
    kr_request_params rp = kr_request_default_params();
    rp.deadline_s = s->cfg.request_timeout_s;
    rp.priority = s->cfg.analysis_priority;
    rp.wait_for_room = 0; /* a full queue is a 429, not a wait */
    rp.should_abort = task_should_abort;
    rp.abort_user = t;
    p.request = &rp;
    kr_report_set *set = NULL;
    kr_status st = kr_analyze(s->ctx, t->items, r->n, &p, &set, &err);
    if (st != KR_OK) {
        int code = kr_api_http_status(st);
        if (st == KR_ERR_BUSY && kr_server_is_draining(s)) code = 503;
        if (st == KR_ERR_BUSY) t->retry_after = 1;
        if (code == 429) kr_http_metrics_reject(s->http, "busy");
        /* Not the deadline, the client or the engine's capacity: every symbol failed. */
        if (r->batch && !kr_analyst_fatal(st) && code < 500)
            task_fail_batch(t, code, err.message);
        else
            task_fail(t, code, err.message, NULL);
        return;
    }
    /* The optional prose (server llm_url): its failure is recorded in the report, never an
     * error of the analysis (analyst/narrative.h). */
    kr_narrative **narrs = NULL;
    int n_narrs = set->n;
    if (r->narrative) {
        emit(t, "narrative", NULL, "asking the language model for the narrative");
        kr_narrative_params np = kr_narrative_default_params();
        np.url = s->cfg.llm_url;
        if (s->cfg.llm_model[0]) np.model = s->cfg.llm_model;
        np.timeout_s = s->cfg.llm_timeout_s;
        /* The request deadline covers the narrative too: the model gets what the analysis
         * left of it (a report without narrative, saying why, beats a 504 or a late answer),
         * and a client that leaves stops the wait. */
        if (s->cfg.request_timeout_s > 0) {
            double left = s->cfg.request_timeout_s - (kr_now_seconds() - t->started);
            np.budget_s = left > 0 ? left : 1e-9;
        }
        np.should_abort = task_should_abort;
        np.abort_user = t;
        if (kr_narrative_attach_all(set, &np, &narrs, &err) != KR_OK) {
            kr_report_set_free(set);
            task_fail(t, 500, err.message, NULL);
            return;
        }
    }
    emit(t, "render", NULL,
         r->format == KR_FORMAT_JSON ? "writing the JSON report"
         : r->format == KR_FORMAT_MD ? "writing the Markdown report"
                                     : "writing the HTML report");
    char *text = NULL;
    st = kr_render(set, r->format, &text, &err);
    kr_report_set_free(set);
    kr_narrative_free_all(narrs, n_narrs);
    if (st != KR_OK) {
        task_fail(t, 500, err.message, NULL);
        return;
    }
    /* The renderer indents for people reading files; over HTTP compact text is the norm
     * (and a streamed result then fits one "data:" line). */
    if (r->format == KR_FORMAT_JSON) cJSON_Minify(text);
    t->status = 200;
    t->body = text;
    t->content_type = r->format == KR_FORMAT_JSON ? "application/json"
                      : r->format == KR_FORMAT_MD ? "text/markdown; charset=utf-8"
                                                  : "text/html; charset=utf-8";
}

/* The streamed answer's last event: "result" with the JSON report (Markdown and HTML come
 * wrapped as {"format", "content_type", "content"}), or "error" with the error body. */
static void *task_worker(void *arg) {
    analyze_task *t = arg;
    task_run(t);
    char *data = NULL;
    const char *event = t->status == 200 ? "result" : "error";
    if (t->status == 200 && t->req.format != KR_FORMAT_JSON) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "format", t->req.format == KR_FORMAT_MD ? "md" : "html");
        cJSON_AddStringToObject(o, "content_type", t->content_type);
        cJSON_AddStringToObject(o, "content", t->body ? t->body : "");
        data = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
    }
    pthread_mutex_lock(&t->mu);
    const char *payload = data ? data : t->body;
    kr_sse_event(&t->sse, payload ? event : "error",
                 payload ? payload : "{\"error\":{\"code\":503,\"message\":\"out of memory\"}}");
    t->done = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    free(data);
    return NULL;
}

/* libmicrohttpd's content reader for a streamed analysis, on the connection's thread. It
 * joins the worker before ending the stream, so by the time the connection completes (and
 * the server may drain and free the model) no analysis is running for it. */
static ssize_t task_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    analyze_task *t = cls;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        size_t n = kr_sse_read(&t->sse, buf, max);
        if (n > 0) {
            t->last_write = kr_now_seconds();
            pthread_mutex_unlock(&t->mu);
            return (ssize_t)n;
        }
        if (t->done) {
            pthread_mutex_unlock(&t->mu);
            task_join(t);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += (long)(POLL_S * 1e9);
        if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&t->cv, &t->mu, &dl);
        if (kr_sse_pending(&t->sse) || t->done) continue;
        if (kr_srv_client_gone(t->fd)) {
            /* The engine cancels the forecasts at its next step; then drop the stream. */
            atomic_store(&t->abandoned, 1);
            pthread_mutex_unlock(&t->mu);
            task_join(t);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (kr_now_seconds() - t->last_write > KEEPALIVE_S) kr_sse_comment(&t->sse, "keep-alive");
    }
}

static void task_release(void *cls) { task_free(cls); }

static enum MHD_Result start_stream(struct MHD_Connection *mc, kr_conn *c, analyze_task *t) {
    const kr_api_analyze_request *r = &t->req;
    t->streaming = 1;
    t->fd = c->fd;
    t->last_write = kr_now_seconds();
    t->steps = (r->candles ? 0 : r->n) + 1 + (r->params.calibrate > 0 ? r->n : 0) + 1 +
               (r->narrative ? 1 : 0);
    if (pthread_create(&t->thread, NULL, task_worker, t) != 0) {
        task_free(t);
        return kr_srv_reply_error(mc, c, 503, "cannot start the analysis thread", NULL);
    }
    t->thread_started = 1;
    /* The response owns t from here: task_release frees it (joining the worker) when the
     * response is gone, or now if it cannot be queued. */
    return kr_srv_stream(mc, c, task_reader, t, task_release);
}

static enum MHD_Result handle_analyze(struct MHD_Connection *mc, kr_conn *c, int batch) {
    kr_server *s = c->srv;
    analyze_task *t = task_new(s);
    if (!t) return kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
    kr_api_error aerr;
    if (kr_api_analyze_parse(c->body, c->len, batch, &s->limits, &t->req, &aerr) != KR_OK) {
        task_free(t);
        return reply_api_error(mc, c, &aerr);
    }
    kr_srv_drop_body(c);
    if (t->req.narrative && !s->cfg.llm_url[0]) {
        task_free(t);
        return kr_srv_reply_error(mc, c, 400,
                                  "this server has no language model for narratives (set "
                                  "llm_url in its config)",
                                  "narrative");
    }

    /* Counted like a forecast (server_internal.h: c->counted, released when the connection
     * completes), under the lock drain takes, so a drain waits for the analysis. */
    pthread_mutex_lock(&s->mu);
    int draining = s->draining;
    if (!draining) s->active_jobs++;
    pthread_mutex_unlock(&s->mu);
    if (draining) {
        task_free(t);
        kr_http_metrics_reject(s->http, "draining");
        return kr_srv_reply_error(mc, c, 503, "the server is shutting down", NULL);
    }
    c->counted = 1;

    t->fd = c->fd;
    if (t->req.stream) return start_stream(mc, c, t);
    task_run(t);
    char *body = t->body;
    t->body = NULL;
    enum MHD_Result ok = body ? kr_srv_reply(mc, c, t->status, t->content_type, body, strlen(body),
                                             t->retry_after ? MHD_HTTP_HEADER_RETRY_AFTER : NULL,
                                             t->retry_after ? "1" : NULL)
                              : kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
    task_free(t);
    return ok;
}

enum MHD_Result kr_handle_analyze(struct MHD_Connection *mc, kr_conn *c) {
    return handle_analyze(mc, c, 0);
}

enum MHD_Result kr_handle_analyze_batch(struct MHD_Connection *mc, kr_conn *c) {
    return handle_analyze(mc, c, 1);
}
