/*
 * common/limits — the request limits of the front ends, in one place: what a forecast or an
 * analysis request may ask for (paths, pred_len, rows, context, horizon, ...), their defaults
 * and the hard caps a server configuration may raise them to. The HTTP server reads its
 * per-request bounds from here (server/config.c sets them from kronos-serve.json), the CLI its
 * flags' ranges; the engine itself checks what the model allows (pred_len <= max_context,
 * kr_forecast_params), so a limit here is a policy on top of that, never a second copy of it.
 */
#ifndef KR_COMMON_LIMITS_H
#define KR_COMMON_LIMITS_H

#include <stdint.h>

#include "common/json_body.h"
#include "kronos.h"

/* Defaults of the server's per-request limits (config keys of the same names) and the hard
 * caps a configuration may raise them to; the CLI, a local user, may ask up to the caps. */
enum {
    KR_LIMIT_PATHS = 256, /* max_paths */
    KR_LIMIT_PRED_LEN = 2048, /* max_pred_len: future candles of one forecast */
    KR_LIMIT_PRED_LEN_CAP = 65536, /* the most any configuration (or --pred-len) allows */
    KR_LIMIT_CONTEXT = 2048, /* the largest max_context a request may set */
    KR_LIMIT_ROWS = 1000000, /* candles in one request */
    KR_LIMIT_HORIZON = 256, /* max_horizon: bars an analysis forecasts */
    KR_LIMIT_ANALYZE_PATHS = 1024, /* the analyst's adaptive cap */
    KR_LIMIT_LOOKBACK = 2048,
    KR_LIMIT_CALIBRATE = 10, /* walk-forward windows per symbol */
    KR_LIMIT_SYMBOLS = 64, /* symbols per batch analysis */
    KR_LIMIT_ANALYZE_ROWS = 100000 /* stored candles an analysis reads per symbol (the most
                                      recent) */
};

/* Server-side bounds a request must respect (named size limits -> 400). */
typedef struct kr_api_limits {
    int max_paths; /* default KR_LIMIT_PATHS */
    int max_pred_len; /* default 2048 */
    int max_context; /* the largest max_context a request may set (default 2048) */
    int64_t max_rows; /* candles per request (default 1,000,000) */
    /* the config keys these limits come from, named in errors ("max_paths"); NULL: none */
    const char *max_paths_key, *max_pred_len_key, *max_rows_key, *max_context_key;
    /* /v1/analyze and /v1/analyze/batch (config keys of the same names; each 400 beyond) */
    int max_horizon; /* default 256 */
    int max_analyze_paths; /* default 1024 (the analyst's adaptive cap) */
    int max_lookback; /* default 2048 */
    int max_calibrate; /* walk-forward windows per symbol, default 10 */
    int max_symbols; /* per batch, default 64 (KR_API_MAX_SYMBOLS at most) */
    /* The server's defaults for the fields a request may leave out (config keys norm,
     * norm_refresh_bars): exact normalisation unless the server says anchored. */
    kr_norm_mode default_norm;
    int default_norm_refresh;
} kr_api_limits;

kr_api_limits kr_api_default_limits(void);

/* The JSON value limit of a body under these limits (common/json_body): enough for max_rows
 * candle rows and every other field, far below what a max_body_bytes body could hold. */
kr_json_limits kr_api_json_limits(const kr_api_limits *lim);

#endif
