/*
 * server/analyst_request — analyze and candle-upsert bodies (see analyst_request.h).
 */
#include "server/analyst_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "kronos/analyst.h"
#include "kronos/server.h"
#include "series/calendar.h"

#include "common/json_body.h"

/* ------------------------------------------------------------------ store names */

/* A store-name error: the store's message already starts with "symbol" / "interval", so it is
 * not prefixed a second time when the field is that word. */
static kr_status name_error(kr_api_error *err, const char *field, const char *msg) {
    size_t n = strlen(field);
    if (strncmp(msg, field, n) != 0 || (msg[n] != ' ' && msg[n] != ':'))
        return kr_api_error_set(err, 400, field, "%s", msg);
    err->status = 400;
    snprintf(err->field, sizeof err->field, "%s", field);
    snprintf(err->message, sizeof err->message, "%s", msg);
    return KR_ERR_INVALID_ARG;
}

kr_status kr_api_store_name(const char *s, const char *field, int interval, char *out, size_t cap,
                            kr_api_error *err) {
    kr_error e = { 0 };
    kr_status st = interval ? kr_store_check_interval(s, &e) : kr_store_check_symbol(s, &e);
    if (st != KR_OK) return name_error(err, field, e.message);
    snprintf(out, cap, "%s", s);
    return KR_OK;
}

kr_status kr_api_json_store_name(const cJSON *v, const char *field, int interval, char *out,
                                 size_t cap, kr_api_error *err) {
    if (!cJSON_IsString(v))
        return kr_api_error_set(err, 400, field, "must be a string, got %s", kr_json_type_name(v));
    return kr_api_store_name(v->valuestring, field, interval, out, cap, err);
}

kr_status kr_api_candles_query(const char *interval, const char *limit, char *interval_out,
                               size_t cap, int *limit_out, kr_api_error *err) {
    interval_out[0] = '\0';
    *limit_out = KR_API_CANDLES_LIMIT;
    if (interval && kr_api_store_name(interval, "interval", 1, interval_out, cap, err) != KR_OK)
        return KR_ERR_INVALID_ARG;
    if (!limit) return KR_OK;
    /* Digits only: strtol would also take " 5", "+5" and "0x5". */
    long v = 0;
    int ok = limit[0] != '\0';
    for (const char *p = limit; ok && *p; p++) {
        ok = *p >= '0' && *p <= '9' && v <= KR_API_CANDLES_MAX;
        v = v * 10 + (*p - '0');
    }
    if (!ok || v < 1 || v > KR_API_CANDLES_MAX) {
        char ex[32];
        return kr_api_error_set(err, 400, "limit", "must be an integer in 1..%d, got '%s'",
                                KR_API_CANDLES_MAX, kr_json_sanitize(limit, ex, sizeof ex));
    }
    *limit_out = (int)v;
    return KR_OK;
}

/* ------------------------------------------------------------------ POST /v1/analyze */

/* An interval name for candles that came without one: the most common gap ("1d", "5m"). */
static void infer_interval(const kr_candles *c, char *out, size_t cap) {
    int64_t best = 0;
    int best_count = 0;
    /* The gap seen most often among the last few hundred bars is the bar interval. */
    int64_t start = c->n > 512 ? c->n - 512 : 1;
    for (int64_t i = start; i < c->n; i++) {
        int64_t g = c->timestamps[i] - c->timestamps[i - 1];
        int count = 0;
        for (int64_t j = start; j < c->n; j++)
            count += c->timestamps[j] - c->timestamps[j - 1] == g;
        if (count > best_count || (count == best_count && g < best)) best = g, best_count = count;
    }
    /* Calendar months are no fixed gap (28 to 31 days; a quarter 89 to 92): most gaps in one
     * of those spans name the bars by months, as the store does ("1mo", not "31d"; "3mo",
     * not "13w"). */
    int months[2] = { 0, 0 }, gaps = 0;
    for (int64_t i = start; i < c->n; i++, gaps++) {
        const int64_t d = (c->timestamps[i] - c->timestamps[i - 1]) / 86400;
        months[0] += d >= 28 && d <= 31;
        months[1] += d >= 89 && d <= 92;
    }
    long long g = (long long)best;
    if (gaps > 0 && 2 * months[0] > gaps)
        snprintf(out, cap, "1mo");
    else if (gaps > 0 && 2 * months[1] > gaps)
        snprintf(out, cap, "3mo");
    else if (g <= 0)
        snprintf(out, cap, "1d");
    else if (g % 604800 == 0)
        snprintf(out, cap, "%lldw", g / 604800);
    else if (g % 86400 == 0)
        snprintf(out, cap, "%lldd", g / 86400);
    else if (g % 3600 == 0)
        snprintf(out, cap, "%lldh", g / 3600);
    else if (g % 60 == 0)
        snprintf(out, cap, "%lldm", g / 60);
    else
        snprintf(out, cap, "%llds", g);
}

kr_status kr_api_symbol_list(const cJSON *v, int max_symbols, char (*out)[KR_STORE_NAME_MAX + 1],
                             int *n, kr_api_error *err) {
    *n = 0;
    if (max_symbols > KR_API_MAX_SYMBOLS || max_symbols < 1) max_symbols = KR_API_MAX_SYMBOLS;
    if (!cJSON_IsArray(v))
        return kr_api_error_set(err, 400, "symbols",
                                "must be an array of 1..%d symbol names (max_symbols), got %s",
                                max_symbols, kr_json_type_name(v));
    int count = cJSON_GetArraySize(v);
    if (count < 1 || count > max_symbols)
        return kr_api_error_set(err, 400, "symbols",
                                "must name 1..%d symbols (max_symbols), got %d", max_symbols,
                                count);
    char f[32];
    for (const cJSON *it = v->child; it; it = it->next) {
        snprintf(f, sizeof f, "symbols[%d]", *n);
        kr_status st = kr_api_json_store_name(it, f, 0, out[*n], sizeof out[0], err);
        if (st != KR_OK) return st;
        for (int j = 0; j < *n; j++)
            if (!strcasecmp(out[j], out[*n])) /* symbols ignore case */
                return kr_api_error_set(err, 400, f, "'%s' is already symbols[%d]", out[*n], j);
        (*n)++;
    }
    return KR_OK;
}

static kr_status parse_symbols(const cJSON *v, int max_symbols, kr_api_analyze_request *r,
                               kr_api_error *err) {
    return kr_api_symbol_list(v, max_symbols, r->symbols, &r->n, err);
}

/* Report formats; "markdown" is the long name of "md". */
static const char *const k_formats[] = { "json", "md", "markdown", "html", NULL };
static const kr_report_format k_format_of[] = { KR_FORMAT_JSON, KR_FORMAT_MD, KR_FORMAT_MD,
                                                KR_FORMAT_HTML };

/* The values a route reads itself (names, candles) after the scalars. */
typedef struct analyze_values {
    const cJSON *symbol, *symbols, *interval, *candles, *columns, *market, *stock_code, *model;
} analyze_values;

static const char *const k_ohlc_modes[] = { "raw", "consistent", NULL };

static kr_status read_fields(const cJSON *root, int batch, const kr_api_limits *lim,
                             kr_api_analyze_request *r, analyze_values *v, kr_api_error *err) {
    kr_analyze_params *p = &r->params;
    int format = 0, ohlc = p->ohlc == KR_OHLC_CONSISTENT;
    int max_paths = 0;
    /* One table; each route takes its own subset (one symbol or candles, or a list). */
    kr_field all[] = {
        KR_F_VALUE("symbol", &v->symbol, 0),
        KR_F_VALUE("symbols", &v->symbols, KR_FIELD_REQUIRED),
        KR_F_VALUE("interval", &v->interval, 0),
        KR_F_VALUE("candles", &v->candles, 0),
        KR_F_VALUE("columns", &v->columns, 0),
        KR_F_INT("horizon", &p->horizon, 1, lim->max_horizon, 0),
        KR_F_INT("paths", &p->paths, 1, lim->max_analyze_paths, 0),
        KR_F_INT("lookback", &p->lookback, 2, lim->max_lookback, 0),
        KR_F_INT("max_context", &p->max_context, 2, lim->max_context, 0),
        KR_F_SEED("seed", &p->seed),
        KR_F_FLOAT("temperature", &p->temperature, 0.0, 1e6, KR_FIELD_MIN_EXCL),
        KR_F_FLOAT("top_p", &p->top_p, 0.0, 1.0, KR_FIELD_MIN_EXCL),
        KR_F_INT("top_k", &p->top_k, 0, 1 << 20, 0),
        KR_F_INT("calibrate", &p->calibrate, 0, lim->max_calibrate, 0),
        KR_F_CHOICE("format", &format, k_formats),
        KR_F_BOOL("stream", &r->stream),
        /* Added after the others so the indices above (max_key) stay put. */
        KR_F_INT("max_paths", &max_paths, 1, lim->max_analyze_paths, 0),
        KR_F_NUM("target_prob_se", &p->target_prob_se, 0.0, 0.5, 0),
        KR_F_NUM("target_var_rel_se", &p->target_var_rel_se, 0.0, 10.0, 0),
        KR_F_CHOICE("ohlc", &ohlc, k_ohlc_modes),
        KR_F_VALUE("market", &v->market, 0),
        KR_F_BOOL("all", &r->all),
        KR_F_VALUE("stock_code", &v->stock_code, 0),
        KR_F_BOOL("narrative", &r->narrative),
        KR_F_VALUE("model", &v->model, 0),
    };
    /* The caps bound what one analysis costs: (1 + calibrate) forecasts of paths x horizon
     * steps per symbol. Each names its config key when exceeded. */
    all[5].max_key = "max_horizon";
    all[6].max_key = "max_analyze_paths";
    all[7].max_key = "max_lookback";
    all[8].max_key = lim->max_context_key;
    all[13].max_key = "max_calibrate";
    all[16].max_key = "max_analyze_paths";
    kr_field f[sizeof all / sizeof all[0]];
    int n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *nm = all[i].name;
        int single_only = !strcmp(nm, "symbol") || !strcmp(nm, "candles") ||
                          !strcmp(nm, "columns") || !strcmp(nm, "stock_code");
        int batch_only = !strcmp(nm, "symbols") || !strcmp(nm, "all");
        if (batch ? !single_only : !batch_only) f[n++] = all[i];
    }
    /* "symbols" is required unless "all" asks for every stored series. */
    const cJSON *all_v =
        batch && cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "all") : NULL;
    if (cJSON_IsTrue(all_v))
        for (int i = 0; i < n; i++)
            if (!strcmp(f[i].name, "symbols")) f[i].flags &= ~(unsigned)KR_FIELD_REQUIRED;
    kr_status st = kr_fields_read(root, f, n, err);
    if (st != KR_OK) return st;
    r->format = k_format_of[format];
    p->ohlc = ohlc ? KR_OHLC_CONSISTENT : KR_OHLC_RAW;
    /* Paths: "paths" alone asks for exactly that many (as kronos analyze --paths); else the
     * first round, with more rounds up to "max_paths" (default: the library's cap, held to the
     * server's max_analyze_paths) until the error targets are met. */
    int paths_given = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(f[i].name, "paths")) paths_given = f[i].present;
    if (max_paths)
        p->max_paths = max_paths;
    else if (paths_given)
        p->max_paths = p->paths;
    else if (p->max_paths > lim->max_analyze_paths)
        p->max_paths = lim->max_analyze_paths;
    /* Only the adaptive default's first round (128) gives way to a lower max_paths. A "paths"
     * the client gave is never lowered: with a max_paths below it there are no further rounds
     * and exactly "paths" run, as `kronos analyze --paths 4 --max-paths 2` runs 4 (the
     * library's cap is the larger of the two). */
    if (!paths_given && p->paths > p->max_paths) p->paths = p->max_paths;
    if (v->model &&
        (st = kr_api_read_model_name(v->model, r->model, sizeof r->model, err)) != KR_OK)
        return st;
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
    if (p->horizon > lim->max_pred_len)
        return kr_api_error_set(err, 400, "horizon", "%d exceeds max_pred_len (%d)", p->horizon,
                                lim->max_pred_len);
    int horizon_given = 0, lookback_given = 0;
    for (int i = 0; i < n; i++) {
        if (!strcmp(f[i].name, "horizon")) horizon_given = f[i].present;
        if (!strcmp(f[i].name, "lookback")) lookback_given = f[i].present;
        /* A default above a cap the server set lower is refused like a value given. */
        if (f[i].type == KR_FIELD_INT && !f[i].present && f[i].max_key &&
            *(int *)f[i].out > (int)f[i].max)
            return kr_api_error_set(err, 400, f[i].name, "the default %d exceeds %s (%d); give %s",
                                    *(int *)f[i].out, f[i].max_key, (int)f[i].max, f[i].name);
    }
    /* The automatic lookback (max_context - horizon rows) is held to the cap too: the
     * analyst takes a given lookback as an upper bound on the rows it uses. */
    if (!lookback_given && p->max_context - p->horizon > lim->max_lookback)
        p->lookback = lim->max_lookback;
    /* The window holds the history and the horizon, and a history is at least 2 rows. */
    if (p->horizon > p->max_context - 2)
        return kr_api_error_set(err, 400, "horizon",
                                "%s%d exceeds max_context - 2 (%d): the model's window must also "
                                "hold at least 2 history rows",
                                horizon_given ? "" : "the default ", p->horizon,
                                p->max_context - 2);
    if (p->lookback > p->max_context)
        return kr_api_error_set(err, 400, "lookback", "%d exceeds max_context (%d)", p->lookback,
                                p->max_context);
    /* The rest of the library's own checks, named by the field they concern. */
    kr_error e = { 0 };
    if (kr_analyze_check_params(p, &e) != KR_OK) {
        /* The library names the field it refused; its message starts with that word. */
        const int on_lookback = !strcmp(e.field, "lookback");
        return kr_api_error_set(err, 400, on_lookback ? "lookback" : NULL, "%s",
                                e.message + (on_lookback ? strlen("lookback ") : 0));
    }
    return KR_OK;
}

kr_status kr_api_analyze_parse(const char *json, size_t len, int batch, const kr_api_limits *lim,
                               kr_api_analyze_request *out, kr_api_error *err) {
    kr_api_limits dl = kr_api_default_limits();
    if (!lim) lim = &dl;
    memset(err, 0, sizeof *err);
    memset(out, 0, sizeof *out);
    cJSON *root;
    kr_json_limits jl = kr_api_json_limits(lim);
    kr_status st = kr_json_body_parse(json, len, &jl, &root, err);
    if (st != KR_OK) return st;
    analyze_values v = { 0 };
    out->batch = batch;
    out->params = kr_analyze_default_params();
    out->format = KR_FORMAT_JSON;
    if ((st = read_fields(root, batch, lim, out, &v, err)) != KR_OK) goto fail;
    if (v.interval && (st = kr_api_json_store_name(v.interval, "interval", 1, out->interval,
                                                   sizeof out->interval, err)) != KR_OK)
        goto fail;
    if (batch && out->all) {
        if (v.symbols) {
            st = kr_api_error_set(err, 400, "all", "analyses every stored series; give no symbols");
            goto fail;
        }
    } else if (batch) {
        if ((st = parse_symbols(v.symbols, lim->max_symbols, out, err)) != KR_OK) goto fail;
    } else {
        if (v.stock_code && v.symbol) {
            st = kr_api_error_set(err, 400, "stock_code",
                                  "is another name of symbol: give one of them");
            goto fail;
        }
        const char *sym_field = v.stock_code ? "stock_code" : "symbol";
        if (v.stock_code) v.symbol = v.stock_code;
        out->stock_code = v.stock_code != NULL;
        if (!v.symbol && !v.candles) {
            st =
                kr_api_error_set(err, 400, "symbol", "required (a stored symbol), or give candles");
            goto fail;
        }
        if (v.columns && !v.candles) {
            st = kr_api_error_set(err, 400, "columns", "only applies with candles");
            goto fail;
        }
        out->n = 1;
        if (v.symbol) {
            if ((st = kr_api_json_store_name(v.symbol, sym_field, 0, out->symbols[0],
                                             sizeof out->symbols[0], err)) != KR_OK)
                goto fail;
        } else {
            snprintf(out->symbols[0], sizeof out->symbols[0], "series");
        }
        if (v.candles) {
            if ((st = kr_api_candles_from_json(v.candles, v.columns, lim, &out->candles, err)) !=
                KR_OK)
                goto fail;
            int64_t need = kr_analyze_min_rows(&out->params);
            if (out->candles->n < need) {
                st = kr_api_error_set(
                    err, 400, "candles", "%lld rows given, at least %lld needed for horizon %d%s",
                    (long long)out->candles->n, (long long)need, out->params.horizon,
                    out->params.calibrate ? " and calibrate" : "");
                goto fail;
            }
            if (!out->interval[0])
                infer_interval(out->candles, out->interval, sizeof out->interval);
        }
    }
    cJSON_Delete(root);
    return KR_OK;
fail:
    kr_api_analyze_request_free(out);
    memset(out, 0, sizeof *out);
    return kr_json_body_failed(root, err, st);
}

void kr_api_analyze_request_free(kr_api_analyze_request *r) {
    if (!r) return;
    kr_candles_free(r->candles);
    r->candles = NULL;
}
