#!/usr/bin/env bash
# The standard benchmark table: Kronos-small shape (random weights from gen-random), lookback
# 400, pred_len 120, 1 and 8 paths — KV-cached engine vs the naive full-recompute path (the
# reference's algorithm on our kernels), both in one run, plus the official predictor's
# figures measured on this machine class. Also times a whole `kronos forecast` process
# (start, model load, forecast) for S1. Writes bench/results/forecast-<date>.md.
# Usage: bash bench/run_standard.sh [build dir, default build/release]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
kronos=$build/kronos
[ -x "$kronos" ] || { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build "$build" -j"$(nproc)" >/dev/null; }
out=bench/results/forecast-$(date +%Y-%m-%d).md
tmp=${TMPDIR:-/tmp}
{
  echo "# kronos bench — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
  echo
  echo "Command: \`bash bench/run_standard.sh\` (runs \`kronos bench --shape small --lookback 400 --pred-len 120 --paths 1,8 --repeat 3 --naive\`)"
  echo
  "$kronos" bench --shape small --lookback 400 --pred-len 120 --paths 1,8 --repeat 3 --naive
  echo
  echo "No window overflow (lookback 392: 392 + 119 < 512, the KV cache is never reset):"
  echo
  "$kronos" bench --shape small --lookback 392 --pred-len 120 --paths 1,8 --repeat 3 | tail -n +3
  echo
  # Whole process, S1: start + mmap load + forecast + output, as a user runs it.
  model=$tmp/kronos-bench-small-seed1
  start=$(date +%s.%N)
  "$kronos" forecast --model "$model" --input data/XSHG_5min_600977.csv --lookback 400 --pred-len 120 >/dev/null
  end=$(date +%s.%N)
  printf 'Whole `kronos forecast` process, S1 (lookback 400, pred_len 120, 1 path): %.3f s (official predictor: 25.3 s, forecast call only)\n' \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
} | tee "$out"
echo "written: $out"
