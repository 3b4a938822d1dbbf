/*
 * finetune/state — a stage's directory and where a run stands in it.
 *
 *   {stage_dir}/best_model/        the best checkpoint by validation loss (HF directory)
 *   {stage_dir}/last_model/        the last epoch's (or the interrupted run's last step's)
 *   {stage_dir}/checkpoint/        what --resume continues from:
 *       trainer-<step>.state       kr_trainer_save_state's file (weights, moments, schedule, RNG)
 *       progress.json              the data position and the run's figures, naming that file
 *       fresh/                     the fresh weights a pre_trained false stage started from
 * progress.json is replaced atomically (temp + rename) after its state file is complete, and
 * the state file it named before is removed only then: a crash at any moment leaves a
 * progress.json whose state file exists.
 */
#ifndef KR_FINETUNE_STATE_H
#define KR_FINETUNE_STATE_H

#include <stdint.h>

#include "kronos/status.h"

typedef struct kr_ft_progress_file {
    int done; /* the stage finished */
    int epoch; /* 0-based epoch the next step belongs to */
    int64_t batch; /* next batch of that epoch */
    int64_t steps; /* optimizer steps done */
    double best_val_loss; /* NaN when none yet */
    double last_val_loss; /* NaN when none yet */
    /* What the position means: a resume with other values would replay other batches. */
    int64_t steps_per_epoch, total_steps, train_windows;
    int batch_size, window_rows;
    uint64_t seed;
    char state_file[64]; /* "trainer-<steps>.state" in the checkpoint directory */
} kr_ft_progress_file;

/* Reads dir/progress.json. KR_ERR_IO when absent (*exists 0), KR_ERR_FORMAT when unreadable. */
kr_status kr_ft_progress_read(const char *checkpoint_dir, kr_ft_progress_file *p, int *exists,
                              kr_error *err);
/* Writes dir/progress.json atomically, then removes the state file `previous` names (when it
 * differs from p's); previous may be NULL. */
kr_status kr_ft_progress_write(const char *checkpoint_dir, const kr_ft_progress_file *p,
                               const char *previous, kr_error *err);

/* 1 if path is a directory holding anything, 0 if it is absent or empty; -1 if it is there
 * but not a directory. */
int kr_ft_dir_nonempty(const char *path);
/* Removes path and everything below it (links are removed, never followed). Absent: KR_OK. */
kr_status kr_ft_remove_tree(const char *path, kr_error *err);
/* Copies a small file (a config.json: at most 1 MiB) byte for byte. */
kr_status kr_ft_copy_file(const char *from, const char *to, kr_error *err);
/* 1 if dir holds config.json and model.safetensors. */
int kr_ft_is_checkpoint(const char *dir);

#endif
