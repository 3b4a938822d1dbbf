/* model/model — loading and describing a tokenizer + predictor pair (public API). */
#include "model/model.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "model/quantize.h"

kr_model_params kr_model_default_params(void) {
    kr_model_params p = { .quant = NULL, .quant_group = 0 };
    return p;
}

/* Sets the info's quantisation fields from what the Linears hold now. */
static void describe_quant(kr_model *m, const char *method) {
    const kr_qmat *q = m->pred->blocks[0].w1.q; /* the format of the body */
    kr_model_info *in = &m->info;
    snprintf(in->quant, sizeof in->quant, "%s", kr_wfmt_name(q ? q->fmt : KR_WFMT_F32));
    snprintf(in->quant_method, sizeof in->quant_method, "%s", q ? method : "");
    in->quant_group = q && q->fmt == KR_WFMT_Q4 ? q->group : 0;
    in->weight_bytes = m->tok->bytes + m->pred->bytes;
}

/* The two output heads turn the last hidden state into the logits that are sampled; a
 * rounding there moves probability between near-tied tokens directly, with no later layer to
 * average it out. Like most low-bit recipes (an LLM's lm_head is usually kept at 16 bits),
 * the 8- and 4-bit formats keep them in bf16: 2 of ~60 Linears, about 4% of the weights. */
int kr_model_linear_keeps_bf16(const char *name, kr_wfmt fmt) {
    return fmt != KR_WFMT_BF16 &&
           (strcmp(name, "head.proj_s1") == 0 || strcmp(name, "head.proj_s2") == 0);
}

static kr_status quantize_net(kr_named_linear *ls, int n, kr_wfmt fmt, int group,
                              const float *const *scales, kr_qmat_owned **ready, void **qowner,
                              size_t *bytes, kr_error *err) {
    kr_status st = KR_OK;
    /* One call per run of Linears sharing a format, in list order. */
    for (int i = 0; st == KR_OK && i < n;) {
        int keep = kr_model_linear_keeps_bf16(ls[i].name, fmt), j = i + 1;
        while (j < n && kr_model_linear_keeps_bf16(ls[j].name, fmt) == keep) j++;
        size_t qb = 0, fb = 0;
        st = kr_quantize_linears_ready(ls + i, j - i, keep ? KR_WFMT_BF16 : fmt, group,
                                       scales && !keep ? scales + i : NULL,
                                       ready && !keep ? ready + i : NULL, qowner, &qb, &fb, err);
        if (st == KR_OK) *bytes = *bytes - fb + qb;
        i = j;
    }
    free(ls);
    return st;
}

kr_status kr_model_quantize_linears(kr_model *m, kr_wfmt fmt, int group,
                                    const float *const *tok_scales, const float *const *pred_scales,
                                    kr_qmat_owned **tok_ready, kr_qmat_owned **pred_ready,
                                    const char *method, kr_error *err) {
    if (m->tok->cfg.quant.format != KR_WFMT_F32 || m->pred->cfg.quant.format != KR_WFMT_F32 ||
        m->pred->blocks[0].w1.q)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "quantize: the model is already %s; quantise from the f32 checkpoint",
                            m->info.quant);
    double t0 = kr_now_seconds();
    kr_named_linear *ls;
    int n;
    kr_status st = kr_tokenizer_linears(m->tok, &ls, &n, err);
    if (st == KR_OK)
        st = quantize_net(ls, n, fmt, group, tok_scales, tok_ready, &m->tok->qowner, &m->tok->bytes,
                          err);
    if (st == KR_OK) st = kr_predictor_linears(m->pred, &ls, &n, err);
    if (st == KR_OK)
        st = quantize_net(ls, n, fmt, group, pred_scales, pred_ready, &m->pred->qowner,
                          &m->pred->bytes, err);
    if (st != KR_OK) return st;
    describe_quant(m, method ? method : "rtn");
    const double spent = kr_now_seconds() - t0;
    m->info.quant_seconds += spent;
    /* Quantised after the load (kr_model_quantize): part of getting the model ready too, so
     * quant_seconds stays a part of load_seconds. (Within kr_model_load this is overwritten
     * by the whole load's time.) */
    m->info.load_seconds += spent;
    return KR_OK;
}

kr_status kr_model_load(const char *predictor_dir, const char *tokenizer_dir,
                        const kr_model_params *params, kr_model **out, kr_error *err) {
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_model_load: out is NULL");
    *out = NULL;
    if (!predictor_dir || !tokenizer_dir)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_model_load: a model directory is NULL");
    /* "" would name "/config.json": the file system's root, not a model. */
    if (!*predictor_dir || !*tokenizer_dir)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_model_load: the %s directory is empty",
                            *predictor_dir ? "tokenizer" : "predictor");
    kr_model_params p = params ? *params : kr_model_default_params();
    kr_wfmt fmt = KR_WFMT_F32;
    if (p.quant && *p.quant && kr_wfmt_parse(p.quant, &fmt) != 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "quant '%s' is not one of f32, bf16, int8, fp8, q4", p.quant);
    if (p.quant_group > 0 && p.quant_group != 32 && p.quant_group != 64)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "q4 group size %d is not 32 or 64",
                            p.quant_group);
    double t0 = kr_now_seconds();
    kr_model *m = calloc(1, sizeof *m);
    if (!m) return kr_error_set(err, KR_ERR_NOMEM, "kr_model_load: out of memory");
    const kr_weights_opts wo = { .allow_nonfinite = p.allow_nonfinite, .no_mmap = p.no_mmap };
    kr_status st = kr_tokenizer_weights_load(tokenizer_dir, &wo, &m->tok, err);
    if (st == KR_OK) st = kr_predictor_weights_load(predictor_dir, &wo, &m->pred, err);
    if (st == KR_OK && m->tok->cfg.s1_bits != m->pred->cfg.s1_bits)
        st = kr_error_set(err, KR_ERR_MODEL,
                          "%s and %s: tokenizer s1_bits %d != predictor s1_bits %d", tokenizer_dir,
                          predictor_dir, m->tok->cfg.s1_bits, m->pred->cfg.s1_bits);
    if (st == KR_OK && m->tok->cfg.s2_bits != m->pred->cfg.s2_bits)
        st = kr_error_set(err, KR_ERR_MODEL,
                          "%s and %s: tokenizer s2_bits %d != predictor s2_bits %d", tokenizer_dir,
                          predictor_dir, m->tok->cfg.s2_bits, m->pred->cfg.s2_bits);
    if (st == KR_OK && m->tok->cfg.quant.format != m->pred->cfg.quant.format)
        st = kr_error_set(err, KR_ERR_MODEL, "%s is %s-quantised but %s is %s-quantised",
                          tokenizer_dir, kr_wfmt_name((kr_wfmt)m->tok->cfg.quant.format),
                          predictor_dir, kr_wfmt_name((kr_wfmt)m->pred->cfg.quant.format));
    if (st == KR_OK && fmt != KR_WFMT_F32 && m->pred->cfg.quant.format != KR_WFMT_F32 &&
        (int)fmt != m->pred->cfg.quant.format)
        st = kr_error_set(err, KR_ERR_INVALID_ARG,
                          "%s is a %s checkpoint; it cannot be re-quantised to %s (quantise "
                          "the f32 checkpoint instead)",
                          predictor_dir, kr_wfmt_name((kr_wfmt)m->pred->cfg.quant.format),
                          kr_wfmt_name(fmt));
    if (st != KR_OK) {
        kr_tokenizer_weights_free(m->tok);
        kr_predictor_weights_free(m->pred);
        free(m);
        return st;
    }
    kr_model_info *in = &m->info;
    const kr_predictor_config *pc = &m->pred->cfg;
    const kr_tokenizer_config *tc = &m->tok->cfg;
    in->d_model = pc->d_model;
    in->n_layers = pc->n_layers;
    in->n_heads = pc->n_heads;
    in->ff_dim = pc->ff_dim;
    in->tok_d_model = tc->d_model;
    in->tok_n_heads = tc->n_heads;
    in->tok_ff_dim = tc->ff_dim;
    in->tok_enc_blocks = m->tok->n_enc;
    in->tok_dec_blocks = m->tok->n_dec;
    in->s1_bits = pc->s1_bits;
    in->s2_bits = pc->s2_bits;
    in->learn_te = pc->learn_te;
    in->demo = pc->intended_use[0] != 0;
    snprintf(in->source, sizeof in->source, "%s", pc->source);
    in->n_params = m->tok->n_params + m->pred->n_params;
    describe_quant(m, m->pred->cfg.quant.method[0] ? m->pred->cfg.quant.method : "rtn");
    if (fmt != KR_WFMT_F32 && !m->pred->blocks[0].w1.q) {
        st = kr_model_quantize_linears(m, fmt,
                                       p.quant_group > 0 ? p.quant_group : KR_Q4_GROUP_DEFAULT,
                                       NULL, NULL, NULL, NULL, "rtn", err);
        if (st != KR_OK) {
            kr_model_free(m);
            return st;
        }
    }
    m->predictor_dir = strdup(predictor_dir);
    m->tokenizer_dir = strdup(tokenizer_dir);
    m->load_opts = wo;
    if (!m->predictor_dir || !m->tokenizer_dir) {
        kr_model_free(m);
        return kr_error_set(err, KR_ERR_NOMEM, "kr_model_load: out of memory");
    }
    in->load_seconds = kr_now_seconds() - t0;
    *out = m;
    return KR_OK;
}

kr_status kr_model_load_f32_copy(const kr_model *src, kr_model **out, kr_error *err) {
    *out = NULL;
    if (src->pred->blocks[0].w1.q || src->pred->cfg.quant.format != KR_WFMT_F32)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "quantize: the model is already %s; quantise from the f32 checkpoint",
                            src->info.quant);
    kr_model_params p = kr_model_default_params();
    p.allow_nonfinite = src->load_opts.allow_nonfinite;
    p.no_mmap = src->load_opts.no_mmap;
    return kr_model_load(src->predictor_dir, src->tokenizer_dir, &p, out, err);
}

void kr_model_free(kr_model *m) {
    if (!m) return;
    kr_tokenizer_weights_free(m->tok);
    kr_predictor_weights_free(m->pred);
    free(m->predictor_dir);
    free(m->tokenizer_dir);
    free(m);
}

void kr_model_get_info(const kr_model *m, kr_model_info *info) {
    if (m && info) *info = m->info;
}
