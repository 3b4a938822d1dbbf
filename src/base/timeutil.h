/*
 * base/timeutil — calendar arithmetic on naive timestamps (seconds since 1970-01-01 taken as
 * UTC, i.e. wall-clock time with no zone), the way the reference's pandas code sees them.
 */
#ifndef KR_BASE_TIMEUTIL_H
#define KR_BASE_TIMEUTIL_H

#include <stdint.h>

typedef struct kr_civil {
    int year, month, day; /* month 1-12, day 1-31 */
    int hour, minute, second;
    int weekday; /* Monday = 0 ... Sunday = 6 (pandas dt.weekday) */
} kr_civil;

/* Proleptic Gregorian; valid for any int64 seconds within ±1e12 years-safe range. */
kr_civil kr_civil_from_unix(int64_t t);
int64_t kr_unix_from_civil(int year, int month, int day, int hour, int minute, int second);

/* The predictor's five time features in its order: minute, hour, weekday, day, month. */
void kr_time_features(int64_t t, float out[5]);

/* Formats "YYYY-MM-DD" when the time of day is 00:00:00 and date_only is set, else
 * "YYYY-MM-DD HH:MM:SS". buf >= 32 bytes. Returns buf. */
char *kr_format_timestamp(int64_t t, int date_only, char *buf, int buflen);

/* Monotonic wall clock in seconds (for timing). */
double kr_now_seconds(void);

#endif
