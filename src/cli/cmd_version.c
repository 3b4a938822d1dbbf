/*
 * cli/cmd_version — `kronos version`: what this build is, for a bug report or a support
 * question: the version, the commit and build type it was configured from, the CPU kernel rows
 * (those the CPU runs and the one in use, which KRONOS_ISA may lower) and the libraries.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/parse.h"
#include "common/options.h"
#include "kronos.h"
#include "kronos/build_info.h"

#define CMD "version"

static const kr_cli_opt k_opts[] = {
    { "json", 'j', KR_CLI_FLAG, NULL, 0, 0, NULL, "the same as one JSON object" },
    { "help", 'h', KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

const kr_cli_command kr_cli_version_spec = {
    "version",
    "[--json]",
    "version, commit, build type, CPU kernels and libraries of this build",
    "Prints the version, the git commit and build type it was configured from, the\nCPU "
    "kernel rows (supported, and the one in use) and the libraries it runs with.\n",
    k_opts,
    (int)(sizeof k_opts / sizeof k_opts[0]),
    KR_CLI_FLAG,
    0,
    NULL,
    NULL,
};

int kr_cmd_version(int argc, char **argv) {
    int json = 0;
    kr_cli_parse ps;
    kr_cli_parse_begin(&ps, &kr_cli_version_spec, NULL, argc, argv);
    for (int c; (c = kr_cli_parse_next(&ps)) != 0;) {
        switch (c) {
        case 'j': json = 1; break;
        }
    }
    if (ps.status) return ps.status < 0 ? 0 : ps.status;
    if (optind < argc) return kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
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
