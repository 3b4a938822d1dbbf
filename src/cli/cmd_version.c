/*
 * cli/cmd_version — `kronos version`: what this build is, for a bug report or a support
 * question: the version, the commit and build type it was configured from, the CPU kernel rows
 * (those the CPU runs and the one in use, which KRONOS_ISA may lower) and the libraries.
 */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "kronos.h"

#define CMD "version"

int kr_cmd_version(int argc, char **argv) {
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: kronos version [--json]\n\nPrints the version, the git commit and "
                   "build type it was configured from, the\nCPU kernel rows (supported, and "
                   "the one in use) and the libraries it runs with.\n");
            return 0;
        } else {
            return kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[i]);
        }
    }
    kr_build_info b;
    kr_get_build_info(&b);
    if (json) {
        /* Every field is a name or a version: nothing to escape. */
        printf("{\"version\":\"%s\",\"git_commit\":\"%s\",\"build_type\":\"%s\",\"compiler\":"
               "\"%s\",\"isa_active\":\"%s\",\"isa_supported\":\"%s\",\"libraries\":\"%s\"}\n",
               b.version, b.git_commit, b.build_type, b.compiler, b.isa_active, b.isa_supported,
               b.libraries);
        return 0;
    }
    printf("kronos %s\n", b.version);
    printf("commit:     %s\n", b.git_commit);
    printf("build:      %s (%s)\n", b.build_type, b.compiler);
    printf("kernels:    %s in use; this CPU runs: %s\n", b.isa_active, b.isa_supported);
    printf("libraries:  %s\n", b.libraries);
    return 0;
}
