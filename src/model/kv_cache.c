/* model/kv_cache — see kv_cache.h: the block pool, then the stores over its blocks. */
#include "model/kv_cache.h"

#include "base/assert.h"
#include "base/error.h"
#include "base/timeutil.h"
#include "kernels/kernels.h"
#include "kernels/kv_convert.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A malloc'd block holds its header in front of the payload, padded to a cache line so the
 * payload keeps 64-byte alignment. A block cut from a region keeps its header apart (malloc),
 * so that allocating it touches none of its pages: they are faulted in by the first rows
 * written, which the transformer writes from every thread of the pool. Fresh pages are costly
 * where the memory comes from a hypervisor (measured on a 2-vCPU KVM guest: 0.41-0.45 GB/s of
 * first touch on one thread, 0.79 on two), and a store's blocks were all touched at once, on
 * one thread, by the header writes: 11-15 % of a 64-path forecast from the CLI. */
#define HEADER 64
_Static_assert(sizeof(kr_kv_block) <= HEADER, "kv block header exceeds its padding");

/* A handful of shapes live at once (predictor and tokenizer stores of one or two models); a
 * size that finds no class slot is simply not kept. */
#define CLASSES 8
/* Under AddressSanitizer no freed block is kept, so a block used after its last release is
 * caught. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifdef SANITIZED
#define KEEP_FLOOR ((size_t)0)
#define KEEP_WITHIN_BUDGET 0
#else
#define KEEP_FLOOR KR_KV_POOL_KEEP_FLOOR
#define KEEP_WITHIN_BUDGET 1
#endif

/* Blocks of at least REGION_MIN_BLOCK bytes are carved one after another from 2 MB-aligned
 * regions the kernel may back with transparent huge pages: a forecast writes its fresh KV
 * rows once, and on 4 KB pages every first touch was a fault (measured: 64 paths x 30 int8
 * steps of Kronos-small spent ~20 % of a cold forecast in page faults, ~0 % with blocks
 * already mapped). A region goes back to the system when its last block does; the block on a
 * free list keeps it. Sanitizer builds keep one allocation per block, so a use after the last
 * release stays visible to ASan. */
#define HUGE_PAGE ((size_t)2 << 20)
#define REGION_BYTES ((size_t)16 << 20)
#define REGION_MIN_BLOCK ((size_t)64 << 10)
#ifdef SANITIZED
#define USE_REGIONS 0
#else
#define USE_REGIONS 1
#endif

typedef struct kv_region {
    atomic_int live; /* blocks carved and not yet returned, + 1 while still being carved */
    void *map;
    size_t map_len;
} kv_region;

typedef struct size_class {
    size_t bytes;
    kr_kv_block *head;
} size_class;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static size_class g_class[CLASSES];
static size_t g_free_bytes;
static long long g_free_blocks;
static size_t g_keep_reserved; /* sum of the live engines' KV budgets */
static atomic_llong g_used_blocks, g_used_bytes;
static kv_region *g_carving; /* region new blocks are cut from (under g_lock) */
static size_t g_carve_off, g_carve_len;

static void region_release(kv_region *r) {
    if (atomic_fetch_sub(&r->live, 1) != 1) return;
    munmap(r->map, r->map_len);
    free(r);
}

/* A new region of at least `need` bytes, 2 MB-aligned, or NULL. */
static kv_region *region_map(size_t need) {
    size_t len =
        need > REGION_BYTES ? (need + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE : REGION_BYTES;
    kv_region *r = malloc(sizeof *r);
    if (!r) return NULL;
    /* Over-map by one huge page and cut the ends so the kept range starts on a 2 MB line. */
    unsigned char *raw =
        mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        free(r);
        return NULL;
    }
    uintptr_t start = ((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    size_t head = (size_t)(start - (uintptr_t)raw), tail = HUGE_PAGE - head;
    if (head) munmap(raw, head);
    if (tail) munmap((unsigned char *)start + len, tail);
#ifdef MADV_HUGEPAGE
    madvise((void *)start, len, MADV_HUGEPAGE); /* advice only: 4 KB pages still work */
#endif
    atomic_store(&r->live, 1);
    r->map = (void *)start;
    r->map_len = len;
    return r;
}

/* A block's payload of `bytes` from the carving region (a new one when it is full), 64-byte
 * aligned, its region in *region; NULL when none can be mapped. Called under g_lock. */
static void *region_carve(size_t bytes, kv_region **region) {
    size_t need = bytes;
    if (!g_carving || g_carve_off + need > g_carve_len) {
        kv_region *r = region_map(need);
        if (!r) return NULL;
        if (g_carving) region_release(g_carving);
        g_carving = r;
        g_carve_off = 0;
        g_carve_len = r->map_len;
    }
    void *mem = (unsigned char *)g_carving->map + g_carve_off;
    g_carve_off += (need + 63) / 64 * 64;
    atomic_fetch_add(&g_carving->live, 1);
    *region = g_carving;
    return mem;
}

/* Gives a block's memory back: to its region, or to malloc. A region stays mapped while any
 * of its blocks lives, so the pages of a block returned early are dropped now (the whole pages
 * inside it): otherwise blocks freed out of order — prefixes dropped by the cache while other
 * requests run — would keep resident memory the pool believes it has returned. */
static void block_free(kr_kv_block *b) {
    if (!b) return;
    kv_region *r = b->region;
    if (!r) {
        free(b);
        return;
    }
    const uintptr_t page = 4096;
    uintptr_t lo = ((uintptr_t)b->data + page - 1) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)b->data + b->bytes) & ~(page - 1);
    if (hi > lo && atomic_load(&r->live) > 1) madvise((void *)lo, hi - lo, MADV_DONTNEED);
    region_release(r);
    free(b); /* the header, kept apart from a region's payload */
}

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
    void *mem = NULL;
    kv_region *region = NULL;
    if (!b && USE_REGIONS && bytes >= REGION_MIN_BLOCK) mem = region_carve(bytes, &region);
    pthread_mutex_unlock(&g_lock);
    if (!b) {
        if (mem) { /* a region's payload: the header apart, no page of it touched */
            if (!(b = malloc(sizeof *b))) {
                region_release(region); /* the carved bytes stay unused until the region goes */
                return NULL;
            }
            b->data = mem;
        } else {
            if (posix_memalign(&mem, HEADER, HEADER + bytes) != 0) return NULL;
            b = mem;
            b->data = (unsigned char *)mem + HEADER;
        }
        b->bytes = bytes;
        b->region = region;
    }
    b->next = NULL;
    atomic_store(&b->refs, 1);
    atomic_fetch_add(&g_used_blocks, 1);
    atomic_fetch_add(&g_used_bytes, (long long)bytes);
    return b;
}

/* A reference is taken from a live one only: a block at 0 is on a free list or gone. */
void kr_kv_block_ref(kr_kv_block *b) {
    const int before = atomic_fetch_add(&b->refs, 1);
    KR_ASSERT(before >= 1);
    (void)before;
}

/* Whether `bytes` more free bytes may be kept (g_lock held, g_used_bytes already without
 * them): within the floor, or with everything the pool holds inside the reserved budgets. */
static int may_keep(size_t bytes) {
    size_t kept = g_free_bytes + bytes;
    if (kept <= KEEP_FLOOR) return 1;
    if (!KEEP_WITHIN_BUDGET) return 0;
    long long used = atomic_load(&g_used_bytes);
    return (size_t)(used > 0 ? used : 0) + kept <= g_keep_reserved;
}

void kr_kv_block_unref(kr_kv_block *b) {
    if (!b) return;
    const int before = atomic_fetch_sub(&b->refs, 1);
    KR_ASSERT(before >= 1); /* one release per reference taken */
    if (before != 1) return;
    atomic_fetch_sub(&g_used_blocks, 1);
    atomic_fetch_sub(&g_used_bytes, (long long)b->bytes);
    double now = kr_now_seconds(); /* outside the lock */
    pthread_mutex_lock(&g_lock);
    if (may_keep(b->bytes)) {
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
            b->freed_at = now;
            slot->head = b;
            g_free_bytes += b->bytes;
            g_free_blocks++;
            b = NULL;
        }
    }
    pthread_mutex_unlock(&g_lock);
    block_free(b);
}

/* Detaches kept blocks, oldest first, until the kept bytes are down to `target`, taking only
 * blocks freed at or before `before`; returns them as a chain to free outside the lock. A free
 * list is pushed and popped at its head, so each list runs from newest to oldest and the
 * blocks old enough are a suffix of it. Called under g_lock. */
static kr_kv_block *shed_locked(size_t target, double before) {
    kr_kv_block *out = NULL;
    for (int i = 0; i < CLASSES && g_free_bytes > target; i++) {
        size_class *c = &g_class[i];
        kr_kv_block **old = &c->head;
        while (*old && (*old)->freed_at > before) old = &(*old)->next;
        /* Of the suffix old enough, keep the newest part the target leaves room for. */
        size_t suffix = 0;
        for (kr_kv_block *b = *old; b; b = b->next) suffix += b->bytes;
        size_t excess = g_free_bytes - target;
        size_t keep = suffix > excess ? suffix - excess : 0;
        while (*old && keep >= (*old)->bytes) {
            keep -= (*old)->bytes;
            old = &(*old)->next;
        }
        while (*old) {
            kr_kv_block *b = *old;
            *old = b->next;
            g_free_bytes -= b->bytes;
            g_free_blocks--;
            b->next = out;
            out = b;
        }
        if (!c->head) c->bytes = 0;
    }
    return out;
}

static size_t free_chain(kr_kv_block *b) {
    size_t bytes = 0;
    while (b) {
        kr_kv_block *next = b->next;
        bytes += b->bytes;
        block_free(b);
        b = next;
    }
    return bytes;
}

void kr_kv_pool_keep_reserve(size_t bytes) {
    pthread_mutex_lock(&g_lock);
    g_keep_reserved += bytes;
    pthread_mutex_unlock(&g_lock);
}

void kr_kv_pool_keep_release(size_t bytes) {
    pthread_mutex_lock(&g_lock);
    g_keep_reserved -= bytes < g_keep_reserved ? bytes : g_keep_reserved;
    long long used = atomic_load(&g_used_bytes);
    size_t in_use = (size_t)(used > 0 ? used : 0);
    size_t fits = g_keep_reserved > in_use ? g_keep_reserved - in_use : 0;
    size_t target = fits > KEEP_FLOOR ? fits : KEEP_FLOOR;
    kr_kv_block *gone = shed_locked(target, 1e300);
    pthread_mutex_unlock(&g_lock);
    free_chain(gone);
}

int kr_kv_pool_decay_due(double now, double max_age_s) {
    int due = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < CLASSES && !due && g_free_bytes > KEEP_FLOOR; i++) {
        const kr_kv_block *oldest = g_class[i].head;
        while (oldest && oldest->next) oldest = oldest->next;
        due = oldest && oldest->freed_at <= now - max_age_s;
    }
    pthread_mutex_unlock(&g_lock);
    return due;
}

size_t kr_kv_pool_decay(double now, double max_age_s) {
    pthread_mutex_lock(&g_lock);
    kr_kv_block *gone = g_free_bytes > KEEP_FLOOR ? shed_locked(KEEP_FLOOR, now - max_age_s) : NULL;
    pthread_mutex_unlock(&g_lock);
    return free_chain(gone);
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
            block_free(b);
        }
        g_class[i].bytes = 0;
    }
    if (g_carving) region_release(g_carving);
    g_carving = NULL;
    g_carve_off = g_carve_len = 0;
    g_free_bytes = 0;
    g_free_blocks = 0;
    pthread_mutex_unlock(&g_lock);
}

/* ---------------------------------------------------------------- stores */

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
    /* Rows of a block shared with another store are read-only (kr_kv_store_share_prefix). */
    KR_ASSERT(layer >= 0 && layer < s->n_layers && row >= 0 && n_rows >= 0 &&
              row + n_rows <= s->cap);
    KR_ASSERT(n_rows == 0 || kr_kv_block_refs(s->blocks[row / KR_KV_BLOCK_ROWS]) == 1);
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
    KR_ASSERT(layer >= 0 && layer < s->n_layers && row >= 0 && n_rows >= 0 &&
              row + n_rows <= s->cap);
    size_t d = (size_t)s->d;
    for (int done = 0; done < n_rows;) {
        int r = row + done, n = KVB - r % KVB;
        if (n > n_rows - done) n = n_rows - done;
        read_rows(s, layer, r, n, k_out + (size_t)done * d, v_out + (size_t)done * d);
        done += n;
    }
}
