/*
 * analyst/narrative — the language-model narrative (see narrative.h): the prompt built from
 * a report's figures, one POST to an Ollama-compatible /api/generate through the library's
 * HTTP client (net/http_client.h), the answer's text (one JSON object or NDJSON pieces) and
 * the numeric-token guard.
 *
 * Nothing here touches the report's numbers; a narrative only ever adds text beside them.
 */
#include "analyst/narrative.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "analyst/text.h"
#include "base/error.h"
#include "base/timeutil.h"
#include "net/http_client.h"

#define ENDPOINT_SUFFIX "/api/generate"

/* The instructions. They contain no digit, so every number in the prompt is one of the
 * report's and the guard's reference set is exactly "the numbers given". */
static const char k_instructions[] =
    "You write the plain-language narrative of an automatically generated report about a "
    "financial instrument. The report's figures are statistics of a statistical model's sampled "
    "forecast paths and simple technical indicators. They are given below as JSON under DATA, "
    "together with the report's own summary sentences (\"summary\").\n"
    "Rewrite that summary as one or two short paragraphs of plain prose for a general reader.\n"
    "Rules:\n"
    "- Use only figures that appear in DATA, written as they appear there. Do not add, derive, "
    "convert or estimate any other number, percentage, price or date.\n"
    "- Do not give advice: no recommendation to buy, sell or hold, no price target, nothing about "
    "what the reader should do.\n"
    "- Say that these are statistics of a model's sampled forecasts, and keep the uncertainty "
    "visible; do not present any outcome as certain. \"standard_error\" gives the Monte Carlo "
    "error of the figures with the same key (how much they move with another sample of paths): "
    "write it as \"± error\" after its figure where you cite one.\n"
    "- If \"demo_model\" is true, begin by saying that the model is a demonstration checkpoint "
    "and that its output is not a forecast.\n"
    "- Answer with the prose only: no heading, list, table, preamble or sign-off.\n"
    "\n"
    "DATA:\n";

kr_narrative_params kr_narrative_default_params(void) {
    kr_narrative_params p;
    memset(&p, 0, sizeof p);
    p.model = KR_NARRATIVE_DEFAULT_MODEL;
    p.timeout_s = KR_NARRATIVE_DEFAULT_TIMEOUT;
    return p;
}

/* ------------------------------------------------------------------ URL */

/* The URL as errors and reports show it: no user:password@, no query string (it may carry an
 * API key: "?..." stands for it) and no control character. */
static void shown_url(const char *url, char *out, size_t cap) {
    kr_http_redact_url(url, out, cap);
    char *q = strchr(out, '?');
    if (q && (size_t)(q - out) + 5 <= cap)
        snprintf(q, cap - (size_t)(q - out), "?...");
    else if (q)
        *q = '\0';
    for (char *c = out; *c; c++)
        if ((unsigned char)*c < ' ' || *c == 0x7f) *c = '?';
}

kr_status kr_narrative_endpoint(const char *url, char *out, size_t cap, kr_error *err) {
    if (!url || !*url) return kr_error_set(err, KR_ERR_INVALID_ARG, "LLM URL is empty");
    char shown[512];
    shown_url(url, shown, sizeof shown);
    size_t scheme = !strncasecmp(url, "http://", 7) ? 7 : !strncasecmp(url, "https://", 8) ? 8 : 0;
    if (!scheme)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "LLM URL '%s' is not an http:// or https:// URL", shown);
    for (const char *c = url; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "LLM URL '%s' contains a space or control character", shown);
    if (strcspn(url + scheme, "/?#") == 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "LLM URL '%s' has no host", shown);
    if (strchr(url, '#'))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "LLM URL '%s' has a fragment ('#'), which is never sent", shown);
    /* The suffix goes at the end of the path, before any query string (which a proxy may
     * want, e.g. for its key). */
    size_t n = strcspn(url, "?");
    const char *query = url + n;
    while (n > scheme && url[n - 1] == '/') n--;
    const size_t sl = strlen(ENDPOINT_SUFFIX);
    const int has = n >= scheme + sl && !memcmp(url + n - sl, ENDPOINT_SUFFIX, sl);
    int len = snprintf(out, cap, "%.*s%s%s", (int)n, url, has ? "" : ENDPOINT_SUFFIX, query);
    if (len < 0 || (size_t)len >= cap)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "LLM URL is too long (%zu bytes)",
                            strlen(url));
    return KR_OK;
}

/* ------------------------------------------------------------------ prompt */

/* A figure as the report prints it, as a raw JSON number (null when not computable). The
 * text formatters give "n/a" for NaN; "+" and "%" never appear in these variants. */
static void fig(cJSON *o, const char *key, const char *formatted) {
    if (!strcmp(formatted, "n/a"))
        cJSON_AddNullToObject(o, key);
    else
        cJSON_AddRawToObject(o, key, formatted);
}

static void fig_pct(cJSON *o, const char *key, double frac, int dec) {
    char b[32];
    fig(o, key, kr_fmt_num(frac * 100.0, dec, b));
}

static void fig_price(cJSON *o, const char *key, double x) {
    char b[32];
    fig(o, key, kr_fmt_price(x, b));
}

kr_status kr_narrative_facts(const kr_report *r, char **out, kr_error *err) {
    if (!r || !out) return kr_error_set(err, KR_ERR_INVALID_ARG, "narrative: NULL argument");
    *out = NULL;
    if (r->horizon < 1)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "narrative: report without a forecast");
    const size_t last = (size_t)(r->horizon - 1) * KR_N_FEATURES + KR_CLOSE;
    const kr_tech_snapshot *t = &r->tech;
    char b[32];
    cJSON *o = cJSON_CreateObject();
    if (!o) return kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
    cJSON_AddStringToObject(o, "symbol", r->symbol);
    cJSON_AddBoolToObject(o, "demo_model", r->meta.demo != 0);
    cJSON_AddStringToObject(o, "interval", r->interval);
    cJSON_AddStringToObject(o, "last_bar",
                            kr_format_timestamp(r->last_ts, r->date_only, b, sizeof b));
    fig_price(o, "last_close", r->last_close);
    cJSON_AddNumberToObject(o, "horizon_bars", r->horizon);
    cJSON_AddStringToObject(
        o, "horizon_end", kr_format_timestamp(r->fc_ts[r->horizon - 1], r->date_only, b, sizeof b));
    cJSON_AddNumberToObject(o, "sampled_paths", r->paths);
    fig_pct(o, "prob_up_pct", r->prob_up, 1);
    fig_pct(o, "prob_down_pct", r->prob_down, 1);
    if (r->nonpositive_paths > 0)
        cJSON_AddNumberToObject(o, "paths_reaching_zero_or_below", r->nonpositive_paths);
    fig_pct(o, "expected_return_pct", r->expected_return, 2);
    fig_pct(o, "return_std_pct", r->return_std, 2);
    fig_pct(o, "return_p10_pct", r->return_p10, 2);
    fig_pct(o, "return_p50_pct", r->return_p50, 2);
    fig_pct(o, "return_p90_pct", r->return_p90, 2);
    fig_price(o, "mean_path_close", r->fc_mean[last]);
    fig_price(o, "close_p10", r->fc_p10[last]);
    fig_price(o, "close_p90", r->fc_p90[last]);
    fig_pct(o, "var95_pct", r->var95, 2);
    fig_pct(o, "es95_pct", r->es95, 2);
    fig_pct(o, "max_drawdown_p50_pct", r->drawdown_p50, 2);
    fig_pct(o, "max_drawdown_p90_pct", r->drawdown_p90, 2);
    fig_pct(o, "forecast_volatility_per_bar_pct", r->forecast_vol, 2);
    fig_pct(o, "realized_volatility_per_bar_pct", r->realized_vol_h, 2);
    fig_pct(o, "paths_more_volatile_than_realized_pct", r->prob_vol_above, 0);
    /* The Monte Carlo errors of the figures above that a reader acts on, same keys and units,
     * so the prose can keep them visible as the report does ("85% ± 2 pp"). */
    cJSON *se = cJSON_AddObjectToObject(o, "standard_error");
    fig_pct(se, "prob_up_pct", r->prob_up_se, 1);
    fig_pct(se, "expected_return_pct", r->expected_return_se, 2);
    fig_pct(se, "return_p10_pct", r->return_p10_se, 2);
    fig_pct(se, "return_p90_pct", r->return_p90_se, 2);
    fig_price(se, "mean_path_close", r->fc_mean_se[last]);
    fig_price(se, "close_p10", r->fc_p10_se[last]);
    fig_price(se, "close_p90", r->fc_p90_se[last]);
    fig_pct(se, "var95_pct", r->var95_se, 2);
    fig(o, "rsi_14", kr_fmt_num(t->rsi14, 1, b));
    cJSON_AddStringToObject(o, "rsi_state", kr_rsi_state(t->rsi14));
    fig_price(o, "sma_20", t->sma20);
    fig_price(o, "sma_60", t->sma60);
    fig(o, "macd_histogram", kr_fmt_sig(t->macd_hist, 3, b));
    fig(o, "bollinger_percent_b", kr_fmt_num(t->bb_percent_b, 2, b));
    fig(o, "volume_ratio_5_20", kr_fmt_num(t->volume_ratio, 2, b));
    const kr_calibration *c = r->calibration;
    if (c) {
        cJSON *k = cJSON_AddObjectToObject(o, "calibration");
        cJSON_AddNumberToObject(k, "windows", c->windows);
        fig_pct(k, "coverage_p10_p90_pct", c->model.coverage, 0);
        fig_pct(k, "naive_coverage_p10_p90_pct", c->naive.coverage, 0);
        fig_pct(k, "direction_hit_rate_pct", c->model.direction_hit_rate, 0);
        fig_pct(k, "naive_direction_hit_rate_pct", c->naive.direction_hit_rate, 0);
        fig_pct(k, "mape_pct", c->model.mape, 2);
        fig_pct(k, "naive_mape_pct", c->naive.mape, 2);
    } else {
        cJSON_AddNullToObject(o, "calibration");
    }
    cJSON *s = cJSON_AddArrayToObject(o, "summary");
    for (int i = 0; i < r->n_summary; i++)
        cJSON_AddItemToArray(s, cJSON_CreateString(r->summary[i]));
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text) return kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
    *out = strdup(text); /* a plain malloc'd copy, whatever allocator cJSON was built with */
    cJSON_free(text);
    return *out ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
}

static kr_status prompt_from_facts(const char *facts, char **out, kr_error *err) {
    kr_sb sb = { 0 };
    kr_sb_append(&sb, k_instructions);
    kr_sb_append(&sb, facts);
    kr_sb_append(&sb, "\n");
    return kr_sb_finish(&sb, out, err);
}

kr_status kr_narrative_prompt(const kr_report *r, char **out, kr_error *err) {
    char *facts = NULL;
    kr_status st = kr_narrative_facts(r, &facts, err);
    if (st != KR_OK) return st;
    st = prompt_from_facts(facts, out, err);
    free(facts);
    return st;
}

kr_status kr_narrative_request_body(const char *model, const char *prompt, char **out,
                                    kr_error *err) {
    if (!model || !prompt || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "narrative: NULL argument");
    *out = NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o) return kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
    cJSON_AddStringToObject(o, "model", model);
    cJSON_AddStringToObject(o, "prompt", prompt);
    /* One answer, not a stream; temperature 0 so the same numbers give (nearly) the same
     * prose on servers that honour it. */
    cJSON_AddFalseToObject(o, "stream");
    cJSON *opt = cJSON_AddObjectToObject(o, "options");
    cJSON_AddNumberToObject(opt, "temperature", 0);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text) return kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
    *out = strdup(text);
    cJSON_free(text);
    return *out ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
}

/* ------------------------------------------------------------------ answer */

typedef struct answer_state {
    kr_sb text;
    int objects, has_response;
    int last_done; /* -1: no "done" seen yet; else the last object's value */
} answer_state;

/* Takes one answer object. 0, or -1 with the reason in err. */
static int take_object(answer_state *a, const cJSON *o, kr_error *err) {
    a->objects++;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (e) {
        kr_error_set(err, KR_ERR_FORMAT, "the server reported an error: %.300s",
                     cJSON_IsString(e) ? e->valuestring : "(not a string)");
        return -1;
    }
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "response");
    if (r) {
        if (!cJSON_IsString(r)) {
            kr_error_set(err, KR_ERR_FORMAT, "\"response\" is not a string");
            return -1;
        }
        kr_sb_append(&a->text, r->valuestring);
        a->has_response = 1;
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "done");
    if (cJSON_IsBool(d)) a->last_done = cJSON_IsTrue(d);
    return 0;
}

static int all_space(const char *s, const char *e) {
    for (; s < e; s++)
        if (!isspace((unsigned char)*s)) return 0;
    return 1;
}

kr_status kr_narrative_parse_answer(const char *body, size_t len, char **text, kr_error *err) {
    if (!body || !text) return kr_error_set(err, KR_ERR_INVALID_ARG, "narrative: NULL argument");
    *text = NULL;
    answer_state a = { .last_done = -1 };
    kr_status st = KR_OK;
    const char *end = NULL;
    /* One object, possibly pretty-printed over several lines, is the documented answer;
     * only when that does not parse is the body read as NDJSON. */
    cJSON *whole = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (whole && cJSON_IsObject(whole) && end && all_space(end, body + len)) {
        if (take_object(&a, whole, err) != 0) st = KR_ERR_FORMAT;
        cJSON_Delete(whole);
    } else {
        cJSON_Delete(whole);
        const char *p = body, *stop = body + len;
        int line = 0;
        while (p < stop && st == KR_OK) {
            const char *nl = memchr(p, '\n', (size_t)(stop - p));
            const char *le = nl ? nl : stop;
            line++;
            if (!all_space(p, le)) {
                cJSON *o = cJSON_ParseWithLength(p, (size_t)(le - p));
                if (!o || !cJSON_IsObject(o)) {
                    const char *q = p;
                    while (q < le && isspace((unsigned char)*q)) q++;
                    int show = (int)(le - q < 60 ? le - q : 60);
                    while (show > 0 && (q[show - 1] == '\r' || q[show - 1] == '\n')) show--;
                    st = kr_error_set(err, KR_ERR_FORMAT,
                                      "the answer is not Ollama JSON (line %d: '%.*s')", line, show,
                                      q);
                } else if (take_object(&a, o, err) != 0) {
                    st = KR_ERR_FORMAT;
                }
                cJSON_Delete(o);
            }
            p = le + 1;
        }
    }
    if (st == KR_OK && a.text.oom) st = kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
    if (st == KR_OK && a.objects == 0) st = kr_error_set(err, KR_ERR_FORMAT, "the answer is empty");
    if (st == KR_OK && !a.has_response)
        st = kr_error_set(err, KR_ERR_FORMAT, "the answer has no \"response\" text");
    /* A stream cut short (the server died, a proxy closed it) must not pass for the text. */
    if (st == KR_OK && a.last_done == 0)
        st = kr_error_set(err, KR_ERR_FORMAT, "the answer ended before \"done\": true");
    if (st != KR_OK) {
        kr_sb_free(&a.text);
        return st;
    }
    /* Made printable (no terminal escape, valid UTF-8 for the JSON report): the text goes to
     * terminals and documents as it is. Newlines and tabs stay. Then trimmed: models often
     * add blank lines. */
    kr_sb clean = { 0 };
    if (a.text.data) kr_text_clean(&clean, a.text.data, strlen(a.text.data), 1);
    kr_sb_free(&a.text);
    if (clean.oom) {
        kr_sb_free(&clean);
        return kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
    }
    const char *s = clean.data ? clean.data : "";
    size_t b = 0, e = clean.len;
    while (b < e && isspace((unsigned char)s[b])) b++;
    while (e > b && isspace((unsigned char)s[e - 1])) e--;
    if (e == b) {
        kr_sb_free(&clean);
        return kr_error_set(err, KR_ERR_FORMAT, "the model returned no text");
    }
    *text = malloc(e - b + 1);
    if (*text) {
        memcpy(*text, s + b, e - b);
        (*text)[e - b] = 0;
    }
    kr_sb_free(&clean);
    return *text ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
}

/* ------------------------------------------------------------------ guard */

typedef struct numtok {
    double value; /* absolute value: signs are ignored ("a loss of 2%" vs "-2") */
    int dec; /* decimals written, less any exponent; >= 0 */
    size_t len; /* characters consumed */
} numtok;

/* Reads the number whose first digit is s[0]: digits, "," thousands groups when
 * `thousands` (prose writes 2,913; the JSON data never does), a fraction, an exponent. */
static numtok read_number(const char *s, int thousands) {
    char buf[96];
    size_t j = 0, k = 0;
    int frac = 0, ex = 0;
    numtok t = { 0, 0, 0 };
#define PUT(c)                                  \
    do {                                        \
        if (k + 1 < sizeof buf) buf[k++] = (c); \
    } while (0)
    while (isdigit((unsigned char)s[j])) PUT(s[j++]);
    /* "1,234,567": a lead of one to three digits, then groups of exactly three. */
    const int lead_ok = thousands && j <= 3;
    while (lead_ok && s[j] == ',' && isdigit((unsigned char)s[j + 1]) &&
           isdigit((unsigned char)s[j + 2]) && isdigit((unsigned char)s[j + 3]) &&
           !isdigit((unsigned char)s[j + 4])) {
        PUT(s[j + 1]);
        PUT(s[j + 2]);
        PUT(s[j + 3]);
        j += 4;
    }
    if (s[j] == '.' && isdigit((unsigned char)s[j + 1])) {
        PUT(s[j++]);
        while (isdigit((unsigned char)s[j])) {
            PUT(s[j++]);
            frac++;
        }
    }
    if ((s[j] == 'e' || s[j] == 'E') &&
        (isdigit((unsigned char)s[j + 1]) ||
         ((s[j + 1] == '+' || s[j + 1] == '-') && isdigit((unsigned char)s[j + 2])))) {
        size_t e0 = ++j;
        if (s[j] == '+' || s[j] == '-') j++;
        while (isdigit((unsigned char)s[j])) j++;
        ex = atoi(s + e0);
        PUT('e');
        for (size_t q = e0; q < j; q++) PUT(s[q]);
    }
#undef PUT
    buf[k] = 0;
    t.value = fabs(strtod(buf, NULL));
    t.dec = frac - ex > 0 ? frac - ex : 0;
    if (t.dec > 15) t.dec = 15;
    t.len = j;
    return t;
}

/* Whether some number of data rounds to x (x written with x.dec decimals). */
static int in_data(const numtok *x, const char *data) {
    const double tol = 0.5 * pow(10.0, -x->dec) * (1.0 + 1e-9) + 1e-12 * x->value;
    for (const char *p = data; *p;) {
        if (!isdigit((unsigned char)*p)) {
            p++;
            continue;
        }
        numtok d = read_number(p, 0);
        if (fabs(d.value - x->value) <= tol) return 1;
        p += d.len;
    }
    return 0;
}

/* Whether s is a date or timestamp as the facts write them ("2025-08-01", "... 14:30"). */
static int is_date(const char *s) {
    for (int i = 0; i < 10; i++)
        if (i == 4 || i == 7 ? s[i] != '-' : !isdigit((unsigned char)s[i])) return 0;
    return 1;
}

/* Blanks the digits of s[0, n) (the number of a label, not a figure). */
static void blank_digits(char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (isdigit((unsigned char)s[i]) || s[i] == '.') s[i] = ' ';
}

/* The figures of a sentence the data carries (the report's summary) into out, its dates
 * into dates. Its fixed wording is no figure: the "95%" of "the 95% value-at-risk", the "80%"
 * of "80% of paths", the 10 and 90 of "p10-p90", the 5 of "5th" (a narrative's "95% chance"
 * passed on them), and a date's parts ("2025-08-01" inside a sentence) are figures for dates
 * only (an "8% rule" passed on its month). */
static void prose_values(const char *text, kr_sb *out, kr_sb *dates) {
    char *s = strdup(text);
    if (!s) {
        out->oom = 1;
        return;
    }
    static const char *const labels[] = { "95% value-at-risk", "80% of paths",
                                          "80% is the target" };
    for (size_t k = 0; k < sizeof labels / sizeof labels[0]; k++)
        for (char *p = strstr(s, labels[k]); p; p = strstr(p + 1, labels[k])) blank_digits(p, 3);
    for (size_t i = 0; s[i]; i++) {
        if (!isdigit((unsigned char)s[i])) continue;
        size_t j = i;
        while (isdigit((unsigned char)s[j])) j++;
        const int after_letter = i > 0 && (isalpha((unsigned char)s[i - 1]) || s[i - 1] == '_');
        if (after_letter || isalpha((unsigned char)s[j])) {
            blank_digits(s + i, j - i);
        } else if (is_date(s + i)) {
            size_t end = i + 10; /* with a time of day when one follows: " 14:30[:00]" */
            if (s[end] == ' ' && isdigit((unsigned char)s[end + 1]) &&
                isdigit((unsigned char)s[end + 2]) && s[end + 3] == ':')
                for (end += 4; isdigit((unsigned char)s[end]) || s[end] == ':'; end++) {
                }
            kr_sb_appendn(dates, s + i, end - i);
            kr_sb_append(dates, " ");
            memset(s + i, ' ', end - i);
            j = end;
        }
        i = j - 1;
    }
    kr_sb_append(out, s);
    kr_sb_append(out, " ");
    free(s);
}

/* The values of a JSON document, space-separated: its numbers and strings at every depth,
 * never its keys; the dates apart, in dates. */
static void json_values(const cJSON *v, kr_sb *out, kr_sb *dates) {
    if (cJSON_IsNumber(v)) {
        kr_sb_appendf(out, "%.17g ", v->valuedouble);
    } else if (cJSON_IsString(v)) {
        if (is_date(v->valuestring)) {
            kr_sb_append(dates, v->valuestring);
            kr_sb_append(dates, " ");
        } else {
            prose_values(v->valuestring, out, dates);
        }
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        for (const cJSON *c = v->child; c; c = c->next) json_values(c, out, dates);
    }
}

/* Whether the number of len characters at p is a percentage ("12%", "12 %", "12 percent"). */
static int is_percentage(const char *p, size_t len) {
    const char *q = p + len;
    while (*q == ' ') q++;
    return *q == '%' || !strncasecmp(q, "percent", 7) || !strncasecmp(q, "per cent", 8);
}

int kr_narrative_unsupported_figures(const char *text, const char *data, char *first, size_t cap) {
    int bad = 0;
    if (first && cap) first[0] = 0;
    if (!text) return 0;
    /* Only the data's values are figures the model was given: the digits of its keys
     * ("rsi_14", "close_p90", "var95_pct") would otherwise pass any 14, 90 or 95 it invents. */
    /* A date's parts ("2025-08-01": 2025, 8, 1) are figures for a date ("August 1"), not for
     * a percentage: "an 8% gain" must not pass because the last bar is in August. */
    kr_sb values = { 0 }, dates = { 0 };
    cJSON *doc = data ? cJSON_Parse(data) : NULL;
    if (doc) {
        json_values(doc, &values, &dates);
        cJSON_Delete(doc);
        if (values.oom || dates.oom) {
            kr_sb_free(&values);
            kr_sb_free(&dates);
            return -1;
        }
        data = values.data ? values.data : "";
    }
    for (const char *p = text; *p;) {
        if (!isdigit((unsigned char)*p)) {
            p++;
            continue;
        }
        /* Digits that continue a word are part of a label ("p90", "rsi_14", "SMA20"), the
         * names the data gives its figures, not a figure. */
        if (p > text && (isalpha((unsigned char)p[-1]) || p[-1] == '_')) {
            while (isalnum((unsigned char)*p) || *p == '_') p++;
            continue;
        }
        numtok x = read_number(p, 1);
        const int found = data && (in_data(&x, data) || (dates.data && !is_percentage(p, x.len) &&
                                                         in_data(&x, dates.data)));
        if (!found) {
            if (!bad && first && cap) snprintf(first, cap, "%.*s", (int)x.len, p);
            bad++;
        }
        p += x.len;
    }
    kr_sb_free(&values);
    kr_sb_free(&dates);
    return bad;
}

/* ------------------------------------------------------------------ HTTP */

/* "HTTP 404: <the server's "error" or the start of its body>" into out. */
static void http_failure(long code, const char *body, size_t len, char *out, size_t cap) {
    cJSON *o = body ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (cJSON_IsString(e)) {
        snprintf(out, cap, "HTTP %ld: %.300s", code, e->valuestring);
    } else {
        char first[201];
        size_t k = 0;
        for (size_t i = 0; body && i < len && k + 1 < sizeof first; i++)
            first[k++] = (body[i] == '\n' || body[i] == '\r' || body[i] == '\t') ? ' ' : body[i];
        while (k > 0 && first[k - 1] == ' ') k--;
        first[k] = 0;
        snprintf(out, cap, "HTTP %ld%s%s", code, k ? ": " : "", first);
    }
    cJSON_Delete(o);
}

/* POSTs the JSON body to endpoint and collects the answer in *ans (at most
 * KR_NARRATIVE_MAX_ANSWER bytes). KR_OK when an HTTP answer arrived, whatever its status (in
 * *status); otherwise the failure (KR_ERR_IO, _TIMEOUT, _FORMAT for an oversized answer,
 * _NOMEM) with its reason in reason, *status 0. */
static kr_status post_json(const char *endpoint, const char *body, const kr_narrative_params *p,
                           double timeout_s, long *status, kr_sb *ans, char *reason, size_t cap) {
    *status = 0;
    double ms = timeout_s * 1000.0;
    long tmo = ms < 1.0 ? 1L : ms > 1e9 ? 1000000000L : (long)ms;
    const kr_http_options o = { .connect_timeout_ms = tmo,
                                .timeout_ms = tmo,
                                .max_body = KR_NARRATIVE_MAX_ANSWER };
    kr_http_client *c = NULL;
    kr_error err = { 0 };
    kr_status st = kr_http_client_create(&o, &c, &err);
    if (st != KR_OK) {
        snprintf(reason, cap, "%s", err.message);
        return st;
    }
    static const char *const headers[] = { "Content-Type: application/json",
                                           "Accept: application/json, application/x-ndjson", NULL };
    const kr_http_request rq = { .method = "POST",
                                 .url = endpoint,
                                 .headers = headers,
                                 .body = body,
                                 .body_len = strlen(body),
                                 .body_out = ans,
                                 .on_progress = p->should_abort,
                                 .user = p->abort_user };
    kr_http_response rs;
    st = kr_http_perform(c, &rq, &rs, &err);
    kr_http_client_free(c);
    if (st == KR_OK)
        *status = rs.status;
    else
        snprintf(reason, cap, "%s", rs.reason[0] ? rs.reason : err.message);
    return st;
}

/* ------------------------------------------------------------------ generate */

void kr_narrative_free(kr_narrative *n) {
    if (!n) return;
    free(n->text);
    free(n);
}

/* The reason may quote the server (its "error", the start of its body): cleaned like the
 * text, on one line, since it is printed on terminals and in every report format. */
static void fail(kr_narrative *n, kr_status st, const char *reason) {
    n->status = st;
    kr_sb clean = { 0 };
    kr_text_clean(&clean, reason, strlen(reason), 0);
    snprintf(n->reason, sizeof n->reason, "%s",
             clean.data && !clean.oom ? clean.data : "(unprintable reason)");
    kr_text_cut_partial(n->reason);
    snprintf(n->error, sizeof n->error, "%s: %s", n->url, n->reason);
    kr_text_cut_partial(n->error);
    kr_sb_free(&clean);
}

kr_status kr_narrative_generate(const kr_report *r, const kr_narrative_params *p,
                                kr_narrative **out, kr_error *err) {
    if (!r || !p || !out) return kr_error_set(err, KR_ERR_INVALID_ARG, "narrative: NULL argument");
    *out = NULL;
    if (!(p->timeout_s > 0) || !isfinite(p->timeout_s))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "narrative: the timeout must be a positive number of seconds");
    char endpoint[1024];
    kr_status st = kr_narrative_endpoint(p->url, endpoint, sizeof endpoint, err);
    if (st != KR_OK) return st;
    const char *model = p->model && *p->model ? p->model : KR_NARRATIVE_DEFAULT_MODEL;
    kr_narrative *n = calloc(1, sizeof *n);
    if (!n) return kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
    snprintf(n->model, sizeof n->model, "%s", model);
    shown_url(endpoint, n->url, sizeof n->url);

    char *facts = NULL, *prompt = NULL, *body = NULL;
    kr_sb ans = { 0 };
    if ((st = kr_narrative_facts(r, &facts, err)) != KR_OK ||
        (st = prompt_from_facts(facts, &prompt, err)) != KR_OK ||
        (st = kr_narrative_request_body(model, prompt, &body, err)) != KR_OK)
        goto done;

    char reason[900];
    long status = 0;
    const double t0 = kr_now_seconds();
    kr_status hs = post_json(endpoint, body, p, p->timeout_s, &status, &ans, reason, sizeof reason);
    n->seconds = kr_now_seconds() - t0;
    n->http_status = status;
    if (hs == KR_ERR_NOMEM) {
        st = kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
        goto done;
    }
    if (hs != KR_OK) {
        fail(n, hs, reason);
    } else if (status < 200 || status > 299) {
        http_failure(status, ans.data, ans.len, reason, sizeof reason);
        fail(n, KR_ERR_IO, reason);
    } else {
        kr_error perr = { 0 };
        kr_status ps =
            kr_narrative_parse_answer(ans.data ? ans.data : "", ans.len, &n->text, &perr);
        if (ps == KR_ERR_NOMEM) {
            st = kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
            goto done;
        }
        if (ps != KR_OK) {
            fail(n, ps, perr.message);
        } else {
            int bad = kr_narrative_unsupported_figures(n->text, facts, n->unsupported,
                                                       sizeof n->unsupported);
            if (bad < 0) {
                st = kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
                goto done;
            }
            if (bad > 0) snprintf(n->warning, sizeof n->warning, "%s", KR_NARRATIVE_WARNING);
        }
    }
done:
    kr_sb_free(&ans);
    free(facts);
    free(prompt);
    free(body);
    if (st != KR_OK) {
        kr_narrative_free(n);
        return st;
    }
    *out = n;
    return KR_OK;
}

void kr_narrative_free_all(kr_narrative **v, int n) {
    if (!v) return;
    for (int i = 0; i < n; i++) kr_narrative_free(v[i]);
    free(v);
}

/* The narrative of a request that was not made: the budget was spent before it. */
static kr_status not_asked(const kr_narrative_params *p, kr_narrative **out, kr_error *err) {
    char endpoint[1024];
    kr_status st = kr_narrative_endpoint(p->url, endpoint, sizeof endpoint, err);
    if (st != KR_OK) return st;
    kr_narrative *n = calloc(1, sizeof *n);
    if (!n) return kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
    snprintf(n->model, sizeof n->model, "%s",
             p->model && *p->model ? p->model : KR_NARRATIVE_DEFAULT_MODEL);
    shown_url(endpoint, n->url, sizeof n->url);
    char why[160];
    snprintf(why, sizeof why,
             "not asked: the %.1f s allowed for the narratives (what the deadline left) had passed",
             p->budget_s);
    fail(n, KR_ERR_TIMEOUT, why);
    *out = n;
    return KR_OK;
}

kr_status kr_narrative_attach_all(kr_report_set *set, const kr_narrative_params *p,
                                  kr_narrative ***out, kr_error *err) {
    if (!set || !p || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "narrative: NULL argument");
    *out = NULL;
    if (!(p->timeout_s > 0) || !isfinite(p->timeout_s))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "narrative: the timeout must be a positive number of seconds");
    if (!(p->budget_s >= 0) || !isfinite(p->budget_s))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "narrative: the budget must be 0 (none) or a positive number of "
                            "seconds");
    kr_narrative **v = calloc((size_t)(set->n > 0 ? set->n : 1), sizeof *v);
    if (!v) return kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
    const kr_narrative *dead = NULL; /* the failure that ended the asking, if any */
    const char *dead_symbol = "";
    const char *model = p->model && *p->model ? p->model : KR_NARRATIVE_DEFAULT_MODEL;
    const double end = p->budget_s > 0 ? kr_now_seconds() + p->budget_s : 0;
    kr_status st = KR_OK;
    for (int i = 0; i < set->n; i++) {
        kr_report *r = set->reports[i];
        /* Each request gets what is left of the whole budget, at most its own timeout; none
         * is made once the budget is spent, so a caller's deadline holds however many
         * symbols ask however slow a model. */
        kr_narrative_params one = *p;
        const double left = end > 0 ? end - kr_now_seconds() : p->timeout_s;
        if (left < one.timeout_s) one.timeout_s = left;
        if (!(left >= KR_NARRATIVE_MIN_TIMEOUT)) {
            if ((st = not_asked(p, &v[i], err)) != KR_OK) break;
        } else if (dead) {
            v[i] = malloc(sizeof *v[i]);
            if (!v[i]) {
                st = kr_error_set(err, KR_ERR_NOMEM, "narrative: out of memory");
                break;
            }
            *v[i] = *dead; /* text is NULL: dead is a failure */
            v[i]->seconds = 0;
            snprintf(v[i]->error, sizeof v[i]->error,
                     "%.1000s (not asked again after the failure for %s)", dead->error,
                     dead_symbol);
        } else {
            if (p->progress) {
                char what[200];
                snprintf(what, sizeof what, "asking %s for a narrative of %s", model, r->symbol);
                p->progress(p->progress_user, i, set->n, what);
            }
            if ((st = kr_narrative_generate(r, &one, &v[i], err)) != KR_OK) break;
            /* No answer at all (nothing listening, timeout): the next symbol would only wait
             * the same way. An HTTP error or a bad answer may be particular to one prompt. */
            if (!v[i]->text && v[i]->http_status == 0) {
                dead = v[i];
                dead_symbol = r->symbol;
            }
        }
        r->narrative = v[i];
    }
    if (p->progress) p->progress(p->progress_user, set->n, set->n, "done");
    if (st != KR_OK) {
        for (int i = 0; i < set->n; i++) set->reports[i]->narrative = NULL;
        kr_narrative_free_all(v, set->n);
        return st;
    }
    *out = v;
    return KR_OK;
}
