/* analyst/text — see text.h. */
#include "analyst/text.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(kr_sb *sb, size_t extra) {
    if (sb->oom) return 0;
    if (sb->cap - sb->len > extra) return 1;
    size_t cap = sb->cap ? sb->cap : 4096;
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

kr_status kr_sb_finish(kr_sb *sb, char **out, kr_error *err) {
    if (sb->oom || !reserve(sb, 0)) {
        kr_sb_free(sb);
        *out = NULL;
        return kr_error_set(err, KR_ERR_NOMEM, "rendering: out of memory");
    }
    *out = sb->data;
    memset(sb, 0, sizeof *sb);
    return KR_OK;
}

void kr_sb_free(kr_sb *sb) {
    free(sb->data);
    memset(sb, 0, sizeof *sb);
}

char *kr_fmt_price(double x, char *buf) {
    if (!isfinite(x)) snprintf(buf, 32, "n/a");
    else if (fabs(x) >= 1.0 || x == 0.0) snprintf(buf, 32, "%.2f", x);
    else snprintf(buf, 32, "%.4g", x);
    return buf;
}

char *kr_fmt_pct_signed(double frac, char *buf) {
    if (!isfinite(frac)) snprintf(buf, 32, "n/a");
    else snprintf(buf, 32, "%+.2f%%", frac * 100.0 == 0.0 ? 0.0 : frac * 100.0);
    return buf;
}

char *kr_fmt_pct(double frac, int dec, char *buf) {
    if (!isfinite(frac)) snprintf(buf, 32, "n/a");
    else snprintf(buf, 32, "%.*f%%", dec, frac * 100.0);
    return buf;
}

char *kr_fmt_num(double x, int dec, char *buf) {
    if (!isfinite(x)) snprintf(buf, 32, "n/a");
    else snprintf(buf, 32, "%.*f", dec, x);
    return buf;
}

char *kr_fmt_sig(double x, int sig, char *buf) {
    if (!isfinite(x)) snprintf(buf, 32, "n/a");
    else snprintf(buf, 32, "%.*g", sig, x);
    return buf;
}

char *kr_fmt_compact(double x, char *buf) {
    double a = fabs(x);
    if (!isfinite(x)) snprintf(buf, 32, "n/a");
    else if (a >= 1e9) snprintf(buf, 32, "%.2fB", x / 1e9);
    else if (a >= 1e6) snprintf(buf, 32, "%.2fM", x / 1e6);
    else if (a >= 1e4) snprintf(buf, 32, "%.1fK", x / 1e3);
    else snprintf(buf, 32, "%.0f", x);
    return buf;
}
