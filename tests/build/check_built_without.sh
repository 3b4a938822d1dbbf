#!/usr/bin/env bash
# In a build that left parts out (CMake options KRONOS_BUILD_SERVER, KRONOS_BUILD_ANALYST,
# KRONOS_BUILD_EVAL, KRONOS_WITH_CURL, KRONOS_WITH_SQLITE, KRONOS_WITH_PG): each command of a
# missing part fails cleanly, saying "built without ..." and naming the option, and the core
# commands still work (a forecast of the bundled model).
#   check_built_without.sh KRONOS_BINARY SOURCE_DIR OPTION=0|1...
set -euo pipefail
kronos=$1
src=$2
shift 2
declare -A built
for kv in "$@"; do built[${kv%%=*}]=${kv#*=}; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
expect_without() { # option, then the command's arguments
  local option=$1
  shift
  local rc=0
  "$kronos" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null || rc=$?
  if [ "$rc" -eq 0 ] || ! grep -q "built without .*$option=OFF" "$tmp/err"; then
    echo "kronos $*: expected a failure saying 'built without ... ($option=OFF)', got exit $rc:"
    cat "$tmp/err"
    fails=$((fails + 1))
  else
    echo "kronos $1: $(head -1 "$tmp/err")"
  fi
}
[ "${built[KRONOS_BUILD_SERVER]}" = 1 ] || expect_without KRONOS_BUILD_SERVER serve --port 0
[ "${built[KRONOS_BUILD_ANALYST]}" = 1 ] || expect_without KRONOS_BUILD_ANALYST analyze AAPL
[ "${built[KRONOS_BUILD_EVAL]}" = 1 ] || expect_without KRONOS_BUILD_EVAL bench --shape tiny
[ "${built[KRONOS_BUILD_EVAL]}" = 1 ] || expect_without KRONOS_BUILD_EVAL eval-quant
[ "${built[KRONOS_BUILD_EVAL]}" = 1 ] || expect_without KRONOS_BUILD_EVAL backtest AAPL
[ "${built[KRONOS_WITH_CURL]}" = 1 ] || expect_without KRONOS_WITH_CURL pull org/name --cache-dir "$tmp/hub"
[ "${built[KRONOS_WITH_SQLITE]}" = 1 ] ||
  expect_without KRONOS_WITH_SQLITE ingest --symbol A --interval 5m --db "$tmp/k.db" \
    "$src/data/XSHG_5min_600977.csv"
[ "${built[KRONOS_WITH_PG]}" = 1 ] ||
  expect_without KRONOS_WITH_PG store list --db postgresql://127.0.0.1:1/none
# The core works whatever was left out.
"$kronos" forecast --input "$src/data/XSHG_5min_600977.csv" --pred-len 2 --seed 1 >"$tmp/f.csv" \
  2>/dev/null || { echo "kronos forecast failed"; fails=$((fails + 1)); }
[ "$(wc -l <"$tmp/f.csv")" -eq 3 ] || { echo "unexpected forecast:"; cat "$tmp/f.csv"; fails=$((fails + 1)); }
[ "$fails" -eq 0 ] || exit 1
echo "every missing part says so; the core forecasts"
