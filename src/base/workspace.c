/* base/workspace — see workspace.h. */
#include "base/workspace.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

#define ALIGN 64
#define DEFAULT_BYTES ((size_t)1 << 20)

typedef struct chunk {
    unsigned char *base;
    size_t size, used;
} chunk;

/* chunks[0] is the main block; chunks above it exist only during a spill. The arena is a
 * stack: `top` = bytes in use summed over chunks, which is also what a mark records. */
struct kr_arena {
    chunk *chunks;
    int n, cap;
    size_t top, high_water;
    size_t spill_bytes; /* space taken by the chunks of the current spill, waste included */
    int64_t spills, grows;
};

static size_t round_up(size_t n) { return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

static int push_chunk(kr_arena *a, size_t size) {
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 4;
        chunk *c = realloc(a->chunks, (size_t)cap * sizeof *c);
        if (!c) return 0;
        a->chunks = c;
        a->cap = cap;
    }
    void *p = NULL;
    if (posix_memalign(&p, ALIGN, size) != 0) return 0;
    a->chunks[a->n++] = (chunk){ p, size, 0 };
    return 1;
}

kr_status kr_arena_create(size_t bytes, kr_arena **out, kr_error *err) {
    kr_arena *a = calloc(1, sizeof *a);
    if (!a || !push_chunk(a, round_up(bytes ? bytes : DEFAULT_BYTES))) {
        if (a) free(a->chunks);
        free(a);
        return kr_error_set(err, KR_ERR_NOMEM, "workspace: out of memory for %zu bytes", bytes);
    }
    *out = a;
    return KR_OK;
}

void kr_arena_free(kr_arena *a) {
    if (!a) return;
    for (int i = 0; i < a->n; i++) free(a->chunks[i].base);
    free(a->chunks);
    free(a);
}

void *kr_arena_alloc(kr_arena *a, size_t bytes) {
    size_t b = round_up(bytes ? bytes : 1);
    chunk *c = &a->chunks[a->n - 1];
    if (c->size - c->used < b) {
        /* Spill: a chunk at least as large as the main block, so a run of allocations that
         * overflow together share it. What was left of the current chunk is wasted until the
         * release, and counted in the high-water mark so consolidation covers it. */
        size_t size = b > a->chunks[0].size ? b : a->chunks[0].size;
        a->spill_bytes += c->size - c->used;
        if (!push_chunk(a, size)) return NULL;
        a->spills++;
        c = &a->chunks[a->n - 1];
    }
    void *p = c->base + c->used;
    c->used += b;
    a->top += b;
    size_t hw = a->top + a->spill_bytes;
    if (hw > a->high_water) a->high_water = hw;
    return p;
}

size_t kr_arena_mark(const kr_arena *a) { return a->top; }

void kr_arena_release(kr_arena *a, size_t mark) {
    if (mark > a->top) return;
    size_t drop = a->top - mark;
    while (drop > 0) {
        chunk *c = &a->chunks[a->n - 1];
        size_t d = drop < c->used ? drop : c->used;
        c->used -= d;
        drop -= d;
        if (c->used == 0 && a->n > 1) {
            free(c->base);
            a->n--;
        }
    }
    a->top = mark;
    if (a->n == 1) a->spill_bytes = 0;
    if (mark == 0 && a->high_water > a->chunks[0].size) {
        /* Settle at the demand seen, with a margin, so the next step of that size fits. */
        size_t want = round_up(a->high_water + a->high_water / 4);
        void *p = NULL;
        if (posix_memalign(&p, ALIGN, want) == 0) {
            free(a->chunks[0].base);
            a->chunks[0] = (chunk){ p, want, 0 };
            a->grows++;
        }
    }
}

void kr_arena_get_stats(const kr_arena *a, kr_arena_stats *st) {
    memset(st, 0, sizeof *st);
    if (!a) return;
    st->capacity = a->chunks[0].size;
    st->high_water = a->high_water;
    st->in_use = a->top;
    st->spills = a->spills;
    st->grows = a->grows;
}

kr_status kr_exec_create(int n_threads, size_t arena_bytes, kr_exec **out, kr_error *err) {
    kr_exec *ex = calloc(1, sizeof *ex);
    if (!ex) return kr_error_set(err, KR_ERR_NOMEM, "workspace: out of memory");
    kr_status st = kr_pool_create(n_threads, &ex->pool, err);
    if (st == KR_OK) st = kr_arena_create(arena_bytes, &ex->arena, err);
    if (st != KR_OK) {
        kr_exec_free(ex);
        return st;
    }
    *out = ex;
    return KR_OK;
}

void kr_exec_free(kr_exec *ex) {
    if (!ex) return;
    kr_pool_free(ex->pool);
    kr_arena_free(ex->arena);
    free(ex);
}
