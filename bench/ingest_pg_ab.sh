#!/usr/bin/env bash
# Interleaved A/B of `kronos ingest` into a PostgreSQL store, two builds alternately (ABBA:
# the order flips every round, so the host's drift lands on both): a new series, then the same
# file again into it (every row unchanged). The server is a throwaway cluster on loopback TCP
# with PostgreSQL's default durability (tests/scale/pgcluster.py --durable --tcp); each run
# starts from an empty store. Prints one line per run and the medians and the median
# per-round ratio (before/after) of each case. Results: results/ingest-pg-<date>.md.
#   bash bench/ingest_pg_ab.sh BEFORE_KRONOS AFTER_KRONOS CSV [ROUNDS, default 5]
# A large CSV: python3 bench/make_ingest_csv.py 2000000 > /tmp/ingest-big.csv
set -euo pipefail
if [ -z "${KRONOS_TEST_PG_TCP_URL:-}" ]; then
  here=$(cd "$(dirname "$0")" && pwd)
  exec python3 "$here/../tests/scale/pgcluster.py" run --durable --tcp -- bash "$0" "$@"
fi
before=$1 after=$2 csv=$3 rounds=${4:-5}
url=$KRONOS_TEST_PG_TCP_URL
dir=$(mktemp -d)
out=$dir/times
trap 'rm -rf "$dir"' EXIT
run() { # build label case
  local t0 t1
  t0=$(date +%s.%N)
  "$1" ingest --symbol BIG --interval 5m --db "$url" "$csv" >/dev/null
  t1=$(date +%s.%N)
  echo "$4 $2 $(echo "$t1 - $t0" | bc)" | tee -a "$out"
}
for r in $(seq 1 "$rounds"); do
  pair="before after"
  [ $((r % 2)) -eq 0 ] && pair="after before"
  for b in $pair; do
    bin=$before
    [ "$b" = after ] && bin=$after
    psql -X -q -d "$url" -c "DROP SCHEMA IF EXISTS kronos CASCADE" 2>/dev/null
    psql -X -q -d "$url" -c "CHECKPOINT"
    run "$bin" "$b" fresh "round$r-fresh"
    run "$bin" "$b" again "round$r-again"
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
