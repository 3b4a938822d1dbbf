/* engine/tuner — see tuner.h. */
#include "engine/tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sort.h"

#define TUNER_MAX_TOKENS 32768
#define TUNER_MAX_RUNNING 1024

static const char *const k_rule_names[KR_TUNER_N_RULES] = { "queue_pressure", "queue_relaxed",
                                                            "ttft_high",      "ttft_low",
                                                            "cache_low_hit",  "cache_shorten",
                                                            "cache_rewarm",   "cache_restore" };

kr_tuner_rules kr_tuner_default_rules(void) {
    kr_tuner_rules r;
    r.tick_s = 2.0;
    r.window_s = 300.0;
    r.relax_s = 600.0;
    r.cache_low_rate = 0.4;
    r.cache_min_queried = 64;
    return r;
}

static void say(kr_tuner *t, const char *line) {
    if (t->log) t->log(t->log_user, line);
}

/* The batch limits themselves are exported by the context (kronos_scheduler_*). */
static void export_limits(kr_tuner *t, const kr_tuner_limits *l) {
    if (l->cache_budget) kr_metric_set(t->m_cache_budget, (double)l->cache_budget);
}

static kr_metric *decision_counter(kr_tuner *t, int rule, const char *param, const char *dir) {
    if (!t->metrics) return NULL;
    char lab[160];
    snprintf(lab, sizeof lab, "rule=\"%s\",parameter=\"%s\",direction=\"%s\"", k_rule_names[rule],
             param, dir);
    return kr_metrics_series(t->metrics, &kr_metric_tuner_decisions, lab);
}

/* home * factor, or cap when that is more, but never below home itself: in 64 bits, since
 * home may be any positive int (a context's limits are range-checked, a test's need not be). */
static int bound_up(int home, int factor, int cap) {
    int64_t up = (int64_t)home * factor;
    if (up <= cap) return (int)up;
    return home > cap ? home : cap;
}

static void set_bounds(kr_tuner *t) {
    const kr_tuner_limits *h = &t->home;
    /* The wait only ever shortens from home: a tight profile stays tight. */
    t->lo.batch_wait_ms = 0;
    t->hi.batch_wait_ms = h->batch_wait_ms;
    t->lo.max_running = h->max_running;
    t->hi.max_running = bound_up(h->max_running, 2, TUNER_MAX_RUNNING);
    t->lo.max_batch_tokens = h->max_batch_tokens;
    t->hi.max_batch_tokens = bound_up(h->max_batch_tokens, 4, TUNER_MAX_TOKENS);
    t->lo.cache_budget = h->cache_budget;
    if (t->hi.cache_budget < h->cache_budget) t->hi.cache_budget = h->cache_budget;
}

void kr_tuner_init(kr_tuner *t, const kr_context_params *p, size_t cache_budget, size_t cache_max,
                   kr_metrics *m, void (*log)(void *user, const char *line), void *log_user) {
    memset(t, 0, sizeof *t);
    t->rules = kr_tuner_default_rules();
    t->target_queue = p->target_queue_p95_s > 0 ? p->target_queue_p95_s : 0.1;
    t->target_ttft = p->target_ttft_p95_s > 0 ? p->target_ttft_p95_s : 2.0;
    if (p->tune_window_s > 0) t->rules.window_s = p->tune_window_s;
    if (p->tune_relax_s > 0) t->rules.relax_s = p->tune_relax_s;
    t->log = log;
    t->log_user = log_user;
    t->metrics = m;
    static const kr_metric_desc k_cache_budget = { "kronos_tuner_prefix_cache_budget_bytes",
                                                   KR_METRIC_GAUGE,
                                                   "Current prefix cache budget (tuned)", NULL, 0 };
    t->m_cache_budget = kr_metrics_series(m, &k_cache_budget, "");
    /* Registered up front so every series reads 0 before its first decision. */
    static const struct {
        int rule;
        const char *param, *dir;
    } k_series[] = {
        { KR_TUNER_QUEUE_HIGH, "batch_wait", "down" },
        { KR_TUNER_QUEUE_HIGH, "max_running", "up" },
        { KR_TUNER_QUEUE_LOW, "batch_wait", "up" },
        { KR_TUNER_QUEUE_LOW, "max_running", "down" },
        { KR_TUNER_TTFT_HIGH, "max_batch_tokens", "up" },
        { KR_TUNER_TTFT_LOW, "max_batch_tokens", "down" },
        { KR_TUNER_CACHE_LOW, "prefix_cache_budget", "up" },
        { KR_TUNER_CACHE_SHORTEN, "prefix_cache_entry_blocks", "down" },
        { KR_TUNER_CACHE_REWARM, "prefix_cache_pool", "rewarm" },
        { KR_TUNER_CACHE_RESTORE, "prefix_cache_entry_blocks", "up" },
    };
    for (size_t i = 0; i < sizeof k_series / sizeof k_series[0]; i++)
        (void)decision_counter(t, k_series[i].rule, k_series[i].param, k_series[i].dir);
    t->home.batch_wait_ms = p->batch_wait_ms;
    t->home.max_batch_tokens = p->max_batch_tokens;
    t->home.max_running = p->max_running;
    t->home.cache_budget = cache_budget;
    t->hi.cache_budget = cache_max;
    set_bounds(t);
    for (int r = 0; r < KR_TUNER_N_RULES; r++) t->since[r] = -1;
    export_limits(t, &t->home);
}

void kr_tuner_set_home(kr_tuner *t, const kr_tuner_limits *home, double target_queue,
                       double target_ttft, const char *reason) {
    kr_tuner_limits h = *home;
    if (h.cache_budget == 0) h.cache_budget = t->home.cache_budget;
    t->home = h;
    if (target_queue > 0) t->target_queue = target_queue;
    if (target_ttft > 0) t->target_ttft = target_ttft;
    set_bounds(t);
    for (int r = 0; r < KR_TUNER_N_RULES; r++) t->since[r] = -1;
    char line[320];
    snprintf(line, sizeof line,
             "tuner: %s: home batch_wait_ms=%d max_batch_tokens=%d max_running=%d; bounds "
             "wait 0..%d, tokens %d..%d, running %d..%d",
             reason ? reason : "set", h.batch_wait_ms, h.max_batch_tokens, h.max_running,
             t->hi.batch_wait_ms, t->lo.max_batch_tokens, t->hi.max_batch_tokens, t->lo.max_running,
             t->hi.max_running);
    say(t, line);
    export_limits(t, &h);
}

/* Tracks whether rule r's signal holds; 1 when it has held for `need` seconds. */
static int sustained(kr_tuner *t, int r, int holds, double now, double need) {
    if (!holds) {
        t->since[r] = -1;
        return 0;
    }
    if (t->since[r] < 0) t->since[r] = now;
    return now - t->since[r] >= need;
}

/* Moves are computed in 64 bits (a limit near INT_MAX plus a quarter of itself would overflow
 * int) and clamped back into [lo, hi]. */
static int clampi(int64_t v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

/* Records one parameter move: log line, counter, and the rule's window restarts. */
static void moved(kr_tuner *t, int rule, const char *param, long from, long to, const char *why,
                  double now) {
    char line[320];
    snprintf(line, sizeof line, "tuner: %s (%s): %s %ld -> %ld", k_rule_names[rule], why, param,
             from, to);
    say(t, line);
    kr_metric_add(decision_counter(t, rule, param, to > from ? "up" : "down"), 1);
    t->since[rule] = now;
}

int kr_tuner_decide(kr_tuner *t, double now, const kr_tuner_signals *s, kr_tuner_limits *cur) {
    const kr_tuner_rules *R = &t->rules;
    int changes = 0;
    char why[160];
    /* Limits set from outside between ticks are held to the bounds too. */
    cur->batch_wait_ms = clampi(cur->batch_wait_ms, t->lo.batch_wait_ms, t->hi.batch_wait_ms);

    /* A saturated engine may admit nobody for a whole tick: the oldest waiter's age counts. */
    double qsig = s->n_queue > 0 ? s->queue_p95 : 0;
    if (s->waiting > 0 && s->oldest_wait_s > qsig) qsig = s->oldest_wait_s;
    int q_high = qsig > t->target_queue;
    int q_low = qsig < t->target_queue / 4;
    if (sustained(t, KR_TUNER_QUEUE_HIGH, q_high, now, R->window_s)) {
        snprintf(why, sizeof why, "queue wait %.3f s > %.3f s for %.0f s", qsig, t->target_queue,
                 now - t->since[KR_TUNER_QUEUE_HIGH]);
        int w = cur->batch_wait_ms / 2 < 2 ? 0 : cur->batch_wait_ms / 2;
        w = clampi(w, t->lo.batch_wait_ms, t->hi.batch_wait_ms);
        int r = clampi((int64_t)cur->max_running +
                           (cur->max_running / 4 > 1 ? cur->max_running / 4 : 1),
                       t->lo.max_running, t->hi.max_running);
        if (w != cur->batch_wait_ms) {
            moved(t, KR_TUNER_QUEUE_HIGH, "batch_wait", cur->batch_wait_ms, w, why, now);
            cur->batch_wait_ms = w;
            changes++;
        }
        if (r != cur->max_running) {
            moved(t, KR_TUNER_QUEUE_HIGH, "max_running", cur->max_running, r, why, now);
            cur->max_running = r;
            changes++;
        }
    }
    if (sustained(t, KR_TUNER_QUEUE_LOW, q_low, now, R->relax_s)) {
        snprintf(why, sizeof why, "queue wait %.3f s < %.3f s for %.0f s", qsig,
                 t->target_queue / 4, now - t->since[KR_TUNER_QUEUE_LOW]);
        int step = t->home.batch_wait_ms / 4 > 5 ? t->home.batch_wait_ms / 4 : 5;
        int w =
            clampi((int64_t)cur->batch_wait_ms + step, t->lo.batch_wait_ms, t->hi.batch_wait_ms);
        int r = clampi(cur->max_running - (cur->max_running / 5 > 1 ? cur->max_running / 5 : 1),
                       t->lo.max_running, t->hi.max_running);
        if (w != cur->batch_wait_ms) {
            moved(t, KR_TUNER_QUEUE_LOW, "batch_wait", cur->batch_wait_ms, w, why, now);
            cur->batch_wait_ms = w;
            changes++;
        }
        if (r != cur->max_running) {
            moved(t, KR_TUNER_QUEUE_LOW, "max_running", cur->max_running, r, why, now);
            cur->max_running = r;
            changes++;
        }
    }

    int f_high = s->n_ttft > 0 && s->ttft_p95 > t->target_ttft;
    int f_low = s->n_ttft == 0 || s->ttft_p95 < t->target_ttft / 4;
    if (sustained(t, KR_TUNER_TTFT_HIGH, f_high, now, R->window_s)) {
        snprintf(why, sizeof why, "TTFT p95 %.3f s > target %.3f s for %.0f s", s->ttft_p95,
                 t->target_ttft, now - t->since[KR_TUNER_TTFT_HIGH]);
        int k = clampi((int64_t)cur->max_batch_tokens + cur->max_batch_tokens / 4,
                       t->lo.max_batch_tokens, t->hi.max_batch_tokens);
        if (k != cur->max_batch_tokens) {
            moved(t, KR_TUNER_TTFT_HIGH, "max_batch_tokens", cur->max_batch_tokens, k, why, now);
            cur->max_batch_tokens = k;
            changes++;
        }
    }
    if (sustained(t, KR_TUNER_TTFT_LOW, f_low, now, R->relax_s)) {
        snprintf(why, sizeof why, "TTFT p95 under target/4 (%.3f s) for %.0f s", t->target_ttft / 4,
                 now - t->since[KR_TUNER_TTFT_LOW]);
        int k = clampi(cur->max_batch_tokens - cur->max_batch_tokens / 5, t->lo.max_batch_tokens,
                       t->hi.max_batch_tokens);
        if (k != cur->max_batch_tokens) {
            moved(t, KR_TUNER_TTFT_LOW, "max_batch_tokens", cur->max_batch_tokens, k, why, now);
            cur->max_batch_tokens = k;
            changes++;
        }
    }

    /* A low hit rate is worth more room only when entries are being evicted (capacity misses);
     * first sightings miss whatever the budget. Ticks without lookups keep the window open. */
    cur->cache_rewarm = 0;
    if (cur->cache_budget > 0 && s->cache_queried >= R->cache_min_queried) {
        double rate = (double)s->cache_hits / (double)s->cache_queried;
        int low = rate < R->cache_low_rate && s->cache_evictions > 0;
        /* When more room is used up: shorter entries (more windows fit), and when those are
         * as short as they go, a clear that keeps the hottest windows warm. */
        int grown = cur->cache_budget >= t->hi.cache_budget;
        int shortest = cur->cache_entry_blocks == KR_TUNER_ENTRY_BLOCKS_MIN;
        if (sustained(t, KR_TUNER_CACHE_SHORTEN, low && grown && !shortest, now, R->window_s)) {
            snprintf(why, sizeof why,
                     "prefix hit rate %.0f%% < %.0f%% with evictions, budget at its most, for "
                     "%.0f s",
                     rate * 100, R->cache_low_rate * 100, now - t->since[KR_TUNER_CACHE_SHORTEN]);
            int k = cur->cache_entry_blocks == 0 ? KR_TUNER_ENTRY_BLOCKS_FIRST
                                                 : cur->cache_entry_blocks / 2;
            if (k < KR_TUNER_ENTRY_BLOCKS_MIN) k = KR_TUNER_ENTRY_BLOCKS_MIN;
            /* Whole windows count as "more" than any cap in the log and the counter. */
            moved(t, KR_TUNER_CACHE_SHORTEN, "prefix_cache_entry_blocks",
                  cur->cache_entry_blocks ? cur->cache_entry_blocks : 1L << 30, k, why, now);
            cur->cache_entry_blocks = k;
            changes++;
        }
        if (sustained(t, KR_TUNER_CACHE_REWARM, low && grown && shortest, now, R->window_s)) {
            char line[320];
            snprintf(line, sizeof line,
                     "tuner: cache_rewarm (prefix hit rate %.0f%% < %.0f%% with evictions at %d "
                     "blocks an entry for %.0f s): clearing the pool but the %d hottest windows",
                     rate * 100, R->cache_low_rate * 100, cur->cache_entry_blocks,
                     now - t->since[KR_TUNER_CACHE_REWARM], KR_TUNER_REWARM_KEEP);
            say(t, line);
            kr_metric_add(decision_counter(t, KR_TUNER_CACHE_REWARM, "prefix_cache_pool", "rewarm"),
                          1);
            t->since[KR_TUNER_CACHE_REWARM] = now;
            cur->cache_rewarm = 1;
            changes++;
        }
        int fine = rate >= 2 * R->cache_low_rate || s->cache_evictions == 0;
        if (sustained(t, KR_TUNER_CACHE_RESTORE, fine && cur->cache_entry_blocks > 0, now,
                      R->relax_s)) {
            snprintf(why, sizeof why, "prefix hit rate %.0f%% (or no evictions) for %.0f s",
                     rate * 100, now - t->since[KR_TUNER_CACHE_RESTORE]);
            int k = cur->cache_entry_blocks * 2;
            if (k > 2 * KR_TUNER_ENTRY_BLOCKS_FIRST) k = 0;
            moved(t, KR_TUNER_CACHE_RESTORE, "prefix_cache_entry_blocks", cur->cache_entry_blocks,
                  k ? k : 1L << 30, why, now);
            cur->cache_entry_blocks = k;
            changes++;
        }
        if (sustained(t, KR_TUNER_CACHE_LOW, low, now, R->window_s)) {
            snprintf(why, sizeof why, "prefix hit rate %.0f%% < %.0f%% with evictions for %.0f s",
                     rate * 100, R->cache_low_rate * 100, now - t->since[KR_TUNER_CACHE_LOW]);
            size_t b = cur->cache_budget + cur->cache_budget / 4;
            if (b > t->hi.cache_budget) b = t->hi.cache_budget;
            if (b > cur->cache_budget) {
                moved(t, KR_TUNER_CACHE_LOW, "prefix_cache_budget", (long)cur->cache_budget,
                      (long)b, why, now);
                cur->cache_budget = b;
                changes++;
            }
        }
    }
    export_limits(t, cur);
    return changes;
}

/* ---------------------------------------------------------------- scheduler side */

static void push(double *arr, int *n, int *seen, double v) {
    /* Reservoir sampling with a deterministic index sequence: a fair sample of the tick. */
    (*seen)++;
    if (*n < KR_TUNER_SAMPLES)
        arr[(*n)++] = v;
    else
        arr[(unsigned)(*seen * 2654435761u) % KR_TUNER_SAMPLES] = v;
}

void kr_tuner_observe_queue(kr_tuner *t, double s) {
    push(t->queue, &t->n_queue, &t->seen_queue, s);
}
void kr_tuner_observe_ttft(kr_tuner *t, double s) { push(t->ttft, &t->n_ttft, &t->seen_ttft, s); }

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

void kr_tuner_idle(kr_tuner *t, double now) {
    if (t->idle_from == 0) t->idle_from = now;
    t->idle_to = now;
}

void kr_tuner_tick(kr_tuner *t, double now, int waiting, double oldest_wait_s, int *wait_ms,
                   int *tokens, int *running, kr_prefix_cache *cache) {
    if (t->last_tick == 0) t->last_tick = now;
    if (now - t->last_tick < t->rules.tick_s) return;
    if (t->idle_to - t->idle_from >= t->rules.tick_s) {
        /* The engine ticks only while it has work, so an idle span has no ticks of its own:
         * decided as what it was — nothing queued, no first step — it ends a pressing
         * signal's window where the work ended (bursts minutes apart are not minutes of
         * pressure) and holds the relaxing ones from there. No lookups: the cache rule does
         * not judge it, and the cache budget stays. */
        kr_tuner_signals idle;
        memset(&idle, 0, sizeof idle);
        kr_tuner_limits cur = { *wait_ms, *tokens, *running, 0, 0, 0 };
        kr_tuner_decide(t, t->idle_from + t->rules.tick_s, &idle, &cur);
        if (t->idle_to > t->idle_from + t->rules.tick_s)
            kr_tuner_decide(t, t->idle_to, &idle, &cur);
        *wait_ms = cur.batch_wait_ms;
        *tokens = cur.max_batch_tokens;
        *running = cur.max_running;
    }
    t->idle_from = t->idle_to = 0;
    t->last_tick = now;
    kr_tuner_signals s;
    memset(&s, 0, sizeof s);
    s.n_queue = t->n_queue;
    s.n_ttft = t->n_ttft;
    s.queue_p95 = p95(t->queue, t->n_queue, t->sort_tmp);
    s.ttft_p95 = p95(t->ttft, t->n_ttft, t->sort_tmp);
    s.waiting = waiting;
    s.oldest_wait_s = waiting > 0 ? oldest_wait_s : 0;
    kr_tuner_limits cur = { *wait_ms, *tokens, *running, 0, 0, 0 };
    kr_prefix_cache_stats cs;
    memset(&cs, 0, sizeof cs);
    if (cache) {
        kr_prefix_cache_get_stats(cache, &cs);
        s.cache_queried = t->cache_queried;
        s.cache_hits = t->cache_hits;
        s.cache_evictions = cs.evictions - t->last_evictions;
        cur.cache_budget = cs.budget;
        cur.cache_entry_blocks = cs.entry_blocks;
    }
    kr_tuner_decide(t, now, &s, &cur);
    *wait_ms = cur.batch_wait_ms;
    *tokens = cur.max_batch_tokens;
    *running = cur.max_running;
    if (cache && cur.cache_budget != cs.budget) kr_prefix_cache_set_budget(cache, cur.cache_budget);
    if (cache && cur.cache_entry_blocks != cs.entry_blocks)
        kr_prefix_cache_set_entry_blocks(cache, cur.cache_entry_blocks);
    if (cache && cur.cache_rewarm) {
        kr_prefix_cache_rewarm(cache, KR_TUNER_REWARM_KEEP);
        kr_prefix_cache_get_stats(cache, &cs); /* its drops are not evictions of this tick's */
    }
    t->last_evictions = cs.evictions;
    t->n_queue = t->n_ttft = t->seen_queue = t->seen_ttft = 0;
    t->cache_queried = t->cache_hits = 0;
}
