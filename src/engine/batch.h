/*
 * engine/batch — the rows of one engine step: each group's next piece of work (a prefill chunk,
 * a generation step's window rows, the decode of its paths), planned within the rows the
 * scheduler grants it, as chunks of one predictor batch and one decoder batch (model/
 * transformer.h: a chunk attends to its past refs, then causally to itself), and the
 * (group, path) pairs to sample once the predictor has run. The step (engine/generate.c) runs
 * what the planner builds; nothing is computed here.
 */
#ifndef KR_ENGINE_BATCH_H
#define KR_ENGINE_BATCH_H

#include <stdint.h>

#include "engine/sequence.h"

/* Rows per forward pass. Chunks run in order in slices of at most this many rows (a chunk
 * larger than that alone), which bounds activation memory without changing a number: a
 * chunk only reads KV rows that earlier chunks have fully written, and kernels are
 * row-deterministic. */
#define KR_FORWARD_MAX_ROWS 1024

/* What the rows of a chunk are for once computed. */
enum kr_chunk_kind {
    KR_CHUNK_CONTEXT = 0, /* K/V only (a prefill piece, re-run history, a piece of a path) */
    KR_CHUNK_PREFILL_LAST, /* the initial window's last rows: logits for every path */
    KR_CHUNK_PATH_LAST, /* a path's window end: its logits */
    KR_CHUNK_DEC_CONTEXT, /* decoder K/V of a final window's history */
    KR_CHUNK_DEC_PATH /* decoded candles of a path's rows */
};

typedef struct kr_batch {
    kr_arena *arena;
    kr_chunk *chunks;
    kr_seq **chunk_group;
    int *chunk_kind, *chunk_path;
    int *chunk_first; /* KR_CHUNK_DEC_PATH: index among the path's generated rows of its first row
                         (negative for history rows of a naive window) */
    int *chunk_last; /* batch row of the chunk's last row */
    int n_chunks, cap_chunks;
    int32_t *s1, *s2;
    float *stamps;
    const float **stage_keep; /* per row: its first-stage record, or NULL */
    float **stage_save; /* per row: where to record its first stage, or NULL */
    int has_first_stage_records; /* some row keeps or saves a record */
    int rows, cap_rows;
} kr_batch;

/* The (group, path) pairs to sample this step. */
typedef struct kr_ready {
    kr_seq **group;
    int *path;
    int n, cap;
} kr_ready;

/* Rows of work a group may still take this step: its budget, and at least one unit. */
typedef struct kr_allowance {
    int64_t left;
    int used_any;
} kr_allowance;

/* Appends the (group, path) pair to r (arena-backed growth). */
kr_status kr_ready_add(kr_ready *r, kr_arena *arena, kr_seq *g, int path, kr_error *err);

/* PREFILL: the group's next prefill chunk, window rows [prefilled, prefilled + n). */
kr_status kr_batch_plan_prefill(kr_batch *b, kr_seq *g, kr_allowance *a, kr_error *err);
/* GENERATE: the rows that bring generation step i's window up to date, path by path, within
 * the allowance; paths whose window end is computed here go to `ready`. */
kr_status kr_batch_plan_generate(kr_batch *b, kr_ready *ready, kr_arena *arena, kr_seq *g,
                                 kr_allowance *a, kr_error *err);
/* DECODE: the decoder rows of the group's final windows (its history context once, then each
 * path's rows), within the allowance. */
kr_status kr_batch_plan_decode(const kr_engine *eng, kr_batch *b, kr_seq *g,
                               const kr_prefix_hooks *hooks, kr_allowance *a, kr_error *err);

#endif
