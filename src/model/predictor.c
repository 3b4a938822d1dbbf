/* model/predictor — see predictor.h. */
#include "model/predictor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/attention_plan.h"

#define KR_RMS_EPS 1e-5f

static int clamp_index(float v, int rows) {
    /* `.long()` truncates toward zero; out-of-table values are clamped rather than read
     * out of bounds (the reference would raise; inputs are validated upstream). */
    long i = (long)v;
    if (i < 0) i = 0;
    if (i >= rows) i = rows - 1;
    return (int)i;
}

kr_status kr_predictor_embed(const kr_predictor_weights *w, const kr_exec *ex, int n,
                             const int32_t *s1, const int32_t *s2, const float *stamps, float *x,
                             float *tok_emb_dbg, float *time_emb_dbg, kr_error *err) {
    int d = w->cfg.d_model;
    if (n <= 0) return KR_OK;
    float scale = (float)sqrt((double)d);
    size_t mark = kr_arena_mark(ex->arena);
    float *cat = KR_ARENA_NEW(ex->arena, float, (size_t)n * 2 * (size_t)d);
    if (!cat)
        return kr_error_set(err, KR_ERR_NOMEM, "predictor: out of memory embedding %d rows", n);
    for (int i = 0; i < n; i++) {
        const float *e1 = w->emb_s1 + (size_t)s1[i] * d;
        const float *e2 = w->emb_s2 + (size_t)s2[i] * d;
        float *row = cat + (size_t)i * 2 * d;
        for (int j = 0; j < d; j++) row[j] = e1[j] * scale;
        for (int j = 0; j < d; j++) row[d + j] = e2[j] * scale;
    }
    kr_status st = kr_linear_run(ex, &w->fusion, cat, n, 2 * d, x, d, err);
    kr_arena_release(ex->arena, mark);
    if (st != KR_OK) return st;
    if (tok_emb_dbg) memcpy(tok_emb_dbg, x, (size_t)n * d * sizeof(float));
    double t0 = kr_prof_begin(ex->prof);
    for (int i = 0; i < n; i++) {
        const float *ts = stamps + (size_t)i * 5;
        const float *mi = w->te_minute + (size_t)clamp_index(ts[0], 60) * d;
        const float *ho = w->te_hour + (size_t)clamp_index(ts[1], 24) * d;
        const float *wd = w->te_weekday + (size_t)clamp_index(ts[2], 7) * d;
        const float *dy = w->te_day + (size_t)clamp_index(ts[3], 32) * d;
        const float *mo = w->te_month + (size_t)clamp_index(ts[4], 13) * d;
        float *row = x + (size_t)i * d;
        for (int j = 0; j < d; j++) {
            float t = (((ho[j] + wd[j]) + dy[j]) + mo[j]) + mi[j];
            if (time_emb_dbg) time_emb_dbg[(size_t)i * d + j] = t;
            row[j] += t;
        }
    }
    kr_prof_end(ex->prof, KR_PROF_PART_NORM_ACT, t0, 5.0 * n * d, 28.0 * n * d);
    return KR_OK;
}

static kr_status check_ids(const kr_predictor_weights *w, int n, const int32_t *s1,
                           const int32_t *s2, kr_error *err) {
    int v1 = 1 << w->cfg.s1_bits, v2 = 1 << w->cfg.s2_bits;
    for (int i = 0; i < n; i++)
        if (s1[i] < 0 || s1[i] >= v1 || s2[i] < 0 || s2[i] >= v2)
            return kr_error_set(err, KR_ERR_INVALID_ARG,
                                "predictor: token %d (%d, %d) out of vocabulary", i, s1[i], s2[i]);
    return KR_OK;
}

/* The embedding and the first block's projections of n rows. */
static kr_status first_stage(const kr_predictor_weights *w, const kr_exec *ex, int n,
                             const int32_t *s1, const int32_t *s2, const float *stamps,
                             const kr_qkv_rows *out, float *x, kr_error *err) {
    kr_status st = kr_predictor_embed(w, ex, n, s1, s2, stamps, x, NULL, NULL, err);
    if (st != KR_OK) return st;
    return kr_transformer_qkv(&w->blocks[0], w->cfg.d_model, ex, x, n, out->q, out->k, out->v, err);
}

/* The first stage of every row of a call, with records: the rows without a kept record are
 * computed in a compact batch and scattered back, then the kept records copied in and the
 * computed rows recorded. */
static kr_status first_stage_with_records(const kr_predictor_weights *w, const kr_exec *ex,
                                          int total, const int32_t *s1, const int32_t *s2,
                                          const float *stamps, const kr_first_stage *fs,
                                          const kr_qkv_rows *out, float *x, kr_error *err) {
    size_t d = (size_t)w->cfg.d_model, row_bytes = d * sizeof(float);
    float *const dst[4] = { x, out->q, out->k, out->v };
    int m = 0;
    for (int r = 0; r < total; r++) m += fs->keep[r] == NULL;
    kr_status st = KR_OK;
    if (m == total) {
        st = first_stage(w, ex, total, s1, s2, stamps, out, x, err);
    } else if (m > 0) {
        size_t mark = kr_arena_mark(ex->arena);
        int *idx = KR_ARENA_NEW(ex->arena, int, m);
        int32_t *cs = KR_ARENA_NEW(ex->arena, int32_t, 2 * (size_t)m);
        float *cstamps = KR_ARENA_NEW(ex->arena, float, 5 * (size_t)m);
        float *c = KR_ARENA_NEW(ex->arena, float, 4 * (size_t)m * d);
        if (!idx || !cs || !cstamps || !c) {
            kr_arena_release(ex->arena, mark);
            return kr_error_set(err, KR_ERR_NOMEM, "predictor: out of memory for %d rows", m);
        }
        for (int r = 0, j = 0; r < total; r++) {
            if (fs->keep[r]) continue;
            idx[j] = r;
            cs[j] = s1[r];
            cs[m + j] = s2[r];
            memcpy(cstamps + (size_t)j * 5, stamps + (size_t)r * 5, 5 * sizeof(float));
            j++;
        }
        float *part[4] = { c, c + (size_t)m * d, c + 2 * (size_t)m * d, c + 3 * (size_t)m * d };
        kr_qkv_rows cq = { part[1], part[2], part[3] };
        st = first_stage(w, ex, m, cs, cs + m, cstamps, &cq, part[0], err);
        for (int j = 0; st == KR_OK && j < m; j++)
            for (int p = 0; p < 4; p++)
                memcpy(dst[p] + (size_t)idx[j] * d, part[p] + (size_t)j * d, row_bytes);
        kr_arena_release(ex->arena, mark);
    }
    if (st != KR_OK) return st;
    /* Records first, then kept rows: a record saved and read in one call is complete. */
    for (int r = 0; r < total; r++)
        if (!fs->keep[r] && fs->save[r])
            for (int p = 0; p < 4; p++)
                memcpy(fs->save[r] + p * d, dst[p] + (size_t)r * d, row_bytes);
    for (int r = 0; r < total; r++)
        if (fs->keep[r])
            for (int p = 0; p < 4; p++)
                memcpy(dst[p] + (size_t)r * d, fs->keep[r] + p * d, row_bytes);
    return KR_OK;
}

kr_status kr_predictor_forward(const kr_predictor_weights *w, const kr_exec *ex,
                               const kr_chunk *chunks, int n_chunks, const int32_t *s1,
                               const int32_t *s2, const float *stamps,
                               const kr_first_stage *records, float *context, kr_error *err) {
    int total = 0, d = w->cfg.d_model, n_layers = w->cfg.n_layers;
    kr_status st = kr_chunks_check(chunks, n_chunks, n_layers + 1, &total, err);
    if (st != KR_OK) return st;
    if ((st = check_ids(w, total, s1, s2, err)) != KR_OK) return st;
    const kr_first_stage *fs = n_layers > 0 ? records : NULL;
    size_t mark = kr_arena_mark(ex->arena), td = (size_t)total * d;
    float *x = KR_ARENA_NEW(ex->arena, float, td);
    float *kt = KR_ARENA_NEW(ex->arena, float, td);
    float *qkv = fs ? KR_ARENA_NEW(ex->arena, float, 3 * td) : NULL;
    if (!x || !kt || (fs && !qkv)) {
        kr_arena_release(ex->arena, mark);
        return kr_error_set(err, KR_ERR_NOMEM, "predictor: out of memory for %d rows", total);
    }
    if (fs) {
        kr_qkv_rows first = { qkv, qkv + td, qkv + 2 * td };
        st = first_stage_with_records(w, ex, total, s1, s2, stamps, fs, &first, x, err);
        if (st == KR_OK)
            st = kr_transformer_run(w->blocks, n_layers, 0, d, w->cfg.ff_dim, ex, x, chunks,
                                    n_chunks, &first, err);
    } else {
        st = kr_predictor_embed(w, ex, total, s1, s2, stamps, x, NULL, NULL, err);
        if (st == KR_OK)
            st = kr_transformer_run(w->blocks, n_layers, 0, d, w->cfg.ff_dim, ex, x, chunks,
                                    n_chunks, NULL, err);
    }
    if (st == KR_OK) {
        double t0 = kr_prof_begin(ex->prof);
        kr_rmsnorm_f32(total, d, x, d, w->norm, KR_RMS_EPS, context, d);
        kr_prof_end(ex->prof, KR_PROF_PART_NORM_ACT, t0, 4.0 * total * d, 8.0 * total * d);
        /* Cross-attention K/V of every new context row, cached in layer n_layers of the store. */
        const kr_linear *kv[2] = { &w->dep.k, &w->dep.v };
        float *kv_out[2] = { x, kt };
        const int ld2[2] = { d, d };
        st = kr_linear_run_multi(ex, 2, kv, context, total, d, kv_out, ld2, err);
        for (int c = 0, row = 0; st == KR_OK && c < n_chunks; c++) {
            const kr_chunk *ch = &chunks[c];
            kr_kv_store_write(ch->out, n_layers, ch->out_start, x + (size_t)row * d,
                              kt + (size_t)row * d, ch->n);
            row += ch->n;
        }
    }
    kr_arena_release(ex->arena, mark);
    return st;
}

kr_status kr_predictor_s1_logits(const kr_predictor_weights *w, const kr_exec *ex,
                                 const float *context, int m, int ld, float *logits,
                                 kr_error *err) {
    return kr_linear_run(ex, &w->head_s1, context, m, ld, logits, w->head_s1.n_out, err);
}

kr_status kr_predictor_s2_logits(const kr_predictor_weights *w, const kr_exec *ex, int m,
                                 const int32_t *s1, const float *ctx_last, int ld,
                                 const kr_kv_view *views, float *logits, kr_error *err) {
    int d = w->cfg.d_model, n_layers = w->cfg.n_layers, v1 = 1 << w->cfg.s1_bits;
    if (m <= 0) return KR_OK;
    for (int r = 0; r < m; r++) {
        if (s1[r] < 0 || s1[r] >= v1)
            return kr_error_set(err, KR_ERR_INVALID_ARG, "predictor: s1 id %d out of vocabulary",
                                s1[r]);
        int keys = 0;
        for (int i = 0; i < views[r].n; i++) {
            const kr_kv_ref *ref = &views[r].ref[i];
            if (!ref->store || ref->start < 0 || ref->start + ref->n > ref->store->cap ||
                ref->store->n_layers < n_layers + 1)
                return kr_error_set(err, KR_ERR_INTERNAL,
                                    "predictor: s2 view %d ref %d out of range", r, i);
            keys += ref->n;
        }
        if (keys < 1)
            return kr_error_set(err, KR_ERR_INTERNAL, "predictor: s2 view %d is empty", r);
    }
    size_t md = (size_t)m * d;
    size_t mark = kr_arena_mark(ex->arena);
    float *buf = KR_ARENA_NEW(ex->arena, float, 3 * md);
    kr_attn_keys *keys = KR_ARENA_NEW(ex->arena, kr_attn_keys, m);
    if (!buf || !keys) {
        kr_arena_release(ex->arena, mark);
        return kr_error_set(err, KR_ERR_NOMEM, "predictor: out of memory for s2");
    }
    float *sib = buf, *q = buf + md, *att = buf + 2 * md;
    for (int r = 0; r < m; r++) {
        keys[r].n = 0;
        for (int i = 0; i < views[r].n; i++)
            if (views[r].ref[i].n > 0) keys[r].ref[keys[r].n++] = views[r].ref[i];
    }
    for (int r = 0; r < m; r++)
        memcpy(sib + (size_t)r * d, w->emb_s1 + (size_t)s1[r] * d, d * sizeof(float));
    kr_status st = kr_linear_run(ex, &w->dep.q, sib, m, d, q, d, err);
    /* No mask, no rotation: one query per path over the window's cached dep K/V. */
    if (st == KR_OK)
        st = kr_attention_rows(ex, m, keys, n_layers, w->dep.n_heads, w->dep.head_dim, d, q, att,
                               err);
    if (st != KR_OK) {
        kr_arena_release(ex->arena, mark);
        return st;
    }
    st = kr_linear_run(ex, &w->dep.out, att, m, d, sib, d, err);
    if (st == KR_OK) {
        double t0 = kr_prof_begin(ex->prof);
        for (int r = 0; r < m; r++) kr_add_f32(d, ctx_last + (size_t)r * ld, sib + (size_t)r * d);
        kr_rmsnorm_f32(m, d, sib, d, w->dep_norm, KR_RMS_EPS, q, d);
        kr_prof_end(ex->prof, KR_PROF_PART_NORM_ACT, t0, 5.0 * m * d, 20.0 * m * d);
        st = kr_linear_run(ex, &w->head_s2, q, m, d, logits, w->head_s2.n_out, err);
    }
    kr_arena_release(ex->arena, mark);
    return st;
}
