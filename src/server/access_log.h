/*
 * server/access_log — one JSON line per answered request, and the request ids that tie a
 * client's report, the access log and the X-Request-Id response header together.
 *
 * A line (fields in this order; queue_wait_s only when the request queued in the scheduler,
 * error only when it failed):
 *   {"time":"2025-01-02T03:04:05.678Z","request_id":"9f3c0a1e00000011","client":"127.0.0.1",
 *    "method":"POST","route":"/v1/forecast","status":200,"bytes":5120,"duration_s":0.0812,
 *    "queue_wait_s":0.0031,"error":"pred_len: must be an integer in 1..2048, got 0"}
 * route is the route table's label ("other" for unknown paths), never the client's path, so
 * the log cannot be flooded with arbitrary text; client text in "error" is JSON-escaped.
 * Lines are written whole under a lock and flushed, so concurrent requests never interleave.
 */
#ifndef KR_SERVER_ACCESS_LOG_H
#define KR_SERVER_ACCESS_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "kronos.h"

#define KR_REQUEST_ID_MAX 64

/* 1 when a client's X-Request-Id is usable as is: 1..64 bytes of letters, digits and
 * . _ : - (anything else could forge log lines or headers; such an id is replaced). */
int kr_request_id_valid(const char *s);
/* A fresh id: 16 hex digits, a random per-process prefix and a counter. Thread-safe. */
void kr_request_id_new(char out[KR_REQUEST_ID_MAX + 1]);

typedef struct kr_access_entry {
    double time; /* wall clock, Unix seconds, when the request arrived */
    const char *request_id, *client, *method, *route;
    int status;
    uint64_t bytes; /* response bytes sent (body) */
    double duration_s; /* first byte in to last byte out */
    double queue_wait_s; /* < 0: the request did not queue in the scheduler */
    const char *error; /* NULL or "": none */
} kr_access_entry;

/* Appends the line (with its newline) to sb. */
void kr_access_log_format(const kr_access_entry *e, kr_sb *sb);

typedef struct kr_access_log kr_access_log;

/* path "-": standard output; else the file is opened for appending (created 0640). Caller
 * owns *out (kr_access_log_close). */
kr_status kr_access_log_open(const char *path, kr_access_log **out, kr_error *err);
void kr_access_log_write(kr_access_log *log, const kr_access_entry *e);
/* Opens the file's path again and writes there from now on: after logrotate has renamed the
 * file (kronos serve does this on SIGUSR1). Thread-safe against writers. On failure the old
 * file stays in use. A no-op for standard output. */
kr_status kr_access_log_reopen(kr_access_log *log, kr_error *err);
/* The path given to kr_access_log_open ("-" for standard output); borrowed. */
const char *kr_access_log_path(const kr_access_log *log);
void kr_access_log_close(kr_access_log *log);

#endif
