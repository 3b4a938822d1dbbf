/*
 * kernels/calibrate — see calibrate.h. The scalar body; kr_fma_burn dispatches through the
 * kernel table (dispatch.c).
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
