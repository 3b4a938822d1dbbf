/*
 * server/store_access — a request's way to the candle store, shared by the store routes
 * (routes_store.c) and the analyses of stored symbols (routes_analyst.c): opening cfg.db for
 * one request, picking a symbol's interval, and turning the store's errors into what the
 * client is told (scrubbed of the store's name) and what the operator's log gets.
 */
#include "server/store_access.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kronos/util.h"

/* What the client is told of a candle store's message. The store names its file first
 * ("/srv/kronos/k.db: AAPL 1d: ...", a PostgreSQL URL with its password masked), which tells
 * any client where and how the server keeps its data: every occurrence of that name becomes
 * "candle store" (the access log records that too: it is what the client was told). The
 * full message of a 5xx, the operator's to act on, goes to the server log (kr_store_access_log_error). */
void kr_store_access_scrub(const kr_server *s, const char *msg, char *out, size_t cap) {
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
 * when a retry can succeed — another writer held the lock past the busy timeout, the
 * database is down or restarting, or a statement ran past the statement timeout — else 500. */
int kr_store_access_failure_status(kr_status st) {
    return st == KR_ERR_BUSY || st == KR_ERR_UNAVAILABLE || st == KR_ERR_TIMEOUT ? 503 : 500;
}

/* What the client gets of a store's error: the scrubbed message, or for a database that
 * cannot be reached a fixed text (libpq's words name hosts and socket paths; the log has
 * them). */
void kr_store_access_client_message(const kr_server *s, kr_status st, const char *msg, char *out,
                                    size_t cap) {
    if (st == KR_ERR_UNAVAILABLE)
        snprintf(out, cap, "the candle store's database cannot be reached; retry later");
    else if (st == KR_ERR_TIMEOUT)
        snprintf(out, cap, "the candle store's database did not answer in time; retry later");
    else
        kr_store_access_scrub(s, msg, out, cap);
}

/* A store's error message on the server's side: the 5xx ones (a broken or unreachable
 * store) are the operator's to see, with the path the client no longer gets. */
void kr_store_access_log_error(kr_server *s, int status, const char *msg) {
    if (status >= 500) kr_srv_log(s, "candle store error (HTTP %d): %s", status, msg);
}

/* The store for a request: NULL with a reply status when there is none (yet). must_exist: a
 * read of a file that is not there answers "nothing stored" instead of creating it. */
kr_store *kr_store_access_open(kr_server *s, int must_exist, int *status, kr_api_error *err) {
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
    /* Every call on the handle, the open included, ends by the request's deadline: a database
     * that stops answering (frozen, partitioned) costs the request its timeout, a 503. */
    const double deadline = kr_now_seconds() + s->cfg.request_timeout_s;
    if (kr_store_open_until(s->cfg.db, 0, deadline, &st, &e) != KR_OK) {
        *status = kr_store_access_failure_status(e.status);
        kr_store_access_log_error(s, *status, e.message);
        char msg[sizeof e.message];
        kr_store_access_client_message(s, e.status, e.message, msg, sizeof msg);
        /* A database that answers but refuses (a changed password, a dropped database):
         * libpq's words name hosts and socket paths, the operator finds them in the log. */
        if (e.status == KR_ERR_IO && kr_store_is_url(s->cfg.db))
            snprintf(msg, sizeof msg,
                     "the candle store's database refused the connection (the reason is in the "
                     "server log)");
        kr_api_error_set(err, *status, NULL, "%s", msg);
        return NULL;
    }
    /* A database alive but stuck ends the statement itself a moment before the deadline
     * (a quarter of the timeout, at most 250 ms): its "statement timeout" arrives while the
     * client still listens, and the connection is kept, where at the deadline it would be
     * given up. The same value for every request, so a pooled connection keeps it. */
    const int timeout_ms = (int)(s->cfg.request_timeout_s * 1000.0);
    kr_store_set_statement_timeout(st, timeout_ms - (timeout_ms / 4 < 250 ? timeout_ms / 4 : 250));
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

int kr_store_access_fault(kr_server *s, const kr_stored_series *e, const char *field,
                          int not_found_status, kr_api_error *err) {
    char list[512], msg[sizeof e->read_error.message], suggested[40];
    switch (e->fault) {
    case KR_STORED_UNKNOWN_SYMBOL:
        if (kr_symbol_suggest_exchange(e->asked, suggested, sizeof suggested)) {
            /* A bare A-share code: the store names series with their exchange. */
            kr_api_error_set(err, not_found_status, field,
                             "no candles stored for '%s': an A-share code names its exchange, "
                             "did you mean '%s'? (6xxxxx: .SH, 0/3xxxxx: .SZ, 8/4xxxxx: .BJ)",
                             e->asked, suggested);
            return not_found_status;
        }
        kr_api_error_set(
            err, not_found_status, field,
            "no candles stored for '%s' (add some with POST /v1/candles/%s?interval=1d "
            "or kronos ingest)",
            e->asked, e->asked);
        return not_found_status;
    case KR_STORED_NO_INTERVAL:
        stored_list(e->series, e->n_series, list, sizeof list);
        kr_api_error_set(err, not_found_status, field, "'%s' has no '%s' candles; stored: %s",
                         e->asked, e->want, list);
        return not_found_status;
    case KR_STORED_READ_FAILED: {
        const int code = kr_store_access_failure_status(e->read_error.status);
        kr_store_access_log_error(s, code, e->read_error.message);
        kr_store_access_client_message(s, e->read_error.status, e->read_error.message, msg,
                                       sizeof msg);
        kr_api_error_set(err, code, NULL, "%s", msg);
        return code;
    }
    case KR_STORED_OK:
    case KR_STORED_TOO_FEW_ROWS: break;
    }
    return 0;
}

int kr_store_access_list(kr_server *s, kr_store *store, const char *symbol, kr_store_entry **list,
                         int64_t *n, kr_api_error *err) {
    *list = NULL;
    *n = 0;
    kr_error ke = { 0 };
    if (!store || kr_store_list(store, symbol, list, n, &ke) == KR_OK) return 0;
    const int code = kr_store_access_failure_status(ke.status);
    kr_store_access_log_error(s, code, ke.message);
    char msg[sizeof ke.message];
    kr_store_access_client_message(s, ke.status, ke.message, msg, sizeof msg);
    kr_api_error_set(err, code, NULL, "%s", msg);
    return code;
}

int kr_store_access_pick_interval(kr_server *s, kr_store *store, const char *symbol,
                                  const char *want, const char *field, int not_found_status,
                                  char *out, size_t cap, char *market, size_t market_cap,
                                  char *stored_symbol, size_t name_cap, int64_t *rows,
                                  kr_api_error *err) {
    kr_store_entry *list = NULL;
    int64_t n = 0;
    if (rows) *rows = 0;
    int status = kr_store_access_list(s, store, symbol, &list, &n, err);
    if (status) return status;
    kr_stored_series e = { .asked = symbol, .want = want };
    kr_stored_pick(list, n, &e);
    status = kr_store_access_fault(s, &e, field, not_found_status, err);
    if (!status) snprintf(out, cap, "%s", e.interval);
    if (!status && rows) *rows = e.entry->rows;
    if (market) snprintf(market, market_cap, "%s", e.market);
    if (stored_symbol) snprintf(stored_symbol, name_cap, "%s", e.symbol);
    free(list);
    return status;
}

/* ------------------------------------------------------------------ replies */

enum MHD_Result kr_store_access_reply_error(struct MHD_Connection *mc, kr_conn *c,
                                            const kr_api_error *e) {
    int status = e->status ? e->status : 400;
    /* A configured store's 503 (kr_store_access_open, kr_store_access_pick_interval) passes: say when to retry. */
    if (status == 503 && c->srv->cfg.db[0]) {
        snprintf(c->error, sizeof c->error, "%s", e->message);
        char *body = kr_api_error_json(503, e->message, NULL);
        return kr_srv_reply(mc, c, 503, "application/json", body, body ? strlen(body) : 0,
                            MHD_HTTP_HEADER_RETRY_AFTER, "1");
    }
    return kr_srv_reply_error(mc, c, status, e->message, e->field[0] ? e->field : NULL);
}
