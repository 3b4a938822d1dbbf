/*
 * common/candles_json — candles from JSON and from text whose format is not known beforehand:
 * the layouts POST /v1/forecast, /v1/analyze and /v1/candles take, and `kronos forecast --input
 * FILE.json` reads (the CLI and the server share this reader, so a file and a body with the same
 * bytes give the same candles or the same error).
 *
 * Candles may come as
 *   - rows of arrays  [[ts, o, h, l, c, v?, a?], ...]   (order overridable with "columns"),
 *   - rows of objects [{"timestamps": ..., "open": ..., ...}, ...],
 *   - columns         {"timestamps": [...], "open": [...], ...},
 *   - a pandas frame as DataFrame.to_json writes it (orient 'split', 'columns', 'index'),
 *   - CSV text        "timestamps,open,...\n..."  (parsed by series/candles as is).
 * Every row follows the CSV reader's rules (kr_candle_row_check, series/candles.h): finite
 * numbers within float32 range, prices > 0, volume/amount >= 0, high >= low, timestamps
 * (strings in the CSV formats or epoch numbers, via kr_parse_timestamp) strictly increasing,
 * at least 2 rows; amount derived as volume x mean(OHLC) when absent and both zero without
 * volume, as the reference does. Every error names the JSON field and row, e.g. field
 * "candles[17].high", message "candles[17].high: 9.1 is below low 9.3".
 * Pure: no I/O, no globals, so the parser is unit-tested and fuzzed directly.
 */
#ifndef KR_COMMON_CANDLES_JSON_H
#define KR_COMMON_CANDLES_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/fields.h"
#include "common/limits.h"
#include "kronos.h"
#include "kronos/series.h"

/* A "candles" value (and the optional "columns") of a parsed body, in any of the four
 * layouts, validated by the rules above; v NULL: "candles: required". The route-independent
 * core of kr_api_forecast_parse, used by the analyst routes for their candles. limits NULL =
 * defaults. Caller owns *out (kr_candles_free). */
kr_status kr_api_candles_from_json(const cJSON *v, const cJSON *columns, const kr_api_limits *lim,
                                   kr_candles **out, kr_api_error *err);

/* Parses a POST /v1/candles body: CSV text when csv is set (the CSV reader's rules; label
 * "body"), else JSON: an array of rows or {"candles": ..., "columns": [...]} with the layouts
 * and rules of /v1/forecast's "candles" (rows named candles[i]). lim NULL = defaults. Caller
 * owns *out. */
kr_status kr_api_candles_parse(const char *body, size_t len, int csv, const kr_api_limits *lim,
                               kr_candles **out, kr_api_error *err);

/* A timestamp cell: a string in the CSV formats or an epoch number (the CSV parser reads both,
 * so the two inputs can never disagree about what a stamp means). field names it in errors. */
kr_status kr_api_timestamp(const cJSON *v, const char *field, int64_t *ts, int *has_time,
                           kr_api_error *err);

/* Candles from a whole text of either kind: JSON (in any layout above, sniffed from its first
 * character past a BOM and blanks) or CSV. label names the input in errors ("stdin", a file
 * name). The JSON is held in memory as a parse tree (about 10x its size), so it keeps the
 * server's row limit; CSV is read straight into columns and has none. Caller owns *out. */
KR_PRIVATE kr_status kr_candles_parse_text(const char *text, size_t len, const char *label,
                                           kr_candles **out, kr_error *err);

#endif
