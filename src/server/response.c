/*
 * server/response — JSON response builders (see response.h).
 */
#include "server/response.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "base/timeutil.h"

static const char *const k_cols[KR_N_FEATURES] = { "open",  "high",   "low",
                                                   "close", "volume", "amount" };

/* A JSON number that reads back as exactly v. cJSON's own printer accepts 15 digits when they
 * come back within a relative DBL_EPSILON, i.e. it may be off by one ulp; forecasts must
 * compare bit for bit across runs, so print the shortest of %.15g..%.17g that is exact. */
static cJSON *exact_number(double v) {
    if (!isfinite(v)) return cJSON_CreateNull();
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    return cJSON_CreateRaw(buf);
}

static cJSON *candle_rows(const double *v, const int64_t *ts, int P, int date_only) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < P; i++) {
        cJSON *row = cJSON_CreateObject();
        if (!row) break;
        char b[32];
        kr_format_timestamp(ts[i], date_only, b, sizeof b);
        cJSON_AddStringToObject(row, "timestamps", b);
        for (int c = 0; c < KR_N_FEATURES; c++)
            cJSON_AddItemToObject(row, k_cols[c], exact_number(v[i * KR_N_FEATURES + c]));
        cJSON_AddItemToArray(arr, row);
    }
    return arr;
}

/* The shortest decimal that reads back as the same float32. */
static double short_float(float f) {
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) break;
    }
    return strtod(buf, NULL);
}

static void add_model(cJSON *o, const kr_api_model_desc *m) {
    cJSON_AddStringToObject(o, "name", m->name ? m->name : "kronos");
    /* What the loaded weights are (a quantised checkpoint keeps its format whatever the
     * config asked for). */
    cJSON_AddStringToObject(o, "quant",
                            m->info.quant[0] ? m->info.quant
                            : m->quant       ? m->quant
                                             : "f32");
    cJSON_AddNumberToObject(o, "d_model", m->info.d_model);
    cJSON_AddNumberToObject(o, "n_layers", m->info.n_layers);
    cJSON_AddNumberToObject(o, "n_heads", m->info.n_heads);
    cJSON_AddNumberToObject(o, "ff_dim", m->info.ff_dim);
    cJSON_AddNumberToObject(o, "n_params", (double)m->info.n_params);
}

kr_status kr_api_forecast_json(const kr_api_request *req, const kr_forecast *fc,
                               const kr_api_usage *usage, const kr_api_model_desc *model,
                               char **out, size_t *len, kr_error *err) {
    *out = NULL;
    if (len) *len = 0;
    const int P = kr_forecast_pred_len(fc), paths = kr_forecast_paths(fc);
    const int64_t *ts = kr_forecast_timestamps(fc);
    const int date_only = req->candles ? req->candles->date_only : 0;
    const kr_forecast_params *p = &req->params;
    double *qv = NULL;
    kr_status st = KR_OK;
    cJSON *root = cJSON_CreateObject();
    if (!root) return kr_error_set(err, KR_ERR_NOMEM, "response: out of memory");

    char id[32];
    snprintf(id, sizeof id, "fc-%llu", (unsigned long long)usage->id);
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "object", "forecast");
    add_model(cJSON_AddObjectToObject(root, "model"), model);

    cJSON *po = cJSON_AddObjectToObject(root, "params");
    cJSON_AddNumberToObject(po, "pred_len", p->pred_len);
    cJSON_AddNumberToObject(po, "paths", p->paths);
    cJSON_AddNumberToObject(
        po, "lookback",
        p->lookback > 0
            ? p->lookback
            : (double)(req->candles->n < p->max_context ? req->candles->n : p->max_context));
    cJSON_AddNumberToObject(po, "max_context", p->max_context);
    /* float32 values echoed with the digits the client sent (0.9, not 0.899999976). */
    cJSON_AddNumberToObject(po, "temperature", short_float(p->temperature));
    cJSON_AddNumberToObject(po, "top_k", p->top_k);
    cJSON_AddNumberToObject(po, "top_p", short_float(p->top_p));
    /* Seeds above 2^53 would lose digits as a JSON number. */
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)p->seed);
    if (p->seed <= (1ull << 53))
        cJSON_AddNumberToObject(po, "seed", (double)p->seed);
    else
        cJSON_AddStringToObject(po, "seed", seed);
    cJSON_AddStringToObject(po, "window", p->window == KR_WINDOW_ROLLING ? "rolling" : "exact");

    cJSON_AddItemToObject(root, "mean", candle_rows(kr_forecast_mean(fc), ts, P, date_only));

    cJSON *qs = cJSON_AddObjectToObject(root, "quantiles");
    if (req->n_quantiles > 0) {
        qv = malloc((size_t)P * KR_N_FEATURES * sizeof *qv);
        if (!qv) {
            st = kr_error_set(err, KR_ERR_NOMEM, "response: out of memory");
            goto done;
        }
    }
    for (int k = 0; k < req->n_quantiles; k++) {
        if ((st = kr_forecast_quantile(fc, req->quantiles[k], qv, err)) != KR_OK) goto done;
        char key[32];
        snprintf(key, sizeof key, "%g", req->quantiles[k]);
        cJSON_DeleteItemFromObjectCaseSensitive(qs, key); /* a repeated quantile: keep one */
        cJSON_AddItemToObject(qs, key, candle_rows(qv, ts, P, date_only));
    }

    if (req->return_paths) {
        cJSON *parr = cJSON_AddArrayToObject(root, "paths");
        for (int i = 0; i < paths; i++) {
            const double *pv = kr_forecast_path(fc, i);
            const int32_t *s1 = kr_forecast_path_s1(fc, i), *s2 = kr_forecast_path_s2(fc, i);
            if (!pv || !s1 || !s2) {
                st = kr_error_set(err, KR_ERR_INTERNAL, "response: path %d was not kept", i);
                goto done;
            }
            cJSON *one = cJSON_CreateObject();
            cJSON_AddItemToObject(one, "candles", candle_rows(pv, ts, P, date_only));
            cJSON *a = cJSON_AddArrayToObject(one, "s1"), *b = cJSON_AddArrayToObject(one, "s2");
            for (int j = 0; j < P; j++) {
                cJSON_AddItemToArray(a, cJSON_CreateNumber(s1[j]));
                cJSON_AddItemToArray(b, cJSON_CreateNumber(s2[j]));
            }
            cJSON_AddItemToArray(parr, one);
        }
    }

    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prefill_tokens", (double)usage->prefill_tokens);
    cJSON_AddNumberToObject(u, "cached_tokens", (double)usage->cached_tokens);
    cJSON_AddNumberToObject(u, "generated_tokens", (double)usage->generated_tokens);
    cJSON *t = cJSON_AddObjectToObject(root, "timing");
    cJSON_AddNumberToObject(t, "queue_seconds", usage->queue_seconds);
    cJSON_AddNumberToObject(t, "ttft_seconds", usage->ttft_seconds);
    cJSON_AddNumberToObject(t, "total_seconds", usage->total_seconds);

    *out = cJSON_PrintUnformatted(root);
    if (!*out)
        st = kr_error_set(err, KR_ERR_NOMEM, "response: out of memory");
    else if (len)
        *len = strlen(*out);
done:
    free(qv);
    cJSON_Delete(root);
    return st;
}

char *kr_api_error_json(int status, const char *message, const char *field) {
    cJSON *root = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddNumberToObject(e, "code", status);
    cJSON_AddStringToObject(e, "message", message ? message : kr_api_reason(status));
    if (field && *field) cJSON_AddStringToObject(e, "field", field);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

char *kr_api_models_json(const kr_api_model_desc *m) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    cJSON *one = cJSON_CreateObject();
    cJSON_AddStringToObject(one, "id", m->name ? m->name : "kronos");
    cJSON_AddStringToObject(one, "object", "model");
    add_model(one, m);
    cJSON_AddNumberToObject(one, "s1_bits", m->info.s1_bits);
    cJSON_AddNumberToObject(one, "s2_bits", m->info.s2_bits);
    cJSON_AddNumberToObject(one, "tokenizer_d_model", m->info.tok_d_model);
    cJSON_AddNumberToObject(one, "weight_bytes", (double)m->info.weight_bytes);
    cJSON_AddStringToObject(one, "kv_dtype", m->kv_dtype && m->kv_dtype[0] ? m->kv_dtype : "f32");
    cJSON_AddItemToArray(data, one);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

int kr_api_http_status(kr_status st) {
    switch (st) {
    case KR_OK: return 200;
    case KR_ERR_INVALID_ARG:
    case KR_ERR_FORMAT: return 400;
    case KR_ERR_BUSY: return 429;
    case KR_ERR_TIMEOUT: return 504;
    case KR_ERR_CANCELLED: return 499;
    case KR_ERR_NOMEM: return 503;
    case KR_ERR_UNSUPPORTED: return 501;
    default: return 500;
    }
}

const char *kr_api_reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Error";
    }
}
