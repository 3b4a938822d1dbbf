/*
 * model/transformer — see transformer.h. Block: x += out(attn(rope(q,k), v)) of RMSNorm1(x);
 * x += w2(silu(w1 h) ⊙ w3 h) with h = RMSNorm2(x). Attention is causal, scale 1/√head_dim.
 */
#include "model/transformer.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/attention_plan.h"
#include "model/quantize.h"
#include "kernels/kv_convert.h"

#define KR_RMS_EPS 1e-5f

#define KVB KR_KV_BLOCK_ROWS

kr_status kr_kv_store_init(kr_kv_store *s, int n_layers, int d, int cap, kr_error *err) {
    return kr_kv_store_init_dtype(s, n_layers, d, cap, KR_KV_F32, 0, err);
}

/* A store's layout without its blocks: strides, offsets, block size and count. */
static void store_layout(kr_kv_store *s, int n_layers, int d, int cap, kr_kv_dtype dtype,
                         int group) {
    s->n_layers = n_layers;
    s->d = d;
    s->cap = cap;
    s->dtype = dtype;
    s->group = dtype == KR_KV_INT8 ? group : 0;
    s->elt = dtype == KR_KV_F32    ? sizeof(float)
             : dtype == KR_KV_BF16 ? sizeof(uint16_t)
                                   : sizeof(int8_t);
    /* BF16 and INT8 rows are converted to f32 copies before attention reads them, so only
     * F32 rows are laid out for reading in place. */
    s->stride = dtype == KR_KV_F32 ? kr_kv_f32_stride(d) : d;
    size_t values = (size_t)n_layers * KVB * (size_t)s->stride;
    size_t scales =
        dtype == KR_KV_INT8 ? (size_t)n_layers * KVB * (size_t)(d / group) * sizeof(float) : 0;
    /* Each region starts on a cache line, as a separately allocated array would. */
    size_t vb = (values * s->elt + 63) / 64 * 64, sb = (scales + 63) / 64 * 64;
    s->v_off = vb;
    s->sk_off = 2 * vb;
    s->sv_off = 2 * vb + sb;
    s->block_bytes = 2 * vb + 2 * sb;
    s->n_blocks = (cap + KVB - 1) / KVB;
}

size_t kr_kv_store_bytes_for(int n_layers, int d, int cap, kr_kv_dtype dtype, int group) {
    if (n_layers <= 0 || d <= 0 || cap <= 0) return 0;
    if (dtype == KR_KV_INT8 && (group <= 0 || d % group != 0)) return 0;
    kr_kv_store s;
    store_layout(&s, n_layers, d, cap, dtype, group);
    return (size_t)s.n_blocks * s.block_bytes;
}

kr_status kr_kv_store_init_dtype(kr_kv_store *s, int n_layers, int d, int cap, kr_kv_dtype dtype,
                                 int group, kr_error *err) {
    memset(s, 0, sizeof *s);
    if (n_layers <= 0 || d <= 0 || cap <= 0)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kv store: bad size %d×%d×%d", n_layers, cap,
                            d);
    if (dtype != KR_KV_F32 && dtype != KR_KV_BF16 && dtype != KR_KV_INT8)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kv store: unknown dtype %d", (int)dtype);
    if (dtype == KR_KV_INT8 && (group <= 0 || d % group != 0))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kv store: int8 group %d does not divide %d",
                            group, d);
    store_layout(s, n_layers, d, cap, dtype, group);
    s->blocks = calloc((size_t)s->n_blocks, sizeof *s->blocks);
    int ok = s->blocks != NULL;
    for (int i = 0; ok && i < s->n_blocks; i++)
        ok = (s->blocks[i] = kr_kv_block_alloc(s->block_bytes)) != NULL;
    if (!ok) {
        size_t bytes = (size_t)s->n_blocks * s->block_bytes;
        kr_kv_store_release(s);
        return kr_error_set(err, KR_ERR_NOMEM, "kv store: cannot allocate %zu bytes", bytes);
    }
    return KR_OK;
}

void kr_kv_store_release(kr_kv_store *s) {
    if (!s) return;
    for (int i = 0; s->blocks && i < s->n_blocks; i++) kr_kv_block_unref(s->blocks[i]);
    free(s->blocks);
    memset(s, 0, sizeof *s);
}

size_t kr_kv_store_bytes(const kr_kv_store *s) {
    size_t n = 0;
    for (int i = 0; s->blocks && i < s->n_blocks; i++)
        if (s->blocks[i]) n++;
    return n * s->block_bytes;
}

size_t kr_kv_store_unshared_bytes(const kr_kv_store *s) {
    size_t n = 0;
    for (int i = 0; s->blocks && i < s->n_blocks; i++)
        if (s->blocks[i] && kr_kv_block_refs(s->blocks[i]) == 1) n++;
    return n * s->block_bytes;
}

kr_status kr_kv_store_view_head(kr_kv_store *dst, const kr_kv_store *src, int rows, kr_error *err) {
    if (rows < 1 || rows > src->cap)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kv store: no head of %d rows in %d", rows,
                            src->cap);
    int nb = (rows + KVB - 1) / KVB;
    *dst = *src;
    dst->blocks = malloc((size_t)nb * sizeof *dst->blocks);
    if (!dst->blocks) {
        memset(dst, 0, sizeof *dst);
        return kr_error_set(err, KR_ERR_NOMEM, "kv store: out of memory");
    }
    for (int i = 0; i < nb; i++) {
        kr_kv_block_ref(src->blocks[i]);
        dst->blocks[i] = src->blocks[i];
    }
    dst->n_blocks = nb;
    dst->cap = nb * KVB;
    return KR_OK;
}

int kr_kv_store_row_refs(const kr_kv_store *s, int row) {
    return kr_kv_block_refs(s->blocks[row / KVB]);
}

/* Rows [r, r + n) of every layer of one block, raw (codes and scales as stored). */
static void copy_block_rows(const kr_kv_store *s, unsigned char *dst, const unsigned char *src,
                            int r, int n) {
    size_t row_bytes = (size_t)s->stride * s->elt,
           srow = s->group ? (size_t)(s->d / s->group) * sizeof(float) : 0;
    for (int l = 0; l < s->n_layers; l++) {
        size_t i = (size_t)l * KVB + (size_t)r;
        memcpy(dst + i * row_bytes, src + i * row_bytes, (size_t)n * row_bytes);
        memcpy(dst + s->v_off + i * row_bytes, src + s->v_off + i * row_bytes,
               (size_t)n * row_bytes);
        if (srow) {
            memcpy(dst + s->sk_off + i * srow, src + s->sk_off + i * srow, (size_t)n * srow);
            memcpy(dst + s->sv_off + i * srow, src + s->sv_off + i * srow, (size_t)n * srow);
        }
    }
}

kr_status kr_kv_store_share_prefix(kr_kv_store *dst, const kr_kv_store *src, int rows,
                                   kr_error *err) {
    if (dst->n_layers != src->n_layers || dst->d != src->d || dst->dtype != src->dtype ||
        dst->group != src->group || rows < 0 || rows > src->cap || rows > dst->cap)
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "kv store: cannot share %d rows between stores of "
                            "different shapes",
                            rows);
    int whole = rows / KVB, part = rows % KVB;
    if (part > 0 && dst->blocks[whole] == src->blocks[whole]) part = 0; /* already shared */
    if (part > 0 && kr_kv_block_refs(dst->blocks[whole]) > 1) {
        /* The copy must not land in a block another store still reads. */
        kr_kv_block *own = kr_kv_block_alloc(dst->block_bytes);
        if (!own)
            return kr_error_set(err, KR_ERR_NOMEM, "kv store: cannot allocate %zu bytes",
                                dst->block_bytes);
        copy_block_rows(dst, own->data, dst->blocks[whole]->data, 0, KVB);
        kr_kv_block_unref(dst->blocks[whole]);
        dst->blocks[whole] = own;
    }
    for (int i = 0; i < whole; i++) {
        if (dst->blocks[i] == src->blocks[i]) continue;
        kr_kv_block_ref(src->blocks[i]);
        kr_kv_block_unref(dst->blocks[i]);
        dst->blocks[i] = src->blocks[i];
    }
    if (part > 0) copy_block_rows(dst, dst->blocks[whole]->data, src->blocks[whole]->data, 0, part);
    return KR_OK;
}

/* Rows [row, row + n) of one block of a layer: the unit a conversion runs over, since rows
 * are contiguous only within a block. */
static void write_rows(kr_kv_store *s, int layer, int row, const float *k_rows, const float *v_rows,
                       int n) {
    size_t values = (size_t)n * (size_t)s->d;
    if (s->dtype == KR_KV_F32) {
        size_t d = (size_t)s->d, st = (size_t)s->stride;
        float *k = kr_kv_row(s, 0, layer, row), *v = kr_kv_row(s, 1, layer, row);
        for (size_t r = 0; r < (size_t)n; r++) {
            memcpy(k + r * st, k_rows + r * d, d * sizeof(float));
            memcpy(v + r * st, v_rows + r * d, d * sizeof(float));
        }
    } else if (s->dtype == KR_KV_BF16) {
        kr_kv_pack_bf16(k_rows, kr_kv_row(s, 0, layer, row), values);
        kr_kv_pack_bf16(v_rows, kr_kv_row(s, 1, layer, row), values);
    } else {
        int d = s->d, ns = d / s->group;
        int8_t *qk = kr_kv_row(s, 0, layer, row), *qv = kr_kv_row(s, 1, layer, row);
        float *sk = kr_kv_row_scales(s, 0, layer, row), *sv = kr_kv_row_scales(s, 1, layer, row);
        for (int r = 0; r < n; r++) {
            kr_kv_pack_int8(k_rows + (size_t)r * d, qk + (size_t)r * d, sk + (size_t)r * ns, d,
                            s->group);
            kr_kv_pack_int8(v_rows + (size_t)r * d, qv + (size_t)r * d, sv + (size_t)r * ns, d,
                            s->group);
        }
    }
}

static void read_rows(const kr_kv_store *s, int layer, int row, int n, float *k_out, float *v_out) {
    size_t values = (size_t)n * (size_t)s->d;
    if (s->dtype == KR_KV_F32) {
        size_t d = (size_t)s->d, st = (size_t)s->stride;
        const float *k = kr_kv_row(s, 0, layer, row), *v = kr_kv_row(s, 1, layer, row);
        for (size_t r = 0; r < (size_t)n; r++) {
            memcpy(k_out + r * d, k + r * st, d * sizeof(float));
            memcpy(v_out + r * d, v + r * st, d * sizeof(float));
        }
    } else if (s->dtype == KR_KV_BF16) {
        kr_kv_unpack_bf16(kr_kv_row(s, 0, layer, row), k_out, values);
        kr_kv_unpack_bf16(kr_kv_row(s, 1, layer, row), v_out, values);
    } else {
        int d = s->d, ns = d / s->group;
        const int8_t *qk = kr_kv_row(s, 0, layer, row), *qv = kr_kv_row(s, 1, layer, row);
        const float *sk = kr_kv_row_scales(s, 0, layer, row),
                    *sv = kr_kv_row_scales(s, 1, layer, row);
        for (int r = 0; r < n; r++) {
            kr_kv_unpack_int8(qk + (size_t)r * d, sk + (size_t)r * ns, k_out + (size_t)r * d, d,
                              s->group);
            kr_kv_unpack_int8(qv + (size_t)r * d, sv + (size_t)r * ns, v_out + (size_t)r * d, d,
                              s->group);
        }
    }
}

void kr_kv_store_write(kr_kv_store *s, int layer, int row, const float *k_rows, const float *v_rows,
                       int n_rows) {
    size_t d = (size_t)s->d;
    for (int done = 0; done < n_rows;) {
        int r = row + done, n = KVB - r % KVB;
        if (n > n_rows - done) n = n_rows - done;
        write_rows(s, layer, r, k_rows + (size_t)done * d, v_rows + (size_t)done * d, n);
        done += n;
    }
}

void kr_kv_store_read(const kr_kv_store *s, int layer, int row, int n_rows, float *k_out,
                      float *v_out) {
    size_t d = (size_t)s->d;
    for (int done = 0; done < n_rows;) {
        int r = row + done, n = KVB - r % KVB;
        if (n > n_rows - done) n = n_rows - done;
        read_rows(s, layer, r, n, k_out + (size_t)done * d, v_out + (size_t)done * d);
        done += n;
    }
}

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

/* Linear i's part ith of nth. */
static void linear_part(const gemm_task *t, int i, int ith, int nth) {
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

/* Columns [n0, n1) of f32 Linear i: the GEMM of those W rows, whole (an output's numbers do
 * not depend on N or the split). */
static void linear_cols(const gemm_task *t, int i, int n0, int n1) {
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
        for (int i = 0; i < t->n; i++) linear_part(t, i, ith, nth);
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
            linear_part(t, sl->linear, sl->a, sl->b);
        else
            linear_cols(t, sl->linear, sl->a, sl->b);
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

static void run_region(const kr_exec *ex, kr_pool_fn fn, void *ctx, double work, double min) {
    if (work < min)
        fn(ctx, 0, 1);
    else
        kr_pool_run(ex->pool, fn, ctx);
}

kr_status kr_linear_run_multi(const kr_exec *ex, int n, const kr_linear *const *l, const float *x,
                              int m, int ldx, float *const *y, const int *ldy, kr_error *err) {
    if (m <= 0 || n <= 0) return KR_OK;
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
    if (prepare) run_region(ex, qprepare_worker, &t, (double)m * l[0]->n_in, KR_POOL_MIN_PREPARE);
    /* f32 Linears on an A the GEMM packs: packed once here, not by every slice of each. */
    int all_f32 = 1;
    for (int i = 0; i < n; i++) all_f32 &= !l[i]->q;
    size_t xp_floats = all_f32 ? kr_gemm_f32_packed_a_floats(m, l[0]->n_in) : 0;
    if (xp_floats && (t.xp = KR_ARENA_NEW(ex->arena, float, xp_floats)))
        run_region(ex, pack_x_worker, &t, (double)m * l[0]->n_in, KR_POOL_MIN_PREPARE);
    if (flops >= KR_POOL_MIN_FLOPS) plan_slices(&t, kr_pool_size(ex->pool));
    run_region(ex, gemm_worker, &t, flops, KR_POOL_MIN_FLOPS);
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

kr_status kr_chunks_check(const kr_chunk *chunks, int n_chunks, int n_layers_needed, int *total,
                          kr_error *err) {
    int sum = 0;
    for (int c = 0; c < n_chunks; c++) {
        const kr_chunk *ch = &chunks[c];
        if (ch->n <= 0 || ch->pos0 < 0 || !ch->out || ch->n_past < 0 ||
            ch->n_past > KR_MAX_PAST_REFS)
            return kr_error_set(err, KR_ERR_INTERNAL, "chunk %d: bad shape", c);
        if (ch->out_start < 0 || ch->out_start + ch->n > ch->out->cap ||
            ch->out->n_layers < n_layers_needed)
            return kr_error_set(err, KR_ERR_INTERNAL, "chunk %d: output rows %d..%d exceed store",
                                c, ch->out_start, ch->out_start + ch->n);
        for (int r = 0; r < ch->n_past; r++) {
            const kr_kv_ref *ref = &ch->past[r];
            if (!ref->store || ref->start < 0 || ref->n < 0 ||
                ref->start + ref->n > ref->store->cap || ref->store->n_layers < n_layers_needed)
                return kr_error_set(err, KR_ERR_INTERNAL, "chunk %d: past ref %d out of range", c,
                                    r);
        }
        sum += ch->n;
    }
    *total = sum;
    return KR_OK;
}

/* The row-wise work between a layer's GEMMs. Rows are independent (kernels.h: a row's result
 * never depends on the rows beside it), so large calls split rows over the pool; each op is
 * the same kernel call on the same row either way. Fusing the residual add with the norm that
 * reads its result, and the RoPE with the KV write, makes one pass over the rows instead of
 * two while they are in cache. */
typedef enum row_op {
    ROW_NORM1, /* h = RMSNorm1(x) */
    ROW_ROPE_KV, /* rotate q and k; write k, v to the chunk's store */
    ROW_ADD_NORM2, /* x += h; h = RMSNorm2(x) */
    ROW_SILU, /* f1 = silu(f1) ⊙ f3 */
    ROW_ADD, /* x += h */
} row_op;

typedef struct row_task {
    row_op op;
    const kr_block_weights *bw;
    const kr_chunk *chunks;
    int n_chunks, total, d, ff_dim, layer;
    float *x, *h, *q, *kt, *vt, *f1, *f3;
} row_task;

/* RoPE and the KV write for rows [r0, r1) of the call, each in its chunk's positions. */
static void rope_kv_rows(const row_task *t, int r0, int r1) {
    const kr_attn_weights *aw = &t->bw->attn;
    size_t d = (size_t)t->d;
    for (int c = 0, base = 0; c < t->n_chunks && base < r1; base += t->chunks[c].n, c++) {
        const kr_chunk *ch = &t->chunks[c];
        int a = r0 > base ? r0 - base : 0, b = r1 - base < ch->n ? r1 - base : ch->n;
        if (a >= b) continue;
        size_t row = (size_t)(base + a);
        kr_rope_f32(b - a, aw->n_heads, aw->head_dim, t->q + row * d, t->d, ch->pos0 + a,
                    aw->inv_freq);
        kr_rope_f32(b - a, aw->n_heads, aw->head_dim, t->kt + row * d, t->d, ch->pos0 + a,
                    aw->inv_freq);
        kr_kv_store_write(ch->out, t->layer, ch->out_start + a, t->kt + row * d, t->vt + row * d,
                          b - a);
    }
}

static void row_worker(void *ctx, int ith, int nth) {
    const row_task *t = ctx;
    int r0 = (int)((long long)t->total * ith / nth),
        r1 = (int)((long long)t->total * (ith + 1) / nth);
    if (r0 >= r1) return;
    size_t d = (size_t)t->d, off = (size_t)r0 * d, n = (size_t)(r1 - r0);
    switch (t->op) {
    case ROW_NORM1:
        kr_rmsnorm_f32(r1 - r0, t->d, t->x + off, t->d, t->bw->norm1, KR_RMS_EPS, t->h + off, t->d);
        break;
    case ROW_ROPE_KV: rope_kv_rows(t, r0, r1); break;
    case ROW_ADD_NORM2:
        kr_add_f32((int)(n * d), t->h + off, t->x + off);
        kr_rmsnorm_f32(r1 - r0, t->d, t->x + off, t->d, t->bw->norm2, KR_RMS_EPS, t->h + off, t->d);
        break;
    case ROW_SILU: {
        size_t fo = (size_t)r0 * (size_t)t->ff_dim;
        kr_silu_mul_f32((int)(n * (size_t)t->ff_dim), t->f1 + fo, t->f3 + fo, t->f1 + fo);
        break;
    }
    case ROW_ADD: kr_add_f32((int)(n * d), t->h + off, t->x + off); break;
    }
}

/* Values per row an op touches, and the profile's FLOP and byte counts per value. */
static void row_op_costs(const row_task *t, double *values, double *flops, double *bytes) {
    double td = (double)t->total * t->d, tf = (double)t->total * t->ff_dim;
    *values = *flops = *bytes = 0;
    switch (t->op) {
    case ROW_NORM1: *values = td, *flops = 4.0 * td, *bytes = 8.0 * td; break;
    case ROW_ROPE_KV: *values = td, *flops = 6.0 * td, *bytes = 24.0 * td; break;
    case ROW_ADD_NORM2: *values = td, *flops = 5.0 * td, *bytes = 20.0 * td; break;
    case ROW_SILU: *values = tf, *flops = 5.0 * tf, *bytes = 12.0 * tf; break;
    case ROW_ADD: *values = td, *flops = td, *bytes = 12.0 * td; break;
    }
}

/* Row ops below this many values (64 rows of d_model 512: decode steps) stay on the caller,
 * where a pool round trip of a few µs would cost about what splitting them saves. */
#define KR_POOL_MIN_ROW_VALUES (1 << 15)

static void run_rows(const kr_exec *ex, row_task *t, row_op op) {
    t->op = op;
    double t0 = kr_prof_begin(ex->prof), values, flops, bytes;
    row_op_costs(t, &values, &flops, &bytes);
    run_region(ex, row_worker, t, values, KR_POOL_MIN_ROW_VALUES);
    kr_prof_end(ex->prof, KR_PROF_PART_NORM_ACT, t0, flops, bytes);
}

/* RMSNorm1 and the Q/K/V projections of one block over m rows: what every block does first. */
static kr_status block_qkv(const kr_exec *ex, row_task *rt, const kr_block_weights *bw, int m,
                           float *q, float *k, float *v, kr_error *err) {
    const kr_attn_weights *aw = &bw->attn;
    int d = rt->d;
    rt->bw = bw;
    run_rows(ex, rt, ROW_NORM1);
    const kr_linear *qkv[3] = { &aw->q, &aw->k, &aw->v };
    float *qkv_out[3] = { q, k, v };
    const int ld3[3] = { d, d, d };
    return kr_linear_run_multi(ex, 3, qkv, rt->h, m, d, qkv_out, ld3, err);
}

kr_status kr_transformer_qkv(const kr_block_weights *bw, int d, const kr_exec *ex, const float *x,
                             int m, float *q, float *k, float *v, kr_error *err) {
    if (m <= 0) return KR_OK;
    size_t mark = kr_arena_mark(ex->arena);
    float *h = KR_ARENA_NEW(ex->arena, float, (size_t)m *(size_t)d);
    kr_status st;
    if (!h) {
        st = kr_error_set(err, KR_ERR_NOMEM, "transformer: out of memory for %d rows", m);
    } else {
        /* The row op only reads x here (ROW_NORM1 writes h). */
        row_task rt = { .total = m, .d = d, .x = (float *)x, .h = h };
        st = block_qkv(ex, &rt, bw, m, q, k, v, err);
    }
    kr_arena_release(ex->arena, mark);
    return st;
}

static kr_status run_blocks(const kr_block_weights *blocks, int n_blocks, int layer0, int d,
                            int ff_dim, const kr_exec *ex, float *x, const kr_chunk *chunks,
                            int n_chunks, const kr_qkv_rows *first, kr_error *err) {
    int total = 0;
    kr_status st = kr_chunks_check(chunks, n_chunks, layer0 + n_blocks, &total, err);
    if (st != KR_OK) return st;
    if (n_blocks == 0 || total == 0) return KR_OK;

    size_t td = (size_t)total * (size_t)d, tf = (size_t)total * (size_t)ff_dim;
    size_t mark = kr_arena_mark(ex->arena);
    float *h = KR_ARENA_NEW(ex->arena, float, td);
    /* With the first block's projections given, their buffers serve every block. */
    float *q = first ? first->q : KR_ARENA_NEW(ex->arena, float, td);
    float *kt = first ? first->k : KR_ARENA_NEW(ex->arena, float, td);
    float *vt = first ? first->v : KR_ARENA_NEW(ex->arena, float, td);
    float *att = KR_ARENA_NEW(ex->arena, float, td);
    float *f1 = KR_ARENA_NEW(ex->arena, float, tf);
    float *f3 = KR_ARENA_NEW(ex->arena, float, tf);
    kr_attn_keys *keys = KR_ARENA_NEW(ex->arena, kr_attn_keys, total);
    if (!h || !q || !kt || !vt || !att || !f1 || !f3 || !keys) {
        st = kr_error_set(err, KR_ERR_NOMEM, "transformer: out of memory for %d rows", total);
        goto done;
    }
    /* Row i of a chunk sees the chunk's past, then its own rows 0..i (causal). */
    for (int c = 0, row = 0; c < n_chunks; c++)
        for (int i = 0; i < chunks[c].n; i++, row++) {
            kr_attn_keys *k = &keys[row];
            k->n = 0;
            for (int r = 0; r < chunks[c].n_past; r++)
                if (chunks[c].past[r].n > 0) k->ref[k->n++] = chunks[c].past[r];
            k->ref[k->n++] = (kr_kv_ref){ chunks[c].out, chunks[c].out_start, i + 1 };
        }

    row_task rt = { .chunks = chunks,
                    .n_chunks = n_chunks,
                    .total = total,
                    .d = d,
                    .ff_dim = ff_dim,
                    .x = x,
                    .h = h,
                    .q = q,
                    .kt = kt,
                    .vt = vt,
                    .f1 = f1,
                    .f3 = f3 };
    for (int b = 0; b < n_blocks; b++) {
        const kr_block_weights *bw = &blocks[b];
        const kr_attn_weights *aw = &bw->attn;
        int layer = layer0 + b;
        rt.bw = bw;
        rt.layer = layer;
        if ((b > 0 || !first) && (st = block_qkv(ex, &rt, bw, total, q, kt, vt, err)) != KR_OK)
            goto done;
        run_rows(ex, &rt, ROW_ROPE_KV);
        st = kr_attention_rows(ex, total, keys, layer, aw->n_heads, aw->head_dim, d, q, att, err);
        if (st != KR_OK) goto done;
        if ((st = kr_linear_run(ex, &aw->out, att, total, d, h, d, err)) != KR_OK) goto done;
        run_rows(ex, &rt, ROW_ADD_NORM2);
        const kr_linear *gate_up[2] = { &bw->w1, &bw->w3 };
        float *gate_up_out[2] = { f1, f3 };
        const int ldf[2] = { ff_dim, ff_dim };
        if ((st = kr_linear_run_multi(ex, 2, gate_up, h, total, d, gate_up_out, ldf, err)) != KR_OK)
            goto done;
        run_rows(ex, &rt, ROW_SILU);
        if ((st = kr_linear_run(ex, &bw->w2, f1, total, ff_dim, h, d, err)) != KR_OK) goto done;
        run_rows(ex, &rt, ROW_ADD);
    }
done:
    kr_arena_release(ex->arena, mark);
    return st;
}

kr_status kr_transformer_run(const kr_block_weights *blocks, int n_blocks, int layer0, int d,
                             int ff_dim, const kr_exec *ex, float *x, const kr_chunk *chunks,
                             int n_chunks, kr_error *err) {
    return run_blocks(blocks, n_blocks, layer0, d, ff_dim, ex, x, chunks, n_chunks, NULL, err);
}

kr_status kr_transformer_run_from_qkv(const kr_block_weights *blocks, int n_blocks, int layer0,
                                      int d, int ff_dim, const kr_exec *ex, float *x,
                                      const kr_chunk *chunks, int n_chunks,
                                      const kr_qkv_rows *first, kr_error *err) {
    return run_blocks(blocks, n_blocks, layer0, d, ff_dim, ex, x, chunks, n_chunks, first, err);
}
