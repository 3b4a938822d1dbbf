/* model/quantize — see quantize.h. */
#include "model/quantize.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "base/threadpool.h"
#include "model/gptq.h"
#include "model/safetensors.h"

/* ---------------------------------------------------------------- enumerating Linears */

typedef struct lister {
    kr_named_linear *v;
    int n, cap;
    int oom;
} lister;

static void add(lister *ls, kr_linear *l, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add(lister *ls, kr_linear *l, const char *fmt, ...) {
    if (ls->oom) return;
    if (ls->n == ls->cap) {
        int cap = ls->cap ? 2 * ls->cap : 64;
        kr_named_linear *v = realloc(ls->v, (size_t)cap * sizeof *v);
        if (!v) {
            ls->oom = 1;
            return;
        }
        ls->v = v;
        ls->cap = cap;
    }
    kr_named_linear *e = &ls->v[ls->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->name, sizeof e->name, fmt, ap);
    va_end(ap);
    e->l = l;
}

static void add_attn(lister *ls, kr_attn_weights *a, const char *prefix) {
    add(ls, &a->q, "%s.q_proj", prefix);
    add(ls, &a->k, "%s.k_proj", prefix);
    add(ls, &a->v, "%s.v_proj", prefix);
    add(ls, &a->out, "%s.out_proj", prefix);
}

static void add_block(lister *ls, kr_block_weights *b, const char *stack, int i) {
    char p[64];
    snprintf(p, sizeof p, "%s.%d.self_attn", stack, i);
    add_attn(ls, &b->attn, p);
    add(ls, &b->w1, "%s.%d.ffn.w1", stack, i);
    add(ls, &b->w2, "%s.%d.ffn.w2", stack, i);
    add(ls, &b->w3, "%s.%d.ffn.w3", stack, i);
}

static kr_status finish_list(lister *ls, kr_named_linear **out, int *n, kr_error *err) {
    if (ls->oom) {
        free(ls->v);
        return kr_error_set(err, KR_ERR_NOMEM, "quantize: out of memory");
    }
    *out = ls->v;
    *n = ls->n;
    return KR_OK;
}

kr_status kr_tokenizer_linears(kr_tokenizer_weights *w, kr_named_linear **out, int *n,
                               kr_error *err) {
    lister ls = { 0 };
    add(&ls, &w->embed, "embed");
    for (int i = 0; i < w->n_enc; i++) add_block(&ls, &w->enc[i], "encoder", i);
    for (int i = 0; i < w->n_dec; i++) add_block(&ls, &w->dec[i], "decoder", i);
    add(&ls, &w->quant_embed, "quant_embed");
    add(&ls, &w->post_quant_embed, "post_quant_embed");
    add(&ls, &w->head, "head");
    return finish_list(&ls, out, n, err);
}

kr_status kr_predictor_linears(kr_predictor_weights *w, kr_named_linear **out, int *n,
                               kr_error *err) {
    lister ls = { 0 };
    add(&ls, &w->fusion, "embedding.fusion_proj");
    for (int i = 0; i < w->cfg.n_layers; i++) add_block(&ls, &w->blocks[i], "transformer", i);
    add_attn(&ls, &w->dep, "dep_layer.cross_attn");
    add(&ls, &w->head_s1, "head.proj_s1");
    add(&ls, &w->head_s2, "head.proj_s2");
    return finish_list(&ls, out, n, err);
}

/* ---------------------------------------------------------------- quantising */

/* Each weight is its own allocation: Linears point at them, so growing the list must not
 * move them. */
typedef struct quant_owner {
    kr_qmat_owned **q;
    int n, cap;
} quant_owner;

static void owned_free(kr_qmat_owned *q) {
    if (!q) return;
    kr_qmat_owned_free(q);
    free(q);
}

void kr_quant_owner_free(void *p) {
    quant_owner *o = p;
    if (!o) return;
    for (int i = 0; i < o->n; i++) owned_free(o->q[i]);
    free(o->q);
    free(o);
}

/* The f32 weight is no longer read: give its whole pages back. A page of a private file
 * mapping that is dropped comes back from the file if ever touched again; an arena page
 * comes back zeroed, which is why l->w is cleared too. */
static void release_pages(const float *w, size_t bytes) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    uintptr_t a = ((uintptr_t)w + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t b = ((uintptr_t)w + bytes) & ~((uintptr_t)page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

typedef struct quant_job {
    kr_named_linear *ls;
    int n;
    kr_wfmt fmt;
    int group;
    const float *const *col_scales;
    kr_qmat_owned *const *ready; /* [n] or NULL: weights quantised elsewhere (GPTQ) */
    kr_qmat_owned **out; /* [n] */
    kr_status *status; /* [n] */
    kr_error *errs; /* [n] */
} quant_job;

/* Linears i ≡ ith (mod nth): each is quantised on its own (kr_qmat_quantize is pure); one
 * prepared elsewhere is taken as it is. */
static void quant_worker(void *ctx, int ith, int nth) {
    quant_job *j = ctx;
    for (int i = ith; i < j->n; i += nth) {
        if (j->ready && j->ready[i]) {
            j->out[i] = j->ready[i];
            j->status[i] = KR_OK;
            continue;
        }
        const kr_linear *l = j->ls[i].l;
        kr_qmat_owned *q = calloc(1, sizeof *q);
        j->status[i] =
            q ? kr_qmat_quantize(j->fmt, l->n_out, l->n_in, l->w,
                                 j->col_scales ? j->col_scales[i] : NULL, j->group, q, &j->errs[i])
              : kr_error_set(&j->errs[i], KR_ERR_NOMEM, "quantize: out of memory");
        if (j->status[i] != KR_OK) {
            free(q);
            q = NULL;
        }
        j->out[i] = q;
    }
}

kr_status kr_quantize_linears_ready(kr_named_linear *ls, int n, kr_wfmt fmt, int group,
                                    const float *const *col_scales, kr_qmat_owned **ready,
                                    void **qowner, size_t *q_bytes, size_t *f32_bytes,
                                    kr_error *err) {
    if (fmt <= KR_WFMT_F32 || fmt >= KR_WFMT_COUNT)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "quantize: no format to quantise to");
    for (int i = 0; ready && i < n; i++) {
        const kr_qmat *q = ready[i] ? &ready[i]->m : NULL;
        if (q && (q->fmt != fmt || q->n != ls[i].l->n_out || q->k != ls[i].l->n_in))
            return kr_error_set(err, KR_ERR_INTERNAL,
                                "quantize: Linear '%s': the prepared weight is %s %d×%d, the "
                                "Linear %s %d×%d",
                                ls[i].name, kr_wfmt_name(q->fmt), q->n, q->k, kr_wfmt_name(fmt),
                                ls[i].l->n_out, ls[i].l->n_in);
    }
    quant_owner *o = *qowner;
    if (!o) {
        o = calloc(1, sizeof *o);
        if (!o) return kr_error_set(err, KR_ERR_NOMEM, "quantize: out of memory");
        *qowner = o;
    }
    if (o->n + n > o->cap) {
        int cap = o->n + n;
        kr_qmat_owned **q = realloc(o->q, (size_t)cap * sizeof *q);
        if (!q) return kr_error_set(err, KR_ERR_NOMEM, "quantize: out of memory");
        o->q = q;
        o->cap = cap;
    }
    size_t qb = 0, fb = 0;
    for (int i = 0; i < n; i++)
        if (ls[i].l->q || !ls[i].l->w)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "quantize: Linear '%s' is already quantised", ls[i].name);
    /* Quantise all first (in parallel: at load this is the time before the first forecast,
     * mostly the first touch of the mapped f32 pages), then swap: a failure half-way leaves
     * every Linear usable, and the prepared weights with their caller. */
    int first = o->n;
    quant_job job = { ls, n, fmt, group, col_scales, ready, o->q + first, NULL, NULL };
    job.status = calloc((size_t)n, sizeof *job.status);
    job.errs = calloc((size_t)n, sizeof *job.errs);
    kr_pool *pool = NULL;
    if (!job.status || !job.errs) {
        free(job.status);
        free(job.errs);
        return kr_error_set(err, KR_ERR_NOMEM, "quantize: out of memory");
    }
    if (kr_pool_create(n > 1 ? 0 : 1, &pool, NULL) != KR_OK) pool = NULL; /* then serially */
    kr_pool_run(pool, quant_worker, &job);
    kr_pool_free(pool);
    kr_status st = KR_OK;
    for (int i = 0; i < n && st == KR_OK; i++)
        if ((st = job.status[i]) != KR_OK) {
            if (err) *err = job.errs[i];
            kr_error_prefix(err, "quantize: Linear '%s'", ls[i].name);
        }
    free(job.status);
    free(job.errs);
    if (st != KR_OK) {
        for (int j = 0; j < n; j++)
            if (!ready || !ready[j]) owned_free(o->q[first + j]);
        return st;
    }
    o->n += n;
    for (int i = 0; i < n; i++) {
        kr_linear *l = ls[i].l;
        size_t bytes = (size_t)l->n_out * (size_t)l->n_in * sizeof(float);
        release_pages(l->w, bytes);
        fb += bytes;
        qb += o->q[first + i]->bytes;
        l->q = &o->q[first + i]->m;
        l->w = NULL;
        if (ready) ready[i] = NULL;
    }
    if (q_bytes) *q_bytes = qb;
    if (f32_bytes) *f32_bytes = fb;
    return KR_OK;
}

kr_status kr_quantize_linears(kr_named_linear *ls, int n, kr_wfmt fmt, int group,
                              const float *const *col_scales, void **qowner, size_t *q_bytes,
                              size_t *f32_bytes, kr_error *err) {
    return kr_quantize_linears_ready(ls, n, fmt, group, col_scales, NULL, qowner, q_bytes,
                                     f32_bytes, err);
}

/* ---------------------------------------------------------------- calibration statistics */

kr_status kr_act_stats_init(kr_act_stats *s, int k, int cap, uint64_t seed, kr_error *err) {
    memset(s, 0, sizeof *s);
    s->k = k;
    s->cap = cap;
    s->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    s->max_abs = calloc((size_t)k, sizeof *s->max_abs);
    s->sum_abs = calloc((size_t)k, sizeof *s->sum_abs);
    s->sample = cap > 0 ? malloc((size_t)cap * (size_t)k * sizeof *s->sample) : NULL;
    if (!s->max_abs || !s->sum_abs || (cap > 0 && !s->sample)) {
        kr_act_stats_release(s);
        return kr_error_set(err, KR_ERR_NOMEM, "calibration: out of memory");
    }
    return KR_OK;
}

void kr_act_stats_release(kr_act_stats *s) {
    if (!s) return;
    free(s->max_abs);
    free(s->sum_abs);
    free(s->sample);
    memset(s, 0, sizeof *s);
}

static uint64_t next_u64(uint64_t *x) { /* splitmix64: reproducible reservoir choices */
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void kr_act_stats_add(kr_act_stats *s, const float *x, int m, int ldx) {
    if (s->hessian) kr_gptq_hessian_add(s->hessian, x, m, ldx);
    for (int r = 0; r < m; r++) {
        const float *row = x + (size_t)r * (size_t)ldx;
        for (int j = 0; j < s->k; j++) {
            float a = fabsf(row[j]);
            if (a > s->max_abs[j]) s->max_abs[j] = a;
            s->sum_abs[j] += a;
        }
        /* Reservoir sampling (Algorithm R): every row seen so far is kept with equal odds. */
        int64_t slot = -1;
        if (s->n_sample < s->cap)
            slot = s->n_sample++;
        else if (s->cap > 0) {
            uint64_t j = next_u64(&s->rng) % (uint64_t)(s->rows + 1);
            if (j < (uint64_t)s->cap) slot = (int64_t)j;
        }
        if (slot >= 0)
            memcpy(s->sample + (size_t)slot * (size_t)s->k, row, (size_t)s->k * sizeof *row);
        s->rows++;
    }
}

/* ---------------------------------------------------------------- writing a checkpoint */

static const kr_named_linear *find_weight(const kr_named_linear *ls, int n, const char *tensor) {
    for (int i = 0; i < n; i++) {
        size_t pl = strlen(ls[i].name);
        if (strncmp(tensor, ls[i].name, pl) == 0 && strcmp(tensor + pl, ".weight") == 0)
            return &ls[i];
    }
    return NULL;
}

static kr_status add_q(kr_st_writer *wr, const char *prefix, const char *suffix, kr_dtype dt,
                       int64_t d0, int64_t d1, const void *data, kr_error *err) {
    char name[160];
    snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    int64_t shape[2] = { d0, d1 };
    return kr_st_writer_add(wr, name, dt, d1 < 0 ? 1 : 2, shape, data, err);
}

static kr_status write_qlinear(kr_st_writer *wr, const char *prefix, const kr_qmat *m,
                               kr_error *err) {
    kr_status st = KR_OK;
    int64_t n = m->n, g = m->group ? m->kp / m->group : 0;
    switch (m->fmt) {
    case KR_WFMT_BF16: st = add_q(wr, prefix, "qweight", KR_DT_BF16, n, m->kp, m->data, err); break;
    case KR_WFMT_INT8: st = add_q(wr, prefix, "qweight", KR_DT_I8, n, m->kp, m->data, err); break;
    case KR_WFMT_FP8:
        st = add_q(wr, prefix, "qweight", KR_DT_F8_E4M3, n, m->kp, m->data, err);
        break;
    case KR_WFMT_Q4: st = add_q(wr, prefix, "qweight", KR_DT_U8, n, m->kp / 2, m->data, err); break;
    default: return kr_error_set(err, KR_ERR_INTERNAL, "%s: not a quantised format", prefix);
    }
    if (st == KR_OK && m->scale) st = add_q(wr, prefix, "qscale", KR_DT_F32, n, -1, m->scale, err);
    if (st == KR_OK && m->row_sum)
        st = add_q(wr, prefix, "qrowsum", KR_DT_I32, n, -1, m->row_sum, err);
    if (st == KR_OK && m->gscale)
        st = add_q(wr, prefix, "qgscale", KR_DT_F16, n, g, m->gscale, err);
    if (st == KR_OK && m->gzero) st = add_q(wr, prefix, "qgzero", KR_DT_U8, n, g, m->gzero, err);
    if (st == KR_OK && m->in_scale)
        st = add_q(wr, prefix, "qinscale", KR_DT_F32, m->k, -1, m->in_scale, err);
    return st;
}

/* Copies every tensor of src except the quantised Linears' f32 weights, which it replaces. */
static kr_status write_tensors(const kr_safetensors *src, const kr_named_linear *ls, int n,
                               const char *path, kr_wfmt *fmt_out, kr_error *err) {
    kr_st_writer *wr;
    kr_status st = kr_st_writer_create(&wr, err);
    if (st != KR_OK) return st;
    *fmt_out = KR_WFMT_F32;
    for (int i = 0; st == KR_OK && i < kr_st_count(src); i++) {
        const kr_st_tensor *t = kr_st_at(src, i);
        const kr_named_linear *nl = find_weight(ls, n, t->name);
        if (nl && nl->l->q) {
            *fmt_out = nl->l->q->fmt;
            st = write_qlinear(wr, nl->name, nl->l->q, err);
        } else {
            st = kr_st_writer_add(wr, t->name, t->dtype, t->ndim, t->shape, t->data, err);
        }
    }
    if (st == KR_OK) st = kr_st_writer_save(wr, path, err);
    kr_st_writer_free(wr);
    return st;
}

static char *join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

static kr_status check_source(const void *owner, const char *what, const kr_quant_config *q,
                              kr_error *err) {
    if (!kr_weights_source(owner))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "quantize: the %s has no source file", what);
    if (q->format != KR_WFMT_F32)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "quantize: the %s checkpoint is already %s-quantised; quantise "
                            "from the f32 checkpoint",
                            what, kr_wfmt_name((kr_wfmt)q->format));
    return KR_OK;
}

/* The body's format (the output heads may be bf16: model.c). */
static kr_quant_config quant_of(const kr_named_linear *ls, int n, const char *method) {
    kr_quant_config q = { 0 };
    for (int i = 0; i < n; i++)
        if (ls[i].l->q && strncmp(ls[i].name, "head.", 5) != 0) {
            q.format = (int)ls[i].l->q->fmt;
            q.group_size = ls[i].l->q->group;
            break;
        }
    snprintf(q.method, sizeof q.method, "%s", method ? method : "rtn");
    return q;
}

/* Everything but config.json: checks, the directory and model.safetensors. Sets *cfg_path
 * (caller frees) and the quantisation block the config gets. */
static kr_status write_net(const void *owner, const kr_quant_config *have, const char *what,
                           const kr_named_linear *ls, int n, const char *method, const char *dir,
                           char **cfg_path, kr_quant_config *q, kr_error *err) {
    *cfg_path = NULL;
    kr_status st = check_source(owner, what, have, err);
    if (st == KR_OK) st = kr_mkdir_p(dir, err);
    if (st != KR_OK) return st;
    char *st_path = join(dir, "model.safetensors");
    *cfg_path = join(dir, "config.json");
    kr_wfmt fmt;
    if (!st_path || !*cfg_path) st = kr_error_set(err, KR_ERR_NOMEM, "quantize: out of memory");
    if (st == KR_OK) st = write_tensors(kr_weights_source(owner), ls, n, st_path, &fmt, err);
    if (st == KR_OK) *q = quant_of(ls, n, method);
    free(st_path);
    return st;
}

kr_status kr_tokenizer_save_quantized(const kr_tokenizer_weights *w, const char *method,
                                      const char *dir, kr_error *err) {
    kr_named_linear *ls;
    int n;
    kr_status st = kr_tokenizer_linears((kr_tokenizer_weights *)w, &ls, &n, err);
    if (st != KR_OK) return st;
    char *cfg_path;
    kr_tokenizer_config cfg = w->cfg;
    st = write_net(w->owner, &w->cfg.quant, "tokenizer", ls, n, method, dir, &cfg_path, &cfg.quant,
                   err);
    if (st == KR_OK) st = kr_tokenizer_config_save(cfg_path, &cfg, err);
    free(cfg_path);
    free(ls);
    return st;
}

kr_status kr_predictor_save_quantized(const kr_predictor_weights *w, const char *method,
                                      const char *dir, kr_error *err) {
    kr_named_linear *ls;
    int n;
    kr_status st = kr_predictor_linears((kr_predictor_weights *)w, &ls, &n, err);
    if (st != KR_OK) return st;
    char *cfg_path;
    kr_predictor_config cfg = w->cfg;
    st = write_net(w->owner, &w->cfg.quant, "predictor", ls, n, method, dir, &cfg_path, &cfg.quant,
                   err);
    if (st == KR_OK) st = kr_predictor_config_save(cfg_path, &cfg, err);
    free(cfg_path);
    free(ls);
    return st;
}

/* ---------------------------------------------------------------- the output directory */

/* What a save leaves in out_dir/predictor and out_dir/tokenizer (the .tmp only when a writer
 * was killed). A directory holding nothing else is an earlier output and may be replaced. */
static const char *const k_out_files[] = { "config.json", "model.safetensors",
                                           "model.safetensors.tmp" };
enum { N_OUT_FILES = sizeof k_out_files / sizeof k_out_files[0] };

/* The two halves of a saved pair, in the order they are moved into place: the tokenizer first,
 * so that a directory holding predictor/ already holds the new tokenizer/ beside it. */
static const char *const k_halves[2] = { "tokenizer", "predictor" };

static int same_dir(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && S_ISDIR(sa.st_mode) &&
           S_ISDIR(sb.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* An existing out_dir/<half> may be replaced only when it is a real directory (a symlink would
 * be followed into someone else's files) holding nothing but what a save writes. */
static kr_status check_replaceable(const char *path, kr_error *err) {
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) return KR_OK;
        return kr_error_set(err, KR_ERR_IO, "%s: cannot inspect: %s", path, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "%s exists and is not a directory: refusing to replace it (choose "
                            "another output directory)",
                            path);
    DIR *d = opendir(path);
    if (!d) return kr_error_set(err, KR_ERR_IO, "%s: cannot list: %s", path, strerror(errno));
    kr_status st = KR_OK;
    for (struct dirent *e; st == KR_OK && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int ours = 0;
        for (int i = 0; i < N_OUT_FILES; i++) ours |= !strcmp(e->d_name, k_out_files[i]);
        if (!ours)
            st = kr_error_set(err, KR_ERR_INVALID_ARG,
                              "%s holds '%.64s', which is not part of a quantised checkpoint: "
                              "refusing to replace it (choose another output directory)",
                              path, e->d_name);
    }
    closedir(d);
    return st;
}

kr_status kr_model_check_quantized_out(const char *out_dir, const char *predictor_dir,
                                       const char *tokenizer_dir, kr_error *err) {
    if (!out_dir || !*out_dir)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "quantize: the output directory is empty");
    const char *src[2] = { tokenizer_dir, predictor_dir };
    char *target[3] = { join(out_dir, k_halves[0]), join(out_dir, k_halves[1]), NULL };
    kr_status st = KR_OK;
    if (!target[0] || !target[1]) st = kr_error_set(err, KR_ERR_NOMEM, "quantize: out of memory");
    /* Writing into the checkpoint being quantised would replace the f32 original (or mix the
     * output into it); nothing asks for that on purpose. */
    const char *where[3] = { out_dir, target[0], target[1] };
    for (int i = 0; st == KR_OK && i < 3; i++)
        for (int j = 0; st == KR_OK && j < 2; j++)
            if (same_dir(where[i], src[j]))
                st = kr_error_set(err, KR_ERR_INVALID_ARG,
                                  "quantize: output %s is the %s being quantised (%s): writing "
                                  "there would replace it; choose another output directory",
                                  where[i], k_halves[j], src[j]);
    for (int i = 0; st == KR_OK && i < 2; i++) st = check_replaceable(target[i], err);
    if (st == KR_OK) st = kr_mkdir_p(out_dir, err);
    if (st == KR_OK && access(out_dir, W_OK | X_OK) != 0)
        st = kr_error_set(err, KR_ERR_IO, "%s: cannot write: %s", out_dir, strerror(errno));
    free(target[0]);
    free(target[1]);
    return st;
}

/* Removes a half written by a save (only the files a save writes, then the directory). */
static void remove_half(const char *dir) {
    for (int i = 0; i < N_OUT_FILES; i++) {
        char *p = join(dir, k_out_files[i]);
        if (p) unlink(p);
        free(p);
    }
    rmdir(dir);
}

/* Moves the fresh halves into place, the previous ones (if any) aside into old[]. On failure
 * the previous pair is put back as it was. */
static kr_status commit_pair(char *const final_dir[2], char *const fresh[2], char *const old[2],
                             kr_error *err) {
    int moved[2] = { 0, 0 }, installed[2] = { 0, 0 };
    kr_status st = KR_OK;
    for (int i = 0; st == KR_OK && i < 2; i++) {
        if (rename(final_dir[i], old[i]) == 0)
            moved[i] = 1;
        else if (errno != ENOENT)
            st = kr_error_set(err, KR_ERR_IO, "%s: cannot move the previous checkpoint aside: %s",
                              final_dir[i], strerror(errno));
    }
    for (int i = 0; st == KR_OK && i < 2; i++) {
        if (rename(fresh[i], final_dir[i]) == 0)
            installed[i] = 1;
        else
            st = kr_error_set(err, KR_ERR_IO, "%s: cannot move into place from %s: %s",
                              final_dir[i], fresh[i], strerror(errno));
    }
    if (st != KR_OK)
        for (int i = 1; i >= 0; i--) {
            if (installed[i]) rename(final_dir[i], fresh[i]);
            if (moved[i]) rename(old[i], final_dir[i]);
        }
    return st;
}

#define STAGE_PREFIX ".kronos-quantize-"

/* commit_pair under an exclusive flock of out_dir itself (no lock file left behind): two saves
 * into one directory (two `kronos quantize --out D`, or threads) would otherwise interleave
 * their renames, one moving the other's fresh half aside or finding its place taken.
 * Serialised, each installs a whole pair and the last one stays. */
static kr_status commit_pair_locked(const char *out_dir, char *const final_dir[2],
                                    char *const fresh[2], char *const old[2], kr_error *err) {
    int fd = open(out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    kr_status st = KR_OK;
    if (fd < 0) st = kr_error_set(err, KR_ERR_IO, "%s: cannot open: %s", out_dir, strerror(errno));
    while (st == KR_OK && flock(fd, LOCK_EX) != 0)
        if (errno != EINTR)
            st = kr_error_set(err, KR_ERR_IO, "%s: cannot lock: %s", out_dir, strerror(errno));
    if (st == KR_OK) st = commit_pair(final_dir, fresh, old, err);
    if (fd >= 0) close(fd); /* releases the lock */
    return st;
}

/* Staging directories that a killed save left in out_dir (their writer's pid is gone) hold
 * nothing anyone can load: removed, so repeated interrupted runs do not pile up copies. */
static void remove_stale_stages(const char *out_dir) {
    DIR *d = opendir(out_dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, STAGE_PREFIX, strlen(STAGE_PREFIX)) != 0) continue;
        char *end;
        long pid = strtol(e->d_name + strlen(STAGE_PREFIX), &end, 10);
        if (pid <= 0 || *end != '-' || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char *stage = join(out_dir, e->d_name);
        for (int i = 0; stage && i < 2; i++) {
            char name[32];
            for (int old = 0; old < 2; old++) {
                snprintf(name, sizeof name, "%s%s", old ? "previous-" : "", k_halves[i]);
                char *half = join(stage, name);
                if (half) remove_half(half);
                free(half);
            }
        }
        if (stage) rmdir(stage);
        free(stage);
    }
    closedir(d);
}

kr_status kr_quantized_pair_save(const kr_predictor_weights *pred, const kr_tokenizer_weights *tok,
                                 const char *method, const char *out_dir, kr_error *err) {
    if (!pred || !tok || !out_dir)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_quantized_pair_save: NULL argument");
    kr_status st = kr_model_check_quantized_out(out_dir, pred->dir, tok->dir, err);
    if (st != KR_OK) return st;
    /* Everything is written into a staging directory beside the halves and moved into place
     * only when complete, so out_dir never holds a half-written file nor a predictor of this
     * run beside a tokenizer of an earlier one, whenever the process dies. A killed run leaves
     * only the hidden staging directory (named with its pid; the next save removes it). */
    remove_stale_stages(out_dir);
    char stage_name[64];
    snprintf(stage_name, sizeof stage_name, STAGE_PREFIX "%ld-XXXXXX", (long)getpid());
    char *stage = join(out_dir, stage_name);
    if (!stage) return kr_error_set(err, KR_ERR_NOMEM, "quantize: out of memory");
    if (!mkdtemp(stage)) {
        st = kr_error_set(err, KR_ERR_IO, "%s: cannot create: %s", stage, strerror(errno));
        free(stage);
        return st;
    }
    char *final_dir[2] = { 0 }, *fresh[2] = { 0 }, *old[2] = { 0 };
    for (int i = 0; i < 2; i++) {
        char old_name[32];
        snprintf(old_name, sizeof old_name, "previous-%s", k_halves[i]);
        final_dir[i] = join(out_dir, k_halves[i]);
        fresh[i] = join(stage, k_halves[i]);
        old[i] = join(stage, old_name);
        if (!final_dir[i] || !fresh[i] || !old[i])
            st = kr_error_set(err, KR_ERR_NOMEM, "quantize: out of memory");
    }
    if (st == KR_OK) st = kr_tokenizer_save_quantized(tok, method, fresh[0], err);
    if (st == KR_OK) st = kr_predictor_save_quantized(pred, method, fresh[1], err);
    if (st == KR_OK) st = commit_pair_locked(out_dir, final_dir, fresh, old, err);
    for (int i = 0; i < 2; i++) {
        if (fresh[i]) remove_half(fresh[i]);
        if (old[i]) remove_half(old[i]);
        free(final_dir[i]);
        free(fresh[i]);
        free(old[i]);
    }
    rmdir(stage);
    free(stage);
    return st;
}
