/* finetune/config — see config.h and kronos/finetune.h. */
#include "finetune/config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

typedef enum key_type { T_INT, T_I64, T_FLOAT, T_BOOL, T_TRI, T_STRING, T_LIST } key_type;

static const char *const k_type_names[] = {
    "int", "int", "float", "bool", "bool", "string", "list"
};

typedef struct key_def {
    const char *key;
    key_type type;
    size_t offset;
    const char *flag;
    const char *def; /* default as text */
    double min, max; /* numeric range (inclusive) */
    int ignored;
    const char *doc;
} key_def;

#define OFF(f) offsetof(struct kr_finetune_config, f)
#define BIG 1e15

/* Defaults are finetune_csv/config_loader.py's (the values it uses when a key is absent). */
static const key_def k_keys[] = {
    /* data */
    { "data.data_path", T_LIST, OFF(data_path), "data-path", "", 0, 0, 0,
      "candle files (CSV or JSON) or directories of them; a YAML list for several" },
    { "data.lookback_window", T_INT, OFF(lookback_window), "lookback-window", "512", 2, 1 << 20, 0,
      "rows a window's statistics and context come from" },
    { "data.predict_window", T_INT, OFF(predict_window), "predict-window", "48", 0, 1 << 20, 0,
      "rows after the lookback; a window has lookback + predict + 1 rows" },
    { "data.max_context", T_INT, OFF(max_context), "max-context", "512", 1, 1 << 20, 1,
      "unused by the official training too: windows are lookback + predict + 1 rows" },
    { "data.clip", T_FLOAT, OFF(clip), "clip", "5.0", 1e-6, 1e6, 0,
      "normalised inputs are clipped to +-clip" },
    { "data.train_ratio", T_FLOAT, OFF(train_ratio), "train-ratio", "0.9", 0, 1, 0,
      "first part of each series (by time) for training" },
    { "data.val_ratio", T_FLOAT, OFF(val_ratio), "val-ratio", "0.1", 0, 1, 0,
      "next part of each series for validation" },
    { "data.test_ratio", T_FLOAT, OFF(test_ratio), "test-ratio", "0.0", 0, 1, 0,
      "the rest after train and validation is the test part (not trained on)" },
    /* training */
    { "training.tokenizer_epochs", T_INT, OFF(tokenizer_epochs), "tokenizer-epochs", "30", 0, 1e6,
      0, "epochs of the tokenizer stage" },
    { "training.basemodel_epochs", T_INT, OFF(basemodel_epochs), "basemodel-epochs", "30", 0, 1e6,
      0, "epochs of the predictor stage" },
    { "training.epochs", T_INT, OFF(epochs), "epochs", "30", 0, 1e6, 0,
      "epochs of a stage whose own key is not set" },
    { "training.batch_size", T_INT, OFF(batch_size), "batch-size", "160", 1, 1 << 20, 0,
      "windows per optimizer step" },
    { "training.log_interval", T_INT, OFF(log_interval), "log-interval", "50", 1, 1e9, 0,
      "steps between step lines of the JSON-lines log" },
    { "training.num_workers", T_INT, OFF(num_workers), "num-workers", "6", 0, 1e6, 1,
      "data loading runs on the training threads (kronos.threads)" },
    { "training.seed", T_I64, OFF(seed), "seed", "100", -BIG, BIG, 0,
      "data order, dropout, s1 sampling and fresh weights" },
    { "training.tokenizer_learning_rate", T_FLOAT, OFF(tokenizer_learning_rate),
      "tokenizer-learning-rate", "0.0002", 1e-12, 10, 0, "tokenizer OneCycleLR max_lr" },
    { "training.predictor_learning_rate", T_FLOAT, OFF(predictor_learning_rate),
      "predictor-learning-rate", "0.00004", 1e-12, 10, 0, "predictor OneCycleLR max_lr" },
    { "training.adam_beta1", T_FLOAT, OFF(adam_beta1), "adam-beta1", "0.9", 0, 0.999999, 0,
      "AdamW beta1: OneCycleLR cycles it 0.95 -> 0.85 -> 0.95 (torch's default), so unused" },
    { "training.adam_beta2", T_FLOAT, OFF(adam_beta2), "adam-beta2", "0.95", 0, 0.999999, 0,
      "predictor AdamW beta2 (the tokenizer uses 0.999, as the official)" },
    { "training.adam_weight_decay", T_FLOAT, OFF(adam_weight_decay), "adam-weight-decay", "0.1", 0,
      10, 0, "AdamW decoupled weight decay, both stages" },
    { "training.accumulation_steps", T_INT, OFF(accumulation_steps), "accumulation-steps", "1", 1,
      1 << 20, 0, "tokenizer micro-batches per step (batch_size / steps windows each)" },
    /* model_paths */
    { "model_paths.pretrained_tokenizer", T_STRING, OFF(pretrained_tokenizer),
      "pretrained-tokenizer", "", 0, 0, 0,
      "tokenizer directory (or a pulled hub name) to start from" },
    { "model_paths.pretrained_predictor", T_STRING, OFF(pretrained_predictor),
      "pretrained-predictor", "", 0, 0, 0,
      "predictor directory (or a pulled hub name) to start from" },
    { "model_paths.exp_name", T_STRING, OFF(exp_name), "exp-name", "default_experiment", 0, 0, 0,
      "experiment name; {exp_name} in paths is replaced by it" },
    { "model_paths.base_path", T_STRING, OFF(base_path), "base-path", "", 0, 0, 0,
      "base_save_path defaults to {base_path}/{exp_name}" },
    { "model_paths.base_save_path", T_STRING, OFF(base_save_path), "base-save-path", "", 0, 0, 0,
      "where both stages and the logs are written" },
    { "model_paths.finetuned_tokenizer", T_STRING, OFF(finetuned_tokenizer), "finetuned-tokenizer",
      "", 0, 0, 0,
      "tokenizer the predictor stage encodes with (default: the tokenizer stage's best_model)" },
    { "model_paths.tokenizer_save_name", T_STRING, OFF(tokenizer_save_name), "tokenizer-save-name",
      "tokenizer", 0, 0, 0, "tokenizer stage directory under base_save_path" },
    { "model_paths.basemodel_save_name", T_STRING, OFF(basemodel_save_name), "basemodel-save-name",
      "basemodel", 0, 0, 0, "predictor stage directory under base_save_path" },
    /* experiment */
    { "experiment.name", T_STRING, OFF(name), "name", "kronos_custom_finetune", 0, 0, 0,
      "recorded in the log" },
    { "experiment.description", T_STRING, OFF(description), "description", "", 0, 0, 0,
      "recorded in the log" },
    { "experiment.use_comet", T_BOOL, OFF(use_comet), "use-comet", "false", 0, 0, 1,
      "no Comet here: the JSON-lines log has every figure" },
    { "experiment.train_tokenizer", T_BOOL, OFF(train_tokenizer), "train-tokenizer", "true", 0, 0,
      0, "run the tokenizer stage (--skip-tokenizer: false)" },
    { "experiment.train_basemodel", T_BOOL, OFF(train_basemodel), "train-basemodel", "true", 0, 0,
      0, "run the predictor stage (--skip-predictor: false)" },
    { "experiment.skip_existing", T_BOOL, OFF(skip_existing), "skip-existing", "false", 0, 0, 0,
      "skip a stage whose best_model exists" },
    { "experiment.pre_trained", T_TRI, OFF(pre_trained), "pre-trained", "", 0, 0, 0,
      "both pre_trained_* when they are not set" },
    { "experiment.pre_trained_tokenizer", T_TRI, OFF(pre_trained_tokenizer),
      "pre-trained-tokenizer", "true", 0, 0, 0,
      "false: fresh weights of the pretrained tokenizer's shape (config.json)" },
    { "experiment.pre_trained_predictor", T_TRI, OFF(pre_trained_predictor),
      "pre-trained-predictor", "true", 0, 0, 0,
      "false: fresh weights of the pretrained predictor's shape (config.json)" },
    /* device, distributed */
    { "device.use_cuda", T_BOOL, OFF(use_cuda), "use-cuda", "true", 0, 0, 1,
      "kronos trains on the CPU" },
    { "device.device_id", T_INT, OFF(device_id), "device-id", "0", 0, 1e6, 1,
      "kronos trains on the CPU" },
    { "distributed.use_ddp", T_BOOL, OFF(use_ddp), "use-ddp", "false", 0, 0, 1,
      "one process; kronos.threads sets its threads" },
    { "distributed.backend", T_STRING, OFF(backend), "backend", "nccl", 0, 0, 1,
      "one process; kronos.threads sets its threads" },
    /* kronos */
    { "kronos.threads", T_INT, OFF(threads), "threads", "0", 0, 4096, 0,
      "compute threads (0: every core); results depend on seed and threads" },
    { "kronos.steps_per_epoch", T_I64, OFF(steps_per_epoch), "steps-per-epoch", "0", 0, BIG, 0,
      "steps of an epoch (0: every training window once, the official)" },
    { "kronos.val_windows", T_I64, OFF(val_windows), "val-windows", "0", 0, BIG, 0,
      "validation windows scored, spread evenly (0: all, the official)" },
    { "kronos.official_eval", T_BOOL, OFF(official_eval), "official-eval", "true", 0, 0, 0,
      "also report the official model.eval() validation loss of the predictor" },
    { "kronos.dropout", T_BOOL, OFF(dropout), "dropout", "true", 0, 0, 0,
      "the checkpoint's dropout rates apply in training (the official)" },
    { "kronos.db", T_STRING, OFF(db), "db", "", 0, 0, 0,
      "candle store (file or postgresql:// URL) for kronos.symbols / all_symbols" },
    { "kronos.symbols", T_LIST, OFF(symbols), "symbol", "", 0, 0, 0,
      "stored symbols to train on (with kronos.db)" },
    { "kronos.interval", T_STRING, OFF(interval), "interval", "", 0, 0, 0,
      "the stored interval of those symbols (needed when a symbol has several)" },
    { "kronos.all_symbols", T_BOOL, OFF(all_symbols), "all", "false", 0, 0, 0,
      "every stored series" },
    { "kronos.force", T_BOOL, OFF(force), "force", "false", 0, 0, 0,
      "overwrite a non-empty stage directory" },
    { "kronos.resume", T_BOOL, OFF(resume), "resume", "false", 0, 0, 0,
      "continue from the stages' checkpoint/ directories" },
    { "kronos.dry_run", T_BOOL, OFF(dry_run), "dry-run", "false", 0, 0, 0,
      "check config, data, paths and memory, report, and stop" },
    { "kronos.eval_only", T_BOOL, OFF(eval_only), "eval-only", "false", 0, 0, 0,
      "score the starting checkpoints on the validation windows, train and write nothing" },
    { "kronos.memory_limit_mb", T_I64, OFF(memory_limit_mb), "memory-limit-mb", "0", 0, BIG, 0,
      "memory the run may take (0: the machine's available memory)" },
    { "kronos.checkpoint_every", T_I64, OFF(checkpoint_every), "checkpoint-every", "0", 0, BIG, 0,
      "steps between resumable checkpoints (0: at each epoch end)" },
};

#define N_KEYS ((int)(sizeof k_keys / sizeof k_keys[0]))

int kr_finetune_n_keys(void) { return N_KEYS; }

const kr_finetune_key *kr_finetune_key_at(int i) {
    static kr_finetune_key table[sizeof k_keys / sizeof k_keys[0]];
    static int ready;
    if (i < 0 || i >= N_KEYS) return NULL;
    if (!ready) {
        /* Written once with the same values: harmless if two threads race here. */
        for (int k = 0; k < N_KEYS; k++)
            table[k] = (kr_finetune_key){ k_keys[k].key,     k_type_names[k_keys[k].type],
                                          k_keys[k].flag,    k_keys[k].def,
                                          k_keys[k].ignored, k_keys[k].doc };
        ready = 1;
    }
    return &table[i];
}

int kr_ft_key_index(const char *key) {
    if (!key) return -1;
    for (int i = 0; i < N_KEYS; i++)
        if (!strcmp(k_keys[i].key, key)) return i;
    return -1;
}

int kr_ft_key_was_set(const kr_finetune_config *cfg, const char *key) {
    int i = kr_ft_key_index(key);
    return i >= 0 && cfg->set[i];
}

/* ---------------------------------------------------------------- field access */

static void *field(const kr_finetune_config *cfg, const key_def *k) {
    return (char *)cfg + k->offset;
}

static void list_clear(kr_str_list *l) {
    for (int i = 0; i < l->n; i++) free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

static kr_status list_add(kr_str_list *l, const char *v, const char *key, kr_error *err) {
    char **grown = realloc(l->items, (size_t)(l->n + 1) * sizeof *grown);
    if (!grown) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", key);
    l->items = grown;
    if (!(l->items[l->n] = strdup(v)))
        return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", key);
    l->n++;
    return KR_OK;
}

static kr_status set_string(char **slot, const char *v, const char *key, kr_error *err) {
    char *copy = strdup(v);
    if (!copy) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", key);
    free(*slot);
    *slot = copy;
    return KR_OK;
}

/* ---------------------------------------------------------------- scalars */

static int is_null(const char *v) {
    return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

/* YAML 1.1 booleans, as PyYAML reads them. 1 / 0, or -1 when v is none. */
static int parse_bool(const char *v) {
    static const char *const yes[] = {
        "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"
    };
    static const char *const no[] = { "false", "False", "FALSE", "no", "No",
                                      "NO",    "off",   "Off",   "OFF" };
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (!strcmp(v, yes[i])) return 1;
        if (!strcmp(v, no[i])) return 0;
    }
    return -1;
}

/* A decimal integer, the whole string. */
static int parse_int64(const char *v, int64_t *out) {
    const char *p = v;
    if (*p == '+' || *p == '-') p++;
    if (!*p) return -1;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return -1;
    errno = 0;
    char *end = NULL;
    long long x = strtoll(v, &end, 10);
    if (errno || *end) return -1;
    *out = x;
    return 0;
}

/* A finite number, the whole string ("1e-6" too, which PyYAML's YAML 1.1 reads as text). */
static int parse_double(const char *v, double *out) {
    if (!*v) return -1;
    for (const char *q = v; *q; q++)
        if (!strchr("0123456789+-.eE", *q)) return -1; /* no hex, inf, nan */
    errno = 0;
    char *end = NULL;
    double x = strtod(v, &end);
    if (errno || *end || !isfinite(x)) return -1;
    *out = x;
    return 0;
}

static kr_status wrong_type(const key_def *k, const char *what, const char *value, kr_error *err) {
    static const char *const want[] = { "an integer",
                                        "an integer",
                                        "a number",
                                        "true or false",
                                        "true or false",
                                        "a string",
                                        "a string or a list of them" };
    /* "got the string '32'", "got '32.5'" (what ""), "got null" (no value). */
    return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: wrong type: expected %s, got %s%s%s%s%s",
                        k->key, want[k->type], what, *what && value ? " " : "", value ? "'" : "",
                        value ? value : "", value ? "'" : "");
}

static kr_status out_of_range(const key_def *k, double v, kr_error *err) {
    return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: %g is out of range (%g .. %g)", k->key, v,
                        k->min, k->max);
}

/* Sets key k from text `v`; `quoted`: v was a string (a quoted YAML scalar, a Python str). */
static kr_status set_value(kr_finetune_config *cfg, int idx, const char *v, int quoted,
                           kr_error *err) {
    const key_def *k = &k_keys[idx];
    void *f = field(cfg, k);
    kr_status st = KR_OK;
    if (k->type == T_STRING || k->type == T_LIST) {
        const char *text = !quoted && is_null(v) ? "" : v;
        if (k->type == T_STRING)
            st = set_string((char **)f, text, k->key, err);
        else {
            list_clear((kr_str_list *)f);
            if (*text) st = list_add((kr_str_list *)f, text, k->key, err);
        }
        if (st == KR_OK) cfg->set[idx] = 1;
        return st;
    }
    if (quoted) return wrong_type(k, "the string", v, err);
    if (k->type == T_TRI && is_null(v)) {
        *(int *)f = -1;
        cfg->set[idx] = 1;
        return KR_OK;
    }
    if (is_null(v)) return wrong_type(k, "null", NULL, err);
    int b = parse_bool(v);
    if (k->type == T_BOOL || k->type == T_TRI) {
        if (b < 0) return wrong_type(k, "", v, err);
        *(int *)f = b;
        cfg->set[idx] = 1;
        return KR_OK;
    }
    if (b >= 0) return wrong_type(k, "the boolean", v, err);
    if (k->type == T_FLOAT) {
        double x;
        if (parse_double(v, &x) != 0) return wrong_type(k, "", v, err);
        if (x < k->min || x > k->max) return out_of_range(k, x, err);
        *(double *)f = x;
    } else {
        int64_t x;
        if (parse_int64(v, &x) != 0) {
            double d;
            return wrong_type(k, parse_double(v, &d) == 0 ? "the number" : "", v, err);
        }
        if ((double)x < k->min || (double)x > k->max) return out_of_range(k, (double)x, err);
        if (k->type == T_INT)
            *(int *)f = (int)x;
        else
            *(int64_t *)f = x;
    }
    cfg->set[idx] = 1;
    return KR_OK;
}

static int lookup(const char *key, kr_error *err) {
    int i = kr_ft_key_index(key);
    if (i < 0) {
        /* Name the section when it is known, so a typo in a key reads as one. */
        const char *dot = key ? strchr(key, '.') : NULL;
        int known_section = 0;
        for (int k = 0; dot && k < N_KEYS; k++)
            if (!strncmp(k_keys[k].key, key, (size_t)(dot - key) + 1)) known_section = 1;
        kr_error_set(err, KR_ERR_INVALID_ARG, "%s: unknown %s", key ? key : "(null)",
                     known_section ? "key" : "section or key");
    }
    return i;
}

/* ---------------------------------------------------------------- public */

kr_status kr_finetune_config_create(kr_finetune_config **out, kr_error *err) {
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "finetune config: NULL argument");
    kr_finetune_config *cfg = calloc(1, sizeof *cfg);
    if (cfg) cfg->set = calloc((size_t)N_KEYS, 1);
    if (!cfg || !cfg->set) {
        free(cfg);
        return kr_error_set(err, KR_ERR_NOMEM, "finetune config: out of memory");
    }
    for (int i = 0; i < N_KEYS; i++) {
        kr_status st = set_value(cfg, i, k_keys[i].def, 0, err);
        if (st != KR_OK) {
            kr_finetune_config_free(cfg);
            return st;
        }
        cfg->set[i] = 0;
    }
    cfg->pre_trained = -1;
    *out = cfg;
    return KR_OK;
}

void kr_finetune_config_free(kr_finetune_config *cfg) {
    if (!cfg) return;
    for (int i = 0; i < N_KEYS; i++) {
        void *f = field(cfg, &k_keys[i]);
        if (k_keys[i].type == T_STRING) free(*(char **)f);
        if (k_keys[i].type == T_LIST) list_clear((kr_str_list *)f);
    }
    free(cfg->set);
    free(cfg);
}

/* The index of the key a setter writes value to, or -1 (KR_ERR_INVALID_ARG for the caller)
 * with err saying why: a NULL argument or an unknown key. */
static int key_to_write(const kr_finetune_config *cfg, const char *key, const char *value,
                        kr_error *err) {
    if (!cfg || !value) {
        kr_error_set(err, KR_ERR_INVALID_ARG, "finetune config: NULL argument");
        return -1;
    }
    return lookup(key, err);
}

kr_status kr_finetune_config_set(kr_finetune_config *cfg, const char *key, const char *value,
                                 kr_error *err) {
    int i = key_to_write(cfg, key, value, err);
    return i < 0 ? KR_ERR_INVALID_ARG : set_value(cfg, i, value, 0, err);
}

kr_status kr_finetune_config_set_string(kr_finetune_config *cfg, const char *key, const char *value,
                                        kr_error *err) {
    int i = key_to_write(cfg, key, value, err);
    return i < 0 ? KR_ERR_INVALID_ARG : set_value(cfg, i, value, 1, err);
}

kr_status kr_finetune_config_add(kr_finetune_config *cfg, const char *key, const char *value,
                                 kr_error *err) {
    int i = key_to_write(cfg, key, value, err);
    if (i < 0) return KR_ERR_INVALID_ARG;
    if (k_keys[i].type != T_LIST) return wrong_type(&k_keys[i], "a list", NULL, err);
    if (!*value) return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: empty item", key);
    kr_status st = list_add((kr_str_list *)field(cfg, &k_keys[i]), value, key, err);
    if (st == KR_OK) cfg->set[i] = 1;
    return st;
}

kr_status kr_finetune_config_get(const kr_finetune_config *cfg, const char *key, char *out,
                                 size_t cap, kr_error *err) {
    if (!cfg || !out || !cap)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "finetune config: NULL argument");
    int i = lookup(key, err);
    if (i < 0) return KR_ERR_INVALID_ARG;
    const key_def *k = &k_keys[i];
    const void *f = field(cfg, k);
    out[0] = 0;
    switch (k->type) {
    case T_INT: snprintf(out, cap, "%d", *(const int *)f); break;
    case T_I64: snprintf(out, cap, "%lld", (long long)*(const int64_t *)f); break;
    case T_FLOAT: {
        /* The shortest of %.15g..%.17g that reads back as the same double ("0.9", not
         * "0.90000000000000002"). */
        double v = *(const double *)f;
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(out, cap, "%.*g", prec, v);
            if (strtod(out, NULL) == v) break;
        }
        break;
    }
    case T_BOOL: snprintf(out, cap, "%s", *(const int *)f ? "true" : "false"); break;
    case T_TRI: {
        int v = *(const int *)f;
        snprintf(out, cap, "%s", v < 0 ? "null" : v ? "true" : "false");
        break;
    }
    case T_STRING: snprintf(out, cap, "%s", *(char *const *)f ? *(char *const *)f : ""); break;
    case T_LIST: {
        const kr_str_list *l = f;
        size_t used = 0;
        for (int j = 0; j < l->n && used < cap; j++)
            used += (size_t)snprintf(out + used, cap - used, "%s%s", j ? "\n" : "", l->items[j]);
        break;
    }
    }
    return KR_OK;
}

int kr_finetune_config_ignored(const kr_finetune_config *cfg, char *out, size_t cap) {
    int n = 0;
    size_t used = 0;
    if (out && cap) out[0] = 0;
    for (int i = 0; i < N_KEYS; i++) {
        if (!k_keys[i].ignored || !cfg->set[i]) continue;
        if (out && used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%s", n ? ", " : "", k_keys[i].key);
        n++;
    }
    return n;
}

/* ---------------------------------------------------------------- derived values */

int kr_ft_substitute(const char *s, const char *exp_name, char *out, size_t cap) {
    static const char tag[] = "{exp_name}";
    size_t used = 0;
    while (*s) {
        const char *hit = strstr(s, tag);
        size_t lit = hit ? (size_t)(hit - s) : strlen(s);
        size_t add = lit + (hit ? strlen(exp_name) : 0);
        if (used + add + 1 > cap) return -1;
        memcpy(out + used, s, lit);
        used += lit;
        if (hit) {
            memcpy(out + used, exp_name, strlen(exp_name));
            used += strlen(exp_name);
            s = hit + sizeof tag - 1;
        } else
            s += lit;
    }
    out[used] = 0;
    return 0;
}

static kr_status join(char *out, const char *a, const char *b, const char *key, kr_error *err) {
    size_t la = strlen(a);
    int n = snprintf(out, KR_FINETUNE_PATH_MAX, "%s%s%s", a, la && a[la - 1] == '/' ? "" : "/", b);
    if (n < 0 || n >= KR_FINETUNE_PATH_MAX)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: path too long", key);
    return KR_OK;
}

kr_status kr_ft_config_resolve(const kr_finetune_config *cfg, kr_ft_resolved *r, kr_error *err) {
    memset(r, 0, sizeof *r);
    const int epochs_given = kr_ft_key_was_set(cfg, "training.epochs");
    r->tokenizer_epochs = !kr_ft_key_was_set(cfg, "training.tokenizer_epochs") && epochs_given
                              ? cfg->epochs
                              : cfg->tokenizer_epochs;
    r->basemodel_epochs = !kr_ft_key_was_set(cfg, "training.basemodel_epochs") && epochs_given
                              ? cfg->epochs
                              : cfg->basemodel_epochs;
    /* experiment.pre_trained stands for both when their own keys are not given (or null). */
    const int unified = cfg->pre_trained >= 0 ? cfg->pre_trained : 1;
    r->pre_trained_tokenizer = kr_ft_key_was_set(cfg, "experiment.pre_trained_tokenizer") &&
                                       cfg->pre_trained_tokenizer >= 0
                                   ? cfg->pre_trained_tokenizer
                                   : unified;
    r->pre_trained_predictor = kr_ft_key_was_set(cfg, "experiment.pre_trained_predictor") &&
                                       cfg->pre_trained_predictor >= 0
                                   ? cfg->pre_trained_predictor
                                   : unified;

    const char *exp = cfg->exp_name ? cfg->exp_name : "";
    if (cfg->base_save_path && *cfg->base_save_path) {
        if (kr_ft_substitute(cfg->base_save_path, exp, r->base_save_path,
                             sizeof r->base_save_path) != 0)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "model_paths.base_save_path: too long");
    } else if (cfg->base_path && *cfg->base_path && *exp) {
        char base[KR_FINETUNE_PATH_MAX];
        if (kr_ft_substitute(cfg->base_path, exp, base, sizeof base) != 0)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "model_paths.base_path: too long");
        kr_status st = join(r->base_save_path, base, exp, "model_paths.base_save_path", err);
        if (st != KR_OK) return st;
    } else
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "model_paths.base_save_path is not set (nor base_path and exp_name "
                            "to make it from): say where to write (--out DIR)");
    if (!cfg->tokenizer_save_name || !*cfg->tokenizer_save_name ||
        strchr(cfg->tokenizer_save_name, '/'))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "model_paths.tokenizer_save_name: must be a directory name");
    if (!cfg->basemodel_save_name || !*cfg->basemodel_save_name ||
        strchr(cfg->basemodel_save_name, '/'))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "model_paths.basemodel_save_name: must be a directory name");
    if (!strcmp(cfg->tokenizer_save_name, cfg->basemodel_save_name) ||
        !strcmp(cfg->tokenizer_save_name, "logs") || !strcmp(cfg->basemodel_save_name, "logs"))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "model_paths.tokenizer_save_name and basemodel_save_name must differ "
                            "from each other and from 'logs'");
    kr_status st = join(r->tokenizer_dir, r->base_save_path, cfg->tokenizer_save_name,
                        "model_paths.tokenizer_save_name", err);
    if (st == KR_OK)
        st = join(r->predictor_dir, r->base_save_path, cfg->basemodel_save_name,
                  "model_paths.basemodel_save_name", err);
    if (st == KR_OK) st = join(r->log_dir, r->base_save_path, "logs", "logs", err);
    if (st != KR_OK) return st;
    if (cfg->finetuned_tokenizer && *cfg->finetuned_tokenizer) {
        if (kr_ft_substitute(cfg->finetuned_tokenizer, exp, r->finetuned_tokenizer,
                             sizeof r->finetuned_tokenizer) != 0)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "model_paths.finetuned_tokenizer: too long");
    } else
        st = join(r->finetuned_tokenizer, r->tokenizer_dir, "best_model",
                  "model_paths.finetuned_tokenizer", err);
    return st;
}
