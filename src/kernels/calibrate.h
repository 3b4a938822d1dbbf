/*
 * kernels/calibrate — machine-peak probes for benches and tuning (not used by inference).
 *
 * kr_fma_burn runs independent FMA chains with the given variant's widest vectors, enough of
 * them to hide FMA latency, so timing it gives the core's arithmetic peak that GEMM speed is
 * judged against. Kept here so ISA code stays inside kernels/.
 */
#ifndef KR_KERNELS_CALIBRATE_H
#define KR_KERNELS_CALIBRATE_H

#include "kernels/kernels.h"

/* Runs `iters` rounds of independent FMAs on `isa` (must be supported); returns the number
 * of floating-point operations done (2 per lane per FMA). Thread-safe. */
double kr_fma_burn(kr_isa isa, long iters);

/* Per-ISA bodies (dispatch through kr_fma_burn). */
double kr_fma_burn_scalar(long iters);
double kr_fma_burn_avx2(long iters);
double kr_fma_burn_avx512(long iters);

#endif
