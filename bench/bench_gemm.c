/*
 * bench_gemm — GFLOP/s of every kernel variant's GEMM on the Kronos shapes, next to
 * OpenBLAS (cblas_sgemm, same layout: A row-major, W row-major used transposed) and the
 * measured FMA peak, all in one run so the ratios are comparable.
 *
 *   bench_gemm [--json] [--reps N] [--no-scalar] [--w-offset BYTES] [--cold-weights]
 *
 * A and C start on a 64-byte line (as the engine's workspace does) and W BYTES past one
 * (default 0): weights mapped from a safetensors file are only float-aligned — the demo
 * model's sit 8 bytes past a line — and plain malloc made the alignment, hence the speed of
 * in-place loads, vary from shape to shape and run to run.
 *
 * With --cold-weights every call reads the next of enough copies of W to fill 256 MB, so W
 * comes from memory as the engine's does (a forecast step reads every layer's weights once:
 * 110 MB for Kronos-small, more than the last-level cache of most machines). Without it W
 * stays in the caches between calls.
 *
 * Each cell is the median of N repeats (default 7); a repeat runs the GEMM enough times to
 * last ~20 ms. Threads come from kr_pool (ours, N split) or OpenBLAS's own pool.
 */
#include "base/threadpool.h"
#include "kernels/calibrate.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef KR_HAVE_OPENBLAS
#include <cblas.h>
#endif

typedef struct {
    int M, N, K;
} shape;

static const shape k_shapes[] = {
    { 400, 1024, 512 }, { 400, 512, 512 },  { 32, 1024, 512 },  { 8, 1024, 512 },
    { 1, 1024, 512 },   { 400, 2048, 832 }, { 32, 2048, 832 },  { 512, 512, 512 },
    { 512, 1024, 512 }, { 512, 512, 1024 }, { 400, 832, 2048 },
};
enum { N_SHAPES = sizeof k_shapes / sizeof k_shapes[0], MAX_REPS = 31 };
#define COLD_BYTES ((size_t)256 << 20)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *aligned_floats(size_t n) {
    void *p = NULL;
    return posix_memalign(&p, 64, n * sizeof(float)) ? NULL : p;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds per call of run(ctx). */
static double time_median(void (*run)(void *), void *ctx, int reps) {
    run(ctx); /* warm caches and page in */
    double t0 = now_s();
    run(ctx);
    double one = now_s() - t0;
    long iters = one > 0.02 ? 1 : (long)(0.02 / (one > 1e-7 ? one : 1e-7)) + 1;
    double s[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        t0 = now_s();
        for (long i = 0; i < iters; i++) run(ctx);
        s[r] = (now_s() - t0) / (double)iters;
    }
    qsort(s, (size_t)reps, sizeof s[0], cmp_double);
    return s[reps / 2];
}

typedef struct {
    kr_pool *pool;
    kr_isa isa;
    shape sh;
    const float *A;
    float **W; /* n_w copies, used in turn */
    int n_w, next_w;
    float *C;
    long burn_iters;
    double burn_flops;
} job;

static void gemm_slice(void *p, int ith, int nth) {
    job *j = p;
    kr_gemm_f32(j->sh.M, j->sh.N, j->sh.K, j->A, j->sh.K, j->W[j->next_w], NULL, j->C, j->sh.N, ith,
                nth);
}
static void run_ours(void *p) {
    job *j = p;
    kr_pool_run(j->pool, gemm_slice, j);
    j->next_w = (j->next_w + 1) % j->n_w;
}

#ifdef KR_HAVE_OPENBLAS
static void run_openblas(void *p) {
    job *j = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->sh.M, j->sh.N, j->sh.K, 1.0f, j->A,
                j->sh.K, j->W[j->next_w], j->sh.K, 0.0f, j->C, j->sh.N);
    j->next_w = (j->next_w + 1) % j->n_w;
}
#endif

static void burn_slice(void *p, int ith, int nth) {
    job *j = p;
    double f = kr_fma_burn(j->isa, j->burn_iters);
    if (ith == 0) j->burn_flops = f * nth;
}
static void run_burn(void *p) {
    job *j = p;
    kr_pool_run(j->pool, burn_slice, j);
}

enum { MAX_COLS = 2 * KR_ISA_COUNT + 2 };

int main(int argc, char **argv) {
    int json = 0, reps = 7, no_scalar = 0, w_offset = 0, cold = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--no-scalar"))
            no_scalar = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--w-offset") && i + 1 < argc)
            w_offset = atoi(argv[++i]) / 4 * 4 % 64;
        else if (!strcmp(argv[i], "--cold-weights"))
            cold = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--json] [--reps N] [--no-scalar] [--w-offset BYTES] "
                    "[--cold-weights]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (reps > MAX_REPS) reps = MAX_REPS;

    kr_isa isas[KR_ISA_COUNT];
    int n_isa = 0;
    for (int i = 0; i < KR_ISA_COUNT; i++)
        if (kr_isa_supported((kr_isa)i) && !(no_scalar && i == KR_ISA_SCALAR))
            isas[n_isa++] = (kr_isa)i;
    kr_pool *pools[3] = { NULL, NULL, NULL };
    for (int t = 1; t <= 2; t++) {
        kr_error err = { 0 };
        if (kr_pool_create(t, &pools[t], &err) != KR_OK) {
            fprintf(stderr, "bench_gemm: %s\n", err.message);
            return 1;
        }
    }

    /* Column c: ours (isa c/2, threads c%2 + 1), then OpenBLAS 1 and 2 threads. */
    char names[MAX_COLS][32];
    int n_cols = 0;
    for (int i = 0; i < n_isa; i++)
        for (int t = 1; t <= 2; t++)
            snprintf(names[n_cols++], sizeof names[0], "%s %dT", kr_isa_name(isas[i]), t);
#ifdef KR_HAVE_OPENBLAS
    snprintf(names[n_cols++], sizeof names[0], "OpenBLAS 1T");
    snprintf(names[n_cols++], sizeof names[0], "OpenBLAS 2T");
#endif
    double gf[N_SHAPES][MAX_COLS];
    double peak[KR_ISA_COUNT][3];

    for (int i = 0; i < n_isa; i++)
        for (int t = 1; t <= 2; t++) {
            job j = { .pool = pools[t], .isa = isas[i], .burn_iters = 2000000 };
            double s = time_median(run_burn, &j, reps);
            peak[i][t] = j.burn_flops / s * 1e-9;
        }

    for (int si = 0; si < N_SHAPES; si++) {
        shape sh = k_shapes[si];
        size_t w_floats = (size_t)sh.N * sh.K;
        int n_w = cold ? (int)((COLD_BYTES / sizeof(float) + w_floats - 1) / w_floats) : 1;
        float *A = aligned_floats((size_t)sh.M * sh.K);
        float *C = aligned_floats((size_t)sh.M * sh.N);
        float **Wb = calloc((size_t)n_w, sizeof *Wb), **W = calloc((size_t)n_w, sizeof *W);
        int ok = A && C && Wb && W;
        for (int w = 0; ok && w < n_w; w++) {
            Wb[w] = aligned_floats(w_floats + 16);
            ok = Wb[w] != NULL;
            if (ok) W[w] = Wb[w] + w_offset / 4;
        }
        if (!ok) {
            fprintf(stderr, "bench_gemm: out of memory\n");
            return 1;
        }
        for (size_t k = 0; k < (size_t)sh.M * sh.K; k++)
            A[k] = (float)((k * 7919u) % 1000u) * 1e-3f - 0.5f;
        for (size_t k = 0; k < w_floats; k++)
            W[0][k] = (float)((k * 104729u) % 1000u) * 1e-3f - 0.5f;
        for (int w = 1; w < n_w; w++) memcpy(W[w], W[0], w_floats * sizeof(float));
        double flops = 2.0 * sh.M * sh.N * sh.K;
        int c = 0;
        for (int i = 0; i < n_isa; i++) {
            kr_isa_set(isas[i]);
            for (int t = 1; t <= 2; t++) {
                job j = { .pool = pools[t], .sh = sh, .A = A, .W = W, .n_w = n_w, .C = C };
                gf[si][c++] = flops / time_median(run_ours, &j, reps) * 1e-9;
            }
        }
#ifdef KR_HAVE_OPENBLAS
        for (int t = 1; t <= 2; t++) {
            openblas_set_num_threads(t);
            job j = { .sh = sh, .A = A, .W = W, .n_w = n_w, .C = C };
            gf[si][c++] = flops / time_median(run_openblas, &j, reps) * 1e-9;
        }
#endif
        free(A);
        for (int w = 0; w < n_w; w++) free(Wb[w]);
        free(Wb);
        free(W);
        free(C);
    }
    kr_pool_free(pools[1]);
    kr_pool_free(pools[2]);

    int has_blas = n_cols > 2 * n_isa;
    if (json) {
        printf("{\n  \"fma_peak_gflops\": {");
        for (int i = 0; i < n_isa; i++)
            printf("%s\"%s\": {\"1\": %.2f, \"2\": %.2f}", i ? ", " : "", kr_isa_name(isas[i]),
                   peak[i][1], peak[i][2]);
        printf("},\n  \"w_offset\": %d,\n  \"cold_weights\": %s,\n  \"shapes\": [\n", w_offset,
               cold ? "true" : "false");
        for (int si = 0; si < N_SHAPES; si++) {
            printf("    {\"M\": %d, \"N\": %d, \"K\": %d, \"gflops\": {", k_shapes[si].M,
                   k_shapes[si].N, k_shapes[si].K);
            for (int c = 0; c < n_cols; c++)
                printf("%s\"%s\": %.2f", c ? ", " : "", names[c], gf[si][c]);
            printf("}");
            if (has_blas)
                printf(", \"vs_openblas\": {\"isa\": \"%s\", \"1T\": %.3f, \"2T\": %.3f}",
                       kr_isa_name(isas[n_isa - 1]), gf[si][2 * n_isa - 2] / gf[si][n_cols - 2],
                       gf[si][2 * n_isa - 1] / gf[si][n_cols - 1]);
            printf("}%s\n", si + 1 < N_SHAPES ? "," : "");
        }
        printf("  ]\n}\n");
        return 0;
    }
    printf("FMA peak (GFLOP/s):");
    for (int i = 0; i < n_isa; i++)
        printf("  %s 1T %.1f / 2T %.1f", kr_isa_name(isas[i]), peak[i][1], peak[i][2]);
    printf("\nW %d bytes past a 64-byte line, %s\n\n| M×N×K |", w_offset,
           cold ? "cold (each call reads another copy, from memory)" : "warm (in cache)");
    for (int c = 0; c < n_cols; c++) printf(" %s |", names[c]);
    if (has_blas)
        printf(" %s/BLAS 1T | %s/BLAS 2T |", kr_isa_name(isas[n_isa - 1]),
               kr_isa_name(isas[n_isa - 1]));
    printf("\n|---|");
    for (int c = 0; c < n_cols + 2 * has_blas; c++) printf("---:|");
    printf("\n");
    for (int si = 0; si < N_SHAPES; si++) {
        printf("| %d×%d×%d |", k_shapes[si].M, k_shapes[si].N, k_shapes[si].K);
        for (int c = 0; c < n_cols; c++) printf(" %.1f |", gf[si][c]);
        if (has_blas)
            printf(" %.2f | %.2f |", gf[si][2 * n_isa - 2] / gf[si][n_cols - 2],
                   gf[si][2 * n_isa - 1] / gf[si][n_cols - 1]);
        printf("\n");
    }
    printf("\nGFLOP/s, median of %d; ours without bias; ratio = widest variant / OpenBLAS.\n",
           reps);
    return 0;
}
