/*
 * server/request — parsing and validating a POST /v1/forecast body (see request.h).
 *
 * Structure: the document is parsed by server/json_body and its fields are read against one
 * descriptor table (server/fields: unknown keys are errors, a typo such as "pred_length"
 * must not silently become a default); then the candles, whichever of the four layouts they
 * use, are mapped to the same per-row cells and validated by one function that mirrors
 * series/candles.c's CSV rules, then the cross-field checks (pred_len bounds the future
 * stamps).
 */
#include "server/request.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "base/timeutil.h"
#include "series/calendar.h"
#include "common/json_body.h"

/* ------------------------------------------------------------------ document */

static kr_status parse_quantiles(const cJSON *v, kr_api_request *r, kr_api_error *err) {
    if (!cJSON_IsArray(v))
        return kr_api_error_set(err, 400, "quantiles", "must be an array of numbers in [0, 1]");
    int n = cJSON_GetArraySize(v);
    if (n > KR_API_MAX_QUANTILES)
        return kr_api_error_set(err, 400, "quantiles", "at most %d quantiles, got %d",
                                KR_API_MAX_QUANTILES, n);
    char name[32];
    kr_field q = KR_F_NUM(name, NULL, 0.0, 1.0, KR_FIELD_REQUIRED);
    int i = 0;
    for (const cJSON *it = v->child; it; it = it->next, i++) {
        snprintf(name, sizeof name, "quantiles[%d]", i);
        q.out = &r->quantiles[i];
        kr_status st = kr_field_read_value(&q, it, err);
        if (st != KR_OK) return st;
    }
    r->n_quantiles = n;
    return KR_OK;
}

static kr_status parse_future(const cJSON *v, kr_api_request *r, kr_api_error *err) {
    int P = r->params.pred_len;
    if (!cJSON_IsArray(v))
        return kr_api_error_set(err, 400, "future_timestamps", "must be an array of %d timestamps",
                                P);
    int n = cJSON_GetArraySize(v);
    if (n != P)
        return kr_api_error_set(err, 400, "future_timestamps", "has %d timestamps, pred_len is %d",
                                n, P);
    r->future_timestamps = malloc((size_t)P * sizeof(int64_t));
    if (!r->future_timestamps)
        return kr_api_error_set(err, 400, "future_timestamps", "out of memory");
    const kr_candles *c = r->candles;
    int64_t prev = c->timestamps[c->n - 1];
    int i = 0;
    char f[48], a[32], b[32];
    for (const cJSON *it = v->child; it; it = it->next, i++) {
        snprintf(f, sizeof f, "future_timestamps[%d]", i);
        int has_time = 0;
        kr_status st = kr_api_timestamp(it, f, &r->future_timestamps[i], &has_time, err);
        if (st != KR_OK) return st;
        if (r->future_timestamps[i] <= prev)
            return kr_api_error_set(err, 400, f, "%s is not after %s (%s)",
                                    kr_format_timestamp(r->future_timestamps[i], 0, a, sizeof a),
                                    i == 0 ? "the last candle" : "the previous one",
                                    kr_format_timestamp(prev, 0, b, sizeof b));
        prev = r->future_timestamps[i];
    }
    return KR_OK;
}

static const char *const k_windows[] = { "exact", "rolling", NULL };
static const char *const k_norms[] = { "exact", "anchored", NULL };

/* "market": the named calendar gives the forecast's timestamps (instead of the engine's
 * inference from the history). */
static kr_status market_future(const cJSON *v, int have_future, kr_api_request *r,
                               kr_api_error *err) {
    if (!cJSON_IsString(v))
        return kr_api_error_set(err, 400, "market", "must be a market name, got %s",
                                kr_json_type_name(v));
    if (have_future)
        return kr_api_error_set(err, 400, "market", "give market or future_timestamps, not both");
    const kr_calendar *cal = NULL;
    kr_error e = { 0 };
    if (kr_calendar_find(v->valuestring, &cal, &e) != KR_OK)
        return kr_api_error_set(err, 400, "market", "%s", e.message);
    const int P = r->params.pred_len;
    r->future_timestamps = malloc((size_t)P * sizeof(int64_t));
    if (!r->future_timestamps) return kr_api_error_set(err, 503, "market", "out of memory");
    if (kr_calendar_future_in(cal, r->candles->timestamps, r->candles->n, P, r->future_timestamps,
                              NULL, &e) != KR_OK)
        return kr_api_error_set(err, 400, "market", "%s", e.message);
    snprintf(r->market, sizeof r->market, "%s", cal->name);
    return KR_OK;
}

/* Whether the forecast's stamps stay within the years whose holidays their calendar lists
 * (the engine infers the same stamps from the same history when the client gave neither
 * future_timestamps nor a market). Stamps a client gave follow no calendar of ours. */
static kr_status stamp_coverage(kr_api_request *r, int client_stamps, kr_api_error *err) {
    if (client_stamps) return KR_OK;
    const int P = r->params.pred_len;
    int64_t *stamps = r->future_timestamps;
    kr_error e = { 0 };
    if (!stamps) {
        stamps = malloc((size_t)P * sizeof *stamps);
        if (!stamps) return kr_api_error_set(err, 503, "candles", "out of memory");
        /* A history no calendar can continue fails here as the engine would fail it. */
        if (kr_calendar_future(r->candles->timestamps, r->candles->n, P, stamps, NULL, &e) !=
            KR_OK) {
            free(stamps);
            return kr_api_error_set(err, 400, "candles", "%s", e.message);
        }
    }
    kr_status st =
        kr_calendar_coverage_of(r->market[0] ? r->market : NULL, NULL, r->candles->timestamps,
                                r->candles->n, stamps, P, &r->coverage, &e);
    if (stamps != r->future_timestamps) free(stamps);
    if (st != KR_OK) memset(&r->coverage, 0, sizeof r->coverage); /* not worth failing for */
    return KR_OK;
}

/* The fields of a forecast request, read into out (whose params hold the defaults). */
static const char *const k_ohlc[] = { "raw", "consistent", NULL };

static kr_status read_fields(const cJSON *root, const kr_api_limits *lim, kr_api_request *out,
                             const cJSON **candles, const cJSON **columns, const cJSON **future,
                             const cJSON **market, kr_api_error *err) {
    kr_forecast_params *p = &out->params;
    const cJSON *quantiles = NULL;
    int window = p->window == KR_WINDOW_ROLLING, ohlc = 0;
    int norm = lim->default_norm == KR_NORM_ANCHORED;
    p->norm_refresh = lim->default_norm_refresh;
    const cJSON *model = NULL;
    kr_field f[] = {
        KR_F_VALUE("candles", candles, KR_FIELD_REQUIRED),
        KR_F_VALUE("columns", columns, 0),
        KR_F_INT("pred_len", &p->pred_len, 1, lim->max_pred_len, KR_FIELD_REQUIRED),
        KR_F_INT("paths", &p->paths, 1, lim->max_paths, 0),
        KR_F_FLOAT("temperature", &p->temperature, 0.0, 1e6, KR_FIELD_MIN_EXCL),
        KR_F_INT("top_k", &p->top_k, 0, 1 << 20, 0),
        KR_F_FLOAT("top_p", &p->top_p, 0.0, 1.0, KR_FIELD_MIN_EXCL),
        KR_F_SEED("seed", &p->seed),
        KR_F_INT("lookback", &p->lookback, 2, 1 << 20, 0),
        KR_F_INT("max_context", &p->max_context, 1, lim->max_context, 0),
        KR_F_CHOICE("window", &window, k_windows),
        KR_F_VALUE("future_timestamps", future, 0),
        KR_F_VALUE("quantiles", &quantiles, 0),
        KR_F_BOOL("return_paths", &out->return_paths),
        KR_F_BOOL("stream", &out->stream),
        KR_F_NUM("timeout_s", &out->timeout_s, 0.0, 86400.0, KR_FIELD_MIN_EXCL),
        KR_F_CHOICE("ohlc", &ohlc, k_ohlc),
        KR_F_VALUE("market", market, 0),
        KR_F_CHOICE("norm", &norm, k_norms),
        KR_F_INT("norm_refresh", &p->norm_refresh, 1, 1 << 20, 0),
        KR_F_VALUE("model", &model, 0),
    };
    f[2].max_key = lim->max_pred_len_key;
    f[3].max_key = lim->max_paths_key;
    f[9].max_key = lim->max_context_key;
    kr_status st = kr_fields_read(root, f, (int)(sizeof f / sizeof f[0]), err);
    if (st != KR_OK) return st;
    p->window = window ? KR_WINDOW_ROLLING : KR_WINDOW_EXACT;
    p->norm = norm ? KR_NORM_ANCHORED : KR_NORM_EXACT;
    out->ohlc = ohlc ? KR_OHLC_CONSISTENT : KR_OHLC_RAW;
    if (model && (st = kr_api_read_model_name(model, out->model, sizeof out->model, err)) != KR_OK)
        return st;
    /* The engine generates inside one window: the horizon cannot exceed it. */
    if (p->pred_len > p->max_context)
        return kr_api_error_set(err, 400, "pred_len", "must be at most max_context (%d), got %d",
                                p->max_context, p->pred_len);
    if (quantiles) return parse_quantiles(quantiles, out, err);
    return KR_OK;
}

kr_status kr_api_read_model_name(const cJSON *v, char *out, size_t cap, kr_api_error *err) {
    if (!cJSON_IsString(v) || !v->valuestring[0])
        return kr_api_error_set(err, 400, "model",
                                "must be a model name (GET /v1/models lists them)");
    size_t n = strlen(v->valuestring);
    if (n >= cap) return kr_api_error_set(err, 400, "model", "at most %zu characters", cap - 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v->valuestring[i];
        if (!(isalnum(ch) || ch == '-' || ch == '_' || ch == '.'))
            return kr_api_error_set(err, 400, "model",
                                    "letters, digits, '-', '_' and '.' only (GET /v1/models "
                                    "lists the names)");
    }
    memcpy(out, v->valuestring, n + 1);
    return KR_OK;
}

kr_status kr_api_forecast_parse(const char *json, size_t len, const kr_api_limits *limits,
                                kr_api_request *out, kr_api_error *err) {
    kr_api_limits lim = limits ? *limits : kr_api_default_limits();
    kr_api_error scratch;
    if (!err) err = &scratch;
    memset(err, 0, sizeof *err);
    if (!out) return kr_api_error_set(err, 400, NULL, "no request");
    memset(out, 0, sizeof *out);
    cJSON *root = NULL;
    kr_json_limits jl = kr_api_json_limits(&lim);
    kr_status st = kr_json_body_parse(json, len, &jl, &root, err);
    if (st != KR_OK) return st;
    out->params = kr_forecast_default_params();
    out->params.keep_paths = 1;
    out->quantiles[0] = 0.1;
    out->quantiles[1] = 0.5;
    out->quantiles[2] = 0.9;
    out->n_quantiles = 3;
    const cJSON *candles = NULL, *columns = NULL, *future = NULL, *market = NULL;
    if ((st = read_fields(root, &lim, out, &candles, &columns, &future, &market, err)) != KR_OK)
        goto fail;
    if ((st = kr_api_candles_from_json(candles, columns, &lim, &out->candles, err)) != KR_OK)
        goto fail;
    if (out->params.lookback > out->candles->n) {
        st = kr_api_error_set(err, 400, "lookback", "%d exceeds the %lld candles given",
                              out->params.lookback, (long long)out->candles->n);
        goto fail;
    }
    if (future && (st = parse_future(future, out, err)) != KR_OK) goto fail;
    if (market && (st = market_future(market, future != NULL, out, err)) != KR_OK) goto fail;
    if ((st = stamp_coverage(out, future != NULL, err)) != KR_OK) goto fail;
    cJSON_Delete(root);
    return KR_OK;
fail:
    kr_api_request_free(out);
    memset(out, 0, sizeof *out);
    return kr_json_body_failed(root, err, st);
}

void kr_api_request_free(kr_api_request *r) {
    if (!r) return;
    kr_candles_free(r->candles);
    free(r->future_timestamps);
    r->candles = NULL;
    r->future_timestamps = NULL;
}

kr_series kr_api_request_series(const kr_api_request *r) {
    kr_series s = kr_candles_series(r->candles);
    s.future_timestamps = r->future_timestamps;
    return s;
}
