/*
 * analyst/analyze — the analysis pipeline behind `kronos analyze` (and the server's
 * /v1/analyze): histories in, a set of reports out.
 *
 * One kr_forecast_run_batch call forecasts every symbol (any mix of lengths); while a symbol's
 * figures are still noisier than the error targets (P(up) within +-target_prob_se, VaR95
 * within target_var_rel_se of its size), more paths run in further rounds (first_path: the
 * paths of one bigger run, so nothing is recomputed) up to max_paths. When calibration is
 * asked for, one batch call per symbol runs its K walk-forward windows. A symbol that fails
 * (too short a history, a forecast error) is listed in the set's failures and the others are
 * reported; the set adds a ranking by expected return within each interval.
 */
#ifndef KR_ANALYST_ANALYZE_H
#define KR_ANALYST_ANALYZE_H

#include <stddef.h>
#include <stdint.h>

#include "analyst/report.h"
#include "kronos.h"
#include "kronos/analyst.h"
#include "series/candles.h"

/* The items, parameters, report set and kr_analyze itself are public: kronos/analyst.h. */

/* Orders set->rank: by interval (shortest bars first), then expected return (descending; NaN
 * last; ties by symbol); and marks stale histories and indistinguishable neighbours
 * (kr_report.stale_days, .ties). */
void kr_report_set_rank(kr_report_set *set);

/* An analysis' request parameters (priority, abort check, ...) with its deadline fixed when
 * it began: every forecast it runs (adaptive rounds, one-symbol retries, calibrations) gets
 * what is left of it. (Each call once restarted the whole deadline_s, so an analysis could
 * run many times the server's request_timeout_s.) */
typedef struct kr_analyst_request {
    kr_request_params params;
    double deadline_at; /* kr_now_seconds() by which everything is done; 0: no deadline */
} kr_analyst_request;

/* params' deadline_s counted from now. params may be NULL (the defaults). */
kr_analyst_request kr_analyst_request_start(const kr_request_params *params);

/* The one place the analyst calls the engine: a batch of series with the given params on the
 * context, under the analysis' request (may be NULL: the defaults, no deadline). All analyses
 * and calibrations go through it. out[n] receives the results. */
kr_status kr_analyst_run_batch(kr_context *ctx, const kr_analyst_request *request,
                               const kr_series *series, int n, const kr_forecast_params *params,
                               kr_forecast **out, kr_error *err);
/* A failure that ends the whole analysis (its deadline, its client, a full queue, a
 * shutdown), not just one symbol's report. */
int kr_analyst_fatal(kr_status st);

/* A report's model name: "kronos-demo" from ".../kronos-demo/predictor", else the directory's
 * own name. */
void kr_analyst_model_name(const char *dir, char *out, size_t cap);
/* Where the weights come from: the checkpoint's own "source" (declared), else the Hugging Face
 * repo of a hub-cache snapshot (".../models--ORG--NAME/snapshots/REV"), else the directory;
 * cleaned of control characters and bidi overrides (it is text from outside). */
void kr_analyst_model_source(const char *declared, const char *dir, char *out, size_t cap);

#endif
