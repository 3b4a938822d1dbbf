/*
 * base/strbuf — a growable NUL-terminated string buffer: JSON, Markdown, HTML, SVG, metrics
 * text and log lines are all built with it. An allocation failure is sticky (later appends
 * are ignored) and reported once, by kr_sb_finish, so builders need not check every append.
 */
#ifndef KR_BASE_STRBUF_H
#define KR_BASE_STRBUF_H

#include <stddef.h>

#include "base/error.h"

typedef struct kr_sb {
    char *data; /* NUL-terminated; NULL until the first append */
    size_t len, cap;
    int oom; /* an allocation failed: later appends are ignored */
} kr_sb;

KR_PRIVATE void kr_sb_append(kr_sb *sb, const char *s);
KR_PRIVATE void kr_sb_appendn(kr_sb *sb, const char *s, size_t n);
KR_PRIVATE void kr_sb_appendf(kr_sb *sb, const char *fmt, ...) KR_PRINTF(2, 3);
/* Appends s as the body of a JSON string (quotes not included): " \ and control characters
 * escaped, valid UTF-8 passed through, any other byte as \ufffd. */
KR_PRIVATE void kr_sb_append_json_escaped(kr_sb *sb, const char *s);
/* Bytes of the valid UTF-8 sequence at p (1-4), or 0 when p does not start one (overlong
 * forms, surrogates and code points past U+10FFFF included). Reads no further than the first
 * byte that breaks it, so a NUL ends it safely. */
size_t kr_utf8_seq_len(const unsigned char *p);
/* Appends s with every byte that does not belong to valid UTF-8 replaced by U+FFFD: text from
 * a client, made safe to put in JSON. */
KR_PRIVATE void kr_sb_append_utf8(kr_sb *sb, const char *s);
/* Appends s with & < > " ' escaped for HTML text and attribute values. */
KR_PRIVATE void kr_sb_append_html(kr_sb *sb, const char *s);
/* Empties the buffer, keeping its memory. */
void kr_sb_reset(kr_sb *sb);
/* Hands the text to the caller (who frees it) or reports the allocation failure; the
 * buffer is reset either way. An empty buffer gives "". */
KR_PRIVATE kr_status kr_sb_finish(kr_sb *sb, char **out, kr_error *err);
KR_PRIVATE void kr_sb_free(kr_sb *sb);

#endif
