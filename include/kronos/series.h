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

/* What data is when it is not text a candle reader takes ("a safetensors model file", "a zip
 * archive (an Excel .xlsx workbook, ...)", "a PNG image", "binary data", ...), by its first
 * bytes; NULL when it may be CSV or JSON text. The CSV reader refuses such data with "this is
 * not a CSV/JSON candle file (it looks like ...)". Static string. */
KR_API const char *kr_data_binary_kind(const void *data, size_t len);

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

/* The decimals the series' numbers carry in a column (KR_OPEN .. KR_CLOSE: all four prices;
 * KR_VOLUME, KR_AMOUNT): the fewest d in 0..8 at which every value is a whole number of
 * 10^-d (a price quoted in cents: 2; share volumes: 0), so an output can print forecasts as the
 * input prints its numbers; -1 when the values carry more (float noise, computed figures). */
KR_API int kr_candles_decimals(const kr_candles *c, int column);

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

/* Where the calendars come from: the compiled-in copies of data/calendars, then every *.json
 * of shipped_dir (the installed share/kronos/data/calendars; skipped when it does not exist),
 * then every *.json of user_dir (NULL or "": $KRONOS_CALENDAR_DIR; it must exist). A file
 * there replaces the calendar of its "name" (or adds a market), or, with "extends": "NAME",
 * adds "years" of "holidays" (and "early_closes") to it (data/calendars/README.md). Without a
 * call, the first lookup loads the compiled-in calendars and $KRONOS_CALENDAR_DIR. A later call
 * replaces the set for later lookups; calendars already handed out stay valid (they are never
 * freed). A malformed file fails the call with a message naming it and the field, and the
 * previous set stays. Thread-safe. */
KR_API kr_status kr_calendar_load(const char *shipped_dir, const char *user_dir, kr_error *err);
/* Every calendar of the current set (*out borrowed, static lifetime). Fails when the first,
 * implicit load failed (a malformed file in $KRONOS_CALENDAR_DIR), naming the file. */
KR_API kr_status kr_calendar_list(const kr_calendar *const **out, int *n, kr_error *err);

/* What a calendar is, for listing (`kronos calendars`); strings borrowed from the calendar. */
typedef struct kr_calendar_desc {
    const char *name, *title, *source, *timezone;
    const char *origin; /* "built-in", or the file(s) read: ".../sse.json + .../sse-2027.json" */
    int year_first, year_last; /* the years whose holidays it lists */
    int n_holidays;
    int n_aliases;
    const char *aliases[8];
} kr_calendar_desc;
KR_API void kr_calendar_get_desc(const kr_calendar *cal, kr_calendar_desc *out);
/* The spelling a user's market name has in the calendar (its name or the alias matched, in
 * the file's case: "szse" -> "SZSE", "xnas" -> "XNAS"), so a series stored "SZSE" is shown
 * so; NULL when the name is not the calendar's. Borrowed from the calendar. */
KR_API const char *kr_calendar_spelling(const kr_calendar *cal, const char *name);

/* Whether a forecast's stamps stay within the years whose holidays its calendar lists. */
typedef struct kr_calendar_coverage {
    char name[24]; /* the calendar the stamps follow; "" when none (learned, continuous) */
    int year_first, year_last; /* its years with holidays (0 when name is "") */
    int past_last_year; /* a future stamp lies after year_last: holidays there are unknown,
                           weekdays are taken as trading days */
    int first_unknown_year; /* the first such year (0 when none) */
    char message[224]; /* when past_last_year: one sentence saying so and how to fix it */
} kr_calendar_coverage;
/* The calendar of a forecast (market, else the symbol's suffix, else inferred from the
 * history ts[n], as the forecast chose it) and whether future[pred_len] lies within its years.
 * market and symbol may be NULL. */
KR_API kr_status kr_calendar_coverage_of(const char *market, const char *symbol, const int64_t *ts,
                                         int64_t n, const int64_t *future, int pred_len,
                                         kr_calendar_coverage *out, kr_error *err);

/* The calendar called `name` (or one of its aliases; case-insensitive). Unknown names are an
 * error listing the known ones. */
KR_API kr_status kr_calendar_find(const char *name, const kr_calendar **out, kr_error *err);
/* A bare six-digit A-share code ("000333") with its exchange suffix ("000333.SZ"): 6xxxxx
 * Shanghai .SH, 0/3xxxxx Shenzhen .SZ, 8/4xxxxx Beijing .BJ. 1 and out (>= 10 bytes) set when
 * symbol is such a code, else 0. For messages that suggest the stored name. */
KR_API int kr_symbol_suggest_exchange(const char *symbol, char *out, size_t cap);
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
/* The interval name of a history's most common bar spacing (kr_calendar_interval): "5m",
 * "1h", "1d", "1w", "1mo" (28-31 days), "3mo", "12mo", in the store's units, into out (>= 8
 * bytes). 0, or -1 for fewer than 2 stamps. */
KR_API int kr_interval_infer(const int64_t *ts, int64_t n, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_SERIES_H */
