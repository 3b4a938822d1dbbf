/*
 * server/job — the meeting point of one HTTP request and the scheduler thread.
 *
 * The scheduler calls kr_job_on_event on its own thread; it only copies the event into the
 * job under a mutex and signals a condition variable (the callback must stay short). The
 * connection thread waits on that condition to answer (plain JSON) or to emit progress events
 * (SSE). The job is reference-counted because either side may finish first: the HTTP side
 * holds one reference, the scheduler one from a successful submit until its DONE/FAILED
 * event, so a client that vanishes never leaves the scheduler writing into freed memory.
 */
#ifndef KR_SERVER_JOB_H
#define KR_SERVER_JOB_H

#include "engine/context.h"
#include "kronos.h"
#include "server/response.h"

typedef struct kr_job kr_job;

/* A consistent copy of a job's progress. */
typedef struct kr_job_state {
    int started; /* admitted into the running batch */
    int steps, pred_len; /* steps sampled so far, of pred_len */
    int done; /* DONE or FAILED arrived */
    kr_status status; /* when done: KR_OK or the failure */
    kr_error error; /* when failed */
    kr_api_usage usage; /* usage and timing (from STARTED on) */
} kr_job_state;

/* A new job with one reference (the caller's). NULL when out of memory. */
kr_job *kr_job_create(void);
void kr_job_ref(kr_job *j);
/* Drops a reference; the last one frees the job and any result not taken. NULL is a no-op. */
void kr_job_unref(kr_job *j);

/* The kr_event_callback to pass to kr_submit with user = the job, after kr_job_ref for the
 * scheduler's reference, which this callback drops on DONE and FAILED. */
void kr_job_on_event(void *user, const kr_event *ev);

/* Memory accounting for the result while it waits in the job: charge(user, bytes, 0) when it
 * arrives, charge(user, bytes, 1) when it is taken or freed with the job. Set before the job
 * is submitted. Called with the job's lock held on arrival, so the charge always comes first;
 * it must not call back into the job. */
typedef void (*kr_job_charge_fn)(void *user, size_t bytes, int release);
void kr_job_set_charge(kr_job *j, kr_job_charge_fn charge, void *user);

/* Records the scheduler's id (for cancel) once kr_submit has returned. */
void kr_job_set_id(kr_job *j, uint64_t id);
uint64_t kr_job_id(kr_job *j);

/* Waits up to timeout_s for the job to be done or to have more than seen_steps steps, then
 * copies its state into *st. Returns 1 when that happened, 0 on timeout. */
int kr_job_wait(kr_job *j, int seen_steps, double timeout_s, kr_job_state *st);

/* The result once done with KR_OK; the caller then owns it (kr_forecast_free). NULL before
 * or after it was taken, or on failure. */
kr_forecast *kr_job_take_result(kr_job *j);

#endif
