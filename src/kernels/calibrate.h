/*
 * kernels/calibrate — machine-peak probes for benches and tuning (not used by inference).
 *
 * kr_fma_burn runs independent FMA chains with the given variant's widest vectors, enough of
 * them to hide FMA latency, so timing it gives the core's arithmetic peak that GEMM speed is
 * judged against. Kept here so ISA code stays inside kernels/.
 */
#ifndef KR_KERNELS_CALIBRATE_H
#define KR_KERNELS_CALIBRATE_H

#include "base/threadpool.h"
#include "kernels/kernels.h"

/* Runs `iters` rounds of independent FMAs on `isa` (must be supported); returns the number
 * of floating-point operations done (2 per lane per FMA). Thread-safe. */
double kr_fma_burn(kr_isa isa, long iters);

/* The machine's f32 FMA peak in GFLOP/s on every thread of `pool` (NULL: the caller alone)
 * with isa's widest vectors: the best of `rounds` (>= 1) timed bursts of about 10 ms each,
 * so a burst that lost its core to another process does not lower the figure (the second
 * best from 3 rounds on, so one clock glitch does not raise it); 0 when isa is not
 * supported. What the step profile and the benches rate their parts against. */
double kr_fma_peak_gflops(kr_pool *pool, kr_isa isa, int rounds);

/* The machine's sustained read bandwidth from memory in GB/s with every thread of `pool`
 * (NULL: the caller alone) reading its own part of a buffer far larger than any last-level
 * cache (256 MiB, allocated and touched here, freed before returning): the second best of
 * `rounds` (>= 3) passes. What weight-streaming decode steps are judged against. 0 when the
 * buffer cannot be allocated. */
double kr_read_bandwidth_gbs(kr_pool *pool, int rounds);

/* Per-ISA bodies (dispatch through kr_fma_burn). */
double kr_fma_burn_scalar(long iters);
double kr_fma_burn_avx2(long iters);
double kr_fma_burn_avx512(long iters);

#endif
