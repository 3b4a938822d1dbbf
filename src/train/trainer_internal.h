/*
 * train/trainer_internal — the kr_trainer object shared by the files of the train layer
 * (trainer.c: create/free and the public API; params.c: the parameter table; predictor.c and
 * tokenizer.c: the two nets' train-mode passes; optim.c: clipping, AdamW and OneCycleLR;
 * checkpoint.c: saving), and the debug views the tests use.
 *
 * Memory: every buffer a step touches is carved at create from two allocations, the
 * parameter block (values, gradients, the two AdamW moments: one flat array each, every tensor
 * starting on a 64-byte line) and the activation block (what the forward keeps for the
 * backward, plus scratch), both sized from params.batch_size × params.seq_len. A step then
 * allocates nothing.
 */
#ifndef KR_TRAIN_TRAINER_INTERNAL_H
#define KR_TRAIN_TRAINER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kronos/train.h"
#include "model/config.h"
#include "train/block.h"
#include "train/linalg.h"

#define TR_MAX_TENSORS 512
#define TR_NAME_LEN 96
#define TR_TE_FIELDS 5
#define TR_NORM_CHUNK 16384 /* floats per partial sum of the gradient norm (thread-independent) */

/* One named parameter: its place in the flat arrays (floats from the start, a multiple of 16). */
typedef struct tr_param {
    char name[TR_NAME_LEN];
    int n_dims;
    int64_t shape[4];
    size_t n, off;
    int trainable;
} tr_param;

/* A tensor the checkpoint holds that is not a parameter (rotary inv_freq, the BSQ bases),
 * written back unchanged by kr_trainer_save. */
typedef struct tr_buffer {
    char name[TR_NAME_LEN];
    int is_i64;
    int n_dims;
    int64_t shape[2];
    size_t n;
    void *data; /* owned: float or int64_t */
} tr_buffer;

/* Carves buffers out of one block: with base NULL it only counts (the sizing pass). */
typedef struct tr_slab {
    char *base;
    size_t off;
} tr_slab;
float *tr_take(tr_slab *s, size_t n_floats);
/* Carves a stack of n_blocks transformer blocks over m rows (width d, feed-forward ff): its
 * n_blocks + 1 residual streams, then each block's activations, block i reading stream i.
 * With s->base NULL it only counts, and stream and acts are not touched. */
void tr_take_stack(tr_slab *s, int n_blocks, size_t m, size_t d, size_t ff, float **stream,
                   tr_block_acts *acts);

/* The BSQ constants and dropout rates of the checkpoint's config.json. */
typedef struct tr_hyper {
    double beta, gamma0, gamma, zeta, inv_temperature;
    int group_size;
    float attn_drop, resid_drop, ffn_drop, token_drop;
} tr_hyper;

typedef struct tr_predictor {
    float *emb_s1, *gemb_s1, *emb_s2, *gemb_s2; /* [V][d] */
    tr_lin fusion; /* [d][2d] */
    float *te[TR_TE_FIELDS], *gte[TR_TE_FIELDS]; /* [60|24|7|32|13][d]; gte NULL when fixed */
    tr_block_w *blocks;
    float *norm, *gnorm;
    tr_attn_w dep;
    float *dep_norm, *gdep_norm;
    tr_lin head_s1, head_s2;
    tr_rope rope, dep_rope;
    /* activations for M = n·(len − 1) rows */
    float **stream; /* [n_layers + 1][M][d]: block inputs, then the last block's output */
    tr_block_acts *acts; /* [n_layers] */
    float *emb_cat; /* [M][2d] */
    float *rstd_f, *context; /* final norm */
    float *logits1, *logits2; /* [M][V] */
    float *sibling; /* [M][d] emb_s1(sampled) */
    float *dep_q, *dep_k, *dep_v, *dep_att, *dep_y, *dep_rstd, *x2;
    double *loss1, *loss2; /* [M] per-row cross-entropy */
    int32_t *in_s1, *in_s2, *tgt_s1, *tgt_s2, *sampled, *stamp; /* [M] ([M][5] stamp) */
    float *dcontext; /* [M][d] gradient of context */
    float *dstream; /* [M][d] the gradient flowing down the blocks */
    float *demb; /* [M][2d] */
} tr_predictor;

typedef struct tr_tokenizer {
    tr_lin embed, quant_embed, post_pre, post, head;
    tr_block_w *enc, *dec;
    int n_enc, n_dec;
    tr_rope rope;
    /* activations for M = n·len rows */
    float **enc_stream; /* [n_enc + 1][M][d] */
    tr_block_acts *enc_acts;
    float **dec_stream[2]; /* [pass][n_dec + 1][M][d]: pass 0 from the s1 half, 1 from all */
    tr_block_acts *dec_acts[2];
    float *z, *zn, *znorm, *quant; /* [M][q], [M][q], [M], [M][q] (q = s1_bits + s2_bits) */
    float *qpre; /* [M][s1_bits] the s1 half of quant */
    float *out[2]; /* [M][d_in] z_pre, z */
    float *dz, *dq2, *dqpre; /* gradients of z, quant, qpre */
    float *dx; /* [M][d] the gradient flowing down */
    double *rows; /* [3][M] per-row commitment and per-sample entropy */
} tr_tokenizer;

struct kr_trainer {
    kr_train_params params;
    kr_predictor_config pcfg;
    kr_tokenizer_config tcfg;
    tr_hyper hyper;
    int d, ff, n_heads;
    char *config_json; /* the checkpoint's config.json, written back verbatim */
    size_t config_len;

    tr_param tensors[TR_MAX_TENSORS];
    int n_tensors;
    size_t n_floats; /* of each flat array */
    float *p, *g, *m, *v; /* values, gradients, AdamW first and second moments */
    float *wt; /* the Linear weights transposed (tr_params_transpose), at the same offsets */
    tr_lin lins[TR_MAX_TENSORS]; /* every Linear, for the transposes */
    int n_lins;
    tr_buffer buffers[TR_MAX_TENSORS];
    int n_buffers;

    kr_pool *pool;
    int nth;
    /* kr_trainer_profile: per tr_part (linalg.h), attached to the pool while on */
    double part_wall[TR_PART_COUNT], part_cpu[TR_PART_COUNT];
    int64_t part_calls[TR_PART_COUNT];
    kr_pool_parts parts;
    void *act_block; /* the activation block */
    size_t act_bytes;
    tr_ws ws;
    double *norm_partial; /* [n_floats / TR_NORM_CHUNK + 1] the gradient norm's partial sums */
    tr_predictor pr;
    tr_tokenizer tk;

    long steps; /* optimizer steps done */
    uint64_t micro; /* micro-batches accumulated, ever: dropout and sampling streams */
    uint64_t evals; /* evaluate calls, ever: their sampling stream */
    int pending; /* micro-batches accumulated since the last step */
};

/* params.c: the parameter table of the checkpoint kind, from the configs (no values). */
kr_status tr_params_build(kr_trainer *tr, kr_error *err);
/* params.c: the values from dir's model.safetensors, and the buffers to write back. */
kr_status tr_params_load(kr_trainer *tr, const char *dir, kr_error *err);
/* params.c: the views (tr_lin, blocks, ...) into p and g. */
void tr_params_bind(kr_trainer *tr);
/* params.c: wt from p, on the pool (after p changes: load, step, load_state). */
void tr_params_transpose(kr_trainer *tr);
/* The parameter of that name, or NULL. */
tr_param *tr_param_find(kr_trainer *tr, const char *name);
/* The rotary inv_freq buffer of an attention module ("transformer.0.self_attn"), or NULL. */
const float *tr_inv_freq(const kr_trainer *tr, const char *prefix);

/* predictor.c / tokenizer.c: activation buffers for M rows (counting pass when s->base is NULL),
 * the train-mode forward (+ backward when grad_scale != 0: the loss's weight). */
void tr_predictor_layout(kr_trainer *tr, tr_slab *s, int M);
kr_status tr_predictor_run(kr_trainer *tr, const kr_train_batch *b, double grad_scale,
                           int official_eval, uint64_t rng_stream, kr_train_losses *out,
                           kr_error *err);
void tr_tokenizer_layout(kr_trainer *tr, tr_slab *s, int M);
kr_status tr_tokenizer_run(kr_trainer *tr, const kr_train_batch *b, double grad_scale,
                           uint64_t rng_stream, kr_train_losses *out, kr_error *err);

/* optim.c */
double tr_onecycle_lr(const kr_train_params *p, long step);
kr_status tr_optimizer_step(kr_trainer *tr, kr_train_step_info *out, kr_error *err);

/* Debug views for the tests, valid after kr_trainer_evaluate (accumulate turns them into
 * gradients): the predictor's softmax probabilities [M][V] of the s1 (which 0) or s2 head, the
 * tokenizer's quantized, z_pre and z. NULL when the trainer is of the other kind. */
const float *tr_debug_probs(const kr_trainer *tr, int which);
const float *tr_debug_tokenizer(const kr_trainer *tr, int which); /* 0 quant, 1 z_pre, 2 z */

#endif
