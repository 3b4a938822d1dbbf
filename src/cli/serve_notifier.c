/*
 * cli/serve_notifier — see serve_notifier.h.
 */
#include "serve_notifier.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cli/service_notify.h"
#include "kronos.h"

/* How often the STATUS line is brought up to date when no watchdog asks for more. */
#define KR_STATUS_PERIOD_USEC 5000000ull

struct serve_notifier {
    kr_server *srv;
    void (*log)(void *user, const char *line);
    uint64_t watchdog_usec; /* 0: none */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, failed_said;
    pthread_t thread;
};

/* Sends state; the first failure is logged, later ones are not (the manager is gone). */
static void send_state(serve_notifier *n, const char *state) {
    char why[400];
    if (kr_service_notify(state, why, sizeof why) >= 0) return;
    pthread_mutex_lock(&n->mu);
    int said = n->failed_said;
    n->failed_said = 1;
    pthread_mutex_unlock(&n->mu);
    if (!said && n->log) {
        char line[512];
        snprintf(line, sizeof line, "warning: cannot tell the service manager: %s", why);
        n->log(NULL, line);
    }
}

static void status_line(serve_notifier *n, char *out, size_t cap) {
    kr_context_stats st;
    kr_context_get_stats(kr_server_context(n->srv), &st);
    snprintf(out, cap, "STATUS=%s: %d running, %d waiting, %lld done, %lld failed",
             kr_server_is_draining(n->srv) ? "draining" : "serving", st.running, st.waiting,
             (long long)st.completed, (long long)st.failed);
}

static void *notifier_main(void *arg) {
    serve_notifier *n = arg;
    /* Half the watchdog interval, as sd_watchdog_enabled(3) advises: a ping that is late by
     * one long engine step still arrives in time. */
    uint64_t period = n->watchdog_usec ? n->watchdog_usec / 2 : KR_STATUS_PERIOD_USEC;
    if (period < 1000) period = 1000;
    pthread_mutex_lock(&n->mu);
    for (;;) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += (time_t)(period / 1000000);
        until.tv_nsec += (long)(period % 1000000) * 1000;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!n->stop && pthread_cond_timedwait(&n->cv, &n->mu, &until) == 0) {
        }
        if (n->stop) break;
        pthread_mutex_unlock(&n->mu);
        char state[256];
        size_t used = 0;
        int alive = 1;
        if (n->watchdog_usec) {
            /* Blocks while the engine is stuck: then no ping goes out, as it should. After a
             * drain has stopped the engine it fails at once, and the pings end with it. */
            alive = kr_context_ping(kr_server_context(n->srv), NULL) == KR_OK;
            if (alive) used = (size_t)snprintf(state, sizeof state, "WATCHDOG=1\n");
        }
        status_line(n, state + used, sizeof state - used);
        send_state(n, state);
        pthread_mutex_lock(&n->mu);
        if (!alive) break;
    }
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

serve_notifier *serve_notifier_start(kr_server *srv, const char *status,
                                     void (*log)(void *user, const char *line)) {
    const char *socket = getenv("NOTIFY_SOCKET");
    if (!socket || !*socket) return NULL;
    serve_notifier *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->srv = srv;
    n->log = log;
    char why[400] = "";
    n->watchdog_usec = kr_service_watchdog_usec(why, sizeof why);
    if (why[0] && log) {
        char line[512];
        snprintf(line, sizeof line, "warning: %s; no watchdog pings", why);
        log(NULL, line);
    }
    pthread_mutex_init(&n->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&n->cv, &ca);
    pthread_condattr_destroy(&ca);
    char state[1200];
    snprintf(state, sizeof state, "READY=1\nMAINPID=%ld\nSTATUS=%s", (long)getpid(), status);
    send_state(n, state);
    if (pthread_create(&n->thread, NULL, notifier_main, n) != 0) {
        if (log) log(NULL, "warning: no thread for the service manager's status and watchdog");
        pthread_cond_destroy(&n->cv);
        pthread_mutex_destroy(&n->mu);
        free(n);
        return NULL;
    }
    return n;
}

void serve_notifier_stopping(serve_notifier *n, const char *status) {
    if (!n) return;
    char state[512];
    snprintf(state, sizeof state, "STOPPING=1\nSTATUS=%s", status);
    send_state(n, state);
}

void serve_notifier_free(serve_notifier *n) {
    if (!n) return;
    pthread_mutex_lock(&n->mu);
    n->stop = 1;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
    pthread_join(n->thread, NULL);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
    free(n);
}
