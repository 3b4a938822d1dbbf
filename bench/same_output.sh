#!/usr/bin/env bash
# Do two builds of `kronos` forecast the same numbers? Runs 11 forecasts (Kronos-small and
# Kronos-base random weights from gen-random, and the bundled demo model: exact and rolling
# windows, int8 and bf16 weights, int8 and bf16 KV caches, 1 and 3 threads) with each build and
# compares the JSON (mean, quantiles, every path's candles and tokens; timing left out). Exits
# non-zero if any differs: the check that a speed change kept every result bit-identical.
#   bash bench/same_output.sh BEFORE_KRONOS AFTER_KRONOS
set -uo pipefail
cd "$(dirname "$0")/.."
a=$1 b=$2 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in small base; do
  "$b" gen-random --shape $s --seed 7 --out "$tmp/$s" >/dev/null || exit 1
done
data=data/XSHG_5min_600977.csv
S="--model $tmp/small/predictor --tokenizer $tmp/small/tokenizer --input $data"
B="--model $tmp/base/predictor --tokenizer $tmp/base/tokenizer --input $data"
run() { # name, forecast flags...
  local name=$1
  shift
  if ! "$a" forecast "$@" --format json --output "$tmp/a.json" >/dev/null 2>&1 ||
    ! "$b" forecast "$@" --format json --output "$tmp/b.json" >/dev/null 2>&1; then
    echo "$name: a forecast failed"
    fail=1
    return
  fi
  if python3 - "$tmp/a.json" "$tmp/b.json" <<'PY'; then
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for d in (a, b):
    d.pop('timing', None)
    d.pop('usage', None)
sys.exit(0 if a == b and a.get('paths') else 1)
PY
    echo "$name: identical"
  else
    echo "$name: DIFFERENT"
    fail=1
  fi
}
# shellcheck disable=SC2086 # S and B are word lists
{
  run s1-exact $S --lookback 400 --pred-len 120 --paths 1 --seed 3
  run s8-exact $S --lookback 400 --pred-len 120 --paths 8 --seed 3
  run s8-rolling $S --lookback 400 --pred-len 120 --paths 8 --seed 3 --window rolling
  run p64-int8 $S --lookback 380 --pred-len 30 --paths 64 --seed 3 --quant int8
  run s8-int8 $S --lookback 400 --pred-len 120 --paths 8 --seed 3 --quant int8
  run s4-kv-int8 $S --lookback 400 --pred-len 120 --paths 4 --seed 3 --kv-dtype int8
  run s4-bf16 $S --lookback 300 --pred-len 40 --paths 4 --seed 3 --quant bf16 --kv-dtype bf16
  run base-2paths $B --lookback 400 --pred-len 120 --paths 2 --seed 3
  run demo-32paths --input $data --lookback 400 --pred-len 24 --paths 32 --seed 3
  run s3-1thread $S --lookback 400 --pred-len 120 --paths 3 --seed 3 --threads 1
  run s3-3threads $S --lookback 400 --pred-len 120 --paths 3 --seed 3 --threads 3
}
exit $fail
