/*
 * eval/backtest_json — the backtest report as JSON (docs/backtest.schema.json, explained field
 * by field in docs/backtest.md). Keys never change meaning; a figure that cannot be computed is
 * null, never absent; an interval is {"value", "lo", "hi"} (lo / hi null without a bootstrap);
 * rates and probabilities are fractions, returns simple fractions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "analyst/report.h"
#include "base/error.h"
#include "base/json_out.h"
#include "base/timeutil.h"
#include "eval/backtest_internal.h"
#include "eval/backtest_render.h"

static cJSON *est(kr_bt_est e) {
    cJSON *o = cJSON_CreateObject();
    kr_json_add_num(o, "value", e.value);
    kr_json_add_num(o, "lo", e.lo);
    kr_json_add_num(o, "hi", e.hi);
    return o;
}

/* A date for a midnight time, else a date-time (kr_bt_fmt_ts). */
static void ts(cJSON *o, const char *key, int64_t t) {
    kr_json_add_time(o, key, t, t % 86400 == 0);
}

/* A bound of the range, or null when it is open (the store's first / last row). */
static void bound(cJSON *o, const char *key, int64_t t, int64_t open) {
    if (t != open)
        ts(o, key, t);
    else
        cJSON_AddNullToObject(o, key);
}

static void add_parameters(cJSON *root, const kr_backtest_report *r) {
    const kr_backtest_params *p = &r->p;
    cJSON *o = cJSON_AddObjectToObject(root, "parameters");
    cJSON_AddNumberToObject(o, "horizon", p->horizon);
    cJSON_AddNumberToObject(o, "every", r->every);
    cJSON_AddNumberToObject(o, "origin_dates", p->n_origin_ts);
    bound(o, "from", p->from_ts, KR_STORE_TS_FIRST);
    bound(o, "to", p->to_ts, KR_STORE_TS_LAST);
    cJSON_AddNumberToObject(o, "min_history", p->min_history);
    cJSON_AddNumberToObject(o, "max_origins", p->max_origins);
    cJSON_AddNumberToObject(o, "paths", p->paths);
    cJSON_AddNumberToObject(o, "lookback", p->lookback);
    cJSON_AddNumberToObject(o, "max_context", p->max_context);
    cJSON_AddNumberToObject(o, "temperature", p->temperature);
    cJSON_AddNumberToObject(o, "top_k", p->top_k);
    cJSON_AddNumberToObject(o, "top_p", p->top_p);
    char seed[24];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)p->seed);
    cJSON_AddStringToObject(o, "seed", seed);
    cJSON_AddStringToObject(o, "window", p->window == KR_WINDOW_ROLLING ? "rolling" : "exact");
    cJSON_AddStringToObject(o, "ohlc", kr_ohlc_mode_name(p->ohlc));
    cJSON_AddNumberToObject(o, "season", p->season);
    cJSON_AddNumberToObject(o, "bootstrap", p->bootstrap);
    cJSON_AddNumberToObject(o, "block_length", r->block_length);
    cJSON_AddNumberToObject(o, "ci_level", p->ci_level);
    cJSON_AddNumberToObject(o, "alpha", p->alpha);
    cJSON_AddNumberToObject(o, "hac_lags", r->lags);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)p->score_seed);
    cJSON_AddStringToObject(o, "score_seed", seed);
}

static void add_scoring(cJSON *root) {
    cJSON *o = cJSON_AddObjectToObject(root, "scoring");
    cJSON_AddStringToObject(o, "price", "close");
    cJSON_AddStringToObject(o, "scale", "close / last close at the origin");
    cJSON_AddStringToObject(o, "returns", "simple");
    cJSON_AddStringToObject(o, "volatility_returns", "log");
    cJSON *q = cJSON_AddArrayToObject(o, "quantile_levels");
    for (int j = 1; j <= 9; j++) cJSON_AddItemToArray(q, cJSON_CreateNumber(j / 10.0));
    cJSON_AddNumberToObject(o, "pit_bins", KR_BT_PIT_BINS);
    cJSON_AddNumberToObject(o, "reliability_bins", KR_BT_REL_BINS);
    cJSON_AddNumberToObject(o, "ic_min_symbols", 3);
}

static cJSON *metric_object(const kr_bt_est *e) {
    cJSON *o = cJSON_CreateObject();
    for (int m = 0; m < KR_BT_N_METRICS; m++)
        cJSON_AddItemToObject(o, kr_bt_metric_key(m), est(e[m]));
    return o;
}

static void add_model(cJSON *root, const kr_backtest_report *r) {
    cJSON *m = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(m, "name", r->model_name);
    cJSON_AddStringToObject(m, "source", r->source);
    cJSON_AddStringToObject(m, "quantization", r->quant);
    cJSON_AddNumberToObject(m, "n_params", (double)r->n_params);
    cJSON_AddNumberToObject(m, "d_model", r->d_model);
    cJSON_AddNumberToObject(m, "n_layers", r->n_layers);
    cJSON_AddStringToObject(m, "predictor_dir", r->predictor_dir);
    cJSON_AddStringToObject(m, "tokenizer_dir", r->tokenizer_dir);
    cJSON_AddBoolToObject(m, "demo", r->demo);
    if (r->has[KR_BT_F_COMPARE]) {
        cJSON *c = cJSON_AddObjectToObject(root, "compare_model");
        cJSON_AddStringToObject(c, "name", r->compare_name);
        cJSON_AddBoolToObject(c, "demo", r->compare_demo);
    } else {
        cJSON_AddNullToObject(root, "compare_model");
    }
    cJSON *e = cJSON_AddObjectToObject(root, "engine");
    cJSON_AddStringToObject(e, "version", r->engine_version);
    cJSON_AddNumberToObject(e, "static_batch_rows", r->static_batch_rows);
    cJSON_AddNumberToObject(e, "seconds_forecast", r->seconds_forecast);
    cJSON_AddNumberToObject(e, "seconds_compare", r->seconds_compare);
    cJSON_AddNumberToObject(e, "seconds_total", r->seconds_total);
    kr_json_add_num(e, "forecasts_per_second",
                    r->seconds_forecast > 0 ? r->n_items / r->seconds_forecast : NAN);
}

static void add_symbols(cJSON *root, const kr_backtest_report *r) {
    cJSON *arr = cJSON_AddArrayToObject(root, "symbols");
    cJSON *fails = cJSON_AddArrayToObject(root, "failures");
    for (int s = 0; s < r->n_symbols; s++) {
        const kr_bt_symbol *sy = &r->symbols[s];
        if (sy->failed) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "symbol", sy->symbol);
            cJSON_AddStringToObject(o, "interval", sy->interval);
            cJSON_AddStringToObject(o, "message", sy->error);
            cJSON_AddItemToArray(fails, o);
            continue;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "symbol", sy->symbol);
        cJSON_AddStringToObject(o, "interval", sy->interval);
        cJSON_AddStringToObject(o, "market", sy->market);
        cJSON_AddStringToObject(o, "calendar", sy->calendar);
        cJSON_AddNumberToObject(o, "rows", (double)sy->rows);
        cJSON_AddNumberToObject(o, "origins", sy->n_items);
        ts(o, "first_origin", r->items[sy->first_item].ts);
        ts(o, "last_origin", r->items[sy->first_item + sy->n_items - 1].ts);
        cJSON_AddNumberToObject(o, "lookback_min", sy->lookback_min);
        cJSON_AddNumberToObject(o, "lookback_max", sy->lookback_max);
        cJSON_AddNumberToObject(o, "season", sy->season);
        cJSON_AddBoolToObject(o, "ashare_rules", sy->ashare);
        kr_json_add_num(o, "price_limit", sy->ashare ? sy->limit : NAN);
        cJSON_AddNumberToObject(o, "stamp_mismatches", (double)sy->stamp_mismatches);
        cJSON *sc = cJSON_AddObjectToObject(o, "scores");
        for (int f = 0; f < KR_BT_N_F; f++)
            if (r->has[f])
                cJSON_AddItemToObject(
                    sc, kr_bt_forecaster_key(f),
                    metric_object(&r->per_symbol[((int64_t)s * KR_BT_N_F + f) * KR_BT_N_METRICS]));
        cJSON_AddItemToArray(arr, o);
    }
}

static void add_pooled(cJSON *root, const kr_backtest_report *r) {
    const int h = r->p.horizon;
    cJSON *fo = cJSON_AddArrayToObject(root, "forecasters");
    cJSON *pooled = cJSON_AddObjectToObject(root, "pooled");
    cJSON *steps = cJSON_AddObjectToObject(root, "by_step");
    cJSON *pit = cJSON_AddObjectToObject(root, "pit");
    cJSON *rel = cJSON_AddObjectToObject(root, "reliability");
    cJSON *vol = cJSON_AddObjectToObject(root, "volatility");
    for (int f = 0; f < KR_BT_N_F; f++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "key", kr_bt_forecaster_key(f));
        cJSON_AddStringToObject(d, "label", kr_bt_forecaster_label(r, f));
        cJSON_AddStringToObject(d, "kind",
                                kr_bt_forecaster_probabilistic(f) ? "probabilistic" : "point");
        cJSON_AddBoolToObject(d, "present", r->has[f]);
        cJSON_AddItemToArray(fo, d);
        if (!r->has[f]) continue;
        const char *key = kr_bt_forecaster_key(f);
        kr_bt_est tot[KR_BT_N_METRICS];
        for (int m = 0; m < KR_BT_N_METRICS; m++) tot[m] = r->pooled[kr_bt_pooled_idx(r, f, m, h)];
        cJSON_AddItemToObject(pooled, key, metric_object(tot));
        cJSON *by = cJSON_AddObjectToObject(steps, key);
        for (int m = 0; m < KR_BT_N_METRICS; m++) {
            if (m == KR_BT_VOL_AE) continue; /* over the whole horizon only */
            cJSON *a = cJSON_AddArrayToObject(by, kr_bt_metric_key(m));
            for (int k = 0; k < h; k++)
                cJSON_AddItemToArray(a, est(r->pooled[kr_bt_pooled_idx(r, f, m, k)]));
        }
        if (kr_bt_forecaster_probabilistic(f)) {
            cJSON *a = cJSON_AddArrayToObject(pit, key);
            for (int j = 0; j < KR_BT_PIT_BINS; j++)
                cJSON_AddItemToArray(a, est(r->pit[f * KR_BT_PIT_BINS + j]));
        }
        cJSON *ra = cJSON_AddArrayToObject(rel, key);
        for (int j = 0; j < KR_BT_REL_BINS; j++) {
            cJSON *b = cJSON_CreateObject();
            cJSON_AddNumberToObject(b, "bin_lo", (double)j / KR_BT_REL_BINS);
            cJSON_AddNumberToObject(b, "bin_hi", (double)(j + 1) / KR_BT_REL_BINS);
            cJSON_AddNumberToObject(b, "count", (double)r->rel_count[f * KR_BT_REL_BINS + j]);
            kr_json_add_num(b, "mean_prob_up", r->rel_pred[f * KR_BT_REL_BINS + j]);
            cJSON_AddItemToObject(b, "observed", est(r->rel_freq[f * KR_BT_REL_BINS + j]));
            cJSON_AddItemToArray(ra, b);
        }
        if (kr_bt_forecaster_probabilistic(f)) {
            cJSON *v = cJSON_AddObjectToObject(vol, key);
            cJSON_AddItemToObject(v, "mae",
                                  est(r->pooled[kr_bt_pooled_idx(r, f, KR_BT_VOL_AE, h)]));
            cJSON_AddItemToObject(v, "correlation", est(r->vol_corr[f]));
        }
    }
}

static void add_tests(cJSON *root, const kr_backtest_report *r) {
    cJSON *rel = cJSON_AddArrayToObject(root, "relative");
    for (int i = 0; i < r->n_rel; i++) {
        const kr_bt_rel_row *q = &r->rel[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "forecaster", kr_bt_forecaster_key(q->f));
        cJSON_AddStringToObject(o, "baseline", kr_bt_forecaster_key(q->b));
        cJSON_AddStringToObject(o, "metric", kr_bt_metric_key(q->metric));
        cJSON_AddItemToObject(o, "geometric_mean", est(q->geo_mean));
        cJSON *ps = cJSON_AddObjectToObject(o, "per_symbol");
        for (int s = 0; s < r->n_symbols; s++)
            if (!r->symbols[s].failed)
                cJSON_AddItemToObject(ps, r->symbols[s].symbol, est(q->per_symbol[s]));
        cJSON_AddItemToArray(rel, o);
    }
    cJSON *sig = cJSON_AddArrayToObject(root, "significance");
    cJSON *verdicts = cJSON_AddArrayToObject(root, "verdicts");
    for (int i = 0; i < r->n_dm; i++) {
        const kr_bt_dm_row *d = &r->dm[i];
        if (d->sym >= 0 && r->symbols[d->sym].failed) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "forecaster", kr_bt_forecaster_key(d->f));
        cJSON_AddStringToObject(o, "baseline", kr_bt_forecaster_key(d->b));
        cJSON_AddStringToObject(o, "metric", kr_bt_metric_key(d->metric));
        kr_json_add_str_or_null(o, "symbol", d->sym >= 0 ? r->symbols[d->sym].symbol : NULL);
        cJSON_AddNumberToObject(o, "n", d->n);
        cJSON_AddNumberToObject(o, "lags", d->lags);
        kr_json_add_num(o, "mean_loss_difference", d->mean_diff);
        kr_json_add_num(o, "dm", d->dm);
        kr_json_add_num(o, "hln", d->hln);
        kr_json_add_num(o, "p_value", d->p_value);
        cJSON_AddStringToObject(o, "verdict", kr_bt_verdict_word(d->verdict));
        cJSON_AddItemToArray(sig, o);
        if (d->sym < 0) {
            char line[512];
            kr_bt_verdict_sentence(r, d, line, sizeof line);
            cJSON_AddItemToArray(verdicts, cJSON_CreateString(line));
        }
    }
}

static cJSON *ic_summary(const kr_bt_ic_summary *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "origins", s->n);
    cJSON_AddItemToObject(o, "mean", est(s->mean));
    kr_json_add_num(o, "std", s->std);
    kr_json_add_num(o, "t_stat", s->t_stat);
    kr_json_add_num(o, "t_stat_hac", s->t_stat_hac);
    kr_json_add_num(o, "icir", s->icir);
    return o;
}

static void add_cross(cJSON *root, const kr_backtest_report *r) {
    cJSON *cs = cJSON_AddObjectToObject(root, "cross_section");
    cJSON *ic = cJSON_AddObjectToObject(cs, "ic"), *ric = cJSON_AddObjectToObject(cs, "rank_ic");
    for (int f = 0; f < KR_BT_N_F; f++) {
        if (!r->has[f] || r->ic_sum[f].n == 0) continue;
        cJSON_AddItemToObject(ic, kr_bt_forecaster_key(f), ic_summary(&r->ic_sum[f]));
        cJSON_AddItemToObject(ric, kr_bt_forecaster_key(f), ic_summary(&r->rank_ic_sum[f]));
    }
    cJSON *series = cJSON_AddArrayToObject(cs, "series");
    for (int u = 0; u < r->n_units; u++) {
        if (!isfinite(r->ic[u].ic)) continue;
        cJSON *o = cJSON_CreateObject();
        ts(o, "origin", r->ic[u].ts);
        cJSON_AddNumberToObject(o, "symbols", r->ic[u].n);
        kr_json_add_num(o, "ic", r->ic[u].ic);
        kr_json_add_num(o, "rank_ic", r->ic[u].rank_ic);
        cJSON_AddItemToArray(series, o);
    }
}

static void add_strategy(cJSON *root, const kr_backtest_report *r) {
    const kr_bt_strategy *s = &r->strategy;
    const kr_backtest_params *p = &r->p;
    cJSON *o = cJSON_AddObjectToObject(root, "strategy");
    cJSON_AddBoolToObject(o, "ran", s->ran);
    kr_json_add_str_or_null(o, "reason", !s->ran ? s->reason : NULL);
    cJSON_AddNumberToObject(o, "k", p->strategy_k);
    cJSON_AddBoolToObject(o, "short", p->strategy_short);
    cJSON_AddStringToObject(
        o, "rank_by", p->strategy_rank == KR_BACKTEST_RANK_PROB_UP ? "prob_up" : "expected_return");
    cJSON_AddNumberToObject(o, "cost_bps", p->cost_bps);
    cJSON_AddNumberToObject(o, "hold", r->hold);
    cJSON_AddStringToObject(o, "ashare_rules",
                            p->ashare_rules < 0 ? "auto"
                            : p->ashare_rules   ? "on"
                                                : "off");
    /* Every key is there when the strategy did not run, its figures null. */
    kr_json_add_num(o, "periods_per_year", s->periods_per_year);
    cJSON_AddNumberToObject(o, "block_length", s->block_length);
    cJSON_AddItemToObject(o, "annual_return", est(s->ann_return));
    cJSON_AddItemToObject(o, "annual_volatility", est(s->ann_vol));
    cJSON_AddItemToObject(o, "sharpe", est(s->sharpe));
    cJSON_AddItemToObject(o, "hit_rate", est(s->hit_rate));
    cJSON_AddItemToObject(o, "excess_hit_rate", est(s->excess_hit_rate));
    kr_json_add_num(o, "max_drawdown", s->max_drawdown);
    kr_json_add_num(o, "turnover", s->turnover);
    kr_json_add_num(o, "total_return", s->total_return);
    cJSON *b = cJSON_AddObjectToObject(o, "benchmark");
    kr_json_add_num(b, "total_return", s->bench_total_return);
    kr_json_add_num(b, "annual_return", s->bench_ann_return);
    kr_json_add_num(b, "sharpe", s->bench_sharpe);
    kr_json_add_num(b, "max_drawdown", s->bench_max_drawdown);
    cJSON *bl = cJSON_AddObjectToObject(o, "blocked");
    cJSON_AddNumberToObject(bl, "limit_up", (double)s->blocked_limit_up);
    cJSON_AddNumberToObject(bl, "limit_down", (double)s->blocked_limit_down);
    cJSON_AddNumberToObject(bl, "t_plus_1", (double)s->blocked_t1);
    cJSON *per = cJSON_AddArrayToObject(o, "periods");
    for (int t = 0; t < s->n_periods; t++) {
        const kr_bt_period *pe = &s->periods[t];
        cJSON *x = cJSON_CreateObject();
        ts(x, "start", pe->start_ts);
        ts(x, "end", pe->end_ts);
        kr_json_add_num(x, "return", pe->ret);
        kr_json_add_num(x, "benchmark_return", pe->bench_ret);
        kr_json_add_num(x, "equity", pe->equity);
        kr_json_add_num(x, "benchmark_equity", pe->bench_equity);
        kr_json_add_num(x, "drawdown", pe->drawdown);
        kr_json_add_num(x, "turnover", pe->turnover);
        kr_json_add_num(x, "cost", pe->cost);
        cJSON_AddNumberToObject(x, "held", pe->held);
        cJSON_AddNumberToObject(x, "blocked", pe->blocked);
        cJSON_AddItemToArray(per, x);
    }
}

kr_status kr_bt_render_json(const kr_backtest_report *r, char **out, kr_error *err) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return kr_error_set(err, KR_ERR_NOMEM, "backtest JSON: out of memory");
    cJSON_AddStringToObject(root, "object", "backtest");
    cJSON_AddNumberToObject(root, "schema_version", KR_BACKTEST_SCHEMA_VERSION);
    char b[64], notice[1024];
    kr_format_timestamp(r->generated_at, 0, b, sizeof b);
    cJSON_AddStringToObject(root, "generated_at", b);
    cJSON_AddBoolToObject(root, "demo", r->demo || r->compare_demo);
    kr_json_add_str_or_null(root, "demo_notice",
                            kr_bt_demo_notice(r, notice, sizeof notice) ? notice : NULL);
    add_model(root, r);
    add_parameters(root, r);
    add_scoring(root);
    cJSON *c = cJSON_AddObjectToObject(root, "counts");
    cJSON_AddNumberToObject(c, "symbols", r->n_symbols - kr_backtest_report_failures(r));
    cJSON_AddNumberToObject(c, "failed", kr_backtest_report_failures(r));
    cJSON_AddNumberToObject(c, "forecasts", r->n_items);
    cJSON_AddNumberToObject(c, "origins", r->n_units);
    add_pooled(root, r);
    add_symbols(root, r);
    add_tests(root, r);
    add_cross(root, r);
    add_strategy(root, r);
    cJSON_AddStringToObject(root, "disclaimer", KR_REPORT_DISCLAIMER);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return kr_error_set(err, KR_ERR_NOMEM, "backtest JSON: out of memory");
    *out = text;
    return KR_OK;
}
