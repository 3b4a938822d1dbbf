#!/usr/bin/env bash
# The hostile soak (bench/soak_hostile.py) for SECONDS (default 1800), its report in
# bench/results/soak-hostile-DATE.md. Needs PostgreSQL (bash scripts/install-deps.sh --scale).
#   bench/soak_hostile.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-1800}
cmake --build build/release --target kronos_cli >/dev/null
out="bench/results/soak-hostile-$(date -u +%F).md"
rc=0
python3 bench/soak_hostile.py --kronos build/release/kronos --seconds "$secs" --out "$out" || rc=$?
cat "$out"
exit $rc
