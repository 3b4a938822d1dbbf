#!/usr/bin/env bash
# The standard benchmark table (random-weight models of the real shapes, from gen-random):
#   S1/S8/S32   Kronos-small, lookback 400, pred_len 120, 1/8/32 paths, exact window
#   NW          lookback 392 (no window overflow), 1 and 32 paths
#   B10         ten series of 300..500 candles, 32 paths each, submitted together
#   mini, base  S1 and S32
#   naive       the full-recompute path (the reference's algorithm on our kernels), S1
#   rolling     S1/S32/B10 with the sliding KV cache (the opt-in approximation)
#   GEMM        our f32 GEMM vs OpenBLAS cblas_sgemm on the model's shapes, FMA peak
# Each job runs in its own process, so its peak RSS is its own. Also times a whole
# `kronos forecast` process for S1 (start + mmap load + forecast + output).
#   table       the kronos columns of issue 15's table (S1, S8, lookback 392 without overflow,
#               Kronos-base S1; exact and rolling), on every ISA this CPU runs (KRONOS_ISA)
# Writes bench/results/forecast-<date>.md; every job also prints JSON with --json. Every job
# states the ISA and the FMA peak measured at its start.
# Usage: bash bench/run_standard.sh [build dir, default build/release] [table]
#   (with "table" only the issue-15 table is run)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
only=${2:-}
if [ ! -x "$build/kronos" ] || [ ! -x "$build/bench/bench_gemm" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" >/dev/null
fi
kronos=$build/kronos
stamp=$(date +%Y-%m-%d)
md=bench/results/forecast-$stamp.md
tmp=${TMPDIR:-/tmp}
mkdir -p bench/results
job() { # title, then kronos bench flags
  local title=$1; shift
  echo "### $title"
  echo
  echo "\`kronos bench $*\`"
  echo
  "$kronos" bench "$@"
  echo
}
# Median wall seconds of one `kronos bench --json` job (its first result row).
secs() {
  local s
  s=$("$kronos" bench --json "$@" | sed -n 's/^[[:space:]]*"seconds":[[:space:]]*\([0-9.e+-]*\),*$/\1/p' | head -1)
  printf '%.2f' "${s:-nan}"
}
# "seconds (floor)" of one job: its median wall time and the roofline floor the bench states
# (weights' FLOPs at the FMA peak, decode steps no faster than streaming the weights).
secs_floor() {
  "$kronos" bench --json "$@" | python3 -c '
import json, sys
r = json.load(sys.stdin)["results"][0]
f = r.get("floor_seconds")
print("%.2f (%s)" % (r["seconds"], "%.2f" % f if f else "-"))'
}
peak() {
  local g
  g=$("$kronos" bench --json --shape tiny --lookback 16 --pred-len 1 --paths 1 --repeat 1 |
    sed -n 's/^[[:space:]]*"fma_peak_gflops":[[:space:]]*\([0-9.e+-]*\),*$/\1/p')
  printf '%.0f' "${g:-nan}"
}
# Issue 15's table, kronos columns: lookback 400 / pred_len 120 unless said, random weights.
issue_table() {
  echo "### Issue 15 table (kronos columns)"
  echo
  echo "Load average before: $(cut -d' ' -f1-3 /proc/loadavg). Median of 3 (base: 1) forecast calls, seconds;"
  echo "in brackets the roofline floor \`kronos bench\` states for the exact f32 jobs (the weights' FLOPs at the"
  echo "measured FMA peak, every decode step no faster than streaming the weights at the measured read bandwidth)."
  echo
  echo "| ISA | FMA peak GFLOP/s | S1 exact (floor) | S1 rolling | S8 exact (floor) | S8 rolling | lookback 392, 1 path | base S1 exact (floor) | base S1 rolling |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  for isa in avx512 avx2; do
    export KRONOS_ISA=$isa
    got=$("$kronos" bench --json --shape tiny --lookback 16 --pred-len 1 --paths 1 --repeat 1 |
      sed -n 's/^[[:space:]]*"isa":[[:space:]]*"\(.*\)",*$/\1/p')
    [ "$got" = "$isa" ] || continue # this CPU does not run it
    local small=(--shape small --lookback 400 --pred-len 120 --repeat 3)
    local base=(--shape base --lookback 400 --pred-len 120 --repeat 1)
    echo "| $isa | $(peak) | $(secs_floor "${small[@]}" --paths 1) | $(secs "${small[@]}" --paths 1 --window rolling) |" \
      "$(secs_floor "${small[@]}" --paths 8) | $(secs "${small[@]}" --paths 8 --window rolling) |" \
      "$(secs --shape small --lookback 392 --pred-len 120 --repeat 3 --paths 1) |" \
      "$(secs_floor "${base[@]}" --paths 1) | $(secs "${base[@]}" --paths 1 --window rolling) |"
  done
  unset KRONOS_ISA
  echo
}
if [ "$only" = table ]; then
  issue_table
  exit 0
fi
{
  echo "# kronos bench — $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem/ {print $2}') GiB."
  echo "Command: \`bash bench/run_standard.sh\`. Wall time = median of the repeats of the forecast call"
  echo "(normalise, encode, prefill, generate, decode), model already loaded; \"~GFLOP/s\" counts the"
  echo "predictor's matrix products only. Official predictor figures: shared anchors (same machine class)."
  echo
  issue_table
  job "S1, S8 + naive (small)" --shape small --lookback 400 --pred-len 120 --paths 1,8 --repeat 3 --naive
  job "S32 (small)" --shape small --lookback 400 --pred-len 120 --paths 32 --repeat 3
  job "NW (small, no overflow)" --shape small --lookback 392 --pred-len 120 --paths 1,32 --repeat 3
  job "B10 (small)" --shape small --series 10 --lookback 300 --lookback-max 500 --pred-len 120 --paths 32 --repeat 1
  job "mini" --shape mini --lookback 400 --pred-len 120 --paths 1,32 --repeat 3
  job "base" --shape base --lookback 400 --pred-len 120 --paths 1,32 --repeat 1
  job "rolling window (small)" --shape small --lookback 400 --pred-len 120 --paths 1,8,32 --repeat 3 --window rolling
  job "B10 rolling (small)" --shape small --series 10 --lookback 300 --lookback-max 500 --pred-len 120 --paths 32 --repeat 1 --window rolling
  start=$(date +%s.%N)
  "$kronos" forecast --model "$tmp/kronos-bench-small-seed1" --input data/XSHG_5min_600977.csv \
      --lookback 400 --pred-len 120 --paths 1 >/dev/null
  end=$(date +%s.%N)
  printf '### Whole process\n\n`kronos forecast` S1 (lookback 400, pred_len 120, 1 path), process start to exit: **%.3f s** (official predictor: 25.3 s for the predict() call alone)\n\n' \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
  echo "### GEMM vs OpenBLAS"
  echo
  "$build/bench/bench_gemm" --no-scalar --reps 7
} | tee "$md"
echo "written: $md (for JSON, run any job with --json)"
