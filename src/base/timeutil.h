/*
 * base/timeutil — calendar arithmetic on naive timestamps (seconds since 1970-01-01 taken as
 * UTC, i.e. wall-clock time with no zone), the way the reference's pandas code sees them.
 */
#ifndef KR_BASE_TIMEUTIL_H
#define KR_BASE_TIMEUTIL_H

#include <stdint.h>
#include <time.h>

#include "kronos/util.h" /* kr_format_timestamp, kr_now_seconds */

typedef struct kr_civil {
    int year, month, day; /* month 1-12, day 1-31 */
    int hour, minute, second;
    int weekday; /* Monday = 0 ... Sunday = 6 (pandas dt.weekday) */
} kr_civil;

/* The timestamps the engine and the calendar accept: |t| <= 1e13 s, about 317,000 years
 * either side of 1970 (series/calendar.c checks the same bound). */
#define KR_TIME_MAX_ABS ((int64_t)10000000000000)

/* Proleptic Gregorian, defined for every int64 t (no overflow anywhere). Years outside int
 * (|t| past ~6.8e16 s) saturate to INT_MIN / INT_MAX; kr_format_timestamp prints them in
 * full. */
KR_PRIVATE kr_civil kr_civil_from_unix(int64_t t);
int64_t kr_unix_from_civil(int year, int month, int day, int hour, int minute, int second);

/* The predictor's five time features in its order: minute, hour, weekday, day, month. */
void kr_time_features(int64_t t, float out[5]);

/* The CLOCK_REALTIME moment `seconds` from now, for pthread_cond_timedwait, into *out.
 * Returns 0 when there is no such moment to wait for: seconds NaN, infinite or beyond a
 * century (a caller's "no limit"; converting such a sum to time_t is undefined behaviour, and
 * was read as a deadline already past). Negative seconds give now. */
int kr_realtime_deadline(double seconds, struct timespec *out);

#endif
