/*
 * finetune/fresh_weights — experiment.pre_trained_* false: training starts from fresh weights
 * of the pretrained checkpoint's shape, initialised as the official classes initialise
 * themselves (their random stream is torch's; this one is base/rng's, seeded):
 *   predictor (Kronos._init_weights): Linear weights xavier-normal, biases 0, embeddings
 *     N(0, d_model^-0.5) — the "fixed" time embeddings of learn_te false too, since
 *     Kronos.apply reaches their inner nn.Embedding —, RMSNorm weights 1;
 *   tokenizer (no init of its own: torch's defaults): Linear weights and biases
 *     U(-1/sqrt(fan_in), 1/sqrt(fan_in)), RMSNorm weights 1.
 * Buffers (rotary inv_freq, the quantiser's integer bases) and config.json are copied as they
 * are.
 */
#ifndef KR_FINETUNE_FRESH_WEIGHTS_H
#define KR_FINETUNE_FRESH_WEIGHTS_H

#include <stdint.h>

#include "kronos/status.h"

/* Writes out_dir/config.json (a copy of src_dir's) and out_dir/model.safetensors (every tensor
 * of src_dir's, fresh as above). is_tokenizer picks the scheme. Creates out_dir. */
kr_status kr_ft_write_fresh(const char *src_dir, int is_tokenizer, uint64_t seed,
                            const char *out_dir, kr_error *err);

#endif
