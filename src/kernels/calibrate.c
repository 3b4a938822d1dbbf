/*
 * kernels/calibrate — see calibrate.h. The scalar body; kr_fma_burn dispatches through the
 * kernel table (dispatch.c).
 */
#include "kernels/calibrate.h"

#include "base/profile.h"

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

typedef struct burn_job {
    kr_isa isa;
    long iters;
    double flops;
} burn_job;

static void burn_worker(void *ctx, int ith, int nth) {
    burn_job *j = ctx;
    double f = kr_fma_burn(j->isa, j->iters);
    if (ith == 0) j->flops = f * nth;
}

double kr_fma_peak_gflops(kr_pool *pool, kr_isa isa, int rounds) {
    if (!kr_isa_supported(isa)) return 0.0;
    /* Size a burst to ~10 ms from a short first one. */
    burn_job j = { isa, 20000, 0 };
    double t0 = kr_prof_clock();
    kr_pool_run(pool, burn_worker, &j);
    double s = kr_prof_clock() - t0;
    if (s > 0) j.iters = (long)(j.iters * (0.01 / s)) + 1;
    /* The best and second best rates: a virtual machine's clock occasionally steps during a
     * burst and makes one look impossibly fast, so with 3 or more bursts the second best is
     * taken. */
    double best = 0, second = 0;
    if (rounds < 1) rounds = 1;
    for (int r = 0; r < rounds; r++) {
        t0 = kr_prof_clock();
        kr_pool_run(pool, burn_worker, &j);
        s = kr_prof_clock() - t0;
        double rate = s > 0 ? j.flops / s : 0;
        if (rate > best) {
            second = best;
            best = rate;
        } else if (rate > second) {
            second = rate;
        }
    }
    return (rounds >= 3 ? second : best) * 1e-9;
}
