/*
 * server/router — the route table (see router.h).
 */
#include "server/router.h"

#include <string.h>

static const kr_route k_routes[KR_ROUTE_COUNT] = {
    {KR_ROUTE_HEALTH, "GET", "/health", 0},
    {KR_ROUTE_READY, "GET", "/ready", 0},
    {KR_ROUTE_METRICS, "GET", "/metrics", 0},
    {KR_ROUTE_MODELS, "GET", "/v1/models", 1},
    {KR_ROUTE_FORECAST, "POST", "/v1/forecast", 1},
};

int kr_route_match(const char *method, const char *url, const kr_route **route) {
    *route = NULL;
    if (!method || !url) return 404;
    size_t n = strcspn(url, "?#");
    for (int i = 0; i < KR_ROUTE_COUNT; i++) {
        const kr_route *r = &k_routes[i];
        if (strlen(r->path) != n || strncmp(r->path, url, n) != 0) continue;
        *route = r;
        if (!strcmp(method, r->method)) return 200;
        if (!strcmp(r->method, "GET") && !strcmp(method, "HEAD")) return 200;
        return 405;
    }
    return 404;
}

const char *kr_route_label(const kr_route *route) { return route ? route->path : "other"; }
