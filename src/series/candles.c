/*
 * series/candles — reading and validating candle CSV files (see candles.h).
 *
 * Everything a user feeds the forecaster passes through here, so the job is to accept what
 * pandas' read_csv accepts for the reference's files and to reject, with the file, line and
 * column named, anything that would silently produce a wrong forecast (NaN, a swapped
 * high/low, unsorted rows, a shifted column).
 *
 * Layout: a small RFC 4180 tokenizer (csv_reader) produces one record at a time with its
 * fields unescaped into a scratch buffer; the table layer maps the header to the roles it
 * needs and validates each row as it is read. Nothing is kept per file but the output arrays,
 * and there is no global state, so parsing is thread-safe.
 */
#include "series/candles.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "base/timeutil.h"

/* Larger inputs are refused before reading: a candle file of that size is a mistake (or an
 * attack on a server), and the parsed table would need several times that much memory. */
#define KR_CSV_MAX_BYTES ((size_t)1 << 30)
/* Bounds the per-record field table; real candle files have a handful of columns. */
#define KR_CSV_MAX_FIELDS 4096

/* ------------------------------------------------------------------ tokenizer */

typedef struct csv_field {
    size_t off, len; /* unescaped text at buf + off, NUL-terminated at buf[off + len] */
    int quoted;
} csv_field;

typedef struct csv_reader {
    const char *p, *end;
    int64_t line; /* 1-based physical line of *p */
    int64_t rec_line; /* line on which the current record starts */
    char *buf; /* unescaped text of the current record's fields */
    size_t buf_len, buf_cap;
    csv_field *fields;
    int n_fields, fields_cap;
} csv_reader;

static void csv_init(csv_reader *r, const char *data, size_t len) {
    memset(r, 0, sizeof *r);
    r->p = data;
    r->end = data + len;
    r->line = 1;
    /* A UTF-8 BOM (Excel's "CSV UTF-8") would otherwise glue itself to the first name. */
    if (len >= 3 && (unsigned char)data[0] == 0xEF && (unsigned char)data[1] == 0xBB &&
        (unsigned char)data[2] == 0xBF)
        r->p += 3;
}

static void csv_free(csv_reader *r) {
    free(r->buf);
    free(r->fields);
}

static int csv_append(csv_reader *r, const char *s, size_t n) {
    if (r->buf_cap - r->buf_len < n + 1) {
        size_t cap = r->buf_cap ? r->buf_cap : 256;
        while (cap - r->buf_len < n + 1) {
            if (cap > SIZE_MAX / 2) return -1;
            cap *= 2;
        }
        char *nb = realloc(r->buf, cap);
        if (!nb) return -1;
        r->buf = nb;
        r->buf_cap = cap;
    }
    memcpy(r->buf + r->buf_len, s, n);
    r->buf_len += n;
    return 0;
}

static const char *csv_text(const csv_reader *r, int i) { return r->buf + r->fields[i].off; }

static int is_blank_char(char c) { return c == ' ' || c == '\t'; }

/* Reads one physical record (which may span lines inside quotes). Returns 0 or a status. */
static kr_status csv_read_record(csv_reader *r, const char *label, kr_error *err) {
    r->rec_line = r->line;
    r->n_fields = 0;
    r->buf_len = 0;
    for (;;) {
        if (r->n_fields == r->fields_cap) {
            if (r->fields_cap >= KR_CSV_MAX_FIELDS)
                return kr_error_set(err, KR_ERR_FORMAT, "%s: line %lld: more than %d fields", label,
                                    (long long)r->rec_line, KR_CSV_MAX_FIELDS);
            int cap = r->fields_cap ? r->fields_cap * 2 : 16;
            csv_field *nf = realloc(r->fields, (size_t)cap * sizeof *nf);
            if (!nf) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", label);
            r->fields = nf;
            r->fields_cap = cap;
        }
        csv_field *f = &r->fields[r->n_fields++];
        f->off = r->buf_len;
        f->quoted = 0;

        /* Spaces before an opening quote are tolerated (hand-edited files do that). */
        const char *q = r->p;
        while (q < r->end && is_blank_char(*q)) q++;
        if (q < r->end && *q == '"') {
            f->quoted = 1;
            r->p = q + 1;
            for (;;) {
                const char *s = r->p;
                while (r->p < r->end && *r->p != '"') {
                    /* Count line breaks inside the quotes so later errors point at the
                     * right line: LF, CRLF (counted once) and a lone CR. */
                    if (*r->p == '\n' || (*r->p == '\r' && (r->p + 1 == r->end || r->p[1] != '\n')))
                        r->line++;
                    r->p++;
                }
                if (csv_append(r, s, (size_t)(r->p - s)) != 0)
                    return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", label);
                if (r->p >= r->end)
                    return kr_error_set(err, KR_ERR_FORMAT,
                                        "%s: line %lld, field %d: unterminated quoted field", label,
                                        (long long)r->rec_line, r->n_fields);
                r->p++; /* the quote */
                if (r->p < r->end && *r->p == '"') { /* "" is an escaped quote */
                    if (csv_append(r, "\"", 1) != 0)
                        return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", label);
                    r->p++;
                    continue;
                }
                break;
            }
            while (r->p < r->end && is_blank_char(*r->p)) r->p++;
            if (r->p < r->end && *r->p != ',' && *r->p != '\n' && *r->p != '\r')
                return kr_error_set(err, KR_ERR_FORMAT,
                                    "%s: line %lld, field %d: unexpected character after a "
                                    "closing quote",
                                    label, (long long)r->line, r->n_fields);
        } else {
            const char *s = r->p;
            while (r->p < r->end && *r->p != ',' && *r->p != '\n' && *r->p != '\r') r->p++;
            if (csv_append(r, s, (size_t)(r->p - s)) != 0)
                return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", label);
        }
        f->len = r->buf_len - f->off;
        if (csv_append(r, "", 1) != 0) /* NUL terminator: strtod needs one */
            return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", label);

        if (r->p >= r->end) return KR_OK;
        const char c = *r->p++;
        if (c == ',') continue;
        if (c == '\r' && r->p < r->end && *r->p == '\n') r->p++;
        r->line++;
        return KR_OK;
    }
}

/* Next non-blank record: 1 when one was read, 0 at the end of input, or a negative status.
 * Blank lines (pandas' skip_blank_lines) are skipped anywhere, including trailing ones. */
static int csv_next(csv_reader *r, const char *label, kr_error *err) {
    while (r->p < r->end) {
        kr_status st = csv_read_record(r, label, err);
        if (st != KR_OK) return st;
        if (r->n_fields == 1 && !r->fields[0].quoted) {
            const char *s = csv_text(r, 0);
            size_t n = r->fields[0].len, i = 0;
            while (i < n && is_blank_char(s[i])) i++;
            if (i == n) continue;
        }
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ field helpers */

static void trim_span(const char **s, size_t *len) {
    while (*len > 0 && is_blank_char(**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len > 0 && is_blank_char((*s)[*len - 1])) (*len)--;
}

/* A printable excerpt of a field for error messages (fuzzed input may hold any byte). */
static const char *excerpt(const char *s, size_t len, char *out, size_t cap) {
    size_t j = 0, i = 0;
    for (; i < len && j + 4 < cap; i++) out[j++] = (isprint((unsigned char)s[i])) ? s[i] : '?';
    if (i < len && cap >= 4) {
        j = j > cap - 4 ? cap - 4 : j;
        memcpy(out + j, "...", 3);
        j += 3;
    }
    out[j] = '\0';
    return out;
}

static int name_equals(const char *s, size_t len, const char *name) {
    size_t n = strlen(name);
    if (n != len) return 0;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)s[i]) != name[i]) return 0;
    return 1;
}

enum number_result { NUM_OK, NUM_EMPTY, NUM_BAD, NUM_NAN, NUM_INF, NUM_RANGE };

int kr_parse_decimal(const char *s, size_t len, double *out) {
    /* Clinger's exact case: m and 10^|e| are both doubles without rounding (m < 2^53, |e| <=
     * 22), so one multiplication or division rounds the exact value once, in the current
     * rounding mode, as a correctly rounding strtod (glibc's) does. The sign goes on m before
     * that (negating after would round the other way in the directed modes). */
    static const double k_pow10[23] = { 1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                        1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                        1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };
    size_t i = 0;
    int negative = 0;
    if (i < len && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
    uint64_t m = 0;
    int digits = 0, significant = 0, frac_digits = 0, point = 0;
    for (; i < len; i++) {
        const char ch = s[i];
        if (ch >= '0' && ch <= '9') {
            digits++;
            if (point) frac_digits++;
            if (m == 0 && ch == '0') continue; /* leading zeros are not significant */
            if (++significant > 19) return 0; /* m would overflow: strtod's case */
            m = m * 10 + (uint64_t)(ch - '0');
        } else if (ch == '.' && !point) {
            point = 1;
        } else {
            break;
        }
    }
    if (digits == 0) return 0;
    long exponent = 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        int exp_negative = 0;
        if (++i < len && (s[i] == '+' || s[i] == '-')) exp_negative = s[i++] == '-';
        const size_t e0 = i;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
            if (exponent > 1000) return 0; /* far outside the exact range */
            exponent = exponent * 10 + (s[i] - '0');
        }
        if (i == e0) return 0; /* "1e": strtod stops before the 'e' */
        if (exp_negative) exponent = -exponent;
    }
    if (i != len) return 0;
    exponent -= frac_digits;
    if (m > ((uint64_t)1 << 53) || exponent < -22 || exponent > 22) return 0;
    const double x = negative ? -(double)m : (double)m;
    *out = exponent >= 0 ? x * k_pow10[exponent] : x / k_pow10[-exponent];
    return 1;
}

/* strtod over the whole (trimmed) field. Hex floats are strtod-only syntax that no candle
 * source writes, so they count as garbage rather than being read as numbers. */
static enum number_result parse_number(const char *s, size_t len, double *out) {
    trim_span(&s, &len);
    if (len == 0) return NUM_EMPTY;
    if (isspace((unsigned char)s[0])) return NUM_BAD;
    /* Plain decimals (every price a vendor prints) without strtod: a third of parsing a
     * large file went to it. Others (inf, nan, hex, many digits, far exponents) fall through. */
    if (kr_parse_decimal(s, len, out)) return NUM_OK;
    for (size_t i = 0; i < len; i++)
        if (s[i] == 'x' || s[i] == 'X') return NUM_BAD;
    /* The field is NUL-terminated after its (untrimmed) end, so strtod cannot run off it;
     * the end check catches trailing garbage and embedded NULs. */
    char *endp = NULL;
    errno = 0;
    double v = strtod(s, &endp);
    if (endp != s + len) return NUM_BAD;
    if (isnan(v)) return NUM_NAN;
    if (isinf(v)) return errno == ERANGE ? NUM_RANGE : NUM_INF; /* "1e400", or "inf" */
    *out = v;
    return NUM_OK;
}

/* ------------------------------------------------------------------ timestamps */

static int days_in_month(int y, int m) {
    static const int k_days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
    return k_days[m - 1];
}

/* Reads between min_d and max_d decimal digits at *i; returns -1 when fewer than min_d. */
static int read_digits(const char *s, size_t len, size_t *i, int min_d, int max_d) {
    int v = 0, n = 0;
    while (*i < len && n < max_d && s[*i] >= '0' && s[*i] <= '9') {
        v = v * 10 + (s[*i] - '0');
        (*i)++;
        n++;
    }
    return n < min_d ? -1 : v;
}

int kr_timestamp_in_range(int64_t t) {
    return t >= kr_unix_from_civil(KR_CANDLE_YEAR_MIN, 1, 1, 0, 0, 0) &&
           t < kr_unix_from_civil(KR_CANDLE_YEAR_MAX + 1, 1, 1, 0, 0, 0);
}

/* Every format's parse, before the range check. */
static int parse_timestamp_any(const char *s, size_t len, int64_t *out, int *has_time);

static int refuse(char *why, size_t cap, const char *text) {
    if (why && cap) snprintf(why, cap, "%s", text);
    return -1;
}

/* Epoch seconds written as a decimal number: a fraction ("1704412800.0": pandas' to_csv of
 * float seconds, time.time()) or an exponent ("1.7044128005e9"). The integer part follows the
 * rule of integer counts (10 digits, 9 before 2001-09-09) and the fraction is truncated, as the
 * fractional seconds of "YYYY-MM-DD HH:MM:SS.fff" are. Refused as ambiguous: a fraction on a
 * count of another length (a fraction of a millisecond count is no second), and an exponent
 * whose mantissa has fewer significant digits than the seconds have (1.70441e9 was rounded
 * by its writer: its last digits are not known). 0 and *out, or -1 with why (may be NULL)
 * saying what is wrong. */
static int parse_epoch_decimal(const char *s, size_t len, int64_t *out, char *why, size_t cap) {
    char dig[40];
    size_t nd = 0, i = 0;
    int int_digits = 0, frac_digits = 0, point_seen = 0;
    for (; i < len; i++) {
        if (s[i] >= '0' && s[i] <= '9') {
            if (nd < sizeof dig) dig[nd] = s[i];
            nd++;
            point_seen ? frac_digits++ : int_digits++;
        } else if (s[i] == '.' && !point_seen) {
            point_seen = 1;
        } else {
            break;
        }
    }
    if (int_digits == 0 || (point_seen && frac_digits == 0))
        return refuse(why, cap, "a decimal epoch count needs digits on both sides of the point");
    long exponent = 0;
    const int has_exponent = i < len && (s[i] == 'e' || s[i] == 'E');
    if (has_exponent) {
        int negative = 0;
        if (++i < len && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
        const size_t e0 = i;
        while (i < len && s[i] >= '0' && s[i] <= '9' && exponent < 1000)
            exponent = exponent * 10 + (s[i++] - '0');
        if (i == e0) return refuse(why, cap, "an exponent needs digits");
        if (negative) exponent = -exponent;
    }
    if (i != len || nd > sizeof dig) return refuse(why, cap, "not a number");
    /* Leading zeros of a mantissa do not count; those of a plain number do, as in integers. */
    size_t lead = 0;
    while (has_exponent && lead + 1 < nd && dig[lead] == '0') lead++;
    const long before_point = int_digits + exponent - (long)lead;
    const size_t significant = nd - lead;
    if (has_exponent && before_point > (long)significant) {
        if (why && cap)
            snprintf(why, cap,
                     "exponent notation with %zu significant digits for a count of %ld digits: "
                     "its last digits were rounded away; write the number out",
                     significant, before_point);
        return -1;
    }
    if (before_point != 9 && before_point != 10) {
        if (why && cap)
            snprintf(why, cap,
                     "a fraction on a count of %ld digits%s: only epoch seconds (9-10 digits "
                     "before the point) may have one",
                     before_point,
                     before_point == 12 || before_point == 13   ? " (milliseconds)"
                     : before_point == 15 || before_point == 16 ? " (microseconds)"
                     : before_point == 18 || before_point == 19 ? " (nanoseconds)"
                                                                : "");
        return -1;
    }
    int64_t v = 0;
    for (long k = 0; k < before_point; k++) v = v * 10 + (dig[lead + (size_t)k] - '0');
    *out = v;
    return 0;
}

void kr_timestamp_refusal(const char *s, size_t n, char *why, size_t cap) {
    if (!why || cap == 0) return;
    why[0] = '\0';
    if (!s) s = "";
    trim_span(&s, &n);
    size_t nd = 0;
    while (nd < n && s[nd] >= '0' && s[nd] <= '9') nd++;
    int64_t t;
    if (nd > 0 && nd < n && (s[nd] == '.' || s[nd] == 'e' || s[nd] == 'E') &&
        parse_epoch_decimal(s, n, &t, why, cap) != 0)
        return;
    if (nd == n && n == 12)
        snprintf(why, cap,
                 "12 digits that read both as epoch milliseconds (of 1976) and as "
                 "YYYYMMDDHHMM; write YYYY-MM-DD HH:MM");
    else if (nd == n && n != 8)
        snprintf(why, cap,
                 "%zu digits: epoch seconds have 9-10, milliseconds 12-13, microseconds "
                 "15-16, nanoseconds 18-19; 8 are YYYYMMDD",
                 n);
    else
        snprintf(why, cap,
                 "expected YYYY-MM-DD[ HH:MM[:SS]], YYYYMMDD or an epoch count in seconds "
                 "(also with a fraction), milliseconds, microseconds or nanoseconds");
}

int kr_parse_timestamp(const char *s, size_t len, int64_t *out, int *has_time) {
    if (!out) return KR_TS_UNPARSABLE;
    int64_t t = 0;
    int rc = parse_timestamp_any(s, len, &t, has_time);
    if (rc != 0) return rc;
    if (!kr_timestamp_in_range(t)) return KR_TS_OUT_OF_RANGE;
    *out = t;
    return 0;
}

static int parse_timestamp_any(const char *s, size_t len, int64_t *out, int *has_time) {
    if (!s || !out) return -1;
    trim_span(&s, &len);
    if (len == 0) return -1;

    size_t nd = 0;
    while (nd < len && s[nd] >= '0' && s[nd] <= '9') nd++;
    if (nd == len) {
        /* A bare integer. 8 digits is the compact YYYYMMDD of Chinese data vendors, which
         * pandas also reads as a date. Otherwise an epoch count from 1973-03-03 on, its unit
         * told by its length: seconds (10 digits; 9 before 2001-09-09), milliseconds (13, 12:
         * pandas' to_json, exchange APIs), microseconds (16, 15) or nanoseconds (19, 18:
         * pandas' int64 stamps). Other lengths are refused: 11 is a typo of 10 or 13 more
         * likely than a stamp of 1970-1973, 14 and 17 are YYYYMMDDHHMMSS[fff] vendor stamps;
         * so is a 12-digit value that also reads as YYYYMMDDHHMM (milliseconds of 1976 or a
         * date: no telling). */
        if (len > 19) return -1;
        uint64_t v = 0;
        for (size_t k = 0; k < len; k++) v = v * 10 + (uint64_t)(s[k] - '0');
        if (len == 8) {
            int y = (int)(v / 10000), m = (int)(v / 100 % 100), d = (int)(v % 100);
            if (y < 1 || m < 1 || m > 12 || d < 1 || d > days_in_month(y, m)) return -1;
            *out = kr_unix_from_civil(y, m, d, 0, 0, 0);
            if (has_time) *has_time = 0;
            return 0;
        }
        if (len == 12) {
            const int y = (int)(v / 100000000), mo = (int)(v / 1000000 % 100),
                      d = (int)(v / 10000 % 100), hh = (int)(v / 100 % 100), mi = (int)(v % 100);
            if (y >= KR_CANDLE_YEAR_MIN && y <= KR_CANDLE_YEAR_MAX && mo >= 1 && mo <= 12 &&
                d >= 1 && d <= days_in_month(y, mo) && hh <= 23 && mi <= 59)
                return -1;
        }
        /* Sub-second parts are dropped: not a model input. */
        const uint64_t unit = len == 9 || len == 10    ? 1
                              : len == 12 || len == 13 ? 1000
                              : len == 15 || len == 16 ? 1000000
                              : len == 18 || len == 19 ? 1000000000
                                                       : 0;
        if (!unit) return -1;
        *out = (int64_t)(v / unit);
        if (has_time) *has_time = 1;
        return 0;
    }

    if (nd > 0 && (s[nd] == '.' || s[nd] == 'e' || s[nd] == 'E')) {
        if (parse_epoch_decimal(s, len, out, NULL, 0) != 0) return -1;
        if (has_time) *has_time = 1;
        return 0;
    }

    size_t i = 0;
    int y = read_digits(s, len, &i, 4, 4);
    if (y < 0 || i >= len || (s[i] != '-' && s[i] != '/')) return -1;
    const char sep = s[i++];
    int mo = read_digits(s, len, &i, 1, 2);
    if (mo < 0 || i >= len || s[i] != sep) return -1;
    i++;
    int d = read_digits(s, len, &i, 1, 2);
    if (d < 0) return -1;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo)) return -1;

    int hh = 0, mi = 0, ss = 0, timed = 0;
    if (i < len) {
        if (s[i] != ' ' && s[i] != 'T' && s[i] != 't') return -1;
        i++;
        timed = 1;
        hh = read_digits(s, len, &i, 1, 2);
        if (hh < 0 || i >= len || s[i] != ':') return -1;
        i++;
        mi = read_digits(s, len, &i, 2, 2);
        if (mi < 0) return -1;
        if (i < len && s[i] == ':') {
            i++;
            ss = read_digits(s, len, &i, 2, 2);
            if (ss < 0) return -1;
            if (i < len && (s[i] == '.' || s[i] == ',')) {
                /* Fractional seconds are truncated: the model sees whole minutes anyway. */
                i++;
                size_t f0 = i;
                while (i < len && s[i] >= '0' && s[i] <= '9') i++;
                if (i == f0) return -1;
            }
        }
        if (hh > 23 || mi > 59 || ss > 59) return -1;
        /* Zone suffix: validated, then ignored. pandas' dt accessors on a zone-aware stamp
         * give the local wall-clock fields, which is what the model was trained on. */
        if (i < len && s[i] == ' ') i++;
        if (i < len && (s[i] == 'Z' || s[i] == 'z')) {
            i++;
        } else if (i < len && (s[i] == '+' || s[i] == '-')) {
            i++;
            int oh = read_digits(s, len, &i, 2, 2), om = 0;
            if (oh < 0) return -1;
            if (i < len && s[i] == ':') {
                i++;
                om = read_digits(s, len, &i, 2, 2);
                if (om < 0) return -1;
            } else if (i < len) {
                om = read_digits(s, len, &i, 2, 2);
                if (om < 0) return -1;
            }
            if (oh > 23 || om > 59) return -1;
        }
        if (i != len) return -1;
    }
    *out = kr_unix_from_civil(y, mo, d, hh, mi, ss);
    if (has_time) *has_time = timed;
    return 0;
}

/* ------------------------------------------------------------------ table */

/* Column roles in kr_candles.values order, then the timestamp. */
enum { ROLE_TS = KR_N_FEATURES, N_ROLES };

static const char *const k_role_names[KR_N_FEATURES] = { "open",  "high",   "low",
                                                         "close", "volume", "amount" };
/* Accepted when no `timestamps` column exists, in this order of preference. */
static const char *const k_ts_aliases[] = { "timestamp", "datetime", "date", "time" };
enum { N_TS_ALIASES = (int)(sizeof k_ts_aliases / sizeof k_ts_aliases[0]) };

typedef struct table_cols {
    int col[N_ROLES]; /* field index per role, -1 when absent */
    char name[N_ROLES][64]; /* header text of that column, for messages */
    int n_header; /* fields in the header */
    int time_col; /* a `time` column beside the `date` one taken for the stamps, else -1 */
    char time_name[64]; /* its header text */
} table_cols;

/* Maps header fields to roles (only the timestamp when want_values is 0); rejects duplicates
 * of any name we give a meaning to, since which copy wins would be a guess. */
static kr_status map_header(csv_reader *r, const char *label, int want_values, table_cols *tc,
                            kr_error *err) {
    int ts_primary = -1, alias_col[N_TS_ALIASES];
    for (int k = 0; k < N_TS_ALIASES; k++) alias_col[k] = -1;
    for (int k = 0; k < N_ROLES; k++) {
        tc->col[k] = -1;
        tc->name[k][0] = '\0';
    }
    tc->n_header = r->n_fields;

    for (int i = 0; i < r->n_fields; i++) {
        const char *s = csv_text(r, i);
        size_t n = r->fields[i].len;
        trim_span(&s, &n);
        int *slot = NULL;
        if (name_equals(s, n, "timestamps")) slot = &ts_primary;
        for (int k = 0; !slot && k < N_TS_ALIASES; k++)
            if (name_equals(s, n, k_ts_aliases[k])) slot = &alias_col[k];
        for (int k = 0; want_values && !slot && k < KR_N_FEATURES; k++)
            if (name_equals(s, n, k_role_names[k])) slot = &tc->col[k];
        if (!slot) continue;
        if (*slot >= 0) {
            char ex[64];
            return kr_error_set(err, KR_ERR_FORMAT,
                                "%s: line %lld, column '%s': duplicate column name (fields %d "
                                "and %d)",
                                label, (long long)r->rec_line, excerpt(s, n, ex, sizeof ex),
                                *slot + 1, i + 1);
        }
        *slot = i;
    }

    tc->col[ROLE_TS] = ts_primary;
    for (int k = 0; tc->col[ROLE_TS] < 0 && k < N_TS_ALIASES; k++) tc->col[ROLE_TS] = alias_col[k];
    /* Date and time of day in two columns (MetaTrader, some vendors' exports): the date is
     * read, and a repeat names the time column as the likely cause. */
    tc->time_col = tc->col[ROLE_TS] >= 0 && tc->col[ROLE_TS] == alias_col[N_TS_ALIASES - 2]
                       ? alias_col[N_TS_ALIASES - 1]
                       : -1;
    tc->time_name[0] = '\0';
    if (tc->time_col >= 0)
        excerpt(csv_text(r, tc->time_col), r->fields[tc->time_col].len, tc->time_name,
                sizeof tc->time_name);

    const int required[] = { ROLE_TS, KR_OPEN, KR_HIGH, KR_LOW, KR_CLOSE };
    const int n_required = want_values ? 5 : 1;
    for (int k = 0; k < n_required; k++) {
        if (tc->col[required[k]] >= 0) continue;
        const char *what = required[k] == ROLE_TS ? "timestamps" : k_role_names[required[k]];
        /* A European spreadsheet export separates with ';', other tools with a tab or '|': the
         * whole header is then one field. Say so instead of only "missing column", and show
         * what the header holds. */
        int semicolons = 0, others = 0;
        char heard[128] = "";
        size_t hl = 0;
        for (int i = 0; i < r->n_fields; i++) {
            const char *f = csv_text(r, i);
            semicolons |= strchr(f, ';') != NULL;
            others |= strchr(f, '\t') != NULL || strchr(f, '|') != NULL;
            char ex[64];
            if (hl + 4 < sizeof heard)
                hl += (size_t)snprintf(heard + hl, sizeof heard - hl, "%s%s", i ? "," : "",
                                       excerpt(f, r->fields[i].len, ex, sizeof ex));
        }
        if (hl >= sizeof heard) memcpy(heard + sizeof heard - 4, "...", 4);
        return kr_error_set(
            err, KR_ERR_FORMAT,
            "%s: line %lld, column '%s': missing required column%s (the header reads '%s')%s",
            label, (long long)r->rec_line, what,
            required[k] == ROLE_TS ? " (also accepted: timestamp, datetime, date, time)" : "",
            heard,
            semicolons ? "; the header contains ';': kronos reads comma-separated files (convert "
                         "with: sed 's/;/,/g', after checking no field uses ',' as the decimal "
                         "point)"
            : others   ? "; the header contains a tab or '|': kronos reads comma-separated files"
                       : "");
    }
    for (int k = 0; k < N_ROLES; k++) {
        if (tc->col[k] < 0) continue;
        const char *s = csv_text(r, tc->col[k]);
        size_t n = r->fields[tc->col[k]].len;
        trim_span(&s, &n);
        excerpt(s, n, tc->name[k], sizeof tc->name[k]);
    }
    return KR_OK;
}

/* Growable output columns. */
typedef struct table_out {
    int64_t n, cap;
    int64_t *ts;
    double *values; /* [cap][6] or NULL for timestamps-only */
} table_out;

static int table_grow(table_out *t, int want_values) {
    if (t->n < t->cap) return 0;
    int64_t cap = t->cap ? t->cap * 2 : 1024;
    if ((uint64_t)cap > SIZE_MAX / (sizeof(double) * KR_N_FEATURES)) return -1;
    int64_t *nts = realloc(t->ts, (size_t)cap * sizeof *nts);
    if (!nts) return -1;
    t->ts = nts;
    if (want_values) {
        double *nv = realloc(t->values, (size_t)cap * KR_N_FEATURES * sizeof *nv);
        if (!nv) return -1;
        t->values = nv;
    }
    t->cap = cap;
    return 0;
}

static kr_status parse_row_timestamp(const csv_reader *r, const table_cols *tc, const char *label,
                                     long long line, int64_t *ts, int *has_time, kr_error *err) {
    const char *s = csv_text(r, tc->col[ROLE_TS]);
    size_t n = r->fields[tc->col[ROLE_TS]].len;
    trim_span(&s, &n);
    if (n == 0)
        return kr_error_set(err, KR_ERR_FORMAT, "%s: line %lld, column '%s': empty field", label,
                            line, tc->name[ROLE_TS]);
    const int rc = kr_parse_timestamp(s, n, ts, has_time);
    if (rc == KR_TS_OUT_OF_RANGE) {
        char ex[64];
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: line %lld, column '%s': '%s' is outside the years %d-%d "
                            "(milliseconds or nanoseconds given as seconds? a typo in the year?)",
                            label, line, tc->name[ROLE_TS], excerpt(s, n, ex, sizeof ex),
                            KR_CANDLE_YEAR_MIN, KR_CANDLE_YEAR_MAX);
    }
    if (rc != 0) {
        char ex[64], why[200];
        kr_timestamp_refusal(s, n, why, sizeof why);
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: line %lld, column '%s': cannot parse '%s' as a timestamp (%s)",
                            label, line, tc->name[ROLE_TS], excerpt(s, n, ex, sizeof ex), why);
    }
    return KR_OK;
}

/* Parses and validates the six values of the current row into v (kr_candles.values order),
 * filling volume/amount the way the reference does when their columns are absent. */
static kr_status parse_row_values(const csv_reader *r, const table_cols *tc, const char *label,
                                  long long line, double v[KR_N_FEATURES], kr_error *err) {
    char ex[64], ex2[64];
    for (int k = 0; k < KR_N_FEATURES; k++) {
        v[k] = 0.0;
        const int c = tc->col[k];
        if (c < 0) continue;
        const char *s = csv_text(r, c);
        size_t n = r->fields[c].len;
        const enum number_result nr = parse_number(s, n, &v[k]);
        const kr_row_fault f = nr == NUM_OK ? kr_candle_value_check(k, v[k]) : KR_ROW_OK;
        if (nr == NUM_OK && f == KR_ROW_OK) continue; /* the usual row */
        trim_span(&s, &n);
        excerpt(s, n, ex, sizeof ex);
        if (nr == NUM_EMPTY)
            return kr_error_set(err, KR_ERR_FORMAT, "%s: line %lld, column '%s': empty field",
                                label, line, tc->name[k]);
        if (nr == NUM_RANGE || f == KR_ROW_OUT_OF_RANGE)
            return kr_error_set(err, KR_ERR_FORMAT,
                                "%s: line %lld, column '%s': '%s' is out of range (the model "
                                "reads float32, max %.3g)",
                                label, line, tc->name[k], ex, (double)FLT_MAX);
        if (nr != NUM_OK)
            return kr_error_set(err, KR_ERR_FORMAT, "%s: line %lld, column '%s': '%s' %s", label,
                                line, tc->name[k], ex,
                                nr == NUM_NAN   ? "(NaN) is not allowed"
                                : nr == NUM_INF ? "is not finite"
                                                : "is not a number");
        return kr_error_set(err, KR_ERR_FORMAT, "%s: line %lld, column '%s': %s (%s) must be %s",
                            label, line, tc->name[k], k_role_names[k], ex,
                            k <= KR_CLOSE ? "positive (in float32, as the model reads it)"
                                          : "non-negative");
    }
    switch (kr_candle_row_finish(v, tc->col[KR_VOLUME] >= 0, tc->col[KR_AMOUNT] >= 0)) {
    case KR_ROW_HIGH_BELOW_LOW: {
        const char *hs = csv_text(r, tc->col[KR_HIGH]), *ls = csv_text(r, tc->col[KR_LOW]);
        size_t hn = r->fields[tc->col[KR_HIGH]].len, ln = r->fields[tc->col[KR_LOW]].len;
        trim_span(&hs, &hn);
        trim_span(&ls, &ln);
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: line %lld, column '%s': high (%s) is below low (%s)", label, line,
                            tc->name[KR_HIGH], excerpt(hs, hn, ex, sizeof ex),
                            excerpt(ls, ln, ex2, sizeof ex2));
    }
    case KR_ROW_AMOUNT_OUT_OF_RANGE:
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: line %lld, column '%s': volume x mean price = %.3g is out "
                            "of range for the derived amount (the model reads float32)",
                            label, line, tc->name[KR_VOLUME], v[KR_AMOUNT]);
    default: return KR_OK;
    }
}

kr_row_fault kr_candle_value_check(int k, double v) {
    /* The model reads float32: a larger magnitude would become inf there and poison the
     * window's mean and std. */
    if (fabs(v) > FLT_MAX) return KR_ROW_OUT_OF_RANGE;
    /* Positive as the model reads it: 1e-320 is > 0 in double and 0 in float32. */
    if (k <= KR_CLOSE) return (float)v > 0.0f ? KR_ROW_OK : KR_ROW_NOT_POSITIVE;
    return v < 0.0 ? KR_ROW_NEGATIVE : KR_ROW_OK;
}

kr_row_fault kr_candle_row_finish(double v[KR_N_FEATURES], int has_volume, int has_amount) {
    if (v[KR_HIGH] < v[KR_LOW]) return KR_ROW_HIGH_BELOW_LOW;
    if (!has_volume) {
        /* The reference sets volume = amount = 0 whenever volume is missing, even when an
         * amount column exists: the model never sees amount without volume. */
        v[KR_AMOUNT] = 0.0;
    } else if (!has_amount) {
        /* The reference fills amount with volume * df[ohlc].mean(axis=1): a left-to-right
         * float64 sum of the four prices divided by 4, so do exactly that. */
        const double mean = (((v[KR_OPEN] + v[KR_HIGH]) + v[KR_LOW]) + v[KR_CLOSE]) / 4.0;
        v[KR_AMOUNT] = v[KR_VOLUME] * mean;
        if (v[KR_AMOUNT] > FLT_MAX) return KR_ROW_AMOUNT_OUT_OF_RANGE;
    }
    return KR_ROW_OK;
}

/* The shared reader behind kr_candles_parse_csv and kr_timestamps_read_csv. On success the
 * caller owns *out (values NULL when want_values is 0). */
static kr_status parse_table(const char *data, size_t len, const char *label, int want_values,
                             kr_candles **out, kr_error *err) {
    if (!label) label = "input";
    if (!out || (!data && len > 0))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: no input", label);
    *out = NULL;
    if (len > KR_CSV_MAX_BYTES)
        return kr_error_set(err, KR_ERR_FORMAT, "%s: input of %zu bytes is larger than 1 GiB",
                            label, len);

    const char *kind = kr_data_binary_kind(data, len);
    if (kind)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: this is not a CSV/JSON candle file (it looks like %s); give "
                            "candles as CSV text with a header such as "
                            "timestamps,open,high,low,close,volume,amount (a spreadsheet: save "
                            "it as CSV)",
                            label, kind);

    csv_reader r;
    csv_init(&r, data ? data : "", len);
    table_out t = { 0 };
    table_cols tc;
    kr_status st = KR_OK;
    int any_time = 0;
    int64_t prev_line = 0;

    int got = csv_next(&r, label, err);
    if (got < 0) {
        st = got;
        goto fail;
    }
    if (got == 0) {
        st = kr_error_set(err, KR_ERR_FORMAT, "%s: line 1: empty file (no header row)", label);
        goto fail;
    }
    if ((st = map_header(&r, label, want_values, &tc, err)) != KR_OK) goto fail;

    while ((got = csv_next(&r, label, err)) == 1) {
        const long long line = (long long)r.rec_line;
        if (r.n_fields < tc.n_header) {
            /* Name the first missing column: that is usually where the row got cut. */
            int k0 = r.n_fields;
            st = kr_error_set(err, KR_ERR_FORMAT,
                              "%s: line %lld, column %d: too few fields (%d, the header has %d)",
                              label, line, k0 + 1, r.n_fields, tc.n_header);
            for (int k = 0; k < N_ROLES; k++)
                if (tc.col[k] == k0)
                    st = kr_error_set(err, KR_ERR_FORMAT,
                                      "%s: line %lld, column '%s': too few fields (%d, the "
                                      "header has %d)",
                                      label, line, tc.name[k], r.n_fields, tc.n_header);
            goto fail;
        }
        if (r.n_fields > tc.n_header) {
            st = kr_error_set(err, KR_ERR_FORMAT,
                              "%s: line %lld, column %d: too many fields (%d, the header has "
                              "%d)",
                              label, line, tc.n_header + 1, r.n_fields, tc.n_header);
            goto fail;
        }
        if (table_grow(&t, want_values) != 0) {
            st = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory at line %lld", label, line);
            goto fail;
        }

        int64_t ts = 0;
        int has_time = 0;
        if ((st = parse_row_timestamp(&r, &tc, label, line, &ts, &has_time, err)) != KR_OK)
            goto fail;
        if (t.n > 0 && ts <= t.ts[t.n - 1]) {
            char a[32], b[32];
            /* Local stamps step back by up to an hour, in the small hours, where summer time
             * ends: say so, the usual cause of that. */
            const int64_t back = t.ts[t.n - 1] - ts, tod = ((ts % 86400) + 86400) % 86400;
            const int dst = back <= 3600 && tod < 4 * 3600 && tc.time_col < 0;
            char split[160] = "";
            if (tc.time_col >= 0)
                snprintf(split, sizeof split,
                         " (the time of day is in column '%.40s', which kronos does not read: "
                         "join the two into one timestamps column, YYYY-MM-DD HH:MM)",
                         tc.time_name);
            st =
                kr_error_set(err, KR_ERR_FORMAT,
                             "%s: line %lld, column '%s': %s %s line %lld (%s); timestamps "
                             "must be strictly increasing%s%s",
                             label, line, tc.name[ROLE_TS], kr_format_timestamp(ts, 0, a, sizeof a),
                             ts == t.ts[t.n - 1] ? "repeats" : "is before", (long long)prev_line,
                             kr_format_timestamp(t.ts[t.n - 1], 0, b, sizeof b), split,
                             dst ? " (local times where summer time ends repeat an hour, and "
                                   "kronos reads the wall clock, also of stamps with an offset: "
                                   "give them in UTC or in the market's standard time)"
                                 : "");
            goto fail;
        }
        any_time |= has_time;
        prev_line = r.rec_line;
        t.ts[t.n] = ts;

        if (want_values && (st = parse_row_values(&r, &tc, label, line,
                                                  t.values + t.n * KR_N_FEATURES, err)) != KR_OK)
            goto fail;
        t.n++;
    }
    if (got < 0) {
        st = got;
        goto fail;
    }
    if (t.n == 0) {
        st = kr_error_set(err, KR_ERR_FORMAT, "%s: line %lld: no data rows after the header", label,
                          (long long)r.line);
        goto fail;
    }

    kr_candles *c = calloc(1, sizeof *c);
    if (!c) {
        st = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", label);
        goto fail;
    }
    c->n = t.n;
    c->timestamps = t.ts;
    c->values = t.values;
    c->date_only = !any_time;
    if (want_values) {
        c->has_volume = tc.col[KR_VOLUME] >= 0;
        c->has_amount = c->has_volume && tc.col[KR_AMOUNT] >= 0;
        if (!c->has_volume && tc.col[KR_AMOUNT] >= 0)
            snprintf(c->amount_dropped, sizeof c->amount_dropped, "%s", tc.name[KR_AMOUNT]);
    }
    csv_free(&r);
    kr_error_clear(err);
    *out = c;
    return KR_OK;

fail:
    csv_free(&r);
    free(t.ts);
    free(t.values);
    return st;
}

/* ------------------------------------------------------------------ files */

/* Reads a whole candle file (caller frees). Only regular files: a FIFO, a device or a
 * directory is refused at once, never waited on (a FIFO without a writer would block the open
 * for ever) or read without end (/dev/zero). Refuses more than 1 GiB before reading. */
static kr_status read_file(const char *path, char **out, size_t *out_len, kr_error *err) {
    return kr_read_file(path, KR_CSV_MAX_BYTES, "candle file", out, out_len, err);
}

/* ------------------------------------------------------------------ public API */

kr_status kr_candles_parse_csv(const char *data, size_t len, const char *label, kr_candles **out,
                               kr_error *err) {
    return parse_table(data, len, label, 1, out, err);
}

kr_status kr_candles_read_csv(const char *path, kr_candles **out, kr_error *err) {
    if (!out || !path)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_candles_read_csv: NULL argument");
    *out = NULL;
    char *buf;
    size_t len;
    kr_status st = read_file(path, &buf, &len, err);
    if (st != KR_OK) return st;
    st = parse_table(buf, len, path, 1, out, err);
    free(buf);
    return st;
}

void kr_candles_free(kr_candles *c) {
    if (!c) return;
    free(c->timestamps);
    free(c->values);
    free(c);
}

kr_series kr_candles_series(const kr_candles *c) {
    kr_series s = { 0 };
    if (!c) return s;
    return kr_candles_slice(c, 0, c->n);
}

/* An out-of-range request yields an empty view (n = 0) rather than a clamped one, so a
 * caller's off-by-one surfaces as "no data" instead of silently forecasting other rows. */
kr_series kr_candles_slice(const kr_candles *c, int64_t start, int64_t n) {
    kr_series s = { 0 };
    if (!c || start < 0 || n < 0 || start > c->n || n > c->n - start) return s;
    s.n = n;
    s.timestamps = c->timestamps + start;
    s.values = c->values + start * KR_N_FEATURES;
    s.has_volume = c->has_volume;
    s.has_amount = c->has_amount;
    return s;
}

kr_status kr_timestamps_read_csv(const char *path, int64_t **out, int64_t *n, kr_error *err) {
    if (!out || !n || !path)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_timestamps_read_csv: NULL argument");
    *out = NULL;
    *n = 0;
    char *buf;
    size_t len;
    kr_status st = read_file(path, &buf, &len, err);
    if (st != KR_OK) return st;
    kr_candles *c = NULL;
    st = parse_table(buf, len, path, 0, &c, err);
    free(buf);
    if (st != KR_OK) return st;
    *out = c->timestamps;
    *n = c->n;
    c->timestamps = NULL;
    kr_candles_free(c);
    return KR_OK;
}
