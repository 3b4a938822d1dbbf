/*
 * server/sse — Server-Sent Events framing (the text/event-stream format of the HTML spec) for
 * streamed forecasts: "event: progress", "event: result", "event: error" frames collected in
 * a byte buffer that the HTTP layer's content reader drains at its own pace.
 */
#ifndef KR_SERVER_SSE_H
#define KR_SERVER_SSE_H

#include <stddef.h>

typedef struct kr_sse_buf {
    char *data;
    size_t len; /* bytes written */
    size_t pos; /* bytes already handed to the socket */
    size_t cap;
} kr_sse_buf;

/* Appends one event: "event: NAME\n" then one "data: " line per line of data, then a blank
 * line. event NULL: a default ("message") event. Returns 0, or -1 when out of memory. */
int kr_sse_event(kr_sse_buf *b, const char *event, const char *data);
/* Appends a comment line (": text\n\n"), which clients ignore: a keep-alive. */
int kr_sse_comment(kr_sse_buf *b, const char *text);
/* Copies up to max pending bytes to out; returns the count (0 when nothing is pending). */
size_t kr_sse_read(kr_sse_buf *b, char *out, size_t max);
size_t kr_sse_pending(const kr_sse_buf *b);
void kr_sse_free(kr_sse_buf *b);

#endif
