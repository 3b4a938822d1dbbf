/* analyst/text — see text.h. */
#include "analyst/text.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* x, or an unsigned 0 when x shows as zero at dec decimals: no "-0.00" or "+0.00". */
static double shown(double x, int dec) { return fabs(x) < 0.5 * pow(10.0, -dec) ? 0.0 : x; }

char *kr_fmt_price(double x, char *buf) {
    if (!isfinite(x))
        snprintf(buf, 32, "n/a");
    else if (fabs(x) >= 1.0 || x == 0.0)
        snprintf(buf, 32, "%.2f", shown(x, 2));
    else
        snprintf(buf, 32, "%.4g", x);
    return buf;
}

char *kr_fmt_pct_signed(double frac, char *buf) {
    double v = isfinite(frac) ? shown(frac * 100.0, 2) : 0.0;
    if (!isfinite(frac))
        snprintf(buf, 32, "n/a");
    else if (v == 0.0)
        snprintf(buf, 32, "0.00%%");
    else
        snprintf(buf, 32, "%+.2f%%", v);
    return buf;
}

char *kr_fmt_pct(double frac, int dec, char *buf) {
    if (!isfinite(frac))
        snprintf(buf, 32, "n/a");
    else
        snprintf(buf, 32, "%.*f%%", dec, shown(frac * 100.0, dec));
    return buf;
}

char *kr_fmt_num(double x, int dec, char *buf) {
    if (!isfinite(x))
        snprintf(buf, 32, "n/a");
    else
        snprintf(buf, 32, "%.*f", dec, shown(x, dec));
    return buf;
}

char *kr_fmt_sig(double x, int sig, char *buf) {
    if (!isfinite(x))
        snprintf(buf, 32, "n/a");
    else
        snprintf(buf, 32, "%.*g", sig, x);
    return buf;
}

char *kr_fmt_compact(double x, char *buf) {
    double a = fabs(x);
    if (!isfinite(x))
        snprintf(buf, 32, "n/a");
    else if (a >= 1e9)
        snprintf(buf, 32, "%.2fB", x / 1e9);
    else if (a >= 1e6)
        snprintf(buf, 32, "%.2fM", x / 1e6);
    else if (a >= 1e4)
        snprintf(buf, 32, "%.1fK", x / 1e3);
    else
        snprintf(buf, 32, "%.0f", x);
    return buf;
}

char *kr_fmt_pm_pct(double frac, double se, int dec, int sign, char *buf) {
    char v[32];
    if (sign)
        kr_fmt_pct_signed(frac, v);
    else
        kr_fmt_pct(frac, dec, v);
    if (!isfinite(frac) || !isfinite(se))
        snprintf(buf, 64, "%s", v);
    else
        snprintf(buf, 64, "%s \xc2\xb1 %.*f%%", v, sign ? 2 : dec, se * 100.0);
    return buf;
}

char *kr_fmt_se_pp(double se, char *buf) {
    if (!isfinite(se))
        buf[0] = '\0';
    else if (se * 100.0 < 0.5)
        snprintf(buf, 32, "\xc2\xb1 <1 pp");
    else
        snprintf(buf, 32, "\xc2\xb1 %.0f pp", se * 100.0);
    return buf;
}

char *kr_fmt_se_pct(double se, int dec, char *buf) {
    if (!isfinite(se))
        buf[0] = '\0';
    else
        snprintf(buf, 32, "\xc2\xb1 %.*f%%", dec, shown(se * 100.0, dec));
    return buf;
}

char *kr_fmt_pm_prob(double p, double se, char *buf) {
    char v[32], e[32];
    kr_fmt_pct(p, 0, v);
    if (!isfinite(p) || !isfinite(se))
        snprintf(buf, 64, "%s", v);
    else
        snprintf(buf, 64, "%s %s", v, kr_fmt_se_pp(se, e));
    return buf;
}

/* The decimals kr_fmt_price shows for x: 2, or 4 significant digits below 1. */
static int price_decimals(double x) {
    if (!isfinite(x) || fabs(x) >= 1.0 || x == 0.0) return 2;
    int d = 3 - (int)floor(log10(fabs(x)));
    return d > 12 ? 12 : d;
}

/* The decimals of a price's standard error: the price's own; a price of exactly 0 (paths
 * that crashed to nothing) sets no scale, so then two significant digits of the error itself —
 * a coin's ± 0.0000021 is not "± <0.01". */
static int se_decimals(double se, double price) {
    if (price != 0.0 || !(se > 0.0) || !isfinite(se)) return price_decimals(price);
    int d = 1 - (int)floor(log10(se));
    return d < 2 ? 2 : d > 12 ? 12 : d;
}

char *kr_fmt_se_price(double se, double price, char *buf) {
    const int dec = se_decimals(se, price);
    if (!isfinite(se))
        buf[0] = '\0';
    else if (se < 0.5 * pow(10.0, -dec))
        snprintf(buf, 32, "\xc2\xb1 <%.*f", dec, pow(10.0, -dec));
    else
        snprintf(buf, 32, "\xc2\xb1 %.*f", dec, se);
    return buf;
}

char *kr_fmt_pm_price(double x, double se, char *buf) {
    char v[32], e[32];
    kr_fmt_price(x, v);
    if (!isfinite(x) || !isfinite(se))
        snprintf(buf, 64, "%s", v);
    else
        snprintf(buf, 64, "%s %s", v, kr_fmt_se_price(se, x, e));
    return buf;
}

/* The length of the valid UTF-8 sequence at s (of n bytes), or 0; *cp its code point. */
static size_t utf8_seq(const unsigned char *s, size_t n, unsigned *cp) {
    unsigned c = s[0];
    size_t len = c < 0x80             ? 1
                 : (c & 0xe0) == 0xc0 ? 2
                 : (c & 0xf0) == 0xe0 ? 3
                 : (c & 0xf8) == 0xf0 ? 4
                                      : 0;
    if (len == 0 || len > n) return 0;
    unsigned v = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    static const unsigned least[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (v < least[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return len;
}

void kr_text_clean(kr_sb *out, const char *s, size_t n, int keep_lines) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned cp = 0;
        size_t len = utf8_seq(u + i, n - i, &cp);
        if (len == 0) {
            kr_sb_append(out, "\xef\xbf\xbd"); /* U+FFFD for one bad byte */
            i++;
            continue;
        }
        if (cp == '\r') {
            /* dropped: a lone CR would move a terminal's cursor back over the line */
        } else if ((cp == '\n' || cp == '\t') && keep_lines) {
            kr_sb_appendn(out, s + i, 1);
        } else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
                   (cp >= 0x2066 && cp <= 0x2069)) {
            kr_sb_append(out, " ");
        } else {
            kr_sb_appendn(out, s + i, len);
        }
        i += len;
    }
}

void kr_text_cut_partial(char *s) {
    size_t n = strlen(s);
    if (n == 0) return;
    size_t i = n - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80 && n - i < 4) i--;
    unsigned c = (unsigned char)s[i];
    size_t want = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
    if (c >= 0x80 && n - i < want) s[i] = '\0';
}
