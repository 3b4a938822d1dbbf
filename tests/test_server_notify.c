/*
 * `kronos serve` under a service manager (systemd's Type=notify protocol, cli/service_notify),
 * the manager played by a unix datagram socket of the test's own:
 *  - READY=1 with MAINPID once it listens (and not before: /health answers by then), STATUS
 *    lines, WATCHDOG=1 pings at half of WATCHDOG_USEC, STOPPING=1 when a SIGTERM starts the
 *    drain, exit 0; the same over an abstract-namespace socket (@name);
 *  - a WATCHDOG_PID naming another process: no pings; a WATCHDOG_USEC that is no number: a
 *    warning, no pings;
 *  - a manager that cannot be reached (no such socket, a path too long) is said once and the
 *    server serves anyway.
 * The engine side of the pings (a held engine answers no ping) is in test_engine_context.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include "http_client.h"
#include "serve_proc.h"
#include "test_support.h"

/* The manager's end: a bound datagram socket at `name` (a path, or "@abstract"). */
static int manager_socket(const char *name) {
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t len = strlen(name);
    assert_true(len < sizeof a.sun_path);
    memcpy(a.sun_path, name, len);
    if (name[0] == '@') a.sun_path[0] = '\0';
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    if (bind(fd, (struct sockaddr *)&a, alen) != 0) fail_msg("bind %s: %m", name);
    return fd;
}

/* The next message within timeout_s into buf (NUL-terminated); 0 when none came. */
static int next_message(int fd, char *buf, size_t cap, double timeout_s) {
    struct pollfd p = { fd, POLLIN, 0 };
    if (poll(&p, 1, (int)(timeout_s * 1000)) <= 0) return 0;
    ssize_t n = recv(fd, buf, cap - 1, 0);
    assert_true(n >= 0);
    buf[n] = '\0';
    return 1;
}

/* Reads messages until one holds `needle`; fails the test after timeout_s. */
static void expect_message(int fd, const char *needle, char *buf, size_t cap, double timeout_s) {
    for (;;) {
        if (!next_message(fd, buf, cap, timeout_s))
            fail_msg("no message with '%s' within %.0f s", needle, timeout_s);
        if (strstr(buf, needle)) return;
    }
}

static long health(int port) {
    kr_http_resp r = { 0 };
    assert_int_equal(kr_test_http_perform(port, "GET", "/health", NULL, NULL, NULL, 0, &r),
                     CURLE_OK);
    free(r.body);
    return r.status;
}

static void start_with(kr_serve_proc *p, const char *sock, const char *wd_usec,
                       const char *wd_pid) {
    static const char *const args[] = { "--port", "0", NULL };
    setenv("NOTIFY_SOCKET", sock, 1);
    if (wd_usec) setenv("WATCHDOG_USEC", wd_usec, 1);
    if (wd_pid) setenv("WATCHDOG_PID", wd_pid, 1);
    kr_serve_start(p, args);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
}

static void stop_cleanly(kr_serve_proc *p) {
    kill(p->pid, SIGTERM);
    int st = kr_serve_wait(p, 60);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) fail_msg("status %d: %s", st, p->err);
}

/* The whole conversation over `sock`. */
static void conversation(const char *sock) {
    int fd = manager_socket(sock);
    kr_serve_proc p;
    start_with(&p, sock, "200000", NULL);
    char msg[2048], want[64];
    expect_message(fd, "READY=1", msg, sizeof msg, 30);
    snprintf(want, sizeof want, "MAINPID=%ld", (long)p.pid);
    if (!strstr(msg, want)) fail_msg("no %s in: %s", want, msg);
    assert_non_null(strstr(msg, "STATUS=serving on http://127.0.0.1:"));
    assert_int_equal(health(p.port), 200);
    for (int k = 0; k < 2; k++) { /* pings keep coming, each with the current status */
        expect_message(fd, "WATCHDOG=1", msg, sizeof msg, 30);
        assert_non_null(strstr(msg, "STATUS=serving: 0 running, 0 waiting"));
    }
    kill(p.pid, SIGTERM);
    expect_message(fd, "STOPPING=1", msg, sizeof msg, 30);
    assert_non_null(strstr(msg, "STATUS=draining after SIGTERM"));
    int st = kr_serve_wait(&p, 60);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) fail_msg("status %d: %s", st, p.err);
    assert_null(strstr(p.err, "service manager"));
    close(fd);
}

static void test_ready_watchdog_stopping(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char sock[4200];
    snprintf(sock, sizeof sock, "%s/notify", dir);
    if (strlen(sock) >= sizeof((struct sockaddr_un *)0)->sun_path) {
        /* A temporary directory too deep for a socket path: the abstract case covers it. */
        print_message("SKIPPED path socket: %s is longer than a socket path may be\n", sock);
    } else {
        conversation(sock);
    }
}

static void test_abstract_socket(void **state) {
    (void)state;
    char sock[64];
    snprintf(sock, sizeof sock, "@kronos-test-notify-%ld", (long)getpid());
    conversation(sock);
}

/* A WATCHDOG_PID of another process, or a WATCHDOG_USEC that is no number: no pings (the
 * first status line, 5 s after READY, comes without one). */
static void no_pings(const char *wd_usec, const char *wd_pid, const char *warning) {
    char sock[64];
    snprintf(sock, sizeof sock, "@kronos-test-nowd-%ld", (long)getpid());
    int fd = manager_socket(sock);
    kr_serve_proc p;
    start_with(&p, sock, wd_usec, wd_pid);
    char msg[2048];
    expect_message(fd, "READY=1", msg, sizeof msg, 30);
    assert_true(next_message(fd, msg, sizeof msg, 30));
    assert_non_null(strstr(msg, "STATUS=serving"));
    assert_null(strstr(msg, "WATCHDOG=1"));
    if (warning && !kr_serve_read_err(&p, warning, 30)) fail_msg("no '%s' in: %s", warning, p.err);
    stop_cleanly(&p);
    close(fd);
}

static void test_watchdog_for_another_process(void **state) {
    (void)state;
    no_pings("200000", "1", NULL);
}

static void test_watchdog_interval_not_a_number(void **state) {
    (void)state;
    no_pings("20ms", NULL,
             "warning: WATCHDOG_USEC '20ms': not a positive number of microseconds; no watchdog "
             "pings");
}

/* No manager at that address: said once, and serving goes on. */
static void test_unreachable_manager(void **state) {
    (void)state;
    const char *socks[] = { "/nonexistent-dir/notify", "relative/notify" };
    for (int i = 0; i < 2; i++) {
        kr_serve_proc p;
        start_with(&p, socks[i], "100000", NULL);
        assert_int_equal(health(p.port), 200);
        const char *warning = "warning: cannot tell the service manager";
        if (!kr_serve_read_err(&p, warning, 30)) fail_msg("no warning in: %s", p.err);
        usleep(300 * 1000); /* a few pings' worth of failures */
        assert_int_equal(health(p.port), 200);
        stop_cleanly(&p); /* reads the rest of its output */
        const char *first = strstr(p.err, warning);
        assert_non_null(first);
        assert_null(strstr(first + 1, warning));
    }
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ready_watchdog_stopping),
        cmocka_unit_test(test_abstract_socket),
        cmocka_unit_test(test_watchdog_for_another_process),
        cmocka_unit_test(test_watchdog_interval_not_a_number),
        cmocka_unit_test(test_unreachable_manager),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
