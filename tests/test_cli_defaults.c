/*
 * What a trader and a new user meet first (issue 42): `kronos forecast`'s defaults (consistent
 * candles, non-negative whole volumes, the input's decimals, 32 paths with a band, no note on a
 * default run, files as operands), errors that name the real problem (a missing model
 * directory, a model file or a spreadsheet given as candles, a 3-row history, a missing volume
 * column, a bare A-share code), the calendar running out (stderr and JSON), and the small
 * frictions: ingest inferring the interval, SZSE kept as SZSE, `kronos version`, `kronos
 * calendars` with a user's calendar directory.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "test_support.h"

static const char *g_tmp;

static const kr_test_run *kronos(const char *args) { return kr_test_kronos(g_tmp, "", args); }

static const char *write_file(const char *name, const void *data, size_t len) {
    static char path[1200];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    assert_int_equal(kr_test_write_file(path, data, len), 0);
    return path;
}

static void expect(const char *args, int code, const char *out_needle, const char *err_needle) {
    const kr_test_run *r = kronos(args);
    if (r->code != code || (out_needle && !strstr(r->out, out_needle)) ||
        (err_needle && !strstr(r->err, err_needle)))
        fail_msg("kronos %s: exit %d (want %d)\nstdout: %.600s\nstderr: %.600s\n(want '%s' / "
                 "'%s')",
                 args, r->code, code, r->out, r->err, out_needle ? out_needle : "",
                 err_needle ? err_needle : "");
}

/* Daily SSE-like bars on the weekdays from 2026-09-01 to 2026-12-31 (prices in cents). */
static const char *sse_daily(int with_volume) {
    static char text[16384];
    size_t len = (size_t)snprintf(text, sizeof text, "timestamps,open,high,low,close%s\n",
                                  with_volume ? ",volume" : "");
    int y = 2026, m = 9, d = 1, wd = 1, i = 0; /* 2026-09-01 is a Tuesday */
    static const int mdays[13] = { 0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    while (y == 2026) {
        if (wd < 5) {
            const double c = 10 + 0.01 * (i % 17);
            len +=
                (size_t)snprintf(text + len, sizeof text - len, "%d-%02d-%02d,%.2f,%.2f,%.2f,%.2f",
                                 y, m, d, c, c + 0.1, c - 0.1, c + 0.02);
            if (with_volume)
                len += (size_t)snprintf(text + len, sizeof text - len, ",%d", 100000 + 7 * i);
            len += (size_t)snprintf(text + len, sizeof text - len, "\n");
            i++;
        }
        wd = (wd + 1) % 7;
        if (++d > mdays[m]) {
            d = 1;
            if (++m > 12) y++;
        }
    }
    return text;
}

/* Splits a CSV line into at most 16 fields (in place). */
static int fields(char *line, char **f) {
    int n = 0;
    for (char *p = strtok(line, ","); p && n < 16; p = strtok(NULL, ",")) f[n++] = p;
    return n;
}

static int decimals(const char *s) {
    const char *dot = strchr(s, '.');
    return dot ? (int)strlen(dot + 1) : 0;
}

/* Finding 2: the defaults a trader expects. */
static void test_forecast_defaults(void **state) {
    (void)state;
    char args[2400];
    /* A long history (2,913 rows, past the 512-token window), as a file operand. */
    snprintf(args, sizeof args, "forecast %s/data/AAPL_1d.csv --pred-len 6", KR_SOURCE_DIR);
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("%s", r->err);
    /* No note about re-running the window, no warning: only the demo model's label. */
    assert_null(strstr(r->err, "max-context"));
    assert_null(strstr(r->err, "warning"));
    char *text = strdup(r->out);
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    assert_string_equal(line, "timestamps,open,high,low,close,volume,amount,close_q0.1,close_q0.9");
    int rows = 0;
    while ((line = strtok_r(NULL, "\n", &save))) {
        char *f[16];
        assert_int_equal(fields(line, f), 9);
        assert_null(strchr(line, 'e')); /* fixed point, never 1.2e+09 */
        const double o = atof(f[1]), h = atof(f[2]), l = atof(f[3]), c = atof(f[4]);
        assert_true(h >= o && h >= c && l <= o && l <= c);
        assert_true(atof(f[5]) >= 0 && atof(f[6]) >= 0);
        /* AAPL_1d.csv quotes prices with up to 4 decimals and volumes as whole numbers. */
        for (int k = 1; k <= 4; k++) assert_int_equal(decimals(f[k]), 4);
        assert_int_equal(decimals(f[5]), 0);
        assert_true(atof(f[7]) <= atof(f[8]));
        rows++;
    }
    assert_int_equal(rows, 6);
    free(text);

    /* 32 paths by default, consistent candles; raw on request. */
    snprintf(args, sizeof args, "forecast %s/data/AAPL_1d.csv --pred-len 3 --format json",
             KR_SOURCE_DIR);
    r = kronos(args);
    cJSON *j = cJSON_Parse(r->out);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "paths")), 32);
    assert_string_equal(cJSON_GetObjectItem(j, "ohlc")->valuestring, "consistent");
    /* The default lookback leaves the window room for the forecast (512 - 3). */
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "params"), "lookback")->valueint,
                     509);
    cJSON *paths = cJSON_GetObjectItem(j, "paths");
    for (int p = 0; p < cJSON_GetArraySize(paths); p++) {
        cJSON *cs = cJSON_GetObjectItem(cJSON_GetArrayItem(paths, p), "candles");
        for (int k = 0; k < cJSON_GetArraySize(cs); k++) {
            cJSON *c = cJSON_GetArrayItem(cs, k);
            assert_true(cJSON_GetObjectItem(c, "volume")->valuedouble >= 0);
            assert_true(cJSON_GetObjectItem(c, "amount")->valuedouble >= 0);
            assert_true(cJSON_GetObjectItem(c, "high")->valuedouble >=
                        cJSON_GetObjectItem(c, "open")->valuedouble);
        }
    }
    cJSON_Delete(j);
    snprintf(args, sizeof args,
             "forecast --input %s/data/AAPL_1d.csv --pred-len 3 --ohlc raw --paths 1 --format json",
             KR_SOURCE_DIR);
    expect(args, 0, "\"ohlc\":\"raw\"", NULL);
    /* --quantiles none: the mean's seven columns; --paths 1: no band either. */
    snprintf(args, sizeof args, "forecast %s/data/AAPL_1d.csv --pred-len 2 --quantiles none",
             KR_SOURCE_DIR);
    expect(args, 0, "timestamps,open,high,low,close,volume,amount\n", NULL);
    snprintf(args, sizeof args, "forecast %s/data/AAPL_1d.csv --pred-len 2 --paths 1",
             KR_SOURCE_DIR);
    expect(args, 0, "timestamps,open,high,low,close,volume,amount\n", NULL);
    /* A longer lookback asked for still gets its note. */
    snprintf(args, sizeof args, "forecast %s/data/AAPL_1d.csv --pred-len 2 --lookback 512",
             KR_SOURCE_DIR);
    expect(args, 0, NULL, "--lookback 510");
}

/* Finding 7 (CLI side): errors that name the problem. */
static void test_errors_that_help(void **state) {
    (void)state;
    char args[2600];
    const char *csv = write_file("ok.csv", sse_daily(1), strlen(sse_daily(1)));
    char ok[1200];
    snprintf(ok, sizeof ok, "%s", csv);
    snprintf(args, sizeof args, "forecast %s --pred-len 2 --model %s/no-such-model", ok, g_tmp);
    expect(args, 2, NULL, "no-such-model: no such directory");
    /* A model file, a spreadsheet, a picture given as candles. */
    snprintf(args, sizeof args,
             "forecast %s/models/kronos-demo/predictor/model.safetensors "
             "--pred-len 2",
             KR_SOURCE_DIR);
    expect(args, 1, NULL, "not a CSV/JSON candle file (it looks like a safetensors model file)");
    const char *xlsx = write_file("book.xlsx", "PK\x03\x04\x14\0\x06\0junk", 12);
    snprintf(args, sizeof args, "forecast %s --pred-len 2", xlsx);
    expect(args, 1, NULL, "Excel .xlsx");
    const char *png = write_file("chart.png", "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
    snprintf(args, sizeof args, "ingest --symbol X --interval 1d --db %s/k.db %s", g_tmp, png);
    expect(args, 1, NULL, "it looks like a PNG image");
    /* Three rows: a forecast, with the minimum and the reason on stderr. */
    const char *three = "timestamps,open,high,low,close,volume\n2024-01-02,1,2,0.5,1.5,10\n"
                        "2024-01-03,1.5,2,1,1.8,12\n2024-01-04,1.8,2.2,1.6,2,9\n";
    const char *tiny = write_file("tiny.csv", three, strlen(three));
    snprintf(args, sizeof args, "forecast %s --pred-len 2", tiny);
    expect(args, 0, NULL, "3 rows of history; a forecast needs at least 32");
    /* No volume column: said, in the CLI and in the JSON. */
    const char *nov = write_file("novol.csv", sse_daily(0), strlen(sse_daily(0)));
    snprintf(args, sizeof args, "forecast %s --pred-len 2 --market NYSE --format json", nov);
    expect(args, 0, "\"volume_absent\":true", "no volume column: volume and amount are set to 0");
    /* A bare A-share code that is not stored: the suffix is suggested. */
    snprintf(args, sizeof args, "ingest --symbol 600977.SH --db %s/k.db %s", g_tmp, ok);
    expect(args, 0, NULL, NULL);
    snprintf(args, sizeof args, "analyze 000333 --db %s/k.db", g_tmp);
    expect(args, 1, NULL, "did you mean '000333.SZ'?");
}

/* Finding 1 (CLI side): a forecast past the calendar's last year says so; a user's calendar
 * directory extends it; kronos calendars lists years and sources. */
static void test_calendar_runs_out(void **state) {
    (void)state;
    char args[2600];
    const char *csv = write_file("sse.csv", sse_daily(1), strlen(sse_daily(1)));
    char path[1200];
    snprintf(path, sizeof path, "%s", csv);
    snprintf(args, sizeof args, "forecast %s --pred-len 3 --market SSE", path);
    expect(args, 0, "\n2027-01-01,", "calendar SSE lists holidays through 2026 only");
    snprintf(args, sizeof args, "forecast %s --pred-len 3 --market sse --format json", path);
    expect(args, 0,
           "\"calendar\":{\"name\":\"SSE\",\"years\":[2010,2026],\"holidays_known\":false}",
           "holidays through 2026");
    expect("calendars", 0, "SSE      2010-2026", NULL);
    /* analyze leads its report with a banner (JSON calendar_notice). */
    snprintf(args, sizeof args, "ingest --symbol 600977.SH --market SSE --db %s/cal.db %s", g_tmp,
             path);
    expect(args, 0, NULL, NULL);
    snprintf(args, sizeof args,
             "analyze 600977.SH --db %s/cal.db --horizon 5 --paths 8 --max-paths 8 --format md",
             g_tmp);
    expect(args, 0, "**CALENDAR PAST ITS YEARS: 600977.SH 1d: its forecast bars run past 2026",
           NULL);
    snprintf(args, sizeof args,
             "analyze 600977.SH --db %s/cal.db --horizon 5 --paths 8 --max-paths 8", g_tmp);
    const kr_test_run *a = kronos(args);
    cJSON *rep = cJSON_Parse(a->out);
    assert_non_null(rep);
    assert_non_null(strstr(cJSON_GetObjectItem(rep, "calendar_notice")->valuestring,
                           "CALENDAR PAST ITS YEARS: 600977.SH"));
    cJSON_Delete(rep);
    /* A user's notice for 2027 (invented dates for the test) extends SSE. */
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/cal", g_tmp);
    snprintf(args, sizeof args, "mkdir -p %s", dir);
    assert_int_equal(system(args), 0);
    const char *ext = "{\"extends\":\"SSE\",\"years\":[2027,2027],\"source\":\"test\","
                      "\"holidays\":[\"2027-01-01\",\"2027-01-04\"]}";
    write_file("cal/sse-2027.json", ext, strlen(ext));
    snprintf(args, sizeof args, "calendars --calendar-dir %s", dir);
    expect(args, 0, "SSE      2010-2027", NULL);
    expect(args, 0, "sse-2027.json", NULL);
    snprintf(args, sizeof args, "forecast %s --pred-len 3 --market SSE --calendar-dir %s", path,
             dir);
    const kr_test_run *r = kronos(args);
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->out, "\n2027-01-05,"));
    assert_null(strstr(r->out, "2027-01-01"));
    assert_null(strstr(r->err, "holidays through"));
    /* The environment variable does the same. */
    char env[1300];
    snprintf(env, sizeof env, "KRONOS_CALENDAR_DIR=%s", dir);
    r = kr_test_kronos(g_tmp, env, "calendars --json");
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->out, "2027"));
    /* A directory that is not there is an error, naming it. */
    snprintf(args, sizeof args, "calendars --calendar-dir %s/none", g_tmp);
    expect(args, 2, NULL, "no such directory");
}

/* Finding 9: ingest infers the interval; SZSE stays SZSE; version. */
static void test_small_frictions(void **state) {
    (void)state;
    char args[2600];
    snprintf(args, sizeof args,
             "ingest --symbol 000333.SZ --market szse --db %s/f.db %s/data/AAPL_1d.csv", g_tmp,
             KR_SOURCE_DIR);
    expect(args, 0, "000333.SZ 1d:", "interval 1d inferred from the bars' most common spacing");
    snprintf(args, sizeof args, "ingest --symbol BTCUSDT --db %s/f.db %s/data/BTCUSDT_1h.csv",
             g_tmp, KR_SOURCE_DIR);
    expect(args, 0, "BTCUSDT 1h:", "interval 1h inferred");
    snprintf(args, sizeof args, "store list --db %s/f.db", g_tmp);
    expect(args, 0, "SZSE", NULL);
    expect("version", 0, "commit:", NULL);
    expect("version", 0, "kernels:", NULL);
    expect("version --json", 0, "\"isa_active\":", NULL);
}

static int setup(void **state) {
    (void)state;
    g_tmp = kr_test_fresh_dir();
    return g_tmp ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forecast_defaults),
        cmocka_unit_test(test_errors_that_help),
        cmocka_unit_test(test_calendar_runs_out),
        cmocka_unit_test(test_small_frictions),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
