/*
 * common/fields — JSON request-field readers (see fields.h).
 */
#include "common/fields.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/strbuf.h"

kr_status kr_api_error_set(kr_api_error *err, int status, const char *field, const char *fmt, ...) {
    if (!err) return KR_ERR_INVALID_ARG;
    char msg[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    err->status = status;
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    if (field && *field)
        snprintf(err->message, sizeof err->message, "%s: %s", field, msg);
    else
        snprintf(err->message, sizeof err->message, "%s", msg);
    return KR_ERR_INVALID_ARG;
}

const char *kr_json_sanitize(const char *s, char *out, size_t cap) {
    size_t j = 0;
    for (size_t i = 0; s && s[i] && j + 4 < cap; i++)
        out[j++] = (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\') ? s[i] : '?';
    if (s && strlen(s) > j && cap >= 4) {
        if (j > cap - 4) j = cap - 4;
        memcpy(out + j, "...", 3);
        j += 3;
    }
    out[j] = '\0';
    return out;
}

const char *kr_json_type_name(const cJSON *v) {
    if (!v) return "nothing";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "an unknown value";
}

/* " (max_paths)" when the upper bound is a server setting, so the client sees which cap. */
static const char *cap_note(const kr_field *f, char *buf, size_t cap) {
    if (!f->max_key) return "";
    snprintf(buf, cap, " (%s)", f->max_key);
    return buf;
}

static kr_status read_int(const kr_field *f, const cJSON *v, kr_api_error *err) {
    char note[64];
    const long lo = (long)f->min, hi = (long)f->max;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return kr_api_error_set(err, 400, f->name, "must be an integer in %ld..%ld%s, got %s", lo,
                                hi, cap_note(f, note, sizeof note), kr_json_type_name(v));
    const double x = v->valuedouble;
    if (x != floor(x) || x < f->min || x > f->max)
        return kr_api_error_set(err, 400, f->name, "must be an integer in %ld..%ld%s, got %.10g",
                                lo, hi, cap_note(f, note, sizeof note), x);
    *(int *)f->out = (int)x;
    return KR_OK;
}

/* NUMBER and FLOAT: a finite number in the range; FLOAT also stays above an exclusive lower
 * bound once rounded to float32 (a top_p of 1e-50 is 0 for the engine). */
static kr_status read_number(const kr_field *f, const cJSON *v, kr_api_error *err) {
    char note[64];
    const int excl = (f->flags & KR_FIELD_MIN_EXCL) != 0;
    const char *open = excl ? "(" : "[";
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return kr_api_error_set(err, 400, f->name, "must be a number in %s%g, %g]%s, got %s", open,
                                f->min, f->max, cap_note(f, note, sizeof note),
                                cJSON_IsNumber(v) ? "a non-finite number" : kr_json_type_name(v));
    const double x = v->valuedouble;
    if ((excl ? !(x > f->min) : x < f->min) || x > f->max)
        return kr_api_error_set(err, 400, f->name, "must be a number in %s%g, %g]%s, got %.10g",
                                open, f->min, f->max, cap_note(f, note, sizeof note), x);
    if (f->type == KR_FIELD_FLOAT) {
        const float xf = (float)x;
        if (excl && !((double)xf > f->min))
            return kr_api_error_set(err, 400, f->name, "%.10g is %g in float32", x, (double)xf);
        *(float *)f->out = xf;
    } else {
        *(double *)f->out = x;
    }
    return KR_OK;
}

/* Seeds are u64; JSON numbers are exact only up to 2^53, so larger seeds come as strings. */
static kr_status read_seed(const kr_field *f, const cJSON *v, kr_api_error *err) {
    if (cJSON_IsNumber(v)) {
        const double x = v->valuedouble;
        if (!isfinite(x) || x != floor(x) || x < 0 || x > 9007199254740992.0)
            return kr_api_error_set(err, 400, f->name,
                                    "must be an integer in 0..2^53 (or a decimal string for "
                                    "larger 64-bit seeds), got %.10g",
                                    x);
        *(uint64_t *)f->out = (uint64_t)x;
        return KR_OK;
    }
    if (!cJSON_IsString(v))
        return kr_api_error_set(err, 400, f->name, "must be an unsigned integer, got %s",
                                kr_json_type_name(v));
    const char *s = v->valuestring;
    const size_t n = strlen(s);
    uint64_t acc = 0;
    int ok = n > 0 && n <= 20;
    for (size_t i = 0; ok && i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            ok = 0;
        else if (acc > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
            ok = 0;
        else
            acc = acc * 10 + (uint64_t)(s[i] - '0');
    }
    if (!ok) {
        char ex[48];
        return kr_api_error_set(err, 400, f->name, "'%s' is not an unsigned 64-bit integer",
                                kr_json_sanitize(s, ex, sizeof ex));
    }
    *(uint64_t *)f->out = acc;
    return KR_OK;
}

/* "\"a\" or \"b\"", "\"a\", \"b\" or \"c\"". */
static void choice_list(const char *const *choices, char *buf, size_t cap) {
    int n = 0;
    while (choices[n]) n++;
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len < cap; i++) {
        const char *sep = i == 0 ? "" : i == n - 1 ? " or " : ", ";
        int w = snprintf(buf + len, cap - len, "%s\"%s\"", sep, choices[i]);
        if (w < 0) break;
        len += (size_t)w;
    }
}

static kr_status read_choice(const kr_field *f, const cJSON *v, kr_api_error *err) {
    char list[256], ex[48];
    choice_list(f->choices, list, sizeof list);
    if (!cJSON_IsString(v))
        return kr_api_error_set(err, 400, f->name, "must be %s, got %s", list,
                                kr_json_type_name(v));
    for (int i = 0; f->choices[i]; i++)
        if (!strcmp(v->valuestring, f->choices[i])) {
            *(int *)f->out = i;
            return KR_OK;
        }
    return kr_api_error_set(err, 400, f->name, "must be %s, got '%s'", list,
                            kr_json_sanitize(v->valuestring, ex, sizeof ex));
}

kr_status kr_field_read_value(const kr_field *f, const cJSON *v, kr_api_error *err) {
    if (!v || cJSON_IsNull(v)) {
        if (f->flags & KR_FIELD_REQUIRED) return kr_api_error_set(err, 400, f->name, "required");
        return KR_OK;
    }
    switch (f->type) {
    case KR_FIELD_INT: return read_int(f, v, err);
    case KR_FIELD_NUMBER:
    case KR_FIELD_FLOAT: return read_number(f, v, err);
    case KR_FIELD_BOOL:
        if (!cJSON_IsBool(v))
            return kr_api_error_set(err, 400, f->name, "must be true or false, got %s",
                                    kr_json_type_name(v));
        *(int *)f->out = cJSON_IsTrue(v) ? 1 : 0;
        return KR_OK;
    case KR_FIELD_SEED: return read_seed(f, v, err);
    case KR_FIELD_CHOICE: return read_choice(f, v, err);
    case KR_FIELD_VALUE: *(const cJSON **)f->out = v; return KR_OK;
    }
    return kr_api_error_set(err, 500, f->name, "unknown field type");
}

/* "unknown field (expected a, b, c)", listing the route's own fields. */
static kr_status unknown_field(const char *key, const kr_field *fields, int n, kr_api_error *err) {
    kr_sb sb = { 0 };
    for (int i = 0; i < n; i++) kr_sb_appendf(&sb, "%s%s", i ? ", " : "", fields[i].name);
    char ex[64];
    kr_status st = kr_api_error_set(err, 400, kr_json_sanitize(key, ex, sizeof ex),
                                    "unknown field (expected %s)", sb.data ? sb.data : "none");
    kr_sb_free(&sb);
    return st;
}

kr_status kr_fields_read(const cJSON *obj, kr_field *fields, int n, kr_api_error *err) {
    if (!cJSON_IsObject(obj))
        return kr_api_error_set(err, 400, "body", "must be a JSON object, got %s",
                                kr_json_type_name(obj));
    const cJSON *given[64] = { 0 };
    if (n > (int)(sizeof given / sizeof given[0]))
        return kr_api_error_set(err, 500, NULL, "too many fields in one table");
    int seen[64] = { 0 };
    for (int i = 0; i < n; i++) fields[i].present = 0;
    for (const cJSON *it = obj->child; it; it = it->next) {
        int k = 0;
        while (k < n && strcmp(it->string, fields[k].name) != 0) k++;
        if (k == n) return unknown_field(it->string, fields, n, err);
        if (seen[k]) return kr_api_error_set(err, 400, fields[k].name, "given twice");
        seen[k] = 1;
        given[k] = cJSON_IsNull(it) ? NULL : it; /* null: the default */
    }
    for (int i = 0; i < n; i++) {
        kr_status st = kr_field_read_value(&fields[i], given[i], err);
        if (st != KR_OK) return st;
        fields[i].present = given[i] != NULL;
    }
    return KR_OK;
}
