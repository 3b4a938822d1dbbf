/* server/backtest_request — see backtest_request.h. */
#include "server/backtest_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "series/calendar.h"
#include "common/fields.h"
#include "common/json_body.h"

static const char *const k_formats[] = { "json", "md", "markdown", "html", "csv", NULL };
static const kr_backtest_format k_format_of[] = { KR_BACKTEST_JSON, KR_BACKTEST_MD, KR_BACKTEST_MD,
                                                  KR_BACKTEST_HTML, KR_BACKTEST_CSV };
static const char *const k_windows[] = { "exact", "rolling", NULL };
static const char *const k_ohlc[] = { "raw", "consistent", NULL };
static const char *const k_rank[] = { "return", "prob_up", NULL };
static const char *const k_ashare[] = { "auto", "off", "on", NULL };

/* The values read after the scalars. */
typedef struct bt_values {
    const cJSON *symbol, *symbols, *interval, *candles, *columns, *market, *from, *to, *origins,
        *strategy;
} bt_values;

static kr_status read_strategy(const cJSON *v, kr_backtest_params *p, kr_api_error *err) {
    int rank = p->strategy_rank == KR_BACKTEST_RANK_PROB_UP, ashare = 0;
    kr_field f[] = {
        KR_F_INT("k", &p->strategy_k, 0, 1000, 0), KR_F_BOOL("short", &p->strategy_short),
        KR_F_CHOICE("rank_by", &rank, k_rank),     KR_F_NUM("cost_bps", &p->cost_bps, 0, 10000, 0),
        KR_F_INT("hold", &p->hold, 1, 1000000, 0), KR_F_CHOICE("ashare", &ashare, k_ashare),
    };
    if (!cJSON_IsObject(v))
        return kr_api_error_set(err, 400, "strategy", "must be an object, got %s",
                                kr_json_type_name(v));
    kr_api_error e = { 0 };
    if (kr_fields_read(v, f, (int)(sizeof f / sizeof f[0]), &e) != KR_OK)
        return kr_api_error_set(err, e.status ? e.status : 400, "strategy", "%s", e.message);
    p->strategy_rank = rank ? KR_BACKTEST_RANK_PROB_UP : KR_BACKTEST_RANK_RETURN;
    if (f[5].present) p->ashare_rules = ashare == 0 ? -1 : ashare == 1 ? 0 : 1;
    return KR_OK;
}

static kr_status read_time(const cJSON *v, const char *field, int end, int64_t *out,
                           kr_api_error *err) {
    if (!cJSON_IsString(v))
        return kr_api_error_set(err, 400, field, "must be a timestamp string, got %s",
                                kr_json_type_name(v));
    int64_t a, b;
    kr_error e = { 0 };
    if (kr_store_parse_range(v->valuestring, v->valuestring, field, field, &a, &b, &e) != KR_OK)
        return kr_api_error_set(err, 400, NULL, "%s", e.message);
    *out = end ? b : a;
    return KR_OK;
}

static kr_status read_origins(const cJSON *v, kr_api_backtest_request *r, kr_api_error *err) {
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 ||
        cJSON_GetArraySize(v) > KR_API_BACKTEST_MAX_ORIGIN_DATES)
        return kr_api_error_set(err, 400, "origins", "must be an array of 1..%d dates, got %s",
                                KR_API_BACKTEST_MAX_ORIGIN_DATES,
                                cJSON_IsArray(v) ? "an array of another size"
                                                 : kr_json_type_name(v));
    const int n = cJSON_GetArraySize(v);
    r->origin_ts = malloc((size_t)n * sizeof *r->origin_ts);
    if (!r->origin_ts) return kr_api_error_set(err, 503, NULL, "out of memory");
    int k = 0;
    for (const cJSON *it = v->child; it; it = it->next, k++) {
        char f[32];
        snprintf(f, sizeof f, "origins[%d]", k);
        /* A date alone is the end of its day: the last bar of that date. */
        kr_status st = read_time(it, f, 1, &r->origin_ts[k], err);
        if (st != KR_OK) return st;
        if (k > 0 && r->origin_ts[k] <= r->origin_ts[k - 1])
            return kr_api_error_set(err, 400, f, "must come after origins[%d]", k - 1);
    }
    r->params.origin_ts = r->origin_ts;
    r->params.n_origin_ts = n;
    return KR_OK;
}

static kr_status read_fields(const cJSON *root, const kr_api_limits *lim,
                             kr_api_backtest_request *r, bt_values *v, kr_api_error *err) {
    kr_backtest_params *p = &r->params;
    int format = 0, window = 0, ohlc = p->ohlc == KR_OHLC_CONSISTENT;
    kr_field f[] = {
        KR_F_VALUE("symbols", &v->symbols, 0),
        KR_F_BOOL("all", &r->all),
        KR_F_VALUE("symbol", &v->symbol, 0),
        KR_F_VALUE("candles", &v->candles, 0),
        KR_F_VALUE("columns", &v->columns, 0),
        KR_F_VALUE("interval", &v->interval, 0),
        KR_F_VALUE("market", &v->market, 0),
        KR_F_INT("horizon", &p->horizon, 1, lim->max_horizon, 0),
        KR_F_INT("every", &p->every, 1, 1000000, 0),
        KR_F_VALUE("from", &v->from, 0),
        KR_F_VALUE("to", &v->to, 0),
        KR_F_VALUE("origins", &v->origins, 0),
        KR_F_INT("min_history", &p->min_history, 2, 10000000, 0),
        KR_F_INT("max_origins", &p->max_origins, 0, 10000000, 0),
        KR_F_INT("paths", &p->paths, 2, lim->max_paths, 0),
        KR_F_INT("lookback", &p->lookback, 0, lim->max_lookback, 0),
        KR_F_INT("max_context", &p->max_context, 3, lim->max_context, 0),
        KR_F_SEED("seed", &p->seed),
        KR_F_FLOAT("temperature", &p->temperature, 0.0, 1e6, KR_FIELD_MIN_EXCL),
        KR_F_FLOAT("top_p", &p->top_p, 0.0, 1.0, KR_FIELD_MIN_EXCL),
        KR_F_INT("top_k", &p->top_k, 0, 1 << 20, 0),
        KR_F_CHOICE("window", &window, k_windows),
        KR_F_CHOICE("ohlc", &ohlc, k_ohlc),
        KR_F_INT("season", &p->season, -1, 100000, 0),
        KR_F_INT("bootstrap", &p->bootstrap, 0, KR_API_BACKTEST_MAX_BOOTSTRAP, 0),
        KR_F_INT("block_length", &p->block_length, 1, 1000000, 0),
        KR_F_NUM("ci_level", &p->ci_level, 0.5, 0.999, 0),
        KR_F_NUM("alpha", &p->alpha, 0.0, 0.5, KR_FIELD_MIN_EXCL),
        KR_F_SEED("score_seed", &p->score_seed),
        KR_F_VALUE("strategy", &v->strategy, 0),
        KR_F_CHOICE("format", &format, k_formats),
    };
    f[7].max_key = "max_horizon";
    f[14].max_key = lim->max_paths_key ? lim->max_paths_key : "max_paths";
    f[15].max_key = "max_lookback";
    f[16].max_key = lim->max_context_key;
    kr_status st = kr_fields_read(root, f, (int)(sizeof f / sizeof f[0]), err);
    if (st != KR_OK) return st;
    r->format = k_format_of[format];
    p->window = window ? KR_WINDOW_ROLLING : KR_WINDOW_EXACT;
    p->ohlc = ohlc ? KR_OHLC_CONSISTENT : KR_OHLC_RAW;
    if (!f[14].present && p->paths > lim->max_paths) p->paths = lim->max_paths;
    if (!f[15].present && p->max_context - p->horizon > lim->max_lookback)
        p->lookback = lim->max_lookback;
    if (v->strategy && (st = read_strategy(v->strategy, p, err)) != KR_OK) return st;
    if (v->from && (st = read_time(v->from, "from", 0, &p->from_ts, err)) != KR_OK) return st;
    if (v->to && (st = read_time(v->to, "to", 1, &p->to_ts, err)) != KR_OK) return st;
    if (v->origins) {
        if (f[8].present)
            return kr_api_error_set(err, 400, "origins", "and every: give one of them");
        if ((st = read_origins(v->origins, r, err)) != KR_OK) return st;
    }
    if (v->market) {
        const kr_calendar *cal = NULL;
        kr_error e = { 0 };
        if (!cJSON_IsString(v->market))
            return kr_api_error_set(err, 400, "market", "must be a market name, got %s",
                                    kr_json_type_name(v->market));
        if (kr_calendar_find(v->market->valuestring, &cal, &e) != KR_OK)
            return kr_api_error_set(err, 400, "market", "%s", e.message);
        snprintf(r->market, sizeof r->market, "%s", cal->name);
    }
    /* The library's own checks, named by the field when the message starts with it. */
    kr_error e = { 0 };
    if (kr_backtest_check_params(p, &e) != KR_OK) {
        char field[32] = "";
        sscanf(e.message, "%31[a-z_]", field);
        int known = 0;
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) known |= !strcmp(f[i].name, field);
        if (!strcmp(field, "strategy_k")) snprintf(field, sizeof field, "strategy"), known = 1;
        return kr_api_error_set(
            err, 400, known ? field : NULL, "%s",
            known ? e.message + strlen(field) + (e.message[strlen(field)] == ' ') : e.message);
    }
    return KR_OK;
}

kr_status kr_api_backtest_parse(const char *json, size_t len, const kr_api_limits *lim,
                                kr_api_backtest_request *out, kr_api_error *err) {
    kr_api_limits dl = kr_api_default_limits();
    if (!lim) lim = &dl;
    memset(err, 0, sizeof *err);
    memset(out, 0, sizeof *out);
    cJSON *root;
    kr_json_limits jl = kr_api_json_limits(lim);
    kr_status st = kr_json_body_parse(json, len, &jl, &root, err);
    if (st != KR_OK) return st;
    bt_values v = { 0 };
    out->params = kr_backtest_default_params();
    out->format = KR_BACKTEST_JSON;
    if ((st = read_fields(root, lim, out, &v, err)) != KR_OK) goto fail;
    if (v.interval && (st = kr_api_json_store_name(v.interval, "interval", 1, out->interval,
                                                   sizeof out->interval, err)) != KR_OK)
        goto fail;
    const int sources = (v.symbols != NULL) + out->all + (v.candles != NULL);
    if (sources != 1) {
        st = kr_api_error_set(err, 400, sources ? "symbols" : "symbols",
                              sources ? "give one of symbols, all or candles"
                                      : "required (stored symbols), or all: true, or candles");
        goto fail;
    }
    if (v.symbol && !v.candles) {
        st = kr_api_error_set(err, 400, "symbol", "names the candles given; give candles");
        goto fail;
    }
    if (v.columns && !v.candles) {
        st = kr_api_error_set(err, 400, "columns", "only applies with candles");
        goto fail;
    }
    if (v.symbols) {
        if ((st = kr_api_symbol_list(v.symbols, lim->max_symbols, out->symbols, &out->n, err)) !=
            KR_OK)
            goto fail;
    } else if (v.candles) {
        if (v.symbol) {
            if ((st = kr_api_json_store_name(v.symbol, "symbol", 0, out->symbols[0],
                                             sizeof out->symbols[0], err)) != KR_OK)
                goto fail;
        } else {
            snprintf(out->symbols[0], sizeof out->symbols[0], "series");
        }
        if ((st = kr_api_candles_from_json(v.candles, v.columns, lim, &out->candles, err)) != KR_OK)
            goto fail;
        const int64_t rows = out->candles->n;
        if (kr_api_backtest_fits(&out->params, &rows, 1, "candles", err)) {
            st = KR_ERR_INVALID_ARG;
            goto fail;
        }
    }
    cJSON_Delete(root);
    return KR_OK;
fail:
    kr_api_backtest_request_free(out);
    memset(out, 0, sizeof *out);
    return kr_json_body_failed(root, err, st);
}

void kr_api_backtest_request_free(kr_api_backtest_request *r) {
    if (!r) return;
    kr_candles_free(r->candles);
    free(r->origin_ts);
    r->candles = NULL;
    r->origin_ts = NULL;
    r->params.origin_ts = NULL;
}

/* Origins the histories rows[n] can give. */
static int64_t origins_of(const kr_backtest_params *p, const int64_t *rows, int n) {
    const int every = p->every > 0 ? p->every : p->horizon;
    int64_t origins = 0;
    for (int i = 0; i < n; i++) {
        int64_t o = rows[i] - p->min_history - p->horizon + 1;
        if (o <= 0) continue;
        o = p->n_origin_ts > 0 ? p->n_origin_ts : (o + every - 1) / every;
        if (p->max_origins > 0 && o > p->max_origins) o = p->max_origins;
        origins += o;
    }
    return origins;
}

int kr_api_backtest_fits(const kr_backtest_params *p, const int64_t *rows, int n, const char *field,
                         kr_api_error *err) {
    if (kr_api_backtest_work(p, rows, n) > KR_API_BACKTEST_MAX_WORK) {
        kr_api_error_set(err, 400, field,
                         "asks for more than %lld path-steps (origins x paths x horizon); raise "
                         "every, narrow from / to or give max_origins",
                         KR_API_BACKTEST_MAX_WORK);
        return 400;
    }
    /* The scores' sums, per origin and step (kr_bt_prepare's estimate, per forecast an upper
     * bound on the origins). */
    const double bytes = (double)origins_of(p, rows, n) * (p->horizon + 1) * 1248.0;
    if (bytes > (double)KR_API_BACKTEST_MAX_SCORE_BYTES) {
        kr_api_error_set(err, 400, field,
                         "needs about %.0f MiB for the scores of its origins x horizon steps, "
                         "more than a backtest over HTTP takes (%lld MiB); raise every or give "
                         "max_origins",
                         bytes / (1 << 20), KR_API_BACKTEST_MAX_SCORE_BYTES >> 20);
        return 400;
    }
    return 0;
}

int64_t kr_api_backtest_work(const kr_backtest_params *p, const int64_t *rows, int n) {
    return origins_of(p, rows, n) * p->paths * (int64_t)p->horizon;
}
