/*
 * engine/forecast_json — the one JSON writer of a forecast (see kronos/forecast_json.h).
 * Reads the result through the public accessors only, so what it prints is what any API
 * user sees.
 */
#include "kronos/forecast_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/strbuf.h"
#include "engine/profile.h"
#include "base/timeutil.h"

static const char *const k_cols[KR_N_FEATURES] = { "open",  "high",   "low",
                                                   "close", "volume", "amount" };

kr_forecast_json_params kr_forecast_json_default_params(void) {
    kr_forecast_json_params p;
    memset(&p, 0, sizeof p);
    p.queue_seconds = -1.0;
    p.ttft_seconds = -1.0;
    return p;
}

/* The shortest of %.15g..%.17g that reads back as exactly v (null for a non-finite value,
 * which JSON cannot carry). */
static void put_double(kr_sb *sb, double v) {
    if (!isfinite(v)) {
        kr_sb_append(sb, "null");
        return;
    }
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    kr_sb_append(sb, buf);
}

/* A float32 parameter with the digits that read back as the same float. */
static void put_float(kr_sb *sb, float f) {
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) break;
    }
    kr_sb_append(sb, buf);
}

static void put_rows(kr_sb *sb, const double *v, const int64_t *ts, int pred_len, int date_only) {
    char stamp[32];
    kr_sb_append(sb, "[");
    for (int i = 0; i < pred_len; i++) {
        kr_format_timestamp(ts[i], date_only, stamp, sizeof stamp);
        kr_sb_appendf(sb, "%s{\"timestamps\":\"%s\"", i ? "," : "", stamp);
        for (int c = 0; c < KR_N_FEATURES; c++) {
            kr_sb_appendf(sb, ",\"%s\":", k_cols[c]);
            put_double(sb, v[(size_t)i * KR_N_FEATURES + c]);
        }
        kr_sb_append(sb, "}");
    }
    kr_sb_append(sb, "]");
}

static void put_params(kr_sb *sb, const kr_forecast_params *p, int64_t rows) {
    int64_t lookback = p->lookback > 0         ? p->lookback
                       : rows < p->max_context ? rows
                                               : p->max_context;
    kr_sb_appendf(sb,
                  "\"params\":{\"pred_len\":%d,\"paths\":%d,\"lookback\":%lld,\"max_context\":%d",
                  p->pred_len, p->paths, (long long)lookback, p->max_context);
    kr_sb_append(sb, ",\"temperature\":");
    put_float(sb, p->temperature);
    kr_sb_appendf(sb, ",\"top_k\":%d,\"top_p\":", p->top_k);
    put_float(sb, p->top_p);
    /* Seeds above 2^53 would lose digits as a JSON number. */
    if (p->seed <= (1ull << 53))
        kr_sb_appendf(sb, ",\"seed\":%llu", (unsigned long long)p->seed);
    else
        kr_sb_appendf(sb, ",\"seed\":\"%llu\"", (unsigned long long)p->seed);
    kr_sb_appendf(sb, ",\"window\":\"%s\"}", p->window == KR_WINDOW_ROLLING ? "rolling" : "exact");
}

static kr_status put_quantiles(kr_sb *sb, const kr_forecast *fc, const kr_forecast_json_params *p,
                               kr_error *err) {
    const int P = kr_forecast_pred_len(fc);
    const int64_t *ts = kr_forecast_timestamps(fc);
    kr_sb_append(sb, "\"quantiles\":{");
    if (p->n_quantiles <= 0) {
        kr_sb_append(sb, "}");
        return KR_OK;
    }
    double *qv = malloc((size_t)P * KR_N_FEATURES * sizeof *qv);
    if (!qv) return kr_error_set(err, KR_ERR_NOMEM, "forecast json: out of memory");
    kr_status st = KR_OK;
    int written = 0;
    for (int k = 0; k < p->n_quantiles && st == KR_OK; k++) {
        char key[32], prev[32];
        snprintf(key, sizeof key, "%g", p->quantiles[k]);
        int repeat = 0; /* the same key twice would be a duplicate JSON member: keep one */
        for (int j = 0; j < k && !repeat; j++) {
            snprintf(prev, sizeof prev, "%g", p->quantiles[j]);
            repeat = !strcmp(prev, key);
        }
        if (repeat) continue;
        st = p->quantile ? p->quantile(p->quantile_user, p->quantiles[k], qv, err)
                         : kr_forecast_quantile(fc, p->quantiles[k], qv, err);
        if (st != KR_OK) break;
        kr_sb_appendf(sb, "%s\"%s\":", written++ ? "," : "", key);
        put_rows(sb, qv, ts, P, p->date_only);
    }
    free(qv);
    kr_sb_append(sb, "}");
    return st;
}

static kr_status put_paths(kr_sb *sb, const kr_forecast *fc, const double *values, int date_only,
                           kr_error *err) {
    const int P = kr_forecast_pred_len(fc), paths = kr_forecast_paths(fc);
    const int64_t *ts = kr_forecast_timestamps(fc);
    kr_sb_append(sb, "\"paths\":[");
    for (int i = 0; i < paths; i++) {
        const double *pv =
            values ? values + (size_t)i * P * KR_N_FEATURES : kr_forecast_path(fc, i);
        const int32_t *s1 = kr_forecast_path_s1(fc, i), *s2 = kr_forecast_path_s2(fc, i);
        if (!pv || !s1 || !s2)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "forecast json: path %d was not kept (run with keep_paths)", i);
        kr_sb_append(sb, i ? ",{\"candles\":" : "{\"candles\":");
        put_rows(sb, pv, ts, P, date_only);
        kr_sb_append(sb, ",\"s1\":[");
        for (int j = 0; j < P; j++) kr_sb_appendf(sb, "%s%d", j ? "," : "", (int)s1[j]);
        kr_sb_append(sb, "],\"s2\":[");
        for (int j = 0; j < P; j++) kr_sb_appendf(sb, "%s%d", j ? "," : "", (int)s2[j]);
        kr_sb_append(sb, "]}");
    }
    kr_sb_append(sb, "]");
    return KR_OK;
}

/* What the user should know about the inputs: the calendar and whether its holidays cover the
 * forecast, a volume column that was absent, and the warnings as sentences. */
static void put_notes(kr_sb *sb, const kr_forecast_json_params *p) {
    const kr_calendar_coverage *c = p->calendar;
    if (c && c->name[0])
        kr_sb_appendf(sb,
                      "\"calendar\":{\"name\":\"%s\",\"years\":[%d,%d],"
                      "\"holidays_known\":%s},",
                      c->name, c->year_first, c->year_last, c->past_last_year ? "false" : "true");
    if (p->volume_absent) kr_sb_append(sb, "\"volume_absent\":true,");
    if (p->n_warnings <= 0) return;
    kr_sb_append(sb, "\"warnings\":[");
    for (int i = 0; i < p->n_warnings; i++) {
        kr_sb_append(sb, i ? ",\"" : "\"");
        kr_sb_append_json_escaped(sb, p->warnings[i]);
        kr_sb_append(sb, "\"");
    }
    kr_sb_append(sb, "],");
}

static void put_usage_timing(kr_sb *sb, const kr_forecast *fc, const kr_forecast_json_params *p) {
    kr_forecast_stats st;
    kr_forecast_get_stats(fc, &st);
    const long long generated = (long long)kr_forecast_pred_len(fc) * kr_forecast_paths(fc);
    kr_sb_appendf(
        sb,
        "\"usage\":{\"prefill_tokens\":%lld,\"cached_tokens\":%lld,\"decode_tokens\":%lld,"
        "\"generated_tokens\":%lld},\"timing\":{",
        (long long)st.prefill_tokens, (long long)st.cached_tokens, (long long)st.decode_tokens,
        generated);
    if (p->queue_seconds >= 0) {
        kr_sb_append(sb, "\"queue_seconds\":");
        put_double(sb, p->queue_seconds);
        kr_sb_append(sb, ",");
    }
    if (p->ttft_seconds >= 0) {
        kr_sb_append(sb, "\"ttft_seconds\":");
        put_double(sb, p->ttft_seconds);
        kr_sb_append(sb, ",");
    }
    const struct {
        const char *name;
        double v;
    } t[] = { { "total_seconds", st.seconds_total },
              { "prefill_seconds", st.seconds_prefill },
              { "decode_seconds", st.seconds_decode },
              { "tokenizer_seconds", st.seconds_tokenizer } };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        kr_sb_appendf(sb, "%s\"%s\":", i ? "," : "", t[i].name);
        put_double(sb, t[i].v);
    }
    if (st.profile.enabled) {
        kr_sb_append(sb, ",\"profile\":");
        kr_step_profile_json(sb, &st.profile);
    }
    kr_sb_append(sb, "}");
}

kr_status kr_forecast_json(const kr_forecast *fc, const kr_forecast_json_params *p, char **out,
                           size_t *len, kr_error *err) {
    if (out) *out = NULL;
    if (len) *len = 0;
    if (!fc || !p || !p->params || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "forecast json: NULL argument");
    if (p->n_quantiles > 0 && !p->quantiles)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "forecast json: quantiles NULL");
    for (int k = 0; k < p->n_quantiles; k++)
        if (!(p->quantiles[k] >= 0.0 && p->quantiles[k] <= 1.0))
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "forecast json: quantiles[%d] = %g is outside [0, 1]", k,
                                p->quantiles[k]);
    kr_sb sb = { 0 };
    kr_sb_append(&sb, "{");
    if (p->head && *p->head) {
        kr_sb_append(&sb, p->head);
        kr_sb_append(&sb, ",");
    }
    put_notes(&sb, p);
    put_params(&sb, p->params, p->history_rows);
    kr_sb_append(&sb, ",\"mean\":");
    put_rows(&sb, p->mean ? p->mean : kr_forecast_mean(fc), kr_forecast_timestamps(fc),
             kr_forecast_pred_len(fc), p->date_only);
    kr_sb_append(&sb, ",");
    kr_status st = put_quantiles(&sb, fc, p, err);
    if (st == KR_OK && p->include_paths) {
        kr_sb_append(&sb, ",");
        st = put_paths(&sb, fc, p->values, p->date_only, err);
    }
    if (st != KR_OK) {
        kr_sb_free(&sb);
        return st;
    }
    kr_sb_append(&sb, ",");
    put_usage_timing(&sb, fc, p);
    kr_sb_append(&sb, "}");
    size_t n = sb.len;
    if ((st = kr_sb_finish(&sb, out, err)) != KR_OK) return st;
    if (len) *len = n;
    return KR_OK;
}
