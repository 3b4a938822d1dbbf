/* base/profile — see profile.h. */
#include "base/profile.h"

void kr_prof_add_delta(kr_prof *acc, const kr_prof *a, const kr_prof *b) {
    for (int i = 0; i < KR_PROF_PART_COUNT; i++) {
        acc->part[i].seconds += b->part[i].seconds - a->part[i].seconds;
        acc->part[i].flops += b->part[i].flops - a->part[i].flops;
        acc->part[i].bytes += b->part[i].bytes - a->part[i].bytes;
        acc->part[i].calls += b->part[i].calls - a->part[i].calls;
    }
}
