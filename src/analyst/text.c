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
