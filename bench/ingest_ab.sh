#!/usr/bin/env bash
# Interleaved A/B of `kronos ingest` into a fresh SQLite store, two builds alternately (ABBA:
# the order flips every round, so the host's drift lands on both), then the same file again
# into the filled store (every row unchanged). Prints one line per run and the medians and
# the median per-round ratio (before/after) of each case. Results: results/ingest-<date>.md.
#   bash bench/ingest_ab.sh BEFORE_KRONOS AFTER_KRONOS CSV [ROUNDS, default 5]
# A large CSV: python3 bench/make_ingest_csv.py 2000000 > /tmp/ingest-big.csv
set -euo pipefail
before=$1 after=$2 csv=$3 rounds=${4:-5}
dir=$(mktemp -d)
out=$dir/times
trap 'rm -rf "$dir"' EXIT
run() { # build label db case
  local t0 t1
  t0=$(date +%s.%N)
  "$1" ingest --symbol BIG --interval 5m --db "$3" "$csv" >/dev/null
  t1=$(date +%s.%N)
  local s
  s=$(echo "$t1 - $t0" | bc)
  echo "$5 $2 $s" | tee -a "$out"
}
for r in $(seq 1 "$rounds"); do
  pair="before after"
  [ $((r % 2)) -eq 0 ] && pair="after before"
  for b in $pair; do
    bin=$before
    [ "$b" = after ] && bin=$after
    rm -f "$dir"/s.db "$dir"/s.db-wal "$dir"/s.db-shm
    run "$bin" "$b" "$dir/s.db" fresh "round$r-fresh"
    run "$bin" "$b" "$dir/s.db" again "round$r-again"
  done
done
python3 - "$out" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for case in ("fresh", "again"):
    t = {"before": {}, "after": {}}
    for tag, build, s in rows:
        if tag.endswith(case):
            t[build][tag.split("-")[0]] = float(s)
    rounds = sorted(t["before"])
    ratios = [t["before"][r] / t["after"][r] for r in rounds]
    print(f"{case}: before median {statistics.median(t['before'].values()):.2f} s, "
          f"after median {statistics.median(t['after'].values()):.2f} s, "
          f"per-round ratio median {statistics.median(ratios):.2f}x "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f}, {len(rounds)} rounds)")
PY
