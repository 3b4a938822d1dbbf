#!/usr/bin/env bash
# The precision ladder under load: the same bar-by-bar load (bench/load) on a model served as
# "m" without and with a ladder of gated lower precisions; p95 TTFT and throughput of each.
# The ladder's windows are shortened (--tune-window) so a short run sees it move; the gate
# reports are made first with kronos eval-quant --gate deploy/quant-gate.json --json. A
# precision whose gate fails is left out (as the server would refuse it).
#
#   bench/run_ladder.sh [MODEL_DIR]       (default: the bundled demo model)
#   env: RATES=25  SECONDS_PER=30  PATHS=8  PRED_LEN=12  LOOKBACK=128  TUNE_WINDOW=2
#        QUANTS="int8 q4"  BUILD=build/release
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
MODEL=${1:-}
RATES=${RATES:-25}
SECONDS_PER=${SECONDS_PER:-30}
PATHS=${PATHS:-8}
PRED_LEN=${PRED_LEN:-12}
LOOKBACK=${LOOKBACK:-128}
TUNE_WINDOW=${TUNE_WINDOW:-2}
QUANTS=${QUANTS:-"int8 q4"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model_args=()
[ -n "$MODEL" ] && model_args=(--model "$MODEL")
ladder=""
for q in $QUANTS; do
  if "$BUILD/kronos" eval-quant "${model_args[@]}" --quant "$q" --gate deploy/quant-gate.json \
       --windows 4 --json "$tmp/$q.json" --markdown "$tmp/$q.md" >/dev/null 2>"$tmp/$q.log"; then
    echo "- $q: every gate holds: on the ladder"
    ladder="${ladder:+$ladder,}$q:$tmp/$q.json"
  else
    echo "- $q: $(grep -c '^gate' "$tmp/$q.log" || true) gate(s) failed: left out ($(grep '^gate' "$tmp/$q.log" | head -2 | tr '\n' ' '))"
  fi
done
[ -n "$ladder" ] || { echo "run_ladder.sh: no precision passed its gate" >&2; exit 1; }
for run in off on; do
  extra=()
  [ "$run" = on ] && extra=(--precisions "$ladder")
  echo
  echo "### ladder $run (load average before: $(cut -d' ' -f1-3 /proc/loadavg))"
  echo
  "$BUILD/bench/load" "${model_args[@]}" --modes continuous --no-ten --traffic bar \
    --seconds "$SECONDS_PER" --rates "$RATES" --paths "$PATHS" --pred-len "$PRED_LEN" \
    --lookback "$LOOKBACK" --model-name m --tune-window "$TUNE_WINDOW" "${extra[@]}" | tail -n +3
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
