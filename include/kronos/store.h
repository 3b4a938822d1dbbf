/*
 * kronos/market.h — market data: candle files, exchange calendars (the future timestamps of a
 * forecast) and the local candle store.
 *
 * Candle CSV: a header row naming at least timestamps, open, high, low, close, optionally
 * volume and amount, in any order (extra columns ignored; the reference's column names).
 * Quoted fields, CRLF and a UTF-8 BOM are accepted. Timestamps: "YYYY-MM-DD",
 * "YYYY-MM-DD HH:MM", "YYYY-MM-DD HH:MM:SS[.fff]", with 'T' or ' ' between, optional
 * "Z"/"±HH:MM" suffix (the wall-clock time is kept, as pandas does for naive stamps),
 * YYYYMMDD, or an integer epoch count: seconds (10 digits, 9 before 2001-09-09), milliseconds
 * (13, 12), microseconds (16, 15) or nanoseconds (19, 18); seconds also with a fraction
 * ("1704412800.0", truncated) or an exponent writing every digit of the second. Every error
 * names the file, the 1-based line and the column.
 *
 * Store: candles per (symbol, interval) in one SQLite file (WAL: readers never block the
 * writer, nor the writer them) or a PostgreSQL database named by a postgresql:// URL (which
 * several replicas share; same tables and meaning); a handle is used by one thread at a time —
 * open one per thread.
 * Symbols match without regard to case; a symbol or interval is 1..32 characters of
 * [A-Za-z0-9._-^=]; an interval is also a count and a unit: s, m, min, h, d, w, mo.
 */
#ifndef KRONOS_MARKET_H
#define KRONOS_MARKET_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- candles */

typedef struct kr_candles {
    int64_t n;
    int64_t *timestamps; /* [n] naive seconds since epoch */
    double *values; /* [n][6] open, high, low, close, volume, amount (0 when absent) */
    int has_volume, has_amount;
    int date_only; /* every timestamp had no time of day (daily data) */
    /* The input's name of an amount column that was dropped because there is no volume
     * column (volume and amount are then 0, the reference's rule); "" when none. The library
     * does not print: a program tells its user. */
    char amount_dropped[64];
} kr_candles;

/* Reads a CSV file. Caller owns *out; free with kr_candles_free. */
KR_API kr_status kr_candles_read_csv(const char *path, kr_candles **out, kr_error *err);
/* Parses CSV text (borrowed); label names it in errors (file name or "request body"). */
KR_API kr_status kr_candles_parse_csv(const char *data, size_t len, const char *label,
                                      kr_candles **out, kr_error *err);
KR_API void kr_candles_free(kr_candles *c);

/* Candles as the readers take them back, every number the shortest text of exactly its double
 * (an export ingested again changes nothing). CSV: a header (timestamps, open, high, low,
 * close, then volume and amount when c has them) and a row per candle, dates alone when
 * c->date_only. JSON: GET /v1/candles' object {"object":"candles", "symbol", "interval",
 * "rows", "columns", "candles": rows of arrays}. Caller owns *out (free()). */
KR_API kr_status kr_candles_to_csv(const kr_candles *c, char **out, kr_error *err);
KR_API kr_status kr_candles_to_json(const kr_candles *c, const char *symbol, const char *interval,
                                    char **out, kr_error *err);

/* A view for the forecast API (borrowed from c). */
KR_API kr_series kr_candles_series(const kr_candles *c);
/* A view of rows [start, start+n) (borrowed). */
KR_API kr_series kr_candles_slice(const kr_candles *c, int64_t start, int64_t n);

/* Reads a timestamps-only CSV (a `timestamps` column; other columns ignored), e.g. the
 * --future-timestamps file. Caller owns *out (free()). */
KR_API kr_status kr_timestamps_read_csv(const char *path, int64_t **out, int64_t *n, kr_error *err);

/* ---------------------------------------------------------------- calendars */

/* One market's calendar (compiled in; static lifetime, read-only): trading weekdays, sessions,
 * holidays and early closes for the years it covers. */
typedef struct kr_calendar kr_calendar;

/* How the calendar of a forecast was chosen. */
typedef enum kr_calendar_how {
    KR_CAL_GIVEN = 0, /* named by the caller (or by the symbol) */
    KR_CAL_INFERRED = 1, /* the most specific calendar holding every history bar */
    KR_CAL_LEARNED = 2, /* none fits: the history's weekdays and times of day */
    KR_CAL_CONTINUOUS = 3 /* none fits and the history spans one day: every interval */
} kr_calendar_how;

typedef struct kr_calendar_info {
    int64_t interval_seconds; /* inferred bar interval (most common gap) */
    int intraday; /* interval < 1 day */
    int weekday_mask; /* bit d set: weekday d (Monday = 0) seen in the history */
    int n_slots; /* distinct intraday times of day seen (0 for daily) */
    int months; /* 1, 3 or 12 for monthly / quarterly / yearly bars, else 0 */
    const kr_calendar *calendar; /* the calendar used; NULL when learned or continuous */
    kr_calendar_how how;
    int label_end; /* intraday bars stamped with their close */
    int holidays_known; /* every future stamp lies within the calendar's years */
} kr_calendar_info;

/* The calendar called `name` (or one of its aliases; case-insensitive). Unknown names are an
 * error listing the known ones. */
KR_API kr_status kr_calendar_find(const char *name, const kr_calendar **out, kr_error *err);
/* Its canonical name ("SSE", "NYSE", "CRYPTO"...). */
KR_API const char *kr_calendar_name(const kr_calendar *cal);

/* Writes pred_len future timestamps after ts[n-1] into out, following cal (NULL: inferred from
 * the history: the most specific calendar holding every bar, else the weekdays and times of
 * day the history printed). Needs n >= 2. info may be NULL. */
KR_API kr_status kr_calendar_future_in(const kr_calendar *cal, const int64_t *ts, int64_t n,
                                       int pred_len, int64_t *out, kr_calendar_info *info,
                                       kr_error *err);
/* kr_calendar_future_in with the calendar inferred from the history (what the engine does
 * when a series carries no future timestamps). */
KR_API kr_status kr_calendar_future(const int64_t *ts, int64_t n, int pred_len, int64_t *out,
                                    kr_calendar_info *info, kr_error *err);
/* The bar interval kr_calendar_future reports (kr_calendar_info.interval_seconds: the most
 * common gap between consecutive stamps, ties to the smaller) without inferring a calendar,
 * in O(n) for a regular history; ts ascending. 0 when n < 2 or out of memory. */
KR_API int64_t kr_calendar_interval(const int64_t *ts, int64_t n);

/* ---------------------------------------------------------------- the candle store */

#define KR_STORE_NAME_MAX 32
#define KR_STORE_MARKET_MAX 24

typedef struct kr_store kr_store;

/* One stored series, as listed by kr_store_list. */
typedef struct kr_store_entry {
    char symbol[KR_STORE_NAME_MAX + 1];
    char interval[KR_STORE_NAME_MAX + 1];
    int64_t first_ts, last_ts; /* naive seconds of the first and last stored candle */
    int64_t rows; /* candles stored */
    int64_t updated_at; /* Unix seconds of the last upsert */
    char market[KR_STORE_MARKET_MAX]; /* the symbol's market (calendar name), "" if not set */
} kr_store_entry;

/* Whether target names a PostgreSQL database (postgresql:// or postgres://) rather than a
 * file. */
KR_API int kr_store_is_url(const char *target);

/* target as messages and logs show it: a URL with its password (user:PASSWORD@ or
 * ?password=) replaced by ***, a file path unchanged. Writes at most cap bytes. */
KR_API void kr_store_display_name(const char *target, char *out, size_t cap);

/* The database: `flag` (--db) when non-NULL, else $KRONOS_DB, else
 * $XDG_DATA_HOME/kronos/kronos.db, else ~/.local/share/kronos/kronos.db. An empty flag is
 * KR_ERR_INVALID_ARG (an unset variable, not a wish for the default). Creates nothing
 * (kr_store_open makes a new file's directories). Writes at most cap bytes into out. */
KR_API kr_status kr_store_resolve_path(const char *flag, char *out, size_t cap, kr_error *err);

/* Opens (creating when absent, with its missing directories) the store at path (a file or a
 * URL). A file or database that
 * is not a kronos store, one of a newer schema, or a server that cannot be reached is refused
 * with an error naming the path (a URL without its password). Does not wait for an ingest in
 * progress. Caller owns *out; close with kr_store_close. */
KR_API kr_status kr_store_open(const char *path, kr_store **out, kr_error *err);

/* kr_store_open for a command that only reads or deletes: creates nothing. A file that does
 * not exist is KR_ERR_IO ("no such database"), an empty one KR_ERR_FORMAT (not a kronos
 * store: opening it to read would have made it one). A file this process may not write is
 * read as it is. A database server is opened as by kr_store_open. */
KR_API kr_status kr_store_open_existing(const char *path, kr_store **out, kr_error *err);
KR_API void kr_store_close(kr_store *store);

/* How long an upsert waits for another writer before failing with KR_ERR_BUSY (default
 * 10000 ms; 0 fails at once). */
KR_API void kr_store_set_busy_timeout(kr_store *store, int ms);

/* How long one statement of a PostgreSQL store may run, lock waits included, before the
 * database cancels it: KR_ERR_TIMEOUT (a database alive but stuck or overloaded: retry
 * later), nothing written. 0 (the default) leaves the connection's own setting (the role's or
 * the database's statement_timeout, usually none). A SQLite store runs in-process and
 * ignores it (its writers wait at most the busy timeout). */
KR_API void kr_store_set_statement_timeout(kr_store *store, int ms);

/* A start-up check for commands that will write the store: KR_ERR_IO naming path and the
 * reason unless it can be written; an existing file must also open as a kronos store.
 * Creates nothing that stays. A URL: the server must accept the connection and the schema
 * must check (it is created in an empty database). */
KR_API kr_status kr_store_check_writable(const char *path, kr_error *err);

/* Inserts the candles of c for (symbol, interval), replacing stored candles with the same
 * timestamp. All or nothing: every row is validated first and a bad row rejects the whole
 * batch with an error naming the row. A series of daily bars (an interval of 1 to 6 days)
 * holds one bar a date: a batch that would put a second one on a date (the store stamps its
 * days at 00:00, the batch at 16:00; hourly bars stored as "1d") is refused, naming both. */
KR_API kr_status kr_store_upsert(kr_store *store, const char *symbol, const char *interval,
                                 const kr_candles *c, kr_error *err);

/* What an upsert did with the rows of its batch. */
typedef struct kr_store_upsert_stats {
    int64_t added; /* timestamps not stored before */
    int64_t replaced; /* stored timestamps whose values the batch changed (it wins) */
    int64_t unchanged; /* stored timestamps the batch repeated exactly */
} kr_store_upsert_stats;

/* kr_store_upsert that also says, in *stats (when non-NULL; zeros on failure), how many rows
 * were new, replaced stored rows with other values, or repeated them: ingesting a file twice
 * adds and replaces nothing. */
KR_API kr_status kr_store_upsert_ex(kr_store *store, const char *symbol, const char *interval,
                                    const kr_candles *c, kr_store_upsert_stats *stats,
                                    kr_error *err);

/* Reads the candles of (symbol, interval) in ascending time; limit_last_n > 0 keeps only the
 * most recent limit_last_n. No stored rows is an error (KR_ERR_INVALID_ARG). Caller owns *out;
 * free with kr_candles_free. */
KR_API kr_status kr_store_read(kr_store *store, const char *symbol, const char *interval,
                               int64_t limit_last_n, kr_candles **out, kr_error *err);
/* kr_store_read of the candles stamped from from_ts to to_ts (Unix seconds of the stored wall
 * clock, both included; KR_STORE_TS_FIRST / KR_STORE_TS_LAST for open ends, and
 * kr_store_parse_range reads them from text): with limit_last_n, the most recent of those, so
 * a reader pages back through a long series with to_ts = the oldest stamp it has - 1. None in
 * the range is an error (KR_ERR_INVALID_ARG) naming it. */
KR_API kr_status kr_store_read_range(kr_store *store, const char *symbol, const char *interval,
                                     int64_t from_ts, int64_t to_ts, int64_t limit_last_n,
                                     kr_candles **out, kr_error *err);

/* Lists the stored series, of one symbol when symbol is non-NULL, ordered by symbol, then
 * most recently updated first. *out may be NULL when *n is 0. Caller owns *out (free()). */
KR_API kr_status kr_store_list(kr_store *store, const char *symbol, kr_store_entry **out,
                               int64_t *n, kr_error *err);

/* list[0 .. n) (kr_store_list's answer) as one compact JSON array, the objects GET /v1/symbols
 * and `kronos store list --json` print: {"symbol", "interval", "market" (only when with_market;
 * null when the symbol has none), "rows", "first_timestamp", "last_timestamp" (dates for daily
 * and longer bars stamped at midnight, else "YYYY-MM-DD HH:MM:SS"), "updated_at" (Unix
 * seconds)}; n 0 gives "[]". Caller owns *out (free()). */
KR_API kr_status kr_store_list_json(const kr_store_entry *list, int64_t n, int with_market,
                                    char **out, kr_error *err);

/* What kr_store_delete removed. */
typedef struct kr_store_delete_stats {
    /* The series as stored ("aapl" finds AAPL, "5min" finds 5m); "" when none matched. */
    char symbol[KR_STORE_NAME_MAX + 1];
    char interval[KR_STORE_NAME_MAX + 1];
    int64_t deleted; /* candles removed */
    int64_t first_deleted, last_deleted; /* naive seconds of the first and last removed one */
    int64_t rows_left; /* candles the series still holds; 0: it is gone (from kr_store_list) */
    int64_t first_left, last_left; /* of those left (when rows_left > 0) */
} kr_store_delete_stats;

/* Open ends of kr_store_delete's range. */
#define KR_STORE_TS_FIRST INT64_MIN
#define KR_STORE_TS_LAST INT64_MAX

/* Deletes the candles of (symbol, interval) stamped from_ts <= ts <= to_ts (naive seconds;
 * KR_STORE_TS_FIRST / KR_STORE_TS_LAST for open ends: both delete the whole series). The
 * symbol matches without case and the interval as an upsert's does (kr_store_find_entry). One
 * transaction, serialised with upserts of the symbol: a reader sees the series before or
 * after, never half of it. A series left empty is removed from the list, and a symbol left
 * without series loses its market. No such series, or no candle in the range, is KR_OK with
 * stats->deleted 0 (stats->symbol "" when the series does not exist). from_ts > to_ts is
 * KR_ERR_INVALID_ARG; another writer holding the lock past the busy timeout KR_ERR_BUSY,
 * nothing deleted. stats may not be NULL; zeroed on failure. */
KR_API kr_status kr_store_delete(kr_store *store, const char *symbol, const char *interval,
                                 int64_t from_ts, int64_t to_ts, kr_store_delete_stats *stats,
                                 kr_error *err);

/* The range of a delete as `kronos store delete` and DELETE /v1/candles take it: from and to
 * each a stamp in any candle format (NULL or "": an open end, KR_STORE_TS_FIRST / _LAST), both
 * ends included; a date without a time of day as `to` takes in that whole day. Errors
 * (KR_ERR_INVALID_ARG) name the end by from_name / to_name ("--from", "from") and quote the
 * stamp: one no format reads, or a range that starts after it ends. */
KR_API kr_status kr_store_parse_range(const char *from, const char *to, const char *from_name,
                                      const char *to_name, int64_t *from_ts, int64_t *to_ts,
                                      kr_error *err);

/* The stored spelling of symbol (matched without case; an exact match first), or symbol itself
 * when nothing is stored under it. */
KR_API kr_status kr_store_canonical_symbol(kr_store *store, const char *symbol, char *out,
                                           size_t cap, kr_error *err);

/* Sets the market of a symbol (any case of it; "" or NULL clears it): a calendar name. */
KR_API kr_status kr_store_set_market(kr_store *store, const char *symbol, const char *market,
                                     kr_error *err);

/* Name checks (the message says "symbol" or "interval"). */
KR_API kr_status kr_store_check_symbol(const char *symbol, kr_error *err);
KR_API kr_status kr_store_check_interval(const char *interval, kr_error *err);
/* Nominal length of an interval in seconds ("5m" -> 300, "1mo" -> 30 days); 0 if invalid. */
KR_API int64_t kr_store_interval_seconds(const char *interval);
/* The entry of list[0 .. n) for symbol (any case; NULL: any symbol) and interval: the one
 * spelled as given, else one of the same length ("5min" finds "5m", "60m" finds "1h": the store
 * keeps them as one series, under the spelling stored first; months only match months, "1mo"
 * is no "30d"); NULL when none. */
KR_API const kr_store_entry *kr_store_find_entry(const kr_store_entry *list, int64_t n,
                                                 const char *symbol, const char *interval);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_MARKET_H */
