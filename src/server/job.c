/*
 * server/job — reference-counted rendezvous between the scheduler thread and an HTTP
 * connection thread (see job.h).
 */
#include "server/job.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct kr_job {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled on every event */
    int refs;
    uint64_t id;
    kr_job_state st;
    kr_forecast *result; /* owned until taken */
    kr_job_charge_fn charge; /* set before submit, then read-only */
    void *charge_user;
    size_t charged; /* the result's bytes charged, until taken or freed */
};

kr_job *kr_job_create(void) {
    kr_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    /* Deadlines are measured on the monotonic clock: a wall-clock jump must not time out
     * (or prolong) every waiting request. */
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&j->mu, NULL) != 0 || pthread_cond_init(&j->cv, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        free(j);
        return NULL;
    }
    pthread_condattr_destroy(&ca);
    j->refs = 1;
    return j;
}

void kr_job_ref(kr_job *j) {
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

void kr_job_unref(kr_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last) return;
    if (j->charged) j->charge(j->charge_user, j->charged, 1);
    kr_forecast_free(j->result);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void copy_usage(kr_job *j, const kr_event *ev) {
    kr_api_usage *u = &j->st.usage;
    u->id = ev->id;
    u->prefill_tokens = ev->stats.prefill_tokens;
    u->cached_tokens = ev->stats.cached_tokens;
    u->generated_tokens = ev->stats.generated_tokens;
    u->queue_seconds = ev->stats.queue_seconds;
    u->ttft_seconds = ev->stats.ttft_seconds;
    u->total_seconds = ev->stats.total_seconds;
}

void kr_job_on_event(void *user, const kr_event *ev) {
    kr_job *j = user;
    int final = ev->kind == KR_EVENT_DONE || ev->kind == KR_EVENT_FAILED;
    pthread_mutex_lock(&j->mu);
    if (j->st.done) {
        /* Nothing may follow DONE/FAILED; a stray result is freed, not leaked. */
        pthread_mutex_unlock(&j->mu);
        if (ev->kind == KR_EVENT_DONE) kr_forecast_free(ev->result);
        return;
    }
    if (!j->id) j->id = ev->id;
    switch (ev->kind) {
    case KR_EVENT_STARTED:
        j->st.started = 1;
        j->st.pred_len = ev->pred_len;
        copy_usage(j, ev);
        break;
    case KR_EVENT_STEP:
        j->st.started = 1;
        if (ev->step > j->st.steps) j->st.steps = ev->step;
        j->st.pred_len = ev->pred_len;
        copy_usage(j, ev);
        break;
    case KR_EVENT_DONE:
        j->st.started = 1;
        j->st.done = 1;
        j->st.status = KR_OK;
        j->result = ev->result;
        if (j->charge && ev->result) {
            j->charged = kr_forecast_bytes(ev->result);
            j->charge(j->charge_user, j->charged, 0);
        }
        if (ev->pred_len > 0) j->st.steps = j->st.pred_len = ev->pred_len;
        copy_usage(j, ev);
        break;
    case KR_EVENT_FAILED:
        j->st.done = 1;
        j->st.error = ev->error;
        j->st.status = ev->error.status != KR_OK ? ev->error.status : KR_ERR_INTERNAL;
        copy_usage(j, ev);
        break;
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (final) kr_job_unref(j); /* the scheduler's reference */
}

void kr_job_set_id(kr_job *j, uint64_t id) {
    pthread_mutex_lock(&j->mu);
    j->id = id;
    pthread_mutex_unlock(&j->mu);
}

uint64_t kr_job_id(kr_job *j) {
    pthread_mutex_lock(&j->mu);
    uint64_t id = j->id;
    pthread_mutex_unlock(&j->mu);
    return id;
}

int kr_job_wait(kr_job *j, int seen_steps, double timeout_s, kr_job_state *st) {
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    if (!(timeout_s > 0)) timeout_s = 0;
    double whole = floor(timeout_s);
    dl.tv_sec += (time_t)whole;
    dl.tv_nsec += (long)((timeout_s - whole) * 1e9);
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&j->mu);
    int rc = 0;
    while (!j->st.done && j->st.steps <= seen_steps) {
        rc = pthread_cond_timedwait(&j->cv, &j->mu, &dl);
        if (rc == ETIMEDOUT) break;
    }
    int got = j->st.done || j->st.steps > seen_steps;
    *st = j->st;
    pthread_mutex_unlock(&j->mu);
    return got;
}

kr_forecast *kr_job_take_result(kr_job *j) {
    pthread_mutex_lock(&j->mu);
    kr_forecast *r = j->result;
    const size_t charged = j->charged;
    j->result = NULL;
    j->charged = 0;
    pthread_mutex_unlock(&j->mu);
    if (charged) j->charge(j->charge_user, charged, 1);
    return r;
}

void kr_job_set_charge(kr_job *j, kr_job_charge_fn charge, void *user) {
    j->charge = charge;
    j->charge_user = user;
}
