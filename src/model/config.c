/*
 * model/config — config.json of a Kronos predictor or tokenizer directory: the constructor
 * keyword arguments that save_pretrained writes. See config.h.
 *
 * Parsing is strict about what the engine uses (type, integer-ness, range, the divisibility
 * the kernels rely on) and lenient about everything else (dropouts and the BSQ training
 * constants are ignored), so a real Hugging Face config loads unchanged and a wrong one
 * fails here, with the key named, rather than as a shape error deep in the loader.
 */
#include "model/config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "kernels/quant.h"

/* Real configs are ~300 bytes; anything far larger is not a config. */
#define CONFIG_MAX_BYTES (1 << 20)

/* Reads a whole (small) file. Caller frees *out. */
static kr_status read_small_file(const char *path, char **out, size_t *len, kr_error *err) {
    return kr_read_file(path, CONFIG_MAX_BYTES, "model config", out, len, err);
}

/* Parses the text as one JSON object (trailing whitespace allowed). */
static kr_status parse_object(const char *json, size_t len, const char *label, cJSON **out,
                              kr_error *err) {
    *out = NULL;
    if (!json && len) return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: NULL config text", label);
    const char *end = NULL;
    cJSON *root = len ? cJSON_ParseWithLengthOpts(json, len, &end, 0) : NULL;
    if (!root) {
        size_t at = (end && end >= json && end <= json + len) ? (size_t)(end - json) : 0;
        return kr_error_set(err, KR_ERR_FORMAT, "%s: not valid JSON (near byte %zu)", label, at);
    }
    for (const char *p = end; p < json + len; p++) {
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
            cJSON_Delete(root);
            return kr_error_set(err, KR_ERR_FORMAT, "%s: unexpected text after the JSON object",
                                label);
        }
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return kr_error_set(err, KR_ERR_FORMAT, "%s: top level is not a JSON object", label);
    }
    /* cJSON keeps duplicate keys and lookups return the first; a file that says d_model
     * twice is ambiguous, so refuse it. Configs have a dozen keys: quadratic is fine. */
    for (const cJSON *a = root->child; a; a = a->next) {
        for (const cJSON *b = a->next; b; b = b->next) {
            if (a->string && b->string && strcmp(a->string, b->string) == 0) {
                kr_error_set(err, KR_ERR_FORMAT, "%s: key '%.64s' appears twice", label, a->string);
                cJSON_Delete(root);
                return KR_ERR_FORMAT;
            }
        }
    }
    *out = root;
    return KR_OK;
}

/* A required integer key in [lo, hi]. */
static kr_status get_int(const cJSON *root, const char *key, int lo, int hi, const char *label,
                         int *out, kr_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) return kr_error_set(err, KR_ERR_FORMAT, "%s: missing key '%s'", label, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return kr_error_set(err, KR_ERR_FORMAT, "%s: key '%s' must be an integer", label, key);
    double d = v->valuedouble;
    if (d < lo || d > hi)
        return kr_error_set(err, KR_ERR_FORMAT, "%s: key '%s' = %.0f is out of range [%d, %d]",
                            label, key, d, lo, hi);
    *out = (int)d;
    return KR_OK;
}

/* An optional boolean key; absent gives `def` (the constructor default). */
static kr_status get_bool(const cJSON *root, const char *key, int def, const char *label, int *out,
                          kr_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) {
        *out = def;
        return KR_OK;
    }
    if (!cJSON_IsBool(v))
        return kr_error_set(err, KR_ERR_FORMAT, "%s: key '%s' must be true or false", label, key);
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return KR_OK;
}

/* Head split checks shared by both classes. `heads` describes the head count in messages
 * ("n_heads = 4"). RoPE rotates pairs of dimensions, so head_dim must be even. */
static kr_status check_heads(const char *label, int d_model, int n_heads, const char *heads,
                             kr_error *err) {
    if (d_model % n_heads != 0)
        return kr_error_set(err, KR_ERR_FORMAT, "%s: key 'd_model' = %d is not divisible by %s",
                            label, d_model, heads);
    if ((d_model / n_heads) % 2 != 0)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: key 'd_model' = %d split over %s gives head_dim %d, which "
                            "must be even for RoPE",
                            label, d_model, heads, d_model / n_heads);
    return KR_OK;
}

static kr_status check_n_heads(const char *label, int d_model, int n_heads, kr_error *err) {
    char heads[48];
    snprintf(heads, sizeof heads, "n_heads = %d", n_heads);
    return check_heads(label, d_model, n_heads, heads, err);
}

/* The optional "quantization" object of a quantised checkpoint. */
static kr_status get_quant(const cJSON *root, const char *label, kr_quant_config *q,
                           kr_error *err) {
    memset(q, 0, sizeof *q);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "quantization");
    if (!v) return KR_OK;
    if (!cJSON_IsObject(v))
        return kr_error_set(err, KR_ERR_FORMAT, "%s: key 'quantization' must be an object", label);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(v, "format");
    kr_wfmt fmt;
    if (!cJSON_IsString(f) || kr_wfmt_parse(f->valuestring, &fmt) != 0)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: key 'quantization.format' must be one of f32, bf16, int8, fp8, q4",
                            label);
    q->format = (int)fmt;
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(v, "group_size");
    if (fmt == KR_WFMT_Q4) {
        if (!cJSON_IsNumber(g) || (g->valuedouble != 32 && g->valuedouble != 64))
            return kr_error_set(err, KR_ERR_FORMAT,
                                "%s: key 'quantization.group_size' must be 32 or 64 for q4", label);
        q->group_size = (int)g->valuedouble;
    }
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(v, "method");
    if (cJSON_IsString(m)) snprintf(q->method, sizeof q->method, "%s", m->valuestring);
    return KR_OK;
}

/* An optional string key of at most cap - 1 bytes; absent leaves out empty. */
static kr_status get_string(const cJSON *root, const char *key, const char *label, char *out,
                            size_t cap, kr_error *err) {
    out[0] = 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return KR_OK;
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap)
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: key '%s' must be a string of at most %zu bytes", label, key,
                            cap - 1);
    snprintf(out, cap, "%s", v->valuestring);
    return KR_OK;
}

/* "intended_use": "demo" | "test" | "forecast" (the default when absent). A checkpoint that
 * calls itself a demo must never pass for a forecasting model, so a misspelt value is an error
 * rather than silently "forecast". */
static kr_status get_intended_use(const cJSON *root, const char *label, char *out, size_t cap,
                                  kr_error *err) {
    kr_status st = get_string(root, "intended_use", label, out, cap, err);
    if (st != KR_OK) return st;
    if (out[0] && strcmp(out, "demo") && strcmp(out, "test") && strcmp(out, "forecast"))
        return kr_error_set(
            err, KR_ERR_FORMAT,
            "%s: key 'intended_use' must be \"demo\", \"test\" or \"forecast\", got "
            "'%.32s'",
            label, out);
    if (!strcmp(out, "forecast")) out[0] = 0;
    return KR_OK;
}

#define TRY(x)                  \
    do {                        \
        kr_status rc_ = (x);    \
        if (rc_ != KR_OK) {     \
            cJSON_Delete(root); \
            return rc_;         \
        }                       \
    } while (0)

/* A config of the other class (a tokenizer's given as the predictor, or the reverse) would
 * only fail on its first missing key; say what it is instead. `own` is a key only this class
 * has, `other` one only the other class has. */
static kr_status check_class(const cJSON *root, const char *label, const char *own,
                             const char *other, const char *is, const char *expected,
                             kr_error *err) {
    if (cJSON_GetObjectItemCaseSensitive(root, own) ||
        !cJSON_GetObjectItemCaseSensitive(root, other))
        return KR_OK;
    return kr_error_set(err, KR_ERR_FORMAT,
                        "%s: this is a %s config (it has '%s', not '%s'), given where the %s "
                        "belongs",
                        label, is, other, own, expected);
}

kr_status kr_predictor_config_parse(const char *json, size_t len, const char *label,
                                    kr_predictor_config *cfg, kr_error *err) {
    if (!cfg) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_predictor_config_parse: NULL cfg");
    if (!label) label = "<predictor config>";
    cJSON *root;
    kr_status rc = parse_object(json, len, label, &root, err);
    if (rc != KR_OK) return rc;
    kr_predictor_config c;
    memset(&c, 0, sizeof c);
    TRY(check_class(root, label, "n_layers", "n_enc_layers", "tokenizer", "predictor", err));
    TRY(get_int(root, "s1_bits", 1, 16, label, &c.s1_bits, err));
    TRY(get_int(root, "s2_bits", 1, 16, label, &c.s2_bits, err));
    TRY(get_int(root, "n_layers", 1, 256, label, &c.n_layers, err));
    TRY(get_int(root, "d_model", 1, 16384, label, &c.d_model, err));
    TRY(get_int(root, "n_heads", 1, 16384, label, &c.n_heads, err));
    TRY(get_int(root, "ff_dim", 1, 65536, label, &c.ff_dim, err));
    /* Kronos.__init__ defaults learn_te to True; real configs always spell it out. */
    TRY(get_bool(root, "learn_te", 1, label, &c.learn_te, err));
    TRY(get_quant(root, label, &c.quant, err));
    TRY(get_intended_use(root, label, c.intended_use, sizeof c.intended_use, err));
    TRY(get_string(root, "source", label, c.source, sizeof c.source, err));
    TRY(check_n_heads(label, c.d_model, c.n_heads, err));
    /* The dependency-aware layer's cross-attention always has 4 heads. */
    TRY(check_heads(label, c.d_model, 4, "the 4 heads of the s2 cross-attention", err));
    cJSON_Delete(root);
    *cfg = c;
    return KR_OK;
}

kr_status kr_tokenizer_config_parse(const char *json, size_t len, const char *label,
                                    kr_tokenizer_config *cfg, kr_error *err) {
    if (!cfg) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_tokenizer_config_parse: NULL cfg");
    if (!label) label = "<tokenizer config>";
    cJSON *root;
    kr_status rc = parse_object(json, len, label, &root, err);
    if (rc != KR_OK) return rc;
    kr_tokenizer_config c;
    memset(&c, 0, sizeof c);
    TRY(check_class(root, label, "n_enc_layers", "n_layers", "predictor", "tokenizer", err));
    TRY(get_int(root, "d_in", 6, 6, label, &c.d_in, err));
    TRY(get_int(root, "d_model", 1, 16384, label, &c.d_model, err));
    TRY(get_int(root, "n_heads", 1, 16384, label, &c.n_heads, err));
    TRY(get_int(root, "ff_dim", 1, 65536, label, &c.ff_dim, err));
    TRY(get_int(root, "n_enc_layers", 1, 256, label, &c.n_enc_layers, err));
    TRY(get_int(root, "n_dec_layers", 1, 256, label, &c.n_dec_layers, err));
    TRY(get_int(root, "s1_bits", 1, 16, label, &c.s1_bits, err));
    TRY(get_int(root, "s2_bits", 1, 16, label, &c.s2_bits, err));
    TRY(get_quant(root, label, &c.quant, err));
    if (c.s1_bits != c.s2_bits) {
        cJSON_Delete(root);
        /* indices_to_bits splits the codebook in two equal halves. */
        return kr_error_set(err, KR_ERR_FORMAT,
                            "%s: key 's2_bits' = %d differs from 's1_bits' = %d (the tokenizer "
                            "needs them equal)",
                            label, c.s2_bits, c.s1_bits);
    }
    TRY(check_n_heads(label, c.d_model, c.n_heads, err));
    cJSON_Delete(root);
    *cfg = c;
    return KR_OK;
}

#undef TRY

kr_status kr_predictor_config_load(const char *path, kr_predictor_config *cfg, kr_error *err) {
    if (!path) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_predictor_config_load: NULL path");
    char *buf;
    size_t len;
    kr_status rc = read_small_file(path, &buf, &len, err);
    if (rc != KR_OK) return rc;
    rc = kr_predictor_config_parse(buf, len, path, cfg, err);
    free(buf);
    return rc;
}

kr_status kr_tokenizer_config_load(const char *path, kr_tokenizer_config *cfg, kr_error *err) {
    if (!path) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_tokenizer_config_load: NULL path");
    char *buf;
    size_t len;
    kr_status rc = read_small_file(path, &buf, &len, err);
    if (rc != KR_OK) return rc;
    rc = kr_tokenizer_config_parse(buf, len, path, cfg, err);
    free(buf);
    return rc;
}

/* One "key": value line; `last` omits the comma. Keys are emitted in sorted order by the
 * callers, matching json.dumps(sort_keys=True, indent=2) of save_pretrained. */
static void put_line(FILE *f, const char *key, const char *value, int last) {
    fprintf(f, "  \"%s\": %s%s\n", key, value, last ? "" : ",");
}

static void put_int(FILE *f, const char *key, int v, int last) {
    char buf[32];
    snprintf(buf, sizeof buf, "%d", v);
    put_line(f, key, buf, last);
}

/* A string value with JSON escapes for the characters that need them. */
static void put_string(FILE *f, const char *key, const char *v) {
    fprintf(f, "  \"%s\": \"", key);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputs("\",\n", f);
}

static void put_quant(FILE *f, const kr_quant_config *q) {
    if (q->format == KR_WFMT_F32) return;
    fprintf(f, "  \"quantization\": {\n    \"format\": \"%s\",\n",
            kr_wfmt_name((kr_wfmt)q->format));
    if (q->format == KR_WFMT_Q4) fprintf(f, "    \"group_size\": %d,\n", q->group_size);
    fprintf(f, "    \"method\": \"%s\",\n    \"tool\": \"kronos quantize\"\n  },\n",
            q->method[0] ? q->method : "rtn");
}

static kr_status finish_file(FILE *f, const char *path, kr_error *err) {
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return kr_error_set(err, KR_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return KR_OK;
}

kr_status kr_predictor_config_save(const char *path, const kr_predictor_config *cfg,
                                   kr_error *err) {
    if (!path || !cfg)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_predictor_config_save: NULL argument");
    FILE *f = fopen(path, "w");
    if (!f) return kr_error_set(err, KR_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    fputs("{\n", f);
    put_line(f, "attn_dropout_p", "0.0", 0);
    put_int(f, "d_model", cfg->d_model, 0);
    put_int(f, "ff_dim", cfg->ff_dim, 0);
    put_line(f, "ffn_dropout_p", "0.0", 0);
    if (cfg->intended_use[0]) put_string(f, "intended_use", cfg->intended_use);
    put_line(f, "learn_te", cfg->learn_te ? "true" : "false", 0);
    put_int(f, "n_heads", cfg->n_heads, 0);
    put_int(f, "n_layers", cfg->n_layers, 0);
    put_quant(f, &cfg->quant);
    put_line(f, "resid_dropout_p", "0.0", 0);
    put_int(f, "s1_bits", cfg->s1_bits, 0);
    put_int(f, "s2_bits", cfg->s2_bits, 0);
    if (cfg->source[0]) put_string(f, "source", cfg->source);
    put_line(f, "token_dropout_p", "0.0", 1);
    fputs("}\n", f);
    return finish_file(f, path, err);
}

kr_status kr_tokenizer_config_save(const char *path, const kr_tokenizer_config *cfg,
                                   kr_error *err) {
    if (!path || !cfg)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_tokenizer_config_save: NULL argument");
    FILE *f = fopen(path, "w");
    if (!f) return kr_error_set(err, KR_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    /* beta, gamma0, gamma, zeta and group_size only matter to the BSQ training loss; they
     * are written with the reference's usual values so the directory loads in PyTorch. */
    fputs("{\n", f);
    put_line(f, "attn_dropout_p", "0.0", 0);
    put_line(f, "beta", "0.05", 0);
    put_int(f, "d_in", cfg->d_in, 0);
    put_int(f, "d_model", cfg->d_model, 0);
    put_int(f, "ff_dim", cfg->ff_dim, 0);
    put_line(f, "ffn_dropout_p", "0.0", 0);
    put_line(f, "gamma", "1.1", 0);
    put_line(f, "gamma0", "1.0", 0);
    put_int(f, "group_size", 4, 0);
    put_int(f, "n_dec_layers", cfg->n_dec_layers, 0);
    put_int(f, "n_enc_layers", cfg->n_enc_layers, 0);
    put_int(f, "n_heads", cfg->n_heads, 0);
    put_quant(f, &cfg->quant);
    put_line(f, "resid_dropout_p", "0.0", 0);
    put_int(f, "s1_bits", cfg->s1_bits, 0);
    put_int(f, "s2_bits", cfg->s2_bits, 0);
    put_line(f, "zeta", "0.05", 1);
    fputs("}\n", f);
    return finish_file(f, path, err);
}
