/*
 * engine/sync — kr_forecast_run and kr_forecast_run_batch: submit every series to the
 * context and wait for all of them. A synchronous caller is one more client of the batching
 * API, so its requests obey the same queue, deadlines, priorities and metrics as a server's.
 *
 * A batch larger than the context's queue is fed as room frees up. The first failure cancels
 * the rest and is returned, naming the series.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "base/timeutil.h"
#include "engine/context.h"
#include "engine/forecast_internal.h"

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    kr_context *ctx;
    int n, in_flight;
    kr_forecast **out;
    uint64_t *ids;
    kr_status status; /* first failure */
    kr_error err;
    const kr_request_params *user; /* the caller's callbacks, forwarded */
} waiter;

static void on_event(void *user, const kr_event *ev) {
    waiter *w = user;
    if (w->user && w->user->on_event) {
        /* The result goes to out[] (or is freed when the batch fails): the caller's callback
         * sees DONE with result NULL, so nothing it does can free what out[] returns. */
        kr_event fwd = *ev;
        fwd.result = NULL;
        w->user->on_event(w->user->user, &fwd);
    }
    if (ev->kind != KR_EVENT_DONE && ev->kind != KR_EVENT_FAILED) return;
    pthread_mutex_lock(&w->mu);
    if (ev->kind == KR_EVENT_DONE) {
        if (w->status == KR_OK)
            w->out[ev->index] = ev->result;
        else
            kr_forecast_free(ev->result);
    } else if (w->status == KR_OK) {
        w->status = ev->error.status != KR_OK ? ev->error.status : KR_ERR_INTERNAL;
        w->err = ev->error;
        if (w->n > 1 && strncmp(w->err.message, "series ", 7) != 0)
            kr_error_prefix(&w->err, "series %d", ev->index);
        /* Still under the lock: the caller frees `w` once nothing is in flight. */
        for (int i = 0; i < w->n; i++)
            if (w->ids[i] && i != ev->index) kr_cancel(w->ctx, w->ids[i]);
    }
    w->in_flight--;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void wait_for(waiter *w, double seconds) {
    struct timespec dl;
    if (kr_realtime_deadline(seconds, &dl))
        pthread_cond_timedwait(&w->cv, &w->mu, &dl);
    else
        pthread_cond_wait(&w->cv, &w->mu);
}

/* Submits series[first, first + count) of a batch of n_series (indices and errors name the
 * series in the whole batch) and waits for them. On failure out[first, first + count) is freed. */
static kr_status submit_and_wait(kr_context *ctx, const kr_series *series, int first, int count,
                                 int n_series, const kr_forecast_params *params,
                                 const kr_request_params *request, const kr_seq_options *opt,
                                 kr_forecast **out, kr_error *err) {
    waiter w;
    memset(&w, 0, sizeof w);
    w.ctx = ctx;
    w.n = n_series;
    w.out = out;
    w.user = request;
    w.ids = calloc((size_t)n_series, sizeof *w.ids);
    if (!w.ids) return kr_error_set(err, KR_ERR_NOMEM, "kr_forecast_run: out of memory");
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    kr_request_params rp = request ? *request : kr_request_default_params();
    rp.on_event = on_event;
    rp.user = &w;
    double t0 = kr_now_seconds(), deadline = rp.deadline_s > 0 ? t0 + rp.deadline_s : 0;
    for (int i = first; i < first + count; i++) {
        kr_error e = { 0 };
        kr_status st;
        int refused = 0; /* by a full queue, waiting for room */
        for (;;) {
            if (deadline > 0) {
                rp.deadline_s = deadline - kr_now_seconds();
                if (rp.deadline_s <= 0) {
                    /* Refused by a full queue until the end: one rejected request. */
                    if (refused) kr_context_count_rejected(ctx);
                    st = kr_error_set(&e, KR_ERR_TIMEOUT,
                                      "deadline passed before series %d was queued", i);
                    break;
                }
            }
            pthread_mutex_lock(&w.mu);
            w.in_flight++;
            pthread_mutex_unlock(&w.mu);
            /* The id lands in w.ids under w.mu, where on_event's cancel sweep reads it. */
            uint64_t id = 0;
            st = rp.wait_for_room
                     ? kr_submit_waiting(ctx, &series[i], i, n_series, params, &rp, opt, &id, &e)
                     : kr_submit_ex(ctx, &series[i], i, n_series, params, &rp, opt, &id, &e);
            if (st == KR_OK) {
                pthread_mutex_lock(&w.mu);
                w.ids[i] = id;
                /* A failure that came while it was being submitted swept before its id was
                 * here: this one is cancelled now, not run to the end for nothing. */
                int late = w.status != KR_OK;
                pthread_mutex_unlock(&w.mu);
                if (late) kr_cancel(ctx, id);
                break;
            }
            pthread_mutex_lock(&w.mu);
            w.in_flight--;
            /* A full queue drains as our own (or others') requests finish: wait and retry,
             * unless none of ours is in flight and the context is shutting down. */
            int retry = rp.wait_for_room && st == KR_ERR_BUSY &&
                        strstr(e.message, "queue is full") && w.status == KR_OK;
            if (retry) {
                refused = 1;
                wait_for(&w, 0.01);
            }
            pthread_mutex_unlock(&w.mu);
            if (!retry) break;
        }
        if (st != KR_OK) {
            /* Refusals at submission name their series as the engine's failures do (a full
             * queue, a context shutting down: the checks of the series itself already do). */
            if (n_series > 1 && !strstr(e.message, "series ")) kr_error_prefix(&e, "series %d", i);
            pthread_mutex_lock(&w.mu);
            if (w.status == KR_OK) {
                w.status = st;
                w.err = e;
            }
            pthread_mutex_unlock(&w.mu);
            /* Only this thread writes w.ids, so reading them here needs no lock. */
            for (int j = first; j < i; j++)
                if (w.ids[j]) kr_cancel(ctx, w.ids[j]);
            break;
        }
        pthread_mutex_lock(&w.mu);
        int failed = w.status != KR_OK;
        pthread_mutex_unlock(&w.mu);
        if (failed) break;
    }
    pthread_mutex_lock(&w.mu);
    while (w.in_flight > 0) pthread_cond_wait(&w.cv, &w.mu);
    kr_status st = w.status;
    pthread_mutex_unlock(&w.mu);
    if (st != KR_OK) {
        if (err) *err = w.err;
        for (int i = first; i < first + count; i++) {
            kr_forecast_free(out[i]);
            out[i] = NULL;
        }
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    free(w.ids);
    return st;
}

int kr_static_batch_series(int batch_rows, int paths, int n_series) {
    if (batch_rows <= 0 || n_series < 1) return n_series;
    int per = batch_rows / (paths > 0 ? paths : 1);
    return per < 1 ? 1 : per > n_series ? n_series : per;
}

kr_status kr_forecast_run_batch(kr_context *ctx, const kr_series *series, int n_series,
                                const kr_forecast_params *params, const kr_request_params *request,
                                kr_forecast **out, kr_error *err) {
    if (!ctx || !series || !params || !out || n_series < 1)
        return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_forecast_run: NULL argument or no series");
    for (int i = 0; i < n_series; i++) out[i] = NULL;
    /* Checked once here, not per series: the deadline covers the whole batch. */
    kr_status st = kr_request_check(request, err);
    if (st != KR_OK) return st;
    const kr_seq_options *opt = request ? request->seq_options : NULL;
    int per =
        kr_static_batch_series(request ? request->static_batch_rows : 0, params->paths, n_series);
    if (per >= n_series)
        return submit_and_wait(ctx, series, 0, n_series, n_series, params, request, opt, out, err);
    /* Static batches: each finished before the next is submitted (offline scoring: bounded
     * memory, full steps), under one deadline for the whole batch. */
    kr_request_params rp = *request;
    double deadline = rp.deadline_s > 0 ? kr_now_seconds() + rp.deadline_s : 0;
    for (int first = 0; first < n_series; first += per) {
        if (deadline > 0) {
            rp.deadline_s = deadline - kr_now_seconds();
            if (rp.deadline_s <= 0) rp.deadline_s = 1e-9; /* fails as timed out, naming it */
        }
        int count = n_series - first < per ? n_series - first : per;
        st = submit_and_wait(ctx, series, first, count, n_series, params, &rp, opt, out, err);
        if (st != KR_OK) {
            for (int i = 0; i < first; i++) {
                kr_forecast_free(out[i]);
                out[i] = NULL;
            }
            return st;
        }
    }
    return KR_OK;
}

kr_status kr_forecast_run(kr_context *ctx, const kr_series *series,
                          const kr_forecast_params *params, kr_forecast **out, kr_error *err) {
    if (!out) return kr_error_set(err, KR_ERR_INVALID_ARG, "kr_forecast_run: out is NULL");
    return kr_forecast_run_batch(ctx, series, 1, params, NULL, out, err);
}
