/* engine/profile — see profile.h. */
#include "engine/profile.h"

#include <math.h>
#include <stdio.h>

#include "base/threadpool.h"
#include "kernels/calibrate.h"

const char *kr_profile_part_name(int part) {
    static const char *const names[KR_PART_COUNT] = {
        "gemm",  "attention", "norm_act", "sampling", "tokenizer_encode", "tokenizer_decode",
        "other",
    };
    return part >= 0 && part < KR_PART_COUNT ? names[part] : NULL;
}

static void entry_add(kr_profile_entry *a, const kr_profile_entry *b) {
    a->seconds += b->seconds;
    a->flops += b->flops;
    a->bytes += b->bytes;
    a->calls += b->calls;
}

void kr_step_profile_add(kr_step_profile *acc, const kr_step_profile *p) {
    if (!p->enabled) return;
    acc->enabled = 1;
    acc->seconds_steps += p->seconds_steps;
    for (int i = 0; i < KR_PART_COUNT; i++) entry_add(&acc->part[i], &p->part[i]);
    entry_add(&acc->rerun, &p->rerun);
    acc->pool_regions += p->pool_regions;
    acc->seconds_pool_wait += p->seconds_pool_wait;
}

static double rate(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0; }

/* %.6g keeps the JSON short; these are measurements, not values to round-trip. */
static void entry_json(kr_sb *sb, const kr_profile_entry *e, double steps) {
    kr_sb_appendf(sb,
                  "{\"seconds\":%.6g,\"share\":%.4g,\"gflop\":%.6g,\"gflops\":%.4g,"
                  "\"gbytes_per_second\":%.4g,\"calls\":%lld}",
                  e->seconds, rate(e->seconds, steps), e->flops * 1e-9,
                  rate(e->flops, e->seconds) * 1e-9, rate(e->bytes, e->seconds) * 1e-9,
                  (long long)e->calls);
}

void kr_step_profile_json(kr_sb *sb, const kr_step_profile *p) {
    if (!p->enabled) {
        kr_sb_append(sb, "null");
        return;
    }
    kr_sb_appendf(sb, "{\"steps_seconds\":%.6g,\"parts\":{", p->seconds_steps);
    for (int i = 0; i < KR_PART_COUNT; i++) {
        kr_sb_appendf(sb, "%s\"%s\":", i ? "," : "", kr_profile_part_name(i));
        entry_json(sb, &p->part[i], p->seconds_steps);
    }
    kr_sb_append(sb, "},\"rerun\":");
    entry_json(sb, &p->rerun, p->seconds_steps);
    kr_sb_appendf(sb, ",\"pool_regions\":%lld,\"pool_wait_seconds\":%.6g}",
                  (long long)p->pool_regions, p->seconds_pool_wait);
}

static void entry_row(kr_sb *sb, const char *name, const kr_profile_entry *e, double steps,
                      double peak) {
    double gf = rate(e->flops, e->seconds) * 1e-9;
    kr_sb_appendf(sb, "| %s | %.3f | %.1f %% | %lld | %.2f | %.1f | %.2f |", name, e->seconds,
                  100.0 * rate(e->seconds, steps), (long long)e->calls, e->flops * 1e-9, gf,
                  rate(e->bytes, e->seconds) * 1e-9);
    if (peak > 0) kr_sb_appendf(sb, " %.0f %% |", 100.0 * gf / peak);
    kr_sb_append(sb, "\n");
}

void kr_step_profile_markdown(kr_sb *sb, const kr_step_profile *p, double peak_gflops) {
    if (!p->enabled) {
        kr_sb_append(sb, "(step profile off)\n");
        return;
    }
    kr_sb_append(sb, "| part | seconds | share | calls | GFLOP | GFLOP/s | GB/s |");
    kr_sb_append(sb, peak_gflops > 0 ? " of FMA peak |\n|---|---:|---:|---:|---:|---:|---:|---:|\n"
                                     : "\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < KR_PART_COUNT; i++)
        entry_row(sb, kr_profile_part_name(i), &p->part[i], p->seconds_steps, peak_gflops);
    kr_profile_entry all = { p->seconds_steps, 0, 0, 0 };
    for (int i = 0; i < KR_PART_COUNT; i++) {
        all.flops += p->part[i].flops;
        all.bytes += p->part[i].bytes;
    }
    entry_row(sb, "**all steps**", &all, p->seconds_steps, peak_gflops);
    if (p->rerun.calls > 0)
        entry_row(sb, "of which: window re-run passes", &p->rerun, p->seconds_steps, peak_gflops);
    kr_sb_appendf(sb,
                  "\nthread pool: %lld parallel regions, %.3f s (%.1f %% of the steps) with the "
                  "engine thread waiting for the others at their ends\n",
                  (long long)p->pool_regions, p->seconds_pool_wait,
                  100.0 * rate(p->seconds_pool_wait, p->seconds_steps));
}

double kr_machine_fma_peak(int n_threads) {
    kr_pool *pool = NULL;
    if (kr_pool_create(n_threads, &pool, NULL) != KR_OK) return 0.0;
    double peak = kr_fma_peak_gflops(pool, kr_isa_active(), 5);
    kr_pool_free(pool);
    return peak;
}

double kr_machine_read_bandwidth(int n_threads) {
    kr_pool *pool = NULL;
    if (kr_pool_create(n_threads, &pool, NULL) != KR_OK) return 0.0;
    double gbs = kr_read_bandwidth_gbs(pool, 5);
    kr_pool_free(pool);
    return gbs;
}
