/*
 * admission — what backfilling (kr_context_params.backfill, engine/admission.c) does to queue
 * waits under a tight KV budget (not part of ctest: it runs for tens of seconds).
 *
 * One seeded open-loop workload of two classes, Poisson arrivals: "small" forecasts (1 path,
 * few steps, short history) and "large" ones (many paths, many steps) whose KV peak is what
 * the budget is measured in. The same arrival sequence runs against two contexts of one
 * model, backfilling on and off, in turns (on, off, off, on, ...) so both see the same
 * machine. Per mode and class it prints the queue wait (submission to admission) and latency
 * percentiles, the throughput and the requests backfilled. The prefix cache is off: every
 * window is different anyway, and the budget is then the running set's alone.
 *
 *   admission [--model DIR | --shape NAME] [--data CSV] [--seconds S] [--rate R]
 *             [--large-share F] [--budget-large X] [--rounds N] [--seed S] [--threads N]
 */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "bench_model.h"
#include "engine/context_internal.h"
#include "engine/generate.h"
#include "kernels/kernels.h"
#include "kronos.h"
#include "series/candles.h"

enum { SMALL = 0, LARGE = 1 };
static const char *const k_class[2] = { "small", "large" };

typedef struct shape {
    int lookback, paths, pred_len;
} shape;

/* One request of the workload and, once run, what its events said. */
typedef struct arrival {
    double at; /* seconds after the start */
    int cls, start; /* class; first candle row of its window */
    double queue_s, total_s;
    int done, failed;
} arrival;

typedef struct run_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    arrival *a;
    int finished;
} run_state;

typedef struct slot {
    run_state *rs;
    int i;
} slot;

static void on_event(void *user, const kr_event *ev) {
    slot *s = user;
    if (ev->kind != KR_EVENT_DONE && ev->kind != KR_EVENT_FAILED) return;
    run_state *rs = s->rs;
    pthread_mutex_lock(&rs->mu);
    arrival *a = &rs->a[s->i];
    a->queue_s = ev->stats.queue_seconds;
    a->total_s = ev->stats.total_seconds;
    a->done = 1;
    a->failed = ev->kind == KR_EVENT_FAILED;
    rs->finished++;
    pthread_cond_broadcast(&rs->cv);
    pthread_mutex_unlock(&rs->mu);
    kr_forecast_free(ev->result);
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The q-quantile of sorted v[0..n) (nearest rank). */
static double quantile(const double *v, int n, double q) {
    if (n == 0) return NAN;
    int k = (int)ceil(q * n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* xorshift64*: a seeded, portable uniform in (0, 1). */
static double uniform(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return ((double)((*s * 2685821657736338717ull) >> 11) + 0.5) / 9007199254740992.0;
}

typedef struct mode_totals {
    double *queue[2], *total[2];
    int n[2], failed;
    double makespan;
    int64_t backfilled;
} mode_totals;

/* Runs the arrivals against ctx in real time; returns 0 on success. */
static int run_workload(kr_context *ctx, const kr_candles *cs, const shape sh[2], arrival *a, int n,
                        mode_totals *t) {
    run_state rs = { .a = a, .finished = 0 };
    pthread_mutex_init(&rs.mu, NULL);
    pthread_cond_init(&rs.cv, NULL);
    slot *slots = calloc((size_t)n, sizeof *slots);
    if (!slots) return 1;
    kr_context_stats before;
    kr_context_get_stats(ctx, &before);
    double t0 = kr_now_seconds();
    for (int i = 0; i < n; i++) {
        a[i].done = a[i].failed = 0;
        double wait = t0 + a[i].at - kr_now_seconds();
        if (wait > 0) usleep((useconds_t)(wait * 1e6));
        const shape *s = &sh[a[i].cls];
        kr_series ser = kr_candles_slice(cs, a[i].start, s->lookback);
        kr_forecast_params p = kr_forecast_default_params();
        p.paths = s->paths;
        p.pred_len = s->pred_len;
        p.seed = 1 + (uint64_t)i;
        slots[i] = (slot){ &rs, i };
        kr_request_params rp = kr_request_default_params();
        rp.on_event = on_event;
        rp.user = &slots[i];
        kr_error err = { 0 };
        if (kr_submit(ctx, &ser, &p, &rp, NULL, &err) != KR_OK) {
            fprintf(stderr, "admission: request %d: %s\n", i, err.message);
            return 1;
        }
    }
    pthread_mutex_lock(&rs.mu);
    while (rs.finished < n) pthread_cond_wait(&rs.cv, &rs.mu);
    pthread_mutex_unlock(&rs.mu);
    t->makespan += kr_now_seconds() - t0;
    kr_context_stats after;
    kr_context_get_stats(ctx, &after);
    t->backfilled += after.backfilled - before.backfilled;
    for (int i = 0; i < n; i++) {
        if (a[i].failed) {
            t->failed++;
            continue;
        }
        int c = a[i].cls;
        t->queue[c][t->n[c]] = a[i].queue_s;
        t->total[c][t->n[c]++] = a[i].total_s;
    }
    free(slots);
    pthread_mutex_destroy(&rs.mu);
    pthread_cond_destroy(&rs.cv);
    return 0;
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        { "model", required_argument, NULL, 'm' },
        { "shape", required_argument, NULL, 'S' },
        { "data", required_argument, NULL, 'd' },
        { "seconds", required_argument, NULL, 's' },
        { "rate", required_argument, NULL, 'r' },
        { "large-share", required_argument, NULL, 'L' },
        { "budget-large", required_argument, NULL, 'b' },
        { "rounds", required_argument, NULL, 'R' },
        { "seed", required_argument, NULL, 'e' },
        { "threads", required_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    const char *model_dir = NULL, *shape_name = NULL,
               *data = KR_SOURCE_DIR "/data/XSHG_5min_600977.csv";
    double seconds = 20, rate = 8, large_share = 0.15, budget_large = 1.5;
    int rounds = 2, threads = 0, c;
    uint64_t seed = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': model_dir = optarg; break;
        case 'S': shape_name = optarg; break;
        case 'd': data = optarg; break;
        case 's': seconds = atof(optarg); break;
        case 'r': rate = atof(optarg); break;
        case 'L': large_share = atof(optarg); break;
        case 'b': budget_large = atof(optarg); break;
        case 'R': rounds = atoi(optarg); break;
        case 'e': seed = strtoull(optarg, NULL, 10); break;
        case 'j': threads = atoi(optarg); break;
        default: fprintf(stderr, "admission: bad flag (see the comment at the top)\n"); return 2;
        }
    }
    if (!(seconds > 0 && rate > 0 && large_share >= 0 && large_share <= 1 && budget_large >= 1 &&
          rounds >= 1 && seed > 0)) {
        fprintf(stderr, "admission: need --seconds > 0, --rate > 0, --large-share in [0, 1], "
                        "--budget-large >= 1, --rounds >= 1, --seed > 0\n");
        return 2;
    }
    kr_error err = { 0 };
    bench_model_dirs dirs;
    kr_model *m = NULL;
    kr_candles *cs = NULL;
    if (bench_model_dirs_resolve(model_dir, shape_name, &dirs, &err) != KR_OK ||
        kr_model_load(dirs.predictor, dirs.tokenizer, NULL, &m, &err) != KR_OK ||
        kr_candles_read_csv(data, &cs, &err) != KR_OK) {
        fprintf(stderr, "admission: %s\n", err.message);
        return 1;
    }
    const shape sh[2] = { { 200, 1, 10 }, { 400, 32, 60 } };
    if (cs->n < sh[LARGE].lookback + 1) {
        fprintf(stderr, "admission: %s has %lld rows, need more than %d\n", data, (long long)cs->n,
                sh[LARGE].lookback);
        return 1;
    }

    /* The arrivals: exponential gaps, a class each, a window anywhere in the data. */
    int cap = (int)(rate * seconds * 2 + 64), n = 0;
    arrival *a = calloc((size_t)cap, sizeof *a);
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull;
    for (double t = 0; n < cap;) {
        t += -log(uniform(&rng)) / rate;
        if (t >= seconds) break;
        int cls = uniform(&rng) < large_share ? LARGE : SMALL;
        int span = (int)cs->n - sh[cls].lookback;
        a[n++] = (arrival){ .at = t, .cls = cls, .start = (int)(uniform(&rng) * span) };
    }

    /* The KV peaks the admission charges (a context's engine knows the model's sizes). */
    size_t peak[2] = { 0, 0 };
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = threads;
    cp.prefix_cache = 0;
    cp.tune = 0;
    cp.max_queue = cap;
    kr_context *probe = NULL;
    if (kr_context_create(m, &cp, &probe, &err) != KR_OK) {
        fprintf(stderr, "admission: %s\n", err.message);
        return 1;
    }
    for (int s = 0; s < 2; s++) {
        kr_forecast_params p = kr_forecast_default_params();
        p.paths = sh[s].paths;
        p.pred_len = sh[s].pred_len;
        peak[s] = kr_seq_kv_peak_bytes(&probe->eng, sh[s].lookback, &p, 0);
    }
    kr_context_free(probe);
    size_t budget = (size_t)(budget_large * (double)peak[LARGE]);
    kr_context *ctx[2] = { NULL, NULL }; /* [0] backfill on, [1] off */
    for (int k = 0; k < 2; k++) {
        cp.kv_budget_bytes = budget;
        cp.backfill = k == 0;
        if (kr_context_create(m, &cp, &ctx[k], &err) != KR_OK) {
            fprintf(stderr, "admission: %s\n", err.message);
            return 1;
        }
    }

    mode_totals t[2];
    memset(t, 0, sizeof t);
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < 2; s++) {
            t[k].queue[s] = calloc((size_t)n * (size_t)rounds, sizeof(double));
            t[k].total[s] = calloc((size_t)n * (size_t)rounds, sizeof(double));
        }
    int small = 0;
    for (int i = 0; i < n; i++) small += a[i].cls == SMALL;
    printf("admission: %s, isa %s, %d requests over %.0f s (%d small: %d rows x %d path x %d "
           "steps; %d large: %d rows x %d paths x %d steps), KV budget %.2f MB = %.2f large "
           "peaks (small peak %.2f MB), %d rounds per mode\n\n",
           dirs.root, kr_isa_name(kr_isa_active()), n, seconds, small, sh[SMALL].lookback,
           sh[SMALL].paths, sh[SMALL].pred_len, n - small, sh[LARGE].lookback, sh[LARGE].paths,
           sh[LARGE].pred_len, budget / 1e6, budget_large, peak[SMALL] / 1e6, rounds);
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < 2; j++) {
            int k = (r + j) % 2; /* on, off, off, on, ... */
            if (run_workload(ctx[k], cs, sh, a, n, &t[k]) != 0) return 1;
        }

    printf("| backfill | class | requests | queue mean s | queue p50 s | queue p95 s | queue p99 s "
           "| queue max s | latency p50 s | latency p95 s |\n"
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < 2; s++) {
            int cnt = t[k].n[s];
            qsort(t[k].queue[s], (size_t)cnt, sizeof(double), cmp_double);
            qsort(t[k].total[s], (size_t)cnt, sizeof(double), cmp_double);
            double sum = 0;
            for (int i = 0; i < cnt; i++) sum += t[k].queue[s][i];
            printf("| %s | %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n",
                   k == 0 ? "on" : "off", k_class[s], cnt, cnt ? sum / cnt : NAN,
                   quantile(t[k].queue[s], cnt, 0.5), quantile(t[k].queue[s], cnt, 0.95),
                   quantile(t[k].queue[s], cnt, 0.99), cnt ? t[k].queue[s][cnt - 1] : NAN,
                   quantile(t[k].total[s], cnt, 0.5), quantile(t[k].total[s], cnt, 0.95));
        }
    printf("\n| backfill | makespan s (all rounds) | requests/s | backfilled | failed |\n"
           "|---|---:|---:|---:|---:|\n");
    for (int k = 0; k < 2; k++)
        printf("| %s | %.2f | %.2f | %lld | %d |\n", k == 0 ? "on" : "off", t[k].makespan,
               (double)n * rounds / t[k].makespan, (long long)t[k].backfilled, t[k].failed);

    for (int k = 0; k < 2; k++) {
        kr_context_free(ctx[k]);
        for (int s = 0; s < 2; s++) {
            free(t[k].queue[s]);
            free(t[k].total[s]);
        }
    }
    free(a);
    kr_model_free(m);
    kr_candles_free(cs);
    return 0;
}
