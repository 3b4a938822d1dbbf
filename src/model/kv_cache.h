/*
 * model/kv_pool — reference-counted fixed-size blocks of KV memory (see transformer.h for
 * what a block holds). A block is freed when its last holder drops it, whichever thread that
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
#ifndef KR_MODEL_KV_POOL_H
#define KR_MODEL_KV_POOL_H

#include <stdatomic.h>
#include <stddef.h>

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

#endif
