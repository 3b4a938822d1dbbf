/*
 * Tests for base/timeutil: civil <-> unix conversion against dates computed independently
 * (Python's datetime, proleptic Gregorian), the predictor's time features, formatting, and a
 * day-by-day round trip over ±2700 years.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/timeutil.h"
#include "test_support.h"

typedef struct known_date {
    long long t;
    int year, month, day, hour, minute, second, weekday;
} known_date;

/* Expected values printed by Python: datetime(1970,1,1) + timedelta(seconds=t), .weekday(). */
static const known_date k_known[] = {
    { 1718709300LL, 2024, 6, 18, 11, 15, 0, 1 }, /* regression_input.csv row 0: a Tuesday */
    { 0LL, 1970, 1, 1, 0, 0, 0, 3 },
    { -1LL, 1969, 12, 31, 23, 59, 59, 2 },
    { 951827696LL, 2000, 2, 29, 12, 34, 56, 1 }, /* leap day of a 400-year leap year */
    { -2203891200LL, 1900, 3, 1, 0, 0, 0, 3 }, /* 1900 is not a leap year */
    { -62135596800LL, 1, 1, 1, 0, 0, 0, 0 },
    { 253402300799LL, 9999, 12, 31, 23, 59, 59, 4 },
    { 2147483648LL, 2038, 1, 19, 3, 14, 8, 1 }, /* one past the 32-bit time_t limit */
    { 58022074679LL, 3808, 8, 24, 18, 57, 59, 2 },
    { -34319355824LL, 882, 6, 18, 5, 36, 16, 3 },
    { 173649410867LL, 7472, 9, 24, 3, 27, 47, 1 },
    { -21928600533LL, 1275, 2, 9, 18, 4, 27, 5 },
    { 110484411896LL, 5471, 2, 10, 18, 24, 56, 4 },
    { 199357206645LL, 8287, 5, 19, 1, 50, 45, 3 },
};

static void test_known_dates(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_known / sizeof k_known[0]; i++) {
        const known_date *k = &k_known[i];
        kr_civil c = kr_civil_from_unix(k->t);
        assert_int_equal(c.year, k->year);
        assert_int_equal(c.month, k->month);
        assert_int_equal(c.day, k->day);
        assert_int_equal(c.hour, k->hour);
        assert_int_equal(c.minute, k->minute);
        assert_int_equal(c.second, k->second);
        assert_int_equal(c.weekday, k->weekday);
        assert_int_equal(
            kr_unix_from_civil(k->year, k->month, k->day, k->hour, k->minute, k->second), k->t);
    }
}

static void test_time_features(void **state) {
    (void)state;
    float f[5];
    /* 2024-06-18 11:15 Tuesday: minute, hour, weekday, day, month. */
    kr_time_features(1718709300LL, f);
    assert_true(f[0] == 15.0f && f[1] == 11.0f && f[2] == 1.0f && f[3] == 18.0f && f[4] == 6.0f);
    /* 2024-06-23 is a Sunday: weekday 6 (pandas dt.weekday). */
    kr_time_features(kr_unix_from_civil(2024, 6, 23, 23, 59, 0), f);
    assert_true(f[0] == 59.0f && f[1] == 23.0f && f[2] == 6.0f && f[3] == 23.0f && f[4] == 6.0f);
    /* Before 1970 the day must not be off by one (floor, not truncating, division). */
    kr_time_features(-1, f);
    assert_true(f[0] == 59.0f && f[1] == 23.0f && f[2] == 2.0f && f[3] == 31.0f && f[4] == 12.0f);
}

/* Every day in ±1,000,000 days of 1970 (years -768 ... 4707): civil_from_unix inverts
 * unix_from_civil, dates advance by exactly one calendar day and weekdays cycle. */
static void test_civil_round_trip(void **state) {
    (void)state;
    kr_civil prev = kr_civil_from_unix(-1000001LL * 86400);
    for (long long d = -1000000; d <= 1000000; d++) {
        const long long t = d * 86400 + 45296; /* 12:34:56 */
        kr_civil c = kr_civil_from_unix(t);
        assert_int_equal(c.hour, 12);
        assert_int_equal(c.minute, 34);
        assert_int_equal(c.second, 56);
        assert_int_equal(kr_unix_from_civil(c.year, c.month, c.day, c.hour, c.minute, c.second), t);
        assert_int_equal(c.weekday, (prev.weekday + 1) % 7);
        if (c.day != prev.day + 1) { /* month boundary */
            assert_int_equal(c.day, 1);
            assert_true(c.month == prev.month % 12 + 1);
            assert_int_equal(c.year, prev.year + (c.month == 1));
        } else {
            assert_int_equal(c.month, prev.month);
            assert_int_equal(c.year, prev.year);
        }
        prev = c;
    }
}

static void test_leap_years(void **state) {
    (void)state;
    /* Feb 29 exists in 2000 and 2024, not in 1900, 2100 or 2023: Mar 1 minus one day. */
    struct {
        int year, feb_days;
    } cases[] = { { 2000, 29 }, { 2024, 29 }, { 1900, 28 }, { 2100, 28 },
                  { 2023, 28 }, { 1600, 29 }, { 4, 29 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kr_civil c = kr_civil_from_unix(kr_unix_from_civil(cases[i].year, 3, 1, 0, 0, 0) - 1);
        assert_int_equal(c.month, 2);
        assert_int_equal(c.day, cases[i].feb_days);
    }
}

static void test_unix_from_civil_normalises(void **state) {
    (void)state;
    /* Month 13 is January of the next year; day 0 the last day of the previous month. */
    assert_int_equal(kr_unix_from_civil(2023, 13, 1, 0, 0, 0),
                     kr_unix_from_civil(2024, 1, 1, 0, 0, 0));
    assert_int_equal(kr_unix_from_civil(2024, 3, 0, 0, 0, 0),
                     kr_unix_from_civil(2024, 2, 29, 0, 0, 0));
    assert_int_equal(kr_unix_from_civil(2024, 1, 1, 24, 0, 0),
                     kr_unix_from_civil(2024, 1, 2, 0, 0, 0));
}

static void test_format(void **state) {
    (void)state;
    char buf[32];
    const long long midnight = kr_unix_from_civil(2024, 6, 18, 0, 0, 0);
    assert_string_equal(kr_format_timestamp(midnight, 1, buf, sizeof buf), "2024-06-18");
    assert_string_equal(kr_format_timestamp(midnight, 0, buf, sizeof buf), "2024-06-18 00:00:00");
    assert_string_equal(kr_format_timestamp(1718709300LL, 1, buf, sizeof buf),
                        "2024-06-18 11:15:00");
    assert_string_equal(kr_format_timestamp(-1, 0, buf, sizeof buf), "1969-12-31 23:59:59");
    /* A short buffer is truncated, never overrun. */
    char small[8];
    memset(small, 'x', sizeof small);
    kr_format_timestamp(1718709300LL, 0, small, 5);
    assert_string_equal(small, "2024");
    assert_int_equal(small[5], 'x');
    assert_null(kr_format_timestamp(0, 0, NULL, 10));
}

/* The whole int64 range converts without overflow (UBSan builds check it: days * 86400 once
 * overflowed near INT64_MIN): the extremes print their full year, kr_civil saturates a year
 * past int, and the engine's range (±1e13 s) is exact. Expected values: Python's datetime,
 * shifted by whole 400-year cycles (146097 days, a whole number of weeks) into its range. */
static void test_extreme_timestamps(void **state) {
    (void)state;
    char buf[32];
    assert_string_equal(kr_format_timestamp(INT64_MIN, 0, buf, sizeof buf),
                        "-292277022657-01-27 08:29:52");
    assert_string_equal(kr_format_timestamp(INT64_MAX, 0, buf, sizeof buf),
                        "292277026596-12-04 15:30:07");
    assert_string_equal(kr_format_timestamp(INT64_MIN + 86399, 1, buf, sizeof buf),
                        "-292277022657-01-28 08:29:51");
    kr_civil lo = kr_civil_from_unix(INT64_MIN), hi = kr_civil_from_unix(INT64_MAX);
    assert_int_equal(lo.year, INT_MIN);
    assert_int_equal(hi.year, INT_MAX);
    assert_int_equal(lo.month, 1);
    assert_int_equal(lo.day, 27);
    assert_int_equal(lo.hour, 8);
    assert_int_equal(lo.minute, 29);
    assert_int_equal(lo.second, 52);
    assert_int_equal(lo.weekday, 6);
    assert_int_equal(hi.weekday, 6);
    kr_civil a = kr_civil_from_unix(-KR_TIME_MAX_ABS), b = kr_civil_from_unix(KR_TIME_MAX_ABS);
    assert_int_equal(a.year, -314918);
    assert_int_equal(a.month, 8);
    assert_int_equal(a.day, 13);
    assert_int_equal(a.weekday, 6);
    assert_int_equal(b.year, 318857);
    assert_int_equal(b.month, 5);
    assert_int_equal(b.day, 20);
    assert_int_equal(b.hour, 17);
    assert_int_equal(b.minute, 46);
    assert_int_equal(b.second, 40);
    float f[5];
    kr_time_features(INT64_MIN, f); /* defined, whatever the year */
    assert_true(f[0] == 29.0f && f[1] == 8.0f && f[2] == 6.0f && f[3] == 27.0f && f[4] == 1.0f);
}

static void test_now_seconds(void **state) {
    (void)state;
    double a = kr_now_seconds();
    double b = kr_now_seconds();
    assert_true(a > 0.0);
    assert_true(b >= a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_dates),
        cmocka_unit_test(test_time_features),
        cmocka_unit_test(test_civil_round_trip),
        cmocka_unit_test(test_leap_years),
        cmocka_unit_test(test_unix_from_civil_normalises),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_extreme_timestamps),
        cmocka_unit_test(test_now_seconds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
