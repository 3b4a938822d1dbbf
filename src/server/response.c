/*
 * server/response — JSON response builders (see response.h).
 */
#include "server/response.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "base/strbuf.h"
#include "kronos/forecast_json.h"

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
    /* A checkpoint that declares itself a demo/test model says so wherever it is named. */
    cJSON_AddBoolToObject(o, "demo", m->info.demo);
    cJSON_AddStringToObject(o, "source", m->info.source);
}

static kr_status path_set_quantile(void *user, double q, double *out, kr_error *err) {
    return kr_path_set_quantile(user, q, out, err);
}

kr_status kr_api_forecast_json(const kr_api_request *req, const kr_forecast *fc,
                               const kr_api_usage *usage, const kr_api_model_desc *model,
                               char **out, size_t *len, kr_error *err) {
    *out = NULL;
    if (len) *len = 0;
    /* The envelope (id, object, model) goes in front of the library's forecast JSON, which
     * `kronos forecast --format json` writes too. */
    cJSON *m = cJSON_CreateObject();
    if (!m) return kr_error_set(err, KR_ERR_NOMEM, "response: out of memory");
    add_model(m, model);
    char *mtext = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    if (!mtext) return kr_error_set(err, KR_ERR_NOMEM, "response: out of memory");
    kr_sb head = { 0 };
    kr_sb_appendf(&head, "\"id\":\"fc-%llu\",\"object\":\"forecast\",\"model\":%s",
                  (unsigned long long)usage->id, mtext);
    kr_sb_appendf(&head, ",\"ohlc\":\"%s\"", kr_ohlc_mode_name(req->ohlc));
    if (req->market[0]) kr_sb_appendf(&head, ",\"market\":\"%s\"", req->market);
    /* Which precision served it (the precision ladder may move new requests down). */
    kr_sb_appendf(&head, ",\"precision\":\"%s\"",
                  model->precision       ? model->precision
                  : model->info.quant[0] ? model->info.quant
                  : model->quant         ? model->quant
                                         : "f32");
    /* How the window was normalised: anchored answers say over which rows (norm_anchor.h). */
    kr_sb_appendf(&head, ",\"norm\":{\"mode\":\"%s\",\"stat_rows\":%d,\"window_rows\":%d}",
                  req->params.norm == KR_NORM_ANCHORED ? "anchored" : "exact",
                  kr_forecast_norm_rows(fc), kr_forecast_lookback(fc));
    free(mtext);
    char *head_text = NULL;
    kr_status st = kr_sb_finish(&head, &head_text, err);
    if (st != KR_OK) return st;
    kr_forecast_json_params jp = kr_forecast_json_default_params();
    jp.params = &req->params;
    jp.history_rows = req->candles ? req->candles->n : 0;
    jp.date_only = req->candles ? req->candles->date_only : 0;
    jp.quantiles = req->quantiles;
    jp.n_quantiles = req->n_quantiles;
    jp.include_paths = req->return_paths;
    jp.head = head_text;
    jp.queue_seconds = usage->queue_seconds;
    jp.ttft_seconds = usage->ttft_seconds;
    jp.calendar = &req->coverage;
    jp.volume_absent = req->candles && !req->candles->has_volume;
    const char *warnings[1] = { req->coverage.message };
    jp.warnings = warnings;
    jp.n_warnings = req->coverage.past_last_year ? 1 : 0;
    /* Consistent candles (or a zero-volume history's zero volumes) replace the engine's before
     * the mean and quantiles; raw answers keep the engine's numbers untouched. */
    kr_path_set *ps = NULL;
    kr_series s = kr_api_request_series(req);
    const int zero_volume = req->candles && kr_series_zero_volume(&s);
    if (req->ohlc == KR_OHLC_CONSISTENT || zero_volume) {
        const kr_forecast *one[1] = { fc };
        st = kr_path_set_create(one, 1, req->ohlc, zero_volume, &ps, err);
        if (st != KR_OK) {
            free(head_text);
            return st;
        }
        jp.mean = ps->mean;
        jp.values = ps->values;
        jp.quantile = path_set_quantile;
        jp.quantile_user = ps;
    }
    st = kr_forecast_json(fc, &jp, out, len, err);
    kr_path_set_free(ps);
    free(head_text);
    return st;
}

/* One forecast candle row as JSON: {"timestamps":"YYYY-MM-DD HH:MM:SS"} and six
 * "name":number pairs of at most 24 characters (shortest round trip), with a path's two ids. */
#define KR_FORECAST_ROW_JSON_BYTES 220
/* The envelope: model, params, usage, timing, quantile labels. */
#define KR_FORECAST_JSON_FIXED_BYTES ((size_t)8 << 10)

size_t kr_api_forecast_answer_bytes(const kr_api_request *req) {
    const size_t steps = (size_t)(req->params.pred_len > 0 ? req->params.pred_len : 0);
    const size_t series =
        1 + (size_t)req->n_quantiles + (req->return_paths ? (size_t)req->params.paths : 0);
    return KR_FORECAST_JSON_FIXED_BYTES + series * steps * KR_FORECAST_ROW_JSON_BYTES;
}

char *kr_api_error_json(int status, const char *message, const char *field) {
    /* Messages quote what the client sent, which need not be UTF-8: cJSON would pass its
     * bytes through into a body that is then not valid JSON text. */
    kr_sb msg = { 0 }, fld = { 0 };
    kr_sb_append_utf8(&msg, message ? message : kr_api_reason(status));
    if (field) kr_sb_append_utf8(&fld, field);
    cJSON *root = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddNumberToObject(e, "code", status);
    cJSON_AddStringToObject(e, "message", msg.data ? msg.data : "");
    if (fld.data && *fld.data) cJSON_AddStringToObject(e, "field", fld.data);
    char *s = msg.oom || fld.oom ? NULL : cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    kr_sb_free(&msg);
    kr_sb_free(&fld);
    return s;
}

static cJSON *model_entry(const kr_api_model_desc *m) {
    cJSON *one = cJSON_CreateObject();
    cJSON_AddStringToObject(one, "id", m->name ? m->name : "kronos");
    cJSON_AddStringToObject(one, "object", "model");
    add_model(one, m);
    cJSON_AddNumberToObject(one, "s1_bits", m->info.s1_bits);
    cJSON_AddNumberToObject(one, "s2_bits", m->info.s2_bits);
    cJSON_AddNumberToObject(one, "tokenizer_d_model", m->info.tok_d_model);
    cJSON_AddNumberToObject(one, "weight_bytes", (double)m->info.weight_bytes);
    cJSON_AddStringToObject(one, "kv_dtype", m->kv_dtype && m->kv_dtype[0] ? m->kv_dtype : "f32");
    return one;
}

static char *models_doc(cJSON *root, const char *narrative_model);

char *kr_api_models_list_json(const kr_api_models_list *l, const char *narrative_model) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    for (int i = 0; i < l->n; i++) {
        kr_api_model_desc d = l->desc[i];
        d.name = l->name[i];
        d.quant = l->quant[i];
        d.kv_dtype = l->kv[i];
        cJSON *one = model_entry(&d);
        cJSON_AddBoolToObject(one, "default", l->is_default[i]);
        cJSON_AddNumberToObject(one, "generation", l->generation[i]);
        cJSON_AddItemToArray(data, one);
    }
    return models_doc(root, narrative_model);
}

char *kr_api_models_json(const kr_api_model_desc *m, const char *narrative_model) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    cJSON_AddItemToArray(data, model_entry(m));
    return models_doc(root, narrative_model);
}

static char *models_doc(cJSON *root, const char *narrative_model) {
    /* The language model is the server's, not the Kronos model's: beside the list, and only
     * its name (llm_url may hold a key and is never told to clients). */
    if (narrative_model) {
        cJSON *n = cJSON_AddObjectToObject(root, "narrative");
        cJSON_AddStringToObject(n, "model", narrative_model);
    } else {
        cJSON_AddNullToObject(root, "narrative");
    }
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
    case KR_ERR_NOMEM:
    case KR_ERR_UNAVAILABLE: return 503;
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
