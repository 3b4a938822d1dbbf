/*
 * common/json_body — a request body's bytes to a JSON document, the same way on every JSON
 * route, with what the generic parser (cJSON) does not check:
 *   - size before building: a tree costs ~90 bytes per JSON value, so an 8 MiB body of
 *     "[0,0,0,...]" would cost ~320 MB. A first pass over the bytes (kr_json_body_scan, no
 *     allocation) counts values, strings and nesting, refuses more values than the route can
 *     use (413) and estimates the tree's memory, which the server admits against its memory
 *     budget before the tree is built;
 *   - a NUL inside a string (a \u0000 escape, or a raw control byte) is refused, naming the
 *     field ("symbol"): C strings would silently end there;
 *   - anything but whitespace after the document ("{...}xyz") is refused;
 *   - an empty body and a syntax error (named by line, column and byte).
 * Every error is on the field "body" unless it is about one field. Pure: no I/O, no globals.
 */
#ifndef KR_COMMON_JSON_BODY_H
#define KR_COMMON_JSON_BODY_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "common/fields.h"

/* Deeper nesting than any request needs (candles are 3 levels). */
#define KR_JSON_MAX_DEPTH 64

typedef struct kr_json_limits {
    size_t max_values; /* scalars and containers; 0: no limit */
    size_t max_lines; /* \n escapes in strings (rows of CSV candle text); 0: no limit */
    const char *values_key; /* the config key the limit follows from, for the message */
} kr_json_limits;

/* What a body holds, counted without building it. */
typedef struct kr_json_scan {
    size_t values; /* scalars and containers */
    size_t strings; /* string values and object keys (each its own allocation in a tree) */
    size_t string_bytes; /* their bytes, as written */
    size_t string_lines; /* \n escapes in them: the rows of CSV candle text */
    int max_depth;
} kr_json_scan;

/* One pass over len bytes: counts (into *out), and refuses more than lim->max_values values
 * (status 413), nesting deeper than KR_JSON_MAX_DEPTH, a NUL or a raw control byte inside a
 * string (400, the field named by its JSON path: "candles[3][0]"). Syntax is not checked
 * here (the parser names its errors better); counting stops at the first byte that cannot
 * continue a document. lim NULL: no value limit. Returns KR_OK or KR_ERR_INVALID_ARG. */
kr_status kr_json_body_scan(const char *json, size_t len, const kr_json_limits *lim,
                            kr_json_scan *out, kr_api_error *err);

/* Memory a candle row parsed from CSV text may take while the reader grows its arrays
 * (a timestamp and six doubles, twice over for the doubling). */
enum { KR_CSV_ROW_BYTES = 2 * (8 + 6 * 8) };
/* Lines CSV candle text may have beyond its max_rows rows: the header and blank lines. */
enum { KR_CSV_SLACK_LINES = 16 };

/* Estimated bytes of the cJSON tree for a scanned body (nodes, strings, malloc overhead), and
 * of the candles parsed from the CSV text its strings hold (a row per \n). */
size_t kr_json_scan_tree_bytes(const kr_json_scan *s);

/* Lines of CSV text (its newlines, plus a last line without one): a text/csv body is admitted
 * for KR_CSV_ROW_BYTES each, and refused past max_rows of them. */
size_t kr_csv_lines(const char *text, size_t len);

/* Scans, then parses len bytes (need not be NUL-terminated). On success the caller owns
 * *root (cJSON_Delete). On failure *root is NULL, err names the field ("body" unless a string
 * field is at fault) with its status (400, or 413 for too many values) and the return value
 * is KR_ERR_FORMAT. lim NULL: no value limit. */
kr_status kr_json_body_parse(const char *json, size_t len, const kr_json_limits *lim, cJSON **root,
                             kr_api_error *err);

/* How a request parser that failed after kr_json_body_parse ends: root freed, the error a
 * 400 unless it already has a status, and a failure returned whatever st was (st stays KR_OK
 * where a check set only the message). The caller clears what it had parsed. */
kr_status kr_json_body_failed(cJSON *root, kr_api_error *err, kr_status st);

#endif
