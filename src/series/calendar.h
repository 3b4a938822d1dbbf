/*
 * series/calendar — exchange calendars and the future timestamps of a forecast.
 *
 * A calendar (data/calendars/NAME.json: compiled into the library, read again at run time from
 * the shipped and the user's directories, calendar_files.c; README there) knows a
 * market's trading weekdays, its sessions (lunch breaks), holidays and early closes for the
 * years it covers, and whether its intraday bars are stamped with their opening or closing
 * time. Future timestamps:
 *   intraday bars   step by the bar interval inside a session, on the history's grid there
 *                   (09:30, 10:30, ... or, aligned to the clock, 09:30, 10:00, 11:00, ...);
 *                   past the session's close the next bar is the first of the next session (a
 *                   partial last bar is stamped at the close, as vendors do); holidays and
 *                   weekends are skipped;
 *   daily bars      the next trading day, at the last bar's time of day;
 *   weekly bars     seven days on;
 *   monthly, quarterly and yearly bars
 *                   one, three or twelve calendar months on, keeping the history's anchor (the
 *                   1st, the month's last day, its last trading day, or the same day number).
 * The calendar is the one named (kr_calendar_find), else the symbol's (kr_calendar_for_symbol),
 * else inferred from the history (kr_calendar_infer: of the calendars whose trading days and
 * sessions hold every bar, the one whose holidays the history skipped, then the most specific); when none fits, the weekdays and times of day the history
 * printed are used (the "learned" calendar), and a history of one day steps around the clock.
 */
#ifndef KR_MARKET_CALENDAR_H
#define KR_MARKET_CALENDAR_H

#include <stdint.h>

#include "kronos.h"
#include "kronos/series.h" /* kr_calendar_find, kr_calendar_future[_in], kr_calendar_name */

#define KR_CAL_MAX_SESSIONS 4
#define KR_CAL_MAX_NAMES 8
#define KR_CAL_MAX_SUFFIXES 12

/* One market's calendar, parsed from its JSON file (static lifetime, read-only). */
typedef struct kr_calendar {
    char name[24];
    char aliases[KR_CAL_MAX_NAMES][24];
    int n_aliases;
    char title[160];
    char source[1024];
    char timezone[48];
    char file[64]; /* the file's name (nyse.json) */
    char origin[512]; /* "built-in", or the file(s) it was read from ("... + user/sse-2027.json") */
    int year_first, year_last; /* years whose holidays are listed */
    int weekday_mask; /* bit d: weekday d trades (Monday = 0) */
    int n_sessions;
    int session_open[KR_CAL_MAX_SESSIONS], session_close[KR_CAL_MAX_SESSIONS]; /* s of day */
    int label_end; /* intraday bars stamped with their close (1) or their open (0) */
    /* Length (s) of a closing auction after the day's last close (HKEX: 16:00-16:10), 0 none:
     * a history's bars there belong to the day, but no forecast bar is stamped there. */
    int closing_auction;
    char suffixes[KR_CAL_MAX_SUFFIXES][16];
    int n_suffixes;
    int64_t *holidays; /* [n_holidays] day numbers (days since 1970-01-01), ascending */
    int n_holidays;
    int64_t *early_days; /* [n_early] ascending, with early_close[i] (s of day) */
    int *early_close;
    int n_early;
} kr_calendar;

/* kr_calendar_how, kr_calendar_info: kronos/series.h. */

/* kr_calendar_list, kr_calendar_load: kronos/series.h (calendar_files.c). */

/* The calendar whose symbol suffix the symbol carries ("600977.SH" -> SSE, "0700.HK" -> HKEX,
 * "BTC-USD", "BTCUSDT" -> CRYPTO), else NULL. */
const kr_calendar *kr_calendar_for_symbol(const char *symbol);

/* market (a name) when non-empty, else the symbol's suffix, else NULL with KR_OK (the history
 * decides). An unknown market name is an error. */
KR_PRIVATE kr_status kr_calendar_resolve(const char *market, const char *symbol,
                                         const kr_calendar **out, kr_error *err);

/* Of the calendars holding every bar of ts[n] (a bar on a session's bound counts for either
 * label convention; up to 1 in 500 exceptions), the one whose holidays explain the most days
 * the history skipped (bars shorter than a week), then the most specific (fewest trading
 * hours, then most holidays); NULL when none holds them. */
kr_status kr_calendar_infer(const int64_t *ts, int64_t n, const kr_calendar **out, kr_error *err);

/* Trading days of cal (weekdays Monday to Friday when cal is NULL; past its years, its
 * weekdays) strictly between the days of from and to (Unix seconds, naive); 0 when to is not
 * after from's next day. Counts at most 200 years. */
KR_PRIVATE int64_t kr_calendar_sessions_between(const kr_calendar *cal, int64_t from, int64_t to);
/* Trading weekdays a week of cal (5 when NULL). */
KR_PRIVATE int kr_calendar_days_per_week(const kr_calendar *cal);

/* "SSE (given)", "NYSE (inferred from the history)", "learned from the history", ... into buf
 * (>= 96 bytes). */
KR_PRIVATE const char *kr_calendar_describe(const kr_calendar_info *info, char *buf, int cap);

#endif
