/*
 * analyst/analyze — the analysis pipeline behind `kronos analyze` (and the server's
 * /v1/analyze): histories in, a set of reports out.
 *
 * One batch on the context forecasts every symbol (any mix of lengths), then, when
 * calibration is asked for, one batch call per symbol runs its K walk-forward windows. Each
 * symbol's report is built from its own forecast; the set adds a ranking by expected return.
 */
#ifndef KR_ANALYST_ANALYZE_H
#define KR_ANALYST_ANALYZE_H

#include <stdint.h>

#include "analyst/report.h"
#include "kronos.h"
#include "market/candles.h"

typedef struct kr_analyze_item {
    const char *symbol, *interval; /* borrowed; copied into the report */
    const kr_candles *candles; /* borrowed: the history, ascending, all rows */
} kr_analyze_item;

/* Called before each phase (step = 0..n_steps-1) and once more with step == n_steps when
 * done; `what` describes the phase ("forecasting 3 symbols"). From the calling thread. */
typedef void (*kr_analyze_progress_fn)(void *user, int step, int n_steps, const char *what);

typedef struct kr_analyze_params {
    int horizon; /* bars to forecast (pred_len), default 20 */
    int paths; /* sample paths, default 32 */
    int lookback; /* history rows the model sees; 0: min(rows, max_context - horizon) */
    int max_context; /* predictor window, default 512 */
    int top_k; /* default 0 (off) */
    float temperature; /* default 1.0 */
    float top_p; /* default 0.9 */
    uint64_t seed; /* default 0; each path has its own stream */
    int calibrate; /* walk-forward windows per symbol; 0 = none */
    kr_analyze_progress_fn progress; /* may be NULL */
    void *progress_user;
    /* Deadline, priority, abort check of the forecasts (borrowed; may be NULL): a server
     * passes its request timeout and "the client has gone". */
    const kr_request_params *request;
    /* Metadata for the reports (borrowed; may be NULL). */
    const char *model_name, *predictor_dir, *tokenizer_dir;
} kr_analyze_params;

typedef struct kr_report_set {
    int n;
    kr_report **reports; /* [n], in input order, owned */
    int *rank; /* [n] indices into reports: highest expected return first */
    int64_t generated_at; /* Unix seconds (UTC) */
} kr_report_set;

kr_analyze_params kr_analyze_default_params(void);

/* Rows a history needs for these parameters (forecast, indicators, calibration). */
int64_t kr_analyze_min_rows(const kr_analyze_params *p);

/* Runs the pipeline for items[n]. Errors name the symbol. Caller owns *out; free with
 * kr_report_set_free. */
kr_status kr_analyze(kr_context *ctx, const kr_analyze_item *items, int n,
                     const kr_analyze_params *p, kr_report_set **out, kr_error *err);

void kr_report_set_free(kr_report_set *set);

/* Orders set->rank by expected return (descending; NaN last; ties by symbol). */
void kr_report_set_rank(kr_report_set *set);

#endif
