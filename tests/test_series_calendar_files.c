/*
 * Calendars as data (issue 42, finding 1): the calendars read at run time from a directory
 * that replaces or extends the compiled-in ones (a user adds next year's holiday notice without
 * a rebuild), the errors a bad file gets (naming it), the coverage check every output uses to
 * say that a forecast runs past the last year whose holidays are known, and NYSE's 2027
 * holidays as the exchange's rules give them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "series/calendar.h"
#include "test_support.h"

static const char *g_tmp;

static int64_t day(int y, int m, int d) { return kr_unix_from_civil(y, m, d, 0, 0, 0); }

static const kr_calendar *cal(const char *name) {
    const kr_calendar *c = NULL;
    kr_error err = { 0 };
    if (kr_calendar_find(name, &c, &err) != KR_OK) fail_msg("%s", err.message);
    return c;
}

/* A fresh directory under the test's temp dir holding one file. */
static const char *dir_with(const char *sub, const char *file, const char *text) {
    static char dir[1024];
    char path[1200];
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, sub);
    snprintf(path, sizeof path, "mkdir -p '%s'", dir);
    assert_int_equal(system(path), 0);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    assert_int_equal(kr_test_write_file(path, text, strlen(text)), 0);
    return dir;
}

/* Daily SSE bars on the trading days of December 2026 up to the 31st. */
static int sse_december(int64_t *ts) {
    int n = 0;
    for (int d = 1; d <= 31; d++) {
        int64_t t = day(2026, 12, d) + 15 * 3600;
        int wd = (int)((t / 86400 + 3) % 7);
        if (wd < 5) ts[n++] = t;
    }
    return n;
}

static void test_nyse_2027_by_the_rules(void **state) {
    (void)state;
    assert_int_equal(kr_calendar_load(NULL, NULL, NULL), KR_OK);
    const kr_calendar *c = cal("NYSE");
    assert_true(c->year_last >= 2027);
    /* New Year Fri Jan 1, MLK Jan 18, Presidents' Feb 15, Good Friday Mar 26, Memorial May 31,
     * Juneteenth observed Fri Jun 18, Independence observed Mon Jul 5, Labor Sep 6,
     * Thanksgiving Nov 25, Christmas observed Fri Dec 24. */
    static const int k_hol[][2] = { { 1, 1 },  { 1, 18 }, { 2, 15 }, { 3, 26 },  { 5, 31 },
                                    { 6, 18 }, { 7, 5 },  { 9, 6 },  { 11, 25 }, { 12, 24 } };
    int n2027 = 0;
    for (int i = 0; i < c->n_holidays; i++) {
        kr_civil g = kr_civil_from_unix(c->holidays[i] * 86400);
        if (g.year != 2027) continue;
        assert_true(n2027 < 10);
        assert_int_equal(g.month, k_hol[n2027][0]);
        assert_int_equal(g.day, k_hol[n2027][1]);
        n2027++;
    }
    assert_int_equal(n2027, 10);
    /* New Year's Day 2028 is a Saturday, and NYSE does not observe it on Friday 2027-12-31:
     * a daily forecast from Thu 2027-12-30 stamps the 31st. */
    int64_t ts[3] = { day(2027, 12, 28), day(2027, 12, 29), day(2027, 12, 30) }, out[2];
    assert_int_equal(kr_calendar_future_in(c, ts, 3, 2, out, NULL, NULL), KR_OK);
    assert_true(out[0] == day(2027, 12, 31));
    assert_true(out[1] == day(2028, 1, 3));
}

static void test_extension_adds_a_year(void **state) {
    (void)state;
    int64_t ts[40], out[5];
    const int n = sse_december(ts);
    kr_calendar_coverage cov;
    kr_error err = { 0 };
    assert_int_equal(kr_calendar_load(NULL, NULL, &err), KR_OK);
    /* The shipped SSE calendar ends with 2026: a forecast into January 2027 says so. */
    assert_int_equal(kr_calendar_future_in(cal("SSE"), ts, n, 5, out, NULL, &err), KR_OK);
    assert_int_equal(kr_calendar_coverage_of("SSE", NULL, ts, n, out, 5, &cov, &err), KR_OK);
    assert_string_equal(cov.name, "SSE");
    assert_int_equal(cov.year_last, 2026);
    assert_true(cov.past_last_year);
    assert_int_equal(cov.first_unknown_year, 2027);
    assert_non_null(strstr(cov.message, "through 2026"));
    /* Inferred from the history too (no market named). */
    assert_int_equal(kr_calendar_coverage_of(NULL, "600977.SH", ts, n, out, 5, &cov, &err), KR_OK);
    assert_true(cov.past_last_year);

    /* A user's file with the 2027 New Year holiday (an invented notice for the test: the
     * days matter, not their truth). */
    const char *dir = dir_with("ext", "sse-2027.json",
                               "{\"extends\": \"SZSE\", \"years\": [2027, 2027],"
                               " \"source\": \"test notice\","
                               " \"holidays\": [\"2027-01-01\", \"2027-01-04\"]}");
    if (kr_calendar_load(NULL, dir, &err) != KR_OK) fail_msg("%s", err.message);
    const kr_calendar *c = cal("SSE");
    assert_int_equal(c->year_last, 2027);
    assert_int_equal(c->year_first, 2010);
    assert_non_null(strstr(c->origin, "sse-2027.json"));
    assert_non_null(strstr(c->source, "test notice"));
    assert_int_equal(kr_calendar_future_in(c, ts, n, 5, out, NULL, &err), KR_OK);
    /* Thu 2026-12-31 -> Fri 2027-01-01 and Mon 01-04 are holidays: Tue 01-05. */
    assert_true(out[0] == day(2027, 1, 5) + 15 * 3600);
    assert_int_equal(kr_calendar_coverage_of("SSE", NULL, ts, n, out, 5, &cov, &err), KR_OK);
    assert_false(cov.past_last_year);
    assert_int_equal(cov.year_last, 2027);
    assert_string_equal(cov.message, "");
}

static void test_replacement_and_new_market(void **state) {
    (void)state;
    kr_error err = { 0 };
    const char *dir = dir_with("repl", "moex.json",
                               "{\"name\": \"MOEX\", \"title\": \"Moscow\", \"source\": \"test\","
                               " \"years\": [2024, 2025], \"weekdays\": [\"Mon\", \"Tue\","
                               " \"Wed\", \"Thu\", \"Fri\"], \"sessions\": [[\"10:00\", "
                               "\"18:40\"]], \"bar_label\": \"start\", \"holidays\": "
                               "[\"2025-01-01\"], \"early_closes\": []}");
    if (kr_calendar_load(NULL, dir, &err) != KR_OK) fail_msg("%s", err.message);
    assert_int_equal(cal("moex")->year_last, 2025);
    assert_non_null(strstr(cal("MOEX")->origin, "moex.json"));
    assert_string_equal(cal("NYSE")->origin, "built-in");
    /* A file named like a shipped calendar replaces it. */
    dir = dir_with("repl", "nyse.json",
                   "{\"name\": \"NYSE\", \"title\": \"t\", \"source\": \"mine\", \"years\": "
                   "[2030, 2031], \"weekdays\": [\"Mon\"], \"sessions\": [[\"09:30\", "
                   "\"16:00\"]], \"bar_label\": \"start\", \"holidays\": [], \"early_closes\": "
                   "[]}");
    if (kr_calendar_load(NULL, dir, &err) != KR_OK) fail_msg("%s", err.message);
    assert_int_equal(cal("NYSE")->year_first, 2030);
    assert_string_equal(cal("NYSE")->source, "mine");
    assert_int_equal(kr_calendar_load(NULL, NULL, &err), KR_OK);
    assert_int_equal(cal("NYSE")->year_first, 2010);
}

static void expect_refused(const char *sub, const char *text, const char *needle) {
    kr_error err = { 0 };
    const char *dir = dir_with(sub, "bad.json", text);
    assert_int_equal(kr_calendar_load(NULL, dir, &err), KR_ERR_FORMAT);
    if (!strstr(err.message, "bad.json") || !strstr(err.message, needle))
        fail_msg("message '%s' lacks bad.json and '%s'", err.message, needle);
    /* The previous set stays. */
    assert_int_equal(cal("SSE")->year_last, 2026);
}

static void test_bad_files_are_named(void **state) {
    (void)state;
    kr_error err = { 0 };
    assert_int_equal(kr_calendar_load(NULL, NULL, &err), KR_OK);
    expect_refused("gap", "{\"extends\": \"SSE\", \"years\": [2028, 2028], \"holidays\": []}",
                   "gap");
    expect_refused("outside",
                   "{\"extends\": \"SSE\", \"years\": [2027, 2027], \"holidays\": "
                   "[\"2028-01-03\"]}",
                   "holidays");
    expect_refused("unknown", "{\"extends\": \"LSE\", \"years\": [2027, 2027], \"holidays\": []}",
                   "LSE");
    expect_refused("json", "{\"extends\": ", "not a JSON object");
    expect_refused("field", "{\"name\": \"X\", \"title\": \"t\", \"source\": \"s\"}", "years");
    /* A user directory that is not there is an error (a typo must not silently mean the
     * shipped calendars); a shipped one that is not there is not (the compiled-in copies
     * stand). */
    char missing[1200];
    snprintf(missing, sizeof missing, "%s/none", g_tmp);
    assert_int_equal(kr_calendar_load(NULL, missing, &err), KR_ERR_IO);
    assert_non_null(strstr(err.message, "no such directory"));
    assert_int_equal(kr_calendar_load(missing, NULL, &err), KR_OK);
    assert_string_equal(cal("SSE")->origin, "built-in");
}

static void test_spelling_kept(void **state) {
    (void)state;
    assert_int_equal(kr_calendar_load(NULL, NULL, NULL), KR_OK);
    const kr_calendar *c = cal("szse");
    assert_string_equal(kr_calendar_name(c), "SSE");
    assert_string_equal(kr_calendar_spelling(c, "szse"), "SZSE");
    assert_string_equal(kr_calendar_spelling(c, "sse"), "SSE");
    assert_null(kr_calendar_spelling(c, "NYSE"));
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
    unsetenv("KRONOS_CALENDAR_DIR");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nyse_2027_by_the_rules),
        cmocka_unit_test(test_extension_adds_a_year),
        cmocka_unit_test(test_replacement_and_new_market),
        cmocka_unit_test(test_bad_files_are_named),
        cmocka_unit_test(test_spelling_kept),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
