/*
 * engine/profile — the step profile (kr_step_profile, kronos.h) as text: the JSON object the
 * forecast JSON and `kronos bench --profile --json` carry, and the Markdown table of
 * `kronos bench --profile`, each part's rate set against the machine's measured FMA peak.
 */
#ifndef KR_ENGINE_PROFILE_H
#define KR_ENGINE_PROFILE_H

#include "base/strbuf.h"
#include "kronos.h"

/* {"steps_seconds":…, "parts":{"gemm":{"seconds","share","gflop","gflops","gbytes_per_second",
 * "calls"}, …}, "rerun":{…}, "pool_regions":…, "pool_wait_seconds":…}; "null" when the
 * profile was off. Rates are 0 for a part that took no time. */
KR_PRIVATE void kr_step_profile_json(kr_sb *sb, const kr_step_profile *p);

/* A Markdown table, a row per part (+ the re-run view), with "% of peak" when
 * peak_gflops > 0. */
KR_PRIVATE void kr_step_profile_markdown(kr_sb *sb, const kr_step_profile *p, double peak_gflops);

/* The f32 FMA peak of this machine in GFLOP/s on n_threads threads (<= 0: all CPUs) with
 * the active ISA's vectors (kr_fma_peak_gflops, best of 5 bursts of ~10 ms): what a
 * benchmark states beside its figures. 0 if no thread pool could be made. */
KR_PRIVATE double kr_machine_fma_peak(int n_threads);

/* This machine's read bandwidth from memory in GB/s on n_threads threads (<= 0: all CPUs),
 * kr_read_bandwidth_gbs over 5 passes of 256 MiB: what a benchmark states beside its figures
 * for the steps that stream the weights. 0 if no thread pool or buffer could be made. */
KR_PRIVATE double kr_machine_read_bandwidth(int n_threads);

/* *acc += *p, part by part (profiles of several forecasts of one bench run). */
KR_PRIVATE void kr_step_profile_add(kr_step_profile *acc, const kr_step_profile *p);

#endif
