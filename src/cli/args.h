/*
 * cli/args — strict parsing of flag values (whole string, range-checked) and the model
 * directory conventions shared by the commands.
 */
#ifndef KR_CLI_ARGS_H
#define KR_CLI_ARGS_H

#include <stdint.h>
#include <stdio.h>

int kr_arg_int(const char *s, long min, long max, int *out);
int kr_arg_u64(const char *s, uint64_t *out);
int kr_arg_float(const char *s, double min, double max, float *out);
int kr_arg_double(const char *s, double min, double max, double *out);

/* 1 if s names a weight format (f32, bf16, int8, fp8, q4) / a KV dtype (f32, bf16, int8). */
int kr_arg_quant(const char *s);
int kr_arg_kv_dtype(const char *s);
/* 1 if s is a quantisation method: rtn, awq, smoothquant, gptq. */
int kr_arg_quant_method(const char *s);
/* NULL when --method can quantise to --quant (the library's rule, asked before any loading),
 * else the reason it cannot. */
const char *kr_arg_quant_method_mismatch(const char *method, const char *quant);

/* --allow-nonfinite-weights, taken by every command that loads a model: sets
 * kr_model_params.allow_nonfinite, so a checkpoint with NaN or infinite weights loads (it is
 * refused by default). The getopt code is outside the range of the short letters. */
enum { KR_OPT_ALLOW_NONFINITE = 0x4000 };
#define KR_OPT_ALLOW_NONFINITE_ENTRY \
    { "allow-nonfinite-weights", no_argument, NULL, KR_OPT_ALLOW_NONFINITE }

/* Resolves --model / --tokenizer: a DIR with predictor/ and tokenizer/ subdirectories stands
 * for both; a hub name (org/name) already fetched by `kronos pull` stands for its snapshot;
 * with neither given, the bundled demo model is used. Writes into the buffers (PATH_MAX).
 * Returns 0; -1 with a message for a usage error; -2 for a hub name not downloaded yet. */
int kr_resolve_model_dirs(const char *model, const char *tokenizer, char *pred_dir, char *tok_dir,
                          char *msg, size_t msglen);

/* Prints "kronos <cmd>: error: <msg>" to stderr and returns exit code 1. */
int kr_cli_fail(const char *cmd, const char *msg);
/* Whether an output file can be written, asked before a long run instead of after it: opens
 * it for appending (creating it) and removes it again if it was not there. 0, or 1 after an
 * error naming the path and the reason. */
int kr_cli_check_writable(const char *cmd, const char *path);
/* Writes text to path (NULL: stdout), says "kronos CMD: wrote PATH" on stderr for a file.
 * 0, or 1 after an error naming the file (cannot open, a failed write or close). */
int kr_cli_write_text(const char *cmd, const char *path, const char *text);
/* Whether a and b name one existing file (the same device and inode: through a link, a
 * relative path or another spelling too). 0 when either does not exist. */
int kr_cli_same_file(const char *a, const char *b);
/* 2 after a usage error when output names the same file as `other` (the store, an input):
 * writing it would destroy what the command reads; else 0. what: "the database". */
int kr_cli_refuse_same_file(const char *cmd, const char *output, const char *other,
                            const char *what);
/* --db's value checked: 2 after a usage error when it is empty (an unset shell variable,
 * "--db $DB", is not a wish for the default store), else 0. */
int kr_cli_db_flag(const char *cmd, const char *value);
/* Usage error: prints the message and a --help hint, returns 2. */
int kr_cli_usage_error(const char *cmd, const char *fmt, const char *arg);

/* The sampling flags forecast and analyze share, with one spelling, range and message each.
 * A command points at the fields it has (NULL for a flag it does not take) and registers the
 * long options with these getopt letters. */
enum {
    KR_OPT_LOOKBACK = 'l',
    KR_OPT_MAX_CONTEXT = 'c',
    KR_OPT_PATHS = 'p',
    KR_OPT_SEED = 's',
    KR_OPT_TEMPERATURE = 'T',
    KR_OPT_TOP_P = 'P',
    KR_OPT_TOP_K = 'k',
};
typedef struct kr_cli_sampling {
    int *lookback, *max_context, *paths, *top_k;
    uint64_t *seed;
    float *temperature, *top_p;
} kr_cli_sampling;
/* The flags' targets in a parameter struct whose fields carry the flags' names (the
 * forecast's and the analysis's parameters both do). */
#define KR_CLI_SAMPLING_OF(params)                                                  \
    {                                                                               \
        .lookback = &(params).lookback, .max_context = &(params).max_context,       \
        .paths = &(params).paths, .top_k = &(params).top_k, .seed = &(params).seed, \
        .temperature = &(params).temperature, .top_p = &(params).top_p,             \
    }
/* -1 when `opt` is not one of those flags (or its field is NULL), 0 when `arg` was stored,
 * 2 after a usage error was printed. */
int kr_cli_sampling_flag(const char *cmd, int opt, const char *arg, const kr_cli_sampling *s);

#endif
