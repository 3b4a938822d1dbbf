/*
 * `kronos serve` as an operator runs it (a real process; deploy/README.md):
 *  - SIGUSR1 reopens the access log at its path, so logrotate can move the file (lines before
 *    the signal stay in the moved file, later ones go to the new one); hostile request text
 *    never breaks the one-JSON-object-per-line format;
 *  - the start-up log says what it serves (model, store, page, access log, key file);
 *  - an API key file every user can read is warned about (at start and by --check-config);
 *    a key written with CRLF and blanks around it is the key;
 *  - --check-config finds what would stop the start: an address that is not this machine's
 *    (exit 2), a web root this user cannot read (exit 2); a port held by another process is
 *    reported (exit 0: the usual holder is the running server whose next config is checked).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "http_client.h"
#include "raw_http.h"
#include "serve_proc.h"
#include "test_support.h"

/* Lines of an access log file that are one JSON object each, or -1 (and the test fails). */
static int json_lines(const char *path, char *text, size_t cap) {
    kr_test_slurp(path, text, cap);
    int lines = 0;
    char *copy = strdup(text);
    for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        cJSON *j = cJSON_Parse(line);
        if (!j || !cJSON_IsObject(j)) fail_msg("%s: not one JSON object: %s", path, line);
        cJSON_Delete(j);
    }
    free(copy);
    return lines;
}

static long get_with_id(int port, const char *path, const char *id) {
    kr_http_resp r = { 0 };
    r.send_request_id = id;
    assert_int_equal(kr_test_http_perform(port, "GET", path, NULL, NULL, NULL, 0, &r), CURLE_OK);
    long status = r.status;
    free(r.body);
    return status;
}

static void test_access_log_reopen_on_sigusr1(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char log[4200], moved[4200], key[4200], db[4200];
    snprintf(log, sizeof log, "%s/access.log", dir);
    snprintf(moved, sizeof moved, "%s/access.log.1", dir);
    snprintf(key, sizeof key, "%s/key", dir);
    snprintf(db, sizeof db, "%s/store.db", dir);
    assert_int_equal(kr_test_write_file(key, "k3y\n", 4), 0);
    assert_int_equal(chmod(key, 0644), 0);
    kr_serve_proc p;
    const char *args[] = { "--port", "0", "--access-log", log, "--api-key-file", key, "--db",
                           db,       NULL };
    kr_serve_start(&p, args);
    /* The start-up summary, and the warning about the key file anyone can read. */
    assert_non_null(strstr(p.err, "kronos serve: serving "));
    assert_non_null(strstr(p.err, "kronos-demo"));
    char want[4400];
    snprintf(want, sizeof want, "access log %s; API key %s", log, key);
    if (!strstr(p.err, want)) fail_msg("no '%s' in: %s", want, p.err);
    snprintf(want, sizeof want, "WARNING: API key file %s is readable by every user", key);
    if (!strstr(p.err, want)) fail_msg("no '%s' in: %s", want, p.err);

    assert_int_equal(get_with_id(p.port, "/health", "before-rotate"), 200);
    /* Hostile text where a client controls it: a path with an encoded newline and quotes,
     * and a request id that is not sane (replaced by a generated one). */
    int fd = kr_raw_connect(NULL, p.port);
    assert_true(fd >= 0);
    const char *raw = "GET /x%0a%22%7d%0a{\"forged\":1} HTTP/1.1\r\nHost: x\r\n"
                      "User-Agent: a\"b\\c\r\nX-Request-Id: a\"}\\n{\"x\r\n"
                      "Connection: close\r\n\r\n";
    assert_int_equal(kr_raw_send(fd, raw, strlen(raw)), 0);
    char buf[4096];
    int closed = 0;
    kr_raw_read(fd, buf, sizeof buf, 30, &closed);
    close(fd);
    assert_int_equal(kr_raw_status(buf), 404);

    assert_int_equal(rename(log, moved), 0); /* what logrotate does first */
    kill(p.pid, SIGUSR1);
    if (!kr_serve_read_err(&p, "SIGUSR1: access log reopened", 30))
        fail_msg("no reopen logged: %s", p.err);
    assert_int_equal(get_with_id(p.port, "/health", "after-rotate"), 200);
    kill(p.pid, SIGTERM);
    int st = kr_serve_wait(&p, 60);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) fail_msg("status %d: %s", st, p.err);

    char text[16384];
    assert_int_equal(json_lines(moved, text, sizeof text), 2);
    assert_non_null(strstr(text, "\"before-rotate\""));
    assert_null(strstr(text, "after-rotate"));
    assert_null(strstr(text, "\"forged\":1,")); /* only ever inside an escaped string */
    assert_int_equal(json_lines(log, text, sizeof text), 1);
    assert_non_null(strstr(text, "\"after-rotate\""));
}

/* A reopen that fails (the directory is gone) keeps the old file and says so. */
static void test_access_log_reopen_failure_keeps_old_file(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char sub[4200], log[4300], db[4200];
    snprintf(sub, sizeof sub, "%s/logs", dir);
    snprintf(log, sizeof log, "%s/access.log", sub);
    snprintf(db, sizeof db, "%s/store.db", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    kr_serve_proc p;
    const char *args[] = { "--port", "0", "--access-log", log, "--db", db, NULL };
    kr_serve_start(&p, args);
    char kept[4300];
    snprintf(kept, sizeof kept, "%s/kept.log", dir);
    assert_int_equal(rename(log, kept), 0);
    assert_int_equal(rmdir(sub), 0);
    kill(p.pid, SIGUSR1);
    if (!kr_serve_read_err(&p, "still writing to the old file", 30))
        fail_msg("no failed reopen logged: %s", p.err);
    assert_non_null(strstr(p.err, "cannot open"));
    assert_int_equal(get_with_id(p.port, "/health", "kept-line"), 200);
    kill(p.pid, SIGTERM);
    assert_int_equal(kr_serve_wait(&p, 60), 0);
    char text[8192];
    assert_int_equal(json_lines(kept, text, sizeof text), 1);
    assert_non_null(strstr(text, "kept-line"));
}

static const kr_test_run *check(const char *dir, const char *env, const char *args) {
    char full[9000];
    snprintf(full, sizeof full, "serve %s --check-config", args);
    return kr_test_kronos(dir, env, full);
}

static void test_check_config_api_key_file(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char key[4200], args[9000];
    snprintf(key, sizeof key, "%s/key", dir);
    /* Written on Windows, or with blanks around it: the key is what is between. */
    assert_int_equal(kr_test_write_file(key, "  s3cret \r\n", 11), 0);
    assert_int_equal(chmod(key, 0640), 0);
    snprintf(args, sizeof args, "--api-key-file %s --db %s/store.db --port 0", key, dir);
    const kr_test_run *r = check(dir, "", args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    assert_null(strstr(r->err, "WARNING"));
    assert_int_equal(chmod(key, 0644), 0);
    r = check(dir, "", args);
    assert_int_equal(r->code, 0);
    assert_non_null(strstr(r->err, "is readable by every user of this machine (mode 0644)"));
    assert_non_null(strstr(r->err, "chmod o-r"));
}

static void test_check_config_listen(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char args[9000];
    /* 192.0.2.1 (TEST-NET-1) is no address of this machine: the start would fail. */
    snprintf(args, sizeof args, "--host 192.0.2.1 --port 8080 --db %s/store.db", dir);
    const kr_test_run *r = check(dir, "", args);
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "cannot listen on 192.0.2.1:8080"));
    assert_null(strstr(r->out, "config OK"));
    /* A port this test holds: reported, exit 0. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 1), 0);
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    snprintf(args, sizeof args, "--port %d --db %s/store.db", ntohs(sa.sin_port), dir);
    r = check(dir, "", args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    assert_non_null(strstr(r->err, "Address already in use"));
    assert_non_null(strstr(r->err, "a start fails until it is free"));
    assert_non_null(strstr(r->out, "config OK"));
    close(fd);
}

static void test_check_config_unreadable_web_root(void **state) {
    (void)state;
    const char *dir = kr_test_fresh_dir();
    char web[4200], args[9000];
    snprintf(web, sizeof web, "%s/web", dir);
    assert_int_equal(mkdir(web, 0), 0);
    assert_int_equal(chmod(dir, 0711), 0); /* the user can reach web, not read it */
    /* root reads anything: then check as the unprivileged user a service would run as. */
    const char *env = geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups" : "";
    if (geteuid() == 0) {
        /* A build below a private directory (mktemp -d is 0700) is out of that user's reach. */
        char probe[4400];
        snprintf(probe, sizeof probe, "%s test -x %s/kronos", env, KR_BINARY_DIR);
        if (system(probe) != 0) {
            printf("unreadable web root: not run here (user 65534 cannot reach %s/kronos)\n",
                   KR_BINARY_DIR);
            chmod(web, 0755);
            skip();
        }
    }
    snprintf(args, sizeof args, "--web-root %s --port 0", web);
    const kr_test_run *r = check(dir, env, args);
    assert_int_equal(r->code, 2);
    if (!strstr(r->err, "cannot be read by this user")) fail_msg("%s", r->err);
    chmod(web, 0755);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_access_log_reopen_on_sigusr1),
        cmocka_unit_test(test_access_log_reopen_failure_keeps_old_file),
        cmocka_unit_test(test_check_config_api_key_file),
        cmocka_unit_test(test_check_config_listen),
        cmocka_unit_test(test_check_config_unreadable_web_root),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
