/*
 * kronos/store.h — the candle store: candles per (symbol, interval) in one SQLite file (WAL:
 * readers never block the writer, nor the writer them) or a PostgreSQL database named by a
 * postgresql:// URL (which several replicas share; same tables and meaning); a handle is used
 * by one thread at a time — open one per thread. Part of libkronos-tools, on top of the core;
 * each backend is optional at build time (KRONOS_WITH_SQLITE, KRONOS_WITH_PG): opening a store
 * of a backend the build lacks fails with KR_ERR_UNSUPPORTED ("built without ...").
 * Symbols match without regard to case; a symbol or interval is 1..32 characters of
 * [A-Za-z0-9._-^=]; an interval is also a count and a unit: s, m, min, h, d, w, mo.
 * (Until 0.3 this header was kronos/market.h, which also held what is now kronos/series.h.)
 */
#ifndef KRONOS_STORE_H
#define KRONOS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"
#include "kronos/series.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* Whether target can name a store: KR_OK for a postgresql:// or postgres:// URL and for a
 * file path; KR_ERR_INVALID_ARG, with a message showing it as kr_store_display_name does,
 * for what looks like a URL of any other form (a scheme "word:" at the start other than
 * file:, or "://" with no '/' before it: pgsql://..., postgresql:/..., postgresql:kr,
 * host:5432/db), a libpq key=value string, white space at either end, or a control
 * character. An SQLite file whose name starts like a scheme is given as ./NAME (or file:NAME,
 * the file of that name). kr_store_open, kr_store_resolve_path and kr_store_check_writable
 * apply it: a typo is refused instead of becoming a file in a directory named after it. */
KR_API kr_status kr_store_check_target(const char *target, kr_error *err);

/* target as messages and logs show it: a URL with its password replaced by ***, a file path
 * unchanged. "URL" is anything kr_store_check_target would read as one, refused forms
 * included: what lies between the first ':' after the scheme and the last '@' (user:PASSWORD@,
 * whatever characters the password holds: an unescaped '/', '#', '?' or '@' too), or with an
 * unknown scheme everything between its first ':' and the last '@', and the value of a
 * password or sslpassword parameter up to the next '&'. More than the password where the URL
 * is odd, never less. Writes at most cap bytes. */
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

/* kr_store_open (existing_only: kr_store_open_existing) whose every call, the open included,
 * returns by deadline_s (a kr_now_seconds() moment; 0: no deadline of its own): a server's
 * request deadline. A PostgreSQL server that stops answering (frozen, a paused VM, a network
 * partition) fails the call that waits for it with KR_ERR_TIMEOUT at the deadline, on a new
 * connection and a pooled one alike (that connection is closed, never reused), and a lock
 * wait ends there even when the busy timeout is longer (KR_ERR_BUSY); an SQLite file's busy
 * wait and statements end there too. A write cut off before its commit wrote nothing; one cut
 * off waiting for the commit's answer may have been committed (the message says so). */
KR_API kr_status kr_store_open_until(const char *path, int existing_only, double deadline_s,
                                     kr_store **out, kr_error *err);
/* Moves the deadline of store's later calls (0: none). */
KR_API void kr_store_set_deadline(kr_store *store, double deadline_s);

/* How long an upsert waits for another writer before failing with KR_ERR_BUSY (default
 * 10000 ms; 0 fails at once), and never past the handle's deadline (kr_store_open_until). */
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
#endif /* KRONOS_STORE_H */
