/*
 * analyst/chart_svg — the candlestick + forecast-fan chart (see chart_svg.h).
 *
 * Layout: the x axis is the bar index, not time, so weekends, nights and lunch breaks take no
 * room (the usual trading-chart convention); tick labels carry the real dates. History bars
 * and forecast steps share one slot width, so the fan continues the candles at the same pace.
 */
#include "analyst/chart_svg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/timeutil.h"

#define COL_UP "#15803d"
#define COL_DOWN "#b91c1c"
#define COL_FAN "#2563eb"
#define COL_MEAN "#c2410c"
#define COL_GRID "#e5e7eb"
#define COL_AXIS "#6b7280"
#define COL_TEXT "#374151"

void kr_chart_nice_ticks(double lo, double hi, int target, double *first, double *step) {
    double range = hi - lo;
    if (!(range > 0)) range = fabs(hi) > 0 ? fabs(hi) * 0.1 : 1.0;
    double raw = range / (target > 1 ? target : 1);
    double mag = pow(10.0, floor(log10(raw)));
    double m = raw / mag, s;
    if (m <= 1.0)
        s = 1.0;
    else if (m <= 2.0)
        s = 2.0;
    else if (m <= 2.5)
        s = 2.5;
    else if (m <= 5.0)
        s = 5.0;
    else
        s = 10.0;
    *step = s * mag;
    *first = ceil(lo / *step - 1e-9) * *step;
}

typedef struct frame {
    double x0, w_slot; /* left edge of the plot, slot width */
    double py0, py1; /* price panel top / bottom (SVG y grows down) */
    double vy0, vy1; /* volume panel */
    double lo, hi; /* price range */
    double vmax; /* volume range top */
    double plot_right;
} frame;

static double xc(const frame *f, int slot) { return f->x0 + (slot + 0.5) * f->w_slot; }
static double yp(const frame *f, double price) {
    return f->py1 - (price - f->lo) / (f->hi - f->lo) * (f->py1 - f->py0);
}
static double yv(const frame *f, double vol) {
    return f->vmax > 0 ? f->vy1 - vol / f->vmax * (f->vy1 - f->vy0) : f->vy1;
}

/* Price axis labels in a unit that keeps them short: 1.25T rather than 1250000000000 (a
 * price in satoshis, an index in a weak currency). */
typedef struct price_unit {
    double div;
    const char *suffix;
} price_unit;

static price_unit unit_for(double lo, double hi) {
    const double top = fmax(fabs(lo), fabs(hi));
    /* Below ten million the plain figure has at most 7 digits before the point. */
    if (top >= 1e12) return (price_unit){ 1e12, "T" };
    if (top >= 1e9) return (price_unit){ 1e9, "B" };
    if (top >= 1e7) return (price_unit){ 1e6, "M" };
    return (price_unit){ 1.0, "" };
}

/* As many decimals as the tick step needs, so neighbouring labels always differ (a penny
 * stock's 0.000005 steps included). */
static void price_label(double v, double step, price_unit u, char *buf) {
    step /= u.div;
    v /= u.div;
    int dec = step >= 1.0 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 12) dec = 12;
    if (fmod(step * pow(10, dec), 1.0) > 1e-6 && dec < 12) dec++; /* 2.5-type steps */
    snprintf(buf, 32, "%.*f%s", dec, fabs(v) < step * 1e-6 ? 0.0 : v, u.suffix);
}

/* The last close's tag: two decimals (four significant digits below 1), in the axis unit. */
static void close_label(double close, price_unit u, char *buf) {
    double v = close / u.div;
    if (u.div > 1.0)
        snprintf(buf, 32, "%.3f%s", v, u.suffix);
    else if (fabs(v) < 1)
        snprintf(buf, 32, "%.4g", v);
    else
        snprintf(buf, 32, "%.2f", v);
}

/* Width of a label in the 11 px axis font: digits are ~6.2 px in the system sans fonts; the
 * estimate errs wide so a label never runs off the picture. */
static double label_px(const char *s) { return 6.8 * (double)strlen(s); }

/* Tick label for a bar time: a date for daily bars, "MM-DD HH:MM" intraday. */
static void time_label(int64_t t, int date_only, char *buf) {
    kr_civil c = kr_civil_from_unix(t);
    if (date_only)
        snprintf(buf, 32, "%04d-%02d-%02d", c.year, c.month, c.day);
    else
        snprintf(buf, 32, "%02d-%02d %02d:%02d", c.month, c.day, c.hour, c.minute);
}

static void ranges(const kr_report *r, frame *f) {
    double lo = INFINITY, hi = -INFINITY, vmax = 0.0;
    for (int i = 0; i < r->n_chart; i++) {
        const double *v = r->chart_values + (size_t)i * KR_N_FEATURES;
        if (v[KR_LOW] < lo) lo = v[KR_LOW];
        if (v[KR_HIGH] > hi) hi = v[KR_HIGH];
        if (v[KR_VOLUME] > vmax) vmax = v[KR_VOLUME];
    }
    for (int i = 0; i < r->horizon; i++) {
        const size_t o = (size_t)i * KR_N_FEATURES;
        const double cs[3] = { r->fc_p10[o + KR_CLOSE], r->fc_p90[o + KR_CLOSE],
                               r->fc_mean[o + KR_CLOSE] };
        for (int k = 0; k < 3; k++) {
            if (cs[k] < lo) lo = cs[k];
            if (cs[k] > hi) hi = cs[k];
        }
        if (r->fc_mean[o + KR_VOLUME] > vmax) vmax = r->fc_mean[o + KR_VOLUME];
    }
    /* At least 0.2 % of the price tall: a flat series' float dust is not drawn as a swing. */
    double min_span = fmax(fabs(hi), fabs(lo)) * 2e-3 + 1e-12;
    if (hi - lo < min_span) {
        double mid = 0.5 * (hi + lo);
        lo = mid - 0.5 * min_span;
        hi = mid + 0.5 * min_span;
    }
    double pad = (hi - lo) * 0.06;
    f->lo = lo - pad;
    f->hi = hi + pad;
    f->vmax = vmax * 1.1;
}

/* The price axis' ticks and their labels, worked out once: the right margin is sized to the
 * widest label that the axis then draws. */
enum { MAX_PRICE_TICKS = 64 };
typedef struct price_ticks {
    int n;
    price_unit unit;
    double value[MAX_PRICE_TICKS];
    char label[MAX_PRICE_TICKS][32];
} price_ticks;

static void price_ticks_of(const frame *f, price_ticks *t) {
    double first, step;
    kr_chart_nice_ticks(f->lo, f->hi, 6, &first, &step);
    t->unit = unit_for(f->lo, f->hi);
    t->n = 0;
    for (int k = 0; k < MAX_PRICE_TICKS; k++) {
        double v = first + k * step; /* not v += step: no drift, and it always advances */
        if (v > f->hi + step * 1e-9) break;
        t->value[t->n] = v;
        price_label(v, step, t->unit, t->label[t->n]);
        t->n++;
    }
}

/* Price grid and labels; a label within `avoid_px` of y_avoid (the last-close tag) is left
 * out so the two do not overprint. */
static void price_axis(kr_sb *sb, const frame *f, const price_ticks *t, double y_avoid,
                       double avoid_px) {
    for (int k = 0; k < t->n; k++) {
        double y = yp(f, t->value[k]);
        kr_sb_appendf(
            sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" COL_GRID "\"/>",
            f->x0, y, f->plot_right, y);
        if (fabs(y - y_avoid) >= avoid_px)
            kr_sb_appendf(sb, "<text x=\"%.1f\" y=\"%.1f\" class=\"ax\">%s</text>\n",
                          f->plot_right + 6, y + 4, t->label[k]);
    }
}

static void time_axis(kr_sb *sb, const kr_report *r, const frame *f, int total, double ybottom) {
    int target = 7, every = (total + target - 1) / target;
    if (every < 1) every = 1;
    /* Start half a spacing in so the first label is not cut at the left edge. */
    for (int s = every / 2; s < total; s += every) {
        int64_t t = s < r->n_chart ? r->chart_ts[s] : r->fc_ts[s - r->n_chart];
        char lab[32];
        time_label(t, r->date_only, lab);
        double x = xc(f, s);
        kr_sb_appendf(
            sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" COL_GRID "\"/>",
            x, f->py0, x, f->vy1);
        kr_sb_appendf(
            sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" COL_AXIS "\"/>",
            x, ybottom, x, ybottom + 4);
        kr_sb_appendf(sb,
                      "<text x=\"%.1f\" y=\"%.1f\" class=\"ax\" text-anchor=\"middle\">%s</text>\n",
                      x, ybottom + 17, lab);
    }
}

static void candles(kr_sb *sb, const kr_report *r, const frame *f) {
    double bw = f->w_slot * 0.64;
    if (bw < 1.0) bw = 1.0;
    kr_sb_append(sb, "<g class=\"candles\">\n");
    for (int i = 0; i < r->n_chart; i++) {
        const double *v = r->chart_values + (size_t)i * KR_N_FEATURES;
        int up = v[KR_CLOSE] >= v[KR_OPEN];
        const char *col = up ? COL_UP : COL_DOWN;
        double x = xc(f, i), top = yp(f, up ? v[KR_CLOSE] : v[KR_OPEN]),
               bot = yp(f, up ? v[KR_OPEN] : v[KR_CLOSE]);
        if (bot - top < 0.8) bot = top + 0.8; /* a doji still shows */
        kr_sb_appendf(sb, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\"/>",
                      x, yp(f, v[KR_HIGH]), x, yp(f, v[KR_LOW]), col);
        kr_sb_appendf(sb,
                      "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n",
                      x - bw / 2, top, bw, bot - top, up ? "#ffffff" : col);
        if (up)
            kr_sb_appendf(
                sb,
                "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
                "stroke=\"%s\"/>\n",
                x - bw / 2, top, bw, bot - top, col);
        if (f->vmax > 0)
            kr_sb_appendf(sb,
                          "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" "
                          "fill-opacity=\"0.45\"/>\n",
                          x - bw / 2, yv(f, v[KR_VOLUME]), bw, f->vy1 - yv(f, v[KR_VOLUME]), col);
    }
    kr_sb_append(sb, "</g>\n");
}

static void fan(kr_sb *sb, const kr_report *r, const frame *f) {
    const int n0 = r->n_chart - 1; /* slot of the last history bar: the fan's anchor */
    const double ax = xc(f, n0), ay = yp(f, r->last_close);
    kr_sb_appendf(sb, "<path d=\"M%.2f,%.2f", ax, ay);
    for (int i = 0; i < r->horizon; i++)
        kr_sb_appendf(sb, " L%.2f,%.2f", xc(f, n0 + 1 + i),
                      yp(f, r->fc_p90[(size_t)i * KR_N_FEATURES + KR_CLOSE]));
    for (int i = r->horizon - 1; i >= 0; i--)
        kr_sb_appendf(sb, " L%.2f,%.2f", xc(f, n0 + 1 + i),
                      yp(f, r->fc_p10[(size_t)i * KR_N_FEATURES + KR_CLOSE]));
    kr_sb_append(sb, " Z\" fill=\"" COL_FAN "\" fill-opacity=\"0.16\" stroke=\"" COL_FAN "\" "
                     "stroke-opacity=\"0.35\" stroke-width=\"0.8\"/>\n");
    const double *lines[2] = { r->fc_p50, r->fc_mean };
    const char *style[2] = { "stroke=\"" COL_FAN "\" stroke-width=\"2\"",
                             "stroke=\"" COL_MEAN
                             "\" stroke-width=\"1.8\" stroke-dasharray=\"5 3\"" };
    for (int k = 0; k < 2; k++) {
        kr_sb_appendf(sb, "<polyline fill=\"none\" %s points=\"%.2f,%.2f", style[k], ax, ay);
        for (int i = 0; i < r->horizon; i++)
            kr_sb_appendf(sb, " %.2f,%.2f", xc(f, n0 + 1 + i),
                          yp(f, lines[k][(size_t)i * KR_N_FEATURES + KR_CLOSE]));
        kr_sb_append(sb, "\"/>\n");
    }
    /* Forecast volume (mean path) as outlined bars. */
    double bw = f->w_slot * 0.64;
    for (int i = 0; i < r->horizon && f->vmax > 0; i++) {
        double v = r->fc_mean[(size_t)i * KR_N_FEATURES + KR_VOLUME];
        kr_sb_appendf(sb,
                      "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"" COL_FAN
                      "\" "
                      "fill-opacity=\"0.18\" stroke=\"" COL_FAN
                      "\" stroke-opacity=\"0.5\" stroke-width=\"0.6\"/>\n",
                      xc(f, n0 + 1 + i) - bw / 2, yv(f, v), bw, f->vy1 - yv(f, v));
    }
    /* Last close: a dotted level across the forecast, a dot, and a value tag on the axis. */
    char lab[32];
    close_label(r->last_close, unit_for(f->lo, f->hi), lab);
    kr_sb_appendf(sb,
                  "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#111827\" "
                  "stroke-width=\"1\" stroke-dasharray=\"2 3\"/>\n",
                  ax, ay, f->plot_right, ay);
    kr_sb_appendf(sb, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3.5\" fill=\"#111827\"/>\n", ax, ay);
    kr_sb_appendf(
        sb,
        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"16\" rx=\"3\" fill=\"#111827\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" class=\"tag\">%s</text>\n",
        f->plot_right + 2, ay - 8, fmax(60.0, label_px(lab) + 8.0), f->plot_right + 6, ay + 4, lab);
}

static void legend(kr_sb *sb, double x, double y) {
    kr_sb_appendf(sb,
                  "<g class=\"legend\" transform=\"translate(%.1f,%.1f)\">"
                  "<rect x=\"0\" y=\"-9\" width=\"14\" height=\"10\" fill=\"" COL_FAN
                  "\" fill-opacity=\"0.16\" "
                  "stroke=\"" COL_FAN
                  "\" stroke-opacity=\"0.35\"/><text x=\"19\" y=\"0\">p10-p90 band</text>"
                  "<line x1=\"112\" y1=\"-4\" x2=\"130\" y2=\"-4\" stroke=\"" COL_FAN
                  "\" stroke-width=\"2\"/>"
                  "<text x=\"135\" y=\"0\">median (p50)</text>"
                  "<line x1=\"222\" y1=\"-4\" x2=\"240\" y2=\"-4\" stroke=\"" COL_MEAN
                  "\" stroke-width=\"1.8\" "
                  "stroke-dasharray=\"5 3\"/><text x=\"245\" y=\"0\">mean path</text>"
                  "<circle cx=\"318\" cy=\"-4\" r=\"3.5\" fill=\"#111827\"/><text x=\"326\" "
                  "y=\"0\">last close</text>"
                  "</g>\n",
                  x, y);
}

/* Room right of the plot for the widest price label and the last-close tag (70 px at
 * least, the width of a four-digit price with two decimals). */
static double right_margin(const kr_report *r, const price_ticks *t) {
    double widest = 0.0;
    for (int k = 0; k < t->n; k++) widest = fmax(widest, label_px(t->label[k]) + 10.0);
    char lab[32];
    close_label(r->last_close, t->unit, lab);
    widest = fmax(widest, fmax(60.0, label_px(lab) + 8.0) + 4.0);
    return fmax(70.0, widest);
}

void kr_chart_forecast_svg(kr_sb *sb, const kr_report *r, int width, int height) {
    frame f;
    const int total = r->n_chart + r->horizon;
    const double left = 12, top = 30, bottom = 28, gap = 14;
    const double inner = height - top - bottom;
    ranges(r, &f);
    price_ticks ticks;
    price_ticks_of(&f, &ticks);
    f.x0 = left;
    f.plot_right = width - right_margin(r, &ticks);
    f.w_slot = (f.plot_right - f.x0) / total;
    f.py0 = top;
    f.py1 = top + inner * 0.76;
    f.vy0 = f.py1 + gap;
    f.vy1 = height - bottom;
    kr_sb_appendf(sb,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" width=\"%d\" "
                  "height=\"%d\" role=\"img\" class=\"chart\" aria-label=\"",
                  width, height, width, height);
    /* The symbol is the caller's (kr_analyze checks no spelling): escaped like any text. */
    kr_sb_append_html(sb, r->symbol);
    kr_sb_appendf(sb, ": last %d bars and a %d-bar forecast fan\">\n", r->n_chart, r->horizon);
    kr_sb_append(
        sb,
        "<style>.ax{font:11px system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;fill:" COL_AXIS
        "}.tag{font:bold 11px system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;fill:#fff}"
        ".legend text{font:12px system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;fill:" COL_TEXT
        "}.pl{font:600 11px system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;fill:" COL_AXIS "}"
        "</style>\n");
    /* Forecast region background and the history/forecast boundary. */
    double bx = f.x0 + r->n_chart * f.w_slot;
    kr_sb_appendf(sb,
                  "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"#f1f5f9\"/>\n",
                  bx, f.py0, f.plot_right - bx, f.vy1 - f.py0);
    price_axis(sb, &f, &ticks, yp(&f, r->last_close), 14.0);
    time_axis(sb, r, &f, total, f.vy1);
    kr_sb_appendf(sb,
                  "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"" COL_AXIS "\" "
                  "stroke-dasharray=\"4 3\"/>\n",
                  bx, f.py0, bx, f.vy1);
    kr_sb_appendf(sb, "<text x=\"%.2f\" y=\"%.1f\" class=\"pl\">forecast &#8594;</text>\n", bx + 5,
                  f.py0 + 13);
    kr_sb_appendf(sb, "<text x=\"%.2f\" y=\"%.1f\" class=\"pl\">%s</text>\n", f.x0 + 4, f.vy0 + 11,
                  f.vmax > 0 ? "volume" : "no volume in the data");
    /* Panel frames and the volume baseline. */
    kr_sb_appendf(sb,
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                  "stroke=\"#d1d5db\"/>\n",
                  f.x0, f.py0, f.plot_right - f.x0, f.py1 - f.py0);
    kr_sb_appendf(sb,
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                  "stroke=\"#d1d5db\"/>\n",
                  f.x0, f.vy0, f.plot_right - f.x0, f.vy1 - f.vy0);
    candles(sb, r, &f);
    fan(sb, r, &f);
    legend(sb, f.x0 + 2, 16);
    kr_sb_append(sb, "</svg>\n");
}
