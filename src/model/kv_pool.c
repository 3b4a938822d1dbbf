/* model/kv_pool — see kv_pool.h. */
#include "model/kv_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The header is padded to a cache line so the payload that follows keeps 64-byte alignment. */
#define HEADER 64
_Static_assert(sizeof(kr_kv_block) <= HEADER, "kv block header exceeds its padding");

/* A handful of shapes live at once (predictor and tokenizer stores of one or two models); a
 * size that finds no class slot is simply not kept. */
#define CLASSES 8
/* Free blocks kept beyond this are returned to the system, so a burst does not pin memory.
 * Under AddressSanitizer none are kept, so a block used after its last release is caught. */
#if defined(__SANITIZE_ADDRESS__)
#define KEEP_BYTES ((size_t)0)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KEEP_BYTES ((size_t)0)
#endif
#endif
#ifndef KEEP_BYTES
#define KEEP_BYTES ((size_t)64 << 20)
#endif

typedef struct size_class {
    size_t bytes;
    kr_kv_block *head;
} size_class;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static size_class g_class[CLASSES];
static size_t g_free_bytes;
static long long g_free_blocks;
static atomic_llong g_used_blocks, g_used_bytes;

kr_kv_block *kr_kv_block_alloc(size_t bytes) {
    kr_kv_block *b = NULL;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < CLASSES; i++)
        if (g_class[i].bytes == bytes && g_class[i].head) {
            b = g_class[i].head;
            g_class[i].head = b->next;
            g_free_bytes -= bytes;
            g_free_blocks--;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    if (!b) {
        void *mem = NULL;
        if (posix_memalign(&mem, HEADER, HEADER + bytes) != 0) return NULL;
        b = mem;
        b->bytes = bytes;
        b->data = (unsigned char *)mem + HEADER;
    }
    b->next = NULL;
    atomic_store(&b->refs, 1);
    atomic_fetch_add(&g_used_blocks, 1);
    atomic_fetch_add(&g_used_bytes, (long long)bytes);
    return b;
}

void kr_kv_block_ref(kr_kv_block *b) { atomic_fetch_add(&b->refs, 1); }

void kr_kv_block_unref(kr_kv_block *b) {
    if (!b || atomic_fetch_sub(&b->refs, 1) != 1) return;
    atomic_fetch_sub(&g_used_blocks, 1);
    atomic_fetch_sub(&g_used_bytes, (long long)b->bytes);
    pthread_mutex_lock(&g_lock);
    if (g_free_bytes + b->bytes <= KEEP_BYTES) {
        size_class *slot = NULL;
        for (int i = 0; i < CLASSES && !slot; i++)
            if (g_class[i].bytes == b->bytes) slot = &g_class[i];
        for (int i = 0; i < CLASSES && !slot; i++)
            if (!g_class[i].head) {
                slot = &g_class[i];
                slot->bytes = b->bytes;
            }
        if (slot) {
            b->next = slot->head;
            slot->head = b;
            g_free_bytes += b->bytes;
            g_free_blocks++;
            b = NULL;
        }
    }
    pthread_mutex_unlock(&g_lock);
    free(b);
}

void kr_kv_pool_get_stats(kr_kv_pool_stats *st) {
    memset(st, 0, sizeof *st);
    st->blocks_used = atomic_load(&g_used_blocks);
    st->bytes_used = atomic_load(&g_used_bytes);
    pthread_mutex_lock(&g_lock);
    st->blocks_free = g_free_blocks;
    st->bytes_free = (long long)g_free_bytes;
    pthread_mutex_unlock(&g_lock);
}

void kr_kv_pool_trim(void) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < CLASSES; i++) {
        while (g_class[i].head) {
            kr_kv_block *b = g_class[i].head;
            g_class[i].head = b->next;
            free(b);
        }
        g_class[i].bytes = 0;
    }
    g_free_bytes = 0;
    g_free_blocks = 0;
    pthread_mutex_unlock(&g_lock);
}
