/*
 * kronos/series.h — candle series: candle files (CSV), exchange calendars (the future
 * timestamps of a forecast) and time zones. Part of the core library (libkronos), like
 * kronos.h: the engine itself calls the calendars when a series carries no future stamps.
 *
 * Candle CSV: a header row naming at least timestamps, open, high, low, close, optionally
 * volume and amount, in any order (extra columns ignored; the reference's column names).
 * Quoted fields, CRLF and a UTF-8 BOM are accepted. Timestamps: "YYYY-MM-DD",
 * "YYYY-MM-DD HH:MM", "YYYY-MM-DD HH:MM:SS[.fff]", with 'T' or ' ' between, optional
 * "Z"/"±HH:MM" suffix (the wall-clock time is kept, as pandas does for naive stamps),
 * YYYYMMDD, or an integer epoch count: seconds (10 digits, 9 before 2001-09-09), milliseconds
 * (13, 12), microseconds (16, 15) or nanoseconds (19, 18); seconds also with a fraction
 * ("1704412800.0", truncated) or an exponent writing every digit of the second. Every error
 * names the file, the 1-based line and the column.
 */
#ifndef KRONOS_SERIES_H
#define KRONOS_SERIES_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- candles */

typedef struct kr_candles {
    int64_t n;
    int64_t *timestamps; /* [n] naive seconds since epoch */
    double *values; /* [n][6] open, high, low, close, volume, amount (0 when absent) */
    int has_volume, has_amount;
    int date_only; /* every timestamp had no time of day (daily data) */
    /* The input's name of an amount column that was dropped because there is no volume
     * column (volume and amount are then 0, the reference's rule); "" when none. The library
     * does not print: a program tells its user. */
    char amount_dropped[64];
} kr_candles;

/* Reads a CSV file. Caller owns *out; free with kr_candles_free. */
KR_API kr_status kr_candles_read_csv(const char *path, kr_candles **out, kr_error *err);
/* Parses CSV text (borrowed); label names it in errors (file name or "request body"). */
KR_API kr_status kr_candles_parse_csv(const char *data, size_t len, const char *label,
                                      kr_candles **out, kr_error *err);
KR_API void kr_candles_free(kr_candles *c);

/* Candles as the readers take them back, every number the shortest text of exactly its double
 * (an export ingested again changes nothing). CSV: a header (timestamps, open, high, low,
 * close, then volume and amount when c has them) and a row per candle, dates alone when
 * c->date_only. JSON: GET /v1/candles' object {"object":"candles", "symbol", "interval",
 * "rows", "columns", "candles": rows of arrays}. Caller owns *out (free()). */
KR_API kr_status kr_candles_to_csv(const kr_candles *c, char **out, kr_error *err);
KR_API kr_status kr_candles_to_json(const kr_candles *c, const char *symbol, const char *interval,
                                    char **out, kr_error *err);

/* A view for the forecast API (borrowed from c). */
KR_API kr_series kr_candles_series(const kr_candles *c);
/* A view of rows [start, start+n) (borrowed). */
KR_API kr_series kr_candles_slice(const kr_candles *c, int64_t start, int64_t n);

/* Reads a timestamps-only CSV (a `timestamps` column; other columns ignored), e.g. the
 * --future-timestamps file. Caller owns *out (free()). */
KR_API kr_status kr_timestamps_read_csv(const char *path, int64_t **out, int64_t *n, kr_error *err);

/* ---------------------------------------------------------------- calendars */

/* One market's calendar (compiled in; static lifetime, read-only): trading weekdays, sessions,
 * holidays and early closes for the years it covers. */
typedef struct kr_calendar kr_calendar;

/* How the calendar of a forecast was chosen. */
typedef enum kr_calendar_how {
    KR_CAL_GIVEN = 0, /* named by the caller (or by the symbol) */
    KR_CAL_INFERRED = 1, /* the most specific calendar holding every history bar */
    KR_CAL_LEARNED = 2, /* none fits: the history's weekdays and times of day */
    KR_CAL_CONTINUOUS = 3 /* none fits and the history spans one day: every interval */
} kr_calendar_how;

typedef struct kr_calendar_info {
    int64_t interval_seconds; /* inferred bar interval (most common gap) */
    int intraday; /* interval < 1 day */
    int weekday_mask; /* bit d set: weekday d (Monday = 0) seen in the history */
    int n_slots; /* distinct intraday times of day seen (0 for daily) */
    int months; /* 1, 3 or 12 for monthly / quarterly / yearly bars, else 0 */
    const kr_calendar *calendar; /* the calendar used; NULL when learned or continuous */
    kr_calendar_how how;
    int label_end; /* intraday bars stamped with their close */
    int holidays_known; /* every future stamp lies within the calendar's years */
} kr_calendar_info;

/* The calendar called `name` (or one of its aliases; case-insensitive). Unknown names are an
 * error listing the known ones. */
KR_API kr_status kr_calendar_find(const char *name, const kr_calendar **out, kr_error *err);
/* Its canonical name ("SSE", "NYSE", "CRYPTO"...). */
KR_API const char *kr_calendar_name(const kr_calendar *cal);

/* Writes pred_len future timestamps after ts[n-1] into out, following cal (NULL: inferred from
 * the history: the most specific calendar holding every bar, else the weekdays and times of
 * day the history printed). Needs n >= 2. info may be NULL. */
KR_API kr_status kr_calendar_future_in(const kr_calendar *cal, const int64_t *ts, int64_t n,
                                       int pred_len, int64_t *out, kr_calendar_info *info,
                                       kr_error *err);
/* kr_calendar_future_in with the calendar inferred from the history (what the engine does
 * when a series carries no future timestamps). */
KR_API kr_status kr_calendar_future(const int64_t *ts, int64_t n, int pred_len, int64_t *out,
                                    kr_calendar_info *info, kr_error *err);
/* The bar interval kr_calendar_future reports (kr_calendar_info.interval_seconds: the most
 * common gap between consecutive stamps, ties to the smaller) without inferring a calendar,
 * in O(n) for a regular history; ts ascending. 0 when n < 2 or out of memory. */
KR_API int64_t kr_calendar_interval(const int64_t *ts, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_SERIES_H */
