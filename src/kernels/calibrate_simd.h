/*
 * kernels/calibrate_simd — the FMA peak probe (see calibrate.h), written once over
 * kernels/simd_map.h and compiled per ISA by calibrate_avx2.c and calibrate_avx512.c.
 */
#include "kernels/calibrate.h"
#include "kernels/simd_map.h"

/* 12 chains: latency 4 × up to 2 FMA pipes, with margin; fits the 16 ymm registers too. */
double KR_SIMD(kr_fma_burn)(long iters) {
    volatile float seed = 1.0f;
    kr_vf m = kr_v_set1(0.999999f), c = kr_v_set1(1e-7f);
    kr_vf a[12];
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) a[i] = kr_v_set1(seed + (float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = kr_v_fmadd(a[i], m, c);
    }
    kr_vf s = a[0];
#pragma GCC unroll 12
    for (int i = 1; i < 12; i++) s = kr_v_add(s, a[i]);
    seed = kr_v_hsum(s); /* keeps the chains live */
    return 2.0 * (double)KR_VL * 12.0 * (double)iters;
}
