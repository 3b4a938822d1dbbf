/*
 * model/kv_pool — reference-counted fixed-size blocks of KV memory (see transformer.h for
 * what a block holds). A block is freed when its last holder drops it, whichever thread that
 * is: the scheduler frees finished groups while HTTP threads may drop prefixes they shared,
 * so counts are atomic and the free lists take a mutex.
 *
 * Freed blocks are kept on a free list per payload size (one per store shape in practice)
 * up to a bounded total, because a block of a real model is large enough that malloc would
 * otherwise map and unmap it on every request.
 */
#ifndef KR_MODEL_KV_POOL_H
#define KR_MODEL_KV_POOL_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct kr_kv_block {
    atomic_int refs;
    size_t bytes; /* payload */
    struct kr_kv_block *next; /* free list link */
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

#endif
