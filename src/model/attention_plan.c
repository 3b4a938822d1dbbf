/*
 * model/attention_plan — see attention_plan.h.
 *
 * Keys in a bf16 or int8 store are dequantised before the kernels see them: the union of the
 * rows the call references in each such store (this layer only) is converted once into an f32
 * copy, in parallel, and the spans point there, so a context prefix shared by every path is
 * converted once per layer, not once per query row. F32 stores are read in place. The copy
 * holds at most one layer's worth of the referenced rows and is freed when the call returns.
 *
 * An F32 store's rows are evenly spaced only within a block (KR_KV_BLOCK_ROWS rows), so its
 * refs become one span per block touched; the dequantised copy is one run of rows
 * kr_kv_f32_stride apart (the store's own F32 layout), one span per ref.
 */
#include "model/attention_plan.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/sort.h"

/* Rows per kr_attend_multi_f32 call: bounds scratch and keeps work items balanced. Paths
 * over one shared context go up to the kernel's tile (each group copies the shared K/V blocks
 * it reads once, so 64 paths are one copy, not two); the rows of a causal chunk in 32s, their
 * own keys growing with the group. */
#define PLAN_MAX_GROUP 64
#define PLAN_MAX_CAUSAL_GROUP 32

/* A ref's rows of this layer: in an F32 store's blocks (store set), or contiguous in the
 * dequantised copy (k, v with `stride` floats per row). */
typedef struct kref {
    const kr_kv_store *store;
    int start, n, stride;
    const float *k, *v;
} kref;

typedef struct plan {
    const kr_attn_keys *keys;
    int *order; /* rows sorted so that rows with the same first ref are adjacent */
    int *group_start; /* [n_groups + 1] into order */
    unsigned char *causal; /* [n_groups]: causal siblings (else: rows sharing the first ref) */
    int n_groups;
    int layer, n_heads, head_dim, d, max_keys;
    float scale;
    const float *q;
    float *out;
    float *scratch; /* [nth][PLAN_MAX_GROUP × max_keys] */
    kref *base; /* [n_rows][KR_MAX_PAST_REFS + 1]: where each ref's rows are */
    int max_spans; /* spans any row's keys can make */
    kr_kv_span *spans; /* [nth][(PLAN_MAX_GROUP + 1) × max_spans] */
    atomic_int next_item; /* the next (group, head) item a thread takes */
} plan;

/* A run of rows of one non-f32 store, dequantised at k/v + off (floats). */
typedef struct segment {
    const kr_kv_store *store;
    int start, end;
    size_t off;
} segment;

typedef struct dequant_job {
    const segment *seg;
    int n_seg, total_rows, layer;
    float *k, *v;
} dequant_job;

static int same_ref(const kr_kv_ref *a, const kr_kv_ref *b) {
    return a->store == b->store && a->start == b->start && a->n == b->n;
}

/* Lexicographic over the refs (store, start, n), then the ref count: rows whose keys start
 * with the same block are adjacent, and rows that differ only in how far their last ref
 * reaches (consecutive rows of one causal chunk) are adjacent in the order of that reach. */
static int cmp_rows(const void *pa, const void *pb, void *ctx) {
    const kr_attn_keys *keys = ctx;
    int a = *(const int *)pa, b = *(const int *)pb;
    const kr_attn_keys *ka = &keys[a], *kb = &keys[b];
    int n = ka->n < kb->n ? ka->n : kb->n;
    for (int i = 0; i < n; i++) {
        const kr_kv_ref *x = &ka->ref[i], *y = &kb->ref[i];
        uintptr_t sx = (uintptr_t)x->store, sy = (uintptr_t)y->store;
        if (sx != sy) return sx < sy ? -1 : 1;
        if (x->start != y->start) return x->start < y->start ? -1 : 1;
        if (x->n != y->n) return x->n < y->n ? -1 : 1;
    }
    if (ka->n != kb->n) return ka->n < kb->n ? -1 : 1;
    return (a > b) - (a < b);
}

/* Same keys except that the last ref may reach a different number of rows. */
static int causal_siblings(const kr_attn_keys *a, const kr_attn_keys *b) {
    if (a->n != b->n || a->n < 1) return 0;
    for (int i = 0; i + 1 < a->n; i++)
        if (!same_ref(&a->ref[i], &b->ref[i])) return 0;
    const kr_kv_ref *x = &a->ref[a->n - 1], *y = &b->ref[b->n - 1];
    return x->store == y->store && x->start == y->start;
}

/* Spans of head h in `layer` over rows [from, from + n) of a ref; returns how many. */
static int ref_spans(const kref *r, int layer, int from, int n, int h, int head_dim,
                     kr_kv_span *sp) {
    if (n <= 0) return 0;
    size_t off = (size_t)h * (size_t)head_dim;
    if (!r->store) {
        size_t row = (size_t)from * (size_t)r->stride;
        sp[0] = (kr_kv_span){ r->k + row + off, r->v + row + off, n, r->stride };
        return 1;
    }
    int m = 0;
    for (int row = r->start + from, end = row + n; row < end; m++) {
        int c = KR_KV_BLOCK_ROWS - row % KR_KV_BLOCK_ROWS;
        if (c > end - row) c = end - row;
        sp[m] = (kr_kv_span){ kr_kv_k(r->store, layer, row) + off,
                              kr_kv_v(r->store, layer, row) + off, c, r->stride };
        row += c;
    }
    return m;
}

/* Most spans ref_spans can make of n rows. */
static int ref_max_spans(int n) { return n <= 0 ? 0 : n / KR_KV_BLOCK_ROWS + 2; }

static int to_spans(const kref *base, int n, int layer, int h, int head_dim, kr_kv_span *sp) {
    int m = 0;
    for (int i = 0; i < n; i++) m += ref_spans(&base[i], layer, 0, base[i].n, h, head_dim, sp + m);
    return m;
}

static int cmp_segments(const void *pa, const void *pb, void *ctx) {
    (void)ctx;
    const segment *a = pa, *b = pb;
    uintptr_t sa = (uintptr_t)a->store, sb = (uintptr_t)b->store;
    if (sa != sb) return sa < sb ? -1 : 1;
    return (a->start > b->start) - (a->start < b->start);
}

/* Rows are split evenly over threads, across segment boundaries. */
static void dequant_worker(void *ctx, int ith, int nth) {
    const dequant_job *j = ctx;
    int r0 = (int)((long long)j->total_rows * ith / nth),
        r1 = (int)((long long)j->total_rows * (ith + 1) / nth);
    for (int s = 0, first = 0; s < j->n_seg && first < r1;
         first += j->seg[s].end - j->seg[s].start, s++) {
        const segment *g = &j->seg[s];
        int n = g->end - g->start;
        int a = r0 > first ? r0 - first : 0, b = r1 - first < n ? r1 - first : n;
        if (a >= b) continue;
        /* One row at a time into rows kr_kv_f32_stride apart (see resolve_keys). */
        size_t st = (size_t)kr_kv_f32_stride(g->store->d);
        for (int r = a; r < b; r++) {
            size_t off = g->off + (size_t)r * st;
            kr_kv_store_read(g->store, j->layer, g->start + r, 1, j->k + off, j->v + off);
        }
    }
}

/* The segment of store s holding row `row` (segments are sorted and disjoint). */
static const segment *find_segment(const segment *seg, int n_seg, const kr_kv_store *s, int row) {
    int lo = 0, hi = n_seg - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        const segment *m = &seg[mid];
        if ((uintptr_t)m->store < (uintptr_t)s || (m->store == s && m->start <= row))
            lo = mid;
        else
            hi = mid - 1;
    }
    return &seg[lo];
}

/* Fills p->base: in place for f32 stores, into a dequantised copy (from the arena) for the
 * others. */
static kr_status resolve_keys(const kr_exec *ex, plan *p, int n_rows, kr_error *err) {
    const int R = KR_MAX_PAST_REFS + 1;
    int n_seg = 0;
    for (int r = 0; r < n_rows; r++)
        for (int i = 0; i < p->keys[r].n; i++)
            if (p->keys[r].ref[i].n > 0 && p->keys[r].ref[i].store->dtype != KR_KV_F32) n_seg++;
    segment *seg = NULL;
    float *k = NULL;
    size_t floats = 0; /* of K in the copy; V follows */
    if (n_seg > 0) {
        segment *sort_tmp = KR_ARENA_NEW(ex->arena, segment, n_seg);
        if (!sort_tmp || !(seg = KR_ARENA_NEW(ex->arena, segment, n_seg)))
            return kr_error_set(err, KR_ERR_NOMEM, "attention: out of memory for %d key runs",
                                n_seg);
        n_seg = 0;
        for (int r = 0; r < n_rows; r++)
            for (int i = 0; i < p->keys[r].n; i++) {
                const kr_kv_ref *ref = &p->keys[r].ref[i];
                if (ref->n > 0 && ref->store->dtype != KR_KV_F32)
                    seg[n_seg++] = (segment){ ref->store, ref->start, ref->start + ref->n, 0 };
            }
        /* Overlapping or touching runs of a store merge: a causal chunk's rows reference
         * growing prefixes of the same rows, which must not be converted once per row. */
        kr_sort(seg, (size_t)n_seg, sizeof *seg, cmp_segments, NULL, sort_tmp);
        int m = 0;
        for (int i = 1; i < n_seg; i++) {
            if (seg[i].store == seg[m].store && seg[i].start <= seg[m].end) {
                if (seg[i].end > seg[m].end) seg[m].end = seg[i].end;
            } else {
                seg[++m] = seg[i];
            }
        }
        n_seg = m + 1;
        int rows = 0;
        for (int i = 0; i < n_seg; i++) {
            seg[i].off = floats;
            floats +=
                (size_t)(seg[i].end - seg[i].start) * (size_t)kr_kv_f32_stride(seg[i].store->d);
            rows += seg[i].end - seg[i].start;
        }
        if (!(k = KR_ARENA_NEW(ex->arena, float, 2 * floats))) {
            return kr_error_set(err, KR_ERR_NOMEM,
                                "attention: out of memory dequantising %d key rows", rows);
        }
        dequant_job job = { seg, n_seg, rows, p->layer, k, k + floats };
        kr_pool_run(ex->pool, dequant_worker, &job);
    }
    for (int r = 0; r < n_rows; r++)
        for (int i = 0; i < p->keys[r].n; i++) {
            const kr_kv_ref *ref = &p->keys[r].ref[i];
            kref *b = &p->base[(size_t)r * R + i];
            *b = (kref){ NULL, ref->start, ref->n, ref->store->stride, NULL, NULL };
            if (ref->n <= 0) {
                continue;
            } else if (ref->store->dtype == KR_KV_F32) {
                b->store = ref->store;
            } else {
                const segment *g = find_segment(seg, n_seg, ref->store, ref->start);
                b->stride = kr_kv_f32_stride(ref->store->d);
                size_t off = g->off + (size_t)(ref->start - g->start) * (size_t)b->stride;
                b->k = k + off;
                b->v = k + floats + off;
            }
        }
    return KR_OK;
}

static void worker(void *ctx, int ith, int nth) {
    plan *p = ctx;
    int items = p->n_groups * p->n_heads;
    const int R = KR_MAX_PAST_REFS + 1;
    float *scratch = p->scratch + (size_t)ith * PLAN_MAX_GROUP * (size_t)p->max_keys;
    /* shared spans, then each query's own spans, max_spans apart */
    kr_kv_span *shared = p->spans + (size_t)ith * (PLAN_MAX_GROUP + 1) * (size_t)p->max_spans;
    kr_kv_span *own_sp[PLAN_MAX_GROUP];
    for (int i = 0; i < PLAN_MAX_GROUP; i++)
        own_sp[i] = shared + (size_t)(i + 1) * (size_t)p->max_spans;
    const kr_kv_span *own[PLAN_MAX_GROUP];
    int n_own[PLAN_MAX_GROUP];
    const float *qs[PLAN_MAX_GROUP];
    float *outs[PLAN_MAX_GROUP];
    /* Each thread takes the next item when done with one, so a thread the host slows down
     * takes fewer; last group first, since the groups of a causal chunk grow in keys from
     * first to last and the largest are best not left for the end. Where an item runs does
     * not change its numbers (its own outputs, this thread's scratch). */
    (void)nth;
    for (int taken;
         (taken = atomic_fetch_add_explicit(&p->next_item, 1, memory_order_relaxed)) < items;) {
        int it = items - 1 - taken;
        int g = it / p->n_heads, h = it % p->n_heads;
        int a = p->group_start[g], nq = p->group_start[g + 1] - a;
        int n_shared = 0;
        if (p->causal[g]) {
            /* Rows of one causal chunk: the same refs but for how far the last one reaches, so
             * every row's keys are the first n_i of the farthest row's. The causal kernel reads
             * each block of them once for the whole group and gives each row its lone
             * computation over its n_i keys (kernels.h). */
            int far = a, n_keys[PLAN_MAX_GROUP];
            for (int i = 0; i < nq; i++) {
                int r = p->order[a + i];
                const kr_attn_keys *kk = &p->keys[r];
                n_keys[i] = 0;
                for (int j = 0; j < kk->n; j++) n_keys[i] += kk->ref[j].n;
                if (n_keys[i] > n_keys[far - a]) far = a + i;
                qs[i] = p->q + (size_t)r * p->d + h * p->head_dim;
                outs[i] = p->out + (size_t)r * p->d + h * p->head_dim;
            }
            int rf = p->order[far];
            n_shared =
                to_spans(p->base + (size_t)rf * R, p->keys[rf].n, p->layer, h, p->head_dim, shared);
            kr_attend_causal_f32(nq, qs, p->head_dim, p->scale, shared, n_shared, n_keys, scratch,
                                 p->max_keys, outs);
            continue;
        }
        if (nq > 1)
            n_shared =
                to_spans(p->base + (size_t)p->order[a] * R, 1, p->layer, h, p->head_dim, shared);
        for (int i = 0; i < nq; i++) {
            int r = p->order[a + i];
            const kr_attn_keys *kk = &p->keys[r];
            int skip = nq > 1 ? 1 : 0; /* a lone row keeps all its refs as its own keys */
            n_own[i] = to_spans(p->base + (size_t)r * R + skip, kk->n - skip, p->layer, h,
                                p->head_dim, own_sp[i]);
            own[i] = own_sp[i];
            qs[i] = p->q + (size_t)r * p->d + h * p->head_dim;
            outs[i] = p->out + (size_t)r * p->d + h * p->head_dim;
        }
        if (nq == 1)
            kr_attend_f32(qs[0], p->head_dim, p->scale, own_sp[0], n_own[0], scratch, outs[0]);
        else
            kr_attend_multi_f32(nq, qs, p->head_dim, p->scale, shared, n_shared, own, n_own,
                                scratch, p->max_keys, outs);
    }
}

kr_status kr_attention_rows(const kr_exec *ex, int n_rows, const kr_attn_keys *keys, int layer,
                            int n_heads, int head_dim, int d, const float *q, float *out,
                            kr_error *err) {
    if (n_rows <= 0) return KR_OK;
    double t0 = kr_prof_begin(ex->prof), keys_read = 0;
    plan p = { 0 };
    p.keys = keys;
    p.layer = layer;
    p.n_heads = n_heads;
    p.head_dim = head_dim;
    p.d = d;
    p.scale = 1.0f / sqrtf((float)head_dim);
    p.q = q;
    p.out = out;
    for (int r = 0; r < n_rows; r++) {
        int nk = 0, ns = 0;
        for (int i = 0; i < keys[r].n; i++) {
            nk += keys[r].ref[i].n;
            ns += ref_max_spans(keys[r].ref[i].n);
        }
        if (nk < 1) return kr_error_set(err, KR_ERR_INTERNAL, "attention: row %d has no keys", r);
        keys_read += nk;
        if (nk > p.max_keys) p.max_keys = nk;
        if (ns > p.max_spans) p.max_spans = ns;
    }
    int nth = kr_pool_size(ex->pool);
    size_t mark = kr_arena_mark(ex->arena);
    kr_arena *a = ex->arena;
    p.order = KR_ARENA_NEW(a, int, n_rows);
    p.group_start = KR_ARENA_NEW(a, int, (size_t)n_rows + 1);
    p.causal = KR_ARENA_NEW(a, unsigned char, (size_t)n_rows + 1);
    p.scratch = KR_ARENA_NEW(a, float, (size_t)nth *PLAN_MAX_GROUP *(size_t)p.max_keys);
    p.base = KR_ARENA_NEW(a, kref, (size_t)n_rows * (KR_MAX_PAST_REFS + 1));
    p.spans = KR_ARENA_NEW(a, kr_kv_span, (size_t)nth * (PLAN_MAX_GROUP + 1) * (size_t)p.max_spans);
    int *order_tmp = KR_ARENA_NEW(a, int, n_rows);
    kr_status st = KR_OK;
    if (!p.order || !p.group_start || !p.causal || !p.scratch || !p.base || !p.spans || !order_tmp)
        st = kr_error_set(err, KR_ERR_NOMEM, "attention: out of memory for %d rows", n_rows);
    else
        st = resolve_keys(ex, &p, n_rows, err);
    if (st != KR_OK) {
        kr_arena_release(a, mark);
        return st;
    }
    for (int r = 0; r < n_rows; r++) p.order[r] = r;
    /* Groups: consecutive rows of one causal chunk (a prefill or a re-run window), which
     * share all keys up to the first row's; else rows whose keys start with the same rows of
     * the same store (the paths of a forecast over their shared context). */
    kr_sort(p.order, (size_t)n_rows, sizeof(int), cmp_rows, (void *)keys, order_tmp);
    for (int i = 0; i < n_rows;) {
        int j = i + 1;
        const kr_attn_keys *ki = &keys[p.order[i]];
        while (j < n_rows && j - i < PLAN_MAX_CAUSAL_GROUP &&
               causal_siblings(&keys[p.order[j]], ki))
            j++;
        p.causal[p.n_groups] = j - i > 1;
        if (j - i == 1 && ki->n >= 2)
            while (j < n_rows && j - i < PLAN_MAX_GROUP && keys[p.order[j]].n >= 2 &&
                   same_ref(&keys[p.order[j]].ref[0], &ki->ref[0]))
                j++;
        p.group_start[p.n_groups++] = i;
        i = j;
    }
    p.group_start[p.n_groups] = n_rows;
    atomic_init(&p.next_item, 0);
    kr_pool_run(ex->pool, worker, &p);
    kr_arena_release(a, mark);
    /* Per key and head: q·k and the weighted sum of v, 2 FLOPs per value each; bytes as if
     * every row read its keys (a group reads its shared keys once, so fewer in fact). */
    double values = keys_read * n_heads * head_dim;
    kr_prof_end(ex->prof, KR_PROF_PART_ATTENTION, t0, 4.0 * values, 8.0 * values);
    return KR_OK;
}
