/*
 * model/quantize — turning the f32 Linears of loaded weights into a quantised format
 * (kernels/quant.h), recording the activation statistics calibration needs, and writing a
 * quantised checkpoint that loads without any conversion.
 *
 * Only Linear weights are quantised; embeddings, norms and biases stay f32 (they are a few
 * percent of the bytes and feed every token).
 */
#ifndef KR_MODEL_QUANTIZE_H
#define KR_MODEL_QUANTIZE_H

#include "kernels/quant.h"
#include "kronos.h"
#include "model/weights.h"

/* A Linear with its checkpoint name prefix ("transformer.0.ffn.w1"). */
typedef struct kr_named_linear {
    char name[96];
    kr_linear *l;
} kr_named_linear;

/* Every Linear of the weights, in a fixed order. Caller frees *out. */
kr_status kr_tokenizer_linears(kr_tokenizer_weights *w, kr_named_linear **out, int *n,
                               kr_error *err);
KR_PRIVATE kr_status kr_predictor_linears(kr_predictor_weights *w, kr_named_linear **out, int *n,
                                          kr_error *err);

/* Quantises every Linear of the list in place: l->q points at the new weight, l->w becomes
 * NULL and the f32 pages are returned to the OS when they were mapped from the file.
 * col_scales (optional, [n] of optional [k] arrays) are the smoothing / AWQ factors of each
 * Linear (quant.h). The quantised arrays are owned by *qowner (add to an existing one: pass
 * the weights' qowner). Returns the bytes the Linears occupy now in *q_bytes and what they
 * took in f32 in *f32_bytes. */
kr_status kr_quantize_linears(kr_named_linear *ls, int n, kr_wfmt fmt, int group,
                              const float *const *col_scales, void **qowner, size_t *q_bytes,
                              size_t *f32_bytes, kr_error *err);
/* The same with weights already quantised elsewhere (GPTQ): ready (optional, [n] of optional
 * pointers, each from malloc) — where ready[i] is set, its weight is installed as is (it must be fmt and the
 * Linear's shape) and ownership moves to *qowner (ready[i] becomes NULL); elsewhere the
 * Linear is quantised as kr_quantize_linears does. On failure nothing is installed and the
 * ready weights stay the caller's. */
kr_status kr_quantize_linears_ready(kr_named_linear *ls, int n, kr_wfmt fmt, int group,
                                    const float *const *col_scales, kr_qmat_owned **ready,
                                    void **qowner, size_t *q_bytes, size_t *f32_bytes,
                                    kr_error *err);

/* Calibration statistics (weights.h kr_act_stats). cap: rows to keep as a sample. */
kr_status kr_act_stats_init(kr_act_stats *s, int k, int cap, uint64_t seed, kr_error *err);
void kr_act_stats_release(kr_act_stats *s);
/* Adds m rows of x (row stride ldx), to s->hessian too when set (the caller owns it). */
void kr_act_stats_add(kr_act_stats *s, const float *x, int m, int ldx);

/* Writes dir/config.json (the source's config + the "quantization" block) and
 * dir/model.safetensors: every tensor of the source checkpoint, with each quantised Linear's
 * `.weight` replaced by `.qweight` / `.qscale` / `.qrowsum` / `.qgscale` / `.qgzero` /
 * `.qinscale` (those its format has). Creates dir. */
kr_status kr_tokenizer_save_quantized(const kr_tokenizer_weights *w, const char *method,
                                      const char *dir, kr_error *err);
kr_status kr_predictor_save_quantized(const kr_predictor_weights *w, const char *method,
                                      const char *dir, kr_error *err);

/* Writes the pair as out_dir/predictor and out_dir/tokenizer (kr_model_save_quantized): checked
 * first with kr_model_check_quantized_out (kronos.h) against the weights' source directories,
 * written into a staging directory inside out_dir and moved into place when complete. A
 * previous pair there is replaced; whenever the process dies, out_dir holds the previous pair,
 * the new one, or an incomplete one that does not load (never a mix of both). */
kr_status kr_quantized_pair_save(const kr_predictor_weights *pred, const kr_tokenizer_weights *tok,
                                 const char *method, const char *out_dir, kr_error *err);

#endif
