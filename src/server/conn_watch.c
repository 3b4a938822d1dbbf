/*
 * server/conn_watch — request deadlines and the watchdog (see conn_watch.h).
 */
#include "server/conn_watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "base/error.h"
#include "base/timeutil.h"

/* How often the watchdog looks: the precision of the deadline. */
#define KR_WATCH_PERIOD_S 0.1

struct kr_conn_slot {
    kr_conn_slot *prev, *next;
    int fd;
    double deadline; /* monotonic seconds; 0: none (a request is being handled) */
    int cut;
};

struct kr_conn_watch {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
    int stop;
    double timeout_s;
    kr_conn_slot *head;
    void (*on_cut)(void *user);
    void *user;
    void (*tick)(void *user);
    void *tick_user;
};

static void *watchdog(void *arg) {
    kr_conn_watch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(KR_WATCH_PERIOD_S * 1e9);
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&w->wake, &w->mu, &ts);
        const double now = kr_now_seconds();
        int cut = 0;
        for (kr_conn_slot *s = w->head; s; s = s->next)
            if (!s->cut && s->deadline > 0 && now > s->deadline) {
                /* Shutting the socket down (not closing it: libmicrohttpd owns the
                 * descriptor) wakes the connection's thread with an end of stream. */
                shutdown(s->fd, SHUT_RDWR);
                s->cut = 1;
                cut++;
            }
        if (cut && w->on_cut) {
            pthread_mutex_unlock(&w->mu);
            for (int i = 0; i < cut; i++) w->on_cut(w->user);
            pthread_mutex_lock(&w->mu);
        }
        if (w->tick && !w->stop) {
            void (*tick)(void *) = w->tick;
            void *user = w->tick_user;
            pthread_mutex_unlock(&w->mu);
            tick(user);
            pthread_mutex_lock(&w->mu);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

kr_status kr_conn_watch_create(double read_timeout_s, void (*on_cut)(void *user), void *user,
                               kr_conn_watch **out, kr_error *err) {
    *out = NULL;
    kr_conn_watch *w = calloc(1, sizeof *w);
    if (!w) return kr_error_set(err, KR_ERR_NOMEM, "server: out of memory");
    w->timeout_s = read_timeout_s;
    w->on_cut = on_cut;
    w->user = user;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->wake, NULL);
    if (pthread_create(&w->thread, NULL, watchdog, w) != 0) {
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return kr_error_set(err, KR_ERR_INTERNAL, "server: cannot start the read watchdog");
    }
    *out = w;
    return KR_OK;
}

void kr_conn_watch_set_tick(kr_conn_watch *w, void (*tick)(void *user), void *user) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->tick = tick;
    w->tick_user = user;
    pthread_mutex_unlock(&w->mu);
}

void kr_conn_watch_free(kr_conn_watch *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    while (w->head) {
        kr_conn_slot *s = w->head;
        w->head = s->next;
        free(s);
    }
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

kr_conn_slot *kr_conn_watch_open(kr_conn_watch *w, int fd) {
    kr_conn_slot *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->fd = fd;
    pthread_mutex_lock(&w->mu);
    s->deadline = kr_now_seconds() + w->timeout_s;
    s->next = w->head;
    if (w->head) w->head->prev = s;
    w->head = s;
    pthread_mutex_unlock(&w->mu);
    return s;
}

void kr_conn_watch_close(kr_conn_watch *w, kr_conn_slot *s) {
    if (!s) return;
    pthread_mutex_lock(&w->mu);
    if (s->prev)
        s->prev->next = s->next;
    else
        w->head = s->next;
    if (s->next) s->next->prev = s->prev;
    pthread_mutex_unlock(&w->mu);
    free(s);
}

void kr_conn_watch_received(kr_conn_watch *w, kr_conn_slot *s) {
    if (!s) return;
    pthread_mutex_lock(&w->mu);
    s->deadline = 0;
    pthread_mutex_unlock(&w->mu);
}

void kr_conn_watch_rearm(kr_conn_watch *w, kr_conn_slot *s) {
    if (!s) return;
    pthread_mutex_lock(&w->mu);
    s->deadline = kr_now_seconds() + w->timeout_s;
    pthread_mutex_unlock(&w->mu);
}

int kr_conn_watch_was_cut(kr_conn_watch *w, kr_conn_slot *s) {
    if (!s) return 0;
    pthread_mutex_lock(&w->mu);
    int cut = s->cut;
    pthread_mutex_unlock(&w->mu);
    return cut;
}
