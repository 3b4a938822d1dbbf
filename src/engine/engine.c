/* engine/engine — the step profile's helpers (see engine.h). */
#include "engine/engine.h"

#include <string.h>

kr_exec kr_engine_tokenizer_exec(const kr_engine *eng, kr_prof *scratch) {
    kr_exec ex = eng->ex;
    memset(scratch, 0, sizeof *scratch);
    ex.prof = eng->ex.prof ? scratch : NULL;
    return ex;
}

void kr_engine_book_tokenizer(const kr_engine *eng, int part, double t0, const kr_prof *scratch) {
    if (!eng->ex.prof) return;
    double flops = 0, bytes = 0;
    for (int i = 0; i < KR_PROF_PART_COUNT; i++) {
        flops += scratch->part[i].flops;
        bytes += scratch->part[i].bytes;
    }
    kr_prof_end(eng->ex.prof, part, t0, flops, bytes);
}

void kr_engine_profile_export(const kr_engine_profile *p, kr_step_profile *out) {
    _Static_assert((int)KR_PROF_PART_COUNT == (int)KR_PART_OTHER,
                   "kr_prof parts = kr_profile_part");
    memset(out, 0, sizeof *out);
    out->enabled = p->enabled;
    if (!p->enabled) return;
    out->seconds_steps = p->seconds_steps;
    double parts = 0;
    for (int i = 0; i < KR_PROF_PART_COUNT; i++) {
        const kr_prof_entry *e = &p->parts.part[i];
        out->part[i] = (kr_profile_entry){ e->seconds, e->flops, e->bytes, e->calls };
        parts += e->seconds;
    }
    double other = p->seconds_steps - parts;
    out->part[KR_PART_OTHER].seconds = other > 0 ? other : 0;
    out->rerun =
        (kr_profile_entry){ p->rerun.seconds, p->rerun.flops, p->rerun.bytes, p->rerun.calls };
    out->pool_regions = p->pool_regions;
    out->seconds_pool_wait = p->seconds_pool_wait;
}

void kr_engine_profile_add_delta(kr_engine_profile *acc, const kr_engine_profile *a,
                                 const kr_engine_profile *b) {
    kr_prof_add_delta(&acc->parts, &a->parts, &b->parts);
    acc->seconds_steps += b->seconds_steps - a->seconds_steps;
    acc->rerun.seconds += b->rerun.seconds - a->rerun.seconds;
    acc->rerun.flops += b->rerun.flops - a->rerun.flops;
    acc->rerun.bytes += b->rerun.bytes - a->rerun.bytes;
    acc->rerun.calls += b->rerun.calls - a->rerun.calls;
    acc->pool_regions += b->pool_regions - a->pool_regions;
    acc->seconds_pool_wait += b->seconds_pool_wait - a->seconds_pool_wait;
}
