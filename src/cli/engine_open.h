/*
 * cli/engine_open — what every forecasting command does first: load the model and create the
 * context its requests go through, with the command's --threads / --quant / --kv-dtype.
 */
#ifndef KR_CLI_ENGINE_OPEN_H
#define KR_CLI_ENGINE_OPEN_H

#include "kronos.h"

typedef struct kr_cli_engine {
    kr_model *model;
    kr_context *ctx;
} kr_cli_engine;

/* Loads pred_dir/tok_dir (quant may be NULL; allow_nonfinite: skip the NaN/inf check) and
 * creates a context of `threads` (<= 0: all CPUs) with kv_dtype (may be NULL). Returns 0, or
 * 1 after printing the error for `cmd`. */
int kr_cli_engine_open(const char *cmd, const char *pred_dir, const char *tok_dir,
                       const char *quant, int allow_nonfinite, int threads, const char *kv_dtype,
                       kr_cli_engine *e);
/* kr_cli_engine_open with the context's parameters given (their n_threads and kv_dtype are
 * set from threads / kv_dtype here): a backtest's context runs without the prefix cache, which
 * its shifting windows never hit. */
int kr_cli_engine_open_with(const char *cmd, const char *pred_dir, const char *tok_dir,
                            const char *quant, int allow_nonfinite, int threads,
                            const char *kv_dtype, const kr_context_params *params,
                            kr_cli_engine *e);
void kr_cli_engine_close(kr_cli_engine *e);

#endif
