/*
 * server/budget — the server's memory budget (see server_internal.h): what each request holds
 * of max_memory_in_flight, and its own max_request_memory.
 *
 * A request holds two kinds of memory, both counted from before they are allocated:
 *   - its body and parse tree (c->reserved): admitted as the body arrives and when it is
 *     scanned, given back when the handler drops the body (kr_srv_drop_body);
 *   - what it builds (c->held): an analysis' working set (the candles it loads, its paths and
 *     reports), the room for an answer it is about to build (a forecast's JSON, a page of
 *     candles), and the answer itself once queued — held until the request completes, because
 *     a client that never reads its answer pins it until the send timeout.
 * Either kind is refused before it is allocated: 413 when it can never fit (a body and parse
 * past max_request_memory, the one request's input; what it builds past the whole
 * max_memory_in_flight), 503 with Retry-After when max_memory_in_flight cannot take it now.
 * An answer that exists already (an error, a streamed event, what a reservation covered) is
 * charged without refusal; one under KR_ANSWER_HOLD_MIN is not counted.
 */
#include "server/server_internal.h"

#include <stdio.h>
#include <string.h>

/* Answers below this are sent whatever the budget and not counted: errors (a refusal's own
 * 503 among them), health checks and scrapes cost little (at most max_connections of them at
 * once), refusing them would hide the reason, and a scraper would see its own last answer. */
#define KR_ANSWER_HOLD_MIN ((size_t)64 << 10)

static void charge(kr_server *s, size_t bytes, int release) {
    if (!bytes) return;
    pthread_mutex_lock(&s->mu);
    if (release)
        s->mem_in_flight -= bytes;
    else
        s->mem_in_flight += bytes;
    kr_http_metrics_memory(s->http, s->mem_in_flight);
    pthread_mutex_unlock(&s->mu);
}

void kr_srv_charge_memory(void *server, size_t bytes, int release) {
    charge(server, bytes, release);
}

int kr_srv_mem_admit(kr_conn *c, size_t bytes, int commit, int body, const char *what, char *msg,
                     size_t cap) {
    kr_server *s = c->srv;
    const size_t mine = c->reserved + c->held;
    /* The body and its parse are the one request's input (max_request_memory); what it builds
     * is bounded by the whole budget, which it may never exceed alone. */
    const size_t limit = body ? s->cfg.max_request_memory : s->cfg.max_memory_in_flight;
    if (mine + bytes > limit) {
        snprintf(msg, cap,
                 "the request would take about %zu MiB of memory (%s), more than %s (%zu MiB)",
                 (mine + bytes + ((size_t)1 << 20) - 1) >> 20, what,
                 body ? "max_request_memory" : "the whole max_memory_in_flight", limit >> 20);
        return 413;
    }
    pthread_mutex_lock(&s->mu);
    int ok = s->mem_in_flight + bytes <= s->cfg.max_memory_in_flight;
    if (ok && commit) s->mem_in_flight += bytes;
    kr_http_metrics_memory(s->http, s->mem_in_flight);
    pthread_mutex_unlock(&s->mu);
    if (!ok) {
        snprintf(msg, cap,
                 "no room now for the memory this request needs (%s): other requests and "
                 "answers hold the server's budget (max_memory_in_flight); retry shortly",
                 what);
        return 503;
    }
    return 0;
}

void kr_srv_mem_release_body(kr_conn *c) {
    charge(c->srv, c->reserved, 1);
    c->reserved = 0;
}

int kr_srv_hold(kr_conn *c, size_t bytes, const char *what, char *msg, size_t cap) {
    int st = kr_srv_mem_admit(c, bytes, 1, 0, what, msg, cap);
    if (!st) c->held += bytes;
    return st;
}

void kr_srv_unhold(kr_conn *c, size_t bytes) {
    if (bytes > c->held) bytes = c->held;
    charge(c->srv, bytes, 1);
    c->held -= bytes;
    c->answer_room = c->answer_room > c->held ? c->held : c->answer_room;
}

int kr_srv_reserve_answer(kr_conn *c, size_t bytes, char *msg, size_t cap) {
    int st = kr_srv_hold(c, bytes, "room for the answer", msg, cap);
    if (!st) c->answer_room += bytes;
    return st;
}

int kr_srv_hold_answer(kr_conn *c, size_t len, int refusable, char *msg, size_t cap) {
    const size_t room = c->answer_room;
    c->answer_room = 0;
    if (len <= room) {
        kr_srv_unhold(c, room - len); /* what the estimate reserved beyond the answer */
        return 0;
    }
    if (len < KR_ANSWER_HOLD_MIN) {
        kr_srv_unhold(c, room);
        return 0;
    }
    const size_t extra = len - room;
    if (refusable) {
        int st = kr_srv_hold(c, extra, "the answer", msg, cap);
        if (st) kr_srv_unhold(c, room);
        return st;
    }
    charge(c->srv, extra, 0);
    c->held += extra;
    return 0;
}

void kr_srv_mem_release_all(kr_conn *c) {
    kr_srv_mem_release_body(c);
    charge(c->srv, c->held, 1);
    c->held = c->answer_room = 0;
}
