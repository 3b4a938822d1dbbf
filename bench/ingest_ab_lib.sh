# Shared by ingest_ab.sh (SQLite) and ingest_pg_ab.sh (PostgreSQL); sourced, not run. The
# caller defines reset_store (an empty store) and ingest BIN (one `kronos ingest` of its CSV
# into it), then calls ingest_ab BEFORE AFTER ROUNDS. Each round: per build, in ABBA order (the
# order flips every round, so the host's drift lands on both), a fresh ingest and the same file
# again (every row unchanged), each timed; then the medians and the median per-round ratio
# (before/after) of each case.
ingest_ab() {
  local before=$1 after=$2 rounds=$3 out
  out=$(mktemp)
  for r in $(seq 1 "$rounds"); do
    local pair="before after"
    [ $((r % 2)) -eq 0 ] && pair="after before"
    for b in $pair; do
      local bin=$before
      [ "$b" = after ] && bin=$after
      reset_store
      for c in fresh again; do
        local t0 t1
        t0=$(date +%s.%N)
        ingest "$bin"
        t1=$(date +%s.%N)
        echo "round$r-$c $b $(echo "$t1 - $t0" | bc)" | tee -a "$out"
      done
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
  rm -f "$out"
}
