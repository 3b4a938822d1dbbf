/*
 * server/config — defaults, the JSON config file and its validation (see config.h).
 *
 * Ranges live in one table (k_ranges) shared by the file parser and kr_server_config_validate,
 * so a value set by a flag is held to the same bounds as one from the file.
 */
#include "server/config.h"

#include "common/limits.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analyst/narrative.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "series/calendar.h"
#include "series/timezone.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* A config file larger than this is not a config file. */
#define KR_CONFIG_MAX_BYTES ((size_t)1 << 20)
/* The largest share of the machine's RAM a KV budget may take, as PCT% or as bytes. */
#define KR_KV_BUDGET_MAX_PCT 90

void kr_server_config_defaults(kr_server_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = 8080;
    snprintf(c->quant, sizeof c->quant, "f32");
    snprintf(c->kv_dtype, sizeof c->kv_dtype, "f32");
    c->drift_sample = 0.05;
    c->drift_kv_share = 0.25;
    c->request_timeout_s = 120.0;
    c->max_body_bytes = (size_t)8 << 20;
    c->max_paths = KR_LIMIT_PATHS;
    c->max_pred_len = KR_LIMIT_PRED_LEN;
    c->max_context_limit = KR_LIMIT_CONTEXT;
    c->max_connections = 512;
    c->max_connections_per_ip = 128;
    c->read_timeout_s = 30.0;
    c->max_rows = 100000;
    c->max_request_memory = (size_t)128 << 20;
    c->max_memory_in_flight = (size_t)512 << 20;
    c->max_horizon = KR_LIMIT_HORIZON;
    c->max_analyze_paths = KR_LIMIT_ANALYZE_PATHS;
    c->max_lookback = KR_LIMIT_LOOKBACK;
    c->max_calibrate = KR_LIMIT_CALIBRATE;
    c->max_symbols = KR_LIMIT_SYMBOLS;
    c->batch_size = KR_STATIC_BATCH_ROWS_DEFAULT;
    c->offline_batch_wait_ms = 500;
    c->sched = kr_context_default_params();
    c->sched.batch_wait_ms = 50; /* a server batches: requests arrive independently */
    c->sched.tune = 1;
    c->sched.tune_window_s = 300; /* pressure must hold 5 minutes, relief 10 (the tuner) */
    c->sched.tune_relax_s = 600;
    c->llm_timeout_s = 60.0;
    c->analysis_priority = KR_PRIORITY_LOW;
    snprintf(c->norm, sizeof c->norm, "exact");
    c->norm_refresh_bars = 16;
}

/* ------------------------------------------------------------------ helpers */

static kr_status bad(kr_error *err, const char *label, const char *key, const char *what) {
    return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: %s: %s", label, key, what);
}

static kr_status get_int(const cJSON *it, const char *label, const char *key, long min, long max,
                         int *out, kr_error *err) {
    char msg[160];
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) ||
        it->valuedouble != floor(it->valuedouble) || it->valuedouble < (double)min ||
        it->valuedouble > (double)max) {
        snprintf(msg, sizeof msg, "must be an integer in %ld..%ld", min, max);
        return bad(err, label, key, msg);
    }
    *out = (int)it->valuedouble;
    return KR_OK;
}

static kr_status get_double(const cJSON *it, const char *label, const char *key, double min_excl,
                            double max, double *out, kr_error *err) {
    char msg[160];
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || !(it->valuedouble > min_excl) ||
        it->valuedouble > max) {
        if (min_excl < 0 && min_excl > -1e-200)
            snprintf(msg, sizeof msg, "must be a number in [0, %g]", max);
        else
            snprintf(msg, sizeof msg, "must be a number in (%g, %g]", min_excl, max);
        return bad(err, label, key, msg);
    }
    *out = it->valuedouble;
    return KR_OK;
}

static kr_status get_bool(const cJSON *it, const char *label, const char *key, int *out,
                          kr_error *err) {
    if (!cJSON_IsBool(it)) return bad(err, label, key, "must be true or false");
    *out = cJSON_IsTrue(it) ? 1 : 0;
    return KR_OK;
}

static kr_status get_string(const cJSON *it, const char *label, const char *key, char *out,
                            size_t cap, kr_error *err) {
    if (!cJSON_IsString(it) || !it->valuestring) return bad(err, label, key, "must be a string");
    size_t n = strlen(it->valuestring);
    if (n == 0) return bad(err, label, key, "must not be empty");
    if (n >= cap) return bad(err, label, key, "is too long");
    memcpy(out, it->valuestring, n + 1);
    return KR_OK;
}

int kr_server_parse_clock(const char *s, int *minutes) {
    if (!s) return -1;
    /* Exactly HH:MM: a looser format would make "9:3" mean 09:03 or 09:30 by accident. */
    if (strlen(s) != 5 || !isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]) ||
        s[2] != ':' || !isdigit((unsigned char)s[3]) || !isdigit((unsigned char)s[4]))
        return -1;
    int h = (s[0] - '0') * 10 + (s[1] - '0'), m = (s[3] - '0') * 10 + (s[4] - '0');
    if (h > 23 || m > 59) return -1;
    *minutes = h * 60 + m;
    return 0;
}

kr_status kr_server_parse_kv_budget(const char *s, size_t *bytes, kr_error *err) {
    if (!s || !*s) return kr_error_set(err, KR_ERR_INVALID_ARG, "kv_budget: empty value");
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v <= 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "kv_budget: '%s' is not BYTES (e.g. 536870912, 512MiB) or PCT%% "
                            "(e.g. 25%%)",
                            s);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const double ram = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    if (!strcmp(end, "%")) {
        if (v > KR_KV_BUDGET_MAX_PCT)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "kv_budget: %s of RAM leaves nothing for the rest (max 90%%)", s);
        if (ram <= 0)
            return kr_error_set(err, KR_ERR_UNSUPPORTED,
                                "kv_budget: cannot read the RAM size; give BYTES");
        *bytes = (size_t)(ram * v / 100.0);
        return KR_OK;
    }
    static const struct {
        const char *suffix;
        double mul;
    } k_units[] = {
        { "", 1.0 },
        { "K", 1e3 },
        { "M", 1e6 },
        { "G", 1e9 },
        { "KiB", 1024.0 },
        { "MiB", 1048576.0 },
        { "GiB", 1073741824.0 },
    };
    for (size_t i = 0; i < sizeof k_units / sizeof k_units[0]; i++) {
        if (strcmp(end, k_units[i].suffix)) continue;
        double b = v * k_units[i].mul;
        if (b < 65536 || b > 1e15 || (k_units[i].mul == 1.0 && v != floor(v)))
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "kv_budget: '%s' must be a whole number of bytes in 64KiB..1PB", s);
        /* A budget the machine cannot hold is no budget: admission would never wait, and the
         * process would be killed for memory instead (the same bound as PCT%). */
        if (ram > 0 && b > ram * KR_KV_BUDGET_MAX_PCT / 100.0)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "kv_budget: '%s' (%.1f GiB) is more than %d%% of this machine's "
                                "RAM (%.1f GiB): it leaves nothing for the model and the rest",
                                s, b / 1073741824.0, KR_KV_BUDGET_MAX_PCT, ram / 1073741824.0);
        *bytes = (size_t)b;
        return KR_OK;
    }
    return kr_error_set(err, KR_ERR_INVALID_ARG,
                        "kv_budget: unknown unit in '%s' (use bytes, K, M, G, KiB, MiB, GiB or %%)",
                        s);
}

/* ------------------------------------------------------------------ scheduler keys */

/* One entry per integer scheduler/server knob: the JSON key, its range and where it goes. The
 * profile parser reuses the scheduler subset. */
typedef struct int_key {
    const char *key;
    long min, max;
    size_t off; /* offset into kr_server_config */
    size_t prof_off; /* offset into kr_server_profile, or 0 when not overridable */
} int_key;

#define CFG_OFF(f) offsetof(kr_server_config, f)
#define PROF_OFF(f) offsetof(kr_server_profile, f)

static const int_key k_int_keys[] = {
    { "port", 0, 65535, CFG_OFF(port), 0 },
    { "threads", 0, 1024, CFG_OFF(threads), 0 },
    { "max_paths", 1, 4096, CFG_OFF(max_paths), 0 },
    { "max_pred_len", 1, KR_LIMIT_PRED_LEN_CAP, CFG_OFF(max_pred_len), 0 },
    { "max_context_limit", 2, 65536, CFG_OFF(max_context_limit), 0 },
    { "max_connections", 4, 65536, CFG_OFF(max_connections), 0 },
    { "max_connections_per_ip", 0, 65536, CFG_OFF(max_connections_per_ip), 0 },
    { "max_rows", 2, 10000000, CFG_OFF(max_rows), 0 },
    { "max_horizon", 1, 65536, CFG_OFF(max_horizon), 0 },
    { "max_analyze_paths", 1, 4096, CFG_OFF(max_analyze_paths), 0 },
    { "max_lookback", 2, 65536, CFG_OFF(max_lookback), 0 },
    { "max_calibrate", 0, 1000, CFG_OFF(max_calibrate), 0 },
    { "max_symbols", 1, 64, CFG_OFF(max_symbols), 0 },
    { "batch_size", 0, 1 << 20, CFG_OFF(batch_size), 0 },
    { "norm_refresh_bars", 1, 1 << 20, CFG_OFF(norm_refresh_bars), 0 },
    { "offline_batch_wait_ms", 0, 60000, CFG_OFF(offline_batch_wait_ms), 0 },
    { "max_models", 0, KR_SERVER_MAX_MODELS + 1, CFG_OFF(max_models), 0 },
    { "batch_wait_ms", 0, 60000, CFG_OFF(sched.batch_wait_ms), PROF_OFF(batch_wait_ms) },
    { "max_batch_tokens", 1, 1 << 24, CFG_OFF(sched.max_batch_tokens), PROF_OFF(max_batch_tokens) },
    { "max_running", 1, 65536, CFG_OFF(sched.max_running), PROF_OFF(max_running) },
    { "max_queue", 1, 1 << 20, CFG_OFF(sched.max_queue), PROF_OFF(max_queue) },
};

typedef struct dbl_key {
    const char *key;
    double min_excl, max;
    size_t off, prof_off;
} dbl_key;

static const dbl_key k_dbl_keys[] = {
    { "request_timeout_s", 0.0, 86400.0, CFG_OFF(request_timeout_s), 0 },
    { "read_timeout_s", 0.0, 3600.0, CFG_OFF(read_timeout_s), 0 },
    { "drain_delay_s", -1e-300, 600.0, CFG_OFF(drain_delay_s), 0 },
    { "drift_sample", -1e-300, 1.0, CFG_OFF(drift_sample), 0 },
    { "drift_kv_share", 0.0, 0.9, CFG_OFF(drift_kv_share), 0 },
    { "target_queue_p95_s", 0.0, 3600.0, CFG_OFF(sched.target_queue_p95_s),
      PROF_OFF(target_queue_p95_s) },
    { "target_ttft_p95_s", 0.0, 3600.0, CFG_OFF(sched.target_ttft_p95_s),
      PROF_OFF(target_ttft_p95_s) },
    { "tune_window_s", 0.0, 86400.0, CFG_OFF(sched.tune_window_s), 0 },
    { "tune_relax_s", 0.0, 86400.0, CFG_OFF(sched.tune_relax_s), 0 },
    { "llm_timeout_s", 0.0, 86400.0, CFG_OFF(llm_timeout_s), 0 },
};

typedef struct bool_key {
    const char *key;
    size_t off;
} bool_key;

static const bool_key k_bool_keys[] = {
    { "tune", CFG_OFF(sched.tune) },
    { "prefix_cache", CFG_OFF(sched.prefix_cache) },
    { "static_batching", CFG_OFF(sched.static_batching) },
    { "backfill", CFG_OFF(sched.backfill) },
    { "allow_nonfinite_weights", CFG_OFF(allow_nonfinite_weights) },
    { "no_mmap", CFG_OFF(no_mmap) },
};

typedef struct str_key {
    const char *key;
    size_t off, cap;
} str_key;

static const str_key k_str_keys[] = {
    { "model", CFG_OFF(model), KR_SERVER_PATH_MAX },
    { "tokenizer", CFG_OFF(tokenizer), KR_SERVER_PATH_MAX },
    { "host", CFG_OFF(host), 256 },
    { "quant", CFG_OFF(quant), 16 },
    { "kv_dtype", CFG_OFF(kv_dtype), 8 },
    { "api_key_file", CFG_OFF(api_key_file), KR_SERVER_PATH_MAX },
    { "db", CFG_OFF(db), KR_SERVER_PATH_MAX },
    { "web_root", CFG_OFF(web_root), KR_SERVER_PATH_MAX },
    { "access_log", CFG_OFF(access_log), KR_SERVER_PATH_MAX },
    { "timezone", CFG_OFF(timezone), 64 },
    { "market", CFG_OFF(market), 32 },
    { "calendar_dir", CFG_OFF(calendar_dir), KR_SERVER_PATH_MAX },
    { "llm_url", CFG_OFF(llm_url), KR_SERVER_PATH_MAX },
    { "llm_model", CFG_OFF(llm_model), 128 },
    { "norm", CFG_OFF(norm), 16 },
    { "default_model", CFG_OFF(default_model), 64 },
};

/* Byte sizes: a number of bytes or a string with a unit ("128MiB"), range in bytes. */
typedef struct size_key {
    const char *key;
    size_t min, max, off;
} size_key;

static const size_key k_size_keys[] = {
    { "max_body_bytes", 1024, (size_t)1 << 30, CFG_OFF(max_body_bytes) },
    { "max_request_memory", (size_t)1 << 20, (size_t)1 << 40, CFG_OFF(max_request_memory) },
    { "max_memory_in_flight", (size_t)1 << 20, (size_t)1 << 40, CFG_OFF(max_memory_in_flight) },
};

/* A byte count: an integer number, or a string "N" / "N<unit>" (K, M, G, KiB, MiB, GiB). */
static kr_status get_size(const cJSON *it, const char *label, const size_key *sk, size_t *out,
                          kr_error *err) {
    char msg[160];
    snprintf(msg, sizeof msg, "must be a number of bytes in %zu..%zu, or a string like \"128MiB\"",
             sk->min, sk->max);
    double v = -1;
    if (cJSON_IsNumber(it)) {
        v = it->valuedouble;
    } else if (cJSON_IsString(it)) {
        static const struct {
            const char *suffix;
            double mul;
        } k_units[] = {
            { "", 1.0 },       { "K", 1e3 },         { "M", 1e6 },           { "G", 1e9 },
            { "KiB", 1024.0 }, { "MiB", 1048576.0 }, { "GiB", 1073741824.0 }
        };
        char *end = NULL;
        errno = 0;
        double x = strtod(it->valuestring, &end);
        if (end != it->valuestring && !errno && isfinite(x))
            for (size_t i = 0; i < N_OF(k_units); i++)
                if (!strcmp(end, k_units[i].suffix)) v = x * k_units[i].mul;
    }
    if (!isfinite(v) || v != floor(v) || v < (double)sk->min || v > (double)sk->max)
        return bad(err, label, sk->key, msg);
    *out = (size_t)v;
    return KR_OK;
}

/* latency_mode: "normal" or "tight". */
static kr_status get_latency_mode(const cJSON *it, const char *label, const char *key, int *tight,
                                  kr_error *err) {
    if (!cJSON_IsString(it) ||
        (strcmp(it->valuestring, "normal") && strcmp(it->valuestring, "tight")))
        return bad(err, label, key, "must be \"normal\" or \"tight\"");
    *tight = !strcmp(it->valuestring, "tight");
    return KR_OK;
}

/* ------------------------------------------------------------------ models */

int kr_server_model_name_ok(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n >= 64) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (!(isalnum(ch) || ch == '-' || ch == '_' || ch == '.')) return 0;
    }
    return strcmp(name, ".") && strcmp(name, "..");
}

static kr_status parse_precisions(const cJSON *arr, const char *label, const char *where,
                                  kr_server_model_entry *e, kr_error *err);

kr_status kr_server_model_entry_parse(const cJSON *mo, const char *name, const char *label,
                                      kr_server_model_entry *e, kr_error *err) {
    char where[96];
    snprintf(where, sizeof where, "models.%s", name);
    if (!kr_server_model_name_ok(name))
        return bad(err, label, where,
                   "a model name is 1-63 letters, digits, '-', '_' or '.' characters");
    if (!cJSON_IsObject(mo))
        return bad(err, label, where,
                   "must be an object {\"model\", \"tokenizer\", \"quant\", "
                   "\"kv_dtype\"}");
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    static const struct {
        const char *key;
        size_t off, cap;
    } k[] = {
        { "model", offsetof(kr_server_model_entry, model), KR_SERVER_PATH_MAX },
        { "tokenizer", offsetof(kr_server_model_entry, tokenizer), KR_SERVER_PATH_MAX },
        { "quant", offsetof(kr_server_model_entry, quant), 16 },
        { "kv_dtype", offsetof(kr_server_model_entry, kv_dtype), 8 },
    };
    const cJSON *precisions = NULL;
    for (const cJSON *it = mo->child; it; it = it->next) {
        size_t i = 0;
        while (i < N_OF(k) && strcmp(k[i].key, it->string)) i++;
        char key[160];
        snprintf(key, sizeof key, "%s.%s", where, it->string);
        if (!strcmp(it->string, "precisions")) {
            precisions = it;
            continue;
        }
        if (i == N_OF(k))
            return bad(err, label, key,
                       "unknown key (model, tokenizer, quant, kv_dtype, precisions)");
        kr_status st = get_string(it, label, key, (char *)e + k[i].off, k[i].cap, err);
        if (st != KR_OK) return st;
    }
    if (!e->model[0]) return bad(err, label, where, "needs \"model\": the checkpoint directory");
    static const char *const fmts[] = { "", "f32", "bf16", "int8", "fp8", "q4" };
    int ok = 0;
    for (size_t i = 0; i < N_OF(fmts); i++) ok |= !strcmp(e->quant, fmts[i]);
    if (!ok) return bad(err, label, where, "quant must be one of f32, bf16, int8, fp8, q4");
    if (e->kv_dtype[0] && strcmp(e->kv_dtype, "f32") && strcmp(e->kv_dtype, "bf16") &&
        strcmp(e->kv_dtype, "int8"))
        return bad(err, label, where, "kv_dtype must be one of f32, bf16, int8");
    return precisions ? parse_precisions(precisions, label, where, e, err) : KR_OK;
}

int kr_precision_bits(const char *quant) {
    static const struct {
        const char *name;
        int bits;
    } k[] = { { "f32", 32 }, { "bf16", 16 }, { "fp8", 8 }, { "int8", 8 }, { "q4", 4 } };
    for (size_t i = 0; quant && i < N_OF(k); i++)
        if (!strcmp(quant, k[i].name)) return k[i].bits;
    return 0;
}

/* "precisions": the ladder below the model's own precision, each rung lower than the one
 * before it and gated by an eval-quant report. */
static kr_status parse_precisions(const cJSON *arr, const char *label, const char *where,
                                  kr_server_model_entry *e, kr_error *err) {
    char key[160];
    snprintf(key, sizeof key, "%s.precisions", where);
    if (!cJSON_IsArray(arr))
        return bad(err, label, key, "must be an array of {\"quant\", \"gate_report\", ...}");
    int n = cJSON_GetArraySize(arr);
    if (n > KR_SERVER_MAX_PRECISIONS) return bad(err, label, key, "at most 3 precisions");
    int i = 0, prev_bits = kr_precision_bits(e->quant[0] ? e->quant : "f32");
    for (const cJSON *po = arr->child; po; po = po->next, i++) {
        kr_server_precision *p = &e->precisions[i];
        char at[200];
        snprintf(at, sizeof at, "%s[%d]", key, i);
        if (!cJSON_IsObject(po)) return bad(err, label, at, "must be an object");
        static const struct {
            const char *key;
            size_t off, cap;
        } k[] = {
            { "quant", offsetof(kr_server_precision, quant), 16 },
            { "method", offsetof(kr_server_precision, method), 16 },
            { "model", offsetof(kr_server_precision, model), 1024 },
            { "gate_report", offsetof(kr_server_precision, gate_report), 1024 },
        };
        for (const cJSON *it = po->child; it; it = it->next) {
            size_t j = 0;
            while (j < N_OF(k) && strcmp(k[j].key, it->string)) j++;
            char fk[260];
            snprintf(fk, sizeof fk, "%s.%s", at, it->string);
            if (j == N_OF(k))
                return bad(err, label, fk, "unknown key (quant, method, model, gate_report)");
            kr_status st = get_string(it, label, fk, (char *)p + k[j].off, k[j].cap, err);
            if (st != KR_OK) return st;
        }
        int bits = kr_precision_bits(p->quant);
        if (bits == 0 || bits == 32)
            return bad(err, label, at, "quant must be one of bf16, fp8, int8, q4");
        if (bits > prev_bits)
            return bad(err, label, at, "each precision must be lower than the one above it");
        prev_bits = bits;
        if (!p->gate_report[0])
            return bad(err, label, at,
                       "needs \"gate_report\": the `kronos eval-quant --gate FILE --json` report "
                       "it passed");
        if (!strcmp(p->method, "gptq") && !p->model[0])
            return bad(err, label, at,
                       "a gptq precision needs its checkpoint (\"model\": `kronos quantize "
                       "--method gptq --out DIR`)");
    }
    e->n_precisions = n;
    return KR_OK;
}

static kr_status parse_models(const cJSON *obj, const char *label, kr_server_config *c,
                              kr_error *err) {
    if (!cJSON_IsObject(obj))
        return bad(err, label, "models", "must be an object of name: {\"model\": dir, ...}");
    int n = cJSON_GetArraySize(obj);
    if (n > KR_SERVER_MAX_MODELS) {
        char msg[64];
        snprintf(msg, sizeof msg, "at most %d models, got %d", KR_SERVER_MAX_MODELS, n);
        return bad(err, label, "models", msg);
    }
    int i = 0;
    for (const cJSON *it = obj->child; it; it = it->next, i++) {
        for (const cJSON *prev = obj->child; prev != it; prev = prev->next)
            if (!strcmp(prev->string, it->string))
                return bad(err, label, "models", "duplicate name");
        kr_status st = kr_server_model_entry_parse(it, it->string, label, &c->models[i], err);
        if (st != KR_OK) return st;
    }
    c->n_models = n;
    return KR_OK;
}

/* ------------------------------------------------------------------ profiles */

static kr_status parse_profile(const cJSON *po, int index, const char *label, kr_server_profile *p,
                               kr_error *err) {
    char where[64];
    snprintf(where, sizeof where, "profiles[%d]", index);
    if (!cJSON_IsObject(po)) return bad(err, label, where, "must be an object");
    memset(p, 0, sizeof *p);
    p->batch_wait_ms = p->max_batch_tokens = p->max_running = p->max_queue = -1;
    p->target_queue_p95_s = p->target_ttft_p95_s = -1.0;
    p->static_batching = -1;
    int have_from = 0, have_to = 0;
    char key[160];
    for (const cJSON *it = po->child; it; it = it->next) {
        snprintf(key, sizeof key, "%s.%s", where, it->string);
        kr_status st = KR_OK;
        int known = 0;
        if (!strcmp(it->string, "name")) {
            known = 1;
            st = get_string(it, label, key, p->name, sizeof p->name, err);
            /* The name becomes a Prometheus label value and a log word: keep it plain. */
            for (const char *q = p->name; st == KR_OK && *q; q++)
                if (!isalnum((unsigned char)*q) && *q != '_' && *q != '-' && *q != '.')
                    return bad(err, label, key, "must use only letters, digits, '_', '-', '.'");
        } else if (!strcmp(it->string, "from") || !strcmp(it->string, "to")) {
            known = 1;
            int *dst = it->string[0] == 'f' ? &p->from_min : &p->to_min;
            if (!cJSON_IsString(it) || kr_server_parse_clock(it->valuestring, dst) != 0)
                return bad(err, label, key, "must be a local time \"HH:MM\" (00:00..23:59)");
            if (it->string[0] == 'f')
                have_from = 1;
            else
                have_to = 1;
        } else if (!strcmp(it->string, "static_batching")) {
            known = 1;
            st = get_bool(it, label, key, &p->static_batching, err);
        } else if (!strcmp(it->string, "latency_mode")) {
            known = 1;
            st = get_latency_mode(it, label, key, &p->latency_tight, err);
        } else if (!strcmp(it->string, "precision_floor")) {
            known = 1;
            st = get_string(it, label, key, p->precision_floor, sizeof p->precision_floor, err);
            if (st == KR_OK && kr_precision_bits(p->precision_floor) == 0)
                return bad(err, label, key, "must be one of f32, bf16, fp8, int8, q4");
        }
        for (size_t k = 0; !known && k < N_OF(k_int_keys); k++) {
            if (!k_int_keys[k].prof_off || strcmp(it->string, k_int_keys[k].key)) continue;
            known = 1;
            st = get_int(it, label, key, k_int_keys[k].min, k_int_keys[k].max,
                         (int *)((char *)p + k_int_keys[k].prof_off), err);
        }
        for (size_t k = 0; !known && k < N_OF(k_dbl_keys); k++) {
            if (!k_dbl_keys[k].prof_off || strcmp(it->string, k_dbl_keys[k].key)) continue;
            known = 1;
            st = get_double(it, label, key, k_dbl_keys[k].min_excl, k_dbl_keys[k].max,
                            (double *)((char *)p + k_dbl_keys[k].prof_off), err);
        }
        if (!known)
            return bad(err, label, key,
                       "unknown profile key (name, from, to, latency_mode, batch_wait_ms, "
                       "max_batch_tokens, max_running, max_queue, target_queue_p95_s, "
                       "target_ttft_p95_s, static_batching, precision_floor)");
        if (st != KR_OK) return st;
    }
    if (!p->name[0]) return bad(err, label, where, "needs a \"name\"");
    if (!have_from || !have_to)
        return bad(err, label, where, "needs \"from\" and \"to\" (\"HH:MM\")");
    if (p->from_min == p->to_min)
        return bad(err, label, where, "\"from\" equals \"to\": the profile would cover no time");
    if (p->latency_tight && p->batch_wait_ms > KR_TIGHT_WAIT_MAX_MS) {
        snprintf(key, sizeof key, "%s.batch_wait_ms", where);
        return bad(err, label, key, "latency_mode \"tight\" allows at most 20 ms");
    }
    return KR_OK;
}

static int profile_covers(const kr_server_profile *p, int m) {
    return p->from_min < p->to_min ? (m >= p->from_min && m < p->to_min)
                                   : (m >= p->from_min || m < p->to_min);
}

static kr_status parse_profiles(const cJSON *arr, const char *label, kr_server_config *c,
                                kr_error *err) {
    if (!cJSON_IsArray(arr)) return bad(err, label, "profiles", "must be an array of objects");
    int n = cJSON_GetArraySize(arr);
    if (n > KR_SERVER_MAX_PROFILES) {
        char msg[96];
        snprintf(msg, sizeof msg, "at most %d profiles, got %d", KR_SERVER_MAX_PROFILES, n);
        return bad(err, label, "profiles", msg);
    }
    int i = 0;
    for (const cJSON *po = arr->child; po; po = po->next, i++) {
        kr_status st = parse_profile(po, i, label, &c->profiles[i], err);
        if (st != KR_OK) return st;
        for (int j = 0; j < i; j++) {
            char where[64];
            snprintf(where, sizeof where, "profiles[%d]", i);
            if (!strcmp(c->profiles[j].name, c->profiles[i].name))
                return bad(err, label, where, "duplicate profile name");
            /* Overlaps would make the active profile depend on list order: refuse them. */
            for (int m = 0; m < 24 * 60; m++)
                if (profile_covers(&c->profiles[i], m) && profile_covers(&c->profiles[j], m)) {
                    char msg[160];
                    snprintf(msg, sizeof msg, "overlaps profile '%s' at %02d:%02d",
                             c->profiles[j].name, m / 60, m % 60);
                    return bad(err, label, where, msg);
                }
        }
    }
    c->n_profiles = n;
    return KR_OK;
}

const kr_server_profile *kr_server_profile_at(const kr_server_config *c, int minute_of_day) {
    for (int i = 0; c && i < c->n_profiles; i++)
        if (profile_covers(&c->profiles[i], minute_of_day)) return &c->profiles[i];
    return NULL;
}

kr_context_params kr_server_profile_apply(const kr_context_params *base,
                                          const kr_server_profile *p) {
    kr_context_params r = *base;
    if (!p) return r;
    if (p->batch_wait_ms >= 0) r.batch_wait_ms = p->batch_wait_ms;
    if (p->max_batch_tokens >= 0) r.max_batch_tokens = p->max_batch_tokens;
    if (p->max_running >= 0) r.max_running = p->max_running;
    if (p->max_queue >= 0) r.max_queue = p->max_queue;
    if (p->target_queue_p95_s >= 0) r.target_queue_p95_s = p->target_queue_p95_s;
    if (p->target_ttft_p95_s >= 0) r.target_ttft_p95_s = p->target_ttft_p95_s;
    if (p->static_batching >= 0) r.static_batching = p->static_batching;
    /* Tight without a wait of its own: the tight default, or the base's when shorter. */
    if (p->latency_tight && p->batch_wait_ms < 0 && r.batch_wait_ms > KR_TIGHT_WAIT_MS)
        r.batch_wait_ms = KR_TIGHT_WAIT_MS;
    return r;
}

const char *kr_server_profile_zone(const kr_server_config *c) {
    if (c->timezone[0]) return c->timezone;
    const kr_calendar *cal = NULL;
    if (c->market[0] && kr_calendar_find(c->market, &cal, NULL) == KR_OK && cal)
        return cal->timezone;
    return "";
}

kr_status kr_server_profile_minute(const kr_server_config *c, int64_t utc, int *minute,
                                   kr_error *err) {
    const char *zone = kr_server_profile_zone(c);
    int64_t local;
    if (zone[0]) {
        kr_tz tz;
        kr_status st = kr_tz_load(zone, &tz, err);
        if (st != KR_OK) return st;
        local = utc + kr_tz_offset(&tz, utc);
    } else {
        time_t t = (time_t)utc;
        struct tm lt;
        localtime_r(&t, &lt);
        local = (int64_t)lt.tm_hour * 3600 + lt.tm_min * 60;
    }
    int64_t sod = ((local % 86400) + 86400) % 86400;
    *minute = (int)(sod / 60);
    return KR_OK;
}

/* ------------------------------------------------------------------ document */

static kr_status parse_key(const cJSON *it, const char *label, kr_server_config *c, kr_error *err) {
    const char *k = it->string;
    for (size_t i = 0; i < N_OF(k_int_keys); i++)
        if (!strcmp(k, k_int_keys[i].key))
            return get_int(it, label, k, k_int_keys[i].min, k_int_keys[i].max,
                           (int *)((char *)c + k_int_keys[i].off), err);
    for (size_t i = 0; i < N_OF(k_dbl_keys); i++)
        if (!strcmp(k, k_dbl_keys[i].key))
            return get_double(it, label, k, k_dbl_keys[i].min_excl, k_dbl_keys[i].max,
                              (double *)((char *)c + k_dbl_keys[i].off), err);
    for (size_t i = 0; i < N_OF(k_bool_keys); i++)
        if (!strcmp(k, k_bool_keys[i].key))
            return get_bool(it, label, k, (int *)((char *)c + k_bool_keys[i].off), err);
    for (size_t i = 0; i < N_OF(k_str_keys); i++)
        if (!strcmp(k, k_str_keys[i].key))
            return get_string(it, label, k, (char *)c + k_str_keys[i].off, k_str_keys[i].cap, err);
    for (size_t i = 0; i < N_OF(k_size_keys); i++)
        if (!strcmp(k, k_size_keys[i].key))
            return get_size(it, label, &k_size_keys[i], (size_t *)((char *)c + k_size_keys[i].off),
                            err);
    if (!strcmp(k, "kv_budget")) {
        char buf[64];
        if (cJSON_IsNumber(it) && isfinite(it->valuedouble))
            snprintf(buf, sizeof buf, "%.0f", it->valuedouble);
        else if (cJSON_IsString(it) && strlen(it->valuestring) < sizeof buf)
            snprintf(buf, sizeof buf, "%s", it->valuestring);
        else
            return bad(err, label, k, "must be a number of bytes or a string \"BYTES\"|\"PCT%\"");
        kr_status st = kr_server_parse_kv_budget(buf, &c->sched.kv_budget_bytes, err);
        if (st != KR_OK) kr_error_prefix(err, "%s", label);
        return st;
    }
    if (!strcmp(k, "profiles")) return parse_profiles(it, label, c, err);
    if (!strcmp(k, "models")) return parse_models(it, label, c, err);
    if (!strcmp(k, "latency_mode")) return get_latency_mode(it, label, k, &c->latency_tight, err);
    return bad(err, label, k, "unknown key (see docs/api.md, \"Configuration\")");
}

kr_status kr_server_config_parse(const char *json, size_t len, const char *label,
                                 kr_server_config *c, kr_error *err) {
    if (!label) label = "config";
    if (!json || !c) return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: no input", label);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        size_t off = end && end >= json ? (size_t)(end - json) : 0;
        return kr_error_set(err, KR_ERR_FORMAT, "%s: invalid JSON near byte %zu", label, off);
    }
    kr_status st = KR_OK;
    if (!cJSON_IsObject(root)) {
        st = kr_error_set(err, KR_ERR_FORMAT, "%s: the top level must be a JSON object", label);
        goto done;
    }
    for (const cJSON *it = root->child; it && st == KR_OK; it = it->next) {
        for (const cJSON *prev = root->child; prev != it; prev = prev->next)
            if (!strcmp(prev->string, it->string)) {
                st = bad(err, label, it->string, "duplicate key");
                goto done;
            }
        st = parse_key(it, label, c, err);
    }
    if (st == KR_OK && c->latency_tight &&
        !cJSON_GetObjectItemCaseSensitive(root, "batch_wait_ms") &&
        c->sched.batch_wait_ms > KR_TIGHT_WAIT_MS)
        c->sched.batch_wait_ms = KR_TIGHT_WAIT_MS;
    if (st == KR_OK) st = kr_server_config_validate(c, err);
    if (st != KR_OK && err && strncmp(err->message, label, strlen(label)) != 0)
        kr_error_prefix(err, "%s", label);
done:
    cJSON_Delete(root);
    return st;
}

kr_status kr_server_config_load(const char *path, kr_server_config *c, kr_error *err) {
    char *buf = NULL;
    size_t n = 0;
    kr_status st = kr_read_file(path, KR_CONFIG_MAX_BYTES, "server config", &buf, &n, err);
    if (st == KR_OK) st = kr_server_config_parse(buf, n, path, c, err);
    free(buf);
    return st;
}

kr_status kr_server_config_validate(const kr_server_config *c, kr_error *err) {
    static const char *const fmts[] = { "f32", "bf16", "int8", "fp8", "q4" };
    int ok = 0;
    for (size_t i = 0; i < N_OF(fmts); i++) ok |= strcmp(c->quant, fmts[i]) == 0;
    if (!ok)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "quant: '%s' is not one of f32, bf16, int8, fp8, q4", c->quant);
    if (strcmp(c->kv_dtype, "f32") && strcmp(c->kv_dtype, "bf16") && strcmp(c->kv_dtype, "int8"))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kv_dtype: '%s' is not one of f32, bf16, int8",
                            c->kv_dtype);
    for (size_t i = 0; i < N_OF(k_int_keys); i++) {
        int v = *(const int *)((const char *)c + k_int_keys[i].off);
        if (v < k_int_keys[i].min || v > k_int_keys[i].max)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "%s: must be an integer in %ld..%ld, got %d", k_int_keys[i].key,
                                k_int_keys[i].min, k_int_keys[i].max, v);
    }
    for (size_t i = 0; i < N_OF(k_dbl_keys); i++) {
        double v = *(const double *)((const char *)c + k_dbl_keys[i].off);
        if (!(v > k_dbl_keys[i].min_excl) || v > k_dbl_keys[i].max)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: must be a number in (%g, %g], got %g",
                                k_dbl_keys[i].key, k_dbl_keys[i].min_excl, k_dbl_keys[i].max, v);
    }
    for (size_t i = 0; i < N_OF(k_size_keys); i++) {
        size_t v = *(const size_t *)((const char *)c + k_size_keys[i].off);
        if (v < k_size_keys[i].min || v > k_size_keys[i].max)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: must be in %zu..%zu bytes, got %zu",
                                k_size_keys[i].key, k_size_keys[i].min, k_size_keys[i].max, v);
    }
    if (c->max_request_memory > c->max_memory_in_flight)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "max_request_memory (%zu) exceeds max_memory_in_flight (%zu): no "
                            "request that large could ever be admitted",
                            c->max_request_memory, c->max_memory_in_flight);
    if (!c->host[0]) return kr_error_set(err, KR_ERR_INVALID_ARG, "host: must not be empty");
    if (c->default_model[0] && !kr_server_model_name_ok(c->default_model))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "default_model: '%s' is not a model name",
                            c->default_model);
    if (c->max_models > 0 && c->max_models < 1 + c->n_models)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "max_models (%d) is less than the main model plus \"models\" (%d)",
                            c->max_models, 1 + c->n_models);
    if (strcmp(c->norm, "exact") && strcmp(c->norm, "anchored"))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "norm: '%s' is not one of exact, anchored",
                            c->norm);
    if (c->latency_tight && c->sched.batch_wait_ms > KR_TIGHT_WAIT_MAX_MS)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "batch_wait_ms: latency_mode \"tight\" allows at most %d ms, got %d",
                            KR_TIGHT_WAIT_MAX_MS, c->sched.batch_wait_ms);
    if (c->market[0]) {
        const kr_calendar *cal = NULL;
        kr_status st = kr_calendar_find(c->market, &cal, err);
        if (st != KR_OK) {
            kr_error_prefix(err, "market");
            return st;
        }
    }
    const char *zone = kr_server_profile_zone(c);
    if (zone[0]) {
        kr_tz tz;
        kr_status st = kr_tz_load(zone, &tz, err);
        if (st != KR_OK) {
            kr_error_prefix(err, "timezone");
            return st;
        }
    }
    if (c->llm_url[0]) {
        char endpoint[KR_SERVER_PATH_MAX + 32];
        kr_status st = kr_narrative_endpoint(c->llm_url, endpoint, sizeof endpoint, err);
        if (st != KR_OK) {
            kr_error_prefix(err, "llm_url");
            return st;
        }
    }
    return KR_OK;
}
