/*
 * net/http_client — the library's one HTTP client (libcurl): `kronos pull` (hub/) downloads
 * checkpoints through it and the analyst's narrative (analyst/narrative.c) asks a language
 * model through it, so timeouts, size caps, redirects, the User-Agent and the shape of every
 * network error are decided in one place.
 *
 * Why a folder of its own, below hub/ and analyst/ and beside base/: base/ is linked by every
 * layer down to the kernels, and loading a model or running a forecast must not need libcurl
 * (nor should a program that links only the engine). Only the two layers that talk to the
 * network link kr_net.
 *
 * Errors name the request: "<METHOD> <url>: <reason>", the URL without any user:password@
 * part. The reason alone is in kr_http_response.reason for callers that format their own.
 *
 * Threads: a kr_http_client (one connection cache) is used by one thread at a time; make one
 * per thread. Creating clients from several threads at once is safe.
 */
#ifndef KR_NET_HTTP_CLIENT_H
#define KR_NET_HTTP_CLIENT_H

#include <stddef.h>

#include "base/strbuf.h"
#include "kronos/status.h"

typedef struct kr_http_client kr_http_client;

typedef struct kr_http_options {
    long connect_timeout_ms; /* TCP + TLS connect; <= 0: 30 s */
    long timeout_ms; /* the whole request, answer included; <= 0: none -> KR_ERR_TIMEOUT */
    long stall_timeout_s; /* abort a transfer that moved no byte for this long; <= 0: none */
    size_t max_body; /* bytes of response body accepted; 0: unlimited -> KR_ERR_FORMAT */
    const char *bearer_token; /* sent as "Authorization: Bearer"; NULL: none. curl drops it on
                                 a redirect to another host. */
} kr_http_options;

/* Caller owns *out; free with kr_http_client_free. opts is copied (the token too). */
kr_status kr_http_client_create(const kr_http_options *opts, kr_http_client **out, kr_error *err);
void kr_http_client_free(kr_http_client *c);

typedef struct kr_http_request {
    const char *method; /* "GET" (NULL too), "HEAD" or "POST" */
    const char *url;
    const char *const *headers; /* extra "Name: value" lines, NULL-terminated; may be NULL */
    const char *body; /* POST body (borrowed) */
    size_t body_len;
    const char *range; /* "START-" for a Range request; NULL: none */
    int max_redirects; /* redirects followed; 0: a 3xx is the answer (see redirect_url) */
    int omit_token; /* 1: no bearer token on this request (a caller following a redirect to
                       another origin itself, where curl's own host check does not apply) */
    /* Each response header line as received, status lines of every hop included; non-zero
     * stops the transfer (KR_ERR_CANCELLED). May be NULL. */
    int (*on_header)(void *user, const char *line, size_t len);
    /* Body bytes as they arrive; non-zero stops the transfer (KR_ERR_CANCELLED). NULL: the
     * body is appended to body_out (when set) or dropped. */
    int (*on_body)(void *user, const char *data, size_t len);
    /* Called often during the transfer; non-zero cancels it (KR_ERR_CANCELLED). May be NULL. */
    int (*on_progress)(void *user);
    void *user;
    kr_sb *body_out; /* collects the body when on_body is NULL; may be NULL */
} kr_http_request;

typedef struct kr_http_response {
    long status; /* HTTP status of the last response; 0 when none arrived */
    char redirect_url[2048]; /* a 3xx not followed: where it points ("" otherwise) */
    int transient; /* the failure may pass on retry (connection dropped, stalled) */
    char reason[512]; /* "" on success; else the reason without the method and URL */
} kr_http_response;

/* Performs one request. KR_OK when a response arrived whole, whatever its HTTP status (look at
 * rs->status). Otherwise: KR_ERR_IO (cannot connect, connection refused, dropped, stalled),
 * KR_ERR_TIMEOUT (timeout_ms passed), KR_ERR_FORMAT (body larger than max_body), KR_ERR_NOMEM,
 * KR_ERR_CANCELLED (a callback said stop), KR_ERR_INVALID_ARG (bad method or URL). */
kr_status kr_http_perform(kr_http_client *c, const kr_http_request *rq, kr_http_response *rs,
                          kr_error *err);

/* url without a "user:password@" part, for messages and reports (credentials must not reach
 * them). Writes at most cap bytes. */
void kr_http_redact_url(const char *url, char *out, size_t cap);

#endif
