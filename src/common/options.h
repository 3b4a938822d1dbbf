/*
 * common/options — one table per command of its flags (name, type, range, default, help), which
 * drives the getopt parsing, the --help text, the bash and zsh completion and the man page, so
 * none of them can tell another story. The tables are the CLI's (src/cli/cmd_*.c); this is
 * the machinery, libc only, in common/ with what the front ends share.
 */
#ifndef KR_COMMON_OPTIONS_H
#define KR_COMMON_OPTIONS_H

#include <getopt.h>
#include <stdio.h>

#include "kronos/status.h" /* KR_PRIVATE */

typedef enum kr_cli_opt_type {
    KR_CLI_FLAG = 0, /* no argument */
    KR_CLI_INT, /* an integer in [min, max] */
    KR_CLI_NUM, /* a number in [min, max] */
    KR_CLI_TEXT, /* any text (a name, a list) */
    KR_CLI_FILE, /* a path: completion offers files */
    KR_CLI_DIR, /* a directory: completion offers directories */
    KR_CLI_CHOICE, /* one of the '|'-separated words of arg ("csv|json") */
} kr_cli_opt_type;

typedef struct kr_cli_opt {
    const char *name; /* long name without "--" */
    int key; /* what getopt_long returns for it */
    kr_cli_opt_type type;
    const char *arg; /* placeholder shown after the name ("N", "FILE", "csv|json"); NULL: flag */
    double min, max; /* KR_CLI_INT, KR_CLI_NUM: the accepted range */
    const char *def; /* the default as shown ("32"); NULL: none */
    const char *help; /* --help text; '\n' continues it on the next, aligned line */
} kr_cli_opt;

typedef struct kr_cli_command {
    const char *name; /* "calendars" */
    const char *synopsis; /* after "kronos NAME": "[--json]" */
    const char *summary; /* one line, for the command list and the man page */
    const char *description; /* paragraphs printed between the usage line and the flags */
    const kr_cli_opt *opts;
    int n_opts;
    kr_cli_opt_type operands; /* what the operands are (KR_CLI_FILE: files), KR_CLI_FLAG: none */
    int column; /* --help: the width of the flag column (0: 24); a flag and argument wider
                   than it keep their help on their line, two spaces after; a bare flag wider
                   than it puts its help on the next line */
    const char *const *groups; /* --help: pairs of a flag's name and the lines printed before
                                  it ("origins:"), then NULL; NULL: one group */
    const char *epilogue; /* --help: paragraphs after the flags, a blank line before; NULL */
} kr_cli_command;

#define KR_CLI_MAX_OPTS 128

/* getopt_long's table for cmd (its options and a terminating zero entry) into out[cap].
 * Returns the number of options, or -1 when cap is too small. */
KR_PRIVATE int kr_cli_opts_getopt(const kr_cli_command *cmd, struct option *out, int cap);
/* The option of cmd that getopt returned key for, or NULL. */
KR_PRIVATE const kr_cli_opt *kr_cli_opts_find(const kr_cli_command *cmd, int key);
/* An integer argument checked against the option's range: 1 and *out set, or 0 after printing
 * "kronos CMD: --NAME must be an integer in MIN..MAX, got 'ARG'" and the --help hint. */
KR_PRIVATE int kr_cli_opts_int(const kr_cli_command *cmd, const kr_cli_opt *o, const char *arg,
                               int *out);
/* The same for the command named cmd. */
KR_PRIVATE int kr_cli_opt_int(const char *cmd, const kr_cli_opt *o, const char *arg, int *out);
/* The --help text: "usage: kronos NAME SYNOPSIS", the description, then one entry per option
 * (the name and argument in 27 columns, the help, and "(default X)" when it has one). */
KR_PRIVATE void kr_cli_opts_help(const kr_cli_command *cmd, FILE *f);

/* Every command, as the generators see it: name, summary, flags. */
typedef struct kr_cli_described {
    const char *name, *summary, *synopsis;
    const kr_cli_opt *opts;
    int n_opts;
    kr_cli_opt_type operands;
} kr_cli_described;

/* bash / zsh completion scripts and the man page (roff) for the commands described. */
KR_PRIVATE void kr_cli_completion_bash(const kr_cli_described *cmds, int n, FILE *f);
KR_PRIVATE void kr_cli_completion_zsh(const kr_cli_described *cmds, int n, FILE *f);
KR_PRIVATE void kr_cli_man_page(const kr_cli_described *cmds, int n, const char *version, FILE *f);

#endif
