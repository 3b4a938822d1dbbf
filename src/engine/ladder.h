/*
 * engine/ladder — the precision ladder's rule: which of a model's precisions (f32, then
 * quantised variants that passed `kronos eval-quant --gate`, fastest last) NEW requests get.
 * Beside the tuner's rules (tuner.h), on the same kind of sustained signal and with the same
 * hysteresis; a pure function of a clock and the signals, so a simulated clock tests it.
 *
 *   rule              signal (per tick)                       sustained   action
 *   precision_down    the active rung's oldest waiting        window_s    one rung down
 *                     request older than target_queue_p95_s   (300 s)     (lower precision)
 *   precision_up      oldest wait < target / 4, or nothing    relax_s     one rung up
 *                     waiting                                 (600 s)
 *
 * Bounds: rung 0 (the model's own precision) at the top, `floor` (the lowest precision the
 * time-of-day profile allows) at the bottom; a floor raised past the active rung moves it up
 * at once. Each move restarts both windows. Requests already running stay on the rung they
 * started on; only new ones move. The caller (server/models.c) logs and counts the moves.
 */
#ifndef KR_ENGINE_LADDER_H
#define KR_ENGINE_LADDER_H

#include "kronos/status.h"

#define KR_LADDER_MAX_RUNGS 4

typedef struct kr_ladder {
    int n_rungs; /* 1..KR_LADDER_MAX_RUNGS */
    int rung; /* the active one: 0 = the model's own precision, n_rungs - 1 the lowest */
    int floor; /* the lowest rung allowed now (profile), 0..n_rungs - 1 */
    double target_queue; /* seconds: pressure above, relief below a quarter */
    double window_s, relax_s; /* how long pressure / relief must hold */
    double pressure_since, relief_since; /* < 0: not holding */
    long long downs, ups; /* moves made */
} kr_ladder;

typedef struct kr_ladder_signals {
    int waiting; /* requests queued on the active rung */
    double oldest_wait_s; /* the oldest of them (0: none) */
} kr_ladder_signals;

KR_PRIVATE void kr_ladder_init(kr_ladder *l, int n_rungs, double target_queue, double window_s,
                               double relax_s);
/* Sets the floor (clamped to the ladder); returns the move it forced (+1 up... as decide). */
KR_PRIVATE int kr_ladder_set_floor(kr_ladder *l, int floor, double now);
/* One tick: returns +1 when it moved one rung down (lower precision), -1 one up, 0 none. */
KR_PRIVATE int kr_ladder_decide(kr_ladder *l, double now, const kr_ladder_signals *s);

#endif
