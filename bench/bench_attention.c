/*
 * bench_attention — one decode step's attention for a batch of sample paths: nq paths × every
 * head attend to the same shared context keys plus a few keys of their own. Compares the
 * per-(path, head) kr_attend_f32 loop the engine runs today with one kr_attend_multi_f32 per
 * head (shared K/V read once per block for all paths), per kernel variant, and checks that
 * both give bit-identical outputs.
 *
 *   bench_attention [--reps N] [--no-scalar]
 *
 * Then one window re-run's attention (512 rows, each over itself and the rows before it, in
 * groups of 32 as the engine plans them): the groups through kr_attend_multi_f32 (shared = the
 * keys before the group, own = each row's part of the group's triangle; the engine's call
 * until 2026-12-02) against kr_attend_causal_f32, with GFLOP/s (4·head_dim per row-key pair).
 *
 * Each cell is the median of N repeats (default 7); a repeat runs the step enough times to
 * last ~20 ms. Single-threaded: the speed-up is per core.
 */
#include "kernels/kernels.h"
#include "model/transformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name;
    int nq, n_shared, n_own, head_dim, n_heads;
} shape;

/* Kronos-small (d_model 512, 8 heads) and Kronos-base (832, 16 heads); lookback 400 context
 * keys shared by 32 paths, each with 8 generated keys of its own; and a late step of issue
 * 15's P64 job (64 paths over 380 context keys, 20 generated each). */
static const shape k_shapes[] = {
    { "small", 32, 400, 8, 64, 8 },
    { "base", 32, 400, 8, 52, 16 },
    { "small, 8 paths", 8, 400, 8, 64, 8 },
    { "small, 64 paths", 64, 380, 20, 64, 8 },
};
enum { N_SHAPES = sizeof k_shapes / sizeof k_shapes[0], MAX_REPS = 31 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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

/* One step's data, laid out as the engine's: K/V rows [positions][kv_stride], head h at column
 * h·head_dim, with the f32 KV store's row stride (kr_kv_f32_stride: d_model padded to an odd
 * number of cache lines, which decides how the rows of a head share the L1 sets); each path's
 * own rows in its own [n_own][kv_stride] block. */
typedef struct {
    shape sh;
    int d, stride, kv_stride;
    float scale;
    float *k, *v, *ok, *ov, *q, *out, *scratch;
    kr_kv_span *shared; /* [n_heads] */
    kr_kv_span *own; /* [nq][n_heads] */
    const kr_kv_span **own_p;
    int *n_own;
    const float **qp;
    float **op;
} step;

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 40) / (double)(1ull << 23) - 1.0);
}

static float *rand_buf(size_t n, float scale, uint64_t *seed) {
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = scale * frand(seed);
    return p;
}

static void step_init(step *st, shape sh) {
    uint64_t seed = 42;
    memset(st, 0, sizeof *st);
    st->sh = sh;
    st->d = sh.n_heads * sh.head_dim;
    st->stride = sh.n_shared + sh.n_own;
    st->scale = 1.0f / sqrtf((float)sh.head_dim);
    st->kv_stride = kr_kv_f32_stride(st->d);
    size_t d = (size_t)st->d, nq = (size_t)sh.nq, kvs = (size_t)st->kv_stride;
    st->k = rand_buf((size_t)sh.n_shared * kvs, 1.0f, &seed);
    st->v = rand_buf((size_t)sh.n_shared * kvs, 1.0f, &seed);
    st->ok = rand_buf(nq * (size_t)sh.n_own * kvs, 1.0f, &seed);
    st->ov = rand_buf(nq * (size_t)sh.n_own * kvs, 1.0f, &seed);
    st->q = rand_buf(nq * d, 3.0f, &seed);
    st->out = rand_buf(nq * d, 0.0f, &seed);
    st->scratch = rand_buf(nq * (size_t)st->stride, 0.0f, &seed);
    st->shared = malloc((size_t)sh.n_heads * sizeof *st->shared);
    st->own = malloc(nq * (size_t)sh.n_heads * sizeof *st->own);
    st->own_p = malloc(nq * sizeof *st->own_p);
    st->n_own = malloc(nq * sizeof *st->n_own);
    st->qp = malloc(nq * sizeof *st->qp);
    st->op = malloc(nq * sizeof *st->op);
    if (!st->shared || !st->own || !st->own_p || !st->n_own || !st->qp || !st->op) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int h = 0; h < sh.n_heads; h++) {
        size_t off = (size_t)h * (size_t)sh.head_dim;
        st->shared[h] = (kr_kv_span){ st->k + off, st->v + off, sh.n_shared, st->kv_stride };
        for (int i = 0; i < sh.nq; i++) {
            size_t row = (size_t)i * (size_t)sh.n_own * kvs + off;
            st->own[(size_t)i * sh.n_heads + h] =
                (kr_kv_span){ st->ok + row, st->ov + row, sh.n_own, st->kv_stride };
        }
    }
}

static void step_free(step *st) {
    free(st->k);
    free(st->v);
    free(st->ok);
    free(st->ov);
    free(st->q);
    free(st->out);
    free(st->scratch);
    free(st->shared);
    free(st->own);
    free(st->own_p);
    free(st->n_own);
    free(st->qp);
    free(st->op);
}

/* Today's engine loop: one kr_attend_f32 per (path, head). */
static void run_single(void *p) {
    step *st = p;
    const shape *sh = &st->sh;
    for (int i = 0; i < sh->nq; i++)
        for (int h = 0; h < sh->n_heads; h++) {
            size_t off = (size_t)i * (size_t)st->d + (size_t)h * (size_t)sh->head_dim;
            kr_kv_span spans[2] = { st->shared[h], st->own[(size_t)i * sh->n_heads + h] };
            kr_attend_f32(st->q + off, sh->head_dim, st->scale, spans, 2, st->scratch,
                          st->out + off);
        }
}

/* One kr_attend_multi_f32 per head for all paths. */
static void run_multi(void *p) {
    step *st = p;
    const shape *sh = &st->sh;
    for (int h = 0; h < sh->n_heads; h++) {
        for (int i = 0; i < sh->nq; i++) {
            size_t off = (size_t)i * (size_t)st->d + (size_t)h * (size_t)sh->head_dim;
            st->qp[i] = st->q + off;
            st->op[i] = st->out + off;
            st->own_p[i] = &st->own[(size_t)i * sh->n_heads + h];
            st->n_own[i] = 1;
        }
        kr_attend_multi_f32(sh->nq, st->qp, sh->head_dim, st->scale, &st->shared[h], 1, st->own_p,
                            st->n_own, st->scratch, st->stride, st->op);
    }
}

/* One re-run window of Kronos-small (head_dim 64 × 8) or -base (52 × 16); K/V rows with the
 * f32 KV store's stride, as the engine's re-run reads them. */
typedef struct {
    int hd, n_heads, rows, kv_stride;
    float *k, *v, *q, *out;
    float *scratch;
} window;

enum { WINDOW_ROWS = 512, WINDOW_GROUP = 32 };

static void window_init(window *w, int hd, int n_heads) {
    uint64_t seed = 7;
    w->hd = hd;
    w->n_heads = n_heads;
    w->rows = WINDOW_ROWS;
    size_t n = (size_t)WINDOW_ROWS * (size_t)(hd * n_heads);
    w->kv_stride = kr_kv_f32_stride(hd * n_heads);
    w->k = rand_buf((size_t)WINDOW_ROWS * (size_t)w->kv_stride, 1.0f, &seed);
    w->v = rand_buf((size_t)WINDOW_ROWS * (size_t)w->kv_stride, 1.0f, &seed);
    w->q = rand_buf(n, 0.3f, &seed);
    w->out = rand_buf(n, 0.0f, &seed);
    w->scratch = rand_buf((size_t)WINDOW_GROUP * WINDOW_ROWS, 0.0f, &seed);
}

static void window_free(window *w) {
    free(w->k);
    free(w->v);
    free(w->q);
    free(w->out);
    free(w->scratch);
}

/* The groups as shared + own spans through the multi-query kernel. */
static void run_window_multi(void *p) {
    window *w = p;
    int d = w->hd * w->n_heads;
    float scale = 1.0f / sqrtf((float)w->hd);
    for (int h = 0; h < w->n_heads; h++)
        for (int r0 = 0; r0 < w->rows; r0 += WINDOW_GROUP) {
            int kvs = w->kv_stride;
            size_t off = (size_t)h * (size_t)w->hd, next = (size_t)(r0 + 1) * (size_t)kvs + off;
            kr_kv_span shared = { w->k + off, w->v + off, r0 + 1, kvs }, own[WINDOW_GROUP];
            const kr_kv_span *own_p[WINDOW_GROUP];
            int n_own[WINDOW_GROUP];
            const float *qp[WINDOW_GROUP];
            float *op[WINDOW_GROUP];
            for (int i = 0; i < WINDOW_GROUP; i++) {
                own[i] = (kr_kv_span){ w->k + next, w->v + next, i, kvs };
                own_p[i] = &own[i];
                n_own[i] = i > 0;
                qp[i] = w->q + (size_t)(r0 + i) * (size_t)d + off;
                op[i] = w->out + (size_t)(r0 + i) * (size_t)d + off;
            }
            kr_attend_multi_f32(WINDOW_GROUP, qp, w->hd, scale, &shared, 1, own_p, n_own,
                                w->scratch, w->rows, op);
        }
}

/* The same groups through the causal kernel. */
static void run_window_causal(void *p) {
    window *w = p;
    int d = w->hd * w->n_heads;
    float scale = 1.0f / sqrtf((float)w->hd);
    for (int h = 0; h < w->n_heads; h++)
        for (int r0 = 0; r0 < w->rows; r0 += WINDOW_GROUP) {
            size_t off = (size_t)h * (size_t)w->hd;
            kr_kv_span keys = { w->k + off, w->v + off, w->rows, w->kv_stride };
            int n_keys[WINDOW_GROUP];
            const float *qp[WINDOW_GROUP];
            float *op[WINDOW_GROUP];
            for (int i = 0; i < WINDOW_GROUP; i++) {
                n_keys[i] = r0 + i + 1;
                qp[i] = w->q + (size_t)(r0 + i) * (size_t)d + off;
                op[i] = w->out + (size_t)(r0 + i) * (size_t)d + off;
            }
            kr_attend_causal_f32(WINDOW_GROUP, qp, w->hd, scale, &keys, 1, n_keys, w->scratch,
                                 w->rows, op);
        }
}

static void bench_windows(int reps, int no_scalar) {
    static const struct {
        const char *name;
        int hd, n_heads;
    } shapes[] = { { "small", 64, 8 }, { "base", 52, 16 } };
    printf("\nattention of one 512-row window re-run (all heads), single thread; median of %d\n",
           reps);
    printf("%-8s %6s  %-7s %10s %8s %10s %8s %8s  %s\n", "shape", "hd×h", "isa", "multi µs",
           "GFLOP/s", "causal µs", "GFLOP/s", "speed-up", "bit-identical");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        window w;
        window_init(&w, shapes[si].hd, shapes[si].n_heads);
        size_t n = (size_t)w.rows * (size_t)(w.hd * w.n_heads);
        double pairs = (double)w.rows * (w.rows + 1) / 2.0 * w.n_heads;
        float *ref = malloc(n * sizeof *ref);
        if (!ref) exit(1);
        for (int isa = 0; isa < KR_ISA_COUNT; isa++) {
            if (!kr_isa_supported((kr_isa)isa) || (no_scalar && isa == KR_ISA_SCALAR)) continue;
            kr_isa_set((kr_isa)isa);
            run_window_multi(&w);
            memcpy(ref, w.out, n * sizeof *ref);
            memset(w.out, 0, n * sizeof *w.out);
            run_window_causal(&w);
            int same = memcmp(ref, w.out, n * sizeof *ref) == 0;
            double tm = time_median(run_window_multi, &w, reps);
            double tc = time_median(run_window_causal, &w, reps);
            double flops = pairs * 4.0 * w.hd;
            char hd[16];
            snprintf(hd, sizeof hd, "%d×%d", w.hd, w.n_heads);
            printf("%-8s %6s  %-7s %10.1f %8.1f %10.1f %8.1f %7.2fx  %s\n", shapes[si].name, hd,
                   kr_isa_name((kr_isa)isa), tm * 1e6, flops / tm * 1e-9, tc * 1e6,
                   flops / tc * 1e-9, tm / tc, same ? "yes" : "NO");
        }
        free(ref);
        window_free(&w);
    }
}

int main(int argc, char **argv) {
    int reps = 7, no_scalar = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-scalar"))
            no_scalar = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps N] [--no-scalar]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (reps > MAX_REPS) reps = MAX_REPS;

    printf("attention for one decode step (all heads, all paths), single thread; median of %d\n",
           reps);
    printf("%-16s %5s %6s %4s %5s  %-7s %12s %12s %8s  %s\n", "shape", "paths", "shared", "own",
           "hd×h", "isa", "single µs", "multi µs", "speed-up", "bit-identical");
    for (int si = 0; si < N_SHAPES; si++) {
        step st;
        step_init(&st, k_shapes[si]);
        size_t n = (size_t)st.sh.nq * (size_t)st.d;
        float *ref = malloc(n * sizeof *ref);
        if (!ref) return 1;
        for (int isa = 0; isa < KR_ISA_COUNT; isa++) {
            if (!kr_isa_supported((kr_isa)isa) || (no_scalar && isa == KR_ISA_SCALAR)) continue;
            kr_isa_set((kr_isa)isa);
            run_single(&st);
            memcpy(ref, st.out, n * sizeof *ref);
            memset(st.out, 0, n * sizeof *st.out);
            run_multi(&st);
            int same = memcmp(ref, st.out, n * sizeof *ref) == 0;
            double t1 = time_median(run_single, &st, reps);
            double tm = time_median(run_multi, &st, reps);
            char hd[16];
            snprintf(hd, sizeof hd, "%d×%d", st.sh.head_dim, st.sh.n_heads);
            printf("%-16s %5d %6d %4d %6s  %-7s %12.1f %12.1f %7.2fx  %s\n", st.sh.name, st.sh.nq,
                   st.sh.n_shared, st.sh.n_own, hd, kr_isa_name((kr_isa)isa), t1 * 1e6, tm * 1e6,
                   t1 / tm, same ? "yes" : "NO");
        }
        free(ref);
        step_free(&st);
    }
    bench_windows(reps, no_scalar);
    return 0;
}
