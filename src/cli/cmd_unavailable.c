/*
 * cli/cmd_unavailable — the commands of the libraries a build left out (CMake options
 * KRONOS_BUILD_SERVER, KRONOS_BUILD_ANALYST, KRONOS_BUILD_EVAL): each says what the build lacks
 * and how to get it, and exits 2, instead of being unknown.
 */
#include <stdio.h>

#include "cli/commands.h"

#if !KRONOS_BUILD_SERVER || !KRONOS_BUILD_ANALYST || !KRONOS_BUILD_EVAL
static int unavailable(const char *command, const char *what, const char *option) {
    fprintf(stderr, "kronos %s: built without %s (%s=OFF); configure with -D%s=ON to have it\n",
            command, what, option, option);
    return 2;
}
#endif

#if !KRONOS_BUILD_SERVER
int kr_cmd_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    return unavailable("serve", "the HTTP server", "KRONOS_BUILD_SERVER");
}
#endif

#if !KRONOS_BUILD_ANALYST
int kr_cmd_analyze(int argc, char **argv) {
    (void)argc, (void)argv;
    return unavailable("analyze", "the analyst", "KRONOS_BUILD_ANALYST");
}
#endif

#if !KRONOS_BUILD_EVAL
int kr_cmd_bench(int argc, char **argv) {
    (void)argc, (void)argv;
    return unavailable("bench", "the evaluation library", "KRONOS_BUILD_EVAL");
}

int kr_cmd_eval_quant(int argc, char **argv) {
    (void)argc, (void)argv;
    return unavailable("eval-quant", "the evaluation library", "KRONOS_BUILD_EVAL");
}

int kr_cmd_backtest(int argc, char **argv) {
    (void)argc, (void)argv;
    return unavailable("backtest", "the evaluation library", "KRONOS_BUILD_EVAL");
}
#endif
