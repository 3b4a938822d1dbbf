/* eval/backtest_svg — see backtest_svg.h. */
#include "eval/backtest_svg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/chart_svg.h"
#include "base/timeutil.h"

#define W 520
#define H 300
#define ML 58 /* left margin: y tick labels */
#define MR 14
#define MT 30 /* title */
#define MB 44 /* x ticks and legend */
#define COL_GRID "#e5e7eb"
#define COL_AXIS "#6b7280"
#define COL_TEXT "#374151"

typedef struct frame {
    double x0, x1, y0, y1; /* data ranges */
    double px0, px1, py0, py1; /* plot rectangle in pixels (py0 top) */
} frame;

static double fx(const frame *f, double x) {
    return f->x1 > f->x0 ? f->px0 + (x - f->x0) / (f->x1 - f->x0) * (f->px1 - f->px0)
                         : (f->px0 + f->px1) / 2;
}
static double fy(const frame *f, double y) {
    return f->py1 - (y - f->y0) / (f->y1 - f->y0) * (f->py1 - f->py0);
}

static void open_svg(kr_sb *sb, const char *title, int height) {
    kr_sb_appendf(sb,
                  "<svg class=\"chart\" viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\" "
                  "role=\"img\" font-family=\"system-ui,sans-serif\" font-size=\"11\"><title>",
                  W, height);
    kr_sb_append_html(sb, title);
    kr_sb_append(
        sb, "</title><text x=\"4\" y=\"16\" font-size=\"13\" font-weight=\"600\" fill=\"" COL_TEXT
            "\">");
    kr_sb_append_html(sb, title);
    kr_sb_append(sb, "</text>\n");
}

/* Grows [lo, hi] to hold v (NaN ignored). */
static void hold(double *lo, double *hi, double v) {
    if (!isfinite(v)) return;
    if (v < *lo) *lo = v;
    if (v > *hi) *hi = v;
}

/* As many decimals as a tick step needs (2.5-type steps one more). */
static int tick_decimals(double step) {
    if (!(step > 0) || step >= 1) return 0;
    int dec = (int)ceil(-log10(step) - 1e-9);
    if (fmod(step * pow(10, dec), 1.0) > 1e-6) dec++;
    return dec > 8 ? 8 : dec;
}

static void y_axis(kr_sb *sb, frame *f, const char *label, int percent) {
    if (!(f->y1 > f->y0)) {
        const double pad = fabs(f->y0) > 0 ? fabs(f->y0) * 0.1 : 1.0;
        f->y0 -= pad;
        f->y1 += pad;
    }
    const double pad = (f->y1 - f->y0) * 0.05;
    f->y0 -= pad;
    f->y1 += pad;
    double first, step;
    kr_chart_nice_ticks(f->y0, f->y1, 5, &first, &step);
    for (double t = first; t <= f->y1 + step * 1e-9; t += step) {
        const double y = fy(f, t);
        kr_sb_appendf(
            sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" COL_GRID "\"/>",
            f->px0, y, f->px1, y);
        const double v = fabs(t) < step * 1e-6 ? 0.0 : t;
        kr_sb_appendf(sb,
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"" COL_AXIS
                      "\">%.*f%s</text>",
                      f->px0 - 5, y + 4, tick_decimals(percent ? step * 100 : step),
                      percent ? v * 100 : v, percent ? "%" : "");
    }
    if (label && label[0]) {
        kr_sb_appendf(sb,
                      "<text transform=\"translate(12 %.1f) rotate(-90)\" text-anchor=\"middle\" "
                      "fill=\"" COL_AXIS "\">",
                      (f->py0 + f->py1) / 2);
        kr_sb_append_html(sb, label);
        kr_sb_append(sb, "</text>");
    }
    kr_sb_appendf(
        sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" COL_AXIS "\"/>\n",
        f->px0, f->py1, f->px1, f->py1);
}

static void date_label(int64_t t, char *buf) {
    kr_civil c = kr_civil_from_unix(t);
    if (t % 86400 == 0)
        snprintf(buf, 32, "%04d-%02d-%02d", c.year, c.month, c.day);
    else
        snprintf(buf, 32, "%02d-%02d %02d:%02d", c.month, c.day, c.hour, c.minute);
}

/* x tick labels: steps 1..n, or a few dates at indices 0..n-1. */
static void x_axis(kr_sb *sb, const frame *f, int n, const int64_t *x_ts, const char *label) {
    const double y = f->py1 + 15;
    if (!x_ts) {
        const int every = n <= 12 ? 1 : n <= 30 ? 5 : (n + 5) / 6;
        for (int k = 1; k <= n; k++)
            if (k == 1 || k % every == 0)
                kr_sb_appendf(sb,
                              "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"" COL_AXIS
                              "\">%d</text>",
                              fx(f, k), y, k);
    } else if (n > 0) {
        const int idx[3] = { 0, (n - 1) / 2, n - 1 };
        const char *anchor[3] = { "start", "middle", "end" };
        for (int j = 0; j < 3; j++) {
            if (j == 1 && (idx[1] == 0 || idx[1] == n - 1)) continue;
            char b[32];
            date_label(x_ts[idx[j]], b);
            kr_sb_appendf(sb,
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" fill=\"" COL_AXIS
                          "\">%s</text>",
                          fx(f, idx[j]), y, anchor[j], b);
        }
    }
    if (label) {
        kr_sb_appendf(sb,
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"" COL_AXIS "\">",
                      (f->px0 + f->px1) / 2, f->py1 + 29);
        kr_sb_append_html(sb, label);
        kr_sb_append(sb, "</text>\n");
    }
}

static void legend(kr_sb *sb, const kr_bt_line *lines, int n_lines, double y) {
    double x = ML;
    for (int i = 0; i < n_lines; i++) {
        kr_sb_appendf(sb,
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                      "stroke-width=\"2\"%s/><text x=\"%.1f\" y=\"%.1f\" fill=\"" COL_TEXT "\">",
                      x, y - 4, x + 16, y - 4, lines[i].color,
                      lines[i].dashed ? " stroke-dasharray=\"4 3\"" : "", x + 20, y);
        kr_sb_append_html(sb, lines[i].label);
        kr_sb_append(sb, "</text>");
        x += 30 + 6.4 * (double)strlen(lines[i].label);
        if (x > W - 60) break;
    }
    kr_sb_append(sb, "\n");
}

void kr_bt_svg_lines(kr_sb *sb, const char *title, const char *y_label, const kr_bt_line *lines,
                     int n_lines, int n, const int64_t *x_ts, const double *ref,
                     const char *const *ref_label, int n_ref, int percent) {
    const int height = H + 14;
    open_svg(sb, title, height);
    frame f = { x_ts ? 0 : 1, x_ts ? (n > 1 ? n - 1 : 1) : (n > 1 ? n : 2),
                INFINITY,     -INFINITY,
                ML,           W - MR,
                MT,           height - MB - 14 };
    for (int i = 0; i < n_lines; i++)
        for (int k = 0; k < n; k++) {
            hold(&f.y0, &f.y1, lines[i].y[k].value);
            hold(&f.y0, &f.y1, lines[i].y[k].lo);
            hold(&f.y0, &f.y1, lines[i].y[k].hi);
        }
    for (int j = 0; j < n_ref; j++) hold(&f.y0, &f.y1, ref[j]);
    if (!isfinite(f.y0)) f.y0 = 0, f.y1 = 1;
    y_axis(sb, &f, y_label, percent);
    const double xpos0 = x_ts ? 0 : 1;
    for (int i = 0; i < n_lines; i++) { /* bands first, under every line */
        kr_sb_appendf(sb, "<path fill=\"%s\" fill-opacity=\"0.13\" stroke=\"none\" d=\"",
                      lines[i].color);
        int open = 0;
        for (int k = 0; k <= n; k++) {
            const int ok = k < n && isfinite(lines[i].y[k].lo) && isfinite(lines[i].y[k].hi);
            if (ok && !open) {
                int e = k;
                while (e + 1 < n && isfinite(lines[i].y[e + 1].lo) &&
                       isfinite(lines[i].y[e + 1].hi))
                    e++;
                for (int j = k; j <= e; j++)
                    kr_sb_appendf(sb, "%s%.1f %.1f ", j == k ? "M" : "L", fx(&f, xpos0 + j),
                                  fy(&f, lines[i].y[j].hi));
                for (int j = e; j >= k; j--)
                    kr_sb_appendf(sb, "L%.1f %.1f ", fx(&f, xpos0 + j), fy(&f, lines[i].y[j].lo));
                kr_sb_append(sb, "Z ");
                open = 1;
            } else if (!ok) {
                open = 0;
            }
        }
        kr_sb_append(sb, "\"/>\n");
    }
    for (int j = 0; j < n_ref; j++) {
        kr_sb_appendf(sb,
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" COL_AXIS
                      "\" "
                      "stroke-dasharray=\"5 4\"/>",
                      f.px0, fy(&f, ref[j]), f.px1, fy(&f, ref[j]));
        if (ref_label && ref_label[j]) {
            kr_sb_appendf(sb,
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"" COL_AXIS "\">",
                          f.px1 - 2, fy(&f, ref[j]) - 3);
            kr_sb_append_html(sb, ref_label[j]);
            kr_sb_append(sb, "</text>\n");
        }
    }
    for (int i = 0; i < n_lines; i++) {
        kr_sb_appendf(sb, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"",
                      lines[i].color, i == 0 ? "2.2" : "1.6",
                      lines[i].dashed ? " stroke-dasharray=\"4 3\"" : "");
        for (int k = 0; k < n; k++)
            if (isfinite(lines[i].y[k].value))
                kr_sb_appendf(sb, "%.1f,%.1f ", fx(&f, xpos0 + k), fy(&f, lines[i].y[k].value));
        kr_sb_append(sb, "\"/>\n");
    }
    x_axis(sb, &f, n, x_ts, x_ts ? NULL : "horizon step");
    legend(sb, lines, n_lines, height - 6);
    kr_sb_append(sb, "</svg>\n");
}

void kr_bt_svg_histogram(kr_sb *sb, const char *title, const kr_bt_est *bins, int n,
                         double expected) {
    open_svg(sb, title, H);
    frame f = { 0, 1, 0, -INFINITY, ML, W - MR, MT, H - MB };
    for (int j = 0; j < n; j++) {
        hold(&f.y0, &f.y1, bins[j].value);
        hold(&f.y0, &f.y1, bins[j].hi);
    }
    hold(&f.y0, &f.y1, expected);
    y_axis(sb, &f, "share of cells", 1);
    f.y0 = 0 > f.y0 ? f.y0 : 0;
    const double bw = (f.px1 - f.px0) / n;
    for (int j = 0; j < n; j++) {
        if (!isfinite(bins[j].value)) continue;
        const double x = f.px0 + j * bw, top = fy(&f, bins[j].value), base = fy(&f, fmax(0, f.y0));
        kr_sb_appendf(sb,
                      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#2563eb\" "
                      "fill-opacity=\"0.55\"/>",
                      x + 2, top, bw - 4, base - top > 0 ? base - top : 0);
        if (isfinite(bins[j].lo) && isfinite(bins[j].hi))
            kr_sb_appendf(
                sb,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1e3a8a\" "
                "stroke-width=\"1.5\"/>",
                x + bw / 2, fy(&f, bins[j].lo), x + bw / 2, fy(&f, bins[j].hi));
    }
    kr_sb_appendf(sb,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c2410c\" "
                  "stroke-dasharray=\"5 4\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
                  "fill=\"#c2410c\">uniform</text>",
                  f.px0, fy(&f, expected), f.px1, fy(&f, expected), f.px1 - 2,
                  fy(&f, expected) - 4);
    for (int j = 0; j <= n; j += n / 5 > 0 ? n / 5 : 1)
        kr_sb_appendf(sb,
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"" COL_AXIS
                      "\">%.1f</text>",
                      f.px0 + j * bw, f.py1 + 15, (double)j / n);
    kr_sb_appendf(sb,
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"" COL_AXIS
                  "\">PIT</text>\n</svg>\n",
                  (f.px0 + f.px1) / 2, f.py1 + 29.0);
}

void kr_bt_svg_reliability(kr_sb *sb, const char *title, const double *pred,
                           const kr_bt_est *observed, const int64_t *count, int n) {
    open_svg(sb, title, H);
    frame f = { 0, 1, 0, 1, ML, W - MR, MT, H - MB };
    double first, step;
    kr_chart_nice_ticks(0, 1, 5, &first, &step);
    for (double t = 0; t <= 1 + 1e-9; t += 0.2) {
        kr_sb_appendf(
            sb,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" COL_GRID "\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"" COL_AXIS "\">%.0f%%</text>"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"" COL_AXIS
            "\">%.0f%%</text>",
            f.px0, fy(&f, t), f.px1, fy(&f, t), f.px0 - 5, fy(&f, t) + 4, t * 100, fx(&f, t),
            f.py1 + 15, t * 100);
    }
    kr_sb_appendf(sb,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" COL_AXIS "\" "
                  "stroke-dasharray=\"5 4\"/>\n",
                  fx(&f, 0), fy(&f, 0), fx(&f, 1), fy(&f, 1));
    int64_t total = 0;
    for (int j = 0; j < n; j++) total += count[j];
    for (int j = 0; j < n; j++) {
        if (!count[j] || !isfinite(pred[j]) || !isfinite(observed[j].value)) continue;
        const double x = fx(&f, pred[j]);
        if (isfinite(observed[j].lo) && isfinite(observed[j].hi))
            kr_sb_appendf(
                sb,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1e3a8a\" "
                "stroke-width=\"1.5\"/>",
                x, fy(&f, observed[j].lo), x, fy(&f, observed[j].hi));
        const double rad = 2.5 + 7.0 * sqrt((double)count[j] / (double)(total > 0 ? total : 1));
        kr_sb_appendf(
            sb,
            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"#2563eb\" fill-opacity=\"0.7\"/>", x,
            fy(&f, observed[j].value), rad);
    }
    kr_sb_appendf(sb,
                  "\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"" COL_AXIS
                  "\">forecast "
                  "P(up)</text><text transform=\"translate(12 %.1f) rotate(-90)\" "
                  "text-anchor=\"middle\" fill=\"" COL_AXIS "\">observed share up</text>\n</svg>\n",
                  (f.px0 + f.px1) / 2, f.py1 + 29.0, (f.py0 + f.py1) / 2);
}

void kr_bt_svg_equity(kr_sb *sb, const kr_bt_strategy *s) {
    const int n = s->n_periods + 1, height = H + 90;
    open_svg(sb, "Equity: strategy vs equal-weight buy-and-hold, and drawdown", height);
    frame f = { 0, n > 1 ? n - 1 : 1, 1, 1, ML, W - MR, MT, MT + 200 };
    for (int t = 0; t < s->n_periods; t++) {
        hold(&f.y0, &f.y1, s->periods[t].equity);
        hold(&f.y0, &f.y1, s->periods[t].bench_equity);
    }
    y_axis(sb, &f, "equity (start = 1)", 0);
    const char *cols[2] = { "#2563eb", "#6b7280" };
    for (int line = 0; line < 2; line++) {
        kr_sb_appendf(
            sb, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"%.1f,%.1f ",
            cols[line], line ? "1.5" : "2.2", line ? " stroke-dasharray=\"4 3\"" : "", fx(&f, 0),
            fy(&f, 1));
        for (int t = 0; t < s->n_periods; t++)
            kr_sb_appendf(sb, "%.1f,%.1f ", fx(&f, t + 1),
                          fy(&f, line ? s->periods[t].bench_equity : s->periods[t].equity));
        kr_sb_append(sb, "\"/>\n");
    }
    /* Drawdown panel. */
    frame d = { 0, n > 1 ? n - 1 : 1, 0, 0, ML, W - MR, MT + 222, height - MB - 8 };
    for (int t = 0; t < s->n_periods; t++) hold(&d.y0, &d.y1, s->periods[t].drawdown);
    y_axis(sb, &d, "drawdown", 1);
    kr_sb_appendf(sb,
                  "<path fill=\"#b91c1c\" fill-opacity=\"0.25\" stroke=\"#b91c1c\" d=\"M%.1f %.1f ",
                  fx(&d, 0), fy(&d, 0));
    for (int t = 0; t < s->n_periods; t++)
        kr_sb_appendf(sb, "L%.1f %.1f ", fx(&d, t + 1), fy(&d, s->periods[t].drawdown));
    kr_sb_appendf(sb, "L%.1f %.1f Z\"/>\n", fx(&d, n - 1), fy(&d, 0));
    int64_t *ts = malloc((size_t)n * sizeof *ts);
    if (ts) {
        ts[0] = s->n_periods ? s->periods[0].start_ts : 0;
        for (int t = 0; t < s->n_periods; t++) ts[t + 1] = s->periods[t].end_ts;
        x_axis(sb, &d, n, ts, NULL);
        free(ts);
    }
    const kr_bt_line lg[2] = { { "strategy (after costs)", cols[0], NULL, 0 },
                               { "equal-weight buy-and-hold", cols[1], NULL, 1 } };
    legend(sb, lg, 2, height - 6);
    kr_sb_append(sb, "</svg>\n");
}
