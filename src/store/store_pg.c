/*
 * store/store_pg — the PostgreSQL backend of the candle store (see store.h,
 * store_backend.h): the database several `kronos serve` replicas share.
 *
 * Design notes:
 *   - The same tables as the SQLite file, with text columns in the "C" collation so names
 *     sort byte by byte as SQLite sorts them, and `interval` quoted (a keyword in SQL).
 *   - An upsert is one transaction: a transaction-scoped advisory lock keyed by the symbol
 *     (any case of it) serialises writers of one symbol, so the symbols row recomputed from
 *     the candles always counts every committed batch; writers of other symbols do not wait.
 *     lock_timeout (the busy timeout) bounds the wait; past it the write fails with
 *     KR_ERR_BUSY and the transaction rolls back, nothing written.
 *   - A batch goes in as INSERT ... SELECT FROM unnest(arrays), UPSERT_CHUNK rows a statement
 *     (a few round trips however long the batch; both sides hold one chunk's arrays, not the
 *     batch's), the arrays in PostgreSQL's binary format: no value is formatted as text and
 *     parsed back, and a double arrives as its IEEE bits. store.c has checked that the batch's
 *     timestamps are strictly increasing, so no row is hit twice and the chunks' spans are
 *     disjoint. A chunk whose span holds no stored row (a new series, bars appended) is a
 *     plain INSERT: ON CONFLICT's speculative insertion costs twice as much per row, and the
 *     write lock keeps other kronos writers out. Otherwise the chunk's rows stored exactly as
 *     they are are left out first by an anti-join (a read), and the rest go through ON
 *     CONFLICT replacing equal timestamps: ON CONFLICT DO UPDATE locks (and WAL-logs) every
 *     conflicting row before its WHERE can skip it. bench/results/ingest-pg-2026-12-03.md
 *     has the measurements.
 *   - Readers run single statements (one MVCC snapshot each): they never wait for a writer
 *     and see the last commit.
 *   - The tables live in a schema of their own, `kronos` (created with the store), named in
 *     every statement (`@candles` in the SQL below is "kronos".candles), never found through
 *     the search_path: a database other applications use may have their own `candles` or
 *     `symbols`, and the search_path is whatever the role, the URL's options or a connection
 *     pooler make it. Stores made before this (kronos_schema in the search_path's first schema,
 *     usually public) are used in place, so replicas of both builds share one store during a
 *     rolling upgrade; docs/scaling.md says how to move one into `kronos`.
 *   - Schema versions are rows of kronos_schema, applied in order under an advisory lock
 *     (two replicas starting on an empty database create it once); the usual open is two
 *     reads. A version newer than this build's is refused.
 *   - Every connection carries lock_timeout = the busy timeout: a statement waiting for a lock
 *     another client holds (an ALTER TABLE, a LOCK TABLE, a migration) fails with KR_ERR_BUSY
 *     instead of hanging the request. A database that cannot be reached, or a connection lost
 *     mid-statement (a restart, a crash), is KR_ERR_UNAVAILABLE: retry later. A statement
 *     timeout set on the store (kr_store_set_statement_timeout; the server's is its request
 *     timeout) bounds a database alive but stuck: KR_ERR_TIMEOUT. It is applied lazily before
 *     a statement and kept with a pooled connection, so it costs a round trip only when it
 *     changes.
 *   - A handle with a deadline (a server's request) waits for the server only until then:
 *     statements are sent without blocking and their answers awaited in poll() (see
 *     "deadline-bound I/O" below), so a frozen or partitioned server fails the call with
 *     KR_ERR_TIMEOUT instead of hanging it; that connection is closed, never pooled.
 *   - The server opens a store per request, and a new PostgreSQL connection costs a process
 *     fork on the server (milliseconds): idle connections are kept in a small per-process pool
 *     keyed by the target; a pooled one, checked when it was made, re-reads only the version
 *     (one query). A pooled connection is never handed to a forked child (the socket is the
 *     parent's).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "base/error.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "store/store_backend.h"

#define CONN(s) (((pg_handle *)(s)->impl)->conn)
#define POOL_MAX 16
/* Any constant: the advisory lock the schema migrations take. */
#define SCHEMA_LOCK_KEY 0x6b726f6e6f73LL /* "kronos" */

/* The schema a new store is created in (see the notes above). */
#define STORE_SCHEMA "kronos"
#define SCHEMA_MAX 160 /* a quoted identifier: PostgreSQL names are at most 63 bytes */

/* Rows an upsert sends in one statement: large enough that the per-statement round trips
 * and planning vanish, small enough that the arrays (12 bytes a value) stay a few MB. */
#define UPSERT_CHUNK 65536
/* PostgreSQL's type OIDs (pg_type.dat) of the elements of the binary arrays we send. */
#define PG_INT8_OID 20u
#define PG_FLOAT8_OID 701u
/* array_recv's layout: ndim, flags, element OID, then length and lower bound of the one
 * dimension; then per element its byte length and its bytes, all integers big-endian. */
#define PG_ARRAY_HEADER 20
#define PG_ARRAY_BYTES(n) (PG_ARRAY_HEADER + (size_t)(n) * (4 + 8))

typedef struct pg_handle {
    PGconn *conn;
    char *target; /* the pool's key */
    char schema[SCHEMA_MAX]; /* the store's schema as a quoted identifier, e.g. "kronos" */
    int lock_ms; /* the connection's lock_timeout as last set */
    int statement_ms; /* its statement_timeout as last set (0: the session's default) */
    /* A statement was abandoned at the deadline, its answer never read: the connection is in
     * an unknown state, so nothing more is sent on it and it is closed, never pooled. */
    int abandoned;
} pg_handle;

/* ------------------------------------------------------------------ connection pool */

static struct {
    pthread_mutex_t mu;
    struct {
        PGconn *conn;
        char *target;
        pid_t pid;
        char schema[SCHEMA_MAX];
        int lock_ms, statement_ms;
    } idle[POOL_MAX];
    int n;
} g_pool = { PTHREAD_MUTEX_INITIALIZER, { { 0 } }, 0 };

/* An idle connection to target made by this process, still alive, or NULL; its schema and
 * lock timeout go to h. */
static PGconn *pool_take(const char *target, pg_handle *h) {
    PGconn *found = NULL;
    pid_t me = getpid();
    pthread_mutex_lock(&g_pool.mu);
    for (int i = g_pool.n - 1; i >= 0 && !found; i--) {
        if (g_pool.idle[i].pid != me || strcmp(g_pool.idle[i].target, target) != 0) continue;
        found = g_pool.idle[i].conn;
        memcpy(h->schema, g_pool.idle[i].schema, sizeof h->schema);
        h->lock_ms = g_pool.idle[i].lock_ms;
        h->statement_ms = g_pool.idle[i].statement_ms;
        free(g_pool.idle[i].target);
        g_pool.idle[i] = g_pool.idle[--g_pool.n];
    }
    pthread_mutex_unlock(&g_pool.mu);
    /* A server restart or an idle timeout closes the socket: reading what is pending notices
     * it without a round trip. */
    if (found && (!PQconsumeInput(found) || PQstatus(found) != CONNECTION_OK)) {
        PQfinish(found);
        found = NULL;
    }
    return found;
}

/* Keeps conn for reuse when it is healthy and outside a transaction; else closes it (the
 * connection is non-blocking: closing never waits for a server that does not read). */
static void pool_give(PGconn *conn, const pg_handle *h) {
    if (!h->abandoned && PQstatus(conn) == CONNECTION_OK &&
        PQtransactionStatus(conn) == PQTRANS_IDLE && h->schema[0]) {
        char *key = strdup(h->target);
        pthread_mutex_lock(&g_pool.mu);
        if (key && g_pool.n < POOL_MAX) {
            g_pool.idle[g_pool.n].conn = conn;
            g_pool.idle[g_pool.n].target = key;
            g_pool.idle[g_pool.n].pid = getpid();
            memcpy(g_pool.idle[g_pool.n].schema, h->schema, sizeof h->schema);
            g_pool.idle[g_pool.n].lock_ms = h->lock_ms;
            g_pool.idle[g_pool.n].statement_ms = h->statement_ms;
            g_pool.n++;
            conn = NULL;
            key = NULL;
        }
        pthread_mutex_unlock(&g_pool.mu);
        free(key);
    }
    if (conn) PQfinish(conn);
}

/* ------------------------------------------------------------------ errors */

/* The first line of libpq's message (the rest is DETAIL / HINT / the failed statement). */
static void first_line(const char *msg, char *out, size_t cap) {
    snprintf(out, cap, "%s", msg && *msg ? msg : "unknown error");
    out[strcspn(out, "\n")] = '\0';
    if (!strncmp(out, "ERROR:  ", 8)) memmove(out, out + 8, strlen(out + 8) + 1);
}

/* Replaces every occurrence of secret in msg by *** (by as many * when shorter), in place. */
static void scrub(char *msg, const char *secret) {
    size_t n = strlen(secret), k = n < 3 ? n : 3;
    for (char *p = strstr(msg, secret); p; p = strstr(p + k, secret)) {
        memset(p, '*', k);
        memmove(p + k, p + n, strlen(p + n) + 1);
    }
}

/* Whether a failure means the server is gone or not taking work (a restart, a crash, the
 * network): SQLSTATE class 08 (connection exception), 57P01-57P03 (shutting down, crashed,
 * starting up), 53300 (too many connections), or libpq's connection broken. */
static int unreachable(const PGconn *conn, const char *state) {
    if (PQstatus(conn) != CONNECTION_OK) return 1;
    if (!state) return 0;
    return !strncmp(state, "08", 2) || !strcmp(state, "57P01") || !strcmp(state, "57P02") ||
           !strcmp(state, "57P03") || !strcmp(state, "53300");
}

/* Fills err from a failed result (or the connection when res is NULL). */
static kr_status pg_error(const kr_store *s, const PGresult *res, const char *step, kr_error *err) {
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    char msg[512];
    first_line(res ? PQresultErrorMessage(res) : NULL, msg, sizeof msg);
    if (!res || !*PQresultErrorMessage(res)) first_line(PQerrorMessage(CONN(s)), msg, sizeof msg);
    /* 55P03: lock_timeout expired; 40P01: deadlock; 40001: serialization failure. */
    if (state && (!strcmp(state, "55P03") || !strcmp(state, "40P01") || !strcmp(state, "40001")))
        return kr_error_set(err, KR_ERR_BUSY,
                            "%s: %s: the database is locked by another writer (waited %.1f s)",
                            s->path, step, s->busy_ms / 1000.0);
    /* 57014: the statement timeout cancelled it (or an administrator did). */
    if (state && !strcmp(state, "57014"))
        return kr_error_set(err, KR_ERR_TIMEOUT,
                            "%s: %s: the database did not finish within the statement timeout "
                            "(%.1f s): it is overloaded or stuck; retry later",
                            s->path, step, s->statement_ms / 1000.0);
    if (unreachable(CONN(s), state))
        return kr_error_set(err, KR_ERR_UNAVAILABLE,
                            "%s: %s: the database cannot be reached, retry later (%s)", s->path,
                            step, msg);
    kr_status st = state && !strncmp(state, "53", 2) ? KR_ERR_NOMEM /* insufficient resources */
                                                     : KR_ERR_IO;
    return kr_error_set(err, st, "%s: %s: %s", s->path, step, msg);
}

/* sql with each @ replaced by the store's schema and a dot ("@candles" is "kronos".candles):
 * sql itself when it has none, sb's text otherwise, NULL when memory ran out. */
static const char *qualify(const kr_store *s, const char *sql, kr_sb *sb) {
    if (!strchr(sql, '@')) return sql;
    const char *schema = ((const pg_handle *)s->impl)->schema;
    for (const char *p = sql, *at; *p; p = at + 1) {
        if (!(at = strchr(p, '@'))) {
            kr_sb_append(sb, p);
            break;
        }
        kr_sb_appendn(sb, p, (size_t)(at - p));
        kr_sb_append(sb, schema);
        kr_sb_append(sb, ".");
    }
    return sb->oom ? NULL : sb->data;
}

static kr_status query(kr_store *s, const char *sql, int n, const char *const *params,
                       const char *step, PGresult **out, kr_error *err);

/* Brings the connection's statement_timeout to the store's before a statement runs: set on
 * the store after it opened (the server does so per request), and kept with a pooled
 * connection, so usually nothing to do. Only between transactions: a session setting made
 * inside one would be undone by its rollback. */
static kr_status apply_statement_timeout(kr_store *s, kr_error *err) {
    pg_handle *h = s->impl;
    if (h->statement_ms == s->statement_ms || PQtransactionStatus(CONN(s)) != PQTRANS_IDLE)
        return KR_OK;
    h->statement_ms = s->statement_ms; /* first: the query below comes back here */
    char ms[32];
    snprintf(ms, sizeof ms, "%d", s->statement_ms);
    const char *p[1] = { ms };
    PGresult *r = NULL;
    kr_status st = s->statement_ms > 0
                       ? query(s, "SELECT pg_catalog.set_config('statement_timeout', $1, false)", 1,
                               p, "setting the statement timeout", &r, err)
                       : query(s, "RESET statement_timeout", 0, NULL,
                               "resetting the statement timeout", &r, err);
    PQclear(r);
    if (st != KR_OK) h->statement_ms = -1; /* unknown: tried again next time */
    return st;
}

/* ------------------------------------------------------------------ deadline-bound I/O */

/* Every statement goes through run(): sent without blocking, its answer awaited with poll()
 * on the connection's socket until the handle's deadline (kr_store_open_until), never in
 * libpq's blocking calls. A server that stops answering (SIGSTOP, a paused VM, a network
 * partition) keeps a TCP connection open and acknowledges what is sent, so neither the
 * keepalives nor a statement_timeout (the server's own, and it is frozen) end the wait:
 * only the client's clock does. At the deadline the statement is abandoned and the
 * connection closed with it (the server rolls back an open transaction when it notices), not
 * cancelled: PQcancel would connect to the same frozen server and wait for it. */

/* Waits for events on conn's socket until s's deadline: 1 ready (*revents), 0 the deadline
 * passed, -1 a poll error. */
static int wait_socket(const kr_store *s, PGconn *conn, short events, short *revents) {
    for (;;) {
        const int left = kr_store_ms_left(s);
        if (left == 0) return 0;
        struct pollfd pfd = { .fd = PQsocket(conn), .events = events };
        if (pfd.fd < 0) return -1;
        const int ready = poll(&pfd, 1, left);
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) return -1;
        if (ready > 0) {
            *revents = pfd.revents;
            return 1;
        }
    }
}

/* Whether r is a failure (also a NULL r: PGRES_FATAL_ERROR). */
static int failed(const PGresult *r) {
    return PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK;
}

/* The statement text (its @s qualified) as PQsendQueryParams takes it, or with n < 0 as
 * PQsendQuery does (several statements, no parameters), sent and its answer read. Returns
 * the result (the first failed one when a statement of several fails, else the last; NULL
 * when there is none: libpq's message is in the connection), or NULL with *abandoned set
 * when the deadline passed first. */
static PGresult *run(kr_store *s, const char *text, int n, const char *const *params,
                     const int *lengths, const int *formats, int *abandoned) {
    pg_handle *h = s->impl;
    PGconn *conn = h->conn;
    *abandoned = 0;
    const int sent = n < 0 ? PQsendQuery(conn, text)
                           : PQsendQueryParams(conn, text, n, NULL, params, lengths, formats, 0);
    if (!sent) return NULL;
    short revents = 0;
    /* What libpq could not write at once (a batch's arrays are megabytes): written as the
     * socket takes it, reading meanwhile so the server is never stuck writing to us. */
    for (int pending; (pending = PQflush(conn)) != 0;) {
        const int ready = pending < 0 ? -1 : wait_socket(s, conn, POLLOUT | POLLIN, &revents);
        if (ready == 0) goto abandon;
        if (ready < 0 || ((revents & POLLIN) && !PQconsumeInput(conn))) return NULL;
    }
    PGresult *keep = NULL;
    for (;;) {
        while (PQisBusy(conn)) {
            const int ready = wait_socket(s, conn, POLLIN, &revents);
            if (ready == 0) {
                PQclear(keep);
                goto abandon;
            }
            /* A broken connection: PQgetResult returns its error at once. */
            if (ready < 0 || !PQconsumeInput(conn)) break;
        }
        PGresult *r = PQgetResult(conn);
        if (!r) break;
        if (keep && failed(keep)) {
            PQclear(r); /* the first failure is the one to report */
        } else {
            PQclear(keep);
            keep = r;
        }
        if (PQstatus(conn) != CONNECTION_OK) break;
    }
    return keep;
abandon:
    h->abandoned = 1;
    *abandoned = 1;
    return NULL;
}

/* The error of a statement abandoned at the deadline. */
static kr_status abandoned_error(const kr_store *s, const char *step, kr_error *err) {
    return kr_error_set(err, KR_ERR_TIMEOUT,
                        "%s: %s: the database did not answer by the deadline (a frozen or "
                        "unreachable server?); the connection was closed; retry later",
                        s->path, step);
}

/* Whether the handle may send: not after an abandoned statement. */
static kr_status usable(const kr_store *s, const char *step, kr_error *err) {
    if (!((const pg_handle *)s->impl)->abandoned) return KR_OK;
    return kr_error_set(err, KR_ERR_TIMEOUT,
                        "%s: %s: not sent: an earlier statement got no answer by the deadline; "
                        "retry later",
                        s->path, step);
}

/* Runs a statement without parameters that returns no rows (several, separated by ';',
 * allowed). */
static kr_status exec(kr_store *s, const char *sql, const char *step, kr_error *err) {
    kr_status st = usable(s, step, err);
    if (st != KR_OK || (st = apply_statement_timeout(s, err)) != KR_OK) return st;
    kr_sb sb = { 0 };
    const char *text = qualify(s, sql, &sb);
    if (!text) return kr_error_set(err, KR_ERR_NOMEM, "%s: %s: out of memory", s->path, step);
    int abandoned;
    PGresult *r = run(s, text, -1, NULL, NULL, NULL, &abandoned);
    kr_sb_free(&sb);
    if (abandoned) return abandoned_error(s, step, err);
    st = r && !failed(r) ? KR_OK : pg_error(s, r, step, err);
    PQclear(r);
    return st;
}

/* Runs a statement with parameters, text ones where formats is NULL or formats[i] is 0 and
 * binary ones of lengths[i] bytes where it is 1; *out holds the result on KR_OK (caller
 * PQclears). */
static kr_status query_formats(kr_store *s, const char *sql, int n, const char *const *params,
                               const int *lengths, const int *formats, const char *step,
                               PGresult **out, kr_error *err) {
    *out = NULL;
    kr_status st = usable(s, step, err);
    if (st != KR_OK || (st = apply_statement_timeout(s, err)) != KR_OK) return st;
    kr_sb sb = { 0 };
    const char *text = qualify(s, sql, &sb);
    if (!text) return kr_error_set(err, KR_ERR_NOMEM, "%s: %s: out of memory", s->path, step);
    int abandoned;
    PGresult *r = run(s, text, n, params, lengths, formats, &abandoned);
    kr_sb_free(&sb);
    if (abandoned) return abandoned_error(s, step, err);
    if (!r || failed(r)) {
        st = pg_error(s, r, step, err);
        PQclear(r);
        return st;
    }
    *out = r;
    return KR_OK;
}

/* Runs a statement with text parameters; *out as query_formats. */
static kr_status query(kr_store *s, const char *sql, int n, const char *const *params,
                       const char *step, PGresult **out, kr_error *err) {
    return query_formats(s, sql, n, params, NULL, NULL, step, out, err);
}

/* The first row of sql's answer as n_out integers, zeros when it has no row. */
static kr_status query_int64s(kr_store *s, const char *sql, int n, const char *const *params,
                              const char *step, int64_t *out, int n_out, kr_error *err) {
    PGresult *r = NULL;
    kr_status st = query(s, sql, n, params, step, &r, err);
    if (st != KR_OK) return st;
    for (int k = 0; k < n_out; k++)
        out[k] = PQntuples(r) > 0 ? strtoll(PQgetvalue(r, 0, k), NULL, 10) : 0;
    PQclear(r);
    return KR_OK;
}

/* Ends the transaction a failure left open. After an abandoned statement nothing is sent:
 * closing the connection rolls it back. */
static void rollback(kr_store *s) {
    if (((pg_handle *)s->impl)->abandoned || PQtransactionStatus(CONN(s)) == PQTRANS_IDLE) return;
    kr_error ignored = { 0 };
    (void)exec(s, "ROLLBACK", "rolling back", &ignored);
}

/* ------------------------------------------------------------------ schema */

/* The migrations, in order: element v-1 takes a version v-1 database to version v. */
static const char *const k_migrations[KR_STORE_SCHEMA_VERSION] = {
    "CREATE TABLE @kronos_schema (version integer PRIMARY KEY, applied_at bigint NOT NULL);"
    "CREATE TABLE @symbols ("
    " symbol text COLLATE \"C\" NOT NULL, \"interval\" text COLLATE \"C\" NOT NULL,"
    " first_ts bigint NOT NULL, last_ts bigint NOT NULL,"
    " rows bigint NOT NULL, updated_at bigint NOT NULL,"
    " PRIMARY KEY (symbol, \"interval\"));"
    "CREATE TABLE @candles ("
    " symbol text COLLATE \"C\" NOT NULL, \"interval\" text COLLATE \"C\" NOT NULL,"
    " ts bigint NOT NULL,"
    " open double precision NOT NULL, high double precision NOT NULL,"
    " low double precision NOT NULL, close double precision NOT NULL,"
    " volume double precision NOT NULL, amount double precision NOT NULL,"
    " has_volume smallint NOT NULL, has_amount smallint NOT NULL,"
    " PRIMARY KEY (symbol, \"interval\", ts));",
    /* Version 2 adds each symbol's market (its exchange calendar, series/calendar.h). */
    "CREATE TABLE @markets (symbol text COLLATE \"C\" NOT NULL PRIMARY KEY, market text NOT NULL);",
};

/* Sets the connection's lock_timeout to the busy timeout (0 would mean "wait forever": a
 * zero busy timeout fails at once instead). */
static kr_status set_lock_timeout(kr_store *s, kr_error *err) {
    pg_handle *h = s->impl;
    char ms[32];
    snprintf(ms, sizeof ms, "%d", s->busy_ms > 0 ? s->busy_ms : 1);
    const char *p[1] = { ms };
    PGresult *r = NULL;
    kr_status st = query(s, "SELECT pg_catalog.set_config('lock_timeout', $1, false)", 1, p,
                         "setting the lock timeout", &r, err);
    PQclear(r);
    if (st == KR_OK) h->lock_ms = s->busy_ms;
    return st;
}

/* Finds the store's schema (h->schema, quoted): STORE_SCHEMA when it holds kronos_schema or
 * when no store exists yet, else the schema of a store made before kronos had one — the
 * kronos_schema table (version, applied_at) the connection's search_path finds. */
static kr_status find_schema(kr_store *s, kr_error *err) {
    pg_handle *h = s->impl;
    PGresult *r = NULL;
    kr_status st =
        query(s,
              "SELECT pg_catalog.to_regclass('" STORE_SCHEMA ".kronos_schema') IS NOT NULL, "
              "(SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON "
              "n.oid = c.relnamespace WHERE c.oid = pg_catalog.to_regclass('kronos_schema') AND "
              "n.nspname NOT LIKE 'pg\\_temp%' AND (SELECT count(*) FROM pg_catalog.pg_attribute a "
              "WHERE a.attrelid = c.oid AND a.attname IN ('version', 'applied_at') AND "
              "NOT a.attisdropped) = 2)",
              0, NULL, "finding the store's schema", &r, err);
    if (st != KR_OK) return st;
    const char *name = STORE_SCHEMA;
    if (strcmp(PQgetvalue(r, 0, 0), "t") != 0 && !PQgetisnull(r, 0, 1)) name = PQgetvalue(r, 0, 1);
    char *quoted = PQescapeIdentifier(h->conn, name, strlen(name));
    PQclear(r);
    if (!quoted || strlen(quoted) >= sizeof h->schema) {
        PQfreemem(quoted);
        return kr_error_set(err, KR_ERR_NOMEM, "%s: quoting the schema name: out of memory",
                            s->path);
    }
    snprintf(h->schema, sizeof h->schema, "%s", quoted);
    PQfreemem(quoted);
    /* Statements name the schema (@); the search_path follows too, so that a name without it
     * can only reach the store's own table, never another application's. */
    char path[SCHEMA_MAX + 16];
    snprintf(path, sizeof path, "pg_catalog, %s", h->schema);
    const char *p[1] = { path };
    st = query(s, "SELECT pg_catalog.set_config('search_path', $1, false)", 1, p,
               "setting the search_path", &r, err);
    PQclear(r);
    return st;
}

typedef struct schema_state {
    int has_version_table, has_ours; /* kronos_schema; candles, symbols or markets */
    long long version;
} schema_state;

static kr_status read_schema(kr_store *s, schema_state *ss, kr_error *err) {
    /* The names as text for to_regclass: the quoted schema goes in a parameter, never into
     * a literal of the statement. */
    const char *schema = ((pg_handle *)s->impl)->schema;
    char names[4][SCHEMA_MAX + 16];
    const char *p[4];
    static const char *const tables[4] = { "kronos_schema", "candles", "symbols", "markets" };
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "%s.%s", schema, tables[i]);
        p[i] = names[i];
    }
    PGresult *r = NULL;
    kr_status st = query(s,
                         "SELECT pg_catalog.to_regclass($1) IS NOT NULL, "
                         "pg_catalog.to_regclass($2) IS NOT NULL OR pg_catalog.to_regclass($3) "
                         "IS NOT NULL OR pg_catalog.to_regclass($4) IS NOT NULL",
                         4, p, "reading the schema", &r, err);
    if (st != KR_OK) return st;
    ss->has_version_table = !strcmp(PQgetvalue(r, 0, 0), "t");
    ss->has_ours = !strcmp(PQgetvalue(r, 0, 1), "t");
    PQclear(r);
    ss->version = 0;
    if (!ss->has_version_table) return KR_OK;
    int64_t version = 0;
    st = query_int64s(s, "SELECT coalesce(max(version), 0) FROM @kronos_schema", 0, NULL,
                      "reading the schema version", &version, 1, err);
    ss->version = version;
    return st;
}

static kr_status check_schema(const kr_store *s, const schema_state *ss, kr_error *err) {
    const char *schema = ((const pg_handle *)s->impl)->schema;
    if (!ss->has_version_table && ss->has_ours)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: the schema %s holds a candles, symbols or markets table that "
                            "kronos did not make (there is no %s.kronos_schema): it belongs to "
                            "another application; kronos keeps its tables in the schema "
                            "\"" STORE_SCHEMA "\": rename that application's schema, or give "
                            "kronos another database",
                            s->path, schema, schema);
    if (ss->version > KR_STORE_SCHEMA_VERSION)
        return kr_error_set(err, KR_ERR_UNSUPPORTED,
                            "%s: schema version %lld was written by a newer kronos (this one "
                            "reads version %d)",
                            s->path, ss->version, KR_STORE_SCHEMA_VERSION);
    return KR_OK;
}

/* CREATE SCHEMA kronos, with what to do when the role may not. */
static kr_status create_schema(kr_store *s, kr_error *err) {
    const char *step = "creating the schema \"" STORE_SCHEMA "\"";
    int abandoned;
    PGresult *r =
        run(s, "CREATE SCHEMA IF NOT EXISTS " STORE_SCHEMA, -1, NULL, NULL, NULL, &abandoned);
    if (abandoned) return abandoned_error(s, step, err);
    kr_status st = KR_OK;
    if (!r || failed(r)) {
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        if (state && !strcmp(state, "42501")) {
            char msg[256];
            first_line(PQresultErrorMessage(r), msg, sizeof msg);
            st = kr_error_set(
                err, KR_ERR_IO,
                "%s: cannot create the schema \"" STORE_SCHEMA
                "\" (%s): create it once as the database's owner: CREATE SCHEMA " STORE_SCHEMA
                " AUTHORIZATION %s",
                s->path, msg, PQuser(CONN(s)));
        } else {
            st = pg_error(s, r, step, err);
        }
    }
    PQclear(r);
    return st;
}

/* Checks the schema with reads; applies the missing migrations, under a lock, when needed.
 * Only the lock makes the answer final: catalog lookups outside a transaction can see another
 * process's migration half committed, so anything but "current" or "newer" is read again
 * under it. */
static kr_status init_schema(kr_store *s, kr_error *err) {
    schema_state ss;
    kr_status st = read_schema(s, &ss, err);
    if (st != KR_OK) return st;
    if (ss.version == KR_STORE_SCHEMA_VERSION) return KR_OK; /* the usual case: two reads */
    if (ss.version > KR_STORE_SCHEMA_VERSION) return check_schema(s, &ss, err);
    /* A session lock taken before the transaction: a transaction started after the lock is
     * granted sees the catalog as the previous holder committed it (one started before, and
     * waiting inside, could still look at the old one). */
    char lock[96], unlock[96];
    snprintf(lock, sizeof lock, "SELECT pg_advisory_lock(%lld)", SCHEMA_LOCK_KEY);
    snprintf(unlock, sizeof unlock, "SELECT pg_advisory_unlock(%lld)", SCHEMA_LOCK_KEY);
    if ((st = exec(s, lock, "locking the schema", err)) != KR_OK) return st;
    if ((st = exec(s, "BEGIN", "creating the schema", err)) != KR_OK ||
        /* Another process may have migrated while this one waited: read again. */
        (st = read_schema(s, &ss, err)) != KR_OK || (st = check_schema(s, &ss, err)) != KR_OK)
        goto fail;
    if (ss.version == 0 && (st = create_schema(s, err)) != KR_OK) goto fail;
    for (long long v = ss.version + 1; v <= KR_STORE_SCHEMA_VERSION; v++) {
        char step[64], mark[160];
        snprintf(step, sizeof step, "applying schema version %lld", v);
        snprintf(mark, sizeof mark,
                 "INSERT INTO @kronos_schema (version, applied_at) VALUES (%lld, %lld)", v,
                 (long long)time(NULL));
        if ((st = exec(s, k_migrations[v - 1], step, err)) != KR_OK ||
            (st = exec(s, mark, step, err)) != KR_OK)
            goto fail;
    }
    st = exec(s, "COMMIT", "committing the schema", err);
fail:
    rollback(s);
    kr_error ignored = { 0 }; /* after an abandoned statement: closing the connection unlocks */
    (void)exec(s, unlock, "unlocking the schema", &ignored);
    return st;
}

/* ------------------------------------------------------------------ open / close */

static void quiet_notices(void *arg, const char *message) {
    (void)arg;
    (void)message; /* "relation already exists"-style notices are not errors */
}

static kr_status pg_open_new(kr_store *s, pg_handle *h, const char *target, kr_error *err);

static kr_status pg_open(kr_store *s, const char *target, kr_error *err) {
    pg_handle *h = calloc(1, sizeof *h);
    if (!h || !(h->target = strdup(target))) {
        free(h);
        return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", s->path);
    }
    s->impl = h;
    h->conn = pool_take(target, h);
    if (h->conn) {
        /* Checked when it was made; one read tells whether another kronos migrated since. */
        PGresult *r = NULL;
        kr_error why = { 0 };
        int current = (h->lock_ms == s->busy_ms || set_lock_timeout(s, &why) == KR_OK) &&
                      query(s, "SELECT coalesce(max(version), 0) FROM @kronos_schema", 0, NULL,
                            "reading the schema version", &r, &why) == KR_OK &&
                      PQntuples(r) == 1 && atoll(PQgetvalue(r, 0, 0)) == KR_STORE_SCHEMA_VERSION;
        PQclear(r);
        if (current) return KR_OK;
        /* Dropped since it was pooled (a restart), or changed under it: start afresh, unless
         * the server did not answer by the deadline: a new connection has no time left. */
        PQfinish(h->conn);
        h->conn = NULL;
        if (h->abandoned) {
            if (err) *err = why;
            return why.status;
        }
    }
    return pg_open_new(s, h, target, err);
}

/* The SQLSTATE in a message libpq built with PQERRORS_VERBOSE ("...: FATAL:  53300: sorry,
 * ..."; the severity may be translated, the code never is) into out; 0 when there is none
 * (the failure was the client's or the network's: no server answered with an error). */
static int sqlstate_of(const char *msg, char out[6]) {
    for (const char *p = strstr(msg, ":  "); p; p = strstr(p + 1, ":  ")) {
        const char *c = p + 3;
        int ok = 1;
        for (int i = 0; i < 5 && ok; i++)
            ok = (c[i] >= '0' && c[i] <= '9') || (c[i] >= 'A' && c[i] <= 'Z');
        if (ok && c[5] == ':' && c[6] == ' ') {
            memcpy(out, c, 5);
            out[5] = '\0';
            return 1;
        }
    }
    return 0;
}

/* Whether libpq's message says the other end does not speak PostgreSQL's protocol: the URL
 * names a port where something else listens (a web server, SSH, another database). That is
 * a configuration to fix, not a server to wait for, though no SQLSTATE says so and the probe
 * would read it as no answer. libpq's messages are matched in English: it translates them
 * only for a program that set LC_MESSAGES, which kronos does not (elsewhere the fallback is
 * the probe's "retry later", the reading before this check). */
static int not_postgres(const char *message) {
    static const char *const violations[] = {
        "received invalid response to SSL negotiation",
        "received invalid response to GSSAPI negotiation",
        "expected authentication request from server, but received",
        "unexpected message from server during startup",
    };
    for (size_t i = 0; i < sizeof violations / sizeof violations[0]; i++)
        if (strstr(message, violations[i])) return 1;
    return 0;
}

/* Why a connection to target failed: KR_ERR_UNAVAILABLE when the server does not answer or
 * does not take connections now (down, restarting, unreachable: retry later), KR_ERR_IO when
 * it answers but refuses this one (a wrong password, no such database or role: an operator's
 * to fix). message: libpq's, verbose (with the server's SQLSTATE when it sent one). */
static kr_status connect_failure(const kr_store *s, const char *target, const char *message) {
    char state[6];
    if (not_postgres(message)) return KR_ERR_IO;
    if (sqlstate_of(message, state)) {
        /* 53300: every connection slot taken (max_connections, or the role's or database's
         * CONNECTION LIMIT); 53000: out of resources; 57P01-57P03: shutting down, crashed,
         * starting or recovering: a server answering and busy, retry later. Any other code is
         * a refusal the server means (28P01 a wrong password, 3D000 no such database). Read
         * from the code, not the words, so a server speaking another language is read alike. */
        return !strcmp(state, "53300") || !strcmp(state, "53000") || !strncmp(state, "57P0", 4)
                   ? KR_ERR_UNAVAILABLE
                   : KR_ERR_IO;
    }
    /* No server error: the probe tells a server that is down from one that answers. It gets a
     * short connect_timeout of its own and no SSL (placed after dbname, they win): a server
     * that answers but fails the URL's SSL requirements (no SSL, a certificate that does not
     * verify) is up, and the failure is the configuration's, not one to wait out. */
    /* libpq's probe blocks for up to its connect_timeout (whole seconds, at least 2): with less
     * of the deadline left there is no time to ask, and a server that did not take the
     * connection is taken for one that cannot be reached. */
    const int left = kr_store_ms_left(s);
    if (left >= 0 && left < 3000) return KR_ERR_UNAVAILABLE;
    const char *const keys[] = { "dbname", "connect_timeout", "sslmode", NULL };
    const char *const vals[] = { target, "3", "disable", NULL };
    const PGPing ping = PQpingParams(keys, vals, 1);
    /* NO_ATTEMPT: a client-side problem (the parameters), no server to wait for. */
    return ping == PQPING_OK || ping == PQPING_NO_ATTEMPT ? KR_ERR_IO : KR_ERR_UNAVAILABLE;
}

/* The connect_timeout in effect for conn, in milliseconds for poll(): libpq's reading of it
 * (unset or <= 0: no limit, -1; 1 counts as 2 s). */
static int connect_timeout_ms(PGconn *conn) {
    int seconds = 0;
    PQconninfoOption *in_use = PQconninfo(conn);
    for (PQconninfoOption *o = in_use; o && o->keyword; o++)
        if (!strcmp(o->keyword, "connect_timeout") && o->val) seconds = atoi(o->val);
    PQconninfoFree(in_use);
    if (seconds <= 0) return -1;
    return (seconds < 2 ? 2 : seconds) * 1000;
}

/* PQconnectdbParams, but with the errors of the connection attempt verbose (PQconnectdb's own
 * could not be: verbosity is a setting of the PGconn it returns), so a refusal carries the
 * server's SQLSTATE; the connection's later errors are libpq's default ones again. The
 * connect_timeout bounds the whole attempt here (libpq applies it per address), and s's
 * deadline bounds it too (*at_deadline set when it ended the attempt). Returns the
 * connection, non-blocking, or NULL with the first line of why in msg (empty: out of
 * memory). */
static PGconn *connect_verbose(const kr_store *s, const char *const *keys, const char *const *vals,
                               char *msg, size_t cap, int *at_deadline) {
    *at_deadline = 0;
    PGconn *conn = PQconnectStartParams(keys, vals, 1);
    msg[0] = '\0'; /* stays empty when memory ran out */
    if (!conn) return NULL;
    PQsetErrorVerbosity(conn, PQERRORS_VERBOSE);
    PostgresPollingStatusType ps =
        PQstatus(conn) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING;
    const int limit_ms = ps == PGRES_POLLING_FAILED ? 0 : connect_timeout_ms(conn);
    const double t0 = kr_now_seconds();
    while (ps != PGRES_POLLING_OK && ps != PGRES_POLLING_FAILED) {
        const double spent = (kr_now_seconds() - t0) * 1000.0;
        int wait = limit_ms < 0 ? -1 : spent >= limit_ms ? 0 : (int)(limit_ms - spent);
        const int left = kr_store_ms_left(s);
        const int deadline_first = left >= 0 && (wait < 0 || left < wait);
        if (deadline_first) wait = left;
        struct pollfd pfd = { .fd = PQsocket(conn),
                              .events = ps == PGRES_POLLING_READING ? POLLIN : POLLOUT };
        const int ready = pfd.fd < 0 ? -1 : poll(&pfd, 1, wait);
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0) {
            /* libpq's own words for it; no SQLSTATE, so the probe decides (unless it was
             * the deadline: then no server answered in time, and there is none left). */
            PQfinish(conn);
            *at_deadline = deadline_first;
            snprintf(msg, cap, deadline_first ? "no answer by the deadline" : "timeout expired");
            return NULL;
        }
        if (ready < 0) {
            snprintf(msg, cap, "waiting for the server: %s", strerror(errno));
            PQfinish(conn);
            return NULL;
        }
        ps = PQconnectPoll(conn);
    }
    if (ps != PGRES_POLLING_OK || PQstatus(conn) != CONNECTION_OK) {
        first_line(PQerrorMessage(conn), msg, cap);
        PQfinish(conn);
        return NULL;
    }
    PQsetErrorVerbosity(conn, PQERRORS_DEFAULT);
    /* Every later statement waits in poll() with the deadline (run), never in a libpq call
     * that blocks: writes included, and closing. */
    if (PQsetnonblocking(conn, 1) != 0) {
        snprintf(msg, cap, "cannot make the connection non-blocking");
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

/* A new connection to target, its schema found and checked or created. */
static kr_status pg_open_new(kr_store *s, pg_handle *h, const char *target, kr_error *err) {
    /* The URL's own settings come last, so they win over these defaults. TCP keepalives
     * notice a server that vanished without closing the connection (a power cut, a
     * partition) in about a minute instead of the kernel's two hours, and tcp_user_timeout
     * (30 s) a connection whose sent data stays unacknowledged that long. Neither notices a
     * frozen server (its kernel answers for it): the deadline does (run). */
    const char *const keys[] = { "connect_timeout",  "application_name",
                                 "keepalives_idle",  "keepalives_interval",
                                 "keepalives_count", "tcp_user_timeout",
                                 "dbname",           NULL };
    const char *const vals[] = { "10", "kronos", "30", "10", "3", "30000", target, NULL };
    /* libpq's messages about a malformed URL quote the bad part, which can be the password:
     * repeated only when the URL holds none (s->path is the URL with passwords as ***). */
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(target, &perr);
    if (!opts) {
        char msg[512];
        first_line(perr, msg, sizeof msg);
        PQfreemem(perr);
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: not a valid PostgreSQL URL%s%s", s->path,
                            strcmp(s->path, target) ? "" : ": ",
                            strcmp(s->path, target) ? "" : msg);
    }
    /* The password the URL's user part holds as kronos reads it (kr_store_display_name
     * masks it) against libpq's: when they differ (an unescaped '/' or '@' in it: libpq took a
     * piece of it for a host, a port or a database), libpq's messages may quote those pieces,
     * so its reason is kept out of the message (it still classes the failure). */
    char meant[512], *libpq_password = NULL;
    for (PQconninfoOption *o = opts; o->keyword; o++)
        if (!strcmp(o->keyword, "password") && o->val && *o->val) libpq_password = o->val;
    const int misread = kr_store_url_password(target, meant, sizeof meant) &&
                        (!libpq_password || strcmp(meant, libpq_password) != 0);
    /* A second attempt when the server sent no error and the probe finds it up: a server
     * restarting after a crash drops connections for a moment and may answer the probe an
     * instant later, which would otherwise read as a refusal for good. */
    for (int attempt = 0;; attempt++) {
        char msg[512];
        int at_deadline;
        if ((h->conn = connect_verbose(s, keys, vals, msg, sizeof msg, &at_deadline))) break;
        if (!msg[0]) {
            PQconninfoFree(opts);
            return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory connecting", s->path);
        }
        if (at_deadline) {
            PQconninfoFree(opts);
            return kr_error_set(err, KR_ERR_TIMEOUT,
                                "%s: cannot connect: the server did not answer by the deadline "
                                "(a frozen or unreachable server?); retry later",
                                s->path);
        }
        for (PQconninfoOption *o = opts; o->keyword; o++)
            if (!strcmp(o->keyword, "password") && o->val && *o->val) scrub(msg, o->val);
        kr_status why = connect_failure(s, target, msg);
        char state[6];
        const int foreign = not_postgres(msg);
        if (why == KR_ERR_IO && attempt == 0 && !foreign && !sqlstate_of(msg, state)) continue;
        PQconninfoFree(opts);
        if (misread)
            snprintf(msg, sizeof msg,
                     "the reason is not shown: the password in the URL reads otherwise to "
                     "libpq, which may quote pieces of it (write a '/' in it as %%2F, an '@' "
                     "as %%40)");
        return kr_error_set(err, why, "%s: cannot connect%s: %s%s", s->path,
                            why == KR_ERR_UNAVAILABLE ? " (retry later)" : "", msg,
                            foreign ? " (is a PostgreSQL server listening at that host and "
                                      "port? something else answered)"
                                    : "");
    }
    PQconninfoFree(opts);
    PQsetNoticeProcessor(h->conn, quiet_notices, NULL);
    kr_status st;
    if ((st = set_lock_timeout(s, err)) != KR_OK || (st = find_schema(s, err)) != KR_OK ||
        (st = init_schema(s, err)) != KR_OK) { /* never pooled */
        PQfinish(h->conn);
        h->conn = NULL;
    }
    return st;
}

static void pg_close(kr_store *s) {
    pg_handle *h = s->impl;
    if (h->conn) pool_give(h->conn, h);
    free(h->target);
    free(h);
    s->impl = NULL;
}

static void pg_busy_timeout_changed(kr_store *s) {
    kr_error ignored = { 0 };
    /* On failure lock_ms stays stale: a pooled reuse sets it again. Writes set their own
     * (SET LOCAL lock_timeout) as well. */
    (void)set_lock_timeout(s, &ignored);
}

/* ------------------------------------------------------------------ symbols */

static kr_status pg_canonical_symbol(kr_store *s, const char *symbol, char *out, size_t cap,
                                     kr_error *err) {
    const char *p[1] = { symbol };
    PGresult *r = NULL;
    /* An exact spelling wins over another case of it, as in the SQLite file. */
    kr_status st = query(s,
                         "SELECT symbol FROM @symbols WHERE lower(symbol) = lower($1) "
                         "ORDER BY symbol = $1 DESC, symbol LIMIT 1",
                         1, p, "looking up the symbol", &r, err);
    if (st != KR_OK) return st;
    if (PQntuples(r) > 0) snprintf(out, cap, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return KR_OK;
}

/* ------------------------------------------------------------------ upsert */

static unsigned char *put_be32(unsigned char *p, uint32_t v) {
    for (int k = 3; k >= 0; k--, v >>= 8) p[k] = (unsigned char)(v & 0xff);
    return p + 4;
}

static unsigned char *put_be64(unsigned char *p, uint64_t v) {
    for (int k = 7; k >= 0; k--, v >>= 8) p[k] = (unsigned char)(v & 0xff);
    return p + 8;
}

/* Rows [first, first + n) of c's column col (-1: the timestamps, as int8; else the feature,
 * as float8) as a one-dimensional array in PostgreSQL's binary format, written to out
 * (PG_ARRAY_BYTES(n) bytes); returns the length. A double goes as its bits, so what is stored
 * is the value itself, -0.0 and denormals included. */
static int array_bin(unsigned char *out, const kr_candles *c, int col, int64_t first, int n) {
    unsigned char *p = out;
    p = put_be32(p, 1); /* dimensions */
    p = put_be32(p, 0); /* no NULLs */
    p = put_be32(p, col < 0 ? PG_INT8_OID : PG_FLOAT8_OID);
    p = put_be32(p, (uint32_t)n);
    p = put_be32(p, 1); /* lower bound */
    for (int64_t i = first; i < first + n; i++) {
        uint64_t bits;
        if (col < 0) {
            bits = (uint64_t)c->timestamps[i];
        } else {
            double v = c->values[i * KR_N_FEATURES + col];
            memcpy(&bits, &v, sizeof bits);
        }
        p = put_be32(p, 8);
        p = put_be64(p, bits);
    }
    return (int)(p - out);
}

/* The series' stored row count (0 when it has none), inside the write transaction. */
static kr_status series_rows(kr_store *s, const char *const *sym, int64_t *out, kr_error *err) {
    *out = 0;
    return query_int64s(s, "SELECT rows FROM @symbols WHERE symbol = $1 AND \"interval\" = $2", 2,
                        sym, "counting rows", out, 1, err);
}

/* kr_store_two_bars_a_day for the first date of the batch's span that now holds two bars. */
static kr_status check_one_a_day(kr_store *s, const char *symbol, const char *interval,
                                 const kr_candles *c, kr_error *err) {
    char lo[32], hi[32], off[32];
    int64_t day0, day1;
    kr_store_day_span(c, &day0, &day1);
    snprintf(lo, sizeof lo, "%lld", (long long)day0);
    snprintf(hi, sizeof hi, "%lld", (long long)day1);
    snprintf(off, sizeof off, "%lld", KR_STORE_DAY_OFFSET);
    const char *p[5] = { symbol, interval, lo, hi, off };
    PGresult *r = NULL;
    kr_status st = query(s,
                         "SELECT min(ts), max(ts) FROM @candles WHERE symbol = $1 AND "
                         "\"interval\" = $2 AND ts >= $3::bigint AND ts < $4::bigint "
                         "GROUP BY (ts + $5::bigint) / 86400 HAVING count(*) > 1 ORDER BY 1 "
                         "LIMIT 1",
                         5, p, "checking one bar a day", &r, err);
    if (st != KR_OK) return st;
    if (PQntuples(r) > 0)
        st = kr_store_two_bars_a_day(s, symbol, interval, c, strtoll(PQgetvalue(r, 0, 0), NULL, 10),
                                     strtoll(PQgetvalue(r, 0, 1), NULL, 10), err);
    PQclear(r);
    return st;
}

/* A chunk that no stored row overlaps: u(t, o, h, l, c, v, a) = the unnested arrays $3-$9,
 * the flags $10, $11. */
#define CHUNK_INSERT                                                                            \
    "INSERT INTO @candles (symbol, \"interval\", ts, open, high, low, close, volume, amount, "  \
    "has_volume, has_amount) SELECT $1, $2, t, o, h, l, c, v, a, $10::smallint, $11::smallint " \
    "FROM unnest($3::bigint[], $4::float8[], $5::float8[], $6::float8[], $7::float8[], "        \
    "$8::float8[], $9::float8[]) AS u(t, o, h, l, c, v, a) "
static const char k_insert_chunk[] = CHUNK_INSERT;

/* A chunk overlapping stored rows. A stored row the batch repeats exactly is left as it is
 * (not counted in the command's row count), so the count tells replaced rows from repeated
 * ones, as in the SQLite file. The anti-join leaves those rows out before ON CONFLICT would
 * lock each; the ON CONFLICT WHERE states the same rule. $12, $13 (the chunk's first and last
 * timestamps) bound the anti-join's scan of the series: the planner cannot derive it from
 * ts = u.t. */
static const char k_upsert_chunk[] = CHUNK_INSERT
    "WHERE NOT EXISTS (SELECT 1 FROM @candles k WHERE k.symbol = $1 AND k.\"interval\" = $2 AND "
    "k.ts BETWEEN $12::bigint AND $13::bigint AND k.ts = u.t AND (k.open, k.high, k.low, "
    "k.close, k.volume, k.amount, k.has_volume, k.has_amount) IS NOT DISTINCT FROM (u.o, u.h, "
    "u.l, u.c, u.v, u.a, $10::smallint, $11::smallint)) "
    "ON CONFLICT (symbol, \"interval\", ts) DO UPDATE SET open = EXCLUDED.open, "
    "high = EXCLUDED.high, low = EXCLUDED.low, close = EXCLUDED.close, "
    "volume = EXCLUDED.volume, amount = EXCLUDED.amount, "
    "has_volume = EXCLUDED.has_volume, has_amount = EXCLUDED.has_amount "
    "WHERE (candles.open, candles.high, candles.low, candles.close, "
    "candles.volume, candles.amount, candles.has_volume, candles.has_amount) "
    "IS DISTINCT FROM (EXCLUDED.open, EXCLUDED.high, EXCLUDED.low, "
    "EXCLUDED.close, EXCLUDED.volume, EXCLUDED.amount, EXCLUDED.has_volume, "
    "EXCLUDED.has_amount)";

/* Writes rows [first, first + n) of c inside the upsert's transaction and adds the rows it
 * inserted or changed to *changed. params: symbol, interval, the seven columns' arrays (the
 * buffers bin, PG_ARRAY_BYTES(n) bytes each, filled here), the two flags. */
static kr_status write_chunk(kr_store *s, const kr_candles *c, int64_t first, int n,
                             const char *const *params, unsigned char *const *bin, int64_t *changed,
                             kr_error *err) {
    int lengths[13] = { 0 };
    const int formats[13] = { 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0 };
    for (int k = -1; k < KR_N_FEATURES; k++) lengths[3 + k] = array_bin(bin[k + 1], c, k, first, n);
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%lld", (long long)c->timestamps[first]);
    snprintf(hi, sizeof hi, "%lld", (long long)c->timestamps[first + n - 1]);
    const char *p[13], *span[4] = { params[0], params[1], lo, hi };
    memcpy(p, params, 11 * sizeof *p);
    p[11] = lo;
    p[12] = hi;
    PGresult *r = NULL;
    kr_status st = query(s,
                         "SELECT EXISTS (SELECT 1 FROM @candles WHERE symbol = $1 AND \"interval\" "
                         "= $2 AND ts BETWEEN $3::bigint AND $4::bigint)",
                         4, span, "writing the candles", &r, err);
    if (st != KR_OK) return st;
    int overlaps = PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    /* Plain INSERT where no stored row can conflict: the write lock keeps other kronos
     * writers out (a row another program inserts meanwhile fails the batch with a duplicate
     * key, nothing written). */
    st = query_formats(s, overlaps ? k_upsert_chunk : k_insert_chunk, overlaps ? 13 : 11, p,
                       lengths, formats, "writing the candles", &r, err);
    if (st != KR_OK) return st;
    *changed += strtoll(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return KR_OK;
}

/* A write's lock_timeout: the busy timeout, ended before the deadline by a margin (a quarter
 * of what is left, at most 250 ms) for the server's "lock timeout" to arrive while the client
 * still listens: a busy answer, the connection kept, rather than one abandoned. */
static int lock_wait_ms(const kr_store *s) {
    const int left = kr_store_ms_left(s);
    if (left < 0 || left >= s->busy_ms + 250) return s->busy_ms;
    const int margin = left / 4 < 250 ? left / 4 : 250;
    return left - margin < s->busy_ms ? left - margin : s->busy_ms;
}

/* A COMMIT whose answer never came (abandoned at the deadline) may have been applied: the
 * message says so, after the server's or the deadline's words. */
static void commit_unknown(const kr_store *s, kr_status st, kr_error *err) {
    if (st != KR_ERR_TIMEOUT || !((const pg_handle *)s->impl)->abandoned || !err) return;
    const size_t n = strlen(err->message);
    snprintf(err->message + n, sizeof err->message - n,
             " (whether the commit was applied is unknown: read the series back)");
}

/* Starts a write of one series (`starting`: "starting the write", "starting the delete"): a
 * transaction whose lock waits end by the busy timeout or the deadline, holding the symbol's
 * write lock, so an upsert and a delete of one symbol run one after the other; then the
 * series' names as stored (kr_store_series_names_locked). The caller rolls back on an
 * error. */
static kr_status begin_series_write(kr_store *s, const char *starting, const char **symbol,
                                    const char **interval, char *canon, char *spelled,
                                    kr_error *err) {
    /* lock_timeout 0 would mean "wait forever": a zero busy timeout fails at once instead. The
     * wait ends by the deadline too, as a lock timeout (nothing written) rather than a
     * connection given up. */
    char timeout[64];
    const int lock_ms = lock_wait_ms(s);
    snprintf(timeout, sizeof timeout, "SET LOCAL lock_timeout = %d", lock_ms > 0 ? lock_ms : 1);
    const char *p[1] = { *symbol };
    PGresult *r = NULL;
    kr_status st;
    if ((st = exec(s, "BEGIN", starting, err)) != KR_OK ||
        (st = exec(s, timeout, starting, err)) != KR_OK ||
        (st = query(s, "SELECT pg_advisory_xact_lock(hashtext('kronos:' || lower($1)))", 1, p,
                    "waiting for the write lock", &r, err)) != KR_OK)
        return st;
    PQclear(r);
    return kr_store_series_names_locked(s, symbol, interval, canon, spelled, err);
}

static kr_status pg_upsert(kr_store *s, const char *symbol, const char *interval,
                           const kr_candles *c, kr_store_upsert_stats *stats, kr_error *err) {
    unsigned char *cols[1 + KR_N_FEATURES] = { NULL };
    kr_status st = KR_OK;
    int64_t chunk = c->n < UPSERT_CHUNK ? c->n : UPSERT_CHUNK;
    for (int k = 0; k <= KR_N_FEATURES; k++)
        if (!(cols[k] = malloc(PG_ARRAY_BYTES(chunk)))) {
            st = kr_error_set(err, KR_ERR_NOMEM, "%s: %s %s: out of memory", s->path, symbol,
                              interval);
            goto done;
        }
    char now[32];
    snprintf(now, sizeof now, "%lld", (long long)time(NULL));
    const char *flags[2] = { c->has_volume ? "1" : "0", c->has_amount ? "1" : "0" };
    const char *ins[11] = { symbol,
                            interval,
                            (const char *)cols[0],
                            (const char *)cols[1],
                            (const char *)cols[2],
                            (const char *)cols[3],
                            (const char *)cols[4],
                            (const char *)cols[5],
                            (const char *)cols[6],
                            flags[0],
                            flags[1] };
    const char *sym[3] = { symbol, interval, now };
    PGresult *r = NULL;
    int64_t rows_before = 0, rows_after = 0, changed = 0;
    char canon[KR_STORE_NAME_MAX + 1], spelled[KR_STORE_NAME_MAX + 1];
    if ((st = begin_series_write(s, "starting the write", &symbol, &interval, canon, spelled,
                                 err)) != KR_OK)
        goto fail;
    ins[0] = sym[0] = symbol;
    ins[1] = sym[1] = interval;
    if ((st = series_rows(s, sym, &rows_before, err)) != KR_OK) goto fail;
    for (int64_t first = 0; first < c->n; first += UPSERT_CHUNK) {
        int n = (int)(c->n - first < UPSERT_CHUNK ? c->n - first : UPSERT_CHUNK);
        if ((st = write_chunk(s, c, first, n, ins, cols, &changed, err)) != KR_OK) goto fail;
    }
    if (kr_store_one_bar_a_day(interval) &&
        (st = check_one_a_day(s, symbol, interval, c, err)) != KR_OK)
        goto fail;
    int64_t kept[3]; /* rows, rows with a volume, rows with an amount */
    if ((st = query_int64s(s,
                           "SELECT count(*), coalesce(sum(has_volume), 0), "
                           "coalesce(sum(has_amount), 0) FROM @candles WHERE symbol = $1 AND "
                           "\"interval\" = $2",
                           2, ins, "checking the stored columns", kept, 3, err)) != KR_OK ||
        (st = kr_store_check_kept_columns(s, symbol, interval, c, kept[0], kept[1], kept[2],
                                          err)) != KR_OK)
        goto fail;
    /* Recomputed from the rows rather than adjusted, so it stays right when the batch
     * overlaps what was stored. */
    if ((st = query(s,
                    "INSERT INTO @symbols (symbol, \"interval\", first_ts, last_ts, rows, "
                    "updated_at) SELECT $1, $2, min(ts), max(ts), count(*), $3::bigint FROM "
                    "@candles WHERE symbol = $1 AND \"interval\" = $2 "
                    "ON CONFLICT (symbol, \"interval\") DO UPDATE SET first_ts = "
                    "EXCLUDED.first_ts, last_ts = EXCLUDED.last_ts, rows = EXCLUDED.rows, "
                    "updated_at = EXCLUDED.updated_at",
                    3, sym, "updating the symbols table", &r, err)) != KR_OK)
        goto fail;
    PQclear(r);
    if ((st = series_rows(s, sym, &rows_after, err)) != KR_OK) goto fail;
    if ((st = exec(s, "COMMIT", "committing", err)) == KR_OK) {
        stats->added = rows_after - rows_before;
        stats->replaced = changed - stats->added;
        stats->unchanged = c->n - changed;
        goto done;
    }
    commit_unknown(s, st, err);
fail:
    rollback(s);
done:
    for (int k = 0; k <= KR_N_FEATURES; k++) free(cols[k]);
    return st;
}

/* ------------------------------------------------------------------ read / list */

static kr_status pg_read(kr_store *s, const char *symbol, const char *interval, int64_t from_ts,
                         int64_t to_ts, int64_t limit_last_n, kr_store_rows *rows, kr_error *err) {
    char limit[32], from[32], to[32];
    snprintf(limit, sizeof limit, "%lld", (long long)limit_last_n);
    snprintf(from, sizeof from, "%lld", (long long)from_ts);
    snprintf(to, sizeof to, "%lld", (long long)to_ts);
    const char *p[5] = { symbol, interval, limit_last_n > 0 ? limit : NULL, from, to };
    PGresult *r = NULL;
    /* Newest first so LIMIT keeps the most recent rows (LIMIT NULL: all of them). */
    kr_status st = query(s,
                         "SELECT ts, open, high, low, close, volume, amount, has_volume, "
                         "has_amount FROM @candles WHERE symbol = $1 AND \"interval\" = $2 "
                         "AND ts BETWEEN $4::bigint AND $5::bigint ORDER BY ts DESC LIMIT "
                         "$3::bigint",
                         5, p, "reading candles", &r, err);
    if (st != KR_OK) return st;
    int n = PQntuples(r);
    for (int i = 0; i < n && st == KR_OK; i++) {
        double v[KR_N_FEATURES];
        for (int k = 0; k < KR_N_FEATURES; k++) v[k] = strtod(PQgetvalue(r, i, 1 + k), NULL);
        st =
            kr_store_rows_push(s, rows, strtoll(PQgetvalue(r, i, 0), NULL, 10), v,
                               atoi(PQgetvalue(r, i, 7)) != 0, atoi(PQgetvalue(r, i, 8)) != 0, err);
    }
    PQclear(r);
    return st;
}

static kr_status pg_list(kr_store *s, const char *symbol, kr_store_entry **out, int64_t *n,
                         kr_error *err) {
    const char *p[1] = { symbol };
    PGresult *r = NULL;
    kr_status st = query(s,
                         "SELECT s.symbol, s.\"interval\", s.first_ts, s.last_ts, s.rows, "
                         "s.updated_at, coalesce(m.market, '') FROM @symbols s LEFT JOIN @markets "
                         "m ON m.symbol = s.symbol WHERE $1::text IS NULL OR lower(s.symbol) = "
                         "lower($1) ORDER BY s.symbol, s.updated_at DESC, s.last_ts DESC, "
                         "s.\"interval\"",
                         1, p, "listing symbols", &r, err);
    if (st != KR_OK) return st;
    kr_store_entry *list = NULL;
    int64_t count = 0, cap = 0;
    int rows = PQntuples(r);
    for (int i = 0; i < rows; i++) {
        kr_store_entry *e = kr_store_entries_push(&list, &count, &cap);
        if (!e) {
            free(list);
            PQclear(r);
            return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory listing", s->path);
        }
        snprintf(e->symbol, sizeof e->symbol, "%s", PQgetvalue(r, i, 0));
        snprintf(e->interval, sizeof e->interval, "%s", PQgetvalue(r, i, 1));
        e->first_ts = strtoll(PQgetvalue(r, i, 2), NULL, 10);
        e->last_ts = strtoll(PQgetvalue(r, i, 3), NULL, 10);
        e->rows = strtoll(PQgetvalue(r, i, 4), NULL, 10);
        e->updated_at = strtoll(PQgetvalue(r, i, 5), NULL, 10);
        snprintf(e->market, sizeof e->market, "%s", PQgetvalue(r, i, 6));
    }
    PQclear(r);
    *out = list;
    *n = count;
    return KR_OK;
}

static kr_status pg_set_market(kr_store *s, const char *symbol, const char *market, kr_error *err) {
    const char *p[2] = { symbol, market };
    PGresult *r = NULL;
    kr_status st = market && *market
                       ? query(s,
                               "INSERT INTO @markets (symbol, market) VALUES ($1, $2) "
                               "ON CONFLICT (symbol) DO UPDATE SET market = EXCLUDED.market",
                               2, p, "storing the market", &r, err)
                       : query(s, "DELETE FROM @markets WHERE symbol = $1", 1, p,
                               "storing the market", &r, err);
    PQclear(r);
    return st;
}

/* ------------------------------------------------------------------ delete */

/* count(*), min(ts), max(ts) of the series' candles in [p[2], p[3]] (p: symbol, interval,
 * from, to as text), inside the transaction. */
static kr_status pg_range_stats(kr_store *s, const char *const *p, int64_t out[3], kr_error *err) {
    return query_int64s(s,
                        "SELECT count(*), coalesce(min(ts), 0), coalesce(max(ts), 0) FROM "
                        "@candles WHERE symbol = $1 AND \"interval\" = $2 AND ts >= $3::bigint "
                        "AND ts <= $4::bigint",
                        4, p, "counting the range", out, 3, err);
}

static kr_status pg_delete_range(kr_store *s, const char *symbol, const char *interval,
                                 int64_t from, int64_t to, kr_store_delete_stats *stats,
                                 kr_error *err) {
    char lo[32], hi[32], all_lo[32], all_hi[32], now[32], n_left[32], first[32], last[32];
    snprintf(lo, sizeof lo, "%lld", (long long)from);
    snprintf(hi, sizeof hi, "%lld", (long long)to);
    snprintf(all_lo, sizeof all_lo, "%lld", (long long)KR_STORE_TS_FIRST);
    snprintf(all_hi, sizeof all_hi, "%lld", (long long)KR_STORE_TS_LAST);
    snprintf(now, sizeof now, "%lld", (long long)time(NULL));
    char canon[KR_STORE_NAME_MAX + 1], spelled[KR_STORE_NAME_MAX + 1];
    const char *p[4] = { symbol, interval, lo, hi };
    PGresult *r = NULL;
    int64_t before = 0, hit[3], left[3];
    kr_status st;
    if ((st = begin_series_write(s, "starting the delete", &symbol, &interval, canon, spelled,
                                 err)) != KR_OK)
        goto fail;
    p[0] = symbol;
    p[1] = interval;
    if ((st = series_rows(s, p, &before, err)) != KR_OK) goto fail;
    if (before == 0) { /* no such series: nothing to do */
        if ((st = exec(s, "COMMIT", "ending the delete", err)) != KR_OK) goto fail;
        return KR_OK;
    }
    snprintf(stats->symbol, sizeof stats->symbol, "%s", symbol);
    snprintf(stats->interval, sizeof stats->interval, "%s", interval);
    if ((st = pg_range_stats(s, p, hit, err)) != KR_OK) goto fail;
    if (hit[0] > 0) {
        if ((st = query(s,
                        "DELETE FROM @candles WHERE symbol = $1 AND \"interval\" = $2 AND ts >= "
                        "$3::bigint AND ts <= $4::bigint",
                        4, p, "deleting candles", &r, err)) != KR_OK)
            goto fail;
        PQclear(r);
    }
    const char *all[4] = { symbol, interval, all_lo, all_hi };
    if ((st = pg_range_stats(s, all, left, err)) != KR_OK) goto fail;
    if (hit[0] > 0 && left[0] == 0) {
        if ((st = query(s, "DELETE FROM @symbols WHERE symbol = $1 AND \"interval\" = $2", 2, p,
                        "removing the series", &r, err)) != KR_OK)
            goto fail;
        PQclear(r);
        if ((st = query(s,
                        "DELETE FROM @markets WHERE symbol = $1 AND NOT EXISTS (SELECT 1 FROM "
                        "@symbols WHERE symbol = $1)",
                        1, p, "removing the market", &r, err)) != KR_OK)
            goto fail;
        PQclear(r);
    } else if (hit[0] > 0) {
        snprintf(n_left, sizeof n_left, "%lld", (long long)left[0]);
        snprintf(first, sizeof first, "%lld", (long long)left[1]);
        snprintf(last, sizeof last, "%lld", (long long)left[2]);
        const char *up[6] = { symbol, interval, first, last, n_left, now };
        if ((st = query(s,
                        "UPDATE @symbols SET first_ts = $3::bigint, last_ts = $4::bigint, rows = "
                        "$5::bigint, updated_at = $6::bigint WHERE symbol = $1 AND \"interval\" "
                        "= $2",
                        6, up, "updating the symbols table", &r, err)) != KR_OK)
            goto fail;
        PQclear(r);
    }
    if ((st = exec(s, "COMMIT", "committing", err)) != KR_OK) {
        commit_unknown(s, st, err);
        goto fail;
    }
    kr_store_delete_stats_set(stats, hit, left);
    return KR_OK;
fail:
    rollback(s);
    return st;
}

const kr_store_ops kr_store_pg_ops = {
    .open = pg_open,
    .close = pg_close,
    .busy_timeout_changed = pg_busy_timeout_changed,
    .canonical_symbol = pg_canonical_symbol,
    .upsert = pg_upsert,
    .read = pg_read,
    .list = pg_list,
    .set_market = pg_set_market,
    .delete_range = pg_delete_range,
};
