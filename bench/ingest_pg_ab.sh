#!/usr/bin/env bash
# Interleaved A/B of `kronos ingest` into a PostgreSQL store, two builds alternately (ABBA:
# the order flips every round, so the host's drift lands on both): a new series, then the same
# file again into it (every row unchanged). The server is a throwaway cluster on loopback TCP
# with PostgreSQL's default durability (tests/scale/pgcluster.py --durable --tcp); each run
# starts from an empty store (the loop and the summary: ingest_ab_lib.sh). Prints one line per
# run and the medians and the median per-round ratio (before/after) of each case. Results:
# results/ingest-pg-<date>.md.
#   bash bench/ingest_pg_ab.sh BEFORE_KRONOS AFTER_KRONOS CSV [ROUNDS, default 5]
# A large CSV: python3 bench/make_ingest_csv.py 2000000 > /tmp/ingest-big.csv
set -euo pipefail
if [ -z "${KRONOS_TEST_PG_TCP_URL:-}" ]; then
  here=$(cd "$(dirname "$0")" && pwd)
  exec python3 "$here/../tests/scale/pgcluster.py" run --durable --tcp -- bash "$0" "$@"
fi
before=$1 after=$2 csv=$3 rounds=${4:-5}
url=$KRONOS_TEST_PG_TCP_URL
reset_store() {
  psql -X -q -d "$url" -c "DROP SCHEMA IF EXISTS kronos CASCADE" 2>/dev/null
  psql -X -q -d "$url" -c "CHECKPOINT"
}
ingest() { "$1" ingest --symbol BIG --interval 5m --db "$url" "$csv" >/dev/null; }
source "$(dirname "$0")/ingest_ab_lib.sh"
ingest_ab "$before" "$after" "$rounds"
