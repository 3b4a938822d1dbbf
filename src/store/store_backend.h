/*
 * store/store_backend — the two places candles can live behind the kr_store_* functions:
 * an SQLite file (store_sqlite.c, the embedded default) and a PostgreSQL database
 * (store_pg.c, `postgresql://...`, shared by replicas). Internal to store/.
 *
 * store.c does what does not depend on the backend — name and row checks, the canonical
 * spelling rule's callers, turning rows into kr_candles — and picks the backend by the
 * target's scheme. A backend gets names already checked and batches already validated, and
 * keeps the same semantics: an upsert is one transaction (all or nothing), a read sees the
 * last commit and never waits for a writer, a writer that cannot get its lock within the busy
 * timeout fails with KR_ERR_BUSY ("locked by another writer"), errors name s->path.
 */
#ifndef KR_MARKET_STORE_BACKEND_H
#define KR_MARKET_STORE_BACKEND_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

typedef struct kr_store_ops kr_store_ops;

struct kr_store {
    const kr_store_ops *ops;
    void *impl; /* the backend's connection */
    int busy_ms; /* how long a write waits for another writer's lock */
    int statement_ms; /* how long one statement may run (0: no bound of ours) */
    double deadline_s; /* kr_now_seconds() moment every call ends by (0: none) */
    int existing_only; /* kr_store_open_existing: no file is created, no empty one given a schema */
    char path[PATH_MAX]; /* what messages name: the file, or the URL without its password */
};

/* The password kr_store_display_name masks in a URL's user part (user:PASSWORD@),
 * percent-decoded, into out[cap]: 1, or 0 when it masks none there. When libpq reads another
 * password (an unescaped '/' or '@' in it), its messages may quote pieces of this one. */
int kr_store_url_password(const char *target, char *out, size_t cap);

/* Milliseconds left before s's deadline, for poll() and the like: -1 when it has none, 0
 * once it has passed (rounded up, so a wait of that long reaches it). */
int kr_store_ms_left(const kr_store *s);

/* The busy timeout of a lock wait starting now, cut to the deadline: milliseconds. */
int kr_store_lock_wait_ms(const kr_store *s);

/* The spelling interval has among symbol's stored series (kr_store_find_entry: "60m" finds a
 * stored "1h"), or interval itself when none matches, into out[cap]. A backend calls it
 * again under its write lock: two first writes of one series spelled differently ("1h",
 * "60m") must both land in the series the first one made, not make two. */
kr_status kr_store_resolve_interval(kr_store *s, const char *symbol, const char *interval,
                                    char *out, size_t cap, kr_error *err);

/* A writer's names of the series it writes, looked up again once it holds the write lock:
 * another writer may have stored another case of the symbol since the caller looked (two
 * first ingests of "aapl" and "AAPL" at once), or made the series under another spelling of
 * its interval (a first write spelled "60m" may have made it "1h"). *symbol and *interval are
 * pointed at canon and spelled, which hold the names as stored (or as given, for a new
 * series). */
kr_status kr_store_series_names_locked(kr_store *s, const char **symbol, const char **interval,
                                       char canon[KR_STORE_NAME_MAX + 1],
                                       char spelled[KR_STORE_NAME_MAX + 1], kr_error *err);

/* Rows of a read as the backend returns them, newest first; store.c reverses them. */
typedef struct kr_store_rows {
    kr_candles *c;
    int64_t cap;
    int all_volume, all_amount; /* every row so far had a volume / an amount */
} kr_store_rows;

/* Appends one row; KR_ERR_NOMEM (message naming the store and series) when memory runs out. */
kr_status kr_store_rows_push(kr_store *s, kr_store_rows *r, int64_t ts,
                             const double v[KR_N_FEATURES], int has_volume, int has_amount,
                             kr_error *err);

/* After an upsert's rows are written (in its transaction), of the series' `rows` rows
 * with_volume (with_amount) have a volume (amount): the error that makes it roll back when a
 * column would be lost. Reads use a column only when every row has it, so a batch without it
 * into a series whose other rows have it would drop it from the whole series, and a batch
 * with it into a series whose other rows lack it would store figures no read or export
 * returns (an export then re-ingested replaced them). KR_OK when nothing would be lost. */
kr_status kr_store_check_kept_columns(kr_store *s, const char *symbol, const char *interval,
                                      const kr_candles *c, int64_t rows, int64_t with_volume,
                                      int64_t with_amount, kr_error *err);

/* Inside an upsert's transaction, after its rows are written: the offset that makes
 * (ts + KR_STORE_DAY_OFFSET) / 86400 a day number for every stamp since 1900 (positive, so
 * SQL's truncating division floors), and whether interval is one of daily bars (one a date). */
#define KR_STORE_DAY_OFFSET 3155760000LL /* 36525 days */
int kr_store_one_bar_a_day(const char *interval);
/* [*lo, *hi): from the start of the batch's first day to the end of its last. */
void kr_store_day_span(const kr_candles *c, int64_t *lo, int64_t *hi);

/* The error that makes the upsert roll back when the series now holds two bars a and b
 * (a < b) on one date, one of them or both from c. */
kr_status kr_store_two_bars_a_day(kr_store *s, const char *symbol, const char *interval,
                                  const kr_candles *c, int64_t a, int64_t b, kr_error *err);

/* Appends one zeroed entry to a growing list; NULL when memory runs out. */
kr_store_entry *kr_store_entries_push(kr_store_entry **list, int64_t *n, int64_t *cap);

struct kr_store_ops {
    /* Connects s (s->path and s->busy_ms set) to target and checks or creates the schema. */
    kr_status (*open)(kr_store *s, const char *target, kr_error *err);
    void (*close)(kr_store *s);
    void (*busy_timeout_changed)(kr_store *s);
    /* The stored spelling of symbol (checked), or "" when nothing is stored under it. */
    kr_status (*canonical_symbol)(kr_store *s, const char *symbol, char *out, size_t cap,
                                  kr_error *err);
    /* symbol canonical, interval checked, every row of c validated; *stats filled (zeroed by
     * the caller). Both are made canonical again under the write lock (another writer may
     * have stored another spelling of either since the caller looked). */
    kr_status (*upsert)(kr_store *s, const char *symbol, const char *interval, const kr_candles *c,
                        kr_store_upsert_stats *stats, kr_error *err);
    /* The rows stamped from_ts..to_ts (both included), newest first, at most limit_last_n
     * when it is > 0. */
    kr_status (*read)(kr_store *s, const char *symbol, const char *interval, int64_t from_ts,
                      int64_t to_ts, int64_t limit_last_n, kr_store_rows *rows, kr_error *err);
    kr_status (*list)(kr_store *s, const char *symbol, kr_store_entry **out, int64_t *n,
                      kr_error *err);
    kr_status (*set_market)(kr_store *s, const char *symbol, const char *market, kr_error *err);
    /* symbol checked, interval the stored spelling (or as given when the symbol has no such
     * series), from_ts <= to_ts; in one transaction under the upsert's lock: the symbol and
     * the interval's spelling made canonical again, the range's candles removed, the symbols
     * row recomputed (removed when no candle is left, with the market when the symbol has no
     * series left); *stats filled
     * (zeroed by the caller; symbol "" when the series does not exist). */
    kr_status (*delete_range)(kr_store *s, const char *symbol, const char *interval,
                              int64_t from_ts, int64_t to_ts, kr_store_delete_stats *stats,
                              kr_error *err);
};

extern const kr_store_ops kr_store_sqlite_ops;
extern const kr_store_ops kr_store_pg_ops;

/* The SQLite file checks of kr_store_check_writable (directory, file, then an open and a
 * quick_check): every page of files up to KR_STORE_FULL_CHECK_BYTES, only the small tables'
 * pages past it (_limited takes the bound, for tests). */
#define KR_STORE_FULL_CHECK_BYTES (64LL << 20)
/* A committed delete's stats from its count/min/max of the candles removed (hit) and of those
 * left (left), as both backends' delete_range read them. */
static inline void kr_store_delete_stats_set(kr_store_delete_stats *stats, const int64_t hit[3],
                                             const int64_t left[3]) {
    stats->deleted = hit[0];
    stats->first_deleted = hit[1];
    stats->last_deleted = hit[2];
    stats->rows_left = left[0];
    stats->first_left = left[1];
    stats->last_left = left[2];
}

kr_status kr_store_sqlite_check_writable(const char *path, kr_error *err);
/* mkdir -p of the directory part of path (a store file about to be created). */
kr_status kr_store_make_parent_dirs(const char *path, kr_error *err);
kr_status kr_store_sqlite_check_writable_limited(const char *path, long long full_check_bytes,
                                                 kr_error *err);

#endif
