/*
 * cli/cmd_completion — `kronos completion bash|zsh`: the shell completion scripts, written
 * from the commands' option tables (common/options), the same tables their --help prints. The
 * build runs it (src/cli/CMakeLists.txt) and `cmake --install` installs its output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/options.h"
#include "kronos.h"

int kr_cmd_completion(int argc, char **argv) {
    if (argc != 2 || (strcmp(argv[1], "bash") && strcmp(argv[1], "zsh"))) {
        if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            printf("usage: kronos completion bash|zsh\n\nWrites the shell's completion script "
                   "for kronos to standard output:\n  source <(kronos completion bash)   "
                   "# or install it as\n  # /usr/share/bash-completion/completions/kronos, "
                   "or as _kronos on $fpath (zsh)\n");
            return 0;
        }
        return kr_cli_usage_error("completion", "%s", "give the shell: bash or zsh");
    }
    kr_cli_described cmds[MAX_COMMANDS];
    const int n = kr_cli_describe(cmds, MAX_COMMANDS);
    if (!strcmp(argv[1], "bash"))
        kr_cli_completion_bash(cmds, n, stdout);
    else
        kr_cli_completion_zsh(cmds, n, stdout);
    return 0;
}
