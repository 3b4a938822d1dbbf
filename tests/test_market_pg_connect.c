/*
 * market/store_pg: how a failed connection is classed, against a stand-in PostgreSQL server
 * on a Unix socket that answers each connection with a scripted error, so the moments a real
 * server passes through in a second (starting, recovering from a crash, up again) can be
 * played in order. KR_ERR_UNAVAILABLE is "retry later" (the server answers HTTP 503);
 * KR_ERR_IO a refusal an operator has to fix (500).
 *
 * The race this guards: after a backend's crash, a connection is refused "in recovery mode"
 * and the probe that decides between the two classes can find the server up an instant later;
 * that must not read as a refusal for good.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kronos/market.h"
#include "test_support.h"

enum { FAKE_PORT = 5987, MAX_ANSWERS = 8 };

/* One scripted answer: the SQLSTATE and message of a FATAL ErrorResponse. */
typedef struct answer {
    const char *sqlstate, *message;
} answer;

typedef struct fake_server {
    int listener;
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
        answer_one(fd, &f->script[i]);
        __atomic_add_fetch(&f->served, 1, __ATOMIC_SEQ_CST);
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

static int fake_stop(fake_server *f) {
    shutdown(f->listener, SHUT_RDWR);
    close(f->listener);
    pthread_join(f->thread, NULL);
    return f->served;
}

/* Opens a store on the stand-in and returns the status, the message in err. */
static kr_status open_on(const char *dir, kr_error *err) {
    char url[512];
    snprintf(url, sizeof url, "postgresql://kt@/kt?host=%s&port=%d", dir, FAKE_PORT);
    kr_store *s = NULL;
    kr_status st = kr_store_open(url, &s, err);
    if (s) kr_store_close(s);
    return st;
}

static const answer RECOVERING_LOCALISED = { "57P03",
                                             "das Datenbanksystem ist im Wiederherstellungsmodus" };
static const answer RECOVERING = { "57P03", "the database system is in recovery mode" };
static const answer STARTING = { "57P03", "the database system is starting up" };
static const answer BAD_PASSWORD = { "28P01", "password authentication failed for user \"kt\"" };

/* Refused while recovering (in words the code cannot read), the probe then finds the server
 * up (any other error means up), and the second attempt is refused as recovering again: retry
 * later. Without the second attempt, this was a refusal for good (HTTP 500). */
static void test_up_again_between_attempt_and_probe(void **state) {
    (void)state;
    char *dir = kr_test_tmpdir();
    const answer script[] = { RECOVERING_LOCALISED, BAD_PASSWORD, RECOVERING_LOCALISED,
                              RECOVERING_LOCALISED };
    fake_server f;
    fake_start(&f, dir, script, 4);
    kr_error err = { 0 };
    const kr_status st = open_on(dir, &err);
    const int served = fake_stop(&f);
    if (st != KR_ERR_UNAVAILABLE) fail_msg("status %d: %s", (int)st, err.message);
    if (!strstr(err.message, "retry later")) fail_msg("message: %s", err.message);
    assert_int_equal(served, 4); /* attempt, probe, attempt, probe */
    kr_test_remove_tree(dir);
    free(dir);
}

/* PostgreSQL's own English words for 57P03 need no probe. */
static void test_starting_and_recovering_read_from_the_message(void **state) {
    (void)state;
    const answer *cases[] = { &RECOVERING, &STARTING };
    for (int c = 0; c < 2; c++) {
        char *dir = kr_test_tmpdir();
        fake_server f;
        fake_start(&f, dir, cases[c], 1);
        kr_error err = { 0 };
        const kr_status st = open_on(dir, &err);
        const int served = fake_stop(&f);
        if (st != KR_ERR_UNAVAILABLE) fail_msg("status %d: %s", (int)st, err.message);
        if (!strstr(err.message, cases[c]->message)) fail_msg("message: %s", err.message);
        assert_int_equal(served, 1);
        kr_test_remove_tree(dir);
        free(dir);
    }
}

/* A server that is up and refuses every time (a wrong password) stays an operator's error,
 * after one more attempt. */
static void test_refusal_for_good(void **state) {
    (void)state;
    char *dir = kr_test_tmpdir();
    fake_server f;
    fake_start(&f, dir, &BAD_PASSWORD, 1);
    kr_error err = { 0 };
    const kr_status st = open_on(dir, &err);
    const int served = fake_stop(&f);
    if (st != KR_ERR_IO) fail_msg("status %d: %s", (int)st, err.message);
    if (!strstr(err.message, "password authentication failed"))
        fail_msg("message: %s", err.message);
    assert_int_equal(served, 4);
    kr_test_remove_tree(dir);
    free(dir);
}

/* Nothing listening: down, retry later. */
static void test_nothing_listening(void **state) {
    (void)state;
    char *dir = kr_test_tmpdir();
    kr_error err = { 0 };
    assert_int_equal(open_on(dir, &err), KR_ERR_UNAVAILABLE);
    kr_test_remove_tree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_up_again_between_attempt_and_probe),
        cmocka_unit_test(test_starting_and_recovering_read_from_the_message),
        cmocka_unit_test(test_refusal_for_good),
        cmocka_unit_test(test_nothing_listening),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
