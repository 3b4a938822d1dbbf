/*
 * series/candles — reading and validating candle files (CSV) into a kr_series-compatible
 * table.
 *
 * Format: a header row naming at least timestamps, open, high, low, close, optionally volume
 * and amount, in any order (extra columns ignored; the reference's column names). Quoted
 * fields, CRLF and a UTF-8 BOM are accepted. Timestamps: "YYYY-MM-DD", "YYYY-MM-DD HH:MM",
 * "YYYY-MM-DD HH:MM:SS[.fff]", with 'T' or ' ' between, optional "Z"/"±HH:MM" suffix (the
 * wall-clock time is kept, as pandas does for naive stamps), YYYYMMDD, or an integer epoch
 * count: seconds (10 digits, 9 before 2001-09-09), milliseconds
 * (13, 12), microseconds (16, 15) or nanoseconds (19, 18). Seconds may also be written with a
 * fraction or an exponent ("1704412800.0", "1.7044128005e9"; the fraction truncated as
 * fractional seconds are); a fraction on another count, or an exponent whose mantissa has too
 * few digits to name the second, is refused.
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
#include "kronos/series.h"

/* kr_candles and its readers are public: kronos/series.h. */

/* Candle timestamps must lie in these years (inclusive). A stamp outside is a unit or typing
 * mistake (nanoseconds, a year 20024) that would otherwise flow into the model's time features
 * and into future stamps like 69993-12-20. */
#define KR_CANDLE_YEAR_MIN 1900
#define KR_CANDLE_YEAR_MAX 2200

/* 1 if t (naive seconds) lies in [KR_CANDLE_YEAR_MIN-01-01, KR_CANDLE_YEAR_MAX-12-31 23:59:59]. */
KR_PRIVATE int kr_timestamp_in_range(int64_t t);

/* Parses one timestamp string (see formats above). Returns 0 on success, KR_TS_UNPARSABLE when
 * it is none of the formats, KR_TS_OUT_OF_RANGE when it is one but outside the years above. */
enum { KR_TS_UNPARSABLE = -1, KR_TS_OUT_OF_RANGE = -2 };
KR_PRIVATE int kr_parse_timestamp(const char *s, size_t len, int64_t *out, int *has_time);

/* The rules every candle row follows, whatever the input (a CSV file, a JSON body or file):
 * the CSV reader and common/candles_json both check a row's numbers with these two, in this
 * order, and word the verdict their way (a line and column, a JSON field). */
typedef enum kr_row_fault {
    KR_ROW_OK = 0,
    KR_ROW_OUT_OF_RANGE, /* |value| > FLT_MAX: inf once in float32, which the model reads */
    KR_ROW_NOT_POSITIVE, /* a price (open..close) not > 0 in float32 (1e-320 is 0 there) */
    KR_ROW_NEGATIVE, /* a volume or an amount < 0 */
    KR_ROW_HIGH_BELOW_LOW, /* high < low */
    KR_ROW_AMOUNT_OUT_OF_RANGE /* the derived amount, volume x mean price, > FLT_MAX */
} kr_row_fault;

/* One finite value of column k (KR_OPEN .. KR_AMOUNT): KR_ROW_OK, KR_ROW_OUT_OF_RANGE,
 * KR_ROW_NOT_POSITIVE or KR_ROW_NEGATIVE. */
KR_PRIVATE kr_row_fault kr_candle_value_check(int k, double v);

/* A row whose values passed kr_candle_value_check (columns the input lacks are 0): checks high
 * >= low, then completes the row the reference's way: without a volume column volume and
 * amount are both 0 (even with an amount column: the model never sees amount without volume);
 * with a volume and no amount, amount = volume x the row mean of the four prices, summed left
 * to right in float64 as pandas does. Returns KR_ROW_OK, KR_ROW_HIGH_BELOW_LOW or
 * KR_ROW_AMOUNT_OUT_OF_RANGE. */
KR_PRIVATE kr_row_fault kr_candle_row_finish(double v[KR_N_FEATURES], int has_volume,
                                             int has_amount);

/* The exact fast case of strtod for a decimal number: s[len] wholly of the form
 * [+-]digits[.digits][(e|E)[+-]digits] with at least one mantissa digit, at most 19
 * significant digits forming an integer up to 2^53 and a decimal exponent within +-22.
 * Returns 1 with *out bit for bit what a correctly rounding strtod gives (in the current
 * rounding mode), or 0 (leaving *out) for anything else, strtod's to decide. '.' is the
 * radix character whatever the locale. */
int kr_parse_decimal(const char *s, size_t len, double *out);

/* Why kr_parse_timestamp refused s (KR_TS_UNPARSABLE), for a message: the digit counts of an
 * epoch count, what makes a decimal one ambiguous, else the formats. Writes at most cap bytes. */
KR_PRIVATE void kr_timestamp_refusal(const char *s, size_t len, char *why, size_t cap);

#endif
