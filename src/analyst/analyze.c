/*
 * analyst/analyze — the pipeline (see analyze.h): validate, batch forecasts in rounds until the
 * error targets are met, per-symbol calibration batches, reports, ranking; a symbol's failure
 * is recorded beside the others' reports.
 */
#include "analyst/analyze.h"
#include "analyst/text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "series/calendar.h"
#include "store/store.h"

/* Fewer rows than this make the normalisation statistics and most indicators meaningless. */
#define KR_ANALYZE_MIN_ROWS 32
/* Paths beyond the 5 % quantile a VaR / ES target needs before its error is believed: 10,
 * so at least 200 paths (the analysis's batch-means error needs 128). */
#define KR_ANALYZE_TAIL_PATHS 10
/* Rounds of added paths: each at least this factor more paths, so a run converges in a few. */
#define KR_ANALYZE_GROWTH 1.5
/* A report is stale when its last bar lies this far behind the newest of the set (or 5 bars
 * of its own interval, whichever is longer). */
#define KR_STALE_DAYS 14.0
#define KR_STALE_BARS 5

kr_analyze_params kr_analyze_default_params(void) {
    kr_analyze_params p;
    memset(&p, 0, sizeof p);
    kr_forecast_params f = kr_forecast_default_params();
    p.horizon = 20;
    p.paths = 128;
    p.max_paths = 1024;
    p.target_prob_se = 0.02;
    p.target_var_rel_se = 0.20;
    p.ohlc = KR_OHLC_CONSISTENT;
    p.max_context = f.max_context;
    p.top_k = f.top_k;
    p.temperature = f.temperature;
    p.top_p = f.top_p;
    p.seed = KR_ANALYZE_DEFAULT_SEED;
    return p;
}

int64_t kr_analyze_min_rows(const kr_analyze_params *p) {
    int64_t need = p->horizon + 2; /* realised volatility over the horizon: h + 1 closes */
    if (need < KR_ANALYZE_MIN_ROWS) need = KR_ANALYZE_MIN_ROWS;
    if (p->calibrate > 0) {
        int64_t cal = kr_calibration_min_rows(p->calibrate, p->horizon);
        if (cal > need) need = cal;
    }
    return need;
}

kr_analyst_request kr_analyst_request_start(const kr_request_params *params) {
    kr_analyst_request r = { .params = params ? *params : kr_request_default_params() };
    if (r.params.deadline_s > 0) r.deadline_at = kr_now_seconds() + r.params.deadline_s;
    return r;
}

kr_status kr_analyst_run_batch(kr_context *ctx, const kr_analyst_request *request,
                               const kr_series *series, int n, const kr_forecast_params *params,
                               kr_forecast **out, kr_error *err) {
    if (!request) return kr_forecast_run_batch(ctx, series, n, params, NULL, out, err);
    kr_request_params rp = request->params;
    if (request->deadline_at > 0) {
        const double left = request->deadline_at - kr_now_seconds();
        if (left <= 0) {
            for (int i = 0; i < n; i++) out[i] = NULL;
            return kr_error_set(err, KR_ERR_TIMEOUT,
                                "the analysis' deadline (%.1f s) passed before its next "
                                "forecasts could run",
                                request->params.deadline_s);
        }
        rp.deadline_s = left;
    }
    return kr_forecast_run_batch(ctx, series, n, params, &rp, out, err);
}

int kr_analyst_fatal(kr_status st) {
    return st == KR_ERR_TIMEOUT || st == KR_ERR_CANCELLED || st == KR_ERR_BUSY ||
           st == KR_ERR_NOMEM;
}

void kr_report_set_free(kr_report_set *set) {
    if (!set) return;
    for (int i = 0; i < set->n; i++) kr_report_free(set->reports[i]);
    free(set->reports);
    free(set->rank);
    free(set->failures);
    free(set);
}

/* Bar length of a report's interval name, else its median chart gap. */
static double interval_seconds(const kr_report *r) {
    int64_t s = kr_store_interval_seconds(r->interval);
    if (s > 0) return (double)s;
    if (r->n_chart >= 2) return (double)(r->chart_ts[r->n_chart - 1] - r->chart_ts[r->n_chart - 2]);
    return 86400.0;
}

/* Staleness against the clock: the trading sessions of the report's calendar between its
 * last bar and now (kr_report.sessions_ago), stale past two bars' worth of sessions. */
static void judge_staleness(kr_report *r, const kr_calendar *cal, int64_t now) {
    r->sessions_ago = kr_calendar_sessions_between(cal, r->last_ts, now);
    const double days = interval_seconds(r) / 86400.0;
    const double per_bar = days < 1 ? 1 : days * kr_calendar_days_per_week(cal) / 7.0;
    r->stale_sessions_limit = 2 * (per_bar < 1 ? 1 : (int)(per_bar + 0.5));
    r->stale_now = r->sessions_ago > r->stale_sessions_limit;
}

/* Interval (shortest first, then name), expected return descending, NaN last, then symbol. */
static int rank_before(const kr_report *x, const kr_report *y) {
    double ix = interval_seconds(x), iy = interval_seconds(y);
    if (ix != iy) return ix < iy;
    int ci = strcmp(x->interval, y->interval);
    if (ci) return ci < 0;
    int xn = isnan(x->expected_return), yn = isnan(y->expected_return);
    if (xn != yn) return yn;
    if (!xn && x->expected_return != y->expected_return)
        return x->expected_return > y->expected_return;
    return strcmp(x->symbol, y->symbol) < 0;
}

/* Two expected returns are indistinguishable when they differ by less than two combined
 * standard errors (about a 95% test of "same mean"). */
static int indistinguishable(const kr_report *a, const kr_report *b) {
    double se = sqrt(a->expected_return_se * a->expected_return_se +
                     b->expected_return_se * b->expected_return_se);
    return !isnan(se) && fabs(a->expected_return - b->expected_return) <= 2.0 * se;
}

void kr_report_set_rank(kr_report_set *set) {
    if (!set || !set->rank) return;
    for (int i = 0; i < set->n; i++) set->rank[i] = i;
    /* Insertion sort: a handful of symbols, stable, and no context-less qsort comparator. */
    for (int i = 1; i < set->n; i++) {
        int v = set->rank[i], j = i;
        while (j > 0 && rank_before(set->reports[v], set->reports[set->rank[j - 1]])) {
            set->rank[j] = set->rank[j - 1];
            j--;
        }
        set->rank[j] = v;
    }
    int64_t newest = INT64_MIN;
    for (int i = 0; i < set->n; i++)
        if (set->reports[i]->last_ts > newest) newest = set->reports[i]->last_ts;
    for (int k = 0; k < set->n; k++) {
        kr_report *r = set->reports[set->rank[k]];
        r->stale_days = (double)(newest - r->last_ts) / 86400.0;
        double limit = KR_STALE_BARS * interval_seconds(r) / 86400.0;
        if (limit < KR_STALE_DAYS) limit = KR_STALE_DAYS;
        r->stale = r->stale_days > limit || r->stale_now;
        const kr_report *prev = k > 0 ? set->reports[set->rank[k - 1]] : NULL;
        r->group_rank = prev && !strcmp(prev->interval, r->interval) ? prev->group_rank + 1 : 1;
        r->tied_with[0] = 0;
        size_t len = 0;
        for (int j = 0; j < set->n; j++) {
            const kr_report *o = set->reports[j];
            if (o == r || strcmp(o->interval, r->interval) || !indistinguishable(r, o)) continue;
            if (len + strlen(o->symbol) + 3 >= sizeof r->tied_with) break;
            len += (size_t)snprintf(r->tied_with + len, sizeof r->tied_with - len, "%s%s",
                                    len ? ", " : "", o->symbol);
        }
    }
}

void kr_analyst_model_name(const char *dir, char *out, size_t cap) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", dir ? dir : "");
    size_t len = strlen(buf);
    while (len > 1 && buf[len - 1] == '/') buf[--len] = 0;
    char *base = strrchr(buf, '/');
    if (base && !strcmp(base + 1, "predictor") && base != buf) {
        *base = 0;
        char *parent = strrchr(buf, '/');
        snprintf(out, cap, "%s", parent ? parent + 1 : buf);
        return;
    }
    snprintf(out, cap, "%s", base ? base + 1 : buf);
}

/* The source before it is cleaned (kr_analyst_model_source). */
static void model_source(const char *declared, const char *dir, char *out, size_t cap) {
    if (declared && *declared) {
        snprintf(out, cap, "%s", declared);
        return;
    }
    const char *m = dir ? strstr(dir, "models--") : NULL;
    const char *snap = m ? strstr(m, "/snapshots/") : NULL;
    if (snap) {
        char repo[256];
        size_t n = (size_t)(snap - (m + 8));
        if (n >= sizeof repo) n = sizeof repo - 1;
        memcpy(repo, m + 8, n);
        repo[n] = 0;
        char *sep = strstr(repo, "--");
        if (sep) {
            *sep = '/';
            memmove(sep + 1, sep + 2, strlen(sep + 2) + 1);
        }
        const char *rev = snap + 11;
        snprintf(out, cap, "Hugging Face %s (revision %.12s)", repo, rev);
        return;
    }
    snprintf(out, cap, "%s", dir && *dir ? dir : "unknown");
}

void kr_analyst_model_source(const char *declared, const char *dir, char *out, size_t cap) {
    model_source(declared, dir, out, cap);
    /* The checkpoint's config.json is text from outside, printed in every report format and
     * on terminals: no control character or bidi override of it survives. */
    kr_sb clean = { 0 };
    kr_text_clean(&clean, out, strlen(out), 0);
    if (!clean.oom && clean.data) {
        snprintf(out, cap, "%s", clean.data);
        kr_text_cut_partial(out);
    }
    kr_sb_free(&clean);
}

static void fill_meta(const kr_model *model, const kr_analyze_params *p, kr_report_meta *m) {
    memset(m, 0, sizeof *m);
    kr_model_info info;
    kr_model_get_info(model, &info);
    if (p->model_name)
        snprintf(m->model_name, sizeof m->model_name, "%s", p->model_name);
    else
        kr_analyst_model_name(p->predictor_dir, m->model_name, sizeof m->model_name);
    snprintf(m->predictor_dir, sizeof m->predictor_dir, "%s",
             p->predictor_dir ? p->predictor_dir : "");
    snprintf(m->tokenizer_dir, sizeof m->tokenizer_dir, "%s",
             p->tokenizer_dir ? p->tokenizer_dir : "");
    m->d_model = info.d_model;
    m->n_layers = info.n_layers;
    m->n_heads = info.n_heads;
    m->n_params = (int64_t)info.n_params;
    snprintf(m->quantization, sizeof m->quantization, "%s", info.quant[0] ? info.quant : "f32");
    snprintf(m->quant_method, sizeof m->quant_method, "%s", info.quant_method);
    m->demo = info.demo;
    kr_analyst_model_source(info.source, p->predictor_dir, m->source, sizeof m->source);
    m->max_context = p->max_context;
    m->top_k = p->top_k;
    m->temperature = p->temperature;
    m->top_p = p->top_p;
    m->seed = p->seed;
    m->ohlc = p->ohlc;
    m->paths_min = p->paths;
    m->paths_max = p->max_paths > p->paths ? p->max_paths : p->paths;
    m->target_prob_se = m->paths_max > p->paths ? p->target_prob_se : 0;
    m->target_var_rel_se = m->paths_max > p->paths ? p->target_var_rel_se : 0;
    snprintf(m->engine_version, sizeof m->engine_version, "%s", kr_version());
}

static void progress(const kr_analyze_params *p, int step, int n_steps, const char *what) {
    if (p->progress) p->progress(p->progress_user, step, n_steps, what);
}

kr_status kr_analyze_check_params(const kr_analyze_params *p, kr_error *err) {
    if (!p) return kr_error_set(err, KR_ERR_INVALID_ARG, "analyze: NULL parameters");
    if (p->horizon < 1 || p->horizon >= p->max_context)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "horizon must be in 1..%d, got %d",
                            p->max_context - 1, p->horizon);
    if (p->paths < 1) return kr_error_set(err, KR_ERR_INVALID_ARG, "paths must be >= 1");
    if (p->ohlc != KR_OHLC_RAW && p->ohlc != KR_OHLC_CONSISTENT)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "ohlc must be raw or consistent, got %d",
                            (int)p->ohlc);
    if (p->lookback < 0 || p->calibrate < 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "lookback and calibrate must be >= 0");
    if (p->target_prob_se < 0 || p->target_var_rel_se < 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "error targets must be >= 0");
    if (p->calibrate > 0 && p->lookback > 0 &&
        p->lookback < kr_calibration_min_lookback(p->horizon))
        return kr_error_set_field(
            err, KR_ERR_INVALID_ARG, "lookback",
            "lookback %d is too short to calibrate a %d-bar horizon: the naive "
            "band needs at least %d rows",
            p->lookback, p->horizon, kr_calibration_min_lookback(p->horizon));
    return KR_OK;
}

/* Per-symbol state through the rounds. */
typedef struct sym_state {
    int ok; /* still being analysed */
    int lookback;
    kr_series series;
    kr_forecast *rounds[16];
    int n_rounds, paths; /* paths so far */
    int goal; /* paths it will have after the next round */
    int done; /* targets met (or no targets) */
    int64_t *future; /* [horizon] stamps of the forecast bars, by the symbol's calendar */
    kr_calendar_info cal;
    kr_status status;
    char message[512];
} sym_state;

static void fail_symbol(sym_state *s, kr_status st, const kr_error *err) {
    s->ok = 0;
    s->status = st;
    snprintf(s->message, sizeof s->message, "%s", err && err->message[0] ? err->message : "failed");
}

/* Runs one round for the symbols in idx[n] (extra paths from first_path), isolating failures:
 * when the batch fails, each symbol runs alone so one bad series fails only itself. */
static kr_status run_round(kr_context *ctx, const kr_analyst_request *request, sym_state *syms,
                           const int *idx, int n, const kr_analyze_item *items,
                           kr_forecast_params fp, kr_error *err) {
    kr_series *series = calloc((size_t)n, sizeof *series);
    kr_forecast **fc = calloc((size_t)n, sizeof *fc);
    if (!series || !fc) {
        free(series);
        free(fc);
        return kr_error_set(err, KR_ERR_NOMEM, "analyze: out of memory");
    }
    for (int k = 0; k < n; k++) series[k] = syms[idx[k]].series;
    kr_error e = { 0 };
    kr_status st = kr_analyst_run_batch(ctx, request, series, n, &fp, fc, &e);
    if (kr_analyst_fatal(st)) {
        *err = e;
    } else if (st != KR_OK) {
        for (int k = 0; k < n; k++) {
            sym_state *s = &syms[idx[k]];
            kr_error e1 = { 0 };
            kr_status s1 =
                n == 1 ? st : kr_analyst_run_batch(ctx, request, &series[k], 1, &fp, &fc[k], &e1);
            if (kr_analyst_fatal(s1)) { /* the deadline or the client, not this symbol */
                *err = e1;
                st = s1;
                break;
            }
            if (s1 != KR_OK) {
                if (n == 1) e1 = e;
                kr_error_prefix(&e1, "%s %s", items[idx[k]].symbol,
                                items[idx[k]].interval ? items[idx[k]].interval : "");
                fail_symbol(s, s1, &e1);
                fc[k] = NULL;
            }
        }
        st = KR_OK;
    }
    for (int k = 0; k < n && st == KR_OK; k++) {
        sym_state *s = &syms[idx[k]];
        if (!fc[k]) continue;
        s->rounds[s->n_rounds++] = fc[k];
        s->paths += fp.paths;
        fc[k] = NULL;
    }
    for (int k = 0; k < n; k++) kr_forecast_free(fc[k]);
    free(series);
    free(fc);
    return st;
}

/* Paths a symbol needs for its targets at its current errors (0: none more). */
static int paths_needed(const kr_report *r, const kr_analyze_params *p) {
    double factor = 1.0;
    if (p->target_prob_se > 0 && r->prob_up_se > p->target_prob_se) {
        double f = r->prob_up_se / p->target_prob_se;
        factor = fmax(factor, f * f);
    }
    double scale = fmax(fabs(r->var95), isnan(r->return_std) ? 0 : r->return_std);
    if (p->target_var_rel_se > 0 && scale > 0 && r->var95_se > p->target_var_rel_se * scale) {
        double f = r->var95_se / (p->target_var_rel_se * scale);
        factor = fmax(factor, f * f);
    }
    int need = factor <= 1.0 ? 0 : (int)ceil(r->paths * factor);
    /* A VaR / ES error estimated from a handful of tail paths is itself noise (a run that
     * stopped at 128 paths stated ES95 4.27 +- 0.18 against a reference of 5.48): with a tail
     * target, no fewer paths than put KR_ANALYZE_TAIL_PATHS of them beyond the 5 % quantile. */
    const int tail_min = (int)ceil(KR_ANALYZE_TAIL_PATHS / 0.05);
    if (p->target_var_rel_se > 0 && r->paths < tail_min && need < tail_min) need = tail_min;
    return need;
}

/* The statistics of a symbol's paths so far, for the targets. */
static kr_status check_targets(sym_state *s, const kr_analyze_item *it, const kr_analyze_params *p,
                               int *need, kr_error *err) {
    kr_path_set *ps = NULL;
    kr_status st = kr_path_set_create((const kr_forecast *const *)s->rounds, s->n_rounds, p->ohlc,
                                      kr_series_zero_volume(&s->series), &ps, err);
    if (st != KR_OK) return st;
    kr_report r;
    memset(&r, 0, sizeof r);
    snprintf(r.symbol, sizeof r.symbol, "%s", it->symbol);
    r.horizon = ps->pred_len;
    r.paths = ps->paths;
    r.last_close = it->candles->values[(it->candles->n - 1) * KR_N_FEATURES + KR_CLOSE];
    r.realized_vol_h = NAN;
    st = kr_report_horizon_stats(&r, ps, err);
    kr_path_set_free(ps);
    *need = st == KR_OK ? paths_needed(&r, p) : 0;
    return st;
}

static void add_stats(kr_forecast_stats *a, const kr_forecast *f) {
    kr_forecast_stats b;
    kr_forecast_get_stats(f, &b);
    a->prefill_tokens += b.prefill_tokens;
    a->cached_tokens += b.cached_tokens;
    a->decode_tokens += b.decode_tokens;
    a->window_recomputes += b.window_recomputes;
    a->reused_tokens += b.reused_tokens;
    a->seconds_total += b.seconds_total;
    a->seconds_prefill += b.seconds_prefill;
    a->seconds_decode += b.seconds_decode;
    a->seconds_tokenizer += b.seconds_tokenizer;
}

kr_status kr_analyze(kr_context *ctx, const kr_analyze_item *items, int n,
                     const kr_analyze_params *p, kr_report_set **out, kr_error *err) {
    if (!ctx || !items || n < 1 || !p || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "analyze: NULL argument or no symbols");
    *out = NULL;
    kr_status st = kr_analyze_check_params(p, err);
    if (st != KR_OK) return st;
    kr_report_set *set = calloc(1, sizeof *set);
    sym_state *syms = calloc((size_t)n, sizeof *syms);
    int *idx = calloc((size_t)n, sizeof *idx);
    if (!set || !syms || !idx) {
        st = kr_error_set(err, KR_ERR_NOMEM, "analyze: out of memory");
        goto done;
    }
    set->generated_at = p->now > 0 ? p->now : (int64_t)time(NULL);
    set->reports = calloc((size_t)n, sizeof *set->reports);
    set->rank = calloc((size_t)n, sizeof *set->rank);
    set->failures = calloc((size_t)n, sizeof *set->failures);
    if (!set->reports || !set->rank || !set->failures) {
        st = kr_error_set(err, KR_ERR_NOMEM, "analyze: out of memory");
        goto done;
    }
    set->n = n; /* reports[i] at input index i (NULL for a failure) until compacted below */
    /* Every forecast of the analysis (rounds, calibration) under one request setting. */
    kr_analyst_request rq = kr_analyst_request_start(p->request);
    if (p->static_batch_rows > 0) rq.params.static_batch_rows = p->static_batch_rows;
    set->static_batch_rows = rq.params.static_batch_rows;

    const int64_t need = kr_analyze_min_rows(p);
    for (int i = 0; i < n; i++) {
        sym_state *s = &syms[i];
        const kr_candles *c = items[i].candles;
        s->ok = 1;
        kr_error e = { 0 };
        if (items[i].error) {
            kr_error_set(&e, KR_ERR_INVALID_ARG, "%s", items[i].error);
            fail_symbol(s, KR_ERR_INVALID_ARG, &e);
        } else if (!items[i].symbol) {
            kr_error_set(&e, KR_ERR_INVALID_ARG, "analyze: item %d has no symbol", i);
            fail_symbol(s, KR_ERR_INVALID_ARG, &e);
        } else if (!c) {
            kr_error_set(&e, KR_ERR_INVALID_ARG, "analyze: item %d (%s) has no history", i,
                         items[i].symbol);
            fail_symbol(s, KR_ERR_INVALID_ARG, &e);
        } else if (c->n < need) {
            kr_error_set(
                &e, KR_ERR_INVALID_ARG, "%s %s: %lld rows, need at least %lld (horizon %d%s)",
                items[i].symbol, items[i].interval ? items[i].interval : "", (long long)c->n,
                (long long)need, p->horizon, p->calibrate > 0 ? " and calibration windows" : "");
            fail_symbol(s, KR_ERR_INVALID_ARG, &e);
        } else {
            s->lookback = kr_analyst_lookback(c->n, p->horizon, p->max_context, p->lookback);
            s->series = kr_candles_slice(c, c->n - s->lookback, s->lookback);
            /* The future bars follow the market's calendar, inferred from the whole history
             * (more bars tell the markets apart better than the lookback alone). */
            const kr_calendar *cal = NULL;
            s->future = malloc((size_t)p->horizon * sizeof *s->future);
            kr_status cs = s->future
                               ? kr_calendar_resolve(items[i].market, items[i].symbol, &cal, &e)
                               : kr_error_set(&e, KR_ERR_NOMEM, "out of memory");
            if (cs == KR_OK)
                cs = kr_calendar_future_in(cal, c->timestamps, c->n, p->horizon, s->future, &s->cal,
                                           &e);
            if (cs != KR_OK) {
                kr_error_prefix(&e, "%s %s", items[i].symbol,
                                items[i].interval ? items[i].interval : "");
                fail_symbol(s, cs, &e);
            } else {
                s->series.future_timestamps = s->future;
            }
        }
    }

    kr_forecast_params fp = kr_forecast_default_params();
    fp.pred_len = p->horizon;
    fp.paths = p->paths;
    fp.max_context = p->max_context;
    fp.top_k = p->top_k;
    fp.temperature = p->temperature;
    fp.top_p = p->top_p;
    fp.seed = p->seed;
    fp.keep_paths = 1;
    fp.lookback = 0; /* each series is a view of exactly its lookback rows */
    const int cap = p->max_paths > p->paths ? p->max_paths : p->paths;

    int n_ok = 0;
    for (int i = 0; i < n; i++)
        if (syms[i].ok) idx[n_ok++] = i;
    const int n_steps = 1 + (p->calibrate > 0 ? n_ok : 0);
    char what[160];
    snprintf(what, sizeof what, "forecasting %d symbol%s (%d paths, %d bars)", n_ok,
             n_ok == 1 ? "" : "s", p->paths, p->horizon);
    progress(p, 0, n_steps, what);
    /* Rounds: a symbol short of its targets gets the extra paths it alone asks for, drawn from
     * the streams right after the ones it has (first_path), so its union is exactly a bigger
     * run of its own: its result depends neither on how its rounds fell nor on the symbols
     * analysed with it. (Every symbol once got the largest request among them: AAPL alone
     * ended at 674 paths, beside three others at 602.) Symbols asking alike share a batch. */
    for (int k = 0; k < n_ok; k++) syms[idx[k]].goal = p->paths;
    for (int round = 0, active = n_ok; active > 0 && round < 16; round++) {
        for (int k = 1; k < active; k++) /* by (paths, goal): insertion sort, n <= 64 */
            for (int j = k; j > 0; j--) {
                const sym_state *a = &syms[idx[j - 1]], *b = &syms[idx[j]];
                if (a->paths < b->paths || (a->paths == b->paths && a->goal <= b->goal)) break;
                const int t = idx[j];
                idx[j] = idx[j - 1];
                idx[j - 1] = t;
            }
        for (int a = 0; a < active;) {
            const sym_state *s = &syms[idx[a]];
            int b = a + 1;
            while (b < active && syms[idx[b]].paths == s->paths && syms[idx[b]].goal == s->goal)
                b++;
            fp.first_path = s->paths;
            fp.paths = s->goal - s->paths;
            if ((st = run_round(ctx, &rq, syms, idx + a, b - a, items, fp, err)) != KR_OK)
                goto done;
            a = b;
        }
        int m = 0;
        for (int k = 0; k < active; k++) {
            sym_state *s = &syms[idx[k]];
            if (!s->ok) continue;
            const int current = s->paths;
            int want = 0;
            if (cap > current) {
                kr_error e = { 0 };
                kr_status cs = check_targets(s, &items[idx[k]], p, &want, &e);
                if (cs == KR_ERR_NOMEM) {
                    *err = e;
                    st = cs;
                    goto done;
                }
            }
            if (want <= current) {
                s->done = cap > current; /* checked and met; at the cap it was not checked */
                continue;
            }
            int next = want, target = (int)ceil(current * KR_ANALYZE_GROWTH);
            if (next < target) next = target;
            if (next > cap) next = cap;
            s->goal = next;
            idx[m++] = idx[k];
        }
        active = m;
    }

    kr_report_meta meta;
    fill_meta(kr_context_model(ctx), p, &meta);
    for (int i = 0; i < n; i++) {
        sym_state *s = &syms[i];
        if (!s->ok) continue;
        kr_path_set *ps = NULL;
        kr_forecast_stats timing;
        memset(&timing, 0, sizeof timing);
        for (int r = 0; r < s->n_rounds; r++) add_stats(&timing, s->rounds[r]);
        kr_error e = { 0 };
        kr_report *rep = NULL;
        kr_status bs = kr_path_set_create((const kr_forecast *const *)s->rounds, s->n_rounds,
                                          p->ohlc, kr_series_zero_volume(&s->series), &ps, &e);
        if (bs == KR_OK)
            bs = kr_report_build(items[i].symbol, items[i].interval, items[i].candles, s->lookback,
                                 ps, &timing, &meta, &rep, &e);
        kr_path_set_free(ps);
        if (bs == KR_ERR_NOMEM) {
            *err = e;
            st = bs;
            goto done;
        }
        if (bs != KR_OK) {
            fail_symbol(s, bs, &e);
            continue;
        }
        rep->rounds = s->n_rounds;
        kr_calendar_describe(&s->cal, rep->calendar, sizeof rep->calendar);
        if (s->cal.how == KR_CAL_GIVEN && s->cal.calendar) {
            /* Named, not inferred: say by whom (a market set for the symbol, from --market, the
             * request or kronos ingest --market, or the symbol's suffix). */
            size_t len = strlen(rep->calendar);
            snprintf(rep->calendar + len, sizeof rep->calendar - len, "%s",
                     items[i].market && items[i].market[0] ? " (the symbol's market)"
                                                           : " (from the symbol's suffix)");
        }
        /* The market as it was named (a series stored as SZSE is shown as SZSE, though its
         * calendar is SSE's). */
        const char *spelled = s->cal.calendar && items[i].market
                                  ? kr_calendar_spelling(s->cal.calendar, items[i].market)
                                  : NULL;
        snprintf(rep->market, sizeof rep->market, "%s",
                 spelled           ? spelled
                 : s->cal.calendar ? s->cal.calendar->name
                                   : "");
        rep->holidays_known = s->cal.holidays_known;
        judge_staleness(rep, s->cal.calendar, set->generated_at);
        int want = 0;
        /* Checked again unless met in the rounds: the cap or the round limit may have ended
         * them short of the targets. */
        rep->target_met =
            s->done || (check_targets(s, &items[i], p, &want, &e) == KR_OK && want <= s->paths);
        for (int r = 0; r < s->n_rounds; r++) kr_forecast_free(s->rounds[r]);
        s->n_rounds = 0;
        set->reports[i] = rep;
    }

    for (int i = 0, k = 0; i < n && p->calibrate > 0; i++) {
        if (!syms[i].ok) continue;
        snprintf(what, sizeof what, "calibrating %s %d/%d (%d windows)", items[i].symbol, k + 1,
                 n_ok, p->calibrate);
        progress(p, 1 + k++, n_steps, what);
        kr_calibration *cal = NULL;
        kr_forecast_params cp = fp;
        cp.paths = p->paths;
        cp.first_path = 0;
        kr_error e = { 0 };
        kr_status cs =
            kr_calibrate(ctx, items[i].candles, p->calibrate, &cp, p->lookback, &rq, &cal, &e);
        if (cs == KR_OK) cs = kr_report_attach_calibration(set->reports[i], cal, &e);
        if (cs != KR_OK) {
            kr_calibration_free(cal);
            if (kr_analyst_fatal(cs)) {
                *err = e;
                st = cs;
                goto done;
            }
            kr_error_prefix(&e, "%s %s", items[i].symbol, items[i].interval);
            fail_symbol(&syms[i], cs, &e);
            kr_report_free(set->reports[i]);
            set->reports[i] = NULL;
        }
    }

    /* Compact: reports of the symbols that made it, failures of the others, input order. */
    int first_fail = -1;
    set->n = 0;
    for (int i = 0; i < n; i++) {
        if (syms[i].ok && set->reports[i]) {
            set->reports[set->n++] = set->reports[i];
            continue;
        }
        kr_report_free(set->reports[i]);
        if (first_fail < 0) first_fail = i;
        kr_analyze_failure *f = &set->failures[set->n_failures++];
        snprintf(f->symbol, sizeof f->symbol, "%s", items[i].symbol ? items[i].symbol : "");
        snprintf(f->interval, sizeof f->interval, "%s", items[i].interval ? items[i].interval : "");
        snprintf(f->message, sizeof f->message, "%s", syms[i].message);
    }
    for (int i = set->n; i < n; i++) set->reports[i] = NULL;
    if (set->n == 0) {
        st = kr_error_set(err,
                          syms[first_fail].status ? syms[first_fail].status : KR_ERR_INVALID_ARG,
                          "%s", syms[first_fail].message);
        goto done;
    }
    kr_report_set_rank(set);
    progress(p, n_steps, n_steps, "done");
    *out = set;
    set = NULL;
done:
    kr_report_set_free(set);
    if (syms)
        for (int i = 0; i < n; i++) {
            for (int r = 0; r < syms[i].n_rounds; r++) kr_forecast_free(syms[i].rounds[r]);
            free(syms[i].future);
        }
    free(syms);
    free(idx);
    return st;
}
