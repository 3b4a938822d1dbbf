/*
 * kronos/util.h — the few helpers kronos' own tools use that other programs need as well:
 * timing, printing candle timestamps the way reports do, reading a bounded regular file.
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

/* Reads a whole regular file of at most max_bytes into a NUL-terminated buffer the caller
 * frees. A FIFO, a device or a directory is refused without blocking. `what` names the file's
 * role in messages ("config", "API key file"). */
KR_API kr_status kr_read_file(const char *path, size_t max_bytes, const char *what, char **out,
                              size_t *len, kr_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_UTIL_H */
