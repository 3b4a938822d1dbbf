/*
 * model/model — the kr_model handle of the public API: a tokenizer and a predictor loaded
 * from their checkpoint directories. Weights only: immutable after load (but for load-time
 * quantisation), shared by every context without a lock; threads, workspace and KV precision
 * belong to the context (engine/context.h).
 */
#ifndef KR_MODEL_MODEL_H
#define KR_MODEL_MODEL_H

#include "kronos.h"
#include "model/weights.h"
#include "kernels/quant.h"
#include "model/transformer.h" /* kr_kv_dtype: the KV stores own their precision */

struct kr_model {
    kr_tokenizer_weights *tok;
    kr_predictor_weights *pred;
    kr_model_info info;
    /* Where it was loaded from and how: kr_model_load_f32_copy loads it again. */
    char *predictor_dir, *tokenizer_dir;
    kr_weights_opts load_opts;
};

/* A second, independent model of src's checkpoint in f32 (its files mapped again, shared with
 * src by the page cache), for kr_model_quantize to change while src stays as it is.
 * KR_ERR_INVALID_ARG when src is already quantised: quantisation starts from f32. Caller owns
 * *out. */
kr_status kr_model_load_f32_copy(const kr_model *src, kr_model **out, kr_error *err);

/* Quantises every Linear of both nets to fmt (group: q4), with optional per-Linear column
 * scales in the order of kr_tokenizer_linears / kr_predictor_linears (NULL: none), or
 * weights quantised elsewhere in the same order (ready: see kr_quantize_linears_ready; the
 * Linears kept in bf16 ignore theirs, which stay the caller's). Updates the info (format,
 * method, bytes). Only for an f32 model that has not been quantised. */
kr_status kr_model_quantize_linears(kr_model *m, kr_wfmt fmt, int group,
                                    const float *const *tok_scales, const float *const *pred_scales,
                                    kr_qmat_owned **tok_ready, kr_qmat_owned **pred_ready,
                                    const char *method, kr_error *err);
/* 1 if the Linear of that checkpoint name stays bf16 when the model is quantised to fmt (the
 * output heads under the 8- and 4-bit formats). */
int kr_model_linear_keeps_bf16(const char *name, kr_wfmt fmt);

#endif
