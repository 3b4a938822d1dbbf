/* train/attention — see attention.h. */
#include "train/attention.h"

#include <math.h>

#include "kernels/train_kernels.h"
#include "train/linalg.h"

size_t tr_attn_scratch_floats(int T, int head_dim) {
    return (kr_attn_head_scratch_floats(T, head_dim) + 15) / 16 * 16;
}

/* The dropout of one (sequence, head): its query i is row row0 + i of the stream. */
typedef struct head_drop {
    const tr_dropout *d;
    uint64_t row0;
    uint32_t threshold;
    float scale;
} head_drop;

static void drop_probs(void *ctx, int query, int key0, int n, float *p, int stride) {
    const head_drop *h = ctx;
    const uint64_t key = tr_dropout_row_key(h->d, h->row0 + (uint64_t)query);
    for (int t = 0; t < n; t++) {
        float *x = p + (size_t)t * (size_t)stride;
        *x = h->d->p < 1.0f && tr_dropout_keep(key, h->threshold, (uint64_t)(key0 + t))
                 ? *x * h->scale
                 : 0.0f;
    }
}

typedef struct attn_job {
    const tr_attn_shape *s;
    const float *q, *k, *v, *out, *dout;
    float *o, *dq, *dk, *dv;
    const tr_dropout *drop;
    float *scratch;
    size_t per_thread;
    int backward;
} attn_job;

static void head_task(const attn_job *j, int task, float *scr) {
    const tr_attn_shape *s = j->s;
    const int seq = task / s->n_heads, head = task % s->n_heads;
    const size_t base =
        (size_t)seq * (size_t)s->T * (size_t)s->ld + (size_t)head * (size_t)s->head_dim;
    head_drop hd = { j->drop, (uint64_t)task * (uint64_t)s->T, 0, 1.0f };
    kr_attn_head h = { .T = s->T,
                       .head_dim = s->head_dim,
                       .ld = s->ld,
                       .causal = s->causal,
                       .scale = 1.0f / sqrtf((float)s->head_dim) };
    if (j->drop && j->drop->p > 0.0f) {
        hd.threshold = tr_dropout_threshold(j->drop->p);
        hd.scale = 1.0f / (1.0f - j->drop->p);
        h.drop = drop_probs;
        h.drop_ctx = &hd;
    }
    if (!j->backward)
        kr_attn_head_fwd(&h, j->q + base, j->k + base, j->v + base, j->o + base, scr);
    else
        kr_attn_head_bwd(&h, j->q + base, j->k + base, j->v + base, j->out + base, j->dout + base,
                         j->dq + base, j->dk + base, j->dv + base, scr);
}

static void attn_region(void *p, int ith, int nth) {
    const attn_job *j = p;
    float *scr = j->scratch + (size_t)ith * j->per_thread;
    int tasks = j->s->n_seq * j->s->n_heads;
    for (int t = ith; t < tasks; t += nth) head_task(j, t, scr);
}

void tr_attention_fwd(kr_pool *pool, const tr_attn_shape *s, const float *q, const float *k,
                      const float *v, float *out, const tr_dropout *drop, float *scratch) {
    attn_job j = { .s = s,
                   .q = q,
                   .k = k,
                   .v = v,
                   .o = out,
                   .drop = drop,
                   .scratch = scratch,
                   .per_thread = tr_attn_scratch_floats(s->T, s->head_dim) };
    kr_pool_run_part(pool, TR_PART_ATTN_FWD, attn_region, &j);
}

void tr_attention_bwd(kr_pool *pool, const tr_attn_shape *s, const float *q, const float *k,
                      const float *v, const float *out, const float *dout, float *dq, float *dk,
                      float *dv, const tr_dropout *drop, float *scratch) {
    attn_job j = { .s = s,
                   .q = q,
                   .k = k,
                   .v = v,
                   .out = out,
                   .dout = dout,
                   .dq = dq,
                   .dk = dk,
                   .dv = dv,
                   .drop = drop,
                   .scratch = scratch,
                   .per_thread = tr_attn_scratch_floats(s->T, s->head_dim),
                   .backward = 1 };
    kr_pool_run_part(pool, TR_PART_ATTN_BWD, attn_region, &j);
}
