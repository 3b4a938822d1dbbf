/*
 * cli/progress — what the CLI shows while one long library call runs, and its hints.
 *
 * A forecast or a calibration is one engine call with no step callback, so the ticker shows
 * what runs and for how long: "\r[forecasting 3 series: 32 paths x 24 bars] 4.2 s", rewritten
 * from a thread a few times a second, on stderr and only when stderr is a terminal (a log
 * file or a pipe gets nothing). kr_ticker_stop clears the line.
 */
#ifndef KR_CLI_PROGRESS_H
#define KR_CLI_PROGRESS_H

#include <stddef.h>

#include "kronos/series.h"

typedef struct kr_ticker kr_ticker;

/* Starts a ticker labelled `what`; NULL (a no-op ticker) when stderr is not a terminal. */
kr_ticker *kr_ticker_start(const char *what);
/* Stops and clears the line; NULL is a no-op. */
void kr_ticker_stop(kr_ticker *t);

/* After a failed model load: a hint when the two directories look swapped (the predictor
 * directory holds a tokenizer config or the other way round). Writes "" when nothing fits. */
void kr_cli_model_hint(const char *pred_dir, const char *tok_dir, char *hint, size_t cap);

/* One line on stderr when the input has no volume column (volume and amount are then 0), and
 * one when the reader dropped a column the user gave (kr_candles.amount_dropped: an amount
 * without volume, both then 0 as in the reference), naming the input (file, or "stdin" for
 * "-") and the column. */
void kr_cli_warn_dropped_columns(const char *cmd, const char *path, const kr_candles *c);
/* Warns on stderr when a history has fewer than KR_FORECAST_MIN_ROWS rows, saying why. */
void kr_cli_warn_thin_history(const char *cmd, const char *path, const kr_candles *c);

#endif
