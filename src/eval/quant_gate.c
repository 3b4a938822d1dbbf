/*
 * eval/quant_gate — acceptance gates on an eval-quant report: a JSON file of thresholds
 * (deploy/quant-gate.json), each a bound on one measured figure; a quantised model passes when
 * every gate the file names holds. A figure that could not be measured (NaN: a single class of
 * outcomes, a constant score) fails its gate: "unknown" is not "good enough".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "eval/eval_quant_internal.h"

#define GATE_FILE_MAX (64 * 1024)

static double ratio(int64_t num, int64_t den) { return den ? (double)num / (double)den : NAN; }
static double s1_agree(const kr_eval_quant_report *r) { return ratio(r->s1_agree, r->positions); }
static double s2_agree(const kr_eval_quant_report *r) { return ratio(r->s2_agree, r->positions); }
static double s1_kl(const kr_eval_quant_report *r) {
    return r->positions ? r->kl_s1 / (double)r->positions : NAN;
}
static double s2_kl(const kr_eval_quant_report *r) {
    return r->positions ? r->kl_s2 / (double)r->positions : NAN;
}
static double ks_p(const kr_eval_quant_report *r) { return r->ks_p; }
static double auc_drop(const kr_eval_quant_report *r) { return r->auc_ref - r->auc_q; }
static double rank_corr(const kr_eval_quant_report *r) { return r->rho_windows; }
static double risk_ks_drop(const kr_eval_quant_report *r) { return r->risk_ks_ref - r->risk_ks_q; }

typedef struct gate_def {
    const char *key, *metric;
    int is_max; /* 1: value <= threshold; 0: value >= threshold */
    double lo, hi; /* allowed thresholds */
    double (*value)(const kr_eval_quant_report *r);
} gate_def;

static const gate_def k_gates[KR_EVAL_GATES] = {
    { "s1_top1_agreement_min", "s1 top-1 agreement (teacher-forced)", 0, 0.0, 1.0, s1_agree },
    { "s2_top1_agreement_min", "s2 top-1 agreement (teacher-forced)", 0, 0.0, 1.0, s2_agree },
    { "s1_kl_max", "mean KL(f32 ‖ quant) s1", 1, 0.0, INFINITY, s1_kl },
    { "s2_kl_max", "mean KL(f32 ‖ quant) s2", 1, 0.0, INFINITY, s2_kl },
    { "ks_p_value_min", "KS p-value of path returns at the horizon", 0, 0.0, 1.0, ks_p },
    { "roc_auc_drop_max", "ROC-AUC drop of P(up), f32 − quant", 1, 0.0, 1.0, auc_drop },
    { "rank_correlation_min", "Spearman of expected returns across windows", 0, -1.0, 1.0,
      rank_corr },
    { "risk_ks_drop_max", "risk-control KS drop of P(up), f32 − quant", 1, 0.0, 1.0, risk_ks_drop },
};

struct kr_quant_gate {
    char origin[256];
    int has[KR_EVAL_GATES];
    double threshold[KR_EVAL_GATES];
};

static void known_keys(char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < KR_EVAL_GATES && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", k_gates[i].key);
}

/* Line of byte `at` in text (1-based). */
static int line_of(const char *text, const char *at) {
    int line = 1;
    for (const char *c = text; c < at && *c; c++) line += *c == '\n';
    return line;
}

kr_status kr_quant_gate_parse(const char *text, size_t len, const char *origin, kr_quant_gate **out,
                              kr_error *err) {
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "gate: out is NULL");
    *out = NULL;
    if (!origin) origin = "gate";
    if (!text) return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: no text", origin);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        return kr_error_set(err, KR_ERR_FORMAT, "%s: not valid JSON (line %d)", origin,
                            at && at >= text && at <= text + len ? line_of(text, at) : 1);
    }
    char keys[512];
    known_keys(keys, sizeof keys);
    kr_status st = KR_OK;
    /* Anything after the object (a second object, a stray key) would be ignored, and a gate
     * in it never applied: refused instead. */
    for (const char *c = end; c && c < text + len; c++)
        if (!*c || !strchr(" \t\r\n", *c)) {
            cJSON_Delete(root);
            return kr_error_set(err, KR_ERR_FORMAT,
                                "%s: text after the JSON object (line %d); one object of gate "
                                "thresholds expected",
                                origin, line_of(text, c));
        }
    kr_quant_gate *g = calloc(1, sizeof *g);
    if (!g)
        st = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", origin);
    else
        snprintf(g->origin, sizeof g->origin, "%s", origin);
    if (st == KR_OK && !cJSON_IsObject(root))
        st = kr_error_set(err, KR_ERR_FORMAT,
                          "%s: must be a JSON object of gate thresholds (keys: %s)", origin, keys);
    int n = 0;
    for (const cJSON *it = root->child; st == KR_OK && it; it = it->next) {
        if (strcmp(it->string, "description") == 0) {
            if (!cJSON_IsString(it))
                st = kr_error_set(err, KR_ERR_FORMAT, "%s: 'description' must be a string", origin);
            continue;
        }
        int d = -1;
        for (int i = 0; i < KR_EVAL_GATES; i++)
            if (strcmp(it->string, k_gates[i].key) == 0) d = i;
        if (d < 0) {
            st = kr_error_set(err, KR_ERR_FORMAT, "%s: unknown gate '%s' (known: %s)", origin,
                              it->string, keys);
            break;
        }
        if (g->has[d]) {
            st = kr_error_set(err, KR_ERR_FORMAT, "%s: gate '%s' is given twice", origin,
                              it->string);
            break;
        }
        if (!cJSON_IsNumber(it)) {
            st = kr_error_set(err, KR_ERR_FORMAT, "%s: gate '%s' must be a number", origin,
                              it->string);
            break;
        }
        double v = it->valuedouble;
        if (!(v >= k_gates[d].lo && v <= k_gates[d].hi) || !isfinite(v)) {
            st = kr_error_set(err, KR_ERR_FORMAT, "%s: gate '%s' = %g is outside %g..%g", origin,
                              it->string, v, k_gates[d].lo, k_gates[d].hi);
            break;
        }
        g->has[d] = 1;
        g->threshold[d] = v;
        n++;
    }
    if (st == KR_OK && n == 0)
        st = kr_error_set(err, KR_ERR_FORMAT, "%s: no gate thresholds (keys: %s)", origin, keys);
    cJSON_Delete(root);
    if (st != KR_OK) {
        free(g);
        return st;
    }
    *out = g;
    return KR_OK;
}

kr_status kr_quant_gate_load(const char *path, kr_quant_gate **out, kr_error *err) {
    if (!out || !path) return kr_error_set(err, KR_ERR_INVALID_ARG, "gate: NULL argument");
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    kr_status st = kr_read_file(path, GATE_FILE_MAX, "gate file", &text, &len, err);
    if (st == KR_OK) st = kr_quant_gate_parse(text, len, path, out, err);
    free(text);
    return st;
}

void kr_quant_gate_free(kr_quant_gate *g) { free(g); }

kr_status kr_eval_quant_apply_gate(kr_eval_quant_report *r, const kr_quant_gate *g, int *failed,
                                   kr_error *err) {
    if (!r || !g) return kr_error_set(err, KR_ERR_INVALID_ARG, "gate: no report or gate");
    r->n_gates = 0;
    int bad = 0;
    for (int i = 0; i < KR_EVAL_GATES; i++) {
        if (!g->has[i]) continue;
        kr_eval_gate_result *res = &r->gates[r->n_gates++];
        res->def = i;
        res->threshold = g->threshold[i];
        res->value = k_gates[i].value(r);
        res->pass = k_gates[i].is_max ? res->value <= res->threshold
                                      : res->value >= res->threshold; /* NaN fails both */
        bad += !res->pass;
    }
    snprintf(r->gate_origin, sizeof r->gate_origin, "%s", g->origin);
    r->gated = 1;
    if (failed) *failed = bad;
    return KR_OK;
}

/* "above the maximum 0.01 by 0.0023" / "below the minimum ..." / "not measurable". */
static void describe(const kr_eval_gate_result *res, char *buf, size_t cap) {
    const gate_def *d = &k_gates[res->def];
    if (isnan(res->value))
        snprintf(buf, cap, "%s could not be measured (NaN), threshold %s %.6g", d->metric,
                 d->is_max ? "<=" : ">=", res->threshold);
    else if (res->pass)
        snprintf(buf, cap, "%s = %.6g, %s %.6g", d->metric, res->value,
                 d->is_max ? "<=" : ">=", res->threshold);
    else
        snprintf(buf, cap, "%s = %.6g, %s the %s %.6g by %.6g", d->metric, res->value,
                 d->is_max ? "above" : "below", d->is_max ? "maximum" : "minimum", res->threshold,
                 fabs(res->value - res->threshold));
}

kr_status kr_eval_quant_write_gate_failures(const kr_eval_quant_report *r, FILE *f, kr_error *err) {
    if (!r || !f) return kr_error_set(err, KR_ERR_INVALID_ARG, "gate: no report or file");
    for (int i = 0; i < r->n_gates; i++) {
        if (r->gates[i].pass) continue;
        char what[256];
        describe(&r->gates[i], what, sizeof what);
        fprintf(f, "gate %s failed: %s\n", k_gates[r->gates[i].def].key, what);
    }
    return ferror(f) ? kr_error_set(err, KR_ERR_IO, "gate: writing failed") : KR_OK;
}

void kr_eval_gate_write_markdown(const kr_eval_quant_report *r, FILE *md) {
    if (!r->gated) return;
    int failed = 0;
    for (int i = 0; i < r->n_gates; i++) failed += !r->gates[i].pass;
    fprintf(md, "Acceptance gates (%s): **%s**%s\n\n", r->gate_origin, failed ? "FAIL" : "pass",
            failed ? "" : ", every gate holds");
    fprintf(md, "| gate | value | threshold | result |\n|---|---:|---:|---|\n");
    for (int i = 0; i < r->n_gates; i++) {
        const kr_eval_gate_result *res = &r->gates[i];
        const gate_def *d = &k_gates[res->def];
        char value[32];
        if (isfinite(res->value))
            snprintf(value, sizeof value, "%.6g", res->value);
        else
            snprintf(value, sizeof value, "n/a");
        fprintf(md, "| `%s` (%s) | %s | %s %.6g | %s |\n", d->key, d->metric, value,
                d->is_max ? "<=" : ">=", res->threshold, res->pass ? "pass" : "**fail**");
    }
    fprintf(md, "\n");
}

void kr_eval_gate_add_json(const kr_eval_quant_report *r, cJSON *root) {
    if (!r->gated) return;
    cJSON *g = cJSON_AddObjectToObject(root, "gates");
    cJSON_AddStringToObject(g, "file", r->gate_origin);
    int failed = 0;
    cJSON *list = cJSON_AddArrayToObject(g, "results");
    for (int i = 0; i < r->n_gates; i++) {
        const kr_eval_gate_result *res = &r->gates[i];
        const gate_def *d = &k_gates[res->def];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "gate", d->key);
        cJSON_AddStringToObject(o, "metric", d->metric);
        if (isfinite(res->value))
            cJSON_AddNumberToObject(o, "value", res->value);
        else
            cJSON_AddNullToObject(o, "value");
        cJSON_AddNumberToObject(o, "threshold", res->threshold);
        cJSON_AddBoolToObject(o, "pass", res->pass);
        cJSON_AddItemToArray(list, o);
        failed += !res->pass;
    }
    cJSON_AddBoolToObject(g, "passed", failed == 0);
    cJSON_AddNumberToObject(g, "failed", failed);
}
