/*
 * server/drift — kronos_quant_drift: while a quantised model serves, a sampled fraction of
 * the answered forecasts is run again, in the background, on the f32 model it was quantised
 * from, with the same series, parameters and seed; the two-sample Kolmogorov–Smirnov
 * statistic between the two sets of path returns at the horizon is exported.
 *
 *   kronos_quant_drift                 gauge: KS statistic of the latest comparison (0..1)
 *   kronos_quant_drift_p_value         gauge: its p-value
 *   kronos_quant_drift_ks              histogram of the statistics
 *   kronos_quant_drift_samples_total   counter of comparisons; _dropped_total: skipped
 *                                      because the shadow queue was full or the forecast
 *                                      does not fit the shadow's KV budget
 *   kronos_quant_drift_kv_budget_bytes gauge: that budget
 *
 * The shadow runs on its own thread with a one-thread model, one job at a time, from a small
 * bounded queue: when it cannot keep up, samples are dropped (counted), never queued without
 * bound and never in a response's way. Its f32 KV cache has a budget of its own
 * (kv_budget_bytes), so re-running a sample never takes memory the server was not given.
 */
#ifndef KR_SERVER_DRIFT_H
#define KR_SERVER_DRIFT_H

#include "engine/metrics.h"
#include "kronos.h"

typedef struct kr_drift kr_drift;

/* shadow: the f32 model (owned by the drift monitor from now on, freed by kr_drift_free).
 * sample: fraction of forecasts compared, in (0, 1]. kv_budget_bytes: the shadow's KV memory
 * (> 0); a sample that needs more is dropped. */
kr_status kr_drift_create(kr_model *shadow, double sample, size_t kv_budget_bytes,
                          kr_metrics *metrics, kr_drift **out, kr_error *err);
/* Offers an answered forecast (series and params as requested, paths kept). Copies what it
 * needs when sampled; returns at once. NULL drift is a no-op. */
void kr_drift_offer(kr_drift *d, const kr_series *series, const kr_forecast_params *params,
                    const kr_forecast *quantised);
/* Waits until every queued comparison is done (tests). */
void kr_drift_flush(kr_drift *d);
void kr_drift_free(kr_drift *d);

#endif
