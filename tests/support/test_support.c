#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *kr_test_fixture(const char *rel) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", KR_FIXTURES_DIR, rel);
    return buf;
}

char *kr_test_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/kronos-test-XXXXXX", base && *base ? base : "/tmp");
    char *dir = mkdtemp(tmpl);
    return dir ? strdup(dir) : NULL;
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
