/* The `kronos serve` executable as a child process, for the server tests that need the real
 * process (signals, exit codes, start-up messages, its memory). */
#ifndef KR_TEST_SERVE_PROC_H
#define KR_TEST_SERVE_PROC_H

#include <stddef.h>
#include <sys/types.h>

typedef struct kr_serve_proc {
    pid_t pid;
    int err_fd; /* read end of its stderr */
    char err[65536]; /* what it printed on stdout and stderr so far (the newest 32-48 KB) */
    size_t err_len;
    int port; /* from its "listening on" line (kr_serve_start) */
} kr_serve_proc;

/* Runs KR_BINARY_DIR/kronos serve args... (NULL-terminated; KRONOS_DB unset). The server is
 * killed when the test process ends, however it ends. */
void kr_serve_spawn(kr_serve_proc *p, const char *const *args);
/* kr_serve_spawn, then waits for "listening on http://127.0.0.1:PORT" (fails the test after
 * 60 s) and sets p->port. */
void kr_serve_start(kr_serve_proc *p, const char *const *args);
/* Reads its stderr until needle appears, it closes, or timeout_s; the match or NULL. */
const char *kr_serve_read_err(kr_serve_proc *p, const char *needle, double timeout_s);
/* Waits for it to end; its wait status, or -1 after timeout_s (then it is killed). */
int kr_serve_wait(kr_serve_proc *p, double timeout_s);

#endif
