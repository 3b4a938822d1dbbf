/*
 * eval/backtest_csv — one row per forecast (symbol x origin): what happened and what each
 * forecaster said at the horizon, with the origin's mean CRPS and MASE, for a spreadsheet or a
 * DataFrame (docs/backtest.md lists the columns). A figure that does not exist is empty.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/strbuf.h"
#include "eval/backtest_internal.h"

static void cell(kr_sb *sb, double v) {
    if (isfinite(v))
        kr_sb_appendf(sb, ",%.10g", v);
    else
        kr_sb_append(sb, ",");
}

/* A text field, quoted when it holds a comma, a quote or a line break. */
static void text(kr_sb *sb, const char *s, int first) {
    if (!first) kr_sb_append(sb, ",");
    if (!strpbrk(s, ",\"\r\n")) {
        kr_sb_append(sb, s);
        return;
    }
    kr_sb_append(sb, "\"");
    for (const char *p = s; *p; p++) kr_sb_appendn(sb, *p == '"' ? "\"\"" : p, *p == '"' ? 2 : 1);
    kr_sb_append(sb, "\"");
}

static const char *const k_cols[] = { "mean",    "median", "p10",         "p90", "exp_return",
                                      "prob_up", "crps",   "mase_median", "vol" };

kr_status kr_bt_render_csv(const kr_backtest_report *r, char **out, kr_error *err) {
    kr_sb sb = { 0 };
    kr_sb_append(&sb, "symbol,interval,origin,origin_key,row,lookback,last_close,realized_close,"
                      "realized_return,realized_vol,stamp_mismatch");
    for (int f = 0; f < KR_BT_N_F; f++) {
        if (!r->has[f]) continue;
        for (size_t c = 0; c < sizeof k_cols / sizeof k_cols[0]; c++)
            kr_sb_appendf(&sb, ",%s_%s", kr_bt_forecaster_key(f), k_cols[c]);
    }
    kr_sb_append(&sb, "\n");
    for (int i = 0; i < r->n_items; i++) {
        const kr_bt_item *it = &r->items[i];
        const kr_bt_symbol *sy = &r->symbols[it->sym];
        char a[32], b[32];
        kr_bt_fmt_ts(it->ts, a, sizeof a);
        kr_bt_fmt_ts(r->unit_ts[it->unit], b, sizeof b);
        text(&sb, sy->symbol, 1);
        text(&sb, sy->interval, 0);
        kr_sb_appendf(&sb, ",%s,%s,%lld,%d", a, b, (long long)it->row, it->lookback);
        cell(&sb, it->last_close);
        cell(&sb, it->real_h);
        cell(&sb, it->real_return);
        cell(&sb, it->real_vol);
        kr_sb_appendf(&sb, ",%d", it->stamp_mismatch);
        for (int f = 0; f < KR_BT_N_F; f++) {
            if (!r->has[f]) continue;
            const kr_bt_fsum *s = &it->f[f];
            const double mase_den = r->item_den[kr_bt_item_idx(i, f, KR_BT_MASE_MEDIAN)];
            cell(&sb, s->mean_h);
            cell(&sb, s->median_h);
            cell(&sb, s->p10_h);
            cell(&sb, s->p90_h);
            cell(&sb, s->exp_return);
            cell(&sb, s->prob_up);
            cell(&sb, s->crps);
            cell(&sb, mase_den > 0 ? r->item_num[kr_bt_item_idx(i, f, KR_BT_MASE_MEDIAN)] / mase_den
                                   : NAN);
            cell(&sb, s->vol);
        }
        kr_sb_append(&sb, "\n");
    }
    return kr_sb_finish(&sb, out, err);
}
