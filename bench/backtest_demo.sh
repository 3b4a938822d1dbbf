#!/usr/bin/env bash
# The bundled demo model backtested on the bundled series (data/), the honest tables into
# bench/results/backtest-demo.md: the verdicts, pooled scores, relative scores, calibration,
# cross-section and strategy sections of each report, with the command that made it.
#
#   bash bench/backtest_demo.sh [build/release/kronos]
set -euo pipefail
cd "$(dirname "$0")/.."
KRONOS=${1:-build/release/kronos}
OUT=bench/results/backtest-demo.md
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# name | arguments (the model is the bundled demo: --model left out)
RUNS=(
  "AAPL and MSFT, daily, 20 bars ahead|--input AAPL=data/AAPL_1d.csv --input MSFT=data/MSFT_1d.csv --horizon 20 --every 20"
  "BTCUSDT, hourly, a day ahead|--input BTCUSDT=data/BTCUSDT_1h.csv --horizon 24 --every 24"
  "600977.SH, 5-minute, a trading day ahead|--input 600977.SH=data/XSHG_5min_600977.csv --horizon 48 --every 48"
)

{
  echo "# The demo model backtested on the bundled series — $(date +%F)"
  echo
  echo "The bundled demo model (\`models/kronos-demo\`, 1.3 M parameters, trained for half an hour;"
  echo "it declares itself a demo) on the bundled candles (\`data/\`), by \`kronos backtest\` with its"
  echo "defaults otherwise: 32 paths, lookback up to 492 rows (max_context 512 - horizon), origins"
  echo "from the 64th row on, 1000 bootstrap resamples, seed 0. Every table below is copied from the"
  echo "report's Markdown as it came out. The demo model is no forecasting model, and the tables"
  echo "say how it fares against doing nothing: read them as a test of the software and of the"
  echo "report's honesty, not of Kronos."
  echo
} > "$TMP/out.md"

for run in "${RUNS[@]}"; do
  name=${run%%|*}
  args=${run#*|}
  # shellcheck disable=SC2086
  "$KRONOS" backtest $args --format md --out "$TMP/r.md" 2> "$TMP/err.txt"
  {
    echo "## $name"
    echo
    echo '```sh'
    echo "kronos backtest $args --format md"
    echo '```'
    echo
    # The header's run line, then the sections (their headings one level down).
    sed -n '/^Generated /p' "$TMP/r.md"
    echo
    awk '/^## Verdict/{on=1} /^## Significance/{on=0} /^## CRPS by horizon step/{on=0}
         /^## PIT histogram/{on=1} /^## Per symbol/{on=1} /^---$/{on=0}
         on { sub(/^## /, "### "); print }' "$TMP/r.md"
  } >> "$TMP/out.md"
done
mv "$TMP/out.md" "$OUT"
echo "wrote $OUT"
