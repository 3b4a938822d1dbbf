/* engine/ladder — see ladder.h. */
#include "engine/ladder.h"

void kr_ladder_init(kr_ladder *l, int n_rungs, double target_queue, double window_s,
                    double relax_s) {
    if (n_rungs < 1) n_rungs = 1;
    if (n_rungs > KR_LADDER_MAX_RUNGS) n_rungs = KR_LADDER_MAX_RUNGS;
    l->n_rungs = n_rungs;
    l->rung = 0;
    l->floor = n_rungs - 1;
    l->target_queue = target_queue > 0 ? target_queue : 0.1;
    l->window_s = window_s > 0 ? window_s : 300.0;
    l->relax_s = relax_s > 0 ? relax_s : 600.0;
    l->pressure_since = l->relief_since = -1.0;
    l->downs = l->ups = 0;
}

static void restart(kr_ladder *l) { l->pressure_since = l->relief_since = -1.0; }

int kr_ladder_set_floor(kr_ladder *l, int floor, double now) {
    (void)now;
    if (floor < 0) floor = 0;
    if (floor > l->n_rungs - 1) floor = l->n_rungs - 1;
    l->floor = floor;
    if (l->rung > floor) { /* the profile allows less: up at once, not after a window */
        l->rung = floor;
        l->ups++;
        restart(l);
        return -1;
    }
    return 0;
}

int kr_ladder_decide(kr_ladder *l, double now, const kr_ladder_signals *s) {
    const int pressed = s->waiting > 0 && s->oldest_wait_s > l->target_queue;
    const int relieved = s->waiting == 0 || s->oldest_wait_s < l->target_queue / 4;
    if (pressed) {
        if (l->pressure_since < 0) l->pressure_since = now;
    } else {
        l->pressure_since = -1.0;
    }
    if (relieved) {
        if (l->relief_since < 0) l->relief_since = now;
    } else {
        l->relief_since = -1.0;
    }
    if (l->pressure_since >= 0 && now - l->pressure_since >= l->window_s && l->rung < l->floor) {
        l->rung++;
        l->downs++;
        restart(l);
        return +1;
    }
    if (l->relief_since >= 0 && now - l->relief_since >= l->relax_s && l->rung > 0) {
        l->rung--;
        l->ups++;
        restart(l);
        return -1;
    }
    return 0;
}
