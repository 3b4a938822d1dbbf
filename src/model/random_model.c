/*
 * model/random_model — `kronos gen-random`: writes a tokenizer + predictor directory pair
 * with the exact tensor names, shapes and dtypes of a real checkpoint, filled with
 * deterministic random weights. Part of the weights.h module (kr_random_shape_find,
 * kr_model_write_random); kept apart from the loader because it is a test/bench tool.
 *
 * Used to exercise the engine at the public shapes (mini/small/base) without shipping
 * hundreds of MB of weights. The values follow the spirit of the reference init (so
 * activations stay in a realistic range), not its exact random stream: golden numerics
 * come from the fixtures, never from these files.
 */
#include "model/weights.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "model/safetensors.h"

/* ---------------------------------------------------------------- shapes */

#define TOK_BASE                                                                   \
    {                                                                              \
        .d_in = 6, .d_model = 256, .n_heads = 4, .ff_dim = 512, .n_enc_layers = 4, \
        .n_dec_layers = 4, .s1_bits = 10, .s2_bits = 10                            \
    }

static const kr_random_shape k_shapes[] = {
    { "tiny",
      { .d_in = 6,
        .d_model = 32,
        .n_heads = 2,
        .ff_dim = 64,
        .n_enc_layers = 2,
        .n_dec_layers = 2,
        .s1_bits = 10,
        .s2_bits = 10 },
      { .s1_bits = 10,
        .s2_bits = 10,
        .n_layers = 2,
        .d_model = 32,
        .n_heads = 2,
        .ff_dim = 64,
        .learn_te = 0 } },
    /* mini/small/base pair with the Kronos-Tokenizer-base shape, as the public models do. */
    { "mini",
      TOK_BASE,
      { .s1_bits = 10,
        .s2_bits = 10,
        .n_layers = 4,
        .d_model = 256,
        .n_heads = 4,
        .ff_dim = 512,
        .learn_te = 1 } },
    { "small",
      TOK_BASE,
      { .s1_bits = 10,
        .s2_bits = 10,
        .n_layers = 8,
        .d_model = 512,
        .n_heads = 8,
        .ff_dim = 1024,
        .learn_te = 1 } },
    { "base",
      TOK_BASE,
      { .s1_bits = 10,
        .s2_bits = 10,
        .n_layers = 12,
        .d_model = 832,
        .n_heads = 16,
        .ff_dim = 2048,
        .learn_te = 1 } },
};

const kr_random_shape *kr_random_shape_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++)
        if (strcmp(k_shapes[i].name, name) == 0) return &k_shapes[i];
    return NULL;
}

/* ---------------------------------------------------------------- random numbers */

/* xoshiro256** seeded through splitmix64 (Blackman & Vigna's recommended seeding). Each
 * tensor gets its own stream derived from (seed, tensor name), so a tensor's values do
 * not depend on the order in which tensors are generated. */
typedef struct rng {
    uint64_t s[4];
    int have_spare;
    double spare;
} rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

static void rng_seed(rng *r, uint64_t seed, const char *stream) {
    /* FNV-1a of the stream name, mixed with the seed. */
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)stream; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    uint64_t x = seed ^ h;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
    r->have_spare = 0;
}

/* Uniform in (0, 1): 53 random bits, offset by half a step so log() never sees 0. */
static double rng_uniform(rng *r) { return ((double)(rng_next(r) >> 11) + 0.5) * 0x1.0p-53; }

/* Standard normal by Box-Muller; the second value of each pair is kept for the next call. */
static double rng_normal(rng *r) {
    if (r->have_spare) {
        r->have_spare = 0;
        return r->spare;
    }
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    double rad = sqrt(-2.0 * log(u1)), th = 2.0 * 3.14159265358979323846 * u2;
    r->spare = rad * sin(th);
    r->have_spare = 1;
    return rad * cos(th);
}

/* ---------------------------------------------------------------- tensor emitters */

typedef struct gen {
    kr_st_writer *w;
    uint64_t seed;
    const char *model; /* "tokenizer" / "predictor": separates the two models' streams */
    float *buf; /* scratch, large enough for the biggest tensor */
    kr_status status;
    kr_error *err;
} gen;

/* N(0, std²) · scale into tensor `name` of shape [d0] (d1 < 0) or [d0, d1]. */
static void emit_normal(gen *g, const char *name, int64_t d0, int64_t d1, double std,
                        double scale) {
    if (g->status != KR_OK) return;
    int64_t shape[2] = { d0, d1 };
    int ndim = d1 < 0 ? 1 : 2;
    size_t n = (size_t)(d1 < 0 ? d0 : d0 * d1);
    char stream[192];
    snprintf(stream, sizeof stream, "%s/%s", g->model, name);
    rng r;
    rng_seed(&r, g->seed, stream);
    for (size_t i = 0; i < n; i++) g->buf[i] = (float)(rng_normal(&r) * std * scale);
    g->status = kr_st_writer_add(g->w, name, KR_DT_F32, ndim, shape, g->buf, g->err);
}

static void emit_ones(gen *g, const char *name, int64_t n) {
    if (g->status != KR_OK) return;
    for (int64_t i = 0; i < n; i++) g->buf[i] = 1.0f; /* RMSNorm weights start at 1 */
    g->status = kr_st_writer_add(g->w, name, KR_DT_F32, 1, &n, g->buf, g->err);
}

/* torch: 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)), in float32. The loader
 * has the same three lines for checkpoints that lack the buffer. */
static void emit_inv_freq(gen *g, const char *name, int head_dim) {
    if (g->status != KR_OK) return;
    int64_t half = head_dim / 2;
    for (int64_t i = 0; i < half; i++)
        g->buf[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)head_dim);
    g->status = kr_st_writer_add(g->w, name, KR_DT_F32, 1, &half, g->buf, g->err);
}

/* nn.Linear-shaped weight [n_out][n_in] with xavier-normal-like std, bias N(0, 0.02²). */
static void emit_linear(gen *g, const char *prefix, int n_out, int n_in, int with_bias,
                        double scale) {
    char name[160];
    snprintf(name, sizeof name, "%s.weight", prefix);
    emit_normal(g, name, n_out, n_in, sqrt(2.0 / (n_in + n_out)), scale);
    if (with_bias) {
        snprintf(name, sizeof name, "%s.bias", prefix);
        emit_normal(g, name, n_out, -1, 0.02, 1.0);
    }
}

static void emit_attn(gen *g, const char *prefix, int d_model, int n_heads) {
    static const char *const proj[4] = { "q_proj", "k_proj", "v_proj", "out_proj" };
    char name[128];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, proj[i]);
        emit_linear(g, name, d_model, d_model, 1, 1.0);
    }
    snprintf(name, sizeof name, "%s.rotary.inv_freq", prefix);
    emit_inv_freq(g, name, d_model / n_heads);
}

static void emit_block(gen *g, const char *prefix, int i, int d_model, int n_heads, int ff_dim) {
    char p[64], name[96];
    snprintf(p, sizeof p, "%s.%d", prefix, i);
    snprintf(name, sizeof name, "%s.norm1.weight", p);
    emit_ones(g, name, d_model);
    snprintf(name, sizeof name, "%s.norm2.weight", p);
    emit_ones(g, name, d_model);
    snprintf(name, sizeof name, "%s.self_attn", p);
    emit_attn(g, name, d_model, n_heads);
    snprintf(name, sizeof name, "%s.ffn.w1", p);
    emit_linear(g, name, ff_dim, d_model, 0, 1.0);
    snprintf(name, sizeof name, "%s.ffn.w2", p);
    emit_linear(g, name, d_model, ff_dim, 0, 1.0);
    snprintf(name, sizeof name, "%s.ffn.w3", p);
    emit_linear(g, name, ff_dim, d_model, 0, 1.0);
}

static void emit_i64(gen *g, const char *name, const int64_t *v, int64_t n) {
    if (g->status != KR_OK) return;
    g->status = kr_st_writer_add(g->w, name, KR_DT_I64, 1, &n, v, g->err);
}

/* ---------------------------------------------------------------- directories */

static char *join_path(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

/* Runs `fill` into a fresh writer and saves dir/model.safetensors. */
static kr_status write_model(const char *dir, const char *model, uint64_t seed, size_t max_numel,
                             void (*fill)(gen *, const void *), const void *cfg, kr_error *err) {
    gen g = { .seed = seed, .model = model, .err = err };
    g.buf = malloc(max_numel * sizeof(float));
    if (!g.buf) return kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", dir);
    g.status = kr_st_writer_create(&g.w, err);
    if (g.status == KR_OK) fill(&g, cfg);
    free(g.buf);
    if (g.status == KR_OK) {
        char *path = join_path(dir, "model.safetensors");
        g.status = path ? kr_st_writer_save(g.w, path, err)
                        : kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", dir);
        free(path);
    }
    kr_st_writer_free(g.w);
    return g.status;
}

static void fill_tokenizer(gen *g, const void *p) {
    const kr_tokenizer_config *c = p;
    const int d = c->d_model, q = c->s1_bits + c->s2_bits;
    emit_linear(g, "embed", d, c->d_in, 1, 1.0);
    for (int i = 0; i < c->n_enc_layers - 1; i++)
        emit_block(g, "encoder", i, d, c->n_heads, c->ff_dim);
    for (int i = 0; i < c->n_dec_layers - 1; i++)
        emit_block(g, "decoder", i, d, c->n_heads, c->ff_dim);
    emit_linear(g, "quant_embed", q, d, 1, 1.0);
    emit_linear(g, "post_quant_embed_pre", d, c->s1_bits, 1, 1.0);
    emit_linear(g, "post_quant_embed", d, q, 1, 1.0);
    emit_linear(g, "head", c->d_in, d, 1, 1.0);
    /* BSQ buffers: basis is MSB first over the whole code, group_basis over one group of 4
     * (the reference's group_size). Neither is read at inference. */
    int64_t basis[32], group[4] = { 8, 4, 2, 1 };
    for (int i = 0; i < q; i++) basis[i] = (int64_t)1 << (q - 1 - i);
    emit_i64(g, "tokenizer.bsq.basis", basis, q);
    emit_i64(g, "tokenizer.bsq.group_basis", group, 4);
}

static void fill_predictor(gen *g, const void *p) {
    static const char *const te[5] = { "minute", "hour", "weekday", "day", "month" };
    static const int te_rows[5] = { 60, 24, 7, 32, 13 };
    const kr_predictor_config *c = p;
    const int d = c->d_model;
    const int v1 = 1 << c->s1_bits, v2 = 1 << c->s2_bits;
    const double emb_std = 1.0 / sqrt((double)d); /* Kronos._init_weights: N(0, d^-0.5) */
    emit_normal(g, "embedding.emb_s1.weight", v1, d, emb_std, 1.0);
    emit_normal(g, "embedding.emb_s2.weight", v2, d, emb_std, 1.0);
    emit_linear(g, "embedding.fusion_proj", d, 2 * d, 1, 1.0);
    char name[160];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name,
                 c->learn_te ? "time_emb.%s_embed.weight" : "time_emb.%s_embed.emb.weight", te[i]);
        emit_normal(g, name, te_rows[i], d, emb_std, 1.0);
    }
    for (int i = 0; i < c->n_layers; i++) emit_block(g, "transformer", i, d, c->n_heads, c->ff_dim);
    emit_ones(g, "norm.weight", d);
    emit_attn(g, "dep_layer.cross_attn", d, 4);
    emit_ones(g, "dep_layer.norm.weight", d);
    /* ×4 as the golden generator did, so the logits are not flat and sampling tests see
     * distinct top tokens. */
    emit_linear(g, "head.proj_s1", v1, d, 1, 4.0);
    emit_linear(g, "head.proj_s2", v2, d, 1, 4.0);
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

kr_status kr_model_write_random(const kr_random_shape *shape, uint64_t seed, const char *out_dir,
                                kr_error *err) {
    if (!shape || !out_dir)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_model_write_random: NULL argument");
    const kr_tokenizer_config *tc = &shape->tok;
    const kr_predictor_config *pc = &shape->pred;
    char *tdir = join_path(out_dir, "tokenizer");
    char *pdir = join_path(out_dir, "predictor");
    char *tcfg = tdir ? join_path(tdir, "config.json") : NULL;
    char *pcfg = pdir ? join_path(pdir, "config.json") : NULL;
    kr_status rc = KR_OK;
    if (!tdir || !pdir || !tcfg || !pcfg) {
        rc = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory", out_dir);
        goto out;
    }
    /* Largest single tensor: the scratch buffer each model's emitters share. */
    size_t tmax = max_sz((size_t)tc->ff_dim * (size_t)tc->d_model,
                         max_sz((size_t)tc->d_model * (size_t)tc->d_model,
                                (size_t)(tc->s1_bits + tc->s2_bits) * (size_t)tc->d_model));
    size_t v = (size_t)1 << (pc->s1_bits > pc->s2_bits ? pc->s1_bits : pc->s2_bits);
    size_t pmax =
        max_sz(v * (size_t)pc->d_model, max_sz((size_t)pc->ff_dim * (size_t)pc->d_model,
                                               2 * (size_t)pc->d_model * (size_t)pc->d_model));
    pmax = max_sz(pmax, 60 * (size_t)pc->d_model);

    if ((rc = kr_mkdir_p(tdir, err)) != KR_OK) goto out;
    if ((rc = kr_mkdir_p(pdir, err)) != KR_OK) goto out;
    if ((rc = kr_tokenizer_config_save(tcfg, tc, err)) != KR_OK) goto out;
    /* Random weights forecast nothing: the checkpoint says so, and so does every report of it
     * (kr_model_info.demo, the DEMO MODEL notice). */
    kr_predictor_config marked = *pc;
    snprintf(marked.intended_use, sizeof marked.intended_use, "test");
    snprintf(marked.source, sizeof marked.source,
             "kronos gen-random (random weights, seed %llu): for testing the software only",
             (unsigned long long)seed);
    if ((rc = kr_predictor_config_save(pcfg, &marked, err)) != KR_OK) goto out;
    if ((rc = write_model(tdir, "tokenizer", seed, tmax, fill_tokenizer, tc, err)) != KR_OK)
        goto out;
    rc = write_model(pdir, "predictor", seed, pmax, fill_predictor, pc, err);
out:
    free(tdir);
    free(pdir);
    free(tcfg);
    free(pcfg);
    return rc;
}

int kr_random_shape_exists(const char *shape) { return kr_random_shape_find(shape) != NULL; }

kr_status kr_model_write_random_shape(const char *shape, uint64_t seed, const char *out_dir,
                                      kr_error *err) {
    const kr_random_shape *s = kr_random_shape_find(shape);
    if (!s)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "unknown random shape '%s' (expected tiny, mini, small or base)",
                            shape ? shape : "(null)");
    return kr_model_write_random(s, seed, out_dir, err);
}

kr_status kr_model_random_cached(const char *shape, uint64_t seed, char *dir, size_t dir_size,
                                 int *written, kr_error *err) {
    if (written) *written = 0;
    if (!dir || dir_size == 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "random model directory: no buffer");
    if (!kr_random_shape_find(shape))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "unknown random shape '%s' (expected tiny, mini, small or base)",
                            shape ? shape : "(null)");
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(dir, dir_size, "%s/kronos-bench-%s-seed%llu", tmp && *tmp ? tmp : "/tmp",
                     shape, (unsigned long long)seed);
    if (n < 0 || (size_t)n >= dir_size)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "random model directory: path too long");
    char *weights = malloc((size_t)n + 32);
    if (!weights) return kr_error_set(err, KR_ERR_NOMEM, "random model: out of memory");
    snprintf(weights, (size_t)n + 32, "%s/predictor/model.safetensors", dir);
    struct stat sb;
    int present = stat(weights, &sb) == 0;
    free(weights);
    if (present) return KR_OK;
    kr_status st = kr_model_write_random_shape(shape, seed, dir, err);
    if (st == KR_OK && written) *written = 1;
    return st;
}
