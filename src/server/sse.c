/*
 * server/sse — event-stream framing into a drainable buffer (see sse.h).
 */
#include "server/sse.h"

#include <stdlib.h>
#include <string.h>

static int put(kr_sse_buf *b, const char *s, size_t n) {
    if (b->cap - b->len < n) {
        /* Reclaim what the socket already took before growing. */
        if (b->pos > 0) {
            memmove(b->data, b->data + b->pos, b->len - b->pos);
            b->len -= b->pos;
            b->pos = 0;
        }
        if (b->cap - b->len < n) {
            size_t cap = b->cap ? b->cap : 1024;
            while (cap - b->len < n) cap *= 2;
            char *nd = realloc(b->data, cap);
            if (!nd) return -1;
            b->data = nd;
            b->cap = cap;
        }
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

int kr_sse_event(kr_sse_buf *b, const char *event, const char *data) {
    if (event && put(b, "event: ", 7) | put(b, event, strlen(event)) | put(b, "\n", 1)) return -1;
    const char *s = data ? data : "";
    /* A data line may not contain a line break: split, one "data:" field per line. */
    for (;;) {
        size_t n = strcspn(s, "\r\n");
        if (put(b, "data: ", 6) | put(b, s, n) | put(b, "\n", 1)) return -1;
        s += n;
        if (!*s) break;
        s += (s[0] == '\r' && s[1] == '\n') ? 2 : 1;
    }
    return put(b, "\n", 1);
}

int kr_sse_comment(kr_sse_buf *b, const char *text) {
    return put(b, ": ", 2) | put(b, text, strlen(text)) | put(b, "\n\n", 2) ? -1 : 0;
}

size_t kr_sse_read(kr_sse_buf *b, char *out, size_t max) {
    size_t n = b->len - b->pos;
    if (n > max) n = max;
    if (n) memcpy(out, b->data + b->pos, n);
    b->pos += n;
    if (b->pos == b->len) b->pos = b->len = 0;
    return n;
}

size_t kr_sse_pending(const kr_sse_buf *b) { return b->len - b->pos; }

void kr_sse_free(kr_sse_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}
