/*
 * server/router — the route table: which (method, path) pairs exist, which need the API key,
 * and the label each one carries in the HTTP metrics. Pure functions, no I/O, so 404/405
 * decisions are unit-tested without a socket.
 */
#ifndef KR_SERVER_ROUTER_H
#define KR_SERVER_ROUTER_H

#include <stddef.h>

typedef enum kr_route_id {
    KR_ROUTE_HEALTH = 0, /* GET /health: the process is alive */
    KR_ROUTE_READY, /* GET /ready: model loaded and not draining */
    KR_ROUTE_METRICS, /* GET /metrics: Prometheus text */
    KR_ROUTE_MODELS, /* GET /v1/models */
    KR_ROUTE_FORECAST, /* POST /v1/forecast */
    KR_ROUTE_SYMBOLS, /* GET /v1/symbols: stored candle series (routes_store.c) */
    KR_ROUTE_CANDLES_GET, /* GET /v1/candles/{symbol} */
    KR_ROUTE_CANDLES_POST, /* POST /v1/candles/{symbol} */
    KR_ROUTE_CANDLES_DELETE, /* DELETE /v1/candles/{symbol}?interval=&from=&to= */
    KR_ROUTE_ANALYZE, /* POST /v1/analyze */
    KR_ROUTE_ANALYZE_BATCH, /* POST /v1/analyze/batch */
    KR_ROUTE_PAGE, /* GET /: the web page (static_files.c) */
    KR_ROUTE_ASSETS, /* GET /assets/...: its scripts and styles */
    KR_ROUTE_ANALYZE_ALIAS, /* POST /analyze: /v1/analyze under the brief's name (key, drain
                               and body rules of /v1) */
    KR_ROUTE_MODEL_PUT, /* POST /v1/models/{name}: load or replace a model (models.h) */
    KR_ROUTE_MODEL_DELETE, /* DELETE /v1/models/{name}: stop serving it */
    KR_ROUTE_BACKTEST, /* POST /v1/backtest: starts a job (routes_backtest.c) */
    KR_ROUTE_BACKTEST_GET, /* GET /v1/backtest/{id}[/events|/result] */
    KR_ROUTE_BACKTEST_DELETE, /* DELETE /v1/backtest/{id} */
    KR_ROUTE_COUNT
} kr_route_id;

typedef struct kr_route {
    kr_route_id id;
    const char *method; /* "GET", "POST" or "DELETE"; GET routes also answer HEAD */
    const char *path; /* exact path, no query string; ending in '/' (other than "/"): a
                            * prefix, matching itself plus 1+ characters ("/v1/candles/AAPL") */
    int v1; /* under /v1 (or an alias of a /v1 route): needs the API key, refused while
               draining */
} kr_route;

/* Matches a request. Returns 200 with *route set, 404 for an unknown path, or 405 for a
 * known path with another method (then *route is one of the path's routes; the Allow header
 * comes from kr_route_allow, which names them all). url may carry a query string, which is
 * ignored. */
int kr_route_match(const char *method, const char *url, const kr_route **route);

/* The methods any route of url's path accepts, as an Allow header lists them ("GET, HEAD,
 * POST, DELETE" for /v1/candles/{symbol}; GET routes bring HEAD), written to out[cap]; returns the
 * length (0 and "" for an unknown path). url may carry a query string. */
size_t kr_route_allow(const char *url, char *out, size_t cap);

/* The metrics label of a route ("/v1/forecast"); "other" for NULL (unknown paths share one
 * label so scanners cannot blow up the series count). */
const char *kr_route_label(const kr_route *route);

#endif
