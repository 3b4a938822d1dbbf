#!/usr/bin/env bash
# The batch-wait trade-off on one server: throughput and p50/p95 at batch waits of 0, 20, 50
# and 100 ms (continuous batching, tuner off so the wait stays put), and static batches of 32
# and 64 requests (offline scoring), each under the same open-loop Poisson load (bench/load).
# Prints Markdown rows; results go to bench/results/serving-tradeoff-<date>.md by hand.
#
#   bench/run_tradeoff.sh [MODEL_DIR]     (default: the bundled demo model)
#   env: RATES=20,200  SECONDS_PER=8  PATHS=8  PRED_LEN=12  LOOKBACK=128  PORT=18931
#        MODES="wait0 wait20 wait50 wait100 static32 static64"  BUILD=build/release
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
MODEL=${1:-}
RATES=${RATES:-20,200}
SECONDS_PER=${SECONDS_PER:-8}
PATHS=${PATHS:-8}
PRED_LEN=${PRED_LEN:-12}
LOOKBACK=${LOOKBACK:-128}
PORT=${PORT:-18931}
MODES=${MODES:-"wait0 wait20 wait50 wait100 static32 static64"}
for bin in "$BUILD/kronos" "$BUILD/bench/load"; do
  [ -x "$bin" ] || { echo "run_tradeoff.sh: $bin is missing (build first)" >&2; exit 2; }
done
tmp=$(mktemp -d)
srv=""
cleanup() { if [ -n "$srv" ]; then kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; fi; rm -rf "$tmp"; }
trap cleanup EXIT

echo "| mode | rate (req/s) | sent | ok | errors | throughput (req/s) | p50 (s) | p95 (s) | p99 (s) | mean batch (paths/step) | cache hit |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for mode in $MODES; do
  case "$mode" in
    wait*) wait_ms=${mode#wait}; running=64; static=false; label="continuous, batch_wait ${wait_ms} ms" ;;
    static*) wait_ms=500; running=${mode#static}; static=true; label="static batches of ${running}" ;;
    *) echo "run_tradeoff.sh: unknown mode '$mode'" >&2; exit 2 ;;
  esac
  cat > "$tmp/serve.json" <<EOF
{"host": "127.0.0.1", "port": $PORT, "tune": false, "batch_wait_ms": $wait_ms,
 "max_running": $running, "static_batching": $static, "max_queue": 4096,
 "max_connections_per_ip": 0, "max_connections": 4096}
EOF
  args=(serve --config "$tmp/serve.json")
  [ -n "$MODEL" ] && args+=(--model "$MODEL")
  "$BUILD/kronos" "${args[@]}" > "$tmp/serve.log" 2>&1 &
  srv=$!
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$PORT/health" > /dev/null 2>&1 && break
    kill -0 "$srv" 2>/dev/null || { cat "$tmp/serve.log" >&2; exit 1; }
    sleep 0.1
  done
  "$BUILD/bench/load" --url "http://127.0.0.1:$PORT" --rates "$RATES" --seconds "$SECONDS_PER" \
    --paths "$PATHS" --pred-len "$PRED_LEN" --lookback "$LOOKBACK" --fixed-len \
    | grep "^| http" | sed "s#^| http://127.0.0.1:$PORT #| $label #"
  kill "$srv"
  wait "$srv" 2>/dev/null || true
  srv=""
done
