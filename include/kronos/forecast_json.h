/*
 * kronos/forecast_json.h — one JSON form of a forecast, written by one function for every
 * caller: `kronos forecast --format json`, the HTTP answer of POST /v1/forecast (and its
 * streamed "result" event), and any C program. The same forecast therefore prints the same
 * bytes wherever it comes from; only the caller's own members in front (an id, the input file,
 * the model) and the timing differ.
 *
 *   {<head members>,
 *    "calendar": {"name", "years", "holidays_known"}?, "volume_absent": true?,
 *    "warnings": ["...", ...]?,
 *    "params": {"pred_len", "paths", "lookback", "max_context", "temperature", "top_k",
 *               "top_p", "seed", "window"},
 *    "mean": [row, ...],
 *    "quantiles": {"0.1": [row, ...], ...},
 *    "paths": [{"candles": [row, ...], "s1": [id, ...], "s2": [id, ...]}, ...],   (optional)
 *    "usage": {"prefill_tokens", "cached_tokens", "decode_tokens", "generated_tokens"},
 *    "timing": {"queue_seconds"?, "ttft_seconds"?, "total_seconds", "prefill_seconds",
 *               "decode_seconds", "tokenizer_seconds"}}
 *   row = {"timestamps": "YYYY-MM-DD[ HH:MM:SS]", "open", "high", "low", "close", "volume",
 *          "amount"}
 *
 * params are the parameters as given, except "lookback", which is the number of history rows
 * the model saw (the engine's rule: lookback if > 0, else min(rows, max_context)); float32
 * parameters print with the digits that read back as the same float (0.9, not 0.899999976),
 * seeds above 2^53 as decimal strings. Every candle value is the shortest decimal that reads
 * back as exactly the double the engine computed, so two forecasts compare bit for bit through
 * their JSON. usage and timing come from kr_forecast_get_stats; queue_seconds and
 * ttft_seconds only when the caller knows them (a scheduler's events). Compact: no spaces or
 * newlines.
 */
#ifndef KRONOS_FORECAST_JSON_H
#define KRONOS_FORECAST_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"
#include "kronos/series.h" /* kr_calendar_coverage */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_forecast_json_params {
    const kr_forecast_params *params; /* the parameters the forecast ran with (required) */
    int64_t history_rows; /* rows of the series (for the lookback actually used) */
    int date_only; /* stamps as YYYY-MM-DD (a daily history) */
    const double *quantiles; /* [n_quantiles] in [0, 1]; keys print as %g; repeats kept once */
    int n_quantiles;
    int include_paths; /* every path's candles and s1/s2 ids (needs kept paths) */
    /* JSON members written first, inside the object, without braces or a trailing comma
     * (e.g. "\"id\":\"fc-7\",\"object\":\"forecast\""), or NULL. Written as given: the caller
     * vouches that it is valid JSON. */
    const char *head;
    double queue_seconds, ttft_seconds; /* < 0: not known, left out of "timing" */
    /* Candles to print instead of the engine's (e.g. the consistent candles of
     * analyst/paths.h), or NULL: mean [pred_len][6]; path p at values + p * pred_len * 6;
     * quantile(user, q, out[pred_len][6]) computes a quantile across those paths. */
    const double *mean, *values;
    kr_status (*quantile)(void *user, double q, double *out, kr_error *err);
    void *quantile_user;
    /* Notes written before "params" (each left out when empty): "calendar": {"name", "years":
     * [first, last], "holidays_known": false when a stamp lies past the last year}; the
     * history had no volume column ("volume_absent": true: volume and amount were 0);
     * "warnings": sentences for the user (a calendar past its years, a short history). */
    const kr_calendar_coverage *calendar;
    int volume_absent;
    const char *const *warnings;
    int n_warnings;
} kr_forecast_json_params;

/* Defaults: no quantiles, no paths, no head, queue and ttft unknown. */
KR_API kr_forecast_json_params kr_forecast_json_default_params(void);

/* Writes the forecast as described above. On success *out is a NUL-terminated string the
 * caller frees (free()) and *len (may be NULL) its length. Fails (KR_ERR_INVALID_ARG) when a
 * quantile is outside [0, 1] or paths are asked for but were not kept, naming which. */
KR_API kr_status kr_forecast_json(const kr_forecast *fc, const kr_forecast_json_params *p,
                                  char **out, size_t *len, kr_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KRONOS_FORECAST_JSON_H */
