/*
 * store/store_sqlite — the SQLite backend of the candle store (see store.h, store_backend.h):
 * one file, the embedded default.
 *
 * Design notes:
 *   - WITHOUT ROWID tables keyed by (symbol, interval, ts): the candles of one series are
 *     stored together in time order, so "the last N bars" is one index range scan.
 *   - An upsert (its batch validated by store.c) writes inside BEGIN IMMEDIATE ... COMMIT;
 *     any failure rolls back, so a batch is all or nothing and the symbols row always agrees
 *     with the candles rows.
 *   - WAL lets `kronos analyze` (or the server) read while `kronos ingest` writes. Opening a
 *     store therefore takes no write lock: the schema is checked with a read (a snapshot of
 *     the last commit), and only a file without a schema takes the write lock to create it,
 *     re-checking under the lock (another process may have created it meanwhile). A reader
 *     never waits behind a writer's open transaction.
 *   - The busy timeout is for writers: a second writer waits for the first to commit, and
 *     past the timeout gets KR_ERR_BUSY ("locked by another writer") with nothing written.
 *   - The schema version is SQLite's own slot for it, PRAGMA user_version (the PostgreSQL
 *     backend keeps the same numbers in a kronos_schema table).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "store/store_backend.h"

#define HANDLE(s) ((sqlite_handle *)(s)->impl)
#define DB(s) (HANDLE(s)->db)

typedef struct sqlite_handle {
    sqlite3 *db;
    double wait_started; /* kr_now_seconds() when the current lock wait began */
    double waited_s; /* how long the last lock wait lasted, for its message */
} sqlite_handle;

/* SQLite's busy handler: the busy timeout, cut to the handle's deadline (a request's), so a
 * writer waiting for another's lock answers by the request's deadline (SQLite's own timeout
 * knows only its milliseconds). count is 0 at the start of each wait. Sleeps grow as SQLite's
 * do, so a short lock costs little latency and a long one few wake-ups. */
static int busy_wait(void *arg, int count) {
    static const int k_sleep_ms[] = { 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 };
    kr_store *s = arg;
    sqlite_handle *h = s->impl;
    const double now = kr_now_seconds();
    if (count == 0) h->wait_started = now;
    h->waited_s = now - h->wait_started;
    double end = h->wait_started + s->busy_ms / 1000.0;
    if (s->deadline_s > 0 && s->deadline_s < end) end = s->deadline_s;
    const double left_ms = (end - now) * 1000.0;
    if (left_ms <= 0) return 0; /* SQLITE_BUSY: the caller says it waited h->waited_s */
    const int n = (int)(sizeof k_sleep_ms / sizeof k_sleep_ms[0]);
    int ms = k_sleep_ms[count < n ? count : n - 1];
    if (ms > left_ms) ms = (int)ceil(left_ms);
    sqlite3_sleep(ms);
    return 1;
}

/* Every few thousand virtual-machine steps: stops a statement running past the deadline
 * (SQLITE_INTERRUPT, read as KR_ERR_TIMEOUT; the transaction rolls back). */
static int past_deadline(void *arg) { return kr_store_ms_left(arg) == 0; }

/* The directory part of path ("." for a bare name), where SQLite makes its -wal and -shm. */
static void dir_of(const char *path, char *out, size_t cap) {
    snprintf(out, cap, "%s", path);
    char *slash = strrchr(out, '/');
    if (!slash)
        snprintf(out, cap, ".");
    else if (slash == out)
        out[1] = '\0';
    else
        *slash = '\0';
}

/* Fills err from the connection's last error, naming the store path and the step. */
static kr_status db_error(const kr_store *s, const char *step, kr_error *err) {
    int code = sqlite3_extended_errcode(DB(s)) & 0xff;
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
        return kr_error_set(
            err, KR_ERR_BUSY, "%s: %s: the database is locked by another writer (waited %.1f s%s)",
            s->path, step, HANDLE(s)->waited_s,
            kr_store_lock_wait_ms(s) < s->busy_ms ? ", to the deadline; the busy timeout is longer"
                                                  : "");
    if (code == SQLITE_INTERRUPT)
        return kr_error_set(err, KR_ERR_TIMEOUT,
                            "%s: %s: did not finish by the deadline; nothing was written, retry "
                            "later",
                            s->path, step);
    if (code == SQLITE_READONLY || code == SQLITE_CANTOPEN) {
        /* A reader of a WAL database creates its -shm (and -wal) files beside it: a store in a
         * directory this user cannot write cannot even be read. Say so rather than SQLite's
         * "attempt to write a readonly database". */
        char dir[PATH_MAX];
        dir_of(s->path, dir, sizeof dir);
        if (access(dir, W_OK) != 0)
            return kr_error_set(err, KR_ERR_IO,
                                "%s: %s: SQLite needs to create the store's -shm and -wal files "
                                "beside it (WAL journal), also to read it, and the directory %s "
                                "is not writable (%s); make it writable for this user, or copy "
                                "the database to a writable directory",
                                s->path, step, dir, strerror(errno));
    }
    kr_status st = (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) ? KR_ERR_FORMAT
                   : code == SQLITE_NOMEM                            ? KR_ERR_NOMEM
                                                                     : KR_ERR_IO;
    if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
        return kr_error_set(err, st, "%s: not a usable kronos database (%s: %s)", s->path, step,
                            sqlite3_errmsg(DB(s)));
    return kr_error_set(err, st, "%s: %s: %s", s->path, step, sqlite3_errmsg(DB(s)));
}

static kr_status exec(kr_store *s, const char *sql, const char *step, kr_error *err) {
    if (sqlite3_exec(DB(s), sql, NULL, NULL, NULL) != SQLITE_OK) return db_error(s, step, err);
    return KR_OK;
}

/* Runs a one-row, one-column integer query. */
static kr_status query_int(kr_store *s, const char *sql, const char *step, int64_t *out,
                           kr_error *err) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(DB(s), sql, -1, &q, NULL) != SQLITE_OK) return db_error(s, step, err);
    int rc = sqlite3_step(q);
    if (rc != SQLITE_ROW) {
        kr_status st = db_error(s, step, err);
        sqlite3_finalize(q);
        return st;
    }
    *out = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return KR_OK;
}

static const char k_schema_v1[] =
    "CREATE TABLE symbols ("
    " symbol TEXT NOT NULL, interval TEXT NOT NULL,"
    " first_ts INTEGER NOT NULL, last_ts INTEGER NOT NULL,"
    " rows INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
    " PRIMARY KEY (symbol, interval)) WITHOUT ROWID;"
    "CREATE TABLE candles ("
    " symbol TEXT NOT NULL, interval TEXT NOT NULL, ts INTEGER NOT NULL,"
    " open REAL NOT NULL, high REAL NOT NULL, low REAL NOT NULL, close REAL NOT NULL,"
    " volume REAL NOT NULL, amount REAL NOT NULL,"
    " has_volume INTEGER NOT NULL, has_amount INTEGER NOT NULL,"
    " PRIMARY KEY (symbol, interval, ts)) WITHOUT ROWID;"
    "PRAGMA user_version = 1;";

/* Version 2 adds each symbol's market (its exchange calendar, series/calendar.h). */
static const char k_schema_v2[] = "CREATE TABLE markets ("
                                  " symbol TEXT NOT NULL PRIMARY KEY, market TEXT NOT NULL"
                                  ") WITHOUT ROWID;"
                                  "PRAGMA user_version = 2;";

/* What the file holds: its schema version, whether our two tables exist, whether it has any
 * table at all. */
typedef struct schema_state {
    int64_t version, ours, other;
} schema_state;

/* The three queries of the schema state, inside the caller's transaction. */
static kr_status query_schema(kr_store *s, schema_state *out, kr_error *err) {
    kr_status st;
    if ((st = query_int(s, "PRAGMA user_version", "reading the schema version", &out->version,
                        err)) != KR_OK)
        return st;
    if ((st = query_int(s,
                        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                        "('symbols', 'candles')",
                        "reading the schema", &out->ours, err)) != KR_OK)
        return st;
    return query_int(s, "SELECT count(*) FROM sqlite_master", "reading the schema", &out->other,
                     err);
}

/* Reads the schema state in one read transaction, so the three answers describe one commit.
 * A read in WAL mode takes no lock a writer holds: this never waits for an ingest. */
static kr_status read_schema(kr_store *s, schema_state *out, kr_error *err) {
    kr_status st = exec(s, "BEGIN DEFERRED", "starting the schema check", err);
    if (st != KR_OK) return st;
    st = query_schema(s, out, err);
    sqlite3_exec(DB(s), st == KR_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
    return st;
}

static int schema_empty(const schema_state *ss) { return ss->version == 0 && ss->other == 0; }

/* Checks that an existing file carries our schema. */
static kr_status check_schema(const kr_store *s, const schema_state *ss, kr_error *err) {
    if (ss->version == 0)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: an SQLite database of another application (it has tables but no "
                            "kronos schema version); pass another --db",
                            s->path);
    if (ss->version > KR_STORE_SCHEMA_VERSION)
        return kr_error_set(err, KR_ERR_UNSUPPORTED,
                            "%s: schema version %lld was written by a newer kronos (this one "
                            "reads version %d)",
                            s->path, (long long)ss->version, KR_STORE_SCHEMA_VERSION);
    if (ss->ours != 2)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: schema version %lld but the symbols/candles tables are missing",
                            s->path, (long long)ss->version);
    return KR_OK;
}

/* Checks the schema with a read; creates it, under the write lock, only in an empty file. */
static kr_status init_schema(kr_store *s, kr_error *err) {
    schema_state ss;
    kr_status st = read_schema(s, &ss, err);
    if (st != KR_OK) return st;
    if (!schema_empty(&ss)) {
        if ((st = check_schema(s, &ss, err)) != KR_OK) return st;
        if (ss.version >= KR_STORE_SCHEMA_VERSION) return KR_OK; /* the usual case: a read */
    }
    /* Creating (an empty file) or upgrading (version 1) writes. IMMEDIATE: two processes
     * opening the file at once must not both do it, so the state is read again under the
     * lock before anything is written. */
    if ((st = exec(s, "BEGIN IMMEDIATE", "creating the schema", err)) != KR_OK) return st;
    if ((st = query_schema(s, &ss, err)) == KR_OK) {
        if (schema_empty(&ss)) {
            if ((st = exec(s, k_schema_v1, "creating the schema", err)) == KR_OK)
                st = exec(s, k_schema_v2, "creating the schema", err);
        } else if ((st = check_schema(s, &ss, err)) == KR_OK && ss.version == 1) {
            st = exec(s, k_schema_v2, "upgrading the schema to version 2", err);
        }
        if (st == KR_OK) return exec(s, "COMMIT", "committing the schema", err);
    }
    sqlite3_exec(DB(s), "ROLLBACK", NULL, NULL, NULL);
    return st;
}

/* The schema check, WAL mode, then the schema created or upgraded: the steps of an open after
 * sqlite3_open_v2. */
static kr_status first_steps(kr_store *s, kr_error *err) {
    /* The first statement reads the header: this is where a foreign or corrupted file fails.
     * A file that is no kronos store (another application's database, a newer schema) is
     * refused here, before the journal mode below is written into its header. */
    schema_state ss;
    kr_status st = read_schema(s, &ss, err);
    if (st != KR_OK) return st;
    if (!schema_empty(&ss) && (st = check_schema(s, &ss, err)) != KR_OK) return st;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(DB(s), "PRAGMA journal_mode = WAL", -1, &q, NULL) != SQLITE_OK ||
        sqlite3_step(q) != SQLITE_ROW) {
        st = db_error(s, "setting WAL mode", err);
        sqlite3_finalize(q);
        return st;
    }
    const char *mode = (const char *)sqlite3_column_text(q, 0);
    int wal = mode && !strcmp(mode, "wal");
    sqlite3_finalize(q);
    if (!wal)
        return kr_error_set(err, KR_ERR_IO,
                            "%s: cannot use WAL journal mode (a network or read-only file "
                            "system?)",
                            s->path);
    /* NORMAL is durable across application crashes in WAL mode; FULL only adds power-loss
     * safety of the last commit at the price of an fsync per ingest. */
    st = exec(s, "PRAGMA synchronous = NORMAL", "configuring", err);
    return st == KR_OK ? init_schema(s, err) : st;
}

static kr_status sqlite_open(kr_store *s, const char *path, kr_error *err) {
    struct stat sb;
    const int exists = stat(path, &sb) == 0;
    if (exists && S_ISDIR(sb.st_mode))
        return kr_error_set(err, KR_ERR_IO, "%s: is a directory, not a database file", s->path);
    if (s->existing_only && !exists)
        return kr_error_set(err, KR_ERR_IO,
                            "%s: no such database (nothing stored yet; kronos ingest creates it)",
                            s->path);
    /* SQLite takes an empty file for an empty database and the first open writes a schema
     * into it: a read must not turn some other empty file into a store. */
    if (s->existing_only && S_ISREG(sb.st_mode) && sb.st_size == 0)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: an empty file, not a kronos store (kronos ingest writes one)",
                            s->path);
    kr_status made;
    if (!exists && (made = kr_store_make_parent_dirs(path, err)) != KR_OK) return made;
    /* SQLite built with URI names (SQLITE_USE_URI, as Debian's is) takes a name starting
     * with "file:" for a URI and opens another file ("file:v.db" is v.db, "?mode=" and the
     * like apply): the file the user named, which the commands look for, is opened instead. */
    char named[PATH_MAX + 2];
    if (!strncmp(path, "file:", 5) &&
        snprintf(named, sizeof named, "./%s", path) < (int)sizeof named)
        path = named;
    sqlite_handle *h = calloc(1, sizeof *h);
    if (!h) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory opening", s->path);
    s->impl = h;
    int rc = sqlite3_open_v2(path, &h->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK)
        return h->db ? db_error(s, "opening", err)
                     : kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory opening", s->path);
    sqlite3_busy_handler(h->db, busy_wait, s);
    sqlite3_progress_handler(h->db, 4096, past_deadline, s);
    /* SQLite answers some lock conflicts of these first steps with SQLITE_BUSY without
     * consulting the busy handler (two connections turning a fresh file into WAL at once), so
     * they are retried here for as long as the handler would have waited. */
    double t0 = kr_now_seconds();
    kr_status st;
    for (;;) {
        st = first_steps(s, err);
        h->waited_s = kr_now_seconds() - t0;
        if (st != KR_ERR_BUSY || h->waited_s * 1000.0 >= s->busy_ms || kr_store_ms_left(s) == 0)
            break;
        struct timespec ts = { 0, 5 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return st;
}

/* One PRAGMA quick_check statement: "ok", or the file is refused as damaged. */
static kr_status run_quick_check(kr_store *s, const char *sql, kr_error *err) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(DB(s), sql, -1, &q, NULL) != SQLITE_OK)
        return db_error(s, "checking the file", err);
    kr_status st = KR_OK;
    int rc = sqlite3_step(q);
    const char *verdict = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(q, 0) : NULL;
    if (rc != SQLITE_ROW)
        st = db_error(s, "checking the file", err);
    else if (!verdict || strcmp(verdict, "ok") != 0)
        st = kr_error_set(err, KR_ERR_FORMAT,
                          "%s: the database is damaged (SQLite quick_check: %.200s); restore it "
                          "from a backup or use another file",
                          s->path, verdict ? verdict : "no answer");
    sqlite3_finalize(q);
    return st;
}

/* A damaged file is refused before a write goes into it: a write can commit into a file
 * whose other pages are broken, and the next read then fails. Checking every page costs
 * about 15 ms a MiB (a 400 MB store took 6.7 s, every ingest and every server start), so past
 * full_check_bytes only the small tables are checked whole; the candle pages a
 * write or read-back touches are checked by SQLite as it reads them (SQLITE_CORRUPT). */
static kr_status quick_check(kr_store *s, long long file_bytes, long long full_check_bytes,
                             kr_error *err) {
    if (file_bytes <= full_check_bytes) return run_quick_check(s, "PRAGMA quick_check(1)", err);
    kr_status st = run_quick_check(s, "PRAGMA quick_check(symbols)", err);
    if (st == KR_OK) st = run_quick_check(s, "PRAGMA quick_check(markets)", err);
    return st;
}

kr_status kr_store_sqlite_check_writable(const char *path, kr_error *err) {
    return kr_store_sqlite_check_writable_limited(path, KR_STORE_FULL_CHECK_BYTES, err);
}

kr_status kr_store_sqlite_check_writable_limited(const char *path, long long full_check_bytes,
                                                 kr_error *err) {
    if (!path || !*path) return kr_error_set(err, KR_ERR_INVALID_ARG, "database path is empty");
    char dir[PATH_MAX], probe[PATH_MAX + 32];
    dir_of(path, dir, sizeof dir);
    struct stat sb;
    /* Directories still to be made (the first write makes them) are judged by the nearest
     * one that exists: creating files there is what making them takes. Nothing is made now. */
    int missing = 0;
    while (stat(dir, &sb) != 0 && errno == ENOENT && strcmp(dir, "/") && strcmp(dir, ".")) {
        char up[PATH_MAX];
        dir_of(dir, up, sizeof up);
        snprintf(dir, sizeof dir, "%s", up);
        missing = 1;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return kr_error_set(err, KR_ERR_IO, "%s: cannot be a database: %s is not a directory", path,
                            dir);
    /* Permission bits do not tell (root ignores them; a read-only mount does not show in
     * them): create and remove a file where SQLite will create its own. */
    snprintf(probe, sizeof probe, "%s/.kronos-db-probe-XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0)
        return kr_error_set(err, KR_ERR_IO,
                            "%s: not writable: cannot create files in %s (%s); the store needs "
                            "to write the database and its -wal and -shm files there",
                            path, dir, strerror(errno));
    close(fd);
    unlink(probe);
    if (missing || stat(path, &sb) != 0) return KR_OK; /* created at the first write */
    if (!S_ISREG(sb.st_mode))
        return kr_error_set(err, KR_ERR_IO, "%s: not a regular file, cannot be a database", path);
    fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return kr_error_set(err, KR_ERR_IO, "%s: not writable: %s", path, strerror(errno));
    close(fd);
    kr_store *s = NULL;
    kr_status st = kr_store_open(path, &s, err);
    if (st == KR_OK) st = quick_check(s, (long long)sb.st_size, full_check_bytes, err);
    kr_store_close(s);
    return st;
}

/* busy_wait reads the busy timeout at each wait. */
static void sqlite_busy_timeout_changed(kr_store *s) { (void)s; }

static void sqlite_close(kr_store *s) {
    sqlite3_close(DB(s));
    free(s->impl);
}

/* ------------------------------------------------------------------ symbols */

static kr_status sqlite_canonical_symbol(kr_store *s, const char *symbol, char *out, size_t cap,
                                         kr_error *err) {
    sqlite3_stmt *q = NULL;
    /* An exact spelling wins over another case of it (a store written before names were
     * matched without case may hold both). */
    if (sqlite3_prepare_v2(DB(s),
                           "SELECT symbol FROM symbols WHERE symbol = ?1 COLLATE NOCASE "
                           "ORDER BY symbol = ?1 DESC, symbol LIMIT 1",
                           -1, &q, NULL) != SQLITE_OK)
        return db_error(s, "preparing the symbol lookup", err);
    sqlite3_bind_text(q, 1, symbol, -1, SQLITE_STATIC);
    kr_status st = KR_OK;
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        const char *sy = (const char *)sqlite3_column_text(q, 0);
        if (sy) snprintf(out, cap, "%s", sy);
    } else if (rc != SQLITE_DONE) {
        st = db_error(s, "looking up the symbol", err);
    }
    sqlite3_finalize(q);
    return st;
}

/* ------------------------------------------------------------------ upsert */

/* Prepares sql, a statement about one series, with ?1 and ?2 bound to symbol and interval. */
static kr_status prepare_series(kr_store *store, const char *sql, const char *symbol,
                                const char *interval, const char *step, sqlite3_stmt **q,
                                kr_error *err) {
    *q = NULL;
    if (sqlite3_prepare_v2(DB(store), sql, -1, q, NULL) != SQLITE_OK)
        return db_error(store, step, err);
    sqlite3_bind_text(*q, 1, symbol, -1, SQLITE_STATIC);
    sqlite3_bind_text(*q, 2, interval, -1, SQLITE_STATIC);
    return KR_OK;
}

/* The series after the batch's rows are written, in one pass over its rows (inside the write
 * transaction): its first and last stamps and row count for the symbols table, and
 * kr_store_check_kept_columns on its columns. */
typedef struct series_summary {
    int64_t first_ts, last_ts, rows;
} series_summary;

static kr_status summarise_series(kr_store *store, const char *symbol, const char *interval,
                                  const kr_candles *c, series_summary *out, kr_error *err) {
    sqlite3_stmt *q;
    kr_status st = prepare_series(store,
                                  "SELECT min(ts), max(ts), count(*), coalesce(sum(has_volume), "
                                  "0), coalesce(sum(has_amount), 0) FROM candles WHERE symbol = "
                                  "?1 AND interval = ?2",
                                  symbol, interval, "preparing the series summary", &q, err);
    if (st != KR_OK) return st;
    if (sqlite3_step(q) == SQLITE_ROW) {
        out->first_ts = sqlite3_column_int64(q, 0);
        out->last_ts = sqlite3_column_int64(q, 1);
        out->rows = sqlite3_column_int64(q, 2);
        st = kr_store_check_kept_columns(store, symbol, interval, c, out->rows,
                                         sqlite3_column_int64(q, 3), sqlite3_column_int64(q, 4),
                                         err);
    } else {
        st = db_error(store, "summarising the series", err);
    }
    sqlite3_finalize(q);
    return st;
}

/* The series' stored row count (0 when it has none), inside the write transaction. */
static kr_status series_rows(kr_store *store, const char *symbol, const char *interval,
                             int64_t *out, kr_error *err) {
    sqlite3_stmt *q;
    *out = 0;
    kr_status st =
        prepare_series(store, "SELECT rows FROM symbols WHERE symbol = ?1 AND interval = ?2",
                       symbol, interval, "preparing the row count", &q, err);
    if (st != KR_OK) return st;
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) *out = sqlite3_column_int64(q, 0);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) st = db_error(store, "counting rows", err);
    sqlite3_finalize(q);
    return st;
}

/* kr_store_two_bars_a_day for the first date of the batch's span that now holds two bars. */
static kr_status check_one_a_day(kr_store *store, const char *symbol, const char *interval,
                                 const kr_candles *c, kr_error *err) {
    sqlite3_stmt *q;
    kr_status st = prepare_series(store,
                                  "SELECT min(ts), max(ts) FROM candles WHERE symbol = ?1 AND "
                                  "interval = ?2 AND ts >= ?3 AND ts < ?4 GROUP BY (ts + ?5) / "
                                  "86400 HAVING count(*) > 1 ORDER BY 1 LIMIT 1",
                                  symbol, interval, "preparing the one-bar-a-day check", &q, err);
    if (st != KR_OK) return st;
    int64_t lo, hi;
    kr_store_day_span(c, &lo, &hi);
    sqlite3_bind_int64(q, 3, lo);
    sqlite3_bind_int64(q, 4, hi);
    sqlite3_bind_int64(q, 5, KR_STORE_DAY_OFFSET);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW)
        st = kr_store_two_bars_a_day(store, symbol, interval, c, sqlite3_column_int64(q, 0),
                                     sqlite3_column_int64(q, 1), err);
    else if (rc != SQLITE_DONE)
        st = db_error(store, "checking one bar a day", err);
    sqlite3_finalize(q);
    return st;
}

/* Rows per INSERT statement of an upsert: one statement per row spent half an ingest's
 * database time in sqlite3_step's per-statement work (2M rows: 2.4 s against 1.2 s with 32
 * rows a statement; past 50 it got slower again). The parameters: ?1 symbol, ?2 interval,
 * ?3 has_volume, ?4 has_amount, then ts and the six values of each row. */
enum { UPSERT_ROWS = 32, UPSERT_FIRST_PARAM = 5, UPSERT_ROW_PARAMS = 1 + KR_N_FEATURES };

/* Prepares the upsert of `rows` candles (1..UPSERT_ROWS) with the series and the batch's
 * column flags bound. A stored row the batch repeats exactly is left as it is (no change
 * counted), so the changes tell replaced rows from repeated ones. */
static kr_status prepare_upsert(kr_store *store, const char *symbol, const char *interval,
                                const kr_candles *c, int rows, sqlite3_stmt **out, kr_error *err) {
    static const char head[] = "INSERT INTO candles (symbol, interval, ts, open, high, low, "
                               "close, volume, amount, has_volume, has_amount) VALUES ";
    static const char upsert[] =
        " ON CONFLICT (symbol, interval, ts) DO UPDATE SET "
        "open = excluded.open, high = excluded.high, low = excluded.low, "
        "close = excluded.close, volume = excluded.volume, "
        "amount = excluded.amount, has_volume = excluded.has_volume, "
        "has_amount = excluded.has_amount WHERE open IS NOT excluded.open OR "
        "high IS NOT excluded.high OR low IS NOT excluded.low OR "
        "close IS NOT excluded.close OR volume IS NOT excluded.volume OR "
        "amount IS NOT excluded.amount OR "
        "has_volume IS NOT excluded.has_volume OR "
        "has_amount IS NOT excluded.has_amount";
    char sql[sizeof head + sizeof upsert + UPSERT_ROWS * 64];
    size_t o = (size_t)snprintf(sql, sizeof sql, "%s", head);
    for (int r = 0; r < rows; r++) {
        const int p = UPSERT_FIRST_PARAM + r * UPSERT_ROW_PARAMS;
        o += (size_t)snprintf(sql + o, sizeof sql - o,
                              "%s(?1, ?2, ?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?3, ?4)",
                              r ? ", " : "", p, p + 1, p + 2, p + 3, p + 4, p + 5, p + 6);
    }
    snprintf(sql + o, sizeof sql - o, "%s", upsert);
    *out = NULL;
    if (sqlite3_prepare_v2(DB(store), sql, -1, out, NULL) != SQLITE_OK)
        return db_error(store, "preparing the insert", err);
    sqlite3_bind_text(*out, 1, symbol, -1, SQLITE_STATIC);
    sqlite3_bind_text(*out, 2, interval, -1, SQLITE_STATIC);
    sqlite3_bind_int(*out, 3, c->has_volume ? 1 : 0);
    sqlite3_bind_int(*out, 4, c->has_amount ? 1 : 0);
    return KR_OK;
}

static kr_status sqlite_upsert(kr_store *store, const char *symbol, const char *interval,
                               const kr_candles *c, kr_store_upsert_stats *stats, kr_error *err) {
    kr_status st;
    sqlite3_stmt *ins = NULL, *sym = NULL;
    int64_t rows_before = 0;
    char canon[KR_STORE_NAME_MAX + 1], spelled[KR_STORE_NAME_MAX + 1];
    if ((st = exec(store, "BEGIN IMMEDIATE", "starting the write", err)) != KR_OK ||
        (st = kr_store_series_names_locked(store, &symbol, &interval, canon, spelled, err)) !=
            KR_OK)
        goto fail;
    if ((st = series_rows(store, symbol, interval, &rows_before, err)) != KR_OK) goto fail;
    const int changes0 = sqlite3_total_changes(DB(store));
    /* Full statements of UPSERT_ROWS rows, then one for the rest (prepared once, at the end). */
    const int64_t tail = c->n % UPSERT_ROWS;
    for (int64_t i = 0; i < c->n;) {
        const int rows = c->n - i >= UPSERT_ROWS ? UPSERT_ROWS : (int)tail;
        if (!ins || rows != UPSERT_ROWS) {
            sqlite3_finalize(ins);
            if ((st = prepare_upsert(store, symbol, interval, c, rows, &ins, err)) != KR_OK)
                goto fail;
        }
        for (int r = 0; r < rows; r++) {
            const double *v = c->values + (i + r) * KR_N_FEATURES;
            const int p = UPSERT_FIRST_PARAM + r * UPSERT_ROW_PARAMS;
            sqlite3_bind_int64(ins, p, c->timestamps[i + r]);
            for (int k = 0; k < KR_N_FEATURES; k++) sqlite3_bind_double(ins, p + 1 + k, v[k]);
        }
        if (sqlite3_step(ins) != SQLITE_DONE) {
            char step[64];
            snprintf(step, sizeof step, "writing rows %lld-%lld", (long long)i + 1,
                     (long long)(i + rows));
            st = db_error(store, step, err);
            goto fail;
        }
        sqlite3_reset(ins);
        i += rows;
    }
    const int64_t changed = sqlite3_total_changes(DB(store)) - changes0;
    if (kr_store_one_bar_a_day(interval) &&
        (st = check_one_a_day(store, symbol, interval, c, err)) != KR_OK)
        goto fail;
    /* Recomputed from the rows rather than adjusted, so it stays right when the batch
     * overlaps what was stored. */
    series_summary sum = { 0, 0, 0 };
    if ((st = summarise_series(store, symbol, interval, c, &sum, err)) != KR_OK) goto fail;
    if (sqlite3_prepare_v2(DB(store),
                           "INSERT OR REPLACE INTO symbols (symbol, interval, first_ts, last_ts, "
                           "rows, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                           -1, &sym, NULL) != SQLITE_OK) {
        st = db_error(store, "preparing the symbol update", err);
        goto fail;
    }
    sqlite3_bind_text(sym, 1, symbol, -1, SQLITE_STATIC);
    sqlite3_bind_text(sym, 2, interval, -1, SQLITE_STATIC);
    sqlite3_bind_int64(sym, 3, sum.first_ts);
    sqlite3_bind_int64(sym, 4, sum.last_ts);
    sqlite3_bind_int64(sym, 5, sum.rows);
    sqlite3_bind_int64(sym, 6, (sqlite3_int64)time(NULL));
    if (sqlite3_step(sym) != SQLITE_DONE) {
        st = db_error(store, "updating the symbols table", err);
        goto fail;
    }
    sqlite3_finalize(ins);
    sqlite3_finalize(sym);
    ins = sym = NULL;
    if ((st = exec(store, "COMMIT", "committing", err)) != KR_OK) goto fail;
    stats->added = sum.rows - rows_before;
    stats->replaced = changed - stats->added;
    stats->unchanged = c->n - changed;
    return KR_OK;
fail:
    sqlite3_finalize(ins);
    sqlite3_finalize(sym);
    sqlite3_exec(DB(store), "ROLLBACK", NULL, NULL, NULL);
    return st;
}

/* ------------------------------------------------------------------ read / list */

static kr_status sqlite_read(kr_store *store, const char *symbol, const char *interval,
                             int64_t from_ts, int64_t to_ts, int64_t limit_last_n,
                             kr_store_rows *rows, kr_error *err) {
    sqlite3_stmt *q = NULL;
    /* Newest first so LIMIT keeps the most recent rows. */
    if (sqlite3_prepare_v2(DB(store),
                           "SELECT ts, open, high, low, close, volume, amount, has_volume, "
                           "has_amount FROM candles WHERE symbol = ?1 AND interval = ?2 "
                           "AND ts BETWEEN ?4 AND ?5 ORDER BY ts DESC LIMIT ?3",
                           -1, &q, NULL) != SQLITE_OK)
        return db_error(store, "preparing the read", err);
    sqlite3_bind_text(q, 1, symbol, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, interval, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, limit_last_n > 0 ? limit_last_n : -1);
    sqlite3_bind_int64(q, 4, from_ts);
    sqlite3_bind_int64(q, 5, to_ts);
    kr_status st = KR_OK;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        double v[KR_N_FEATURES];
        for (int k = 0; k < KR_N_FEATURES; k++) v[k] = sqlite3_column_double(q, 1 + k);
        st = kr_store_rows_push(store, rows, sqlite3_column_int64(q, 0), v,
                                sqlite3_column_int(q, 7) != 0, sqlite3_column_int(q, 8) != 0, err);
        if (st != KR_OK) break;
    }
    if (st == KR_OK && rc != SQLITE_DONE) st = db_error(store, "reading candles", err);
    sqlite3_finalize(q);
    return st;
}

static kr_status sqlite_list(kr_store *store, const char *symbol, kr_store_entry **out, int64_t *n,
                             kr_error *err) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(
            DB(store),
            "SELECT s.symbol, s.interval, s.first_ts, s.last_ts, s.rows, s.updated_at, "
            "coalesce(m.market, '') FROM symbols s LEFT JOIN markets m ON "
            "m.symbol = s.symbol WHERE ?1 IS NULL OR s.symbol = ?1 COLLATE NOCASE "
            "ORDER BY s.symbol, s.updated_at DESC, s.last_ts DESC, s.interval",
            -1, &q, NULL) != SQLITE_OK)
        return db_error(store, "preparing the list", err);
    if (symbol) sqlite3_bind_text(q, 1, symbol, -1, SQLITE_STATIC);
    kr_store_entry *list = NULL;
    int64_t count = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        kr_store_entry *e = kr_store_entries_push(&list, &count, &cap);
        if (!e) {
            free(list);
            sqlite3_finalize(q);
            return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory listing", store->path);
        }
        const char *sy = (const char *)sqlite3_column_text(q, 0);
        const char *iv = (const char *)sqlite3_column_text(q, 1);
        snprintf(e->symbol, sizeof e->symbol, "%s", sy ? sy : "");
        snprintf(e->interval, sizeof e->interval, "%s", iv ? iv : "");
        e->first_ts = sqlite3_column_int64(q, 2);
        e->last_ts = sqlite3_column_int64(q, 3);
        e->rows = sqlite3_column_int64(q, 4);
        e->updated_at = sqlite3_column_int64(q, 5);
        const char *mk = (const char *)sqlite3_column_text(q, 6);
        snprintf(e->market, sizeof e->market, "%s", mk ? mk : "");
    }
    if (rc != SQLITE_DONE) {
        kr_status st = db_error(store, "listing symbols", err);
        free(list);
        sqlite3_finalize(q);
        return st;
    }
    sqlite3_finalize(q);
    *out = list;
    *n = count;
    return KR_OK;
}

static kr_status sqlite_set_market(kr_store *store, const char *symbol, const char *market,
                                   kr_error *err) {
    sqlite3_stmt *q = NULL;
    const char *sql = market && *market
                          ? "INSERT OR REPLACE INTO markets (symbol, market) VALUES (?1, ?2)"
                          : "DELETE FROM markets WHERE symbol = ?1";
    if (sqlite3_prepare_v2(DB(store), sql, -1, &q, NULL) != SQLITE_OK)
        return db_error(store, "preparing the market update", err);
    sqlite3_bind_text(q, 1, symbol, -1, SQLITE_STATIC);
    if (market && *market) sqlite3_bind_text(q, 2, market, -1, SQLITE_STATIC);
    kr_status st = KR_OK;
    if (sqlite3_step(q) != SQLITE_DONE) st = db_error(store, "storing the market", err);
    sqlite3_finalize(q);
    return st;
}

/* ------------------------------------------------------------------ delete */

/* count(*), min(ts), max(ts) of the series' candles in [from, to], inside the transaction. */
static kr_status range_stats(kr_store *store, const char *symbol, const char *interval,
                             int64_t from, int64_t to, int64_t out[3], kr_error *err) {
    sqlite3_stmt *q;
    kr_status st = prepare_series(store,
                                  "SELECT count(*), coalesce(min(ts), 0), coalesce(max(ts), 0) "
                                  "FROM candles WHERE symbol = ?1 AND interval = ?2 AND ts >= ?3 "
                                  "AND ts <= ?4",
                                  symbol, interval, "preparing the range count", &q, err);
    if (st != KR_OK) return st;
    sqlite3_bind_int64(q, 3, from);
    sqlite3_bind_int64(q, 4, to);
    if (sqlite3_step(q) == SQLITE_ROW) {
        for (int k = 0; k < 3; k++) out[k] = sqlite3_column_int64(q, k);
    } else {
        st = db_error(store, "counting the range", err);
    }
    sqlite3_finalize(q);
    return st;
}

/* Runs a statement about one series (?1, ?2) with integer parameters ?3.. bound to args. */
static kr_status exec_series(kr_store *store, const char *sql, const char *symbol,
                             const char *interval, const int64_t *args, int n_args,
                             const char *step, kr_error *err) {
    sqlite3_stmt *q;
    kr_status st = prepare_series(store, sql, symbol, interval, step, &q, err);
    if (st != KR_OK) return st;
    for (int k = 0; k < n_args; k++) sqlite3_bind_int64(q, 3 + k, args[k]);
    if (sqlite3_step(q) != SQLITE_DONE) st = db_error(store, step, err);
    sqlite3_finalize(q);
    return st;
}

static kr_status sqlite_delete_range(kr_store *store, const char *symbol, const char *interval,
                                     int64_t from, int64_t to, kr_store_delete_stats *stats,
                                     kr_error *err) {
    kr_status st;
    char canon[KR_STORE_NAME_MAX + 1], spelled[KR_STORE_NAME_MAX + 1];
    int64_t before = 0, hit[3], left[3];
    if ((st = exec(store, "BEGIN IMMEDIATE", "starting the delete", err)) != KR_OK ||
        (st = kr_store_series_names_locked(store, &symbol, &interval, canon, spelled, err)) !=
            KR_OK)
        goto fail;
    if ((st = series_rows(store, symbol, interval, &before, err)) != KR_OK) goto fail;
    if (before == 0) { /* no such series: nothing to do */
        if ((st = exec(store, "COMMIT", "ending the delete", err)) != KR_OK) goto fail;
        return KR_OK;
    }
    snprintf(stats->symbol, sizeof stats->symbol, "%s", symbol);
    snprintf(stats->interval, sizeof stats->interval, "%s", interval);
    if ((st = range_stats(store, symbol, interval, from, to, hit, err)) != KR_OK) goto fail;
    const int64_t range[2] = { from, to };
    if (hit[0] > 0 &&
        (st = exec_series(store,
                          "DELETE FROM candles WHERE symbol = ?1 AND interval = ?2 AND ts >= ?3 "
                          "AND ts <= ?4",
                          symbol, interval, range, 2, "deleting candles", err)) != KR_OK)
        goto fail;
    if ((st = range_stats(store, symbol, interval, KR_STORE_TS_FIRST, KR_STORE_TS_LAST, left,
                          err)) != KR_OK)
        goto fail;
    if (hit[0] > 0 && left[0] == 0) {
        if ((st = exec_series(store, "DELETE FROM symbols WHERE symbol = ?1 AND interval = ?2",
                              symbol, interval, NULL, 0, "removing the series", err)) != KR_OK ||
            (st = exec_series(store,
                              "DELETE FROM markets WHERE symbol = ?1 AND NOT EXISTS (SELECT 1 "
                              "FROM symbols WHERE symbol = ?1) AND ?2 IS NOT NULL",
                              symbol, interval, NULL, 0, "removing the market", err)) != KR_OK)
            goto fail;
    } else if (hit[0] > 0) {
        const int64_t args[4] = { left[1], left[2], left[0], (int64_t)time(NULL) };
        if ((st = exec_series(store,
                              "UPDATE symbols SET first_ts = ?3, last_ts = ?4, rows = ?5, "
                              "updated_at = ?6 WHERE symbol = ?1 AND interval = ?2",
                              symbol, interval, args, 4, "updating the symbols table", err)) !=
            KR_OK)
            goto fail;
    }
    if ((st = exec(store, "COMMIT", "committing", err)) != KR_OK) goto fail;
    kr_store_delete_stats_set(stats, hit, left);
    return KR_OK;
fail:
    sqlite3_exec(DB(store), "ROLLBACK", NULL, NULL, NULL);
    return st;
}

const kr_store_ops kr_store_sqlite_ops = {
    .open = sqlite_open,
    .close = sqlite_close,
    .busy_timeout_changed = sqlite_busy_timeout_changed,
    .canonical_symbol = sqlite_canonical_symbol,
    .upsert = sqlite_upsert,
    .read = sqlite_read,
    .list = sqlite_list,
    .set_market = sqlite_set_market,
    .delete_range = sqlite_delete_range,
};
