/*
 * net/http_client: the library's one HTTP client against a stand-in server (libmicrohttpd on
 * 127.0.0.1): bodies collected or streamed to a callback, the bearer token and extra headers
 * sent (and no "Expect: 100-continue"), redirects followed or reported, and every failure a
 * clear status with a message naming the method and the URL (without credentials): size cap,
 * total timeout, stalled transfer (transient), connection refused, a callback that stops.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/http_client.h"
#include "test_support.h"

static struct MHD_Daemon *g_mhd;
static int g_port, g_closed_port;
static atomic_int g_stop;
static char g_big[10000];

typedef struct post_buf {
    char data[4096];
    size_t len;
} post_buf;

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *body,
                               size_t len) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* The body reader of "slow": sends nothing until g_stop (teardown) or for 10 s. */
static ssize_t slow_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)cls, (void)pos, (void)buf, (void)max;
    for (int i = 0; i < 200 && !atomic_load(&g_stop); i++) usleep(50000);
    return MHD_CONTENT_READER_END_OF_STREAM;
}

/* A raw server for the stalled transfer: headers announcing 100 bytes, then silence until the
 * client hangs up. (curl judges a stall by the average speed over the last seconds, so a few
 * body bytes would only delay the verdict.) */
static int g_stall_fd = -1, g_stall_port;

static void *stall_main(void *arg) {
    (void)arg;
    int cfd = accept(g_stall_fd, NULL, NULL);
    if (cfd < 0) return NULL;
    char buf[2048];
    if (recv(cfd, buf, sizeof buf, 0) > 0) {
        static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
        if (send(cfd, resp, sizeof resp - 1, 0) > 0)
            while (!atomic_load(&g_stop) && recv(cfd, buf, sizeof buf, 0) > 0) {
            }
    }
    close(cfd);
    return NULL;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **ctx) {
    (void)cls, (void)version;
    if (!strcmp(method, "POST")) {
        post_buf *b = *ctx;
        if (!b) {
            *ctx = calloc(1, sizeof *b);
            return *ctx ? MHD_YES : MHD_NO;
        }
        if (*upload_size) {
            size_t n = *upload_size < sizeof b->data - 1 - b->len ? *upload_size
                                                                  : sizeof b->data - 1 - b->len;
            memcpy(b->data + b->len, upload, n);
            b->len += n;
            *upload_size = 0;
            return MHD_YES;
        }
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
        const char *ex = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Expect");
        const char *ua = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "User-Agent");
        char out[8192];
        int n =
            snprintf(out, sizeof out, "auth=%s|ct=%s|expect=%s|ua=%s|body=%.*s", auth ? auth : "",
                     ct ? ct : "", ex ? ex : "", ua ? ua : "", (int)b->len, b->data);
        return respond(c, 200, out, (size_t)n);
    }
    if (!strcmp(url, "/ok")) return respond(c, 200, "hello", 5);
    if (!strcmp(url, "/big")) return respond(c, 200, g_big, sizeof g_big);
    if (!strcmp(url, "/redirect")) {
        struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Location", "/ok");
        enum MHD_Result ret = MHD_queue_response(c, 302, r);
        MHD_destroy_response(r);
        return ret;
    }
    if (!strcmp(url, "/slow")) {
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64, slow_reader, NULL, NULL);
        enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    return respond(c, 404, "no such path", 12);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **ctx,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    free(*ctx);
    *ctx = NULL;
}

static int closed_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int setup(void **state) {
    (void)state;
    const char *proxies[] = { "http_proxy",  "HTTP_PROXY", "https_proxy",
                              "HTTPS_PROXY", "all_proxy",  "ALL_PROXY" };
    for (size_t i = 0; i < sizeof proxies / sizeof proxies[0]; i++) unsetenv(proxies[i]);
    for (size_t i = 0; i < sizeof g_big; i++) g_big[i] = (char)('a' + i % 26);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    g_mhd = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL, 0, NULL,
        NULL, on_access, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
    if (!g_mhd) return -1;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(g_mhd, MHD_DAEMON_INFO_BIND_PORT);
    g_port = di ? di->port : 0;
    g_closed_port = closed_port();
    return g_port > 0 && g_closed_port > 0 ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    atomic_store(&g_stop, 1);
    MHD_stop_daemon(g_mhd);
    return 0;
}

static const char *url(const char *path) {
    static char u[256];
    snprintf(u, sizeof u, "http://127.0.0.1:%d%s", g_port, path);
    return u;
}

static kr_http_client *client(long timeout_ms, long stall_s, size_t max_body, const char *token) {
    kr_http_options o = { .timeout_ms = timeout_ms,
                          .stall_timeout_s = stall_s,
                          .max_body = max_body,
                          .bearer_token = token };
    kr_http_client *c = NULL;
    kr_error err = { 0 };
    if (kr_http_client_create(&o, &c, &err) != KR_OK) fail_msg("%s", err.message);
    return c;
}

/* The message starts with "<METHOD> <url>: " and contains needle. */
static void expect_message(const kr_error *err, const char *method, const char *u,
                           const char *needle) {
    char head[512];
    snprintf(head, sizeof head, "%s %s: ", method, u);
    if (strncmp(err->message, head, strlen(head)) || !strstr(err->message, needle))
        fail_msg("message '%s' does not start with '%s' or lacks '%s'", err->message, head, needle);
}

static void test_get_post_headers(void **state) {
    (void)state;
    kr_http_client *c = client(10000, 0, 0, "tok-123");
    kr_sb body = { 0 };
    kr_http_request rq = { .url = url("/ok"), .body_out = &body };
    kr_http_response rs;
    kr_error err = { 0 };
    assert_int_equal(kr_http_perform(c, &rq, &rs, &err), KR_OK);
    assert_int_equal(rs.status, 200);
    assert_string_equal(body.data, "hello");
    assert_string_equal(rs.reason, "");

    /* A 404 is an answer, not an error. */
    kr_sb_reset(&body);
    rq.url = url("/nope");
    assert_int_equal(kr_http_perform(c, &rq, &rs, &err), KR_OK);
    assert_int_equal(rs.status, 404);

    /* POST: the body, the token, the caller's headers, no Expect, our User-Agent. The body is
     * over 1 KiB, where curl would otherwise ask for 100-continue. */
    char payload[2000];
    memset(payload, 'p', sizeof payload - 1);
    payload[sizeof payload - 1] = '\0';
    static const char *const hdrs[] = { "Content-Type: application/json", NULL };
    kr_sb_reset(&body);
    kr_http_request post = { .method = "POST",
                             .url = url("/echo"),
                             .headers = hdrs,
                             .body = payload,
                             .body_len = strlen(payload),
                             .body_out = &body };
    assert_int_equal(kr_http_perform(c, &post, &rs, &err), KR_OK);
    assert_int_equal(rs.status, 200);
    assert_non_null(strstr(body.data, "auth=Bearer tok-123|"));
    assert_non_null(strstr(body.data, "|ct=application/json|expect=|ua=kronos/"));
    assert_non_null(strstr(body.data, payload));
    /* omit_token: this request goes without it (a redirect to another origin). */
    kr_sb_reset(&body);
    post.omit_token = 1;
    assert_int_equal(kr_http_perform(c, &post, &rs, &err), KR_OK);
    assert_non_null(strstr(body.data, "auth=|"));
    kr_sb_free(&body);

    /* Unknown method. */
    kr_http_request bad = { .method = "DELETE", .url = url("/ok") };
    assert_int_equal(kr_http_perform(c, &bad, &rs, &err), KR_ERR_INVALID_ARG);
    expect_message(&err, "DELETE", url("/ok"), "unsupported method");
    kr_http_client_free(c);
    kr_http_client_free(NULL);
}

static void test_redirects(void **state) {
    (void)state;
    kr_http_client *c = client(10000, 0, 0, NULL);
    kr_http_request rq = { .method = "HEAD", .url = url("/redirect") };
    kr_http_response rs;
    kr_error err = { 0 };
    assert_int_equal(kr_http_perform(c, &rq, &rs, &err), KR_OK);
    assert_int_equal(rs.status, 302);
    assert_string_equal(rs.redirect_url, url("/ok"));
    kr_sb body = { 0 };
    kr_http_request get = { .url = url("/redirect"), .max_redirects = 3, .body_out = &body };
    assert_int_equal(kr_http_perform(c, &get, &rs, &err), KR_OK);
    assert_int_equal(rs.status, 200);
    assert_string_equal(rs.redirect_url, "");
    assert_string_equal(body.data, "hello");
    kr_sb_free(&body);
    kr_http_client_free(c);
}

static int count_body(void *user, const char *data, size_t len) {
    (void)data;
    *(size_t *)user += len;
    return 0;
}

static int stop_body(void *user, const char *data, size_t len) {
    (void)user, (void)data, (void)len;
    return 1;
}

static void test_size_cap(void **state) {
    (void)state;
    kr_http_client *c = client(10000, 0, 1000, NULL);
    kr_sb body = { 0 };
    kr_http_request rq = { .url = url("/big"), .body_out = &body };
    kr_http_response rs;
    kr_error err = { 0 };
    assert_int_equal(kr_http_perform(c, &rq, &rs, &err), KR_ERR_FORMAT);
    expect_message(&err, "GET", url("/big"), "the answer is larger than 1000 bytes");
    assert_true(body.len <= 1000);
    /* The cap holds for a streaming callback too. */
    size_t seen = 0;
    kr_http_request cb = { .url = url("/big"), .on_body = count_body, .user = &seen };
    assert_int_equal(kr_http_perform(c, &cb, &rs, &err), KR_ERR_FORMAT);
    assert_true(seen <= 1000);
    kr_http_client_free(c);
    /* Unlimited: all of it; the client is reusable after a failure. */
    c = client(10000, 0, 0, NULL);
    seen = 0;
    assert_int_equal(kr_http_perform(c, &cb, &rs, &err), KR_OK);
    assert_int_equal(seen, sizeof g_big);
    /* A callback that says stop. */
    kr_http_request stop = { .url = url("/big"), .on_body = stop_body };
    assert_int_equal(kr_http_perform(c, &stop, &rs, &err), KR_ERR_CANCELLED);
    expect_message(&err, "GET", url("/big"), "stopped by the caller");
    kr_sb_free(&body);
    kr_http_client_free(c);
}

static void test_timeout_and_stall(void **state) {
    (void)state;
    kr_http_client *c = client(300, 0, 0, NULL);
    kr_http_request rq = { .url = url("/slow") };
    kr_http_response rs;
    kr_error err = { 0 };
    assert_int_equal(kr_http_perform(c, &rq, &rs, &err), KR_ERR_TIMEOUT);
    expect_message(&err, "GET", url("/slow"), "no complete answer within 0.3 s (timeout)");
    assert_string_equal(rs.reason, "no complete answer within 0.3 s (timeout)");
    kr_http_client_free(c);

    /* Bytes, then silence: cut after the stall timeout, and worth a retry. */
    c = client(0, 1, 0, NULL);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
                listen(lfd, 1) == 0 && getsockname(lfd, (struct sockaddr *)&a, &al) == 0);
    g_stall_fd = lfd;
    g_stall_port = ntohs(a.sin_port);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stall_main, NULL), 0);
    char su[128];
    snprintf(su, sizeof su, "http://127.0.0.1:%d/stall", g_stall_port);
    rq.url = su;
    assert_int_equal(kr_http_perform(c, &rq, &rs, &err), KR_ERR_IO);
    expect_message(&err, "GET", su, "stalled");
    assert_int_equal(rs.transient, 1);
    kr_http_client_free(c);
    pthread_join(th, NULL);
    close(lfd);
}

static void test_connection_refused_and_redaction(void **state) {
    (void)state;
    kr_http_client *c = client(10000, 0, 0, NULL);
    char u[256], shown[256];
    snprintf(u, sizeof u, "http://user:s3cret@127.0.0.1:%d/api", g_closed_port);
    snprintf(shown, sizeof shown, "http://127.0.0.1:%d/api", g_closed_port);
    kr_http_request rq = { .method = "POST", .url = u, .body = "{}", .body_len = 2 };
    kr_http_response rs;
    kr_error err = { 0 };
    assert_int_equal(kr_http_perform(c, &rq, &rs, &err), KR_ERR_IO);
    expect_message(&err, "POST", shown, "connection refused");
    assert_null(strstr(err.message, "s3cret"));
    assert_int_equal(rs.status, 0);
    kr_http_client_free(c);
    char out[64];
    kr_http_redact_url("https://a:b@host/x@y", out, sizeof out);
    assert_string_equal(out, "https://host/x@y");
    kr_http_redact_url("no scheme", out, sizeof out);
    assert_string_equal(out, "no scheme");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_post_headers),
        cmocka_unit_test(test_redirects),
        cmocka_unit_test(test_size_cap),
        cmocka_unit_test(test_timeout_and_stall),
        cmocka_unit_test(test_connection_refused_and_redaction),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
