#!/usr/bin/env bash
# The realistic load (bench/load --traffic): the same server under fixed windows (the old
# figure), bar-by-bar traffic, and bar-by-bar mixed with repeated dashboard / analysis windows,
# each with exact and anchored normalisation. Continuous batching with the tuner, in-process
# servers (bench/load starts one per run, empty cache). Prints the load average before each
# run beside its table: on a shared machine the timing columns move with it, the hit rate and
# the prefill / cached rows do not.
#
#   bench/run_realistic.sh [MODEL_DIR]     (default: the bundled demo model)
#   env: RATES=5,15  SECONDS_PER=15  PATHS=8  PRED_LEN=12  LOOKBACK=128  HISTORY=256
#        SYMBOLS=24  REPEAT=0.3  BUILD=build/release
#        RUNS="fixed bar mixed bar-anchored mixed-anchored"
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
MODEL=${1:-}
RATES=${RATES:-5,15}
SECONDS_PER=${SECONDS_PER:-15}
PATHS=${PATHS:-8}
PRED_LEN=${PRED_LEN:-12}
LOOKBACK=${LOOKBACK:-128}
HISTORY=${HISTORY:-256}
SYMBOLS=${SYMBOLS:-24}
REPEAT=${REPEAT:-0.3}
RUNS=${RUNS:-"fixed bar mixed bar-anchored mixed-anchored"}
[ -x "$BUILD/bench/load" ] || { echo "run_realistic.sh: $BUILD/bench/load is missing (build first)" >&2; exit 2; }
model_args=()
[ -n "$MODEL" ] && model_args=(--model "$MODEL")
for run in $RUNS; do
  traffic=${run%-anchored}
  norm=exact
  [ "$traffic" != "$run" ] && norm=anchored
  echo
  echo "### $run (load average before: $(cut -d' ' -f1-3 /proc/loadavg))"
  echo
  "$BUILD/bench/load" "${model_args[@]}" --modes continuous --no-ten --seconds "$SECONDS_PER" \
    --rates "$RATES" --paths "$PATHS" --pred-len "$PRED_LEN" --lookback "$LOOKBACK" \
    --history "$HISTORY" --symbols "$SYMBOLS" --repeat-share "$REPEAT" --traffic "$traffic" \
    --norm "$norm" | tail -n +3
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
