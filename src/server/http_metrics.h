/*
 * server/http_metrics — the HTTP side's Prometheus series, registered in the same registry as
 * the engine's so GET /metrics renders one document:
 *   kronos_http_requests_total{route,code}          counter
 *   kronos_http_request_duration_seconds{route}     histogram (kr_latency_buckets)
 *   kronos_http_requests_in_flight                  gauge
 *   kronos_http_rejected_total{reason}              counter (busy, draining, too_large, auth,
 *                                                   memory, framing, read_timeout)
 *   kronos_http_memory_in_flight_bytes              gauge   memory budget held by requests
 *                                                   being read and parsed
 *   kronos_server_draining, kronos_server_profile_active{profile}   gauges
 */
#ifndef KR_SERVER_HTTP_METRICS_H
#define KR_SERVER_HTTP_METRICS_H

#include <stddef.h>

#include "engine/metrics.h"

typedef struct kr_http_metrics kr_http_metrics;

/* Registers the series in m (borrowed; must outlive the result). Caller frees. NULL when out
 * of memory. */
kr_http_metrics *kr_http_metrics_create(kr_metrics *m);
void kr_http_metrics_free(kr_http_metrics *hm);

/* One finished request: route label (kr_route_label), status code, wall time. Thread-safe. */
void kr_http_metrics_record(kr_http_metrics *hm, const char *route, int code, double seconds);
void kr_http_metrics_in_flight(kr_http_metrics *hm, int delta);
void kr_http_metrics_reject(kr_http_metrics *hm, const char *reason);
void kr_http_metrics_draining(kr_http_metrics *hm, int draining);
void kr_http_metrics_memory(kr_http_metrics *hm, size_t bytes);
/* Sets kronos_server_profile_active{profile=name} to on (0/1). */
void kr_http_metrics_profile(kr_http_metrics *hm, const char *name, int on);

#endif
