/*
 * engine/norm_anchor — anchored normalisation (kr_forecast_params.norm = KR_NORM_ANCHORED):
 * where a series' window starts and over which of its rows the statistics are taken, so that
 * a window grown by one bar keeps every earlier token (and, through the prefix cache, its
 * K/V) and costs one new token of prefill.
 *
 * Exact normalisation takes mean and std over the whole window: one more bar moves both, the
 * tokenizer sees other inputs and most tokens change (a window grown by one bar reused 48 of
 * 301 tokens). Anchored normalisation fixes them at an anchor, the window as first seen:
 *
 *   first request      window = its last L rows (L: the lookback), statistics over all L
 *                      (the exact ones): an anchor (start row, A = L) is remembered
 *   a later request    whose rows still hold the anchor's start row: window = from that row to
 *                      the newest (it grows by a row a bar), statistics over its first A rows
 *                      (the same rows as at the anchor, hence the same numbers and tokens)
 *   refresh            when the window has grown refresh bars past A, or would pass
 *                      max_context: a new anchor, as for a first request
 *
 * The client sends more rows than the lookback (the history since the anchor); with exactly L
 * rows the anchor's start row is gone at the next bar and every request is a first request
 * (= exact normalisation). An anchor is a start row's identity (time stamp and the six raw
 * values), not stored statistics: the statistics are recomputed from the request's own rows,
 * so a revised candle can never bring back stale numbers. The table is direct-mapped (a slot
 * per hash, a colliding anchor replaces the older one: it is then re-anchored, which only
 * costs reuse). Thread-safe (its own lock): kr_submit runs on the callers' threads.
 */
#ifndef KR_ENGINE_NORM_ANCHOR_H
#define KR_ENGINE_NORM_ANCHOR_H

#include <stdint.h>

#include "kronos.h"

typedef struct kr_norm_anchors kr_norm_anchors;

#define KR_NORM_REFRESH_DEFAULT 16

kr_status kr_norm_anchors_create(kr_norm_anchors **out, kr_error *err);
void kr_norm_anchors_free(kr_norm_anchors *t);

/* The anchored window of a series of n rows (timestamps [n], values [n][6]) asked with
 * lookback rows (2 <= lookback <= n): *window_rows (lookback .. max_context) ending at the
 * newest row, and *stat_rows, the leading rows of it the statistics are taken over.
 * refresh <= 0: KR_NORM_REFRESH_DEFAULT. Records a new anchor when none applies. */
void kr_norm_anchor_choose(kr_norm_anchors *t, const int64_t *timestamps, const double *values,
                           int64_t n, int lookback, int max_context, int refresh, int *window_rows,
                           int *stat_rows);

/* Anchors found / made since creation (tests, metrics). */
void kr_norm_anchor_counts(kr_norm_anchors *t, int64_t *reused, int64_t *made);

#endif
