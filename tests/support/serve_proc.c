/* `kronos serve` as a child process — see serve_proc.h. */
#include "serve_proc.h"

#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
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
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
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
