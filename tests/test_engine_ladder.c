/*
 * The precision ladder's rule (engine/ladder.h) on a simulated clock: down one rung after
 * sustained queue pressure, up after sustained relief, hysteresis (a broken signal restarts
 * its window, each move needs a new one), the profile's floor as the lowest rung (a raised
 * floor moves up at once), and never past either end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "engine/ladder.h"

static kr_ladder_signals sig(int waiting, double oldest) {
    kr_ladder_signals s = { waiting, oldest };
    return s;
}

/* Ticks every 2 s from *now for seconds, with the same signals; the moves summed. */
static int hold(kr_ladder *l, double *now, double seconds, kr_ladder_signals s) {
    int moves = 0;
    for (double end = *now + seconds; *now < end; *now += 2.0)
        moves += kr_ladder_decide(l, *now, &s);
    return moves;
}

static void test_down_under_pressure_up_on_relief(void **state) {
    (void)state;
    kr_ladder l;
    kr_ladder_init(&l, 3, 0.1, 300, 600);
    double now = 1000;
    /* Pressure shorter than the window: nothing. */
    assert_int_equal(hold(&l, &now, 290, sig(5, 0.5)), 0);
    assert_int_equal(l.rung, 0);
    /* One tick of calm restarts it. */
    assert_int_equal(kr_ladder_decide(&l, now, &(kr_ladder_signals){ 5, 0.05 }), 0);
    now += 2;
    assert_int_equal(hold(&l, &now, 290, sig(5, 0.5)), 0);
    /* A whole window: one rung down; the next needs a whole window again. */
    assert_int_equal(hold(&l, &now, 12, sig(5, 0.5)), 1);
    assert_int_equal(l.rung, 1);
    assert_int_equal(hold(&l, &now, 298, sig(5, 0.5)), 0);
    assert_int_equal(hold(&l, &now, 4, sig(5, 0.5)), 1);
    assert_int_equal(l.rung, 2);
    /* The bottom: no further. */
    assert_int_equal(hold(&l, &now, 1200, sig(9, 2.0)), 0);
    assert_int_equal(l.rung, 2);
    assert_int_equal(l.downs, 2);
    /* Between the thresholds (a quarter of the target .. the target): neither. */
    assert_int_equal(hold(&l, &now, 1200, sig(3, 0.05)), 0);
    /* Relief for relax_s: one up, then another. */
    assert_int_equal(hold(&l, &now, 598, sig(0, 0)), 0);
    assert_int_equal(hold(&l, &now, 4, sig(0, 0)), -1);
    assert_int_equal(l.rung, 1);
    assert_int_equal(hold(&l, &now, 602, sig(1, 0.01)), -1);
    assert_int_equal(l.rung, 0);
    assert_int_equal(hold(&l, &now, 1200, sig(0, 0)), 0); /* the top: no further */
    assert_int_equal(l.ups, 2);
}

static void test_floor_bounds(void **state) {
    (void)state;
    kr_ladder l;
    kr_ladder_init(&l, 3, 0.1, 300, 600);
    double now = 0;
    /* The profile allows only the top rung: pressure moves nothing. */
    assert_int_equal(kr_ladder_set_floor(&l, 0, now), 0);
    assert_int_equal(hold(&l, &now, 1200, sig(9, 1.0)), 0);
    assert_int_equal(l.rung, 0);
    /* The whole ladder: down twice. */
    kr_ladder_set_floor(&l, 2, now);
    assert_int_equal(hold(&l, &now, 302, sig(9, 1.0)), 1);
    assert_int_equal(hold(&l, &now, 302, sig(9, 1.0)), 1);
    assert_int_equal(l.rung, 2);
    /* A profile switch raising the floor moves up at once, within its bounds. */
    assert_int_equal(kr_ladder_set_floor(&l, 1, now), -1);
    assert_int_equal(l.rung, 1);
    assert_int_equal(kr_ladder_set_floor(&l, 7, now), 0); /* clamped to the ladder */
    assert_int_equal(l.floor, 2);
    /* A one-rung ladder never moves. */
    kr_ladder one;
    kr_ladder_init(&one, 1, 0.1, 300, 600);
    assert_int_equal(hold(&one, &now, 2000, sig(9, 5.0)), 0);
    assert_int_equal(one.rung, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_down_under_pressure_up_on_relief),
        cmocka_unit_test(test_floor_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
