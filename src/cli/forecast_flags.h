/*
 * cli/forecast_flags — the flags of a forecast that several commands take (forecast, analyze,
 * backtest, eval-quant, quantize, bench, serve): model and tokenizer, the sampling, the
 * quantisation, the window mode, threads, ..., and where the candles are (--db, --market).
 * Each one's table entry (name, getopt code, type, argument, range) is written once here,
 * spliced into a command's option table with that command's help text; and one function
 * applies a parsed one to the command's settings, with one spelling, range and message each
 * (cli/parse calls it), so a command's switch handles only its own flags.
 */
#ifndef KR_CLI_FORECAST_FLAGS_H
#define KR_CLI_FORECAST_FLAGS_H

#include <stdint.h>

#include "common/options.h"
#include "kronos.h"
#include "kronos/paths.h"

/* The getopt codes of the shared flags: the sampling's keep their letters, the others are
 * outside the range of the short letters, clear of every command's own codes. */
enum {
    KR_OPT_LOOKBACK = 'l',
    KR_OPT_MAX_CONTEXT = 'c',
    KR_OPT_PATHS = 'p',
    KR_OPT_SEED = 's',
    KR_OPT_TEMPERATURE = 'T',
    KR_OPT_TOP_P = 'P',
    KR_OPT_TOP_K = 'k',
    KR_OPT_ALLOW_NONFINITE = 0x4000,
    KR_OPT_MODEL,
    KR_OPT_TOKENIZER,
    KR_OPT_QUANT,
    KR_OPT_KV_DTYPE,
    KR_OPT_THREADS,
    KR_OPT_WINDOW,
    KR_OPT_OHLC,
    KR_OPT_BATCH_SIZE,
    KR_OPT_DB,
    KR_OPT_MARKET,
};

/* The help most commands give a flag (every one: --threads). */
#define KR_CLI_HELP_THREADS "compute threads (default: all CPUs)"
#define KR_CLI_HELP_TOKENIZER "tokenizer directory"
#define KR_CLI_HELP_ALLOW_NONFINITE                                                             \
    "load a checkpoint even if a weight is NaN or infinite\n(refused by default: such weights " \
    "corrupt forecasts)"

/* The entries, each with the command's help (common/options.h). The ranges are the ones
 * kr_cli_forecast_flag checks. */
#define KR_CLI_OPT_MODEL(help) \
    { "model", KR_OPT_MODEL, KR_CLI_DIR, "DIR", 0, 0, NULL, help }
#define KR_CLI_OPT_TOKENIZER(help) \
    { "tokenizer", KR_OPT_TOKENIZER, KR_CLI_DIR, "DIR", 0, 0, NULL, help }
#define KR_CLI_OPT_LOOKBACK(help) \
    { "lookback", KR_OPT_LOOKBACK, KR_CLI_INT, "N", 2, 1 << 20, NULL, help }
#define KR_CLI_OPT_MAX_CONTEXT(help) \
    { "max-context", KR_OPT_MAX_CONTEXT, KR_CLI_INT, "N", 2, 65536, NULL, help }
#define KR_CLI_OPT_PATHS(help) \
    { "paths", KR_OPT_PATHS, KR_CLI_INT, "N", 1, 4096, NULL, help }
#define KR_CLI_OPT_SEED(help) \
    { "seed", KR_OPT_SEED, KR_CLI_NUM, "S", 0, 0, NULL, help }
#define KR_CLI_OPT_TEMPERATURE(help) \
    { "temperature", KR_OPT_TEMPERATURE, KR_CLI_NUM, "T", 1e-6, 1e6, NULL, help }
#define KR_CLI_OPT_TOP_P(help) \
    { "top-p", KR_OPT_TOP_P, KR_CLI_NUM, "P", 1e-9, 1, NULL, help }
#define KR_CLI_OPT_TOP_K(help) \
    { "top-k", KR_OPT_TOP_K, KR_CLI_INT, "K", 0, 1 << 20, NULL, help }
#define KR_CLI_OPT_WINDOW(help) \
    { "window", KR_OPT_WINDOW, KR_CLI_CHOICE, "exact|rolling", 0, 0, NULL, help }
#define KR_CLI_OPT_OHLC(help) \
    { "ohlc", KR_OPT_OHLC, KR_CLI_CHOICE, "consistent|raw", 0, 0, NULL, help }
#define KR_CLI_OPT_QUANT(help) \
    { "quant", KR_OPT_QUANT, KR_CLI_TEXT, "FMT", 0, 0, NULL, help }
#define KR_CLI_OPT_KV_DTYPE(help) \
    { "kv-dtype", KR_OPT_KV_DTYPE, KR_CLI_TEXT, "T", 0, 0, NULL, help }
#define KR_CLI_OPT_THREADS \
    { "threads", KR_OPT_THREADS, KR_CLI_INT, "N", 1, 1024, NULL, KR_CLI_HELP_THREADS }
#define KR_CLI_OPT_BATCH_SIZE(help) \
    { "batch-size", KR_OPT_BATCH_SIZE, KR_CLI_INT, "N", 0, 1 << 20, NULL, help }
#define KR_CLI_OPT_DB(help) \
    { "db", KR_OPT_DB, KR_CLI_FILE, "FILE|URL", 0, 0, NULL, help }
#define KR_CLI_OPT_MARKET(help) \
    { "market", KR_OPT_MARKET, KR_CLI_TEXT, "NAME", 0, 0, NULL, help }
#define KR_CLI_OPT_ALLOW_NONFINITE(help) \
    { "allow-nonfinite-weights", KR_OPT_ALLOW_NONFINITE, KR_CLI_FLAG, NULL, 0, 0, NULL, help }

/* Where a command keeps the shared flags' values; NULL for a flag it does not take (or
 * parses itself). */
typedef struct kr_cli_forecast_flags {
    const char **model, **tokenizer, **quant, **kv_dtype, **db, **market;
    int *lookback, *max_context, *paths, *top_k, *threads, *batch_rows, *allow_nonfinite;
    uint64_t *seed;
    float *temperature, *top_p;
    kr_window_mode *window;
    kr_ohlc_mode *ohlc;
} kr_cli_forecast_flags;
/* The sampling flags' targets in a parameter struct whose fields carry the flags' names (the
 * forecast's, the analysis's and the backtest's parameters do), as designated initializers of
 * a kr_cli_forecast_flags. */
#define KR_CLI_SAMPLING_OF(params)                                              \
    .lookback = &(params).lookback, .max_context = &(params).max_context,       \
    .paths = &(params).paths, .top_k = &(params).top_k, .seed = &(params).seed, \
    .temperature = &(params).temperature, .top_p = &(params).top_p

/* -1 when `opt` is not a shared flag (or its target is NULL), 0 when `arg` was stored, 2
 * after a usage error was printed ("kronos CMD: --threads must be ..."). */
int kr_cli_forecast_flag(const char *cmd, int opt, const char *arg, const kr_cli_forecast_flags *f);

#endif
