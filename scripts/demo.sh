#!/usr/bin/env bash
# The main job on the bundled example data: installs what is missing, builds kronos and
# forecasts the next 24 five-minute candles of China Film (600977.SH) with the bundled demo
# model (32 sample paths; mean path as CSV, then the JSON summary of the first steps).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc)" --target kronos_cli >/dev/null
./build/release/kronos forecast --input data/XSHG_5min_600977.csv --pred-len 24 \
    --paths 32 --seed 1 --output build/forecast-600977.json --format json
./build/release/kronos forecast --input data/XSHG_5min_600977.csv --pred-len 24 \
    --paths 32 --seed 1
echo "(every path, its tokens and the 10/50/90% quantiles: build/forecast-600977.json)"
