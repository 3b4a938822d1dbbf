/* base/strbuf — see strbuf.h. */
#include "base/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(kr_sb *sb, size_t extra) {
    if (sb->oom) return 0;
    if (sb->cap > sb->len && sb->cap - sb->len > extra) return 1;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap - sb->len <= extra) {
        if (cap > ((size_t)-1) / 2) {
            sb->oom = 1;
            return 0;
        }
        cap *= 2;
    }
    char *nd = realloc(sb->data, cap);
    if (!nd) {
        sb->oom = 1;
        return 0;
    }
    sb->data = nd;
    sb->cap = cap;
    return 1;
}

void kr_sb_appendn(kr_sb *sb, const char *s, size_t n) {
    if (!reserve(sb, n)) return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = 0;
}

void kr_sb_append(kr_sb *sb, const char *s) { kr_sb_appendn(sb, s, strlen(s)); }

void kr_sb_appendf(kr_sb *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[512];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        sb->oom = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        kr_sb_appendn(sb, small, (size_t)n);
        return;
    }
    if (!reserve(sb, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void kr_sb_append_json_escaped(kr_sb *sb, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': kr_sb_append(sb, "\\\""); break;
        case '\\': kr_sb_append(sb, "\\\\"); break;
        case '\n': kr_sb_append(sb, "\\n"); break;
        case '\r': kr_sb_append(sb, "\\r"); break;
        case '\t': kr_sb_append(sb, "\\t"); break;
        default:
            if (*p < 0x20)
                kr_sb_appendf(sb, "\\u%04x", *p);
            else
                kr_sb_appendn(sb, (const char *)p, 1);
        }
    }
}

void kr_sb_append_html(kr_sb *sb, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': kr_sb_append(sb, "&amp;"); break;
        case '<': kr_sb_append(sb, "&lt;"); break;
        case '>': kr_sb_append(sb, "&gt;"); break;
        case '"': kr_sb_append(sb, "&quot;"); break;
        case '\'': kr_sb_append(sb, "&#39;"); break;
        default: kr_sb_appendn(sb, s, 1);
        }
    }
}

void kr_sb_reset(kr_sb *sb) {
    sb->len = 0;
    if (sb->data) sb->data[0] = 0;
}

kr_status kr_sb_finish(kr_sb *sb, char **out, kr_error *err) {
    if (sb->oom || !reserve(sb, 0)) {
        kr_sb_free(sb);
        *out = NULL;
        return kr_error_set(err, KR_ERR_NOMEM, "out of memory building text");
    }
    *out = sb->data;
    sb->data = NULL;
    sb->len = sb->cap = 0;
    return KR_OK;
}

void kr_sb_free(kr_sb *sb) {
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->oom = 0;
}
