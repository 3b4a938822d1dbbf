/*
 * series/timezone: UTC offsets from POSIX TZ rules (daylight saving on both hemispheres, the
 * exact transition instants) and from the tzdata file of a zone, with the built-in rules when
 * tzdata is not there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/timeutil.h"
#include "series/timezone.h"

static int64_t utc(int y, int mo, int d, int h, int mi, int s) {
    return kr_unix_from_civil(y, mo, d, h, mi, s);
}

static void test_rule_new_york(void **state) {
    (void)state;
    kr_tz tz;
    kr_error err = { 0 };
    assert_int_equal(kr_tz_parse_rule("EST5EDT,M3.2.0,M11.1.0", &tz, &err), KR_OK);
    assert_int_equal(kr_tz_offset(&tz, utc(2026, 12, 1, 15, 0, 0)), -5 * 3600);
    assert_int_equal(kr_tz_offset(&tz, utc(2026, 7, 1, 15, 0, 0)), -4 * 3600);
    /* 2026-03-08 02:00 EST = 07:00 UTC; 2026-11-01 02:00 EDT = 06:00 UTC. */
    assert_int_equal(kr_tz_offset(&tz, utc(2026, 3, 8, 6, 59, 59)), -5 * 3600);
    assert_int_equal(kr_tz_offset(&tz, utc(2026, 3, 8, 7, 0, 0)), -4 * 3600);
    assert_int_equal(kr_tz_offset(&tz, utc(2026, 11, 1, 5, 59, 59)), -4 * 3600);
    assert_int_equal(kr_tz_offset(&tz, utc(2026, 11, 1, 6, 0, 0)), -5 * 3600);
}

static void test_rule_southern_and_fixed(void **state) {
    (void)state;
    kr_tz tz;
    kr_error err = { 0 };
    assert_int_equal(kr_tz_parse_rule("AEST-10AEDT,M10.1.0,M4.1.0/3", &tz, &err), KR_OK);
    assert_int_equal(kr_tz_offset(&tz, utc(2026, 1, 15, 0, 0, 0)), 11 * 3600);
    assert_int_equal(kr_tz_offset(&tz, utc(2026, 7, 15, 0, 0, 0)), 10 * 3600);
    assert_int_equal(kr_tz_parse_rule("<+0530>-5:30", &tz, &err), KR_OK);
    assert_int_equal(kr_tz_offset(&tz, 0), 5 * 3600 + 1800);
    assert_int_equal(kr_tz_parse_rule("CST-8", &tz, &err), KR_OK);
    assert_int_equal(kr_tz_offset(&tz, utc(2026, 7, 1, 0, 0, 0)), 8 * 3600);
    assert_int_not_equal(kr_tz_parse_rule("EST5EDT", &tz, &err), KR_OK); /* no rules */
    assert_int_not_equal(kr_tz_parse_rule("nonsense", &tz, &err), KR_OK);
    assert_non_null(strstr(err.message, "nonsense"));
}

static void test_load_zones(void **state) {
    (void)state;
    kr_tz tz;
    kr_error err = { 0 };
    /* From tzdata when present, else the built-in rule: the same answers. */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) setenv("TZDIR", "/nonexistent-tzdata", 1);
        assert_int_equal(kr_tz_load("America/New_York", &tz, &err), KR_OK);
        assert_int_equal(kr_tz_offset(&tz, utc(2026, 7, 1, 15, 0, 0)), -4 * 3600);
        assert_int_equal(kr_tz_load("Asia/Shanghai", &tz, &err), KR_OK);
        assert_int_equal(kr_tz_offset(&tz, utc(2026, 12, 1, 1, 0, 0)), 8 * 3600);
        assert_int_equal(kr_tz_load("UTC", &tz, &err), KR_OK);
        assert_int_equal(kr_tz_offset(&tz, 0), 0);
    }
    assert_int_not_equal(kr_tz_load("Mars/Olympus", &tz, &err), KR_OK);
    assert_non_null(strstr(err.message, "Mars/Olympus"));
    unsetenv("TZDIR");
    assert_int_not_equal(kr_tz_load("../../etc/passwd", &tz, &err), KR_OK);
    assert_int_not_equal(kr_tz_load("", &tz, &err), KR_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_new_york),
        cmocka_unit_test(test_rule_southern_and_fixed),
        cmocka_unit_test(test_load_zones),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
