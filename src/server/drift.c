/* server/drift — see drift.h. */
#include "server/drift.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "analyst/fidelity_stats.h"
#include "base/error.h"

enum { QUEUE_CAP = 4 };

typedef struct shadow_job {
    int64_t n;
    int64_t *timestamps, *future;
    double *values;
    int has_volume, has_amount;
    kr_forecast_params params;
    double *returns; /* the quantised paths' returns [paths] */
    double last_close;
} shadow_job;

struct kr_drift {
    kr_model *shadow;
    kr_context *ctx; /* one thread, f32 KV, no prefix cache: the reference it compares with */
    double sample, credit; /* every forecast adds `sample` credit; a whole unit samples one */
    pthread_mutex_t mu;
    pthread_cond_t cv, idle;
    shadow_job *queue[QUEUE_CAP];
    int head, count, busy, stop;
    pthread_t thread;
    int started;
    kr_metric *m_drift, *m_p, *m_hist, *m_samples, *m_dropped, *m_budget;
};

static void job_free(shadow_job *j) {
    if (!j) return;
    free(j->timestamps);
    free(j->future);
    free(j->values);
    free(j->returns);
    free(j);
}

/* Path returns at the horizon: close[H-1] / last close − 1. */
static void horizon_returns(const kr_forecast *f, double last_close, double *out) {
    int H = kr_forecast_pred_len(f);
    for (int p = 0; p < kr_forecast_paths(f); p++)
        out[p] = kr_forecast_path(f, p)[(size_t)(H - 1) * 6 + KR_CLOSE] / last_close - 1.0;
}

static void compare(kr_drift *d, shadow_job *j) {
    kr_series s = { .n = j->n,
                    .timestamps = j->timestamps,
                    .values = j->values,
                    .has_volume = j->has_volume,
                    .has_amount = j->has_amount,
                    .future_timestamps = j->future };
    kr_forecast *f = NULL;
    kr_error err = { 0 };
    /* Most often a sample whose f32 KV does not fit the shadow's budget: skipped, counted. */
    if (kr_forecast_run(d->ctx, &s, &j->params, &f, &err) != KR_OK) {
        kr_metric_add(d->m_dropped, 1);
        return;
    }
    int P = kr_forecast_paths(f);
    double *ref = malloc((size_t)P * sizeof *ref);
    if (ref) {
        horizon_returns(f, j->last_close, ref);
        double ks = 0, p = 1;
        kr_ks2_test(ref, P, j->returns, P, &ks, &p);
        kr_metric_set(d->m_drift, ks);
        kr_metric_set(d->m_p, p);
        kr_metric_observe(d->m_hist, ks);
        kr_metric_add(d->m_samples, 1);
    }
    free(ref);
    kr_forecast_free(f);
}

static void *worker(void *arg) {
    kr_drift *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->stop && d->count == 0) pthread_cond_wait(&d->cv, &d->mu);
        if (d->stop) break;
        shadow_job *j = d->queue[d->head];
        d->head = (d->head + 1) % QUEUE_CAP;
        d->count--;
        d->busy = 1;
        pthread_mutex_unlock(&d->mu);
        compare(d, j);
        job_free(j);
        pthread_mutex_lock(&d->mu);
        d->busy = 0;
        if (d->count == 0) pthread_cond_broadcast(&d->idle);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

kr_status kr_drift_create(kr_model *shadow, double sample, size_t kv_budget_bytes,
                          kr_metrics *metrics, kr_drift **out, kr_error *err) {
    *out = NULL;
    if (!shadow || !metrics || !(sample > 0.0) || sample > 1.0 || kv_budget_bytes == 0) {
        kr_model_free(shadow);
        return kr_error_set(err, KR_ERR_INVALID_ARG,
                            "drift: need a shadow model, a sample in (0, 1] and a KV budget");
    }
    kr_drift *d = calloc(1, sizeof *d);
    if (!d) {
        kr_model_free(shadow);
        return kr_error_set(err, KR_ERR_NOMEM, "drift: out of memory");
    }
    d->shadow = shadow;
    d->sample = sample;
    kr_context_params cp = kr_context_default_params();
    cp.n_threads = 1;
    cp.prefix_cache = 0;
    cp.max_running = 4;
    cp.max_queue = 4;
    cp.kv_budget_bytes = kv_budget_bytes;
    kr_status st = kr_context_create(shadow, &cp, &d->ctx, err);
    if (st != KR_OK) {
        kr_model_free(shadow);
        free(d);
        return st;
    }
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    pthread_cond_init(&d->idle, NULL);
    static const double bounds[] = { 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0 };
    static const kr_metric_desc k_drift = { "kronos_quant_drift", KR_METRIC_GAUGE,
                                            "KS statistic between the f32 shadow's and the served "
                                            "model's path returns at the horizon, latest sampled "
                                            "request",
                                            NULL, 0 };
    static const kr_metric_desc k_p = { "kronos_quant_drift_p_value", KR_METRIC_GAUGE,
                                        "p-value of the latest kronos_quant_drift KS statistic",
                                        NULL, 0 };
    static const kr_metric_desc k_hist = { "kronos_quant_drift_ks", KR_METRIC_HISTOGRAM,
                                           "KS statistics of the sampled shadow comparisons",
                                           bounds, 9 };
    static const kr_metric_desc k_samples = { "kronos_quant_drift_samples_total", KR_METRIC_COUNTER,
                                              "Requests compared against the f32 shadow", NULL, 0 };
    static const kr_metric_desc k_dropped = {
        "kronos_quant_drift_dropped_total", KR_METRIC_COUNTER,
        "Sampled requests skipped: the shadow queue was full or the forecast does not fit the "
        "shadow's KV budget",
        NULL, 0
    };
    static const kr_metric_desc k_budget = { "kronos_quant_drift_kv_budget_bytes", KR_METRIC_GAUGE,
                                             "KV memory of the f32 shadow, set aside from "
                                             "kv_budget",
                                             NULL, 0 };
    d->m_drift = kr_metrics_series(metrics, &k_drift, NULL);
    d->m_p = kr_metrics_series(metrics, &k_p, NULL);
    d->m_hist = kr_metrics_series(metrics, &k_hist, NULL);
    d->m_samples = kr_metrics_series(metrics, &k_samples, NULL);
    d->m_dropped = kr_metrics_series(metrics, &k_dropped, NULL);
    d->m_budget = kr_metrics_series(metrics, &k_budget, NULL);
    kr_metric_set(d->m_budget, (double)kv_budget_bytes);
    if (!d->m_drift || !d->m_p || !d->m_hist || !d->m_samples || !d->m_dropped || !d->m_budget ||
        pthread_create(&d->thread, NULL, worker, d) != 0) {
        kr_drift_free(d);
        return kr_error_set(err, KR_ERR_INTERNAL, "drift: cannot start the shadow worker");
    }
    d->started = 1;
    *out = d;
    return KR_OK;
}

static shadow_job *copy_job(const kr_series *s, const kr_forecast_params *params,
                            const kr_forecast *q) {
    shadow_job *j = calloc(1, sizeof *j);
    int P = kr_forecast_paths(q), H = kr_forecast_pred_len(q);
    if (!j || !kr_forecast_path(q, 0) || s->n < 1) {
        free(j);
        return NULL;
    }
    j->n = s->n;
    j->timestamps = malloc((size_t)s->n * sizeof *j->timestamps);
    j->values = malloc((size_t)s->n * 6 * sizeof *j->values);
    j->future = malloc((size_t)H * sizeof *j->future);
    j->returns = malloc((size_t)P * sizeof *j->returns);
    if (!j->timestamps || !j->values || !j->future || !j->returns) {
        job_free(j);
        return NULL;
    }
    memcpy(j->timestamps, s->timestamps, (size_t)s->n * sizeof *j->timestamps);
    memcpy(j->values, s->values, (size_t)s->n * 6 * sizeof *j->values);
    /* The stamps the served forecast used, so the shadow predicts the same candles. */
    memcpy(j->future, kr_forecast_timestamps(q), (size_t)H * sizeof *j->future);
    j->has_volume = s->has_volume;
    j->has_amount = s->has_amount;
    j->params = *params;
    j->params.keep_paths = 1;
    j->last_close = s->values[(size_t)(s->n - 1) * 6 + KR_CLOSE];
    horizon_returns(q, j->last_close, j->returns);
    return j;
}

void kr_drift_offer(kr_drift *d, const kr_series *series, const kr_forecast_params *params,
                    const kr_forecast *quantised) {
    if (!d || !series || !params || !quantised || kr_forecast_paths(quantised) < 2) return;
    pthread_mutex_lock(&d->mu);
    d->credit += d->sample;
    int take = d->credit >= 1.0 - 1e-12;
    if (take) d->credit -= 1.0;
    int full = d->count == QUEUE_CAP;
    pthread_mutex_unlock(&d->mu);
    if (!take) return;
    if (full) {
        kr_metric_add(d->m_dropped, 1);
        return;
    }
    shadow_job *j = copy_job(series, params, quantised);
    if (!j) return;
    pthread_mutex_lock(&d->mu);
    if (d->count == QUEUE_CAP || d->stop) {
        pthread_mutex_unlock(&d->mu);
        kr_metric_add(d->m_dropped, 1);
        job_free(j);
        return;
    }
    d->queue[(d->head + d->count) % QUEUE_CAP] = j;
    d->count++;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

void kr_drift_flush(kr_drift *d) {
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    while (d->count > 0 || d->busy) pthread_cond_wait(&d->idle, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

void kr_drift_free(kr_drift *d) {
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    if (d->started) pthread_join(d->thread, NULL);
    for (int i = 0; i < d->count; i++) job_free(d->queue[(d->head + i) % QUEUE_CAP]);
    pthread_cond_destroy(&d->cv);
    pthread_cond_destroy(&d->idle);
    pthread_mutex_destroy(&d->mu);
    kr_context_free(d->ctx);
    kr_model_free(d->shadow);
    free(d);
}
