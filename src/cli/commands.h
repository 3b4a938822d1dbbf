/*
 * cli/commands — one function per `kronos <command>`. Each parses its own flags, prints
 * errors to stderr and returns the process exit code (0 ok, 1 runtime error, 2 usage error).
 */
#ifndef KR_CLI_COMMANDS_H
#define KR_CLI_COMMANDS_H

#include <stddef.h>

int kr_cmd_forecast(int argc, char **argv);
int kr_cmd_gen_random(int argc, char **argv);
int kr_cmd_bench(int argc, char **argv);
int kr_cmd_serve(int argc, char **argv);
int kr_cmd_ingest(int argc, char **argv);
int kr_cmd_store(int argc, char **argv);
int kr_cmd_analyze(int argc, char **argv);
int kr_cmd_pull(int argc, char **argv);
int kr_cmd_quantize(int argc, char **argv);
int kr_cmd_eval_quant(int argc, char **argv);
int kr_cmd_calendars(int argc, char **argv);
int kr_cmd_version(int argc, char **argv);
int kr_cmd_completion(int argc, char **argv);
int kr_cmd_man(int argc, char **argv);

/* main.c: every command for the completion and man page generators, from its option table
 * (none for a command a build left out, and for completion and man). Returns the count. */
#include "common/options.h"
#define MAX_COMMANDS 32
int kr_cli_describe(kr_cli_described *out, int cap);
/* cmd_finetune.c: finetune's table, its own flags and one per config key (static storage). */
const kr_cli_command *kr_cli_finetune_spec(void);

/* cmd_calendars.c: 1 when --calendar-dir was given (it then outranks a config file's
 * calendar_dir). */
int kr_cli_calendar_dir_given(void);
int kr_cli_load_calendars(const char *user_dir, int from_flag, char *msg, size_t cap);
int kr_cmd_finetune(int argc, char **argv);
int kr_cmd_backtest(int argc, char **argv);

#endif
