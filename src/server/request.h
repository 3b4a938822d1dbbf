/*
 * server/request — the body of POST /v1/forecast: JSON in, a validated request out.
 *
 * Validation follows the CSV reader's rules (series/candles.c) for the same data: finite
 * numbers within float32 range, prices > 0, volume/amount >= 0, high >= low, timestamps
 * (strings in the CSV formats or epoch numbers, via kr_parse_timestamp) strictly increasing,
 * at least 2 rows; amount derived as volume × mean(OHLC) when absent and both zero without
 * volume, as the reference does. Every error names the JSON field and row, e.g.
 * field "candles[17].high", message "candles[17].high: 9.1 is below low 9.3".
 *
 * Candles may come as
 *   - rows of arrays  [[ts, o, h, l, c, v?, a?], ...]   (order overridable with "columns"),
 *   - rows of objects [{"timestamps": ..., "open": ..., ...}, ...],
 *   - columns         {"timestamps": [...], "open": [...], ...},
 *   - CSV text        "timestamps,open,...\n..."  (parsed by series/candles as is).
 * Pure: no I/O, no globals, so the parser is unit-tested and fuzzed directly.
 */
#ifndef KR_SERVER_REQUEST_H
#define KR_SERVER_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "engine/path_set.h"
#include "kronos.h"
#include "series/candles.h"
#include "common/candles_json.h"
#include "common/fields.h"
#include "common/json_body.h"
#include "common/limits.h"

#define KR_API_MAX_QUANTILES 16

/* A request's "model" field: a name of letters, digits, '-', '_' and '.' (400 otherwise) into
 * out[cap]. */
kr_status kr_api_read_model_name(const cJSON *v, char *out, size_t cap, kr_api_error *err);

typedef struct kr_api_request {
    kr_candles *candles; /* owned; validated table */
    int64_t *future_timestamps; /* [params.pred_len] or NULL (inferred); owned */
    kr_forecast_params params; /* keep_paths is always 1: quantiles need the paths */
    double quantiles[KR_API_MAX_QUANTILES];
    int n_quantiles; /* default 3: 0.1, 0.5, 0.9 */
    int return_paths; /* include every path's candles and s1/s2 ids */
    int stream; /* answer as text/event-stream */
    double timeout_s; /* 0: the server's request_timeout_s */
    kr_ohlc_mode ohlc; /* "ohlc": raw (default) or consistent candles in the answer */
    char model[64]; /* "model": the served model's name ("" = the default one) */
    char market[24]; /* "market": the calendar that made future_timestamps, or "" */
    /* The forecast stamps' calendar and whether its holidays cover them (name "" when the
     * client gave future_timestamps): the answer's "calendar", "warnings" and its
     * X-Kronos-Warning header. */
    kr_calendar_coverage coverage;
} kr_api_request;

/* Parses and validates a request body (len bytes, need not be NUL-terminated). limits NULL =
 * defaults. On success *out is filled and owns its arrays (kr_api_request_free). On failure
 * *out is zeroed, err->status is 400 and err->field / err->message name the problem; the
 * return value is KR_ERR_FORMAT (bad JSON) or KR_ERR_INVALID_ARG (bad field). */
kr_status kr_api_forecast_parse(const char *json, size_t len, const kr_api_limits *limits,
                                kr_api_request *out, kr_api_error *err);

/* Frees what a parsed request owns; safe on a zeroed or already-freed request. */
void kr_api_request_free(kr_api_request *r);

/* The series view the scheduler takes (borrowed from r). */
kr_series kr_api_request_series(const kr_api_request *r);

#endif
