#!/usr/bin/env bash
# Interleaved A/B of two builds of `kronos` over issue 15's jobs, one forecast per process
# (--repeat 1: a cold first forecast, as a user runs it), the two builds alternately (ABBA: the
# order flips every round) so that the host's drift lands on both. Prints one line per run and a
# table of medians, and of the per-round after/before ratios, at the end.
#   bash bench/ab_builds.sh BEFORE_KRONOS AFTER_KRONOS [ROUNDS, default 4]
# Jobs: Kronos-small S1 / S8 (lookback 400, pred_len 120), P64 (64 paths × 30 steps, lookback
# 380), lookback 392 (no window overflow), Kronos-base S1; f32 and int8; AVX-512 and AVX2
# (KRONOS_ISA), each skipped where the CPU does not run it; int8 also as "avx2-novnni" (the
# AVX2 row with KRONOS_AVXVNNI=0: VPMADDWD, what an AVX2 CPU without AVX-VNNI runs).
# AB_FILTER=REGEX keeps the jobs whose "name|weights|isa|args" line matches (e.g.
# AB_FILTER='int8\|avx2').
set -euo pipefail
before=$1 after=$2 rounds=${3:-4}
out=$(mktemp)
jobs=(
  "S1|f32|avx512|--shape small --paths 1"
  "S8|f32|avx512|--shape small --paths 8"
  "P64|f32|avx512|--shape small --paths 64 --lookback 380 --pred-len 30"
  "S1|int8|avx512|--shape small --paths 1 --quant int8"
  "S8|int8|avx512|--shape small --paths 8 --quant int8"
  "P64|int8|avx512|--shape small --paths 64 --lookback 380 --pred-len 30 --quant int8"
  "NW392|f32|avx512|--shape small --paths 1 --lookback 392"
  "baseS1|f32|avx512|--shape base --paths 1"
  "S1|f32|avx2|--shape small --paths 1"
  "S8|f32|avx2|--shape small --paths 8"
  "S1|int8|avx2|--shape small --paths 1 --quant int8"
  "S8|int8|avx2|--shape small --paths 8 --quant int8"
  "P64|f32|avx2|--shape small --paths 64 --lookback 380 --pred-len 30"
  "P64|int8|avx2|--shape small --paths 64 --lookback 380 --pred-len 30 --quant int8"
  "S1|int8|avx2-novnni|--shape small --paths 1 --quant int8"
  "S8|int8|avx2-novnni|--shape small --paths 8 --quant int8"
  "P64|int8|avx2-novnni|--shape small --paths 64 --lookback 380 --pred-len 30 --quant int8"
)
if [ -n "${AB_FILTER:-}" ]; then
  rc=0
  grep -qE -- "$AB_FILTER" <<<"" 2>/dev/null || rc=$?
  if [ "$rc" -eq 2 ]; then
    echo "ab_builds.sh: AB_FILTER='$AB_FILTER' is not an extended regular expression" >&2
    exit 2
  fi
  kept=()
  for j in "${jobs[@]}"; do
    if grep -qE -- "$AB_FILTER" <<<"$j"; then kept+=("$j"); fi
  done
  if [ ${#kept[@]} -eq 0 ]; then
    echo "ab_builds.sh: AB_FILTER='$AB_FILTER' matches none of the jobs (lines 'name|weights|isa|args')" >&2
    exit 2
  fi
  jobs=("${kept[@]}")
fi
for r in $(seq 1 "$rounds"); do
  for j in "${jobs[@]}"; do
    IFS='|' read -r name q isa args <<<"$j"
    pair="before after" # ABBA: odd rounds run before first, even rounds after first
    [ $((r % 2)) -eq 0 ] && pair="after before"
    for b in $pair; do
      bin=$before
      [ "$b" = after ] && bin=$after
      # shellcheck disable=SC2086 # args is a word list
      # avx2-novnni: the AVX2 row without AVX-VNNI (KRONOS_AVXVNNI=0), as a CPU that lacks it
      vnni=1 level=$isa
      [ "$isa" = avx2-novnni ] && vnni=0 level=avx2
      line=$(KRONOS_ISA=$level KRONOS_AVXVNNI=$vnni "$bin" bench --json $args --repeat 1 | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(d['isa'], '%.3f' % d['results'][0]['seconds'], '%.0f' % d['fma_peak_gflops'])")
      # shellcheck disable=SC2086 # split the line into its three fields
      set -- $line
      [ "$1" = "$level" ] || continue # this CPU does not run it
      echo "$r $name $q $isa $b $2 $3" | tee -a "$out"
    done
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
d, order = collections.defaultdict(list), []
by_round = {}
for line in open(sys.argv[1]):
    r, name, q, isa, b, s, _peak = line.split()
    d[(name, q, isa, b)].append(float(s))
    by_round[(r, name, q, isa, b)] = float(s)
    if (name, q, isa) not in order: order.append((name, q, isa))
print("\n| job | ISA | weights | before s | after s | after / before | paired |\n"
      "|---|---|---|---:|---:|---:|---:|")
for k in order:
    b, a = d[k + ('before',)], d[k + ('after',)]
    mb, ma = statistics.median(b), statistics.median(a)
    # the same round's two runs sit next to each other in time: their ratio cancels most drift
    pairs = [by_round[(r,) + k + ('after',)] / by_round[(r,) + k + ('before',)]
             for (r, *rest) in by_round if tuple(rest) == k + ('before',)
             and (r,) + k + ('after',) in by_round]
    print(f"| {k[0]} | {k[2]} | {k[1]} | {mb:.3f} ({min(b):.3f}) | {ma:.3f} ({min(a):.3f}) "
          f"| {ma / mb:.2f} | {statistics.median(pairs):.2f} |")
print("\nmedian (minimum) seconds; paired = median over rounds of after / before within a round;"
      "\nint8 speed-up over f32, after:")
for (name, q, isa) in order:
    f32_isa = 'avx2' if isa == 'avx2-novnni' else isa
    if q == 'int8' and (name, 'f32', f32_isa, 'after') in d:
        f, i = d[(name, 'f32', f32_isa, 'after')], d[(name, 'int8', isa, 'after')]
        print(f"  {name} {isa}: {statistics.median(f) / statistics.median(i):.2f}x")
PY
rm -f "$out"
