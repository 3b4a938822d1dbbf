/*
 * engine/sequence — a request's sequence group and its phases (see sequence.h).
 */
#include "engine/sequence.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/error.h"
#include "base/timeutil.h"
#include "model/predictor.h"
#include "model/tokenizer.h"

/* ---------------------------------------------------------------- lifetime */

/* Exact windows past max_context run every token again at each step; a record of each row's
 * first stage (embedding, first block's Q/K/V) saves those GEMMs, ~5 % of a re-run pass of
 * Kronos-small, for 4·d floats a row: charged to the KV budget with the stores. */
static kr_status stage_init(kr_seq *g, kr_error *err) {
    size_t slots = (size_t)g->window_len0 + (size_t)g->paths * (size_t)g->pred_len;
    g->stage = malloc(slots * KR_FIRST_STAGE_FLOATS(g->d) * sizeof(float));
    g->stage_ok = calloc(slots, 1);
    if (!g->stage || !g->stage_ok)
        return kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory for %zu re-run row records",
                            slots);
    g->stage_bytes = slots * (KR_FIRST_STAGE_FLOATS(g->d) * sizeof(float) + 1);
    return KR_OK;
}

static void stage_release(kr_seq *g) {
    free(g->stage);
    free(g->stage_ok);
    g->stage = NULL;
    g->stage_ok = NULL;
    g->stage_bytes = 0;
}

kr_status kr_seq_create(const kr_engine *eng, const kr_seq_input *in, kr_seq_output *out,
                        const kr_forecast_params *params, const kr_seq_options *opt, kr_seq **group,
                        kr_error *err) {
    kr_seq *g = calloc(1, sizeof *g);
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
    g->hist_len = in->hist_len;
    g->window_start0 = g->hist_len > g->max_context ? g->hist_len - g->max_context : 0;
    g->window_len0 = g->hist_len - g->window_start0;
    g->d = pc->d_model;
    g->vocab1 = 1 << pc->s1_bits;
    g->logits = malloc((size_t)g->paths * g->vocab1 * sizeof(float));
    g->ctx = malloc((size_t)g->paths * g->d * sizeof(float));
    kr_status st =
        (g->logits && g->ctx) ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory");
    if (st == KR_OK && g->opt.naive)
        st = kr_predictor_store_init(eng, &g->naive, g->paths * g->max_context, err);
    if (st == KR_OK && !g->opt.naive) {
        st = kr_predictor_store_init(eng, &g->generated, g->paths * g->pred_len, err);
        if (st == KR_OK && g->exact && g->hist_len + g->pred_len - 1 > g->max_context) {
            st = kr_predictor_store_init(eng, &g->rerun_hist, g->max_context, err);
            if (st == KR_OK) st = stage_init(g, err);
        }
    }
    if (st != KR_OK) {
        kr_seq_free(g);
        return st;
    }
    out->kv_bytes = kr_seq_kv_bytes(g);
    memset(&out->profile, 0, sizeof out->profile);
    out->profile.enabled = eng->profile != NULL;
    *group = g;
    return KR_OK;
}

size_t kr_seq_kv_peak_bytes(const kr_engine *eng, int hist_len, const kr_forecast_params *params,
                            int naive) {
    const kr_predictor_weights *w = eng->model->pred;
    const kr_tokenizer_weights *tw = eng->model->tok;
    int layers = kr_predictor_store_layers(w), d = w->cfg.d_model;
    int group = kr_predictor_store_group(eng);
    int paths = params->paths, pred_len = params->pred_len, max_context = params->max_context;
    int window = hist_len < max_context ? hist_len : max_context;
    /* As kr_seq_create and kr_seq_admit allocate them: the generated rows, the window, and in
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
    /* The decode starts once the predictor's stores are released (kr_seq_start_decode). */
    int total = hist_len + pred_len, dec_start = total > max_context ? total - max_context : 0;
    int history = hist_len - dec_start, path_rows = naive ? total - dec_start : pred_len;
    int tok_layers = kr_tokenizer_store_layers(tw), tok_d = tw->cfg.d_model;
    size_t decode = kr_kv_store_bytes_for(tok_layers, tok_d, paths * path_rows, KR_KV_F32, 0);
    if (!naive && history > 0)
        decode += kr_kv_store_bytes_for(tok_layers, tok_d, history, KR_KV_F32, 0);
    return predictor > decode ? predictor : decode;
}

/* The predictor's stores are not needed once every token is sampled. */
static void release_predictor_state(kr_seq *g) {
    kr_prefix_release(g->cached_window);
    kr_prefix_release(g->own_window);
    g->cached_window = g->own_window = NULL;
    kr_kv_store_release(&g->rerun_hist);
    kr_kv_store_release(&g->generated);
    kr_kv_store_release(&g->naive);
    stage_release(g);
}

void kr_seq_free(kr_seq *g) {
    if (!g) return;
    release_predictor_state(g);
    kr_prefix_release(g->dec_history);
    kr_kv_store_release(&g->dec_paths);
    free(g->logits);
    free(g->ctx);
    free(g);
}

int kr_seq_done(const kr_seq *g) { return g->phase == KR_SEQ_DONE; }
int kr_seq_steps(const kr_seq *g) { return g->step; }
int kr_seq_generating(const kr_seq *g) { return g->phase == KR_SEQ_GENERATE; }

size_t kr_seq_kv_bytes(const kr_seq *g) {
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

int kr_seq_window_start(const kr_seq *g, int i) {
    int cur = g->hist_len + i;
    return cur > g->max_context ? cur - g->max_context : 0;
}

int64_t kr_seq_pending_rows(const kr_seq *g) {
    int64_t rows = 0;
    switch (g->phase) {
    case KR_SEQ_ADMIT: rows = g->window_len0; break;
    case KR_SEQ_PREFILL: rows = g->window_len0 - g->prefilled; break;
    case KR_SEQ_GENERATE: {
        int i = g->step, left = g->paths - g->next_path;
        if (g->opt.naive) {
            int ws = kr_seq_window_start(g, i);
            rows = (int64_t)left * (g->hist_len + i - ws);
        } else if (i == 0) {
            rows = left; /* sampling from the prefill's logits */
        } else if (g->exact && kr_seq_window_start(g, i) > g->window_start0) {
            int history = g->step_begun ? g->hist_len - g->win_start
                                        : g->hist_len - kr_seq_window_start(g, i);
            rows = (history - (g->step_begun ? g->rerun_done : 0)) + (int64_t)left * i -
                   g->path_rows_done;
        } else {
            rows = left;
        }
        break;
    }
    case KR_SEQ_DECODE: {
        int total = g->hist_len + g->pred_len;
        int dec_start = total > g->max_context ? total - g->max_context : 0;
        int history = g->opt.naive ? 0 : g->hist_len - dec_start;
        int per_path = g->opt.naive ? total - dec_start : g->pred_len;
        if (!g->dec_started) return history + (int64_t)g->paths * per_path;
        int hist_left = g->dec_history_fresh ? history - g->dec_history_done : 0;
        rows = hist_left + (int64_t)(g->paths - g->dec_next_path) * g->dec_path_rows -
               g->dec_path_rows_done;
        break;
    }
    default: return 0;
    }
    return rows > 0 ? rows : 1;
}

/* ---------------------------------------------------------------- windows */

void kr_seq_window_refs(kr_kv_ref *refs, int *n, const kr_seq *g, int from, int to) {
    if (from < g->cached_rows) {
        int e = to < g->cached_rows ? to : g->cached_rows;
        refs[(*n)++] = (kr_kv_ref){ &g->cached_window->kv, from, e - from };
    }
    int a = from > g->cached_rows ? from : g->cached_rows;
    if (to > a) refs[(*n)++] = (kr_kv_ref){ &g->own_window->kv, a - g->cached_rows, to - a };
}

long kr_seq_stage_slot(const kr_seq *g, int path, int index) {
    if (!g->stage) return -1;
    if (index < g->hist_len)
        return index >= g->window_start0 ? (long)(index - g->window_start0) : -1;
    return (long)g->window_len0 + (long)path * g->pred_len + (index - g->hist_len);
}

void kr_seq_s2_view(const kr_seq *g, int p, kr_kv_view *v) {
    int i = g->step, hist_len = g->hist_len, pred_len = g->pred_len;
    v->n = 0;
    if (g->layout == KR_LAYOUT_NAIVE) {
        v->ref[v->n++] = (kr_kv_ref){ &g->naive, p * g->max_context, g->win_len };
    } else if (g->layout == KR_LAYOUT_RERUN) {
        v->ref[v->n++] = (kr_kv_ref){ &g->rerun_hist, 0, hist_len - g->win_start };
        if (i > 0) v->ref[v->n++] = (kr_kv_ref){ &g->generated, p * pred_len, i };
    } else {
        int pre_from = g->win_start > g->window_start0 ? g->win_start - g->window_start0 : 0;
        int gen_from = g->win_start > hist_len ? g->win_start - hist_len : 0;
        kr_seq_window_refs(v->ref, &v->n, g, pre_from, g->window_len0);
        if (i > gen_from)
            v->ref[v->n++] = (kr_kv_ref){ &g->generated, p * pred_len + gen_from, i - gen_from };
    }
}

/* ---------------------------------------------------------------- phases */

/* Encodes a new group's history and takes what it can of its window from the prefix cache. */
kr_status kr_seq_admit(const kr_engine *eng, kr_seq *g, const kr_prefix_hooks *hooks,
                       kr_error *err) {
    KR_ASSERT(g->phase == KR_SEQ_ADMIT);
    int hist_len = g->hist_len, window_len = g->window_len0, window_start = g->window_start0;
    int hit = !g->opt.naive && hooks && hooks->encode_lookup &&
              hooks->encode_lookup(hooks->user, g->in->x_norm, hist_len, g->out->hist_s1,
                                   g->out->hist_s2);
    if (!hit) {
        kr_prof scratch;
        kr_exec tex = kr_engine_tokenizer_exec(eng, &scratch);
        double t0 = kr_prof_begin(eng->ex.prof);
        kr_status st = kr_tokenizer_encode(eng->model->tok, &tex, g->in->x_norm, hist_len,
                                           g->out->hist_s1, g->out->hist_s2, NULL, err);
        if (st != KR_OK) return st;
        kr_engine_book_tokenizer(eng, KR_PROF_PART_TOK_ENCODE, t0, &scratch);
        if (!g->opt.naive && hooks && hooks->encode_publish)
            hooks->encode_publish(hooks->user, g->in->x_norm, hist_len, g->out->hist_s1,
                                  g->out->hist_s2);
    }
    g->layout = KR_LAYOUT_CACHED;
    g->win_start = window_start;
    g->win_len = window_len;
    if (g->opt.naive) {
        g->phase = KR_SEQ_GENERATE;
        return KR_OK;
    }
    if (hooks && hooks->lookup) {
        int rows = 0;
        kr_prefix *p = hooks->lookup(hooks->user, g->out->hist_s1 + window_start,
                                     g->out->hist_s2 + window_start,
                                     g->in->stamps + (size_t)window_start * 5, window_len, &rows);
        if (p && rows > 0 && rows == window_len && rows <= p->n) {
            g->cached_window = p;
            g->cached_rows = rows;
            g->out->cached_tokens += rows;
        } else if (p && rows > 0 && rows < window_len && rows <= p->n) {
            /* The cached rows' blocks join a store of the whole window by reference: the
             * group pins only those blocks, not the whole cached window, and its window is
             * then self-contained, so it can be offered to the cache in turn. */
            kr_status st = KR_OK;
            if (!(g->own_window = kr_prefix_new(eng, window_len, err)))
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
    if (g->cached_rows == window_len) { /* the whole window is cached, with its last row's logits */
        for (int p = 0; p < g->paths; p++) {
            memcpy(g->ctx + (size_t)p * g->d, g->cached_window->ctx, g->d * sizeof(float));
            memcpy(g->logits + (size_t)p * g->vocab1, g->cached_window->logits,
                   g->vocab1 * sizeof(float));
        }
        g->phase = KR_SEQ_GENERATE;
    } else {
        if (!g->own_window &&
            !(g->own_window = kr_prefix_new(eng, window_len - g->cached_rows, err)))
            return err ? err->status : KR_ERR_NOMEM;
        g->out->kv_bytes = kr_seq_kv_bytes(g);
        g->phase = KR_SEQ_PREFILL;
    }
    return KR_OK;
}

/* ---------------------------------------------------------------- generation steps */

/* Fixes the window of generation step i (>= 1, or 0 in naive mode) and counts its work. */
void kr_seq_begin_step(kr_seq *g, int i) {
    KR_ASSERT(g->phase == KR_SEQ_GENERATE && !g->step_begun && i == g->step && i < g->pred_len);
    int hist_len = g->hist_len, cur = hist_len + i, ws = kr_seq_window_start(g, i);
    if (g->opt.naive) {
        g->layout = KR_LAYOUT_NAIVE;
        g->out->prefill_tokens += (int64_t)g->paths * (cur - ws);
    } else if (g->exact && ws > g->window_start0) {
        g->layout = KR_LAYOUT_RERUN;
        g->out->window_recomputes++;
        g->out->prefill_tokens += (hist_len - ws) + (int64_t)g->paths * i;
    } else {
        g->layout = KR_LAYOUT_CACHED;
        g->out->decode_tokens += g->paths;
    }
    g->win_start = ws;
    g->win_len = cur - ws;
    g->step_begun = 1;
    g->rerun_done = 0;
    g->next_path = 0;
    g->path_rows_done = 0;
}

int kr_seq_prefill_done(kr_seq *g, const kr_prefix_hooks *hooks) {
    if (g->phase != KR_SEQ_PREFILL || g->prefilled != g->window_len0) return 0;
    g->phase = KR_SEQ_GENERATE;
    /* Only a window prefilled entirely here is offered: it is then self-contained. */
    if (hooks && hooks->publish && g->cached_rows == 0)
        hooks->publish(hooks->user, g->own_window, g->out->hist_s1 + g->window_start0,
                       g->out->hist_s2 + g->window_start0,
                       g->in->stamps + (size_t)g->window_start0 * 5);
    return 1;
}

void kr_seq_step_done(kr_seq *g) {
    /* The generation step is complete once its last path is sampled. */
    if (g->phase != KR_SEQ_GENERATE || g->next_path < g->paths) return;
    g->step++;
    g->step_begun = 0;
    g->next_path = 0;
    g->path_rows_done = 0;
    if (g->step == g->pred_len) {
        g->phase = KR_SEQ_DECODE;
        release_predictor_state(g);
    }
}

void kr_seq_decode_done(kr_seq *g, const kr_prefix_hooks *hooks) {
    if (g->phase != KR_SEQ_DECODE || g->dec_next_path < g->paths) return;
    if (g->dec_history_fresh && hooks && hooks->dec_publish)
        hooks->dec_publish(hooks->user, g->dec_history, g->out->hist_s1 + g->dec_start,
                           g->out->hist_s2 + g->dec_start);
    kr_prefix_release(g->dec_history);
    g->dec_history = NULL;
    kr_kv_store_release(&g->dec_paths);
    g->phase = KR_SEQ_DONE;
}

/* ---------------------------------------------------------------- decode */

/* Sets up the decode of the final windows [dec_start, hist_len + pred_len): the history part's
 * decoder K/V once (or from the prefix cache: positions start at 0 either way, so a repeated
 * window's rows are the same numbers), each path's rows on top. */
kr_status kr_seq_start_decode(const kr_engine *eng, kr_seq *g, const kr_prefix_hooks *hooks,
                              kr_error *err) {
    KR_ASSERT(g->phase == KR_SEQ_DECODE && !g->dec_started);
    const kr_tokenizer_weights *tw = eng->model->tok;
    int total = g->hist_len + g->pred_len;
    g->dec_start = total > g->max_context ? total - g->max_context : 0;
    int history = g->hist_len - g->dec_start;
    g->dec_path_rows = g->opt.naive ? total - g->dec_start : g->pred_len;
    kr_status st = kr_kv_store_init(&g->dec_paths, kr_tokenizer_store_layers(tw), tw->cfg.d_model,
                                    g->paths * g->dec_path_rows, err);
    if (st != KR_OK) return st;
    if (!g->opt.naive && history > 0) {
        if (hooks && hooks->dec_lookup && hooks->dec_publish)
            g->dec_history = hooks->dec_lookup(hooks->user, g->out->hist_s1 + g->dec_start,
                                               g->out->hist_s2 + g->dec_start, history);
        if (!g->dec_history) {
            if (!(g->dec_history = kr_prefix_new_decoder(tw, history, err)))
                return err ? err->status : KR_ERR_NOMEM;
            g->dec_history_fresh = 1;
        }
    }
    g->dec_started = 1;
    return KR_OK;
}
