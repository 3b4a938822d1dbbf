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

#endif
