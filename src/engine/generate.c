/* engine/generate — the step (see generate.h): plan, run the predictor, sample, decode. */
#include "engine/generate.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "base/timeutil.h"
#include "engine/batch.h"
#include "model/predictor.h"
#include "model/sampling.h"
#include "model/tokenizer.h"

/* ---------------------------------------------------------------- the predictor */

/* Runs the predictor over the batch, then gives each chunk that ends a window (a prefill or
 * a path's window) its last row's context and s1 logits. */
static kr_status run_predictor(const kr_engine *eng, kr_batch *b, kr_error *err) {
    const kr_predictor_weights *pw = eng->model->pred;
    const kr_exec *ex = &eng->ex;
    int d = pw->cfg.d_model, V1 = 1 << pw->cfg.s1_bits;
    int n_last = 0, slice_rows = b->rows < KR_FORWARD_MAX_ROWS ? b->rows : KR_FORWARD_MAX_ROWS;
    for (int c = 0; c < b->n_chunks; c++) {
        if (b->chunks[c].n > slice_rows) slice_rows = b->chunks[c].n;
        if (b->chunk_kind[c] != KR_CHUNK_CONTEXT) n_last++;
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
        st = kr_predictor_forward(pw, ex, b->chunks + c0, c1 - c0, b->s1 + row0, b->s2 + row0,
                                  b->stamps + (size_t)row0 * 5,
                                  b->has_first_stage_records ? &fs : NULL, context, err);
        if (st != KR_OK) goto done;
        for (int c = c0; c < c1; c++) {
            if (b->chunk_kind[c] == KR_CHUNK_CONTEXT) continue;
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
        if (kind == KR_CHUNK_CONTEXT) continue;
        kr_seq *g = b->chunk_group[c];
        const float *lg = logits + (size_t)n * V1, *cx = last + (size_t)n * d;
        if (kind == KR_CHUNK_PREFILL_LAST) {
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

/* ---------------------------------------------------------------- sampling */

/* One sampling pass over the ready paths (s1 or s2): draw r reads logits[r] with its group's
 * parameters and uniform u[r]. Paths are independent and each draw is a pure function of its
 * inputs, so the threads split them (round-robin, each with its own scratch) without changing
 * a token. */
typedef struct draw_job {
    const kr_ready *ready;
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
static kr_status sample_paths(const kr_engine *eng, const kr_ready *ready, kr_error *err) {
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
        const kr_seq *g = ready->group[r];
        int p = ready->path[r];
        /* Stream = path, counter = 2·step (+1 for s2): a path's draws are a function of
         * (seed, path, step) only, whatever else is batched with it. */
        u[r] = kr_rng_uniform(g->in->seed, g->first_path + (uint64_t)p, 2ull * g->step);
        lg[r] = g->logits + (size_t)p * V1;
        memcpy(ctx + (size_t)r * d, g->ctx + (size_t)p * d, d * sizeof(float));
        kr_seq_s2_view(g, p, &views[r]);
    }
    draw_job j1 = { .ready = ready, .logits = lg, .u = u, .tok = s1 };
    if ((st = draw_all(ex, &j1, V1, err)) != KR_OK) goto done;
    /* Per draw: scale, sort-free top-k/top-p, softmax and the search over the vocabulary. */
    kr_prof_end(ex->prof, KR_PROF_PART_SAMPLING, t0, 0.0, 4.0 * n * V1);
    if ((st = kr_predictor_s2_logits(pw, ex, n, s1, ctx, d, views, logits2, err)) != KR_OK)
        goto done;
    t0 = kr_prof_begin(ex->prof);
    for (int r = 0; r < n; r++) {
        const kr_seq *g = ready->group[r];
        u[r] = kr_rng_uniform(g->in->seed, g->first_path + (uint64_t)ready->path[r],
                              2ull * g->step + 1);
        lg[r] = logits2 + (size_t)r * V2;
    }
    draw_job j2 = { .ready = ready, .logits = lg, .u = u, .tok = s2 };
    if ((st = draw_all(ex, &j2, V2, err)) != KR_OK) goto done;
    /* In path order on this thread: observers see the draws as before. */
    for (int r = 0; r < n; r++) {
        kr_seq *g = ready->group[r];
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

/* ---------------------------------------------------------------- the decoder */

/* Runs the tokenizer decoder over the batch and stores each path's decoded generated rows. */
static kr_status run_decoder(const kr_engine *eng, kr_batch *b, kr_error *err) {
    kr_prof scratch;
    kr_exec tex = kr_engine_tokenizer_exec(eng, &scratch);
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
        if (b->chunk_kind[c] != KR_CHUNK_DEC_PATH) continue;
        kr_seq *g = b->chunk_group[c];
        int p = b->chunk_path[c], first = b->chunk_first[c], n = b->chunks[c].n;
        int skip = first < 0 ? -first : 0; /* history rows of a naive window */
        if (n > skip)
            memcpy(g->out->pred_norm + ((size_t)p * g->pred_len + first + skip) * 6,
                   dec + (size_t)(row + skip) * 6, (size_t)(n - skip) * 6 * sizeof(float));
    }
    kr_arena_release(ex->arena, mark);
    kr_engine_book_tokenizer(eng, KR_PROF_PART_TOK_DECODE, t0, &scratch);
    return st;
}

/* ---------------------------------------------------------------- the step */

kr_status kr_generate_step(const kr_engine *eng, kr_seq **groups, const int64_t *budget,
                           int n_groups, const kr_prefix_hooks *hooks, kr_error *err) {
    kr_arena *arena = eng->ex.arena;
    size_t mark = kr_arena_mark(arena);
    kr_engine_profile *prof = eng->profile, prof0;
    double t_step = 0;
    if (prof) {
        kr_pool_counters(eng->ex.pool, &prof->pool_regions, &prof->seconds_pool_wait);
        prof0 = *prof;
        t_step = kr_prof_clock();
    }
    kr_batch pb = { .arena = arena }, db = { .arena = arena };
    kr_ready ready = { 0 };
    /* What each group did this step, for its time accounts. */
    unsigned char *did = KR_ARENA_NEW(arena, unsigned char, n_groups > 0 ? n_groups : 1);
    int64_t *left = KR_ARENA_NEW(arena, int64_t, n_groups > 0 ? n_groups : 1); /* of budget */
    enum { DID_PREFILL = 1, DID_GENERATE = 2, DID_DECODE = 4 };
    kr_status st = did && left ? KR_OK : kr_error_set(err, KR_ERR_NOMEM, "generate: out of memory");
    if (st == KR_OK) memset(did, 0, (size_t)(n_groups > 0 ? n_groups : 1));
    for (int k = 0; k < n_groups && st == KR_OK; k++) {
        kr_seq *g = groups[k];
        if (budget[k] <= 0 || g->phase != KR_SEQ_ADMIT) continue;
        double a = kr_now_seconds();
        st = kr_seq_admit(eng, g, hooks, err);
        g->out->seconds_tokenizer += kr_now_seconds() - a;
    }
    double t_admitted = kr_now_seconds();
    /* One predictor pass for prefill pieces and generation windows, one decoder pass. */
    for (int k = 0; k < n_groups && st == KR_OK; k++) {
        kr_seq *g = groups[k];
        if (budget[k] <= 0) continue;
        kr_allowance a = { budget[k], 0 };
        if (g->phase == KR_SEQ_PREFILL) {
            st = kr_batch_plan_prefill(&pb, g, &a, err);
            did[k] |= DID_PREFILL;
        } else if (g->phase == KR_SEQ_GENERATE) {
            st = kr_batch_plan_generate(&pb, &ready, arena, g, &a, err);
            did[k] |= g->step == 0 ? DID_PREFILL : DID_GENERATE;
        } else if (g->phase == KR_SEQ_DECODE) {
            st = kr_batch_plan_decode(eng, &db, g, hooks, &a, err);
            did[k] |= DID_DECODE;
        }
        left[k] = a.left;
    }
    if (st == KR_OK && pb.n_chunks > 0) {
        int rerun = 0;
        for (int k = 0; k < n_groups; k++)
            rerun |= budget[k] > 0 && groups[k]->phase == KR_SEQ_GENERATE &&
                     groups[k]->step_begun && groups[k]->layout == KR_LAYOUT_RERUN;
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
        kr_seq *g = groups[k];
        if (!kr_seq_prefill_done(g, hooks)) continue;
        kr_allowance a = { left[k], 0 }; /* what its prefill left (at least one path) */
        st = kr_batch_plan_generate(&pb, &ready, arena, g, &a, err);
    }
    if (st == KR_OK && ready.n > 0) st = sample_paths(eng, &ready, err);
    double t_sampled = kr_now_seconds();
    for (int k = 0; k < n_groups && st == KR_OK; k++) kr_seq_step_done(groups[k]);
    if (st == KR_OK && db.n_chunks > 0) st = run_decoder(eng, &db, err);
    double t_decoded = kr_now_seconds();
    for (int k = 0; k < n_groups && st == KR_OK; k++)
        if (did[k] & DID_DECODE) kr_seq_decode_done(groups[k], hooks);
    for (int k = 0; k < n_groups && st == KR_OK; k++) {
        kr_seq_output *out = groups[k]->out;
        if (did[k] & DID_PREFILL) out->seconds_prefill += t_sampled - t_admitted;
        if (did[k] & DID_GENERATE) out->seconds_decode += t_sampled - t_admitted;
        if (did[k] & DID_DECODE) out->seconds_tokenizer += t_decoded - t_sampled;
    }
    if (prof && st == KR_OK) {
        prof->seconds_steps += kr_prof_clock() - t_step;
        kr_pool_counters(eng->ex.pool, &prof->pool_regions, &prof->seconds_pool_wait);
        for (int k = 0; k < n_groups; k++)
            if (budget[k] > 0) kr_engine_profile_add_delta(&groups[k]->out->profile, &prof0, prof);
    }
    kr_arena_release(arena, mark);
    return st;
}
