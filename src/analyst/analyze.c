/*
 * analyst/analyze — the pipeline (see analyze.h): validate, one batch forecast for all
 * symbols, per-symbol calibration batches, reports, ranking.
 */
#include "analyst/analyze.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"

/* Fewer rows than this make the normalisation statistics and most indicators meaningless. */
#define KR_ANALYZE_MIN_ROWS 32

kr_analyze_params kr_analyze_default_params(void) {
    kr_analyze_params p;
    memset(&p, 0, sizeof p);
    kr_forecast_params f = kr_forecast_default_params();
    p.horizon = 20;
    p.paths = 32;
    p.max_context = f.max_context;
    p.top_k = f.top_k;
    p.temperature = f.temperature;
    p.top_p = f.top_p;
    p.seed = 0;
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

void kr_report_set_free(kr_report_set *set) {
    if (!set) return;
    for (int i = 0; i < set->n; i++) kr_report_free(set->reports[i]);
    free(set->reports);
    free(set->rank);
    free(set);
}

/* Expected return descending, NaN last, then symbol and interval. */
static int rank_before(const kr_report *x, const kr_report *y) {
    int xn = isnan(x->expected_return), yn = isnan(y->expected_return);
    if (xn != yn) return yn;
    if (!xn && x->expected_return != y->expected_return)
        return x->expected_return > y->expected_return;
    int c = strcmp(x->symbol, y->symbol);
    return c ? c < 0 : strcmp(x->interval, y->interval) < 0;
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
}

/* "kronos-demo" from ".../kronos-demo/predictor", else the directory's own name. */
static void model_name_from_dir(const char *dir, char *out, size_t cap) {
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

static void fill_meta(const kr_model *model, const kr_analyze_params *p, kr_report_meta *m) {
    memset(m, 0, sizeof *m);
    kr_model_info info;
    kr_model_get_info(model, &info);
    if (p->model_name)
        snprintf(m->model_name, sizeof m->model_name, "%s", p->model_name);
    else
        model_name_from_dir(p->predictor_dir, m->model_name, sizeof m->model_name);
    snprintf(m->predictor_dir, sizeof m->predictor_dir, "%s",
             p->predictor_dir ? p->predictor_dir : "");
    snprintf(m->tokenizer_dir, sizeof m->tokenizer_dir, "%s",
             p->tokenizer_dir ? p->tokenizer_dir : "");
    m->d_model = info.d_model;
    m->n_layers = info.n_layers;
    m->n_heads = info.n_heads;
    m->n_params = (int64_t)info.n_params;
    /* The engine computes in f32 whatever the checkpoint's dtype (F16/BF16 are widened at
     * load), so that is what the forecast ran with. */
    snprintf(m->quantization, sizeof m->quantization, "f32");
    m->max_context = p->max_context;
    m->top_k = p->top_k;
    m->temperature = p->temperature;
    m->top_p = p->top_p;
    m->seed = p->seed;
    snprintf(m->engine_version, sizeof m->engine_version, "%s", kr_version());
}

static void progress(const kr_analyze_params *p, int step, int n_steps, const char *what) {
    if (p->progress) p->progress(p->progress_user, step, n_steps, what);
}

static kr_status check_params(const kr_analyze_params *p, kr_error *err) {
    if (p->horizon < 1 || p->horizon >= p->max_context)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "horizon must be in 1..%d, got %d",
                            p->max_context - 1, p->horizon);
    if (p->paths < 1) return kr_error_set(err, KR_ERR_INVALID_ARG, "paths must be >= 1");
    if (p->lookback < 0 || p->calibrate < 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "lookback and calibrate must be >= 0");
    return KR_OK;
}

kr_status kr_analyze(kr_context *ctx, const kr_analyze_item *items, int n,
                     const kr_analyze_params *p, kr_report_set **out, kr_error *err) {
    if (!ctx || !items || n < 1 || !p || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "analyze: NULL argument or no symbols");
    *out = NULL;
    kr_status st = check_params(p, err);
    if (st != KR_OK) return st;
    const int64_t need = kr_analyze_min_rows(p);
    for (int i = 0; i < n; i++) {
        const kr_candles *c = items[i].candles;
        if (!c || !items[i].symbol)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "analyze: item %d has no history", i);
        if (c->n < need)
            return kr_error_set(
                err, KR_ERR_INVALID_ARG, "%s %s: %lld rows, need at least %lld (horizon %d%s)",
                items[i].symbol, items[i].interval ? items[i].interval : "", (long long)c->n,
                (long long)need, p->horizon, p->calibrate > 0 ? " and calibration windows" : "");
    }

    kr_report_set *set = calloc(1, sizeof *set);
    kr_series *series = calloc((size_t)n, sizeof *series);
    kr_forecast **fc = calloc((size_t)n, sizeof *fc);
    int *lookback = calloc((size_t)n, sizeof *lookback);
    if (!set || !series || !fc || !lookback) {
        st = kr_error_set(err, KR_ERR_NOMEM, "analyze: out of memory");
        goto done;
    }
    set->n = n;
    set->generated_at = (int64_t)time(NULL);
    set->reports = calloc((size_t)n, sizeof *set->reports);
    set->rank = calloc((size_t)n, sizeof *set->rank);
    if (!set->reports || !set->rank) {
        st = kr_error_set(err, KR_ERR_NOMEM, "analyze: out of memory");
        goto done;
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
    for (int i = 0; i < n; i++) {
        const kr_candles *c = items[i].candles;
        lookback[i] = kr_analyst_lookback(c->n, p->horizon, p->max_context, p->lookback);
        series[i] = kr_candles_slice(c, c->n - lookback[i], lookback[i]);
    }

    const int n_steps = 1 + (p->calibrate > 0 ? n : 0);
    char what[160];
    snprintf(what, sizeof what, "forecasting %d symbol%s (%d paths, %d bars)", n, n == 1 ? "" : "s",
             p->paths, p->horizon);
    progress(p, 0, n_steps, what);
    if ((st = kr_forecast_run_batch_ex(ctx, series, n, &fp, p->request, fc, err)) != KR_OK) {
        /* The engine names "series i"; say which symbol that is. */
        if (n == 1) kr_error_prefix(err, "%s %s", items[0].symbol, items[0].interval);
        goto done;
    }
    kr_report_meta meta;
    fill_meta(kr_context_model(ctx), p, &meta);
    for (int i = 0; i < n; i++)
        if ((st = kr_report_build(items[i].symbol, items[i].interval, items[i].candles, lookback[i],
                                  fc[i], &meta, &set->reports[i], err)) != KR_OK)
            goto done;

    for (int i = 0; i < n && p->calibrate > 0; i++) {
        snprintf(what, sizeof what, "calibrating %s %d/%d (%d windows)", items[i].symbol, i + 1, n,
                 p->calibrate);
        progress(p, 1 + i, n_steps, what);
        kr_calibration *cal = NULL;
        if ((st = kr_calibrate(ctx, items[i].candles, p->calibrate, &fp, p->lookback, p->request,
                               &cal, err)) != KR_OK) {
            kr_error_prefix(err, "%s %s", items[i].symbol, items[i].interval);
            goto done;
        }
        if ((st = kr_report_attach_calibration(set->reports[i], cal, err)) != KR_OK) {
            kr_calibration_free(cal);
            goto done;
        }
    }
    kr_report_set_rank(set);
    progress(p, n_steps, n_steps, "done");
    *out = set;
    set = NULL;
done:
    kr_report_set_free(set);
    if (fc)
        for (int i = 0; i < n; i++) kr_forecast_free(fc[i]);
    free(fc);
    free(series);
    free(lookback);
    return st;
}
