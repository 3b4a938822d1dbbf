/*
 * hub/http — the hub's requests over the library's HTTP client (net/http_client.h), internal
 * to src/hub: a HEAD that collects the hub's metadata headers (X-Repo-Commit, X-Linked-Etag,
 * X-Linked-Size, ETag) and a GET that appends to a partial file from a given offset with a
 * Range request. Status codes are not judged here (the caller knows which ones are fatal);
 * only transport, disk and size problems are errors.
 */
#ifndef KR_HUB_HTTP_H
#define KR_HUB_HTTP_H

#include <stdint.h>

#include "kronos.h"
#include "net/http_client.h"

/* Response headers of one request (and its redirects). */
typedef struct kr_hub_meta {
    long status; /* HTTP status of the last response of the chain */
    char commit[96]; /* X-Repo-Commit of the first response that has one */
    char linked_etag[160]; /* X-Linked-Etag (an LFS file's sha256), first that has one */
    int64_t linked_size; /* X-Linked-Size in bytes; -1 absent */
    char etag[160]; /* ETag of the last response, as sent (quotes, W/) */
    int64_t content_length; /* Content-Length of the last response; -1 absent */
    int64_t range_start; /* Content-Range "bytes START-END/TOTAL" of the last response; */
    int64_t range_total; /*   -1 absent ("*" total is -1 too) */
    char error_code[64]; /* X-Error-Code: RepoNotFound, EntryNotFound, GatedRepo, ... */
    char error_message[256]; /* X-Error-Message */
} kr_hub_meta;

/* Resets every field to "absent". */
void kr_hub_meta_init(kr_hub_meta *m);
/* Takes one response header line (len bytes, not NUL-terminated, as libcurl hands them over,
 * with or without its CRLF) into m. Untrusted input: the server's bytes (fuzz_hub_headers). */
void kr_hub_meta_header(kr_hub_meta *m, const char *line, size_t len);

/* One connection cache and the token its requests carry. Not thread-safe: one per pulling
 * thread. */
typedef struct kr_hub_http {
    kr_http_client *client;
} kr_hub_http;

kr_status kr_hub_http_open(kr_hub_http *h, const char *token, long connect_timeout_s,
                           long stall_timeout_s, kr_error *err);
void kr_hub_http_close(kr_hub_http *h);

/* HEAD url into *m. Redirects are followed only while the response carries no hub metadata:
 * the hub answers an LFS file with a redirect to a CDN whose presigned URL may refuse HEAD,
 * and the redirect itself holds everything needed. The token goes only to url's origin
 * (scheme, host, port), as curl does for the redirects it follows. KR_ERR_IO naming the URL
 * (without credentials) on a transport failure, *transient set when a retry may cure it (a
 * dropped or stalled connection); any HTTP status is KR_OK (look at m->status). */
kr_status kr_hub_http_head(kr_hub_http *h, const char *url, kr_hub_meta *m, int *transient,
                           kr_error *err);

/* Where a GET writes. */
typedef struct kr_hub_sink {
    int fd; /* the partial file, open for writing */
    const char *path; /* its name, for messages */
    int64_t offset; /* in: bytes already in the file (Range asked from here when > 0);
                               out: bytes in the file after the transfer */
    int64_t expected; /* full size the hub announced; -1 unknown */
    /* Called as bytes arrive with the bytes on disk; non-zero cancels. May be NULL. */
    int (*on_bytes)(void *user, int64_t on_disk);
    void *user;
} kr_hub_sink;

/* GET url (redirects followed) into s->fd at s->offset. A 206 must start at s->offset; a 200
 * restarts the file from 0 (the server ignored the Range). Responses with status >= 300 are
 * not written (look at m->status). Returns KR_OK when the response arrived whole;
 * KR_ERR_IO for transport failures (*transient set when resuming may cure it: a dropped
 * connection or a stall) and disk errors; KR_ERR_FORMAT when the server's size contradicts
 * s->expected or the Content-Range does not start where asked; KR_ERR_CANCELLED. */
kr_status kr_hub_http_get(kr_hub_http *h, const char *url, kr_hub_sink *s, kr_hub_meta *m,
                          int *transient, kr_error *err);

#endif
