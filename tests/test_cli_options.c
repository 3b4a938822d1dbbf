/*
 * The option tables (common/options.h), over every command of `kronos --help`: a command's --help
 * lists exactly the flags of its table, no more and no fewer, and the bash completion, the
 * zsh completion and the man page, written from the same tables, name every one of them.
 * Nothing is read back from --help any more, so a flag added to a hand-written help text, or
 * to a table without its help, is caught here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#define MAX_CMDS 32
#define MAX_FLAGS 160

typedef struct flag_set {
    char names[MAX_FLAGS][48];
    int n;
} flag_set;

static const char *g_tmp;

static int setup(void **state) {
    (void)state;
    g_tmp = kr_test_dir();
    return g_tmp ? 0 : -1;
}

static char *run_ok(const char *args) {
    const kr_test_run *r = kr_test_kronos(g_tmp, "", args);
    if (r->code != 0) fail_msg("kronos %s: exit %d\nstderr: %.400s", args, r->code, r->err);
    char *out = strdup(r->out);
    assert_non_null(out);
    return out;
}

static int has(const flag_set *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) return 1;
    return 0;
}

static void add(flag_set *s, const char *name, size_t len) {
    char buf[48];
    assert_true(len > 0 && len < sizeof buf);
    memcpy(buf, name, len);
    buf[len] = '\0';
    if (has(s, buf)) return;
    assert_true(s->n < MAX_FLAGS);
    snprintf(s->names[s->n++], sizeof s->names[0], "%s", buf);
}

static size_t flag_len(const char *p) {
    size_t n = 0;
    while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= '0' && p[n] <= '9') || p[n] == '-') n++;
    return n;
}

/* The flags --help lists: each line that starts with spaces, then "--NAME" or "-h, --NAME". */
static void help_flags(const char *help, flag_set *out) {
    for (const char *line = help; line && *line;) {
        const char *p = line;
        while (*p == ' ') p++;
        if (p > line && !strncmp(p, "-h, ", 4)) p += 4;
        if (p > line && p[0] == '-' && p[1] == '-' && flag_len(p + 2))
            add(out, p + 2, flag_len(p + 2));
        line = strchr(line, '\n');
        if (line) line++;
    }
}

/* The table of a command as the bash completion holds it: its `flags="--a --b ..."` line. */
static void table_flags(const char *bash, const char *cmd, flag_set *out) {
    char head[64];
    snprintf(head, sizeof head, "\n    %s)\n", cmd);
    const char *block = strstr(bash, head);
    if (!block) fail_msg("the bash completion has no case for %s", cmd);
    const char *flags = strstr(block, "flags=\"");
    assert_non_null(flags);
    const char *end = strchr(flags + 7, '"');
    for (const char *p = flags + 7; p < end;) {
        if (*p == ' ') { /* a command without flags: " --calendar-dir" */
            p++;
            continue;
        }
        assert_true(p[0] == '-' && p[1] == '-');
        const size_t len = flag_len(p + 2);
        if (strncmp(p + 2, "calendar-dir", len) != 0) add(out, p + 2, len); /* every command's */
        p += 2 + len;
    }
}

/* The text of one command's part of a generated file: from `start` to the next `next`. */
static char *section(const char *text, const char *start, const char *next) {
    const char *a = strstr(text, start);
    if (!a) return NULL;
    const char *b = strstr(a + strlen(start), next);
    const size_t len = b ? (size_t)(b - a) : strlen(a);
    char *s = malloc(len + 1);
    assert_non_null(s);
    memcpy(s, a, len);
    s[len] = '\0';
    return s;
}

static void test_every_table_is_its_help_completion_and_man(void **state) {
    (void)state;
    char *top = run_ok("--help"), *bash = run_ok("completion bash"),
         *zsh = run_ok("completion zsh"), *man = run_ok("man");
    const char *list = strstr(top, "commands:\n");
    assert_non_null(list);
    int n_cmds = 0, n_flags = 0;
    for (const char *line = list + strlen("commands:\n"); line[0] == ' ' && line[1] == ' ';) {
        char cmd[32];
        const size_t len = flag_len(line + 2);
        assert_true(len > 0 && len < sizeof cmd);
        memcpy(cmd, line + 2, len);
        cmd[len] = '\0';
        n_cmds++;

        char args[64];
        snprintf(args, sizeof args, "%s --help", cmd);
        char *help = run_ok(args);
        flag_set listed = { 0 }, table = { 0 };
        help_flags(help, &listed);
        table_flags(bash, cmd, &table);
        for (int i = 0; i < listed.n; i++)
            if (!has(&table, listed.names[i]))
                fail_msg("kronos %s --help lists --%s, which its option table has not", cmd,
                         listed.names[i]);
        for (int i = 0; i < table.n; i++)
            if (!has(&listed, table.names[i]))
                fail_msg("kronos %s: --%s is in its option table, not in its --help", cmd,
                         table.names[i]);

        char start[64];
        snprintf(start, sizeof start, "    %s)\n      _arguments", cmd);
        char *z = section(zsh, start, ";;");
        snprintf(start, sizeof start, ".SS \"kronos %s\"", cmd);
        char *m = section(man, start, "\n.S");
        if (!z) fail_msg("the zsh completion has no case for %s", cmd);
        if (!m) fail_msg("the man page has no section for %s", cmd);
        for (int i = 0; i < table.n; i++) {
            char want[128], roff[128];
            snprintf(want, sizeof want, "'--%s[", table.names[i]);
            if (!strstr(z, want))
                fail_msg("the zsh completion of %s lacks --%s", cmd, table.names[i]);
            size_t k = (size_t)snprintf(roff, sizeof roff, ".BR \\-\\-");
            for (const char *c = table.names[i]; *c && k + 3 < sizeof roff; c++) {
                if (*c == '-') roff[k++] = '\\';
                roff[k++] = *c;
            }
            roff[k] = '\0';
            if (!strstr(m, roff)) fail_msg("the man page's %s lacks --%s", cmd, table.names[i]);
        }
        n_flags += table.n;
        free(z);
        free(m);
        free(help);
        line = strchr(line, '\n');
        if (!line) break;
        line++;
    }
    /* Every command of this build, each with its flags (a full build: ~300 of them). */
    assert_true(n_cmds >= 16);
    assert_true(n_flags >= 200);
    free(top);
    free(bash);
    free(zsh);
    free(man);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_table_is_its_help_completion_and_man),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
