/*
 * base/json_out — the few ways every JSON report of the tree (analyst, backtest, eval-quant,
 * bench, the server's answers) adds a value to a cJSON object, written once: a figure that
 * cannot be computed (NaN, ±inf) is null rather than absent or an invalid number, and an
 * optional string is null when missing.
 */
#ifndef KR_BASE_JSON_OUT_H
#define KR_BASE_JSON_OUT_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/error.h"

/* o[key] = v, or null when v is not finite. */
KR_PRIVATE void kr_json_add_num(cJSON *o, const char *key, double v);
/* o[key] = s, or null when s is NULL. */
KR_PRIVATE void kr_json_add_str_or_null(cJSON *o, const char *key, const char *s);
/* o[key] = the date or date-time of the Unix time t, as kr_format_timestamp writes it. */
KR_PRIVATE void kr_json_add_time(cJSON *o, const char *key, int64_t t, int date_only);

#endif
