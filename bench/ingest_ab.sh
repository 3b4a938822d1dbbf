#!/usr/bin/env bash
# Interleaved A/B of `kronos ingest` into a fresh SQLite store, two builds alternately, then
# the same file again into the filled store (the loop and the summary: ingest_ab_lib.sh).
# Prints one line per run and the medians and the median per-round ratio (before/after) of
# each case. Results: results/ingest-<date>.md.
#   bash bench/ingest_ab.sh BEFORE_KRONOS AFTER_KRONOS CSV [ROUNDS, default 5]
# A large CSV: python3 bench/make_ingest_csv.py 2000000 > /tmp/ingest-big.csv
set -euo pipefail
before=$1 after=$2 csv=$3 rounds=${4:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
reset_store() { rm -f "$dir"/s.db "$dir"/s.db-wal "$dir"/s.db-shm; }
ingest() { "$1" ingest --symbol BIG --interval 5m --db "$dir/s.db" "$csv" >/dev/null; }
source "$(dirname "$0")/ingest_ab_lib.sh"
ingest_ab "$before" "$after" "$rounds"
