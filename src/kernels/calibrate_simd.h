/*
 * kernels/calibrate_simd — the FMA peak probe (see calibrate.h), written once over
 * kernels/simd_width.h and compiled per ISA by calibrate_avx2.c and calibrate_avx512.c.
 */
#include "kernels/calibrate.h"
#include "kernels/simd_width.h"

/* 12 chains: latency 4 × up to 2 FMA pipes, with margin; fits the 16 ymm registers too. */
double VW_NAME(kr_fma_burn)(long iters) {
    volatile float seed = 1.0f;
    VW_V m = VW_SET1(0.999999f), c = VW_SET1(1e-7f);
    VW_V a[12];
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) a[i] = VW_SET1(seed + (float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = VW_FMA(a[i], m, c);
    }
    VW_V s = a[0];
#pragma GCC unroll 12
    for (int i = 1; i < 12; i++) s = VW_ADD(s, a[i]);
    seed = VW_HSUM(s); /* keeps the chains live */
    return 2.0 * (double)VW_W * 12.0 * (double)iters;
}
