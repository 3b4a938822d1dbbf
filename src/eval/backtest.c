/*
 * eval/backtest — kr_backtest_run (kronos/backtest.h): plan the origins, forecast every
 * (symbol, origin) through the public batch API in static batches, score each forecast and the
 * baselines' as they come, then aggregate, cross-section and strategy.
 *
 * A forecast at an origin is exactly the live one at that bar: the series is a view of the
 * rows up to and including it (the lookback rule of `kronos analyze`), its future timestamps
 * come from the symbol's calendar applied to those rows only, and the forecast parameters are
 * the run's. Nothing after the origin reaches the engine (tests/test_eval_backtest_engine.c
 * changes every later row and finds each forecast unchanged, bit for bit).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyst/analyze.h"
#include "base/error.h"
#include "base/timeutil.h"
#include "eval/backtest_internal.h"
#include "series/calendar.h"

/* Progress reports per forecast phase, about. */
/* The most memory the scores' sums of one backtest may take (kr_bt_prepare). */
#define KR_BT_MAX_SCORE_BYTES (2.0 * (1 << 30))
#define KR_BT_PROGRESS_STEPS 100

kr_backtest_params kr_backtest_default_params(void) {
    kr_backtest_params p;
    memset(&p, 0, sizeof p);
    const kr_forecast_params f = kr_forecast_default_params();
    p.horizon = 20;
    p.from_ts = KR_STORE_TS_FIRST;
    p.to_ts = KR_STORE_TS_LAST;
    p.min_history = 64;
    p.paths = 32;
    p.max_context = f.max_context;
    p.temperature = f.temperature;
    p.top_k = f.top_k;
    p.top_p = f.top_p;
    p.window = KR_WINDOW_EXACT;
    p.ohlc = KR_OHLC_CONSISTENT;
    p.bootstrap = 1000;
    p.ci_level = 0.95;
    p.alpha = 0.05;
    p.strategy_k = 1;
    p.strategy_rank = KR_BACKTEST_RANK_RETURN;
    p.cost_bps = 10;
    p.ashare_rules = -1;
    return p;
}

kr_status kr_backtest_check_params(const kr_backtest_params *p, kr_error *err) {
#define BAD(...) return kr_error_set(err, KR_ERR_INVALID_ARG, __VA_ARGS__)
    if (!p) BAD("backtest: NULL parameters");
    if (p->max_context < 3 || p->max_context > 65536)
        BAD("max_context must be in 3..65536, got %d", p->max_context);
    if (p->horizon < 1 || p->horizon > p->max_context - 2)
        BAD("horizon must be in 1..%d (max_context - 2), got %d", p->max_context - 2, p->horizon);
    if (p->every < 0 || p->every > 1000000) BAD("every must be in 0..1000000, got %d", p->every);
    if (p->from_ts > p->to_ts) BAD("from is after to");
    if (p->n_origin_ts < 0 || (p->n_origin_ts > 0 && !p->origin_ts))
        BAD("origin dates: %d given without a list", p->n_origin_ts);
    for (int i = 1; i < p->n_origin_ts; i++)
        if (p->origin_ts[i] <= p->origin_ts[i - 1])
            BAD("origin dates must be strictly increasing (date %d is not after date %d)", i + 1,
                i);
    if (p->min_history < 2 || p->min_history > 10000000)
        BAD("min_history must be in 2..10000000, got %d", p->min_history);
    if (p->max_origins < 0) BAD("max_origins must be >= 0, got %d", p->max_origins);
    if (p->paths < 2 || p->paths > 4096)
        BAD("paths must be in 2..4096 (the scores need a distribution), got %d", p->paths);
    if (p->lookback < 0 || p->lookback > p->max_context)
        BAD("lookback must be in 0..max_context (%d), got %d", p->max_context, p->lookback);
    if (!(p->temperature > 0) || !isfinite(p->temperature)) BAD("temperature must be > 0");
    if (!(p->top_p > 0) || p->top_p > 1) BAD("top_p must be in (0, 1]");
    if (p->top_k < 0) BAD("top_k must be >= 0");
    if (p->window != KR_WINDOW_EXACT && p->window != KR_WINDOW_ROLLING)
        BAD("window must be exact or rolling");
    if (p->ohlc != KR_OHLC_RAW && p->ohlc != KR_OHLC_CONSISTENT)
        BAD("ohlc must be raw or consistent");
    if (p->season > 100000) BAD("season must be at most 100000 bars, got %d", p->season);
    if (p->bootstrap < 0 || p->bootstrap > 100000)
        BAD("bootstrap must be in 0..100000 resamples, got %d", p->bootstrap);
    if (p->block_length < 0) BAD("block_length must be >= 0");
    if (!(p->ci_level >= 0.5 && p->ci_level < 1)) BAD("ci_level must be in [0.5, 1)");
    if (!(p->alpha > 0 && p->alpha <= 0.5)) BAD("alpha must be in (0, 0.5]");
    if (p->strategy_k < 0 || p->strategy_k > 10000)
        BAD("strategy_k must be in 0..10000, got %d", p->strategy_k);
    if (p->strategy_rank != KR_BACKTEST_RANK_RETURN && p->strategy_rank != KR_BACKTEST_RANK_PROB_UP)
        BAD("strategy rank must be the expected return or P(up)");
    if (!(p->cost_bps >= 0 && p->cost_bps <= 10000)) BAD("cost_bps must be in 0..10000");
    if (p->ashare_rules < -1 || p->ashare_rules > 1) BAD("ashare_rules must be -1, 0 or 1");
    const int every = p->every > 0 ? p->every : p->horizon;
    if (p->hold < 0) BAD("hold must be >= 0 bars");
    if (p->hold > 0 && !p->origin_ts && p->hold % every != 0)
        BAD("hold (%d bars) must be a multiple of every (%d bars): positions change only at "
            "origins",
            p->hold, every);
    return KR_OK;
#undef BAD
}

void kr_backtest_report_free(kr_backtest_report *r) {
    if (!r) return;
    free(r->symbols);
    free(r->items);
    free(r->unit_ts);
    free(r->unit_n);
    free(r->item_num);
    free(r->item_den);
    free(r->unit_num);
    free(r->unit_den);
    free(r->unit_bins);
    free(r->pooled);
    free(r->per_symbol);
    free(r->pit);
    free(r->rel_freq);
    free(r->rel_pred);
    free(r->rel_count);
    for (int i = 0; i < r->n_rel; i++) free(r->rel[i].per_symbol);
    free(r->rel);
    free(r->dm);
    free(r->ic);
    free(r->strategy.periods);
    free(r);
}

int64_t kr_backtest_report_forecasts(const kr_backtest_report *r) { return r ? r->n_items : 0; }

size_t kr_backtest_report_bytes(const kr_backtest_report *r) {
    if (!r) return 0;
    const size_t I = (size_t)r->n_items, U = (size_t)r->n_units, S = (size_t)r->n_symbols;
    const size_t H1 = (size_t)r->p.horizon + 1, FM = (size_t)KR_BT_N_F * KR_BT_N_METRICS;
    size_t b = sizeof *r + S * sizeof *r->symbols + I * sizeof *r->items;
    b += U * (sizeof *r->unit_ts + sizeof *r->unit_n + sizeof *r->ic);
    b += 2 * I * FM * sizeof(double) + 2 * U * FM * H1 * sizeof(double);
    b += U * KR_BT_N_F * KR_BT_N_BINS * sizeof(double);
    b += FM * H1 * sizeof(kr_bt_est) + S * FM * sizeof(kr_bt_est);
    b += (size_t)r->n_rel * (sizeof *r->rel + S * sizeof(kr_bt_est));
    b += (size_t)r->n_dm * sizeof *r->dm;
    b += (size_t)r->strategy.n_periods * sizeof *r->strategy.periods;
    return b;
}

int kr_backtest_report_failures(const kr_backtest_report *r) {
    if (!r) return 0;
    int n = 0;
    for (int s = 0; s < r->n_symbols; s++) n += r->symbols[s].failed;
    return n;
}

/* ------------------------------------------------------------------ running */

typedef struct run_state {
    kr_backtest_report *r;
    const kr_backtest_series *series;
    const kr_backtest_params *p;
    const kr_calendar **cal; /* [n_symbols] resolved calendars (NULL: inferred) */
    kr_analyst_request request;
    double t0;
    double *scratch, *closes, *real;
} run_state;

static void progress(run_state *rs, const char *phase, int64_t done, int64_t total,
                     double t_phase) {
    if (!rs->p->progress) return;
    kr_backtest_progress pr = { phase, done, total, kr_now_seconds() - rs->t0, NAN };
    if (done > 0 && total > done)
        pr.eta_seconds = (kr_now_seconds() - t_phase) / done * (total - done);
    if (done >= total) pr.eta_seconds = 0;
    rs->p->progress(rs->p->progress_user, &pr);
}

static int aborted(const run_state *rs) {
    const kr_request_params *rq = rs->p->request;
    return rq && rq->should_abort && rq->should_abort(rq->abort_user);
}

/* The realised closes after item i's origin. */
static void realised(const run_state *rs, int i, double *real) {
    const kr_bt_item *it = &rs->r->items[i];
    const kr_candles *c = rs->series[it->sym].candles;
    for (int k = 0; k < rs->p->horizon; k++)
        real[k] = c->values[(it->row + 1 + k) * KR_N_FEATURES + KR_CLOSE];
}

/* "AAPL at 2024-03-01" for the series index j of a chunk's error message ("series 3: ..."). */
static void name_failure(const run_state *rs, int first, kr_error *e) {
    int j = -1;
    if (sscanf(e->message, "series %d", &j) != 1 || j < 0) return;
    const char *colon = strchr(e->message, ':');
    if (!colon || first + j >= rs->r->n_items) return;
    const kr_bt_item *it = &rs->r->items[first + j];
    char when[32], rest[512];
    kr_bt_fmt_ts(it->ts, when, sizeof when);
    snprintf(rest, sizeof rest, "%s", colon + 1);
    kr_error_set(e, e->status, "%s at %s:%s", rs->r->symbols[it->sym].symbol, when, rest);
}

/* Forecasts items [first, first + n) on ctx as forecaster f and scores them. */
static kr_status run_chunk(run_state *rs, kr_context *ctx, int f, int first, int n, kr_error *err) {
    kr_backtest_report *r = rs->r;
    const int h = rs->p->horizon, P = rs->p->paths;
    kr_series *ser = calloc((size_t)n, sizeof *ser);
    int64_t *future = malloc((size_t)n * h * sizeof *future);
    kr_forecast **fc = calloc((size_t)n, sizeof *fc);
    kr_status st = KR_OK;
    if (!ser || !future || !fc) {
        st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory");
        goto out;
    }
    for (int j = 0; j < n; j++) {
        kr_bt_item *it = &r->items[first + j];
        const kr_candles *c = rs->series[it->sym].candles;
        ser[j] = kr_candles_slice(c, it->row + 1 - it->lookback, it->lookback);
        /* The calendar sees the rows up to the origin only, as it would have then. */
        int64_t *fut = future + (int64_t)j * h;
        kr_error e = { 0 };
        if ((st = kr_calendar_future_in(rs->cal[it->sym], c->timestamps, it->row + 1, h, fut, NULL,
                                        &e)) != KR_OK) {
            char when[32];
            kr_bt_fmt_ts(it->ts, when, sizeof when);
            st = kr_error_set(err, st, "%s at %s: calendar: %s", r->symbols[it->sym].symbol, when,
                              e.message);
            goto out;
        }
        ser[j].future_timestamps = fut;
        if (f == KR_BT_F_MODEL &&
            memcmp(fut, c->timestamps + it->row + 1, (size_t)h * sizeof *fut)) {
            it->stamp_mismatch = 1;
            r->symbols[it->sym].stamp_mismatches++;
        }
    }
    kr_forecast_params fp = kr_forecast_default_params();
    fp.pred_len = h;
    fp.paths = P;
    fp.lookback = 0; /* each view holds exactly its lookback rows */
    fp.max_context = rs->p->max_context;
    fp.temperature = rs->p->temperature;
    fp.top_k = rs->p->top_k;
    fp.top_p = rs->p->top_p;
    fp.seed = rs->p->seed;
    fp.window = rs->p->window;
    fp.keep_paths = 1;
    kr_error e = { 0 };
    st = kr_analyst_run_batch(ctx, &rs->request, ser, n, &fp, fc, &e);
    if (st != KR_OK) {
        name_failure(rs, first, &e);
        *err = e;
        goto out;
    }
    const kr_bt_cell_input in = { rs->closes, P, 1 };
    for (int j = 0; j < n; j++) {
        kr_path_set *ps = NULL;
        const kr_forecast *one = fc[j];
        if ((st = kr_path_set_create(&one, 1, rs->p->ohlc, kr_series_zero_volume(&ser[j]), &ps,
                                     err)) != KR_OK)
            goto out;
        for (int p = 0; p < P; p++)
            for (int k = 0; k < h; k++)
                rs->closes[(int64_t)p * h + k] =
                    ps->values[((int64_t)p * h + k) * KR_N_FEATURES + KR_CLOSE];
        kr_path_set_free(ps);
        realised(rs, first + j, rs->real);
        kr_bt_score_item(r, first + j, f, &in, rs->real, rs->scratch);
        kr_forecast_free(fc[j]);
        fc[j] = NULL;
    }
out:
    if (fc)
        for (int j = 0; j < n; j++) kr_forecast_free(fc[j]);
    free(fc);
    free(future);
    free(ser);
    return st;
}

/* Every item on ctx as forecaster f, in chunks of whole static batches. */
static kr_status run_forecasts(run_state *rs, kr_context *ctx, int f, const char *phase,
                               kr_error *err) {
    const int n = rs->r->n_items;
    const int rows = rs->p->static_batch_rows;
    const int per = kr_static_batch_series(rows < 0 ? 0 : rows, rs->p->paths, n);
    int chunk = n / KR_BT_PROGRESS_STEPS;
    chunk = chunk < per ? per : chunk - chunk % per;
    const double t_phase = kr_now_seconds();
    progress(rs, phase, 0, n, t_phase);
    for (int first = 0; first < n; first += chunk) {
        if (aborted(rs))
            return kr_error_set(err, KR_ERR_CANCELLED,
                                "backtest: cancelled after %d of %d forecasts", first, n);
        const int count = n - first < chunk ? n - first : chunk;
        kr_status st = run_chunk(rs, ctx, f, first, count, err);
        if (st != KR_OK) return st;
        progress(rs, phase, first + count, n, t_phase);
    }
    return KR_OK;
}

/* The baselines of every item, scored as the model's forecasts are. */
static kr_status run_baselines(run_state *rs, kr_error *err) {
    kr_backtest_report *r = rs->r;
    const int P = rs->p->paths;
    double *hist = NULL;
    int cap = 0;
    for (int i = 0; i < r->n_items; i++) {
        const kr_bt_item *it = &r->items[i];
        const kr_candles *c = rs->series[it->sym].candles;
        if (it->lookback > cap) {
            free(hist);
            cap = it->lookback;
            hist = malloc((size_t)cap * sizeof *hist);
            if (!hist) return kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory");
        }
        const int64_t start = it->row + 1 - it->lookback;
        for (int t = 0; t < it->lookback; t++)
            hist[t] = c->values[(start + t) * KR_N_FEATURES + KR_CLOSE];
        realised(rs, i, rs->real);
        for (int f = KR_BT_F_NAIVE; f < KR_BT_N_F; f++) {
            if (!r->has[f] || kr_bt_baseline(r, f, it, hist, it->lookback, rs->closes) != 0) {
                r->items[i].f[f] = (kr_bt_fsum){ NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN };
                continue;
            }
            const kr_bt_cell_input in = { rs->closes, f == KR_BT_F_RW ? P : 1, f == KR_BT_F_RW };
            kr_bt_score_item(r, i, f, &in, rs->real, rs->scratch);
        }
    }
    free(hist);
    return KR_OK;
}

static void fill_meta(kr_backtest_report *r, const kr_context *ctx, const kr_backtest_params *p) {
    kr_model_info info;
    kr_model_get_info(kr_context_model(ctx), &info);
    if (p->model_name)
        snprintf(r->model_name, sizeof r->model_name, "%s", p->model_name);
    else
        kr_analyst_model_name(p->predictor_dir, r->model_name, sizeof r->model_name);
    if (!r->model_name[0]) snprintf(r->model_name, sizeof r->model_name, "model");
    snprintf(r->predictor_dir, sizeof r->predictor_dir, "%s",
             p->predictor_dir ? p->predictor_dir : "");
    snprintf(r->tokenizer_dir, sizeof r->tokenizer_dir, "%s",
             p->tokenizer_dir ? p->tokenizer_dir : "");
    kr_analyst_model_source(info.source, p->predictor_dir, r->source, sizeof r->source);
    snprintf(r->quant, sizeof r->quant, "%s", info.quant[0] ? info.quant : "f32");
    r->demo = info.demo;
    r->n_params = (int64_t)info.n_params;
    r->d_model = info.d_model;
    r->n_layers = info.n_layers;
    snprintf(r->engine_version, sizeof r->engine_version, "%s", kr_version());
    r->generated_at = (int64_t)time(NULL);
    if (p->compare) {
        kr_model_info ci;
        kr_model_get_info(kr_context_model(p->compare), &ci);
        r->compare_demo = ci.demo;
        snprintf(r->compare_name, sizeof r->compare_name, "%s",
                 p->compare_name && p->compare_name[0] ? p->compare_name : "second model");
    }
}

static kr_status check_series(const kr_backtest_series *series, int n, kr_error *err) {
    for (int s = 0; s < n; s++) {
        const kr_backtest_series *x = &series[s];
        if (!x->symbol || !x->symbol[0] || strlen(x->symbol) > 64)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "backtest: series %d: a symbol name of 1..64 bytes is needed", s);
        if (!x->candles || x->candles->n < 2 || !x->candles->timestamps || !x->candles->values)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: no candles (at least 2 rows needed)",
                                x->symbol);
        for (int t = 0; t < s; t++)
            if (!strcmp(series[t].symbol, x->symbol) &&
                !strcmp(series[t].interval ? series[t].interval : "",
                        x->interval ? x->interval : ""))
                return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: given twice", x->symbol);
    }
    return KR_OK;
}

kr_status kr_bt_prepare(const kr_context *ctx, const kr_backtest_series *series, int n,
                        const kr_backtest_params *p, kr_backtest_report **out, kr_error *err) {
    *out = NULL;
    kr_status st = kr_backtest_check_params(p, err);
    if (st == KR_OK) st = check_series(series, n, err);
    if (st != KR_OK) return st;
    kr_backtest_report *r = calloc(1, sizeof *r);
    if (!r) return kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory");
    r->p = *p;
    r->every = p->every > 0 ? p->every : p->horizon;
    r->hold = p->hold > 0 ? p->hold : r->every;
    r->p.static_batch_rows =
        p->static_batch_rows == 0 ? KR_BACKTEST_BATCH_ROWS_DEFAULT : p->static_batch_rows;
    r->static_batch_rows = r->p.static_batch_rows < 0 ? 0 : r->p.static_batch_rows;
    /* Origins every `every` bars overlap over ceil(horizon / every) of them. */
    r->lags = (p->horizon + r->every - 1) / r->every - 1;
    if (ctx) fill_meta(r, ctx, p);
    if ((st = kr_bt_plan(r, series, n, err)) != KR_OK) {
        kr_backtest_report_free(r);
        return st;
    }
    const int64_t U = r->n_units, I = r->n_items, H1 = p->horizon + 1;
    /* The cells' sums are held per origin and step: bounded, so a request for a million
     * origins of 500 steps is refused, not an allocation the system overcommits. */
    const double bytes = (double)(2 * I * KR_BT_N_F * KR_BT_N_METRICS) * sizeof(double) +
                         (double)(2 * U * KR_BT_N_F * KR_BT_N_METRICS * H1) * sizeof(double) +
                         (double)(U * KR_BT_N_F * KR_BT_N_BINS) * sizeof(double);
    if (bytes > KR_BT_MAX_SCORE_BYTES) {
        kr_backtest_report_free(r);
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "%lld forecasts at %lld origins of %d steps need %.1f GiB for their "
                            "scores, more than a backtest takes (%.0f GiB): fewer origins (every, "
                            "from / to, max_origins) or a shorter horizon",
                            (long long)I, (long long)U, p->horizon, bytes / (1 << 30),
                            KR_BT_MAX_SCORE_BYTES / (1 << 30));
    }
    const int cube = (int)lround(cbrt((double)U));
    r->block_length = p->block_length > 0  ? p->block_length
                      : cube > r->lags + 1 ? cube
                                           : r->lags + 1;
    if (r->block_length > U) r->block_length = (int)U;
    r->item_num = calloc((size_t)(I * KR_BT_N_F * KR_BT_N_METRICS), sizeof *r->item_num);
    r->item_den = calloc((size_t)(I * KR_BT_N_F * KR_BT_N_METRICS), sizeof *r->item_den);
    r->unit_num = calloc((size_t)(U * KR_BT_N_F * KR_BT_N_METRICS * H1), sizeof *r->unit_num);
    r->unit_den = calloc((size_t)(U * KR_BT_N_F * KR_BT_N_METRICS * H1), sizeof *r->unit_den);
    r->unit_bins = calloc((size_t)(U * KR_BT_N_F * KR_BT_N_BINS), sizeof *r->unit_bins);
    if (!r->item_num || !r->item_den || !r->unit_num || !r->unit_den || !r->unit_bins) {
        kr_backtest_report_free(r);
        return kr_error_set(err, KR_ERR_NOMEM,
                            "backtest: out of memory for the scores of %lld forecasts at %lld "
                            "origins (fewer origins or a shorter horizon need less)",
                            (long long)I, (long long)U);
    }
    r->has[KR_BT_F_MODEL] = 1;
    r->has[KR_BT_F_COMPARE] = p->compare != NULL;
    r->has[KR_BT_F_NAIVE] = r->has[KR_BT_F_DRIFT] = r->has[KR_BT_F_RW] = 1;
    for (int s = 0; s < n; s++) r->has[KR_BT_F_SEASONAL] |= r->symbols[s].season > 0;
    *out = r;
    return KR_OK;
}

kr_status kr_bt_score_forecast(kr_backtest_report *r, const kr_backtest_series *series, int item,
                               int f, const double *closes, kr_error *err) {
    const int h = r->p.horizon;
    double *real = malloc((size_t)h * sizeof *real);
    double *scratch = malloc((size_t)kr_bt_score_scratch(r->p.paths, h) * sizeof *scratch);
    if (!real || !scratch) {
        free(real);
        free(scratch);
        return kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory");
    }
    run_state rs = { .r = r, .series = series, .p = &r->p };
    realised(&rs, item, real);
    const kr_bt_cell_input in = { closes, r->p.paths, 1 };
    kr_bt_score_item(r, item, f, &in, real, scratch);
    free(real);
    free(scratch);
    return KR_OK;
}

kr_status kr_bt_finish(kr_backtest_report *r, const kr_backtest_series *series, kr_error *err) {
    run_state rs = { .r = r, .series = series, .p = &r->p };
    rs.scratch = malloc((size_t)kr_bt_score_scratch(r->p.paths, r->p.horizon) * sizeof *rs.scratch);
    rs.closes = malloc((size_t)r->p.paths * r->p.horizon * sizeof *rs.closes);
    rs.real = malloc((size_t)r->p.horizon * sizeof *rs.real);
    kr_status st = KR_OK;
    if (!rs.scratch || !rs.closes || !rs.real)
        st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory");
    if (st == KR_OK) st = run_baselines(&rs, err);
    if (st == KR_OK) st = kr_bt_aggregate(r, err);
    if (st == KR_OK) st = kr_bt_cross_section(r, err);
    if (st == KR_OK) st = kr_bt_strategy_run(r, series, err);
    free(rs.scratch);
    free(rs.closes);
    free(rs.real);
    /* What the report keeps of the parameters: no borrowed pointer. */
    r->p.origin_ts = NULL;
    r->p.compare = NULL;
    r->p.compare_name = r->p.model_name = r->p.predictor_dir = r->p.tokenizer_dir = NULL;
    r->p.progress = NULL;
    r->p.progress_user = NULL;
    r->p.request = NULL;
    return st;
}

kr_status kr_backtest_run(kr_context *ctx, const kr_backtest_series *series, int n,
                          const kr_backtest_params *p, kr_backtest_report **out, kr_error *err) {
    if (!ctx || !series || n < 1 || !p || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "backtest: NULL argument or no series");
    *out = NULL;
    run_state rs = { .series = series, .p = p, .t0 = kr_now_seconds() };
    progress(&rs, "plan", 0, n, rs.t0);
    kr_backtest_report *r = NULL;
    kr_status st = kr_bt_prepare(ctx, series, n, p, &r, err);
    if (st != KR_OK) return st;
    rs.r = r;
    rs.cal = calloc((size_t)n, sizeof *rs.cal);
    rs.scratch = malloc((size_t)kr_bt_score_scratch(p->paths, p->horizon) * sizeof *rs.scratch);
    rs.closes = malloc((size_t)p->paths * p->horizon * sizeof *rs.closes);
    rs.real = malloc((size_t)p->horizon * sizeof *rs.real);
    if (!rs.cal || !rs.scratch || !rs.closes || !rs.real) {
        st = kr_error_set(err, KR_ERR_NOMEM, "backtest: out of memory");
        goto done;
    }
    for (int s = 0; s < n; s++) {
        kr_error e = { 0 };
        kr_calendar_resolve(series[s].market, series[s].symbol, &rs.cal[s], &e); /* planned */
    }
    rs.request = kr_analyst_request_start(p->request);
    rs.request.params.static_batch_rows = r->static_batch_rows;
    double t = kr_now_seconds();
    if ((st = run_forecasts(&rs, ctx, KR_BT_F_MODEL, "forecast", err)) != KR_OK) goto done;
    r->seconds_forecast = kr_now_seconds() - t;
    if (p->compare) {
        t = kr_now_seconds();
        if ((st = run_forecasts(&rs, p->compare, KR_BT_F_COMPARE, "compare", err)) != KR_OK)
            goto done;
        r->seconds_compare = kr_now_seconds() - t;
    }
    progress(&rs, "score", 0, 1, kr_now_seconds());
    if ((st = kr_bt_finish(r, series, err)) != KR_OK) goto done;
    r->seconds_total = kr_now_seconds() - rs.t0;
    progress(&rs, "done", 1, 1, rs.t0);
done:
    free(rs.cal);
    free(rs.scratch);
    free(rs.closes);
    free(rs.real);
    if (st != KR_OK) {
        kr_backtest_report_free(r);
        return st;
    }
    *out = r;
    return KR_OK;
}
