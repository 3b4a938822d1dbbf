/* analyst/render — format names and the dispatcher (see render.h). */
#include "analyst/render.h"

#include <stdio.h>
#include <string.h>

#include "analyst/stats.h"
#include "analyst/text.h"
#include "base/error.h"
#include "base/timeutil.h"

int kr_report_format_parse(const char *s, kr_report_format *out) {
    if (!s) return -1;
    if (!strcmp(s, "json"))
        *out = KR_FORMAT_JSON;
    else if (!strcmp(s, "md") || !strcmp(s, "markdown"))
        *out = KR_FORMAT_MD;
    else if (!strcmp(s, "html"))
        *out = KR_FORMAT_HTML;
    else
        return -1;
    return 0;
}

kr_status kr_render(const kr_report_set *set, kr_report_format fmt, char **out, kr_error *err) {
    switch (fmt) {
    case KR_FORMAT_JSON: return kr_render_json(set, out, err);
    case KR_FORMAT_MD: return kr_render_md(set, out, err);
    case KR_FORMAT_HTML: return kr_render_html(set, out, err);
    }
    return kr_error_set(err, KR_ERR_INVALID_ARG, "render: unknown format %d", (int)fmt);
}

int kr_report_model_notice(const kr_report_set *set, char *buf, size_t cap) {
    buf[0] = 0;
    for (int i = 0; set && i < set->n; i++) {
        const kr_report_meta *m = &set->reports[i]->meta;
        if (!m->demo) continue;
        snprintf(buf, cap,
                 KR_REPORT_DEMO_BANNER ": %s is a demo/test checkpoint that exists to run the "
                                       "software, and its numbers say nothing about the market "
                                       "(source: %s).",
                 m->model_name, m->source);
        return 1;
    }
    return 0;
}

void kr_report_age_note(kr_sb *sb, const kr_report *r) {
    char t[32];
    kr_sb_appendf(sb, "last bar %s, %lld session%s ago",
                  kr_format_timestamp(r->last_ts, r->date_only, t, sizeof t),
                  (long long)r->sessions_ago, r->sessions_ago == 1 ? "" : "s");
}

void kr_report_stale_note(kr_sb *sb, const kr_report *r) {
    if (!r->stale) return;
    kr_sb_append(sb, "Stale data: ");
    kr_report_age_note(sb, r);
    if (r->stale_now)
        kr_sb_appendf(sb, " (a %s series is stale past %d sessions without a bar)", r->interval,
                      r->stale_sessions_limit);
    if (r->stale_days > 0.5)
        kr_sb_appendf(sb, "%s%.0f days behind the newest symbol of this report",
                      r->stale_now ? "; " : " (", r->stale_days);
    else if (!r->stale_now)
        kr_sb_append(sb, " (");
    kr_sb_append(sb, r->stale_now && !(r->stale_days > 0.5) ? "." : ").");
}

int kr_report_calendar_notice(const kr_report_set *set, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; set && i < set->n && len + 200 < cap; i++) {
        const kr_report *r = set->reports[i];
        if (!r->market[0] || r->holidays_known) continue;
        const kr_calendar *cal = NULL;
        kr_calendar_desc d = { 0 };
        if (kr_calendar_find(r->market, &cal, NULL) == KR_OK) kr_calendar_get_desc(cal, &d);
        len += (size_t)snprintf(buf + len, cap - len,
                                "%s%s %s: its forecast bars run past %d, the last year whose %s "
                                "holidays are known, and are stamped on every weekday there",
                                len ? "; " : KR_REPORT_CALENDAR_BANNER ": ", r->symbol, r->interval,
                                d.year_last, d.name ? d.name : r->market);
    }
    if (len && len + 80 < cap)
        snprintf(buf + len, cap - len, " (add the year's holidays: kronos calendars --help).");
    return len > 0;
}

void kr_report_paths_note(kr_sb *sb, const kr_report *r) {
    const kr_report_meta *m = &r->meta;
    if (r->calendar[0])
        kr_sb_appendf(sb, "Forecast bars follow the calendar: %s%s. ", r->calendar,
                      r->market[0] && !r->holidays_known ? "; holidays past its years are unknown"
                                                         : "");
    kr_sb_appendf(sb, "%d sampled paths in %d round%s", r->paths, r->rounds,
                  r->rounds == 1 ? "" : "s");
    if (m->target_prob_se > 0 || m->target_var_rel_se > 0) {
        kr_sb_append(sb, " (targets:");
        if (m->target_prob_se > 0)
            kr_sb_appendf(sb, " P(up) \u00b1 %.0f pp", m->target_prob_se * 100.0);
        if (m->target_var_rel_se > 0)
            kr_sb_appendf(sb, "%s VaR95 \u00b1 %.0f%% of its size",
                          m->target_prob_se > 0 ? "," : "", m->target_var_rel_se * 100.0);
        if (r->target_met)
            kr_sb_append(sb, ": met)");
        else
            kr_sb_appendf(sb, ": not met within the cap of %d paths)", m->paths_max);
    } else {
        kr_sb_append(sb, " (a fixed number, no error target)");
    }
    if (m->ohlc == KR_OHLC_CONSISTENT)
        kr_sb_appendf(sb,
                      ". Candles: consistent (prices \u2265 0, high \u2265 max(open, close), low "
                      "\u2264 min(open, close), volume \u2265 0, applied to every path before the "
                      "statistics; the model wrote an open or close outside the high-low range in "
                      "%lld of %lld path candles)",
                      (long long)r->raw_inconsistent, (long long)r->paths * r->horizon);
    else
        kr_sb_append(sb, ". Candles: raw (the model's numbers; a candle's open or close may lie "
                         "outside its high-low range)");
    if (r->nonpositive_paths > 0)
        kr_sb_appendf(sb,
                      ". %d of %d paths reached a price at or below zero; their closes count as "
                      "zero in every statistic.",
                      r->nonpositive_paths, r->paths);
    else
        kr_sb_append(sb, ".");
}

void kr_report_bands_note(kr_sb *sb, const kr_report *r) {
    kr_sb_append(sb,
                 "Each close \u00b1 its Monte Carlo standard error (how far another seed's "
                 "figure may lie at this number of paths): for the mean, the standard deviation "
                 "of the paths' closes / \u221aN; for p10, p50 and p90, half the distance "
                 "between the closes \u221a(N\u00b7q\u00b7(1 \u2212 q)) ranks either side of "
                 "the quantile, the order statistics that hold the true quantile with about "
                 "68% probability.");
    if (r->paths < KR_STAT_QUANTILE_SE_MIN_N)
        kr_sb_appendf(sb, " With fewer than %d paths the quantiles have none.",
                      KR_STAT_QUANTILE_SE_MIN_N);
}

char *kr_report_sampling_text(const kr_report *r, char *buf, size_t cap) {
    const kr_report_meta *m = &r->meta;
    snprintf(buf, cap,
             "%d paths, horizon %d, lookback %d of %lld rows, max_context %d, temperature %g, "
             "top_p %g, top_k %d, seed %llu",
             r->paths, r->horizon, r->lookback, (long long)r->rows_available, m->max_context,
             m->temperature, m->top_p, m->top_k, (unsigned long long)m->seed);
    return buf;
}

char *kr_report_timing_text(const kr_report *r, char *buf, size_t cap) {
    snprintf(buf, cap, "%.3f s total (prefill %.3f s, decode %.3f s, tokenizer %.3f s)",
             r->timing.seconds_total, r->timing.seconds_prefill, r->timing.seconds_decode,
             r->timing.seconds_tokenizer);
    return buf;
}

void kr_report_step_cells(const kr_report *r, int i, kr_step_cells *out) {
    const size_t o = (size_t)i * KR_N_FEATURES + KR_CLOSE;
    kr_format_timestamp(r->fc_ts[i], r->date_only, out->time, sizeof out->time);
    kr_fmt_pm_price(r->fc_mean[o], r->fc_mean_se[o], out->mean);
    kr_fmt_pm_price(r->fc_p10[o], r->fc_p10_se[o], out->p10);
    kr_fmt_pm_price(r->fc_p50[o], r->fc_p50_se[o], out->p50);
    kr_fmt_pm_price(r->fc_p90[o], r->fc_p90_se[o], out->p90);
}

void kr_report_window_cells(const kr_report *r, const kr_calib_window *w, const char *dash,
                            kr_window_cells *out) {
    char lo[32], hi[32];
    kr_format_timestamp(w->history_end_ts, r->date_only, out->end, sizeof out->end);
    kr_fmt_price(w->last_close, out->last);
    kr_fmt_price(w->realized_close, out->realized);
    kr_fmt_price(w->model_close, out->model);
    snprintf(out->model_band, sizeof out->model_band, "%s%s%s", kr_fmt_price(w->model_p10, lo),
             dash, kr_fmt_price(w->model_p90, hi));
    snprintf(out->naive_band, sizeof out->naive_band, "%s%s%s", kr_fmt_price(w->naive_p10, lo),
             dash, kr_fmt_price(w->naive_p90, hi));
}
