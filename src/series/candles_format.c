/*
 * series/candles_format — candles written out as the readers take them back: CSV for
 * `kronos store export` (and `kronos ingest` / `forecast` read it again) and the JSON object
 * of GET /v1/candles. Every number is the shortest text that reads back as exactly the stored
 * double, so an export ingested again changes nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "kronos/series.h"

static const char *const k_columns[7] = { "timestamps", "open",   "high",  "low",
                                          "close",      "volume", "amount" };

/* Columns written: the prices, then volume and amount when the series has them. */
static int n_columns(const kr_candles *c) {
    return 5 + (c->has_volume ? 1 + (c->has_amount ? 1 : 0) : 0);
}

static void append_exact(kr_sb *sb, double x) {
    char b[40];
    snprintf(b, sizeof b, "%.15g", x);
    if (strtod(b, NULL) != x) snprintf(b, sizeof b, "%.17g", x);
    kr_sb_append(sb, b);
}

kr_status kr_candles_to_csv(const kr_candles *c, char **out, kr_error *err) {
    if (!c || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_candles_to_csv: NULL argument");
    *out = NULL;
    const int cols = n_columns(c);
    kr_sb sb = { 0 };
    for (int k = 0; k < cols; k++) kr_sb_appendf(&sb, "%s%s", k ? "," : "", k_columns[k]);
    kr_sb_append(&sb, "\n");
    char ts[32];
    for (int64_t i = 0; i < c->n; i++) {
        kr_sb_append(&sb, kr_format_timestamp(c->timestamps[i], c->date_only, ts, sizeof ts));
        for (int k = 0; k < cols - 1; k++) {
            kr_sb_append(&sb, ",");
            append_exact(&sb, c->values[i * KR_N_FEATURES + k]);
        }
        kr_sb_append(&sb, "\n");
    }
    return kr_sb_finish(&sb, out, err);
}

kr_status kr_candles_to_json(const kr_candles *c, const char *symbol, const char *interval,
                             char **out, kr_error *err) {
    if (!c || !symbol || !interval || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_candles_to_json: NULL argument");
    *out = NULL;
    /* Symbols and intervals are checked names (letters, digits, . _ - ^ =): nothing to
     * escape. */
    const int cols = n_columns(c);
    kr_sb sb = { 0 };
    kr_sb_appendf(&sb,
                  "{\"object\":\"candles\",\"symbol\":\"%s\",\"interval\":\"%s\",\"rows\":%lld,"
                  "\"columns\":[",
                  symbol, interval, (long long)c->n);
    for (int k = 0; k < cols; k++) kr_sb_appendf(&sb, "%s\"%s\"", k ? "," : "", k_columns[k]);
    kr_sb_append(&sb, "],\"candles\":[");
    char ts[32];
    for (int64_t i = 0; i < c->n; i++) {
        kr_format_timestamp(c->timestamps[i], c->date_only, ts, sizeof ts);
        kr_sb_appendf(&sb, "%s[\"%s\"", i ? "," : "", ts);
        for (int k = 0; k < cols - 1; k++) {
            kr_sb_append(&sb, ",");
            append_exact(&sb, c->values[i * KR_N_FEATURES + k]);
        }
        kr_sb_append(&sb, "]");
    }
    kr_sb_append(&sb, "]}");
    return kr_sb_finish(&sb, out, err);
}

/* The fewest decimals d (0 .. 8) at which x * 10^d is a whole number, up to the rounding of a
 * double (158.35 * 100 = 15835.000000000002); -1 when none is. */
static int decimals_of(double x) {
    double scaled = fabs(x);
    for (int d = 0; d <= 8; d++, scaled *= 10) {
        const double frac = fabs(scaled - nearbyint(scaled));
        if (frac <= 1e-6 + 1e-12 * scaled) return d;
    }
    return -1;
}

int kr_candles_decimals(const kr_candles *c, int column) {
    if (!c || column < 0 || column >= KR_N_FEATURES) return -1;
    const int first = column <= KR_CLOSE ? KR_OPEN : column;
    const int last = column <= KR_CLOSE ? KR_CLOSE : column;
    int most = 0;
    for (int64_t i = 0; i < c->n; i++)
        for (int f = first; f <= last; f++) {
            const int d = decimals_of(c->values[i * KR_N_FEATURES + f]);
            if (d < 0) return -1;
            if (d > most) most = d;
        }
    return most;
}
