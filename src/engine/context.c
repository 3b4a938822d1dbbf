/*
 * engine/context — kr_context: creation (pool, workspace, prefix cache, metrics, engine
 * thread), submission and cancellation from any thread, limits, stats, metrics text, tasks,
 * drain and free. The engine thread's loop is in scheduler.c.
 */
#include "engine/context_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "model/kv_cache.h"
#include "model/model.h"

/* Rows one forward pass computes at most (generate.c splits larger work into such chunks). */
#define KR_WORKSPACE_ROWS 1024
/* Keys per attention row the workspace is sized for (the default max_context); longer
 * windows make the workspace grow once, visibly (kr_context_stats.workspace_grows). */
#define KR_WORKSPACE_KEYS 512

/* Upper bounds of the batch limits (kronos.h): those the server's config accepts, far past
 * what a CPU runs, and low enough that the tuner's bounds (4 x max_batch_tokens, 2 x
 * max_running) and the per-request arrays stay well inside int and memory. */
#define KR_LIMIT_BATCH_WAIT_MS 60000
#define KR_LIMIT_BATCH_TOKENS (1 << 24)
#define KR_LIMIT_RUNNING 65536
#define KR_LIMIT_QUEUE (1 << 20)

kr_context_params kr_context_default_params(void) {
    kr_context_params p;
    memset(&p, 0, sizeof p);
    p.n_threads = 0;
    p.kv_dtype = NULL;
    p.max_batch_tokens = 4096;
    p.max_running = 64;
    p.max_queue = 256;
    p.batch_wait_ms = 0;
    p.kv_budget_bytes = 0;
    p.prefix_cache = 1;
    p.static_batching = 0;
    p.background_share = 0.5;
    p.background_min_rows = 8;
    p.background_step_rows = 256;
    p.tune = 0;
    p.target_queue_p95_s = 0.1;
    p.target_ttft_p95_s = 2.0;
    p.profile = 1;
    p.backfill = 1;
    return p;
}

kr_request_params kr_request_default_params(void) {
    kr_request_params r;
    memset(&r, 0, sizeof r);
    r.priority = KR_PRIORITY_NORMAL;
    r.wait_for_room = 1;
    return r;
}

int kr_abort_flag(void *flag) {
    return flag != NULL && atomic_load_explicit((atomic_int *)flag, memory_order_relaxed) != 0;
}

kr_context_limits kr_context_limits_keep(void) {
    kr_context_limits l = { -1, 0, 0, 0, -1, -1.0, -1.0 };
    return l;
}

void kr_context_log(kr_context *c, const char *fmt, ...) {
    if (!c->p.log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->p.log(c->p.log_user, line);
}

/* Physical memory in bytes, or 0 when the system does not say. */
static size_t physical_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

static size_t default_kv_budget(void) {
    size_t phys = physical_memory();
    return phys ? phys / 4 : (size_t)1 << 30;
}

/* One batch limit against its range; the message names the field and the value. */
static kr_status check_limit(const char *what, const char *field, int v, int lo, int hi,
                             kr_error *err) {
    if (v >= lo && v <= hi) return KR_OK;
    return kr_error_set(err, KR_ERR_INVALID_ARG, "%s: %s must be in %d..%d, got %d", what, field,
                        lo, hi, v);
}

static kr_status parse_kv_dtype(const char *s, kr_kv_dtype *out, kr_error *err) {
    if (!s || !*s || strcmp(s, "f32") == 0)
        *out = KR_KV_F32;
    else if (strcmp(s, "bf16") == 0)
        *out = KR_KV_BF16;
    else if (strcmp(s, "int8") == 0)
        *out = KR_KV_INT8;
    else
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kv_dtype '%s' is not one of f32, bf16, int8",
                            s);
    return KR_OK;
}

static const char *const k_kv_names[] = { "f32", "bf16", "int8" };

/* Bytes a step of the context's limits needs: the activations of one forward pass of
 * KR_WORKSPACE_ROWS rows, attention scratch, logits and sampling of as many rows, the batch's
 * token arrays. An estimate with margin; the arena grows (once, counted) past it. */
static size_t workspace_estimate(const kr_model *m, const kr_context_params *p, int nth) {
    const kr_predictor_config *pc = &m->pred->cfg;
    const kr_tokenizer_config *tc = &m->tok->cfg;
    size_t rows =
        (size_t)(p->max_batch_tokens < KR_WORKSPACE_ROWS ? p->max_batch_tokens : KR_WORKSPACE_ROWS);
    rows += (size_t)p->max_running;
    size_t d = (size_t)(pc->d_model > tc->d_model ? pc->d_model : tc->d_model);
    size_t ff = (size_t)(pc->ff_dim > tc->ff_dim ? pc->ff_dim : tc->ff_dim);
    int bits = pc->s1_bits > pc->s2_bits ? pc->s1_bits : pc->s2_bits;
    size_t vocab = (size_t)1 << bits;
    size_t floats = rows * (8 * d + 2 * ff) /* block activations */
                    + rows * 2 * (vocab + d) /* logits, context rows */
                    + (size_t)nth * 33 * KR_WORKSPACE_KEYS * 2 /* attention scratch */
                    + 8 * vocab; /* sampler scratch */
    size_t bytes = floats * sizeof(float) + rows * 512; /* key refs, plans, batch arrays */
    if (p->kv_dtype && strcmp(p->kv_dtype, "f32") != 0)
        bytes += rows * KR_WORKSPACE_KEYS * d * sizeof(float) / 8; /* dequantised keys */
    return bytes + bytes / 4;
}

/* Every metric of the engine, its name, type and help once (engine/metrics.h), and where the
 * context keeps the series. */
static const double k_batch_bounds[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024 };
static const double k_row_bounds[] = { 1, 4, 16, 64, 256, 1024, 4096, 16384, 65536 };
#define N_BOUNDS(b) (int)(sizeof b / sizeof b[0])
#define COUNTER(name, help) \
    { name, KR_METRIC_COUNTER, help, NULL, 0 }
#define GAUGE(name, help) \
    { name, KR_METRIC_GAUGE, help, NULL, 0 }
#define LATENCY(name, help) \
    { name, KR_METRIC_HISTOGRAM, help, NULL, 0 }
static const kr_metric_desc k_requests =
    COUNTER("kronos_requests_total", "Finished requests by outcome");
static const kr_metric_desc k_part_seconds =
    COUNTER("kronos_step_part_seconds_total",
            "Engine step time by part (the step profile; 0 when it is off)");
static const struct {
    kr_metric_desc desc;
    size_t at; /* offsetof(kr_context, m_...) */
} k_engine_metrics[] = {
    { LATENCY("kronos_time_to_first_step_seconds",
              "Time from submission to the first sampled step (TTFT)"),
      offsetof(kr_context, m_ttft) },
    { LATENCY("kronos_inter_step_latency_seconds", "Time between consecutive steps of a request"),
      offsetof(kr_context, m_itl) },
    { LATENCY("kronos_queue_wait_seconds",
              "Time a request waited before joining the running batch"),
      offsetof(kr_context, m_queue) },
    { LATENCY("kronos_request_latency_seconds", "End-to-end time of a request in the engine"),
      offsetof(kr_context, m_e2e) },
    { { "kronos_batch_size", KR_METRIC_HISTOGRAM,
        "Sample paths of the running requests at an engine step", k_batch_bounds,
        N_BOUNDS(k_batch_bounds) },
      offsetof(kr_context, m_batch) },
    { { "kronos_step_rows", KR_METRIC_HISTOGRAM,
        "Rows (prefill, decode, re-run) computed in one engine step", k_row_bounds,
        N_BOUNDS(k_row_bounds) },
      offsetof(kr_context, m_rows) },
    { GAUGE("kronos_requests_running", "Requests in the running batch"),
      offsetof(kr_context, m_running) },
    { GAUGE("kronos_requests_waiting", "Requests waiting to be admitted"),
      offsetof(kr_context, m_waiting) },
    { GAUGE("kronos_queue_oldest_wait_seconds",
            "How long the longest-waiting queued request has waited"),
      offsetof(kr_context, m_oldest_wait) },
    { COUNTER("kronos_requests_backfilled_total",
              "Requests started past an earlier one waiting for KV memory, without delaying it"),
      offsetof(kr_context, m_backfilled) },
    { GAUGE("kronos_kv_cache_used_bytes",
            "KV memory held by running requests and the prefix cache"),
      offsetof(kr_context, m_kv_used) },
    { GAUGE("kronos_kv_cache_budget_bytes", "KV memory budget"),
      offsetof(kr_context, m_kv_budget) },
    { GAUGE("kronos_kv_cache_usage_ratio", "KV memory used / budget"),
      offsetof(kr_context, m_kv_usage) },
    { GAUGE("kronos_kv_blocks_used",
            "KV blocks held by any store of the process (requests, prefix cache, tokenizer)"),
      offsetof(kr_context, m_kv_blocks_used) },
    { GAUGE("kronos_kv_blocks_free", "Freed KV blocks kept for reuse"),
      offsetof(kr_context, m_kv_blocks_free) },
    { GAUGE("kronos_kv_blocks_free_bytes",
            "Payload of the freed KV blocks kept for reuse (within the KV budget; beyond 64 MB "
            "they go back after 5 s unused)"),
      offsetof(kr_context, m_kv_blocks_free_bytes) },
    { GAUGE("kronos_engine_busy_ratio", "Fraction of the last interval the engine computed"),
      offsetof(kr_context, m_busy) },
    { GAUGE("kronos_prefix_cache_bytes", "Bytes held by the prefix cache"),
      offsetof(kr_context, m_cache_bytes) },
    { COUNTER("kronos_generated_tokens_total", "Tokens sampled (all paths)"),
      offsetof(kr_context, m_gen_tokens) },
    { COUNTER("kronos_prefill_tokens_total", "Context tokens prefilled"),
      offsetof(kr_context, m_prefill_tokens) },
    { GAUGE("kronos_workspace_bytes",
            "Workspace arena of the engine (sized from the batch limits)"),
      offsetof(kr_context, m_workspace) },
    /* The limits in force (profile, then tuner), so a dashboard shows what the engine does. */
    { GAUGE("kronos_scheduler_batch_wait_seconds", "batch_wait in force (profile, then tuner)"),
      offsetof(kr_context, m_lim_wait) },
    { GAUGE("kronos_scheduler_max_batch_tokens", "max_batch_tokens in force (profile, then tuner)"),
      offsetof(kr_context, m_lim_tokens) },
    { GAUGE("kronos_scheduler_max_running", "max_running in force (profile, then tuner)"),
      offsetof(kr_context, m_lim_running) },
    { GAUGE("kronos_scheduler_max_queue", "max_queue in force (profile)"),
      offsetof(kr_context, m_lim_queue) },
    { GAUGE("kronos_scheduler_static_batching",
            "1: static batches (offline), 0: continuous batching"),
      offsetof(kr_context, m_lim_static) },
};
#undef COUNTER
#undef GAUGE
#undef LATENCY

static void register_metrics(kr_context *c) {
    kr_metrics *m = c->metrics;
    for (size_t i = 0; i < sizeof k_engine_metrics / sizeof k_engine_metrics[0]; i++)
        *(kr_metric **)((char *)c + k_engine_metrics[i].at) =
            kr_metrics_series(m, &k_engine_metrics[i].desc, "");
    c->m_q_tokens = kr_metrics_series(m, &kr_metric_prefix_queried_tokens, "");
    c->m_h_tokens = kr_metrics_series(m, &kr_metric_prefix_hit_tokens, "");
    c->m_ok = kr_metrics_series(m, &k_requests, "outcome=\"ok\"");
    c->m_failed = kr_metrics_series(m, &k_requests, "outcome=\"error\"");
    c->m_cancelled = kr_metrics_series(m, &k_requests, "outcome=\"cancelled\"");
    c->m_timeout = kr_metrics_series(m, &k_requests, "outcome=\"timeout\"");
    c->m_rejected = kr_metrics_series(m, &k_requests, "outcome=\"rejected\"");
    for (int i = 0; i < KR_PART_COUNT; i++) {
        char labels[64];
        snprintf(labels, sizeof labels, "part=\"%s\"", kr_profile_part_name(i));
        c->m_part_seconds[i] = kr_metrics_series(m, &k_part_seconds, labels);
    }
    kr_metric_set(c->m_kv_budget, (double)c->p.kv_budget_bytes);
}

static void context_destroy(kr_context *c) {
    kr_prefix_cache_free(c->cache);
    kr_norm_anchors_free(c->anchors);
    /* After the cache's blocks are back: what the pool kept within this budget goes too. */
    if (c->kv_keep_reserved) kr_kv_pool_keep_release(c->kv_keep_reserved);
    kr_pool_free(c->eng.ex.pool);
    kr_arena_free(c->eng.ex.arena);
    if (c->own_metrics) kr_metrics_free(c->metrics);
    free(c->running);
    free(c->step_groups);
    free(c->step_budget);
    free(c->step_order);
    free(c->admit_slots);
    free(c->abort_checks);
    free(c->cancels);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->wake);
    pthread_cond_destroy(&c->event);
    free(c);
}

kr_status kr_context_create_ex(const kr_model *model, const kr_context_params *params,
                               kr_metrics *metrics, kr_context **out, kr_error *err) {
    if (!model || !out)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_context_create: NULL argument");
    *out = NULL;
    kr_context_params p = params ? *params : kr_context_default_params();
    kr_kv_dtype kv = KR_KV_F32;
    kr_status st = parse_kv_dtype(p.kv_dtype, &kv, err);
    if (st != KR_OK) return st;
    if ((st = check_limit("context", "max_batch_tokens", p.max_batch_tokens, 1,
                          KR_LIMIT_BATCH_TOKENS, err)) != KR_OK ||
        (st = check_limit("context", "max_running", p.max_running, 1, KR_LIMIT_RUNNING, err)) !=
            KR_OK ||
        (st = check_limit("context", "max_queue", p.max_queue, 1, KR_LIMIT_QUEUE, err)) != KR_OK ||
        (st = check_limit("context", "batch_wait_ms", p.batch_wait_ms, 0, KR_LIMIT_BATCH_WAIT_MS,
                          err)) != KR_OK)
        return st;
    if (!(p.background_share > 0 && p.background_share <= 1)) p.background_share = 0.5;
    if (p.background_min_rows < 1) p.background_min_rows = 1;
    if (p.background_step_rows < 1) p.background_step_rows = 256;
    if (p.kv_budget_bytes == 0) p.kv_budget_bytes = default_kv_budget();
    kr_context *c = calloc(1, sizeof *c);
    if (!c) return kr_error_set(err, KR_ERR_NOMEM, "context: out of memory");
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->wake, NULL);
    pthread_cond_init(&c->event, NULL);
    c->model = model;
    c->p = p;
    /* The block pool may keep freed blocks within this budget (model/kv_cache.h): a busy engine then
     * reuses pages already faulted in instead of writing each request's KV into fresh ones.
     * Never more than the machine's memory: the pool adds every context's reservation, and a
     * budget of SIZE_MAX ("unlimited") would wrap that sum. */
    size_t phys = physical_memory();
    c->kv_keep_reserved = phys && p.kv_budget_bytes > phys ? phys : p.kv_budget_bytes;
    kr_kv_pool_keep_reserve(c->kv_keep_reserved);
    c->p.kv_dtype = k_kv_names[kv]; /* the caller's string need not outlive the call */
    c->eng.model = model;
    c->eng.kv_dtype = kv;
    if (p.profile) {
        c->profile.enabled = c->profile_shared.enabled = 1;
        c->eng.profile = &c->profile;
        c->eng.ex.prof = &c->profile.parts;
    }
    c->metrics = metrics;
    if (!c->metrics) {
        if ((st = kr_metrics_create(&c->metrics, err)) != KR_OK) {
            context_destroy(c);
            return st;
        }
        c->own_metrics = 1;
    }
    st = kr_pool_create(p.n_threads, &c->eng.ex.pool, err);
    if (st == KR_OK)
        st = kr_arena_create(workspace_estimate(model, &c->p, kr_pool_size(c->eng.ex.pool)),
                             &c->eng.ex.arena, err);
    c->cap_running = p.max_running;
    c->running = calloc((size_t)c->cap_running, sizeof *c->running);
    c->step_groups = calloc((size_t)c->cap_running, sizeof *c->step_groups);
    c->step_budget = calloc((size_t)c->cap_running, sizeof *c->step_budget);
    c->step_order = calloc((size_t)c->cap_running, sizeof *c->step_order);
    c->admit_slots = calloc((size_t)c->cap_running + 1, sizeof *c->admit_slots);
    c->cap_cancels = 64;
    c->cancels = calloc((size_t)c->cap_cancels, sizeof *c->cancels);
    if (st == KR_OK && (!c->running || !c->step_groups || !c->step_budget || !c->step_order ||
                        !c->admit_slots || !c->cancels))
        st = kr_error_set(err, KR_ERR_NOMEM, "context: out of memory");
    if (st == KR_OK && p.prefix_cache)
        st = kr_prefix_cache_create(c->p.kv_budget_bytes / 2, &c->cache, err);
    if (st == KR_OK) st = kr_norm_anchors_create(&c->anchors, err);
    if (st != KR_OK) {
        context_destroy(c);
        return st;
    }
    register_metrics(c);
    /* The prefix cache starts at half the KV budget; the tuner may grow it to three quarters,
     * leaving a quarter for running requests. */
    kr_tuner_init(&c->tuner, &c->p, c->cache ? c->p.kv_budget_bytes / 2 : 0,
                  c->cache ? c->p.kv_budget_bytes / 4 * 3 : 0, c->metrics, c->p.log, c->p.log_user);
    pthread_mutex_lock(&c->lock);
    kr_context_publish_stats(c);
    pthread_mutex_unlock(&c->lock);
    /* Read before the engine thread owns the arena and the tuner may move the limits. */
    kr_arena_stats as;
    kr_arena_get_stats(c->eng.ex.arena, &as);
    int nth = kr_pool_size(c->eng.ex.pool);
    if (pthread_create(&c->thread, NULL, kr_context_engine_main, c) != 0) {
        context_destroy(c);
        return kr_error_set(err, KR_ERR_INTERNAL, "context: cannot start the engine thread");
    }
    c->thread_started = 1;
    kr_context_log(
        c,
        "context: threads=%d kv_dtype=%s max_batch_tokens=%d max_running=%d max_queue=%d "
        "batch_wait_ms=%d kv_budget=%zu MB workspace=%zu MB",
        nth, c->p.kv_dtype, p.max_batch_tokens, p.max_running, p.max_queue, p.batch_wait_ms,
        c->p.kv_budget_bytes >> 20, as.capacity >> 20);
    *out = c;
    return KR_OK;
}

kr_status kr_context_create(const kr_model *model, const kr_context_params *params,
                            kr_context **out, kr_error *err) {
    return kr_context_create_ex(model, params, NULL, out, err);
}

kr_metrics *kr_context_registry(kr_context *ctx) { return ctx ? ctx->metrics : NULL; }
const kr_model *kr_context_model(const kr_context *ctx) { return ctx ? ctx->model : NULL; }

/* ---------------------------------------------------------------- submission (any thread) */

kr_status kr_request_check(const kr_request_params *r, kr_error *err) {
    /* NaN would compare false with everything and mean "no deadline" by accident. */
    if (r && isnan(r->deadline_s))
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "deadline_s must be a number of seconds (> 0: the deadline, <= 0: "
                            "none), got %g",
                            r->deadline_s);
    if (r && (r->batch_wait_ms < 0 || r->batch_wait_ms > KR_LIMIT_BATCH_WAIT_MS))
        return kr_error_set(err, KR_ERR_INVALID_ARG, "batch_wait_ms must be in 0..%d, got %d",
                            KR_LIMIT_BATCH_WAIT_MS, r->batch_wait_ms);
    return KR_OK;
}

/* How many requests may wait (lock held). Those the engine's next admission will start into
 * free running slots do not really wait, so a burst on an idle engine fills the free slots and
 * then max_queue: with max_running 2 and max_queue 4, six requests are taken, not four. The
 * slot count is the engine's last published one, which can only be behind on slots freed. */
static int queue_room(kr_context *c) {
    KR_ASSERT_LOCKED(&c->lock);
    const int running = atomic_load(&c->running_now);
    int free_slots = c->p.max_running - running;
    if (c->p.static_batching && running > 0) free_slots = 0; /* no admission until it ends */
    return c->p.max_queue + (free_slots > 0 ? free_slots : 0);
}

/* count_full: a full queue's refusal counts as a rejected request (0: the caller waits for
 * room and tries again, so only its final verdict counts). */
static kr_status submit(kr_context *c, const kr_series *series, int index, int n_series,
                        const kr_forecast_params *params, const kr_request_params *request,
                        const kr_seq_options *opt, int count_full, uint64_t *id, kr_error *err) {
    if (!c || !series || !params)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "submit: NULL argument");
    kr_status rst = kr_request_check(request, err);
    if (rst != KR_OK) return rst;
    kr_req *r = calloc(1, sizeof *r);
    if (!r) return kr_error_set(err, KR_ERR_NOMEM, "submit: out of memory");
    kr_status st =
        kr_forecast_job_prepare_with(&r->job, series, index, n_series, params, c->anchors, err);
    if (st != KR_OK) {
        free(r);
        return st;
    }
    r->rp = request ? *request : kr_request_default_params();
    if (opt) r->opt = *opt;
    /* One that could never fit is refused now, clearly, instead of running past the budget
     * (or, with others running, waiting for memory that never comes); before its result
     * memory is allocated, which grows with the same paths x pred_len and under a tight
     * address-space limit would fail first with a bare "out of memory". */
    r->kv_peak = kr_seq_kv_peak_bytes(&c->eng, r->job.in.hist_len, &r->job.params, r->opt.naive);
    if (r->kv_peak > c->p.kv_budget_bytes) {
        char where[32] = "";
        if (n_series > 1) snprintf(where, sizeof where, "series %d: ", index);
        kr_status big = kr_error_set(
            err, KR_ERR_INVALID_ARG,
            "%sthe forecast needs %.1f MiB of KV memory (%d paths x pred_len %d over %d history "
            "rows), more than the whole KV budget (%.1f MiB): ask for fewer paths, a shorter "
            "pred_len or lookback, or raise the KV budget",
            where, (double)r->kv_peak / 1048576.0, r->job.params.paths, r->job.params.pred_len,
            r->job.in.hist_len, (double)c->p.kv_budget_bytes / 1048576.0);
        kr_forecast_job_release(&r->job);
        free(r);
        return big;
    }
    if ((st = kr_forecast_job_alloc_result(&r->job, err)) != KR_OK) {
        free(r);
        return st;
    }
    r->opt.index = index;
    r->index = index;
    r->t_submit = kr_now_seconds();
    r->deadline = r->rp.deadline_s > 0 ? r->t_submit + r->rp.deadline_s : 0;
    pthread_mutex_lock(&c->lock);
    if (c->draining || c->stop || c->n_waiting >= queue_room(c)) {
        int draining = c->draining || c->stop;
        int limit = c->p.max_queue, waiting = c->n_waiting;
        pthread_mutex_unlock(&c->lock);
        kr_forecast_job_release(&r->job);
        free(r);
        if (draining || count_full) kr_metric_add(c->m_rejected, 1);
        return draining ? kr_error_set(err, KR_ERR_BUSY, "the engine is shutting down")
                        : kr_error_set(err, KR_ERR_BUSY,
                                       "the request queue is full (%d waiting, max_queue %d)",
                                       waiting, limit);
    }
    r->id = ++c->next_id;
    /* Priority descending, then first come first served. */
    kr_req **pp = &c->wait_head;
    while (*pp && (*pp)->rp.priority >= r->rp.priority) pp = &(*pp)->next;
    r->next = *pp;
    *pp = r;
    c->n_waiting++;
    if (id) *id = r->id;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->lock);
    return KR_OK;
}

kr_status kr_submit_ex(kr_context *c, const kr_series *series, int index, int n_series,
                       const kr_forecast_params *params, const kr_request_params *request,
                       const kr_seq_options *opt, uint64_t *id, kr_error *err) {
    return submit(c, series, index, n_series, params, request, opt, 1, id, err);
}

kr_status kr_submit_waiting(kr_context *c, const kr_series *series, int index, int n_series,
                            const kr_forecast_params *params, const kr_request_params *request,
                            const kr_seq_options *opt, uint64_t *id, kr_error *err) {
    return submit(c, series, index, n_series, params, request, opt, 0, id, err);
}

void kr_context_count_rejected(kr_context *c) {
    if (c) kr_metric_add(c->m_rejected, 1);
}

kr_status kr_submit(kr_context *ctx, const kr_series *series, const kr_forecast_params *params,
                    const kr_request_params *request, uint64_t *id, kr_error *err) {
    return kr_submit_ex(ctx, series, 0, 1, params, request, NULL, id, err);
}

void kr_cancel(kr_context *c, uint64_t id) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    if (c->thread_exited) {
        /* Drained: every request has had its last event, and no engine thread is left to
         * consume the list, which would grow with every call. */
        pthread_mutex_unlock(&c->lock);
        return;
    }
    if (c->n_cancels == c->cap_cancels) {
        int cap = 2 * c->cap_cancels;
        uint64_t *n = realloc(c->cancels, (size_t)cap * sizeof *n);
        if (n) {
            c->cancels = n;
            c->cap_cancels = cap;
        }
    }
    if (c->n_cancels < c->cap_cancels) c->cancels[c->n_cancels++] = id;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->lock);
}

/* ---------------------------------------------------------------- tasks */

kr_status kr_context_run_task(kr_context *c, kr_context_task fn, void *user, kr_error *err) {
    if (!c || !fn) return kr_error_set(err, KR_ERR_INVALID_ARG, "run_task: NULL argument");
    kr_task t = { fn, user, KR_OK, { 0 }, 0, NULL };
    pthread_mutex_lock(&c->lock);
    if (c->stop || c->thread_exited) {
        pthread_mutex_unlock(&c->lock);
        return kr_error_set(err, KR_ERR_BUSY, "the engine is shutting down");
    }
    kr_task **pp = &c->tasks;
    while (*pp) pp = &(*pp)->next;
    *pp = &t;
    pthread_cond_signal(&c->wake);
    while (!t.done) pthread_cond_wait(&c->event, &c->lock);
    pthread_mutex_unlock(&c->lock);
    if (t.status != KR_OK && err) *err = t.err;
    return t.status;
}

static kr_status ping_task(void *user, const kr_engine *eng, kr_error *err) {
    (void)user;
    (void)eng;
    (void)err;
    return KR_OK;
}

kr_status kr_context_ping(kr_context *ctx, kr_error *err) {
    return kr_context_run_task(ctx, ping_task, NULL, err);
}

/* ---------------------------------------------------------------- state */

/* The limits in force into the snapshot and their gauges. Lock held; any thread. */
static void publish_limits(kr_context *c) {
    c->stats.batch_wait_ms = c->p.batch_wait_ms;
    c->stats.max_batch_tokens = c->p.max_batch_tokens;
    c->stats.max_running = c->p.max_running;
    c->stats.max_queue = c->p.max_queue;
    c->stats.static_batching = c->p.static_batching;
    kr_metric_set(c->m_lim_wait, c->p.batch_wait_ms / 1000.0);
    kr_metric_set(c->m_lim_tokens, c->p.max_batch_tokens);
    kr_metric_set(c->m_lim_running, c->p.max_running);
    kr_metric_set(c->m_lim_queue, c->p.max_queue);
    kr_metric_set(c->m_lim_static, c->p.static_batching);
}

/* The gauges any thread may bring up to date: the queue and the limits (under the lock), the
 * running requests and their KV (atomics the engine thread stores as they change), the
 * prefix cache's bytes as of the last step, and the process-wide block pool (its own lock).
 * Lock held; any thread. */
static void publish_shared(kr_context *c) {
    int running = atomic_load(&c->running_now);
    size_t kv = atomic_load(&c->kv_used_now) + c->stats.prefix_cache_bytes;
    size_t budget = c->p.kv_budget_bytes;
    kr_metric_set(c->m_running, running);
    kr_metric_set(c->m_waiting, c->n_waiting);
    kr_metric_set(c->m_oldest_wait, kr_context_oldest_wait_s(c, kr_now_seconds()));
    kr_metric_set(c->m_kv_used, (double)kv);
    kr_metric_set(c->m_kv_usage, budget ? (double)kv / (double)budget : 0);
    publish_limits(c);
    /* The block pool is process-wide: with one context per process these are its blocks. */
    kr_kv_pool_stats ps;
    kr_kv_pool_get_stats(&ps);
    kr_metric_set(c->m_kv_blocks_used, (double)ps.blocks_used);
    kr_metric_set(c->m_kv_blocks_free, (double)ps.blocks_free);
    kr_metric_set(c->m_kv_blocks_free_bytes, (double)ps.bytes_free);
}

/* Only the engine thread reads the prefix cache, the arena, the pool size and the step
 * counters (before it starts and after it exits, the creating / draining thread stands in
 * for it): another thread calling this would read them while the engine changes them. */
void kr_context_publish_stats(kr_context *c) {
    KR_ASSERT_LOCKED(&c->lock);
    KR_ASSERT_ENGINE_THREAD(c);
    kr_context_stats st;
    memset(&st, 0, sizeof st);
    st.running = c->n_running;
    st.waiting = c->n_waiting;
    st.draining = c->draining;
    st.kv_bytes_budget = c->p.kv_budget_bytes;
    if (c->cache) {
        kr_prefix_cache_stats cs;
        kr_prefix_cache_get_stats(c->cache, &cs);
        st.prefix_cache_bytes = cs.bytes;
        st.prefix_cache_decoder_bytes = cs.decoder_bytes;
        st.prefix_queried_tokens = cs.queried_tokens;
        st.prefix_hit_tokens = cs.hit_tokens;
    }
    st.kv_bytes_used = c->kv_used + st.prefix_cache_bytes;
    st.steps = c->steps;
    st.backfilled = c->backfilled;
    st.completed = atomic_load(&c->completed);
    st.failed = atomic_load(&c->failed);
    kr_arena_stats as;
    kr_arena_get_stats(c->eng.ex.arena, &as);
    st.workspace_bytes = as.capacity;
    st.workspace_grows = as.grows;
    st.n_threads = kr_pool_size(c->eng.ex.pool);
    snprintf(st.kv_dtype, sizeof st.kv_dtype, "%s", c->p.kv_dtype);
    kr_engine_profile_export(&c->profile_shared, &st.profile);
    for (int i = 0; i < KR_PART_COUNT; i++) {
        double v = st.profile.part[i].seconds, grew = v - c->part_seconds_published[i];
        if (grew > 0) {
            kr_metric_add(c->m_part_seconds[i], grew);
            c->part_seconds_published[i] = v;
        }
    }
    c->stats = st;
    kr_metric_set(c->m_cache_bytes, (double)st.prefix_cache_bytes);
    kr_metric_set(c->m_workspace, (double)st.workspace_bytes);
    publish_shared(c); /* also the limits into c->stats */
}

void kr_context_apply_limits(kr_context *c) {
    KR_ASSERT_LOCKED(&c->lock);
    KR_ASSERT_ENGINE_THREAD(c);
    if (!c->limits_changed) return;
    c->limits_changed = 0;
    /* The new values are the tuner's home: it moves from them, inside bounds derived from them. */
    kr_tuner_limits home = { c->p.batch_wait_ms, c->p.max_batch_tokens, c->p.max_running, 0, 0, 0 };
    kr_tuner_set_home(&c->tuner, &home, c->p.target_queue_p95_s, c->p.target_ttft_p95_s,
                      c->limits_reason);
}

void kr_context_get_stats(kr_context *c, kr_context_stats *st) {
    if (!c || !st) return;
    pthread_mutex_lock(&c->lock);
    *st = c->stats;
    st->running = atomic_load(&c->running_now);
    st->completed = atomic_load(&c->completed);
    st->failed = atomic_load(&c->failed);
    st->kv_bytes_used = atomic_load(&c->kv_used_now) + st->prefix_cache_bytes;
    st->waiting = c->n_waiting;
    st->queue_oldest_wait_seconds = kr_context_oldest_wait_s(c, kr_now_seconds());
    st->draining = c->draining;
    pthread_mutex_unlock(&c->lock);
}

/* A limit of kr_context_limits: `keep` (and below) keeps the current value; above it the
 * value must be in [lo, hi]. */
static kr_status check_new_limit(const char *field, int v, int keep, int lo, int hi,
                                 kr_error *err) {
    return v <= keep ? KR_OK : check_limit("limits", field, v, lo, hi, err);
}

kr_status kr_context_set_limits(kr_context *c, const kr_context_limits *l, const char *reason) {
    if (!c || !l) return KR_ERR_INVALID_ARG;
    const char *why = reason ? reason : "set";
    kr_error e = { 0 };
    kr_status st;
    /* All or nothing: a value out of range changes no limit, and the log says which. */
    if ((st = check_new_limit("batch_wait_ms", l->batch_wait_ms, -1, 0, KR_LIMIT_BATCH_WAIT_MS,
                              &e)) != KR_OK ||
        (st = check_new_limit("max_batch_tokens", l->max_batch_tokens, 0, 1, KR_LIMIT_BATCH_TOKENS,
                              &e)) != KR_OK ||
        (st = check_new_limit("max_running", l->max_running, 0, 1, KR_LIMIT_RUNNING, &e)) !=
            KR_OK ||
        (st = check_new_limit("max_queue", l->max_queue, 0, 1, KR_LIMIT_QUEUE, &e)) != KR_OK) {
        /* Under the lock, as every log line of the context: the callback sees one at a time. */
        pthread_mutex_lock(&c->lock);
        kr_context_log(c, "limits (%s) refused, nothing changed: %s", why, e.message);
        pthread_mutex_unlock(&c->lock);
        return st;
    }
    pthread_mutex_lock(&c->lock);
    if (l->batch_wait_ms >= 0) c->p.batch_wait_ms = l->batch_wait_ms;
    if (l->max_batch_tokens > 0) c->p.max_batch_tokens = l->max_batch_tokens;
    if (l->max_running > 0) c->p.max_running = l->max_running;
    if (l->max_queue > 0) c->p.max_queue = l->max_queue;
    if (l->static_batching >= 0) c->p.static_batching = l->static_batching != 0;
    if (l->target_queue_p95_s > 0) c->p.target_queue_p95_s = l->target_queue_p95_s;
    if (l->target_ttft_p95_s > 0) c->p.target_ttft_p95_s = l->target_ttft_p95_s;
    /* The tuner belongs to the engine thread: it takes the new home at its next boundary. */
    c->limits_changed = 1;
    snprintf(c->limits_reason, sizeof c->limits_reason, "%s", why);
    publish_limits(c);
    kr_context_log(
        c, "limits (%s): batch_wait_ms=%d max_batch_tokens=%d max_running=%d max_queue=%d %s", why,
        c->p.batch_wait_ms, c->p.max_batch_tokens, c->p.max_running, c->p.max_queue,
        c->p.static_batching ? "static" : "continuous");
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->lock);
    return KR_OK;
}

kr_status kr_context_metrics(kr_context *c, char **out, kr_error *err) {
    if (!c || !out) return kr_error_set(err, KR_ERR_INVALID_ARG, "metrics: NULL argument");
    /* What the engine thread published at its last step boundary, with the queue, the limits,
     * the running requests and the block pool as of now. */
    pthread_mutex_lock(&c->lock);
    publish_shared(c);
    pthread_mutex_unlock(&c->lock);
    size_t len = 0;
    return kr_metrics_render(c->metrics, out, &len, err);
}

/* ---------------------------------------------------------------- shutdown */

static int wait_exit(kr_context *c, double timeout_s) {
    struct timespec dl;
    if (timeout_s < 0 || !kr_realtime_deadline(timeout_s, &dl)) { /* no limit */
        while (!c->thread_exited) pthread_cond_wait(&c->event, &c->lock);
        return 1;
    }
    while (!c->thread_exited)
        if (pthread_cond_timedwait(&c->event, &c->lock, &dl) != 0) break;
    return c->thread_exited;
}

kr_status kr_context_drain(kr_context *c, double timeout_s) {
    if (!c) return KR_OK;
    kr_status st = KR_OK;
    pthread_mutex_lock(&c->lock);
    if (c->thread_started) {
        c->draining = 1;
        pthread_cond_broadcast(&c->wake);
        if (!wait_exit(c, timeout_s)) {
            /* Out of time: what is left is cancelled, its FAILED events delivered. */
            c->cancel_all = 1;
            pthread_cond_broadcast(&c->wake);
            wait_exit(c, -1);
            st = KR_ERR_TIMEOUT;
        }
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->thread, NULL);
        pthread_mutex_lock(&c->lock);
        if (st == KR_ERR_TIMEOUT)
            kr_context_log(c, "drain: time limit reached, cancelled the rest");
        c->thread_started = 0;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

void kr_context_free(kr_context *c) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    c->cancel_all = 1;
    pthread_mutex_unlock(&c->lock);
    kr_context_drain(c, -1);
    context_destroy(c);
}
