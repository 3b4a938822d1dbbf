/*
 * base/profile — the step profile's accumulator: wall time, FLOPs, bytes and calls per part
 * of a forward pass (GEMM, attention, norms/activations, sampling, tokenizer encode/decode),
 * filled by the model layer around each kernel call and read by the engine
 * (kr_step_profile in kronos.h has the same parts).
 *
 * A context owns one and hangs it on its kr_exec; NULL turns every probe into a branch. A
 * probe is two monotonic-clock reads (vDSO, ~20 ns each) around a call that takes
 * microseconds to milliseconds, so it stays on by default (the overhead is measured in
 * bench/results/speed-2026-12-01.md). Only the thread driving the exec writes it.
 */
#ifndef KR_BASE_PROFILE_H
#define KR_BASE_PROFILE_H

#include <stdint.h>
#include <time.h>

/* Parts, numbered as kr_profile_part in kronos.h. */
enum {
    KR_PROF_PART_GEMM = 0,
    KR_PROF_PART_ATTENTION,
    KR_PROF_PART_NORM_ACT,
    KR_PROF_PART_SAMPLING,
    KR_PROF_PART_TOK_ENCODE,
    KR_PROF_PART_TOK_DECODE,
    KR_PROF_PART_COUNT
};

typedef struct kr_prof_entry {
    double seconds, flops, bytes;
    int64_t calls;
} kr_prof_entry;

typedef struct kr_prof {
    kr_prof_entry part[KR_PROF_PART_COUNT];
} kr_prof;

static inline double kr_prof_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Start of a probed call: a time stamp when profiling, else 0 (no clock read). */
static inline double kr_prof_begin(const kr_prof *p) { return p ? kr_prof_clock() : 0.0; }

/* End of a probed call started at t0. */
static inline void kr_prof_end(kr_prof *p, int part, double t0, double flops, double bytes) {
    if (!p) return;
    kr_prof_entry *e = &p->part[part];
    e->seconds += kr_prof_clock() - t0;
    e->flops += flops;
    e->bytes += bytes;
    e->calls++;
}

/* acc += b - a, part by part (what happened between two snapshots). */
void kr_prof_add_delta(kr_prof *acc, const kr_prof *a, const kr_prof *b);

#endif
