/* cli/parse — see parse.h. */
#include "cli/parse.h"

#include <stdio.h>
#include <string.h>

#include "cli/args.h"

void kr_cli_parse_begin(kr_cli_parse *p, const kr_cli_command *cmd,
                        const kr_cli_forecast_flags *shared, int argc, char **argv) {
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->shared = shared;
    p->argc = argc;
    p->argv = argv;
    kr_cli_opts_getopt(cmd, p->longopts, KR_CLI_MAX_OPTS);
    optind = 1;
}

int kr_cli_parse_next(kr_cli_parse *p) {
    for (;;) {
        int index = -1;
        const int c = getopt_long(p->argc, p->argv, "h", p->longopts, &index);
        if (c == -1) return 0;
        if (index >= 0 && index < KR_CLI_MAX_OPTS) p->given[index] = 1;
        if (p->refuse_empty && optarg && !optarg[0] && index >= 0 &&
            p->longopts[index].has_arg == required_argument) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "--%s is empty (an unset variable?): give a value, or leave the flag out "
                     "for its default",
                     p->longopts[index].name);
            p->status = kr_cli_usage_error(p->cmd->name, "%s", msg);
            return 0;
        }
        if (c == 'h') {
            kr_cli_opts_help(p->cmd, stdout);
            p->status = -1;
            return 0;
        }
        if (!kr_cli_opts_find(p->cmd, c)) { /* '?': getopt said which flag and why */
            p->status = kr_cli_usage_error(p->cmd->name, "%s", "unknown flag");
            return 0;
        }
        const int r = p->shared ? kr_cli_forecast_flag(p->cmd->name, c, optarg, p->shared) : -1;
        if (r == 2) {
            p->status = 2;
            return 0;
        }
        if (r != 0) return c;
    }
}

int kr_cli_parse_given(const kr_cli_parse *p, int key) {
    for (int i = 0; i < p->cmd->n_opts; i++)
        if (p->cmd->opts[i].key == key) return p->given[i];
    return 0;
}
