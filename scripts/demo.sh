#!/usr/bin/env bash
# The main job on the bundled example data: installs what is missing, builds kronos and its
# web page (web/dist, what `kronos serve` shows at /),
# forecasts the next 24 five-minute candles of China Film (600977.SH) with the bundled demo
# model (32 sample paths: every path, its tokens and the quantiles as JSON in
# build/forecast-600977.json, then the mean path as CSV on stdout), then stores the bundled
# candles in a local database and writes an HTML analysis report for AAPL.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc)" --target kronos_cli >/dev/null
# The web page `kronos serve` shows at / (web/dist; the build tree and cmake --install serve it).
bash scripts/install-deps.sh --web
(cd web && npm ci --no-audit --no-fund --loglevel=error >/dev/null && npm run build --silent >/dev/null)
kronos=./build/release/kronos
# --lookback 488: the last 488 candles and 24 new ones fit the model's 512-token window, so no
# step re-runs the window (the forecast's note says what a longer history would cost).
$kronos forecast --input data/XSHG_5min_600977.csv --pred-len 24 --lookback 488 \
    --paths 32 --output build/forecast-600977.json --format json
$kronos forecast --input data/XSHG_5min_600977.csv --pred-len 24 --lookback 488 \
    --paths 32
echo "(every path, its tokens and the 10/50/90% quantiles: build/forecast-600977.json)"

# The analyst: candles into the store (re-running replaces the same rows), then a report with
# the defaults the web page uses too (seed 0, paths added until P(up) is within 2 pp).
db=build/kronos.db
$kronos ingest --db "$db" --symbol AAPL --interval 1d data/AAPL_1d.csv
$kronos ingest --db "$db" --symbol MSFT --interval 1d data/MSFT_1d.csv
$kronos ingest --db "$db" --symbol 600977.SH --interval 5m data/XSHG_5min_600977.csv
$kronos ingest --db "$db" --symbol BTCUSDT --interval 1h data/BTCUSDT_1h.csv
$kronos analyze AAPL --db "$db" --horizon 20 --calibrate 3 \
    --format html --out build/report-AAPL.html
echo "(AAPL analysis report, open in a browser: $(pwd)/build/report-AAPL.html;"
echo " the web page: $kronos serve --db $db, then http://127.0.0.1:8080/;"
echo " try: $kronos analyze AAPL MSFT 600977.SH BTCUSDT --db $db --format md)"
