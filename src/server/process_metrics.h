/*
 * server/process_metrics — the process's own series on /metrics, named as Prometheus client
 * libraries name them so standard dashboards work:
 *   process_cpu_seconds_total         counter  user + system CPU time
 *   process_resident_memory_bytes     gauge    resident set size
 *   process_open_fds                  gauge    open file descriptors
 *   process_start_time_seconds        gauge    start time, Unix seconds
 *   kronos_build_info{version,isa}    gauge    1; version of the library, SIMD kernels in use
 *   kronos_prefix_cache_hit_ratio     gauge    hit / queried prefix-cache tokens since start
 * Read from /proc/self at each scrape (Linux); a value that cannot be read is left out of the
 * update rather than reported wrong.
 */
#ifndef KR_SERVER_PROCESS_METRICS_H
#define KR_SERVER_PROCESS_METRICS_H

#include "engine/metrics.h"

typedef struct kr_process_metrics kr_process_metrics;

/* Registers the series in m (borrowed). NULL when out of memory. */
kr_process_metrics *kr_process_metrics_create(kr_metrics *m);
void kr_process_metrics_free(kr_process_metrics *pm);

/* Refreshes every series; call before rendering. Create after the scheduler, whose
 * prefix-cache counters (kronos_prefix_cache_{queried,hit}_tokens_total) give the ratio. */
void kr_process_metrics_update(kr_process_metrics *pm);

#endif
