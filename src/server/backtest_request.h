/*
 * server/backtest_request — the body of POST /v1/backtest, read with the same field readers
 * (server/fields) and candle parser (server/request) as the other routes: stored symbols (or
 * "all"), or one series of "candles" in the body, and the backtest's parameters
 * (kronos/backtest.h; docs/api.md lists the fields). Pure: no I/O.
 */
#ifndef KR_SERVER_BACKTEST_REQUEST_H
#define KR_SERVER_BACKTEST_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"
#include "kronos/backtest.h"
#include "store/store.h"
#include "server/analyst_request.h"
#include "server/request.h"

/* Path-steps (forecasts x paths x horizon) one backtest over HTTP may ask for, from the rows
 * the histories hold: 400 beyond (100 times a 1,000-origin, 32-path, 20-step run). */
#define KR_API_BACKTEST_MAX_WORK 64000000LL
/* Memory one backtest's scores may take over HTTP (origins x (horizon + 1) x ~1,250 bytes,
 * kronos/backtest.h): 400 beyond. */
#define KR_API_BACKTEST_MAX_SCORE_BYTES (256LL << 20)
#define KR_API_BACKTEST_MAX_ORIGIN_DATES 10000
#define KR_API_BACKTEST_MAX_BOOTSTRAP 10000

typedef struct kr_api_backtest_request {
    int n; /* stored symbols (0 with candles or all) */
    char symbols[KR_API_MAX_SYMBOLS][KR_STORE_NAME_MAX + 1];
    int all; /* every stored series */
    char interval[KR_STORE_NAME_MAX + 1]; /* "" = each symbol's latest */
    char market[24]; /* every symbol's calendar; "" = stored / suffix / inferred */
    kr_candles *candles; /* owned: one series in the body, named symbols[0] */
    kr_backtest_params params; /* origin_ts points into origin_ts below */
    int64_t *origin_ts; /* owned */
    kr_backtest_format format; /* of the result by default (GET .../result?format= too) */
} kr_api_backtest_request;

/* Parses and validates a body (len bytes). Unknown and duplicate fields are 400s; null means
 * the default; every error names its field. On success *out owns its arrays
 * (kr_api_backtest_request_free); on failure *out is zeroed. */
kr_status kr_api_backtest_parse(const char *json, size_t len, const kr_api_limits *lim,
                                kr_api_backtest_request *out, kr_api_error *err);
void kr_api_backtest_request_free(kr_api_backtest_request *r);

/* The work a run on histories of rows[n] asks for (kr_api_backtest_request's params): the
 * origins each history can give, times paths and horizon; for KR_API_BACKTEST_MAX_WORK. */
int64_t kr_api_backtest_work(const kr_backtest_params *p, const int64_t *rows, int n);
/* 0 when a run on histories of rows[n] fits both caps (KR_API_BACKTEST_MAX_WORK,
 * KR_API_BACKTEST_MAX_SCORE_BYTES), else 400 with err saying which (field: may be NULL). */
int kr_api_backtest_fits(const kr_backtest_params *p, const int64_t *rows, int n, const char *field,
                         kr_api_error *err);

#endif
