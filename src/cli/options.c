/* cli/options — see options.h. */
#include "cli/options.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int kr_cli_opts_getopt(const kr_cli_command *cmd, struct option *out, int cap) {
    if (cmd->n_opts + 1 > cap) return -1;
    for (int i = 0; i < cmd->n_opts; i++) {
        const kr_cli_opt *o = &cmd->opts[i];
        out[i] = (struct option){ o->name, o->type == KR_CLI_FLAG ? no_argument : required_argument,
                                  NULL, o->key };
    }
    out[cmd->n_opts] = (struct option){ NULL, 0, NULL, 0 };
    return cmd->n_opts;
}

const kr_cli_opt *kr_cli_opts_find(const kr_cli_command *cmd, int key) {
    for (int i = 0; i < cmd->n_opts; i++)
        if (cmd->opts[i].key == key) return &cmd->opts[i];
    return NULL;
}

int kr_cli_opts_int(const kr_cli_command *cmd, const kr_cli_opt *o, const char *arg, int *out) {
    char *end = NULL;
    const long v = arg && *arg ? strtol(arg, &end, 10) : 0;
    if (!arg || !*arg || *end || v < o->min || v > o->max) {
        fprintf(stderr,
                "kronos %s: --%s must be an integer in %.0f..%.0f, got '%s'\n(try 'kronos %s "
                "--help')\n",
                cmd->name, o->name, o->min, o->max, arg ? arg : "", cmd->name);
        return 0;
    }
    *out = (int)v;
    return 1;
}

void kr_cli_opts_help(const kr_cli_command *cmd, FILE *f) {
    fprintf(f, "usage: kronos %s %s\n", cmd->name, cmd->synopsis);
    if (cmd->description && *cmd->description) fprintf(f, "\n%s", cmd->description);
    fputc('\n', f);
    for (int i = 0; i < cmd->n_opts; i++) {
        const kr_cli_opt *o = &cmd->opts[i];
        char head[64];
        snprintf(head, sizeof head, "%s--%s%s%s", !strcmp(o->name, "help") ? "-h, " : "", o->name,
                 o->arg ? " " : "", o->arg ? o->arg : "");
        const int col = cmd->column > 0 ? cmd->column : 24;
        if ((int)strlen(head) > col)
            fprintf(f, "  %s\n  %-*s ", head, col, "");
        else
            fprintf(f, "  %-*s ", col, head);
        for (const char *p = o->help; *p; p++) {
            fputc(*p, f);
            if (*p == '\n') fprintf(f, "  %-*s ", col, "");
        }
        if (o->def) fprintf(f, " (default %s)", o->def);
        fputc('\n', f);
    }
}

static kr_cli_opt_type type_of(const char *arg) {
    if (!arg || !*arg) return KR_CLI_FLAG;
    if (strstr(arg, "FILE") || strstr(arg, "CSV") || strstr(arg, "PATH")) return KR_CLI_FILE;
    if (strstr(arg, "DIR")) return KR_CLI_DIR;
    int lower = strchr(arg, '|') != NULL;
    for (const char *p = arg; *p && lower; p++) lower = !isupper((unsigned char)*p);
    if (lower) return KR_CLI_CHOICE; /* csv|json */
    if (!strcmp(arg, "N") || !strcmp(arg, "K")) return KR_CLI_INT;
    return KR_CLI_TEXT;
}

int kr_cli_opts_from_help(const char *help, kr_cli_opt *out, int cap, char *text, size_t text_cap) {
    int n = 0;
    size_t used = 0;
    for (const char *line = help; line && *line && n < cap;) {
        const char *eol = strchr(line, '\n');
        const size_t len = eol ? (size_t)(eol - line) : strlen(line);
        const char *p = line;
        while (p < line + len && *p == ' ') p++;
        if (p > line && !strncmp(p, "-h, ", 4)) p += 4;
        if (p > line && p + 2 < line + len && p[0] == '-' && p[1] == '-' &&
            isalnum((unsigned char)p[2])) {
            const char *name = p + 2, *e = name;
            while (e < line + len && (isalnum((unsigned char)*e) || *e == '-')) e++;
            const char *arg = NULL, *arg_end = NULL;
            /* "--flag ARG  help": one space, then the placeholder up to the next space. */
            if (e + 1 < line + len && e[0] == ' ' && e[1] != ' ') {
                arg = e + 1;
                arg_end = arg;
                while (arg_end < line + len && *arg_end != ' ') arg_end++;
            }
            const size_t nl = (size_t)(e - name), al = arg ? (size_t)(arg_end - arg) : 0;
            int seen = 0;
            for (int k = 0; k < n && !seen; k++)
                seen = strlen(out[k].name) == nl && !strncmp(out[k].name, name, nl);
            if (!seen && used + nl + al + 2 <= text_cap) {
                kr_cli_opt *o = &out[n++];
                memset(o, 0, sizeof *o);
                memcpy(text + used, name, nl);
                text[used + nl] = '\0';
                o->name = text + used;
                used += nl + 1;
                if (arg) {
                    memcpy(text + used, arg, al);
                    text[used + al] = '\0';
                    o->arg = text + used;
                    used += al + 1;
                }
                o->type = type_of(o->arg);
                /* The help: the rest of the line, then the continuation lines (indented
                 * past the flags' column, not a flag), joined by spaces. */
                const char *h = arg ? arg_end : e;
                while (h < line + len && *h == ' ') h++;
                o->help = text + used;
                size_t hl = 0;
                const char *seg = h, *seg_end = line + len;
                for (;;) {
                    const size_t sl = (size_t)(seg_end - seg);
                    if (used + hl + sl + 2 >= text_cap) break;
                    if (hl && sl) text[used + hl++] = ' ';
                    memcpy(text + used + hl, seg, sl);
                    hl += sl;
                    const char *next = seg_end < help + strlen(help) ? seg_end + 1 : NULL;
                    if (!next || !*next) break;
                    const char *ne = strchr(next, '\n');
                    const size_t nlen = ne ? (size_t)(ne - next) : strlen(next);
                    const char *q = next;
                    while (q < next + nlen && *q == ' ') q++;
                    if (q - next < 10 || q >= next + nlen || *q == '-') break;
                    seg = q;
                    seg_end = next + nlen;
                }
                text[used + hl] = '\0';
                used += hl + 1;
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    return n;
}

/* The words of a choice ("csv|json" -> "csv json") into buf. */
static const char *choice_words(const char *arg, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", arg ? arg : "");
    for (char *p = buf; *p; p++)
        if (*p == '|') *p = ' ';
    return buf;
}

void kr_cli_completion_bash(const kr_cli_described *cmds, int n, FILE *f) {
    fputs("# bash completion for kronos; generated by `kronos completion bash` from the option\n"
          "# tables that also make `kronos CMD --help` and the man page.\n"
          "_kronos() {\n"
          "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
          "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
          "    COMPREPLY=($(compgen -W \"",
          f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%s", i ? " " : "", cmds[i].name);
    fputs(" help --help --version\" -- \"$cur\")); return\n  fi\n"
          "  local cmd=${COMP_WORDS[1]} flags= files=0\n"
          "  case \"$cmd\" in\n",
          f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "    %s)\n      case \"$prev\" in\n", cmds[i].name);
        for (int k = 0; k < cmds[i].n_opts; k++) {
            const kr_cli_opt *o = &cmds[i].opts[k];
            char words[256];
            if (o->type == KR_CLI_CHOICE)
                fprintf(f, "        --%s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return;;\n",
                        o->name, choice_words(o->arg, words, sizeof words));
            else if (o->type == KR_CLI_FILE)
                fprintf(f, "        --%s) COMPREPLY=($(compgen -f -- \"$cur\")); return;;\n",
                        o->name);
            else if (o->type == KR_CLI_DIR)
                fprintf(f, "        --%s) COMPREPLY=($(compgen -d -- \"$cur\")); return;;\n",
                        o->name);
            else if (o->type != KR_CLI_FLAG)
                fprintf(f, "        --%s) return;;\n", o->name);
        }
        fputs("      esac\n      flags=\"", f);
        for (int k = 0; k < cmds[i].n_opts; k++)
            fprintf(f, "%s--%s", k ? " " : "", cmds[i].opts[k].name);
        fprintf(f, " --calendar-dir\"; files=%d;;\n", cmds[i].operands == KR_CLI_FILE);
    }
    fputs("  esac\n"
          "  [ \"$prev\" = --calendar-dir ] && { COMPREPLY=($(compgen -d -- \"$cur\")); return; }\n"
          "  if [[ $cur == -* || $files -eq 0 ]]; then\n"
          "    COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n"
          "  else\n"
          "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
          "  fi\n"
          "}\n"
          "complete -o filenames -F _kronos kronos\n",
          f);
}

/* zsh wants ':' and '[' ']' in descriptions escaped. */
static void zsh_text(const char *s, FILE *f) {
    for (; s && *s && *s != '\n'; s++) {
        if (*s == ':' || *s == '[' || *s == ']' || *s == '\\') fputc('\\', f);
        fputc(*s == '\'' ? '"' : *s, f);
    }
}

void kr_cli_completion_zsh(const kr_cli_described *cmds, int n, FILE *f) {
    fputs("#compdef kronos\n"
          "# zsh completion for kronos; generated by `kronos completion zsh` from the option\n"
          "# tables that also make `kronos CMD --help` and the man page.\n"
          "_kronos() {\n"
          "  local -a commands\n"
          "  commands=(\n",
          f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "    '%s:", cmds[i].name);
        zsh_text(cmds[i].summary, f);
        fputs("'\n", f);
    }
    fputs("  )\n"
          "  if (( CURRENT == 2 )); then\n"
          "    _describe 'command' commands\n"
          "    return\n"
          "  fi\n"
          "  case $words[2] in\n",
          f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "    %s)\n      _arguments \\\n", cmds[i].name);
        for (int k = 0; k < cmds[i].n_opts; k++) {
            const kr_cli_opt *o = &cmds[i].opts[k];
            char words[256];
            fprintf(f, "        '--%s[", o->name);
            zsh_text(o->help && *o->help ? o->help : o->name, f);
            fputc(']', f);
            if (o->type == KR_CLI_CHOICE)
                fprintf(f, ":%s:(%s)", o->name, choice_words(o->arg, words, sizeof words));
            else if (o->type == KR_CLI_FILE)
                fprintf(f, ":%s:_files", o->name);
            else if (o->type == KR_CLI_DIR)
                fprintf(f, ":%s:_files -/", o->name);
            else if (o->type != KR_CLI_FLAG)
                fprintf(f, ":%s: ", o->name);
            fputs("' \\\n", f);
        }
        fputs("        '--calendar-dir[exchange calendar files]:dir:_files -/'", f);
        fputs(cmds[i].operands == KR_CLI_FILE ? " \\\n        '*:file:_files'\n      ;;\n"
                                              : "\n      ;;\n",
              f);
    }
    fputs("  esac\n}\n_kronos \"$@\"\n", f);
}

/* roff text: a leading '.' or '\'' and backslashes escaped, hyphens of flags kept literal. */
static void roff(const char *s, FILE *f) {
    int bol = 1;
    for (; s && *s; s++) {
        if (bol && (*s == '.' || *s == '\'')) fputs("\\&", f);
        if (*s == '\\')
            fputs("\\e", f);
        else if (*s == '-')
            fputs("\\-", f);
        else if (*s == '\n')
            fputc(' ', f);
        else if ((unsigned char)*s >= 0xC0) { /* UTF-8: groff's \[uXXXX] escape */
            const unsigned char c = (unsigned char)*s;
            int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
            unsigned cp = c & (0x3F >> extra);
            while (extra-- > 0 && (s[1] & 0xC0) == 0x80) cp = cp << 6 | (*++s & 0x3F);
            if (cp == 0x1D40) /* modifier letter T (X^T X): no glyph in groff's fonts */
                fputs("\\(ha\\&T", f);
            else
                fprintf(f, "\\[u%04X]", cp);
        } else if ((unsigned char)*s < 0x80)
            fputc(*s, f);
        bol = 0;
    }
}

void kr_cli_man_page(const kr_cli_described *cmds, int n, const char *version, FILE *f) {
    fprintf(f,
            ".\\\" Generated by `kronos man` from the option tables of `kronos CMD --help`.\n"
            ".TH KRONOS 1 \"\" \"kronos %s\" \"User Commands\"\n"
            ".SH NAME\nkronos \\- forecast OHLCV candles with the Kronos foundation models\n"
            ".SH SYNOPSIS\n.B kronos\n.I command\n[\\fIflags\\fR]\n"
            ".SH DESCRIPTION\n"
            "kronos runs the Kronos K\\-line foundation models on the CPU: forecasts from "
            "candle files, an HTTP server, analysis reports. Every command takes "
            "\\fB\\-\\-help\\fR; every command also takes \\fB\\-\\-calendar\\-dir\\fR "
            "\\fIDIR\\fR, exchange calendar files that replace or extend the shipped ones.\n"
            ".SH COMMANDS\n",
            version);
    for (int i = 0; i < n; i++) {
        fprintf(f, ".SS \"kronos %s\"\n", cmds[i].name);
        roff(cmds[i].summary, f);
        fputc('\n', f);
        if (cmds[i].synopsis) {
            fputs(".PP\n.B kronos ", f);
            fputs(cmds[i].name, f);
            fputc(' ', f);
            roff(cmds[i].synopsis, f);
            fputc('\n', f);
        }
        for (int k = 0; k < cmds[i].n_opts; k++) {
            const kr_cli_opt *o = &cmds[i].opts[k];
            fputs(".TP\n.BR \\-\\-", f);
            roff(o->name, f);
            if (o->arg) {
                fputs(" \" \" \\fI", f);
                roff(o->arg, f);
                fputs("\\fR", f);
            }
            fputc('\n', f);
            roff(o->help && *o->help ? o->help : "(see kronos ", f);
            if (!(o->help && *o->help)) {
                roff(cmds[i].name, f);
                fputs(" \\-\\-help)", f);
            }
            if (o->def) fprintf(f, " (default %s)", o->def);
            fputc('\n', f);
        }
    }
    fputs(".SH ENVIRONMENT\n.TP\n.B KRONOS_DB\nthe candle store (default "
          "$XDG_DATA_HOME/kronos/kronos.db)\n"
          ".TP\n.B KRONOS_CALENDAR_DIR\nexchange calendar files that replace or extend the "
          "shipped ones\n"
          ".TP\n.B KRONOS_HOME\nwhere the demo model, the example data and the web page are "
          "found (default: next to the binary)\n"
          ".TP\n.B KRONOS_ISA\nscalar, avx2 or avx512: the kernels used (never above what the "
          "CPU runs)\n"
          ".SH SEE ALSO\nREADME.md, docs/api.md, docs/report.md, data/calendars/README.md in "
          "the kronos sources.\n",
          f);
}
