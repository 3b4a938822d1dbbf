/*
 * finetune/log — the JSON-lines log of a fine-tune, {base_save_path}/logs/finetune.jsonl,
 * written always (terminal or not), appended to by a resumed run. One object a line, each with
 * "event" and "time" (Unix seconds): start (the whole config), stage_start, step (every
 * training.log_interval steps and the first), eval, saved, stage_done, stage_skipped, stop,
 * error, done. Lines are flushed as written: a killed run's log ends at its last event.
 */
#ifndef KR_FINETUNE_LOG_H
#define KR_FINETUNE_LOG_H

#include <cjson/cJSON.h>

#include "kronos/status.h"

typedef struct kr_ft_log kr_ft_log;

/* Creates dir (and parents) and opens dir/finetune.jsonl for appending. Caller owns *out. */
kr_status kr_ft_log_open(const char *dir, kr_ft_log **out, kr_error *err);
void kr_ft_log_close(kr_ft_log *log);
const char *kr_ft_log_path(const kr_ft_log *log);
/* An object with "event" and "time" set, for the caller to fill and pass to kr_ft_log_write
 * (NULL when out of memory: the write then does nothing). */
cJSON *kr_ft_log_event(const char *event);
/* Writes obj as one line and frees it. A failed write (disk full) is reported once on the
 * next call's return; the run goes on: the log is a record, not the checkpoints. */
kr_status kr_ft_log_write(kr_ft_log *log, cJSON *obj, kr_error *err);

#endif
