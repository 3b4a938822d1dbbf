/*
 * base/workspace — where a forward pass gets its buffers: a stack-like bump arena, and the
 * execution handle (thread pool + arena) every compute function takes.
 *
 * A context creates its arena once, sized from its batch limits, so the steady-state decode
 * loop never calls malloc: functions take a mark, allocate, and release back to the mark.
 * When a step needs more than the arena holds (a batch larger than the sizing foresaw), the
 * arena spills into extra chunks for that step and, once released to empty, replaces them
 * with one block of the high-water size: demand settles after the first large step and the
 * spill is counted (kr_arena_stats.spills) so it is visible, not silent.
 *
 * One thread uses an arena at a time (the one driving the pool); pool workers only read and
 * write buffers they were handed.
 */
#ifndef KR_BASE_WORKSPACE_H
#define KR_BASE_WORKSPACE_H

#include <stddef.h>
#include <stdint.h>

#include "base/profile.h"
#include "base/threadpool.h"
#include "kronos/status.h"

typedef struct kr_arena kr_arena;

/* An arena with `bytes` of room (0: a small default); caller owns *out. */
KR_PRIVATE kr_status kr_arena_create(size_t bytes, kr_arena **out, kr_error *err);
KR_PRIVATE void kr_arena_free(kr_arena *a);
/* `bytes` of 64-byte-aligned memory valid until released past it; NULL only when the arena
 * had to spill and the system is out of memory. */
void *kr_arena_alloc(kr_arena *a, size_t bytes);
/* The current top, to release back to. */
size_t kr_arena_mark(const kr_arena *a);
/* Frees everything allocated since `mark`. Releasing to 0 after a spill consolidates. */
void kr_arena_release(kr_arena *a, size_t mark);

typedef struct kr_arena_stats {
    size_t capacity; /* bytes of the main block */
    size_t high_water; /* most bytes in use at once */
    size_t in_use;
    int64_t spills; /* allocations that did not fit and took an extra chunk */
    int64_t grows; /* times the main block was replaced by a larger one */
} kr_arena_stats;
void kr_arena_get_stats(const kr_arena *a, kr_arena_stats *st);

#define KR_ARENA_NEW(arena, type, n) ((type *)kr_arena_alloc((arena), sizeof(type) * (size_t)(n)))

/* What a compute function runs on: its thread pool (NULL: the caller alone), its arena and
 * the step profile its kernel calls add to (NULL: not profiled; profile.h). */
typedef struct kr_exec {
    kr_pool *pool;
    kr_arena *arena;
    kr_prof *prof;
} kr_exec;

/* An exec with its own pool of n_threads (<= 0: online CPUs; 1: no workers) and arena
 * (for tests and tools that compute outside a context). Free with kr_exec_free. */
kr_status kr_exec_create(int n_threads, size_t arena_bytes, kr_exec **out, kr_error *err);
void kr_exec_free(kr_exec *ex);

#endif
