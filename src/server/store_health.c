/*
 * server/store_health — the candle store's reachability for GET /ready (see store_health.h).
 */
#include "server/store_health.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kronos/store.h"
#include "kronos/util.h"

struct kr_store_health {
    char *db; /* NULL: nothing to probe (no store, or a file) */
    double probe_timeout_s, ttl_s;
    pthread_mutex_t mu; /* guards the fields below */
    int probing; /* a probe runs (outside the lock) */
    int reachable; /* the last probe's answer (1 before the first) */
    double checked_at; /* kr_now_seconds() of the last probe's end; 0: never */
    char why[256]; /* the last failed probe's reason */
};

kr_store_health *kr_store_health_create(const char *db, double probe_timeout_s, double ttl_s) {
    kr_store_health *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    if (db && kr_store_is_url(db) && !(h->db = strdup(db))) {
        free(h);
        return NULL;
    }
    h->probe_timeout_s = probe_timeout_s > 0 ? probe_timeout_s : 1.0;
    h->ttl_s = ttl_s > 0 ? ttl_s : 0;
    h->reachable = 1;
    pthread_mutex_init(&h->mu, NULL);
    return h;
}

void kr_store_health_free(kr_store_health *h) {
    if (!h) return;
    pthread_mutex_destroy(&h->mu);
    free(h->db);
    free(h);
}

/* One probe: the open every store request starts with, by its own short deadline. Only a
 * database that does not answer or does not take connections now counts as unreachable; one
 * that answers and refuses (a dropped database, a wrong password) is an operator's to fix,
 * and every replica would see it alike: taking them all out would stop the forecasts too. */
static int probe(const kr_store_health *h, char *why, size_t cap) {
    kr_store *s = NULL;
    kr_error err = { 0 };
    const kr_status st =
        kr_store_open_until(h->db, 1, kr_now_seconds() + h->probe_timeout_s, &s, &err);
    kr_store_close(s);
    if (st != KR_ERR_UNAVAILABLE && st != KR_ERR_TIMEOUT) return 1;
    snprintf(why, cap, "%s", err.message);
    return 0;
}

int kr_store_health_reachable(kr_store_health *h, char *why, size_t cap, int *changed) {
    if (changed) *changed = 0;
    if (cap > 0) why[0] = '\0';
    if (!h || !h->db) return 1;
    pthread_mutex_lock(&h->mu);
    const int stale = h->checked_at == 0 || kr_now_seconds() - h->checked_at >= h->ttl_s;
    if (stale && !h->probing) {
        h->probing = 1;
        pthread_mutex_unlock(&h->mu);
        char reason[sizeof h->why] = "";
        const int ok = probe(h, reason, sizeof reason);
        pthread_mutex_lock(&h->mu);
        if (changed) *changed = ok != h->reachable;
        h->reachable = ok;
        if (!ok) memcpy(h->why, reason, sizeof h->why);
        h->checked_at = kr_now_seconds();
        h->probing = 0;
    }
    const int ok = h->reachable;
    if (!ok && cap > 0) snprintf(why, cap, "%s", h->why);
    pthread_mutex_unlock(&h->mu);
    return ok;
}
