/*
 * kernels/calibrate — see calibrate.h. Scalar body and the ISA switch.
 */
#include "kernels/calibrate.h"

/* Eight chains of multiply-add; volatile seeds keep the compiler from folding them. */
double kr_fma_burn_scalar(long iters) {
    volatile float seed = 1.0f, mul = 0.999999f;
    float a[8], m = mul;
    for (int i = 0; i < 8; i++) a[i] = seed + (float)i;
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < 8; i++) a[i] = a[i] * m + 1e-7f;
    float s = 0.0f;
    for (int i = 0; i < 8; i++) s += a[i];
    seed = s;
    return 2.0 * 8.0 * (double)iters;
}

double kr_fma_burn(kr_isa isa, long iters) {
    if (!kr_isa_supported(isa)) return 0.0;
    switch (isa) {
    case KR_ISA_AVX2: return kr_fma_burn_avx2(iters);
    case KR_ISA_AVX512: return kr_fma_burn_avx512(iters);
    default: return kr_fma_burn_scalar(iters);
    }
}
