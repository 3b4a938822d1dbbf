/*
 * model/kv_cache — the KV cache: the K and V rows of every layer, in stores made of
 * reference-counted fixed-size blocks, so that paths forked from one prefill, windows taken
 * from the prefix cache (engine/prefix_cache.c) and re-runs share rows instead of copying them.
 *
 * Blocks. A block is freed when its last holder drops it, whichever thread that
 * is: the scheduler frees finished groups while HTTP threads may drop prefixes they shared,
 * so counts are atomic and the free lists take a mutex.
 *
 * Freed blocks are kept on a free list per payload size (one per store shape in practice),
 * because a block of a real model is large enough that malloc would otherwise map and unmap
 * it on every request, and the pages of a fresh one are faulted in and zeroed on first write
 * (measured: 8-15 % of a 64-path int8 forecast on a 2-vCPU Zen 5 KVM guest whose first touch
 * ran at ~1 GB/s; within the noise on an Intel guest at 3-5 GB/s). How much is kept follows the KV budgets of the live engines:
 *  - up to KR_KV_POOL_KEEP_FLOOR bytes always;
 *  - beyond that only while the pool's blocks in use and kept together stay within the sum of
 *    the reserved budgets (kr_kv_pool_keep_reserve), so keeping never makes the process hold
 *    more KV memory than its budgets already let it use;
 *  - a kept block beyond the floor goes back to the system once it has been free for
 *    KR_KV_POOL_DECAY_S seconds (kr_kv_pool_decay, called by the engines), so a burst does not
 *    pin its memory after it ends.
 */
#ifndef KR_MODEL_KV_CACHE_H
#define KR_MODEL_KV_CACHE_H

#include <stdatomic.h>
#include <stddef.h>

#include "kronos.h"

typedef struct kr_kv_block {
    atomic_int refs;
    size_t bytes; /* payload */
    struct kr_kv_block *next; /* free list link */
    double freed_at; /* kr_now_seconds() when it was put on a free list */
    unsigned char *data; /* payload, 64-byte aligned */
    struct kv_region *region; /* the huge-page region it was cut from, or NULL (malloc) */
} kr_kv_block;

/* A block of `bytes` payload with one reference, or NULL when out of memory. */
kr_kv_block *kr_kv_block_alloc(size_t bytes);
/* Takes one more reference. */
void kr_kv_block_ref(kr_kv_block *b);
/* Drops one reference; the block goes back to the pool at the last one. NULL is a no-op. */
void kr_kv_block_unref(kr_kv_block *b);
static inline int kr_kv_block_refs(const kr_kv_block *b) {
    return atomic_load((atomic_int *)&b->refs);
}

typedef struct kr_kv_pool_stats {
    long long blocks_used; /* blocks with at least one holder */
    long long bytes_used; /* their payload */
    long long blocks_free; /* kept on free lists for reuse */
    long long bytes_free;
} kr_kv_pool_stats;

/* Process-wide figures (every store of every model). */
void kr_kv_pool_get_stats(kr_kv_pool_stats *st);
/* Returns every kept free block to the system. */
void kr_kv_pool_trim(void);

/* Free bytes kept whatever the budgets (0 in AddressSanitizer builds, which keep no block so
 * that a use after the last release is caught). */
#define KR_KV_POOL_KEEP_FLOOR ((size_t)64 << 20)
/* Seconds a kept block beyond the floor may stay free. */
#define KR_KV_POOL_DECAY_S 5.0

/* An engine whose KV budget is `bytes` starts (reserve) or ends (release); the pool may keep
 * freed blocks while in-use + kept bytes fit in the sum of the reservations. A release gives
 * back at once what no longer fits. */
void kr_kv_pool_keep_reserve(size_t bytes);
void kr_kv_pool_keep_release(size_t bytes);
/* Returns to the system the kept blocks beyond the floor that have been free for at least
 * max_age_s seconds at time `now` (kr_now_seconds()), oldest first within each size class,
 * until the kept bytes are down to the floor. Cheap when nothing is above the floor. Returns the bytes given back. */
size_t kr_kv_pool_decay(double now, double max_age_s);
/* Whether kr_kv_pool_decay(now, max_age_s) would give anything back (a walk of the free lists,
 * no system call): lets a caller holding its own lock drop it only when there is work. */
int kr_kv_pool_decay_due(double now, double max_age_s);

/* Precision of the K/V rows a store holds (kr_model_params.kv_dtype).
 *   F32   rows as computed.
 *   BF16  each value rounded to bf16 (round to nearest even, kr_f32_to_bf16): half the bytes.
 *   INT8  symmetric per group of `group` consecutive values of a row: scale = max|x| / 127,
 *         q = round-to-nearest-even(x / scale) clamped to ±127, x ≈ q · scale (scale 0 for an
 *         all-zero group): a quarter of the bytes plus one f32 scale per group.
 * Conversion is row-local, so a row reads back the same whatever call wrote it or which rows
 * share the store: cached decode still equals full recomputation bit for bit within a dtype. */
typedef enum kr_kv_dtype { KR_KV_F32 = 0, KR_KV_BF16, KR_KV_INT8 } kr_kv_dtype;

/* Rows per KV block. A store is a table of blocks: row r of layer l lives in block r / B at
 * (l, r % B), so a block holds B consecutive rows of every layer of the store. Blocks are
 * reference counted (above): stores may share the blocks of a common prefix. */
#define KR_KV_BLOCK_ROWS 16

typedef struct kr_kv_store {
    int n_layers; /* layers stored (the predictor adds one for the s2 cross-attention) */
    int d; /* values per row (d_model) */
    int cap; /* rows per layer */
    kr_kv_dtype dtype;
    /* INT8: values per scale. It divides the head_dim of every layer using the store, so no
     * scale spans two heads: with the self-attention head_dim it is exactly per head there,
     * and finer on the predictor's dep layer, whose 4 heads are wider. */
    int group;
    /* Values from one row of a layer to the next within a block: d for BF16 and INT8; for F32
     * d rounded up to an odd number of 64-byte lines (kr_kv_f32_stride), which attention reads
     * in place, so that the rows of one head spread over every L1 set instead of a few. */
    int stride;
    int n_blocks; /* ceil(cap / KR_KV_BLOCK_ROWS) */
    kr_kv_block **blocks; /* [n_blocks], each held with one reference */
    size_t elt; /* bytes per stored value: 4 f32, 2 bf16, 1 int8 */
    /* Byte offsets in a block's payload: K values [n_layers][B][stride], then V values, then
     * (INT8) K scales [n_layers][B][d / group], then V scales. */
    size_t v_off, sk_off, sv_off, block_bytes;
} kr_kv_store;

/* An F32 store. */
kr_status kr_kv_store_init(kr_kv_store *s, int n_layers, int d, int cap, kr_error *err);
/* A store of any dtype; group (INT8 only, ignored otherwise) must divide d. All its blocks are
 * allocated here, so a store never fails later for want of memory. */
kr_status kr_kv_store_init_dtype(kr_kv_store *s, int n_layers, int d, int cap, kr_kv_dtype dtype,
                                 int group, kr_error *err);
/* Bytes the blocks of such a store take (what kr_kv_store_bytes says once it is initialised),
 * without allocating them; 0 for a shape kr_kv_store_init_dtype refuses. */
size_t kr_kv_store_bytes_for(int n_layers, int d, int cap, kr_kv_dtype dtype, int group);
/* Drops the store's block references (a block shared with another store lives on). */
void kr_kv_store_release(kr_kv_store *s);
/* Bytes of the blocks the store holds (rows and scales, whole blocks, shared ones included):
 * what the KV budget is charged. 0 when released. */
size_t kr_kv_store_bytes(const kr_kv_store *s);
/* Bytes of the blocks only this store holds (one reference): a block shared with another
 * store is left to that store's account. */
size_t kr_kv_store_unshared_bytes(const kr_kv_store *s);
/* Makes rows [0, rows) of dst those of src: whole blocks by reference (dst drops its own),
 * a partial last block by copy. Stores must have the same shape and dtype. Shared rows are
 * read-only from then on in both stores: rows of a shared block must not be written. */
kr_status kr_kv_store_share_prefix(kr_kv_store *dst, const kr_kv_store *src, int rows,
                                   kr_error *err);
/* dst = rows [0, rows) of src by reference: its first ceil(rows / block) blocks, each with a
 * reference taken (a view for a cache entry that keeps only a window's head; read-only, as
 * shared rows are). dst must be zeroed; release it as any store. */
kr_status kr_kv_store_view_head(kr_kv_store *dst, const kr_kv_store *src, int rows, kr_error *err);
/* Holders of the block containing row `row` (tests, diagnostics). */
int kr_kv_store_row_refs(const kr_kv_store *s, int row);
/* Stores K and V rows [row, row + n_rows) of a layer from k_rows / v_rows (row stride d),
 * converting to the store's dtype. */
void kr_kv_store_write(kr_kv_store *s, int layer, int row, const float *k_rows, const float *v_rows,
                       int n_rows);
/* The f32 values of rows [row, row + n_rows) of a layer into k_out / v_out (row stride d):
 * a copy for F32, the dequantised rows otherwise (the values attention uses). */
void kr_kv_store_read(const kr_kv_store *s, int layer, int row, int n_rows, float *k_out,
                      float *v_out);

/* Row stride (in floats) of f32 rows of d values that are read in place by attention: d
 * rounded up to whole 64-byte lines, plus one line when that count is even. Rows a power of
 * two bytes apart (d_model 512: 2 KB) all start in the same few L1 sets, so a block of keys
 * evicts itself before the next query reads it; an odd line count walks every set. */
static inline int kr_kv_f32_stride(int d) {
    int lines = (d + 15) / 16;
    return (lines % 2 ? lines : lines + 1) * 16;
}

/* Where one row of a layer lives: which = 0 for K, 1 for V. Rows are evenly spaced within a
 * block only: row + 1 is at the returned address + stride values when row + 1 is in the same
 * block (row % KR_KV_BLOCK_ROWS < KR_KV_BLOCK_ROWS - 1), elsewhere otherwise. */
static inline void *kr_kv_row(const kr_kv_store *s, int which, int layer, int row) {
    size_t i = (size_t)layer * KR_KV_BLOCK_ROWS + (size_t)(row % KR_KV_BLOCK_ROWS);
    return s->blocks[row / KR_KV_BLOCK_ROWS]->data + (which ? s->v_off : 0) +
           i * (size_t)s->stride * s->elt;
}
/* INT8 stores: the d / group scales of one row (which as above). */
static inline float *kr_kv_row_scales(const kr_kv_store *s, int which, int layer, int row) {
    size_t i = (size_t)layer * KR_KV_BLOCK_ROWS + (size_t)(row % KR_KV_BLOCK_ROWS);
    return (float *)(s->blocks[row / KR_KV_BLOCK_ROWS]->data + (which ? s->sv_off : s->sk_off)) +
           i * (size_t)(s->d / s->group);
}
/* F32 stores: one row in place (see kr_kv_row for its neighbours, s->stride apart). */
static inline float *kr_kv_k(const kr_kv_store *s, int layer, int row) {
    return (float *)kr_kv_row(s, 0, layer, row);
}
static inline float *kr_kv_v(const kr_kv_store *s, int layer, int row) {
    return (float *)kr_kv_row(s, 1, layer, row);
}

/* Rows [start, start+n) of a store (same rows in every layer). */
typedef struct kr_kv_ref {
    const kr_kv_store *store;
    int start, n;
} kr_kv_ref;

#endif
