/*
 * kronos/analyst.h — the "AI stock analyst": histories in, structured reports out (quantile
 * bands, probability up, risk, technicals, calibration, a plain-language summary, charts),
 * rendered as JSON (docs/report.schema.json), Markdown or a self-contained HTML page; and a
 * forecast's sample paths as the statistics see them.
 *
 * One kr_forecast_run_batch call forecasts every symbol; while a symbol's figures are still
 * noisier than the error targets, more paths run in further rounds (no recomputation) up to
 * max_paths. A symbol that fails is listed in the set's failures and the others are reported.
 * Every forecast goes through the context's engine under the request parameters given
 * (deadline, priority, abort check), so analyses join the continuous batch.
 */
#ifndef KRONOS_ANALYST_H
#define KRONOS_ANALYST_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"
#include "kronos/paths.h"
#include "kronos/series.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- analyses */

typedef struct kr_report kr_report; /* one symbol's report (opaque; render it) */

typedef struct kr_analyze_item {
    const char *symbol, *interval; /* borrowed; copied into the report */
    const kr_candles *candles; /* borrowed: the history, ascending, all rows */
    const char *error; /* non-NULL: the caller could not load this symbol (unknown, unreadable);
                          it becomes a failure of the set with this message */
    const char *market; /* exchange calendar of the future bars; NULL or "": the symbol's
                           suffix, else inferred from the history */
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
    /* The clock the reports are judged against (Unix seconds, UTC): a history whose last bar
     * lies more trading sessions back than its interval allows is stale (kr_report
     * .sessions_ago). 0: the time of the run; tests and replays pass one. */
    int64_t now;
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

KR_API kr_analyze_params kr_analyze_default_params(void);
/* Rows a history needs for these parameters (forecast, indicators, calibration). */
KR_API int64_t kr_analyze_min_rows(const kr_analyze_params *p);
/* The checks kr_analyze makes of p before any work, for a caller to ask up front: KR_OK, or
 * KR_ERR_INVALID_ARG with a message naming the parameter. */
KR_API kr_status kr_analyze_check_params(const kr_analyze_params *p, kr_error *err);

/* Runs the pipeline for items[n]. A symbol that fails is a failure entry of the set, the
 * others are reported; only when every symbol fails (or the arguments are bad) is the call an
 * error, with the first failure's status and message (naming the symbol). Caller owns *out;
 * free with kr_report_set_free. */
KR_API kr_status kr_analyze(kr_context *ctx, const kr_analyze_item *items, int n,
                            const kr_analyze_params *p, kr_report_set **out, kr_error *err);
KR_API void kr_report_set_free(kr_report_set *set);

/* The symbol and interval a report is about (borrowed). */
KR_API const char *kr_report_symbol(const kr_report *r);
KR_API const char *kr_report_interval(const kr_report *r);

/* ---------------------------------------------------------------- rendering */

typedef enum kr_report_format {
    KR_FORMAT_JSON = 0,
    KR_FORMAT_MD = 1,
    KR_FORMAT_HTML = 2
} kr_report_format;

/* "json", "md" (or "markdown"), "html"; returns 0 on success, -1 for anything else. */
KR_API int kr_report_format_parse(const char *s, kr_report_format *out);
/* The set as a NUL-terminated text in *out; caller owns it (free()). JSON follows
 * docs/report.schema.json (schema_version KR_REPORT_SCHEMA_VERSION). */
KR_API kr_status kr_render(const kr_report_set *set, kr_report_format fmt, char **out,
                           kr_error *err);

/* The JSON "schema_version" this build writes. */
#define KR_REPORT_SCHEMA_VERSION 1

/* ---------------------------------------------------------------- narratives */

/* Optional prose about a report, written by a language model behind an Ollama-compatible
 * `/api/generate` endpoint, shown beside the deterministic summary, never instead of it. The
 * model sees only the report's own figures; a narrative quoting figures it was not given is
 * flagged. A failed request is recorded in the narrative and never fails the analysis. */

#define KR_NARRATIVE_DEFAULT_MODEL "gemma3"
#define KR_NARRATIVE_DEFAULT_TIMEOUT 60.0
#define KR_NARRATIVE_WARNING "the narrative mentions figures not in the report"

typedef struct kr_narrative_params {
    const char *url; /* server ("http://127.0.0.1:11434") or its ".../api/generate"; borrowed */
    const char *model; /* model name; NULL: KR_NARRATIVE_DEFAULT_MODEL; borrowed */
    double timeout_s; /* the whole request (connect + answer), seconds; > 0 */
    /* Called before each symbol's request (step 0..n-1) and once with step == n; may be NULL. */
    kr_analyze_progress_fn progress;
    void *progress_user;
    /* All of a set's requests together (kr_narrative_attach_all), seconds from its call; 0:
     * no limit beyond timeout_s each. A request gets at most what is left; once it is spent
     * the remaining reports are not asked and carry a KR_ERR_TIMEOUT error saying so. A
     * server passes what its request deadline leaves after the analysis. */
    double budget_s;
    /* Polled during a request (about once a second, and as data arrives); nonzero stops it
     * (KR_ERR_CANCELLED, and the remaining reports are not asked). May be NULL. */
    int (*should_abort)(void *user);
    void *abort_user;
} kr_narrative_params;

/* One report's narrative, or why there is none. */
typedef struct kr_narrative {
    char *text; /* the model's prose, trimmed, UTF-8; NULL when the request failed */
    char model[128]; /* the model asked for */
    char url[1024]; /* the endpoint posted to, without any user:password@ part, its query
                       string (if any) shown as "?..." */
    double seconds; /* wall time of the request */
    long http_status; /* status of the server's answer; 0 when none came */
    char warning[96]; /* "" or KR_NARRATIVE_WARNING */
    char unsupported[48]; /* with a warning: the first figure of the text not in the data */
    kr_status status; /* KR_OK with text; else KR_ERR_IO (connection, HTTP status),
                              KR_ERR_TIMEOUT (also: the budget was spent before asking),
                              KR_ERR_CANCELLED (should_abort) or KR_ERR_FORMAT (unreadable
                              answer) */
    char error[1200]; /* "" with text; else "<url>: <reason>" */
    char reason[1024]; /* the same reason alone, for a caller that names the model another
                          way (a server does not tell its clients where the model runs) */
} kr_narrative;

KR_API kr_narrative_params kr_narrative_default_params(void);
/* The endpoint for a URL: "/api/generate" appended to its path unless the path already ends
 * with it (trailing slashes ignored), before any query string. Only http:// and https:// URLs
 * without a fragment. KR_ERR_INVALID_ARG when the URL is unusable or does not fit in cap; the
 * message shows the URL without credentials or query string. */
KR_API kr_status kr_narrative_endpoint(const char *url, char *out, size_t cap, kr_error *err);
/* A narrative for every report of set, in order, each attached to its report. After a failure
 * to get any answer (no connection, timeout) the remaining reports are not tried and carry the
 * same error. *out receives set->n narratives; caller frees them with kr_narrative_free_all
 * after the set (the reports only borrow them). */
KR_API kr_status kr_narrative_attach_all(kr_report_set *set, const kr_narrative_params *p,
                                         kr_narrative ***out, kr_error *err);
KR_API void kr_narrative_free_all(kr_narrative **v, int n);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_ANALYST_H */
