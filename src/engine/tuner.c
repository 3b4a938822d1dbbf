/* engine/tuner — see tuner.h. */
#include "engine/tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sort.h"

#define TUNER_MAX_WAIT_MS 200
#define TUNER_MAX_TOKENS 32768

static void say(kr_tuner *t, const char *line) {
    if (t->log) t->log(t->log_user, line);
}

static void export_limits(kr_tuner *t, int wait_ms, int tokens) {
    kr_metric_set(t->m_wait, wait_ms / 1000.0);
    kr_metric_set(t->m_tokens, tokens);
}

void kr_tuner_init(kr_tuner *t, const kr_context_params *p, kr_metrics *m,
                   void (*log)(void *user, const char *line), void *log_user) {
    memset(t, 0, sizeof *t);
    t->target_queue = p->target_queue_p95_s > 0 ? p->target_queue_p95_s : 0.5;
    t->target_ttft = p->target_ttft_p95_s > 0 ? p->target_ttft_p95_s : 2.0;
    t->period = 2.0;
    t->cache_budget_max = p->kv_budget_bytes;
    t->log = log;
    t->log_user = log_user;
    t->m_wait =
        kr_metrics_gauge(m, "kronos_tuner_batch_wait_seconds", "", "Current batch_wait (tuned)");
    t->m_tokens = kr_metrics_gauge(m, "kronos_tuner_max_batch_tokens", "",
                                   "Current max_batch_tokens (tuned)");
    t->m_cache_budget = kr_metrics_gauge(m, "kronos_tuner_prefix_cache_budget_bytes", "",
                                         "Current prefix cache budget (tuned)");
    t->m_adj_wait = kr_metrics_counter(m, "kronos_tuner_adjustments_total",
                                       "parameter=\"batch_wait\"", "Changes made by the tuner");
    t->m_adj_tokens =
        kr_metrics_counter(m, "kronos_tuner_adjustments_total", "parameter=\"max_batch_tokens\"",
                           "Changes made by the tuner");
    t->m_adj_cache =
        kr_metrics_counter(m, "kronos_tuner_adjustments_total", "parameter=\"prefix_cache_budget\"",
                           "Changes made by the tuner");
    export_limits(t, p->batch_wait_ms, p->max_batch_tokens);
    kr_metric_set(t->m_cache_budget, (double)(p->kv_budget_bytes / 2));
}

static void push(double *arr, int *n, double v) {
    if (*n < KR_TUNER_SAMPLES)
        arr[(*n)++] = v;
    else
        arr[rand() % KR_TUNER_SAMPLES] = v; /* reservoir-ish: keeps a recent sample */
}

void kr_tuner_observe_queue(kr_tuner *t, double s) { push(t->queue, &t->n_queue, s); }
void kr_tuner_observe_ttft(kr_tuner *t, double s) { push(t->ttft, &t->n_ttft, s); }

void kr_tuner_observe_cache(kr_tuner *t, int64_t queried, int64_t hits) {
    t->cache_queried += queried;
    t->cache_hits += hits;
}

static int cmp_d(const void *a, const void *b, void *ctx) {
    (void)ctx;
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double p95(double *v, int n, double *tmp) {
    if (n == 0) return NAN;
    kr_sort(v, (size_t)n, sizeof(double), cmp_d, NULL, tmp);
    int i = (int)ceil(0.95 * n) - 1;
    return v[i < 0 ? 0 : i];
}

void kr_tuner_note(kr_tuner *t, int wait_ms, int tokens, const char *reason) {
    char line[256];
    snprintf(line, sizeof line, "tuner: %s: batch_wait_ms=%d max_batch_tokens=%d", reason, wait_ms,
             tokens);
    say(t, line);
    export_limits(t, wait_ms, tokens);
}

void kr_tuner_tick(kr_tuner *t, double now, int waiting, int running, int *wait_ms, int *tokens,
                   kr_prefix_cache *cache) {
    if (t->last_tick == 0) t->last_tick = now;
    if (now - t->last_tick < t->period) return;
    t->last_tick = now;
    int nq = t->n_queue;
    double q95 = p95(t->queue, t->n_queue, t->sort_tmp), f95 = p95(t->ttft, t->n_ttft, t->sort_tmp);
    char line[256];
    int missed = nq >= 3 && (q95 > t->target_queue || (t->n_ttft >= 3 && f95 > t->target_ttft));
    if (missed) {
        int w = *wait_ms / 2 < 5 ? 0 : *wait_ms / 2;
        int k = *tokens + *tokens / 4 > TUNER_MAX_TOKENS ? TUNER_MAX_TOKENS : *tokens + *tokens / 4;
        if (w != *wait_ms || k != *tokens) {
            snprintf(line, sizeof line,
                     "tuner: p95 queue wait %.3f s (target %.3f), p95 TTFT %.3f s (target %.3f): "
                     "batch_wait_ms %d -> %d, max_batch_tokens %d -> %d",
                     q95, t->target_queue, f95, t->target_ttft, *wait_ms, w, *tokens, k);
            say(t, line);
            if (w != *wait_ms) kr_metric_add(t->m_adj_wait, 1);
            if (k != *tokens) kr_metric_add(t->m_adj_tokens, 1);
            *wait_ms = w;
            *tokens = k;
        }
    } else if (nq >= 2 && waiting == 0 && running <= 1 && q95 < t->target_queue / 4 &&
               (t->n_ttft == 0 || f95 < t->target_ttft / 4) && *wait_ms < TUNER_MAX_WAIT_MS) {
        int w = *wait_ms + 10 > TUNER_MAX_WAIT_MS ? TUNER_MAX_WAIT_MS : *wait_ms + 10;
        snprintf(
            line, sizeof line,
            "tuner: light load, p95 queue wait %.3f s well under %.3f s: batch_wait_ms %d -> %d",
            q95, t->target_queue, *wait_ms, w);
        say(t, line);
        kr_metric_add(t->m_adj_wait, 1);
        *wait_ms = w;
    }
    export_limits(t, *wait_ms, *tokens);
    t->n_queue = t->n_ttft = 0;

    if (cache && t->cache_queried >= 64) {
        kr_prefix_cache_stats cs;
        kr_prefix_cache_get_stats(cache, &cs);
        double rate = (double)t->cache_hits / (double)t->cache_queried;
        t->low_hit_ticks = rate < 0.4 ? t->low_hit_ticks + 1 : 0;
        size_t budget = cs.budget;
        if (t->low_hit_ticks >= 3 && budget > ((size_t)16 << 20)) {
            budget -= budget / 4;
            t->low_hit_ticks = 0;
            snprintf(line, sizeof line,
                     "tuner: prefix cache hit rate %.0f%% < 40%% for 3 ticks: budget -> %zu MB",
                     rate * 100, budget >> 20);
        } else if (rate >= 0.4 && cs.evictions > t->last_evictions &&
                   budget < t->cache_budget_max) {
            budget += budget / 4;
            if (budget > t->cache_budget_max) budget = t->cache_budget_max;
            snprintf(line, sizeof line,
                     "tuner: prefix cache hit rate %.0f%% with evictions: budget -> %zu MB",
                     rate * 100, budget >> 20);
        }
        if (budget != cs.budget) {
            say(t, line);
            kr_prefix_cache_set_budget(cache, budget);
            kr_metric_add(t->m_adj_cache, 1);
        }
        kr_metric_set(t->m_cache_budget, (double)budget);
        t->last_evictions = cs.evictions;
        t->cache_queried = t->cache_hits = 0;
    }
}
