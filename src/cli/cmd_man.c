/*
 * cli/cmd_man — `kronos man`: the man page kronos(1) in roff, written from the commands'
 * option tables (common/options) as the completion scripts are. The build runs it
 * (src/cli/CMakeLists.txt) and `cmake --install` installs share/man/man1/kronos.1.
 */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/options.h"
#include "kronos.h"

int kr_cmd_man(int argc, char **argv) {
    if (argc > 1) {
        if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
            printf("usage: kronos man\n\nWrites the man page kronos(1) (roff) to standard "
                   "output: kronos man | man -l -\n");
            return 0;
        }
        return kr_cli_usage_error("man", "unexpected argument '%s'", argv[1]);
    }
    kr_cli_described cmds[MAX_COMMANDS];
    const int n = kr_cli_describe(cmds, MAX_COMMANDS);
    kr_cli_man_page(cmds, n, kr_version(), stdout);
    return 0;
}
