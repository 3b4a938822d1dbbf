/*
 * analyst/summary — fixed sentence templates over the report's numbers (see summary.h).
 * Every number quoted here is a field of the report, formatted the way the renderers format
 * it, so a reader can find each one in the tables.
 */
#include "analyst/summary.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/report.h"
#include "analyst/text.h"
#include "base/timeutil.h"

#define KR_SUMMARY_MAX 8

/* A lean the Monte Carlo error could not undo: at least 60 % of the n paths, and the centre of
 * the Agresti-Coull interval, (k + 2) / (n + 4), whose standard error se is, two of them clear
 * of a coin toss. (The raw share there called 1 path of 1, or 2 of 2, a lean.) */
static int clear_majority(double p, double se, int n) {
    const double centre = (p * n + 2.0) / (n + 4.0);
    return p >= 0.6 && centre - 2.0 * se > 0.5;
}

const char *kr_summary_direction(const kr_report *r) {
    if (clear_majority(r->prob_up, r->prob_up_se, r->paths)) return "leans up";
    if (clear_majority(r->prob_down, r->prob_down_se, r->paths)) return "leans down";
    return "is undecided";
}

/* Three-way comparison of a and b, equal within a relative 1e-9 (float noise, not a side). */
static int side_of(double a, double b) {
    double tol = 1e-9 * fmax(fabs(a), fabs(b));
    return a > b + tol ? 1 : a < b - tol ? -1 : 0;
}

static const char *bollinger_words(double pb) {
    if (pb > 1.0) return "above the upper Bollinger band";
    if (pb >= 0.8) return "near the upper Bollinger band";
    if (pb < 0.0) return "below the lower Bollinger band";
    if (pb <= 0.2) return "near the lower Bollinger band";
    return "inside the Bollinger bands";
}

static void sentence_direction(const kr_report *r, kr_sb *sb) {
    char a[32], b[32], d[32], e[64];
    const size_t hc = (size_t)(r->horizon - 1) * KR_N_FEATURES + KR_CLOSE;
    kr_format_timestamp(r->last_ts, r->date_only, d, sizeof d);
    kr_sb_appendf(sb,
                  "Over the next %d bars (%s) the model %s: %s of %d sampled paths close above "
                  "the last close of %s (%s)",
                  r->horizon, r->interval, kr_summary_direction(r), kr_fmt_pct(r->prob_up, 0, a),
                  r->paths, kr_fmt_price(r->last_close, b), d);
    /* From the path counts: 1 - up - down left float dust (2.8e-17) that read as "0% where
     * they began" when no path did. */
    const long n_up = lround(r->prob_up * r->paths), n_down = lround(r->prob_down * r->paths);
    const long n_flat = r->paths - n_up - n_down;
    if (n_flat > 0) {
        char f[32];
        kr_sb_appendf(sb, ", %s below it and %s where they began", kr_fmt_pct(r->prob_down, 0, a),
                      kr_fmt_pct((double)n_flat / r->paths, 0, f));
    }
    /* With its Monte Carlo error: another seed's mean path ends elsewhere. */
    kr_sb_appendf(sb, "; the mean path ends at %s.",
                  kr_fmt_pm_price(r->fc_mean[hc], r->fc_mean_se[hc], e));
}

/* Leads the summary when the model sampled prices at or below zero: it is then far outside
 * what it saw, and a stock's price cannot go there. */
static int sentence_nonpositive(const kr_report *r, kr_sb *sb) {
    if (r->nonpositive_paths <= 0) return 0;
    kr_sb_appendf(sb,
                  "Caution: %d of %d sampled paths reach a price at or below zero, which the "
                  "model's normalised space allows and a price does not; such closes count as "
                  "zero (a total loss) here, and the figures below describe a model far outside "
                  "the history it saw.",
                  r->nonpositive_paths, r->paths);
    return 1;
}

static void sentence_move(const kr_report *r, kr_sb *sb) {
    char er[32], sd[32], lo[64], hi[64], rlo[32], rhi[32];
    const size_t last = (size_t)(r->horizon - 1) * KR_N_FEATURES + KR_CLOSE;
    kr_sb_appendf(sb, "Expected return %s", kr_fmt_pct_signed(r->expected_return, er));
    if (!isnan(r->return_std))
        kr_sb_appendf(sb, " (standard deviation %s)", kr_fmt_pct(r->return_std, 2, sd));
    /* The band's ends with their Monte Carlo errors: a stop or a target set at one moves with
     * the seed by about that much. */
    kr_sb_appendf(sb, "; 80%% of paths end between %s and %s (%s to %s).",
                  kr_fmt_pm_price(r->fc_p10[last], r->fc_p10_se[last], lo),
                  kr_fmt_pm_price(r->fc_p90[last], r->fc_p90_se[last], hi),
                  kr_fmt_pct_signed(r->return_p10, rlo), kr_fmt_pct_signed(r->return_p90, rhi));
}

static void sentence_risk(const kr_report *r, kr_sb *sb) {
    char v[32], e[32], d50[32], d90[32];
    if (r->var95 >= 5e-5) /* a loss that shows as more than 0.00% */
        kr_sb_appendf(sb,
                      "Risk: the 95%% value-at-risk of the %d-bar return is a loss of %s and the "
                      "expected shortfall beyond it %s",
                      r->horizon, kr_fmt_pct(r->var95, 2, v), kr_fmt_pct(r->es95, 2, e));
    else
        kr_sb_appendf(sb,
                      "Risk: even the 5th-percentile path ends %s after %d bars (expected "
                      "shortfall %s)",
                      kr_fmt_pct_signed(-r->var95, v), r->horizon, kr_fmt_pct_signed(-r->es95, e));
    kr_sb_appendf(sb, "; the median of the paths' largest drawdowns is %s (p90 %s).",
                  kr_fmt_pct(r->drawdown_p50, 2, d50), kr_fmt_pct(r->drawdown_p90, 2, d90));
}

static int sentence_volatility(const kr_report *r, kr_sb *sb) {
    if (isnan(r->forecast_vol) || isnan(r->realized_vol_h) || isnan(r->prob_vol_above)) return 0;
    char f[32], v[32], p[32], which[64] = "the paths";
    if (r->vol_paths < r->paths)
        snprintf(which, sizeof which, "the %d paths that stay above zero", r->vol_paths);
    kr_sb_appendf(sb,
                  "Volatility: %s move %s per bar on average against %s realised over the "
                  "last %d bars; %s of them are more volatile than that recent past.",
                  which, kr_fmt_pct(r->forecast_vol, 2, f), kr_fmt_pct(r->realized_vol_h, 2, v),
                  r->horizon, kr_fmt_pct(r->prob_vol_above, 0, p));
    return 1;
}

static int sentence_technical(const kr_report *r, kr_sb *sb) {
    const kr_tech_snapshot *t = &r->tech;
    char a[32], b[32];
    int parts = 0;
    kr_sb_append(sb, "Technicals:");
    if (!isnan(t->rsi14)) {
        kr_sb_appendf(sb, " RSI %s (%s)", kr_fmt_num(t->rsi14, 0, a), kr_rsi_state(t->rsi14));
        parts++;
    }
    const struct {
        const char *name;
        double v;
    } mas[] = { { "SMA 20", t->sma20 }, { "SMA 60", t->sma60 } };
    for (int i = 0; i < 2; i++) {
        if (isnan(mas[i].v)) continue;
        static const char *const where[3] = { "below", "at", "above" };
        kr_sb_appendf(sb, "%s close %s %s (%s)", parts ? "," : "",
                      where[side_of(t->close, mas[i].v) + 1], mas[i].name,
                      kr_fmt_price(mas[i].v, a));
        parts++;
    }
    if (!isnan(t->macd_hist)) {
        /* Relative to the price: a flat history leaves float dust of either sign. */
        static const char *const sign[3] = { "negative", "zero", "positive" };
        int s = side_of(t->close + t->macd_hist, t->close);
        kr_sb_appendf(sb, "%s MACD histogram %s (%s)", parts ? "," : "", sign[s + 1],
                      kr_fmt_sig(s ? t->macd_hist : 0.0, 3, a));
        parts++;
    }
    if (!isnan(t->bb_percent_b)) {
        kr_sb_appendf(sb, "%s %%b %s (%s)", parts ? "," : "", kr_fmt_num(t->bb_percent_b, 2, a),
                      bollinger_words(t->bb_percent_b));
        parts++;
    }
    if (!isnan(t->volume_ratio)) {
        kr_sb_appendf(sb, "%s volume 5/20-bar ratio %s (%s)", parts ? "," : "",
                      kr_fmt_num(t->volume_ratio, 2, b),
                      t->volume_ratio > 1.1   ? "rising"
                      : t->volume_ratio < 0.9 ? "falling"
                                              : "steady");
        parts++;
    }
    kr_sb_append(sb, ".");
    return parts > 0;
}

static void sentence_calibration(const kr_report *r, kr_sb *sb) {
    const kr_calibration *c = r->calibration;
    char mc[32], nc[32], mh[32], nh[32], mm[32], nm[32];
    kr_sb_appendf(sb,
                  "Calibration on the last %d windows of %d bars: the p10-p90 band held %s of "
                  "realised closes (naive %s; 80%% is the target), the direction was right in %s "
                  "of windows (naive %s) and the mean path's MAPE was %s (naive %s), so the model "
                  "%s the no-change forecast on MAPE.",
                  c->windows, c->horizon, kr_fmt_pct(c->model.coverage, 0, mc),
                  kr_fmt_pct(c->naive.coverage, 0, nc),
                  kr_fmt_pct(c->model.direction_hit_rate, 0, mh),
                  kr_fmt_pct(c->naive.direction_hit_rate, 0, nh), kr_fmt_pct(c->model.mape, 2, mm),
                  kr_fmt_pct(c->naive.mape, 2, nm),
                  c->model.mape < c->naive.mape ? "beats" : "does not beat");
}

void kr_summary_free(char **s, int n) {
    if (!s) return;
    for (int i = 0; i < n; i++) free(s[i]);
    free(s);
}

kr_status kr_summary_build(const kr_report *r, char ***out, int *n, kr_error *err) {
    *out = NULL;
    *n = 0;
    char **s = calloc(KR_SUMMARY_MAX, sizeof *s);
    if (!s) return kr_error_set(err, KR_ERR_NOMEM, "summary: out of memory");
    int count = 0;
    for (int k = 0; k < 7; k++) {
        kr_sb sb = { 0 };
        int keep = 1;
        switch (k) {
        case 0: keep = sentence_nonpositive(r, &sb); break;
        case 1: sentence_direction(r, &sb); break;
        case 2: sentence_move(r, &sb); break;
        case 3: sentence_risk(r, &sb); break;
        case 4: keep = sentence_volatility(r, &sb); break;
        case 5: keep = sentence_technical(r, &sb); break;
        case 6:
            keep = r->calibration != NULL;
            if (keep) sentence_calibration(r, &sb);
            break;
        }
        if (!keep) {
            kr_sb_free(&sb);
            continue;
        }
        if (kr_sb_finish(&sb, &s[count], err) != KR_OK) {
            kr_summary_free(s, count);
            return KR_ERR_NOMEM;
        }
        count++;
    }
    *out = s;
    *n = count;
    return KR_OK;
}
