/*
 * market/candles — reading and validating candle files (CSV) into a kr_series-compatible
 * table.
 *
 * Format: a header row naming at least timestamps, open, high, low, close, optionally volume
 * and amount, in any order (extra columns ignored; the reference's column names). Quoted
 * fields, CRLF and a UTF-8 BOM are accepted. Timestamps: "YYYY-MM-DD", "YYYY-MM-DD HH:MM",
 * "YYYY-MM-DD HH:MM:SS[.fff]", with 'T' or ' ' between, optional "Z"/"±HH:MM" suffix (the
 * wall-clock time is kept, as pandas does for naive stamps), or integer epoch seconds.
 *
 * Every error names the file (label), the 1-based line number and the column: missing column,
 * empty or non-numeric field, NaN/inf, negative price or volume, high < low, timestamps not
 * strictly increasing, ragged rows, an empty file.
 */
#ifndef KR_MARKET_CANDLES_H
#define KR_MARKET_CANDLES_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"

typedef struct kr_candles {
    int64_t n;
    int64_t *timestamps; /* [n] naive seconds since epoch */
    double *values; /* [n][6] open, high, low, close, volume, amount (0 when absent) */
    int has_volume, has_amount;
    int date_only; /* every timestamp had no time of day (daily data) */
} kr_candles;

/* Reads a CSV file. Caller owns *out; free with kr_candles_free. */
kr_status kr_candles_read_csv(const char *path, kr_candles **out, kr_error *err);
/* Parses CSV text (borrowed); label names it in errors (file name or "request body"). */
kr_status kr_candles_parse_csv(const char *data, size_t len, const char *label, kr_candles **out,
                               kr_error *err);
void kr_candles_free(kr_candles *c);

/* A view for the forecast API (borrowed from c). */
kr_series kr_candles_series(const kr_candles *c);
/* A view of rows [start, start+n) (borrowed). */
kr_series kr_candles_slice(const kr_candles *c, int64_t start, int64_t n);

/* Reads a timestamps-only CSV (a `timestamps` column; other columns ignored), e.g. the
 * --future-timestamps file. Caller owns *out (free()). */
kr_status kr_timestamps_read_csv(const char *path, int64_t **out, int64_t *n, kr_error *err);

/* Candle timestamps must lie in these years (inclusive). A stamp outside is a unit or typing
 * mistake (nanoseconds, a year 20024) that would otherwise flow into the model's time features
 * and into future stamps like 69993-12-20. */
#define KR_CANDLE_YEAR_MIN 1900
#define KR_CANDLE_YEAR_MAX 2200

/* 1 if t (naive seconds) lies in [KR_CANDLE_YEAR_MIN-01-01, KR_CANDLE_YEAR_MAX-12-31 23:59:59]. */
int kr_timestamp_in_range(int64_t t);

/* Parses one timestamp string (see formats above). Returns 0 on success, KR_TS_UNPARSABLE when
 * it is none of the formats, KR_TS_OUT_OF_RANGE when it is one but outside the years above. */
enum { KR_TS_UNPARSABLE = -1, KR_TS_OUT_OF_RANGE = -2 };
int kr_parse_timestamp(const char *s, size_t len, int64_t *out, int *has_time);

#endif
