/*
 * base/timeutil — calendar arithmetic on naive timestamps (see timeutil.h).
 *
 * The predictor's temporal embedding is indexed by pandas' dt.minute / dt.hour / dt.weekday /
 * dt.day / dt.month of naive timestamps, so every conversion here is pure proleptic-Gregorian
 * arithmetic on "seconds since 1970-01-01 taken as UTC": no time zones, no DST, no leap
 * seconds, and no libc gmtime (whose range and thread-safety vary by platform).
 *
 * The day <-> civil-date conversions follow the era-based method described by Howard Hinnant
 * ("chrono-compatible low-level date algorithms"): shift the year to start on March 1 so the
 * leap day is the last day of the year, then split into 400-year eras of 146097 days.
 */
#include "base/timeutil.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

enum { SECONDS_PER_DAY = 86400 };

/* Floor division and the matching non-negative remainder: C's '/' truncates toward zero,
 * which would put times before 1970 on the wrong day. */
static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

static int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

/* Days since 1970-01-01 of a proleptic Gregorian date. Linear in `day`, so an out-of-range
 * day simply rolls over (day 0 = last day of the previous month). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    /* Normalise the month first so callers may pass e.g. month 13 = January next year. */
    y += floor_div(m - 1, 12);
    m = floor_mod(m - 1, 12) + 1;
    y -= m <= 2; /* years start on March 1 */
    const int64_t era = floor_div(y, 400);
    const int64_t yoe = y - era * 400; /* [0, 399] */
    const int64_t mp = (m + 9) % 12; /* March = 0 ... February = 11 */
    const int64_t doy = (153 * mp + 2) / 5 + d - 1; /* [0, 365] for valid d */
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; /* [0, 146096] */
    return era * 146097 + doe - 719468; /* 719468 = days from 0000-03-01 to 1970-01-01 */
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    z += 719468;
    const int64_t era = floor_div(z, 146097);
    const int64_t doe = z - era * 146097; /* [0, 146096] */
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100); /* [0, 365] */
    const int64_t mp = (5 * doy + 2) / 153; /* [0, 11] */
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* The civil fields of t with the year in 64 bits. Day and second of day by truncating
 * division and a fix-up, never `days * 86400`: for t near INT64_MIN that product (and
 * t - days * 86400 via floor_mod) overflows. */
static kr_civil civil_split(int64_t t, int64_t *year) {
    kr_civil c;
    int64_t days = t / SECONDS_PER_DAY, sod = t % SECONDS_PER_DAY; /* sod in (-86400, 86400) */
    if (sod < 0) {
        sod += SECONDS_PER_DAY;
        days--;
    }
    civil_from_days(days, year, &c.month, &c.day);
    c.year = 0;
    c.hour = (int)(sod / 3600);
    c.minute = (int)(sod / 60 % 60);
    c.second = (int)(sod % 60);
    /* 1970-01-01 was a Thursday: weekday 3 with Monday = 0. */
    c.weekday = (int)floor_mod(days + 3, 7);
    return c;
}

kr_civil kr_civil_from_unix(int64_t t) {
    int64_t year;
    kr_civil c = civil_split(t, &year);
    /* |days| <= 1.1e14 keeps civil_from_days inside int64; only the year can pass int. */
    c.year = year > INT_MAX ? INT_MAX : year < INT_MIN ? INT_MIN : (int)year;
    return c;
}

int64_t kr_unix_from_civil(int year, int month, int day, int hour, int minute, int second) {
    /* int inputs keep every product below 2^63: |days| < 2^31 * 366, times 86400. */
    return days_from_civil(year, month, day) * SECONDS_PER_DAY + (int64_t)hour * 3600 +
           (int64_t)minute * 60 + second;
}

void kr_time_features(int64_t t, float out[5]) {
    const kr_civil c = kr_civil_from_unix(t);
    out[0] = (float)c.minute;
    out[1] = (float)c.hour;
    out[2] = (float)c.weekday;
    out[3] = (float)c.day;
    out[4] = (float)c.month;
}

char *kr_format_timestamp(int64_t t, int date_only, char *buf, int buflen) {
    if (!buf || buflen <= 0) return buf;
    int64_t year;
    const kr_civil c = civil_split(t, &year); /* the year in full, even past int */
    if (date_only && c.hour == 0 && c.minute == 0 && c.second == 0)
        snprintf(buf, (size_t)buflen, "%04lld-%02d-%02d", (long long)year, c.month, c.day);
    else
        snprintf(buf, (size_t)buflen, "%04lld-%02d-%02d %02d:%02d:%02d", (long long)year, c.month,
                 c.day, c.hour, c.minute, c.second);
    return buf;
}

double kr_now_seconds(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int kr_realtime_deadline(double seconds, struct timespec *out) {
    if (!(seconds <= 100.0 * 365 * 86400)) return 0; /* NaN, inf or too far */
    if (seconds < 0) seconds = 0;
    clock_gettime(CLOCK_REALTIME, out);
    const double whole = floor(seconds);
    long nsec = out->tv_nsec + (long)((seconds - whole) * 1e9);
    out->tv_sec += (time_t)whole + nsec / 1000000000L;
    out->tv_nsec = nsec % 1000000000L;
    return 1;
}
