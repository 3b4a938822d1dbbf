/*
 * store/store: the SQLite candle store. Round trip, upsert replacing equal timestamps, a bad
 * batch leaving the file untouched, a reader running while another connection writes (WAL),
 * name validation, path resolution and foreign / corrupted / newer files refused cleanly;
 * readers (other handles, another process) never wait for a writer's open transaction, a
 * second writer gets a clear "busy" error; the start-up writability check; kill -9 of a
 * process in the middle of its deletes leaving whole deletes only.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store/store.h"
#include "store/store_backend.h"
#include "test_support.h"

static const char *g_tmp; /* kr_test_dir() */

static int setup(void **state) {
    (void)state;
    g_tmp = kr_test_dir();
    return g_tmp ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return 0;
}

static const char *db_path(const char *name) {
    static char p[1200];
    snprintf(p, sizeof p, "%s/%s", g_tmp, name);
    return p;
}

/* n daily candles from 2024-01-01 + start days, close = base + i. */
static kr_candles *make_candles(int64_t start, int64_t n, double base) {
    kr_candles *c = calloc(1, sizeof *c);
    c->n = n;
    c->timestamps = malloc((size_t)n * sizeof(int64_t));
    c->values = malloc((size_t)n * 6 * sizeof(double));
    c->has_volume = c->has_amount = 1;
    c->date_only = 1;
    for (int64_t i = 0; i < n; i++) {
        c->timestamps[i] = 1704067200 + (start + i) * 86400;
        double close = base + (double)(start + i);
        double *v = c->values + i * 6;
        v[0] = close - 0.5;
        v[1] = close + 1.0;
        v[2] = close - 1.0;
        v[3] = close;
        v[4] = 1000.0 + (double)i;
        v[5] = v[4] * close;
    }
    return c;
}

static kr_store *open_ok(const char *path) {
    kr_store *s = NULL;
    kr_error err = { 0 };
    if (kr_store_open(path, &s, &err) != KR_OK) fail_msg("open %s: %s", path, err.message);
    return s;
}

/* A libpq key=value string given as the database is refused, never created as an SQLite file
 * of that name nor shown (it may hold a password); a file that only contains '=' is a file. */
static void test_keyword_conninfo_refused(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    static const char *const bad[] = { "host=db user=k password=s3cret",
                                       "  dbname = k password=s3cret", "PASSWORD=s3cret host=h" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kr_store *st = NULL;
        kr_error err = { 0 };
        assert_int_equal(kr_store_open(bad[i], &st, &err), KR_ERR_INVALID_ARG);
        assert_null(st);
        assert_null(strstr(err.message, "s3cret"));
        assert_non_null(strstr(err.message, "postgresql://"));
        err = (kr_error){ 0 };
        assert_int_equal(kr_store_check_writable(bad[i], &err), KR_ERR_INVALID_ARG);
        assert_null(strstr(err.message, "s3cret"));
        char out[256];
        err = (kr_error){ 0 };
        assert_int_equal(kr_store_resolve_path(bad[i], out, sizeof out, &err), KR_ERR_INVALID_ARG);
        assert_null(strstr(err.message, "s3cret"));
        struct stat sb;
        assert_int_not_equal(stat(bad[i], &sb), 0); /* no file of that name */
    }
    kr_store *st = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_store_open("./host=db.sqlite", &st, &err), KR_OK);
    kr_store_close(st);
    assert_int_equal(chdir(cwd), 0);
}

static void test_round_trip(void **state) {
    (void)state;
    const char *path = db_path("rt.db");
    kr_store *s = open_ok(path);
    kr_candles *c = make_candles(0, 100, 50.0);
    kr_error err = { 0 };
    if (kr_store_upsert(s, "AAPL", "1d", c, &err) != KR_OK) fail_msg("%s", err.message);
    kr_store_close(s);

    s = open_ok(path); /* persisted across handles */
    kr_candles *r = NULL;
    if (kr_store_read(s, "AAPL", "1d", 0, &r, &err) != KR_OK) fail_msg("%s", err.message);
    assert_int_equal(r->n, 100);
    assert_memory_equal(r->timestamps, c->timestamps, 100 * sizeof(int64_t));
    assert_memory_equal(r->values, c->values, 100 * 6 * sizeof(double));
    assert_int_equal(r->has_volume, 1);
    assert_int_equal(r->has_amount, 1);
    assert_int_equal(r->date_only, 1);
    kr_candles_free(r);

    /* The last 10, still ascending. */
    assert_int_equal(kr_store_read(s, "AAPL", "1d", 10, &r, &err), KR_OK);
    assert_int_equal(r->n, 10);
    assert_int_equal(r->timestamps[0], c->timestamps[90]);
    assert_int_equal(r->timestamps[9], c->timestamps[99]);
    assert_true(r->values[9 * 6 + 3] == c->values[99 * 6 + 3]);
    kr_candles_free(r);

    /* A second interval and symbol; list ordering and metadata. */
    kr_candles *h = make_candles(0, 5, 10.0);
    h->has_amount = 0;
    for (int i = 0; i < 5; i++) h->timestamps[i] = 1704067200 + 3600 * i + 1800;
    assert_int_equal(kr_store_upsert(s, "AAPL", "1h", h, &err), KR_OK);
    assert_int_equal(kr_store_upsert(s, "600977.SH", "5min", c, &err), KR_OK);
    kr_store_entry *list = NULL;
    int64_t n = 0;
    assert_int_equal(kr_store_list(s, NULL, &list, &n, &err), KR_OK);
    assert_int_equal(n, 3);
    assert_string_equal(list[0].symbol, "600977.SH");
    assert_string_equal(list[1].symbol, "AAPL");
    assert_string_equal(list[2].symbol, "AAPL");
    for (int i = 1; i < 3; i++) {
        if (!strcmp(list[i].interval, "1d")) {
            assert_int_equal(list[i].rows, 100);
            assert_int_equal(list[i].first_ts, c->timestamps[0]);
            assert_int_equal(list[i].last_ts, c->timestamps[99]);
            assert_true(list[i].updated_at > 1700000000);
        } else {
            assert_string_equal(list[i].interval, "1h");
            assert_int_equal(list[i].rows, 5);
        }
    }
    free(list);
    assert_int_equal(kr_store_list(s, "AAPL", &list, &n, &err), KR_OK);
    assert_int_equal(n, 2);
    free(list);
    assert_int_equal(kr_store_list(s, "NOPE", &list, &n, &err), KR_OK);
    assert_int_equal(n, 0);
    free(list);

    assert_int_equal(kr_store_read(s, "AAPL", "1h", 0, &r, &err), KR_OK);
    assert_int_equal(r->has_amount, 0);
    assert_int_equal(r->date_only, 0);
    kr_candles_free(r);

    /* Unknown series: an error naming it. */
    assert_int_equal(kr_store_read(s, "MSFT", "1d", 0, &r, &err), KR_ERR_INVALID_ARG);
    assert_null(r);
    assert_non_null(strstr(err.message, "MSFT 1d"));
    kr_candles_free(h);
    kr_candles_free(c);
    kr_store_close(s);
}

static void test_upsert_overwrites(void **state) {
    (void)state;
    kr_store *s = open_ok(db_path("ow.db"));
    kr_candles *a = make_candles(0, 50, 100.0), *b = make_candles(40, 20, 500.0);
    kr_error err = { 0 };
    assert_int_equal(kr_store_upsert(s, "X", "1d", a, &err), KR_OK);
    assert_int_equal(kr_store_upsert(s, "X", "1d", b, &err), KR_OK);
    kr_candles *r = NULL;
    assert_int_equal(kr_store_read(s, "X", "1d", 0, &r, &err), KR_OK);
    assert_int_equal(r->n, 60);
    for (int64_t i = 0; i < 60; i++) {
        assert_int_equal(r->timestamps[i], 1704067200 + i * 86400);
        double want = i < 40 ? 100.0 + (double)i : 500.0 + (double)i;
        assert_true(r->values[i * 6 + 3] == want);
    }
    kr_candles_free(r);
    kr_store_entry *list = NULL;
    int64_t n = 0;
    assert_int_equal(kr_store_list(s, "X", &list, &n, &err), KR_OK);
    assert_int_equal(n, 1);
    assert_int_equal(list[0].rows, 60);
    assert_int_equal(list[0].last_ts, 1704067200 + 59 * 86400);
    free(list);
    kr_candles_free(a);
    kr_candles_free(b);
    kr_store_close(s);
}

static void expect_bad_batch(kr_store *s, kr_candles *bad, const char *needle) {
    kr_error err = { 0 };
    assert_int_equal(kr_store_upsert(s, "X", "1d", bad, &err), KR_ERR_INVALID_ARG);
    if (!strstr(err.message, needle) || !strstr(err.message, "nothing was written"))
        fail_msg("message '%s' lacks '%s'", err.message, needle);
    /* What was there before is intact, and nothing of the batch was added. */
    kr_candles *r = NULL;
    assert_int_equal(kr_store_read(s, "X", "1d", 0, &r, &err), KR_OK);
    assert_int_equal(r->n, 10);
    for (int i = 0; i < 10; i++) assert_true(r->values[i * 6 + 3] == 100.0 + i);
    kr_candles_free(r);
}

static void test_bad_batch_writes_nothing(void **state) {
    (void)state;
    kr_store *s = open_ok(db_path("bad.db"));
    kr_error err = { 0 };
    kr_candles *good = make_candles(0, 10, 100.0);
    assert_int_equal(kr_store_upsert(s, "X", "1d", good, &err), KR_OK);

    kr_candles *bad = make_candles(5, 20, 900.0); /* overlaps rows 5..9 and adds 10..24 */
    bad->values[14 * 6 + 1] = bad->values[14 * 6 + 2] - 1.0; /* high < low in row 15 */
    expect_bad_batch(s, bad, "row 15 (2024-01-20): high");
    kr_candles_free(bad);

    bad = make_candles(5, 20, 900.0);
    bad->values[19 * 6 + 3] = NAN;
    expect_bad_batch(s, bad, "row 20 (2024-01-25), close: not a finite");
    kr_candles_free(bad);

    bad = make_candles(5, 20, 900.0);
    bad->values[2 * 6 + 0] = -1.0;
    expect_bad_batch(s, bad, "row 3 (2024-01-08), open");
    kr_candles_free(bad);

    bad = make_candles(5, 20, 900.0);
    bad->timestamps[7] = bad->timestamps[6];
    expect_bad_batch(s, bad, "row 8");
    kr_candles_free(bad);

    bad = make_candles(5, 20, 900.0);
    bad->values[3 * 6 + 4] = -5.0;
    expect_bad_batch(s, bad, "volume");
    kr_candles_free(bad);

    /* Epoch seconds far outside 1900-2200 (a C caller's unit mistake) are refused too. */
    bad = make_candles(5, 20, 900.0);
    bad->timestamps[19] = 2000000000000LL; /* milliseconds, year 2033, read as seconds */
    expect_bad_batch(s, bad, "row 20, timestamp 2000000000000");
    kr_candles_free(bad);
    bad = make_candles(5, 20, 900.0);
    bad->timestamps[0] = -2500000000LL; /* 1890 */
    expect_bad_batch(s, bad, "outside the years 1900-2200");
    kr_candles_free(bad);

    /* A bad first batch of a new symbol leaves no symbols row behind. */
    bad = make_candles(0, 3, 1.0);
    bad->values[2 * 6 + 5] = INFINITY;
    assert_int_equal(kr_store_upsert(s, "NEW", "1d", bad, &err), KR_ERR_INVALID_ARG);
    kr_store_entry *list = NULL;
    int64_t n = 0;
    assert_int_equal(kr_store_list(s, "NEW", &list, &n, &err), KR_OK);
    assert_int_equal(n, 0);
    free(list);
    kr_candles_free(bad);

    kr_candles empty = { 0 };
    assert_int_equal(kr_store_upsert(s, "X", "1d", &empty, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "no candles"));
    kr_candles_free(good);
    kr_store_close(s);
}

/* ---- concurrency: a writer thread appends batches while the main thread reads. */

enum { BATCHES = 30, BATCH_ROWS = 40 };

static void *writer_main(void *arg) {
    const char *path = arg;
    kr_store *s = NULL;
    kr_error err = { 0 };
    if (kr_store_open(path, &s, &err) != KR_OK) return strdup(err.message);
    for (int b = 0; b < BATCHES; b++) {
        kr_candles *c = make_candles((int64_t)b * BATCH_ROWS, BATCH_ROWS, 10.0);
        kr_status st = kr_store_upsert(s, "CONC", "1d", c, &err);
        kr_candles_free(c);
        if (st != KR_OK) {
            kr_store_close(s);
            return strdup(err.message);
        }
    }
    kr_store_close(s);
    return NULL;
}

static void test_concurrent_reader(void **state) {
    (void)state;
    char path[1200];
    snprintf(path, sizeof path, "%s", db_path("conc.db"));
    kr_store *r = open_ok(path);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, writer_main, path), 0);
    int reads = 0, seen_partial = 0;
    int64_t last_n = 0;
    for (;;) {
        kr_candles *c = NULL;
        kr_error err = { 0 };
        kr_status st = kr_store_read(r, "CONC", "1d", 0, &c, &err);
        if (st == KR_OK) {
            /* Each read sees whole batches only, in order, never fewer rows than before. */
            assert_int_equal(c->n % BATCH_ROWS, 0);
            assert_true(c->n >= last_n);
            for (int64_t i = 0; i < c->n; i++) {
                assert_int_equal(c->timestamps[i], 1704067200 + i * 86400);
                assert_true(c->values[i * 6 + 3] == 10.0 + (double)i);
            }
            last_n = c->n;
            seen_partial |= c->n > 0 && c->n < BATCHES * BATCH_ROWS;
            kr_candles_free(c);
            reads++;
            if (last_n == BATCHES * BATCH_ROWS) break;
        } else if (!strstr(err.message, "no candles stored")) {
            fail_msg("read during writes: %s", err.message);
        }
    }
    void *werr = NULL;
    pthread_join(th, &werr);
    if (werr) fail_msg("writer: %s", (char *)werr);
    assert_true(reads > 0);
    print_message("reads during writes: %d, partial states seen: %d\n", reads, seen_partial);
    kr_store_close(r);
}

/* ---- an ingest in progress: another connection holds its write transaction open. */

static void exec_ok(sqlite3 *db, const char *sql) {
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) fail_msg("%s: %s", sql, msg);
}

/* Rows stored for AAPL 1d as a fresh handle sees them, or -1 with the error printed. A busy
 * timeout of 0 turns any wait for a lock into an immediate failure. */
static int64_t rows_seen(const char *path) {
    kr_store *s = NULL;
    kr_candles *c = NULL;
    kr_error err = { 0 };
    int64_t n = -1;
    if (kr_store_open(path, &s, &err) == KR_OK) {
        kr_store_set_busy_timeout(s, 0);
        if (kr_store_read(s, "AAPL", "1d", 0, &c, &err) == KR_OK) n = c->n;
    }
    if (n < 0) print_message("read: %s\n", err.message);
    kr_candles_free(c);
    kr_store_close(s);
    return n;
}

static void test_readers_do_not_wait_for_a_writer(void **state) {
    (void)state;
    char path[1200];
    snprintf(path, sizeof path, "%s", db_path("held.db"));
    kr_store *s = open_ok(path);
    kr_candles *c = make_candles(0, 50, 10.0);
    kr_error err = { 0 };
    assert_int_equal(kr_store_upsert(s, "AAPL", "1d", c, &err), KR_OK);
    kr_store_close(s);

    /* The writer: an uncommitted 51st row, as an ingest holds it until its COMMIT. */
    sqlite3 *w = NULL;
    assert_int_equal(sqlite3_open(path, &w), SQLITE_OK);
    exec_ok(w, "BEGIN IMMEDIATE");
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO candles VALUES ('AAPL', '1d', %lld, 1, 2, 0.5, 1.5, 10, 15, 1, 1);"
             "UPDATE symbols SET rows = rows + 1 WHERE symbol = 'AAPL'",
             (long long)c->timestamps[49] + 86400);
    exec_ok(w, sql);

    /* Other handles in this process open and read the last commit without waiting. */
    assert_int_equal(rows_seen(path), 50);
    kr_store *r = open_ok(path);
    kr_store_set_busy_timeout(r, 0);
    kr_store_entry *list = NULL;
    int64_t n = 0;
    if (kr_store_list(r, NULL, &list, &n, &err) != KR_OK) fail_msg("list: %s", err.message);
    assert_int_equal(n, 1);
    assert_int_equal(list[0].rows, 50);
    free(list);

    /* And so does another process (what `kronos analyze` is while `kronos ingest` runs). */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(60); /* a hang is a failure, not a stuck test run */
        _exit(rows_seen(path) == 50 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    /* A second writer waits for the lock, then says so and writes nothing. */
    kr_store *w2 = open_ok(path);
    kr_store_set_busy_timeout(w2, 50);
    kr_candles *more = make_candles(100, 5, 10.0);
    assert_int_equal(kr_store_upsert(w2, "AAPL", "1d", more, &err), KR_ERR_BUSY);
    assert_non_null(strstr(err.message, path));
    assert_non_null(strstr(err.message, "locked by another writer"));
    assert_non_null(strstr(err.message, "nothing was written"));

    /* The writer commits: readers see it, the second writer's retry goes through. */
    exec_ok(w, "COMMIT");
    sqlite3_close(w);
    kr_candles *got = NULL;
    assert_int_equal(kr_store_read(r, "AAPL", "1d", 0, &got, &err), KR_OK);
    assert_int_equal(got->n, 51);
    kr_candles_free(got);
    if (kr_store_upsert(w2, "AAPL", "1d", more, &err) != KR_OK) fail_msg("%s", err.message);
    assert_int_equal(rows_seen(path), 56);
    kr_store_close(w2);
    kr_store_close(r);

    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "ok");
    sqlite3_finalize(q);
    sqlite3_close(db);
    kr_candles_free(more);
    kr_candles_free(c);
}

/* Two handles creating one new file at once: one creates the schema, both open it. */
static void *open_main(void *arg) {
    kr_store *s = NULL;
    kr_error err = { 0 };
    if (kr_store_open(arg, &s, &err) != KR_OK) return strdup(err.message);
    kr_store_close(s);
    return NULL;
}

static void test_concurrent_create(void **state) {
    (void)state;
    for (int round = 0; round < 20; round++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/create%d.db", g_tmp, round);
        pthread_t th[4];
        for (int i = 0; i < 4; i++)
            assert_int_equal(pthread_create(&th[i], NULL, open_main, path), 0);
        for (int i = 0; i < 4; i++) {
            void *msg = NULL;
            pthread_join(th[i], &msg);
            if (msg) fail_msg("open: %s", (char *)msg);
        }
        kr_store *s = open_ok(path);
        kr_store_entry *list = NULL;
        int64_t n = -1;
        kr_error err = { 0 };
        assert_int_equal(kr_store_list(s, NULL, &list, &n, &err), KR_OK);
        assert_int_equal(n, 0);
        free(list);
        kr_store_close(s);
    }
}

/* ---- the start-up check of `kronos serve --db` and `kronos ingest`. */

static void test_check_writable(void **state) {
    (void)state;
    kr_error err = { 0 };
    /* A new file in a writable directory: fine, and nothing is left behind. */
    char dir[1200], path[1300];
    snprintf(dir, sizeof dir, "%s/w", g_tmp);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/new.db", dir);
    if (kr_store_check_writable(path, &err) != KR_OK) fail_msg("%s", err.message);
    struct stat sb;
    assert_int_not_equal(stat(path, &sb), 0);
    assert_int_equal(rmdir(dir), 0); /* empty: the probe was removed */

    /* An existing store: fine. */
    kr_store *s = open_ok(db_path("ok.db"));
    kr_store_close(s);
    assert_int_equal(kr_store_check_writable(db_path("ok.db"), &err), KR_OK);

    /* Under a regular file (mkdir -p of the parents let it through). */
    assert_int_equal(kr_test_write_file(db_path("plain"), "x", 1), 0);
    snprintf(path, sizeof path, "%s/plain/k.db", g_tmp);
    assert_int_equal(kr_store_check_writable(path, &err), KR_ERR_IO);
    assert_non_null(strstr(err.message, path));
    assert_non_null(strstr(err.message, "not a directory"));

    /* A directory nobody can create files in, even root. */
    assert_int_equal(kr_store_check_writable("/proc/kronos-test.db", &err), KR_ERR_IO);
    assert_non_null(strstr(err.message, "/proc/kronos-test.db: not writable"));

    /* Not a database. */
    assert_int_equal(
        kr_test_write_file(db_path("junk.db"), "not sqlite at all, just text......", 34), 0);
    assert_int_equal(kr_store_check_writable(db_path("junk.db"), &err), KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "junk.db"));
    assert_int_equal(kr_store_check_writable(g_tmp, &err), KR_ERR_IO);

    /* Permission bits (root is exempt from them, so only checked for other users). */
    if (geteuid() != 0) {
        snprintf(dir, sizeof dir, "%s/ro", g_tmp);
        assert_int_equal(mkdir(dir, 0555), 0);
        snprintf(path, sizeof path, "%s/k.db", dir);
        assert_int_equal(kr_store_check_writable(path, &err), KR_ERR_IO);
        assert_non_null(strstr(err.message, "not writable"));
        chmod(dir, 0755);
        rmdir(dir);
    }
}

/* Overwrites page `page` (1-based) of a checkpointed SQLite file with garbage. */
static void damage_page(const char *path, long page) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    char junk[4096];
    memset(junk, 0xA5, sizeof junk);
    assert_int_equal(fseek(f, (page - 1) * 4096, SEEK_SET), 0);
    assert_int_equal(fwrite(junk, 1, sizeof junk, f), sizeof junk);
    fclose(f);
}

static long root_page(const char *path, const char *table) {
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_schema WHERE name = ?", -1, &q, NULL),
        SQLITE_OK);
    sqlite3_bind_text(q, 1, table, -1, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    long page = (long)sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return page;
}

/* Past the whole-file bound only the small tables are checked (a 400 MB store took 6.7 s to
 * check at every ingest): damage among the candles is then left to SQLite's reads, damage in
 * the series table is still refused. Under the bound every page is checked. */
static void test_check_bounded(void **state) {
    (void)state;
    const char *names[2] = { "cand.db", "sym.db" };
    char path[2][1300];
    for (int k = 0; k < 2; k++) {
        snprintf(path[k], sizeof path[k], "%s", db_path(names[k]));
        kr_store *s = open_ok(path[k]);
        kr_error err = { 0 };
        for (int i = 0; i < 4; i++) {
            char sym[8];
            snprintf(sym, sizeof sym, "S%d", i);
            kr_candles *c = make_candles(0, 2000, 10.0 + i);
            if (kr_store_upsert(s, sym, "1d", c, &err) != KR_OK) fail_msg("%s", err.message);
            kr_candles_free(c);
        }
        kr_store_close(s); /* checkpoints the -wal into the file */
    }
    struct stat sb;
    assert_int_equal(stat(path[0], &sb), 0);
    long last = (long)(sb.st_size / 4096);
    assert_true(last > 20);
    damage_page(path[0], last - 1); /* a candle leaf */
    damage_page(path[1], root_page(path[1], "symbols"));

    kr_error err = { 0 };
    assert_int_equal(kr_store_sqlite_check_writable_limited(path[0], 0, &err), KR_OK);
    assert_int_equal(kr_store_sqlite_check_writable_limited(path[0], 1LL << 40, &err),
                     KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "the database is damaged"));
    for (int bound = 0; bound < 2; bound++) {
        err.message[0] = '\0';
        assert_int_equal(
            kr_store_sqlite_check_writable_limited(path[1], bound ? 1LL << 40 : 0, &err),
            KR_ERR_FORMAT);
        assert_non_null(strstr(err.message, "sym.db"));
    }
    /* The bounded check left the candle damage to the reads, which report it. */
    kr_store *s = open_ok(path[0]);
    kr_candles *all = NULL;
    int failed = 0;
    for (int i = 0; i < 4 && !failed; i++) {
        char sym[8];
        snprintf(sym, sizeof sym, "S%d", i);
        if (kr_store_read(s, sym, "1d", 0, &all, &err) != KR_OK)
            failed = 1;
        else
            kr_candles_free(all);
        all = NULL;
    }
    kr_store_close(s);
    assert_true(failed);
}

static void test_bad_names(void **state) {
    (void)state;
    kr_store *s = open_ok(db_path("names.db"));
    kr_candles *c = make_candles(0, 3, 10.0);
    kr_error err = { 0 };
    const char *bad_symbols[] = { "",       "AA PL", "a/b",
                                  "x;DROP", "ÄPFEL", "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456" };
    for (size_t i = 0; i < sizeof bad_symbols / sizeof bad_symbols[0]; i++) {
        assert_int_equal(kr_store_upsert(s, bad_symbols[i], "1d", c, &err), KR_ERR_INVALID_ARG);
        assert_non_null(strstr(err.message, "symbol"));
        kr_candles *r = NULL;
        assert_int_equal(kr_store_read(s, bad_symbols[i], "1d", 0, &r, &err), KR_ERR_INVALID_ARG);
    }
    const char *bad_intervals[] = { "", "1x", "d", "0d", "5 m", "1d;", "-1h" };
    for (size_t i = 0; i < sizeof bad_intervals / sizeof bad_intervals[0]; i++) {
        assert_int_equal(kr_store_upsert(s, "AAPL", bad_intervals[i], c, &err), KR_ERR_INVALID_ARG);
        assert_non_null(strstr(err.message, "interval"));
    }
    const char *good_symbols[] = { "600977.SH", "^GSPC",    "EURUSD=X",
                                   "BRK-B",     "btc_usdt", "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345" };
    for (size_t i = 0; i < sizeof good_symbols / sizeof good_symbols[0]; i++)
        if (kr_store_upsert(s, good_symbols[i], "5min", c, &err) != KR_OK)
            fail_msg("%s: %s", good_symbols[i], err.message);
    assert_int_equal(kr_store_interval_seconds("5m"), 300);
    assert_int_equal(kr_store_interval_seconds("5min"), 300);
    assert_int_equal(kr_store_interval_seconds("4h"), 14400);
    assert_int_equal(kr_store_interval_seconds("1d"), 86400);
    assert_int_equal(kr_store_interval_seconds("1w"), 604800);
    assert_int_equal(kr_store_interval_seconds("1q"), 0);
    kr_candles_free(c);
    kr_store_close(s);
}

static void test_corrupted_and_foreign_files(void **state) {
    (void)state;
    kr_store *s = NULL;
    kr_error err = { 0 };
    /* Garbage bytes. */
    const char *path = db_path("garbage.db");
    char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 7919 % 251);
    assert_int_equal(kr_test_write_file(path, junk, sizeof junk), 0);
    assert_int_equal(kr_store_open(path, &s, &err), KR_ERR_FORMAT);
    assert_null(s);
    assert_non_null(strstr(err.message, "garbage.db"));
    assert_non_null(strstr(err.message, "not a usable kronos database"));

    /* A valid store whose pages were then overwritten in the middle. */
    path = db_path("smashed.db");
    s = open_ok(path);
    kr_candles *c = make_candles(0, 2000, 10.0);
    assert_int_equal(kr_store_upsert(s, "X", "1d", c, &err), KR_OK);
    kr_candles_free(c);
    kr_store_close(s);
    s = NULL;
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    assert_true(size > 8192);
    fseek(f, 4096, SEEK_SET); /* page 2 onwards: the table b-trees */
    fwrite(junk, 1, (size_t)(size - 4096 < 8192 ? size - 4096 : 8192), f);
    fclose(f);
    kr_status st = kr_store_open(path, &s, &err);
    if (st == KR_OK) {
        kr_candles *r = NULL;
        st = kr_store_read(s, "X", "1d", 0, &r, &err);
        kr_candles_free(r);
        kr_store_close(s);
        s = NULL;
    }
    assert_int_not_equal(st, KR_OK);
    assert_non_null(strstr(err.message, "smashed.db"));
    print_message("smashed: %s\n", err.message);

    /* Another application's database. */
    path = db_path("other.db");
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE notes(x TEXT)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(kr_store_open(path, &s, &err), KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "another application"));
    /* ... is left as it was: refused before the WAL journal mode is written into its header
     * (bytes 18 and 19 stay 1, the rollback journal), and no -wal file appears. */
    unsigned char hdr[20];
    f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(hdr, 1, sizeof hdr, f), sizeof hdr);
    fclose(f);
    assert_int_equal(hdr[18], 1);
    assert_int_equal(hdr[19], 1);
    char wal[1100];
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct stat wsb;
    assert_int_not_equal(stat(wal, &wsb), 0);

    /* A newer schema. */
    path = db_path("newer.db");
    s = open_ok(path);
    kr_store_close(s);
    s = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(kr_store_open(path, &s, &err), KR_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "newer kronos"));

    /* A directory. */
    assert_int_equal(kr_store_open(g_tmp, &s, &err), KR_ERR_IO);
    assert_null(s);
}

/* kr_store_open_existing creates nothing: a missing path stays missing, an empty file stays
 * empty (SQLite would take it for an empty database and the open would write a schema), and
 * a store is read as it is. */
static void test_open_existing(void **state) {
    (void)state;
    kr_store *s = NULL;
    kr_error err = { 0 };
    struct stat sb;
    const char *path = db_path("never/made.db");
    assert_int_equal(kr_store_open_existing(path, &s, &err), KR_ERR_IO);
    assert_null(s);
    assert_non_null(strstr(err.message, "no such database"));
    assert_int_not_equal(stat(db_path("never"), &sb), 0);

    path = db_path("empty.db");
    assert_int_equal(kr_test_write_file(path, "", 0), 0);
    assert_int_equal(kr_store_open_existing(path, &s, &err), KR_ERR_FORMAT);
    assert_null(s);
    assert_non_null(strstr(err.message, "empty.db: an empty file, not a kronos store"));
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_size, 0);
    char side[1100];
    snprintf(side, sizeof side, "%s-wal", path);
    assert_int_not_equal(stat(side, &sb), 0);

    path = db_path("existing.db");
    s = open_ok(path);
    kr_candles *c = make_candles(0, 10, 10.0);
    assert_int_equal(kr_store_upsert(s, "X", "1d", c, &err), KR_OK);
    kr_candles_free(c);
    kr_store_close(s);
    s = NULL;
    assert_int_equal(kr_store_open_existing(path, &s, &err), KR_OK);
    kr_candles *r = NULL;
    assert_int_equal(kr_store_read(s, "X", "1d", 0, &r, &err), KR_OK);
    assert_int_equal(r->n, 10);
    kr_candles_free(r);
    kr_store_close(s);
}

/* A name starting with "file:" is a file of that name: SQLite (built with URI names, as
 * Debian's is) took it for a URI and wrote another file ("v.db"), which every command that
 * looks for the named file first (store list, export, delete, analyze) then did not find. */
static void test_file_prefix_is_a_file_name(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    kr_store *s = open_ok("file:v.db");
    kr_candles *c = make_candles(0, 3, 10.0);
    kr_error err = { 0 };
    assert_int_equal(kr_store_upsert(s, "X", "1d", c, &err), KR_OK);
    kr_candles_free(c);
    kr_store_close(s);
    struct stat sb;
    assert_int_equal(stat("file:v.db", &sb), 0);
    assert_int_not_equal(stat("v.db", &sb), 0);
    s = NULL;
    assert_int_equal(kr_store_open_existing("file:v.db", &s, &err), KR_OK);
    kr_candles *r = NULL;
    assert_int_equal(kr_store_read(s, "X", "1d", 0, &r, &err), KR_OK);
    assert_int_equal(r->n, 3);
    kr_candles_free(r);
    kr_store_close(s);
    assert_int_equal(chdir(cwd), 0);
}

static void test_resolve_path(void **state) {
    (void)state;
    char out[1200], want[1200];
    kr_error err = { 0 };
    char *saved_db = getenv("KRONOS_DB") ? strdup(getenv("KRONOS_DB")) : NULL;
    char *saved_xdg = getenv("XDG_DATA_HOME") ? strdup(getenv("XDG_DATA_HOME")) : NULL;

    snprintf(want, sizeof want, "%s/flag/sub/k.db", g_tmp);
    setenv("KRONOS_DB", "/nonexistent/env.db", 1);
    assert_int_equal(kr_store_resolve_path(want, out, sizeof out, &err), KR_OK);
    assert_string_equal(out, want);
    struct stat sb;
    snprintf(want, sizeof want, "%s/flag/sub", g_tmp);
    /* Nothing made for a path only resolved (store list on a wrong path left directories);
     * opening the store makes them. */
    assert_int_not_equal(stat(want, &sb), 0);
    assert_int_equal(kr_store_check_writable(out, &err), KR_OK); /* judged by g_tmp */
    assert_int_not_equal(stat(want, &sb), 0);
    kr_store *made = NULL;
    assert_int_equal(kr_store_open(out, &made, &err), KR_OK);
    kr_store_close(made);
    assert_int_equal(stat(want, &sb), 0);

    snprintf(want, sizeof want, "%s/env.db", g_tmp);
    setenv("KRONOS_DB", want, 1);
    assert_int_equal(kr_store_resolve_path(NULL, out, sizeof out, &err), KR_OK);
    assert_string_equal(out, want);

    unsetenv("KRONOS_DB");
    snprintf(want, sizeof want, "%s/xdg", g_tmp);
    setenv("XDG_DATA_HOME", want, 1);
    assert_int_equal(kr_store_resolve_path(NULL, out, sizeof out, &err), KR_OK);
    snprintf(want, sizeof want, "%s/xdg/kronos/kronos.db", g_tmp);
    assert_string_equal(out, want);
    /* An empty flag is an unset variable, not a wish for the default store. */
    assert_int_equal(kr_store_resolve_path("", out, sizeof out, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "--db is empty"));

    if (saved_db) setenv("KRONOS_DB", saved_db, 1);
    if (saved_xdg)
        setenv("XDG_DATA_HOME", saved_xdg, 1);
    else
        unsetenv("XDG_DATA_HOME");
    free(saved_db);
    free(saved_xdg);
}

/* Symbols match without case ("aapl" extends and reads "AAPL"); a symbol's market is stored,
 * listed, cleared; a version-1 file is upgraded in place. */
static void test_case_and_market(void **state) {
    (void)state;
    const char *path = db_path("case.db");
    kr_store *st = open_ok(path);
    kr_error err = { 0 };
    kr_candles *a = make_candles(0, 10, 100), *b = make_candles(10, 5, 110);
    assert_int_equal(kr_store_upsert(st, "AAPL", "1d", a, &err), KR_OK);
    assert_int_equal(kr_store_upsert(st, "aapl", "1d", b, &err), KR_OK);
    kr_store_entry *e = NULL;
    int64_t n = 0;
    assert_int_equal(kr_store_list(st, "Aapl", &e, &n, &err), KR_OK);
    assert_int_equal(n, 1);
    assert_string_equal(e[0].symbol, "AAPL");
    assert_int_equal(e[0].rows, 15);
    assert_string_equal(e[0].market, "");
    free(e);
    kr_candles *c = NULL;
    assert_int_equal(kr_store_read(st, "aaPL", "1d", 0, &c, &err), KR_OK);
    assert_int_equal(c->n, 15);
    kr_candles_free(c);
    char canon[64];
    assert_int_equal(kr_store_canonical_symbol(st, "aapl", canon, sizeof canon, &err), KR_OK);
    assert_string_equal(canon, "AAPL");
    assert_int_equal(kr_store_canonical_symbol(st, "msft", canon, sizeof canon, &err), KR_OK);
    assert_string_equal(canon, "msft"); /* not stored: as given */
    assert_int_equal(kr_store_set_market(st, "aapl", "NYSE", &err), KR_OK);
    assert_int_equal(kr_store_list(st, NULL, &e, &n, &err), KR_OK);
    assert_string_equal(e[0].market, "NYSE");
    free(e);
    assert_int_equal(kr_store_set_market(st, "AAPL", "", &err), KR_OK);
    assert_int_equal(kr_store_list(st, NULL, &e, &n, &err), KR_OK);
    assert_string_equal(e[0].market, "");
    free(e);
    kr_store_close(st);
    /* A version-1 file (no markets table) opens and gets one. */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db, "DROP TABLE markets; PRAGMA user_version = 1", NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    st = open_ok(path);
    assert_int_equal(kr_store_set_market(st, "AAPL", "NYSE", &err), KR_OK);
    kr_store_close(st);
    kr_candles_free(a);
    kr_candles_free(b);
}

/* kill -9 of a process in the middle of its deletes: the file opens and checks whole, and
 * the series is what whole deletes left (a multiple of the chunk each delete removes), with the
 * list agreeing. The child reports each finished delete through a pipe; the parent kills it
 * after the first, while it runs the next ones (no clock involved: wherever the kill lands,
 * the store must be consistent). */
enum { KILL_CHUNKS = 12, KILL_CHUNK_ROWS = 4000 };

static void test_kill_mid_delete(void **state) {
    (void)state;
    const char *path = db_path("kill-delete.db");
    kr_store *s = open_ok(path);
    kr_error err = { 0 };
    const int64_t t0 = 1704067200;
    for (int k = 0; k < KILL_CHUNKS; k++) {
        kr_candles *c = make_candles(0, KILL_CHUNK_ROWS, 10.0 + k);
        for (int64_t i = 0; i < c->n; i++)
            c->timestamps[i] = t0 + ((int64_t)k * KILL_CHUNK_ROWS + i) * 60;
        c->date_only = 0;
        if (kr_store_upsert(s, "BIG", "1m", c, &err) != KR_OK) fail_msg("%s", err.message);
        kr_candles_free(c);
    }
    kr_store_close(s);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        alarm(120);
        kr_store *w = NULL;
        if (kr_store_open(path, &w, &err) != KR_OK) _exit(1);
        for (int k = 0; k < KILL_CHUNKS; k++) {
            kr_store_delete_stats d;
            const int64_t lo = t0 + (int64_t)k * KILL_CHUNK_ROWS * 60;
            if (kr_store_delete(w, "BIG", "1m", lo, lo + (KILL_CHUNK_ROWS - 1) * 60, &d, &err) !=
                    KR_OK ||
                d.deleted != KILL_CHUNK_ROWS)
                _exit(2);
            if (write(fds[1], "d", 1) != 1) _exit(3);
        }
        _exit(0);
    }
    close(fds[1]);
    char b;
    assert_int_equal(read(fds[0], &b, 1), 1); /* the first delete has committed */
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    int done = 1;
    while (read(fds[0], &b, 1) == 1) done++;
    close(fds[0]);

    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "ok");
    sqlite3_finalize(q);
    sqlite3_close(db);
    s = open_ok(path);
    kr_candles *got = NULL;
    int64_t n = kr_store_read(s, "BIG", "1m", 0, &got, &err) == KR_OK ? got->n : 0;
    assert_int_equal(n % KILL_CHUNK_ROWS, 0);
    const int64_t deleted_chunks = KILL_CHUNKS - n / KILL_CHUNK_ROWS;
    /* The deletes reported, and perhaps one more that committed before its report. */
    assert_true(deleted_chunks == done || deleted_chunks == done + 1);
    kr_store_entry *e = NULL;
    int64_t ne = 0;
    assert_int_equal(kr_store_list(s, "BIG", &e, &ne, &err), KR_OK);
    if (n > 0) {
        assert_int_equal(ne, 1);
        assert_int_equal(e[0].rows, n);
        assert_int_equal(e[0].first_ts, got->timestamps[0]);
        assert_int_equal(e[0].last_ts, got->timestamps[n - 1]);
        assert_int_equal(got->timestamps[0], t0 + deleted_chunks * KILL_CHUNK_ROWS * 60);
    } else {
        assert_int_equal(ne, 0);
    }
    print_message("kill -9 after %d reported deletes: %lld chunks deleted, %lld rows left\n", done,
                  (long long)deleted_chunks, (long long)n);
    free(e);
    kr_candles_free(got);
    kr_store_close(s);
}

/* n one-minute bars from t0 + first minutes, close = base + i (the kill tests' series). */
static kr_candles *minute_bars(int64_t t0, int64_t first, int64_t n, double base) {
    kr_candles *c = make_candles(first, n, base);
    for (int64_t i = 0; i < n; i++) c->timestamps[i] = t0 + (first + i) * 60;
    c->date_only = 0;
    return c;
}

enum { UPSERT_KEPT = 10000, UPSERT_BIG = 300000 };

/* kill -9 while one large upsert (many multi-row statements in one transaction) is being
 * written: the store is intact and holds the batch whole or not at all — the rows it would
 * replace unchanged, none of the new ones — and takes the next upsert. Where the kill lands
 * (before, during or after the commit) is up to the scheduler; every case must hold. */
static void test_kill_mid_upsert(void **state) {
    (void)state;
    const char *path = db_path("kill-upsert.db");
    const int64_t t0 = 1704067200;
    kr_store *s = open_ok(path);
    kr_error err = { 0 };
    kr_candles *kept = minute_bars(t0, 0, UPSERT_KEPT, 10.0);
    if (kr_store_upsert(s, "UPS", "1m", kept, &err) != KR_OK) fail_msg("%s", err.message);
    kr_store_close(s);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        alarm(120);
        kr_store *w = NULL;
        if (kr_store_open(path, &w, &err) != KR_OK) _exit(1);
        kr_candles *big = minute_bars(t0, 0, UPSERT_BIG, 50.0); /* replaces the kept rows */
        if (write(fds[1], "g", 1) != 1) _exit(3);
        _exit(kr_store_upsert(w, "UPS", "1m", big, &err) == KR_OK ? 0 : 2);
    }
    close(fds[1]);
    char b;
    assert_int_equal(read(fds[0], &b, 1), 1); /* the upsert is about to start */
    usleep(50 * 1000);
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(fds[0]);

    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "ok");
    sqlite3_finalize(q);
    sqlite3_close(db);
    s = open_ok(path);
    kr_candles *got = NULL;
    assert_int_equal(kr_store_read(s, "UPS", "1m", 0, &got, &err), KR_OK);
    const int whole = got->n == UPSERT_BIG;
    if (!whole && got->n != UPSERT_KEPT)
        fail_msg("%lld rows: neither all nor none", (long long)got->n);
    /* The first row: replaced with the batch, or as it was. */
    assert_true(got->values[KR_CLOSE] == (whole ? 50.0 : 10.0));
    kr_store_entry *e = NULL;
    int64_t ne = 0;
    assert_int_equal(kr_store_list(s, "UPS", &e, &ne, &err), KR_OK);
    assert_int_equal(ne, 1);
    assert_int_equal(e[0].rows, got->n);
    print_message("kill -9 during a %d-row upsert: %s\n", UPSERT_BIG,
                  whole ? "it had committed" : "nothing of it stored");
    /* The store takes the next write. */
    kr_candles *more = minute_bars(t0, UPSERT_BIG, 10, 60.0);
    assert_int_equal(kr_store_upsert(s, "UPS", "1m", more, &err), KR_OK);
    free(e);
    kr_candles_free(got);
    kr_candles_free(more);
    kr_candles_free(kept);
    kr_store_close(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_keyword_conninfo_refused),
        cmocka_unit_test(test_upsert_overwrites),
        cmocka_unit_test(test_bad_batch_writes_nothing),
        cmocka_unit_test(test_concurrent_reader),
        cmocka_unit_test(test_readers_do_not_wait_for_a_writer),
        cmocka_unit_test(test_concurrent_create),
        cmocka_unit_test(test_check_writable),
        cmocka_unit_test(test_check_bounded),
        cmocka_unit_test(test_bad_names),
        cmocka_unit_test(test_corrupted_and_foreign_files),
        cmocka_unit_test(test_open_existing),
        cmocka_unit_test(test_resolve_path),
        cmocka_unit_test(test_file_prefix_is_a_file_name),
        cmocka_unit_test(test_case_and_market),
        cmocka_unit_test(test_kill_mid_delete),
        cmocka_unit_test(test_kill_mid_upsert),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
