/*
 * model/linear — see linear.h. One parallel region per call: the quantised Linears' activations
 * prepared over rows, an f32 A packed once, then the GEMMs over output columns in slices the
 * threads take as they finish (planned by plan_slices).
 */
#include "model/linear.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/error.h"
#include "model/quantize.h"

/* Linears that read the same input (q, k, v; w1, w3; the dep layer's k, v) run in one
 * parallel region: each thread computes slices of every output, so one pool round trip
 * serves them all. Each output column is still the same kernel's dot product over the input
 * in the same order (kernels are split-invariant), so the numbers are those of one call per
 * Linear. */
enum { KR_LINEAR_MULTI_MAX = 4 };

/* Slices of N a region's Linears are cut into: threads take the next slice as they finish
 * one, so a thread the host slows down (a shared VM's vCPU, another process) takes fewer
 * instead of holding the others at the region's end — the wait was 5-20 % of a forecast's
 * steps with a fixed half each, most of it in the re-run windows' GEMMs, and is 1-3 % now.
 * f32 slices shrink as the work left does (guided self-scheduling: a 1/(2·threads) share of
 * what is left, in whole KR_SLICE_COL_UNIT columns), so the last ones, which decide the wait,
 * are small. A quantised Linear is cut into KR_QSLICES_PER_THREAD equal parts of its own split
 * per thread: its GEMM is several times faster, so a slice's fixed costs (the int8 kernels
 * sweep all of A per call) weigh more. Below KR_SLICE_MIN_M rows (decode) a thread keeps its
 * fixed half: there slices cost more than they balance (lookback 392, 1 path, interleaved:
 * 0.56 s median with slices vs 0.50 without; each slice restarts the W prefetch stream). */
enum {
    KR_QSLICES_PER_THREAD = 2,
    KR_SLICE_MIN_M = 16,
    KR_SLICE_COL_UNIT = 16, /* the kernels' own split unit: W rows stay 64-byte aligned */
    KR_SLICE_MIN_COLS = 32,
    KR_MAX_SLICES = 128
};

/* f32: columns [a, b) of Linear `linear`; quantised: part a of b of its kr_gemm_split. */
typedef struct gemm_slice {
    int linear, a, b;
} gemm_slice;

typedef struct gemm_task {
    int n;
    const kr_linear *l[KR_LINEAR_MULTI_MAX];
    float *y[KR_LINEAR_MULTI_MAX];
    int ldy[KR_LINEAR_MULTI_MAX];
    void *scratch[KR_LINEAR_MULTI_MAX]; /* quantised: kr_qgemm scratch */
    const float *x;
    int m, ldx;
    const float *xp; /* x packed by kr_gemm_f32_pack_a for the f32 Linears, or NULL */
    int n_slices; /* 0: every thread takes its fixed part of each Linear */
    atomic_int next;
    gemm_slice slice[KR_MAX_SLICES];
} gemm_task;

/* Linear i's share for thread ith of nth: its kernel's own split of the output columns (the
 * quantised kernels' kr_gemm_split, the f32 GEMM's column ranges). */
static void run_linear_share(const gemm_task *t, int i, int ith, int nth) {
    const kr_linear *l = t->l[i];
    if (l->q)
        kr_qgemm_run(l->q, t->m, t->x, t->ldx, l->b, t->y[i], t->ldy[i], t->scratch[i], ith, nth);
    else if (t->xp)
        kr_gemm_f32_packed(t->m, l->n_out, l->n_in, t->x, t->ldx, t->xp, l->w, l->b, t->y[i],
                           t->ldy[i], ith, nth);
    else
        kr_gemm_f32(t->m, l->n_out, l->n_in, t->x, t->ldx, l->w, l->b, t->y[i], t->ldy[i], ith,
                    nth);
}

/* Columns [n0, n1) of f32 Linear i, one slice of the guided schedule: the GEMM of those W
 * rows, whole (an output's numbers do not depend on N or the split). */
static void run_linear_columns(const gemm_task *t, int i, int n0, int n1) {
    const kr_linear *l = t->l[i];
    const float *w = l->w + (size_t)n0 * (size_t)l->n_in, *b = l->b ? l->b + n0 : NULL;
    float *y = t->y[i] + n0;
    if (t->xp)
        kr_gemm_f32_packed(t->m, n1 - n0, l->n_in, t->x, t->ldx, t->xp, w, b, y, t->ldy[i], 0, 1);
    else
        kr_gemm_f32(t->m, n1 - n0, l->n_in, t->x, t->ldx, w, b, y, t->ldy[i], 0, 1);
}

static void pack_x_worker(void *ctx, int ith, int nth) {
    const gemm_task *t = ctx;
    int tiles = (t->m + 3) / 4;
    int m0 = (int)((long long)tiles * ith / nth) * 4,
        m1 = (int)((long long)tiles * (ith + 1) / nth) * 4;
    kr_gemm_f32_pack_a(t->m, t->l[0]->n_in, t->x, t->ldx, (float *)t->xp, m0, m1);
}

static void gemm_worker(void *ctx, int ith, int nth) {
    gemm_task *t = ctx;
    if (!t->n_slices || nth == 1) {
        for (int i = 0; i < t->n; i++) run_linear_share(t, i, ith, nth);
        return;
    }
    /* A thread may take no slice of a Linear this step and some the next: its kernel buffers
     * are allocated now, in the first steps, not then (test_engine_alloc). */
    for (int i = 0; i < t->n; i++) {
        if (t->l[i]->q)
            kr_qgemm_reserve(t->l[i]->q, t->m);
        else
            kr_gemm_f32_reserve(t->m, t->l[i]->n_in);
    }
    for (int s; (s = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed)) < t->n_slices;) {
        const gemm_slice *sl = &t->slice[s];
        if (t->l[sl->linear]->q)
            run_linear_share(t, sl->linear, sl->a, sl->b);
        else
            run_linear_columns(t, sl->linear, sl->a, sl->b);
    }
}

/* Fills t->slice (see KR_QSLICES_PER_THREAD), or leaves n_slices 0 for decode rows and for the
 * weight-only path, whose panel is per ith. */
static void plan_slices(gemm_task *t, int nth) {
    t->n_slices = 0;
    if (nth <= 1 || t->m < KR_SLICE_MIN_M) return;
    int left = 0;
    for (int i = 0; i < t->n; i++) {
        if (t->l[i]->q && !kr_qgemm_any_split(t->l[i]->q)) return;
        if (!t->l[i]->q) left += t->l[i]->n_out;
    }
    int ns = 0;
    for (int i = 0; i < t->n; i++) {
        const kr_linear *l = t->l[i];
        int room = KR_MAX_SLICES - ns - (t->n - 1 - i); /* one slice kept for each Linear left */
        if (l->q) {
            int parts = nth * KR_QSLICES_PER_THREAD;
            if (parts > KR_MAX_SLICES / t->n) parts = KR_MAX_SLICES / t->n;
            if (parts > room) parts = room;
            for (int p = 0; p < parts; p++) t->slice[ns++] = (gemm_slice){ i, p, parts };
            continue;
        }
        for (int n0 = 0; n0 < l->n_out; room--) {
            int size = (left + 2 * nth - 1) / (2 * nth);
            size = (size + KR_SLICE_COL_UNIT - 1) / KR_SLICE_COL_UNIT * KR_SLICE_COL_UNIT;
            if (size < KR_SLICE_MIN_COLS) size = KR_SLICE_MIN_COLS;
            if (size > l->n_out - n0 || room == 1) size = l->n_out - n0;
            t->slice[ns++] = (gemm_slice){ i, n0, n0 + size };
            n0 += size;
            left -= size;
        }
    }
    t->n_slices = ns;
    atomic_init(&t->next, 0);
}

static void qprepare_worker(void *ctx, int ith, int nth) {
    const gemm_task *t = ctx;
    int m0 = (int)((long long)t->m * ith / nth), m1 = (int)((long long)t->m * (ith + 1) / nth);
    for (int i = 0; i < t->n; i++)
        if (t->l[i]->q && kr_qgemm_needs_prepare(t->l[i]->q))
            kr_qgemm_prepare(t->l[i]->q, t->m, t->x, t->ldx, t->scratch[i], m0, m1);
}

/* Below this much work a region is cheaper on the caller alone than handed to the pool: a
 * hand-off costs microseconds on an idle machine and far more when other processes hold the
 * cores, against ~2.5 µs of FMAs here (the small models' decode steps). Results are the same
 * either way (split-invariant kernels). */
#define KR_POOL_MIN_FLOPS (1 << 18)
/* Activation rows below this many values are quantised by the caller, not in a region. */
#define KR_POOL_MIN_PREPARE (1 << 16)

kr_status kr_linear_run_multi(const kr_exec *ex, int n, const kr_linear *const *l, const float *x,
                              int m, int ldx, float *const *y, const int *ldy, kr_error *err) {
    if (m <= 0 || n <= 0) return KR_OK;
    /* One input for every Linear: the same n_in, rows ldx apart; outputs of n_out columns. */
    for (int i = 0; i < n && i < KR_LINEAR_MULTI_MAX; i++)
        KR_ASSERT(l[i]->n_in == l[0]->n_in && ldx >= l[i]->n_in && ldy[i] >= l[i]->n_out);
    if (n > KR_LINEAR_MULTI_MAX)
        return kr_error_set(err, KR_ERR_INTERNAL, "linear: %d outputs in one call (max %d)", n,
                            KR_LINEAR_MULTI_MAX);
    double t0 = kr_prof_begin(ex->prof), flops = 0, bytes = 4.0 * m * l[0]->n_in;
    gemm_task t = { .n = n, .x = x, .m = m, .ldx = ldx };
    size_t mark = kr_arena_mark(ex->arena);
    int prepare = 0;
    for (int i = 0; i < n; i++) {
        if (l[i]->stats) kr_act_stats_add(l[i]->stats, x, m, ldx);
        t.l[i] = l[i];
        t.y[i] = y[i];
        t.ldy[i] = ldy[i];
        flops += 2.0 * m * l[i]->n_out * l[i]->n_in;
        bytes += (l[i]->q ? (double)kr_qmat_bytes(l[i]->q) : 4.0 * l[i]->n_out * l[i]->n_in) +
                 4.0 * m * l[i]->n_out;
        if (!l[i]->q) continue;
        size_t sb = kr_qgemm_scratch_bytes(l[i]->q, m, kr_pool_size(ex->pool));
        if (!(t.scratch[i] = kr_arena_alloc(ex->arena, sb))) {
            kr_arena_release(ex->arena, mark);
            return kr_error_set(err, KR_ERR_NOMEM,
                                "linear %d×%d: out of memory for %zu bytes of "
                                "quantised-GEMM scratch",
                                l[i]->n_out, l[i]->n_in, sb);
        }
        prepare |= kr_qgemm_needs_prepare(l[i]->q);
    }
    /* Activation preparation is split over rows, the GEMM over output columns. */
    if (prepare)
        kr_pool_run_if_worth(ex->pool, qprepare_worker, &t, (double)m * l[0]->n_in,
                             KR_POOL_MIN_PREPARE);
    /* f32 Linears on an A the GEMM packs: packed once here, not by every slice of each. */
    int all_f32 = 1;
    for (int i = 0; i < n; i++) all_f32 &= !l[i]->q;
    size_t xp_floats = all_f32 ? kr_gemm_f32_packed_a_floats(m, l[0]->n_in) : 0;
    if (xp_floats && (t.xp = KR_ARENA_NEW(ex->arena, float, xp_floats)))
        kr_pool_run_if_worth(ex->pool, pack_x_worker, &t, (double)m * l[0]->n_in,
                             KR_POOL_MIN_PREPARE);
    if (flops >= KR_POOL_MIN_FLOPS) plan_slices(&t, kr_pool_size(ex->pool));
    kr_pool_run_if_worth(ex->pool, gemm_worker, &t, flops, KR_POOL_MIN_FLOPS);
    kr_arena_release(ex->arena, mark);
    /* What the profile counts: 2·m·n_out·n_in FLOPs per Linear; the weight bytes as stored
     * plus the activations read and written. */
    kr_prof_end(ex->prof, KR_PROF_PART_GEMM, t0, flops, bytes);
    return KR_OK;
}

kr_status kr_linear_run(const kr_exec *ex, const kr_linear *l, const float *x, int m, int ldx,
                        float *y, int ldy, kr_error *err) {
    return kr_linear_run_multi(ex, 1, &l, x, m, ldx, &y, &ldy, err);
}
