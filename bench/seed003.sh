#!/usr/bin/env bash
# Seed 003's table on a real-size model: the Kronos-small shape with random weights
# (`kronos gen-random --shape small`), served by `kronos serve` in f32, int8 and q4 (`kronos
# quantize` checkpoints, mapped as stored: quantising at load would keep the f32 file's pages
# resident beside the quantised weights, and RSS would not be the format's; QUANT_AT_LOAD=1
# measures that way instead), answering analyses (POST /analyze {"stock_code"}, the default adaptive paths) of ten
# stored symbols (the bundled data files, ingested into a fresh SQLite store):
#   - cold start: process start to /ready 200, the checkpoint's pages dropped from the page
#     cache first (each file synced, then `dd iflag=nocache`; fincore confirms 0 resident);
#   - one analysis (the first, then the median of three more);
#   - ten analyses one after another, ten at once, and one /v1/analyze/batch of the ten;
#   - ten analyses at most C at a time, C = 1, 3, 5, 10 (C = 1 and 10 are the two above);
#   - peak RSS (VmHWM) and steady RSS (VmRSS idle after the runs) of the server process.
# Each figure is printed with the load average when it was taken: on a shared machine the
# timings move with it. Re-run on a quiet machine for the table's real figures.
#
#   bench/seed003.sh            (writes Markdown to stdout; work files under build/seed003)
#   env: FORMATS="f32 int8 q4"  PORT=18903  BUILD=build/release  WORK=build/seed003
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
WORK=${WORK:-build/seed003}
FORMATS=${FORMATS:-"f32 int8 q4"}
QUANT_AT_LOAD=${QUANT_AT_LOAD:-0}
PORT=${PORT:-18903}
K="$BUILD/kronos"
URL="http://127.0.0.1:$PORT"
mkdir -p "$WORK"
[ -f "$WORK/small/predictor/model.safetensors" ] ||
  "$K" gen-random --shape small --out "$WORK/small" >/dev/null
DB="$WORK/store.db"
rm -f "$DB" "$DB"-*
# Ten symbols: the six bundled series, four of them again under a second name.
ingest() { "$K" ingest --symbol "$1" --interval "$2" --db "$DB" "data/$3" >/dev/null; }
ingest AAPL 1d AAPL_1d.csv; ingest MSFT 1d MSFT_1d.csv; ingest BTCUSDT 1h BTCUSDT_1h.csv
ingest 600977.SH 5m XSHG_5min_600977.csv; ingest 000002.SZ 1d 000002.SZ_1d.csv
ingest SPY 1m SPY_1min.csv; ingest AAPL-B 1d AAPL_1d.csv; ingest MSFT-B 1d MSFT_1d.csv
ingest BTC-B 1h BTCUSDT_1h.csv; ingest SPY-B 1m SPY_1min.csv
# No f32 shadow beside the quantised weights (drift_sample 0): RSS is the format's own.
echo '{"drift_sample": 0}' >"$WORK/serve.json"
SYMS=(AAPL MSFT BTCUSDT 600977.SH 000002.SZ SPY AAPL-B MSFT-B BTC-B SPY-B)
load() { cut -d' ' -f1 /proc/loadavg; }
now() { date +%s.%N; }
el() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
analyze() { # symbol -> seconds (fails the run on a non-200)
  local code t
  read -r code t < <(curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -X POST \
    -H 'Content-Type: application/json' -d "{\"stock_code\":\"$1\"}" "$URL/analyze")
  [ "$code" = 200 ] || { echo "seed003.sh: analysis of $1 answered $code" >&2; return 1; }
  echo "$t"
}
export -f analyze
export URL
at_most() { # C: ten analyses, at most C at once -> wall seconds
  local t0 t1
  t0=$(now)
  printf '%s\n' "${SYMS[@]}" | xargs -P "$1" -I{} bash -c 'analyze "$@" >/dev/null' _ {}
  t1=$(now)
  el "$t0" "$t1"
}
srv=""
cleanup() { if [ -n "$srv" ]; then kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; fi; }
trap cleanup EXIT
echo "| format | what | figure | load average |"
echo "|---|---|---|---|"
for fmt in $FORMATS; do
  dir="$WORK/small" quant="$fmt"
  if [ "$fmt" != f32 ] && [ "$QUANT_AT_LOAD" = 0 ]; then
    dir="$WORK/small-$fmt" quant=f32
    [ -f "$dir/predictor/model.safetensors" ] ||
      "$K" quantize --model "$WORK/small" --quant "$fmt" --out "$dir" >/dev/null
  fi
  for f in "$dir"/predictor/* "$dir"/tokenizer/*; do
    sync "$f"; dd if="$f" iflag=nocache count=0 status=none
  done
  resident=$(fincore -n -b -o RES "$dir/predictor/model.safetensors" 2>/dev/null || echo "?")
  t0=$(now)
  "$K" serve --model "$dir/predictor" --tokenizer "$dir/tokenizer" --quant "$quant" \
    --db "$DB" --port "$PORT" --config "$WORK/serve.json" 2>"$WORK/serve-$fmt.log" &
  srv=$!
  until curl -sf "$URL/ready" >/dev/null 2>&1; do
    kill -0 "$srv" 2>/dev/null || { cat "$WORK/serve-$fmt.log" >&2; exit 1; }
    sleep 0.02
  done
  t1=$(now)
  echo "| $fmt | cold start to /ready (page cache dropped: $resident bytes of the predictor resident) | $(el "$t0" "$t1") s | $(load) |"
  first=$(analyze AAPL)
  a=$(analyze MSFT); b=$(analyze BTCUSDT); c=$(analyze SPY)
  median=$(printf '%s\n%s\n%s\n' "$a" "$b" "$c" | sort -n | sed -n 2p)
  echo "| $fmt | one analysis (POST /analyze, adaptive paths): first, median of 3 more | $first s, $median s | $(load) |"
  for cc in 1 3 5 10; do
    wall=$(at_most "$cc")
    what="ten analyses, at most $cc at once"
    [ "$cc" = 1 ] && what="ten analyses one after another"
    [ "$cc" = 10 ] && what="ten analyses at once (10 concurrent)"
    echo "| $fmt | $what | $wall s ($(awk -v w="$wall" 'BEGIN { printf "%.2f", 10 / w }') analyses/s) | $(load) |"
  done
  body=$(printf '"%s",' "${SYMS[@]}")
  t0=$(now)
  code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -d "{\"symbols\":[${body%,}]}" "$URL/v1/analyze/batch")
  t1=$(now)
  echo "| $fmt | one /v1/analyze/batch of the ten (HTTP $code) | $(el "$t0" "$t1") s | $(load) |"
  sleep 2
  peak=$(awk '/VmHWM/ { print $2 }' "/proc/$srv/status")
  steady=$(awk '/VmRSS/ { print $2 }' "/proc/$srv/status")
  echo "| $fmt | peak RSS / steady RSS (idle after the runs) | $((peak / 1024)) MB / $((steady / 1024)) MB | $(load) |"
  kill "$srv"
  wait "$srv" || true
  srv=""
done
