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
# shellcheck source=tests/deploy/serve_scenario.sh
. "$source/tests/deploy/serve_scenario.sh"
trap 'serve_stop; rm -rf "$tmp"' EXIT
serve_start
serve_scenario
url=$serve_url
curl -sf -m 60 "$url/metrics" >"$tmp/metrics.txt"
grep -q '^kronos_' "$tmp/metrics.txt" || { echo "no kronos_ metrics in the scrape"; exit 1; }
grep -q '_bucket{' "$tmp/metrics.txt" || { echo "no histogram buckets in the scrape"; exit 1; }
if ! promtool check metrics <"$tmp/metrics.txt"; then
  echo "promtool check metrics failed on /metrics ($(wc -l <"$tmp/metrics.txt") lines)"
  exit 1
fi
echo "/metrics: $(grep -c '^# TYPE' "$tmp/metrics.txt") metric families, $(grep -vc '^#' "$tmp/metrics.txt") samples, promtool check metrics clean"
