/*
 * eval/backtest_plan — where the forecasts of a backtest are made: each symbol's calendar,
 * season and trading rules, its origins, and the origins shared across symbols (the units of
 * the bootstrap and of the cross-section).
 *
 * Origins every N bars: symbols of one bar interval share a grid of origin timestamps, the
 * union of their eligible bars' stamps taken every N-th counting back from the latest, so
 * symbols trading on the same days forecast from the same bars (and a symbol missing a day
 * loses only that origin). Given dates: each symbol's last bar at or before each date, the
 * date being the origin's key. A bar is eligible when at least min_history rows end with it,
 * `horizon` bars follow it, and it lies within [from, to].
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/calibrate.h"
#include "base/error.h"
#include "eval/backtest_internal.h"
#include "series/calendar.h"

/* Far more than any useful backtest; bounds the report's memory. */
#define KR_BT_MAX_ITEMS 2000000
#define KR_BT_MAX_UNITS 200000

static int cmp_i64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Index of v in sorted[n], or -1. */
static int64_t find_i64(const int64_t *sorted, int64_t n, int64_t v) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sorted[lo] == v ? lo : -1;
}

/* The last row stamped at or before t, or -1. */
static int64_t row_at_or_before(const int64_t *ts, int64_t n, int64_t t) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (ts[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

int kr_bt_season(int64_t interval_seconds, const kr_calendar_info *info) {
    if (interval_seconds <= 0 || !info) return 0;
    if (info->months) return info->months < 12 ? 12 / info->months : 0; /* a year */
    const int64_t day = 86400;
    if (interval_seconds < day) {
        /* A trading day of bars: the times of day the history printed (48 five-minute bars on
         * the Shanghai exchange, 7 hourly ones on NYSE), or a calendar day of a 24/7 market. */
        if (info->how == KR_CAL_CONTINUOUS || (info->calendar && info->n_slots < 2))
            return (int)(day / interval_seconds);
        return info->n_slots >= 2 ? info->n_slots : 0;
    }
    if (interval_seconds < 6 * day) { /* daily bars: a trading week */
        int days = 0;
        for (int d = 0; d < 7; d++) days += (info->weekday_mask >> d) & 1;
        return days >= 2 ? days : 0;
    }
    if (interval_seconds <= 8 * day) return 52; /* weekly bars: a year */
    return 0;
}

/* A run of exactly six digits in s (a mainland China security code), copied to code[7]. */
static int six_digit_code(const char *s, char *code) {
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p) || (p > s && isdigit((unsigned char)p[-1]))) continue;
        int n = 0;
        while (isdigit((unsigned char)p[n])) n++;
        if (n == 6) {
            memcpy(code, p, 6);
            code[6] = 0;
            return 1;
        }
    }
    return 0;
}

int kr_bt_is_ashare(const char *symbol, const char *market, double *limit) {
    char code[7] = "";
    const int has_code = six_digit_code(symbol, code);
    int cn = 0;
    if (market && market[0]) {
        const kr_calendar *cal = NULL;
        kr_error e;
        cn = kr_calendar_find(market, &cal, &e) == KR_OK && !strcmp(kr_calendar_name(cal), "SSE");
    }
    const size_t n = strlen(symbol);
    static const char *const suffixes[] = { ".SH", ".SZ", ".SS", ".sh", ".sz", ".ss" };
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
        if (n > 3 && !strcmp(symbol + n - 3, suffixes[i])) cn = 1;
    static const char *const prefixes[] = { "XSHG", "XSHE", "SH", "SZ", "sh", "sz" };
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0] && has_code; i++)
        if (!strncmp(symbol, prefixes[i], strlen(prefixes[i]))) cn = 1;
    int all_digits = n == 6 && has_code;
    if (!cn && !all_digits) return 0;
    /* ChiNext (300xxx, 301xxx) and STAR (688xxx, 689xxx): 20 %; the main boards 10 %. */
    *limit = has_code && (!strncmp(code, "300", 3) || !strncmp(code, "301", 3) ||
                          !strncmp(code, "688", 3) || !strncmp(code, "689", 3))
                 ? 0.20
                 : 0.10;
    return 1;
}

/* Rows of c that can be origins (see the file comment): [first, last]; empty when last <
 * first. */
static void eligible_range(const kr_backtest_params *p, const kr_candles *c, int64_t *first,
                           int64_t *last) {
    *first = p->min_history - 1;
    *last = c->n - 1 - p->horizon;
    while (*first <= *last && c->timestamps[*first] < p->from_ts) (*first)++;
    while (*last >= *first && c->timestamps[*last] > p->to_ts) (*last)--;
}

/* Seasonal naive MAE of closes[n] (GluonTS's seasonal_error: the season falls back to 1 when
 * the history is not longer than it). NaN when n < 2. */
static double seasonal_error(const double *values, int64_t n, int m) {
    if (m < 1 || n <= m) m = 1;
    if (n <= m) return NAN;
    double s = 0;
    for (int64_t t = m; t < n; t++)
        s +=
            fabs(values[t * KR_N_FEATURES + KR_CLOSE] - values[(t - m) * KR_N_FEATURES + KR_CLOSE]);
    return s / (double)(n - m);
}

static void fail_symbol(kr_bt_symbol *s, const char *fmt, const char *detail) {
    s->failed = 1;
    snprintf(s->error, sizeof s->error, fmt, detail);
}

/* The symbol's fixed facts: calendar (at its first origin), season, trading rules. */
static void describe_symbol(kr_backtest_report *r, kr_bt_symbol *s, const kr_backtest_series *in,
                            int64_t first_origin) {
    const kr_backtest_params *p = &r->p;
    const kr_candles *c = in->candles;
    const kr_calendar *cal = NULL;
    kr_error e = { 0 };
    if (kr_calendar_resolve(in->market, in->symbol, &cal, &e) != KR_OK) {
        fail_symbol(s, "%s", e.message);
        return;
    }
    int64_t *future = malloc((size_t)p->horizon * sizeof *future);
    kr_calendar_info info;
    memset(&info, 0, sizeof info);
    kr_status st = future ? kr_calendar_future_in(cal, c->timestamps, first_origin + 1, p->horizon,
                                                  future, &info, &e)
                          : kr_error_set(&e, KR_ERR_NOMEM, "out of memory");
    free(future);
    if (st != KR_OK) {
        fail_symbol(s, "calendar: %s", e.message);
        return;
    }
    kr_calendar_describe(&info, s->calendar, sizeof s->calendar);
    snprintf(s->market, sizeof s->market, "%s",
             info.calendar ? kr_calendar_name(info.calendar) : "");
    const int64_t interval = kr_calendar_interval(c->timestamps, first_origin + 1);
    s->season = p->season > 0 ? p->season : p->season < 0 ? 0 : kr_bt_season(interval, &info);
    double limit = 0;
    if (p->ashare_rules == 1) s->ashare = 1, limit = 0.10;
    if (p->ashare_rules != 0 &&
        kr_bt_is_ashare(in->symbol, in->market ? in->market : s->market, &limit))
        s->ashare = 1;
    s->limit = s->ashare ? limit : 0;
}

/* Origins of the symbols of one bar interval (sym[n]) on their shared grid: rows into
 * rows[s][...] (counts in n_rows[s]), keys into keys[s][...]. */
static kr_status grid_origins(const kr_backtest_report *r, const kr_backtest_series *series,
                              const int *sym, int n, int64_t **rows, int64_t **keys,
                              int64_t *n_rows, kr_error *err) {
    const kr_backtest_params *p = &r->p;
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        int64_t first, last;
        eligible_range(p, series[sym[k]].candles, &first, &last);
        if (last >= first) total += last - first + 1;
    }
    if (total == 0) return KR_OK;
    int64_t *grid = malloc((size_t)total * sizeof *grid);
    if (!grid) return kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory planning origins");
    int64_t m = 0;
    for (int k = 0; k < n; k++) {
        const kr_candles *c = series[sym[k]].candles;
        int64_t first, last;
        eligible_range(p, c, &first, &last);
        for (int64_t i = first; i <= last; i++) grid[m++] = c->timestamps[i];
    }
    qsort(grid, (size_t)m, sizeof *grid, cmp_i64);
    int64_t u = 0;
    for (int64_t i = 0; i < m; i++)
        if (u == 0 || grid[i] != grid[u - 1]) grid[u++] = grid[i];
    /* Every r->every-th stamp counting back from the latest (kept in place, ascending). */
    int64_t g = 0;
    for (int64_t i = 0; i < u; i++)
        if ((u - 1 - i) % r->every == 0) grid[g++] = grid[i];
    kr_status st = KR_OK;
    for (int k = 0; k < n && st == KR_OK; k++) {
        const int s = sym[k];
        const kr_candles *c = series[s].candles;
        int64_t first, last;
        eligible_range(p, c, &first, &last);
        rows[s] = malloc((size_t)(g > 0 ? g : 1) * sizeof **rows);
        keys[s] = malloc((size_t)(g > 0 ? g : 1) * sizeof **keys);
        if (!rows[s] || !keys[s]) {
            st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory planning origins");
            break;
        }
        for (int64_t i = first; i <= last; i++)
            if (find_i64(grid, g, c->timestamps[i]) >= 0) {
                rows[s][n_rows[s]] = i;
                keys[s][n_rows[s]++] = c->timestamps[i];
            }
    }
    free(grid);
    return st;
}

/* Origins at given dates: each symbol's last bar at or before each. */
static kr_status dated_origins(const kr_backtest_report *r, const kr_backtest_series *series, int s,
                               int64_t **rows, int64_t **keys, int64_t *n_rows, kr_error *err) {
    const kr_backtest_params *p = &r->p;
    const kr_candles *c = series[s].candles;
    rows[s] = malloc((size_t)p->n_origin_ts * sizeof **rows);
    keys[s] = malloc((size_t)p->n_origin_ts * sizeof **keys);
    if (!rows[s] || !keys[s])
        return kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory planning origins");
    int64_t first, last;
    eligible_range(p, c, &first, &last);
    for (int j = 0; j < p->n_origin_ts; j++) {
        const int64_t i = row_at_or_before(c->timestamps, c->n, p->origin_ts[j]);
        if (i < first || i > last) continue;
        if (n_rows[s] > 0 && rows[s][n_rows[s] - 1] == i) continue; /* two dates, one bar */
        rows[s][n_rows[s]] = i;
        keys[s][n_rows[s]++] = p->origin_ts[j];
    }
    return KR_OK;
}

kr_status kr_bt_plan(kr_backtest_report *r, const kr_backtest_series *series, int n,
                     kr_error *err) {
    const kr_backtest_params *p = &r->p;
    kr_status st = KR_OK;
    r->n_symbols = n;
    r->symbols = calloc((size_t)n, sizeof *r->symbols);
    int64_t **rows = calloc((size_t)n, sizeof *rows), **keys = calloc((size_t)n, sizeof *keys);
    int64_t *n_rows = calloc((size_t)n, sizeof *n_rows),
            *interval = calloc((size_t)n, sizeof *interval);
    int *group = calloc((size_t)n, sizeof *group), *done = calloc((size_t)n, sizeof *done);
    int64_t *all_keys = NULL;
    if (!r->symbols || !rows || !keys || !n_rows || !interval || !group || !done) {
        st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory");
        goto out;
    }
    for (int s = 0; s < n; s++) {
        kr_bt_symbol *sy = &r->symbols[s];
        const kr_backtest_series *in = &series[s];
        snprintf(sy->symbol, sizeof sy->symbol, "%s", in->symbol);
        snprintf(sy->interval, sizeof sy->interval, "%s", in->interval ? in->interval : "");
        sy->rows = in->candles->n;
        interval[s] = kr_calendar_interval(in->candles->timestamps, in->candles->n);
    }
    /* Origins: per interval group on a shared grid, or at the given dates. */
    for (int s = 0; s < n && st == KR_OK; s++) {
        if (p->origin_ts) {
            st = dated_origins(r, series, s, rows, keys, n_rows, err);
            continue;
        }
        if (done[s]) continue;
        int m = 0;
        for (int t = s; t < n; t++)
            if (!done[t] && interval[t] == interval[s]) group[m++] = t, done[t] = 1;
        st = grid_origins(r, series, group, m, rows, keys, n_rows, err);
    }
    if (st != KR_OK) goto out;

    int64_t total = 0;
    for (int s = 0; s < n; s++) {
        kr_bt_symbol *sy = &r->symbols[s];
        if (p->max_origins > 0 && n_rows[s] > p->max_origins) {
            const int64_t drop = n_rows[s] - p->max_origins;
            memmove(rows[s], rows[s] + drop, (size_t)p->max_origins * sizeof **rows);
            memmove(keys[s], keys[s] + drop, (size_t)p->max_origins * sizeof **keys);
            n_rows[s] = p->max_origins;
        }
        const kr_candles *c = series[s].candles;
        if (n_rows[s] == 0) {
            char why[256];
            snprintf(why, sizeof why,
                     "%lld rows: no origin with %d rows of history and %d bars after it%s",
                     (long long)c->n, p->min_history, p->horizon,
                     p->origin_ts || p->from_ts != KR_STORE_TS_FIRST || p->to_ts != KR_STORE_TS_LAST
                         ? " within the range or at the dates given"
                         : "");
            fail_symbol(sy, "%s", why);
            continue;
        }
        describe_symbol(r, sy, &series[s], rows[s][0]);
        if (sy->failed) {
            n_rows[s] = 0;
            continue;
        }
        total += n_rows[s];
    }
    if (total == 0) {
        int s = 0;
        while (s < n - 1 && !r->symbols[s].failed) s++;
        st = kr_error_set(err, KR_ERR_INVALID_ARG, "%s: %s", r->symbols[s].symbol,
                          r->symbols[s].error);
        goto out;
    }
    if (total > KR_BT_MAX_ITEMS) {
        st = kr_error_set(err, KR_ERR_INVALID_ARG,
                          "%lld forecasts (symbols x origins) is more than a backtest takes "
                          "(%d): raise every or narrow from / to",
                          (long long)total, KR_BT_MAX_ITEMS);
        goto out;
    }
    r->n_items = (int)total;
    r->items = calloc((size_t)total, sizeof *r->items);
    all_keys = malloc((size_t)total * sizeof *all_keys);
    if (!r->items || !all_keys) {
        st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory (%lld forecasts)",
                          (long long)total);
        goto out;
    }
    int64_t k = 0;
    for (int s = 0; s < n; s++) {
        kr_bt_symbol *sy = &r->symbols[s];
        const kr_candles *c = series[s].candles;
        sy->first_item = (int)k;
        sy->n_items = (int)n_rows[s];
        sy->lookback_min = INT32_MAX;
        for (int64_t j = 0; j < n_rows[s]; j++, k++) {
            kr_bt_item *it = &r->items[k];
            const int64_t i = rows[s][j];
            it->sym = s;
            it->row = i;
            it->ts = c->timestamps[i];
            all_keys[k] = keys[s][j];
            it->lookback = kr_analyst_lookback(i + 1, p->horizon, p->max_context, p->lookback);
            if (it->lookback < sy->lookback_min) sy->lookback_min = it->lookback;
            if (it->lookback > sy->lookback_max) sy->lookback_max = it->lookback;
            const double *v = c->values;
            it->last_close = v[i * KR_N_FEATURES + KR_CLOSE];
            it->mase_scale = seasonal_error(v + (i + 1 - it->lookback) * KR_N_FEATURES,
                                            it->lookback, sy->season);
            it->real_h = v[(i + p->horizon) * KR_N_FEATURES + KR_CLOSE];
            it->real_return = it->real_h / it->last_close - 1.0;
            double sq = 0;
            for (int h = 1; h <= p->horizon; h++) {
                const double a = v[(i + h - 1) * KR_N_FEATURES + KR_CLOSE];
                const double b = v[(i + h) * KR_N_FEATURES + KR_CLOSE];
                sq += a > 0 && b > 0 ? log(b / a) * log(b / a) : NAN;
            }
            it->real_vol = sqrt(sq);
        }
        if (sy->n_items == 0) sy->lookback_min = 0;
    }
    /* Units: the distinct origin keys, ascending. */
    int64_t *sorted = malloc((size_t)total * sizeof *sorted);
    if (!sorted) {
        st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory");
        goto out;
    }
    memcpy(sorted, all_keys, (size_t)total * sizeof *sorted);
    qsort(sorted, (size_t)total, sizeof *sorted, cmp_i64);
    int64_t nu = 0;
    for (int64_t i = 0; i < total; i++)
        if (nu == 0 || sorted[i] != sorted[nu - 1]) sorted[nu++] = sorted[i];
    if (nu > KR_BT_MAX_UNITS) {
        free(sorted);
        st = kr_error_set(err, KR_ERR_INVALID_ARG,
                          "%lld distinct origins is more than a backtest takes (%d): raise every "
                          "or narrow from / to",
                          (long long)nu, KR_BT_MAX_UNITS);
        goto out;
    }
    r->n_units = (int)nu;
    r->unit_ts = sorted;
    r->unit_n = calloc((size_t)nu, sizeof *r->unit_n);
    if (!r->unit_n) {
        st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory");
        goto out;
    }
    for (int64_t i = 0; i < total; i++) {
        r->items[i].unit = (int)find_i64(sorted, nu, all_keys[i]);
        r->unit_n[r->items[i].unit]++;
    }
out:
    if (rows)
        for (int s = 0; s < n; s++) free(rows[s]);
    if (keys)
        for (int s = 0; s < n; s++) free(keys[s]);
    free(rows);
    free(keys);
    free(n_rows);
    free(interval);
    free(group);
    free(done);
    free(all_keys);
    return st;
}
