/*
 * eval/backtest_md — number formats of the text renderings (Markdown, HTML).
 */
#ifndef KR_EVAL_BACKTEST_MD_H
#define KR_EVAL_BACKTEST_MD_H

#include <stddef.h>

#include "eval/backtest_internal.h"

/* A figure with its interval: "0.0123 [0.0110, 0.0135]", as a percentage with pct ("56.2%
 * [51.0%, 60.3%]"); the interval only where there is one; "n/a" for NaN. buf >= 96 bytes. */
void kr_bt_fmt_est(kr_bt_est e, int pct, char *buf, size_t cap);
/* 1 for the scores printed as percentages (coverage, hit rates, MAPE). */
int kr_bt_metric_is_pct(int m);

#endif
