/*
 * eval/backtest_svg — the backtest report's plots as inline SVG (plain SVG 1.1, presentation
 * attributes, no scripts, as analyst/chart_svg): lines with interval bands, a histogram with
 * interval whiskers, a reliability diagram, and a two-panel equity / drawdown chart. Every plot
 * draws the intervals it is given; a NaN point or bound is left out.
 */
#ifndef KR_EVAL_BACKTEST_SVG_H
#define KR_EVAL_BACKTEST_SVG_H

#include <stdint.h>

#include "base/strbuf.h"
#include "eval/backtest_internal.h"

typedef struct kr_bt_line {
    const char *label;
    const char *color; /* "#rrggbb" */
    const kr_bt_est *y; /* [n] value with lo / hi (drawn as a band when finite) */
    int dashed;
} kr_bt_line;

/* Lines over x = 1..n (horizon steps: x_ts NULL) or over time (x_ts[n] stamps, labelled as
 * dates), with their bands, optional horizontal reference lines ref[n_ref] (dashed, labelled
 * ref_label[i]), a title and a y-axis label; percent: y tick labels as percentages. */
void kr_bt_svg_lines(kr_sb *sb, const char *title, const char *y_label, const kr_bt_line *lines,
                     int n_lines, int n, const int64_t *x_ts, const double *ref,
                     const char *const *ref_label, int n_ref, int percent);

/* A histogram of bins[n] (fractions) with whiskers from their intervals and a dashed line at
 * `expected` (the uniform PIT's 1 / n). */
void kr_bt_svg_histogram(kr_sb *sb, const char *title, const kr_bt_est *bins, int n,
                         double expected);

/* A reliability diagram: observed frequency of "up" (with its interval) against the mean
 * P(up) of each bin, point area by cell count, and the diagonal of perfect calibration. */
void kr_bt_svg_reliability(kr_sb *sb, const char *title, const double *pred,
                           const kr_bt_est *observed, const int64_t *count, int n);

/* The strategy's equity curve against the benchmark's, over its periods, with the drawdown
 * below. */
void kr_bt_svg_equity(kr_sb *sb, const kr_bt_strategy *s);

#endif
