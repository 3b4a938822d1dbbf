/*
 * market/calendar — future timestamps inferred from the history (see calendar.h).
 *
 * The predictor embeds each future candle's minute/hour/weekday/day/month, so a forecast
 * needs the stamps the market will actually print. Holidays cannot be known from the data, but
 * the weekly and daily shape can: the weekdays that ever traded and, for intraday bars, the
 * times of day (session slots) that ever printed a bar. Stepping by the usual bar interval and
 * keeping only candidates that fit that shape reproduces weekend gaps, overnight gaps and
 * lunch breaks (A-shares 11:30 -> 13:05) without a per-exchange table.
 */
#include "market/calendar.h"

#include <stdlib.h>

#include "base/error.h"
#include "base/timeutil.h"

enum { SECONDS_PER_DAY = 86400 };
/* How far past the previous stamp a candidate may lie before we give up: longer than any
 * weekend plus holiday run, short enough that a history that fits no calendar fails fast. */
#define KR_CAL_SEARCH_SECONDS (14 * (int64_t)SECONDS_PER_DAY)
/* |timestamp| bound (about 317,000 years): keeps every gap and step far from int64 overflow. */
#define KR_CAL_MAX_ABS ((int64_t)10000000000000)

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

static int weekday_of(int64_t t) {
    const int64_t d = floor_div(t, SECONDS_PER_DAY);
    int64_t w = (d + 3) % 7; /* 1970-01-01 was a Thursday (3, Monday = 0) */
    return (int)(w < 0 ? w + 7 : w);
}

static int64_t second_of_day(int64_t t) {
    return t - floor_div(t, SECONDS_PER_DAY) * SECONDS_PER_DAY;
}

static int cmp_i64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts v in place and returns the number of distinct values, compacted to the front. */
static int64_t sort_unique(int64_t *v, int64_t n) {
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (m == 0 || v[i] != v[m - 1]) v[m++] = v[i];
    return m;
}

static int contains(const int64_t *sorted, int64_t n, int64_t key) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sorted[lo] == key;
}

/* Most common gap; ties go to the smallest, so a history with as many 1-day as 3-day gaps
 * still steps daily. gaps is scratch (sorted in place). */
static int64_t mode_gap(int64_t *gaps, int64_t n) {
    qsort(gaps, (size_t)n, sizeof *gaps, cmp_i64);
    int64_t best = gaps[0], best_count = 0;
    for (int64_t i = 0; i < n;) {
        int64_t j = i;
        while (j < n && gaps[j] == gaps[i]) j++;
        if (j - i > best_count) {
            best = gaps[i];
            best_count = j - i;
        }
        i = j;
    }
    return best;
}

kr_status kr_calendar_future(const int64_t *ts, int64_t n, int pred_len, int64_t *out,
                             kr_calendar_info *info, kr_error *err) {
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

    int64_t *scratch = malloc((size_t)n * sizeof *scratch);
    if (!scratch) return kr_error_set(err, KR_ERR_NOMEM, "calendar: out of memory");

    for (int64_t i = 1; i < n; i++) scratch[i - 1] = ts[i] - ts[i - 1];
    const int64_t interval = mode_gap(scratch, n - 1);
    const int intraday = interval < SECONDS_PER_DAY;

    int mask = 0;
    for (int64_t i = 0; i < n; i++) mask |= 1 << weekday_of(ts[i]);

    /* Session slots (seconds since midnight) only matter within the day; for daily and longer
     * bars the time of day simply carries over from the last stamp. */
    int64_t n_slots = 0;
    if (intraday) {
        for (int64_t i = 0; i < n; i++) scratch[i] = second_of_day(ts[i]);
        n_slots = sort_unique(scratch, n);
    }

    if (info) {
        info->interval_seconds = interval;
        info->intraday = intraday;
        info->weekday_mask = mask;
        info->n_slots = (int)n_slots;
    }

    /* For daily bars at least a week of candidates: with an interval of whole days the
     * weekdays cycle within 7 steps, so a seen weekday is always reached. */
    int64_t max_steps = KR_CAL_SEARCH_SECONDS / interval;
    if (!intraday && max_steps < 7) max_steps = 7;
    if (max_steps < 1) max_steps = 1;

    kr_status st = KR_OK;
    int64_t t = ts[n - 1];
    for (int k = 0; k < pred_len; k++) {
        const int64_t from = t;
        int found = 0;
        for (int64_t step = 0; step < max_steps; step++) {
            if (t > KR_CAL_MAX_ABS) break; /* far past any real date; also bounds overflow */
            t += interval;
            if (!(mask & (1 << weekday_of(t)))) continue;
            if (intraday && !contains(scratch, n_slots, second_of_day(t))) continue;
            found = 1;
            break;
        }
        if (!found) {
            char buf[32];
            st = kr_error_set(err, KR_ERR_FORMAT,
                              "calendar: no time after %s within %lld steps of %lld s fits the "
                              "weekdays and session times seen in the history; pass future "
                              "timestamps explicitly",
                              kr_format_timestamp(from, 0, buf, sizeof buf), (long long)max_steps,
                              (long long)interval);
            break;
        }
        out[k] = t;
    }
    free(scratch);
    return st;
}
