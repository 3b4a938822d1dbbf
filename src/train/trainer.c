/*
 * train/trainer — the public training API (kronos/train.h): parameters, memory estimate,
 * create/free, accumulate, step, evaluate and the tensor views. The passes are in
 * predictor.c / tokenizer.c, the optimizer in optim.c, the files in checkpoint.c.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "base/rng.h"
#include "train/linalg.h"
#include "train/trainer_internal.h"

#define TR_MAX_LAYERS 64 /* blocks per stack (Kronos-base has 12) */
#define TR_CONFIG_MAX_BYTES (1 << 20)

kr_train_params kr_train_default_params(kr_train_target target) {
    /* finetune/config.py and the two train_*.py of the official repository */
    kr_train_params p = {
        .target = target,
        .batch_size = 50,
        .seq_len = 90 + 10 + 1, /* lookback_window + predict_window + 1 */
        .accumulation_steps = 1,
        .lr = target == KR_TRAIN_TOKENIZER ? 2e-4 : 4e-5,
        .beta1 = 0.9,
        .beta2 = target == KR_TRAIN_TOKENIZER ? 0.999 : 0.95, /* the tokenizer keeps torch's */
        .eps = 1e-8,
        .weight_decay = 0.1,
        .clip_norm = target == KR_TRAIN_TOKENIZER ? 2.0 : 3.0,
        .total_steps = 30 * 2000, /* epochs × n_train_iter / batch_size */
        .pct_start = 0.03,
        .div_factor = 10.0,
        .final_div_factor = 1e4,
        .use_dropout = 1,
        .seed = 100,
        .n_threads = 0,
        .cycle_momentum = 1,
        .base_momentum = 0.85,
        .max_momentum = 0.95,
    };
    return p;
}

float *tr_take(tr_slab *s, size_t n_floats) {
    size_t off = (s->off + 63) / 64 * 64;
    s->off = off + n_floats * sizeof(float);
    return s->base ? (float *)(s->base + off) : NULL;
}

void tr_take_stack(tr_slab *s, int n_blocks, size_t m, size_t d, size_t ff, float **stream,
                   tr_block_acts *acts) {
    for (int i = 0; i <= n_blocks; i++) {
        float *x = tr_take(s, m * d);
        if (s->base) stream[i] = x;
    }
    for (int i = 0; i < n_blocks; i++) {
        tr_block_acts a = { 0 };
        a.rstd1 = tr_take(s, m);
        a.rstd2 = tr_take(s, m);
        a.q = tr_take(s, m * d);
        a.k = tr_take(s, m * d);
        a.v = tr_take(s, m * d);
        a.att = tr_take(s, m * d);
        a.x_mid = tr_take(s, m * d);
        a.h1 = tr_take(s, m * ff);
        a.h3 = tr_take(s, m * ff);
        if (s->base) {
            a.x_in = stream[i];
            acts[i] = a;
        }
    }
}

/* ---------------------------------------------------------------- configuration */

static int finite_in(double v, double lo, double hi) { return isfinite(v) && v >= lo && v <= hi; }

static kr_status check_params(const kr_train_params *p, kr_error *err) {
#define BAD(...) return kr_error_set(err, KR_ERR_INVALID_ARG, __VA_ARGS__)
    if (p->target != KR_TRAIN_PREDICTOR && p->target != KR_TRAIN_TOKENIZER)
        BAD("training params: target %d is neither predictor (0) nor tokenizer (1)",
            (int)p->target);
    if (p->batch_size < 1 || p->batch_size > 1 << 16)
        BAD("training params: batch_size %d out of range [1, 65536]", p->batch_size);
    int min_len = p->target == KR_TRAIN_PREDICTOR ? 2 : 1;
    if (p->seq_len < min_len || p->seq_len > 1 << 16)
        BAD("training params: seq_len %d out of range [%d, 65536]", p->seq_len, min_len);
    if ((long long)p->batch_size * p->seq_len > 1 << 24)
        BAD("training params: batch_size × seq_len = %lld rows is more than %d",
            (long long)p->batch_size * p->seq_len, 1 << 24);
    if (p->accumulation_steps < 1)
        BAD("training params: accumulation_steps %d must be >= 1", p->accumulation_steps);
    if (!finite_in(p->lr, 0.0, 1e3)) BAD("training params: lr %g out of range [0, 1000]", p->lr);
    if (!finite_in(p->beta1, 0.0, 1.0) || p->beta1 >= 1.0)
        BAD("training params: beta1 %g out of range [0, 1)", p->beta1);
    if (!finite_in(p->beta2, 0.0, 1.0) || p->beta2 >= 1.0)
        BAD("training params: beta2 %g out of range [0, 1)", p->beta2);
    if (!finite_in(p->eps, 0.0, 1.0) || p->eps <= 0.0)
        BAD("training params: eps %g out of range (0, 1]", p->eps);
    if (!finite_in(p->weight_decay, 0.0, 1e3))
        BAD("training params: weight_decay %g out of range [0, 1000]", p->weight_decay);
    if (!isfinite(p->clip_norm)) BAD("training params: clip_norm %g is not finite", p->clip_norm);
    if (p->total_steps < 1) BAD("training params: total_steps %ld must be >= 1", p->total_steps);
    if (!finite_in(p->pct_start, 0.0, 1.0))
        BAD("training params: pct_start %g out of range [0, 1]", p->pct_start);
    if (!finite_in(p->div_factor, 1e-12, 1e12))
        BAD("training params: div_factor %g must be > 0", p->div_factor);
    if (!finite_in(p->final_div_factor, 1e-12, 1e12))
        BAD("training params: final_div_factor %g must be > 0", p->final_div_factor);
    if (p->cycle_momentum && (!finite_in(p->base_momentum, 0.0, 1.0) || p->base_momentum >= 1.0 ||
                              !finite_in(p->max_momentum, 0.0, 1.0) || p->max_momentum >= 1.0))
        BAD("training params: base_momentum %g and max_momentum %g must be in [0, 1)",
            p->base_momentum, p->max_momentum);
#undef BAD
    return KR_OK;
}

/* A number under `key` (absent: fallback); a value of another type is refused by name. */
static kr_status json_number(const cJSON *root, const char *key, double fallback, double *out,
                             const char *label, kr_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) {
        *out = fallback;
        return KR_OK;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return kr_error_set(err, KR_ERR_FORMAT, "%s: key '%s' is not a finite number", label, key);
    *out = v->valuedouble;
    return KR_OK;
}

/* What only training reads from config.json: the dropout rates, and the BSQ constants. */
static kr_status parse_hyper(kr_trainer *tr, const char *label, kr_error *err) {
    cJSON *root = cJSON_ParseWithLength(tr->config_json, tr->config_len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return kr_error_set(err, KR_ERR_FORMAT, "%s: not a JSON object", label);
    }
    static const char *const drops[4] = { "attn_dropout_p", "resid_dropout_p", "ffn_dropout_p",
                                          "token_dropout_p" };
    float *dst[4] = { &tr->hyper.attn_drop, &tr->hyper.resid_drop, &tr->hyper.ffn_drop,
                      &tr->hyper.token_drop };
    kr_status rc = KR_OK;
    for (int i = 0; i < 4 && rc == KR_OK; i++) {
        double v;
        rc = json_number(root, drops[i], 0.0, &v, label, err);
        if (rc == KR_OK && !(v >= 0.0 && v < 1.0))
            rc = kr_error_set(err, KR_ERR_FORMAT, "%s: key '%s' = %g out of range [0, 1)", label,
                              drops[i], v);
        *dst[i] = (float)v;
    }
    tr_hyper *h = &tr->hyper;
    double gs = 4.0;
    if (rc == KR_OK) rc = json_number(root, "beta", 0.05, &h->beta, label, err);
    if (rc == KR_OK) rc = json_number(root, "gamma0", 1.0, &h->gamma0, label, err);
    if (rc == KR_OK) rc = json_number(root, "gamma", 1.1, &h->gamma, label, err);
    if (rc == KR_OK) rc = json_number(root, "zeta", 0.05, &h->zeta, label, err);
    if (rc == KR_OK) rc = json_number(root, "group_size", 4.0, &gs, label, err);
    h->inv_temperature = 1.0; /* BSQuantizer never passes another */
    cJSON_Delete(root);
    if (rc != KR_OK) return rc;
    if (tr->params.target == KR_TRAIN_TOKENIZER) {
        int q = tr->tcfg.s1_bits + tr->tcfg.s2_bits;
        if (gs != floor(gs) || gs < 1 || gs > q || q % (int)gs != 0)
            return kr_error_set(err, KR_ERR_FORMAT,
                                "%s: key 'group_size' = %g does not divide the code length %d",
                                label, gs, q);
        if (q > 64)
            return kr_error_set(err, KR_ERR_UNSUPPORTED, "%s: a code of %d bits (at most 64)",
                                label, q);
    }
    h->group_size = (int)gs;
    return KR_OK;
}

/* Reads and checks dir/config.json into tr (configs, hyper-parameters, shapes). */
static kr_status read_config(kr_trainer *tr, const char *dir, kr_error *err) {
    size_t n = strlen(dir) + 16;
    char *path = malloc(n);
    if (!path) return kr_error_set(err, KR_ERR_NOMEM, "trainer: out of memory");
    snprintf(path, n, "%s/config.json", dir);
    kr_status rc =
        kr_read_file(path, TR_CONFIG_MAX_BYTES, "config", &tr->config_json, &tr->config_len, err);
    int quantised = 0, layers = 0;
    if (rc == KR_OK && tr->params.target == KR_TRAIN_PREDICTOR) {
        rc = kr_predictor_config_parse(tr->config_json, tr->config_len, path, &tr->pcfg, err);
        quantised = tr->pcfg.quant.format != 0;
        layers = tr->pcfg.n_layers;
        tr->d = tr->pcfg.d_model;
        tr->ff = tr->pcfg.ff_dim;
        tr->n_heads = tr->pcfg.n_heads;
        if (rc == KR_OK && tr->d % 4 != 0)
            rc = kr_error_set(err, KR_ERR_MODEL,
                              "%s: d_model %d is not divisible by the dependency layer's 4 heads",
                              path, tr->d);
        if (rc == KR_OK && (tr->d / 4) % 2 != 0)
            rc = kr_error_set(err, KR_ERR_MODEL,
                              "%s: d_model %d gives the dependency layer an odd head_dim", path,
                              tr->d);
    } else if (rc == KR_OK) {
        rc = kr_tokenizer_config_parse(tr->config_json, tr->config_len, path, &tr->tcfg, err);
        quantised = tr->tcfg.quant.format != 0;
        layers = tr->tcfg.n_enc_layers > tr->tcfg.n_dec_layers ? tr->tcfg.n_enc_layers
                                                               : tr->tcfg.n_dec_layers;
        tr->d = tr->tcfg.d_model;
        tr->ff = tr->tcfg.ff_dim;
        tr->n_heads = tr->tcfg.n_heads;
        tr->tk.n_enc = tr->tcfg.n_enc_layers - 1;
        tr->tk.n_dec = tr->tcfg.n_dec_layers - 1;
        if (rc == KR_OK && tr->tcfg.d_in != KR_TRAIN_FEATURES)
            rc = kr_error_set(err, KR_ERR_UNSUPPORTED,
                              "%s: d_in %d (training batches carry %d features per row)", path,
                              tr->tcfg.d_in, KR_TRAIN_FEATURES);
    }
    if (rc == KR_OK && quantised)
        rc = kr_error_set(err, KR_ERR_UNSUPPORTED,
                          "%s: a quantised checkpoint cannot be trained (fine-tune the f32 one, "
                          "then quantise)",
                          path);
    if (rc == KR_OK && layers > TR_MAX_LAYERS)
        rc = kr_error_set(err, KR_ERR_UNSUPPORTED, "%s: %d layers (at most %d)", path, layers,
                          TR_MAX_LAYERS);
    if (rc == KR_OK) rc = parse_hyper(tr, path, err);
    free(path);
    return rc;
}

/* ---------------------------------------------------------------- layout */

static int rows_max(const kr_trainer *tr) {
    const kr_train_params *p = &tr->params;
    return p->batch_size * (p->target == KR_TRAIN_PREDICTOR ? p->seq_len - 1 : p->seq_len);
}

static int head_dim_max(const kr_trainer *tr) {
    int hd = tr->d / tr->n_heads;
    if (tr->params.target == KR_TRAIN_PREDICTOR && tr->d / 4 > hd) hd = tr->d / 4;
    return hd;
}

/* Every activation and scratch buffer, for nth threads. */
static void layout(kr_trainer *tr, tr_slab *s, int nth) {
    const int M = rows_max(tr), T = tr->params.seq_len, d = tr->d, ff = tr->ff;
    const size_t md = (size_t)M * (size_t)d, mf = (size_t)M * (size_t)ff;
    tr_ws w;
    w.xn = tr_take(s, md);
    w.t = tr_take(s, md);
    w.datt = tr_take(s, md);
    w.dq = tr_take(s, md);
    w.dk = tr_take(s, md);
    w.dv = tr_take(s, md);
    w.ff_a = tr_take(s, mf);
    w.ff_b = tr_take(s, mf);
    w.attn = tr_take(s, (size_t)nth * tr_attn_scratch_floats(T, head_dim_max(tr)));
    if (s->base) tr->ws = w;
    double *partial = (double *)tr_take(s, 2 * (tr->n_floats / TR_NORM_CHUNK + 1));
    if (s->base) tr->norm_partial = partial;
    /* rotary tables: the self-attention's, and the predictor's dependency layer's */
    int hd = d / tr->n_heads;
    tr_rope *r0 = tr->params.target == KR_TRAIN_PREDICTOR ? &tr->pr.rope : &tr->tk.rope;
    float *c0 = tr_take(s, (size_t)T * (size_t)(hd / 2)),
          *s0 = tr_take(s, (size_t)T * (size_t)(hd / 2));
    if (s->base) {
        r0->cos = c0;
        r0->sin = s0;
    }
    if (tr->params.target == KR_TRAIN_PREDICTOR) {
        float *c1 = tr_take(s, (size_t)T * (size_t)(d / 8)),
              *s1 = tr_take(s, (size_t)T * (size_t)(d / 8));
        if (s->base) {
            tr->pr.dep_rope.cos = c1;
            tr->pr.dep_rope.sin = s1;
        }
        tr_predictor_layout(tr, s, M);
    } else {
        tr_tokenizer_layout(tr, s, M);
    }
}

/* The per-stack pointer arrays (blocks, activations, streams). */
static kr_status alloc_views(kr_trainer *tr, kr_error *err) {
    int ok = 1;
    if (tr->params.target == KR_TRAIN_PREDICTOR) {
        int L = tr->pcfg.n_layers;
        ok = (tr->pr.blocks = calloc((size_t)L + 1, sizeof(tr_block_w))) &&
             (tr->pr.acts = calloc((size_t)L + 1, sizeof(tr_block_acts))) &&
             (tr->pr.stream = calloc((size_t)L + 1, sizeof(float *)));
    } else {
        tr_tokenizer *tk = &tr->tk;
        ok = (tk->enc = calloc((size_t)tk->n_enc + 1, sizeof(tr_block_w))) &&
             (tk->dec = calloc((size_t)tk->n_dec + 1, sizeof(tr_block_w))) &&
             (tk->enc_acts = calloc((size_t)tk->n_enc + 1, sizeof(tr_block_acts))) &&
             (tk->dec_acts[0] = calloc((size_t)tk->n_dec + 1, sizeof(tr_block_acts))) &&
             (tk->dec_acts[1] = calloc((size_t)tk->n_dec + 1, sizeof(tr_block_acts))) &&
             (tk->enc_stream = calloc((size_t)tk->n_enc + 1, sizeof(float *))) &&
             (tk->dec_stream[0] = calloc((size_t)tk->n_dec + 1, sizeof(float *))) &&
             (tk->dec_stream[1] = calloc((size_t)tk->n_dec + 1, sizeof(float *)));
    }
    return ok ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "trainer: out of memory");
}

static int threads_for(const kr_train_params *p) {
    return p->n_threads > 0 ? p->n_threads : kr_cpu_count();
}

/* The trainer's sizes without its values: configs, parameter table, activation bytes. */
static kr_status plan(kr_trainer *tr, const char *model_dir, const kr_train_params *params,
                      kr_error *err) {
    if (!model_dir || !params)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "trainer: NULL argument");
    tr->params = *params;
    kr_status rc = check_params(params, err);
    if (rc == KR_OK) rc = read_config(tr, model_dir, err);
    if (rc == KR_OK) rc = tr_params_build(tr, err);
    if (rc == KR_OK) {
        tr_slab s = { NULL, 0 };
        layout(tr, &s, threads_for(params));
        tr->act_bytes = s.off + 64;
    }
    return rc;
}

kr_status kr_train_memory_estimate(const char *model_dir, const kr_train_params *params,
                                   size_t *bytes, kr_error *err) {
    if (!bytes) return kr_error_set(err, KR_ERR_INVALID_ARG, "trainer: NULL argument");
    kr_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return kr_error_set(err, KR_ERR_NOMEM, "trainer: out of memory");
    kr_status rc = plan(tr, model_dir, params, err);
    if (rc == KR_OK) *bytes = 5 * tr->n_floats * sizeof(float) + tr->act_bytes + sizeof *tr;
    free(tr->config_json);
    free(tr);
    return rc;
}

void kr_trainer_free(kr_trainer *tr) {
    if (!tr) return;
    kr_pool_free(tr->pool);
    free(tr->act_block);
    free(tr->p);
    for (int i = 0; i < tr->n_buffers; i++) free(tr->buffers[i].data);
    free(tr->config_json);
    free(tr->pr.blocks);
    free(tr->pr.acts);
    free(tr->pr.stream);
    free(tr->tk.enc);
    free(tr->tk.dec);
    free(tr->tk.enc_acts);
    free(tr->tk.dec_acts[0]);
    free(tr->tk.dec_acts[1]);
    free(tr->tk.enc_stream);
    free(tr->tk.dec_stream[0]);
    free(tr->tk.dec_stream[1]);
    free(tr);
}

kr_status kr_trainer_create(const char *model_dir, const kr_train_params *params, kr_trainer **out,
                            kr_error *err) {
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "trainer: NULL argument");
    *out = NULL;
    kr_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return kr_error_set(err, KR_ERR_NOMEM, "trainer: out of memory");
    kr_status rc = plan(tr, model_dir, params, err);
    if (rc == KR_OK) rc = kr_pool_create(params->n_threads, &tr->pool, err);
    if (rc == KR_OK) {
        /* values, gradients and moments in one zeroed block */
        tr->p = calloc(5 * tr->n_floats + 16, sizeof(float));
        if (!tr->p)
            rc = kr_error_set(err, KR_ERR_NOMEM, "trainer: cannot allocate %zu bytes of parameters",
                              5 * tr->n_floats * sizeof(float));
    }
    if (rc == KR_OK) {
        tr->g = tr->p + tr->n_floats;
        tr->m = tr->g + tr->n_floats;
        tr->v = tr->m + tr->n_floats;
        tr->wt = tr->v + tr->n_floats;
        rc = tr_params_load(tr, model_dir, err);
    }
    if (rc == KR_OK) rc = alloc_views(tr, err);
    if (rc == KR_OK) {
        tr->nth = kr_pool_size(tr->pool);
        tr_slab s = { NULL, 0 };
        layout(tr, &s, tr->nth);
        tr->act_bytes = s.off + 64;
        if (posix_memalign(&tr->act_block, 64, tr->act_bytes) != 0) {
            tr->act_block = NULL;
            rc = kr_error_set(err, KR_ERR_NOMEM,
                              "trainer: cannot allocate %zu bytes of activations (batch_size %d × "
                              "seq_len %d)",
                              tr->act_bytes, params->batch_size, params->seq_len);
        }
    }
    if (rc == KR_OK) {
        tr_slab s = { tr->act_block, 0 };
        layout(tr, &s, tr->nth);
        tr_params_bind(tr);
        const int T = tr->params.seq_len;
        if (params->target == KR_TRAIN_PREDICTOR) {
            tr_rope_init(&tr->pr.rope, T, tr->d / tr->n_heads,
                         tr_inv_freq(tr, "transformer.0.self_attn"));
            tr_rope_init(&tr->pr.dep_rope, T, tr->d / 4, tr_inv_freq(tr, "dep_layer.cross_attn"));
        } else if (tr->tk.n_enc + tr->tk.n_dec > 0) {
            tr_rope_init(
                &tr->tk.rope, T, tr->d / tr->n_heads,
                tr_inv_freq(tr, tr->tk.n_enc ? "encoder.0.self_attn" : "decoder.0.self_attn"));
        }
    }
    if (rc != KR_OK) {
        kr_error_prefix(err, "%s", model_dir ? model_dir : "(null)");
        kr_trainer_free(tr);
        return rc;
    }
    *out = tr;
    return KR_OK;
}

/* ---------------------------------------------------------------- steps */

static kr_status check_batch(const kr_trainer *tr, const kr_train_batch *b, kr_error *err) {
    if (!b) return kr_error_set(err, KR_ERR_INVALID_ARG, "training batch: NULL");
    const kr_train_params *p = &tr->params;
    if (b->n < 1 || b->n > p->batch_size)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "training batch: %d windows, expected 1 to batch_size %d", b->n,
                            p->batch_size);
    int min_len = p->target == KR_TRAIN_PREDICTOR ? 2 : 1;
    if (b->len < min_len || b->len > p->seq_len)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "training batch: windows of %d rows, expected %d to seq_len %d", b->len,
                            min_len, p->seq_len);
    if (p->target == KR_TRAIN_PREDICTOR && (!b->s1 || !b->s2 || !b->stamp))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "training batch: the predictor needs s1, s2 and stamp");
    if (p->target == KR_TRAIN_TOKENIZER && !b->x)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "training batch: the tokenizer needs x");
    return KR_OK;
}

static kr_status run(kr_trainer *tr, const kr_train_batch *b, double grad_scale, int official,
                     uint64_t stream, kr_train_losses *out, kr_error *err) {
    kr_train_losses tmp;
    if (!out) out = &tmp;
    /* the forward reads the Linear weights transposed: refreshed from the values every pass,
     * so writes through kr_trainer_tensor's param pointers take effect too (~1 % of a step) */
    tr_params_transpose(tr);
    if (tr->params.target == KR_TRAIN_PREDICTOR)
        return tr_predictor_run(tr, b, grad_scale, official, stream, out, err);
    return tr_tokenizer_run(tr, b, grad_scale, stream, out, err);
}

kr_status kr_trainer_accumulate(kr_trainer *tr, const kr_train_batch *batch, kr_train_losses *out,
                                kr_error *err) {
    if (!tr) return kr_error_set(err, KR_ERR_INVALID_ARG, "trainer: NULL");
    kr_status rc = check_batch(tr, batch, err);
    if (rc != KR_OK) return rc;
    kr_train_losses l;
    uint64_t stream = kr_mix64(tr->micro ^ 0x73616d706c653131ull);
    rc = run(tr, batch, 1.0 / tr->params.accumulation_steps, 0, stream, &l, err);
    if (rc != KR_OK) return rc;
    tr->micro++;
    tr->pending++;
    if (out) *out = l;
    if (!isfinite(l.loss))
        return kr_error_set(err, KR_ERR_NUMERIC,
                            "step %ld, micro-batch %d: the loss is %s (its gradients are "
                            "accumulated: kr_trainer_zero_grad discards them)",
                            tr->steps + 1, tr->pending, isnan(l.loss) ? "NaN" : "infinite");
    return KR_OK;
}

kr_status kr_trainer_evaluate(kr_trainer *tr, const kr_train_batch *batch, int official_eval,
                              kr_train_losses *out, kr_error *err) {
    if (!tr) return kr_error_set(err, KR_ERR_INVALID_ARG, "trainer: NULL");
    kr_status rc = check_batch(tr, batch, err);
    if (rc != KR_OK) return rc;
    uint64_t stream = kr_mix64(tr->evals ^ 0x6576616c75617465ull);
    rc = run(tr, batch, 0.0, official_eval, stream, out, err);
    if (rc == KR_OK) tr->evals++;
    return rc;
}

void kr_trainer_zero_grad(kr_trainer *tr) {
    if (!tr) return;
    memset(tr->g, 0, tr->n_floats * sizeof(float));
    tr->pending = 0;
}

kr_status kr_trainer_step(kr_trainer *tr, kr_train_step_info *out, kr_error *err) {
    if (!tr) return kr_error_set(err, KR_ERR_INVALID_ARG, "trainer: NULL");
    return tr_optimizer_step(tr, out, err);
}

/* ---------------------------------------------------------------- views */

int kr_trainer_n_tensors(const kr_trainer *tr) { return tr ? tr->n_tensors : 0; }

kr_status kr_trainer_tensor(kr_trainer *tr, int index, kr_train_tensor *out, kr_error *err) {
    if (!tr || !out) return kr_error_set(err, KR_ERR_INVALID_ARG, "trainer: NULL argument");
    if (index < 0 || index >= tr->n_tensors)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "trainer: tensor %d of %d", index,
                            tr->n_tensors);
    const tr_param *p = &tr->tensors[index];
    memset(out, 0, sizeof *out);
    out->name = p->name;
    out->n_dims = p->n_dims;
    for (int i = 0; i < p->n_dims; i++) out->shape[i] = p->shape[i];
    out->n_elems = p->n;
    out->param = tr->p + p->off;
    out->grad = tr->g + p->off;
    out->trainable = p->trainable;
    return KR_OK;
}

long kr_trainer_steps_done(const kr_trainer *tr) { return tr ? tr->steps : 0; }

void kr_trainer_profile_enable(kr_trainer *tr, int on) {
    if (!tr) return;
    memset(tr->part_wall, 0, sizeof tr->part_wall);
    memset(tr->part_cpu, 0, sizeof tr->part_cpu);
    memset(tr->part_calls, 0, sizeof tr->part_calls);
    tr->parts = (kr_pool_parts){ TR_PART_COUNT, tr->part_wall, tr->part_cpu, tr->part_calls };
    kr_pool_attach_parts(tr->pool, on ? &tr->parts : NULL);
}

int kr_trainer_profile(const kr_trainer *tr, kr_train_part_time *out, int max) {
    for (int i = 0; tr && out && i < max && i < TR_PART_COUNT; i++)
        out[i] = (kr_train_part_time){ tr_part_name((tr_part)i), tr->part_wall[i], tr->part_cpu[i],
                                       (long)tr->part_calls[i] };
    return TR_PART_COUNT;
}

const float *tr_debug_probs(const kr_trainer *tr, int which) {
    if (tr->params.target != KR_TRAIN_PREDICTOR) return NULL;
    return which ? tr->pr.logits2 : tr->pr.logits1;
}

const float *tr_debug_tokenizer(const kr_trainer *tr, int which) {
    if (tr->params.target != KR_TRAIN_TOKENIZER) return NULL;
    return which == 0 ? tr->tk.quant : tr->tk.out[which - 1];
}
