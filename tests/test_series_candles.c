/*
 * Tests for series/candles and series/calendar: real candle files (A-share 5-minute, US daily,
 * crypto and US equity hourly), every validation error with the place it names, timestamp
 * formats, and future-timestamp inference checked against what the market really printed.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "series/calendar.h"
#include "series/candles.h"
#include "test_support.h"

/* ------------------------------------------------------------------ helpers */

static kr_status parse(const char *csv, kr_candles **out, kr_error *err) {
    return kr_candles_parse_csv(csv, strlen(csv), "data.csv", out, err);
}

static kr_candles *parse_ok(const char *csv) {
    kr_candles *c = NULL;
    kr_error err = { 0 };
    kr_status st = parse(csv, &c, &err);
    if (st != KR_OK) fail_msg("unexpected error: %s", err.message);
    assert_non_null(c);
    return c;
}

static kr_candles *read_fixture(const char *rel) {
    kr_candles *c = NULL;
    kr_error err = { 0 };
    kr_status st = kr_candles_read_csv(kr_test_fixture(rel), &c, &err);
    if (st != KR_OK) fail_msg("%s: %s", rel, err.message);
    return c;
}

/* Parses csv, expects status st and every non-NULL needle in the message. */
static void expect_error(const char *csv, kr_status st, const char *n1, const char *n2,
                         const char *n3) {
    kr_candles *c = (kr_candles *)0x1;
    kr_error err = { 0 };
    kr_status got = parse(csv, &c, &err);
    if (got != st) fail_msg("status %d, expected %d; message: %s", got, st, err.message);
    assert_int_equal(err.status, st);
    assert_null(c);
    const char *needles[] = { "data.csv: ", n1, n2, n3 };
    for (int i = 0; i < 4; i++)
        if (needles[i] && !strstr(err.message, needles[i]))
            fail_msg("'%s' not in message: %s", needles[i], err.message);
}

static int64_t ymdhms(int y, int mo, int d, int h, int mi, int s) {
    return kr_unix_from_civil(y, mo, d, h, mi, s);
}

#define HDR "timestamps,open,high,low,close,volume,amount\n"

/* ------------------------------------------------------------------ reading real files */

static void test_read_regression_input(void **state) {
    (void)state;
    kr_candles *c = read_fixture("regression_input.csv");
    assert_int_equal(c->n, 2500);
    assert_true(c->has_volume && c->has_amount);
    assert_false(c->date_only);
    /* First row: 2024-06-18 11:15:00,11.27,11.28,11.26,11.27,379.0,427161.0 */
    assert_int_equal(c->timestamps[0], 1718709300LL);
    const double row0[6] = { 11.27, 11.28, 11.26, 11.27, 379.0, 427161.0 };
    for (int k = 0; k < 6; k++) assert_true(c->values[k] == row0[k]);
    assert_int_equal(c->timestamps[2499], ymdhms(2024, 8, 29, 11, 30, 0));
    /* Rows 256 and 512 are the upstream regression test's first future stamps. */
    assert_int_equal(c->timestamps[256], ymdhms(2024, 6, 25, 14, 5, 0));
    assert_int_equal(c->timestamps[512], ymdhms(2024, 7, 3, 9, 55, 0));

    kr_series s = kr_candles_series(c);
    assert_int_equal(s.n, 2500);
    assert_ptr_equal(s.timestamps, c->timestamps);
    assert_ptr_equal(s.values, c->values);
    assert_true(s.has_volume && s.has_amount);
    kr_series v = kr_candles_slice(c, 256, 8);
    assert_int_equal(v.n, 8);
    assert_ptr_equal(v.timestamps, c->timestamps + 256);
    assert_ptr_equal(v.values, c->values + 256 * 6);
    assert_int_equal(kr_candles_slice(c, 2492, 8).n, 8);
    /* Out of range: an empty view, not a clamped one. */
    assert_int_equal(kr_candles_slice(c, 2493, 8).n, 0);
    assert_null(kr_candles_slice(c, 2493, 8).values);
    assert_int_equal(kr_candles_slice(c, -1, 8).n, 0);
    assert_int_equal(kr_candles_slice(c, 0, -1).n, 0);
    assert_int_equal(kr_candles_slice(NULL, 0, 1).n, 0);
    assert_int_equal(kr_candles_series(NULL).n, 0);
    kr_candles_free(c);
    kr_candles_free(NULL);
}

static void test_read_other_markets(void **state) {
    (void)state;
    kr_candles *a = read_fixture("csv/aapl_1d_2019.csv");
    assert_int_equal(a->n, 252);
    assert_true(a->date_only);
    assert_int_equal(a->timestamps[0], ymdhms(2019, 1, 2, 0, 0, 0));
    /* 2019-12-31,72.4825,73.42,72.38,73.4125,100990520,7413966549.5 */
    const double *last = a->values + 251 * 6;
    assert_true(last[0] == 72.4825 && last[1] == 73.42 && last[2] == 72.38 && last[3] == 73.4125 &&
                last[4] == 100990520.0 && last[5] == 7413966549.5);
    kr_candles_free(a);

    kr_candles *b = read_fixture("csv/btcusdt_1h_2020_06.csv");
    assert_int_equal(b->n, 720);
    assert_false(b->date_only);
    kr_candles_free(b);

    kr_candles *s = read_fixture("csv/spy_1h_2019_q1.csv");
    assert_int_equal(s->n, 427);
    kr_candles_free(s);
}

/* ------------------------------------------------------------------ accepted syntax */

static void assert_same_candles(const kr_candles *a, const kr_candles *b) {
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->has_volume, b->has_volume);
    assert_int_equal(a->has_amount, b->has_amount);
    assert_int_equal(a->date_only, b->date_only);
    assert_memory_equal(a->timestamps, b->timestamps, (size_t)a->n * sizeof(int64_t));
    assert_memory_equal(a->values, b->values, (size_t)a->n * 6 * sizeof(double));
}

static void test_syntax_variants(void **state) {
    (void)state;
    kr_candles *base = parse_ok(HDR "2024-01-02 09:30:00,10,11,9,10.5,100,1000\n"
                                    "2024-01-02 09:35:00,10.5,12,10,11,200,2000\n");
    assert_int_equal(base->n, 2);
    const char *variants[] = {
        /* no trailing newline */
        HDR "2024-01-02 09:30:00,10,11,9,10.5,100,1000\n"
            "2024-01-02 09:35:00,10.5,12,10,11,200,2000",
        /* CRLF, BOM, blank trailing lines */
        "\xEF\xBB\xBFtimestamps,open,high,low,close,volume,amount\r\n"
        "2024-01-02 09:30:00,10,11,9,10.5,100,1000\r\n"
        "2024-01-02 09:35:00,10.5,12,10,11,200,2000\r\n\r\n\r\n",
        /* quoted fields, escaped quotes, padding, case and spacing in names */
        "\" Timestamps \",OPEN, High ,\"low\",Close,Volume,AMOUNT\n"
        "\"2024-01-02 09:30:00\",\"10\", 11 ,9,10.5,100,1000\n"
        "2024-01-02T09:35:00,10.5,\"12\"  ,10,11,200,2000\n\n",
        /* blank lines in the middle and scientific notation */
        "\n" HDR "\n2024-01-02 09:30:00,1e1,1.1E1,9,10.5,1e2,1e+3\n   \n"
        "2024-01-02 09:35:00,10.5,12,10,11,2.0e2,2000.000\n",
        /* columns in another order, extra columns (one with a quoted comma, a quote and a
         * line break) */
        "symbol,amount,close,note,low,high,open,volume,timestamps\n"
        "X,1000,10.5,\"a, \"\"b\"\"\nc\",9,11,10,100,2024-01-02 09:30:00\n"
        "X,2000,11,,10,12,10.5,200,2024-01-02 09:35:00\n",
        /* lone CR line endings */
        HDR "2024-01-02 09:30:00,10,11,9,10.5,100,1000\r"
            "2024-01-02 09:35:00,10.5,12,10,11,200,2000\r",
        /* +08:00 offsets keep the wall clock */
        HDR "2024-01-02 09:30:00+08:00,10,11,9,10.5,100,1000\n"
            "2024-01-02T09:35:00.250Z,10.5,12,10,11,200,2000\n",
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        kr_candles *c = parse_ok(variants[i]);
        assert_same_candles(base, c);
        kr_candles_free(c);
    }
    kr_candles_free(base);
}

static void test_timestamp_aliases(void **state) {
    (void)state;
    const char *names[] = { "timestamp", "Date", "datetime", " TIME " };
    for (size_t i = 0; i < 4; i++) {
        char csv[256];
        snprintf(csv, sizeof csv, "%s,open,high,low,close\n2024-01-02,1,2,1,2\n", names[i]);
        kr_candles *c = parse_ok(csv);
        assert_int_equal(c->timestamps[0], ymdhms(2024, 1, 2, 0, 0, 0));
        assert_true(c->date_only);
        kr_candles_free(c);
    }
    /* `timestamps` wins over an alias; aliases in order timestamp, datetime, date, time. */
    kr_candles *c = parse_ok("date,timestamps,open,high,low,close\nxx,2024-01-03,1,2,1,2\n");
    assert_int_equal(c->timestamps[0], ymdhms(2024, 1, 3, 0, 0, 0));
    kr_candles_free(c);
    c = parse_ok("time,date,open,high,low,close\n09:30,2024-01-04,1,2,1,2\n");
    assert_int_equal(c->timestamps[0], ymdhms(2024, 1, 4, 0, 0, 0));
    kr_candles_free(c);
}

static void test_amount_from_volume(void **state) {
    (void)state;
    /* With these prices the left-to-right sum differs from the pairwise one in the last bit;
     * the reference (pandas row mean) sums left to right: 11.004999999999999. */
    kr_candles *c = parse_ok("timestamps,open,high,low,close,volume\n"
                             "2024-01-02,5.35,18.96,18.13,1.58,1000\n"
                             "2024-01-03,10,11,9,10.5,0\n");
    assert_false(c->has_amount);
    assert_true(c->has_volume);
    volatile double o = 5.35, h = 18.96, l = 18.13, cl = 1.58;
    const double left_to_right = (((o + h) + l) + cl) / 4.0;
    const double pairwise = ((o + h) + (l + cl)) / 4.0;
    assert_true(left_to_right == 11.004999999999999);
    assert_true(left_to_right != pairwise);
    assert_true(c->values[5] == 1000.0 * left_to_right);
    assert_true(c->values[6 + 5] == 0.0);
    kr_series s = kr_candles_series(c);
    assert_false(s.has_amount);
    assert_true(s.has_volume);
    kr_candles_free(c);
}

static void test_no_volume(void **state) {
    (void)state;
    kr_candles *c = parse_ok("timestamps,open,high,low,close\n2024-01-02,1,2,0.5,1.5\n");
    assert_false(c->has_volume);
    assert_false(c->has_amount);
    assert_true(c->values[4] == 0.0 && c->values[5] == 0.0);
    assert_string_equal(c->amount_dropped, "");
    kr_candles_free(c);
    /* The reference zeroes amount too when volume is missing; the column dropped is named
     * (as the header spells it) so that a program can tell its user. */
    c = parse_ok("timestamps,open,high,low,close,Amount\n2024-01-02,1,2,0.5,1.5,77\n");
    assert_false(c->has_volume);
    assert_false(c->has_amount);
    assert_true(c->values[4] == 0.0 && c->values[5] == 0.0);
    assert_string_equal(c->amount_dropped, "Amount");
    kr_candles_free(c);
    c = parse_ok("timestamps,open,high,low,close,volume,amount\n2024-01-02,1,2,0.5,1.5,3,77\n");
    assert_string_equal(c->amount_dropped, "");
    kr_candles_free(c);
}

static void test_date_only_flag(void **state) {
    (void)state;
    kr_candles *c = parse_ok("timestamps,open,high,low,close\n2024-01-02,1,2,1,2\n"
                             "2024-01-03 00:00,1,2,1,2\n");
    assert_false(c->date_only); /* the second stamp spells out a time of day */
    kr_candles_free(c);
    c = parse_ok("timestamps,open,high,low,close\n2024/01/02,1,2,1,2\n20240103,1,2,1,2\n");
    assert_true(c->date_only);
    kr_candles_free(c);
}

/* ------------------------------------------------------------------ errors */

static void test_error_example_message(void **state) {
    (void)state;
    /* 15 good rows on lines 2-16, the bad one on line 17. */
    char csv[4096];
    size_t n = (size_t)snprintf(csv, sizeof csv, "%s", HDR);
    for (int i = 0; i < 15; i++)
        n += (size_t)snprintf(csv + n, sizeof csv - n, "2024-01-%02d,9.2,9.4,9.1,9.3,1,1\n", i + 1);
    snprintf(csv + n, sizeof csv - n, "2024-01-16,9.2,9.1,9.3,9.2,1,1\n");
    kr_candles *c = NULL;
    kr_error err = { 0 };
    assert_int_equal(parse(csv, &c, &err), KR_ERR_FORMAT);
    assert_string_equal(err.message,
                        "data.csv: line 17, column 'high': high (9.1) is below low (9.3)");
}

static void test_errors_header(void **state) {
    (void)state;
    expect_error("timestamps,open,high,low\n2024-01-02,1,2,1\n", KR_ERR_FORMAT, "line 1",
                 "column 'close'", "missing required column");
    expect_error("when,open,high,low,close\n2024-01-02,1,2,1,2\n", KR_ERR_FORMAT, "line 1",
                 "column 'timestamps'", "the header reads 'when,open,high,low,close'");
    expect_error("timestamps\topen\thigh\tlow\tclose\n2024-01-02\t1\t2\t1\t2\n", KR_ERR_FORMAT,
                 "column 'timestamps': missing", "the header contains a tab or '|'", NULL);
    /* Date and time of day in two columns: the repeat says where the time went. */
    expect_error(
        "Date,Time,open,high,low,close\n2024-01-02,09:30,1,2,1,2\n2024-01-02,09:35,1,2,1,2\n",
        KR_ERR_FORMAT, "line 3, column 'Date': 2024-01-02 00:00:00 repeats line 2",
        "the time of day is in column 'Time'", NULL);
    expect_error("\n\ntimestamps,open,high,close\n2024-01-02,1,2,1\n", KR_ERR_FORMAT, "line 3",
                 "column 'low'", NULL);
    expect_error("timestamps,open,high,low,close,Open\n2024-01-02,1,2,1,2,1\n", KR_ERR_FORMAT,
                 "line 1", "column 'Open'", "duplicate");
    expect_error("date,Date,open,high,low,close\n", KR_ERR_FORMAT, "line 1", "column 'Date'",
                 "duplicate");
    expect_error("", KR_ERR_FORMAT, "line 1", "empty file", NULL);
    expect_error("\xEF\xBB\xBF", KR_ERR_FORMAT, "line 1", "empty file", NULL);
    expect_error("\n  \n\r\n", KR_ERR_FORMAT, "empty file", NULL, NULL);
    expect_error(HDR, KR_ERR_FORMAT, "line 2", "no data rows", NULL);
    expect_error(HDR "\n\n", KR_ERR_FORMAT, "line 4", "no data rows", NULL);
}

static void test_errors_fields(void **state) {
    (void)state;
    const char *ok = "2024-01-02,1,2,1,2,3,4\n";
    char csv[512];
    struct {
        const char *row; /* line 3 */
        const char *column;
        const char *what;
    } cases[] = {
        { "2024-01-03,1,2,,2,3,4", "column 'low'", "empty field" },
        { "2024-01-03,1,2,1,  ,3,4", "column 'close'", "empty field" },
        { "2024-01-03,1,abc,1,2,3,4", "column 'high'", "'abc' is not a number" },
        { "2024-01-03,1,2,1,2.5x,3,4", "column 'close'", "'2.5x' is not a number" },
        { "2024-01-03,1,2,1,2 5,3,4", "column 'close'", "not a number" },
        { "2024-01-03,0x10,20,1,2,3,4", "column 'open'", "not a number" },
        { "2024-01-03,1,2,1,2,1e,4", "column 'volume'", "not a number" },
        { "2024-01-03,1,2,1,2,3,NA", "column 'amount'", "not a number" },
        { "2024-01-03,nan,2,1,2,3,4", "column 'open'", "NaN" },
        { "2024-01-03,1,NaN,1,2,3,4", "column 'high'", "NaN" },
        { "2024-01-03,1,inf,1,2,3,4", "column 'high'", "not finite" },
        { "2024-01-03,1,2,1,2,-Infinity,4", "column 'volume'", "not finite" },
        { "2024-01-03,1,1e999,1,2,3,4", "column 'high'", "'1e999' is out of range" },
        { "2024-01-03,-1,2,1,2,3,4", "column 'open'", "open (-1) must be positive" },
        { "2024-01-03,1,2,1,0,3,4", "column 'close'", "close (0) must be positive" },
        { "2024-01-03,1,2,-0.0,2,3,4", "column 'low'", "must be positive" },
        { "2024-01-03,1,2,1e-320,2,3,4", "column 'low'", "(1e-320) must be positive (in float32" },
        { "2024-01-03,1,2,1,2,-3,4", "column 'volume'", "volume (-3) must be non-negative" },
        { "2024-01-03,1,2,1,2,3,-1e-9", "column 'amount'", "must be non-negative" },
        { "2024-01-03,1,2,3,2,3,4", "column 'high'", "high (2) is below low (3)" },
        { "2024-01-03,1,2,1", "column 'close'", "too few fields" },
        { "2024-01-03,1,2,1,2,3", "column 'amount'", "too few fields" },
        { "2024-01-03", "column 'open'", "too few fields" },
        { "2024-01-03,1,2,1,2,3,4,5", "column 8", "too many fields" },
        { ",1,2,1,2,3,4", "column 'timestamps'", "empty field" },
        { "2024-13-03,1,2,1,2,3,4", "column 'timestamps'", "cannot parse '2024-13-03'" },
        { "2023-02-29,1,2,1,2,3,4", "column 'timestamps'", "cannot parse" },
        { "yesterday,1,2,1,2,3,4", "column 'timestamps'", "cannot parse 'yesterday'" },
        { "2024-01-02,1,2,1,2,3,4", "column 'timestamps'", "2024-01-02 00:00:00 repeats line 2" },
        { "2024-01-01 23:59:59,1,2,1,2,3,4", "column 'timestamps'",
          "2024-01-01 23:59:59 is before line 2 (2024-01-02 00:00:00)" },
        { "2024-01-03,\"1,2,1,2,3,4", "field 2", "unterminated quoted field" },
        { "2024-01-03,\"1\"x,2,1,2,3,4", "field 2", "after a closing quote" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(csv, sizeof csv, HDR "%s%s\n", ok, cases[i].row);
        expect_error(csv, KR_ERR_FORMAT, "line 3", cases[i].column, cases[i].what);
    }
}

static void test_error_line_numbers_after_multiline_field(void **state) {
    (void)state;
    /* A quoted field spanning lines 2-4 (LF, CRLF) moves the next record to line 5. */
    expect_error("timestamps,note,open,high,low,close\n"
                 "2024-01-02,\"a\nb\r\nc\",1,2,1,2\n"
                 "2024-01-03,x,1,2,1,-2\n",
                 KR_ERR_FORMAT, "line 5, column 'close'", "must be positive", NULL);
}

static void test_errors_files(void **state) {
    (void)state;
    kr_candles *c = (kr_candles *)0x1;
    kr_error err = { 0 };
    assert_int_equal(kr_candles_read_csv("/nonexistent/dir/data.csv", &c, &err), KR_ERR_IO);
    assert_null(c);
    assert_non_null(strstr(err.message, "/nonexistent/dir/data.csv"));
    assert_non_null(strstr(err.message, strerror(ENOENT)));

    const char *dir = kr_test_fresh_dir();
    assert_non_null(dir);
    assert_int_equal(kr_candles_read_csv(dir, &c, &err), KR_ERR_IO);
    assert_non_null(strstr(err.message, dir));

    /* A sparse file just over 1 GiB is refused before any of it is read. */
    char path[4096];
    snprintf(path, sizeof path, "%s/huge.csv", dir);
    assert_int_equal(kr_test_write_file(path, HDR, strlen(HDR)), 0);
    assert_int_equal(truncate(path, (off_t)(1 << 30) + 1), 0);
    assert_int_equal(kr_candles_read_csv(path, &c, &err), KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "larger than a candle file can be"));
    assert_non_null(strstr(err.message, path));
    remove(path);

    /* Errors inside a file carry the path as the label. */
    snprintf(path, sizeof path, "%s/bad.csv", dir);
    const char *bad = HDR "2024-01-02,1,2,1,2,3,4\n2024-01-03,1,2,1,2,3,x\n";
    assert_int_equal(kr_test_write_file(path, bad, strlen(bad)), 0);
    assert_int_equal(kr_candles_read_csv(path, &c, &err), KR_ERR_FORMAT);
    char want[4200];
    snprintf(want, sizeof want, "%s: line 3, column 'amount': 'x' is not a number", path);
    assert_string_equal(err.message, want);
    remove(path);
    rmdir(dir);

    assert_int_equal(kr_candles_read_csv(NULL, &c, &err), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_candles_parse_csv("x", 1, "data.csv", NULL, &err), KR_ERR_INVALID_ARG);
    /* A NULL kr_error is allowed. */
    assert_int_equal(kr_candles_parse_csv("x", 1, NULL, &c, NULL), KR_ERR_FORMAT);
}

/* Only regular files are read: a FIFO nobody writes used to block the open for ever, a device
 * like /dev/zero would be read up to the size limit. Each is refused at once, naming the path.
 * alarm() turns a hang into a failure. */
static void test_refuses_non_regular_files(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    assert_non_null(dir);
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/candles.csv", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(30);
    kr_candles *c = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_candles_read_csv(fifo, &c, &err), KR_ERR_IO);
    assert_null(c);
    assert_non_null(strstr(err.message, fifo));
    assert_non_null(strstr(err.message, "not a regular file (a FIFO)"));
    int64_t *ts = NULL, n = 0;
    assert_int_equal(kr_timestamps_read_csv(fifo, &ts, &n, &err), KR_ERR_IO);
    assert_non_null(strstr(err.message, "FIFO"));

    int fds[2];
    assert_int_equal(pipe(fds), 0);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    assert_int_equal(kr_candles_read_csv(path, &c, &err), KR_ERR_IO);
    assert_non_null(strstr(err.message, path));
    close(fds[0]);
    close(fds[1]);
    assert_int_equal(kr_candles_read_csv("/dev/zero", &c, &err), KR_ERR_IO);
    assert_non_null(strstr(err.message, "/dev/zero: not a regular file (a device)"));
    alarm(0);
    remove(fifo);
    rmdir(dir);
}

/* Field text quoted in messages is cut short and made printable. */
static void test_error_excerpt(void **state) {
    (void)state;
    char csv[1024];
    char junk[300];
    memset(junk, 'z', sizeof junk - 1);
    junk[sizeof junk - 1] = '\0';
    junk[5] = '\x01';
    snprintf(csv, sizeof csv, HDR "2024-01-02,1,2,1,%s,3,4\n", junk);
    expect_error(csv, KR_ERR_FORMAT, "line 2, column 'close': 'zzzzz?zzz", "...' is not a number",
                 NULL);
}

/* Inputs the fuzzer (or its seeds) found interesting: each must fail cleanly or parse. */
static void test_hostile_inputs(void **state) {
    (void)state;
#define CASE(s, st) \
    { s, sizeof s - 1, st }
    static const struct {
        const char *data;
        size_t len;
        kr_status st;
    } cases[] = {
        CASE("timestamps,open,high,low,close\n2024-01-02,1\0,2,1,2\n", KR_ERR_FORMAT),
        CASE("timestamps,open,high,low,close\n\"", KR_ERR_FORMAT),
        CASE("\"", KR_ERR_FORMAT),
        CASE(",,,,,,,,\n,,,,,,,,", KR_ERR_FORMAT),
        CASE("timestamps,open,high,low,close\n9999-12-31 23:59:59,1,2,1,2\n", KR_ERR_FORMAT),
        CASE("timestamps,open,high,low,close\n9999999999999,1,2,1,2\n", KR_ERR_FORMAT),
        CASE("timestamps,open,high,low,close\n2200-12-31 23:59:59,1,2,1,2\n", KR_OK),
        CASE("timestamps,open,high,low,close\n1900-01-01,1e-320,1e308,1e-320,1\n", KR_ERR_FORMAT),
        /* 1e-320 is 0 in float32: refused as not positive (it once parsed) */
        CASE("timestamps,open,high,low,close\n1900-01-01,1e-320,3e38,1e-320,1\n", KR_ERR_FORMAT),
        CASE("timestamps,open,high,low,close\n1900-01-01,1e-30,3e38,1e-30,1\n", KR_OK),
    };
#undef CASE
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kr_candles *c = NULL;
        kr_error err = { 0 };
        kr_status st = kr_candles_parse_csv(cases[i].data, cases[i].len, "fuzz", &c, &err);
        if (st != cases[i].st) fail_msg("case %zu: status %d: %s", i, st, err.message);
        kr_candles_free(c);
    }
    /* More fields than the tokenizer's bound. */
    size_t n = 20000;
    char *wide = malloc(n + 1);
    assert_non_null(wide);
    memset(wide, ',', n);
    wide[n] = '\0';
    expect_error(wide, KR_ERR_FORMAT, "line 1", "more than", NULL);
    free(wide);
}

/* fuzz_csv crash 1 (found by libFuzzer, 2.7M executions in): no amount column, so amount is
 * derived as volume x mean(OHLC); with open = 1e308 that product overflowed to inf and a
 * "valid" table carried an infinite amount into the model. Values beyond float32 range, and a
 * derived amount beyond it, are now errors naming the line and column. */
static void test_fuzz_crash_derived_amount_overflow(void **state) {
    (void)state;
    static const char crash[] = "timestamps,open,high,low,close,volume,amo\n"
                                "2013-06-11 18:15:00,11.27,11.28,11.26,11.27,379.0,4271\n"
                                "2024-06-18 22:20:40,1e308,11.28,11.27,11.27,270.0,426954.0\n";
    expect_error(crash, KR_ERR_FORMAT, "line 3, column 'open'", "'1e308' is out of range", NULL);
    /* The same overflow through values that each fit float32. */
    expect_error("timestamps,open,high,low,close,volume\n"
                 "2024-01-02,3e38,3e38,3e38,3e38,2\n",
                 KR_ERR_FORMAT, "line 2, column 'volume'", "derived amount", NULL);
    expect_error(HDR "2024-01-02,1,2,1,2,3,-4e38\n", KR_ERR_FORMAT, "line 2, column 'amount'",
                 "out of range", NULL);
    /* The largest float32 is still accepted. */
    kr_candles *c = parse_ok("timestamps,open,high,low,close,volume\n"
                             "2024-01-02,1,3.4028234e38,1,1,1\n");
    assert_true(isfinite(c->values[5]));
    kr_candles_free(c);
}

/* ------------------------------------------------------------------ timestamps */

static void test_parse_timestamp_valid(void **state) {
    (void)state;
    const int64_t d = ymdhms(2024, 6, 18, 0, 0, 0);
    const int64_t t = ymdhms(2024, 6, 18, 11, 15, 7);
    struct {
        const char *s;
        int64_t want;
        int has_time;
    } cases[] = {
        { "2024-06-18", d, 0 },
        { "2024/06/18", d, 0 },
        { "2024-6-18", d, 0 },
        { "20240618", d, 0 },
        { "  2024-06-18\t", d, 0 },
        { "2024-06-18 11:15", t - 7, 1 },
        { "2024-06-18 11:15:07", t, 1 },
        { "2024-06-18T11:15:07", t, 1 },
        { "2024/06/18 11:15:07", t, 1 },
        { "2024-06-18 11:15:07.999999", t, 1 },
        { "2024-06-18T11:15:07.5Z", t, 1 },
        { "2024-06-18T11:15:07+08:00", t, 1 },
        { "2024-06-18 11:15:07-0500", t, 1 },
        { "2024-06-18 11:15:07 +05:30", t, 1 },
        { "2024-06-18 11:15+08", t - 7, 1 },
        { "2024-06-18 09:30", d + 9 * 3600 + 30 * 60, 1 },
        { "2024-06-18 9:30", d + 9 * 3600 + 30 * 60, 1 },
        { "2024-06-18 00:00:00", d, 1 },
        { "1718709307", t, 1 },
        { "1718709307999", t, 1 },
        { "1718709307999999", t, 1 }, /* microseconds */
        { "1718709307999999999", t, 1 }, /* nanoseconds (pandas' int64 stamps) */
        /* Before 2001-09-09 an epoch count has one digit less: pandas' to_json of an older
         * history writes 12-digit milliseconds. */
        { "996624000", 996624000, 1 },
        { "996624000000", 996624000, 1 },
        { "996624000000000", 996624000, 1 },
        { "996624000000000000", 996624000, 1 },
        { "0000000000", 0, 1 },
        /* Seconds with a fraction (pandas' to_csv of float seconds, time.time()) or an
         * exponent with every digit of the second: truncated as fractional seconds are. */
        { "1718709307.0", t, 1 },
        { "1718709307.999999", t, 1 },
        { " 1718709307.25 ", t, 1 },
        { "996624000.5", 996624000, 1 },
        { "1.718709307e9", t, 1 },
        { "1.7187093075E+09", t, 1 },
        { "17187093079e-1", t, 1 },
        { "0.1718709307e10", t, 1 },
        { "2000-02-29", ymdhms(2000, 2, 29, 0, 0, 0), 0 },
        { "2024-02-29 23:59:59", ymdhms(2024, 2, 29, 23, 59, 59), 1 },
        { "1969-12-31 23:59:59", -1, 1 },
        { "1900-01-01", ymdhms(1900, 1, 1, 0, 0, 0), 0 },
        { "2200-12-31 23:59:59", ymdhms(2200, 12, 31, 23, 59, 59), 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t v = 0;
        int ht = -1;
        if (kr_parse_timestamp(cases[i].s, strlen(cases[i].s), &v, &ht) != 0)
            fail_msg("rejected '%s'", cases[i].s);
        if (v != cases[i].want) fail_msg("'%s' -> %lld", cases[i].s, (long long)v);
        if (ht != cases[i].has_time) fail_msg("'%s' has_time %d", cases[i].s, ht);
    }
    /* len bounds the string: no NUL terminator needed. */
    int64_t v = 0;
    assert_int_equal(kr_parse_timestamp("2024-06-18XYZ", 10, &v, NULL), 0);
    assert_int_equal(v, d);
}

static void test_parse_timestamp_invalid(void **state) {
    (void)state;
    const char *bad[] = {
        "",
        "   ",
        "1900-02-29",
        "2023-02-29",
        "2100-02-29",
        "2024-13-01",
        "2024-00-10",
        "2024-04-31",
        "2024-06-00",
        "0000-01-01",
        "2024-06-18 24:00",
        "2024-06-18 11:60",
        "2024-06-18 11:15:60",
        "2024-06-18 11",
        "2024-06-18T",
        "2024-06-18 11:15:07.",
        "2024-06-18 11:15+25:00",
        "2024-06-18 11:15+08:0",
        "2024-06-18 11:15:07Zjunk",
        "2024-06-18X",
        "2024-06/18",
        "24-06-18",
        "2024-6",
        "17187093071", /* 11 digits: a typo of 10 or 13 */
        "20240618111507", /* 14 and 17: YYYYMMDDHHMMSS[fff], not epochs */
        "20240618111507000",
        "202406181115", /* 12: milliseconds of 1976, or YYYYMMDDHHMM? */
        "17187093079999999999",
        "-1718709307",
        "abc",
        "2024-06-18 1:5",
        "2024-06-18 11:5",
        "2024-06-18 11:15:7",
        "2024-06-18  11:15",
        "2024-001-01",
        "20241318",
        "2024-06-18 11:15 Z x",
        /* A fraction on anything but seconds, exponents that lost digits, half numbers. */
        "1718709307999.5",
        "1718709307999999.5",
        "17187093.5",
        "20240618.5",
        "1.7187093e9",
        "1.718709307e12",
        "1718709307.",
        ".5",
        "1718709307.5.5",
        "1718709307e",
        "1718709307e+",
        "1718709307.5Z",
        "1718709307,5",
        "-1718709307.5",
        "1e9999999999",
        "1718709307.5e0x",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v = 0;
        if (kr_parse_timestamp(bad[i], strlen(bad[i]), &v, NULL) == 0)
            fail_msg("accepted '%s' as %lld", bad[i], (long long)v);
    }
    int64_t v;
    assert_int_not_equal(kr_parse_timestamp(NULL, 3, &v, NULL), 0);
    assert_int_not_equal(kr_parse_timestamp("2024-01-01", 10, NULL, NULL), 0);
}

/* Stamps of a valid format but outside 1900-2200 are refused, with their own code and, in a
 * file, a message naming the line and the column: they are unit or typing mistakes that used to
 * turn into future stamps like 69993-12-20. */
static void test_parse_timestamp_out_of_range(void **state) {
    (void)state;
    const char *out[] = {
        "0001-01-01", "1899-12-31 23:59:59",  "2201-01-01", "9999-12-31 23:59:59",
        "9999999999", "9999999999999",        "99991231",   "18991231",
        "7289654400", "2201-01-01T00:00:00Z",
    };
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
        int64_t v = 0;
        int rc = kr_parse_timestamp(out[i], strlen(out[i]), &v, NULL);
        if (rc != KR_TS_OUT_OF_RANGE) fail_msg("'%s': %d, want out of range", out[i], rc);
    }
    assert_true(kr_timestamp_in_range(ymdhms(1900, 1, 1, 0, 0, 0)));
    assert_false(kr_timestamp_in_range(ymdhms(1900, 1, 1, 0, 0, 0) - 1));
    assert_true(kr_timestamp_in_range(ymdhms(2200, 12, 31, 23, 59, 59)));
    assert_false(kr_timestamp_in_range(ymdhms(2201, 1, 1, 0, 0, 0)));
    expect_error(HDR "2024-01-02,1,2,1,2,3,4\n2924-01-03,1,2,1,2,3,4\n", KR_ERR_FORMAT,
                 "data.csv: line 3, column 'timestamps'",
                 "'2924-01-03' is outside the years 1900-2200", NULL);
    expect_error(HDR "9999999999,1,2,1,2,3,4\n", KR_ERR_FORMAT,
                 "data.csv: line 2, column 'timestamps'", "'9999999999' is outside the years",
                 NULL);
    /* An integer of no epoch length says which lengths are; the YYYYMMDDHHMM look-alike
     * says why it is refused. */
    expect_error(HDR "1718709307,1,2,1,2,3,4\n17187093081,1,2,1,2,3,4\n", KR_ERR_FORMAT,
                 "data.csv: line 3, column 'timestamps'", "'17187093081'",
                 "11 digits: epoch seconds have 9-10, milliseconds 12-13");
    expect_error(HDR "202406181115,1,2,1,2,3,4\n", KR_ERR_FORMAT,
                 "data.csv: line 2, column 'timestamps'", "epoch milliseconds (of 1976)",
                 "YYYYMMDDHHMM");
    kr_candles *c = NULL;
    kr_error err = { 0 };
    /* A decimal count says what makes it ambiguous. */
    expect_error(HDR "1718709307.5,1,2,1,2,3,4\n1718709307999.5,1,2,1,2,3,4\n", KR_ERR_FORMAT,
                 "data.csv: line 3, column 'timestamps'", "'1718709307999.5'",
                 "a fraction on a count of 13 digits (milliseconds)");
    expect_error(HDR "1.7187093e9,1,2,1,2,3,4\n", KR_ERR_FORMAT,
                 "data.csv: line 2, column 'timestamps'",
                 "exponent notation with 8 significant digits for a count of 10 digits",
                 "write the number out");
    /* pandas' to_csv of float seconds: daily bars, stamped at midnight, with a time of day. */
    assert_int_equal(parse(HDR "1704153600.0,1,2,1,2,3,4\n1704240000.0,1,2,1,2,3,4\n", &c, &err),
                     KR_OK);
    assert_int_equal(c->timestamps[1], ymdhms(2024, 1, 3, 0, 0, 0));
    kr_candles_free(c);
    /* Local stamps through the end of summer time repeat an hour: the message says why. */
    expect_error(HDR
                 "2026-11-01 00:30:00-04:00,1,2,1,2,3,4\n2026-11-01 01:30:00-04:00,1,2,1,2,3,4\n"
                 "2026-11-01 01:30:00-05:00,1,2,1,2,3,4\n",
                 KR_ERR_FORMAT, "line 4, column 'timestamps': 2026-11-01 01:30:00 repeats line 3",
                 "summer time ends", "give them in UTC");
    assert_int_equal(
        parse(HDR "2026-11-02 12:30,1,2,1,2,3,4\n2026-11-02 12:00,1,2,1,2,3,4\n", &c, &err),
        KR_ERR_FORMAT);
    assert_null(strstr(err.message, "summer time"));
    /* A daily history in epoch seconds from the 1990s crosses from 9 to 10 digits. */
    assert_int_equal(parse(HDR "999907200,1,2,1,2,3,4\n999993600,1,2,1,2,3,4\n"
                               "1000080000,1,2,1,2,3,4\n",
                           &c, &err),
                     KR_OK);
    assert_int_equal(c->n, 3);
    assert_int_equal(c->timestamps[2], ymdhms(2001, 9, 10, 0, 0, 0));
    kr_candles_free(c);
}

static void test_timestamps_read_csv(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    assert_non_null(dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/future.csv", dir);
    /* Other columns, even repeated candle names, are ignored in a timestamps file. */
    const char *ok = "x,Date,open,open\r\na,2024-06-18 13:05,,\r\nb,2024-06-18 13:10,1,2\r\n";
    assert_int_equal(kr_test_write_file(path, ok, strlen(ok)), 0);
    int64_t *ts = NULL, n = 0;
    kr_error err = { 0 };
    assert_int_equal(kr_timestamps_read_csv(path, &ts, &n, &err), KR_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ts[0], ymdhms(2024, 6, 18, 13, 5, 0));
    assert_int_equal(ts[1], ymdhms(2024, 6, 18, 13, 10, 0));
    free(ts);

    const char *dup = "timestamps\n2024-06-18 13:05\n2024-06-18 13:10\n2024-06-18 13:10\n";
    assert_int_equal(kr_test_write_file(path, dup, strlen(dup)), 0);
    ts = (int64_t *)0x1;
    assert_int_equal(kr_timestamps_read_csv(path, &ts, &n, &err), KR_ERR_FORMAT);
    assert_null(ts);
    assert_non_null(strstr(err.message, path));
    assert_non_null(strstr(err.message, "line 4, column 'timestamps'"));
    assert_non_null(strstr(err.message, "repeats line 3"));

    const char *none = "open,close\n1,2\n";
    assert_int_equal(kr_test_write_file(path, none, strlen(none)), 0);
    assert_int_equal(kr_timestamps_read_csv(path, &ts, &n, &err), KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "line 1, column 'timestamps': missing"));
    remove(path);
    assert_int_equal(kr_timestamps_read_csv(path, &ts, &n, &err), KR_ERR_IO);
    rmdir(dir);
}

/* ------------------------------------------------------------------ calendar */

/* Infers `p` stamps from rows [0, cut) and compares with rows [cut, cut+p). */
static int calendar_matches(const int64_t *ts, int64_t cut, int p) {
    int64_t out[64];
    kr_error err = { 0 };
    assert_true(p <= 64);
    if (kr_calendar_future(ts, cut, p, out, NULL, &err) != KR_OK)
        fail_msg("cut %lld: %s", (long long)cut, err.message);
    return memcmp(out, ts + cut, (size_t)p * sizeof *out) == 0;
}

static int64_t find_row(const kr_candles *c, int64_t t) {
    for (int64_t i = 0; i < c->n; i++)
        if (c->timestamps[i] == t) return i;
    fail_msg("row not found");
    return -1;
}

static void test_calendar_a_share_5min(void **state) {
    (void)state;
    kr_candles *c = read_fixture("regression_input.csv");
    kr_calendar_info info;
    int64_t out[48];
    kr_error err = { 0 };
    assert_int_equal(kr_calendar_future(c->timestamps, c->n, 48, out, &info, &err), KR_OK);
    assert_int_equal(info.interval_seconds, 300);
    assert_true(info.intraday);
    assert_int_equal(info.weekday_mask, 0x1F); /* Monday-Friday */
    assert_int_equal(info.n_slots, 48); /* 09:35-11:30 and 13:05-15:00 */
    /* After the last row (Thursday 2024-08-29 11:30) comes the afternoon session. */
    assert_int_equal(out[0], ymdhms(2024, 8, 29, 13, 5, 0));
    assert_int_equal(out[24], ymdhms(2024, 8, 30, 9, 35, 0));

    /* Named cuts: across lunch, overnight, and a weekend (Friday 15:00 -> Monday 09:35). */
    const int64_t lunch = find_row(c, ymdhms(2024, 6, 25, 11, 30, 0)) + 1;
    assert_true(calendar_matches(c->timestamps, lunch, 8));
    assert_int_equal(c->timestamps[lunch], ymdhms(2024, 6, 25, 13, 5, 0));
    const int64_t night = find_row(c, ymdhms(2024, 7, 3, 15, 0, 0)) + 1;
    assert_true(calendar_matches(c->timestamps, night, 8));
    const int64_t weekend = find_row(c, ymdhms(2024, 7, 5, 15, 0, 0)) + 1;
    assert_true(calendar_matches(c->timestamps, weekend, 8));
    assert_int_equal(c->timestamps[weekend], ymdhms(2024, 7, 8, 9, 35, 0));

    /* Every cut once the history has seen all weekdays and slots (no holidays in this
     * range): the next full trading day (48 bars) is reproduced exactly. */
    int64_t checked = 0;
    for (int64_t cut = 300; cut + 48 <= c->n; cut++, checked++)
        if (!calendar_matches(c->timestamps, cut, 48)) fail_msg("cut %lld", (long long)cut);
    assert_true(checked > 2000);
    kr_candles_free(c);
}

/* True when a holiday date (midnight stamp) lies in [a, b]. */
static int spans_holiday(const int64_t *holidays, int nh, int64_t a, int64_t b) {
    for (int i = 0; i < nh; i++)
        if (holidays[i] + 86399 >= a && holidays[i] <= b) return 1;
    return 0;
}

static void test_calendar_us_daily(void **state) {
    (void)state;
    kr_candles *c = read_fixture("csv/aapl_1d_2019.csv");
    const int64_t hol[] = { ymdhms(2019, 1, 21, 0, 0, 0),  ymdhms(2019, 2, 18, 0, 0, 0),
                            ymdhms(2019, 4, 19, 0, 0, 0),  ymdhms(2019, 5, 27, 0, 0, 0),
                            ymdhms(2019, 7, 4, 0, 0, 0),   ymdhms(2019, 9, 2, 0, 0, 0),
                            ymdhms(2019, 11, 28, 0, 0, 0), ymdhms(2019, 12, 25, 0, 0, 0) };
    kr_calendar_info info;
    int64_t out[10];
    kr_error err = { 0 };
    assert_int_equal(kr_calendar_future(c->timestamps, c->n, 10, out, &info, &err), KR_OK);
    assert_int_equal(info.interval_seconds, 86400);
    assert_false(info.intraday);
    assert_int_equal(info.weekday_mask, 0x1F);
    assert_int_equal(info.n_slots, 0);
    /* The NYSE calendar is inferred (no other calendar holds a US year): Tuesday 2019-12-31
     * -> Thu Jan 2 (New Year's Day skipped), Fri Jan 3, Mon Jan 6, Tue Jan 7 ... */
    assert_int_equal(out[0], ymdhms(2020, 1, 2, 0, 0, 0));
    assert_int_equal(out[3], ymdhms(2020, 1, 7, 0, 0, 0));
    assert_int_equal(out[8], ymdhms(2020, 1, 14, 0, 0, 0));
    assert_non_null(info.calendar);
    assert_string_equal(info.calendar->name, "NYSE");
    assert_int_equal(info.how, KR_CAL_INFERRED);

    /* Friday 2019-03-08 -> Monday 2019-03-11. */
    const int64_t fri = find_row(c, ymdhms(2019, 3, 8, 0, 0, 0)) + 1;
    assert_true(calendar_matches(c->timestamps, fri, 6));
    assert_int_equal(c->timestamps[fri], ymdhms(2019, 3, 11, 0, 0, 0));

    /* Every cut once the history rules out the Asian calendars (by late February it has traded
     * through the Lunar New Year): the next 5 sessions exactly, holidays included. */
    int64_t checked = 0, holidays = 0;
    for (int64_t cut = 40; cut + 5 <= c->n; cut++) {
        if (!calendar_matches(c->timestamps, cut, 5)) fail_msg("cut %lld", (long long)cut);
        checked++;
        holidays += spans_holiday(hol, 8, c->timestamps[cut - 1], c->timestamps[cut + 4]);
    }
    assert_true(checked > 200 && holidays > 20); /* cuts across Good Friday ... Christmas */
    kr_candles_free(c);
}

static void test_calendar_crypto_hourly(void **state) {
    (void)state;
    kr_candles *c = read_fixture("csv/btcusdt_1h_2020_06.csv");
    kr_calendar_info info;
    int64_t out[4];
    kr_error err = { 0 };
    assert_int_equal(kr_calendar_future(c->timestamps, c->n, 4, out, &info, &err), KR_OK);
    assert_int_equal(info.interval_seconds, 3600);
    assert_int_equal(info.weekday_mask, 0x7F);
    assert_int_equal(info.n_slots, 24);
    assert_int_equal(out[0], ymdhms(2020, 7, 1, 0, 0, 0));
    /* 24/7: every cut after a full week, including Friday -> Saturday -> Sunday. */
    for (int64_t cut = 7 * 24; cut + 48 <= c->n; cut++)
        if (!calendar_matches(c->timestamps, cut, 48)) fail_msg("cut %lld", (long long)cut);
    const int64_t fri = find_row(c, ymdhms(2020, 6, 12, 23, 0, 0)) + 1; /* a Friday */
    assert_int_equal(c->timestamps[fri], ymdhms(2020, 6, 13, 0, 0, 0));
    assert_true(calendar_matches(c->timestamps, fri, 48));
    kr_candles_free(c);
}

static void test_calendar_us_hourly_sessions(void **state) {
    (void)state;
    kr_candles *c = read_fixture("csv/spy_1h_2019_q1.csv");
    kr_calendar_info info;
    int64_t out[8];
    kr_error err = { 0 };
    assert_int_equal(kr_calendar_future(c->timestamps, c->n, 8, out, &info, &err), KR_OK);
    assert_int_equal(info.interval_seconds, 3600);
    assert_int_equal(info.weekday_mask, 0x1F);
    assert_int_equal(info.n_slots, 7); /* 09:00 ... 15:00 */
    /* Friday 2019-03-29 15:00 -> Monday 2019-04-01 09:00 ... 15:00, Tuesday 09:00. */
    assert_int_equal(out[0], ymdhms(2019, 4, 1, 9, 0, 0));
    assert_int_equal(out[6], ymdhms(2019, 4, 1, 15, 0, 0));
    assert_int_equal(out[7], ymdhms(2019, 4, 2, 9, 0, 0));

    const int64_t hol[] = { ymdhms(2019, 1, 21, 0, 0, 0), ymdhms(2019, 2, 18, 0, 0, 0) };
    int64_t checked = 0;
    for (int64_t cut = 5 * 7; cut + 7 <= c->n; cut++) {
        if (spans_holiday(hol, 2, c->timestamps[cut - 1], c->timestamps[cut + 6])) continue;
        if (!calendar_matches(c->timestamps, cut, 7)) fail_msg("cut %lld", (long long)cut);
        checked++;
    }
    assert_true(checked > 350);
    kr_candles_free(c);
}

static void test_calendar_rules(void **state) {
    (void)state;
    kr_error err = { 0 };
    kr_calendar_info info;
    int64_t out[8];
    /* Weekly bars on Mondays stay on Mondays. */
    const int64_t weekly[] = { ymdhms(2024, 1, 1, 0, 0, 0), ymdhms(2024, 1, 8, 0, 0, 0),
                               ymdhms(2024, 1, 15, 0, 0, 0) };
    assert_int_equal(kr_calendar_future(weekly, 3, 2, out, &info, &err), KR_OK);
    assert_int_equal(info.interval_seconds, 7 * 86400);
    assert_int_equal(info.weekday_mask, 1);
    assert_int_equal(out[0], ymdhms(2024, 1, 22, 0, 0, 0));
    assert_int_equal(out[1], ymdhms(2024, 1, 29, 0, 0, 0));

    /* Mode, ties to the smaller gap: gaps {1d, 3d} -> 1 day. Three weekdays fit every
     * exchange calendar, so the next trading days follow (not the weekdays seen: Thu, Fri, Mon
     * would have continued with Thursday). */
    const int64_t d[] = { ymdhms(2024, 1, 4, 0, 0, 0), ymdhms(2024, 1, 5, 0, 0, 0),
                          ymdhms(2024, 1, 8, 0, 0, 0) };
    assert_int_equal(kr_calendar_future(d, 3, 2, out, &info, &err), KR_OK);
    assert_int_equal(info.interval_seconds, 86400);
    assert_int_equal(info.weekday_mask, (1 << 3) | (1 << 4) | 1);
    assert_int_equal(out[0], ymdhms(2024, 1, 9, 0, 0, 0));
    assert_int_equal(out[1], ymdhms(2024, 1, 10, 0, 0, 0));

    /* Daily bars stamped at a time of day keep it. */
    const int64_t dt[] = { ymdhms(2024, 1, 4, 16, 0, 0), ymdhms(2024, 1, 5, 16, 0, 0) };
    assert_int_equal(kr_calendar_future(dt, 2, 1, out, NULL, &err), KR_OK);
    assert_int_equal(out[0], ymdhms(2024, 1, 8, 16, 0, 0)); /* Friday -> Monday */

    /* Before 1970: weekday and slots use floor division. */
    const int64_t old[] = { ymdhms(1969, 12, 31, 23, 0, 0), ymdhms(1969, 12, 31, 23, 30, 0),
                            ymdhms(1970, 1, 1, 0, 0, 0) };
    assert_int_equal(kr_calendar_future(old, 3, 3, out, &info, &err), KR_OK);
    assert_int_equal(info.interval_seconds, 1800);
    assert_int_equal(out[0], ymdhms(1970, 1, 1, 23, 0, 0));
    assert_int_equal(out[1], ymdhms(1970, 1, 1, 23, 30, 0));
    assert_int_equal(out[2], ymdhms(1970, 1, 7, 0, 0, 0)); /* Wed 00:00 slot: next Wednesday */
}

static void test_calendar_errors(void **state) {
    (void)state;
    kr_error err = { 0 };
    int64_t out[4];
    const int64_t one[] = { 0 };
    assert_int_equal(kr_calendar_future(one, 1, 1, out, NULL, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "at least 2"));
    const int64_t dec[] = { 100, 50, 200 };
    assert_int_equal(kr_calendar_future(dec, 3, 1, out, NULL, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "strictly increasing"));
    const int64_t eq[] = { 100, 100 };
    assert_int_equal(kr_calendar_future(eq, 2, 1, out, NULL, &err), KR_ERR_INVALID_ARG);
    const int64_t big[] = { 0, INT64_MAX };
    assert_int_equal(kr_calendar_future(big, 2, 1, out, NULL, &err), KR_ERR_INVALID_ARG);
    const int64_t ok[] = { 0, 60 };
    assert_int_equal(kr_calendar_future(ok, 2, -1, out, NULL, &err), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_calendar_future(ok, 2, 0, NULL, NULL, &err), KR_OK);
    assert_int_equal(kr_calendar_future(NULL, 2, 1, out, NULL, &err), KR_ERR_INVALID_ARG);

    /* 17-minute bars on two days that fit no exchange calendar: the times of day seen are
     * learned, and stepping from 00:34 never lands on one (00:00, 00:17, 00:34) again until
     * 17 days later, past the 14-day search bound. */
    const int64_t odd[] = { 0, 1020, 2040, 86400, 86400 + 1020, 86400 + 2040 };
    assert_int_equal(kr_calendar_future(odd, 6, 1, out, NULL, &err), KR_ERR_FORMAT);
    assert_non_null(strstr(err.message, "1970-01-02 00:34:00"));
    assert_non_null(strstr(err.message, "future timestamps"));
    /* The same bars on one day only: nothing to learn from, every interval follows. */
    kr_calendar_info info;
    assert_int_equal(kr_calendar_future(odd, 3, 1, out, &info, &err), KR_OK);
    assert_int_equal(out[0], 3060);
    assert_int_equal(info.how, KR_CAL_CONTINUOUS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_regression_input),
        cmocka_unit_test(test_read_other_markets),
        cmocka_unit_test(test_syntax_variants),
        cmocka_unit_test(test_timestamp_aliases),
        cmocka_unit_test(test_amount_from_volume),
        cmocka_unit_test(test_no_volume),
        cmocka_unit_test(test_date_only_flag),
        cmocka_unit_test(test_error_example_message),
        cmocka_unit_test(test_errors_header),
        cmocka_unit_test(test_errors_fields),
        cmocka_unit_test(test_error_line_numbers_after_multiline_field),
        cmocka_unit_test(test_errors_files),
        cmocka_unit_test(test_refuses_non_regular_files),
        cmocka_unit_test(test_error_excerpt),
        cmocka_unit_test(test_hostile_inputs),
        cmocka_unit_test(test_fuzz_crash_derived_amount_overflow),
        cmocka_unit_test(test_parse_timestamp_valid),
        cmocka_unit_test(test_parse_timestamp_invalid),
        cmocka_unit_test(test_parse_timestamp_out_of_range),
        cmocka_unit_test(test_timestamps_read_csv),
        cmocka_unit_test(test_calendar_a_share_5min),
        cmocka_unit_test(test_calendar_us_daily),
        cmocka_unit_test(test_calendar_crypto_hourly),
        cmocka_unit_test(test_calendar_us_hourly_sessions),
        cmocka_unit_test(test_calendar_rules),
        cmocka_unit_test(test_calendar_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
