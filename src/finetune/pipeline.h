/*
 * finetune/pipeline — what run.c (checks, stages, result) and stage.c (one stage's training
 * loop) share: the run's context and one stage's plan.
 */
#ifndef KR_FINETUNE_PIPELINE_H
#define KR_FINETUNE_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "finetune/config.h"
#include "finetune/log.h"
#include "kronos/finetune.h"
#include "kronos/train.h"
#include "train/dataset.h"

typedef struct kr_ft_run {
    const kr_finetune_config *cfg;
    kr_ft_resolved paths;
    kr_dataset *ds;
    kr_ft_log *log;
    kr_finetune_progress_cb cb;
    void *user;
    kr_finetune_result *result;
    int stop_requested; /* the callback asked to stop */
} kr_ft_run;

typedef struct kr_ft_stage {
    const char *name; /* "tokenizer" or "predictor" */
    kr_train_target target;
    int enabled; /* experiment.train_*: the stage is asked for */
    int run; /* it will train (not skipped, not done) */
    char skip_reason[256];
    char dir[KR_FINETUNE_PATH_MAX]; /* {base_save_path}/{save_name} */
    char best[KR_FINETUNE_PATH_MAX], last[KR_FINETUNE_PATH_MAX], ckpt[KR_FINETUNE_PATH_MAX];
    char pretrained[KR_FINETUNE_PATH_MAX]; /* the checkpoint it starts from (shape source) */
    int fresh; /* start from fresh weights of that shape (pre_trained false) */
    char tokenizer[KR_FINETUNE_PATH_MAX]; /* predictor: the tokenizer that makes its ids */
    int epochs;
    int micro_batch; /* windows per kr_trainer_accumulate */
    int accumulation; /* micro-batches per step */
    int64_t steps_per_epoch, total_steps;
    int64_t train_windows, val_windows; /* val_windows: the ones scored */
    kr_train_params params;
    size_t memory_bytes; /* the up-front estimate */
    int resume; /* a checkpoint/ to continue from exists */
} kr_ft_stage;

/* Sends a progress event to the callback (if any); sets run->stop_requested when it asks. */
void kr_ft_emit(kr_ft_run *run, const kr_finetune_progress *p);
/* An info line (callback + log). */
void kr_ft_info(kr_ft_run *run, const char *stage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Trains one planned stage (stage.c). KR_ERR_CANCELLED when stopped (checkpoint written). */
kr_status kr_ft_stage_train(kr_ft_run *run, kr_ft_stage *stage, kr_error *err);
/* The validation loss of the stage's starting checkpoint (kronos.eval_only): *val, and for
 * the predictor *val_official (NaN when not asked); nothing is written. */
kr_status kr_ft_stage_eval(kr_ft_run *run, kr_ft_stage *stage, double *val, double *val_official,
                           kr_error *err);

#endif
