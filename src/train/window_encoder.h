/*
 * train/window_encoder — the token ids of training windows: the predictor stage of
 * `kronos finetune` learns on what the (fine-tuned) tokenizer makes of each window, as the
 * official loop's `tokenizer.encode(x, half=True)` under no_grad does. This is the inference
 * tokenizer's encoder (model/tokenizer.h), run window by window on its own threads, so the
 * ids are exactly those a forecast of the same normalised rows would see.
 */
#ifndef KR_SERIES_WINDOW_ENCODER_H
#define KR_SERIES_WINDOW_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "kronos.h"

typedef struct kr_window_encoder kr_window_encoder;

/* Loads the tokenizer checkpoint in dir (config.json + model.safetensors, read into memory:
 * the training may rewrite files near it) and n_threads compute threads (<= 0: online CPUs).
 * Caller owns *out. */
KR_PRIVATE kr_status kr_window_encoder_create(const char *dir, int n_threads,
                                              kr_window_encoder **out, kr_error *err);
KR_PRIVATE void kr_window_encoder_free(kr_window_encoder *e);

/* n windows of len rows each: x[n][len][6] (normalised) -> s1[n][len], s2[n][len]. */
KR_PRIVATE kr_status kr_window_encoder_run(kr_window_encoder *e, const float *x, int n, int len,
                                           int32_t *s1, int32_t *s2, kr_error *err);

/* Bytes the weights take in memory (for the up-front estimate). */
size_t kr_window_encoder_bytes(const kr_window_encoder *e);
/* An upper bound on the bytes a run over len rows allocates besides the weights. */
size_t kr_window_encoder_scratch_bytes(const kr_window_encoder *e, int len);

#endif
