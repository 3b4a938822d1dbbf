/*
 * The exchange calendars (data/calendars, compiled in) and the future timestamps they give for
 * the cases people hit: the docs/api.md example (three A-share 5-minute bars at 11:15-11:25)
 * continuing after the lunch break, one session of 5-minute bars, monthly bars stepping by
 * calendar months, US Labor Day 2025-09-01 skipped, an NYSE early close, an HKEX half day and
 * holidays, 24/7 crypto, and the choice of calendar (given, by symbol suffix, inferred: with
 * vendors' auction bars, by the holidays a short daily history skipped, hourly bars on their
 * own grid); the years past 2026.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"
#include "series/calendar.h"
#include "series/candles.h"
#include "test_support.h"

static int64_t at(int y, int mo, int d, int h, int mi) {
    return kr_unix_from_civil(y, mo, d, h, mi, 0);
}

/* n bars of `step` minutes from h:m on a day. */
static int64_t fill(int64_t *ts, int64_t n0, int y, int mo, int d, int h, int mi, int step, int n) {
    for (int i = 0; i < n; i++) ts[n0 + i] = at(y, mo, d, h, mi) + (int64_t)i * step * 60;
    return n0 + n;
}

static const kr_calendar *cal(const char *name) {
    const kr_calendar *c = NULL;
    kr_error err = { 0 };
    if (kr_calendar_find(name, &c, &err) != KR_OK) fail_msg("%s", err.message);
    return c;
}

static void expect_stamp(int64_t got, int64_t want, int k) {
    if (got != want) {
        char a[32], b[32];
        fail_msg("stamp %d: %s, want %s", k, kr_format_timestamp(got, 0, a, sizeof a),
                 kr_format_timestamp(want, 0, b, sizeof b));
    }
}

static void test_calendars_load(void **state) {
    (void)state;
    const kr_calendar *const *list;
    int n = 0;
    kr_error err = { 0 };
    assert_int_equal(kr_calendar_list(&list, &n, &err), KR_OK);
    assert_true(n >= 4);
    for (int i = 0; i < n; i++) {
        assert_true(list[i]->source[0] && list[i]->title[0]);
        assert_true(list[i]->year_first <= list[i]->year_last);
        assert_true(list[i]->n_sessions >= 1);
    }
    assert_string_equal(cal("nasdaq")->name, "NYSE");
    assert_string_equal(cal("SZSE")->name, "SSE");
    assert_string_equal(cal("xhkg")->name, "HKEX");
    assert_string_equal(cal("24/7")->name, "CRYPTO");
    const kr_calendar *c = NULL;
    assert_int_equal(kr_calendar_find("LSE", &c, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "unknown market 'LSE'"));
    assert_non_null(strstr(err.message, "NYSE"));
    assert_int_equal(kr_calendar_find("NYSE", NULL, &err), KR_ERR_INVALID_ARG); /* no crash */
    /* Symbol suffixes. */
    assert_string_equal(kr_calendar_for_symbol("600977.SH")->name, "SSE");
    assert_string_equal(kr_calendar_for_symbol("000001.sz")->name, "SSE");
    assert_string_equal(kr_calendar_for_symbol("0700.HK")->name, "HKEX");
    assert_string_equal(kr_calendar_for_symbol("BTC-USD")->name, "CRYPTO");
    assert_string_equal(kr_calendar_for_symbol("BTCUSDT")->name, "CRYPTO");
    assert_null(kr_calendar_for_symbol("AAPL"));
    assert_null(kr_calendar_for_symbol("EURUSD=X"));
    assert_int_equal(kr_calendar_resolve(NULL, "AAPL", &c, &err), KR_OK);
    assert_null(c);
    assert_int_equal(kr_calendar_resolve("hkex", "600977.SH", &c, &err), KR_OK);
    assert_string_equal(c->name, "HKEX"); /* a given market wins over the suffix */
}

/* docs/api.md: three 5-minute bars of 600977.SH, 11:15-11:25 on Tuesday 2024-06-18. The
 * morning session ends with the 11:30 bar; the afternoon's first bar is 13:05. */
static void test_api_example_continues_after_lunch(void **state) {
    (void)state;
    int64_t ts[3], out[12];
    fill(ts, 0, 2024, 6, 18, 11, 15, 5, 3);
    kr_calendar_info info;
    kr_error err = { 0 };
    assert_int_equal(kr_calendar_future(ts, 3, 12, out, &info, &err), KR_OK);
    assert_string_equal(info.calendar->name, "SSE"); /* the most specific that holds them */
    assert_int_equal(info.how, KR_CAL_INFERRED);
    assert_true(info.label_end);
    expect_stamp(out[0], at(2024, 6, 18, 11, 30), 0);
    for (int k = 1; k < 12; k++) expect_stamp(out[k], at(2024, 6, 18, 13, 5 * k), k);
    /* Named: the same; as NYSE bars they would run on through noon. */
    assert_int_equal(kr_calendar_future_in(cal("SSE"), ts, 3, 12, out, NULL, &err), KR_OK);
    expect_stamp(out[1], at(2024, 6, 18, 13, 5), 1);
    assert_int_equal(kr_calendar_future_in(cal("NYSE"), ts, 3, 12, out, &info, &err), KR_OK);
    assert_int_equal(info.how, KR_CAL_GIVEN);
    expect_stamp(out[11], at(2024, 6, 18, 12, 25), 11);
}

/* One session of 5-minute bars is enough to continue on the next trading day. */
static void test_one_session(void **state) {
    (void)state;
    int64_t ts[96], out[4];
    kr_error err = { 0 };
    kr_calendar_info info;
    /* A-shares, Thursday 2024-08-29: 09:35 ... 11:30, 13:05 ... 15:00 (48 bars). */
    int64_t n = fill(ts, 0, 2024, 8, 29, 9, 35, 5, 24);
    n = fill(ts, n, 2024, 8, 29, 13, 5, 5, 24);
    assert_int_equal(kr_calendar_future(ts, n, 4, out, &info, &err), KR_OK);
    assert_string_equal(info.calendar->name, "SSE");
    expect_stamp(out[0], at(2024, 8, 30, 9, 35), 0);
    expect_stamp(out[3], at(2024, 8, 30, 9, 50), 3);
    /* US, Friday 2025-08-29 09:30 ... 15:55 (78 bars): the next is Tuesday 09:30, after the
     * weekend and Labor Day (Monday 2025-09-01). */
    n = fill(ts, 0, 2025, 8, 29, 9, 30, 5, 78);
    assert_int_equal(kr_calendar_future(ts, n, 4, out, &info, &err), KR_OK);
    assert_string_equal(info.calendar->name, "NYSE");
    assert_false(info.label_end);
    expect_stamp(out[0], at(2025, 9, 2, 9, 30), 0);
    /* Hong Kong, Monday 2024-12-23 09:30 ... 11:55, 13:00 ... 15:55: Christmas Eve is a
     * morning-only half day, Christmas and Boxing Day are holidays. */
    n = fill(ts, 0, 2024, 12, 23, 9, 30, 5, 30);
    n = fill(ts, n, 2024, 12, 23, 13, 0, 5, 36);
    int64_t hk[40];
    assert_int_equal(kr_calendar_future(ts, n, 31, hk, &info, &err), KR_OK);
    assert_string_equal(info.calendar->name, "HKEX");
    expect_stamp(hk[0], at(2024, 12, 24, 9, 30), 0);
    expect_stamp(hk[29], at(2024, 12, 24, 11, 55), 29);
    expect_stamp(hk[30], at(2024, 12, 27, 9, 30), 30);
}

/* An early close: the day after Thanksgiving 2025 ends at 13:00. */
static void test_early_close(void **state) {
    (void)state;
    int64_t ts[80], out[60];
    kr_error err = { 0 };
    int64_t n = fill(ts, 0, 2025, 11, 26, 9, 30, 5, 78);
    assert_int_equal(kr_calendar_future_in(cal("NYSE"), ts, n, 42, out, NULL, &err), KR_OK);
    expect_stamp(out[0], at(2025, 11, 28, 9, 30), 0); /* Thursday: Thanksgiving */
    expect_stamp(out[41], at(2025, 11, 28, 12, 55), 41);
    assert_int_equal(kr_calendar_future_in(cal("NYSE"), ts, n, 43, out, NULL, &err), KR_OK);
    expect_stamp(out[42], at(2025, 12, 1, 9, 30), 42);
}

/* Daily bars: US Labor Day 2025-09-01 gets no bar, for AAPL's own history. */
static void test_labor_day(void **state) {
    (void)state;
    kr_candles *c = NULL;
    kr_error err = { 0 };
    if (kr_candles_read_csv(KR_SOURCE_DIR "/data/AAPL_1d.csv", &c, &err) != KR_OK)
        fail_msg("%s", err.message);
    int64_t out[25];
    kr_calendar_info info;
    assert_int_equal(kr_calendar_future(c->timestamps + c->n - 400, 400, 25, out, &info, &err),
                     KR_OK);
    assert_string_equal(info.calendar->name, "NYSE");
    assert_true(info.holidays_known);
    /* The last bar is Friday 2025-08-01. */
    expect_stamp(out[0], at(2025, 8, 4, 0, 0), 0);
    int64_t labor = at(2025, 9, 1, 0, 0);
    int saw_tuesday = 0;
    for (int k = 0; k < 25; k++) {
        assert_true(out[k] != labor);
        saw_tuesday |= out[k] == at(2025, 9, 2, 0, 0);
    }
    assert_true(saw_tuesday);
    expect_stamp(out[20], at(2025, 9, 2, 0, 0), 20); /* 20 sessions in August after the 1st */
    kr_candles_free(c);
}

/* Monthly, quarterly: calendar periods, keeping the history's anchor. */
static void test_calendar_months(void **state) {
    (void)state;
    kr_error err = { 0 };
    int64_t out[4];
    kr_calendar_info info;
    const int64_t m1[] = { at(2025, 6, 1, 0, 0), at(2025, 7, 1, 0, 0), at(2025, 8, 1, 0, 0),
                           at(2025, 9, 1, 0, 0) };
    assert_int_equal(kr_calendar_future(m1, 4, 3, out, &info, &err), KR_OK);
    assert_int_equal(info.months, 1);
    expect_stamp(out[0], at(2025, 10, 1, 0, 0), 0);
    expect_stamp(out[1], at(2025, 11, 1, 0, 0), 1);
    expect_stamp(out[2], at(2025, 12, 1, 0, 0), 2);
    /* Month ends stay month ends (no drift from a clamped 28th). */
    const int64_t me[] = { at(2024, 12, 31, 0, 0), at(2025, 1, 31, 0, 0), at(2025, 2, 28, 0, 0) };
    assert_int_equal(kr_calendar_future(me, 3, 3, out, NULL, &err), KR_OK);
    expect_stamp(out[0], at(2025, 3, 31, 0, 0), 0);
    expect_stamp(out[1], at(2025, 4, 30, 0, 0), 1);
    expect_stamp(out[2], at(2025, 5, 31, 0, 0), 2);
    /* Last trading days of NYSE months: 2025-05-30 (Fri), 06-30, 07-31 -> 08-29, 09-30. */
    const int64_t lt[] = { at(2025, 5, 30, 0, 0), at(2025, 6, 30, 0, 0), at(2025, 7, 31, 0, 0) };
    assert_int_equal(kr_calendar_future_in(cal("NYSE"), lt, 3, 2, out, NULL, &err), KR_OK);
    expect_stamp(out[0], at(2025, 8, 29, 0, 0), 0);
    expect_stamp(out[1], at(2025, 9, 30, 0, 0), 1);
    /* Quarterly bars on quarter starts. */
    const int64_t q[] = { at(2024, 10, 1, 0, 0), at(2025, 1, 1, 0, 0), at(2025, 4, 1, 0, 0) };
    assert_int_equal(kr_calendar_future(q, 3, 2, out, &info, &err), KR_OK);
    assert_int_equal(info.months, 3);
    expect_stamp(out[0], at(2025, 7, 1, 0, 0), 0);
    expect_stamp(out[1], at(2025, 10, 1, 0, 0), 1);
}

/* Crypto trades around the clock: a Friday night continues into Saturday; the symbol or the
 * weekend bars of the history select it. */
static void test_crypto(void **state) {
    (void)state;
    kr_error err = { 0 };
    int64_t ts[3], out[4];
    kr_calendar_info info;
    fill(ts, 0, 2024, 6, 14, 21, 0, 60, 3); /* Friday 21:00, 22:00, 23:00 */
    const kr_calendar *c = NULL;
    assert_int_equal(kr_calendar_resolve(NULL, "BTCUSDT", &c, &err), KR_OK);
    assert_int_equal(kr_calendar_future_in(c, ts, 3, 4, out, &info, &err), KR_OK);
    for (int k = 0; k < 4; k++) expect_stamp(out[k], at(2024, 6, 15, k, 0), k);
    /* A week of hourly bars, weekend included: inferred as crypto. */
    int64_t week[24 * 8];
    for (int i = 0; i < 24 * 8; i++) week[i] = at(2024, 6, 10, 0, 0) + (int64_t)i * 3600;
    assert_int_equal(kr_calendar_future(week, 24 * 8, 2, out, &info, &err), KR_OK);
    assert_string_equal(info.calendar->name, "CRYPTO");
    expect_stamp(out[0], at(2024, 6, 18, 0, 0), 0);
    char buf[128];
    assert_non_null(strstr(kr_calendar_describe(&info, buf, sizeof buf), "CRYPTO (inferred"));
}

/* Vendors' auction bars: A-share minutes stamped with their close often add the opening
 * auction as a 09:30 bar (241 a day), US minutes stamped with their open a 16:00 closing-cross
 * bar. One a session is more than the odd-bar allowance, yet the market is still the one
 * whose sessions they bound: they used to rule SSE out (HKEX's longer sessions held the
 * bars, and the forecast ran on into a closed afternoon at 15:01). */
static void test_auction_bars(void **state) {
    (void)state;
    static int64_t ts[5 * 242];
    int64_t n = 0, out[3];
    kr_calendar_info info;
    kr_error err = { 0 };
    for (int d = 2; d <= 6; d++) { /* Monday 2024-09-02 .. Friday 09-06 */
        ts[n++] = at(2024, 9, d, 9, 30);
        n = fill(ts, n, 2024, 9, d, 9, 31, 1, 120);
        n = fill(ts, n, 2024, 9, d, 13, 1, 1, 120);
    }
    assert_int_equal(kr_calendar_future(ts, n, 3, out, &info, &err), KR_OK);
    assert_string_equal(info.calendar->name, "SSE");
    assert_true(info.label_end);
    expect_stamp(out[0], at(2024, 9, 9, 9, 31), 0); /* Monday morning, not Friday 15:01 */
    expect_stamp(out[2], at(2024, 9, 9, 9, 33), 2);
    /* US 5-minute bars 09:30 ... 15:55 and a 16:00 closing cross, Tuesday to Friday. */
    n = 0;
    for (int d = 3; d <= 6; d++) {
        n = fill(ts, n, 2024, 9, d, 9, 30, 5, 78);
        ts[n++] = at(2024, 9, d, 16, 0);
    }
    assert_int_equal(kr_calendar_future(ts, n, 3, out, &info, &err), KR_OK);
    assert_string_equal(info.calendar->name, "NYSE");
    assert_false(info.label_end);
    expect_stamp(out[0], at(2024, 9, 9, 9, 30), 0);
}

/* HKEX's closing auction (16:00-16:10, the close at a random minute from 16:08): vendors print
 * its bars (16:00, 16:05, a 16:08 one). They belong to HKEX's day, as the US closing cross does
 * to NYSE's: they used to rule HKEX out (one a day is past the odd-bar allowance), and the
 * forecast ran on a learned calendar. The forecast does not stamp bars there: the next bar
 * after the auction is the next trading day's open. */
static void test_hkex_closing_auction(void **state) {
    (void)state;
    static int64_t ts[5 * 70];
    int64_t n = 0, out[3];
    kr_calendar_info info;
    kr_error err = { 0 };
    for (int d = 2; d <= 6; d++) { /* Monday 2024-09-02 .. Friday 09-06 */
        n = fill(ts, n, 2024, 9, d, 9, 30, 5, 30); /* 09:30 .. 11:55 */
        n = fill(ts, n, 2024, 9, d, 13, 0, 5, 36); /* 13:00 .. 15:55 */
        ts[n++] = at(2024, 9, d, 16, 0);
        ts[n++] = at(2024, 9, d, 16, 8);
    }
    assert_int_equal(kr_calendar_future(ts, n, 3, out, &info, &err), KR_OK);
    assert_non_null(info.calendar);
    assert_string_equal(info.calendar->name, "HKEX");
    assert_int_equal(info.how, KR_CAL_INFERRED);
    assert_false(info.label_end);
    expect_stamp(out[0], at(2024, 9, 9, 9, 30), 0); /* Monday's open, not Friday 16:13 */
    expect_stamp(out[2], at(2024, 9, 9, 9, 40), 2);
    /* Named, the same; a bar past the auction (16:15) is still outside HKEX's day. */
    assert_int_equal(kr_calendar_future_in(cal("HKEX"), ts, n, 3, out, &info, &err), KR_OK);
    expect_stamp(out[0], at(2024, 9, 9, 9, 30), 0);
    for (int d = 2; d <= 6; d++) ts[(d - 2) * 68 + 67] = at(2024, 9, d, 16, 15);
    assert_int_equal(kr_calendar_future(ts, n, 3, out, &info, &err), KR_OK);
    assert_true(info.calendar == NULL || strcmp(info.calendar->name, "HKEX") != 0);
}

/* A short daily history holds in several calendars; the one whose holidays it skipped wins.
 * Five weeks of US days around Thanksgiving 2026 (no bar on Thursday 11-26) used to be taken
 * for A-shares (fewer trading hours, and no bar on an A-share holiday), whose forecast then
 * had a bar on Christmas Day. */
static void test_holidays_tell_the_market(void **state) {
    (void)state;
    int64_t ts[40], out[12];
    int64_t n = 0;
    for (int64_t t = at(2026, 11, 16, 0, 0); t <= at(2026, 12, 18, 0, 0); t += 86400) {
        const int wd = (int)((t / 86400 + 3) % 7); /* Monday = 0 */
        if (wd < 5 && t != at(2026, 11, 26, 0, 0)) ts[n++] = t;
    }
    kr_calendar_info info;
    kr_error err = { 0 };
    assert_int_equal(kr_calendar_future(ts, n, 12, out, &info, &err), KR_OK);
    assert_string_equal(info.calendar->name, "NYSE");
    assert_int_equal(info.how, KR_CAL_INFERRED);
    for (int k = 0; k < 12; k++) {
        assert_true(out[k] != at(2026, 12, 25, 0, 0));
        assert_true(out[k] != at(2027, 1, 1, 0, 0));
    }
    expect_stamp(out[4], at(2026, 12, 28, 0, 0), 4);
    expect_stamp(out[8], at(2027, 1, 4, 0, 0), 8);
}

/* Past the end of 2026: the NYSE calendar runs to 2028 by the exchange's rules, HKEX to 2027
 * (the gazetted general holidays); the A-share one stops at 2026 until the State Council
 * publishes 2027's, and says so (holidays_known). */
static void test_years_ahead(void **state) {
    (void)state;
    int64_t ts[2], out[8];
    kr_calendar_info info;
    kr_error err = { 0 };
    /* NYSE, daily: Thursday 2027-11-25 is Thanksgiving, Friday 12-24 Christmas observed. */
    ts[0] = at(2027, 11, 22, 0, 0);
    ts[1] = at(2027, 11, 23, 0, 0);
    assert_int_equal(kr_calendar_future_in(cal("NYSE"), ts, 2, 2, out, &info, &err), KR_OK);
    expect_stamp(out[1], at(2027, 11, 26, 0, 0), 1);
    assert_true(info.holidays_known);
    ts[0] = at(2027, 12, 22, 0, 0);
    ts[1] = at(2027, 12, 23, 0, 0);
    assert_int_equal(kr_calendar_future_in(cal("NYSE"), ts, 2, 1, out, &info, &err), KR_OK);
    expect_stamp(out[0], at(2027, 12, 27, 0, 0), 0);
    /* 2028-07-03 closes at 13:00 (Independence Day on a Tuesday). */
    ts[0] = at(2028, 6, 30, 15, 0);
    ts[1] = at(2028, 6, 30, 15, 30);
    assert_int_equal(kr_calendar_future_in(cal("NYSE"), ts, 2, 8, out, &info, &err), KR_OK);
    expect_stamp(out[0], at(2028, 7, 3, 9, 30), 0);
    expect_stamp(out[6], at(2028, 7, 3, 12, 30), 6);
    expect_stamp(out[7], at(2028, 7, 5, 9, 30), 7);
    /* HKEX 2027: Lunar New Year's Eve (Friday 02-05) is a half day, Monday and Tuesday
     * 02-08/09 holidays. */
    ts[0] = at(2027, 2, 5, 10, 30);
    ts[1] = at(2027, 2, 5, 11, 0);
    assert_int_equal(kr_calendar_future_in(cal("HKEX"), ts, 2, 2, out, &info, &err), KR_OK);
    expect_stamp(out[0], at(2027, 2, 5, 11, 30), 0);
    expect_stamp(out[1], at(2027, 2, 10, 9, 30), 1);
    assert_true(info.holidays_known);
    /* SSE: into 2027, the holidays are unknown. */
    ts[0] = at(2026, 12, 30, 0, 0);
    ts[1] = at(2026, 12, 31, 0, 0);
    assert_int_equal(kr_calendar_future_in(cal("SSE"), ts, 2, 1, out, &info, &err), KR_OK);
    assert_false(info.holidays_known);
}

/* Hourly bars aligned to the clock (some brokers' US bars: 09:30 for the first half hour,
 * then 10:00, 11:00, ... 15:00) continue on their own grid, not on 10:30, 11:30, ...; and
 * Hong Kong hours stamped with their start are HKEX's, not A-shares' (whose sessions' bounds
 * they also touch). */
static void test_hour_grids(void **state) {
    (void)state;
    int64_t ts[64], out[9];
    int64_t n = 0;
    kr_calendar_info info;
    kr_error err = { 0 };
    for (int d = 3; d <= 6; d++) { /* Tuesday 2024-09-03 .. Friday 09-06 */
        ts[n++] = at(2024, 9, d, 9, 30);
        n = fill(ts, n, 2024, 9, d, 10, 0, 60, 6);
    }
    assert_int_equal(kr_calendar_future(ts, n, 9, out, &info, &err), KR_OK);
    assert_string_equal(info.calendar->name, "NYSE");
    expect_stamp(out[0], at(2024, 9, 9, 9, 30), 0);
    for (int k = 1; k <= 6; k++) expect_stamp(out[k], at(2024, 9, 9, 9 + k, 0), k);
    expect_stamp(out[7], at(2024, 9, 10, 9, 30), 7);
    expect_stamp(out[8], at(2024, 9, 10, 10, 0), 8);
    /* HKEX hours stamped with their start: 09:30, 10:30, 11:30, 13:00, 14:00, 15:00. */
    n = 0;
    for (int d = 2; d <= 6; d++) {
        n = fill(ts, n, 2024, 9, d, 9, 30, 60, 3);
        n = fill(ts, n, 2024, 9, d, 13, 0, 60, 3);
    }
    assert_int_equal(kr_calendar_future(ts, n, 4, out, &info, &err), KR_OK);
    assert_string_equal(info.calendar->name, "HKEX");
    assert_false(info.label_end);
    expect_stamp(out[2], at(2024, 9, 9, 11, 30), 2);
    expect_stamp(out[3], at(2024, 9, 9, 13, 0), 3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calendars_load),
        cmocka_unit_test(test_api_example_continues_after_lunch),
        cmocka_unit_test(test_one_session),
        cmocka_unit_test(test_early_close),
        cmocka_unit_test(test_labor_day),
        cmocka_unit_test(test_calendar_months),
        cmocka_unit_test(test_crypto),
        cmocka_unit_test(test_auction_bars),
        cmocka_unit_test(test_hkex_closing_auction),
        cmocka_unit_test(test_holidays_tell_the_market),
        cmocka_unit_test(test_years_ahead),
        cmocka_unit_test(test_hour_grids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
