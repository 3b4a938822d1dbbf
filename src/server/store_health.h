/*
 * server/store_health — whether the candle store's database answers, for GET /ready. A
 * replica whose PostgreSQL store cannot be reached (down, frozen, behind a partition) answers
 * 503 on /ready, so a load balancer routes to the replicas that can reach it, and 200 again
 * once a probe gets through. A probe is what every store request does first: an open of the
 * store with a short deadline (a pooled connection reads the schema version; a new one
 * connects). One probe runs at a time and its answer is kept for a moment, so health checks
 * every 250 ms from several load balancers cost one probe a second; a check arriving while a
 * probe runs gets the last answer at once. An SQLite file is in the process: always
 * reachable, never probed. Not installed; src/server only.
 */
#ifndef KR_SERVER_STORE_HEALTH_H
#define KR_SERVER_STORE_HEALTH_H

#include <stddef.h>

typedef struct kr_store_health kr_store_health;

/* The health of the store db (a URL or a file; "" none). probe_timeout_s bounds one probe,
 * ttl_s is how long its answer stands. NULL when memory runs out (the caller then has no
 * health checks: /ready as without a store). Caller frees with kr_store_health_free. */
kr_store_health *kr_store_health_create(const char *db, double probe_timeout_s, double ttl_s);
void kr_store_health_free(kr_store_health *h);

/* Whether the store answered its last probe: 1 reachable (also for a file, no store, or a
 * NULL h), 0 not, with the store's reason in why[cap] (the URL's password masked). Probes
 * first when the answer is older than ttl_s and no other probe runs. *changed (may be NULL) is
 * set when this call's probe turned the answer over. Thread-safe. */
int kr_store_health_reachable(kr_store_health *h, char *why, size_t cap, int *changed);

#endif
