/*
 * server/http_metrics — HTTP counters and histograms (see http_metrics.h).
 *
 * Label values come only from the route table, numeric codes and fixed reason words, never
 * from the client, so the number of series stays bounded whatever is requested.
 */
#include "server/http_metrics.h"

#include <stdio.h>
#include <stdlib.h>

#include "server/router.h"

/* The server's HTTP metrics, name and help once (engine/metrics.h). */
static const kr_metric_desc k_in_flight = { "kronos_http_requests_in_flight", KR_METRIC_GAUGE,
                                            "HTTP requests being handled", NULL, 0 };
static const kr_metric_desc k_draining = { "kronos_server_draining", KR_METRIC_GAUGE,
                                           "1 while the server drains before exiting", NULL, 0 };
static const kr_metric_desc k_memory = {
    "kronos_http_memory_in_flight_bytes", KR_METRIC_GAUGE,
    "Memory budget held by request bodies being read and parsed and by answers being sent "
    "(max_memory_in_flight caps it)",
    NULL, 0
};
static const kr_metric_desc k_duration = { "kronos_http_request_duration_seconds",
                                           KR_METRIC_HISTOGRAM,
                                           "HTTP request wall time, first byte in to last byte out",
                                           NULL, 0 };
static const kr_metric_desc k_rejected = { "kronos_http_rejected_total", KR_METRIC_COUNTER,
                                           "requests refused before reaching the engine, by "
                                           "reason",
                                           NULL, 0 };
static const kr_metric_desc k_requests = { "kronos_http_requests_total", KR_METRIC_COUNTER,
                                           "HTTP requests by route and status code", NULL, 0 };
static const kr_metric_desc k_profile = { "kronos_server_profile_active", KR_METRIC_GAUGE,
                                          "1 for the time-of-day scheduler profile in effect", NULL,
                                          0 };

struct kr_http_metrics {
    kr_metrics *m;
    kr_metric *in_flight, *draining, *memory;
};

kr_http_metrics *kr_http_metrics_create(kr_metrics *m) {
    kr_http_metrics *hm = calloc(1, sizeof *hm);
    if (!hm) return NULL;
    hm->m = m;
    hm->in_flight = kr_metrics_series(m, &k_in_flight, "");
    hm->draining = kr_metrics_series(m, &k_draining, "");
    hm->memory = kr_metrics_series(m, &k_memory, "");
    /* Pre-register the duration histograms so every route shows up from the first scrape. */
    static const char *const k_labels[] = { "/health",    "/ready",       "/metrics",
                                            "/v1/models", "/v1/forecast", "other" };
    char lab[64];
    for (size_t i = 0; i < sizeof k_labels / sizeof k_labels[0]; i++) {
        snprintf(lab, sizeof lab, "route=\"%s\"", k_labels[i]);
        kr_metrics_series(m, &k_duration, lab);
    }
    /* And every refusal reason at 0, so an alert's rate() over
     * kronos_http_rejected_total{reason="busy"} sees the first refusals too, not only those
     * after the series appeared (deploy/prometheus-alerts.yml). */
    static const char *const k_reasons[] = { "busy",   "draining", "too_large",   "auth",
                                             "memory", "framing",  "read_timeout" };
    for (size_t i = 0; i < sizeof k_reasons / sizeof k_reasons[0]; i++) {
        snprintf(lab, sizeof lab, "reason=\"%s\"", k_reasons[i]);
        kr_metrics_series(m, &k_rejected, lab);
    }
    return hm;
}

void kr_http_metrics_free(kr_http_metrics *hm) { free(hm); }

void kr_http_metrics_record(kr_http_metrics *hm, const char *route, int code, double seconds) {
    if (!hm) return;
    char lab[96];
    snprintf(lab, sizeof lab, "route=\"%s\",code=\"%d\"", route, code);
    kr_metric_add(kr_metrics_series(hm->m, &k_requests, lab), 1.0);
    snprintf(lab, sizeof lab, "route=\"%s\"", route);
    kr_metric_observe(kr_metrics_series(hm->m, &k_duration, lab), seconds);
}

void kr_http_metrics_in_flight(kr_http_metrics *hm, int delta) {
    if (hm) kr_metric_add(hm->in_flight, (double)delta);
}

void kr_http_metrics_reject(kr_http_metrics *hm, const char *reason) {
    if (!hm) return;
    char lab[64];
    snprintf(lab, sizeof lab, "reason=\"%s\"", reason);
    kr_metric_add(kr_metrics_series(hm->m, &k_rejected, lab), 1.0);
}

void kr_http_metrics_draining(kr_http_metrics *hm, int draining) {
    if (hm) kr_metric_set(hm->draining, draining ? 1.0 : 0.0);
}

void kr_http_metrics_memory(kr_http_metrics *hm, size_t bytes) {
    if (hm) kr_metric_set(hm->memory, (double)bytes);
}

void kr_http_metrics_profile(kr_http_metrics *hm, const char *name, int on) {
    if (!hm) return;
    char lab[128];
    snprintf(lab, sizeof lab, "profile=\"%s\"", name);
    kr_metric_set(kr_metrics_series(hm->m, &k_profile, lab), on ? 1.0 : 0.0);
}
