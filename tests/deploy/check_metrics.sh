#!/usr/bin/env bash
# /metrics as Prometheus itself reads it: `kronos serve` (the bundled demo model, an SQLite
# store) after an ingest, an analysis, a forecast, a rejected request and a cancelled one, so
# counters, gauges and histograms all carry samples; then `promtool check metrics` (Debian
# package prometheus, which scripts/install-deps.sh --scale installs) on the scrape: the text
# format and Prometheus' naming lint (units, _total counters, help texts). Skipped (77) without
# promtool. Usage: check_metrics.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source=$2
command -v promtool >/dev/null || { echo "SKIPPED: promtool not installed (apt-get install prometheus)"; exit 77; }
tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
"$build/kronos" serve --port 0 --db "$tmp/k.db" >"$tmp/serve.log" 2>&1 &
pid=$!
port=
for _ in $(seq 1 200); do
  port=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$tmp/serve.log")
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.log"; echo "kronos serve exited"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { cat "$tmp/serve.log"; echo "kronos serve did not start listening"; exit 1; }
url=http://127.0.0.1:$port
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
[ "$(code -X POST "$url/v1/candles/AAPL?interval=1d" -H 'Content-Type: text/csv' \
  --data-binary "@$source/data/AAPL_1d.csv")" = 200 ] || { echo "ingest failed"; exit 1; }
[ "$(code -X POST "$url/v1/analyze" -H 'Content-Type: application/json' \
  -d '{"symbol":"AAPL","horizon":5,"paths":4}')" = 200 ] || { echo "analysis failed"; exit 1; }
# The candles as CSV text in the JSON (the header and the last 100 rows).
candles=$( (head -1 "$source/data/AAPL_1d.csv"; tail -100 "$source/data/AAPL_1d.csv") |
  python3 -c 'import json, sys; print(json.dumps(sys.stdin.read()))')
[ "$(code -X POST "$url/v1/forecast" -H 'Content-Type: application/json' \
  -d "{\"candles\": $candles, \"pred_len\": 3, \"paths\": 2}")" = 200 ] ||
  { echo "forecast failed"; exit 1; }
[ "$(code -X POST "$url/v1/analyze" -H 'Content-Type: application/json' -d '{')" = 400 ] ||
  { echo "malformed JSON not refused"; exit 1; }
# A client that gives up: the request is cancelled or finishes, either way it is counted.
curl -s -m 0.05 -X POST "$url/v1/analyze" -H 'Content-Type: application/json' \
  -d '{"symbol":"AAPL","horizon":30,"paths":64}' >/dev/null 2>&1 || true
curl -sf "$url/metrics" >"$tmp/metrics.txt"
grep -q '^kronos_' "$tmp/metrics.txt" || { echo "no kronos_ metrics in the scrape"; exit 1; }
grep -q '_bucket{' "$tmp/metrics.txt" || { echo "no histogram buckets in the scrape"; exit 1; }
if ! promtool check metrics <"$tmp/metrics.txt"; then
  echo "promtool check metrics failed on /metrics ($(wc -l <"$tmp/metrics.txt") lines)"
  exit 1
fi
echo "/metrics: $(grep -c '^# TYPE' "$tmp/metrics.txt") metric families, $(grep -vc '^#' "$tmp/metrics.txt") samples, promtool check metrics clean"
