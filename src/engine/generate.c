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

enum phase { PHASE_ADMIT = 0, PHASE_PREFILL, PHASE_GENERATE, PHASE_DECODE, PHASE_DONE };

/* Where the KV rows of the current generation step's window live. */
enum layout {
    /* The prefilled window plus each path's generated rows: while the window has not slid,
     * and always in rolling mode (where the oldest rows just stop being attended to). */
    LAYOUT_CACHED = 0,
    /* Exact mode past max_context: the reference re-runs the trailing window from position
     * 0, so its history part is recomputed into rerun_hist once per step and each path's
     * generated part on top of it into `generated`. */
    LAYOUT_RERUN = 1,
    /* Naive mode (tests, benchmarks): every path recomputes its whole window every step. */
    LAYOUT_NAIVE = 2
};

struct kr_gen_group {
    const kr_gen_input *in;
    kr_gen_output *out;
    kr_gen_options opt;
    int pred_len, paths, max_context, exact;
    uint64_t first_path; /* random stream of path 0 */
    kr_sampler_params sampling;
    int hist_len; /* history tokens (L) */
    int window_start0; /* first history token of the initial window */
    int window_len0; /* tokens of the initial window (<= max_context) */
    int d, vocab1;
    int phase;
    int step; /* generation steps completed: tokens sampled per path */

    /* PREFILL */
    kr_prefix *cached_window; /* the whole initial window, from the prefix cache, or NULL */
    int cached_rows; /* window rows served by cached_window */
    kr_prefix *own_window; /* window rows [cached_rows, window_len0) (row 0 = window row
                               * cached_rows); the rows of a partial cache hit are its first
                               * blocks, by reference */
    int prefilled; /* window rows ready (>= cached_rows) */

    /* GENERATE: the step in progress */
    int step_begun;
    int layout, win_start, win_len; /* the step's window: first token, tokens */
    int rerun_done; /* LAYOUT_RERUN: history rows re-run for this step */
    int next_path; /* paths below it are planned for sampling this step */
    int path_rows_done; /* rows of next_path's chunk already computed */
    kr_kv_store rerun_hist; /* exact mode: history part of a re-run window */
    kr_kv_store generated; /* paths x pred_len rows: the generated tokens */
    kr_kv_store naive; /* naive mode: paths x max_context rows */
    /* Exact mode with re-runs: the first stage (kr_first_stage) of every row a re-run will
     * see again, recorded the first time the row is computed: history tokens of the initial
     * window (slot t - window_start0), then each path's generated tokens (slot window_len0 +
     * p·pred_len + j). stage_ok marks the slots holding a record. */
    float *stage;
    unsigned char *stage_ok;
    size_t stage_bytes;
    float *logits; /* [paths][vocab1] s1 logits at each path's window end */
    float *ctx; /* [paths][d] context row there */

    /* DECODE */
    int dec_started;
    int dec_start; /* first token of the final window */
    kr_prefix *dec_history; /* decoder K/V of the final window's history tokens, or NULL */
    int dec_history_fresh; /* computed here: offered to the cache once complete */
    int dec_history_done; /* its rows computed */
    kr_kv_store dec_paths; /* decoder K/V of each path's rows */
    int dec_path_rows; /* rows per path in dec_paths (pred_len; naive: the window) */
    int dec_next_path, dec_path_rows_done;
};

/* ---------------------------------------------------------------- profile */

/* The tokenizer's passes are parts of their own: their kernels are counted into a scratch
 * profile (not the predictor's GEMM / attention parts) and booked whole, FLOPs included. */
static kr_exec tokenizer_exec(const kr_engine *eng, kr_prof *scratch) {
    kr_exec ex = eng->ex;
    memset(scratch, 0, sizeof *scratch);
    ex.prof = eng->ex.prof ? scratch : NULL;
    return ex;
}

static void book_tokenizer(const kr_engine *eng, int part, double t0, const kr_prof *scratch) {
    if (!eng->ex.prof) return;
    double flops = 0, bytes = 0;
    for (int i = 0; i < KR_PROF_PART_COUNT; i++) {
        flops += scratch->part[i].flops;
        bytes += scratch->part[i].bytes;
    }
    kr_prof_end(eng->ex.prof, part, t0, flops, bytes);
}

void kr_gen_profile_export(const kr_gen_profile *p, kr_step_profile *out) {
    _Static_assert((int)KR_PROF_PART_COUNT == (int)KR_PART_OTHER,
                   "kr_prof parts = kr_profile_part");
    memset(out, 0, sizeof *out);
    out->enabled = p->enabled;
    if (!p->enabled) return;
    out->seconds_steps = p->seconds_steps;
    double parts = 0;
    for (int i = 0; i < KR_PROF_PART_COUNT; i++) {
        const kr_prof_entry *e = &p->parts.part[i];
        out->part[i] = (kr_profile_entry){ e->seconds, e->flops, e->bytes, e->calls };
        parts += e->seconds;
    }
    double other = p->seconds_steps - parts;
    out->part[KR_PART_OTHER].seconds = other > 0 ? other : 0;
    out->rerun =
        (kr_profile_entry){ p->rerun.seconds, p->rerun.flops, p->rerun.bytes, p->rerun.calls };
    out->pool_regions = p->pool_regions;
    out->seconds_pool_wait = p->seconds_pool_wait;
}

/* acc += b - a */
static void profile_add_delta(kr_gen_profile *acc, const kr_gen_profile *a,
                              const kr_gen_profile *b) {
    kr_prof_add_delta(&acc->parts, &a->parts, &b->parts);
    acc->seconds_steps += b->seconds_steps - a->seconds_steps;
    acc->rerun.seconds += b->rerun.seconds - a->rerun.seconds;
    acc->rerun.flops += b->rerun.flops - a->rerun.flops;
    acc->rerun.bytes += b->rerun.bytes - a->rerun.bytes;
    acc->rerun.calls += b->rerun.calls - a->rerun.calls;
    acc->pool_regions += b->pool_regions - a->pool_regions;
    acc->seconds_pool_wait += b->seconds_pool_wait - a->seconds_pool_wait;
}

/* ---------------------------------------------------------------- prefixes */

static int gcd(int a, int b) {
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* A predictor KV store in the context's KV precision. The int8 scale group divides the
 * head_dim of both the self-attention and the dep layer, so no scale spans two heads. */
static kr_status pred_store_init(const kr_engine *eng, kr_kv_store *s, int cap, kr_error *err) {
    const kr_predictor_weights *w = eng->model->pred;
    int group =
        w->cfg.n_layers > 0 ? gcd(w->blocks[0].attn.head_dim, w->dep.head_dim) : w->dep.head_dim;
    return kr_kv_store_init_dtype(s, kr_predictor_store_layers(w), w->cfg.d_model, cap,
                                  eng->kv_dtype, group, err);
}

void kr_prefix_release(kr_prefix *p) {
    if (!p || --p->refs > 0) return;
    kr_kv_store_release(&p->kv);
    free(p->logits);
    free(p->ctx);
    free(p);
}

static kr_prefix *prefix_new(const kr_engine *eng, int rows, kr_error *err) {
    const kr_predictor_weights *w = eng->model->pred;
    kr_prefix *p = calloc(1, sizeof *p);
    if (p) {
        p->logits = malloc(((size_t)1 << w->cfg.s1_bits) * sizeof(float));
        p->ctx = malloc((size_t)w->cfg.d_model * sizeof(float));
        p->refs = 1;
        p->n = rows;
    }
    if (!p || !p->logits || !p->ctx ||
        pred_store_init(eng, &p->kv, rows > 0 ? rows : 1, err) != KR_OK) {
        kr_prefix_release(p);
        kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory for a prefix");
        return NULL;
    }
    return p;
}

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

/* ---------------------------------------------------------------- groups */

/* Exact windows past max_context run every token again at each step; a record of each row's
 * first stage (embedding, first block's Q/K/V) saves those GEMMs, ~5 % of a re-run pass of
 * Kronos-small, for 4·d floats a row: charged to the KV budget with the stores. */
static kr_status stage_init(kr_gen_group *g, kr_error *err) {
    size_t slots = (size_t)g->window_len0 + (size_t)g->paths * (size_t)g->pred_len;
    g->stage = malloc(slots * KR_FIRST_STAGE_FLOATS(g->d) * sizeof(float));
    g->stage_ok = calloc(slots, 1);
    if (!g->stage || !g->stage_ok)
        return kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory for %zu re-run row records",
                            slots);
    g->stage_bytes = slots * (KR_FIRST_STAGE_FLOATS(g->d) * sizeof(float) + 1);
    return KR_OK;
}

static void stage_release(kr_gen_group *g) {
    free(g->stage);
    free(g->stage_ok);
    g->stage = NULL;
    g->stage_ok = NULL;
    g->stage_bytes = 0;
}

kr_status kr_gen_group_create(const kr_engine *eng, const kr_gen_input *in, kr_gen_output *out,
                              const kr_forecast_params *params, const kr_gen_options *opt,
                              kr_gen_group **group, kr_error *err) {
    kr_gen_group *g = calloc(1, sizeof *g);
    if (!g) return kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory");
    const kr_predictor_config *pc = &eng->model->pred->cfg;
    g->in = in;
    g->out = out;
    if (opt) g->opt = *opt;
    g->pred_len = params->pred_len;
    g->paths = params->paths;
    g->first_path = (uint64_t)params->first_path;
    g->max_context = params->max_context;
    g->exact = params->window == KR_WINDOW_EXACT;
    g->sampling.temperature = params->temperature;
    g->sampling.top_k = params->top_k;
    g->sampling.top_p = params->top_p;
    g->hist_len = in->L;
    g->window_start0 = g->hist_len > g->max_context ? g->hist_len - g->max_context : 0;
    g->window_len0 = g->hist_len - g->window_start0;
    g->d = pc->d_model;
    g->vocab1 = 1 << pc->s1_bits;
    g->logits = malloc((size_t)g->paths * g->vocab1 * sizeof(float));
    g->ctx = malloc((size_t)g->paths * g->d * sizeof(float));
    kr_status st =
        (g->logits && g->ctx) ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory");
    if (st == KR_OK && g->opt.naive)
        st = pred_store_init(eng, &g->naive, g->paths * g->max_context, err);
    if (st == KR_OK && !g->opt.naive) {
        st = pred_store_init(eng, &g->generated, g->paths * g->pred_len, err);
        if (st == KR_OK && g->exact && g->hist_len + g->pred_len - 1 > g->max_context) {
            st = pred_store_init(eng, &g->rerun_hist, g->max_context, err);
            if (st == KR_OK) st = stage_init(g, err);
        }
    }
    if (st != KR_OK) {
        kr_gen_group_free(g);
        return st;
    }
    out->kv_bytes = kr_gen_group_kv_bytes(g);
    memset(&out->profile, 0, sizeof out->profile);
    out->profile.enabled = eng->profile != NULL;
    *group = g;
    return KR_OK;
}

size_t kr_gen_kv_peak_bytes(const kr_engine *eng, int hist_len, const kr_forecast_params *params,
                            int naive) {
    const kr_predictor_weights *w = eng->model->pred;
    const kr_tokenizer_weights *tw = eng->model->tok;
    int layers = kr_predictor_store_layers(w), d = w->cfg.d_model;
    int group =
        w->cfg.n_layers > 0 ? gcd(w->blocks[0].attn.head_dim, w->dep.head_dim) : w->dep.head_dim;
    int paths = params->paths, pred_len = params->pred_len, max_context = params->max_context;
    int window = hist_len < max_context ? hist_len : max_context;
    /* As kr_gen_group_create and admit allocate them: the generated rows, the window, and in
     * exact mode past max_context the re-run window with its first-stage records. */
    size_t predictor;
    if (naive) {
        predictor = kr_kv_store_bytes_for(layers, d, paths * max_context, eng->kv_dtype, group);
    } else {
        predictor = kr_kv_store_bytes_for(layers, d, paths * pred_len, eng->kv_dtype, group) +
                    kr_kv_store_bytes_for(layers, d, window, eng->kv_dtype, group);
        if (params->window == KR_WINDOW_EXACT && hist_len + pred_len - 1 > max_context) {
            size_t slots = (size_t)window + (size_t)paths * (size_t)pred_len;
            predictor += kr_kv_store_bytes_for(layers, d, max_context, eng->kv_dtype, group) +
                         slots * (KR_FIRST_STAGE_FLOATS(d) * sizeof(float) + 1);
        }
    }
    /* The decode starts once the predictor's stores are released (start_decode). */
    int total = hist_len + pred_len, dec_start = total > max_context ? total - max_context : 0;
    int history = hist_len - dec_start, path_rows = naive ? total - dec_start : pred_len;
    int tok_layers = kr_tokenizer_store_layers(tw), tok_d = tw->cfg.d_model;
    size_t decode = kr_kv_store_bytes_for(tok_layers, tok_d, paths * path_rows, KR_KV_F32, 0);
    if (!naive && history > 0)
        decode += kr_kv_store_bytes_for(tok_layers, tok_d, history, KR_KV_F32, 0);
    return predictor > decode ? predictor : decode;
}

/* The predictor's stores are not needed once every token is sampled. */
static void release_predictor_state(kr_gen_group *g) {
    kr_prefix_release(g->cached_window);
    kr_prefix_release(g->own_window);
    g->cached_window = g->own_window = NULL;
    kr_kv_store_release(&g->rerun_hist);
    kr_kv_store_release(&g->generated);
    kr_kv_store_release(&g->naive);
    stage_release(g);
}

void kr_gen_group_free(kr_gen_group *g) {
    if (!g) return;
    release_predictor_state(g);
    kr_prefix_release(g->dec_history);
    kr_kv_store_release(&g->dec_paths);
    free(g->logits);
    free(g->ctx);
    free(g);
}

int kr_gen_group_done(const kr_gen_group *g) { return g->phase == PHASE_DONE; }
int kr_gen_group_steps(const kr_gen_group *g) { return g->step; }
int kr_gen_group_generating(const kr_gen_group *g) { return g->phase == PHASE_GENERATE; }

size_t kr_gen_group_kv_bytes(const kr_gen_group *g) {
    /* A prefill the prefix cache holds too is charged to the cache, not twice; so are the
     * blocks a window took from a cached one by reference, and a whole window served from the
     * cache. Those go to the group's account when the cache evicts their window and the group
     * is their last holder. (Were two groups left sharing them, neither would count them until
     * one ended.) */
    int own_only = g->own_window && g->own_window->refs == 1;
    int cached_only = g->cached_window && g->cached_window->refs == 1;
    int dec_own = g->dec_history && g->dec_history->refs == 1;
    return g->stage_bytes + kr_kv_store_bytes(&g->rerun_hist) + kr_kv_store_bytes(&g->generated) +
           kr_kv_store_bytes(&g->naive) + kr_kv_store_bytes(&g->dec_paths) +
           (own_only ? kr_kv_store_unshared_bytes(&g->own_window->kv) : 0) +
           (cached_only ? kr_kv_store_unshared_bytes(&g->cached_window->kv) : 0) +
           (dec_own ? kr_kv_store_bytes(&g->dec_history->kv) : 0);
}

/* Window of the step that samples token hist_len + i: its first token. */
static int window_start(const kr_gen_group *g, int i) {
    int cur = g->hist_len + i;
    return cur > g->max_context ? cur - g->max_context : 0;
}

int64_t kr_gen_group_pending_rows(const kr_gen_group *g) {
    int64_t rows = 0;
    switch (g->phase) {
    case PHASE_ADMIT: rows = g->window_len0; break;
    case PHASE_PREFILL: rows = g->window_len0 - g->prefilled; break;
    case PHASE_GENERATE: {
        int i = g->step, left = g->paths - g->next_path;
        if (g->opt.naive) {
            int ws = window_start(g, i);
            rows = (int64_t)left * (g->hist_len + i - ws);
        } else if (i == 0) {
            rows = left; /* sampling from the prefill's logits */
        } else if (g->exact && window_start(g, i) > g->window_start0) {
            int h = g->step_begun ? g->hist_len - g->win_start : g->hist_len - window_start(g, i);
            rows =
                (h - (g->step_begun ? g->rerun_done : 0)) + (int64_t)left * i - g->path_rows_done;
        } else {
            rows = left;
        }
        break;
    }
    case PHASE_DECODE: {
        int total = g->hist_len + g->pred_len;
        int dws = total > g->max_context ? total - g->max_context : 0;
        int h = g->opt.naive ? 0 : g->hist_len - dws;
        int per_path = g->opt.naive ? total - dws : g->pred_len;
        if (!g->dec_started) return h + (int64_t)g->paths * per_path;
        int hist_left = g->dec_history_fresh ? h - g->dec_history_done : 0;
        rows = hist_left + (int64_t)(g->paths - g->dec_next_path) * g->dec_path_rows -
               g->dec_path_rows_done;
        break;
    }
    default: return 0;
    }
    return rows > 0 ? rows : 1;
}

/* ---------------------------------------------------------------- batch builder */

/* What the rows of a chunk are for once computed. */
enum chunk_kind {
    CHUNK_CONTEXT = 0, /* K/V only (a prefill piece, re-run history, a piece of a path) */
    CHUNK_PREFILL_LAST, /* the initial window's last rows: logits for every path */
    CHUNK_PATH_LAST, /* a path's window end: its logits */
    CHUNK_DEC_CONTEXT, /* decoder K/V of a final window's history */
    CHUNK_DEC_PATH /* decoded candles of a path's rows */
};

typedef struct batch {
    kr_arena *arena;
    kr_chunk *chunks;
    kr_gen_group **chunk_group;
    int *chunk_kind, *chunk_path;
    int *chunk_first; /* CHUNK_DEC_PATH: index among the path's generated rows of its first row
                         (negative for history rows of a naive window) */
    int *chunk_last; /* batch row of the chunk's last row */
    int n_chunks, cap_chunks;
    int32_t *s1, *s2;
    float *stamps;
    const float **stage_keep; /* per row: its first-stage record, or NULL */
    float **stage_save; /* per row: where to record its first stage, or NULL */
    int staged; /* some row keeps or saves a record */
    int rows, cap_rows;
} batch;

/* Arena-backed growth: the old arrays stay until the step releases the arena. */
#define GROW(b, field, type, old_n, new_n)                                              \
    do {                                                                                \
        type *grown_ = KR_ARENA_NEW((b)->arena, type, (new_n));                         \
        if (!grown_) return kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory"); \
        if ((old_n) > 0) memcpy(grown_, (b)->field, (size_t)(old_n) * sizeof(type));    \
        (b)->field = grown_;                                                            \
    } while (0)

/* Room for `chunks` more chunks and `rows` more rows. */
static kr_status batch_reserve(batch *b, int chunks, int rows, kr_error *err) {
    if (b->n_chunks + chunks > b->cap_chunks) {
        int cap = 2 * (b->n_chunks + chunks);
        GROW(b, chunks, kr_chunk, b->n_chunks, cap);
        GROW(b, chunk_group, kr_gen_group *, b->n_chunks, cap);
        GROW(b, chunk_kind, int, b->n_chunks, cap);
        GROW(b, chunk_path, int, b->n_chunks, cap);
        GROW(b, chunk_first, int, b->n_chunks, cap);
        GROW(b, chunk_last, int, b->n_chunks, cap);
        b->cap_chunks = cap;
    }
    if (b->rows + rows > b->cap_rows) {
        int cap = 2 * (b->rows + rows);
        GROW(b, s1, int32_t, b->rows, cap);
        GROW(b, s2, int32_t, b->rows, cap);
        GROW(b, stamps, float, (size_t)b->rows * 5, (size_t)cap * 5);
        GROW(b, stage_keep, const float *, b->rows, cap);
        GROW(b, stage_save, float *, b->rows, cap);
        b->cap_rows = cap;
    }
    return KR_OK;
}

static kr_chunk *batch_chunk(batch *b, kr_gen_group *g, int kind, int path, int pos0,
                             kr_kv_store *out, int out_start) {
    int c = b->n_chunks++;
    kr_chunk *ch = &b->chunks[c];
    memset(ch, 0, sizeof *ch);
    ch->pos0 = pos0;
    ch->out = out;
    ch->out_start = out_start;
    b->chunk_group[c] = g;
    b->chunk_kind[c] = kind;
    b->chunk_path[c] = path;
    b->chunk_first[c] = 0;
    b->chunk_last[c] = -1;
    return ch;
}

static void chunk_past(kr_chunk *c, const kr_kv_store *s, int start, int n) {
    if (n <= 0) return;
    c->past[c->n_past++] = (kr_kv_ref){ s, start, n };
}

/* Refs to the group's prefilled window rows [from, to) (cached part, then its own part). */
static void add_window_refs(kr_kv_ref *refs, int *n, const kr_gen_group *g, int from, int to) {
    if (from < g->cached_rows) {
        int e = to < g->cached_rows ? to : g->cached_rows;
        refs[(*n)++] = (kr_kv_ref){ &g->cached_window->kv, from, e - from };
    }
    int a = from > g->cached_rows ? from : g->cached_rows;
    if (to > a) refs[(*n)++] = (kr_kv_ref){ &g->own_window->kv, a - g->cached_rows, to - a };
}

/* The first-stage slot of token `index` (as in batch_token), or -1 when none is kept. */
static long stage_slot(const kr_gen_group *g, int path, int index) {
    if (!g->stage) return -1;
    if (index < g->hist_len)
        return index >= g->window_start0 ? (long)(index - g->window_start0) : -1;
    return (long)g->window_len0 + (long)path * g->pred_len + (index - g->hist_len);
}

/* Appends token `index` of group g (history if < L, else generated by `path`) to the last
 * chunk. */
static void batch_token(batch *b, kr_gen_group *g, int path, int index) {
    int r = b->rows++;
    if (index < g->hist_len) {
        b->s1[r] = g->out->hist_s1[index];
        b->s2[r] = g->out->hist_s2[index];
    } else {
        size_t j = (size_t)path * g->pred_len + (size_t)(index - g->hist_len);
        b->s1[r] = g->out->gen_s1[j];
        b->s2[r] = g->out->gen_s2[j];
    }
    long slot = stage_slot(g, path, index);
    b->stage_keep[r] = NULL;
    b->stage_save[r] = NULL;
    if (slot >= 0) {
        float *rec = g->stage + (size_t)slot * KR_FIRST_STAGE_FLOATS(g->d);
        /* Marked now: a later row of this batch reads what this one records (the forward
         * pass records before it reads, and runs its slices in order). */
        if (g->stage_ok[slot]) {
            b->stage_keep[r] = rec;
            g->out->reused_tokens++;
        } else
            b->stage_save[r] = rec;
        g->stage_ok[slot] = 1;
        b->staged = 1;
    }
    memcpy(b->stamps + (size_t)r * 5, g->in->stamps + (size_t)index * 5, 5 * sizeof(float));
    b->chunks[b->n_chunks - 1].n++;
    b->chunk_last[b->n_chunks - 1] = r;
}

/* Tokens [from, to) of a path (or the history, path -1) into the last chunk. */
static void batch_tokens(batch *b, kr_gen_group *g, int path, int from, int to) {
    for (int t = from; t < to; t++) batch_token(b, g, path, t);
}

/* Rows per forward pass. Chunks run in order in slices of at most this many rows (a chunk
 * larger than that alone), which bounds activation memory without changing a number: a
 * chunk only reads KV rows that earlier chunks have fully written, and kernels are
 * row-deterministic. */
#define KR_FORWARD_MAX_ROWS 1024

/* The (group, path) pairs to sample this step. */
typedef struct ready_list {
    kr_gen_group **group;
    int *path;
    int n, cap;
} ready_list;

static kr_status ready_add(ready_list *r, kr_arena *arena, kr_gen_group *g, int path,
                           kr_error *err) {
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        kr_gen_group **gs = KR_ARENA_NEW(arena, kr_gen_group *, cap);
        int *ps = KR_ARENA_NEW(arena, int, cap);
        if (!gs || !ps) return kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory");
        if (r->n) {
            memcpy(gs, r->group, (size_t)r->n * sizeof *gs);
            memcpy(ps, r->path, (size_t)r->n * sizeof *ps);
        }
        r->group = gs;
        r->path = ps;
        r->cap = cap;
    }
    r->group[r->n] = g;
    r->path[r->n++] = path;
    return KR_OK;
}

/* Runs the predictor over the batch, then gives each chunk that ends a window (a prefill or
 * a path's window) its last row's context and s1 logits. */
static kr_status run_predictor(const kr_engine *eng, batch *b, kr_error *err) {
    const kr_predictor_weights *pw = eng->model->pred;
    const kr_exec *ex = &eng->ex;
    int d = pw->cfg.d_model, V1 = 1 << pw->cfg.s1_bits;
    int n_last = 0, slice_rows = b->rows < KR_FORWARD_MAX_ROWS ? b->rows : KR_FORWARD_MAX_ROWS;
    for (int c = 0; c < b->n_chunks; c++) {
        if (b->chunks[c].n > slice_rows) slice_rows = b->chunks[c].n;
        if (b->chunk_kind[c] != CHUNK_CONTEXT) n_last++;
    }
    size_t mark = kr_arena_mark(ex->arena);
    float *context = KR_ARENA_NEW(ex->arena, float, (size_t)slice_rows *d);
    float *last = KR_ARENA_NEW(ex->arena, float, (size_t)(n_last ? n_last : 1) * d);
    float *logits = KR_ARENA_NEW(ex->arena, float, (size_t)(n_last ? n_last : 1) * V1);
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
        kr_first_stage fs = { b->stage_keep + row0, b->stage_save + row0 };
        st = kr_predictor_forward_staged(pw, ex, b->chunks + c0, c1 - c0, b->s1 + row0,
                                         b->s2 + row0, b->stamps + (size_t)row0 * 5,
                                         b->staged ? &fs : NULL, context, err);
        if (st != KR_OK) goto done;
        for (int c = c0; c < c1; c++) {
            if (b->chunk_kind[c] == CHUNK_CONTEXT) continue;
            memcpy(last + (size_t)n * d, context + (size_t)(b->chunk_last[c] - row0) * d,
                   d * sizeof(float));
            n++;
        }
        row0 += rows;
        c0 = c1;
    }
    if (n > 0 && (st = kr_predictor_s1_logits(pw, ex, last, n, d, logits, err)) != KR_OK) goto done;
    n = 0;
    for (int c = 0; c < b->n_chunks; c++) {
        int kind = b->chunk_kind[c];
        if (kind == CHUNK_CONTEXT) continue;
        kr_gen_group *g = b->chunk_group[c];
        const float *lg = logits + (size_t)n * V1, *cx = last + (size_t)n * d;
        if (kind == CHUNK_PREFILL_LAST) {
            /* The window's last row is shared by every path; keep it with the prefix too. */
            for (int p = 0; p < g->paths; p++) {
                memcpy(g->ctx + (size_t)p * d, cx, d * sizeof(float));
                memcpy(g->logits + (size_t)p * V1, lg, V1 * sizeof(float));
            }
            memcpy(g->own_window->ctx, cx, d * sizeof(float));
            memcpy(g->own_window->logits, lg, V1 * sizeof(float));
        } else {
            int p = b->chunk_path[c];
            memcpy(g->ctx + (size_t)p * d, cx, d * sizeof(float));
            memcpy(g->logits + (size_t)p * V1, lg, V1 * sizeof(float));
        }
        n++;
    }
done:
    kr_arena_release(ex->arena, mark);
    return st;
}

/* ---------------------------------------------------------------- planning a step */

/* Rows of work a group may still take this step: its budget, and at least one unit. */
typedef struct allowance {
    int64_t left;
    int used_any;
} allowance;

/* How many of `want` rows to take now (0: stop), at most one forward pass's worth. */
static int take_rows(allowance *a, int want) {
    if (want <= 0) return 0;
    int64_t n = want < KR_FORWARD_MAX_ROWS ? want : KR_FORWARD_MAX_ROWS;
    if (a->used_any) {
        if (a->left <= 0) return 0;
        if (n > a->left) n = a->left;
    } else if (a->left > 0 && n > a->left) {
        n = a->left;
    }
    a->used_any = 1;
    a->left -= n;
    return (int)n;
}

/* Whether a unit of `rows` that cannot be split fits (the first unit always does). */
static int take_unit(allowance *a, int rows) {
    if (a->used_any && a->left < rows) return 0;
    a->used_any = 1;
    a->left -= rows;
    return 1;
}

/* Next prefill chunk of a group: window rows [prefilled, prefilled + n). */
static kr_status plan_prefill(batch *b, kr_gen_group *g, allowance *a, kr_error *err) {
    int n = take_rows(a, g->window_len0 - g->prefilled);
    if (n <= 0) return KR_OK;
    kr_status st = batch_reserve(b, 1, n, err);
    if (st != KR_OK) return st;
    int from = g->prefilled;
    int kind = from + n == g->window_len0 ? CHUNK_PREFILL_LAST : CHUNK_CONTEXT;
    kr_chunk *c = batch_chunk(b, g, kind, -1, from, &g->own_window->kv, from - g->cached_rows);
    add_window_refs(c->past, &c->n_past, g, 0, from);
    batch_tokens(b, g, -1, g->window_start0 + from, g->window_start0 + from + n);
    g->prefilled += n;
    g->out->prefill_tokens += n;
    return KR_OK;
}

/* Fixes the window of generation step i (>= 1, or 0 in naive mode) and counts its work. */
static void begin_step(kr_gen_group *g, int i) {
    int L = g->hist_len, cur = L + i, ws = window_start(g, i);
    if (g->opt.naive) {
        g->layout = LAYOUT_NAIVE;
        g->out->prefill_tokens += (int64_t)g->paths * (cur - ws);
    } else if (g->exact && ws > g->window_start0) {
        g->layout = LAYOUT_RERUN;
        g->out->window_recomputes++;
        g->out->prefill_tokens += (L - ws) + (int64_t)g->paths * i;
    } else {
        g->layout = LAYOUT_CACHED;
        g->out->decode_tokens += g->paths;
    }
    g->win_start = ws;
    g->win_len = cur - ws;
    g->step_begun = 1;
    g->rerun_done = 0;
    g->next_path = 0;
    g->path_rows_done = 0;
}

/* The rows that bring generation step i's window up to date, path by path, within the
 * allowance; paths whose window end is computed here go to `ready`. */
static kr_status plan_generate(batch *b, ready_list *ready, kr_arena *arena, kr_gen_group *g,
                               allowance *a, kr_error *err) {
    int i = g->step, L = g->hist_len, P = g->pred_len;
    kr_status st = KR_OK;
    if (i == 0 && !g->opt.naive) {
        /* The prefill left every path's logits: sampling only, a path per budget row (the
         * dep-layer query and the draws of hundreds of paths are work too). */
        while (st == KR_OK && g->next_path < g->paths && take_unit(a, 1))
            st = ready_add(ready, arena, g, g->next_path++, err);
        return st;
    }
    if (!g->step_begun) begin_step(g, i);
    int cur = L + i, ws = g->win_start;
    if (g->layout == LAYOUT_NAIVE) {
        /* Whole windows from position 0; never split (a reference path for tests). */
        while (g->next_path < g->paths && take_unit(a, g->win_len)) {
            int p = g->next_path++;
            if ((st = batch_reserve(b, 1, g->win_len, err)) != KR_OK) return st;
            batch_chunk(b, g, CHUNK_PATH_LAST, p, 0, &g->naive, p * g->max_context);
            batch_tokens(b, g, p, ws, cur);
            if ((st = ready_add(ready, arena, g, p, err)) != KR_OK) return st;
        }
        return KR_OK;
    }
    if (g->layout == LAYOUT_RERUN) {
        int h = L - ws;
        if (g->rerun_done < h) {
            int n = take_rows(a, h - g->rerun_done);
            if (n <= 0) return KR_OK;
            if ((st = batch_reserve(b, 1, n, err)) != KR_OK) return st;
            kr_chunk *c =
                batch_chunk(b, g, CHUNK_CONTEXT, -1, g->rerun_done, &g->rerun_hist, g->rerun_done);
            chunk_past(c, &g->rerun_hist, 0, g->rerun_done);
            batch_tokens(b, g, -1, ws + g->rerun_done, ws + g->rerun_done + n);
            g->rerun_done += n;
            if (g->rerun_done < h) return KR_OK;
        }
        /* Each path's generated tokens on top of the history part, in pieces if need be. */
        while (g->next_path < g->paths) {
            int p = g->next_path, done = g->path_rows_done;
            int n = take_rows(a, i - done);
            if (n <= 0) break;
            if ((st = batch_reserve(b, 1, n, err)) != KR_OK) return st;
            int last = done + n == i;
            kr_chunk *c = batch_chunk(b, g, last ? CHUNK_PATH_LAST : CHUNK_CONTEXT, p, h + done,
                                      &g->generated, p * P + done);
            chunk_past(c, &g->rerun_hist, 0, h);
            chunk_past(c, &g->generated, p * P, done);
            batch_tokens(b, g, p, L + done, L + done + n);
            if (!last) {
                g->path_rows_done = done + n;
                break;
            }
            g->path_rows_done = 0;
            g->next_path++;
            if ((st = ready_add(ready, arena, g, p, err)) != KR_OK) return st;
        }
        return KR_OK;
    }
    /* LAYOUT_CACHED: one new token per path; in rolling mode keys older than the window drop
     * out of what the new row attends to. */
    int pre_from = ws > g->window_start0 ? ws - g->window_start0 : 0;
    int gen_from = ws > L ? ws - L : 0;
    while (g->next_path < g->paths && take_unit(a, 1)) {
        int p = g->next_path++;
        if ((st = batch_reserve(b, 1, 1, err)) != KR_OK) return st;
        kr_chunk *c = batch_chunk(b, g, CHUNK_PATH_LAST, p, cur - 1 - g->window_start0,
                                  &g->generated, p * P + i - 1);
        add_window_refs(c->past, &c->n_past, g, pre_from, g->window_len0);
        chunk_past(c, &g->generated, p * P + gen_from, i - 1 - gen_from);
        batch_token(b, g, p, cur - 1);
        if ((st = ready_add(ready, arena, g, p, err)) != KR_OK) return st;
    }
    return KR_OK;
}

/* The dep-layer rows visible to path p's s2 query at the current step. */
static void s2_view(const kr_gen_group *g, int p, kr_kv_view *v) {
    int i = g->step, L = g->hist_len, P = g->pred_len;
    v->n = 0;
    if (g->layout == LAYOUT_NAIVE) {
        v->ref[v->n++] = (kr_kv_ref){ &g->naive, p * g->max_context, g->win_len };
    } else if (g->layout == LAYOUT_RERUN) {
        v->ref[v->n++] = (kr_kv_ref){ &g->rerun_hist, 0, L - g->win_start };
        if (i > 0) v->ref[v->n++] = (kr_kv_ref){ &g->generated, p * P, i };
    } else {
        int pre_from = g->win_start > g->window_start0 ? g->win_start - g->window_start0 : 0;
        int gen_from = g->win_start > L ? g->win_start - L : 0;
        add_window_refs(v->ref, &v->n, g, pre_from, g->window_len0);
        if (i > gen_from)
            v->ref[v->n++] = (kr_kv_ref){ &g->generated, p * P + gen_from, i - gen_from };
    }
}

/* One sampling pass over the ready paths (s1 or s2): draw r reads logits[r] with its group's
 * parameters and uniform u[r]. Paths are independent and each draw is a pure function of its
 * inputs, so the threads split them (round-robin, each with its own scratch) without changing
 * a token. */
typedef struct draw_job {
    const ready_list *ready;
    const float *const *logits;
    const double *u;
    int32_t *tok;
    kr_sampler_scratch *scratch; /* [threads] */
} draw_job;

static void draw_worker(void *ctx, int ith, int nth) {
    const draw_job *j = ctx;
    for (int r = ith; r < j->ready->n; r += nth)
        j->tok[r] =
            kr_sampler_draw(j->logits[r], &j->ready->group[r]->sampling, j->u[r], &j->scratch[ith]);
}

/* Runs a draw_job, on the pool when there is more than one draw. */
static kr_status draw_all(const kr_exec *ex, draw_job *j, int vocab, kr_error *err) {
    int nth = j->ready->n > 1 ? kr_pool_size(ex->pool) : 1;
    if (!(j->scratch = KR_ARENA_NEW(ex->arena, kr_sampler_scratch, nth)))
        return kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory sampling");
    for (int t = 0; t < nth; t++) {
        kr_status st = kr_sampler_scratch_init(&j->scratch[t], vocab, ex->arena, err);
        if (st != KR_OK) return st;
    }
    if (nth > 1)
        kr_pool_run(ex->pool, draw_worker, j);
    else
        draw_worker(j, 0, 1);
    return KR_OK;
}

/* Samples s1, then s2 conditioned on it, for every ready path. */
static kr_status sample_paths(const kr_engine *eng, const ready_list *ready, kr_error *err) {
    const kr_predictor_weights *pw = eng->model->pred;
    const kr_exec *ex = &eng->ex;
    int d = pw->cfg.d_model, V1 = 1 << pw->cfg.s1_bits, V2 = 1 << pw->cfg.s2_bits, n = ready->n;
    size_t mark = kr_arena_mark(ex->arena);
    int32_t *s1 = KR_ARENA_NEW(ex->arena, int32_t, n);
    float *ctx = KR_ARENA_NEW(ex->arena, float, (size_t)n *d);
    float *logits2 = KR_ARENA_NEW(ex->arena, float, (size_t)n *V2);
    kr_kv_view *views = KR_ARENA_NEW(ex->arena, kr_kv_view, n);
    int32_t *s2 = KR_ARENA_NEW(ex->arena, int32_t, n);
    double *u = KR_ARENA_NEW(ex->arena, double, n);
    const float **lg = KR_ARENA_NEW(ex->arena, const float *, n);
    kr_status st = KR_OK;
    if (!s1 || !ctx || !logits2 || !views || !s2 || !u || !lg)
        st = kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory sampling %d paths", n);
    if (st != KR_OK) goto done;
    double t0 = kr_prof_begin(ex->prof);
    for (int r = 0; r < n; r++) {
        const kr_gen_group *g = ready->group[r];
        int p = ready->path[r];
        /* Stream = path, counter = 2·step (+1 for s2): a path's draws are a function of
         * (seed, path, step) only, whatever else is batched with it. */
        u[r] = kr_rng_uniform(g->in->seed, g->first_path + (uint64_t)p, 2ull * g->step);
        lg[r] = g->logits + (size_t)p * V1;
        memcpy(ctx + (size_t)r * d, g->ctx + (size_t)p * d, d * sizeof(float));
        s2_view(g, p, &views[r]);
    }
    draw_job j1 = { .ready = ready, .logits = lg, .u = u, .tok = s1 };
    if ((st = draw_all(ex, &j1, V1, err)) != KR_OK) goto done;
    /* Per draw: scale, sort-free top-k/top-p, softmax and the search over the vocabulary. */
    kr_prof_end(ex->prof, KR_PROF_PART_SAMPLING, t0, 0.0, 4.0 * n * V1);
    if ((st = kr_predictor_s2_logits(pw, ex, n, s1, ctx, d, views, logits2, err)) != KR_OK)
        goto done;
    t0 = kr_prof_begin(ex->prof);
    for (int r = 0; r < n; r++) {
        const kr_gen_group *g = ready->group[r];
        u[r] = kr_rng_uniform(g->in->seed, g->first_path + (uint64_t)ready->path[r],
                              2ull * g->step + 1);
        lg[r] = logits2 + (size_t)r * V2;
    }
    draw_job j2 = { .ready = ready, .logits = lg, .u = u, .tok = s2 };
    if ((st = draw_all(ex, &j2, V2, err)) != KR_OK) goto done;
    /* In path order on this thread: observers see the draws as before. */
    for (int r = 0; r < n; r++) {
        kr_gen_group *g = ready->group[r];
        int p = ready->path[r], i = g->step;
        g->out->gen_s1[(size_t)p * g->pred_len + i] = s1[r];
        g->out->gen_s2[(size_t)p * g->pred_len + i] = s2[r];
        if (g->opt.observer)
            g->opt.observer(g->opt.observer_user, g->opt.index, p, i, g->logits + (size_t)p * V1,
                            lg[r], s1[r], s2[r], g->win_start, g->win_len);
    }
    kr_prof_end(ex->prof, KR_PROF_PART_SAMPLING, t0, 0.0, 4.0 * n * V2);
done:
    kr_arena_release(ex->arena, mark);
    return st;
}

/* ---------------------------------------------------------------- decode */

/* Sets up the decode of the final windows [dec_start, L + P): the history part's decoder
 * K/V once (or from the prefix cache: positions start at 0 either way, so a repeated
 * window's rows are the same numbers), each path's rows on top. */
static kr_status start_decode(const kr_engine *eng, kr_gen_group *g, const kr_prefix_hooks *hooks,
                              kr_error *err) {
    const kr_tokenizer_weights *tw = eng->model->tok;
    int total = g->hist_len + g->pred_len;
    g->dec_start = total > g->max_context ? total - g->max_context : 0;
    int h = g->hist_len - g->dec_start;
    g->dec_path_rows = g->opt.naive ? total - g->dec_start : g->pred_len;
    kr_status st = kr_kv_store_init(&g->dec_paths, kr_tokenizer_store_layers(tw), tw->cfg.d_model,
                                    g->paths * g->dec_path_rows, err);
    if (st != KR_OK) return st;
    if (!g->opt.naive && h > 0) {
        if (hooks && hooks->dec_lookup && hooks->dec_publish)
            g->dec_history = hooks->dec_lookup(hooks->user, g->out->hist_s1 + g->dec_start,
                                               g->out->hist_s2 + g->dec_start, h);
        if (!g->dec_history) {
            if (!(g->dec_history = dec_prefix_new(tw, h, err)))
                return err ? err->status : KR_ERR_NOMEM;
            g->dec_history_fresh = 1;
        }
    }
    g->dec_started = 1;
    return KR_OK;
}

static kr_status plan_decode(const kr_engine *eng, batch *b, kr_gen_group *g,
                             const kr_prefix_hooks *hooks, allowance *a, kr_error *err) {
    kr_status st = KR_OK;
    if (!g->dec_started && (st = start_decode(eng, g, hooks, err)) != KR_OK) return st;
    int L = g->hist_len, P = g->pred_len, ds = g->dec_start, h = L - ds;
    if (g->opt.naive) {
        /* Each path's whole window from position 0, none of it shared. */
        while (g->dec_next_path < g->paths && take_unit(a, g->dec_path_rows)) {
            int p = g->dec_next_path++;
            if ((st = batch_reserve(b, 1, g->dec_path_rows, err)) != KR_OK) return st;
            batch_chunk(b, g, CHUNK_DEC_PATH, p, 0, &g->dec_paths, p * g->dec_path_rows);
            b->chunk_first[b->n_chunks - 1] = ds - L;
            batch_tokens(b, g, p, ds, L + P);
        }
        return KR_OK;
    }
    if (g->dec_history_fresh && g->dec_history_done < h) {
        int n = take_rows(a, h - g->dec_history_done);
        if (n <= 0) return KR_OK;
        if ((st = batch_reserve(b, 1, n, err)) != KR_OK) return st;
        int from = g->dec_history_done;
        kr_chunk *c = batch_chunk(b, g, CHUNK_DEC_CONTEXT, -1, from, &g->dec_history->kv, from);
        chunk_past(c, &g->dec_history->kv, 0, from);
        batch_tokens(b, g, -1, ds + from, ds + from + n);
        g->dec_history_done += n;
        if (g->dec_history_done < h) return KR_OK;
    }
    while (g->dec_next_path < g->paths) {
        int p = g->dec_next_path, done = g->dec_path_rows_done;
        int n = take_rows(a, P - done);
        if (n <= 0) break;
        if ((st = batch_reserve(b, 1, n, err)) != KR_OK) return st;
        kr_chunk *c = batch_chunk(b, g, CHUNK_DEC_PATH, p, h + done, &g->dec_paths, p * P + done);
        b->chunk_first[b->n_chunks - 1] = done;
        if (h > 0) chunk_past(c, &g->dec_history->kv, 0, h);
        chunk_past(c, &g->dec_paths, p * P, done);
        batch_tokens(b, g, p, L + done, L + done + n);
        if (done + n < P) {
            g->dec_path_rows_done = done + n;
            break;
        }
        g->dec_path_rows_done = 0;
        g->dec_next_path++;
    }
    return KR_OK;
}

/* Runs the tokenizer decoder over the batch and stores each path's decoded generated rows. */
static kr_status run_decoder(const kr_engine *eng, batch *b, kr_error *err) {
    kr_prof scratch;
    kr_exec tex = tokenizer_exec(eng, &scratch);
    const kr_exec *ex = &tex;
    double t0 = kr_prof_begin(eng->ex.prof);
    size_t mark = kr_arena_mark(ex->arena);
    float *dec = KR_ARENA_NEW(ex->arena, float, (size_t)(b->rows > 0 ? b->rows : 1) * 6);
    kr_status st =
        dec ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory for decode");
    for (int c0 = 0, row0 = 0; st == KR_OK && c0 < b->n_chunks;) {
        int c1 = c0, rows = 0;
        while (c1 < b->n_chunks && (c1 == c0 || rows + b->chunks[c1].n <= KR_FORWARD_MAX_ROWS))
            rows += b->chunks[c1++].n;
        st = kr_tokenizer_decode(eng->model->tok, ex, b->chunks + c0, c1 - c0, b->s1 + row0,
                                 b->s2 + row0, dec + (size_t)row0 * 6, err);
        row0 += rows;
        c0 = c1;
    }
    for (int c = 0, row = 0; st == KR_OK && c < b->n_chunks; row += b->chunks[c].n, c++) {
        if (b->chunk_kind[c] != CHUNK_DEC_PATH) continue;
        kr_gen_group *g = b->chunk_group[c];
        int p = b->chunk_path[c], first = b->chunk_first[c], n = b->chunks[c].n;
        int skip = first < 0 ? -first : 0; /* history rows of a naive window */
        if (n > skip)
            memcpy(g->out->pred_norm + ((size_t)p * g->pred_len + first + skip) * 6,
                   dec + (size_t)(row + skip) * 6, (size_t)(n - skip) * 6 * sizeof(float));
    }
    kr_arena_release(ex->arena, mark);
    book_tokenizer(eng, KR_PROF_PART_TOK_DECODE, t0, &scratch);
    return st;
}

/* ---------------------------------------------------------------- admission */

/* Encodes a new group's history and takes what it can of its window from the prefix cache. */
static kr_status admit(const kr_engine *eng, kr_gen_group *g, const kr_prefix_hooks *hooks,
                       kr_error *err) {
    int L = g->hist_len, W0 = g->window_len0, start0 = g->window_start0;
    int hit = !g->opt.naive && hooks && hooks->encode_lookup &&
              hooks->encode_lookup(hooks->user, g->in->x_norm, L, g->out->hist_s1, g->out->hist_s2);
    if (!hit) {
        kr_prof scratch;
        kr_exec tex = tokenizer_exec(eng, &scratch);
        double t0 = kr_prof_begin(eng->ex.prof);
        kr_status st = kr_tokenizer_encode(eng->model->tok, &tex, g->in->x_norm, L, g->out->hist_s1,
                                           g->out->hist_s2, NULL, err);
        if (st != KR_OK) return st;
        book_tokenizer(eng, KR_PROF_PART_TOK_ENCODE, t0, &scratch);
        if (!g->opt.naive && hooks && hooks->encode_publish)
            hooks->encode_publish(hooks->user, g->in->x_norm, L, g->out->hist_s1, g->out->hist_s2);
    }
    g->layout = LAYOUT_CACHED;
    g->win_start = start0;
    g->win_len = W0;
    if (g->opt.naive) {
        g->phase = PHASE_GENERATE;
        return KR_OK;
    }
    if (hooks && hooks->lookup) {
        int rows = 0;
        kr_prefix *p =
            hooks->lookup(hooks->user, g->out->hist_s1 + start0, g->out->hist_s2 + start0,
                          g->in->stamps + (size_t)start0 * 5, W0, &rows);
        if (p && rows > 0 && rows == W0 && rows <= p->n) {
            g->cached_window = p;
            g->cached_rows = rows;
            g->out->cached_tokens += rows;
        } else if (p && rows > 0 && rows < W0 && rows <= p->n) {
            /* The cached rows' blocks join a store of the whole window by reference: the
             * group pins only those blocks, not the whole cached window, and its window is
             * then self-contained, so it can be offered to the cache in turn. */
            kr_status st = KR_OK;
            if (!(g->own_window = prefix_new(eng, W0, err)))
                st = err ? err->status : KR_ERR_NOMEM;
            else
                st = kr_kv_store_share_prefix(&g->own_window->kv, &p->kv, rows, err);
            kr_prefix_release(p);
            if (st != KR_OK) return st;
            g->prefilled = rows;
            g->out->cached_tokens += rows;
        } else if (p) {
            kr_prefix_release(p);
        }
    }
    if (!g->own_window) g->prefilled = g->cached_rows;
    if (g->cached_rows == W0) { /* the whole window is cached, with its last row's logits */
        for (int p = 0; p < g->paths; p++) {
            memcpy(g->ctx + (size_t)p * g->d, g->cached_window->ctx, g->d * sizeof(float));
            memcpy(g->logits + (size_t)p * g->vocab1, g->cached_window->logits,
                   g->vocab1 * sizeof(float));
        }
        g->phase = PHASE_GENERATE;
    } else {
        if (!g->own_window && !(g->own_window = prefix_new(eng, W0 - g->cached_rows, err)))
            return err ? err->status : KR_ERR_NOMEM;
        g->out->kv_bytes = kr_gen_group_kv_bytes(g);
        g->phase = PHASE_PREFILL;
    }
    return KR_OK;
}

/* ---------------------------------------------------------------- the step */

kr_status kr_gen_step(const kr_engine *eng, kr_gen_group **groups, const int64_t *budget,
                      int n_groups, const kr_prefix_hooks *hooks, kr_error *err) {
    kr_arena *arena = eng->ex.arena;
    size_t mark = kr_arena_mark(arena);
    kr_gen_profile *prof = eng->profile, prof0;
    double t_step = 0;
    if (prof) {
        kr_pool_counters(eng->ex.pool, &prof->pool_regions, &prof->seconds_pool_wait);
        prof0 = *prof;
        t_step = kr_prof_clock();
    }
    batch pb = { .arena = arena }, db = { .arena = arena };
    ready_list ready = { 0 };
    /* What each group did this step, for its time accounts. */
    unsigned char *did = KR_ARENA_NEW(arena, unsigned char, n_groups > 0 ? n_groups : 1);
    int64_t *left = KR_ARENA_NEW(arena, int64_t, n_groups > 0 ? n_groups : 1); /* of budget */
    enum { DID_PREFILL = 1, DID_GENERATE = 2, DID_DECODE = 4 };
    kr_status st = did && left ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory");
    if (st == KR_OK) memset(did, 0, (size_t)(n_groups > 0 ? n_groups : 1));
    for (int k = 0; k < n_groups && st == KR_OK; k++) {
        kr_gen_group *g = groups[k];
        if (budget[k] <= 0 || g->phase != PHASE_ADMIT) continue;
        double a = kr_now_seconds();
        st = admit(eng, g, hooks, err);
        g->out->seconds_tokenizer += kr_now_seconds() - a;
    }
    double t_admitted = kr_now_seconds();
    /* One predictor pass for prefill pieces and generation windows, one decoder pass. */
    for (int k = 0; k < n_groups && st == KR_OK; k++) {
        kr_gen_group *g = groups[k];
        if (budget[k] <= 0) continue;
        allowance a = { budget[k], 0 };
        if (g->phase == PHASE_PREFILL) {
            st = plan_prefill(&pb, g, &a, err);
            did[k] |= DID_PREFILL;
        } else if (g->phase == PHASE_GENERATE) {
            st = plan_generate(&pb, &ready, arena, g, &a, err);
            did[k] |= g->step == 0 ? DID_PREFILL : DID_GENERATE;
        } else if (g->phase == PHASE_DECODE) {
            st = plan_decode(eng, &db, g, hooks, &a, err);
            did[k] |= DID_DECODE;
        }
        left[k] = a.left;
    }
    if (st == KR_OK && pb.n_chunks > 0) {
        int rerun = 0;
        for (int k = 0; k < n_groups; k++)
            rerun |= budget[k] > 0 && groups[k]->phase == PHASE_GENERATE && groups[k]->step_begun &&
                     groups[k]->layout == LAYOUT_RERUN;
        kr_prof before;
        double t0 = 0;
        if (prof && rerun) {
            before = prof->parts;
            t0 = kr_prof_clock();
        }
        st = run_predictor(eng, &pb, err);
        if (prof && rerun) {
            /* The pass's own work: its kernels' FLOPs and bytes, its whole wall time. */
            prof->rerun.seconds += kr_prof_clock() - t0;
            prof->rerun.calls++;
            for (int i = 0; i < KR_PROF_PART_COUNT; i++) {
                prof->rerun.flops += prof->parts.part[i].flops - before.part[i].flops;
                prof->rerun.bytes += prof->parts.part[i].bytes - before.part[i].bytes;
            }
        }
    }
    /* A window prefilled in this step is sampled in it too (first token as soon as possible). */
    for (int k = 0; k < n_groups && st == KR_OK; k++) {
        kr_gen_group *g = groups[k];
        if (g->phase != PHASE_PREFILL || g->prefilled != g->window_len0) continue;
        g->phase = PHASE_GENERATE;
        /* Only a window prefilled entirely here is offered: it is then self-contained. */
        if (hooks && hooks->publish && g->cached_rows == 0)
            hooks->publish(hooks->user, g->own_window, g->out->hist_s1 + g->window_start0,
                           g->out->hist_s2 + g->window_start0,
                           g->in->stamps + (size_t)g->window_start0 * 5);
        allowance a = { left[k], 0 }; /* what its prefill left (at least one path) */
        st = plan_generate(&pb, &ready, arena, g, &a, err);
    }
    if (st == KR_OK && ready.n > 0) st = sample_paths(eng, &ready, err);
    double t_sampled = kr_now_seconds();
    for (int k = 0; k < n_groups && st == KR_OK; k++) {
        kr_gen_group *g = groups[k];
        /* The generation step is complete once its last path is sampled. */
        if (g->phase != PHASE_GENERATE || g->next_path < g->paths) continue;
        g->step++;
        g->step_begun = 0;
        g->next_path = 0;
        g->path_rows_done = 0;
        if (g->step == g->pred_len) {
            g->phase = PHASE_DECODE;
            release_predictor_state(g);
        }
    }
    if (st == KR_OK && db.n_chunks > 0) st = run_decoder(eng, &db, err);
    double t_decoded = kr_now_seconds();
    for (int k = 0; k < n_groups && st == KR_OK; k++) {
        kr_gen_group *g = groups[k];
        if (!(did[k] & DID_DECODE) || g->phase != PHASE_DECODE || g->dec_next_path < g->paths)
            continue;
        if (g->dec_history_fresh && hooks && hooks->dec_publish)
            hooks->dec_publish(hooks->user, g->dec_history, g->out->hist_s1 + g->dec_start,
                               g->out->hist_s2 + g->dec_start);
        kr_prefix_release(g->dec_history);
        g->dec_history = NULL;
        kr_kv_store_release(&g->dec_paths);
        g->phase = PHASE_DONE;
    }
    for (int k = 0; k < n_groups && st == KR_OK; k++) {
        kr_gen_output *out = groups[k]->out;
        if (did[k] & DID_PREFILL) out->seconds_prefill += t_sampled - t_admitted;
        if (did[k] & DID_GENERATE) out->seconds_decode += t_sampled - t_admitted;
        if (did[k] & DID_DECODE) out->seconds_tokenizer += t_decoded - t_sampled;
    }
    if (prof && st == KR_OK) {
        prof->seconds_steps += kr_prof_clock() - t_step;
        kr_pool_counters(eng->ex.pool, &prof->pool_regions, &prof->seconds_pool_wait);
        for (int k = 0; k < n_groups; k++)
            if (budget[k] > 0) profile_add_delta(&groups[k]->out->profile, &prof0, prof);
    }
    kr_arena_release(arena, mark);
    return st;
}
