/* model/model — loading and describing a tokenizer + predictor pair (public API). */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/timeutil.h"

kr_model_params kr_model_default_params(void) {
    kr_model_params p = {.n_threads = 0};
    return p;
}

kr_status kr_model_load(const char *predictor_dir, const char *tokenizer_dir,
                        const kr_model_params *params, kr_model **out, kr_error *err) {
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_model_load: out is NULL");
    *out = NULL;
    if (!predictor_dir || !tokenizer_dir)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_model_load: a model directory is NULL");
    kr_model_params p = params ? *params : kr_model_default_params();
    double t0 = kr_now_seconds();
    kr_model *m = calloc(1, sizeof *m);
    if (!m) return kr_error_set(err, KR_ERR_NOMEM, "kr_model_load: out of memory");
    kr_status st = kr_tokenizer_weights_load(tokenizer_dir, &m->tok, err);
    if (st == KR_OK) st = kr_predictor_weights_load(predictor_dir, &m->pred, err);
    if (st == KR_OK && m->tok->cfg.s1_bits != m->pred->cfg.s1_bits)
        st = kr_error_set(err, KR_ERR_MODEL, "%s and %s: tokenizer s1_bits %d != predictor s1_bits %d",
                          tokenizer_dir, predictor_dir, m->tok->cfg.s1_bits, m->pred->cfg.s1_bits);
    if (st == KR_OK && m->tok->cfg.s2_bits != m->pred->cfg.s2_bits)
        st = kr_error_set(err, KR_ERR_MODEL, "%s and %s: tokenizer s2_bits %d != predictor s2_bits %d",
                          tokenizer_dir, predictor_dir, m->tok->cfg.s2_bits, m->pred->cfg.s2_bits);
    if (st == KR_OK) st = kr_pool_create(p.n_threads, &m->pool, err);
    if (st != KR_OK) {
        kr_tokenizer_weights_free(m->tok);
        kr_predictor_weights_free(m->pred);
        kr_pool_free(m->pool);
        free(m);
        return st;
    }
    pthread_mutex_init(&m->lock, NULL);
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
    in->n_params = m->tok->n_params + m->pred->n_params;
    in->weight_bytes = m->tok->bytes + m->pred->bytes;
    in->load_seconds = kr_now_seconds() - t0;
    *out = m;
    return KR_OK;
}

void kr_model_free(kr_model *m) {
    if (!m) return;
    kr_tokenizer_weights_free(m->tok);
    kr_predictor_weights_free(m->pred);
    kr_pool_free(m->pool);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

void kr_model_get_info(const kr_model *m, kr_model_info *info) {
    if (m && info) *info = m->info;
}
