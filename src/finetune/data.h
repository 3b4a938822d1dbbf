/*
 * finetune/data — the candles a fine-tune learns from, into a train/dataset: every CSV or
 * JSON file named by data.data_path (a directory stands for its *.csv and *.json files, in
 * name order), and the stored series named by kronos.symbols / kronos.all_symbols in the
 * store kronos.db. Each file or stored series is one series (split by time on its own).
 */
#ifndef KR_FINETUNE_DATA_H
#define KR_FINETUNE_DATA_H

#include "finetune/config.h"
#include "train/dataset.h"

/* Called with a line for the user (a column ignored, a series too short for any window). */
typedef void (*kr_ft_note_fn)(void *user, const char *line);

/* Adds every series the config names to ds. Errors name the file or symbol. No series at all
 * is KR_ERR_INVALID_ARG ("no data: set data.data_path or kronos.symbols"). */
kr_status kr_ft_load_data(const kr_finetune_config *cfg, kr_dataset *ds, kr_ft_note_fn note,
                          void *user, kr_error *err);

#endif
