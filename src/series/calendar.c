/*
 * series/calendar — exchange calendars and future timestamps (see calendar.h).
 *
 * The predictor embeds each future candle's minute/hour/weekday/day/month, so a forecast needs
 * the stamps the market will actually print: a US holiday gets no bar, an A-share morning ends
 * at 11:30 and the afternoon starts at 13:05, a monthly bar follows 2025-09-01 with 10-01.
 * The calendars themselves (data/calendars, compiled in and read again at run time from the
 * shipped and user directories) are loaded by calendar_files.c; they are immutable once
 * loaded, so every thread may use them.
 */
#include "series/calendar.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "series/candles.h"

enum { SECONDS_PER_DAY = 86400 };
/* How far past the previous stamp a candidate may lie before we give up: longer than any
 * weekend plus holiday run, short enough that a history that fits no calendar fails fast. */
#define KR_CAL_SEARCH_SECONDS (14 * (int64_t)SECONDS_PER_DAY)
/* |timestamp| bound (about 317,000 years): keeps every gap and step far from int64 overflow. */
#define KR_CAL_MAX_ABS ((int64_t)10000000000000)
/* A calendar still fits a history with this share of odd bars (a vendor's stray print). */
#define KR_CAL_MISFIT_PER 500

/* The embedded files (calendars_data.c, generated). */
extern const struct {
    const char *name, *text;
    size_t len;
} kr_calendar_files[];
extern const int kr_calendar_n_files;

/* ------------------------------------------------------------------ small helpers */

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

static int64_t day_of(int64_t t) { return floor_div(t, SECONDS_PER_DAY); }

static int weekday_of_day(int64_t d) {
    int64_t w = (d + 3) % 7; /* 1970-01-01 was a Thursday (3, Monday = 0) */
    return (int)(w < 0 ? w + 7 : w);
}

static int weekday_of(int64_t t) { return weekday_of_day(day_of(t)); }

static int64_t second_of_day(int64_t t) { return t - day_of(t) * SECONDS_PER_DAY; }

static int cmp_i64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Index of key in sorted[n], or -1. */
static int64_t find_sorted(const int64_t *sorted, int64_t n, int64_t key) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sorted[lo] == key ? lo : -1;
}

typedef struct value_count {
    int64_t value, count; /* count 0: an empty slot of the table */
} value_count;

static int cmp_value_count(const void *a, const void *b) {
    const int64_t x = ((const value_count *)a)->value, y = ((const value_count *)b)->value;
    return (x > y) - (x < y);
}

/* The distinct values of v[n] with their counts, ascending, into *out (caller frees), or -1
 * when they are too many to be worth it (more than n / 8) or memory is short: the caller then
 * sorts. A history's gaps and phases take a handful of values, so counting them in a hash
 * table and sorting only the distinct ones is O(n) where sorting all n was O(n log n). */
static int64_t count_values(const int64_t *v, int64_t n, value_count **out) {
    const int64_t max_distinct = n / 8 > 64 ? n / 8 : 64;
    size_t cap = 64, used = 0; /* a power of two, at most half full */
    value_count *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (int64_t i = 0; i < n; i++) {
        size_t h = (size_t)(((uint64_t)v[i] * 0x9E3779B97F4A7C15ULL) >> 32) & (cap - 1);
        while (t[h].count && t[h].value != v[i]) h = (h + 1) & (cap - 1);
        if (t[h].count) {
            t[h].count++;
            continue;
        }
        t[h].value = v[i];
        t[h].count = 1;
        if (++used * 2 <= cap) continue;
        if ((int64_t)used > max_distinct) {
            free(t);
            return -1;
        }
        value_count *nt = calloc(cap * 2, sizeof *nt);
        if (!nt) {
            free(t);
            return -1;
        }
        for (size_t k = 0; k < cap; k++) {
            if (!t[k].count) continue;
            size_t g =
                (size_t)(((uint64_t)t[k].value * 0x9E3779B97F4A7C15ULL) >> 32) & (cap * 2 - 1);
            while (nt[g].count) g = (g + 1) & (cap * 2 - 1);
            nt[g] = t[k];
        }
        free(t);
        t = nt;
        cap *= 2;
    }
    size_t m = 0;
    for (size_t k = 0; k < cap; k++)
        if (t[k].count) t[m++] = t[k];
    qsort(t, m, sizeof *t, cmp_value_count);
    *out = t;
    return (int64_t)m;
}

/* Most common value of v[n] (n >= 1; ties go to the smallest) and, when median is not NULL,
 * the value at index (n - 1) / 2 of v sorted: what sorting v would give, but v is left as it
 * is when counting works (count_values) and sorted in place otherwise. */
static int64_t mode_of(int64_t *v, int64_t n, int64_t *median) {
    value_count *vc = NULL;
    const int64_t m = count_values(v, n, &vc);
    int64_t best = 0, best_count = 0;
    if (m >= 0) {
        int64_t below = 0;
        for (int64_t k = 0; k < m; k++) {
            if (vc[k].count > best_count) {
                best = vc[k].value;
                best_count = vc[k].count;
            }
            if (median && below <= (n - 1) / 2 && (n - 1) / 2 < below + vc[k].count)
                *median = vc[k].value;
            below += vc[k].count;
        }
        free(vc);
        return best;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    best = v[0];
    for (int64_t i = 0; i < n;) {
        int64_t j = i;
        while (j < n && v[j] == v[i]) j++;
        if (j - i > best_count) {
            best = v[i];
            best_count = j - i;
        }
        i = j;
    }
    if (median) *median = v[(n - 1) / 2];
    return best;
}

/* Most common gap; ties go to the smallest. gaps is scratch. */
static int64_t mode_gap(int64_t *gaps, int64_t n) { return mode_of(gaps, n, NULL); }

/* Sorts v[n] ascending and drops repeats; returns how many values are left. */
static int64_t sort_unique(int64_t *v, int64_t n) {
    /* A history's day numbers come in order, and its times of day take a few hundred values:
     * on millions of bars (years of 1-minute bars) a pass or a count beats qsort's
     * O(n log n). */
    int64_t i = 1;
    while (i < n && v[i - 1] <= v[i]) i++;
    if (i < n) {
        value_count *vc = NULL;
        const int64_t m = count_values(v, n, &vc);
        if (m >= 0) {
            for (int64_t k = 0; k < m; k++) v[k] = vc[k].value;
            free(vc);
            return m;
        }
        qsort(v, (size_t)n, sizeof *v, cmp_i64);
    }
    int64_t m = 0;
    for (int64_t k = 0; k < n; k++)
        if (m == 0 || v[k] != v[m - 1]) v[m++] = v[k];
    return m;
}

static int names_match(const kr_calendar *c, const char *name) {
    if (!strcasecmp(c->name, name)) return 1;
    for (int i = 0; i < c->n_aliases; i++)
        if (!strcasecmp(c->aliases[i], name)) return 1;
    return 0;
}

kr_status kr_calendar_find(const char *name, const kr_calendar **out, kr_error *err) {
    const kr_calendar *const *list = NULL;
    int n = 0;
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "calendar: out is NULL");
    *out = NULL;
    kr_status st = kr_calendar_list(&list, &n, err);
    if (st != KR_OK) return st;
    for (int i = 0; name && i < n; i++)
        if (names_match(list[i], name)) {
            *out = list[i];
            return KR_OK;
        }
    char known[256] = "";
    size_t len = 0;
    for (int i = 0; i < n && len + 32 < sizeof known; i++)
        len +=
            (size_t)snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", list[i]->name);
    return kr_error_set(err, KR_ERR_INVALID_ARG,
                        "unknown market '%.40s' (known: %s; see data/calendars/README.md)",
                        name ? name : "", known);
}

const kr_calendar *kr_calendar_for_symbol(const char *symbol) {
    const kr_calendar *const *list = NULL;
    int n = 0;
    kr_error err;
    if (!symbol || kr_calendar_list(&list, &n, &err) != KR_OK) return NULL;
    size_t sl = strlen(symbol);
    const kr_calendar *best = NULL;
    size_t best_len = 0;
    /* The longest matching suffix wins ("-USDT" over "USDT"). */
    for (int i = 0; i < n; i++)
        for (int k = 0; k < list[i]->n_suffixes; k++) {
            size_t l = strlen(list[i]->suffixes[k]);
            if (l < sl && l > best_len && !strcasecmp(symbol + sl - l, list[i]->suffixes[k])) {
                best = list[i];
                best_len = l;
            }
        }
    return best;
}

kr_status kr_calendar_resolve(const char *market, const char *symbol, const kr_calendar **out,
                              kr_error *err) {
    *out = NULL;
    if (market && *market) return kr_calendar_find(market, out, err);
    const kr_calendar *const *list = NULL;
    int n = 0;
    kr_status st = kr_calendar_list(&list, &n, err);
    if (st != KR_OK) return st;
    *out = kr_calendar_for_symbol(symbol);
    return KR_OK;
}

/* ------------------------------------------------------------------ calendar arithmetic */

static int year_of_day(int64_t day) { return kr_civil_from_unix(day * SECONDS_PER_DAY).year; }

static int is_holiday(const kr_calendar *c, int64_t day) {
    return find_sorted(c->holidays, c->n_holidays, day) >= 0;
}

static int trading_day(const kr_calendar *c, int64_t day) {
    return (c->weekday_mask & (1 << weekday_of_day(day))) && !is_holiday(c, day);
}

/* The close of session s on day (an early close cuts it; -1 when the session is gone). */
static int session_close_on(const kr_calendar *c, int s, int64_t day) {
    int64_t k = find_sorted(c->early_days, c->n_early, day);
    int close = c->session_close[s];
    if (k >= 0 && c->early_close[k] < close) close = c->early_close[k];
    return close > c->session_open[s] ? close : -1;
}

/* The session of day holding time of day tod for the label convention, or -1. */
static int session_at(const kr_calendar *c, int64_t day, int64_t tod, int label_end) {
    for (int s = 0; s < c->n_sessions; s++) {
        int close = session_close_on(c, s, day);
        if (close < 0) continue;
        if (label_end ? (tod > c->session_open[s] && tod <= close)
                      : (tod >= c->session_open[s] && tod < close))
            return s;
    }
    return -1;
}

static int is_continuous(const kr_calendar *c) {
    return c->weekday_mask == 0x7F && c->n_holidays == 0 && c->n_sessions == 1 &&
           c->session_open[0] == 0 && c->session_close[0] == SECONDS_PER_DAY;
}

/* Seconds of trading a week (the lower, the more specific a calendar). */
static double open_seconds_week(const kr_calendar *c) {
    double s = 0;
    for (int k = 0; k < c->n_sessions; k++) s += c->session_close[k] - c->session_open[k];
    int days = 0;
    for (int d = 0; d < 7; d++) days += (c->weekday_mask >> d) & 1;
    return s * days;
}

static double holidays_per_year(const kr_calendar *c) {
    return (double)c->n_holidays / (c->year_last - c->year_first + 1);
}

/* ------------------------------------------------------------------ the history */

typedef struct hist_shape {
    int64_t interval;
    int intraday;
    int months; /* 1, 3, 12 or 0 */
    int weekday_mask;
    int64_t n_slots;
    int64_t *slots; /* [n_slots] distinct times of day (intraday) */
    int64_t n_dates; /* distinct dates */
    int sat, sun; /* bars seen on a Saturday / Sunday */
} hist_shape;

static kr_status shape_of(const int64_t *ts, int64_t n, hist_shape *h, kr_error *err) {
    memset(h, 0, sizeof *h);
    int64_t *scratch = malloc((size_t)n * sizeof *scratch);
    if (!scratch) return kr_error_set(err, KR_ERR_NOMEM, "calendar: out of memory");
    for (int64_t i = 1; i < n; i++) scratch[i - 1] = ts[i] - ts[i - 1];
    int64_t median = 0;
    h->interval = mode_of(scratch, n - 1, &median);
    h->intraday = h->interval < SECONDS_PER_DAY;
    const int64_t day = SECONDS_PER_DAY;
    if (median >= 27 * day && median <= 32 * day && h->interval >= 28 * day)
        h->months = 1;
    else if (median >= 88 * day && median <= 93 * day)
        h->months = 3;
    else if (median >= 360 * day && median <= 370 * day)
        h->months = 12;
    for (int64_t i = 0; i < n; i++) {
        int w = weekday_of(ts[i]);
        h->weekday_mask |= 1 << w;
        h->sat |= w == 5;
        h->sun |= w == 6;
    }
    for (int64_t i = 0; i < n; i++) scratch[i] = day_of(ts[i]);
    h->n_dates = sort_unique(scratch, n);
    if (h->intraday) {
        for (int64_t i = 0; i < n; i++) scratch[i] = second_of_day(ts[i]);
        h->n_slots = sort_unique(scratch, n);
        h->slots = scratch;
    } else {
        free(scratch);
    }
    return KR_OK;
}

/* Bars of ts that a calendar does not hold: for each label convention (bad_start: outside
 * [open, close) of every session, bad_end: outside (open, close]), and the fewer of the two
 * when a vendor's auction bar on the day's other bound is let pass (bad_fit): an A-share 09:30
 * opening-auction bar beside end-labelled minutes, a 16:00 closing-cross bar beside
 * start-labelled ones (one a day is more than the odd-bar allowance); and how many bars sit
 * exactly on a session's open or close (evidence for the convention). bad_fit may be NULL. */
static void misfits(const kr_calendar *c, const int64_t *ts, int64_t n, int intraday,
                    int64_t *bad_start, int64_t *bad_end, int64_t *bad_fit, int64_t *at_open,
                    int64_t *at_close) {
    int64_t fit_start = 0, fit_end = 0;
    *bad_start = *bad_end = *at_open = *at_close = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t day = day_of(ts[i]);
        const int covered = year_of_day(day) >= c->year_first && year_of_day(day) <= c->year_last;
        const int wd_ok = (c->weekday_mask >> weekday_of_day(day)) & 1;
        const int open_day = wd_ok && !(covered && is_holiday(c, day));
        if (!intraday || !open_day) {
            *bad_start += !open_day;
            *bad_end += !open_day;
            fit_start += !open_day;
            fit_end += !open_day;
            continue;
        }
        const int64_t tod = second_of_day(ts[i]);
        const int in_start = session_at(c, day, tod, 0) >= 0,
                  in_end = session_at(c, day, tod, 1) >= 0;
        int day_close = -1;
        for (int s = 0; s < c->n_sessions; s++) {
            const int close = session_close_on(c, s, day);
            if (close >= 0) day_close = close;
            *at_open += tod == c->session_open[s];
            *at_close += tod == close;
        }
        /* A closing auction's bars (HKEX 16:00-16:10) are the day's under either label. */
        if (c->closing_auction && day_close >= 0 && tod >= day_close &&
            tod <= day_close + c->closing_auction)
            continue;
        *bad_start += !in_start;
        *bad_end += !in_end;
        fit_start += !in_start && tod != day_close;
        fit_end += !in_end && tod != c->session_open[0];
    }
    if (bad_fit) *bad_fit = fit_start < fit_end ? fit_start : fit_end;
}

/* The calendar's holidays between the history's first and last day on which it printed no
 * bar (days ascending, unique): the gaps the calendar explains, its evidence. */
static int64_t holidays_absent(const kr_calendar *c, const int64_t *days, int64_t n_days) {
    int64_t count = 0;
    for (int i = 0; i < c->n_holidays; i++) {
        const int64_t h = c->holidays[i];
        if (h > days[0] && h < days[n_days - 1] && find_sorted(days, n_days, h) < 0) count++;
    }
    return count;
}

/* The label convention for a calendar and a history: the history's evidence, else the
 * calendar's own. */
static int label_for(const kr_calendar *c, const int64_t *ts, int64_t n, int intraday) {
    int64_t bs, be, ao, ac;
    misfits(c, ts, n, intraday, &bs, &be, NULL, &ao, &ac);
    if (bs != be) return be < bs;
    if (ao != ac) return ac > ao;
    return c->label_end;
}

kr_status kr_calendar_infer(const int64_t *ts, int64_t n, const kr_calendar **out, kr_error *err) {
    *out = NULL;
    const kr_calendar *const *list = NULL;
    int nc = 0;
    kr_status st = kr_calendar_list(&list, &nc, err);
    if (st != KR_OK) return st;
    if (!ts || n < 2) return KR_OK;
    hist_shape h;
    if ((st = shape_of(ts, n, &h, err)) != KR_OK) return st;
    int64_t *days = malloc((size_t)n * sizeof *days);
    if (!days) {
        free(h.slots);
        return kr_error_set(err, KR_ERR_NOMEM, "calendar: out of memory");
    }
    for (int64_t i = 0; i < n; i++) days[i] = day_of(ts[i]);
    const int64_t n_days = sort_unique(days, n);
    const int64_t allowed = n / KR_CAL_MISFIT_PER;
    const kr_calendar *best = NULL;
    int64_t best_absent = 0;
    for (int i = 0; i < nc; i++) {
        const kr_calendar *c = list[i];
        /* A 24/7 calendar holds any history: it is the answer only for one that trades on
         * both weekend days (otherwise an odd session would be taken for crypto). */
        if (is_continuous(c) && !(h.sat && h.sun)) continue;
        int64_t bs, be, fit, ao, ac;
        misfits(c, ts, n, h.intraday, &bs, &be, &fit, &ao, &ac);
        if (fit > allowed) continue;
        /* Of the calendars that hold every bar, the one whose holidays explain the most of
         * the history's missing weekdays (a US daily history that skips Thanksgiving is
         * NYSE's, though no bar of it falls on an A-share holiday either; weekly and longer
         * bars miss most days anyway), then the most specific: the fewest trading hours, then
         * the most holidays. */
        const int64_t absent =
            h.interval < 7 * SECONDS_PER_DAY ? holidays_absent(c, days, n_days) : 0;
        if (!best || absent > best_absent) {
            best = c;
            best_absent = absent;
            continue;
        }
        if (absent < best_absent) continue;
        double a = open_seconds_week(c), b = open_seconds_week(best);
        if (a < b || (a == b && holidays_per_year(c) > holidays_per_year(best))) {
            best = c;
            best_absent = absent;
        }
    }
    free(days);
    free(h.slots);
    *out = best;
    return KR_OK;
}

/* ------------------------------------------------------------------ future stamps */

/* Where the bars of each session lie: a start-labelled session's bars at open + phase + k x
 * interval (and at the open itself when the history has bars there), an end-labelled one's
 * at open + phase + k x interval (k >= 1 when phase is 0) and at the close. Phase 0 is the
 * usual grid (09:30, 10:30, ...); vendors that align hourly bars to the clock print 09:30,
 * 10:00, 11:00, ... (phase 30 minutes), and the forecast keeps their grid. */
typedef struct bar_grid {
    int64_t interval;
    int label_end;
    int64_t phase[KR_CAL_MAX_SESSIONS];
    int at_open[KR_CAL_MAX_SESSIONS]; /* the history has bars at the session's open */
} bar_grid;

static kr_status grid_of(const kr_calendar *c, const int64_t *ts, int64_t n, int64_t interval,
                         int label_end, bar_grid *g, kr_error *err) {
    memset(g, 0, sizeof *g);
    g->interval = interval;
    g->label_end = label_end;
    int64_t *ph = malloc((size_t)n * sizeof *ph);
    if (!ph) return kr_error_set(err, KR_ERR_NOMEM, "calendar: out of memory");
    for (int s = 0; s < c->n_sessions; s++) {
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++) {
            const int64_t day = day_of(ts[i]), tod = second_of_day(ts[i]);
            if (!trading_day(c, day) || session_at(c, day, tod, label_end) != s) continue;
            if (tod == c->session_open[s]) g->at_open[s] = 1;
            /* The bound's own bar (the open, a partial bar at the close) tells no phase. */
            if (tod == c->session_open[s] || tod == session_close_on(c, s, day)) continue;
            ph[m++] = (tod - c->session_open[s]) % interval;
        }
        g->phase[s] = m ? mode_gap(ph, m) : 0;
    }
    free(ph);
    return KR_OK;
}

/* The first bar of a session strictly after t (start label: the open, or the first on the
 * phase when the history has none there; end label: the first on the phase, or the close for
 * a session shorter than that). */
static int64_t next_session_bar(const kr_calendar *c, int64_t t, const bar_grid *g, int64_t limit) {
    for (int64_t day = day_of(t); day * SECONDS_PER_DAY <= limit; day++) {
        if (!trading_day(c, day)) continue;
        for (int s = 0; s < c->n_sessions; s++) {
            int close = session_close_on(c, s, day);
            if (close < 0) continue;
            int64_t first = c->session_open[s];
            if (g->label_end) {
                first += g->phase[s] ? g->phase[s] : g->interval;
                if (first > close) first = close;
            } else if (g->phase[s] && !g->at_open[s] && first + g->phase[s] < close) {
                first += g->phase[s];
            }
            int64_t cand = day * SECONDS_PER_DAY + first;
            if (cand > t) return cand;
        }
    }
    return INT64_MIN;
}

static int64_t next_intraday(const kr_calendar *c, int64_t prev, const bar_grid *g) {
    const int64_t limit = prev + KR_CAL_SEARCH_SECONDS, interval = g->interval;
    if (is_continuous(c)) return prev + interval;
    const int64_t day = day_of(prev), tod = second_of_day(prev);
    const int s = trading_day(c, day) ? session_at(c, day, tod, g->label_end) : -1;
    if (s >= 0) {
        const int close = session_close_on(c, s, day);
        /* The next point of the session's grid after tod. */
        const int64_t base = c->session_open[s] + g->phase[s];
        const int64_t cand = tod < base ? base : base + ((tod - base) / interval + 1) * interval;
        if (g->label_end ? cand <= close : cand < close) return day * SECONDS_PER_DAY + cand;
        if (g->label_end && tod < close) return day * SECONDS_PER_DAY + close; /* partial bar */
    }
    return next_session_bar(c, prev, g, limit);
}

static int64_t next_trading_day(const kr_calendar *c, int64_t prev) {
    const int64_t tod = second_of_day(prev);
    for (int64_t day = day_of(prev) + 1, k = 0; k < 60; day++, k++)
        if (trading_day(c, day)) return day * SECONDS_PER_DAY + tod;
    return INT64_MIN;
}

static int days_in_month(int y, int m) {
    static const int k_days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
    return k_days[m - 1];
}

/* The last trading day of a month (weekdays when there is no calendar). */
static int last_trading_day(const kr_calendar *c, int y, int m) {
    for (int d = days_in_month(y, m); d > 1; d--) {
        int64_t day = day_of(kr_unix_from_civil(y, m, d, 0, 0, 0));
        if (c ? trading_day(c, day) : weekday_of_day(day) < 5) return d;
    }
    return 1;
}

typedef enum { ANCHOR_DAY, ANCHOR_FIRST, ANCHOR_MONTH_END, ANCHOR_LAST_TRADING } anchor;

static anchor month_anchor(const kr_calendar *c, const int64_t *ts, int64_t n) {
    int first = 1, end = 1, last_trading = 1;
    for (int64_t i = 0; i < n; i++) {
        kr_civil g = kr_civil_from_unix(ts[i]);
        first &= g.day == 1;
        end &= g.day == days_in_month(g.year, g.month);
        last_trading &= g.day == last_trading_day(c, g.year, g.month);
    }
    return first          ? ANCHOR_FIRST
           : end          ? ANCHOR_MONTH_END
           : last_trading ? ANCHOR_LAST_TRADING
                          : ANCHOR_DAY;
}

static int64_t add_months(const kr_calendar *c, int64_t prev, int months, anchor a, int day0) {
    kr_civil g = kr_civil_from_unix(prev);
    int m0 = g.year * 12 + (g.month - 1) + months;
    int y = m0 / 12, m = m0 % 12 + 1;
    int d = a == ANCHOR_FIRST          ? 1
            : a == ANCHOR_MONTH_END    ? days_in_month(y, m)
            : a == ANCHOR_LAST_TRADING ? last_trading_day(c, y, m)
                                       : (day0 < days_in_month(y, m) ? day0 : days_in_month(y, m));
    return kr_unix_from_civil(y, m, d, g.hour, g.minute, g.second);
}

/* The pre-calendar rule, for histories no calendar holds: step by the interval over the
 * weekdays seen and, intraday, the times of day seen. */
static kr_status future_learned(const hist_shape *h, int64_t last, int pred_len, int64_t *out,
                                kr_error *err) {
    int64_t max_steps = KR_CAL_SEARCH_SECONDS / h->interval;
    if (!h->intraday && max_steps < 7) max_steps = 7;
    if (max_steps < 1) max_steps = 1;
    int64_t t = last;
    for (int k = 0; k < pred_len; k++) {
        const int64_t from = t;
        int found = 0;
        for (int64_t step = 0; step < max_steps; step++) {
            if (t > KR_CAL_MAX_ABS) break;
            t += h->interval;
            if (!(h->weekday_mask & (1 << weekday_of(t)))) continue;
            if (h->intraday && find_sorted(h->slots, h->n_slots, second_of_day(t)) < 0) continue;
            found = 1;
            break;
        }
        if (!found) {
            char buf[32];
            return kr_error_set(err, KR_ERR_FORMAT,
                                "calendar: no time after %s within %lld steps of %lld s fits the "
                                "weekdays and session times seen in the history, and no exchange "
                                "calendar holds it; pass a market or future timestamps "
                                "explicitly",
                                kr_format_timestamp(from, 0, buf, sizeof buf), (long long)max_steps,
                                (long long)h->interval);
        }
        out[k] = t;
    }
    return KR_OK;
}

static kr_status check_input(const int64_t *ts, int64_t n, int pred_len, const int64_t *out,
                             kr_error *err) {
    if (!ts || n < 2)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "calendar: need at least 2 timestamps to infer the bar interval "
                            "(got %lld)",
                            (long long)(ts ? n : 0));
    if (pred_len < 0 || (pred_len > 0 && !out))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "calendar: invalid pred_len %d or output",
                            pred_len);
    for (int64_t i = 0; i < n; i++) {
        if (ts[i] > KR_CAL_MAX_ABS || ts[i] < -KR_CAL_MAX_ABS)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "calendar: timestamp %lld (index %lld) is out of range",
                                (long long)ts[i], (long long)i);
        if (i > 0 && ts[i] <= ts[i - 1])
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "calendar: timestamps must be strictly increasing (index %lld "
                                "is not after index %lld)",
                                (long long)i, (long long)(i - 1));
    }
    return KR_OK;
}

kr_status kr_calendar_future_in(const kr_calendar *cal, const int64_t *ts, int64_t n, int pred_len,
                                int64_t *out, kr_calendar_info *info, kr_error *err) {
    kr_status st = check_input(ts, n, pred_len, out, err);
    if (st != KR_OK) return st;
    kr_calendar_how how = KR_CAL_GIVEN;
    if (!cal) {
        if ((st = kr_calendar_infer(ts, n, &cal, err)) != KR_OK) return st;
        how = KR_CAL_INFERRED;
    }
    hist_shape h;
    if ((st = shape_of(ts, n, &h, err)) != KR_OK) return st;
    if (!cal && h.months == 0)
        how = h.n_dates >= 2 || !h.intraday ? KR_CAL_LEARNED : KR_CAL_CONTINUOUS;
    const int label_end = cal && h.intraday ? label_for(cal, ts, n, 1) : 0;
    if (info) {
        memset(info, 0, sizeof *info);
        info->interval_seconds = h.interval;
        info->intraday = h.intraday;
        info->weekday_mask = h.weekday_mask;
        info->n_slots = (int)h.n_slots;
        info->months = h.months;
        info->calendar = cal;
        info->how = how;
        info->label_end = label_end;
    }
    int64_t t = ts[n - 1];
    bar_grid grid;
    if (st == KR_OK && cal && h.intraday && !h.months && how != KR_CAL_CONTINUOUS)
        st = grid_of(cal, ts, n, h.interval, label_end, &grid, err);
    if (st != KR_OK) {
        free(h.slots);
        return st;
    }
    if (how == KR_CAL_LEARNED) {
        st = future_learned(&h, t, pred_len, out, err);
    } else {
        const anchor a = h.months ? month_anchor(cal, ts, n) : ANCHOR_DAY;
        const int day0 = kr_civil_from_unix(t).day;
        for (int k = 0; k < pred_len && st == KR_OK; k++) {
            int64_t next;
            if (h.months)
                next = add_months(cal, t, h.months * (k + 1), a, day0);
            else if (how == KR_CAL_CONTINUOUS || h.interval >= 7 * SECONDS_PER_DAY)
                next = t + h.interval;
            else if (h.intraday)
                next = next_intraday(cal, t, &grid);
            else
                next = next_trading_day(cal, t);
            if (next == INT64_MIN || next > KR_CAL_MAX_ABS || next <= t) {
                char buf[32];
                st = kr_error_set(err, KR_ERR_FORMAT,
                                  "calendar %s: no trading time after %s within 14 days; pass "
                                  "future timestamps explicitly",
                                  cal ? cal->name : "", kr_format_timestamp(t, 0, buf, sizeof buf));
                break;
            }
            /* Monthly stamps count from the last bar, so a clamped day (the 31st) does not
             * drift; the others step from the previous stamp. */
            out[k] = next;
            if (!h.months) t = next;
        }
        if (h.months && pred_len > 0) t = out[pred_len - 1];
    }
    if (info && st == KR_OK && cal && pred_len > 0)
        info->holidays_known = year_of_day(day_of(ts[n - 1])) >= cal->year_first &&
                               year_of_day(day_of(out[pred_len - 1])) <= cal->year_last;
    free(h.slots);
    return st;
}

kr_status kr_calendar_future(const int64_t *ts, int64_t n, int pred_len, int64_t *out,
                             kr_calendar_info *info, kr_error *err) {
    return kr_calendar_future_in(NULL, ts, n, pred_len, out, info, err);
}

int64_t kr_calendar_interval(const int64_t *ts, int64_t n) {
    if (!ts || n < 2) return 0;
    int64_t *gaps = malloc((size_t)(n - 1) * sizeof *gaps);
    if (!gaps) return 0;
    for (int64_t i = 1; i < n; i++) gaps[i - 1] = ts[i] - ts[i - 1];
    const int64_t interval = mode_gap(gaps, n - 1);
    free(gaps);
    return interval;
}

const char *kr_calendar_describe(const kr_calendar_info *info, char *buf, int cap) {
    if (!info->calendar && (info->how == KR_CAL_GIVEN || info->how == KR_CAL_INFERRED)) {
        snprintf(buf, (size_t)cap, "calendar months (no exchange calendar fits the history)");
        return buf;
    }
    switch (info->how) {
    case KR_CAL_GIVEN: snprintf(buf, (size_t)cap, "%s", info->calendar->name); break;
    case KR_CAL_INFERRED:
        snprintf(buf, (size_t)cap, "%s (inferred from the history)", info->calendar->name);
        break;
    case KR_CAL_LEARNED:
        snprintf(buf, (size_t)cap, "learned from the history (no exchange calendar fits it)");
        break;
    case KR_CAL_CONTINUOUS:
        snprintf(buf, (size_t)cap, "every interval (one day of history, no calendar fits)");
        break;
    }
    return buf;
}

const char *kr_calendar_name(const kr_calendar *cal) { return cal ? cal->name : ""; }

void kr_calendar_get_desc(const kr_calendar *cal, kr_calendar_desc *out) {
    memset(out, 0, sizeof *out);
    if (!cal) return;
    out->name = cal->name;
    out->title = cal->title;
    out->source = cal->source;
    out->timezone = cal->timezone;
    out->origin = cal->origin;
    out->year_first = cal->year_first;
    out->year_last = cal->year_last;
    out->n_holidays = cal->n_holidays;
    for (int i = 0; i < cal->n_aliases && i < 8; i++)
        out->aliases[out->n_aliases++] = cal->aliases[i];
}

const char *kr_calendar_spelling(const kr_calendar *cal, const char *name) {
    if (!cal || !name) return NULL;
    if (!strcasecmp(cal->name, name)) return cal->name;
    for (int i = 0; i < cal->n_aliases; i++)
        if (!strcasecmp(cal->aliases[i], name)) return cal->aliases[i];
    return NULL;
}

kr_status kr_calendar_coverage_of(const char *market, const char *symbol, const int64_t *ts,
                                  int64_t n, const int64_t *future, int pred_len,
                                  kr_calendar_coverage *out, kr_error *err) {
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "calendar coverage: out is NULL");
    memset(out, 0, sizeof *out);
    const kr_calendar *cal = NULL;
    kr_status st = kr_calendar_resolve(market, symbol, &cal, err);
    if (st == KR_OK && !cal && ts && n >= 2) st = kr_calendar_infer(ts, n, &cal, err);
    if (st != KR_OK || !cal) return st;
    snprintf(out->name, sizeof out->name, "%s", cal->name);
    out->year_first = cal->year_first;
    out->year_last = cal->year_last;
    for (int k = 0; future && k < pred_len; k++) {
        const int y = year_of_day(day_of(future[k]));
        if (y > cal->year_last) {
            out->past_last_year = 1;
            out->first_unknown_year = y;
            snprintf(out->message, sizeof out->message,
                     "calendar %s lists holidays through %d only: the forecast's bars in %d are "
                     "stamped on every weekday (add that year's holidays with a file in "
                     "$KRONOS_CALENDAR_DIR; see kronos calendars --help)",
                     cal->name, cal->year_last, y);
            break;
        }
    }
    return KR_OK;
}

int kr_interval_infer(const int64_t *ts, int64_t n, char *out, size_t cap) {
    const int64_t gap = kr_calendar_interval(ts, n);
    if (gap <= 0 || !out || cap < 8) return -1;
    const int64_t day = SECONDS_PER_DAY;
    /* Calendar months are 28..31 days apart, quarters 89..92, years 365..366. */
    if (gap >= 28 * day && gap <= 31 * day)
        snprintf(out, cap, "1mo");
    else if (gap >= 89 * day && gap <= 92 * day)
        snprintf(out, cap, "3mo");
    else if (gap >= 365 * day && gap <= 366 * day)
        snprintf(out, cap, "12mo");
    else if (gap % (7 * day) == 0)
        snprintf(out, cap, "%lldw", (long long)(gap / (7 * day)));
    else if (gap % day == 0)
        snprintf(out, cap, "%lldd", (long long)(gap / day));
    else if (gap % 3600 == 0)
        snprintf(out, cap, "%lldh", (long long)(gap / 3600));
    else if (gap % 60 == 0)
        snprintf(out, cap, "%lldm", (long long)(gap / 60));
    else
        snprintf(out, cap, "%llds", (long long)gap);
    return 0;
}

int kr_symbol_suggest_exchange(const char *symbol, char *out, size_t cap) {
    if (!symbol || strlen(symbol) != 6 || !out || cap < 10) return 0;
    for (int i = 0; i < 6; i++)
        if (symbol[i] < '0' || symbol[i] > '9') return 0;
    /* Mainland codes: Shanghai 6xxxxx (and 9xxxxx B shares), Shenzhen 0xxxxx, 3xxxxx (and 2xxxxx
     * B shares), Beijing 8xxxxx, 4xxxxx (and 92xxxx). */
    const char *suffix = NULL;
    switch (symbol[0]) {
    case '6': suffix = ".SH"; break;
    case '0':
    case '2':
    case '3': suffix = ".SZ"; break;
    case '4':
    case '8': suffix = ".BJ"; break;
    case '9': suffix = symbol[1] == '2' ? ".BJ" : ".SH"; break;
    default: return 0;
    }
    snprintf(out, cap, "%s%s", symbol, suffix);
    return 1;
}

int64_t kr_calendar_sessions_between(const kr_calendar *cal, int64_t from, int64_t to) {
    const int64_t first = day_of(from) + 1, last = day_of(to) - 1;
    int64_t n = 0;
    for (int64_t d = first; d <= last && d - first < 200 * 366; d++)
        n += cal ? trading_day(cal, d) : weekday_of_day(d) < 5;
    return n;
}

int kr_calendar_days_per_week(const kr_calendar *cal) {
    if (!cal) return 5;
    int n = 0;
    for (int k = 0; k < 7; k++) n += (cal->weekday_mask >> k) & 1;
    return n;
}
