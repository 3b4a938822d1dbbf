/*
 * engine/metrics — a small Prometheus registry: counters, gauges and histograms (with labels
 * fixed at registration), thread-safe updates, and the text exposition format (version
 * 0.0.4) for GET /metrics. Names follow Prometheus conventions: `kronos_` prefix, base units
 * in the name (`_seconds`, `_bytes`), `_total` for counters.
 */
#ifndef KR_ENGINE_METRICS_H
#define KR_ENGINE_METRICS_H

#include <stddef.h>

#include "kronos.h"

typedef struct kr_metrics kr_metrics;
typedef struct kr_metric kr_metric; /* one time series (name + label set) */

KR_PRIVATE kr_status kr_metrics_create(kr_metrics **out, kr_error *err);
KR_PRIVATE void kr_metrics_free(kr_metrics *m);

typedef enum kr_metric_type {
    KR_METRIC_COUNTER = 0,
    KR_METRIC_GAUGE,
    KR_METRIC_HISTOGRAM
} kr_metric_type;

/* One metric as /metrics shows it: its name, type and help text, written once in a table of
 * the layer that owns it (engine/context.c, engine/tuner.c, server/http_metrics.c, ...);
 * every series of it (one per label set) is registered through it, so a name is never spelt,
 * nor its help worded, twice. */
typedef struct kr_metric_desc {
    const char *name;
    kr_metric_type type;
    const char *help; /* one line */
    const double *bounds; /* histograms: ascending upper bounds (+Inf implicit); NULL: the
                             latency buckets (kr_latency_buckets) */
    int n_bounds;
} kr_metric_desc;

/* The series of desc with these labels ("" or NULL, or 'key="value",key2="v2"'), registered on
 * first use: the same (name, labels) again returns the same handle, valid for the registry's
 * life. NULL on allocation failure (updates ignore NULL). */
KR_PRIVATE kr_metric *kr_metrics_series(kr_metrics *m, const kr_metric_desc *desc,
                                        const char *labels);

/* The engine's metrics another layer updates or reads too. */
extern KR_PRIVATE const kr_metric_desc kr_metric_prefix_queried_tokens;
extern KR_PRIVATE const kr_metric_desc kr_metric_prefix_hit_tokens;
extern KR_PRIVATE const kr_metric_desc kr_metric_tuner_decisions;

/* Updates; NULL handles are ignored, so callers need not check registration. */
KR_PRIVATE void kr_metric_add(kr_metric *c, double v); /* counter (v >= 0) or gauge */
KR_PRIVATE void kr_metric_set(kr_metric *g, double v); /* gauge */
KR_PRIVATE void kr_metric_observe(kr_metric *h, double v); /* histogram */
KR_PRIVATE double kr_metric_value(const kr_metric *c); /* counter/gauge value; histogram count */
/* Quantile estimate of a histogram over observations since the last call of
 * kr_metric_window_reset (linear inside the bucket); NAN if empty. For the tuner. */
double kr_metric_window_quantile(kr_metric *h, double q);
void kr_metric_window_reset(kr_metric *h);

/* Renders every metric in the text format. Caller frees *text. */
kr_status kr_metrics_render(kr_metrics *m, char **text, size_t *len, kr_error *err);

/* Standard latency buckets in seconds (1 ms .. 60 s). */
extern KR_PRIVATE const double kr_latency_buckets[];
extern KR_PRIVATE const int kr_latency_buckets_n;

#endif
