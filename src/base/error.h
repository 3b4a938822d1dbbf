/*
 * base/error — filling a caller's kr_error. Every layer reports failures through this so
 * messages share one shape: "<place>: <what went wrong>".
 */
#ifndef KR_BASE_ERROR_H
#define KR_BASE_ERROR_H

#include "kronos/status.h"

#if defined(__GNUC__)
#define KR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KR_PRINTF(a, b)
#endif

/* Sets err (if non-NULL) to status and a printf-formatted message; returns status so a
 * caller can write `return kr_error_set(err, KR_ERR_FORMAT, "%s: row %d ...", ...);`. */
kr_status kr_error_set(kr_error *err, kr_status status, const char *fmt, ...) KR_PRINTF(3, 4);

/* Prepends "<prefix>: " to an error already set, to add the outer place (file name). */
void kr_error_prefix(kr_error *err, const char *fmt, ...) KR_PRINTF(2, 3);

/* Resets err to KR_OK with an empty message. */
void kr_error_clear(kr_error *err);

#endif
