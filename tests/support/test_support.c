#include "test_support.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *kr_test_fixture(const char *rel) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", KR_FIXTURES_DIR, rel);
    return buf;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st;
    (void)type;
    (void)ftw;
    if (remove(path) != 0) perror(path);
    return 0; /* keep going: remove what can be removed */
}

/* Pre-order: a directory a test made read-only must become writable before its entries go. */
static int open_up_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)ftw;
    if (type == FTW_D && (st->st_mode & 0700) != 0700) (void)chmod(path, st->st_mode | 0700);
    return 0;
}

void kr_test_remove_tree(const char *dir) {
    struct stat st;
    if (!dir || lstat(dir, &st) != 0) return; /* already gone */
    (void)nftw(dir, open_up_entry, 16, FTW_PHYS);
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) perror(dir);
}

/* Every directory kr_test_dir made, removed when the test program exits (not by forked
 * children, which share the list: only the process that made them). KRONOS_TEST_KEEP_TMP=1
 * keeps them for a post-mortem. */
static char **g_tmpdirs;
static size_t g_n_tmpdirs;
static pid_t g_tmpdir_owner;
static char **g_fresh; /* kr_test_fresh_dir's strings, freed at exit */
static char *g_dir; /* kr_test_dir(), also in g_tmpdirs */
static size_t g_n_fresh;

static void remove_tmpdirs(void) {
    if (getpid() != g_tmpdir_owner) return;
    const char *keep = getenv("KRONOS_TEST_KEEP_TMP");
    for (size_t i = 0; i < g_n_tmpdirs; i++) {
        if (keep && *keep && strcmp(keep, "0") != 0)
            fprintf(stderr, "kept %s (KRONOS_TEST_KEEP_TMP)\n", g_tmpdirs[i]);
        else
            kr_test_remove_tree(g_tmpdirs[i]);
        free(g_tmpdirs[i]);
    }
    free(g_tmpdirs);
    g_tmpdirs = NULL;
    g_n_tmpdirs = 0;
    g_dir = NULL;
    for (size_t i = 0; i < g_n_fresh; i++) free(g_fresh[i]);
    free(g_fresh);
    g_fresh = NULL;
    g_n_fresh = 0;
}

static void remember_tmpdir(const char *dir) {
    if (g_tmpdir_owner == 0) {
        atexit(remove_tmpdirs); /* forked children inherit the handler */
        g_tmpdir_owner = getpid();
    } else if (g_tmpdir_owner != getpid()) {
        /* A forked child: the inherited entries are its parent's to remove. */
        for (size_t i = 0; i < g_n_tmpdirs; i++) free(g_tmpdirs[i]);
        g_n_tmpdirs = 0;
        g_tmpdir_owner = getpid();
    }
    char **grown = realloc(g_tmpdirs, (g_n_tmpdirs + 1) * sizeof *grown);
    if (grown) g_tmpdirs = grown;
    char *copy = grown ? strdup(dir) : NULL;
    if (copy) g_tmpdirs[g_n_tmpdirs++] = copy; /* else left behind, as before */
}

static int g_fresh_dirs; /* made by kr_test_fresh_dir */

const char *kr_test_dir(void) {
    if (g_dir) return g_dir;
    const char *base = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/kronos-test-XXXXXX", base && *base ? base : "/tmp");
    char *dir = mkdtemp(tmpl);
    if (!dir) return NULL;
    /* Others may pass through (not list it): a test that runs a program as another user (an
     * unprivileged service account) gives that user a directory inside. */
    chmod(dir, 0711);
    const size_t before = g_n_tmpdirs;
    remember_tmpdir(dir);
    if (g_n_tmpdirs != before + 1) return NULL; /* out of memory */
    g_dir = g_tmpdirs[g_n_tmpdirs - 1];
    return g_dir;
}

const char *kr_test_fresh_dir(void) {
    const char *root = kr_test_dir();
    if (!root) return NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/t%03d", root, ++g_fresh_dirs);
    if (mkdir(path, 0700) != 0) return NULL;
    /* Remembered for its string's lifetime; removed with the root, so never on its own. */
    char *copy = strdup(path);
    if (!copy) return NULL;
    char **grown = realloc(g_fresh, (size_t)(g_n_fresh + 1) * sizeof *grown);
    if (!grown) {
        free(copy);
        return NULL;
    }
    g_fresh = grown;
    g_fresh[g_n_fresh++] = copy;
    return copy;
}

int kr_test_write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

double kr_test_max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || isnan(d)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

void kr_test_slurp(const char *path, char *buf, size_t cap) {
    buf[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
}

static char *slurp_all(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (f) {
        char chunk[65536];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
            if (len + n + 1 > cap) {
                cap = 2 * (len + n + 1);
                char *b = realloc(buf, cap);
                if (!b) break;
                buf = b;
            }
            memcpy(buf + len, chunk, n);
            len += n;
        }
        fclose(f);
    }
    if (!buf)
        buf = calloc(1, 1);
    else
        buf[len] = 0;
    return buf;
}

const kr_test_run *kr_test_kronos(const char *dir, const char *env, const char *args) {
    static kr_test_run r;
    free(r.out);
    free(r.err);
    char out[4200], errp[4200];
    snprintf(out, sizeof out, "%s/stdout", dir);
    snprintf(errp, sizeof errp, "%s/stderr", dir);
    size_t n = strlen(args) + strlen(env ? env : "") + 2 * sizeof out + 256;
    char *cmd = malloc(n);
    snprintf(cmd, n, "env -u KRONOS_DB %s %s/kronos %s >%s 2>%s </dev/null", env ? env : "",
             KR_BINARY_DIR, args, out, errp);
    int st = system(cmd);
    free(cmd);
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = slurp_all(out);
    r.err = slurp_all(errp);
    return &r;
}

int kr_test_in_child(const kr_test_env *env, int n, int (*probe)(void)) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (int i = 0; i < n; i++) {
            if (env[i].value)
                setenv(env[i].name, env[i].value, 1);
            else
                unsetenv(env[i].name);
        }
        _exit(probe() & 0xff);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}
