/*
 * The tuner's rules, driven by a simulated clock and synthetic signals (kr_tuner_decide):
 * deterministic, no sleeps, no engine. One test per rule, hysteresis, both directions, the
 * bounds of the profile in force, and the log / counter of every decision.
 */
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "engine/metrics.h"
#include "engine/tuner.h"

#define TICK 2.0

typedef struct fixture {
    kr_metrics *m;
    kr_tuner t;
    kr_tuner_limits cur;
    double now;
    int log_lines;
    char last_log[512];
} fixture;

static void on_log(void *user, const char *line) {
    fixture *f = user;
    f->log_lines++;
    snprintf(f->last_log, sizeof f->last_log, "%s", line);
}

/* home: wait 50 ms, 4096 tokens, 64 running, 100 MB cache of at most 150 MB; targets 0.1 s
 * queue, 2 s TTFT; windows 300 s / 600 s (the defaults). */
static void setup_home(fixture *f, int wait_ms) {
    memset(f, 0, sizeof *f);
    assert_int_equal(kr_metrics_create(&f->m, NULL), KR_OK);
    kr_context_params p = kr_context_default_params();
    p.batch_wait_ms = wait_ms;
    p.max_batch_tokens = 4096;
    p.max_running = 64;
    kr_tuner_init(&f->t, &p, 100u << 20, 150u << 20, f->m, on_log, f);
    f->cur.batch_wait_ms = wait_ms;
    f->cur.max_batch_tokens = 4096;
    f->cur.max_running = 64;
    f->cur.cache_budget = 100u << 20;
    f->now = 1000.0;
}

static void teardown(fixture *f) { kr_metrics_free(f->m); }

static kr_tuner_signals queue_sig(double p95) {
    kr_tuner_signals s;
    memset(&s, 0, sizeof s);
    s.n_queue = 20;
    s.queue_p95 = p95;
    s.n_ttft = 20;
    s.ttft_p95 = 1.0; /* between target/4 and target: no TTFT rule */
    return s;
}

/* Runs ticks for `seconds` with the same signals; returns the changes made. */
static int run(fixture *f, const kr_tuner_signals *s, double seconds) {
    int changes = 0;
    for (double end = f->now + seconds; f->now < end - 1e-9;) {
        f->now += TICK;
        changes += kr_tuner_decide(&f->t, f->now, s, &f->cur);
    }
    return changes;
}

static double decisions(fixture *f, const char *rule, const char *param, const char *dir) {
    char lab[160];
    snprintf(lab, sizeof lab, "rule=\"%s\",parameter=\"%s\",direction=\"%s\"", rule, param, dir);
    return kr_metric_value(kr_metrics_series(f->m, &kr_metric_tuner_decisions, lab));
}

/* Queue wait above target for five minutes: shorter wait, more concurrency; not before. */
static void test_queue_pressure_after_window(void **state) {
    (void)state;
    fixture f;
    setup_home(&f, 50);
    kr_tuner_signals hot = queue_sig(0.25);
    assert_int_equal(run(&f, &hot, 298), 0); /* 149 ticks: signal held 296 s */
    assert_int_equal(f.cur.batch_wait_ms, 50);
    assert_int_equal(run(&f, &hot, 4), 2);
    assert_int_equal(f.cur.batch_wait_ms, 25);
    assert_int_equal(f.cur.max_running, 80);
    assert_int_equal(f.cur.max_batch_tokens, 4096);
    assert_true(decisions(&f, "queue_pressure", "batch_wait", "down") == 1);
    assert_true(decisions(&f, "queue_pressure", "max_running", "up") == 1);
    assert_non_null(strstr(f.last_log, "queue_pressure"));
    assert_int_equal(f.log_lines, 2);
    teardown(&f);
}

/* A saturated engine admits nobody for a tick: the oldest waiter's age is the signal. */
static void test_queue_pressure_from_waiters(void **state) {
    (void)state;
    fixture f;
    setup_home(&f, 50);
    kr_tuner_signals s = queue_sig(0);
    s.n_queue = 0;
    s.waiting = 30;
    s.oldest_wait_s = 3.0;
    assert_int_equal(run(&f, &s, 302), 2);
    assert_int_equal(f.cur.batch_wait_ms, 25);
    teardown(&f);
}

/* One tick below the threshold restarts the window; after a move the rule needs a whole new
 * window; a value between the two thresholds moves nothing either way. */
static void test_queue_hysteresis(void **state) {
    (void)state;
    fixture f;
    setup_home(&f, 80);
    kr_tuner_signals hot = queue_sig(0.25), mid = queue_sig(0.05);
    assert_int_equal(run(&f, &hot, 290), 0);
    assert_int_equal(run(&f, &mid, 2), 0); /* broken */
    assert_int_equal(run(&f, &hot, 298), 0); /* 298 s again: not yet */
    assert_int_equal(run(&f, &hot, 4), 2);
    assert_int_equal(f.cur.batch_wait_ms, 40);
    assert_int_equal(run(&f, &hot, 296), 0); /* the clock restarted with the move */
    assert_int_equal(run(&f, &hot, 4), 2);
    assert_int_equal(f.cur.batch_wait_ms, 20);
    /* Between target/4 and target for an hour: nothing, in either direction. */
    assert_int_equal(run(&f, &mid, 3600), 0);
    assert_int_equal(f.cur.batch_wait_ms, 20);
    teardown(&f);
}

/* Relief for ten minutes walks wait and concurrency back toward home, never past it. */
static void test_queue_relaxed_returns_home(void **state) {
    (void)state;
    fixture f;
    setup_home(&f, 50);
    kr_tuner_signals hot = queue_sig(0.25), calm = queue_sig(0.01);
    run(&f, &hot, 302);
    run(&f, &hot, 300);
    assert_int_equal(f.cur.batch_wait_ms, 12);
    assert_int_equal(f.cur.max_running, 100);
    assert_int_equal(run(&f, &calm, 598), 0);
    assert_int_equal(run(&f, &calm, 4), 2);
    assert_int_equal(f.cur.batch_wait_ms, 24); /* + max(5, 50/4) */
    assert_int_equal(f.cur.max_running, 80); /* - 1/5 */
    assert_true(decisions(&f, "queue_relaxed", "batch_wait", "up") == 1);
    assert_true(decisions(&f, "queue_relaxed", "max_running", "down") == 1);
    run(&f, &calm, 6 * 3600); /* idle hours */
    assert_int_equal(f.cur.batch_wait_ms, 50);
    assert_int_equal(f.cur.max_running, 64);
    /* No traffic at all also counts as relief (and moves nothing at home). */
    kr_tuner_signals idle;
    memset(&idle, 0, sizeof idle);
    assert_int_equal(run(&f, &idle, 3600), 0);
    teardown(&f);
}

/* A tight profile stays tight: hours of relief never lift the wait above its home, hours of
 * pressure never take concurrency past twice home or the wait below 0. */
static void test_bounds_of_tight_profile(void **state) {
    (void)state;
    fixture f;
    setup_home(&f, 15);
    kr_tuner_signals hot = queue_sig(5.0), calm = queue_sig(0.0);
    hot.ttft_p95 = 30;
    run(&f, &hot, 10 * 3600);
    assert_int_equal(f.cur.batch_wait_ms, 0);
    assert_int_equal(f.cur.max_running, 128);
    assert_int_equal(f.cur.max_batch_tokens, 16384);
    calm.ttft_p95 = 0.01;
    for (int i = 0; i < 40; i++) {
        run(&f, &calm, 600);
        assert_true(f.cur.batch_wait_ms <= 15);
        assert_true(f.cur.max_running >= 64 && f.cur.max_running <= 128);
        assert_true(f.cur.max_batch_tokens >= 4096);
    }
    assert_int_equal(f.cur.batch_wait_ms, 15);
    /* A value pushed from outside past the bound is pulled back in. */
    f.cur.batch_wait_ms = 200;
    run(&f, &calm, TICK);
    assert_int_equal(f.cur.batch_wait_ms, 15);
    teardown(&f);
}

/* TTFT over target for the window raises max_batch_tokens; well under target lowers it. */
static void test_ttft_both_directions(void **state) {
    (void)state;
    fixture f;
    setup_home(&f, 50);
    kr_tuner_signals slow = queue_sig(0.05), fast = queue_sig(0.05);
    slow.ttft_p95 = 3.0;
    fast.ttft_p95 = 0.2;
    assert_int_equal(run(&f, &slow, 298), 0);
    assert_int_equal(run(&f, &slow, 4), 1);
    assert_int_equal(f.cur.max_batch_tokens, 5120);
    run(&f, &slow, 300);
    assert_int_equal(f.cur.max_batch_tokens, 6400);
    assert_true(decisions(&f, "ttft_high", "max_batch_tokens", "up") == 2);
    assert_int_equal(run(&f, &fast, 598), 0);
    assert_int_equal(run(&f, &fast, 4), 1);
    assert_int_equal(f.cur.max_batch_tokens, 5120);
    assert_true(decisions(&f, "ttft_low", "max_batch_tokens", "down") == 1);
    run(&f, &fast, 3 * 3600);
    assert_int_equal(f.cur.max_batch_tokens, 4096); /* never below home */
    teardown(&f);
}

/* A low hit rate with evictions grows the pool (up to its cap); without evictions, or with a
 * good rate, nothing; it never shrinks. */
static void test_cache_low_hit_grows(void **state) {
    (void)state;
    fixture f;
    setup_home(&f, 50);
    kr_tuner_signals s = queue_sig(0.05);
    s.cache_queried = 1000;
    s.cache_hits = 100;
    s.cache_evictions = 0;
    assert_int_equal(run(&f, &s, 1200), 0); /* first sightings: room would not help */
    s.cache_evictions = 3;
    assert_int_equal(run(&f, &s, 298), 0);
    assert_int_equal(run(&f, &s, 4), 1);
    assert_true(f.cur.cache_budget == (size_t)125 << 20);
    run(&f, &s, 3600);
    assert_true(f.cur.cache_budget == (size_t)150 << 20); /* the memory bound */
    assert_true(decisions(&f, "cache_low_hit", "prefix_cache_budget", "up") == 2);
    /* (then the shorter entries and the re-warm act: test_cache_low_hit_remedies) */
    s.cache_hits = 900;
    run(&f, &s, 3600);
    assert_true(f.cur.cache_budget == (size_t)150 << 20); /* never shrunk for a good rate */
    assert_int_equal(f.cur.cache_entry_blocks, 0); /* whole windows again */
    teardown(&f);
}

/* Growth used up, the low hit rate goes on: shorter entries (16, 8, 4 blocks, a window each),
 * then at the shortest a clear that keeps the hottest windows, once a window; a good rate for
 * the relief window doubles the entries back to whole windows. Never two moves of a rule in
 * one window, and each move logged and counted. */
static void test_cache_low_hit_remedies(void **state) {
    (void)state;
    fixture f;
    setup_home(&f, 50);
    kr_tuner_signals s = queue_sig(0.05);
    s.cache_queried = 1000;
    s.cache_hits = 100;
    s.cache_evictions = 3;
    run(&f, &s, 302);
    assert_true(f.cur.cache_budget == (size_t)125 << 20);
    assert_int_equal(f.cur.cache_entry_blocks, 0); /* room first */
    run(&f, &s, 300);
    assert_true(f.cur.cache_budget == (size_t)150 << 20);
    assert_int_equal(f.cur.cache_entry_blocks, 0);
    assert_int_equal(run(&f, &s, 296), 0); /* the shorten window runs from the bound */
    assert_int_equal(run(&f, &s, 6), 1);
    assert_int_equal(f.cur.cache_entry_blocks, KR_TUNER_ENTRY_BLOCKS_FIRST);
    assert_non_null(strstr(f.last_log, "cache_shorten"));
    run(&f, &s, 300);
    assert_int_equal(f.cur.cache_entry_blocks, 8);
    run(&f, &s, 300);
    assert_int_equal(f.cur.cache_entry_blocks, KR_TUNER_ENTRY_BLOCKS_MIN);
    run(&f, &s, 3000); /* no shorter than the minimum */
    assert_int_equal(f.cur.cache_entry_blocks, KR_TUNER_ENTRY_BLOCKS_MIN);
    assert_true(decisions(&f, "cache_shorten", "prefix_cache_entry_blocks", "down") == 3);
    /* At the shortest: a re-warm a window, each one tick's order. */
    double rewarms = decisions(&f, "cache_rewarm", "prefix_cache_pool", "rewarm");
    assert_true(rewarms >= 9 && rewarms <= 10);
    int orders = 0;
    for (int i = 0; i < 150; i++) {
        run(&f, &s, TICK);
        orders += f.cur.cache_rewarm;
    }
    assert_int_equal(orders, 1); /* 300 s: one order, as one tick's flag */
    assert_non_null(strstr(f.last_log, "hottest"));
    /* A good rate for the relief window: entries double back, then whole windows. */
    s.cache_hits = 900;
    assert_int_equal(run(&f, &s, 596), 0);
    assert_int_equal(run(&f, &s, 6), 1);
    assert_int_equal(f.cur.cache_entry_blocks, 8);
    run(&f, &s, 1800);
    assert_int_equal(f.cur.cache_entry_blocks, 0);
    assert_true(decisions(&f, "cache_restore", "prefix_cache_entry_blocks", "up") == 4);
    assert_true(f.cur.cache_budget == (size_t)150 << 20);
    teardown(&f);
}

/* A profile switch restarts every window and moves the bounds with the new home. */
static void test_profile_switch_restarts(void **state) {
    (void)state;
    fixture f;
    setup_home(&f, 100);
    kr_tuner_signals hot = queue_sig(0.25);
    hot.ttft_p95 = 0.3; /* inside both profiles' TTFT dead band */
    run(&f, &hot, 200);
    kr_tuner_limits tight = { 20, 2048, 32, 0, 0, 0 };
    kr_tuner_set_home(&f.t, &tight, 0.05, 0.5, "time-of-day profile session");
    f.cur.batch_wait_ms = 20;
    f.cur.max_batch_tokens = 2048;
    f.cur.max_running = 32;
    assert_non_null(strstr(f.last_log, "session"));
    assert_int_equal(run(&f, &hot, 200), 0); /* 400 s of pressure, but 200 s since the switch */
    assert_int_equal(run(&f, &hot, 102), 2);
    assert_int_equal(f.cur.batch_wait_ms, 10);
    assert_int_equal(f.cur.max_running, 40);
    run(&f, &hot, 3 * 3600);
    assert_int_equal(f.cur.max_running, 64); /* 2 x the new home */
    teardown(&f);
}

/* Home limits at INT_MAX (contexts refuse such values; the tuner must not rely on that): the
 * bounds (4 x tokens, 2 x running) and every move are computed without int overflow, so the
 * bounds hold home and hours of pressure or relief leave the limits where they are. */
static void test_limits_near_int_max(void **state) {
    (void)state;
    fixture f;
    memset(&f, 0, sizeof f);
    assert_int_equal(kr_metrics_create(&f.m, NULL), KR_OK);
    kr_context_params p = kr_context_default_params();
    p.batch_wait_ms = INT_MAX;
    p.max_batch_tokens = INT_MAX;
    p.max_running = INT_MAX;
    kr_tuner_init(&f.t, &p, 0, 0, f.m, on_log, &f);
    assert_int_equal(f.t.lo.max_batch_tokens, INT_MAX);
    assert_int_equal(f.t.hi.max_batch_tokens, INT_MAX);
    assert_int_equal(f.t.lo.max_running, INT_MAX);
    assert_int_equal(f.t.hi.max_running, INT_MAX);
    f.cur.batch_wait_ms = f.cur.max_batch_tokens = f.cur.max_running = INT_MAX;
    f.now = 1000.0;
    kr_tuner_signals hot = queue_sig(5.0), calm = queue_sig(0.0);
    hot.ttft_p95 = 30;
    calm.ttft_p95 = 0.01;
    run(&f, &hot, 3600);
    assert_int_equal(f.cur.max_running, INT_MAX);
    assert_int_equal(f.cur.max_batch_tokens, INT_MAX);
    f.cur.batch_wait_ms = INT_MAX;
    run(&f, &calm, 3600);
    assert_int_equal(f.cur.batch_wait_ms, INT_MAX);
    assert_int_equal(f.cur.max_running, INT_MAX);
    assert_int_equal(f.cur.max_batch_tokens, INT_MAX);
    /* Just under the caps, doubling / quadrupling would pass INT_MAX: the cap holds instead. */
    kr_tuner_limits home = { 0, INT_MAX / 3, INT_MAX / 2 + 1, 0, 0, 0 };
    kr_tuner_set_home(&f.t, &home, 0, 0, "test");
    assert_int_equal(f.t.hi.max_batch_tokens, INT_MAX / 3);
    assert_int_equal(f.t.hi.max_running, INT_MAX / 2 + 1);
    teardown(&f);
}

/* Configurable windows (tune_window_s / tune_relax_s). */
static void test_configurable_windows(void **state) {
    (void)state;
    fixture f;
    setup_home(&f, 50);
    kr_metrics_free(f.m);
    assert_int_equal(kr_metrics_create(&f.m, NULL), KR_OK);
    kr_context_params p = kr_context_default_params();
    p.batch_wait_ms = 50;
    p.max_batch_tokens = 4096;
    p.max_running = 64;
    p.tune_window_s = 10;
    p.tune_relax_s = 20;
    kr_tuner_init(&f.t, &p, 0, 0, f.m, on_log, &f);
    kr_tuner_signals hot = queue_sig(0.25), calm = queue_sig(0.001);
    assert_int_equal(run(&f, &hot, 8), 0);
    assert_int_equal(run(&f, &hot, 4), 2);
    assert_int_equal(run(&f, &calm, 18), 0);
    assert_int_equal(run(&f, &calm, 4), 2);
    teardown(&f);
}

/* The engine ticks the tuner only while it has work. Bursts of queue pressure minutes apart,
 * idle in between, are not five minutes of pressure: the tuner used to measure the pressing
 * window across the idle gaps and moved at the first tick of the second burst, and of every
 * burst after it, ratcheting max_running to its bound and the wait to 0. Now an idle span
 * (kr_tuner_idle) ends the window, and relief held through it brings the limits home. */
static void test_idle_between_bursts(void **state) {
    (void)state;
    fixture f;
    setup_home(&f, 50);
    int wait = 50, tokens = 4096, running = 64;
    double now = 1000;
    for (int burst = 0; burst < 6; burst++) {
        for (int i = 0; i < 10; i++) { /* 20 s of queue waits far over the target */
            kr_tuner_observe_queue(&f.t, 0.5);
            kr_tuner_observe_ttft(&f.t, 1.0);
            kr_tuner_tick(&f.t, now, 3, 0.5, &wait, &tokens, &running, NULL);
            now += TICK;
        }
        for (double end = now + 400; now < end; now += 0.25) kr_tuner_idle(&f.t, now);
    }
    assert_int_equal(wait, 50);
    assert_int_equal(running, 64);
    assert_true(decisions(&f, "queue_pressure", "max_running", "up") == 0);

    /* Pressure that does hold for the window moves the limits; ten idle minutes after it
     * walk them back toward home (the relaxing rule's window is held through the idle span). */
    for (double end = now + 302; now < end; now += TICK) {
        kr_tuner_observe_queue(&f.t, 0.5);
        kr_tuner_observe_ttft(&f.t, 1.0);
        kr_tuner_tick(&f.t, now, 3, 0.5, &wait, &tokens, &running, NULL);
    }
    assert_int_equal(wait, 25);
    assert_int_equal(running, 80);
    for (double end = now + 700; now < end; now += 0.25) kr_tuner_idle(&f.t, now);
    kr_tuner_observe_queue(&f.t, 0.001);
    kr_tuner_observe_ttft(&f.t, 1.0);
    kr_tuner_tick(&f.t, now, 0, 0, &wait, &tokens, &running, NULL);
    assert_int_equal(wait, 37);
    assert_int_equal(running, 64);
    assert_true(decisions(&f, "queue_relaxed", "max_running", "down") == 1);
    teardown(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_pressure_after_window),
        cmocka_unit_test(test_queue_pressure_from_waiters),
        cmocka_unit_test(test_queue_hysteresis),
        cmocka_unit_test(test_queue_relaxed_returns_home),
        cmocka_unit_test(test_bounds_of_tight_profile),
        cmocka_unit_test(test_ttft_both_directions),
        cmocka_unit_test(test_cache_low_hit_grows),
        cmocka_unit_test(test_cache_low_hit_remedies),
        cmocka_unit_test(test_profile_switch_restarts),
        cmocka_unit_test(test_configurable_windows),
        cmocka_unit_test(test_limits_near_int_max),
        cmocka_unit_test(test_idle_between_bursts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
