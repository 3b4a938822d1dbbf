/*
 * train_step — the speed of one training step (kr_trainer_accumulate + kr_trainer_step) on a
 * public model shape with random weights, next to the machine's FMA peak measured in the same
 * run on the same threads.
 *
 *   train_step [--shape mini|small|base] [--model DIR] [--target predictor|tokenizer]
 *              [--batch N] [--len ROWS] [--threads N] [--steps N] [--warmup N] [--kernels]
 *              [--profile] [--json]
 *
 * Defaults: --shape small --target predictor --batch 32 --len 513 (512 positions learned per
 * window), every core, 3 timed steps after 1 warm-up. Reports ms per step (median), tokens/s,
 * the step's model FLOPs (each Linear 2·M·in·out forward and twice that backward, the first
 * Linear without its input gradient; causal attention 4·T²/2·head_dim per head forward and
 * twice that backward; recomputation not counted) over the time as GFLOP/s and as a fraction
 * of the FMA peak, peak resident memory, and the ISA. --kernels also times the step's main
 * GEMM shapes alone (NT forward, NN input gradient, TN weight gradient). --profile adds where
 * the timed steps' time went, part by part (kr_trainer_profile): CPU seconds per step of all
 * threads (what survives a machine shared with other jobs), wall seconds, and each part's
 * share of the step's CPU time ("serial" is the rest: work outside the pool's regions).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/threadpool.h"
#include "base/timeutil.h"
#include "bench_model.h"
#include "kernels/calibrate.h"
#include "kernels/kernels.h"
#include "kronos/train.h"
#include "model/config.h"

typedef struct opts {
    const char *shape, *model, *target;
    int batch, len, threads, steps, warmup, kernels, profile, json;
} opts;

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){ "small", NULL, "predictor", 32, -1, 0, 3, 1, 0, 0, 0 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--kernels"))
            o->kernels = 1;
        else if (!strcmp(a, "--profile"))
            o->profile = 1;
        else if (!strcmp(a, "--json"))
            o->json = 1;
        else if (!v)
            return fprintf(stderr, "%s needs a value\n", a), 0;
        else if (!strcmp(a, "--shape"))
            o->shape = v, i++;
        else if (!strcmp(a, "--model"))
            o->model = v, i++;
        else if (!strcmp(a, "--target"))
            o->target = v, i++;
        else if (!strcmp(a, "--batch"))
            o->batch = atoi(v), i++;
        else if (!strcmp(a, "--len"))
            o->len = atoi(v), i++;
        else if (!strcmp(a, "--threads"))
            o->threads = atoi(v), i++;
        else if (!strcmp(a, "--steps"))
            o->steps = atoi(v), i++;
        else if (!strcmp(a, "--warmup"))
            o->warmup = atoi(v), i++;
        else
            return fprintf(stderr, "unknown option %s\n", a), 0;
    }
    if (strcmp(o->target, "predictor") && strcmp(o->target, "tokenizer"))
        return fprintf(stderr, "--target is predictor or tokenizer\n"), 0;
    if (o->len < 0) o->len = !strcmp(o->target, "predictor") ? 513 : 512;
    return o->batch > 0 && o->len > 1 && o->steps > 0 && o->warmup >= 0;
}

/* ---------------------------------------------------------------- FLOPs */

static double linear(double M, double in, double out, int with_dx) {
    return 2 * M * in * out * (with_dx ? 3 : 2);
}

static double block(double M, double T, double n_seq, int d, int ff, int heads) {
    double f = 4 * linear(M, d, d, 1) + 2 * linear(M, d, ff, 1) + linear(M, ff, d, 1);
    double hd = (double)d / heads;
    f += 3 * n_seq * heads * 4 * hd * T * (T + 1) / 2; /* causal scores and values, ×3 */
    return f;
}

static double predictor_flops(const kr_predictor_config *c, int n, int T) {
    double M = (double)n * T, d = c->d_model;
    double f = linear(M, 2 * d, d, 1); /* fusion (its input gradient feeds the embeddings) */
    for (int i = 0; i < c->n_layers; i++) f += block(M, T, n, c->d_model, c->ff_dim, c->n_heads);
    f += linear(M, d, 1 << c->s1_bits, 1) + linear(M, d, 1 << c->s2_bits, 1);
    f += 4 * linear(M, d, d, 1) + 3 * n * 4 * 4 * (d / 4) * (double)T * (T + 1) / 2; /* dep */
    return f;
}

static double tokenizer_flops(const kr_tokenizer_config *c, int n, int T) {
    double M = (double)n * T, d = c->d_model, q = c->s1_bits + c->s2_bits;
    double f = linear(M, c->d_in, d, 0) + linear(M, d, q, 1);
    for (int i = 0; i < c->n_enc_layers - 1; i++)
        f += block(M, T, n, c->d_model, c->ff_dim, c->n_heads);
    for (int i = 0; i < c->n_dec_layers - 1; i++)
        f += 2 * block(M, T, n, c->d_model, c->ff_dim, c->n_heads);
    f += linear(M, c->s1_bits, d, 1) + linear(M, q, d, 1) + 2 * linear(M, d, c->d_in, 1);
    return f;
}

/* ---------------------------------------------------------------- GEMM probe */

typedef struct gemm_job {
    int kind, M, N, K;
    const float *A, *B;
    float *C;
} gemm_job;

static void gemm_region(void *p, int ith, int nth) {
    const gemm_job *j = p;
    if (j->kind == 0)
        kr_gemm_f32(j->M, j->N, j->K, j->A, j->K, j->B, NULL, j->C, j->N, ith, nth);
    else if (j->kind == 1)
        kr_gemm_nn_f32(j->M, j->N, j->K, j->A, j->K, j->B, j->N, j->C, j->N, 0, ith, nth);
    else
        kr_gemm_tn_f32(j->M, j->N, j->K, j->A, j->M, j->B, j->N, j->C, j->N, 1, ith, nth);
}

static double thread_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* GFLOP per second of this thread's CPU time (other processes taking the core do not count):
 * the best of 3 runs of a GEMM on one thread. */
static double gemm_gflops(int kind, int M, int N, int K) {
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *A = malloc(na * 4), *B = malloc(nb * 4), *C = calloc(nc, 4);
    for (size_t i = 0; i < na; i++) A[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    for (size_t i = 0; i < nb; i++) B[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
    gemm_job j = { kind, M, N, K, A, B, C };
    gemm_region(&j, 0, 1);
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = thread_seconds();
        gemm_region(&j, 0, 1);
        double s = thread_seconds() - t0;
        double g = 2.0 * M * N * K / s * 1e-9;
        best = g > best ? g : best;
    }
    free(A);
    free(B);
    free(C);
    return best;
}

/* The FMA peak of one core by the same clock. */
static double fma_peak_cpu(kr_isa isa) {
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = thread_seconds();
        double f = kr_fma_burn(isa, 2000000);
        double g = f / (thread_seconds() - t0) * 1e-9;
        best = g > best ? g : best;
    }
    return best;
}

static double process_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

/* ---------------------------------------------------------------- main */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    opts o;
    if (!parse(argc, argv, &o)) {
        fprintf(stderr, "usage: train_step [--shape mini|small|base] [--model DIR] "
                        "[--target predictor|tokenizer] [--batch N] [--len ROWS] [--threads N] "
                        "[--steps N] [--warmup N] [--kernels] [--profile] [--json]\n");
        return 2;
    }
    kr_error err = { 0 };
    bench_model_dirs dirs;
    if (bench_model_dirs_resolve(o.model, o.model ? NULL : o.shape, &dirs, &err) != KR_OK) {
        fprintf(stderr, "train_step: %s\n", err.message);
        return 1;
    }
    int pred = !strcmp(o.target, "predictor");
    const char *dir = pred ? dirs.predictor : dirs.tokenizer;
    char cfg_path[PATH_MAX + 32];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    kr_predictor_config pc;
    kr_tokenizer_config tc;
    kr_status st = pred ? kr_predictor_config_load(cfg_path, &pc, &err)
                        : kr_tokenizer_config_load(cfg_path, &tc, &err);
    if (st != KR_OK) {
        fprintf(stderr, "train_step: %s\n", err.message);
        return 1;
    }

    kr_train_params p = kr_train_default_params(pred ? KR_TRAIN_PREDICTOR : KR_TRAIN_TOKENIZER);
    p.batch_size = o.batch;
    p.seq_len = o.len;
    p.n_threads = o.threads;
    p.total_steps = 1000;
    kr_trainer *tr = NULL;
    double t_create = kr_now_seconds();
    if (kr_trainer_create(dir, &p, &tr, &err) != KR_OK) {
        fprintf(stderr, "train_step: %s\n", err.message);
        return 1;
    }
    t_create = kr_now_seconds() - t_create;
    size_t est = 0;
    kr_train_memory_estimate(dir, &p, &est, &err);

    /* a batch of random ids / candles (the values do not change the work) */
    size_t rows = (size_t)o.batch * (size_t)o.len;
    int32_t *s1 = malloc(rows * 4), *s2 = malloc(rows * 4), *stamp = malloc(rows * 5 * 4);
    float *x = malloc(rows * 6 * 4);
    uint64_t r = 88172645463325252ull;
    for (size_t i = 0; i < rows; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        s1[i] = (int32_t)(r % 1024);
        s2[i] = (int32_t)((r >> 20) % 1024);
        int32_t f[5] = { 0, 9 + (int)(i % 7), (int)(i % 5), 1 + (int)(i % 28), 1 + (int)(i % 12) };
        memcpy(stamp + i * 5, f, sizeof f);
        for (int k = 0; k < 6; k++) x[i * 6 + k] = (float)((r >> (8 * k)) % 2001) * 1e-3f - 1.0f;
    }
    kr_train_batch b = { .n = o.batch, .len = o.len, .s1 = s1, .s2 = s2, .stamp = stamp, .x = x };

    int nth = o.threads > 0 ? o.threads : kr_cpu_count();
    kr_pool *pool = NULL;
    if (kr_pool_create(nth, &pool, &err) != KR_OK) {
        fprintf(stderr, "train_step: %s\n", err.message);
        return 1;
    }
    kr_isa isa = kr_isa_active();
    double peak_before = kr_fma_peak_gflops(pool, isa, 5);

    int total = o.warmup + o.steps;
    double *ms = calloc((size_t)total, sizeof *ms), *cpu = calloc((size_t)total, sizeof *cpu);
    kr_train_losses l = { 0 };
    for (int i = 0; i < total; i++) {
        kr_train_step_info info;
        if (o.profile && i == o.warmup) kr_trainer_profile_enable(tr, 1);
        double t0 = kr_now_seconds(), c0 = process_seconds();
        if (kr_trainer_accumulate(tr, &b, &l, &err) != KR_OK ||
            kr_trainer_step(tr, &info, &err) != KR_OK) {
            fprintf(stderr, "train_step: step %d: %s\n", i, err.message);
            return 1;
        }
        ms[i] = (kr_now_seconds() - t0) * 1e3;
        cpu[i] = process_seconds() - c0;
        if (!o.json) fprintf(stderr, "step %d: %.0f ms, loss %.4f\n", i, ms[i], l.loss);
    }
    enum { MAX_PARTS = 32 };
    kr_train_part_time parts[MAX_PARTS];
    int n_parts = o.profile ? kr_trainer_profile(tr, parts, MAX_PARTS) : 0;
    n_parts = n_parts < MAX_PARTS ? n_parts : MAX_PARTS;
    double cpu_total = 0.0, parts_cpu = 0.0;
    for (int i = o.warmup; i < total; i++) cpu_total += cpu[i];
    for (int i = 0; i < n_parts; i++) parts_cpu += parts[i].cpu_seconds;
    double peak_after = kr_fma_peak_gflops(pool, isa, 5);
    double peak = peak_before > peak_after ? peak_before : peak_after;
    qsort(ms + o.warmup, (size_t)o.steps, sizeof *ms, cmp_double);
    qsort(cpu + o.warmup, (size_t)o.steps, sizeof *cpu, cmp_double);
    double med = ms[o.warmup + o.steps / 2], med_cpu = cpu[o.warmup + o.steps / 2];
    double core_peak = fma_peak_cpu(isa);
    int T = pred ? o.len - 1 : o.len;
    double tokens = (double)o.batch * T;
    double flops = pred ? predictor_flops(&pc, o.batch, T) : tokenizer_flops(&tc, o.batch, T);
    double gflops = flops / (med * 1e-3) * 1e-9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = ru.ru_maxrss / 1024.0;

    double k[3] = { 0, 0, 0 };
    int d = pred ? pc.d_model : tc.d_model, ff = pred ? pc.ff_dim : tc.ff_dim;
    if (o.kernels) {
        int M = (int)tokens;
        k[0] = gemm_gflops(0, M, ff, d); /* forward w1: x[M×d]·W1ᵀ */
        k[1] = gemm_gflops(1, M, d, ff); /* input gradient of w1: dH[M×ff]·W1 */
        k[2] = gemm_gflops(2, ff, d, M); /* weight gradient of w1: dHᵀ·X */
    }

    if (o.json) {
        printf("{\"shape\": \"%s\", \"target\": \"%s\", \"batch\": %d, \"len\": %d, "
               "\"threads\": %d, \"isa\": \"%s\", \"ms_per_step\": %.1f, \"tokens_per_s\": %.0f, "
               "\"gflop_per_step\": %.2f, \"gflops\": %.1f, \"fma_peak_gflops\": %.1f, "
               "\"peak_fraction\": %.3f, \"cpu_s_per_step\": %.2f, \"core_peak_gflops\": %.1f, "
               "\"cpu_fraction\": %.3f, \"peak_rss_mb\": %.0f, \"estimate_mb\": %.0f, "
               "\"loss\": %.5f",
               o.model ? o.model : o.shape, o.target, o.batch, o.len, nth, kr_isa_name(isa), med,
               tokens / (med * 1e-3), flops * 1e-9, gflops, peak, gflops / peak, med_cpu, core_peak,
               flops / med_cpu * 1e-9 / core_peak, rss_mb, est / 1048576.0, l.loss);
        if (o.kernels)
            printf(", \"gemm_gflops\": {\"nt\": %.1f, \"nn\": %.1f, \"tn\": %.1f}", k[0], k[1],
                   k[2]);
        if (o.profile) {
            printf(", \"parts_cpu_s_per_step\": {");
            for (int i = 0; i < n_parts; i++)
                printf("%s\"%s\": %.4f", i ? ", " : "", parts[i].name,
                       parts[i].cpu_seconds / o.steps);
            printf(", \"serial\": %.4f}", (cpu_total - parts_cpu) / o.steps);
        }
        printf("}\n");
    } else {
        printf("%s %s, batch %d × %d rows, %d threads, %s\n", o.model ? o.model : o.shape, o.target,
               o.batch, o.len, nth, kr_isa_name(isa));
        printf("  %.1f ms/step (median of %d), %.0f tokens/s, %.1f GFLOP/step, %.1f GFLOP/s\n", med,
               o.steps, tokens / (med * 1e-3), flops * 1e-9, gflops);
        printf("  FMA peak %.1f GFLOP/s (best of before/after): %.1f %% of peak\n", peak,
               100 * gflops / peak);
        printf("  CPU time %.2f s/step: %.1f GFLOP per CPU-second = %.1f %% of one core's peak "
               "%.1f (by CPU time)\n",
               med_cpu, flops / med_cpu * 1e-9, 100 * flops / med_cpu * 1e-9 / core_peak,
               core_peak);
        printf("  peak RSS %.0f MB (estimate %.0f MB), create %.2f s, last loss %.4f\n", rss_mb,
               est / 1048576.0, t_create, l.loss);
        if (o.kernels)
            printf(
                "  GEMMs at M=%d, one thread, per CPU-second: NT %.1f, NN %.1f, TN %.1f GFLOP/s\n",
                (int)tokens, k[0], k[1], k[2]);
        if (o.profile) {
            printf(
                "  where the time went (per step; CPU s of all threads, wall s, share of CPU):\n");
            for (int i = 0; i < n_parts; i++)
                printf("    %-20s %8.4f %8.4f %5.1f %%  (%ld regions)\n", parts[i].name,
                       parts[i].cpu_seconds / o.steps, parts[i].wall_seconds / o.steps,
                       100 * parts[i].cpu_seconds / cpu_total, parts[i].calls / o.steps);
            printf("    %-20s %8.4f %8s %5.1f %%\n", "serial", (cpu_total - parts_cpu) / o.steps,
                   "", 100 * (cpu_total - parts_cpu) / cpu_total);
        }
    }
    kr_pool_free(pool);
    kr_trainer_free(tr);
    free(ms);
    free(cpu);
    free(s1);
    free(s2);
    free(stamp);
    free(x);
    return 0;
}
