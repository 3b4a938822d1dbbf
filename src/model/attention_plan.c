/* model/attention_plan — see attention_plan.h. */
#include "model/attention_plan.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

/* Rows per kr_attend_multi_f32 call: bounds scratch and keeps work items balanced. */
#define PLAN_MAX_GROUP 32

typedef struct plan {
    const kr_attn_keys *keys;
    int *order;          /* rows sorted so that rows with the same first ref are adjacent */
    int *group_start;    /* [n_groups + 1] into order */
    int n_groups;
    int layer, n_heads, head_dim, d, max_keys;
    float scale;
    const float *q;
    float *out;
    float *scratch;      /* [nth][PLAN_MAX_GROUP × max_keys] */
} plan;

static int same_ref(const kr_kv_ref *a, const kr_kv_ref *b) {
    return a->store == b->store && a->start == b->start && a->n == b->n;
}

static int cmp_rows(const void *pa, const void *pb, void *ctx) {
    const kr_attn_keys *keys = ctx;
    int a = *(const int *)pa, b = *(const int *)pb;
    const kr_kv_ref *x = &keys[a].ref[0], *y = &keys[b].ref[0];
    uintptr_t sx = (uintptr_t)x->store, sy = (uintptr_t)y->store;
    if (sx != sy) return sx < sy ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return (a > b) - (a < b);
}

static int to_spans(const kr_kv_ref *refs, int n, int layer, int h, int head_dim, kr_kv_span *sp) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (refs[i].n <= 0) continue;
        sp[m].k = kr_kv_k(refs[i].store, layer, refs[i].start) + h * head_dim;
        sp[m].v = kr_kv_v(refs[i].store, layer, refs[i].start) + h * head_dim;
        sp[m].n = refs[i].n;
        sp[m].stride = refs[i].store->d;
        m++;
    }
    return m;
}

static void worker(void *ctx, int ith, int nth) {
    const plan *p = ctx;
    int items = p->n_groups * p->n_heads;
    int per = (items + nth - 1) / nth;
    int begin = ith * per, end = begin + per < items ? begin + per : items;
    float *scratch = p->scratch + (size_t)ith * PLAN_MAX_GROUP * (size_t)p->max_keys;
    kr_kv_span own_sp[PLAN_MAX_GROUP][KR_MAX_PAST_REFS + 1];
    const kr_kv_span *own[PLAN_MAX_GROUP];
    int n_own[PLAN_MAX_GROUP];
    const float *qs[PLAN_MAX_GROUP];
    float *outs[PLAN_MAX_GROUP];
    for (int it = begin; it < end; it++) {
        int g = it / p->n_heads, h = it % p->n_heads;
        int a = p->group_start[g], nq = p->group_start[g + 1] - a;
        const kr_attn_keys *k0 = &p->keys[p->order[a]];
        kr_kv_span shared[1];
        int n_shared = 0;
        if (nq > 1) n_shared = to_spans(k0->ref, 1, p->layer, h, p->head_dim, shared);
        for (int i = 0; i < nq; i++) {
            int r = p->order[a + i];
            const kr_attn_keys *kk = &p->keys[r];
            int skip = nq > 1 ? 1 : 0; /* a lone row keeps all its refs as its own keys */
            n_own[i] = to_spans(kk->ref + skip, kk->n - skip, p->layer, h, p->head_dim, own_sp[i]);
            own[i] = own_sp[i];
            qs[i] = p->q + (size_t)r * p->d + h * p->head_dim;
            outs[i] = p->out + (size_t)r * p->d + h * p->head_dim;
        }
        if (nq == 1)
            kr_attend_f32(qs[0], p->head_dim, p->scale, own_sp[0], n_own[0], scratch, outs[0]);
        else
            kr_attend_multi_f32(nq, qs, p->head_dim, p->scale, shared, n_shared, own, n_own, scratch,
                                p->max_keys, outs);
    }
}

kr_status kr_attention_rows(kr_pool *pool, int n_rows, const kr_attn_keys *keys, int layer,
                            int n_heads, int head_dim, int d, const float *q, float *out,
                            kr_error *err) {
    if (n_rows <= 0) return KR_OK;
    plan p = {0};
    p.keys = keys;
    p.layer = layer;
    p.n_heads = n_heads;
    p.head_dim = head_dim;
    p.d = d;
    p.scale = 1.0f / sqrtf((float)head_dim);
    p.q = q;
    p.out = out;
    for (int r = 0; r < n_rows; r++) {
        int nk = 0;
        for (int i = 0; i < keys[r].n; i++) nk += keys[r].ref[i].n;
        if (nk < 1) return kr_error_set(err, KR_ERR_INTERNAL, "attention: row %d has no keys", r);
        if (nk > p.max_keys) p.max_keys = nk;
    }
    int nth = kr_pool_size(pool);
    p.order = malloc((size_t)n_rows * sizeof(int));
    p.group_start = malloc(((size_t)n_rows + 1) * sizeof(int));
    p.scratch = malloc((size_t)nth * PLAN_MAX_GROUP * (size_t)p.max_keys * sizeof(float));
    if (!p.order || !p.group_start || !p.scratch) {
        free(p.order);
        free(p.group_start);
        free(p.scratch);
        return kr_error_set(err, KR_ERR_NOMEM, "attention: out of memory for %d rows", n_rows);
    }
    for (int r = 0; r < n_rows; r++) p.order[r] = r;
    /* Rows whose keys start with the same rows of the same store form a group. A row with a
     * single ref (a prefill row with no past) shares nothing and stays alone. */
    qsort_r(p.order, (size_t)n_rows, sizeof(int), cmp_rows, (void *)keys);
    for (int i = 0; i < n_rows;) {
        int j = i + 1;
        const kr_attn_keys *ki = &keys[p.order[i]];
        if (ki->n >= 2)
            while (j < n_rows && j - i < PLAN_MAX_GROUP && keys[p.order[j]].n >= 2 &&
                   same_ref(&keys[p.order[j]].ref[0], &ki->ref[0]))
                j++;
        p.group_start[p.n_groups++] = i;
        i = j;
    }
    p.group_start[p.n_groups] = n_rows;
    kr_pool_run(pool, worker, &p);
    free(p.order);
    free(p.group_start);
    free(p.scratch);
    return KR_OK;
}
