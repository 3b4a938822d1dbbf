/*
 * server/routes_store — the candle store over HTTP (see routes_store.h for the routes): list
 * the stored series, read, write and delete one symbol's candles.
 *
 * The request bodies are parsed in server/analyst_request, with the field readers and the
 * candle parser of /v1/forecast; the store is reached through server/store_access.
 */
#include "server/routes_store.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "kronos/store.h"
#include "server/analyst_request.h"
#include "server/store_access.h"

#define CANDLES_PREFIX "/v1/candles/"
/* A page of candles costs the candles read (a stamp and six values) and its text: a JSON or
 * CSV row of a stamp and six numbers, at most about this long (shortest round trip). */
#define KR_CANDLE_BYTES (sizeof(int64_t) + KR_N_FEATURES * sizeof(double))
#define KR_CANDLE_TEXT_BYTES 160

/* ------------------------------------------------------------------ replies */

/* A candle store's error: 503 + Retry-After when another writer held the lock past the busy
 * timeout (nothing was written; a retry succeeds) or the database cannot be reached, `bad`
 * (400 / 404) for what the request got wrong, 500 for the rest. */
static enum MHD_Result reply_store_error(struct MHD_Connection *mc, kr_conn *c, kr_status st,
                                         const char *message, int bad, const char *field) {
    char msg[sizeof((kr_error *)0)->message];
    kr_store_access_client_message(c->srv, st, message, msg, sizeof msg);
    if (kr_store_access_failure_status(st) == 503) {
        kr_store_access_log_error(c->srv, 503, message);
        snprintf(c->error, sizeof c->error, "%s", msg);
        char *body = kr_api_error_json(503, msg, NULL);
        return kr_srv_reply(mc, c, 503, "application/json", body, body ? strlen(body) : 0,
                            MHD_HTTP_HEADER_RETRY_AFTER, "1");
    }
    int code = st == KR_ERR_INVALID_ARG || st == KR_ERR_FORMAT ? bad : 500;
    kr_store_access_log_error(c->srv, code, message);
    return kr_srv_reply_error(mc, c, code, msg, code == 400 ? field : NULL);
}

static enum MHD_Result reply_json(struct MHD_Connection *mc, kr_conn *c, char *body) {
    if (!body) return kr_srv_reply_error(mc, c, 503, "out of memory", NULL);
    return kr_srv_reply(mc, c, 200, "application/json", body, strlen(body), NULL, NULL);
}

/* Adds a span's first and last stamps to o as first_key and last_key: dates when the bars are
 * daily (or longer) and stamped at midnight, else date and time. */
static void add_stamps(cJSON *o, const char *first_key, const char *last_key, int64_t first,
                       int64_t last, int daily) {
    char a[32], b[32];
    kr_format_timestamp(first, daily && first % 86400 == 0, a, sizeof a);
    kr_format_timestamp(last, daily && last % 86400 == 0, b, sizeof b);
    cJSON_AddStringToObject(o, first_key, a);
    cJSON_AddStringToObject(o, last_key, b);
}

/* ------------------------------------------------------------------ GET /v1/symbols */

enum MHD_Result kr_handle_symbols(struct MHD_Connection *mc, kr_conn *c) {
    kr_api_error aerr = { 0 };
    int status;
    kr_store *store = kr_store_access_open(c->srv, 1, &status, &aerr);
    if (status) return kr_store_access_reply_error(mc, c, &aerr);
    kr_store_entry *e = NULL;
    int64_t n = 0;
    kr_error ke = { 0 };
    if (store && kr_store_list(store, NULL, &e, &n, &ke) != KR_OK) {
        kr_store_close(store);
        return reply_store_error(mc, c, ke.status, ke.message, 500, NULL);
    }
    kr_store_close(store);
    /* {"object": "list", "data": [...]}: the series as `kronos store list --json` prints them
     * (kr_store_list_json), market included. */
    char *data = NULL, *body = NULL;
    if (kr_store_list_json(e, n, 1, &data, &ke) == KR_OK) {
        kr_sb sb = { 0 };
        kr_sb_append(&sb, "{\"object\":\"list\",\"data\":");
        kr_sb_append(&sb, data);
        kr_sb_append(&sb, "}");
        if (kr_sb_finish(&sb, &body, &ke) != KR_OK) body = NULL;
    }
    free(data);
    free(e);
    return reply_json(mc, c, body);
}

/* ------------------------------------------------------------------ /v1/candles/{symbol} */

/* The symbol from the path; 0, or 400 with err set. */
static int path_symbol(const char *url, char *out, size_t cap, kr_api_error *err) {
    const char *sym = url + strlen(CANDLES_PREFIX);
    return kr_api_store_name(sym, "symbol", 0, out, cap, err) == KR_OK ? 0 : 400;
}

/* The one series a write or a delete names: the symbol from the path and the interval its
 * query string must give (symbol, interval: cap bytes each). 0, or 400 with err set; a
 * missing interval's message ends with why. */
static int path_series(struct MHD_Connection *mc, const char *url, const char *why, char *symbol,
                       char *interval, size_t cap, kr_api_error *err) {
    const char *v = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "interval");
    interval[0] = '\0';
    if (path_symbol(url, symbol, cap, err) ||
        (v && kr_api_store_name(v, "interval", 1, interval, cap, err) != KR_OK))
        return 400;
    if (!interval[0]) {
        kr_api_error_set(err, 400, "interval",
                         "required as a query parameter (?interval=1d, 5m, 1h, ...)%s", why);
        return 400;
    }
    return 0;
}

/* ?from=T&to=T: a range of stamps in any candle format, both ends included (absent: open).
 * Non-zero with a 400 in *aerr naming the parameter. */
static int query_range(struct MHD_Connection *mc, int64_t *from_ts, int64_t *to_ts,
                       kr_api_error *aerr) {
    const char *from = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "from");
    const char *to = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "to");
    kr_error ke = { 0 };
    if (kr_store_parse_range(from, to, "from", "to", from_ts, to_ts, &ke) == KR_OK) return 0;
    char msg[sizeof ke.message];
    kr_json_sanitize(ke.message, msg, sizeof msg);
    /* The store's message starts with the parameter it is about: named once, not again. */
    const char *field = !strncmp(msg, "to:", 3) ? "to" : "from";
    const size_t n = strlen(field);
    if (!strncmp(msg, field, n) && msg[n] == ':') {
        kr_api_error_set(aerr, 400, NULL, "%s", msg);
        snprintf(aerr->field, sizeof aerr->field, "%s", field);
    } else {
        kr_api_error_set(aerr, 400, field, "%s", msg);
    }
    return 1;
}

enum MHD_Result kr_handle_candles_get(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    kr_api_error aerr = { 0 };
    char symbol[KR_STORE_NAME_MAX + 1], want[KR_STORE_NAME_MAX + 1],
        interval[KR_STORE_NAME_MAX + 1];
    int limit = 0;
    int64_t from_ts, to_ts;
    if (path_symbol(url, symbol, sizeof symbol, &aerr) ||
        kr_api_candles_query(MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "interval"),
                             MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "limit"), want,
                             sizeof want, &limit, &aerr) != KR_OK ||
        query_range(mc, &from_ts, &to_ts, &aerr))
        return kr_store_access_reply_error(mc, c, &aerr);
    int status;
    kr_store *store = kr_store_access_open(c->srv, 1, &status, &aerr);
    if (status) return kr_store_access_reply_error(mc, c, &aerr);
    char stored[KR_STORE_NAME_MAX + 1];
    int64_t rows = 0;
    if (kr_store_access_pick_interval(c->srv, store, symbol, want, NULL, 404, interval,
                                      sizeof interval, NULL, 0, stored, sizeof stored, &rows,
                                      &aerr)) {
        kr_store_close(store);
        return kr_store_access_reply_error(mc, c, &aerr);
    }
    /* The page's memory before it is read: clients that ask for pages and never read them
     * hold the budget until it is full, then get 503s, instead of pinning memory no budget
     * sees. */
    if (limit > 0 && rows > limit) rows = limit;
    char msg[256];
    int refused = kr_srv_reserve_answer(c, (size_t)rows * (KR_CANDLE_BYTES + KR_CANDLE_TEXT_BYTES),
                                        msg, sizeof msg);
    if (refused) {
        kr_store_close(store);
        return kr_srv_reply_refusal(mc, c, refused, msg);
    }
    kr_candles *cs = NULL;
    kr_error ke = { 0 };
    kr_status st = kr_store_read_range(store, stored, interval, from_ts, to_ts, limit, &cs, &ke);
    kr_store_close(store);
    if (st != KR_OK) return reply_store_error(mc, c, st, ke.message, 404, NULL);
    /* Accept: text/csv gets the CSV `kronos store export` writes (and POST takes back);
     * anything else the JSON object, naming the series as stored ("aapl" reads AAPL). */
    const char *accept = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    const int csv = accept && strcasestr(accept, "text/csv") != NULL;
    char *body = NULL;
    kr_status fs = csv ? kr_candles_to_csv(cs, &body, &ke)
                       : kr_candles_to_json(cs, stored, interval, &body, &ke);
    kr_candles_free(cs);
    if (fs != KR_OK || !csv) return reply_json(mc, c, body); /* NULL: out of memory */
    return kr_srv_reply(mc, c, 200, "text/csv; charset=utf-8", body, strlen(body), NULL, NULL);
}

/* text/csv (or application/csv) bodies go to the CSV reader; anything else is JSON. */
static int body_is_csv(struct MHD_Connection *mc) {
    const char *ct = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    return ct && (!strncasecmp(ct, "text/csv", 8) || !strncasecmp(ct, "application/csv", 15));
}

enum MHD_Result kr_handle_candles_post(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    kr_api_error aerr = { 0 };
    char symbol[KR_STORE_NAME_MAX + 1], interval[KR_STORE_NAME_MAX + 1];
    if (path_series(mc, url, "", symbol, interval, sizeof symbol, &aerr))
        return kr_store_access_reply_error(mc, c, &aerr);
    /* ?market=NAME: the symbol's exchange calendar, as `kronos ingest --market` sets it. */
    const char *market_arg = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "market");
    const kr_calendar *cal = NULL;
    if (market_arg) {
        kr_error ce = { 0 };
        if (kr_calendar_find(market_arg, &cal, &ce) != KR_OK) {
            kr_api_error_set(&aerr, 400, "market", "%s", ce.message);
            return kr_store_access_reply_error(mc, c, &aerr);
        }
    }
    kr_candles *cs = NULL;
    if (kr_api_candles_parse(c->body, c->len, body_is_csv(mc), &c->srv->limits, &cs, &aerr) !=
        KR_OK)
        return kr_store_access_reply_error(mc, c, &aerr);
    kr_srv_drop_body(c); /* parsed: its budget goes back before a wait for the write lock */
    int status;
    kr_store *store = kr_store_access_open(c->srv, 0, &status, &aerr);
    if (!store) {
        kr_candles_free(cs);
        return kr_store_access_reply_error(mc, c, &aerr);
    }
    /* The store validates again and writes in one transaction: all rows or none. */
    kr_error ke = { 0 };
    kr_store_upsert_stats counts = { 0 };
    kr_status st = kr_store_upsert_ex(store, symbol, interval, cs, &counts, &ke);
    if (st == KR_OK && cal)
        st = kr_store_set_market(store, symbol, kr_calendar_spelling(cal, market_arg), &ke);
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
    if (mine && mine->market[0])
        cJSON_AddStringToObject(root, "market", mine->market);
    else
        cJSON_AddNullToObject(root, "market");
    if (mine) {
        int daily = kr_store_interval_seconds(interval) >= 86400;
        cJSON_AddNumberToObject(root, "rows", (double)mine->rows);
        add_stamps(root, "first_timestamp", "last_timestamp", mine->first_ts, mine->last_ts, daily);
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
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "candles.delete");
    cJSON_AddStringToObject(root, "symbol", d->symbol);
    cJSON_AddStringToObject(root, "interval", d->interval);
    cJSON_AddNumberToObject(root, "deleted", (double)d->deleted);
    if (d->deleted > 0)
        add_stamps(root, "first_deleted", "last_deleted", d->first_deleted, d->last_deleted, daily);
    cJSON_AddNumberToObject(root, "rows", (double)d->rows_left);
    if (d->rows_left > 0)
        add_stamps(root, "first_timestamp", "last_timestamp", d->first_left, d->last_left, daily);
    char *body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return body;
}

enum MHD_Result kr_handle_candles_delete(struct MHD_Connection *mc, kr_conn *c, const char *url) {
    kr_api_error aerr = { 0 };
    char symbol[KR_STORE_NAME_MAX + 1], interval[KR_STORE_NAME_MAX + 1];
    if (path_series(mc, url, ": a delete names one series", symbol, interval, sizeof symbol, &aerr))
        return kr_store_access_reply_error(mc, c, &aerr);
    int64_t from_ts, to_ts;
    if (query_range(mc, &from_ts, &to_ts, &aerr)) return kr_store_access_reply_error(mc, c, &aerr);
    kr_error ke = { 0 };
    int status;
    kr_store *store = kr_store_access_open(c->srv, 1, &status, &aerr);
    if (status) return kr_store_access_reply_error(mc, c, &aerr);
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
