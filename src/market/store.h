/*
 * market/store — the market-data store: candles per (symbol, interval) in one SQLite file
 * (the embedded default) or a PostgreSQL database (a postgresql:// or postgres:// URL, which
 * several `kronos serve` replicas share), so `kronos ingest` writes once and `kronos analyze`
 * (and the server) read many times. Both backends hold the same tables with the same meaning;
 * the backend is chosen by the target's scheme (market/store_backend.h).
 *
 * PostgreSQL: the URL is libpq's (postgresql://user:secret@host:5432/db?sslmode=require,
 * or a Unix socket: postgresql:///db?host=/run/postgresql). Messages name it with the password
 * replaced by *** (kr_store_display_name). MVCC: a read sees the last committed upsert and never
 * waits for a writer; upserts of one symbol are serialised by a transaction-scoped advisory
 * lock (of different symbols they run in parallel), a writer waiting longer than the busy
 * timeout fails with KR_ERR_BUSY, writing nothing. The schema version is kept in a table
 * kronos_schema(version, applied_at), one row per applied migration, checked at every open; a
 * version newer than this build's is refused. Connections are kept for reuse by the process
 * (kr_store_close returns an idle one to a small pool), so a handle per request stays cheap.
 *
 * SQLite file: WAL journal (readers never block the writer, nor the writer them), a busy timeout
 * for the short exclusive moments, schema versioned with PRAGMA user_version. Tables:
 *   symbols(symbol, interval, first_ts, last_ts, rows, updated_at)   one row per series
 *   candles(symbol, interval, ts, open, high, low, close, volume, amount,
 *           has_volume, has_amount)                                  PRIMARY KEY(symbol, interval, ts)
 *   markets(symbol, market)       the exchange calendar of a symbol (market/calendar.h), if set
 * Timestamps are the naive seconds since 1970 used everywhere in kronos (market/candles.h).
 *
 * Symbols match without regard to case ("aapl" reads and extends the stored "AAPL"): a
 * symbol is stored with the spelling of its first upsert.
 *
 * Names: a symbol or interval is 1..32 characters of [A-Za-z0-9._-^=] ("600977.SH", "^GSPC",
 * "EURUSD=X", "BRK-B"); an interval is also a count and a unit: s, m, min, h, d, w, mo
 * ("5m", "5min", "1h", "1d", "1w").
 *
 * Threads: a kr_store handle is used by one thread at a time; open one handle per thread (or
 * process) for concurrency, which WAL makes safe: opening and reading never wait for a writer
 * (a read sees the last committed upsert), a second writer waits for the first (busy timeout,
 * 10 s by default) and then fails with KR_ERR_BUSY, writing nothing.
 */
#ifndef KR_MARKET_STORE_H
#define KR_MARKET_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"
#include "market/candles.h"

#define KR_STORE_NAME_MAX 32
#define KR_STORE_SCHEMA_VERSION 2 /* 2: markets(symbol, market); version 1 files are upgraded */
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
int kr_store_is_url(const char *target);

/* target as messages and logs show it: a URL with its password (user:PASSWORD@ or
 * ?password=) replaced by ***, a file path unchanged. Writes at most cap bytes. */
void kr_store_display_name(const char *target, char *out, size_t cap);

/* The database path: `flag` (--db) when non-NULL and non-empty, else $KRONOS_DB, else
 * $XDG_DATA_HOME/kronos/kronos.db, else ~/.local/share/kronos/kronos.db. Creates the missing
 * parent directories of a file (a URL is taken as it is). Writes at most cap bytes into out. */
kr_status kr_store_resolve_path(const char *flag, char *out, size_t cap, kr_error *err);

/* Opens (creating when absent) the store at path (a file or a URL). A file that is not an
 * SQLite database, a database of another application or with a newer schema, or a server that
 * cannot be reached, is refused with an error naming the path.
 * Takes no write lock unless the file is new (the schema is created then), so it does not
 * wait for an ingest in progress. On success caller owns *out; close with kr_store_close. */
kr_status kr_store_open(const char *path, kr_store **out, kr_error *err);
void kr_store_close(kr_store *store);

/* How long an upsert waits for another writer's lock before failing with KR_ERR_BUSY
 * (default 10000 ms; 0 fails at once). */
void kr_store_set_busy_timeout(kr_store *store, int ms);

/* A start-up check for commands that will write the store (`kronos serve`, `kronos ingest`):
 * KR_ERR_IO naming path and the reason unless new files can be created in its directory
 * (SQLite keeps -wal and -shm files beside the database) and an existing file may be
 * written; an existing file must also open as a kronos store (its errors as kr_store_open).
 * Creates nothing that stays: a missing database is not created. A URL: the server must
 * accept the connection and the schema must check (it is created in an empty database). */
kr_status kr_store_check_writable(const char *path, kr_error *err);

/* Inserts the candles of c for (symbol, interval), replacing stored candles with the same
 * timestamp. One transaction: every row is validated first (timestamps strictly increasing,
 * finite values, positive prices, non-negative volume/amount, high >= low) and a bad row
 * rejects the whole batch with an error naming the row; nothing is written then. */
kr_status kr_store_upsert(kr_store *store, const char *symbol, const char *interval,
                          const kr_candles *c, kr_error *err);

/* Reads the candles of (symbol, interval) in ascending time; limit_last_n > 0 keeps only the
 * most recent limit_last_n. has_volume / has_amount are set when every row has them;
 * date_only when every timestamp is at midnight. No stored rows is an error
 * (KR_ERR_INVALID_ARG). Caller owns *out; free with kr_candles_free. */
kr_status kr_store_read(kr_store *store, const char *symbol, const char *interval,
                        int64_t limit_last_n, kr_candles **out, kr_error *err);

/* Lists the stored series, of one symbol when symbol is non-NULL, ordered by symbol, then
 * most recently updated first. *out may be NULL when *n is 0. Caller owns *out (free()). */
kr_status kr_store_list(kr_store *store, const char *symbol, kr_store_entry **out, int64_t *n,
                        kr_error *err);

/* The stored spelling of symbol (matched without case; an exact match first), or symbol itself
 * when nothing is stored under it. */
kr_status kr_store_canonical_symbol(kr_store *store, const char *symbol, char *out, size_t cap,
                                    kr_error *err);

/* Sets the market of a symbol (any case of it; "" or NULL clears it). The name is not checked
 * here: callers pass a calendar name (kr_calendar_find). */
kr_status kr_store_set_market(kr_store *store, const char *symbol, const char *market,
                              kr_error *err);

/* Name checks (what = "symbol" or "interval" in the message). */
kr_status kr_store_check_symbol(const char *symbol, kr_error *err);
kr_status kr_store_check_interval(const char *interval, kr_error *err);
/* Nominal length of an interval in seconds ("5m" -> 300, "1mo" -> 30 days); 0 if invalid. */
int64_t kr_store_interval_seconds(const char *interval);

#endif
