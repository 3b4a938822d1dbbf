/*
 * kronos/backtest.h — "does it beat a naive forecast?": rolling-origin evaluation of a model on
 * its users' own candles, against baselines, with intervals, a significance test and a
 * top-K strategy (docs/backtest.md defines every figure).
 *
 * For every symbol and every origin (a bar every `every` bars, or at given dates, within
 * [from, to]) the model forecasts `horizon` bars from the rows at or before the origin only —
 * the same series view, exchange calendar (future timestamps) and forecast parameters a live
 * forecast at that bar would have used — and the forecast is scored against the bars that
 * followed. All forecasts go through the context's public batch API (kr_forecast_run_batch_ex)
 * in large static batches across origins and symbols, so a thousand-origin backtest runs at
 * engine speed; results do not depend on the batching (the engine's determinism).
 *
 * Scores (on the close; returns are log returns; docs/backtest.md):
 *   probabilistic  CRPS, weighted quantile loss (0.1..0.9), coverage of the 10-90 % and
 *                  5-95 % bands, PIT histogram, Brier score and reliability of P(up)
 *   point          MAE / MAPE / MASE of the median and of the mean path, direction hit rate
 *   cross-section  IC (Pearson) and RankIC (Spearman) per origin, mean, t-stat, ICIR
 *   volatility     forecast vs realised volatility over the horizon: MAE and correlation
 * per horizon step and aggregated, per symbol and pooled, each with a circular block bootstrap
 * interval over origins. The same scores for the baselines (naive, seasonal naive, drift, a
 * bootstrap random walk of the series' own returns, optionally a second model), relative
 * scores (geometric mean across symbols) and Diebold-Mariano tests. A strategy backtest holds
 * the top-K symbols by expected return or P(up) at each rebalance (A-share rules where they
 * apply).
 */
#ifndef KRONOS_BACKTEST_H
#define KRONOS_BACKTEST_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"
#include "kronos/analyst.h"
#include "kronos/store.h" /* KR_STORE_TS_FIRST / KR_STORE_TS_LAST: the open ends of a range */

#ifdef __cplusplus
extern "C" {
#endif

/* The JSON "schema_version" this build writes (docs/backtest.schema.json). */
#define KR_BACKTEST_SCHEMA_VERSION 1

/* The default static batch of a backtest, in series x paths rows: large enough that decode
 * steps run as matrix products (bench/results/backtest.md measures it). */
#define KR_BACKTEST_BATCH_ROWS_DEFAULT 1024

/* One series to evaluate. Everything is borrowed for the duration of kr_backtest_run. */
typedef struct kr_backtest_series {
    const char *symbol; /* its name in the report (1..64 bytes) */
    const char *interval; /* "1d", "5m", ... for the report; NULL or "": none given */
    const kr_candles *candles; /* the whole history, ascending */
    const char *market; /* exchange calendar (kr_calendar_find); NULL or "": the symbol's
                           suffix, else inferred from the history before each origin */
} kr_backtest_series;

/* What the strategy ranks symbols by. */
typedef enum kr_backtest_rank {
    KR_BACKTEST_RANK_RETURN = 0, /* expected return (mean path) at the hold step */
    KR_BACKTEST_RANK_PROB_UP = 1 /* P(close at the hold step > last close) */
} kr_backtest_rank;

/* Progress: phase is "plan", "forecast", "compare" (the second model), "score",
 * "bootstrap", "strategy" or "done"; done / total count forecasts in the forecast phases
 * (else the phase's own units). eta_seconds is NaN until it can be estimated. Called from
 * the thread running kr_backtest_run. */
typedef struct kr_backtest_progress {
    const char *phase;
    int64_t done, total;
    double elapsed_seconds, eta_seconds;
} kr_backtest_progress;
typedef void (*kr_backtest_progress_fn)(void *user, const kr_backtest_progress *progress);

typedef struct kr_backtest_params {
    /* ---- origins */
    int horizon; /* bars forecast and scored from each origin (pred_len), default 20 */
    int every; /* an origin every N bars, counted back from the last eligible one; <= 0: the
                  horizon (default) */
    int64_t from_ts, to_ts; /* origins stamped within [from, to] (naive seconds; defaults
                               KR_STORE_TS_FIRST / KR_STORE_TS_LAST) */
    const int64_t *origin_ts; /* given origins instead of `every`: each symbol's last bar
                                 stamped at or before each of them; NULL: every */
    int n_origin_ts;
    int min_history; /* rows at or before the first origin, default 64 */
    int max_origins; /* > 0: only the last N origins of each symbol */
    /* ---- the forecasts (as kronos forecast / analyze) */
    int paths; /* sample paths per forecast, default 32 (>= 2: scores need a distribution) */
    int lookback; /* history rows the model sees; 0: all, up to max_context - horizon */
    int max_context; /* default 512 */
    float temperature; /* default 1.0 */
    int top_k; /* default 0 */
    float top_p; /* default 0.9 */
    uint64_t seed; /* default 0: every origin's forecast uses it (each path its own stream) */
    kr_window_mode window;
    kr_ohlc_mode ohlc; /* candles repaired before scoring, default consistent */
    int static_batch_rows; /* series x paths rows per static batch; 0:
                              KR_BACKTEST_BATCH_ROWS_DEFAULT; < 0: everything at once */
    /* ---- baselines and scores */
    int season; /* seasonal naive period in bars; 0: from the interval (docs), < 0: none */
    int bootstrap; /* bootstrap resamples, default 1000; 0: no intervals */
    int block_length; /* bootstrap block in origins; 0: max(ceil(horizon / every),
                         round(n^(1/3))) */
    double ci_level; /* interval level, default 0.95 */
    double alpha; /* significance level of the Diebold-Mariano tests, default 0.05 */
    uint64_t score_seed; /* bootstrap, random-walk baseline and randomised PIT, default 0 */
    /* ---- strategy */
    int strategy_k; /* hold the top K symbols (default 1; needs at least K + 1 symbols at a
                       rebalance); 0: no strategy */
    int strategy_short; /* also short the bottom K (default 0) */
    kr_backtest_rank strategy_rank;
    double cost_bps; /* transaction cost per unit of weight traded, basis points (default 10) */
    int hold; /* bars between rebalances, a multiple of every; <= 0: every */
    int ashare_rules; /* -1 (default): for A-share symbols (6-digit codes, .SH / .SZ, SSE or
                         SZSE market); 0: never; 1: always */
    /* ---- a second model scored as one more forecaster (e.g. before / after fine-tuning,
       f32 vs q4): a context on it (borrowed), and its name in the report */
    kr_context *compare;
    const char *compare_name;
    /* ---- running */
    kr_backtest_progress_fn progress; /* may be NULL */
    void *progress_user;
    /* Deadline, priority, abort check of the forecasts (borrowed; may be NULL); the abort
     * check is also polled between batches: non-zero ends the run with KR_ERR_CANCELLED. */
    const kr_request_params *request;
    /* Metadata for the report (borrowed; may be NULL). */
    const char *model_name, *predictor_dir, *tokenizer_dir;
} kr_backtest_params;

typedef struct kr_backtest_report kr_backtest_report; /* opaque; render it */

KR_API kr_backtest_params kr_backtest_default_params(void);
/* The checks kr_backtest_run makes of p before any work: KR_OK, or KR_ERR_INVALID_ARG naming
 * the parameter. */
KR_API kr_status kr_backtest_check_params(const kr_backtest_params *p, kr_error *err);

/* Runs the backtest of series[n] on ctx's model. A symbol without any eligible origin is
 * listed in the report's failures (with the reason) beside the others; when no symbol has
 * one, the call fails naming the first. A run whose scores would take more than 2 GiB (about
 * 1,250 bytes per origin and horizon step) is refused (KR_ERR_INVALID_ARG) before any work. KR_ERR_CANCELLED when the abort check fired;
 * KR_ERR_TIMEOUT past the request's deadline. Caller owns *out (kr_backtest_report_free). */
KR_API kr_status kr_backtest_run(kr_context *ctx, const kr_backtest_series *series, int n,
                                 const kr_backtest_params *p, kr_backtest_report **out,
                                 kr_error *err);
KR_API void kr_backtest_report_free(kr_backtest_report *r);

typedef enum kr_backtest_format {
    KR_BACKTEST_JSON = 0, /* docs/backtest.schema.json */
    KR_BACKTEST_MD = 1,
    KR_BACKTEST_HTML = 2, /* self-contained, inline SVG plots */
    KR_BACKTEST_CSV = 3 /* one row per (symbol, origin) */
} kr_backtest_format;

/* "json", "md" (or "markdown"), "html", "csv"; 0 on success, -1 otherwise. */
KR_API int kr_backtest_format_parse(const char *s, kr_backtest_format *out);
/* The report as NUL-terminated text in *out; caller frees it (free()). */
KR_API kr_status kr_backtest_render(const kr_backtest_report *r, kr_backtest_format fmt, char **out,
                                    kr_error *err);

/* Heap bytes the report holds: what keeping it costs (a server budgets finished backtests
 * waiting for their clients by it). 0 for NULL. */
KR_API size_t kr_backtest_report_bytes(const kr_backtest_report *r);

/* Forecasts scored (symbol x origin) and symbols that failed; 0 for NULL. */
KR_API int64_t kr_backtest_report_forecasts(const kr_backtest_report *r);
KR_API int kr_backtest_report_failures(const kr_backtest_report *r);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_BACKTEST_H */
