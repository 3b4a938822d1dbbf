/*
 * train/params — the trainer's parameter table: every parameter of the checkpoint kind by its
 * official name (the order of the reference's named_parameters()), its shape and its place in
 * the flat value / gradient / moment arrays; loading the values from model.safetensors; and
 * the views the passes compute with (tr_lin, tr_block_w, ...).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/safetensors.h"
#include "train/linalg.h"
#include "train/trainer_internal.h"

static const char *const k_te_names[TR_TE_FIELDS] = { "minute", "hour", "weekday", "day", "month" };
static const int k_te_rows[TR_TE_FIELDS] = { 60, 24, 7, 32, 13 };
#define DEP_HEADS 4 /* DependencyAwareLayer's constructor default, whatever n_heads is */

typedef struct builder {
    kr_trainer *tr;
    kr_status status;
    kr_error *err;
} builder;

static void add(builder *b, int trainable, int64_t d0, int64_t d1, const char *fmt, ...)
    KR_PRINTF(5, 6);

static void add(builder *b, int trainable, int64_t d0, int64_t d1, const char *fmt, ...) {
    kr_trainer *tr = b->tr;
    if (b->status != KR_OK) return;
    if (tr->n_tensors == TR_MAX_TENSORS) {
        b->status = kr_error_set(b->err, KR_ERR_UNSUPPORTED, "trainer: more than %d parameters",
                                 TR_MAX_TENSORS);
        return;
    }
    tr_param *p = &tr->tensors[tr->n_tensors++];
    memset(p, 0, sizeof *p);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->name, sizeof p->name, fmt, ap);
    va_end(ap);
    p->n_dims = d1 < 0 ? 1 : 2;
    p->shape[0] = d0;
    p->shape[1] = d1 < 0 ? 0 : d1;
    p->n = (size_t)d0 * (size_t)(d1 < 0 ? 1 : d1);
    p->off = tr->n_floats;
    p->trainable = trainable;
    tr->n_floats += (p->n + 15) / 16 * 16;
}

static void add_linear(builder *b, const char *prefix, int n_out, int n_in, int bias) {
    add(b, 1, n_out, n_in, "%s.weight", prefix);
    if (bias) add(b, 1, n_out, -1, "%s.bias", prefix);
}

static void add_attn(builder *b, const char *prefix, int d) {
    static const char *const proj[4] = { "q_proj", "k_proj", "v_proj", "out_proj" };
    char name[TR_NAME_LEN];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, proj[i]);
        add_linear(b, name, d, d, 1);
    }
}

static void add_block(builder *b, const char *stack, int i, int d, int ff) {
    char name[TR_NAME_LEN];
    add(b, 1, d, -1, "%s.%d.norm1.weight", stack, i);
    snprintf(name, sizeof name, "%s.%d.self_attn", stack, i);
    add_attn(b, name, d);
    add(b, 1, d, -1, "%s.%d.norm2.weight", stack, i);
    /* FeedForward registers w1, w3, then w2 */
    snprintf(name, sizeof name, "%s.%d.ffn.w1", stack, i);
    add_linear(b, name, ff, d, 0);
    snprintf(name, sizeof name, "%s.%d.ffn.w3", stack, i);
    add_linear(b, name, ff, d, 0);
    snprintf(name, sizeof name, "%s.%d.ffn.w2", stack, i);
    add_linear(b, name, d, ff, 0);
}

kr_status tr_params_build(kr_trainer *tr, kr_error *err) {
    builder b = { tr, KR_OK, err };
    tr->n_tensors = 0;
    tr->n_floats = 0;
    if (tr->params.target == KR_TRAIN_PREDICTOR) {
        const kr_predictor_config *c = &tr->pcfg;
        const int d = c->d_model;
        add(&b, 1, 1 << c->s1_bits, d, "embedding.emb_s1.weight");
        add(&b, 1, 1 << c->s2_bits, d, "embedding.emb_s2.weight");
        add_linear(&b, "embedding.fusion_proj", d, 2 * d, 1);
        for (int i = 0; i < TR_TE_FIELDS; i++)
            add(&b, c->learn_te, k_te_rows[i], d,
                c->learn_te ? "time_emb.%s_embed.weight" : "time_emb.%s_embed.emb.weight",
                k_te_names[i]);
        for (int i = 0; i < c->n_layers; i++) add_block(&b, "transformer", i, d, c->ff_dim);
        add(&b, 1, d, -1, "norm.weight");
        add_attn(&b, "dep_layer.cross_attn", d);
        add(&b, 1, d, -1, "dep_layer.norm.weight");
        add_linear(&b, "head.proj_s1", 1 << c->s1_bits, d, 1);
        add_linear(&b, "head.proj_s2", 1 << c->s2_bits, d, 1);
    } else {
        const kr_tokenizer_config *c = &tr->tcfg;
        const int d = c->d_model, q = c->s1_bits + c->s2_bits;
        add_linear(&b, "embed", d, c->d_in, 1);
        add_linear(&b, "head", c->d_in, d, 1);
        for (int i = 0; i < c->n_enc_layers - 1; i++) add_block(&b, "encoder", i, d, c->ff_dim);
        for (int i = 0; i < c->n_dec_layers - 1; i++) add_block(&b, "decoder", i, d, c->ff_dim);
        add_linear(&b, "quant_embed", q, d, 1);
        add_linear(&b, "post_quant_embed_pre", d, c->s1_bits, 1);
        add_linear(&b, "post_quant_embed", d, q, 1);
    }
    return b.status;
}

tr_param *tr_param_find(kr_trainer *tr, const char *name) {
    for (int i = 0; i < tr->n_tensors; i++)
        if (strcmp(tr->tensors[i].name, name) == 0) return &tr->tensors[i];
    return NULL;
}

/* ---------------------------------------------------------------- loading */

static void fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
}

static kr_status load_param(kr_trainer *tr, const kr_safetensors *st, tr_param *p, kr_error *err) {
    const kr_st_tensor *t = kr_st_find(st, p->name);
    if (!t)
        return kr_error_set(err, KR_ERR_MODEL, "%s: tensor '%s' is missing", kr_st_label(st),
                            p->name);
    int same = t->ndim == p->n_dims;
    for (int i = 0; same && i < p->n_dims; i++) same = t->shape[i] == p->shape[i];
    if (!same) {
        char want[64], got[64];
        fmt_shape(want, sizeof want, p->n_dims, p->shape);
        fmt_shape(got, sizeof got, t->ndim, t->shape);
        return kr_error_set(err, KR_ERR_MODEL, "%s: tensor '%s' has shape %s, expected %s",
                            kr_st_label(st), p->name, got, want);
    }
    if (t->dtype != KR_DT_F32 && t->dtype != KR_DT_F16 && t->dtype != KR_DT_BF16)
        return kr_error_set(err, KR_ERR_MODEL, "%s: tensor '%s' is %s, expected a float dtype",
                            kr_st_label(st), p->name, kr_dtype_name(t->dtype));
    float *dst = tr->p + p->off;
    kr_status rc = kr_st_to_f32(t, dst, err);
    if (rc != KR_OK) return rc;
    for (size_t i = 0; i < p->n; i++)
        if (!isfinite(dst[i]))
            return kr_error_set(err, KR_ERR_MODEL,
                                "%s: tensor '%s' element %zu is not finite: the checkpoint "
                                "cannot be trained",
                                kr_st_label(st), p->name, i);
    return KR_OK;
}

static kr_status push_buffer(kr_trainer *tr, const char *name, int is_i64, size_t n, kr_error *err,
                             tr_buffer **out) {
    if (tr->n_buffers == TR_MAX_TENSORS)
        return kr_error_set(err, KR_ERR_UNSUPPORTED, "trainer: too many buffers");
    tr_buffer *b = &tr->buffers[tr->n_buffers];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", name);
    b->is_i64 = is_i64;
    b->n_dims = 1;
    b->shape[0] = (int64_t)n;
    b->n = n;
    b->data = calloc(n ? n : 1, is_i64 ? sizeof(int64_t) : sizeof(float));
    if (!b->data) return kr_error_set(err, KR_ERR_NOMEM, "trainer: out of memory");
    tr->n_buffers++;
    *out = b;
    return KR_OK;
}

/* The rotary inv_freq buffer of an attention module: the file's when present (what the
 * reference computes, as stored), else torch's formula in float32. */
static kr_status load_inv_freq(kr_trainer *tr, const kr_safetensors *st, const char *prefix,
                               int head_dim, kr_error *err) {
    char name[TR_NAME_LEN];
    snprintf(name, sizeof name, "%s.rotary.inv_freq", prefix);
    tr_buffer *b;
    kr_status rc = push_buffer(tr, name, 0, (size_t)head_dim / 2, err, &b);
    if (rc != KR_OK) return rc;
    const kr_st_tensor *t = kr_st_find(st, name);
    float *f = b->data;
    if (t && t->numel == head_dim / 2 && t->ndim == 1) return kr_st_to_f32(t, f, err);
    for (int i = 0; i < head_dim / 2; i++)
        f[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)head_dim);
    return KR_OK;
}

static kr_status load_basis(kr_trainer *tr, const kr_safetensors *st, const char *name, int bits,
                            kr_error *err) {
    tr_buffer *b;
    kr_status rc = push_buffer(tr, name, 1, (size_t)bits, err, &b);
    if (rc != KR_OK) return rc;
    int64_t *v = b->data;
    const kr_st_tensor *t = kr_st_find(st, name);
    if (t && t->numel == bits && t->ndim == 1) return kr_st_to_i64(t, v, err);
    for (int i = 0; i < bits; i++) v[i] = (int64_t)1 << (bits - 1 - i); /* MSB first */
    return KR_OK;
}

kr_status tr_params_load(kr_trainer *tr, const char *dir, kr_error *err) {
    size_t n = strlen(dir) + 32;
    char *path = malloc(n);
    if (!path) return kr_error_set(err, KR_ERR_NOMEM, "trainer: out of memory");
    snprintf(path, n, "%s/model.safetensors", dir);
    kr_safetensors *st = NULL;
    kr_status rc = kr_st_open(path, &st, err);
    free(path);
    if (rc != KR_OK) return rc;
    for (int i = 0; rc == KR_OK && i < tr->n_tensors; i++)
        rc = load_param(tr, st, &tr->tensors[i], err);
    char prefix[TR_NAME_LEN];
    if (tr->params.target == KR_TRAIN_PREDICTOR) {
        const kr_predictor_config *c = &tr->pcfg;
        for (int i = 0; rc == KR_OK && i < c->n_layers; i++) {
            snprintf(prefix, sizeof prefix, "transformer.%d.self_attn", i);
            rc = load_inv_freq(tr, st, prefix, c->d_model / c->n_heads, err);
        }
        if (rc == KR_OK)
            rc = load_inv_freq(tr, st, "dep_layer.cross_attn", c->d_model / DEP_HEADS, err);
    } else {
        const kr_tokenizer_config *c = &tr->tcfg;
        for (int i = 0; rc == KR_OK && i < c->n_enc_layers - 1; i++) {
            snprintf(prefix, sizeof prefix, "encoder.%d.self_attn", i);
            rc = load_inv_freq(tr, st, prefix, c->d_model / c->n_heads, err);
        }
        for (int i = 0; rc == KR_OK && i < c->n_dec_layers - 1; i++) {
            snprintf(prefix, sizeof prefix, "decoder.%d.self_attn", i);
            rc = load_inv_freq(tr, st, prefix, c->d_model / c->n_heads, err);
        }
        if (rc == KR_OK)
            rc = load_basis(tr, st, "tokenizer.bsq.basis", c->s1_bits + c->s2_bits, err);
        if (rc == KR_OK)
            rc = load_basis(tr, st, "tokenizer.bsq.group_basis", tr->hyper.group_size, err);
    }
    kr_st_close(st);
    return rc;
}

/* ---------------------------------------------------------------- views */

/* Values and gradient of the parameter `fmt...`; the table was built from the same config,
 * so every name is there (a miss is a bug, caught by the tests as a NULL dereference would
 * be: fail loudly instead). */
static float *val(kr_trainer *tr, float **grad, const char *fmt, ...) KR_PRINTF(3, 4);
static float *val(kr_trainer *tr, float **grad, const char *fmt, ...) {
    char name[TR_NAME_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    tr_param *p = tr_param_find(tr, name);
    if (!p) {
        if (grad) *grad = NULL;
        return NULL;
    }
    if (grad) *grad = p->trainable ? tr->g + p->off : NULL;
    return tr->p + p->off;
}

static tr_lin lin(kr_trainer *tr, const char *prefix, int n_out, int n_in, int bias) {
    tr_lin l = { .n_out = n_out, .n_in = n_in };
    l.w = val(tr, &l.gw, "%s.weight", prefix);
    if (bias) l.b = val(tr, &l.gb, "%s.bias", prefix);
    if (l.w) l.wt = tr->wt + (l.w - tr->p);
    if (l.w && tr->n_lins < TR_MAX_TENSORS) tr->lins[tr->n_lins++] = l;
    return l;
}

static tr_attn_w attn(kr_trainer *tr, const char *prefix, int d, int n_heads, const tr_rope *r) {
    char name[TR_NAME_LEN];
    tr_attn_w a = { .n_heads = n_heads, .head_dim = d / n_heads, .rope = r };
    snprintf(name, sizeof name, "%s.q_proj", prefix);
    a.q = lin(tr, name, d, d, 1);
    snprintf(name, sizeof name, "%s.k_proj", prefix);
    a.k = lin(tr, name, d, d, 1);
    snprintf(name, sizeof name, "%s.v_proj", prefix);
    a.v = lin(tr, name, d, d, 1);
    snprintf(name, sizeof name, "%s.out_proj", prefix);
    a.o = lin(tr, name, d, d, 1);
    return a;
}

static void block(kr_trainer *tr, tr_block_w *b, const char *stack, int i, int d, int n_heads,
                  int ff, const tr_rope *r) {
    char name[TR_NAME_LEN];
    b->d = d;
    b->ff = ff;
    b->norm1 = val(tr, &b->gnorm1, "%s.%d.norm1.weight", stack, i);
    b->norm2 = val(tr, &b->gnorm2, "%s.%d.norm2.weight", stack, i);
    snprintf(name, sizeof name, "%s.%d.self_attn", stack, i);
    b->attn = attn(tr, name, d, n_heads, r);
    snprintf(name, sizeof name, "%s.%d.ffn.w1", stack, i);
    b->w1 = lin(tr, name, ff, d, 0);
    snprintf(name, sizeof name, "%s.%d.ffn.w2", stack, i);
    b->w2 = lin(tr, name, d, ff, 0);
    snprintf(name, sizeof name, "%s.%d.ffn.w3", stack, i);
    b->w3 = lin(tr, name, ff, d, 0);
}

void tr_params_bind(kr_trainer *tr) {
    tr->n_lins = 0;
    if (tr->params.target == KR_TRAIN_PREDICTOR) {
        const kr_predictor_config *c = &tr->pcfg;
        tr_predictor *pr = &tr->pr;
        const int d = c->d_model;
        pr->emb_s1 = val(tr, &pr->gemb_s1, "embedding.emb_s1.weight");
        pr->emb_s2 = val(tr, &pr->gemb_s2, "embedding.emb_s2.weight");
        pr->fusion = lin(tr, "embedding.fusion_proj", d, 2 * d, 1);
        for (int i = 0; i < TR_TE_FIELDS; i++)
            pr->te[i] =
                val(tr, &pr->gte[i],
                    c->learn_te ? "time_emb.%s_embed.weight" : "time_emb.%s_embed.emb.weight",
                    k_te_names[i]);
        for (int i = 0; i < c->n_layers; i++)
            block(tr, &pr->blocks[i], "transformer", i, d, c->n_heads, c->ff_dim, &pr->rope);
        pr->norm = val(tr, &pr->gnorm, "norm.weight");
        pr->dep = attn(tr, "dep_layer.cross_attn", d, DEP_HEADS, &pr->dep_rope);
        pr->dep_norm = val(tr, &pr->gdep_norm, "dep_layer.norm.weight");
        pr->head_s1 = lin(tr, "head.proj_s1", 1 << c->s1_bits, d, 1);
        pr->head_s2 = lin(tr, "head.proj_s2", 1 << c->s2_bits, d, 1);
    } else {
        const kr_tokenizer_config *c = &tr->tcfg;
        tr_tokenizer *tk = &tr->tk;
        const int d = c->d_model, q = c->s1_bits + c->s2_bits;
        tk->embed = lin(tr, "embed", d, c->d_in, 1);
        tk->head = lin(tr, "head", c->d_in, d, 1);
        for (int i = 0; i < tk->n_enc; i++)
            block(tr, &tk->enc[i], "encoder", i, d, c->n_heads, c->ff_dim, &tk->rope);
        for (int i = 0; i < tk->n_dec; i++)
            block(tr, &tk->dec[i], "decoder", i, d, c->n_heads, c->ff_dim, &tk->rope);
        tk->quant_embed = lin(tr, "quant_embed", q, d, 1);
        tk->post_pre = lin(tr, "post_quant_embed_pre", d, c->s1_bits, 1);
        tk->post = lin(tr, "post_quant_embed", d, q, 1);
    }
}

/* The inv_freq buffer loaded for an attention prefix (params loaded first). */
const float *tr_inv_freq(const kr_trainer *tr, const char *prefix) {
    char name[TR_NAME_LEN];
    snprintf(name, sizeof name, "%s.rotary.inv_freq", prefix);
    for (int i = 0; i < tr->n_buffers; i++)
        if (strcmp(tr->buffers[i].name, name) == 0) return tr->buffers[i].data;
    return NULL;
}

static void transpose_region(void *p, int ith, int nth) {
    kr_trainer *tr = p;
    for (int i = ith; i < tr->n_lins; i += nth) tr_linear_transpose(&tr->lins[i]);
}

void tr_params_transpose(kr_trainer *tr) {
    kr_pool_run_part(tr->pool, TR_PART_OPTIM, transpose_region, tr);
}
