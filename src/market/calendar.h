/*
 * market/calendar — future timestamps for a forecast, inferred from the history when the
 * user gives none.
 *
 * The bar interval is the most common positive gap. Daily and longer bars step by the
 * interval over the weekdays seen in the history (so equities skip weekends, crypto does
 * not). Intraday bars step by the interval and keep only the times of day (the session slots)
 * and weekdays seen in the history, so an A-share 5-minute series skips lunch and nights.
 */
#ifndef KR_MARKET_CALENDAR_H
#define KR_MARKET_CALENDAR_H

#include <stdint.h>

#include "kronos.h"

typedef struct kr_calendar_info {
    int64_t interval_seconds; /* inferred bar interval */
    int intraday; /* interval < 1 day */
    int weekday_mask; /* bit d set: weekday d (Monday = 0) seen */
    int n_slots; /* distinct intraday times of day seen (0 for daily) */
} kr_calendar_info;

/* Writes pred_len future timestamps after ts[n-1] into out. Needs n >= 2. info may be NULL. */
kr_status kr_calendar_future(const int64_t *ts, int64_t n, int pred_len, int64_t *out,
                             kr_calendar_info *info, kr_error *err);

#endif
