/*
 * kronos/util.h — the few helpers kronos' own tools use that other programs need as well:
 * timing, printing candle timestamps the way reports do.
 */
#ifndef KRONOS_UTIL_H
#define KRONOS_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "kronos/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Monotonic wall clock in seconds (for timing). */
KR_API double kr_now_seconds(void);

/* Formats a naive timestamp (seconds since 1970-01-01 read as wall-clock time) as
 * "YYYY-MM-DD" when the time of day is 00:00:00 and date_only is set, else
 * "YYYY-MM-DD HH:MM:SS". buf >= 32 bytes. Returns buf. */
KR_API char *kr_format_timestamp(int64_t t, int date_only, char *buf, int buflen);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_UTIL_H */
