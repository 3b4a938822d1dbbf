/*
 * store/store_pg: how a failed connection is classed, against a stand-in PostgreSQL server
 * on a Unix socket that answers each connection with a scripted error, so the moments a real
 * server passes through in a second (starting, recovering from a crash, up again) can be
 * played in order. KR_ERR_UNAVAILABLE is "retry later" (the server answers HTTP 503);
 * KR_ERR_IO a refusal an operator has to fix (500).
 *
 * The server's SQLSTATE decides where it sent one (in any language: the code is never
 * translated). Where it sent none, a probe does, and the race this guards is a server that
 * drops a connection while it restarts after a crash and answers the probe an instant later:
 * that must not read as a refusal for good.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kronos/store.h"
#include "test_support.h"

enum { FAKE_PORT = 5987, MAX_ANSWERS = 8 };

/* One scripted answer: the SQLSTATE and message of a FATAL ErrorResponse, or (sqlstate NULL)
 * none: the connection closed after the startup packet. */
typedef struct answer {
    const char *sqlstate, *message;
} answer;

typedef struct fake_server {
    int listener;
    int held[MAX_ANSWERS]; /* connections left unanswered (HUNG), closed at the end */
    int n_held;
    const answer *script;
    int n_script;
    int served; /* connections answered */
    pthread_t thread;
} fake_server;

static int read_full(int fd, void *buf, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static void put_field(char *buf, size_t *at, char code, const char *text) {
    buf[(*at)++] = code;
    size_t n = strlen(text) + 1;
    memcpy(buf + *at, text, n);
    *at += n;
}

/* Reads the startup packet (length, then the rest) and answers with one ErrorResponse. */
static void answer_one(int fd, const answer *a) {
    unsigned char len_be[4];
    if (read_full(fd, len_be, 4) != 0) return;
    uint32_t len = (uint32_t)len_be[0] << 24 | (uint32_t)len_be[1] << 16 |
                   (uint32_t)len_be[2] << 8 | len_be[3];
    if (len < 8 || len > 10000) return;
    char rest[10000];
    if (read_full(fd, rest, len - 4) != 0) return;
    if (!a->sqlstate && a->message && !strcmp(a->message, "http")) {
        static const char reply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        if (write(fd, reply, sizeof reply - 1) != (ssize_t)(sizeof reply - 1)) return;
        return;
    }
    if (!a->sqlstate) return;
    char msg[1024];
    size_t at = 5;
    put_field(msg, &at, 'S', "FATAL");
    put_field(msg, &at, 'V', "FATAL");
    put_field(msg, &at, 'C', a->sqlstate);
    put_field(msg, &at, 'M', a->message);
    msg[at++] = '\0';
    msg[0] = 'E';
    uint32_t body = (uint32_t)(at - 1);
    msg[1] = (char)(body >> 24);
    msg[2] = (char)(body >> 16);
    msg[3] = (char)(body >> 8);
    msg[4] = (char)body;
    if (write(fd, msg, at) != (ssize_t)at) return;
}

static void *serve(void *arg) {
    fake_server *f = arg;
    for (;;) {
        int fd = accept(f->listener, NULL, NULL);
        if (fd < 0) return NULL; /* the listener was shut down */
        const int i = f->served < f->n_script ? f->served : f->n_script - 1;
        const answer *a = &f->script[i];
        __atomic_add_fetch(&f->served, 1, __ATOMIC_SEQ_CST);
        if (a->message && !strcmp(a->message, "hung") && f->n_held < MAX_ANSWERS) {
            f->held[f->n_held++] = fd; /* accepted, never answered */
            continue;
        }
        answer_one(fd, a);
        close(fd);
    }
}

/* Starts the stand-in in dir (socket dir/.s.PGSQL.FAKE_PORT) with its answers in order; the
 * last one repeats. */
static void fake_start(fake_server *f, const char *dir, const answer *script, int n) {
    memset(f, 0, sizeof *f);
    f->script = script;
    f->n_script = n;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/.s.PGSQL.%d", dir, FAKE_PORT);
    f->listener = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(f->listener >= 0);
    assert_int_equal(bind(f->listener, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(f->listener, 8), 0);
    assert_int_equal(pthread_create(&f->thread, NULL, serve, f), 0);
}

/* The same stand-in on TCP at 127.0.0.1, a port the kernel picks; returns the port. There
 * libpq first asks for SSL (sslmode=prefer, its default), which a Unix socket skips. */
static int fake_start_tcp(fake_server *f, const answer *script, int n) {
    memset(f, 0, sizeof *f);
    f->script = script;
    f->n_script = n;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    f->listener = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(f->listener >= 0);
    assert_int_equal(bind(f->listener, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t sl = sizeof sa;
    assert_int_equal(getsockname(f->listener, (struct sockaddr *)&sa, &sl), 0);
    assert_int_equal(listen(f->listener, 8), 0);
    assert_int_equal(pthread_create(&f->thread, NULL, serve, f), 0);
    return ntohs(sa.sin_port);
}

static int fake_stop(fake_server *f) {
    shutdown(f->listener, SHUT_RDWR);
    close(f->listener);
    pthread_join(f->thread, NULL);
    for (int i = 0; i < f->n_held; i++) close(f->held[i]);
    return f->served;
}

/* Opens a store on the stand-in and returns the status, the message in err. */
static kr_status open_on_with(const char *dir, const char *extra, kr_error *err) {
    char url[512];
    snprintf(url, sizeof url, "postgresql://kt@/kt?host=%s&port=%d%s", dir, FAKE_PORT, extra);
    kr_store *s = NULL;
    kr_status st = kr_store_open(url, &s, err);
    if (s) kr_store_close(s);
    return st;
}

static kr_status open_on(const char *dir, kr_error *err) { return open_on_with(dir, "", err); }

/* sqlstate NULL: the connection is closed without an answer (a server going down), or with
 * message "hung" kept open and never answered (a server stuck). */
static const answer CLOSED = { NULL, NULL };
static const answer HUNG = { NULL, "hung" };
static const answer HTTP = { NULL, "http" }; /* a web server where PostgreSQL was expected */
static const answer RECOVERING = { "57P03", "the database system is in recovery mode" };
static const answer STARTING = { "57P03", "the database system is starting up" };
static const answer RECOVERING_DE = { "57P03",
                                      "das Datenbanksystem ist im Wiederherstellungsmodus" };
static const answer FULL_DE = { "53300", "tut mir leid, schon zu viele Verbindungen" };
static const answer BAD_PASSWORD = { "28P01", "password authentication failed for user \"kt\"" };
static const answer BAD_PASSWORD_DE = {
    "28P01", "Passwort-Authentifizierung für Benutzer »kt« fehlgeschlagen"
};

/* Dropped without a word, the probe then finds the server up (any error but 57P03 means up),
 * and the second attempt is refused as recovering: retry later. Without the second attempt
 * this was a refusal for good (HTTP 500). */
static void test_up_again_between_attempt_and_probe(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    const answer script[] = { CLOSED, BAD_PASSWORD, RECOVERING_DE };
    fake_server f;
    fake_start(&f, dir, script, 3);
    kr_error err = { 0 };
    const kr_status st = open_on(dir, &err);
    const int served = fake_stop(&f);
    if (st != KR_ERR_UNAVAILABLE) fail_msg("status %d: %s", (int)st, err.message);
    if (!strstr(err.message, "retry later")) fail_msg("message: %s", err.message);
    assert_int_equal(served, 3); /* attempt, probe, attempt */
}

/* The server's SQLSTATE decides, whatever language its words are in, with no probe: starting,
 * recovering and every slot taken are "retry later", a wrong password is an operator's. */
static void test_sqlstate_decides_in_any_language(void **state) {
    (void)state;
    const struct {
        const answer *a;
        kr_status want;
    } cases[] = {
        { &RECOVERING, KR_ERR_UNAVAILABLE },    { &STARTING, KR_ERR_UNAVAILABLE },
        { &RECOVERING_DE, KR_ERR_UNAVAILABLE }, { &FULL_DE, KR_ERR_UNAVAILABLE },
        { &BAD_PASSWORD, KR_ERR_IO },           { &BAD_PASSWORD_DE, KR_ERR_IO },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *dir = kr_test_fresh_dir();
        fake_server f;
        fake_start(&f, dir, cases[c].a, 1);
        kr_error err = { 0 };
        const kr_status st = open_on(dir, &err);
        const int served = fake_stop(&f);
        if (st != cases[c].want)
            fail_msg("%s: status %d: %s", cases[c].a->message, (int)st, err.message);
        if (!strstr(err.message, cases[c].a->message)) fail_msg("message: %s", err.message);
        if (!strstr(err.message, cases[c].a->sqlstate)) fail_msg("no SQLSTATE: %s", err.message);
        assert_int_equal(served, 1);
    }
}

/* Dropped every time, the probe too: down, retry later. */
static void test_dropped_every_time(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    fake_server f;
    fake_start(&f, dir, &CLOSED, 1);
    kr_error err = { 0 };
    const kr_status st = open_on(dir, &err);
    const int served = fake_stop(&f);
    if (st != KR_ERR_UNAVAILABLE) fail_msg("status %d: %s", (int)st, err.message);
    assert_int_equal(served, 2); /* attempt, probe */
}

/* A server that accepts and never answers: the URL's connect_timeout bounds the attempt
 * (the connection is made by polling libpq, which leaves the timeout to its caller), then the
 * probe's own 3 s: down, retry later, in bounded time. */
static void test_connect_timeout(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    fake_server f;
    fake_start(&f, dir, &HUNG, 1);
    kr_error err = { 0 };
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const kr_status st = open_on_with(dir, "&connect_timeout=2", &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const int served = fake_stop(&f);
    const double waited = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (st != KR_ERR_UNAVAILABLE) fail_msg("status %d: %s", (int)st, err.message);
    if (!strstr(err.message, "timeout expired")) fail_msg("message: %s", err.message);
    assert_int_equal(served, 2); /* attempt, probe */
    /* It waited for the timeouts rather than giving up at once, and did not hang. */
    if (waited < 1.5 || waited > 60) fail_msg("waited %.1f s", waited);
}

/* Something that is not PostgreSQL at the URL's port (a web server here), on a Unix socket
 * (libpq's startup packet answered with "HTTP/1.1 ...") and on TCP (its SSL request answered
 * so): a wrong URL to fix, failed at once with a hint, not "retry later", which would have
 * let kronos serve start and answer 503 for ever. One attempt: no probe, no second try. */
static void test_not_postgres(void **state) {
    (void)state;
    for (int tcp = 0; tcp < 2; tcp++) {
        const char *dir = kr_test_fresh_dir();
        fake_server f;
        kr_error err = { 0 };
        kr_status st;
        if (tcp) {
            const int port = fake_start_tcp(&f, &HTTP, 1);
            char url[256];
            snprintf(url, sizeof url, "postgresql://kt@127.0.0.1:%d/kt", port);
            kr_store *s = NULL;
            st = kr_store_open(url, &s, &err);
            if (s) kr_store_close(s);
        } else {
            fake_start(&f, dir, &HTTP, 1);
            st = open_on(dir, &err);
        }
        const int served = fake_stop(&f);
        if (st != KR_ERR_IO) fail_msg("tcp %d: status %d: %s", tcp, (int)st, err.message);
        if (strstr(err.message, "retry later") || !strstr(err.message, "PostgreSQL server"))
            fail_msg("tcp %d: message: %s", tcp, err.message);
        if (!strstr(err.message, tcp ? "SSL negotiation" : "authentication request"))
            fail_msg("tcp %d: libpq's words lost: %s", tcp, err.message);
        assert_int_equal(served, 1);
    }
}

/* Nothing listening: down, retry later. */
static void test_nothing_listening(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    kr_error err = { 0 };
    assert_int_equal(open_on(dir, &err), KR_ERR_UNAVAILABLE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_up_again_between_attempt_and_probe),
        cmocka_unit_test(test_sqlstate_decides_in_any_language),
        cmocka_unit_test(test_dropped_every_time),
        cmocka_unit_test(test_connect_timeout),
        cmocka_unit_test(test_not_postgres),
        cmocka_unit_test(test_nothing_listening),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
