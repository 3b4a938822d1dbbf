/*
 * cli/commands — one function per `kronos <command>`. Each parses its own flags, prints
 * errors to stderr and returns the process exit code (0 ok, 1 runtime error, 2 usage error).
 */
#ifndef KR_CLI_COMMANDS_H
#define KR_CLI_COMMANDS_H

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
int kr_cmd_backtest(int argc, char **argv);

#endif
