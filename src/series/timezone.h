/*
 * series/timezone — a market's wall clock: UTC offset (with daylight saving) of an IANA zone
 * at a given instant, so time-of-day settings (the server's profiles) follow the exchange, not
 * the machine.
 *
 * The zone's current rule is the POSIX TZ string at the end of its tzdata file
 * (/usr/share/zoneinfo/NAME, TZif version 2+), e.g. "EST5EDT,M3.2.0,M11.1.0"; the zones of
 * the compiled-in calendars have a built-in rule when tzdata is absent. Only today's rule is
 * used, so instants before the zone's last rule change (years ago) may be off by its change.
 * Thread-safe (no TZ environment, no localtime).
 */
#ifndef KR_MARKET_TIMEZONE_H
#define KR_MARKET_TIMEZONE_H

#include <stdint.h>

#include "kronos.h"

typedef struct kr_tz {
    char name[64];
    char rule[96]; /* the POSIX TZ string */
    int std_off, dst_off; /* seconds east of UTC */
    int has_dst;
    int start_m, start_w, start_d, start_t; /* Mm.w.d/t: DST starts (t: local seconds) */
    int end_m, end_w, end_d, end_t;
} kr_tz;

/* The zone called name ("Asia/Shanghai", "America/New_York", "UTC"). An unknown name or an
 * unreadable rule is an error naming it. */
KR_PRIVATE kr_status kr_tz_load(const char *name, kr_tz *out, kr_error *err);

/* Parses a POSIX TZ rule (std offset [dst [offset],Mm.w.d[/time],Mm.w.d[/time]]). */
kr_status kr_tz_parse_rule(const char *rule, kr_tz *out, kr_error *err);

/* Seconds east of UTC in force at the instant utc (Unix seconds). */
KR_PRIVATE int kr_tz_offset(const kr_tz *tz, int64_t utc);

#endif
