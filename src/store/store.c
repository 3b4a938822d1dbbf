/*
 * store/store — the candle store's front (see store.h): name and row checks, the backend
 * picked by the target's scheme (store_backend.h: an SQLite file, or PostgreSQL for a
 * postgresql:// or postgres:// URL; store_target.c reads the target), rows turned into
 * kr_candles.
 *
 * An upsert validates the whole batch in memory before the backend touches the database, so a
 * bad row is refused with nothing written whatever the backend; the backend then writes the
 * batch in one transaction.
 */
#include "store/store.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "store/store_backend.h"

#define KR_STORE_BUSY_MS 10000

/* ------------------------------------------------------------------ names */

static int name_char_ok(char ch) {
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-' || ch == '^' || ch == '=';
}

static kr_status check_name(const char *what, const char *s, kr_error *err) {
    if (!s || !*s) return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: empty", what);
    size_t n = strlen(s);
    if (n > KR_STORE_NAME_MAX)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s '%.40s...': longer than %d characters",
                            what, s, KR_STORE_NAME_MAX);
    for (size_t i = 0; i < n; i++)
        if (!name_char_ok(s[i]))
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "%s '%s': character %zu ('%c') is not allowed (use letters, "
                                "digits and . _ - ^ =)",
                                what, s, i + 1, (s[i] >= 32 && s[i] < 127) ? s[i] : '?');
    return KR_OK;
}

kr_status kr_store_check_symbol(const char *symbol, kr_error *err) {
    return check_name("symbol", symbol, err);
}

int64_t kr_store_interval_seconds(const char *interval) {
    if (!interval || !(*interval >= '1' && *interval <= '9')) return 0;
    char *end;
    errno = 0;
    long long count = strtoll(interval, &end, 10);
    if (errno || count <= 0 || count > 100000) return 0;
    static const struct {
        const char *unit;
        int64_t secs;
    } units[] = {
        { "s", 1 },     { "m", 60 },        { "min", 60 },        { "h", 3600 },
        { "d", 86400 }, { "w", 7 * 86400 }, { "mo", 30 * 86400 },
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].unit)) return (int64_t)count * units[i].secs;
    return 0;
}

kr_status kr_store_check_interval(const char *interval, kr_error *err) {
    kr_status st = check_name("interval", interval, err);
    if (st != KR_OK) {
        /* The names' hint ("use letters, digits and ...") is the symbols'; an interval's form
         * is a count and a unit. */
        char *hint = err ? strstr(err->message, " (use letters") : NULL;
        if (hint)
            snprintf(hint, sizeof err->message - (size_t)(hint - err->message),
                     "; expected a count and a unit (s, m, min, h, d, w, mo), e.g. 1m, 1h, 1d");
        return st;
    }
    if (kr_store_interval_seconds(interval) == 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "interval '%s': expected a count and a unit (s, m, min, h, d, w, mo), "
                            "e.g. 1m, 5m, 1h, 4h, 1d, 1w",
                            interval);
    return KR_OK;
}

/* ------------------------------------------------------------------ path */

kr_status kr_store_make_parent_dirs(const char *path, kr_error *err) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf) return KR_OK;
    *slash = 0;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return kr_error_set(err, KR_ERR_IO, "%s: cannot create directory: %s", buf,
                                strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return kr_error_set(err, KR_ERR_IO, "%s: cannot create directory: %s", buf,
                            strerror(errno));
    return KR_OK;
}

/* ------------------------------------------------------------------ open / close */

kr_status kr_store_open_until(const char *path, int existing_only, double deadline_s,
                              kr_store **out, kr_error *err) {
    if (!out || !path || !*path)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_store_open: no path");
    *out = NULL;
    kr_status st = kr_store_check_target(path, err);
    if (st != KR_OK) return st;
    kr_store *s = calloc(1, sizeof *s);
    char shown[PATH_MAX];
    kr_store_display_name(path, shown, sizeof shown);
    if (!s) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", shown);
    snprintf(s->path, sizeof s->path, "%s", shown);
    s->busy_ms = KR_STORE_BUSY_MS;
    s->existing_only = existing_only;
    s->deadline_s = deadline_s > 0 ? deadline_s : 0;
    s->ops = kr_store_is_url(path) ? &kr_store_pg_ops : &kr_store_sqlite_ops;
    st = s->ops->open(s, path, err);
    if (st != KR_OK) {
        kr_store_close(s);
        return st;
    }
    *out = s;
    return KR_OK;
}

kr_status kr_store_open(const char *path, kr_store **out, kr_error *err) {
    return kr_store_open_until(path, 0, 0, out, err);
}

kr_status kr_store_open_existing(const char *path, kr_store **out, kr_error *err) {
    return kr_store_open_until(path, 1, 0, out, err);
}

void kr_store_set_deadline(kr_store *store, double deadline_s) {
    if (store) store->deadline_s = deadline_s > 0 ? deadline_s : 0;
}

int kr_store_ms_left(const kr_store *s) {
    if (!s || s->deadline_s <= 0) return -1;
    const double left_ms = (s->deadline_s - kr_now_seconds()) * 1000.0;
    if (left_ms <= 0) return 0;
    return left_ms >= INT_MAX ? INT_MAX : (int)ceil(left_ms);
}

int kr_store_lock_wait_ms(const kr_store *s) {
    const int left = kr_store_ms_left(s);
    return left >= 0 && left < s->busy_ms ? left : s->busy_ms;
}

kr_status kr_store_check_writable(const char *path, kr_error *err) {
    if (!path || !*path) return kr_error_set(err, KR_ERR_INVALID_ARG, "database path is empty");
    kr_status st = kr_store_check_target(path, err);
    if (st != KR_OK) return st;
    if (!kr_store_is_url(path)) return kr_store_sqlite_check_writable(path, err);
    /* A database server: connecting and checking (or creating) the schema is the test. */
    kr_store *s = NULL;
    st = kr_store_open(path, &s, err);
    kr_store_close(s);
    return st;
}

void kr_store_set_busy_timeout(kr_store *store, int ms) {
    if (!store) return;
    store->busy_ms = ms > 0 ? ms : 0;
    if (store->impl) store->ops->busy_timeout_changed(store);
}

void kr_store_set_statement_timeout(kr_store *store, int ms) {
    if (store) store->statement_ms = ms > 0 ? ms : 0; /* the backend applies it lazily */
}

void kr_store_close(kr_store *store) {
    if (!store) return;
    if (store->impl) store->ops->close(store);
    free(store);
}

/* ------------------------------------------------------------------ upsert */

/* Checks one row; row is 0-based, messages name it 1-based with its timestamp. */
static kr_status check_row(const kr_candles *c, int64_t i, const char *where, kr_error *err) {
    static const char *names[KR_N_FEATURES] = {
        "open", "high", "low", "close", "volume", "amount"
    };
    const double *v = c->values + i * KR_N_FEATURES;
    int ok = kr_timestamp_in_range(c->timestamps[i]) &&
             (i == 0 || c->timestamps[i] > c->timestamps[i - 1]) && v[KR_HIGH] >= v[KR_LOW];
    for (int k = 0; k < KR_N_FEATURES; k++)
        ok &= isfinite(v[k]) && (k <= KR_CLOSE ? v[k] > 0.0 : v[k] >= 0.0);
    if (ok) return KR_OK; /* the usual case, without formatting the stamp */
    char ts[32];
    kr_format_timestamp(c->timestamps[i], c->date_only, ts, sizeof ts);
    if (!kr_timestamp_in_range(c->timestamps[i]))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "%s: row %lld, timestamp %lld (%s): outside the years %d-%d; nothing "
                            "was written",
                            where, (long long)i + 1, (long long)c->timestamps[i], ts,
                            KR_CANDLE_YEAR_MIN, KR_CANDLE_YEAR_MAX);
    if (i > 0 && c->timestamps[i] <= c->timestamps[i - 1])
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "%s: row %lld (%s): timestamp not after the previous row's; rows "
                            "must be strictly increasing in time; nothing was written",
                            where, (long long)i + 1, ts);
    for (int k = 0; k < KR_N_FEATURES; k++) {
        if (!isfinite(v[k]))
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "%s: row %lld (%s), %s: not a finite number; nothing was written",
                                where, (long long)i + 1, ts, names[k]);
        if (k <= KR_CLOSE ? !(v[k] > 0.0) : v[k] < 0.0)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "%s: row %lld (%s), %s: %g must be %s; nothing was written", where,
                                (long long)i + 1, ts, names[k], v[k],
                                k <= KR_CLOSE ? "positive" : "non-negative");
    }
    if (v[KR_HIGH] < v[KR_LOW])
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "%s: row %lld (%s): high %g is below low %g; nothing was written",
                            where, (long long)i + 1, ts, v[KR_HIGH], v[KR_LOW]);
    return KR_OK;
}

kr_status kr_store_canonical_symbol(kr_store *store, const char *symbol, char *out, size_t cap,
                                    kr_error *err) {
    if (!store || !symbol || !out || cap < 1)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_store_canonical_symbol: bad argument");
    kr_status st = kr_store_check_symbol(symbol, err);
    if (st != KR_OK) return st;
    out[0] = '\0';
    st = store->ops->canonical_symbol(store, symbol, out, cap, err);
    if (st == KR_OK && !out[0]) snprintf(out, cap, "%s", symbol);
    return st;
}

kr_status kr_store_upsert(kr_store *store, const char *symbol, const char *interval,
                          const kr_candles *c, kr_error *err) {
    return kr_store_upsert_ex(store, symbol, interval, c, NULL, err);
}

int kr_store_one_bar_a_day(const char *interval) {
    const int64_t secs = kr_store_interval_seconds(interval);
    return secs >= 86400 && secs < 7 * 86400;
}

void kr_store_day_span(const kr_candles *c, int64_t *lo, int64_t *hi) {
    const int64_t off = KR_STORE_DAY_OFFSET;
    *lo = (c->timestamps[0] + off) / 86400 * 86400 - off;
    *hi = (c->timestamps[c->n - 1] + off) / 86400 * 86400 - off + 86400;
}

/* Whether t is one of the batch's stamps (ascending). */
static int in_batch(const kr_candles *c, int64_t t) {
    int64_t lo = 0, hi = c->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (c->timestamps[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->n && c->timestamps[lo] == t;
}

kr_status kr_store_two_bars_a_day(kr_store *s, const char *symbol, const char *interval,
                                  const kr_candles *c, int64_t a, int64_t b, kr_error *err) {
    char sa[32], sb[32];
    kr_format_timestamp(a, 0, sa, sizeof sa);
    kr_format_timestamp(b, 0, sb, sizeof sb);
    const int a_new = in_batch(c, a), b_new = in_batch(c, b);
    if (a_new && b_new)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "%s: %s %s: these candles have two bars on one day (%s and %s), but a "
                            "'%s' series holds one bar a day (bars of a shorter interval?); "
                            "nothing was written",
                            s->path, symbol, interval, sa, sb, interval);
    return kr_error_set(err, KR_ERR_INVALID_ARG,
                        "%s: %s %s: %s of these candles falls on the day of the stored %s, but a "
                        "'%s' series holds one bar a day (the two sources stamp their days at "
                        "different times: give the stamps the stored ones have, or store these "
                        "under another symbol or interval); nothing was written",
                        s->path, symbol, interval, a_new ? sa : sb, a_new ? sb : sa, interval);
}

static int is_months(const char *interval) {
    size_t n = strlen(interval);
    return n > 2 && !strcmp(interval + n - 2, "mo");
}

const kr_store_entry *kr_store_find_entry(const kr_store_entry *list, int64_t n, const char *symbol,
                                          const char *interval) {
    if (!list || !interval) return NULL;
    const int64_t secs = kr_store_interval_seconds(interval);
    const int months = is_months(interval); /* calendar months are no 30 days: "1mo" != "30d" */
    const kr_store_entry *same_length = NULL;
    for (int64_t i = 0; i < n; i++) {
        if (symbol && strcasecmp(list[i].symbol, symbol) != 0) continue;
        if (!strcmp(list[i].interval, interval)) return &list[i];
        if (!same_length && secs > 0 && kr_store_interval_seconds(list[i].interval) == secs &&
            is_months(list[i].interval) == months)
            same_length = &list[i];
    }
    return same_length;
}

kr_status kr_store_resolve_interval(kr_store *s, const char *symbol, const char *interval,
                                    char *out, size_t cap, kr_error *err) {
    kr_store_entry *list = NULL;
    int64_t n = 0;
    kr_status st = s->ops->list(s, symbol, &list, &n, err);
    if (st != KR_OK) return st;
    const kr_store_entry *e = kr_store_find_entry(list, n, symbol, interval);
    char found[KR_STORE_NAME_MAX + 1];
    snprintf(found, sizeof found, "%s", e ? e->interval : interval); /* out may be interval */
    snprintf(out, cap, "%s", found);
    free(list);
    return KR_OK;
}

kr_status kr_store_series_names_locked(kr_store *s, const char **symbol, const char **interval,
                                       char canon[KR_STORE_NAME_MAX + 1],
                                       char spelled[KR_STORE_NAME_MAX + 1], kr_error *err) {
    canon[0] = '\0';
    kr_status st = s->ops->canonical_symbol(s, *symbol, canon, KR_STORE_NAME_MAX + 1, err);
    if (st != KR_OK) return st;
    if (canon[0]) *symbol = canon;
    st = kr_store_resolve_interval(s, *symbol, *interval, spelled, KR_STORE_NAME_MAX + 1, err);
    if (st == KR_OK) *interval = spelled;
    return st;
}

/* The interval as symbol's series spell it (kr_store_find_entry), or as given when the symbol
 * has no series of that length yet. A writer asks again under its lock. */
static kr_status stored_interval(kr_store *store, const char *symbol, const char *interval,
                                 char *out, size_t cap, kr_error *err) {
    kr_status st = kr_store_check_interval(interval, err);
    if (st != KR_OK) return st;
    return kr_store_resolve_interval(store, symbol, interval, out, cap, err);
}

kr_status kr_store_upsert_ex(kr_store *store, const char *symbol_in, const char *interval_in,
                             const kr_candles *c, kr_store_upsert_stats *stats, kr_error *err) {
    kr_store_upsert_stats scratch;
    if (!stats) stats = &scratch;
    memset(stats, 0, sizeof *stats);
    if (!store || !c)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_store_upsert: NULL argument");
    kr_status st;
    char symbol[KR_STORE_NAME_MAX + 1];
    if ((st = kr_store_check_symbol(symbol_in, err)) != KR_OK) return st;
    if ((st = kr_store_canonical_symbol(store, symbol_in, symbol, sizeof symbol, err)) != KR_OK)
        return st;
    char interval[KR_STORE_NAME_MAX + 1];
    if ((st = stored_interval(store, symbol, interval_in, interval, sizeof interval, err)) != KR_OK)
        return st;
    char where[PATH_MAX + 100];
    snprintf(where, sizeof where, "%s: %s %s", store->path, symbol, interval);
    if (c->n < 1 || !c->timestamps || !c->values)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: no candles to write", where);
    for (int64_t i = 0; i < c->n; i++)
        if ((st = check_row(c, i, where, err)) != KR_OK) return st;
    st = store->ops->upsert(store, symbol, interval, c, stats, err);
    if (st != KR_OK) memset(stats, 0, sizeof *stats);
    if (st == KR_ERR_BUSY && err) {
        size_t n = strlen(err->message);
        snprintf(err->message + n, sizeof err->message - n,
                 "; nothing was written, retry when it has finished");
    }
    return st;
}

/* ------------------------------------------------------------------ read / list */

kr_status kr_store_rows_push(kr_store *s, kr_store_rows *r, int64_t ts,
                             const double v[KR_N_FEATURES], int has_volume, int has_amount,
                             kr_error *err) {
    kr_candles *c = r->c;
    if (c->n == r->cap) {
        int64_t ncap = r->cap ? r->cap * 2 : 1024;
        int64_t *nt = realloc(c->timestamps, (size_t)ncap * sizeof *nt);
        if (nt) c->timestamps = nt;
        double *nv = realloc(c->values, (size_t)ncap * KR_N_FEATURES * sizeof *nv);
        if (nv) c->values = nv;
        if (!nt || !nv)
            return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory reading candles", s->path);
        r->cap = ncap;
    }
    c->timestamps[c->n] = ts;
    memcpy(c->values + c->n * KR_N_FEATURES, v, KR_N_FEATURES * sizeof *v);
    r->all_volume &= has_volume != 0;
    r->all_amount &= has_amount != 0;
    c->n++;
    return KR_OK;
}

kr_status kr_store_check_kept_columns(kr_store *s, const char *symbol, const char *interval,
                                      const kr_candles *c, int64_t rows, int64_t with_volume,
                                      int64_t with_amount, kr_error *err) {
    const char *unread = c->has_volume && with_volume < rows   ? "volume"
                         : c->has_amount && with_amount < rows ? "amount"
                                                               : NULL;
    if (unread)
        return kr_error_set(
            err, KR_ERR_INVALID_ARG,
            "%s: %s %s: these candles have %s, but %lld stored rows do not; a series' %s is "
            "read (and exported) only when every row has it, so these figures would never be "
            "used (leave the %s column out, or ingest the whole series with it)",
            s->path, symbol, interval, unread,
            (long long)(rows - (unread[0] == 'v' ? with_volume : with_amount)), unread, unread);
    const char *column = !c->has_volume && with_volume > 0   ? "volume"
                         : !c->has_amount && with_amount > 0 ? "amount"
                                                             : NULL;
    if (!column) return KR_OK;
    return kr_error_set(err, KR_ERR_INVALID_ARG,
                        "%s: %s %s: these candles have no %s, but %lld stored rows do; storing "
                        "them would drop the %s of the whole series (give the %s column, or "
                        "store them under another symbol or interval)",
                        s->path, symbol, interval, column,
                        (long long)(column[0] == 'v' ? with_volume : with_amount), column, column);
}

kr_store_entry *kr_store_entries_push(kr_store_entry **list, int64_t *n, int64_t *cap) {
    if (*n == *cap) {
        int64_t ncap = *cap ? *cap * 2 : 16;
        kr_store_entry *nl = realloc(*list, (size_t)ncap * sizeof *nl);
        if (!nl) return NULL;
        *list = nl;
        *cap = ncap;
    }
    kr_store_entry *e = &(*list)[(*n)++];
    memset(e, 0, sizeof *e);
    return e;
}

kr_status kr_store_read(kr_store *store, const char *symbol, const char *interval,
                        int64_t limit_last_n, kr_candles **out, kr_error *err) {
    return kr_store_read_range(store, symbol, interval, KR_STORE_TS_FIRST, KR_STORE_TS_LAST,
                               limit_last_n, out, err);
}

kr_status kr_store_read_range(kr_store *store, const char *symbol_in, const char *interval_in,
                              int64_t from_ts, int64_t to_ts, int64_t limit_last_n,
                              kr_candles **out, kr_error *err) {
    if (!store || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_store_read: NULL argument");
    *out = NULL;
    kr_status st;
    char symbol[KR_STORE_NAME_MAX + 1];
    if ((st = kr_store_canonical_symbol(store, symbol_in, symbol, sizeof symbol, err)) != KR_OK)
        return st;
    char interval[KR_STORE_NAME_MAX + 1];
    if ((st = stored_interval(store, symbol, interval_in, interval, sizeof interval, err)) != KR_OK)
        return st;
    kr_store_rows rows = { calloc(1, sizeof(kr_candles)), 0, 1, 1 };
    kr_candles *c = rows.c;
    if (!c) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", store->path);
    if ((st = store->ops->read(store, symbol, interval, from_ts, to_ts, limit_last_n, &rows,
                               err)) != KR_OK)
        goto fail;
    if (c->n == 0) {
        char range[96] = "", a[32], b[32];
        if (from_ts != KR_STORE_TS_FIRST || to_ts != KR_STORE_TS_LAST) {
            kr_format_timestamp(from_ts, 0, a, sizeof a);
            kr_format_timestamp(to_ts, 0, b, sizeof b);
            snprintf(range, sizeof range, " from %s to %s",
                     from_ts == KR_STORE_TS_FIRST ? "the first" : a,
                     to_ts == KR_STORE_TS_LAST ? "the last" : b);
        }
        st = kr_error_set(err, KR_ERR_INVALID_ARG, "%s: no candles stored for %s %s%s", store->path,
                          symbol, interval, range);
        goto fail;
    }
    /* The backends return the newest first (so a limit keeps the most recent rows). */
    int all_midnight = 1;
    for (int64_t i = 0, j = c->n - 1; i < j; i++, j--) {
        int64_t t = c->timestamps[i];
        c->timestamps[i] = c->timestamps[j];
        c->timestamps[j] = t;
        for (int k = 0; k < KR_N_FEATURES; k++) {
            double v = c->values[i * KR_N_FEATURES + k];
            c->values[i * KR_N_FEATURES + k] = c->values[j * KR_N_FEATURES + k];
            c->values[j * KR_N_FEATURES + k] = v;
        }
    }
    for (int64_t i = 0; i < c->n; i++) all_midnight &= c->timestamps[i] % 86400 == 0;
    c->has_volume = rows.all_volume;
    c->has_amount = rows.all_volume && rows.all_amount;
    c->date_only = all_midnight;
    *out = c;
    return KR_OK;
fail:
    kr_candles_free(c);
    return st;
}

kr_status kr_store_list(kr_store *store, const char *symbol, kr_store_entry **out, int64_t *n,
                        kr_error *err) {
    if (!store || !out || !n)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_store_list: NULL argument");
    *out = NULL;
    *n = 0;
    kr_status st;
    if (symbol && (st = kr_store_check_symbol(symbol, err)) != KR_OK) return st;
    return store->ops->list(store, symbol, out, n, err);
}

/* ------------------------------------------------------------------ delete */

/* One end of a range: *out set (open when s is NULL or ""), or an error naming it. */
static kr_status range_end(const char *s, const char *name, int is_end, int64_t *out,
                           kr_error *err) {
    *out = is_end ? KR_STORE_TS_LAST : KR_STORE_TS_FIRST;
    if (!s) return KR_OK;
    /* Given but empty (an unset shell variable, "?from="): no bound would make a delete take
     * the whole series. Only an absent end is open. */
    if (!*s)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "%s: empty; leave it out for no bound at that end", name);
    int has_time = 1;
    const int rc = kr_parse_timestamp(s, strlen(s), out, &has_time);
    char ex[48];
    size_t n = 0;
    for (; s[n] && n + 1 < sizeof ex; n++) ex[n] = s[n] >= 32 && s[n] < 127 ? s[n] : '?';
    ex[n] = '\0';
    if (rc == KR_TS_OUT_OF_RANGE)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: '%s' is outside the years %d-%d", name,
                            ex, KR_CANDLE_YEAR_MIN, KR_CANDLE_YEAR_MAX);
    if (rc != 0) {
        char why[200];
        kr_timestamp_refusal(s, strlen(s), why, sizeof why);
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: cannot parse '%s' as a timestamp (%s)",
                            name, ex, why);
    }
    if (is_end && !has_time) *out += 86400 - 1; /* "to 2024-01-31": the whole of that day */
    return KR_OK;
}

kr_status kr_store_parse_range(const char *from, const char *to, const char *from_name,
                               const char *to_name, int64_t *from_ts, int64_t *to_ts,
                               kr_error *err) {
    if (!from_ts || !to_ts)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_store_parse_range: NULL argument");
    kr_status st;
    if ((st = range_end(from, from_name ? from_name : "from", 0, from_ts, err)) != KR_OK ||
        (st = range_end(to, to_name ? to_name : "to", 1, to_ts, err)) != KR_OK)
        return st;
    if (*from_ts > *to_ts)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: '%s' is after %s '%s'",
                            from_name ? from_name : "from", from, to_name ? to_name : "to", to);
    return KR_OK;
}

kr_status kr_store_delete(kr_store *store, const char *symbol_in, const char *interval_in,
                          int64_t from_ts, int64_t to_ts, kr_store_delete_stats *stats,
                          kr_error *err) {
    if (!store || !stats)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_store_delete: NULL argument");
    memset(stats, 0, sizeof *stats);
    kr_status st;
    char symbol[KR_STORE_NAME_MAX + 1], interval[KR_STORE_NAME_MAX + 1];
    if ((st = kr_store_canonical_symbol(store, symbol_in, symbol, sizeof symbol, err)) != KR_OK)
        return st;
    if ((st = stored_interval(store, symbol, interval_in, interval, sizeof interval, err)) != KR_OK)
        return st;
    if (from_ts > to_ts) {
        char a[32], b[32];
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "%s: %s %s: the range starts (%s) after it ends (%s); nothing was "
                            "deleted",
                            store->path, symbol, interval, kr_format_timestamp(from_ts, 0, a, 32),
                            kr_format_timestamp(to_ts, 0, b, 32));
    }
    st = store->ops->delete_range(store, symbol, interval, from_ts, to_ts, stats, err);
    if (st != KR_OK) memset(stats, 0, sizeof *stats);
    if (st == KR_ERR_BUSY && err) {
        size_t n = strlen(err->message);
        snprintf(err->message + n, sizeof err->message - n,
                 "; nothing was deleted, retry when it has finished");
    }
    return st;
}

kr_status kr_store_set_market(kr_store *store, const char *symbol_in, const char *market,
                              kr_error *err) {
    if (!store) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_store_set_market: NULL store");
    char symbol[KR_STORE_NAME_MAX + 1];
    kr_status st = kr_store_canonical_symbol(store, symbol_in, symbol, sizeof symbol, err);
    if (st != KR_OK) return st;
    if (market && strlen(market) >= KR_STORE_MARKET_MAX)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "market '%.40s' is too long", market);
    return store->ops->set_market(store, symbol, market, err);
}

/* ------------------------------------------------------------------ the list as JSON */

kr_status kr_store_list_json(const kr_store_entry *list, int64_t n, int with_market, char **out,
                             kr_error *err) {
    if (!out || (n > 0 && !list))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_store_list_json: NULL argument");
    *out = NULL;
    cJSON *arr = cJSON_CreateArray();
    char a[32], b[32];
    for (int64_t i = 0; arr && i < n; i++) {
        const kr_store_entry *e = &list[i];
        const int daily = kr_store_interval_seconds(e->interval) >= 86400;
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            cJSON_Delete(arr);
            arr = NULL;
            break;
        }
        cJSON_AddStringToObject(o, "symbol", e->symbol);
        cJSON_AddStringToObject(o, "interval", e->interval);
        if (with_market && e->market[0])
            cJSON_AddStringToObject(o, "market", e->market);
        else if (with_market)
            cJSON_AddNullToObject(o, "market");
        cJSON_AddNumberToObject(o, "rows", (double)e->rows);
        kr_format_timestamp(e->first_ts, daily && e->first_ts % 86400 == 0, a, sizeof a);
        kr_format_timestamp(e->last_ts, daily && e->last_ts % 86400 == 0, b, sizeof b);
        cJSON_AddStringToObject(o, "first_timestamp", a);
        cJSON_AddStringToObject(o, "last_timestamp", b);
        cJSON_AddNumberToObject(o, "updated_at", (double)e->updated_at);
    }
    *out = arr ? cJSON_PrintUnformatted(arr) : NULL;
    cJSON_Delete(arr);
    return *out ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "out of memory writing the store list");
}
