/*
 * server/analyst_request — the bodies of the analyst routes: POST /v1/analyze,
 * /v1/analyze/batch and POST /v1/candles/{symbol}. Read with the same field readers
 * (server/fields) and candle parser (server/request) as /v1/forecast, so a field or a candle
 * table is validated by one set of rules, with one set of messages, whichever route it
 * arrives on. Pure: no I/O, so the parsers are unit-tested and fuzzed directly.
 */
#ifndef KR_SERVER_ANALYST_REQUEST_H
#define KR_SERVER_ANALYST_REQUEST_H

#include <stddef.h>

#include "analyst/analyze.h"
#include "analyst/render.h"
#include "kronos.h"
#include "store/store.h"
#include "server/request.h"

#define KR_API_MAX_SYMBOLS 64 /* symbols per /v1/analyze/batch -> 400 beyond */
#define KR_API_CANDLES_LIMIT 1000 /* GET /v1/candles rows when no ?limit= is given */
#define KR_API_CANDLES_MAX 100000 /* largest ?limit=, and rows read per analysed symbol */

/* A validated POST /v1/analyze or /v1/analyze/batch body. */
typedef struct kr_api_analyze_request {
    int batch; /* parsed as /v1/analyze/batch */
    int n; /* symbols (1 for /v1/analyze) */
    char symbols[KR_API_MAX_SYMBOLS][KR_STORE_NAME_MAX + 1];
    char interval[KR_STORE_NAME_MAX + 1]; /* "" = each symbol's only / latest interval */
    kr_candles *candles; /* owned; "candles" given (symbols[0] labels it) */
    kr_analyze_params params; /* progress and model metadata left NULL */
    kr_report_format format; /* default JSON */
    int stream; /* answer as text/event-stream */
    char market[24]; /* "market": every symbol's calendar; "" = stored / suffix / inferred */
    int all; /* batch "all": true: every stored series (symbols empty) */
    int stock_code; /* the symbol came as "stock_code": errors name that field */
    int narrative; /* "narrative": true: the language-model prose too (server llm_url) */
    char model[64]; /* "model": the served model's name ("" = the default one) */
} kr_api_analyze_request;

/* Parses and validates an analyze body (len bytes, need not be NUL-terminated); batch selects
 * the /v1/analyze/batch fields ("symbols" instead of "symbol"/"candles"). "stock_code" is
 * another name of "symbol" (POST /analyze {"stock_code": ...}); giving both is a 400. Unknown and
 * duplicate fields are 400s; null means "the default". On success *out owns its candles
 * (kr_api_analyze_request_free). On failure *out is zeroed and err names the field. */
kr_status kr_api_analyze_parse(const char *json, size_t len, int batch, const kr_api_limits *lim,
                               kr_api_analyze_request *out, kr_api_error *err);
void kr_api_analyze_request_free(kr_api_analyze_request *r);

/* A "symbols" array: 1..max_symbols (at most KR_API_MAX_SYMBOLS) store names, none repeated
 * in any case, into out[*n]; errors name "symbols" or "symbols[i]". */
kr_status kr_api_symbol_list(const cJSON *v, int max_symbols, char (*out)[KR_STORE_NAME_MAX + 1],
                             int *n, kr_api_error *err);

/* A store name from client text (a path segment, a query parameter): kr_store_check_symbol or
 * kr_store_check_interval's rules, copied to out[cap]; the error names field. */
kr_status kr_api_store_name(const char *s, const char *field, int interval, char *out, size_t cap,
                            kr_api_error *err);
/* The same from a JSON value of a request body, which must be a string. */
kr_status kr_api_json_store_name(const cJSON *v, const char *field, int interval, char *out,
                                 size_t cap, kr_api_error *err);

/* The query parameters of GET /v1/candles/{symbol}: interval (NULL: any; out "" then) and
 * limit (NULL: KR_API_CANDLES_LIMIT; else decimal digits in 1..KR_API_CANDLES_MAX). */
kr_status kr_api_candles_query(const char *interval, const char *limit, char *interval_out,
                               size_t cap, int *limit_out, kr_api_error *err);

#endif
