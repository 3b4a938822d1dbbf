/* HTTP client helpers for the server tests (libcurl against a server on 127.0.0.1). */
#ifndef KR_TEST_HTTP_CLIENT_H
#define KR_TEST_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

typedef struct kr_http_resp {
    long status;
    char *body; /* NUL-terminated */
    size_t len;
    char retry_after[32], allow[64], content_type[128], www_auth[128], csp[512],
        content_type_options[32];
    char request_id[128], connection[32]; /* X-Request-Id and Connection headers received */
    const char *send_request_id; /* set before the call: an X-Request-Id to send (NULL: none) */
    int expect_continue; /* set before the call: send "Expect: 100-continue" with a body */
    /* streaming abort: stop after this many "event: progress" frames (0 = never) */
    int abort_after_progress;
    int progress_seen;
    long timeout_ms; /* set before the call: the client gives up after this (0: 300 s) */
    /* set before the call: extra request header lines ("If-None-Match: W/\"1\""), up to the
     * first NULL */
    const char *send_headers[8];
    /* more headers received ("" when absent) */
    char etag[128], last_modified[64], accept_ranges[32], cache_control[64], content_length[32];
    char kronos_warning[128]; /* X-Kronos-Warning */
} kr_http_resp;

/* One request to http://127.0.0.1:port<path> (path sent as is, no "../" folding).
 * content_type NULL: application/json; auth: bearer key or NULL; chunked_bytes > 0: send
 * that many spaces with chunked transfer encoding instead of body. Returns curl's code. */
CURLcode kr_test_http_perform(int port, const char *method, const char *path, const char *body,
                              const char *content_type, const char *auth, size_t chunked_bytes,
                              kr_http_resp *r);
void kr_http_resp_free(kr_http_resp *r);
/* The error object's "field" ("" when none); static buffer. */
const char *kr_http_error_field(const kr_http_resp *r);
/* Fails the (cmocka) test unless r is an error with this status naming this field. */
#define kr_assert_http_error(r, code, field)                                                   \
    do {                                                                                       \
        if ((r)->status != (code))                                                             \
            fail_msg("want %d, got %ld: %s", (code), (r)->status, (r)->body ? (r)->body : ""); \
        assert_string_equal(kr_http_error_field(r), (field));                                  \
    } while (0)
/* The body as JSON; fails the test when it is not JSON. Caller deletes. */
cJSON *kr_http_json(const kr_http_resp *r);

/* Value of one exact series line ("name{labels}") in a Prometheus text scrape, or -1. */
double kr_metric_in(const char *text, const char *series);
/* Scrapes GET /metrics on port and returns kr_metric_in of it (-1 when absent or unreachable). */
double kr_http_metric(int port, const char *series);

/* A growable string. */
typedef struct kr_sbuf {
    char *s;
    size_t len, cap;
} kr_sbuf;
void kr_sb_printf(kr_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* {"candles": rows [start, start+n) of c as arrays with exact numbers, <extra members>};
 * caller frees. */
struct kr_candles;
char *kr_http_forecast_body(const struct kr_candles *c, int64_t start, int64_t n,
                            const char *extra);

/* Splits an SSE body into (event, data) pairs (multi-line data joined with \n); returns the
 * count. data[i] are malloc'd. */
int kr_sse_events(const char *body, char ev[][32], char **data, int max);

#endif
