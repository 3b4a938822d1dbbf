/*
 * kronos/finetune.h — fine-tuning a tokenizer and a predictor on your own candles, on a CPU:
 * the pipeline behind `kronos finetune` and the Python package's kronos.finetune().
 *
 * It is the official finetune_csv pipeline (github.com/shiyu-coder/Kronos, finetune_csv/):
 * two stages, each skippable — the tokenizer first, then the predictor on the fine-tuned
 * tokenizer's token ids — configured by the official YAML file as it is (data.*, training.*,
 * model_paths.*, experiment.*, device.*, distributed.*), with kronos's own settings in a
 * `kronos:` section. Where kronos differs on purpose (docs/finetune.md): windows are
 * normalised on their lookback rows only (the official whole-window statistics leak the
 * future into every input), and the predictor's validation runs the dependency-aware layer
 * causally as in training (the official model.eval() validation lets each position see later
 * positions' sampled s1; it is reported beside).
 *
 * Outputs (as the official): {base_save_path}/{tokenizer_save_name}/best_model and
 * {base_save_path}/{basemodel_save_name}/best_model, Hugging Face directories (config.json +
 * model.safetensors, the official tensor names) that kronos and the official from_pretrained
 * load; beside each, last_model/ (the last epoch) and checkpoint/ (what --resume continues
 * from: optimizer moments, step, schedule, RNG, data position); a JSON-lines log in
 * {base_save_path}/logs/finetune.jsonl.
 *
 * Usage: create a config, set keys (from a YAML file, flags, a Python dict), run:
 *     kr_finetune_config *cfg; kr_finetune_config_create(&cfg, &err);
 *     kr_finetune_config_load_yaml(cfg, "config.yaml", &err);
 *     kr_finetune_config_set(cfg, "training.batch_size", "16", &err);
 *     kr_finetune_run(cfg, on_progress, user, &result, &err);
 * Every key is named "section.key" as in the YAML file; kr_finetune_key_at lists them.
 */
#ifndef KRONOS_FINETUNE_H
#define KRONOS_FINETUNE_H

#include <stddef.h>
#include <stdint.h>

#include "kronos/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- configuration */

typedef struct kr_finetune_config kr_finetune_config;

/* A configuration holding every key's default. Caller owns *out. */
KR_API kr_status kr_finetune_config_create(kr_finetune_config **out, kr_error *err);
KR_API void kr_finetune_config_free(kr_finetune_config *cfg);

/* Reads a YAML config file: sections of keys, as the official finetune_csv configs are
 * written. An unknown section or key, a value of the wrong type (a quoted "30" for an integer,
 * a list for a number) or a duplicate key is KR_ERR_INVALID_ARG naming the key, the file and
 * the line; malformed YAML is KR_ERR_FORMAT naming the line. Keys that make no sense here
 * (device.use_cuda, distributed.*, training.num_workers, ...) are accepted and listed by
 * kr_finetune_config_ignored. Keys not in the file keep their values. */
KR_API kr_status kr_finetune_config_load_yaml(kr_finetune_config *cfg, const char *path,
                                              kr_error *err);

/* Sets one key from text read as a YAML plain scalar: integers, numbers (also 1e-6, which
 * PyYAML would read as a string), true/false (yes/no, on/off), null, or text for a string
 * key. A list key (data.data_path, kronos.symbols) is replaced by this one value. */
KR_API kr_status kr_finetune_config_set(kr_finetune_config *cfg, const char *key, const char *value,
                                        kr_error *err);
/* Sets a string key to a string (a quoted YAML scalar, a Python str). Any other key is a
 * wrong type. */
KR_API kr_status kr_finetune_config_set_string(kr_finetune_config *cfg, const char *key,
                                               const char *value, kr_error *err);
/* Appends a value to a list key. */
KR_API kr_status kr_finetune_config_add(kr_finetune_config *cfg, const char *key, const char *value,
                                        kr_error *err);
/* The value of a key as text ("" for an unset string, list items joined by '\n'). */
KR_API kr_status kr_finetune_config_get(const kr_finetune_config *cfg, const char *key, char *out,
                                        size_t cap, kr_error *err);
/* The ignored keys this config set, comma-separated ("" when none). Writes at most cap bytes;
 * returns how many there are. */
KR_API int kr_finetune_config_ignored(const kr_finetune_config *cfg, char *out, size_t cap);

/* The keys, for --help, the docs and the Python package. */
typedef struct kr_finetune_key {
    const char *key; /* "training.batch_size" */
    const char *type; /* "int", "float", "bool", "string", "list" */
    const char *flag; /* the CLI flag, without dashes: "batch-size" */
    const char *default_value; /* as text; "" when none */
    int ignored; /* accepted and ignored */
    const char *doc; /* one line */
} kr_finetune_key;
KR_API int kr_finetune_n_keys(void);
/* NULL past the end. Static storage. */
KR_API const kr_finetune_key *kr_finetune_key_at(int i);

/* ---------------------------------------------------------------- running */

#define KR_FINETUNE_PATH_MAX 4096

typedef enum kr_finetune_event {
    KR_FT_STAGE_START = 0, /* a stage begins (after loading data and model) */
    KR_FT_STEP = 1, /* an optimizer step finished */
    KR_FT_EVAL = 2, /* a validation pass finished (val_loss set) */
    KR_FT_SAVED = 3, /* a checkpoint was written (path) */
    KR_FT_STAGE_DONE = 4, /* a stage finished */
    KR_FT_STAGE_SKIPPED = 5, /* a stage was skipped (message says why) */
    KR_FT_INFO = 6, /* a line for the user (message): data, memory, ignored keys */
} kr_finetune_event;

/* What the progress callback sees. Borrowed: valid during the call. */
typedef struct kr_finetune_progress {
    kr_finetune_event event;
    const char *stage; /* "tokenizer" or "predictor" */
    int epoch, epochs; /* 1-based epoch, epochs of the stage */
    int64_t step, total_steps; /* optimizer steps done in the stage, and of the whole stage */
    int64_t step_in_epoch, steps_per_epoch;
    double loss; /* the last step's loss (mean over its micro-batches) */
    double epoch_loss; /* the mean of the epoch's step losses so far (the official "Training
                          Loss" of its epoch summary) */
    double lr, grad_norm; /* the rate that step used; its total norm before clipping */
    double val_loss; /* the last validation loss (NaN before the first) */
    double val_loss_official; /* predictor: the official model.eval() variant (NaN if none) */
    double best_val_loss; /* NaN before the first */
    double tokens_per_second; /* training positions per second over the stage so far */
    double elapsed_seconds, eta_seconds; /* of the stage; eta NaN until known */
    const char *path; /* KR_FT_SAVED: the directory or file written */
    const char *message; /* KR_FT_INFO, KR_FT_STAGE_SKIPPED: a line; else NULL */
} kr_finetune_progress;

/* Called on the thread that runs kr_finetune_run after each step and event. Return non-zero
 * to stop: the run writes a resumable checkpoint and returns KR_ERR_CANCELLED. */
typedef int (*kr_finetune_progress_cb)(void *user, const kr_finetune_progress *p);

typedef struct kr_finetune_result {
    char base_save_path[KR_FINETUNE_PATH_MAX];
    char tokenizer_best[KR_FINETUNE_PATH_MAX]; /* "" when the stage did not run or write */
    char tokenizer_last[KR_FINETUNE_PATH_MAX];
    char predictor_best[KR_FINETUNE_PATH_MAX];
    char predictor_last[KR_FINETUNE_PATH_MAX];
    char log_path[KR_FINETUNE_PATH_MAX];
    int tokenizer_ran, predictor_ran; /* 1 when the stage trained (0: skipped / not reached) */
    double tokenizer_best_val_loss, predictor_best_val_loss; /* NaN when none */
    int64_t steps; /* optimizer steps taken by this call, both stages */
    int stopped; /* 1: stopped by the callback (KR_ERR_CANCELLED), resumable */
    double seconds; /* wall time of the call */
} kr_finetune_result;

/* Runs the configured stages. Checks everything it can before training: the config (keys
 * that must be set, ranges), the data (windows in each split), the checkpoints, the output
 * directories (a non-empty stage directory is refused unless kronos.force or kronos.resume),
 * and the memory the run needs against the machine's (KR_ERR_NOMEM naming both figures).
 * A non-finite loss or gradient stops the run with KR_ERR_NUMERIC naming the stage and step;
 * the checkpoints written before it are kept. *out (may be NULL) is filled in every case.
 * Deterministic for a given config (seed, threads included). */
KR_API kr_status kr_finetune_run(const kr_finetune_config *cfg, kr_finetune_progress_cb cb,
                                 void *user, kr_finetune_result *out, kr_error *err);

#ifdef __cplusplus
}
#endif

#endif /* KRONOS_FINETUNE_H */
