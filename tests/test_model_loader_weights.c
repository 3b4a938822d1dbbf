/*
 * Tests of model/weights: binding real-layout checkpoints (the golden tiny/odd fixtures and
 * the trained kronos-demo model) by state_dict name, F16/BF16/unaligned variants of them,
 * checkpoint and config errors (each must name the file and the tensor or key), and the
 * gen-random writer (exact parameter counts of the public checkpoints, same names and
 * shapes as the reference's state_dict, determinism).
 *
 * The expected tensor names below are written out independently of the loader, so a
 * loader that binds w1 where w3 belongs, or reads the wrong table, fails here.
 */
#include "test_support.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/config.h"
#include "model/safetensors.h"
#include "model/quantize.h"
#include "model/weights.h"

#define assert_contains(hay, needle)                                             \
    do {                                                                         \
        if (!strstr((hay), (needle)))                                            \
            fail_msg("message \"%s\" does not contain \"%s\"", (hay), (needle)); \
    } while (0)

/* snprintf into an array, failing the test instead of truncating a path or name. */
#define FMT(buf, ...) assert_true(snprintf((buf), sizeof(buf), __VA_ARGS__) < (int)sizeof(buf))

/* ---------------------------------------------------------------- bound-tensor lists */

typedef struct bound {
    char name[96];
    const float *p;
    int64_t n;
} bound;

typedef struct blist {
    bound b[1024];
    int n;
} blist;

__attribute__((format(printf, 4, 5))) static void add(blist *l, const float *p, int64_t n,
                                                      const char *fmt, ...) {
    assert_true(l->n < 1024);
    bound *b = &l->b[l->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->name, sizeof b->name, fmt, ap);
    va_end(ap);
    b->p = p;
    b->n = n;
}

static void add_linear(blist *l, const kr_linear *lin, int n_out, int n_in, const char *prefix) {
    assert_int_equal(lin->n_out, n_out);
    assert_int_equal(lin->n_in, n_in);
    add(l, lin->w, (int64_t)n_out * n_in, "%s.weight", prefix);
    if (lin->b) add(l, lin->b, n_out, "%s.bias", prefix);
}

static void add_attn(blist *l, const kr_attn_weights *a, int d, int heads, const char *prefix) {
    char p[96];
    assert_int_equal(a->n_heads, heads);
    assert_int_equal(a->head_dim, d / heads);
    const kr_linear *proj[4] = { &a->q, &a->k, &a->v, &a->out };
    const char *pn[4] = { "q_proj", "k_proj", "v_proj", "out_proj" };
    for (int i = 0; i < 4; i++) {
        assert_non_null(proj[i]->b);
        FMT(p, "%s.%s", prefix, pn[i]);
        add_linear(l, proj[i], d, d, p);
    }
    add(l, a->inv_freq, a->head_dim / 2, "%s.rotary.inv_freq", prefix);
}

static void add_block(blist *l, const kr_block_weights *b, int d, int heads, int ff,
                      const char *prefix, int i) {
    char p[64], q[96];
    FMT(p, "%s.%d", prefix, i);
    add(l, b->norm1, d, "%s.norm1.weight", p);
    add(l, b->norm2, d, "%s.norm2.weight", p);
    FMT(q, "%s.self_attn", p);
    add_attn(l, &b->attn, d, heads, q);
    assert_null(b->w1.b);
    assert_null(b->w2.b);
    assert_null(b->w3.b);
    FMT(q, "%s.ffn.w1", p);
    add_linear(l, &b->w1, ff, d, q);
    FMT(q, "%s.ffn.w2", p);
    add_linear(l, &b->w2, d, ff, q);
    FMT(q, "%s.ffn.w3", p);
    add_linear(l, &b->w3, ff, d, q);
}

static void list_tokenizer(const kr_tokenizer_weights *w, blist *l) {
    const kr_tokenizer_config *c = &w->cfg;
    int d = c->d_model, q = c->s1_bits + c->s2_bits;
    l->n = 0;
    assert_int_equal(w->n_enc, c->n_enc_layers - 1);
    assert_int_equal(w->n_dec, c->n_dec_layers - 1);
    add_linear(l, &w->embed, d, 6, "embed");
    for (int i = 0; i < w->n_enc; i++)
        add_block(l, &w->enc[i], d, c->n_heads, c->ff_dim, "encoder", i);
    for (int i = 0; i < w->n_dec; i++)
        add_block(l, &w->dec[i], d, c->n_heads, c->ff_dim, "decoder", i);
    add_linear(l, &w->quant_embed, q, d, "quant_embed");
    add_linear(l, &w->post_quant_embed, d, q, "post_quant_embed");
    add_linear(l, &w->head, 6, d, "head");
}

static void list_predictor(const kr_predictor_weights *w, blist *l) {
    const kr_predictor_config *c = &w->cfg;
    int d = c->d_model;
    l->n = 0;
    add(l, w->emb_s1, ((int64_t)1 << c->s1_bits) * d, "embedding.emb_s1.weight");
    add(l, w->emb_s2, ((int64_t)1 << c->s2_bits) * d, "embedding.emb_s2.weight");
    add_linear(l, &w->fusion, d, 2 * d, "embedding.fusion_proj");
    const float *te[5] = { w->te_minute, w->te_hour, w->te_weekday, w->te_day, w->te_month };
    const char *tn[5] = { "minute", "hour", "weekday", "day", "month" };
    const int rows[5] = { 60, 24, 7, 32, 13 };
    for (int i = 0; i < 5; i++)
        add(l, te[i], (int64_t)rows[i] * d,
            c->learn_te ? "time_emb.%s_embed.weight" : "time_emb.%s_embed.emb.weight", tn[i]);
    for (int i = 0; i < c->n_layers; i++)
        add_block(l, &w->blocks[i], d, c->n_heads, c->ff_dim, "transformer", i);
    add(l, w->norm, d, "norm.weight");
    add_attn(l, &w->dep, d, 4, "dep_layer.cross_attn");
    add(l, w->dep_norm, d, "dep_layer.norm.weight");
    add_linear(l, &w->head_s1, 1 << c->s1_bits, d, "head.proj_s1");
    add_linear(l, &w->head_s2, 1 << c->s2_bits, d, "head.proj_s2");
}

static int is_buffer(const char *name) {
    size_t n = strlen(name);
    return (n > 9 && strcmp(name + n - 9, ".inv_freq") == 0) ||
           strncmp(name, "tokenizer.bsq.", 14) == 0;
}

static int64_t ulp_dist(float a, float b) {
    int32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return llabs((int64_t)x - (int64_t)y); /* fine for same-sign finite values */
}

/* Every bound array equals the file's tensor of that name (converted to f32): exactly, or
 * within rel_tol when the file holds a higher-precision version of the same weights.
 * Rotary inv_freq buffers: equal to a stored F32 buffer when `rotary_from_file` (and not the
 * dep layer, whose buffer the loader ignores); otherwise within 1 ulp of the stored F32
 * buffer or of the formula. Returns the number of parameters (non-buffer floats) seen. */
static size_t check_against_file(const blist *l, const char *st_path, double rel_tol,
                                 int rotary_from_file) {
    kr_safetensors *st;
    kr_error err = { 0 };
    if (kr_st_open(st_path, &st, &err) != KR_OK) fail_msg("%s", err.message);
    size_t params = 0;
    for (int i = 0; i < l->n; i++) {
        const bound *b = &l->b[i];
        assert_non_null(b->p);
        const kr_st_tensor *t = kr_st_find(st, b->name);
        if (is_buffer(b->name)) {
            int64_t half = b->n, dim = 2 * half;
            int exact = rotary_from_file && t && t->dtype == KR_DT_F32 &&
                        strncmp(b->name, "dep_layer.", 10) != 0;
            for (int64_t k = 0; k < half; k++) {
                float want = (float)(1.0 / pow(10000.0, (double)((float)(2 * k) / (float)dim)));
                if (t && t->dtype == KR_DT_F32) memcpy(&want, (const float *)t->data + k, 4);
                if (exact ? b->p[k] != want : ulp_dist(b->p[k], want) > 1)
                    fail_msg("'%s'[%lld] = %a, expected %a", b->name, (long long)k, (double)b->p[k],
                             (double)want);
            }
            continue;
        }
        if (!t) fail_msg("%s: no tensor '%s' in the file", st_path, b->name);
        if (t->numel != b->n)
            fail_msg("'%s': %lld elements, file has %lld", b->name, (long long)b->n,
                     (long long)t->numel);
        float *ref = malloc((size_t)t->numel * sizeof(float));
        assert_int_equal(kr_st_to_f32(t, ref, &err), KR_OK);
        for (int64_t k = 0; k < t->numel; k++) {
            double tol = rel_tol * fabs(ref[k]) + (rel_tol > 0 ? 1e-7 : 0.0);
            if (!(fabs((double)b->p[k] - ref[k]) <= tol))
                fail_msg("'%s'[%lld] = %.9g, file has %.9g", b->name, (long long)k, (double)b->p[k],
                         (double)ref[k]);
        }
        free(ref);
        params += (size_t)b->n;
    }
    kr_st_close(st);
    return params;
}

/* state_dict parameter count of a file: every tensor except the persistent buffers. */
static size_t file_params(const char *st_path) {
    kr_safetensors *st;
    kr_error err = { 0 };
    if (kr_st_open(st_path, &st, &err) != KR_OK) fail_msg("%s", err.message);
    size_t n = 0;
    for (int i = 0; i < kr_st_count(st); i++) {
        const kr_st_tensor *t = kr_st_at(st, i);
        if (!is_buffer(t->name)) n += (size_t)t->numel;
    }
    kr_st_close(st);
    return n;
}

static const char *path2(char *buf, size_t cap, const char *a, const char *b) {
    assert_true(snprintf(buf, cap, "%s/%s", a, b) < (int)cap);
    return buf;
}

/* Loads dir/tokenizer and dir/predictor, checks every bound tensor against the files and
 * the parameter counts: `tok_sd` and `pred_sd` are the state_dict counts (golden README
 * §3); the tokenizer's inference count excludes post_quant_embed_pre. */
static void check_model_dir(const char *dir, size_t tok_sd, size_t pred_sd) {
    char tdir[4096], pdir[4096], p[4096];
    kr_error err = { 0 };
    path2(tdir, sizeof tdir, dir, "tokenizer");
    path2(pdir, sizeof pdir, dir, "predictor");

    kr_tokenizer_weights *tw = NULL;
    if (kr_tokenizer_weights_load(tdir, NULL, &tw, &err) != KR_OK) fail_msg("%s", err.message);
    blist *l = malloc(sizeof *l);
    list_tokenizer(tw, l);
    path2(p, sizeof p, tdir, "model.safetensors");
    size_t seen = check_against_file(l, p, 0.0, 1);
    assert_int_equal(file_params(p), tok_sd);
    int d = tw->cfg.d_model;
    size_t pre = (size_t)d * tw->cfg.s1_bits + (size_t)d; /* post_quant_embed_pre */
    assert_int_equal(tw->n_params, tok_sd - pre);
    assert_int_equal(seen, tw->n_params);
    assert_true(tw->bytes >= tw->n_params * sizeof(float));
    kr_tokenizer_weights_free(tw);

    kr_predictor_weights *pw = NULL;
    if (kr_predictor_weights_load(pdir, NULL, &pw, &err) != KR_OK) fail_msg("%s", err.message);
    list_predictor(pw, l);
    path2(p, sizeof p, pdir, "model.safetensors");
    seen = check_against_file(l, p, 0.0, 1);
    assert_int_equal(file_params(p), pred_sd);
    assert_int_equal(pw->n_params, pred_sd);
    assert_int_equal(seen, pred_sd);
    assert_true(pw->bytes >= pw->n_params * sizeof(float));
    kr_predictor_weights_free(pw);
    free(l);
}

static void test_load_golden_tiny(void **state) {
    (void)state;
    char dir[4096];
    FMT(dir, "%s", kr_test_fixture("tiny"));
    check_model_dir(dir, 22970, 164704);
}

static void test_load_golden_odd(void **state) {
    (void)state;
    char dir[4096];
    FMT(dir, "%s", kr_test_fixture("odd"));
    check_model_dir(dir, 169562, 2445008);
    kr_predictor_weights *pw;
    kr_error err = { 0 };
    FMT(dir, "%s", kr_test_fixture("odd/predictor"));
    assert_int_equal(kr_predictor_weights_load(dir, NULL, &pw, &err), KR_OK);
    assert_int_equal(pw->blocks[0].attn.head_dim, 52);
    assert_int_equal(pw->dep.head_dim, 52);
    assert_int_equal(pw->cfg.learn_te, 1);
    kr_predictor_weights_free(pw);
}

static void test_load_demo(void **state) {
    (void)state;
    check_model_dir(KR_SOURCE_DIR "/models/kronos-demo", 169562, 1301376);
}

/* ---------------------------------------------------------------- rewritten checkpoints */

typedef enum edit_mode {
    EDIT_COPY,
    EDIT_F16, /* every F32 tensor stored as F16 */
    EDIT_BF16, /* every F32 tensor stored as BF16 */
    EDIT_DROP, /* drop tensors whose name contains `target` */
    EDIT_SHAPE, /* tensor `target` gets `shape` (data truncated) */
    EDIT_I32, /* tensor `target` stored as I32 */
} edit_mode;

/* Round to nearest even, as torch's .half() does. */
static uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax < 0x33000001u) return (uint16_t)sign;
    uint32_t e = ax >> 23;
    if (e < 113) {
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e, r = m >> shift, rem = m & ((1u << shift) - 1),
                 half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    if (e > 142) return (uint16_t)(sign | 0x7c00u);
    uint32_t r = ((e - 112) << 10) | ((ax >> 13) & 0x3ffu), rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

static uint16_t f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

/* Independent half decoder (ldexp rather than bit surgery) for exact comparisons. */
static float f16_ref(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0    ? ldexpf((float)m, -24)
              : e == 31 ? (m ? NAN : INFINITY)
                        : ldexpf((float)(m + 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

static void copy_text(const char *from, const char *to) {
    FILE *f = fopen(from, "rb");
    assert_non_null(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_int_equal(kr_test_write_file(to, buf, n), 0);
}

/* Writes dst/{config.json, model.safetensors} from src with one edit applied. */
static void rewrite_model(const char *src, const char *dst, edit_mode mode, const char *target,
                          int ndim, const int64_t *shape) {
    char p[4096], q[4096];
    kr_error err = { 0 };
    assert_int_equal(mkdir(dst, 0755) == 0 || errno == EEXIST, 1);
    copy_text(path2(p, sizeof p, src, "config.json"), path2(q, sizeof q, dst, "config.json"));
    kr_safetensors *st;
    if (kr_st_open(path2(p, sizeof p, src, "model.safetensors"), &st, &err) != KR_OK)
        fail_msg("%s", err.message);
    kr_st_writer *w;
    assert_int_equal(kr_st_writer_create(&w, &err), KR_OK);
    for (int i = 0; i < kr_st_count(st); i++) {
        const kr_st_tensor *t = kr_st_at(st, i);
        int hit = target && (mode == EDIT_DROP ? strstr(t->name, target) != NULL
                                               : strcmp(t->name, target) == 0);
        if (mode == EDIT_DROP && hit) continue;
        void *buf = malloc(t->nbytes + 16);
        kr_dtype dt = t->dtype;
        int nd = t->ndim;
        const int64_t *sh = t->shape;
        memcpy(buf, t->data, t->nbytes);
        if (t->dtype == KR_DT_F32 && (mode == EDIT_F16 || mode == EDIT_BF16)) {
            const float *f = (const float *)t->data;
            uint16_t *h = buf;
            for (int64_t k = 0; k < t->numel; k++)
                h[k] = mode == EDIT_F16 ? f32_to_f16(f[k]) : f32_to_bf16(f[k]);
            dt = mode == EDIT_F16 ? KR_DT_F16 : KR_DT_BF16;
        } else if (mode == EDIT_SHAPE && hit) {
            nd = ndim;
            sh = shape; /* the new shape must not be larger than the old one */
        } else if (mode == EDIT_I32 && hit) {
            int32_t *v = buf;
            for (int64_t k = 0; k < t->numel; k++) v[k] = (int32_t)k;
            dt = KR_DT_I32;
        }
        if (kr_st_writer_add(w, t->name, dt, nd, sh, buf, &err) != KR_OK)
            fail_msg("%s", err.message);
        free(buf);
    }
    kr_st_close(st);
    assert_int_equal(kr_st_writer_save(w, path2(p, sizeof p, dst, "model.safetensors"), &err),
                     KR_OK);
    kr_st_writer_free(w);
}

static void rm_model_dir(const char *dir) {
    char p[4096];
    remove(path2(p, sizeof p, dir, "config.json"));
    remove(path2(p, sizeof p, dir, "model.safetensors"));
    remove(dir);
}

/* F16/BF16 copies of the tiny checkpoint load (into the arena) and give the same values
 * as the F32 originals up to the format's rounding; F16 values are bit-exact against an
 * independent decoder. */
static void test_half_precision_variants(void **state) {
    (void)state;
    const char *tmp = kr_test_fresh_dir();
    char src[4096], dst[4096], p[4096];
    kr_error err = { 0 };
    blist *l = malloc(sizeof *l);
    for (int which = 0; which < 2; which++) {
        const char *part = which ? "predictor" : "tokenizer";
        FMT(src, "%s", kr_test_fixture(which ? "tiny/predictor" : "tiny/tokenizer"));
        for (int m = 0; m < 2; m++) {
            edit_mode mode = m ? EDIT_BF16 : EDIT_F16;
            FMT(dst, "%s/%s_%d", tmp, part, m);
            rewrite_model(src, dst, mode, NULL, 0, NULL);
            kr_tokenizer_weights *tw = NULL;
            kr_predictor_weights *pw = NULL;
            if (which == 0) {
                if (kr_tokenizer_weights_load(dst, NULL, &tw, &err) != KR_OK)
                    fail_msg("%s", err.message);
                list_tokenizer(tw, l);
            } else {
                if (kr_predictor_weights_load(dst, NULL, &pw, &err) != KR_OK)
                    fail_msg("%s", err.message);
                list_predictor(pw, l);
            }
            /* Against the F32 original: relative error of one rounding. */
            size_t params = check_against_file(l, path2(p, sizeof p, src, "model.safetensors"),
                                               mode == EDIT_F16 ? 0x1p-11 : 0x1p-8, 0);
            /* Against the stored half bits: exact. */
            check_against_file(l, path2(p, sizeof p, dst, "model.safetensors"), 0.0, 0);
            if (mode == EDIT_F16) {
                kr_safetensors *st;
                assert_int_equal(kr_st_open(p, &st, &err), KR_OK);
                const kr_st_tensor *t = kr_st_find(st, l->b[0].name);
                assert_int_equal(t->dtype, KR_DT_F16);
                for (int64_t k = 0; k < t->numel; k++) {
                    uint16_t h;
                    memcpy(&h, (const uint8_t *)t->data + 2 * k, 2);
                    assert_true(l->b[0].p[k] == f16_ref(h));
                }
                kr_st_close(st);
            }
            assert_int_equal(params, which ? 164704u : 22970u - 352u);
            kr_tokenizer_weights_free(tw);
            kr_predictor_weights_free(pw);
            rm_model_dir(dst);
        }
    }
    free(l);
    remove(tmp);
}

/* Shifting the data section by one byte makes every F32 tensor unaligned: the loader must
 * copy them (and UBSan must see no misaligned load). */
static void test_unaligned_f32(void **state) {
    (void)state;
    const char *tmp = kr_test_fresh_dir();
    char src[4096], p[4096], q[4096];
    FMT(src, "%s", kr_test_fixture("tiny/predictor"));
    FILE *f = fopen(path2(p, sizeof p, src, "model.safetensors"), "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | b[i];
    memmove(b + 8 + hl + 1, b + 8 + hl, (size_t)len - 8 - hl);
    b[8 + hl] = ' ';
    hl++;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(hl >> (8 * i));
    assert_int_equal(
        kr_test_write_file(path2(p, sizeof p, tmp, "model.safetensors"), b, (size_t)len + 1), 0);
    free(b);
    copy_text(path2(p, sizeof p, src, "config.json"), path2(q, sizeof q, tmp, "config.json"));

    kr_predictor_weights *pw;
    kr_error err = { 0 };
    if (kr_predictor_weights_load(tmp, NULL, &pw, &err) != KR_OK) fail_msg("%s", err.message);
    assert_int_equal((uintptr_t)pw->norm % 4, 0);
    blist *l = malloc(sizeof *l);
    list_predictor(pw, l);
    for (int i = 0; i < l->n; i++) assert_int_equal((uintptr_t)l->b[i].p % 4, 0);
    check_against_file(l, path2(p, sizeof p, src, "model.safetensors"), 0.0, 1);
    free(l);
    kr_predictor_weights_free(pw);
    rm_model_dir(tmp);
}

/* Without the inv_freq buffers the loader computes them as torch does: within 1 ulp of
 * the buffers torch stored in the golden files (bit-identical except one element at
 * head_dim 52, see weights.c). */
static void test_inv_freq_computed(void **state) {
    (void)state;
    const char *models[] = { "tiny/predictor", "odd/predictor", "odd/tokenizer" };
    const char *tmp = kr_test_fresh_dir();
    char src[4096], dst[4096], p[4096];
    kr_error err = { 0 };
    blist *l = malloc(sizeof *l);
    for (int m = 0; m < 3; m++) {
        FMT(src, "%s", kr_test_fixture(models[m]));
        FMT(dst, "%s/m%d", tmp, m);
        rewrite_model(src, dst, EDIT_DROP, ".inv_freq", 0, NULL);
        kr_predictor_weights *pw = NULL;
        kr_tokenizer_weights *tw = NULL;
        if (m < 2) {
            if (kr_predictor_weights_load(dst, NULL, &pw, &err) != KR_OK)
                fail_msg("%s", err.message);
            list_predictor(pw, l);
        } else {
            if (kr_tokenizer_weights_load(dst, NULL, &tw, &err) != KR_OK)
                fail_msg("%s", err.message);
            list_tokenizer(tw, l);
        }
        check_against_file(l, path2(p, sizeof p, src, "model.safetensors"), 0.0, 0);
        kr_predictor_weights_free(pw);
        kr_tokenizer_weights_free(tw);
        rm_model_dir(dst);
    }
    free(l);
    remove(tmp);
}

/* ---------------------------------------------------------------- errors */

typedef struct model_err_case {
    const char *src; /* fixture model dir */
    edit_mode mode;
    const char *target;
    int ndim;
    int64_t shape[2];
    const char *expect;
} model_err_case;

static const model_err_case k_model_errs[] = {
    { "tiny/predictor",
      EDIT_DROP,
      "norm.weight",
      0,
      { 0, 0 },
      "model.safetensors: missing tensor 'norm.weight'" },
    { "tiny/predictor",
      EDIT_DROP,
      "head.proj_s2.bias",
      0,
      { 0, 0 },
      "model.safetensors: missing tensor 'head.proj_s2.bias'" },
    { "tiny/predictor",
      EDIT_DROP,
      "time_emb.day_embed",
      0,
      { 0, 0 },
      "missing tensor 'time_emb.day_embed.emb.weight'" },
    { "tiny/predictor",
      EDIT_SHAPE,
      "transformer.1.ffn.w1.weight",
      2,
      { 32, 32 },
      "model.safetensors: tensor 'transformer.1.ffn.w1.weight' has shape [32, 32], expected [64, "
      "32]" },
    { "tiny/predictor",
      EDIT_SHAPE,
      "norm.weight",
      2,
      { 4, 8 },
      "tensor 'norm.weight' has shape [4, 8], expected [32]" },
    { "tiny/predictor",
      EDIT_SHAPE,
      "transformer.0.self_attn.rotary.inv_freq",
      1,
      { 4 },
      "tensor 'transformer.0.self_attn.rotary.inv_freq' has shape [4], expected [8]" },
    { "tiny/predictor",
      EDIT_I32,
      "embedding.fusion_proj.weight",
      0,
      { 0, 0 },
      "tensor 'embedding.fusion_proj.weight' has dtype I32, expected F32, F16 or BF16" },
    { "tiny/tokenizer",
      EDIT_DROP,
      "quant_embed.bias",
      0,
      { 0, 0 },
      "model.safetensors: missing tensor 'quant_embed.bias'" },
    { "tiny/tokenizer",
      EDIT_SHAPE,
      "head.weight",
      2,
      { 5, 32 },
      "tensor 'head.weight' has shape [5, 32], expected [6, 32]" },
    { "tiny/tokenizer",
      EDIT_I32,
      "decoder.0.ffn.w2.weight",
      0,
      { 0, 0 },
      "tensor 'decoder.0.ffn.w2.weight' has dtype I32" },
};

static void test_model_errors(void **state) {
    (void)state;
    const char *tmp = kr_test_fresh_dir();
    char src[4096], dst[4096];
    for (size_t i = 0; i < sizeof k_model_errs / sizeof k_model_errs[0]; i++) {
        const model_err_case *c = &k_model_errs[i];
        FMT(src, "%s", kr_test_fixture(c->src));
        FMT(dst, "%s/case%zu", tmp, i);
        rewrite_model(src, dst, c->mode, c->target, c->ndim, c->shape);
        kr_error err = { 0 };
        kr_status rc;
        if (strstr(c->src, "predictor")) {
            kr_predictor_weights *pw = (kr_predictor_weights *)1;
            rc = kr_predictor_weights_load(dst, NULL, &pw, &err);
            assert_null(pw);
        } else {
            kr_tokenizer_weights *tw = (kr_tokenizer_weights *)1;
            rc = kr_tokenizer_weights_load(dst, NULL, &tw, &err);
            assert_null(tw);
        }
        if (rc != KR_ERR_MODEL) fail_msg("case %zu: status %d (%s)", i, rc, err.message);
        assert_contains(err.message, c->expect);
        assert_contains(err.message, dst); /* the file is named with its directory */
        rm_model_dir(dst);
    }
    remove(tmp);
}

static void write_config(const char *dir, const char *text) {
    char p[4096];
    assert_int_equal(kr_test_write_file(path2(p, sizeof p, dir, "config.json"), text, strlen(text)),
                     0);
}

/* config.json and model.safetensors that disagree, and bad configs next to good weights. */
static void test_config_checkpoint_mismatch(void **state) {
    (void)state;
    const char *tmp = kr_test_fresh_dir();
    char src[4096], dst[4096];
    kr_error err = { 0 };
    kr_predictor_weights *pw = NULL;
    kr_tokenizer_weights *tw = NULL;

    FMT(src, "%s", kr_test_fixture("tiny/predictor"));
    FMT(dst, "%s/pred", tmp);
    rewrite_model(src, dst, EDIT_COPY, NULL, 0, NULL);
    /* Fewer layers in the config than in the file: the extra block is named. */
    write_config(dst, "{\"d_model\": 32, \"ff_dim\": 64, \"learn_te\": false, \"n_heads\": 2,"
                      " \"n_layers\": 1, \"s1_bits\": 10, \"s2_bits\": 10}");
    assert_int_equal(kr_predictor_weights_load(dst, NULL, &pw, &err), KR_ERR_MODEL);
    assert_contains(err.message, "model.safetensors: tensor 'transformer.1.");
    assert_contains(err.message, "n_layers = 1");
    /* More layers in the config than in the file. */
    write_config(dst, "{\"d_model\": 32, \"ff_dim\": 64, \"learn_te\": false, \"n_heads\": 2,"
                      " \"n_layers\": 3, \"s1_bits\": 10, \"s2_bits\": 10}");
    assert_int_equal(kr_predictor_weights_load(dst, NULL, &pw, &err), KR_ERR_MODEL);
    assert_contains(err.message, "missing tensor 'transformer.2.norm1.weight'");
    /* learn_te true against a learn_te=False checkpoint. */
    write_config(dst, "{\"d_model\": 32, \"ff_dim\": 64, \"learn_te\": true, \"n_heads\": 2,"
                      " \"n_layers\": 2, \"s1_bits\": 10, \"s2_bits\": 10}");
    assert_int_equal(kr_predictor_weights_load(dst, NULL, &pw, &err), KR_ERR_MODEL);
    assert_contains(err.message, "missing tensor 'time_emb.minute_embed.weight'");
    /* A d_model the file does not have. */
    write_config(dst, "{\"d_model\": 64, \"ff_dim\": 64, \"learn_te\": false, \"n_heads\": 2,"
                      " \"n_layers\": 2, \"s1_bits\": 10, \"s2_bits\": 10}");
    assert_int_equal(kr_predictor_weights_load(dst, NULL, &pw, &err), KR_ERR_MODEL);
    assert_contains(err.message,
                    "tensor 'embedding.emb_s1.weight' has shape [1024, 32], expected [1024, 64]");
    /* Missing key and bad value: the config file and the key are named. */
    write_config(dst, "{\"ff_dim\": 64, \"learn_te\": false, \"n_heads\": 2,"
                      " \"n_layers\": 2, \"s1_bits\": 10, \"s2_bits\": 10}");
    assert_int_equal(kr_predictor_weights_load(dst, NULL, &pw, &err), KR_ERR_FORMAT);
    assert_contains(err.message, "config.json: missing key 'd_model'");
    assert_contains(err.message, dst);
    write_config(dst, "{\"d_model\": 32, \"ff_dim\": -64, \"learn_te\": false, \"n_heads\": 2,"
                      " \"n_layers\": 2, \"s1_bits\": 10, \"s2_bits\": 10}");
    assert_int_equal(kr_predictor_weights_load(dst, NULL, &pw, &err), KR_ERR_FORMAT);
    assert_contains(err.message, "config.json: key 'ff_dim' = -64 is out of range");
    assert_null(pw);
    rm_model_dir(dst);

    FMT(src, "%s", kr_test_fixture("tiny/tokenizer"));
    FMT(dst, "%s/tok", tmp);
    rewrite_model(src, dst, EDIT_COPY, NULL, 0, NULL);
    write_config(dst, "{\"d_in\": 6, \"d_model\": 32, \"ff_dim\": 64, \"n_dec_layers\": 2,"
                      " \"n_enc_layers\": 1, \"n_heads\": 2, \"s1_bits\": 10, \"s2_bits\": 10}");
    assert_int_equal(kr_tokenizer_weights_load(dst, NULL, &tw, &err), KR_ERR_MODEL);
    assert_contains(err.message, "tensor 'encoder.0.");
    assert_contains(err.message, "n_enc_layers = 1");
    write_config(dst, "{\"d_in\": 6, \"d_model\": 32, \"ff_dim\": 64, \"n_dec_layers\": 2,"
                      " \"n_enc_layers\": 2, \"n_heads\": 2, \"s1_bits\": 10, \"s2_bits\": 9}");
    assert_int_equal(kr_tokenizer_weights_load(dst, NULL, &tw, &err), KR_ERR_FORMAT);
    assert_contains(err.message, "config.json: key 's2_bits' = 9");
    write_config(dst, "{\"d_in\": 6, \"d_model\": 32, \"ff_dim\": 64, \"n_dec_layers\": 2,"
                      " \"n_enc_layers\": 2, \"n_heads\": 2, \"s1_bits\": 8, \"s2_bits\": 8}");
    assert_int_equal(kr_tokenizer_weights_load(dst, NULL, &tw, &err), KR_ERR_MODEL);
    assert_contains(err.message,
                    "tensor 'quant_embed.weight' has shape [20, 32], expected [16, 32]");
    assert_null(tw);
    rm_model_dir(dst);

    /* No directory at all, and a directory with a config but no weights. */
    FMT(dst, "%s/none", tmp);
    assert_int_equal(kr_tokenizer_weights_load(dst, NULL, &tw, &err), KR_ERR_IO);
    assert_contains(err.message, "none/config.json: cannot open");
    assert_int_equal(mkdir(dst, 0755), 0);
    write_config(dst, "{\"d_in\": 6, \"d_model\": 32, \"ff_dim\": 64, \"n_dec_layers\": 2,"
                      " \"n_enc_layers\": 2, \"n_heads\": 2, \"s1_bits\": 10, \"s2_bits\": 10}");
    assert_int_equal(kr_tokenizer_weights_load(dst, NULL, &tw, &err), KR_ERR_IO);
    assert_contains(err.message, "none/model.safetensors: cannot open");
    rm_model_dir(dst);
    kr_tokenizer_weights_free(NULL);
    kr_predictor_weights_free(NULL);
    remove(tmp);
}

/* The committed broken checkpoints (tests/fixtures/bad_models/README.md). */
static void test_bad_model_fixtures(void **state) {
    (void)state;
    static const struct {
        const char *dir;
        kr_status status;
        const char *expect;
    } cases[] = {
        { "bad_config", KR_ERR_FORMAT,
          "config.json: key 'd_model' = 32 is not divisible by n_heads = 3" },
        { "bad_header", KR_ERR_FORMAT, "model.safetensors: header is not valid JSON" },
        { "truncated", KR_ERR_FORMAT,
          "model.safetensors: tensor 'decoder.0.self_attn.q_proj.weight': data_offsets end "
          "37696 is past the data section" },
        { "missing_tensor", KR_ERR_MODEL, "model.safetensors: missing tensor 'head.bias'" },
        { "wrong_shape", KR_ERR_MODEL,
          "tensor 'embed.weight' has shape [16, 6], expected [32, 6]" },
        { "wrong_dtype", KR_ERR_MODEL,
          "tensor 'quant_embed.weight' has dtype I32, expected F32, F16 or BF16" },
        { "layer_mismatch", KR_ERR_MODEL,
          "tensor 'decoder.0.ffn.w1.weight' is block 0 of 'decoder', but config.json has "
          "n_dec_layers = 1" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[4096];
        FMT(dir, "%s/%s", kr_test_fixture("bad_models"), cases[i].dir);
        kr_tokenizer_weights *tw = NULL;
        kr_error err = { 0 };
        kr_status rc = kr_tokenizer_weights_load(dir, NULL, &tw, &err);
        if (rc != cases[i].status) fail_msg("%s: status %d (%s)", cases[i].dir, rc, err.message);
        assert_null(tw);
        assert_contains(err.message, cases[i].expect);
        assert_contains(err.message, dir);
    }
}

/* ---------------------------------------------------------------- gen-random */

/* Same tensor names, dtypes and shapes in both files. */
static void assert_same_layout(const char *a_path, const char *b_path) {
    kr_safetensors *a, *b;
    kr_error err = { 0 };
    if (kr_st_open(a_path, &a, &err) != KR_OK) fail_msg("%s", err.message);
    if (kr_st_open(b_path, &b, &err) != KR_OK) fail_msg("%s", err.message);
    assert_int_equal(kr_st_count(a), kr_st_count(b));
    for (int i = 0; i < kr_st_count(a); i++) {
        const kr_st_tensor *ta = kr_st_at(a, i), *tb = kr_st_find(b, ta->name);
        if (!tb) fail_msg("'%s' missing from %s", ta->name, b_path);
        assert_int_equal(ta->dtype, tb->dtype);
        assert_int_equal(ta->ndim, tb->ndim);
        for (int d = 0; d < ta->ndim; d++) assert_int_equal(ta->shape[d], tb->shape[d]);
        /* The buffers are deterministic: they must equal the reference's bit for bit. */
        if (is_buffer(ta->name)) assert_memory_equal(ta->data, tb->data, ta->nbytes);
    }
    kr_st_close(a);
    kr_st_close(b);
}

static int files_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = 0;
        if (ca == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* The 8-byte length and the JSON header of two safetensors files are identical. */
static int headers_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    assert_non_null(fa);
    assert_non_null(fb);
    uint8_t la[8], lb[8];
    int same = fread(la, 1, 8, fa) == 8 && fread(lb, 1, 8, fb) == 8 && memcmp(la, lb, 8) == 0;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | la[i];
    for (uint64_t i = 0; same && i < n; i++) same = fgetc(fa) == fgetc(fb);
    fclose(fa);
    fclose(fb);
    return same;
}

static void rm_random(const char *dir) {
    char p[4096];
    rm_model_dir(path2(p, sizeof p, dir, "tokenizer"));
    rm_model_dir(path2(p, sizeof p, dir, "predictor"));
    remove(dir);
}

static void test_gen_random_tiny(void **state) {
    (void)state;
    const kr_random_shape *s = kr_random_shape_find("tiny");
    assert_non_null(s);
    assert_null(kr_random_shape_find("huge"));
    assert_null(kr_random_shape_find(NULL));
    const char *tmp = kr_test_fresh_dir();
    char a[4096], b[4096], c[4096], p[4096], q[4096];
    kr_error err = { 0 };
    FMT(a, "%s/a/nested", tmp); /* mkdir -p */
    FMT(b, "%s/b", tmp);
    FMT(c, "%s/c", tmp);
    if (kr_model_write_random(s, 7, a, &err) != KR_OK) fail_msg("%s", err.message);
    assert_int_equal(kr_model_write_random(s, 7, b, &err), KR_OK);
    assert_int_equal(kr_model_write_random(s, 8, c, &err), KR_OK);
    /* Same shape as the golden tiny pair: identical parameter counts and loader checks. */
    check_model_dir(a, 22970, 164704);
    /* Same names/dtypes/shapes as the reference's state_dict, configs byte-identical. */
    for (int m = 0; m < 2; m++) {
        const char *part = m ? "predictor" : "tokenizer";
        char gold[4096];
        FMT(gold, "%s", kr_test_fixture(m ? "tiny/predictor" : "tiny/tokenizer"));
        FMT(p, "%s/%s/model.safetensors", a, part);
        assert_same_layout(path2(q, sizeof q, gold, "model.safetensors"), p);
        FMT(p, "%s/%s/config.json", a, part);
        if (m) {
            /* The predictor's config adds only its provenance: random weights say they are
             * for testing (every report of them then carries the DEMO MODEL notice). */
            kr_predictor_config want, got;
            assert_int_equal(
                kr_predictor_config_load(path2(q, sizeof q, gold, "config.json"), &want, &err),
                KR_OK);
            assert_int_equal(kr_predictor_config_load(p, &got, &err), KR_OK);
            assert_string_equal(got.intended_use, "test");
            assert_non_null(strstr(got.source, "kronos gen-random (random weights, seed 7)"));
            memcpy(got.intended_use, want.intended_use, sizeof got.intended_use);
            memcpy(got.source, want.source, sizeof got.source);
            assert_memory_equal(&got, &want, sizeof got);
        } else {
            assert_true(files_equal(path2(q, sizeof q, gold, "config.json"), p));
        }
        /* The writer's header is byte-identical to the reference generator's. */
        FMT(p, "%s/%s/model.safetensors", a, part);
        assert_true(headers_equal(path2(q, sizeof q, gold, "model.safetensors"), p));
        /* Deterministic in the seed. */
        FMT(q, "%s/%s/model.safetensors", b, part);
        FMT(p, "%s/%s/model.safetensors", a, part);
        assert_true(files_equal(p, q));
        FMT(q, "%s/%s/model.safetensors", c, part);
        assert_false(files_equal(p, q));
    }

    /* Value sanity: norms are 1, the heads are scaled ×4 relative to a plain Linear. */
    kr_predictor_weights *pw;
    assert_int_equal(kr_predictor_weights_load(path2(p, sizeof p, a, "predictor"), NULL, &pw, &err),
                     KR_OK);
    for (int i = 0; i < 32; i++) assert_true(pw->norm[i] == 1.0f && pw->blocks[1].norm2[i] == 1.0f);
    double ss_head = 0, ss_w1 = 0;
    for (int i = 0; i < 1024 * 32; i++) ss_head += (double)pw->head_s1.w[i] * pw->head_s1.w[i];
    for (int i = 0; i < 64 * 32; i++)
        ss_w1 += (double)pw->blocks[0].w1.w[i] * pw->blocks[0].w1.w[i];
    double sd_head = sqrt(ss_head / (1024 * 32)), sd_w1 = sqrt(ss_w1 / (64 * 32));
    assert_true(fabs(sd_head - 4 * sqrt(2.0 / (1024 + 32))) < 0.05 * sd_head);
    assert_true(fabs(sd_w1 - sqrt(2.0 / 96)) < 0.1 * sd_w1);
    kr_predictor_weights_free(pw);

    rm_random(a);
    FMT(a, "%s/a", tmp);
    remove(a);
    rm_random(b);
    rm_random(c);
    /* An output path that cannot be a directory is an I/O error naming it. */
    FMT(p, "%s/file", tmp);
    assert_int_equal(kr_test_write_file(p, "x", 1), 0);
    assert_int_equal(kr_model_write_random(s, 1, p, &err), KR_ERR_IO);
    assert_contains(err.message, p);
    remove(p);
    remove(tmp);
}

/* The benchmarks' shared random checkpoint: written under $TMPDIR on first use, reused after;
 * an unknown shape and a directory that does not fit are refused. */
static void test_random_cached(void **state) {
    (void)state;
    const char *tmp = kr_test_fresh_dir();
    const char *old = getenv("TMPDIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("TMPDIR", tmp, 1);
    char dir[4096], want[4096];
    kr_error err = { 0 };
    int written = -1;
    if (kr_model_random_cached("tiny", 5, dir, sizeof dir, &written, &err) != KR_OK)
        fail_msg("%s", err.message);
    FMT(want, "%s/kronos-bench-tiny-seed5", tmp);
    assert_string_equal(dir, want);
    assert_int_equal(written, 1);
    check_model_dir(dir, 22970, 164704);
    assert_int_equal(kr_model_random_cached("tiny", 5, dir, sizeof dir, &written, &err), KR_OK);
    assert_int_equal(written, 0);
    assert_int_equal(kr_model_random_cached("huge", 5, dir, sizeof dir, &written, &err),
                     KR_ERR_INVALID_ARG);
    assert_contains(err.message, "huge");
    assert_int_equal(kr_model_random_cached("tiny", 5, NULL, 0, NULL, &err), KR_ERR_INVALID_ARG);
    char small[8];
    assert_int_equal(kr_model_random_cached("tiny", 5, small, sizeof small, NULL, &err),
                     KR_ERR_INVALID_ARG);
    if (saved)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    free(saved);
    rm_random(want);
    remove(tmp);
}

/* Kronos-mini + Kronos-Tokenizer-base shapes: the public checkpoints' exact counts. */
static void test_gen_random_mini(void **state) {
    (void)state;
    const kr_random_shape *s = kr_random_shape_find("mini");
    assert_non_null(s);
    const char *tmp = kr_test_fresh_dir();
    kr_error err = { 0 };
    if (kr_model_write_random(s, 3, tmp, &err) != KR_OK) fail_msg("%s", err.message);
    check_model_dir(tmp, 3958042, 4108032);
    kr_tokenizer_weights *tw;
    char p[4096];
    assert_int_equal(
        kr_tokenizer_weights_load(path2(p, sizeof p, tmp, "tokenizer"), NULL, &tw, &err), KR_OK);
    assert_int_equal(tw->n_enc, 3);
    assert_int_equal(tw->n_dec, 3);
    kr_tokenizer_weights_free(tw);
    rm_random(tmp);

    /* small/base share the tokenizer; their predictor shapes are the public ones. */
    const kr_random_shape *sm = kr_random_shape_find("small"), *ba = kr_random_shape_find("base");
    assert_non_null(sm);
    assert_non_null(ba);
    assert_int_equal(sm->pred.d_model, 512);
    assert_int_equal(sm->pred.n_layers, 8);
    assert_int_equal(ba->pred.d_model, 832);
    assert_int_equal(ba->pred.d_model / ba->pred.n_heads, 52);
    assert_int_equal(ba->tok.d_model, 256);
}

/* ---------------------------------------------------------------- non-regular files */

/* A FIFO as config.json or model.safetensors used to block the open for ever (no writer); it
 * is refused at once, naming the file. alarm() turns a hang into a failure. */
static void test_fifo_files(void **state) {
    (void)state;
    const char *tmp = kr_test_fresh_dir();
    char src[4096], dst[4096], p[4096];
    kr_error err = { 0 };
    FMT(src, "%s", kr_test_fixture("tiny/predictor"));
    FMT(dst, "%s/fifo", tmp);
    rewrite_model(src, dst, EDIT_COPY, NULL, 0, NULL);
    alarm(30);
    kr_predictor_weights *pw = NULL;
    path2(p, sizeof p, dst, "model.safetensors");
    assert_int_equal(remove(p), 0);
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_int_equal(kr_predictor_weights_load(dst, NULL, &pw, &err), KR_ERR_IO);
    assert_contains(err.message, "fifo/model.safetensors: not a regular file (a FIFO)");
    assert_null(pw);
    /* The public entry point, the predictor directory used as the tokenizer's too. */
    kr_model *m = NULL;
    assert_int_equal(kr_model_load(dst, kr_test_fixture("tiny/tokenizer"), NULL, &m, &err),
                     KR_ERR_IO);
    assert_contains(err.message, "model.safetensors: not a regular file (a FIFO)");
    path2(p, sizeof p, dst, "config.json");
    assert_int_equal(remove(p), 0);
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_int_equal(kr_predictor_weights_load(dst, NULL, &pw, &err), KR_ERR_IO);
    assert_contains(err.message, "fifo/config.json: not a regular file (a FIFO)");
    assert_int_equal(kr_model_load(dst, kr_test_fixture("tiny/tokenizer"), NULL, &m, &err),
                     KR_ERR_IO);
    assert_contains(err.message, "config.json: not a regular file (a FIFO)");
    assert_null(m);
    alarm(0);
    rm_model_dir(dst);
    remove(tmp);
}

/* ---------------------------------------------------------------- non-finite weights */

/* Overwrites element `index` of tensor `name` in dir/model.safetensors with `size` bytes. */
static void poison(const char *dir, const char *name, int64_t index, const void *bytes,
                   size_t size) {
    char p[4096];
    path2(p, sizeof p, dir, "model.safetensors");
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)len);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    kr_safetensors *st = NULL;
    kr_error err = { 0 };
    assert_int_equal(kr_st_open_memory(buf, (size_t)len, p, &st, &err), KR_OK);
    const kr_st_tensor *t = kr_st_find(st, name);
    if (!t) fail_msg("no tensor '%s' in %s", name, p);
    assert_int_equal(kr_dtype_size(t->dtype), size);
    assert_true(index < t->numel);
    memcpy(buf + ((const uint8_t *)t->data - buf) + (size_t)index * size, bytes, size);
    kr_st_close(st);
    assert_int_equal(kr_test_write_file(p, buf, (size_t)len), 0);
    free(buf);
}

static void poison_f32(const char *dir, const char *name, int64_t index, float v) {
    poison(dir, name, index, &v, sizeof v);
}

static void poison_u16(const char *dir, const char *name, int64_t index, uint16_t bits) {
    poison(dir, name, index, &bits, sizeof bits);
}

/* Loads dir as a predictor: the expected status; on an error, every needle in the message. */
static void expect_predictor(const char *dir, int allow, kr_status want, const char *needle1,
                             const char *needle2) {
    kr_weights_opts o = { .allow_nonfinite = allow };
    kr_predictor_weights *pw = NULL;
    kr_error err = { 0 };
    kr_status st = kr_predictor_weights_load(dir, &o, &pw, &err);
    if (st != want)
        fail_msg("%s (allow %d): status %d, want %d: %s", dir, allow, st, want, err.message);
    if (needle1) assert_contains(err.message, needle1);
    if (needle2) assert_contains(err.message, needle2);
    kr_predictor_weights_free(pw);
}

/* One NaN and one infinity in different tensors: the load fails naming the first one met
 * (tensor, element, what it is); with the opt-out it loads. In F32, F16 and BF16 files. */
static void test_nonfinite_weights(void **state) {
    (void)state;
    const char *tmp = kr_test_fresh_dir();
    char src[4096], dst[4096];
    FMT(src, "%s", kr_test_fixture("tiny/predictor"));
    static const edit_mode modes[3] = { EDIT_COPY, EDIT_F16, EDIT_BF16 };
    static const uint16_t nan16[3] = { 0, 0x7e00, 0x7fc0 }, inf16[3] = { 0, 0x7c00, 0x7f80 };
    for (int m = 0; m < 3; m++) {
        FMT(dst, "%s/nf%d", tmp, m);
        rewrite_model(src, dst, modes[m], NULL, 0, NULL);
        expect_predictor(dst, 0, KR_OK, NULL, NULL);
        if (m == 0) {
            poison_f32(dst, "transformer.0.ffn.w1.weight", 37, NAN);
            poison_f32(dst, "norm.weight", 3, INFINITY);
        } else {
            poison_u16(dst, "transformer.0.ffn.w1.weight", 37, nan16[m]);
            poison_u16(dst, "norm.weight", 3, inf16[m]);
        }
        /* transformer.* is bound before the final norm: its NaN is the one named. */
        expect_predictor(dst, 0, KR_ERR_MODEL,
                         "model.safetensors: tensor 'transformer.0.ffn.w1.weight' element 37",
                         "is NaN");
        expect_predictor(dst, 1, KR_OK, NULL, NULL);
        if (m == 0)
            poison_f32(dst, "transformer.0.ffn.w1.weight", 37, 0.5f);
        else
            poison_u16(dst, "transformer.0.ffn.w1.weight", 37, 0x3800);
        expect_predictor(dst, 0, KR_ERR_MODEL, "tensor 'norm.weight' element 3 is +inf", NULL);
        rm_model_dir(dst);
    }
    remove(tmp);
}

/* The tiny predictor quantised to fmt (round to nearest, q4 groups of 32) and saved as a
 * kronos quantize checkpoint in dst, which loads. */
static void save_quantised_tiny_group(kr_wfmt fmt, int group, const char *dst) {
    kr_error err = { 0 };
    kr_predictor_weights *pw = NULL;
    if (kr_predictor_weights_load(kr_test_fixture("tiny/predictor"), NULL, &pw, &err) != KR_OK)
        fail_msg("%s", err.message);
    kr_named_linear *ls = NULL;
    int n = 0;
    size_t qb = 0, fb = 0;
    assert_int_equal(kr_predictor_linears(pw, &ls, &n, &err), KR_OK);
    if (kr_quantize_linears(ls, n, fmt, group, NULL, &pw->qowner, &qb, &fb, &err) != KR_OK)
        fail_msg("%s", err.message);
    free(ls);
    if (kr_predictor_save_quantized(pw, "rtn", dst, &err) != KR_OK) fail_msg("%s", err.message);
    kr_predictor_weights_free(pw);
    expect_predictor(dst, 0, KR_OK, NULL, NULL);
}

static void save_quantised_tiny(kr_wfmt fmt, const char *dst) {
    save_quantised_tiny_group(fmt, 32, dst);
}

/* Quantised checkpoints: a NaN or infinity in a scale (int8 / fp8 qscale, q4 qgscale, the
 * smoothing qinscale) or in bf16 / fp8 weights fails the load the same way. */
static void test_nonfinite_quantised(void **state) {
    (void)state;
    const char *tmp = kr_test_fresh_dir();
    char dst[4096];
    static const struct {
        kr_wfmt fmt;
        const char *tensor;
        int bytes; /* 5: f32 1e38, 4: f32 NaN, 2: the u16 bits below, 1: the byte below */
        uint16_t bits;
        const char *kind;
    } cases[] = {
        { KR_WFMT_INT8, "transformer.1.self_attn.v_proj.qscale", 4, 0, "NaN" },
        { KR_WFMT_FP8, "transformer.1.self_attn.v_proj.qscale", 4, 0, "NaN" },
        { KR_WFMT_FP8, "transformer.1.self_attn.v_proj.qweight", 1, 0xff, "NaN" },
        { KR_WFMT_Q4, "transformer.1.self_attn.v_proj.qgscale", 2, 0xfc00, "-inf" },
        { KR_WFMT_BF16, "transformer.1.self_attn.v_proj.qweight", 2, 0x7f80, "+inf" },
        /* Finite, but 1e38 times an int8 code of 127 is infinite (the fuzzer found it). */
        { KR_WFMT_INT8, "transformer.1.self_attn.v_proj.qscale", 5, 0, "overflows float32" },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        FMT(dst, "%s/q%zu", tmp, c);
        save_quantised_tiny(cases[c].fmt, dst);
        if (cases[c].bytes == 5) {
            poison_f32(dst, cases[c].tensor, 5, 1e38f);
        } else if (cases[c].bytes == 4) {
            poison_f32(dst, cases[c].tensor, 5, NAN);
        } else if (cases[c].bytes == 2) {
            poison_u16(dst, cases[c].tensor, 5, cases[c].bits);
        } else {
            uint8_t b = (uint8_t)cases[c].bits;
            poison(dst, cases[c].tensor, 5, &b, 1);
        }
        char want[256];
        FMT(want, "tensor '%s' element 5", cases[c].tensor);
        expect_predictor(dst, 0, KR_ERR_MODEL, want, cases[c].kind);
        expect_predictor(dst, 1, KR_OK, NULL, NULL);
        rm_model_dir(dst);
    }
    remove(tmp);
}

/* The invariants of a quantised Linear the kernels rely on but no NaN check sees: each int8
 * qrowsum the exact sum of its row's codes, int8 codes >= -127, scales >= 0, q4 zero points
 * <= 15. A file that breaks one is refused naming the tensor and row, with or without
 * allow_nonfinite (it is not about NaNs). */
static void test_quantised_invariants(void **state) {
    (void)state;
    const char *tmp = kr_test_fresh_dir();
    char dst[4096];
    const int32_t big_sum = 12345;
    const int8_t below = -128;
    const float negative = -0.5f;
    const uint8_t zero16 = 16;
    const uint16_t minus_one = 0xBC00; /* f16 -1.0 */
    const uint8_t fp8_one = 0x38, q4_fifteens = 0xFF;
    static const char *const p = "transformer.1.self_attn.v_proj";
    static const char *const wide = "transformer.1.ffn.w2"; /* 64 inputs: the vector pass */
    const struct {
        kr_wfmt fmt;
        const char *prefix, *suffix;
        int64_t index;
        const void *bytes;
        size_t size;
        const char *want1, *want2;
        int group; /* q4 group size */
    } cases[] = {
        { KR_WFMT_INT8, p, "qrowsum", 5, &big_sum, 4, "qrowsum' row 5 is 12345", "codes sum to",
          32 },
        { KR_WFMT_INT8, p, "qweight", 3, &below, 1, "qweight' row 0 column 3", "below -127", 32 },
        { KR_WFMT_INT8, wide, "qrowsum", 2, &big_sum, 4, "qrowsum' row 2 is 12345", "sum to", 32 },
        { KR_WFMT_INT8, wide, "qweight", 70, &below, 1, "qweight' row 1 column 6", "below -127",
          32 },
        { KR_WFMT_INT8, p, "qscale", 5, &negative, 4, "qscale' row 5", "negative scale", 32 },
        { KR_WFMT_FP8, p, "qscale", 2, &negative, 4, "qscale' row 2", "negative scale", 32 },
        { KR_WFMT_Q4, p, "qgzero", 0, &zero16, 1, "row 0 group 0", "zero point above 15", 32 },
        { KR_WFMT_Q4, p, "qgscale", 0, &minus_one, 2, "row 0 group 0", "negative scale", 32 },
        /* Padding columns (32 inputs padded to 64) holding a nonzero weight: fp8 1.0 at column
         * 40; q4 with 64-groups, byte 16 of row 0 = elements 32 and 48, code 15 (the row's zero
         * point is lower), which the q4 kernel multiplies in. */
        { KR_WFMT_FP8, p, "qweight", 40, &fp8_one, 1, "qweight' row 0 column 40", "padding", 32 },
        { KR_WFMT_Q4, p, "qweight", 16, &q4_fifteens, 1, "qweight' row 0 column 32", "padding",
          64 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        FMT(dst, "%s/inv%zu", tmp, c);
        save_quantised_tiny_group(cases[c].fmt, cases[c].group, dst);
        char name[256];
        FMT(name, "%s.%s", cases[c].prefix, cases[c].suffix);
        poison(dst, name, cases[c].index, cases[c].bytes, cases[c].size);
        expect_predictor(dst, 0, KR_ERR_MODEL, cases[c].want1, cases[c].want2);
        expect_predictor(dst, 1, KR_ERR_MODEL, cases[c].want1, "the checkpoint is corrupt");
        rm_model_dir(dst);
    }
    remove(tmp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_golden_tiny),
        cmocka_unit_test(test_load_golden_odd),
        cmocka_unit_test(test_load_demo),
        cmocka_unit_test(test_half_precision_variants),
        cmocka_unit_test(test_unaligned_f32),
        cmocka_unit_test(test_inv_freq_computed),
        cmocka_unit_test(test_model_errors),
        cmocka_unit_test(test_config_checkpoint_mismatch),
        cmocka_unit_test(test_bad_model_fixtures),
        cmocka_unit_test(test_gen_random_tiny),
        cmocka_unit_test(test_gen_random_mini),
        cmocka_unit_test(test_random_cached),
        cmocka_unit_test(test_fifo_files),
        cmocka_unit_test(test_nonfinite_weights),
        cmocka_unit_test(test_nonfinite_quantised),
        cmocka_unit_test(test_quantised_invariants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
