/*
 * finetune/config — the settings of `kronos finetune`, one field per key of the official
 * finetune_csv YAML (finetune_csv/config_loader.py at 67b630e) plus kronos's own section.
 * The public functions (kronos/finetune.h) set and read them by "section.key"; the pipeline
 * reads the struct after kr_ft_config_resolve has filled in what follows from the rest.
 */
#ifndef KR_FINETUNE_CONFIG_H
#define KR_FINETUNE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "kronos/finetune.h"

typedef struct kr_str_list {
    char **items;
    int n;
} kr_str_list;

struct kr_finetune_config {
    /* data */
    kr_str_list data_path; /* files or directories of CSV / JSON candles */
    int lookback_window, predict_window, max_context;
    double clip, train_ratio, val_ratio, test_ratio;
    /* training */
    int tokenizer_epochs, basemodel_epochs, epochs;
    int batch_size, log_interval, num_workers, accumulation_steps;
    int64_t seed;
    double tokenizer_learning_rate, predictor_learning_rate;
    double adam_beta1, adam_beta2, adam_weight_decay;
    /* model_paths */
    char *pretrained_tokenizer, *pretrained_predictor, *exp_name, *base_path, *base_save_path;
    char *finetuned_tokenizer, *tokenizer_save_name, *basemodel_save_name;
    /* experiment */
    char *name, *description;
    int use_comet, train_tokenizer, train_basemodel, skip_existing;
    int pre_trained, pre_trained_tokenizer, pre_trained_predictor; /* -1: not set */
    /* device, distributed: accepted, ignored */
    int use_cuda, device_id, use_mps, use_ddp;
    char *backend;
    /* kronos */
    int threads;
    int64_t steps_per_epoch; /* 0: every training window once per epoch (the official) */
    int64_t val_windows; /* 0: every validation window */
    int official_eval; /* also report the official model.eval() validation loss */
    int dropout; /* the checkpoint's dropout rates apply while training (the official) */
    char *db, *interval;
    kr_str_list symbols;
    int all_symbols;
    int force, resume, dry_run, eval_only;
    int64_t memory_limit_mb; /* 0: the machine's memory */
    int64_t checkpoint_every; /* steps between resumable checkpoints; 0: at each epoch end */
    /* Which keys were set (index into the key table), for the ignored-keys report and the
     * epochs / pre_trained fallbacks. */
    unsigned char *set;
};

/* Index of a key in the table, or -1. */
int kr_ft_key_index(const char *key);
/* Whether the key was set (by any means). */
int kr_ft_key_was_set(const kr_finetune_config *cfg, const char *key);

/* The values that follow from others, as the official loader derives them:
 *   tokenizer/basemodel epochs from training.epochs when only it is given;
 *   pre_trained_tokenizer/_predictor from experiment.pre_trained when they are not given;
 *   base_save_path: given (with {exp_name} replaced), else {base_path}/{exp_name};
 *   finetuned_tokenizer: given (with {exp_name} replaced), else the tokenizer stage's
 *   best_model ({base_save_path}/{tokenizer_save_name}/best_model).
 * Writes them into the out-parameters (the config itself is not changed). */
typedef struct kr_ft_resolved {
    int tokenizer_epochs, basemodel_epochs;
    int pre_trained_tokenizer, pre_trained_predictor;
    char base_save_path[KR_FINETUNE_PATH_MAX];
    char tokenizer_dir[KR_FINETUNE_PATH_MAX]; /* {base_save_path}/{tokenizer_save_name} */
    char predictor_dir[KR_FINETUNE_PATH_MAX]; /* {base_save_path}/{basemodel_save_name} */
    char finetuned_tokenizer[KR_FINETUNE_PATH_MAX];
    char log_dir[KR_FINETUNE_PATH_MAX];
} kr_ft_resolved;
kr_status kr_ft_config_resolve(const kr_finetune_config *cfg, kr_ft_resolved *out, kr_error *err);

/* kr_finetune_config_load_yaml on text in memory (borrowed); label names it in errors. */
kr_status kr_ft_config_parse_yaml(kr_finetune_config *cfg, const char *text, size_t len,
                                  const char *label, kr_error *err);

/* Replaces every "{exp_name}" in s by exp_name into out. Returns 0, or -1 when it does not
 * fit. */
int kr_ft_substitute(const char *s, const char *exp_name, char *out, size_t cap);

#endif
