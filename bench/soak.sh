#!/usr/bin/env bash
# A bounded soak of `kronos serve` for minutes (not in CI; the test suite runs the same soak for
# 30 s as test_server_soak): mixed plain and streamed forecasts, analyses, vanishing clients
# and bad bodies at saturation, RSS each second, wrong answers and refusals counted.
#   bench/soak.sh [SECONDS] > bench/results/soak-$(date +%F).md
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
cmake --build build/release --target test_server_soak >/dev/null
echo "# Soak of kronos serve, $secs s ($(date -u +%F), $(nproc) cores)"
echo
echo "Command: \`bench/soak.sh $secs\` (in-process server, demo model, 6 client threads,"
echo "max_running 6, max_queue 4; see tests/test_server_soak.c for the mix)."
echo
echo '```'
KRONOS_SOAK_SECONDS=$secs build/release/tests/test_server_soak 2>&1 | grep -E "soak|answers|OK|FAILED|ERROR"
echo '```'
