/*
 * cli/parse — the loop every command runs over its flags, driven by its option table
 * (common/options.h): getopt over the table, the shared forecast flags applied
 * (cli/forecast_flags.h), --help printed from the table, an unknown flag or a missing value
 * refused. The command's own switch sees only its own flags:
 *
 *     kr_cli_parse ps;
 *     kr_cli_parse_begin(&ps, &kr_cli_x_spec, &shared, argc, argv);
 *     for (int c; (c = kr_cli_parse_next(&ps)) != 0;)
 *         switch (c) { ... }
 *     if (ps.status) return ...;   (-1 after --help, 2 after a usage error)
 */
#ifndef KR_CLI_PARSE_H
#define KR_CLI_PARSE_H

#include <getopt.h>

#include "cli/forecast_flags.h"
#include "common/options.h"

typedef struct kr_cli_parse {
    const kr_cli_command *cmd;
    const kr_cli_forecast_flags *shared; /* NULL: the command takes none */
    int argc;
    char **argv;
    int refuse_empty; /* set after begin: a flag given an empty value is a usage error, named
                         ("--db is empty (an unset variable?) ..."), before anything applies it */
    int status; /* once kr_cli_parse_next returned 0: 0 when every flag was read (optind is at
                   the operands), -1 after --help was printed, 2 after a usage error was */
    struct option longopts[KR_CLI_MAX_OPTS];
    unsigned char given[KR_CLI_MAX_OPTS]; /* per table entry: the flag was on the line */
} kr_cli_parse;

void kr_cli_parse_begin(kr_cli_parse *p, const kr_cli_command *cmd,
                        const kr_cli_forecast_flags *shared, int argc, char **argv);
/* The getopt code of the next flag that is the command's own (its value in optarg); 0 when
 * there is none left, or the parse stopped (status says why). */
int kr_cli_parse_next(kr_cli_parse *p);
/* 1 when the flag of getopt code key was given (a shared one too). */
int kr_cli_parse_given(const kr_cli_parse *p, int key);

#endif
