/*
 * analyst/chart_svg — inline SVG charts for the HTML report: the last bars as candlesticks
 * with a volume panel, continued by the forecast fan (p10-p90 band, median and mean paths,
 * last-close marker), with price and date axes. Plain SVG 1.1 with presentation attributes,
 * no scripts and no external resources, so the page prints and archives as it is.
 */
#ifndef KR_ANALYST_CHART_SVG_H
#define KR_ANALYST_CHART_SVG_H

#include "analyst/report.h"
#include "analyst/text.h"

/* Appends an <svg> element of the given size in CSS pixels (it scales with width: 100%). */
void kr_chart_forecast_svg(kr_sb *sb, const kr_report *r, int width, int height);

/* "Nice" axis ticks for [lo, hi]: a step of 1, 2, 2.5 or 5 times a power of ten giving about
 * `target` ticks. Writes the first tick and the step. */
void kr_chart_nice_ticks(double lo, double hi, int target, double *first, double *step);

#endif
