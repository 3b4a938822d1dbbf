/*
 * kernels/calibrate — see calibrate.h. The scalar body; kr_fma_burn dispatches through the
 * kernel table (dispatch.c).
 */
#include "kernels/calibrate.h"

#include "base/profile.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

enum { KR_BW_BYTES = 256 << 20, KR_LINE = 64 };

typedef struct read_job {
    const uint64_t *buf;
    size_t words;
    uint64_t sink[64]; /* one slot per thread (up to 64), so the sums are not dead code */
} read_job;

/* Every word, eight independent sums: the loads stay in flight and the hardware prefetcher
 * sees a plain stream (one word per line read 27-29 GB/s where this reads 32-35 on Zen 4). */
static void read_worker(void *ctx, int ith, int nth) {
    read_job *j = ctx;
    size_t per_line = KR_LINE / sizeof(uint64_t);
    size_t lines = j->words / per_line;
    size_t l0 = lines * (size_t)ith / (size_t)nth, l1 = lines * (size_t)(ith + 1) / (size_t)nth;
    const uint64_t *p = j->buf + l0 * per_line, *end = j->buf + l1 * per_line;
    uint64_t s[8] = { 0 };
    for (; p < end; p += 8)
        for (int k = 0; k < 8; k++) s[k] += p[k];
    j->sink[ith % 64] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

double kr_read_bandwidth_gbs(kr_pool *pool, int rounds) {
    void *mem = NULL;
    if (posix_memalign(&mem, 4096, KR_BW_BYTES) != 0) return 0.0;
    memset(mem, 1, KR_BW_BYTES); /* every page mapped before the clock runs */
    read_job j = { mem, KR_BW_BYTES / sizeof(uint64_t), { 0 } };
    if (rounds < 3) rounds = 3;
    double best = 0, second = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = kr_prof_clock();
        kr_pool_run(pool, read_worker, &j);
        double s = kr_prof_clock() - t0;
        double rate = s > 0 ? KR_BW_BYTES / s : 0;
        if (rate > best) {
            second = best;
            best = rate;
        } else if (rate > second) {
            second = rate;
        }
    }
    free(mem);
    return second * 1e-9;
}
