/* cli/forecast_flags — see forecast_flags.h. */
#include "cli/forecast_flags.h"

#include <string.h>

#include "cli/args.h"
#include "kronos/series.h"

/* The integer flags' entries, whose ranges the checks use: "--NAME must be an integer in
 * MIN..MAX, got 'ARG'" (kr_cli_opt_int). */
static const kr_cli_opt k_lookback = KR_CLI_OPT_LOOKBACK(""),
                        k_max_context = KR_CLI_OPT_MAX_CONTEXT(""), k_paths = KR_CLI_OPT_PATHS(""),
                        k_top_k = KR_CLI_OPT_TOP_K(""), k_threads = KR_CLI_OPT_THREADS,
                        k_batch_size = KR_CLI_OPT_BATCH_SIZE("");

static int int_flag(const char *cmd, const kr_cli_opt *o, const char *arg, int *out) {
    return kr_cli_opt_int(cmd, o, arg, out) ? 0 : 2;
}

static int text_flag(const char *arg, const char **out) {
    *out = arg;
    return 0;
}

int kr_cli_forecast_flag(const char *cmd, int opt, const char *arg,
                         const kr_cli_forecast_flags *f) {
    switch (opt) {
    case KR_OPT_MODEL: return f->model ? text_flag(arg, f->model) : -1;
    case KR_OPT_TOKENIZER: return f->tokenizer ? text_flag(arg, f->tokenizer) : -1;
    case KR_OPT_ALLOW_NONFINITE:
        if (!f->allow_nonfinite) return -1;
        *f->allow_nonfinite = 1;
        return 0;
    case KR_OPT_LOOKBACK:
        if (!f->lookback) return -1;
        return int_flag(cmd, &k_lookback, arg, f->lookback);
    case KR_OPT_MAX_CONTEXT:
        if (!f->max_context) return -1;
        return int_flag(cmd, &k_max_context, arg, f->max_context);
    case KR_OPT_PATHS:
        if (!f->paths) return -1;
        return int_flag(cmd, &k_paths, arg, f->paths);
    case KR_OPT_TOP_K:
        if (!f->top_k) return -1;
        return int_flag(cmd, &k_top_k, arg, f->top_k);
    case KR_OPT_THREADS:
        if (!f->threads) return -1;
        return int_flag(cmd, &k_threads, arg, f->threads);
    case KR_OPT_BATCH_SIZE:
        if (!f->batch_rows) return -1;
        /* "(rows)" said after the range, as the commands always did. */
        if (kr_arg_int(arg, (long)k_batch_size.min, (long)k_batch_size.max, f->batch_rows))
            return 0;
        return kr_cli_usage_error(
            cmd, "--batch-size must be an integer in 0..1048576 (rows), got '%s'", arg);
    case KR_OPT_SEED:
        if (!f->seed) return -1;
        if (kr_arg_u64(arg, f->seed)) return 0;
        return kr_cli_usage_error(
            cmd, "--seed must be an unsigned 64-bit integer (decimal or 0x hex), got '%s'", arg);
    case KR_OPT_TEMPERATURE:
        if (!f->temperature) return -1;
        if (kr_arg_float(arg, 1e-6, 1e6, f->temperature)) return 0;
        return kr_cli_usage_error(cmd,
                                  "--temperature must be a number in [1e-6, 1e6], got '%s' (greedy "
                                  "decoding, the limit of temperature 0, is --top-k 1)",
                                  arg);
    case KR_OPT_TOP_P:
        if (!f->top_p) return -1;
        if (kr_arg_float(arg, 1e-9, 1.0, f->top_p)) return 0;
        return kr_cli_usage_error(cmd, "--top-p must be in (0, 1], got '%s'", arg);
    case KR_OPT_WINDOW:
        if (!f->window) return -1;
        if (!strcmp(arg, "exact") || !strcmp(arg, "rolling")) {
            *f->window = !strcmp(arg, "exact") ? KR_WINDOW_EXACT : KR_WINDOW_ROLLING;
            return 0;
        }
        return kr_cli_usage_error(cmd, "--window must be exact or rolling, got '%s'", arg);
    case KR_OPT_OHLC:
        if (!f->ohlc) return -1;
        if (kr_ohlc_mode_parse(arg, f->ohlc) == 0) return 0;
        return kr_cli_usage_error(cmd, "--ohlc must be raw or consistent, got '%s'", arg);
    case KR_OPT_QUANT:
        if (!f->quant) return -1;
        if (!kr_arg_quant(arg))
            return kr_cli_usage_error(
                cmd, "--quant must be one of f32, bf16, int8, fp8, q4, got '%s'", arg);
        return text_flag(arg, f->quant);
    case KR_OPT_KV_DTYPE:
        if (!f->kv_dtype) return -1;
        if (!kr_arg_kv_dtype(arg))
            return kr_cli_usage_error(cmd, "--kv-dtype must be one of f32, bf16, int8, got '%s'",
                                      arg);
        return text_flag(arg, f->kv_dtype);
    case KR_OPT_DB:
        if (!f->db) return -1;
        if (kr_cli_db_flag(cmd, arg)) return 2; /* empty: not a wish for the default store */
        return text_flag(arg, f->db);
    case KR_OPT_MARKET: {
        if (!f->market) return -1;
        const kr_calendar *cal;
        kr_error err;
        if (kr_calendar_find(arg, &cal, &err) != KR_OK)
            return kr_cli_usage_error(cmd, "--market: %s", err.message);
        return text_flag(arg, f->market);
    }
    default: return -1;
    }
}
