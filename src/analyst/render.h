/*
 * analyst/render — a report set as text: JSON (schema-stable, docs/report.schema.json),
 * Markdown, or a self-contained HTML page with inline SVG charts. Renderers only format; every
 * number comes from the report (analyst/report.h).
 */
#ifndef KR_ANALYST_RENDER_H
#define KR_ANALYST_RENDER_H

#include "analyst/analyze.h"
#include "base/strbuf.h"
#include "kronos.h"
#include "kronos/analyst.h"

/* kr_report_format, kr_report_format_parse, kr_render: kronos/analyst.h. */

/* Each writes a NUL-terminated text into *out; caller owns it (free()). */
kr_status kr_render_json(const kr_report_set *set, char **out, kr_error *err);
kr_status kr_render_md(const kr_report_set *set, char **out, kr_error *err);
kr_status kr_render_html(const kr_report_set *set, char **out, kr_error *err);

/* The HTML report's style sheet (light theme, cards, KPI tiles, tables, print rules), for
 * other self-contained pages that should look the same (the backtest report). */
const char *kr_report_css(void);

/* The model notice every format leads with when a report's model declares itself a demo or
 * test checkpoint: "DEMO MODEL — not a forecast: NAME is ... (SOURCE)". Returns 1 and fills
 * buf, or 0 (no notice; buf empty). */
int kr_report_model_notice(const kr_report_set *set, char *buf, size_t cap);

/* "last bar 2025-08-01, 340 sessions ago" (plain text). */
void kr_report_age_note(kr_sb *sb, const kr_report *r);
/* For a stale report, "Stale data: last bar 2025-08-01, 340 sessions ago (a 1d series is
 * stale past 2 sessions without a bar)." (plus how far it lies behind the newest symbol of
 * the set, when it does); nothing otherwise. Plain text. */
void kr_report_stale_note(kr_sb *sb, const kr_report *r);

/* The notice every format leads with when a report's forecast bars run past the years whose
 * holidays its calendar lists: "CALENDAR PAST ITS YEARS: 600977.SH 1d: its forecast bars run
 * past 2026, ...". Returns 1 and fills buf, or 0 (buf empty). */
#define KR_REPORT_CALENDAR_BANNER "CALENDAR PAST ITS YEARS"
int kr_report_calendar_notice(const kr_report_set *set, char *buf, size_t cap);

/* "128 paths in 1 round (targets: P(up) ± 2 pp, VaR95 ± 10%: met). Candles: consistent ..."
 * — how many paths made the figures and what was done to the candles, for MD/HTML (plain
 * text; HTML escapes it). */
void kr_report_paths_note(kr_sb *sb, const kr_report *r);

/* What the ± of the per-step table means, for the mean and for the p10 / p50 / p90 bands
 * (plain text; HTML escapes it). */
void kr_report_bands_note(kr_sb *sb, const kr_report *r);

/* The "Sampling" and "Timing" lines of the "Model and run" table, into buf (plain text; HTML
 * escapes it): "128 paths, horizon 20, lookback 400 of 2913 rows, max_context 512, temperature
 * 1, top_p 0.9, top_k 0, seed 42" and "0.162 s total (prefill 0.068 s, decode 0.051 s,
 * tokenizer 0.011 s)". Return buf. */
char *kr_report_sampling_text(const kr_report *r, char *buf, size_t cap);
char *kr_report_timing_text(const kr_report *r, char *buf, size_t cap);

/* The cells of step i of the per-step table, as Markdown and HTML print them: the time, then
 * the close's mean, p10, p50 and p90 with their errors ("207.57 \u00b1 0.45"). */
typedef struct kr_step_cells {
    char time[32], mean[64], p10[64], p50[64], p90[64];
} kr_step_cells;
void kr_report_step_cells(const kr_report *r, int i, kr_step_cells *out);

/* The cells of a calibration window's row: when its history ends, its last close, the
 * realised close, the model's mean, and the model's and the naive p10-p90 bands with `dash`
 * between their ends. */
typedef struct kr_window_cells {
    char end[32], last[32], realized[32], model[32], model_band[80], naive_band[80];
} kr_window_cells;
void kr_report_window_cells(const kr_report *r, const kr_calib_window *w, const char *dash,
                            kr_window_cells *out);

#endif
