/*
 * kronos/train.h — fine-tuning the tokenizer and the predictor on a CPU (contract draft).
 *
 * Training lives in the core library beside inference (same kernels, thread pool and arena),
 * exact against the official training step (../shared/golden/train). A kr_trainer owns a
 * trainable f32 copy of ONE checkpoint (a predictor or a tokenizer directory), its gradients,
 * the AdamW moments, the OneCycleLR schedule, dropout's RNG and the workspace for batches up to
 * params.batch_size x params.seq_len, allocated once at create (no heap allocation per step).
 *
 * A step is: kr_trainer_accumulate() once per micro-batch (forward in train mode + backward;
 * gradients are summed, each micro-batch's loss scaled by 1/accumulation_steps as
 * `loss / accumulation_steps` would be), then kr_trainer_step() (clip the total grad norm,
 * AdamW with decoupled weight decay, advance OneCycleLR, zero the gradients).
 *
 * Predictor train mode (golden/train/README.md): inputs are ids[:, :-1] and stamp[:, :-1],
 * targets ids[:, 1:]; the s2 head is conditioned on emb_s1(sampled_s1), sampled_s1 drawn from
 * softmax(s1_logits.detach()) (or injected, for the golden tests); the dependency-aware layer's
 * cross-attention is causal; loss = (ce_s1 + ce_s2) / 2.
 * Tokenizer train mode: loss = (mse(z_pre, x) + mse(z, x) + bsq_loss) / 2 with the
 * straight-through quantiser gradient.
 *
 * This is the contract two engineers build against: the training core implements it; the
 * `kronos finetune` pipeline (data windows, YAML config, checkpoints, resume, progress) uses it.
 * Additions are fine; changing a signature here needs the lead's word.
 */
#ifndef KRONOS_TRAIN_H
#define KRONOS_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "kronos/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KR_TRAIN_FEATURES 6 /* open, high, low, close, volume, amount (normalised) */
#define KR_TRAIN_STAMP_FIELDS 5 /* minute, hour, weekday, day, month */

typedef struct kr_trainer kr_trainer;

typedef enum kr_train_target {
    KR_TRAIN_PREDICTOR = 0, /* a Kronos predictor directory */
    KR_TRAIN_TOKENIZER = 1, /* a KronosTokenizer directory */
} kr_train_target;

typedef struct kr_train_params {
    kr_train_target target;
    int batch_size; /* max windows per micro-batch (workspace sized from it) */
    int seq_len; /* max rows per window, as given in kr_train_batch.len */
    int accumulation_steps; /* micro-batches per optimizer step, >= 1 */
    /* AdamW (decoupled: p -= lr * weight_decay * p before the Adam update) */
    double lr; /* OneCycleLR max_lr */
    double beta1, beta2, eps, weight_decay;
    double clip_norm; /* total L2 norm clip; <= 0: no clipping */
    /* OneCycleLR (cosine annealing, torch defaults otherwise) */
    long total_steps; /* optimizer steps of the whole run */
    double pct_start, div_factor, final_div_factor;
    int use_dropout; /* 1: the checkpoint config's dropout rates apply in accumulate (inverted
                        dropout, seeded); 0: every dropout off (the golden fixtures) */
    uint64_t seed; /* dropout and s1 sampling streams */
    int n_threads; /* <= 0: all cores */
    /* OneCycleLR's momentum cycling (torch's default, which the official loops keep): beta1
     * goes from max_momentum down to base_momentum while the rate rises, and back up while it
     * falls; params.beta1 is then unused, as in torch. 0: beta1 stays params.beta1. */
    int cycle_momentum;
    double base_momentum, max_momentum; /* 0.85, 0.95 */
} kr_train_params;

/* Defaults as the official finetune scripts use for `target` (predictor: betas 0.9/0.95,
 * clip 3.0, wd 0.1, lr 4e-5...; tokenizer: betas 0.9/0.999, clip 2.0, ...; pct_start 0.03,
 * div_factor 10, final_div_factor 1e4). */
KR_API kr_train_params kr_train_default_params(kr_train_target target);

/* Bytes kr_trainer_create would allocate for this checkpoint and params (weights, grads,
 * moments, activations saved for backward, workspace), without allocating them; for an up-front
 * "does it fit" check. */
KR_API kr_status kr_train_memory_estimate(const char *model_dir, const kr_train_params *params,
                                          size_t *bytes, kr_error *err);

/* Loads model_dir (config.json + model.safetensors of the kind params->target names) into a
 * trainable copy. Caller owns *out; free with kr_trainer_free. */
KR_API kr_status kr_trainer_create(const char *model_dir, const kr_train_params *params,
                                   kr_trainer **out, kr_error *err);
KR_API void kr_trainer_free(kr_trainer *tr);

/* One micro-batch of windows. Predictor: s1, s2 and stamp (the tokenizer's ids of the window's
 * rows, and their time features); x unused. Tokenizer: x and nothing else. */
typedef struct kr_train_batch {
    int n; /* windows, <= params.batch_size */
    int len; /* rows per window, <= params.seq_len; the predictor learns len - 1 positions */
    const int32_t *s1, *s2; /* [n][len] */
    const int32_t *stamp; /* [n][len][KR_TRAIN_STAMP_FIELDS] */
    const int32_t *sampled_s1; /* [n][len - 1] or NULL: drawn from the trainer's RNG */
    const float *x; /* [n][len][KR_TRAIN_FEATURES], normalised */
} kr_train_batch;

typedef struct kr_train_losses {
    double loss; /* the optimised loss */
    double ce_s1, ce_s2; /* predictor */
    double recon_pre, recon, bsq; /* tokenizer: mse(z_pre, x), mse(z, x), bsq_loss */
    long tokens; /* positions scored */
} kr_train_losses;

/* Forward in train mode + backward; adds this micro-batch's gradients. */
KR_API kr_status kr_trainer_accumulate(kr_trainer *tr, const kr_train_batch *batch,
                                       kr_train_losses *out, kr_error *err);

typedef struct kr_train_step_info {
    long step; /* optimizer steps done, after this one */
    double lr; /* the rate this step used */
    double grad_norm; /* total L2 norm before clipping */
} kr_train_step_info;

/* Clip, AdamW, OneCycleLR; zeroes the gradients. A non-finite gradient norm fails with
 * KR_ERR_NUMERIC, a new status "a computation produced NaN or infinity" (nothing updated;
 * the gradients are discarded). Past total_steps: KR_ERR_INVALID_ARG. */
KR_API kr_status kr_trainer_step(kr_trainer *tr, kr_train_step_info *out, kr_error *err);

/* Discards the gradients accumulated since the last step (e.g. after a micro-batch whose loss
 * was not finite: kr_trainer_accumulate then fails with KR_ERR_NUMERIC). */
KR_API void kr_trainer_zero_grad(kr_trainer *tr);

/* The loss of a batch without gradients: dropout off, the predictor's dependency-aware layer
 * causal as in training (kronos's validation; official_eval = 1: without its mask, as the
 * official loop's model.eval() validation does, for comparison). */
KR_API kr_status kr_trainer_evaluate(kr_trainer *tr, const kr_train_batch *batch, int official_eval,
                                     kr_train_losses *out, kr_error *err);

/* Writes a Hugging Face directory (config.json + model.safetensors, the official tensor names)
 * that kr_model_load and the official from_pretrained load. dir is created if absent. */
KR_API kr_status kr_trainer_save(const kr_trainer *tr, const char *dir, kr_error *err);

/* Everything needed to resume bit-identically (parameters, moments, step, schedule, RNG
 * streams), in one file written atomically (temp + rename). */
KR_API kr_status kr_trainer_save_state(const kr_trainer *tr, const char *path, kr_error *err);
KR_API kr_status kr_trainer_load_state(kr_trainer *tr, const char *path, kr_error *err);

/* Parameters by their official names (the model's named_parameters() order is not required),
 * for tests and tools. Borrowed pointers, valid until the next call that changes the trainer. */
typedef struct kr_train_tensor {
    const char *name; /* e.g. "transformer.0.attn.q_proj.weight" */
    int n_dims;
    int64_t shape[4];
    size_t n_elems;
    float *param; /* trainable values */
    const float *grad; /* accumulated gradient */
    int trainable; /* 0 for fixed sinusoidal time embeddings (learn_te false) */
} kr_train_tensor;
KR_API int kr_trainer_n_tensors(const kr_trainer *tr);

/* Where the time of the passes goes, part by part (forward Linears, input and weight
 * gradients, attention forward and backward, RMSNorm, RoPE, SwiGLU, the losses, embeddings,
 * element-wise passes, the optimizer): wall seconds and the process's CPU seconds (all threads,
 * so the figures stay meaningful on a machine shared with other work) of every region run on
 * the trainer's threads, summed since profiling was switched on. Work done outside those
 * regions (the driver's serial bookkeeping) is in no part. */
typedef struct kr_train_part_time {
    const char *name; /* "gemm_forward", "attention_backward", ... (static storage) */
    double wall_seconds, cpu_seconds;
    long calls; /* regions run */
} kr_train_part_time;
/* on = 1 starts (and zeroes) the profile, 0 stops it; off by default (it costs a system call
 * per region). */
KR_API void kr_trainer_profile_enable(kr_trainer *tr, int on);
/* Copies up to max parts into out; returns the number of parts (call with max 0 to size). */
KR_API int kr_trainer_profile(const kr_trainer *tr, kr_train_part_time *out, int max);
KR_API kr_status kr_trainer_tensor(kr_trainer *tr, int index, kr_train_tensor *out, kr_error *err);
KR_API long kr_trainer_steps_done(const kr_trainer *tr);

#ifdef __cplusplus
}
#endif

#endif /* KRONOS_TRAIN_H */
