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

#include <stdint.h>

#include "analyst/report.h"
#include "kronos.h"
#include "market/candles.h"

typedef struct kr_analyze_item {
    const char *symbol, *interval; /* borrowed; copied into the report */
    const kr_candles *candles; /* borrowed: the history, ascending, all rows */
    const char *error; /* non-NULL: the caller could not load this symbol (unknown, unreadable);
                          it becomes a failure of the set with this message */
    const char *market; /* exchange calendar of the future bars (market/calendar.h); NULL or
                           "": the symbol's suffix, else inferred from the history */
} kr_analyze_item;

/* Called before each phase (step = 0..n_steps-1) and once more with step == n_steps when
 * done; `what` describes the phase ("forecasting 3 symbols"). From the calling thread. */
typedef void (*kr_analyze_progress_fn)(void *user, int step, int n_steps, const char *what);

/* The seed every entry point uses by default (CLI, HTTP, the web page). */
#define KR_ANALYZE_DEFAULT_SEED 0

typedef struct kr_analyze_params {
    int horizon; /* bars to forecast (pred_len), default 20 */
    int paths; /* sample paths of the first round, default 128 */
    int max_paths; /* cap of the adaptive rounds, default 1024; <= paths: exactly `paths` */
    double target_prob_se; /* P(up) standard error to reach, default 0.02 (2 pp); 0: none */
    double target_var_rel_se; /* VaR95 standard error / max(|VaR95|, return std) to reach,
                                 default 0.20; 0: none */
    kr_ohlc_mode ohlc; /* candles repaired before the statistics, default consistent */
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
    /* > 0: the forecasts run in static batches of at most this many series x paths rows
     * (kr_request_params.static_batch_rows; offline scoring); 0: the request's setting. */
    int static_batch_rows;
} kr_analyze_params;

/* A symbol that could not be reported, and why. */
typedef struct kr_analyze_failure {
    char symbol[40], interval[40];
    char message[512];
} kr_analyze_failure;

typedef struct kr_report_set {
    int n;
    kr_report **reports; /* [n], in input order (failed symbols left out), owned */
    int *rank; /* [n] indices into reports: grouped by interval, highest expected return first */
    int64_t generated_at; /* Unix seconds (UTC) */
    int n_failures;
    kr_analyze_failure *failures; /* [n_failures], in input order */
    int static_batch_rows; /* the forecasts' static batch size in rows (0: all at once) */
} kr_report_set;

kr_analyze_params kr_analyze_default_params(void);

/* Rows a history needs for these parameters (forecast, indicators, calibration). */
int64_t kr_analyze_min_rows(const kr_analyze_params *p);

/* Runs the pipeline for items[n]. A symbol that fails is a failure entry of the set, the
 * others are reported; only when every symbol fails (or the arguments are bad) is the call an
 * error, with the first failure's status and message (naming the symbol). Caller owns *out;
 * free with kr_report_set_free. */
kr_status kr_analyze(kr_context *ctx, const kr_analyze_item *items, int n,
                     const kr_analyze_params *p, kr_report_set **out, kr_error *err);

void kr_report_set_free(kr_report_set *set);

/* Orders set->rank: by interval (shortest bars first), then expected return (descending; NaN
 * last; ties by symbol); and marks stale histories and indistinguishable neighbours
 * (kr_report.stale_days, .ties). */
void kr_report_set_rank(kr_report_set *set);

/* The one place the analyst calls the engine: a batch of series with the given params on the
 * context, under the analysis' request parameters (deadline, priority, abort check; may be
 * NULL). All analyses and calibrations go through it. out[n] receives the results. */
kr_status kr_analyst_run_batch(kr_context *ctx, const kr_request_params *request,
                               const kr_series *series, int n, const kr_forecast_params *params,
                               kr_forecast **out, kr_error *err);
/* A failure that ends the whole analysis (its deadline, its client, a full queue, a
 * shutdown), not just one symbol's report. */
int kr_analyst_fatal(kr_status st);

#endif
