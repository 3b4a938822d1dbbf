/*
 * server/response — JSON bodies the server sends: a forecast result, an error, the model
 * list. Builders only (cJSON in, text out), no I/O, so the shapes are unit-tested and the
 * streaming path (SSE "result" event) sends byte-for-byte what the plain path does.
 */
#ifndef KR_SERVER_RESPONSE_H
#define KR_SERVER_RESPONSE_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"
#include "server/request.h"

/* What the server says about the model it serves. Borrowed strings. */
typedef struct kr_api_model_desc {
    const char *name; /* directory name of the predictor, e.g. "kronos-demo" */
    const char *quant; /* weight format: "f32" */
    const char *kv_dtype; /* KV-cache precision of the serving context */
    kr_model_info info;
    const char *precision; /* the precision that served an answer ("int8", "q4-gptq"); NULL:
                              the weights' format */
} kr_api_model_desc;

/* Usage and timing of one request, from the scheduler's events. The response takes the id,
 * queue_seconds and ttft_seconds from here; token counts and the other timings come from the
 * forecast itself (kr_forecast_get_stats), as in the CLI's JSON. */
typedef struct kr_api_usage {
    uint64_t id;
    int64_t prefill_tokens; /* context tokens run through the predictor */
    int64_t cached_tokens; /* context tokens served from the prefix cache */
    int64_t generated_tokens; /* pred_len x paths */
    double queue_seconds, ttft_seconds, total_seconds;
} kr_api_usage;

/* The forecast response: {"id": "fc-N", "object": "forecast", "model": {...}, then the
 * library's forecast JSON (kronos/forecast_json.h: params, mean, quantiles, paths when
 * return_paths, usage, timing)}. The part after "model" is byte for byte what
 * `kronos forecast --format json` writes for the same forecast. Caller frees *out (free()). */
kr_status kr_api_forecast_json(const kr_api_request *req, const kr_forecast *fc,
                               const kr_api_usage *usage, const kr_api_model_desc *model,
                               char **out, size_t *len, kr_error *err);

/* Bytes the answer of kr_api_forecast_json for req may take, from its parameters alone
 * (a candle row of the mean, of each quantile and of each returned path, with its s1/s2 ids,
 * at the longest numbers plus the envelope): what the server reserves of its memory budget
 * before the forecast runs. */
size_t kr_api_forecast_answer_bytes(const kr_api_request *req);

/* {"error": {"code": status, "message": ..., "field": ...}} ("field" only when non-empty).
 * Caller frees; NULL only when out of memory. */
char *kr_api_error_json(int status, const char *message, const char *field);

/* {"object": "list", "data": [{"id", "object": "model", "quant", shapes...}], "narrative": N}:
 * N is {"model": narrative_model} when the server has a language model for the analyses'
 * narratives ("narrative": true, server llm_url), else null (NULL), so a client knows before
 * asking whether a narrative can be had. Caller frees. */
char *kr_api_models_json(const kr_api_model_desc *model, const char *narrative_model);

#define KR_API_MAX_MODELS 16

/* Several served models (names and quant/kv strings copied: the list outlives the lock). */
typedef struct kr_api_models_list {
    int n;
    kr_api_model_desc desc[KR_API_MAX_MODELS];
    char name[KR_API_MAX_MODELS][64], quant[KR_API_MAX_MODELS][16], kv[KR_API_MAX_MODELS][8];
    int is_default[KR_API_MAX_MODELS];
    unsigned generation[KR_API_MAX_MODELS]; /* 1, 2, ...: which load of the name */
} kr_api_models_list;

/* As kr_api_models_json, one entry per model, each with "default" and "generation". */
char *kr_api_models_list_json(const kr_api_models_list *list, const char *narrative_model);

/* The HTTP status for an engine status: busy 429, timeout 504, cancelled 499 (client closed,
 * nginx's convention; never seen by the client), bad input 400, out of memory 503, else 500. */
int kr_api_http_status(kr_status st);

/* Reason phrase for the statuses the server sends ("Too Many Requests"). */
const char *kr_api_reason(int status);

#endif
