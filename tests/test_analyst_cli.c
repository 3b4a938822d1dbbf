/*
 * `kronos ingest` and `kronos analyze` end to end through the executable: ingest the bundled
 * candles into a temporary database, analyse one symbol in each format and three as a batch
 * (ranking), calibrate, and every error case exits 1 (runtime) or 2 (usage) with a message
 * that says what is wrong; `kronos store list|delete` (exit 3 when a delete matches nothing).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>

#include "test_support.h"

static const char *g_tmp; /* kr_test_dir() */
static char g_db[1200];

typedef kr_test_run run_result;

/* Runs `[ENV] kronos ARGS` with stdout/stderr captured; env may be "". */
static const run_result *run_env(const char *env, const char *args) {
    return kr_test_kronos(g_tmp, env, args);
}

static const run_result *run(const char *args) { return run_env("", args); }

static const run_result *ok(const char *args) {
    const run_result *r = run(args);
    if (r->code != 0) fail_msg("kronos %s: exit %d: %s", args, r->code, r->err);
    return r;
}

static void expect_fail(const char *args, int code, const char *needle1, const char *needle2) {
    const run_result *r = run(args);
    if (r->code != code || !strstr(r->err, needle1) || (needle2 && !strstr(r->err, needle2)))
        fail_msg("kronos %s: exit %d (want %d), stderr: %s (want '%s'%s%s)", args, r->code, code,
                 r->err, needle1, needle2 ? " and " : "", needle2 ? needle2 : "");
}

static int setup(void **state) {
    (void)state;
    g_tmp = kr_test_dir();
    if (!g_tmp) return -1;
    snprintf(g_db, sizeof g_db, "%s/sub/dir/k.db", g_tmp); /* parent directories get created */
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return 0;
}

static void test_ingest(void **state) {
    (void)state;
    char args[4096];
    static const char *files[][3] = { { "AAPL", "1d", "AAPL_1d.csv" },
                                      { "MSFT", "1d", "MSFT_1d.csv" },
                                      { "600977.SH", "5m", "XSHG_5min_600977.csv" },
                                      { "BTCUSDT", "1h", "BTCUSDT_1h.csv" } };
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "ingest --symbol %s --interval %s --db %s %s/data/%s",
                 files[i][0], files[i][1], g_db, KR_SOURCE_DIR, files[i][2]);
        const run_result *r = ok(args);
        char want[128];
        snprintf(want, sizeof want, "%s %s: ", files[i][0], files[i][1]);
        assert_non_null(strstr(r->out, want));
        assert_non_null(strstr(r->out, "rows written"));
    }
    /* Re-ingesting the same file changes nothing, and says so: the count does not grow. */
    snprintf(args, sizeof args, "ingest --symbol aapl --interval 24h --db %s %s/data/AAPL_1d.csv",
             g_db, KR_SOURCE_DIR);
    const run_result *r = ok(args);
    /* ... in another case and another spelling of the day: the series as stored. */
    assert_non_null(strstr(r->out, "AAPL 1d: 2913 rows written"));
    assert_non_null(strstr(r->out, ": 0 new, 0 replaced with other values, 2913 unchanged"));
    assert_non_null(strstr(r->out, "(now 2913 rows, 2014-01-02 to 2025-08-01)"));
    /* The same data as a second symbol, through KRONOS_DB instead of --db. */
    char env[1300];
    snprintf(env, sizeof env, "KRONOS_DB=%s", g_db);
    snprintf(args, sizeof args, "ingest --symbol AAPL.B --interval 1d %s/data/AAPL_1d.csv",
             KR_SOURCE_DIR);
    r = run_env(env, args);
    if (r->code != 0) fail_msg("%s", r->err);
    /* A mislabelled interval is stored, with a warning. */
    snprintf(args, sizeof args,
             "ingest --symbol BTC1M --interval 1m --db %s %s/data/BTCUSDT_1h.csv", g_db,
             KR_SOURCE_DIR);
    r = ok(args);
    assert_non_null(strstr(r->err, "warning"));
    assert_non_null(strstr(r->err, "'1m'"));
}

static void test_analyze_one_symbol_formats(void **state) {
    (void)state;
    char args[4096], path[1300];
    snprintf(args, sizeof args, "analyze AAPL --db %s --paths 8 --horizon 5 --seed 3", g_db);
    const run_result *r = ok(args);
    cJSON *j = cJSON_Parse(r->out);
    assert_non_null(j);
    assert_int_equal(cJSON_GetObjectItem(j, "schema_version")->valueint, 1);
    cJSON *rep = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "reports"), 0);
    assert_string_equal(cJSON_GetObjectItem(rep, "symbol")->valuestring, "AAPL");
    assert_string_equal(cJSON_GetObjectItem(rep, "interval")->valuestring, "1d");
    cJSON *params = cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "metadata"), "params");
    assert_int_equal(cJSON_GetObjectItem(params, "paths")->valueint, 8);
    assert_int_equal(cJSON_GetObjectItem(params, "horizon")->valueint, 5);
    assert_int_equal(cJSON_GetObjectItem(params, "lookback")->valueint,
                     512 - 5); /* rows > max_context */
    assert_int_equal(cJSON_GetObjectItem(params, "seed")->valueint, 3);
    cJSON *model = cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "metadata"), "model");
    assert_string_equal(cJSON_GetObjectItem(model, "name")->valuestring, "kronos-demo");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(rep, "calibration")));
    double prob =
        cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "statistics"), "prob_up")->valuedouble;
    assert_true(prob >= 0 && prob <= 1);
    /* Seeded: the same report twice (apart from the timing and the clock). */
    r = ok(args);
    cJSON *j2 = cJSON_Parse(r->out);
    assert_non_null(j2);
    cJSON *rep2 = cJSON_GetArrayItem(cJSON_GetObjectItem(j2, "reports"), 0);
    const char *same[] = { "forecast", "statistics", "technical", "summary" };
    for (int i = 0; i < 4; i++)
        if (!cJSON_Compare(cJSON_GetObjectItem(rep, same[i]), cJSON_GetObjectItem(rep2, same[i]),
                           1))
            fail_msg("'%s' differs between two runs with the same seed", same[i]);
    cJSON_Delete(j2);
    cJSON_Delete(j);

    snprintf(args, sizeof args, "analyze AAPL --db %s --paths 8 --horizon 5 --format md", g_db);
    r = ok(args);
    assert_non_null(strstr(r->out, "# Kronos analysis: AAPL (1d)"));
    assert_non_null(strstr(r->out, "| Probability of closing above"));
    assert_non_null(strstr(r->out, "Not investment advice"));

    snprintf(path, sizeof path, "%s/aapl.html", g_tmp);
    snprintf(args, sizeof args, "analyze AAPL --db %s --paths 8 --horizon 5 --format html --out %s",
             g_db, path);
    r = ok(args);
    assert_int_equal(r->out[0], 0);
    assert_non_null(strstr(r->err, "wrote"));
    static char html[1 << 18];
    kr_test_slurp(path, html, sizeof html);
    assert_true(strncmp(html, "<!DOCTYPE html>", 15) == 0);
    assert_non_null(strstr(html, "<svg"));
    assert_non_null(strstr(html, "AAPL"));
    assert_non_null(strstr(html, "</html>"));

    /* --interval picks among several; the 5-minute symbol reads as intraday. */
    snprintf(args, sizeof args,
             "analyze 600977.SH --interval 5m --db %s --paths 4 --horizon 4 --format md", g_db);
    r = ok(args);
    assert_non_null(strstr(r->out, "2024-08-29 13:")); /* after the lunch break */
}

static void test_analyze_batch_and_calibrate(void **state) {
    (void)state;
    char args[4096];
    snprintf(args, sizeof args, "analyze MSFT AAPL BTCUSDT --db %s --paths 8 --horizon 5", g_db);
    const run_result *r = ok(args);
    cJSON *j = cJSON_Parse(r->out);
    assert_non_null(j);
    cJSON *rank = cJSON_GetObjectItem(j, "ranking");
    assert_int_equal(cJSON_GetArraySize(rank), 3);
    double prev = 1e300;
    const char *prev_iv = "";
    for (int k = 0; k < 3; k++) {
        cJSON *row = cJSON_GetArrayItem(rank, k);
        assert_int_equal(cJSON_GetObjectItem(row, "rank")->valueint, k + 1);
        const char *iv = cJSON_GetObjectItem(row, "interval")->valuestring;
        double er = cJSON_GetObjectItem(row, "expected_return_pct")->valuedouble;
        if (!strcmp(iv, prev_iv)) assert_true(er <= prev); /* ranked within an interval */
        prev = er;
        prev_iv = iv;
    }
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "reports"), 2), "symbol")
            ->valuestring,
        "BTCUSDT");
    cJSON_Delete(j);
    snprintf(args, sizeof args,
             "analyze MSFT AAPL BTCUSDT --db %s --paths 8 --horizon 5 --format md", g_db);
    r = ok(args);
    assert_non_null(strstr(r->out, "## Ranking by expected return"));
    assert_non_null(strstr(r->out, "| 3 |"));

    snprintf(args, sizeof args, "analyze AAPL --db %s --paths 8 --horizon 5 --calibrate 3", g_db);
    r = ok(args);
    assert_null(strstr(r->err, "calibrating")); /* stderr is not a terminal: no progress bar */
    j = cJSON_Parse(r->out);
    cJSON *cal = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "reports"), 0),
                                     "calibration");
    assert_int_equal(cJSON_GetObjectItem(cal, "windows")->valueint, 3);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cal, "window_detail")), 3);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(cal, "model"),
                                                            "coverage_by_step")),
                     5);
    double cov =
        cJSON_GetObjectItem(cJSON_GetObjectItem(cal, "naive"), "coverage_p10_p90")->valuedouble;
    assert_true(cov >= 0 && cov <= 1);
    /* Issue 42: the calibration figures carry their errors, the 3 windows as the trials:
     * Agresti-Coull sqrt(p~(1 - p~) / 7) with p~ = (3 p + 2) / 7, at least 0.189 (p~ = 0 or 1
     * cannot happen: p~ lies in [2/7, 5/7]). */
    cJSON *se = cJSON_GetObjectItem(cJSON_GetObjectItem(cal, "model"), "standard_error");
    const double hit =
        cJSON_GetObjectItem(cJSON_GetObjectItem(cal, "model"), "direction_hit_rate")->valuedouble;
    const double pt = (3 * hit + 2) / 7.0;
    assert_float_equal(cJSON_GetObjectItem(se, "direction_hit_rate")->valuedouble,
                       sqrt(pt * (1 - pt) / 7), 1e-12);
    assert_true(cJSON_GetObjectItem(se, "direction_hit_rate")->valuedouble > 0.18);
    assert_true(cJSON_GetObjectItem(se, "mape_pct")->valuedouble > 0);
    cJSON_Delete(j);
    snprintf(args, sizeof args,
             "analyze AAPL --db %s --paths 8 --horizon 5 --calibrate 3 --format md", g_db);
    r = ok(args);
    assert_non_null(strstr(r->out, "| Direction hit rate at the horizon | "));
    assert_non_null(strstr(strstr(r->out, "| Direction hit rate at the horizon | "), " pp |"));
}

static void test_errors(void **state) {
    (void)state;
    char args[4096], p[1300];
    snprintf(args, sizeof args, "analyze NOPE --db %s", g_db);
    expect_fail(args, 1, "unknown symbol 'NOPE'", "AAPL (1d)");
    /* In a batch a failing symbol is reported beside the others (see test_watchlists). */
    snprintf(args, sizeof args, "analyze AAPL --interval 1h --db %s", g_db);
    expect_fail(args, 1, "AAPL has no '1h' candles", "stored: AAPL (1d)");
    snprintf(args, sizeof args, "analyze AAPL --db %s/none.db", g_tmp);
    expect_fail(args, 1, "none.db: no database", "kronos ingest");
    snprintf(args, sizeof args, "analyze AAPL --db %s --calibrate 500 --horizon 20", g_db);
    expect_fail(args, 1, "too few rows", "--calibrate");

    /* A short history. */
    snprintf(p, sizeof p, "%s/tiny.csv", g_tmp);
    const char *tiny = "timestamps,open,high,low,close,volume\n2024-01-01,1,2,0.5,1.5,10\n2024-01-"
                       "02,1,2,0.5,1.5,10\n"
                       "2024-01-03,1,2,0.5,1.5,10\n";
    assert_int_equal(kr_test_write_file(p, tiny, strlen(tiny)), 0);
    snprintf(args, sizeof args, "ingest --symbol TINY --interval 1d --db %s %s", g_db, p);
    ok(args);
    snprintf(args, sizeof args, "analyze TINY --db %s", g_db);
    expect_fail(args, 1, "TINY 1d: too few rows: 3 stored", NULL);

    /* Usage errors: exit 2. */
    snprintf(args, sizeof args, "analyze --db %s", g_db);
    expect_fail(args, 2, "SYMBOL", NULL);
    snprintf(args, sizeof args, "analyze AAPL --db %s --horizon abc", g_db);
    expect_fail(args, 2, "--horizon", NULL);
    snprintf(args, sizeof args, "analyze AAPL --db %s --horizon 600", g_db);
    expect_fail(args, 2, "--horizon", "max-context");
    snprintf(args, sizeof args, "analyze AAPL --db %s --format pdf", g_db);
    expect_fail(args, 2, "--format", NULL);
    snprintf(args, sizeof args, "analyze AAPL --db %s --paths 0", g_db);
    expect_fail(args, 2, "--paths", NULL);
    snprintf(args, sizeof args, "analyze 'a/b' --db %s", g_db);
    expect_fail(args, 2, "symbol 'a/b'", NULL);
    snprintf(args, sizeof args, "analyze AAPL AAPL --db %s", g_db);
    expect_fail(args, 2, "given twice", NULL);
    snprintf(args, sizeof args, "analyze AAPL --db %s --interval 5x", g_db);
    expect_fail(args, 2, "interval '5x'", NULL);
    snprintf(args, sizeof args, "analyze AAPL --db %s --bogus", g_db);
    expect_fail(args, 2, "unknown flag", NULL);

    snprintf(args, sizeof args, "ingest --interval 1d --db %s %s/data/AAPL_1d.csv", g_db,
             KR_SOURCE_DIR);
    expect_fail(args, 2, "--symbol is required", NULL);
    snprintf(args, sizeof args, "ingest --symbol X --interval 1day --db %s %s/data/AAPL_1d.csv",
             g_db, KR_SOURCE_DIR);
    expect_fail(args, 2, "interval '1day'", NULL);
    snprintf(args, sizeof args, "ingest --symbol X --interval 1d --db %s", g_db);
    expect_fail(args, 2, "candle file is required", NULL);
    snprintf(args, sizeof args, "ingest --symbol 'X Y' --interval 1d --db %s %s/data/AAPL_1d.csv",
             g_db, KR_SOURCE_DIR);
    expect_fail(args, 2, "symbol 'X Y'", NULL);

    /* Bad CSV: exit 1 naming file and line; nothing stored. */
    snprintf(p, sizeof p, "%s/bad.csv", g_tmp);
    const char *bad =
        "timestamps,open,high,low,close\n2024-01-01,1,2,0.5,1\n2024-01-02,1,0.4,0.5,1\n";
    assert_int_equal(kr_test_write_file(p, bad, strlen(bad)), 0);
    snprintf(args, sizeof args, "ingest --symbol BAD --interval 1d --db %s %s", g_db, p);
    expect_fail(args, 1, "bad.csv: line 3", "high");
    snprintf(args, sizeof args, "analyze BAD --db %s", g_db);
    expect_fail(args, 1, "unknown symbol 'BAD'", NULL);

    /* A second bar on a stored day of a daily series (another source stamps its days at
     * 16:00): refused, naming the file and both bars. */
    snprintf(p, sizeof p, "%s/late.csv", g_tmp);
    const char *late = "timestamps,open,high,low,close,volume\n2025-08-01 16:00,200,210,199,"
                       "205,1000\n";
    assert_int_equal(kr_test_write_file(p, late, strlen(late)), 0);
    snprintf(args, sizeof args, "ingest --symbol aapl --interval 1d --db %s %s", g_db, p);
    expect_fail(args, 1, "late.csv: ",
                "2025-08-01 16:00:00 of these candles falls on the day of "
                "the stored 2025-08-01 00:00:00");

    /* JSON candles (as forecast takes them), a row with its open above its high: stored, with a
     * warning. */
    snprintf(p, sizeof p, "%s/rows.json", g_tmp);
    const char *rows =
        "[[\"2025-08-04\", 3, 2, 0.5, 1.5, 10], [\"2025-08-05\", 1, 2, 0.5, 1.5, 10]]";
    assert_int_equal(kr_test_write_file(p, rows, strlen(rows)), 0);
    snprintf(args, sizeof args, "ingest --symbol JS --interval 1d --db %s %s", g_db, p);
    const run_result *r = ok(args);
    assert_non_null(strstr(r->out, "JS 1d: 2 rows written"));
    assert_non_null(strstr(r->out, ": 2 new, 0 replaced with other values, 0 unchanged"));
    assert_non_null(strstr(r->err, "1 of 2 rows have an open or close outside their low-high "
                                   "range (the first at 2025-08-04"));

    /* A file that is not a database. */
    snprintf(p, sizeof p, "%s/junk.db", g_tmp);
    char junk[4096];
    memset(junk, 'x', sizeof junk);
    assert_int_equal(kr_test_write_file(p, junk, sizeof junk), 0);
    snprintf(args, sizeof args, "analyze AAPL --db %s", p);
    expect_fail(args, 1, "junk.db", "not a usable kronos database");
    snprintf(args, sizeof args, "ingest --symbol X --interval 1d --db %s %s/data/AAPL_1d.csv", p,
             KR_SOURCE_DIR);
    expect_fail(args, 1, "junk.db", "not a usable kronos database");

    /* A database that cannot be written: said before the CSV is read, naming the path. */
    snprintf(args, sizeof args, "ingest --symbol X --interval 1d --db %s/k.db %s/data/AAPL_1d.csv",
             p, KR_SOURCE_DIR);
    expect_fail(args, 1, "junk.db/k.db: cannot be a database", "not a directory");
    snprintf(args, sizeof args,
             "ingest --symbol X --interval 1d --db /proc/kronos-test.db %s/does-not-exist.csv",
             KR_SOURCE_DIR);
    expect_fail(args, 1, "/proc/kronos-test.db: not writable", NULL);
}

/* A batch reports each symbol's failure beside the others' results; symbols match without
 * case; --watchlist and --all; the ranking groups by interval and flags stale data. */
static void test_watchlists(void **state) {
    (void)state;
    char args[4096], wl[1300];
    snprintf(args, sizeof args, "analyze aapl NOPE TINY --db %s --paths 8 --horizon 5", g_db);
    const run_result *r = ok(args);
    assert_non_null(strstr(r->err, "warning: NOPE not analysed: unknown symbol 'NOPE'"));
    assert_non_null(strstr(r->err, "TINY not analysed"));
    cJSON *j = cJSON_Parse(r->out);
    assert_non_null(j);
    cJSON *reps = cJSON_GetObjectItem(j, "reports"), *fails = cJSON_GetObjectItem(j, "failures");
    assert_int_equal(cJSON_GetArraySize(reps), 1);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(reps, 0), "symbol")->valuestring,
                        "AAPL"); /* the stored spelling */
    assert_int_equal(cJSON_GetArraySize(fails), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(fails, 0), "symbol")->valuestring,
                        "NOPE");
    assert_non_null(strstr(cJSON_GetObjectItem(cJSON_GetArrayItem(fails, 1), "error")->valuestring,
                           "too few rows"));
    cJSON_Delete(j);
    snprintf(args, sizeof args, "analyze aapl AAPL --db %s", g_db);
    expect_fail(args, 2, "given twice", NULL);
    /* "AAPL" and "AAPL 1d" are one series once the interval is resolved from the store. */
    snprintf(wl, sizeof wl, "%s/dup.txt", g_tmp);
    assert_int_equal(kr_test_write_file(wl, "AAPL\nAAPL 1d\nMSFT\n", 17), 0);
    snprintf(args, sizeof args, "analyze --watchlist %s --db %s --paths 8 --horizon 5", wl, g_db);
    expect_fail(args, 2,
                "dup.txt: lines 1 and 2: symbol 'AAPL' given twice (both name the AAPL 1d series)",
                NULL);
    /* A watch-list's repeated line is named with both lines (it used to name neither). */
    const char *again = "# list\nAAPL\n\naapl # again\n";
    assert_int_equal(kr_test_write_file(wl, again, strlen(again)), 0);
    expect_fail(args, 2, "dup.txt: line 4: symbol 'aapl' given twice (first on line 2)", NULL);
    /* A calibration window's naive band needs horizon + 10 rows of lookback. */
    snprintf(args, sizeof args, "analyze AAPL --db %s --horizon 20 --lookback 21 --calibrate 2",
             g_db);
    expect_fail(args, 2, "lookback 21 is too short to calibrate a 20-bar horizon", "30 rows");

    /* A watch-list: comments, an interval per line; the Markdown ranking groups intervals. */
    snprintf(wl, sizeof wl, "%s/watch.txt", g_tmp);
    const char *text = "# my list\nmsft\n\nBTCUSDT 1h  # crypto\n600977.sh\nAAPL 1d\n";
    assert_int_equal(kr_test_write_file(wl, text, strlen(text)), 0);
    snprintf(args, sizeof args, "analyze --watchlist %s --db %s --paths 8 --horizon 5 --format md",
             wl, g_db);
    r = ok(args);
    assert_non_null(strstr(r->out, "### 5m bars (5-bar horizon)"));
    assert_non_null(strstr(r->out, "### 1h bars"));
    assert_non_null(strstr(r->out, "### 1d bars"));
    /* 600977.SH ends 2024-08-29 and BTCUSDT 2021-06-10, long before AAPL's 2025-08-01. */
    assert_non_null(strstr(r->out, "| 600977.SH | 2024-08-29 11:30:00 |"));
    assert_non_null(strstr(r->out, "stale: "));
    assert_non_null(strstr(r->out, "sessions ago |\n")); /* no dangling "; " */
    /* As of the Monday after AAPL's last bar (2025-08-01): only the relative staleness. */
    snprintf(args, sizeof args,
             "analyze --watchlist %s --db %s --paths 8 --horizon 5 --as-of 2025-08-04", wl, g_db);
    r = ok(args);
    j = cJSON_Parse(r->out);
    cJSON *rank = cJSON_GetObjectItem(j, "ranking");
    assert_int_equal(cJSON_GetArraySize(rank), 4);
    int stale = 0;
    for (int k = 0; k < 4; k++) {
        cJSON *row = cJSON_GetArrayItem(rank, k);
        assert_non_null(cJSON_GetObjectItem(row, "last_timestamp"));
        assert_non_null(cJSON_GetObjectItem(row, "indistinguishable_from"));
        if (cJSON_IsTrue(cJSON_GetObjectItem(row, "stale"))) {
            stale++;
            assert_true(strcmp(cJSON_GetObjectItem(row, "symbol")->valuestring, "AAPL"));
        }
    }
    assert_int_equal(stale, 2);
    cJSON_Delete(j);
    const char *badwl = "AAPL 1d extra\n";
    assert_int_equal(kr_test_write_file(wl, badwl, strlen(badwl)), 0);
    snprintf(args, sizeof args, "analyze --watchlist %s --db %s", wl, g_db);
    expect_fail(args, 2, "watch.txt: line 1", NULL);
    /* A watch-list that cannot be read is an I/O error (1), like any input file; only
     * contents that do not parse are a usage error (2, above). */
    snprintf(args, sizeof args, "analyze --watchlist %s/no-such-list.txt --db %s", g_tmp, g_db);
    expect_fail(args, 1, "--watchlist: ", "no-such-list.txt");
    snprintf(args, sizeof args, "analyze --watchlist %s --db %s", g_tmp, g_db);
    expect_fail(args, 1, "--watchlist: ", "not a regular file");
    const char *empty = "# nothing here\n\n";
    assert_int_equal(kr_test_write_file(wl, empty, strlen(empty)), 0);
    snprintf(args, sizeof args, "analyze --watchlist %s --db %s", wl, g_db);
    expect_fail(args, 2, "no symbols in the watch-list", NULL);

    /* --all: every stored series. */
    snprintf(args, sizeof args, "analyze --all --db %s --paths 4 --horizon 3", g_db);
    r = ok(args);
    j = cJSON_Parse(r->out);
    int n = cJSON_GetArraySize(cJSON_GetObjectItem(j, "reports")) +
            cJSON_GetArraySize(cJSON_GetObjectItem(j, "failures"));
    assert_true(n >= 6); /* AAPL, MSFT, 600977.SH, BTCUSDT, AAPL.B, BTC1M, TINY */
    cJSON_Delete(j);
    snprintf(args, sizeof args, "analyze --all AAPL --db %s", g_db);
    expect_fail(args, 2, "--all", NULL);
}

/* Default analysis: adaptive paths with standard errors, consistent candles, and the demo
 * model named on the cover. */
/* Issue 42, finding 5: staleness against the clock and the market's calendar, for one symbol
 * alone too, with the clock injected (--as-of). AAPL's last bar is Friday 2025-08-01. */
static void test_stale_against_the_clock(void **state) {
    (void)state;
    char args[2400];
    /* The Monday after: no session has passed (Saturday and Sunday are none). */
    snprintf(args, sizeof args, "analyze AAPL --db %s --paths 8 --horizon 5 --as-of 2025-08-04",
             g_db);
    cJSON *j = cJSON_Parse(ok(args)->out);
    cJSON *h =
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "reports"), 0), "history");
    assert_int_equal(cJSON_GetObjectItem(h, "sessions_ago")->valueint, 0);
    assert_int_equal(cJSON_GetObjectItem(h, "stale_sessions_limit")->valueint, 2);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(h, "stale")));
    assert_true(cJSON_IsFalse(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "ranking"), 0), "stale")));
    cJSON_Delete(j);
    /* Thursday 2025-08-07: Monday to Wednesday passed, three sessions > two: stale. */
    snprintf(args, sizeof args, "analyze AAPL --db %s --paths 8 --horizon 5 --as-of 2025-08-07",
             g_db);
    j = cJSON_Parse(ok(args)->out);
    h = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "reports"), 0), "history");
    assert_int_equal(cJSON_GetObjectItem(h, "sessions_ago")->valueint, 3);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(h, "stale")));
    cJSON_Delete(j);
    /* The day, 2026-12-07: 338 NYSE sessions (weekdays less its holidays, Labor Day,
     * Thanksgiving, Christmas, New Year, ... 2025-2026), alone in its report. */
    snprintf(args, sizeof args,
             "analyze AAPL --db %s --paths 8 --horizon 5 --as-of 2026-12-07 --format md", g_db);
    const run_result *r = ok(args);
    assert_non_null(strstr(r->out, "Stale data: last bar 2025-08-01, 338 sessions ago (a 1d "
                                   "series is stale past 2 sessions without a bar)"));
    snprintf(args, sizeof args,
             "analyze AAPL MSFT --db %s --paths 8 --horizon 5 --as-of 2026-12-07 --format html",
             g_db);
    r = ok(args);
    assert_non_null(strstr(r->out, "stale (last bar 2025-08-01, 338 sessions ago)"));
    snprintf(args, sizeof args, "analyze AAPL --db %s --as-of 2025-13-01", g_db);
    expect_fail(args, 2, "--as-of", NULL);
}

static void test_uncertainty_and_cover(void **state) {
    (void)state;
    char args[4096];
    snprintf(args, sizeof args, "analyze AAPL --db %s --horizon 5", g_db);
    const run_result *r = ok(args);
    /* stderr names the checkpoint's source, as forecast's note does (it used to say only
     * "the model declares itself a demo/test checkpoint"). */
    assert_non_null(strstr(r->err, "note: DEMO MODEL \xe2\x80\x94 not a forecast (kronos-demo: "));
    cJSON *j = cJSON_Parse(r->out);
    assert_non_null(j);
    assert_non_null(strstr(cJSON_GetObjectItem(j, "model_notice")->valuestring,
                           "DEMO MODEL \xe2\x80\x94 not a forecast"));
    cJSON *rep = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "reports"), 0);
    cJSON *meta = cJSON_GetObjectItem(rep, "metadata");
    cJSON *model = cJSON_GetObjectItem(meta, "model");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(model, "demo")));
    assert_string_equal(cJSON_GetObjectItem(model, "quantization")->valuestring, "f32");
    assert_non_null(strstr(cJSON_GetObjectItem(model, "source")->valuestring, "kronos-demo"));
    cJSON *params = cJSON_GetObjectItem(meta, "params");
    int paths = cJSON_GetObjectItem(params, "paths")->valueint;
    assert_int_equal(cJSON_GetObjectItem(params, "paths_first_round")->valueint, 128);
    assert_true(paths >= 128 && paths <= 1024);
    assert_string_equal(cJSON_GetObjectItem(params, "ohlc")->valuestring, "consistent");
    cJSON *st = cJSON_GetObjectItem(rep, "statistics");
    cJSON *se = cJSON_GetObjectItem(st, "standard_error");
    double pse = cJSON_GetObjectItem(se, "prob_up")->valuedouble;
    /* Either the target was met or the cap was reached. */
    assert_true(pse <= 0.02 + 1e-12 || paths == 1024);
    assert_true(cJSON_GetObjectItem(se, "var95_pct")->valuedouble > 0);
    /* Consistent candles: every mean and median candle brackets its open and close. */
    cJSON *steps = cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "forecast"), "steps");
    for (int k = 0; k < cJSON_GetArraySize(steps); k++) {
        cJSON *m = cJSON_GetObjectItem(cJSON_GetArrayItem(steps, k), "mean");
        double o = cJSON_GetObjectItem(m, "open")->valuedouble,
               h = cJSON_GetObjectItem(m, "high")->valuedouble,
               l = cJSON_GetObjectItem(m, "low")->valuedouble,
               c = cJSON_GetObjectItem(m, "close")->valuedouble;
        assert_true(h >= o && h >= c && l <= o && l <= c);
    }
    cJSON_Delete(j);
    snprintf(args, sizeof args, "analyze AAPL --db %s --horizon 5 --format html", g_db);
    r = ok(args);
    assert_non_null(strstr(r->out, "id=\"model-notice\""));
    assert_non_null(strstr(r->out, "\xc2\xb1"));
    snprintf(args, sizeof args, "analyze AAPL --db %s --horizon 5 --ohlc bogus", g_db);
    expect_fail(args, 2, "--ohlc", NULL);
}

/* `kronos store list|delete`: what is stored (as a table, or with --json as GET /v1/symbols'
 * objects), a range and a whole series removed (saying what went and what is left), nothing
 * matched (exit 3), bad flags (exit 2). */
static void test_store_list_delete(void **state) {
    (void)state;
    char args[4096], db[1300], p[1300];
    snprintf(db, sizeof db, "%s/store.db", g_tmp);
    snprintf(args, sizeof args, "store list --db %s", db);
    const run_result *r = ok(args);
    assert_non_null(strstr(r->out, "no such database"));
    struct stat sb;
    assert_int_not_equal(stat(db, &sb), 0); /* listing creates nothing */
    snprintf(args, sizeof args, "store list --json --db %s", db);
    r = ok(args);
    assert_string_equal(r->out, "[]\n");
    assert_int_not_equal(stat(db, &sb), 0);
    snprintf(args, sizeof args,
             "ingest --symbol AAPL --interval 1d --market NYSE --db %s %s/data/AAPL_1d.csv", db,
             KR_SOURCE_DIR);
    ok(args);
    /* pandas' float seconds (to_csv of a float column) as a second series. */
    snprintf(p, sizeof p, "%s/float.csv", g_tmp);
    const char *fl = "timestamps,open,high,low,close,volume\n1704412800.0,1,2,0.5,1.5,10\n"
                     "1704499200.0,1,2,0.5,1.5,10\n1704585600.5,1,2,0.5,1.5,10\n";
    assert_int_equal(kr_test_write_file(p, fl, strlen(fl)), 0);
    snprintf(args, sizeof args, "ingest --symbol WRONG --interval 1h --db %s %s", db, p);
    ok(args);
    snprintf(args, sizeof args, "store list --db %s", db);
    r = ok(args);
    assert_non_null(strstr(r->out, "SYMBOL"));
    assert_non_null(strstr(r->out, "AAPL           1d        NYSE           2913  2014-01-02"));
    assert_non_null(strstr(r->out, "2025-08-01"));
    assert_non_null(
        strstr(r->out, "WRONG          1h        -                 3  2024-01-05 00:00:00"));
    snprintf(args, sizeof args, "store list --symbol aapl --db %s", db);
    r = ok(args);
    assert_null(strstr(r->out, "WRONG"));
    /* --json: one array, /v1/symbols' field names and stamps, plus the market (null: none). */
    snprintf(args, sizeof args, "store list --json --db %s", db);
    r = ok(args);
    cJSON *j = cJSON_Parse(r->out);
    assert_non_null(j);
    assert_true(cJSON_IsArray(j));
    assert_int_equal(cJSON_GetArraySize(j), 2);
    const cJSON *o = cJSON_GetArrayItem(j, 0);
    assert_string_equal(cJSON_GetObjectItem(o, "symbol")->valuestring, "AAPL");
    assert_string_equal(cJSON_GetObjectItem(o, "interval")->valuestring, "1d");
    assert_string_equal(cJSON_GetObjectItem(o, "market")->valuestring, "NYSE");
    assert_int_equal((int)cJSON_GetObjectItem(o, "rows")->valuedouble, 2913);
    assert_string_equal(cJSON_GetObjectItem(o, "first_timestamp")->valuestring, "2014-01-02");
    assert_string_equal(cJSON_GetObjectItem(o, "last_timestamp")->valuestring, "2025-08-01");
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(o, "updated_at")));
    assert_true(cJSON_GetObjectItem(o, "updated_at")->valuedouble > 1.7e9);
    o = cJSON_GetArrayItem(j, 1);
    assert_string_equal(cJSON_GetObjectItem(o, "symbol")->valuestring, "WRONG");
    assert_string_equal(cJSON_GetObjectItem(o, "interval")->valuestring, "1h");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "market")));
    assert_int_equal((int)cJSON_GetObjectItem(o, "rows")->valuedouble, 3);
    assert_string_equal(cJSON_GetObjectItem(o, "first_timestamp")->valuestring,
                        "2024-01-05 00:00:00");
    assert_string_equal(cJSON_GetObjectItem(o, "last_timestamp")->valuestring,
                        "2024-01-07 00:00:00");
    assert_int_equal(cJSON_GetArraySize(o), 7);
    cJSON_Delete(j);
    snprintf(args, sizeof args, "store list --symbol aapl --json --db %s", db);
    r = ok(args);
    j = cJSON_Parse(r->out);
    assert_int_equal(cJSON_GetArraySize(j), 1);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "symbol")->valuestring,
                        "AAPL");
    cJSON_Delete(j);

    /* A range: what went and what is left; the same range again deletes nothing: exit 3. */
    snprintf(args, sizeof args,
             "store delete --symbol aapl --interval 24h --from 2025-07-30 --to 2025-07-31 --db %s",
             db);
    r = ok(args);
    assert_non_null(strstr(r->out, "AAPL 1d: deleted 2 rows (2025-07-30 to 2025-07-31)"));
    assert_non_null(strstr(r->out, "2911 rows left (2014-01-02 to 2025-08-01)"));
    r = run(args);
    assert_int_equal(r->code, 3);
    assert_non_null(strstr(r->out, "nothing deleted: AAPL 1d"));
    assert_non_null(strstr(r->out, "has no candle from 2025-07-30 to 2025-07-31"));
    /* No such series: exit 3, naming what the symbol has. */
    snprintf(args, sizeof args, "store delete --symbol AAPL --interval 5m --db %s", db);
    r = run(args);
    assert_int_equal(r->code, 3);
    assert_non_null(strstr(r->out, "holds no series AAPL 5m (it has 1d)"));
    snprintf(args, sizeof args, "store delete --symbol AAPL --interval 1d --db %s/none.db", g_tmp);
    r = run(args);
    assert_int_equal(r->code, 3);
    assert_non_null(strstr(r->out, "no such database"));
    /* The whole mistaken series: gone from the list. */
    snprintf(args, sizeof args, "store delete --symbol WRONG --interval 1h --db %s", db);
    r = ok(args);
    assert_non_null(strstr(r->out, "WRONG 1h: deleted 3 rows"));
    assert_non_null(strstr(r->out, "the series is gone"));
    snprintf(args, sizeof args, "store list --db %s", db);
    r = ok(args);
    assert_null(strstr(r->out, "WRONG"));
    snprintf(args, sizeof args, "store list --symbol WRONG --db %s", db);
    r = ok(args);
    assert_non_null(strstr(r->out, "no series stored for WRONG"));
    snprintf(args, sizeof args, "store list --symbol WRONG --json --db %s", db);
    r = ok(args);
    assert_string_equal(r->out, "[]\n");

    /* Usage errors: exit 2, nothing deleted. */
    snprintf(args, sizeof args,
             "store delete --symbol AAPL --interval 1d --from 2025-08-01 --to 2025-01-01 --db %s",
             db);
    expect_fail(args, 2, "--from: '2025-08-01' is after --to '2025-01-01'", NULL);
    snprintf(args, sizeof args, "store delete --symbol AAPL --interval 1d --to 2025-13-01 --db %s",
             db);
    expect_fail(args, 2, "--to: cannot parse '2025-13-01'", NULL);
    snprintf(args, sizeof args,
             "store delete --symbol AAPL --interval 1d --from 1704412800123.5 --db %s", db);
    expect_fail(args, 2, "milliseconds", NULL);
    snprintf(args, sizeof args, "store delete --symbol AAPL --db %s", db);
    expect_fail(args, 2, "--interval is required", NULL);
    snprintf(args, sizeof args, "store delete --interval 1d --db %s", db);
    expect_fail(args, 2, "--symbol is required", NULL);
    snprintf(args, sizeof args, "store list --interval 1d --db %s", db);
    expect_fail(args, 2, "list takes only", NULL);
    snprintf(args, sizeof args, "store delete --symbol AAPL --interval 1d --json --db %s", db);
    expect_fail(args, 2, "--json goes with list", NULL);
    expect_fail("store", 2, "list, export or delete", NULL);
    expect_fail("store purge", 2, "unknown subcommand 'purge'", NULL);
    snprintf(args, sizeof args, "store list --db %s", db);
    r = ok(args);
    assert_non_null(strstr(r->out, "2911"));
}

/* store export: a series, a range or its newest rows, as CSV that ingest takes back with
 * nothing changed (every number exact) or as GET /v1/candles' JSON; nothing matched exits 3. */
static void test_store_export(void **state) {
    (void)state;
    char args[4096], db[1300], out[1300];
    snprintf(db, sizeof db, "%s/export.db", g_tmp);
    snprintf(out, sizeof out, "%s/export.csv", g_tmp);
    snprintf(args, sizeof args, "ingest --symbol AAPL --interval 1d --db %s %s/data/AAPL_1d.csv",
             db, KR_SOURCE_DIR);
    ok(args);
    snprintf(args, sizeof args, "store export --symbol aapl --limit 2 --db %s", db);
    const run_result *r = ok(args);
    assert_string_equal(r->out, "timestamps,open,high,low,close,volume,amount\n"
                                "2025-07-31,208.49,209.84,207.16,207.57,80698400,16750566888\n"
                                "2025-08-01,210.87,213.58,201.5,202.38,104301700,21108578046\n");
    assert_non_null(strstr(r->err, "exported 2 candles of AAPL 1d (2025-07-31 to 2025-08-01)"));
    snprintf(args, sizeof args,
             "store export --symbol AAPL --interval 24h --from 2024-01-02 --to 2024-01-05 "
             "--format json --db %s",
             db);
    r = ok(args);
    cJSON *j = cJSON_Parse(r->out);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "interval")->valuestring, "1d");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "candles")), 4);
    cJSON_Delete(j);
    /* The whole series to a file, and back in: nothing new, nothing replaced. */
    snprintf(args, sizeof args, "store export --symbol AAPL --output %s --db %s", out, db);
    r = ok(args);
    assert_string_equal(r->out, "");
    assert_non_null(strstr(r->err, "exported 2913 candles"));
    snprintf(args, sizeof args, "ingest --symbol AAPL --interval 1d --db %s %s", db, out);
    r = ok(args);
    assert_non_null(strstr(r->out, "0 new, 0 replaced with other values, 2913 unchanged"));
    /* Nothing matched: exit 3, saying what is there. */
    snprintf(args, sizeof args, "store export --symbol AAPL --from 2100-01-01 --db %s", db);
    expect_fail(args, 3, "nothing exported", "no candles stored for AAPL 1d from 2100-01-01");
    snprintf(args, sizeof args, "store export --symbol AAPL --interval 5m --db %s", db);
    expect_fail(args, 3, "holds no series AAPL 5m (it has 1d)", NULL);
    snprintf(args, sizeof args, "store export --symbol MSFT --db %s", db);
    expect_fail(args, 3, "holds no series MSFT", NULL);
    snprintf(args, sizeof args, "store export --symbol AAPL --db %s/none.db", g_tmp);
    expect_fail(args, 3, "no such database", NULL);
    /* Several series and no --interval: name one. */
    snprintf(args, sizeof args, "ingest --symbol AAPL --interval 1h --db %s %s", db, out);
    ok(args);
    snprintf(args, sizeof args, "store export --symbol AAPL --db %s", db);
    expect_fail(args, 2, "AAPL has several series", "--interval");
    /* Usage errors. */
    snprintf(args, sizeof args, "store export --db %s", db);
    expect_fail(args, 2, "export: --symbol is required", NULL);
    snprintf(args, sizeof args, "store export --symbol AAPL --format xml --db %s", db);
    expect_fail(args, 2, "--format must be csv or json", NULL);
    snprintf(args, sizeof args, "store export --symbol AAPL --limit 0 --db %s", db);
    expect_fail(args, 2, "--limit must be a positive integer", NULL);
    snprintf(args, sizeof args, "store list --limit 3 --db %s", db);
    expect_fail(args, 2, "go with export", NULL);
    snprintf(args, sizeof args, "store export --symbol AAPL --interval 1d --json --db %s", db);
    expect_fail(args, 2, "export takes --format json", NULL);
    snprintf(args, sizeof args,
             "store export --symbol AAPL --interval 1d --output %s/no/such/x.csv --db %s", g_tmp,
             db);
    expect_fail(args, 1, "no/such/x.csv", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ingest),
        cmocka_unit_test(test_analyze_one_symbol_formats),
        cmocka_unit_test(test_analyze_batch_and_calibrate),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_watchlists),
        cmocka_unit_test(test_stale_against_the_clock),
        cmocka_unit_test(test_uncertainty_and_cover),
        cmocka_unit_test(test_store_list_delete),
        cmocka_unit_test(test_store_export),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
