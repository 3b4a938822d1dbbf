/*
 * model/weights — the tensors of a tokenizer and of a predictor, bound by name from a
 * checkpoint directory and checked for presence, dtype and shape.
 *
 * F32 tensors point into the mmapped file when 4-byte aligned (no copy); F16/BF16 (and
 * unaligned F32) are converted into one owned f32 arena at load. Every tensor bound is
 * checked for NaN / infinities at load unless the caller opts out (kr_weights_opts). I64 buffers
 * (tokenizer.bsq.*) and unused tensors (post_quant_embed_pre.*) are accepted and ignored.
 */
#ifndef KR_MODEL_WEIGHTS_H
#define KR_MODEL_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/quant.h"
#include "kronos.h"
#include "model/config.h"

/* Calibration statistics of a Linear's inputs (model/quantize.h records them while a
 * calibration forecast runs): per input channel max |x| and Σ|x|, and a reservoir sample of
 * whole input rows for the activation-aware scale search. */
typedef struct kr_act_stats {
    int k;
    int64_t rows; /* rows seen */
    float *max_abs; /* [k] */
    double *sum_abs; /* [k] */
    float *sample; /* [cap][k] */
    int n_sample, cap;
    uint64_t rng;
    struct kr_gptq_hessian *hessian; /* optional: Σ xᵀx of every row, for GPTQ (model/gptq.h) */
} kr_act_stats;

/* y = x·wᵀ + b; w is [n_out][n_in]; b may be NULL (SwiGLU FFN has no biases).
 * A quantised Linear has q set (and w NULL once the f32 copy is released). */
typedef struct kr_linear {
    const float *w;
    const float *b;
    int n_out, n_in;
    const kr_qmat *q;
    kr_act_stats *stats; /* non-NULL only while calibrating */
} kr_linear;

typedef struct kr_attn_weights {
    kr_linear q, k, v, out; /* each [d_model][d_model] with bias */
    const float *inv_freq; /* [head_dim/2] rotary buffer (computed if absent) */
    int n_heads, head_dim;
} kr_attn_weights;

typedef struct kr_block_weights {
    const float *norm1, *norm2; /* [d_model] RMSNorm weights */
    kr_attn_weights attn;
    kr_linear w1, w2, w3; /* w1,w3: [ff_dim][d_model]; w2: [d_model][ff_dim]; no bias */
} kr_block_weights;

typedef struct kr_tokenizer_weights {
    kr_tokenizer_config cfg;
    kr_linear embed; /* [d_model][d_in] */
    kr_block_weights *enc; /* [n_enc] = n_enc_layers - 1 */
    int n_enc;
    kr_block_weights *dec; /* [n_dec] = n_dec_layers - 1 */
    int n_dec;
    kr_linear quant_embed; /* [s1_bits+s2_bits][d_model] */
    kr_linear post_quant_embed; /* [d_model][s1_bits+s2_bits] */
    kr_linear head; /* [d_in][d_model] */
    size_t n_params, bytes; /* bytes: every weight as held in memory (quantised or f32) */
    void *owner; /* private: mapping + arena */
    void *qowner; /* private: quantised weights made at load (model/quantize.h) */
    char *dir; /* the checkpoint directory */
} kr_tokenizer_weights;

typedef struct kr_predictor_weights {
    kr_predictor_config cfg;
    const float *emb_s1; /* [2^s1_bits][d_model] */
    const float *emb_s2; /* [2^s2_bits][d_model] */
    kr_linear fusion; /* [d_model][2·d_model] */
    const float *te_minute, *te_hour, *te_weekday, *te_day,
        *te_month; /* [60|24|7|32|13][d_model] */
    kr_block_weights *blocks; /* [n_layers] */
    const float *norm; /* [d_model] final RMSNorm */
    kr_attn_weights dep; /* dependency-aware cross-attention: always 4 heads */
    const float *dep_norm; /* [d_model] */
    kr_linear head_s1; /* [2^s1_bits][d_model] */
    kr_linear head_s2; /* [2^s2_bits][d_model] */
    size_t n_params, bytes;
    void *owner;
    void *qowner;
    char *dir;
} kr_predictor_weights;

/* How a checkpoint is loaded; all-zero (or a NULL pointer) is the default. */
typedef struct kr_weights_opts {
    /* 0: every tensor the forward pass reads (quantised weights' scales included) is checked
     * for NaN and infinities, and one is KR_ERR_MODEL naming the tensor and the element.
     * 1: loaded as stored, unchecked. */
    int allow_nonfinite;
    /* 0: the file is mapped (pages shared through the page cache, loaded as touched).
     * 1: read into memory, so that replacing or truncating it later cannot fault the process. */
    int no_mmap;
} kr_weights_opts;

/* Loads dir/config.json + dir/model.safetensors (opts may be NULL). Caller owns *out; free
 * with the _free. */
kr_status kr_tokenizer_weights_load(const char *dir, const kr_weights_opts *opts,
                                    kr_tokenizer_weights **out, kr_error *err);
void kr_tokenizer_weights_free(kr_tokenizer_weights *w);
kr_status kr_predictor_weights_load(const char *dir, const kr_weights_opts *opts,
                                    kr_predictor_weights **out, kr_error *err);
void kr_predictor_weights_free(kr_predictor_weights *w);

/* The checkpoint a set of weights was loaded from (for kronos quantize, which copies every
 * tensor it does not replace). */
const struct kr_safetensors *kr_weights_source(const void *owner);
/* Frees a qowner (model/quantize.c sets it; the weights' _free calls this). */
void kr_quant_owner_free(void *qowner);

/* Named random shapes for gen-random: "tiny", "mini", "small", "base". */
typedef struct kr_random_shape {
    const char *name;
    kr_tokenizer_config tok;
    kr_predictor_config pred;
} kr_random_shape;
/* NULL if unknown. */
const kr_random_shape *kr_random_shape_find(const char *name);
/* Writes out_dir/tokenizer and out_dir/predictor (config.json + model.safetensors, every
 * tensor a real checkpoint has, incl. I64 buffers) with deterministic random weights from
 * seed. Creates the directories. */
kr_status kr_model_write_random(const kr_random_shape *shape, uint64_t seed, const char *out_dir,
                                kr_error *err);

#endif
