/*
 * analyst/render_json — the report set as JSON. The layout is a contract
 * (docs/report.schema.json, explained field by field in docs/report.md): keys never change
 * meaning, figures that cannot be computed are null rather than absent, and percentages carry
 * `_pct` in their names while probabilities and rates are fractions in [0, 1].
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "analyst/figures.h"
#include "analyst/narrative.h"
#include "analyst/render.h"
#include "base/error.h"
#include "base/json_out.h"
#include "base/timeutil.h"

static const char *k_cols[KR_N_FEATURES] = { "open", "high", "low", "close", "volume", "amount" };

static void pct(cJSON *o, const char *key, double frac) { kr_json_add_num(o, key, frac * 100.0); }

static cJSON *candle(const double *v) {
    cJSON *o = cJSON_CreateObject();
    for (int c = 0; c < KR_N_FEATURES; c++) kr_json_add_num(o, k_cols[c], v[c]);
    return o;
}

static void add_forecast(cJSON *root, const kr_report *r) {
    cJSON *f = cJSON_AddObjectToObject(root, "forecast");
    cJSON_AddNumberToObject(f, "horizon", r->horizon);
    cJSON_AddNumberToObject(f, "paths", r->paths);
    cJSON_AddNumberToObject(f, "rounds", r->rounds);
    cJSON_AddStringToObject(f, "market", r->market);
    cJSON_AddStringToObject(f, "calendar", r->calendar);
    cJSON_AddBoolToObject(f, "holidays_known", r->holidays_known);
    cJSON_AddStringToObject(f, "ohlc", kr_ohlc_mode_name(r->meta.ohlc));
    cJSON_AddNumberToObject(f, "repaired_candles", (double)r->repaired_candles);
    cJSON_AddNumberToObject(f, "raw_inconsistent_candles", (double)r->raw_inconsistent);
    cJSON_AddNumberToObject(f, "nonpositive_paths", r->nonpositive_paths);
    cJSON *steps = cJSON_AddArrayToObject(f, "steps");
    for (int i = 0; i < r->horizon; i++) {
        cJSON *s = cJSON_CreateObject();
        const size_t o = (size_t)i * KR_N_FEATURES;
        cJSON_AddNumberToObject(s, "step", i + 1);
        kr_json_add_time(s, "timestamp", r->fc_ts[i], r->date_only);
        cJSON_AddItemToObject(s, "mean", candle(r->fc_mean + o));
        cJSON_AddItemToObject(s, "p10", candle(r->fc_p10 + o));
        cJSON_AddItemToObject(s, "p50", candle(r->fc_p50 + o));
        cJSON_AddItemToObject(s, "p90", candle(r->fc_p90 + o));
        /* Added after schema 1's first keys (none renamed): the Monte Carlo error of the mean
         * and band candles, as statistics.standard_error holds the statistics'. */
        cJSON *se = cJSON_AddObjectToObject(s, "standard_error");
        cJSON_AddItemToObject(se, "mean", candle(r->fc_mean_se + o));
        cJSON_AddItemToObject(se, "p10", candle(r->fc_p10_se + o));
        cJSON_AddItemToObject(se, "p50", candle(r->fc_p50_se + o));
        cJSON_AddItemToObject(se, "p90", candle(r->fc_p90_se + o));
        cJSON_AddItemToArray(steps, s);
    }
}

/* A figure table's figures as keys of o, in the table's order, each inside its group's
 * nested object; with se, their standard errors instead (a figure without one left out). */
static void add_figures(cJSON *o, const kr_figure *table, int n, const void *base, int se) {
    cJSON *group = NULL;
    const char *in = NULL; /* the group the last figure went into */
    for (int i = 0; i < n; i++) {
        const kr_figure *f = &table[i];
        if (se && f->se < 0) continue;
        if (!f->group)
            group = NULL;
        else if (!in || strcmp(in, f->group))
            group = cJSON_AddObjectToObject(o, f->group);
        in = f->group;
        if (f->unit == KR_FIG_BOOL && !se)
            cJSON_AddBoolToObject(group ? group : o, f->key, kr_figure_json(f, base) != 0);
        else
            kr_json_add_num(group ? group : o, f->key,
                            se ? kr_figure_se_json(f, base) : kr_figure_json(f, base));
    }
}

/* The statistics a ranking row shows, in its order; the first two with their errors. */
static const kr_report_stat_id k_rank_stats[5] = { KR_STAT_EXPECTED_RETURN, KR_STAT_PROB_UP,
                                                   KR_STAT_RETURN_STD, KR_STAT_VAR95,
                                                   KR_STAT_ES95 };

/* The statistics ids[n] of r (ungrouped ones) as keys of o; with se, their errors. */
static void add_stats(cJSON *o, const kr_report_stat_id *ids, int n, const kr_report *r, int se) {
    for (int i = 0; i < n; i++) {
        const kr_figure *f = &kr_report_stats[ids[i]];
        kr_json_add_num(o, f->key, se ? kr_figure_se_json(f, r) : kr_figure_json(f, r));
    }
}

static void add_statistics(cJSON *root, const kr_report *r) {
    cJSON *s = cJSON_AddObjectToObject(root, "statistics");
    add_figures(s, kr_report_stats, KR_N_REPORT_STATS, r, 0);
    /* The same keys again, holding each figure's Monte Carlo standard error (same units). */
    add_figures(cJSON_AddObjectToObject(s, "standard_error"), kr_report_stats, KR_N_REPORT_STATS, r,
                1);
}

static void add_technical(cJSON *root, const kr_report *r) {
    const kr_tech_snapshot *t = &r->tech;
    const kr_figure *f = kr_tech_figures;
    cJSON *o = cJSON_AddObjectToObject(root, "technical");
    /* The table's figures, with the two that combine fields after RSI 14 and ATR 14. */
    add_figures(o, f, KR_TECH_RSI14 + 1, t, 0);
    cJSON_AddStringToObject(o, "rsi_state", kr_rsi_state(t->rsi14));
    add_figures(o, f + KR_TECH_MACD_LINE, KR_TECH_ATR14 + 1 - KR_TECH_MACD_LINE, t, 0);
    pct(o, "atr_14_pct", t->atr14 / t->close);
    add_figures(o, f + KR_TECH_HAS_VOLUME, KR_N_TECH_FIGURES - KR_TECH_HAS_VOLUME, t, 0);
}

static cJSON *scores(const kr_calib_scores *s, int horizon) {
    cJSON *o = cJSON_CreateObject();
    /* The per-step coverage sits after the overall one. */
    add_figures(o, kr_calib_scores_figures, 1, s, 0);
    cJSON *by = cJSON_AddArrayToObject(o, "coverage_by_step");
    for (int k = 0; k < horizon; k++)
        cJSON_AddItemToArray(by, cJSON_CreateNumber(s->coverage_by_step[k]));
    add_figures(o, kr_calib_scores_figures + 1, KR_N_CALIB_SCORES - 1, s, 0);
    add_figures(cJSON_AddObjectToObject(o, "standard_error"), kr_calib_scores_figures,
                KR_N_CALIB_SCORES, s, 1);
    return o;
}

static void add_calibration(cJSON *root, const kr_report *r) {
    const kr_calibration *c = r->calibration;
    if (!c) {
        cJSON_AddNullToObject(root, "calibration");
        return;
    }
    cJSON *o = cJSON_AddObjectToObject(root, "calibration");
    cJSON_AddNumberToObject(o, "windows", c->windows);
    cJSON_AddNumberToObject(o, "horizon", c->horizon);
    cJSON_AddItemToObject(o, "model", scores(&c->model, c->horizon));
    cJSON_AddItemToObject(o, "naive", scores(&c->naive, c->horizon));
    cJSON_AddBoolToObject(o, "beats_naive_mape", c->model.mape < c->naive.mape);
    cJSON *arr = cJSON_AddArrayToObject(o, "window_detail");
    for (int j = 0; j < c->windows; j++) {
        const kr_calib_window *w = &c->window[j];
        cJSON *x = cJSON_CreateObject();
        kr_json_add_time(x, "history_end", w->history_end_ts, r->date_only);
        cJSON_AddNumberToObject(x, "lookback", w->lookback);
        kr_json_add_num(x, "last_close", w->last_close);
        kr_json_add_num(x, "realized_close", w->realized_close);
        kr_json_add_num(x, "model_close", w->model_close);
        kr_json_add_num(x, "model_p10_close", w->model_p10);
        kr_json_add_num(x, "model_p90_close", w->model_p90);
        kr_json_add_num(x, "naive_p10_close", w->naive_p10);
        kr_json_add_num(x, "naive_p90_close", w->naive_p90);
        pct(x, "naive_drift_pct", w->naive_drift);
        cJSON_AddItemToArray(arr, x);
    }
}

static void add_metadata(cJSON *root, const kr_report *r) {
    const kr_report_meta *m = &r->meta;
    cJSON *o = cJSON_AddObjectToObject(root, "metadata");
    cJSON *mo = cJSON_AddObjectToObject(o, "model");
    cJSON_AddStringToObject(mo, "name", m->model_name);
    cJSON_AddStringToObject(mo, "predictor_dir", m->predictor_dir);
    cJSON_AddStringToObject(mo, "tokenizer_dir", m->tokenizer_dir);
    cJSON_AddNumberToObject(mo, "d_model", m->d_model);
    cJSON_AddNumberToObject(mo, "n_layers", m->n_layers);
    cJSON_AddNumberToObject(mo, "n_heads", m->n_heads);
    cJSON_AddNumberToObject(mo, "n_params", (double)m->n_params);
    cJSON_AddStringToObject(mo, "quantization", m->quantization);
    cJSON_AddStringToObject(mo, "quant_method", m->quant_method);
    cJSON_AddBoolToObject(mo, "demo", m->demo);
    cJSON_AddStringToObject(mo, "source", m->source);
    cJSON *p = cJSON_AddObjectToObject(o, "params");
    cJSON_AddNumberToObject(p, "horizon", r->horizon);
    cJSON_AddNumberToObject(p, "paths", r->paths);
    cJSON_AddNumberToObject(p, "paths_first_round", m->paths_min);
    cJSON_AddNumberToObject(p, "max_paths", m->paths_max);
    kr_json_add_num(p, "target_prob_se", m->target_prob_se > 0 ? m->target_prob_se : NAN);
    kr_json_add_num(p, "target_var_rel_se", m->target_var_rel_se > 0 ? m->target_var_rel_se : NAN);
    cJSON_AddBoolToObject(p, "target_met", r->target_met);
    cJSON_AddStringToObject(p, "ohlc", kr_ohlc_mode_name(m->ohlc));
    cJSON_AddNumberToObject(p, "lookback", r->lookback);
    cJSON_AddNumberToObject(p, "max_context", m->max_context);
    /* Raw digits: a 64-bit seed does not survive a trip through a double. */
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)m->seed);
    cJSON_AddRawToObject(p, "seed", seed);
    kr_json_add_num(p, "temperature", m->temperature);
    kr_json_add_num(p, "top_p", m->top_p);
    cJSON_AddNumberToObject(p, "top_k", m->top_k);
    cJSON *t = cJSON_AddObjectToObject(o, "timing");
    kr_json_add_num(t, "seconds_total", r->timing.seconds_total);
    kr_json_add_num(t, "seconds_prefill", r->timing.seconds_prefill);
    kr_json_add_num(t, "seconds_decode", r->timing.seconds_decode);
    kr_json_add_num(t, "seconds_tokenizer", r->timing.seconds_tokenizer);
    cJSON_AddNumberToObject(t, "prefill_tokens", (double)r->timing.prefill_tokens);
    cJSON_AddNumberToObject(t, "decode_tokens", (double)r->timing.decode_tokens);
    cJSON_AddStringToObject(o, "engine_version", m->engine_version);
}

/* "narrative": the language model's text or null; "narrative_error": why a requested
 * narrative is missing, else null. Both always present, like every other key. */
static void add_narrative(cJSON *root, const kr_report *r) {
    const kr_narrative *n = r->narrative;
    if (n && n->text) {
        cJSON *o = cJSON_AddObjectToObject(root, "narrative");
        cJSON_AddStringToObject(o, "text", n->text);
        cJSON_AddStringToObject(o, "model", n->model);
        cJSON_AddStringToObject(o, "url", n->url);
        kr_json_add_num(o, "seconds", n->seconds);
        kr_json_add_str_or_null(o, "warning", n->warning[0] ? n->warning : NULL);
    } else {
        cJSON_AddNullToObject(root, "narrative");
    }
    kr_json_add_str_or_null(root, "narrative_error", n && !n->text ? n->error : NULL);
}

static cJSON *report_json(const kr_report *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "symbol", r->symbol);
    cJSON_AddStringToObject(o, "interval", r->interval);
    cJSON *last = cJSON_AddObjectToObject(o, "last");
    kr_json_add_time(last, "timestamp", r->last_ts, r->date_only);
    kr_json_add_num(last, "close", r->last_close);
    cJSON *h = cJSON_AddObjectToObject(o, "history");
    cJSON_AddNumberToObject(h, "rows", (double)r->rows_available);
    kr_json_add_time(h, "first_timestamp", r->first_ts, r->date_only);
    kr_json_add_time(h, "last_timestamp", r->last_ts, r->date_only);
    cJSON_AddNumberToObject(h, "lookback", r->lookback);
    /* Staleness against the clock and the market's calendar. */
    cJSON_AddNumberToObject(h, "sessions_ago", (double)r->sessions_ago);
    cJSON_AddNumberToObject(h, "stale_sessions_limit", r->stale_sessions_limit);
    cJSON_AddBoolToObject(h, "stale", r->stale_now);
    add_forecast(o, r);
    add_statistics(o, r);
    add_technical(o, r);
    add_calibration(o, r);
    cJSON *s = cJSON_AddArrayToObject(o, "summary");
    for (int i = 0; i < r->n_summary; i++)
        cJSON_AddItemToArray(s, cJSON_CreateString(r->summary[i]));
    add_narrative(o, r);
    add_metadata(o, r);
    return o;
}

kr_status kr_render_json(const kr_report_set *set, char **out, kr_error *err) {
    if (!set || !out) return kr_error_set(err, KR_ERR_INVALID_ARG, "render json: NULL argument");
    *out = NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root) return kr_error_set(err, KR_ERR_NOMEM, "render json: out of memory");
    cJSON_AddNumberToObject(root, "schema_version", KR_REPORT_SCHEMA_VERSION);
    kr_civil g = kr_civil_from_unix(set->generated_at);
    char gen[40];
    snprintf(gen, sizeof gen, "%04d-%02d-%02dT%02d:%02d:%02dZ", g.year, g.month, g.day, g.hour,
             g.minute, g.second);
    cJSON_AddStringToObject(root, "generated_at", gen);
    cJSON *eng = cJSON_AddObjectToObject(root, "engine");
    cJSON_AddStringToObject(eng, "name", "kronos");
    cJSON_AddStringToObject(eng, "version", kr_version());
    /* How the forecasts were batched: static batches of this many rows, or null (all at once,
     * continuous batching). */
    kr_json_add_num(eng, "static_batch_rows",
                    set->static_batch_rows > 0 ? set->static_batch_rows : NAN);
    cJSON_AddStringToObject(root, "disclaimer", KR_REPORT_DISCLAIMER);
    char notice[1024];
    kr_json_add_str_or_null(root, "model_notice",
                            kr_report_model_notice(set, notice, sizeof notice) ? notice : NULL);
    kr_json_add_str_or_null(root, "calendar_notice",
                            kr_report_calendar_notice(set, notice, sizeof notice) ? notice : NULL);
    cJSON *reps = cJSON_AddArrayToObject(root, "reports");
    for (int i = 0; i < set->n; i++) cJSON_AddItemToArray(reps, report_json(set->reports[i]));
    cJSON *rank = cJSON_AddArrayToObject(root, "ranking");
    for (int k = 0; k < set->n; k++) {
        const kr_report *r = set->reports[set->rank[k]];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "rank", k + 1);
        cJSON_AddStringToObject(x, "symbol", r->symbol);
        cJSON_AddStringToObject(x, "interval", r->interval);
        kr_json_add_num(x, "last_close", r->last_close);
        add_stats(x, k_rank_stats, 5, r, 0);
        cJSON_AddNumberToObject(x, "group_rank", r->group_rank);
        kr_json_add_time(x, "last_timestamp", r->last_ts, r->date_only);
        cJSON_AddBoolToObject(x, "stale", r->stale);
        kr_json_add_num(x, "stale_days", r->stale_days);
        cJSON_AddNumberToObject(x, "sessions_ago", (double)r->sessions_ago);
        add_stats(cJSON_AddObjectToObject(x, "standard_error"), k_rank_stats, 2, r, 1);
        cJSON *tied = cJSON_AddArrayToObject(x, "indistinguishable_from");
        for (const char *t = r->tied_with; *t;) {
            size_t len = strcspn(t, ",");
            char sym[64];
            snprintf(sym, sizeof sym, "%.*s", (int)(len < sizeof sym ? len : sizeof sym - 1), t);
            cJSON_AddItemToArray(tied, cJSON_CreateString(sym));
            t += len;
            while (*t == ',' || *t == ' ') t++;
        }
        cJSON_AddItemToArray(rank, x);
    }
    cJSON *fails = cJSON_AddArrayToObject(root, "failures");
    for (int i = 0; i < set->n_failures; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "symbol", set->failures[i].symbol);
        cJSON_AddStringToObject(x, "interval", set->failures[i].interval);
        cJSON_AddStringToObject(x, "error", set->failures[i].message);
        cJSON_AddItemToArray(fails, x);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return kr_error_set(err, KR_ERR_NOMEM, "render json: out of memory");
    /* cJSON allocates with malloc by default; hand back a plain malloc'd copy anyway so
     * callers free() it whatever hooks cJSON was built with. */
    size_t len = strlen(text);
    *out = malloc(len + 2);
    if (*out) {
        memcpy(*out, text, len);
        (*out)[len] = '\n';
        (*out)[len + 1] = 0;
    }
    cJSON_free(text);
    return *out ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "render json: out of memory");
}
