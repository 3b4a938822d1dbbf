/*
 * eval/backtest_render — the pieces every format of the backtest report shares (see
 * backtest_render.c); the names of forecasters and scores are in backtest_internal.h.
 */
#ifndef KR_EVAL_BACKTEST_RENDER_H
#define KR_EVAL_BACKTEST_RENDER_H

#include <stddef.h>

#include "eval/backtest_internal.h"

/* "better", "worse", "not significant" for a DM row's verdict (-1, +1, 0). */
const char *kr_bt_verdict_word(int verdict);
/* "kronos-demo beats naive on CRPS (Diebold-Mariano p = 0.003 < 0.05, 140 origins)", or
 * "... loses to ...", or "...: not significant (...)". */
void kr_bt_verdict_sentence(const kr_backtest_report *r, const kr_bt_dm_row *row, char *buf,
                            size_t cap);
/* The demo notice every format leads with when the model (or the second model) declares itself
 * a demo / test checkpoint; 1 with buf filled, else 0 and buf empty. */
int kr_bt_demo_notice(const kr_backtest_report *r, char *buf, size_t cap);

/* "; A-share rules (T+1, limit days) for its A-share symbols" when any symbol has them, else
 * "": the strategy's description. */
const char *kr_bt_ashare_note(const kr_backtest_report *r);

/* The interpretation of a figure's interval, for the text formats. */
#define KR_BT_INTERVAL_NOTE                                                                  \
    "Intervals are %.0f %% percentile intervals of a circular block bootstrap over origins " \
    "(%d resamples, blocks of %d origins); forecasts made at one origin move together."

#endif
