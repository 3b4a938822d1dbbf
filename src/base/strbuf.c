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

size_t kr_utf8_seq_len(const unsigned char *p) {
    if (p[0] < 0x80) return 1;
    int n = p[0] >= 0xC2 && p[0] <= 0xDF   ? 2
            : p[0] >= 0xE0 && p[0] <= 0xEF ? 3
            : p[0] >= 0xF0 && p[0] <= 0xF4 ? 4
                                           : 0;
    if (!n) return 0;
    /* The second byte's range excludes overlong forms, surrogates and code points past U+10FFFF. */
    unsigned lo = p[0] == 0xE0 ? 0xA0 : p[0] == 0xF0 ? 0x90 : 0x80;
    unsigned hi = p[0] == 0xED ? 0x9F : p[0] == 0xF4 ? 0x8F : 0xBF;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return (size_t)n;
}

void kr_sb_append_utf8(kr_sb *sb, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = kr_utf8_seq_len(p);
        if (n) {
            kr_sb_appendn(sb, (const char *)p, n);
            p += n;
        } else {
            kr_sb_append(sb, "\xEF\xBF\xBD"); /* U+FFFD */
            p++;
        }
    }
}

void kr_sb_append_json_escaped(kr_sb *sb, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x80) { /* a valid sequence as is, anything else as U+FFFD */
            size_t n = kr_utf8_seq_len(p);
            if (n)
                kr_sb_appendn(sb, (const char *)p, n);
            else
                kr_sb_append(sb, "\\ufffd");
            p += n ? n - 1 : 0;
            continue;
        }
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
