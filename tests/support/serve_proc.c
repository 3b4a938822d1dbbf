/* `kronos serve` as a child process — see serve_proc.h. */
#include "serve_proc.h"

#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void kr_serve_spawn(kr_serve_proc *p, const char *const *args) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    memset(p, 0, sizeof *p);
    pid_t test_pid = getpid();
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
        /* A failed assertion longjmps past the test's kill and wait. The server must not
         * outlive the test: ctest waits for every holder of the test's output pipe, so an
         * orphaned server hangs the whole run (the CI timeout of 2026-12-02). It dies with
         * the test process, and its stdout goes to the same pipe as its stderr. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != test_pid) _exit(127); /* the test ended before the prctl */
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        const char *argv[48] = { KR_BINARY_DIR "/kronos", "serve" };
        int n = 2;
        for (int i = 0; args[i] && n < 47; i++) argv[n++] = args[i];
        argv[n] = NULL;
        unsetenv("KRONOS_DB");
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    p->err_fd = fds[0];
}

const char *kr_serve_read_err(kr_serve_proc *p, const char *needle, double timeout_s) {
    double t0 = now_s();
    while (!strstr(p->err, needle) && now_s() - t0 < timeout_s) {
        struct pollfd pf = { .fd = p->err_fd, .events = POLLIN };
        if (poll(&pf, 1, 100) <= 0) continue;
        /* Full: keep the newer half and go on reading, so the server never blocks writing
         * to a pipe nobody drains. */
        if (p->err_len >= sizeof p->err / 2 + sizeof p->err / 4) {
            size_t keep = sizeof p->err / 2;
            memmove(p->err, p->err + p->err_len - keep, keep);
            p->err_len = keep;
            p->err[keep] = '\0';
        }
        ssize_t n = read(p->err_fd, p->err + p->err_len, sizeof p->err - 1 - p->err_len);
        if (n <= 0) break;
        p->err_len += (size_t)n;
        p->err[p->err_len] = '\0';
    }
    return strstr(p->err, needle);
}

void kr_serve_start(kr_serve_proc *p, const char *const *args) {
    kr_serve_spawn(p, args);
    const char *line = "listening on http://127.0.0.1:";
    const char *l = kr_serve_read_err(p, line, 60);
    if (!l) fail_msg("no 'listening on' line: %s", p->err);
    p->port = atoi(l + strlen(line));
    assert_true(p->port > 0);
}

int kr_serve_wait(kr_serve_proc *p, double timeout_s) {
    double t0 = now_s();
    int st = 0;
    while (waitpid(p->pid, &st, WNOHANG) == 0) {
        if (now_s() - t0 > timeout_s) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            close(p->err_fd);
            return -1;
        }
        kr_serve_read_err(p, "\x01never", 0.01);
    }
    kr_serve_read_err(p, "\x01never", 0.2);
    close(p->err_fd);
    return st;
}
