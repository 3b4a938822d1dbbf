/* finetune/fresh_weights — see fresh_weights.h. */
#include "finetune/fresh_weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "base/rng.h"
#include "finetune/state.h"
#include "model/safetensors.h"

typedef enum init_kind { INIT_COPY, INIT_ONES, INIT_ZEROS, INIT_NORMAL, INIT_UNIFORM } init_kind;

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* FNV-1a of the tensor name: each tensor has its own stream, whatever the file's order. */
static uint64_t name_stream(const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

/* How a tensor starts, and the scale of its distribution (std or bound). fan_in of a bias is
 * its Linear's: the sibling weight's second dimension. */
static init_kind plan(const kr_safetensors *st, const kr_st_tensor *t, int is_tokenizer,
                      double *scale) {
    *scale = 0;
    if (t->dtype == KR_DT_I64 || t->dtype == KR_DT_I32 || ends_with(t->name, "inv_freq"))
        return INIT_COPY;
    if (t->ndim == 1 && ends_with(t->name, ".weight")) return INIT_ONES; /* RMSNorm */
    if (t->ndim == 2 && ends_with(t->name, ".weight")) {
        double fan_out = (double)t->shape[0], fan_in = (double)t->shape[1];
        const int embedding =
            !strncmp(t->name, "embedding.emb_", 14) || !strncmp(t->name, "time_emb.", 9);
        if (is_tokenizer) {
            *scale = 1.0 / sqrt(fan_in);
            return INIT_UNIFORM;
        }
        *scale = embedding ? 1.0 / sqrt(fan_in) : sqrt(2.0 / (fan_in + fan_out));
        return INIT_NORMAL;
    }
    if (t->ndim == 1 && ends_with(t->name, ".bias")) {
        if (!is_tokenizer) return INIT_ZEROS;
        char wname[512];
        snprintf(wname, sizeof wname, "%.*s.weight", (int)(strlen(t->name) - 5), t->name);
        const kr_st_tensor *w = kr_st_find(st, wname);
        *scale = w && w->ndim == 2 ? 1.0 / sqrt((double)w->shape[1]) : 1.0 / sqrt((double)t->numel);
        return INIT_UNIFORM;
    }
    return INIT_COPY;
}

kr_status kr_ft_write_fresh(const char *src_dir, int is_tokenizer, uint64_t seed,
                            const char *out_dir, kr_error *err) {
    char path[4200], out[4200];
    kr_status st = kr_mkdir_p(out_dir, err);
    if (st != KR_OK) return st;
    snprintf(path, sizeof path, "%s/config.json", src_dir);
    snprintf(out, sizeof out, "%s/config.json", out_dir);
    if ((st = kr_ft_copy_file(path, out, err)) != KR_OK) return st;
    snprintf(path, sizeof path, "%s/model.safetensors", src_dir);
    kr_safetensors *src = NULL;
    if ((st = kr_st_open(path, &src, err)) != KR_OK) return st;
    kr_st_writer *w = NULL;
    float *buf = NULL;
    if ((st = kr_st_writer_create(&w, err)) != KR_OK) goto done;
    for (int i = 0; i < kr_st_count(src) && st == KR_OK; i++) {
        const kr_st_tensor *t = kr_st_at(src, i);
        double scale;
        init_kind kind = plan(src, t, is_tokenizer, &scale);
        if (kind == INIT_COPY) {
            st = kr_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, err);
            continue;
        }
        float *grown = realloc(buf, (size_t)t->numel * sizeof *buf + 1);
        if (!grown) {
            st = kr_error_set(err, KR_ERR_NOMEM, "%s: out of memory for %s", path, t->name);
            break;
        }
        buf = grown;
        const uint64_t stream = name_stream(t->name) ^ (is_tokenizer ? 0x746f6bull : 0x707264ull);
        for (int64_t k = 0; k < t->numel; k++) {
            double v = 0;
            if (kind == INIT_ONES) v = 1;
            if (kind == INIT_UNIFORM)
                v = (2 * kr_rng_uniform(seed, stream, (uint64_t)k) - 1) * scale;
            if (kind == INIT_NORMAL) {
                /* Box-Muller on two uniforms of (0, 1]. */
                double u1 = 1.0 - kr_rng_uniform(seed, stream, 2 * (uint64_t)k);
                double u2 = kr_rng_uniform(seed, stream, 2 * (uint64_t)k + 1);
                v = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2) * scale;
            }
            buf[k] = (float)v;
        }
        st = kr_st_writer_add(w, t->name, KR_DT_F32, t->ndim, t->shape, buf, err);
    }
    snprintf(out, sizeof out, "%s/model.safetensors", out_dir);
    if (st == KR_OK) st = kr_st_writer_save(w, out, err);
done:
    free(buf);
    kr_st_writer_free(w);
    kr_st_close(src);
    return st;
}
