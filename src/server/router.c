/*
 * server/router — the route table (see router.h).
 */
#include "server/router.h"

#include <string.h>

static const kr_route k_routes[KR_ROUTE_COUNT] = {
    { KR_ROUTE_HEALTH, "GET", "/health", 0 },
    { KR_ROUTE_READY, "GET", "/ready", 0 },
    { KR_ROUTE_METRICS, "GET", "/metrics", 0 },
    { KR_ROUTE_MODELS, "GET", "/v1/models", 1 },
    { KR_ROUTE_FORECAST, "POST", "/v1/forecast", 1 },
    { KR_ROUTE_SYMBOLS, "GET", "/v1/symbols", 1 },
    { KR_ROUTE_CANDLES_GET, "GET", "/v1/candles/", 1 },
    { KR_ROUTE_CANDLES_POST, "POST", "/v1/candles/", 1 },
    { KR_ROUTE_ANALYZE, "POST", "/v1/analyze", 1 },
    { KR_ROUTE_ANALYZE_BATCH, "POST", "/v1/analyze/batch", 1 },
    { KR_ROUTE_PAGE, "GET", "/", 0 },
    { KR_ROUTE_ASSETS, "GET", "/assets/", 0 },
    { KR_ROUTE_ANALYZE_ALIAS, "POST", "/analyze", 1 },
};

int kr_route_match(const char *method, const char *url, const kr_route **route) {
    *route = NULL;
    if (!method || !url) return 404;
    size_t n = strcspn(url, "?#");
    const kr_route *same_path = NULL; /* a path can have one route per method */
    for (int i = 0; i < KR_ROUTE_COUNT; i++) {
        const kr_route *r = &k_routes[i];
        size_t pn = strlen(r->path);
        int prefix = pn > 1 && r->path[pn - 1] == '/';
        if (prefix ? n <= pn || strncmp(r->path, url, pn) != 0
                   : pn != n || strncmp(r->path, url, n) != 0)
            continue;
        if (!strcmp(method, r->method) || (!strcmp(r->method, "GET") && !strcmp(method, "HEAD"))) {
            *route = r;
            return 200;
        }
        if (!same_path) same_path = r;
    }
    *route = same_path;
    return same_path ? 405 : 404;
}

const char *kr_route_label(const kr_route *route) { return route ? route->path : "other"; }
