/*
 * bench_qgemm_int8 — the W8A8 GEMM (quant.h) next to the f32 GEMM on one thread, as
 * GFLOP/s-equivalent (2·M·N·K / time), for decode-like (small M) and prefill-like shapes.
 *
 *   bench_qgemm_int8 [--reps N]
 *
 * Columns: kr_gemm_f32 on the best ISA; the int8 GEMM alone per variant (AMX when the CPU
 * has AMX-INT8 — W packed per call, as the dispatched entry runs it from its M threshold —,
 * AVX-512 with VPDPBUSD when the CPU has AVX512_VNNI, AVX-512 with VPMADDWD, AVX2 with AVX-VNNI
 * when the CPU has it, AVX2 (VPMADDWD), scalar for
 * small M); the best int8 path including the activation quantisation (what a Linear layer
 * pays), and the quantiser alone per element. KRONOS_AMX=0 drops the AMX column.
 * Each cell is the fastest of N repeats (default 15) of enough calls to last ~5 ms: on a shared
 * VM the least disturbed repeat says most about the kernel.
 */
#include "kernels/kernels.h"
#include "kernels/qgemm_int8_internal.h"
#include "kernels/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_REPS = 31 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct job {
    int M, N, K, kp;
    const float *A, *W;
    float *C;
    kr_qmat q;
    uint8_t *aq;
    float *ascale;
    int32_t *azero;
    kr_qgemm_int8_fn gemm; /* int8 variant under test */
    kr_quant_act_u8_fn quant;
} job;

/* 64-byte aligned, as the engine holds weights (kr_qmat_quantize) and the quantised
 * activations (kr_qgemm_scratch_bytes): from malloc, rows of aq and W started 16 bytes off a
 * cache line or not depending on the size and the allocation history, and a tile or 64-byte
 * load across two lines cost AMX ~25 % and VPDPBUSD up to ~45 % at M = 512 in one run. */
static void *alloc64(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

/* Fastest repeat's seconds per call of run(j). */
static double time_best(void (*run)(job *), job *j, int reps) {
    run(j); /* warm caches and page in */
    double t0 = now_s();
    run(j);
    double one = now_s() - t0;
    long iters = one > 0.005 ? 1 : (long)(0.005 / (one > 1e-7 ? one : 1e-7)) + 1;
    double best = 0.0;
    for (int r = 0; r < reps; r++) {
        t0 = now_s();
        for (long i = 0; i < iters; i++) run(j);
        double t = (now_s() - t0) / (double)iters;
        if (r == 0 || t < best) best = t;
    }
    return best;
}

static void run_f32(job *j) {
    kr_gemm_f32(j->M, j->N, j->K, j->A, j->K, j->W, NULL, j->C, j->N, 0, 1);
}
static void run_int8(job *j) {
    j->gemm(j->M, &j->q, j->aq, j->ascale, j->azero, NULL, j->C, j->N, 0, 1);
}
static void run_quant(job *j) {
    j->quant(0, j->M, j->K, j->kp, j->A, j->K, NULL, j->aq, j->ascale, j->azero);
}
static void run_int8_quant(job *j) {
    j->quant(0, j->M, j->K, j->kp, j->A, j->K, NULL, j->aq, j->ascale, j->azero);
    run_int8(j);
}

#if defined(__x86_64__)
static void gemm_vnni(int M, const kr_qmat *w, const uint8_t *aq, const float *as,
                      const int32_t *az, const float *bias, float *C, int ldc, int ith, int nth) {
    kr_qgemm_int8_avx512_impl(M, w, aq, as, az, bias, C, ldc, ith, nth, 1);
}
static void gemm_madd(int M, const kr_qmat *w, const uint8_t *aq, const float *as,
                      const int32_t *az, const float *bias, float *C, int ldc, int ith, int nth) {
    kr_qgemm_int8_avx512_impl(M, w, aq, as, az, bias, C, ldc, ith, nth, 0);
}
#endif

/* Symmetric per-row int8 of W as quant.h describes it (q = RNE(w / scale), |q| <= 127). */
static void quantise_w(int N, int K, int kp, const float *W, int8_t *q, float *scale,
                       int32_t *row_sum) {
    for (int n = 0; n < N; n++) {
        const float *w = W + (size_t)n * K;
        float mx = 0.0f;
        for (int k = 0; k < K; k++) mx = fabsf(w[k]) > mx ? fabsf(w[k]) : mx;
        float s = mx > 0.0f ? mx / 127.0f : 1.0f;
        int32_t sum = 0;
        for (int k = 0; k < kp; k++) {
            int v = k < K ? (int)nearbyintf(w[k] / s) : 0;
            v = v < -127 ? -127 : v > 127 ? 127 : v;
            q[(size_t)n * kp + k] = (int8_t)v;
            sum += v;
        }
        scale[n] = s;
        row_sum[n] = sum;
    }
}

typedef struct {
    int M, N, K;
} shape;

int main(int argc, char **argv) {
    int reps = 15;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps N]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (reps > MAX_REPS) reps = MAX_REPS;

    static const int Ms[] = { 1, 8, 16, 32, 64, 512 };
    static const int NKs[][2] = { { 512, 512 }, { 1024, 512 } };
    kr_isa best = kr_isa_set(kr_isa_best());

    const char *names[7];
    kr_qgemm_int8_fn fns[7];
    int n_var = 0;
    if (kr_cpu_has_amx_int8()) {
        names[n_var] = "amx";
        fns[n_var++] = kr_qgemm_int8_amx;
    }
#if defined(__x86_64__)
    if (kr_isa_supported(KR_ISA_AVX512)) {
        if (kr_cpu_has_avx512_vnni()) {
            names[n_var] = "avx512 vpdpbusd";
            fns[n_var++] = gemm_vnni;
        }
        names[n_var] = "avx512 vpmaddwd";
        fns[n_var++] = gemm_madd;
    }
#endif
    if (kr_isa_supported(KR_ISA_AVX2)) {
        if (kr_cpu_has_avx_vnni()) {
            names[n_var] = "avx2 avx-vnni";
            fns[n_var++] = kr_qgemm_int8_avxvnni;
        }
        names[n_var] = "avx2";
        fns[n_var++] = kr_qgemm_int8_avx2;
    }
    names[n_var] = "scalar";
    fns[n_var++] = kr_qgemm_int8_scalar;
    static const kr_quant_act_u8_fn quants[KR_ISA_COUNT] = { kr_quant_act_u8_scalar,
                                                             kr_quant_act_u8_avx2,
                                                             kr_quant_act_u8_avx512 };

    printf("1 thread, GFLOP/s-equivalent (2·M·N·K / time); f32 = kr_gemm_f32 on %s\n\n",
           kr_isa_name(best));
    printf("| M | N | K | f32 |");
    for (int v = 0; v < n_var; v++) printf(" int8 %s |", names[v]);
    printf(" int8 best + act quant | act quant ns/elem | best int8 / f32 |\n|---|---|---|---|");
    for (int v = 0; v < n_var; v++) printf("---|");
    printf("---|---|---|\n");

    for (int si = 0; si < (int)(sizeof NKs / sizeof NKs[0]); si++)
        for (int mi = 0; mi < (int)(sizeof Ms / sizeof Ms[0]); mi++) {
            int M = Ms[mi], N = NKs[si][0], K = NKs[si][1], kp = (K + 63) / 64 * 64;
            float *A = alloc64((size_t)M * K * sizeof *A), *W = alloc64((size_t)N * K * sizeof *W);
            float *C = alloc64((size_t)M * N * sizeof *C);
            int8_t *q = alloc64((size_t)N * kp);
            float *wscale = malloc((size_t)N * sizeof *wscale);
            int32_t *rsum = malloc((size_t)N * sizeof *rsum);
            uint8_t *aq = alloc64((size_t)M * kp);
            float *ascale = malloc((size_t)M * sizeof *ascale);
            int32_t *azero = malloc((size_t)M * sizeof *azero);
            if (!A || !W || !C || !q || !wscale || !rsum || !aq || !ascale || !azero) {
                fprintf(stderr, "bench_qgemm_int8: out of memory\n");
                return 1;
            }
            for (size_t k = 0; k < (size_t)M * K; k++)
                A[k] = (float)((k * 7919u) % 1000u) * 1e-3f - 0.5f;
            for (size_t k = 0; k < (size_t)N * K; k++)
                W[k] = (float)((k * 104729u) % 1000u) * 1e-3f - 0.5f;
            quantise_w(N, K, kp, W, q, wscale, rsum);
            job j = { .M = M,
                      .N = N,
                      .K = K,
                      .kp = kp,
                      .A = A,
                      .W = W,
                      .C = C,
                      .aq = aq,
                      .ascale = ascale,
                      .azero = azero,
                      .quant = quants[best] };
            j.q = (kr_qmat){ .fmt = KR_WFMT_INT8,
                             .n = N,
                             .k = K,
                             .kp = kp,
                             .data = q,
                             .scale = wscale,
                             .row_sum = rsum };
            j.quant(0, M, K, kp, A, K, NULL, aq, ascale, azero);
            double flops = 2.0 * M * N * K;
            double f32 = flops / time_best(run_f32, &j, reps) * 1e-9;
            printf("| %d | %d | %d | %.1f |", M, N, K, f32);
            double best_gf = 0.0;
            kr_qgemm_int8_fn best_fn = fns[0];
            for (int v = 0; v < n_var; v++) {
                if (fns[v] == kr_qgemm_int8_scalar && M > 8) {
                    printf(" – |");
                    continue;
                }
                j.gemm = fns[v];
                double gf = flops / time_best(run_int8, &j, reps) * 1e-9;
                if (gf > best_gf) {
                    best_gf = gf;
                    best_fn = fns[v];
                }
                printf(" %.1f |", gf);
            }
            j.gemm = best_fn;
            double with_q = flops / time_best(run_int8_quant, &j, reps) * 1e-9;
            double quant_ns = time_best(run_quant, &j, reps) * 1e9 / ((double)M * K);
            printf(" %.1f | %.3f | %.2f× |\n", with_q, quant_ns, best_gf / f32);
            fflush(stdout);
            free(A);
            free(W);
            free(C);
            free(q);
            free(wscale);
            free(rsum);
            free(aq);
            free(ascale);
            free(azero);
        }
    return 0;
}
