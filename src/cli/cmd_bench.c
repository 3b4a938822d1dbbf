/* cli/cmd_bench — `kronos bench` (in progress). */
#include <stdio.h>

#include "cli/commands.h"

int kr_cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kronos bench: not built yet\n");
    return 1;
}
