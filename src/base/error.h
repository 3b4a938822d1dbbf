/*
 * base/error — filling a caller's kr_error. Every layer reports failures through this so
 * messages share one shape: "<place>: <what went wrong>".
 */
#ifndef KR_BASE_ERROR_H
#define KR_BASE_ERROR_H

#include "kronos/status.h"

/* kr_error_set is public (kronos/status.h). */

/* Prepends "<prefix>: " to an error already set, to add the outer place (file name). */
KR_PRIVATE void kr_error_prefix(kr_error *err, const char *fmt, ...) KR_PRINTF(2, 3);

/* Resets err to KR_OK with an empty message. */
void kr_error_clear(kr_error *err);

#endif
