/*
 * server/router — the route table (see router.h).
 */
#include "server/router.h"

#include <stdio.h>
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
    { KR_ROUTE_CANDLES_DELETE, "DELETE", "/v1/candles/", 1 },
    { KR_ROUTE_ANALYZE, "POST", "/v1/analyze", 1 },
    { KR_ROUTE_ANALYZE_BATCH, "POST", "/v1/analyze/batch", 1 },
    { KR_ROUTE_PAGE, "GET", "/", 0 },
    { KR_ROUTE_ASSETS, "GET", "/assets/", 0 },
    { KR_ROUTE_ANALYZE_ALIAS, "POST", "/analyze", 1 },
    { KR_ROUTE_MODEL_PUT, "POST", "/v1/models/", 1 },
    { KR_ROUTE_MODEL_DELETE, "DELETE", "/v1/models/", 1 },
    { KR_ROUTE_BACKTEST, "POST", "/v1/backtest", 1 },
    { KR_ROUTE_BACKTEST_GET, "GET", "/v1/backtest/", 1 },
    { KR_ROUTE_BACKTEST_DELETE, "DELETE", "/v1/backtest/", 1 },
};

/* Whether route r serves the path url[0, n) (the query string already cut off). */
static int path_matches(const kr_route *r, const char *url, size_t n) {
    size_t pn = strlen(r->path);
    int prefix = pn > 1 && r->path[pn - 1] == '/';
    return prefix ? n > pn && strncmp(r->path, url, pn) == 0
                  : pn == n && strncmp(r->path, url, n) == 0;
}

int kr_route_match(const char *method, const char *url, const kr_route **route) {
    *route = NULL;
    if (!method || !url) return 404;
    size_t n = strcspn(url, "?#");
    const kr_route *same_path = NULL; /* a path can have one route per method */
    for (int i = 0; i < KR_ROUTE_COUNT; i++) {
        const kr_route *r = &k_routes[i];
        if (!path_matches(r, url, n)) continue;
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

size_t kr_route_allow(const char *url, char *out, size_t cap) {
    if (!out || cap == 0) return 0;
    out[0] = '\0';
    if (!url) return 0;
    size_t n = strcspn(url, "?#");
    /* Every route of the path, not only the first: /v1/candles/{symbol} is GET and POST, and
     * a client told only one of them would never find the other. GET brings HEAD. Fixed order
     * (GET, HEAD, POST, DELETE) so the header does not depend on the table's order. */
    static const char *const k_order[] = { "GET", "HEAD", "POST", "DELETE" };
    int has[4] = { 0, 0, 0, 0 };
    for (int i = 0; i < KR_ROUTE_COUNT; i++) {
        const kr_route *r = &k_routes[i];
        if (!path_matches(r, url, n)) continue;
        if (!strcmp(r->method, "GET")) has[0] = has[1] = 1;
        if (!strcmp(r->method, "POST")) has[2] = 1;
        if (!strcmp(r->method, "DELETE")) has[3] = 1;
    }
    size_t len = 0;
    for (int k = 0; k < 4; k++) {
        if (!has[k]) continue;
        int w = snprintf(out + len, cap - len, "%s%s", len ? ", " : "", k_order[k]);
        if (w < 0 || (size_t)w >= cap - len) {
            out[len] = '\0'; /* too small a buffer: the methods that fit, never half of one */
            break;
        }
        len += (size_t)w;
    }
    return len;
}
