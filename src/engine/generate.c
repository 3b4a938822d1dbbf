/* engine/generate — see generate.h. */
#include "engine/generate.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "base/timeutil.h"
#include "model/predictor.h"
#include "model/sampling.h"
#include "model/tokenizer.h"

enum { G_NEW = 0, G_PREFILL, G_RUN, G_DONE };
/* Layout of the KV rows of a group's current window. */
enum { WIN_CACHED = 0, WIN_SLID = 1, WIN_NAIVE = 2 };
/* Chunk tags besides a path index. */
enum { TAG_CONTEXT = -1, TAG_PREFILL_LAST = -2 };

struct kr_gen_group {
    kr_model *m;
    const kr_gen_input *in;
    kr_gen_output *out;
    kr_gen_options opt;
    int index; /* position in a kr_generate batch (observer argument) */
    int P, paths, C, exact;
    uint64_t first_path; /* random stream of path 0 */
    kr_sampler_params sp;
    int state, step;
    int L, start0, W0;
    kr_prefix *shared; /* the whole window when it was cached (sr = W0), or NULL */
    int sr;
    kr_prefix *own; /* window rows [sr, W0) (row 0 = window row sr); the rows of a
                             * partial cache hit are its first blocks, by reference */
    int prefilled; /* window rows ready (>= sr) */
    kr_kv_store slide; /* exact mode: history part of a re-run window (C rows) */
    kr_kv_store gen; /* paths × pred_len rows: generated tokens */
    kr_kv_store naive; /* naive mode: paths × C rows, the whole window */
    int mode, ws, win; /* current window: layout, start index, length */
    float *logits; /* [paths][V1] s1 logits at the window's last position */
    float *ctx; /* [paths][d] context row of that position */
};

/* ---------------------------------------------------------------- prefixes */

static int gcd(int a, int b) {
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* A predictor KV store in the model's KV precision. The int8 scale group divides the head_dim
 * of both the self-attention and the dep layer, so no scale spans two heads (transformer.h). */
static kr_status pred_store_init(const kr_model *m, kr_kv_store *s, int cap, kr_error *err) {
    const kr_predictor_weights *w = m->pred;
    int group =
        w->cfg.n_layers > 0 ? gcd(w->blocks[0].attn.head_dim, w->dep.head_dim) : w->dep.head_dim;
    return kr_kv_store_init_dtype(s, kr_predictor_store_layers(w), w->cfg.d_model, cap, m->kv_dtype,
                                  group, err);
}

void kr_prefix_release(kr_prefix *p) {
    if (!p || --p->refs > 0) return;
    kr_kv_store_release(&p->kv);
    free(p->logits);
    free(p->ctx);
    free(p);
}

static kr_prefix *prefix_new(const kr_model *m, int rows, kr_error *err) {
    kr_prefix *p = calloc(1, sizeof *p);
    int d = m->pred->cfg.d_model;
    if (p) {
        p->logits = malloc(((size_t)1 << m->pred->cfg.s1_bits) * sizeof(float));
        p->ctx = malloc((size_t)d * sizeof(float));
        p->refs = 1;
        p->n = rows;
    }
    if (!p || !p->logits || !p->ctx ||
        pred_store_init(m, &p->kv, rows > 0 ? rows : 1, err) != KR_OK) {
        if (p) {
            p->refs = 1;
            kr_prefix_release(p);
        }
        kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory for a prefix");
        return NULL;
    }
    return p;
}

/* ---------------------------------------------------------------- groups */

kr_status kr_gen_group_create(kr_model *model, const kr_gen_input *in, kr_gen_output *out,
                              const kr_forecast_params *params, const kr_gen_options *opt,
                              kr_gen_group **group, kr_error *err) {
    kr_gen_group *g = calloc(1, sizeof *g);
    if (!g) return kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory");
    g->m = model;
    g->in = in;
    g->out = out;
    if (opt) g->opt = *opt;
    g->P = params->pred_len;
    g->paths = params->paths;
    g->first_path = (uint64_t)params->first_path;
    g->C = params->max_context;
    g->exact = params->window == KR_WINDOW_EXACT;
    g->sp.temperature = params->temperature;
    g->sp.top_k = params->top_k;
    g->sp.top_p = params->top_p;
    g->L = in->L;
    g->start0 = g->L > g->C ? g->L - g->C : 0;
    g->W0 = g->L - g->start0;
    int d = model->pred->cfg.d_model, V1 = 1 << model->pred->cfg.s1_bits;
    g->logits = malloc((size_t)g->paths * V1 * sizeof(float));
    g->ctx = malloc((size_t)g->paths * d * sizeof(float));
    kr_status st =
        (g->logits && g->ctx) ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory");
    if (st == KR_OK && g->opt.naive) st = pred_store_init(model, &g->naive, g->paths * g->C, err);
    if (st == KR_OK && !g->opt.naive) {
        st = pred_store_init(model, &g->gen, g->paths * g->P, err);
        if (st == KR_OK && g->exact && g->L + g->P - 1 > g->C)
            st = pred_store_init(model, &g->slide, g->C, err);
    }
    if (st != KR_OK) {
        kr_gen_group_free(g);
        return st;
    }
    out->kv_bytes = kr_gen_group_kv_bytes(g);
    *group = g;
    return KR_OK;
}

void kr_gen_group_free(kr_gen_group *g) {
    if (!g) return;
    kr_prefix_release(g->shared);
    kr_prefix_release(g->own);
    kr_kv_store_release(&g->slide);
    kr_kv_store_release(&g->gen);
    kr_kv_store_release(&g->naive);
    free(g->logits);
    free(g->ctx);
    free(g);
}

int kr_gen_group_done(const kr_gen_group *g) { return g->state == G_DONE; }
int kr_gen_group_steps(const kr_gen_group *g) { return g->step; }

size_t kr_gen_group_kv_bytes(const kr_gen_group *g) {
    /* A prefill the prefix cache holds too is charged to the cache, not twice. */
    int own_only = g->own && g->own->refs == 1;
    return kr_kv_store_bytes(&g->slide) + kr_kv_store_bytes(&g->gen) +
           kr_kv_store_bytes(&g->naive) + (own_only ? kr_kv_store_bytes(&g->own->kv) : 0);
}

/* ---------------------------------------------------------------- batch builder */

typedef struct batch {
    kr_chunk *chunks;
    kr_gen_group **chunk_group;
    int *chunk_tag, *chunk_last;
    int n_chunks, cap_chunks;
    int32_t *s1, *s2;
    float *stamps;
    int rows, cap_rows;
} batch;

static void batch_free(batch *b) {
    free(b->chunks);
    free(b->chunk_group);
    free(b->chunk_tag);
    free(b->chunk_last);
    free(b->s1);
    free(b->s2);
    free(b->stamps);
    memset(b, 0, sizeof *b);
}

/* Room for `chunks` more chunks and `rows` more rows. */
static kr_status batch_grow(batch *b, int chunks, int rows, kr_error *err) {
    if (b->n_chunks + chunks > b->cap_chunks) {
        int cap = 2 * (b->n_chunks + chunks);
        kr_chunk *c = realloc(b->chunks, (size_t)cap * sizeof *c);
        if (c) b->chunks = c;
        kr_gen_group **g = realloc(b->chunk_group, (size_t)cap * sizeof *g);
        if (g) b->chunk_group = g;
        int *t = realloc(b->chunk_tag, (size_t)cap * sizeof(int));
        if (t) b->chunk_tag = t;
        int *l = realloc(b->chunk_last, (size_t)cap * sizeof(int));
        if (l) b->chunk_last = l;
        if (!c || !g || !t || !l)
            return kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory for %d chunks", cap);
        b->cap_chunks = cap;
    }
    if (b->rows + rows > b->cap_rows) {
        int cap = 2 * (b->rows + rows);
        int32_t *a = realloc(b->s1, (size_t)cap * sizeof(int32_t));
        if (a) b->s1 = a;
        int32_t *c = realloc(b->s2, (size_t)cap * sizeof(int32_t));
        if (c) b->s2 = c;
        float *s = realloc(b->stamps, (size_t)cap * 5 * sizeof(float));
        if (s) b->stamps = s;
        if (!a || !c || !s)
            return kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory for %d rows", cap);
        b->cap_rows = cap;
    }
    return KR_OK;
}

static kr_chunk *batch_chunk(batch *b, kr_gen_group *g, int tag, int pos0, kr_kv_store *out,
                             int out_start) {
    kr_chunk *c = &b->chunks[b->n_chunks];
    memset(c, 0, sizeof *c);
    c->pos0 = pos0;
    c->out = out;
    c->out_start = out_start;
    b->chunk_group[b->n_chunks] = g;
    b->chunk_tag[b->n_chunks] = tag;
    b->n_chunks++;
    return c;
}

static void chunk_past(kr_chunk *c, const kr_kv_store *s, int start, int n) {
    if (n <= 0) return;
    c->past[c->n_past].store = s;
    c->past[c->n_past].start = start;
    c->past[c->n_past].n = n;
    c->n_past++;
}

/* Refs to the group's prefilled window rows [from, to) (cached part, then its own part). */
static void add_prefix_refs(kr_kv_ref *refs, int *n, const kr_gen_group *g, int from, int to) {
    if (from < g->sr) {
        int e = to < g->sr ? to : g->sr;
        refs[*n] = (kr_kv_ref){ &g->shared->kv, from, e - from };
        (*n)++;
    }
    int a = from > g->sr ? from : g->sr;
    if (to > a) {
        refs[*n] = (kr_kv_ref){ &g->own->kv, a - g->sr, to - a };
        (*n)++;
    }
}

static void chunk_prefix(kr_chunk *c, const kr_gen_group *g, int from, int to) {
    add_prefix_refs(c->past, &c->n_past, g, from, to);
}

/* Appends token `index` of group g (history if < L, else generated by `path`). */
static void batch_token(batch *b, const kr_gen_group *g, int path, int index) {
    int r = b->rows++;
    if (index < g->L) {
        b->s1[r] = g->out->hist_s1[index];
        b->s2[r] = g->out->hist_s2[index];
    } else {
        size_t j = (size_t)path * g->P + (size_t)(index - g->L);
        b->s1[r] = g->out->gen_s1[j];
        b->s2[r] = g->out->gen_s2[j];
    }
    memcpy(b->stamps + (size_t)r * 5, g->in->stamps + (size_t)index * 5, 5 * sizeof(float));
    b->chunks[b->n_chunks - 1].n++;
    b->chunk_last[b->n_chunks - 1] = r;
}

/* Runs the predictor over the batch, then gives each path chunk (and each finished prefill)
 * its last row's context and s1 logits. */
/* Rows per predictor pass. Chunks run in order in slices of at most this many rows, which
 * bounds the activation memory of a large step (an exact-mode window re-run of 32 paths is
 * ~3,700 rows) without changing any number: a chunk only reads KV rows that earlier chunks
 * (in this or an earlier slice) have fully written, and kernels are row-deterministic. */
#define KR_FORWARD_MAX_ROWS 1024

static kr_status batch_run(kr_model *m, batch *b, kr_error *err) {
    const kr_predictor_weights *pw = m->pred;
    int d = pw->cfg.d_model, V1 = 1 << pw->cfg.s1_bits;
    int slice_rows = b->rows < KR_FORWARD_MAX_ROWS ? b->rows : KR_FORWARD_MAX_ROWS;
    for (int c = 0; c < b->n_chunks; c++)
        if (b->chunks[c].n > slice_rows) slice_rows = b->chunks[c].n;
    float *context = malloc((size_t)slice_rows * d * sizeof(float));
    float *last = malloc((size_t)b->n_chunks * d * sizeof(float));
    float *logits = malloc((size_t)b->n_chunks * V1 * sizeof(float));
    kr_status st = KR_OK;
    if (!context || !last || !logits) {
        st = kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory for %d rows", b->rows);
        goto done;
    }
    int n = 0;
    for (int c0 = 0, row0 = 0; c0 < b->n_chunks;) {
        int c1 = c0, rows = 0;
        while (c1 < b->n_chunks && (c1 == c0 || rows + b->chunks[c1].n <= KR_FORWARD_MAX_ROWS))
            rows += b->chunks[c1++].n;
        st = kr_predictor_forward(pw, m->pool, b->chunks + c0, c1 - c0, b->s1 + row0, b->s2 + row0,
                                  b->stamps + (size_t)row0 * 5, context, err);
        if (st != KR_OK) goto done;
        for (int c = c0; c < c1; c++) {
            if (b->chunk_tag[c] == TAG_CONTEXT) continue;
            memcpy(last + (size_t)n * d, context + (size_t)(b->chunk_last[c] - row0) * d,
                   d * sizeof(float));
            n++;
        }
        row0 += rows;
        c0 = c1;
    }
    if ((st = kr_predictor_s1_logits(pw, m->pool, last, n, d, logits, err)) != KR_OK) goto done;
    n = 0;
    for (int c = 0; c < b->n_chunks; c++) {
        int tag = b->chunk_tag[c];
        if (tag == TAG_CONTEXT) continue;
        kr_gen_group *g = b->chunk_group[c];
        const float *lg = logits + (size_t)n * V1, *cx = last + (size_t)n * d;
        if (tag == TAG_PREFILL_LAST) {
            /* The window's last row is shared by every path; keep it with the prefix too. */
            for (int p = 0; p < g->paths; p++) {
                memcpy(g->ctx + (size_t)p * d, cx, d * sizeof(float));
                memcpy(g->logits + (size_t)p * V1, lg, V1 * sizeof(float));
            }
            memcpy(g->own->ctx, cx, d * sizeof(float));
            memcpy(g->own->logits, lg, V1 * sizeof(float));
        } else {
            memcpy(g->ctx + (size_t)tag * d, cx, d * sizeof(float));
            memcpy(g->logits + (size_t)tag * V1, lg, V1 * sizeof(float));
        }
        n++;
    }
done:
    free(context);
    free(last);
    free(logits);
    return st;
}

/* ---------------------------------------------------------------- window steps */

/* Next prefill chunk of a group: window rows [prefilled, prefilled + budget). */
static kr_status add_prefill(batch *b, kr_gen_group *g, int *budget, kr_error *err) {
    int n = g->W0 - g->prefilled;
    if (*budget > 0 && n > *budget) n = *budget;
    if (n <= 0) return KR_OK;
    kr_status st = batch_grow(b, 1, n, err);
    if (st != KR_OK) return st;
    int a = g->prefilled;
    kr_chunk *c = batch_chunk(b, g, a + n == g->W0 ? TAG_PREFILL_LAST : TAG_CONTEXT, a, &g->own->kv,
                              a - g->sr);
    chunk_prefix(c, g, 0, a);
    for (int t = a; t < a + n; t++) batch_token(b, g, -1, g->start0 + t);
    g->prefilled += n;
    g->out->prefill_tokens += n;
    if (*budget > 0) *budget -= n;
    return KR_OK;
}

/* Naive mode: every path recomputes its whole window [ws, L+i) from position 0. */
static kr_status add_naive(batch *b, kr_gen_group *g, int i, kr_error *err) {
    int cur = g->L + i, ws = cur > g->C ? cur - g->C : 0;
    kr_status st = batch_grow(b, g->paths, g->paths * (cur - ws), err);
    if (st != KR_OK) return st;
    for (int p = 0; p < g->paths; p++) {
        batch_chunk(b, g, p, 0, &g->naive, p * g->C);
        for (int t = ws; t < cur; t++) batch_token(b, g, p, t);
    }
    g->mode = WIN_NAIVE;
    g->ws = ws;
    g->win = cur - ws;
    g->out->prefill_tokens += (int64_t)g->paths * g->win;
    return KR_OK;
}

/* Prepares the window that predicts token L+i (i >= 1) once token L+i−1 is known. */
static kr_status add_advance(batch *b, kr_gen_group *g, int i, kr_error *err) {
    int L = g->L, P = g->P, cur = L + i, ws = cur > g->C ? cur - g->C : 0;
    kr_status st;
    if (g->exact && ws > g->start0) {
        /* The reference re-runs [ws, cur) from position 0: its history part once for the
         * group, each path's generated tokens on top of it. ws < L because pred_len <= C. */
        int h = L - ws;
        if ((st = batch_grow(b, 1 + g->paths, h + g->paths * i, err)) != KR_OK) return st;
        batch_chunk(b, g, TAG_CONTEXT, 0, &g->slide, 0);
        for (int t = ws; t < L; t++) batch_token(b, g, -1, t);
        for (int p = 0; p < g->paths; p++) {
            kr_chunk *c = batch_chunk(b, g, p, h, &g->gen, p * P);
            chunk_past(c, &g->slide, 0, h);
            for (int t = L; t < cur; t++) batch_token(b, g, p, t);
        }
        g->mode = WIN_SLID;
        g->out->window_recomputes++;
        g->out->prefill_tokens += h + (int64_t)g->paths * i;
    } else {
        /* One new token per path; in rolling mode keys older than the window drop out. */
        int pre_from = ws > g->start0 ? ws - g->start0 : 0;
        int gen_from = ws > L ? ws - L : 0;
        if ((st = batch_grow(b, g->paths, g->paths, err)) != KR_OK) return st;
        for (int p = 0; p < g->paths; p++) {
            kr_chunk *c = batch_chunk(b, g, p, cur - 1 - g->start0, &g->gen, p * P + i - 1);
            chunk_prefix(c, g, pre_from, g->W0);
            chunk_past(c, &g->gen, p * P + gen_from, i - 1 - gen_from);
            batch_token(b, g, p, cur - 1);
        }
        g->mode = WIN_CACHED;
        g->out->decode_tokens += g->paths;
    }
    g->ws = ws;
    g->win = cur - ws;
    return KR_OK;
}

/* The dep-layer rows visible to path p's s2 query at step i. */
static void s2_view(const kr_gen_group *g, int p, int i, kr_kv_view *v) {
    v->n = 0;
    int L = g->L, P = g->P;
    if (g->mode == WIN_NAIVE) {
        v->ref[v->n++] = (kr_kv_ref){ &g->naive, p * g->C, g->win };
    } else if (g->mode == WIN_SLID) {
        v->ref[v->n++] = (kr_kv_ref){ &g->slide, 0, L - g->ws };
        if (i > 0) v->ref[v->n++] = (kr_kv_ref){ &g->gen, p * P, i };
    } else {
        int pre_from = g->ws > g->start0 ? g->ws - g->start0 : 0;
        int gen_from = g->ws > L ? g->ws - L : 0;
        add_prefix_refs(v->ref, &v->n, g, pre_from, g->W0);
        if (i > gen_from) v->ref[v->n++] = (kr_kv_ref){ &g->gen, p * P + gen_from, i - gen_from };
    }
}

/* Samples s1, then s2 conditioned on it, for every path of the ready groups. */
static kr_status sample_step(kr_model *m, kr_gen_group **gs, int n_groups, kr_error *err) {
    const kr_predictor_weights *pw = m->pred;
    int d = pw->cfg.d_model, V1 = 1 << pw->cfg.s1_bits, V2 = 1 << pw->cfg.s2_bits;
    int n = 0;
    for (int k = 0; k < n_groups; k++) n += gs[k]->paths;
    int32_t *s1 = malloc((size_t)n * sizeof(int32_t));
    float *ctx = malloc((size_t)n * d * sizeof(float));
    float *logits2 = malloc((size_t)n * V2 * sizeof(float));
    kr_kv_view *views = malloc((size_t)n * sizeof *views);
    kr_sampler_scratch sc1 = { 0 }, sc2 = { 0 };
    kr_status st = KR_OK;
    if (!s1 || !ctx || !logits2 || !views) {
        st = kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory sampling %d paths", n);
        goto done;
    }
    if ((st = kr_sampler_scratch_init(&sc1, V1, err)) != KR_OK) goto done;
    if ((st = kr_sampler_scratch_init(&sc2, V2, err)) != KR_OK) goto done;
    for (int k = 0, r = 0; k < n_groups; k++) {
        kr_gen_group *g = gs[k];
        for (int p = 0; p < g->paths; p++, r++) {
            /* Stream = path, counter = 2·step (+1 for s2): a path's draws are a function of
             * (seed, path, step) only, whatever else is batched with it. */
            s1[r] = kr_sampler_draw(
                g->logits + (size_t)p * V1, &g->sp,
                kr_rng_uniform(g->in->seed, g->first_path + (uint64_t)p, 2ull * g->step), &sc1);
            memcpy(ctx + (size_t)r * d, g->ctx + (size_t)p * d, d * sizeof(float));
            s2_view(g, p, g->step, &views[r]);
        }
    }
    if ((st = kr_predictor_s2_logits(pw, m->pool, n, s1, ctx, d, views, logits2, err)) != KR_OK)
        goto done;
    for (int k = 0, r = 0; k < n_groups; k++) {
        kr_gen_group *g = gs[k];
        int i = g->step;
        for (int p = 0; p < g->paths; p++, r++) {
            const float *lg2 = logits2 + (size_t)r * V2;
            int32_t s2 = kr_sampler_draw(
                lg2, &g->sp, kr_rng_uniform(g->in->seed, g->first_path + (uint64_t)p, 2ull * i + 1),
                &sc2);
            g->out->gen_s1[(size_t)p * g->P + i] = s1[r];
            g->out->gen_s2[(size_t)p * g->P + i] = s2;
            if (g->opt.observer)
                g->opt.observer(g->opt.observer_user, g->index, p, i, g->logits + (size_t)p * V1,
                                lg2, s1[r], s2, g->ws, g->win);
        }
        g->step++;
    }
done:
    kr_sampler_scratch_release(&sc1);
    kr_sampler_scratch_release(&sc2);
    free(s1);
    free(ctx);
    free(logits2);
    free(views);
    return st;
}

/* ---------------------------------------------------------------- tokenizer */

/* A tokenizer-decoder context: K/V of a window's history rows in the decoder's layers. Kept
 * in a kr_prefix so the prefix cache can hold it like a predictor window (logits unused). */
static kr_prefix *dec_prefix_new(const kr_tokenizer_weights *tw, int rows, kr_error *err) {
    kr_prefix *p = calloc(1, sizeof *p);
    if (!p) {
        kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory for a decoder context");
        return NULL;
    }
    p->refs = 1;
    p->n = rows;
    if (kr_kv_store_init(&p->kv, kr_tokenizer_store_layers(tw), tw->cfg.d_model, rows, err) !=
        KR_OK) {
        kr_prefix_release(p);
        return NULL;
    }
    return p;
}

/* Decodes each path's final window [dws, L+P) of the given groups in one batch; the window's
 * history prefix once per group, and not at all when the prefix cache holds the decoder's
 * K/V of the same history tokens (a repeated window: positions start at 0 either way, so the
 * rows are the same numbers). */
static kr_status decode_groups(kr_model *m, kr_gen_group **gs, int n_groups,
                               const kr_prefix_hooks *hooks, kr_error *err) {
    const kr_tokenizer_weights *tw = m->tok;
    kr_kv_store *stores = calloc((size_t)n_groups, sizeof *stores);
    kr_prefix **ctx = calloc((size_t)n_groups, sizeof *ctx);
    unsigned char *fresh = calloc((size_t)n_groups, 1);
    batch b = { 0 };
    float *dec = NULL;
    kr_status st = KR_OK;
    if (!stores || !ctx || !fresh)
        st = kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory for decode");
    int cache = hooks && hooks->dec_lookup && hooks->dec_publish;
    for (int k = 0; k < n_groups && st == KR_OK; k++) {
        kr_gen_group *g = gs[k];
        int total = g->L + g->P, dws = total > g->C ? total - g->C : 0, h = g->L - dws;
        if (g->opt.naive) {
            int rows = g->paths * (total - dws);
            st = kr_kv_store_init(&stores[k], kr_tokenizer_store_layers(tw), tw->cfg.d_model, rows,
                                  err);
            if (st == KR_OK) st = batch_grow(&b, g->paths, rows, err);
            for (int p = 0; st == KR_OK && p < g->paths; p++) {
                batch_chunk(&b, g, p, 0, &stores[k], p * (total - dws));
                for (int t = dws; t < total; t++) batch_token(&b, g, p, t);
            }
            continue;
        }
        if (h > 0 && cache)
            ctx[k] =
                hooks->dec_lookup(hooks->user, g->out->hist_s1 + dws, g->out->hist_s2 + dws, h);
        if (h > 0 && !ctx[k]) {
            if (!(ctx[k] = dec_prefix_new(tw, h, err))) {
                st = err ? err->status : KR_ERR_NOMEM;
                break;
            }
            fresh[k] = 1;
        }
        int rows = g->paths * g->P;
        st =
            kr_kv_store_init(&stores[k], kr_tokenizer_store_layers(tw), tw->cfg.d_model, rows, err);
        if (st == KR_OK) st = batch_grow(&b, g->paths + 1, rows + (fresh[k] ? h : 0), err);
        if (st != KR_OK) break;
        if (fresh[k]) {
            batch_chunk(&b, g, TAG_CONTEXT, 0, &ctx[k]->kv, 0);
            for (int t = dws; t < g->L; t++) batch_token(&b, g, -1, t);
        }
        for (int p = 0; p < g->paths; p++) {
            kr_chunk *c = batch_chunk(&b, g, p, h, &stores[k], p * g->P);
            if (h > 0) chunk_past(c, &ctx[k]->kv, 0, h);
            for (int t = g->L; t < total; t++) batch_token(&b, g, p, t);
        }
    }
    if (st == KR_OK && !(dec = malloc((size_t)(b.rows > 0 ? b.rows : 1) * 6 * sizeof(float))))
        st = kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory for decode");
    /* In slices of whole chunks, like batch_run: bounded activations, same numbers. */
    for (int c0 = 0, row0 = 0; st == KR_OK && c0 < b.n_chunks;) {
        int c1 = c0, rows = 0;
        while (c1 < b.n_chunks && (c1 == c0 || rows + b.chunks[c1].n <= KR_FORWARD_MAX_ROWS))
            rows += b.chunks[c1++].n;
        st = kr_tokenizer_decode(tw, m->pool, b.chunks + c0, c1 - c0, b.s1 + row0, b.s2 + row0,
                                 dec + (size_t)row0 * 6, err);
        row0 += rows;
        c0 = c1;
    }
    for (int c = 0, row = 0; st == KR_OK && c < b.n_chunks; row += b.chunks[c].n, c++) {
        int p = b.chunk_tag[c];
        if (p < 0) continue;
        kr_gen_group *g = b.chunk_group[c];
        /* The last pred_len rows of the window are the forecast. */
        memcpy(g->out->pred_norm + (size_t)p * g->P * 6,
               dec + (size_t)(row + b.chunks[c].n - g->P) * 6, (size_t)g->P * 6 * sizeof(float));
    }
    for (int k = 0; k < n_groups; k++) {
        if (st == KR_OK && cache && fresh[k]) {
            kr_gen_group *g = gs[k];
            int dws = g->L + g->P > g->C ? g->L + g->P - g->C : 0;
            hooks->dec_publish(hooks->user, ctx[k], g->out->hist_s1 + dws, g->out->hist_s2 + dws);
        }
        if (ctx) kr_prefix_release(ctx[k]);
        if (stores) kr_kv_store_release(&stores[k]);
    }
    free(stores);
    free(ctx);
    free(fresh);
    batch_free(&b);
    free(dec);
    return st;
}

/* Encodes a new group's history and takes what it can of its window from the prefix cache. */
static kr_status admit(kr_model *m, kr_gen_group *g, const kr_prefix_hooks *hooks, kr_error *err) {
    int hit =
        !g->opt.naive && hooks && hooks->encode_lookup &&
        hooks->encode_lookup(hooks->user, g->in->x_norm, g->L, g->out->hist_s1, g->out->hist_s2);
    if (!hit) {
        kr_status st = kr_tokenizer_encode(m->tok, m->pool, g->in->x_norm, g->L, g->out->hist_s1,
                                           g->out->hist_s2, NULL, err);
        if (st != KR_OK) return st;
        if (!g->opt.naive && hooks && hooks->encode_publish)
            hooks->encode_publish(hooks->user, g->in->x_norm, g->L, g->out->hist_s1,
                                  g->out->hist_s2);
    }
    if (g->opt.naive) {
        g->state = G_RUN;
        return KR_OK;
    }
    if (hooks && hooks->lookup) {
        int rows = 0;
        kr_prefix *p =
            hooks->lookup(hooks->user, g->out->hist_s1 + g->start0, g->out->hist_s2 + g->start0,
                          g->in->stamps + (size_t)g->start0 * 5, g->W0, &rows);
        if (p && rows > 0 && rows == g->W0 && rows <= p->n) {
            g->shared = p;
            g->sr = rows;
            g->out->cached_tokens += rows;
        } else if (p && rows > 0 && rows < g->W0 && rows <= p->n) {
            /* The cached rows' blocks join a store of the whole window by reference: the
             * group pins only those blocks, not the whole cached window, and its window is
             * then self-contained, so it can be offered to the cache in turn. */
            kr_status st = KR_OK;
            if (!(g->own = prefix_new(m, g->W0, err)))
                st = err ? err->status : KR_ERR_NOMEM;
            else
                st = kr_kv_store_share_prefix(&g->own->kv, &p->kv, rows, err);
            kr_prefix_release(p);
            if (st != KR_OK) return st;
            g->prefilled = rows;
            g->out->cached_tokens += rows;
        } else if (p) {
            kr_prefix_release(p);
        }
    }
    if (!g->own) g->prefilled = g->sr;
    if (g->sr == g->W0) { /* the whole window is cached, with its last row's logits */
        int d = m->pred->cfg.d_model, V1 = 1 << m->pred->cfg.s1_bits;
        for (int p = 0; p < g->paths; p++) {
            memcpy(g->ctx + (size_t)p * d, g->shared->ctx, d * sizeof(float));
            memcpy(g->logits + (size_t)p * V1, g->shared->logits, V1 * sizeof(float));
        }
        g->state = G_RUN;
    } else {
        if (!g->own && !(g->own = prefix_new(m, g->W0 - g->sr, err)))
            return err ? err->status : KR_ERR_NOMEM;
        g->out->kv_bytes = kr_gen_group_kv_bytes(g);
        g->state = G_PREFILL;
    }
    g->mode = WIN_CACHED;
    g->ws = g->start0;
    g->win = g->W0;
    return KR_OK;
}

kr_status kr_gen_step(kr_model *m, kr_gen_group **groups, int n_groups,
                      const kr_gen_step_params *sp, kr_error *err) {
    const kr_prefix_hooks *hooks = sp ? sp->prefix : NULL;
    int budget = sp && sp->max_prefill_rows > 0 ? sp->max_prefill_rows : 0;
    kr_gen_group **ready = malloc((size_t)(n_groups > 0 ? n_groups : 1) * sizeof *ready);
    batch b = { 0 };
    kr_status st = ready ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory");
    double t0 = kr_now_seconds();
    for (int k = 0; k < n_groups && st == KR_OK; k++)
        if (groups[k]->state == G_NEW) {
            double a = kr_now_seconds();
            st = admit(m, groups[k], hooks, err);
            groups[k]->out->seconds_tokenizer += kr_now_seconds() - a;
        }
    /* One forward pass: prefill chunks of new groups, the next window of running ones. */
    for (int k = 0; k < n_groups && st == KR_OK; k++) {
        kr_gen_group *g = groups[k];
        if (g->state == G_PREFILL)
            st = add_prefill(&b, g, &budget, err);
        else if (g->state == G_RUN && g->opt.naive)
            st = add_naive(&b, g, g->step, err);
        else if (g->state == G_RUN && g->step > 0)
            st = add_advance(&b, g, g->step, err);
    }
    if (st == KR_OK && b.n_chunks > 0) st = batch_run(m, &b, err);
    double t1 = kr_now_seconds();
    int n_ready = 0;
    for (int k = 0; k < n_groups && st == KR_OK; k++) {
        kr_gen_group *g = groups[k];
        if (g->state == G_PREFILL && g->prefilled == g->W0) {
            g->state = G_RUN;
            /* Only a window prefilled entirely here is offered: it is then self-contained. */
            if (hooks && hooks->publish && g->sr == 0)
                hooks->publish(hooks->user, g->own, g->out->hist_s1 + g->start0,
                               g->out->hist_s2 + g->start0, g->in->stamps + (size_t)g->start0 * 5);
        }
        if (g->state == G_RUN) ready[n_ready++] = g;
    }
    if (st == KR_OK && n_ready > 0) st = sample_step(m, ready, n_ready, err);
    double t2 = kr_now_seconds();
    for (int k = 0; k < n_ready; k++) {
        kr_gen_group *g = ready[k];
        if (g->step == 1)
            g->out->seconds_prefill += t1 - t0;
        else
            g->out->seconds_decode += t2 - t0;
    }
    int n_done = 0;
    for (int k = 0; k < n_ready && st == KR_OK; k++)
        if (ready[k]->step == ready[k]->P) ready[n_done++] = ready[k];
    if (st == KR_OK && n_done > 0) {
        st = decode_groups(m, ready, n_done, sp ? sp->prefix : NULL, err);
        double t3 = kr_now_seconds();
        for (int k = 0; k < n_done && st == KR_OK; k++) {
            ready[k]->state = G_DONE;
            ready[k]->out->seconds_tokenizer += t3 - t2;
        }
    }
    batch_free(&b);
    free(ready);
    return st;
}

kr_status kr_generate(kr_model *model, const kr_gen_input *in, kr_gen_output *out, int n_groups,
                      const kr_forecast_params *params, const kr_gen_options *opt, kr_error *err) {
    kr_gen_group **gs = calloc((size_t)n_groups, sizeof *gs);
    kr_gen_group **live = calloc((size_t)n_groups, sizeof *live);
    kr_status st = gs && live ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory");
    for (int k = 0; k < n_groups && st == KR_OK; k++) {
        st = kr_gen_group_create(model, &in[k], &out[k], params, opt, &gs[k], err);
        if (st == KR_OK) {
            gs[k]->index = k;
            live[k] = gs[k];
        }
    }
    for (int n_live = n_groups; st == KR_OK && n_live > 0;) {
        st = kr_gen_step(model, live, n_live, NULL, err);
        int w = 0;
        for (int k = 0; k < n_live; k++)
            if (!kr_gen_group_done(live[k])) live[w++] = live[k];
        n_live = w;
    }
    for (int k = 0; gs && k < n_groups; k++) kr_gen_group_free(gs[k]);
    free(gs);
    free(live);
    return st;
}
