#!/usr/bin/env bash
# The test suite: installs what is missing, then a Release build and an ASan+UBSan build,
# each running the whole ctest suite (the Release one also its golden, engine and kernel
# suites on the AVX2 kernels when the CPU has AVX-512), the threaded suites under
# ThreadSanitizer, then the Python package (python/,
# installed with the Release library into a throwaway venv over Debian's numpy/pandas/
# distributed) with its pytest suite, then every libFuzzer target for a bounded time.
# FUZZ_SECONDS (default 30) sets the time per fuzzer; FUZZ_SECONDS=0 skips fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# PostgreSQL and HAProxy for the scale-out tests (tests/scale/: ctest market_store_pg and
# scale_replicas), which report themselves skipped without them.
bash scripts/install-deps.sh --scale
jobs=$(nproc)
# No test may hang the run: one without a TIMEOUT of its own is stopped (and failed) after
# 15 minutes; the slowest take ~1 minute under ASan.
ctest_args=(--output-on-failure --timeout 900 -j"$jobs")
# The 32 MB `mini` golden set is not copied into the project; use it when it is beside us.
if [ -z "${KRONOS_GOLDEN_MINI_DIR:-}" ] && [ -d ../shared/golden/mini ]; then
  KRONOS_GOLDEN_MINI_DIR="$(cd ../shared/golden/mini && pwd)"
  export KRONOS_GOLDEN_MINI_DIR
fi

# The web page: Chromium for its browser test, its npm packages (lightweight-charts, and
# playwright-core to drive the browser) and web/dist, which `kronos serve` serves at /. Before
# configuring, since tests/CMakeLists.txt registers web_e2e only when both are there.
echo "== Web page"
bash scripts/install-deps.sh --web
(cd web && npm ci --no-audit --no-fund --loglevel=error >/dev/null && npm run build --silent >/dev/null)

echo "== Release build"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$jobs" >/dev/null
ctest --test-dir build/release "${ctest_args[@]}"
# On an AVX-512 machine the engine would never run its AVX2 kernels end to end (the kernel
# suites test every variant directly, the golden and engine suites only the best one): rerun
# those on the AVX2 row too (~30 s).
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  echo "== Release, KRONOS_ISA=avx2 (golden, engine and kernel suites)"
  KRONOS_ISA=avx2 ctest --test-dir build/release "${ctest_args[@]}" -R 'golden|engine|kernels'
fi

echo "== ASan + UBSan build"
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKRONOS_SANITIZE=ON >/dev/null
cmake --build build/asan -j"$jobs" >/dev/null
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan "${ctest_args[@]}"

# The threads' suites again under ThreadSanitizer (~4 min): the thread pool, the engine context
# (submit, cancel, synchronous batches failing mid-submission), admission, and the server with
# an f32 drift shadow attached while it serves, and the backtest jobs (worker threads, event
# streams, cancel, a server freed under a running job). Any report fails the run.
echo "== ThreadSanitizer (thread pool, engine context and admission, server)"
tsan_tests=(test_base_threadpool test_engine_context test_engine_admission test_server_e2e
            test_server_analyst test_server_backtest)
cmake -S . -B build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKRONOS_TSAN=ON >/dev/null
cmake --build build/tsan -j"$jobs" --target kronos_cli "${tsan_tests[@]}" >/dev/null
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ctest --test-dir build/tsan "${ctest_args[@]}" -R "^($(IFS='|'; echo "${tsan_tests[*]}"))\$"

echo "== Python package"
bash scripts/install-deps.sh --python
# Debian's python3 (not a pyenv one on PATH); the venv sees the system's numpy, pandas,
# pytest and distributed, and pip installs offline with no build isolation, bundling
# build/release/lib/libkronos.so.0 into the package.
rm -rf build/pyvenv
/usr/bin/python3 -m venv --system-site-packages --without-pip build/pyvenv
build/pyvenv/bin/python -m pip install -q --no-build-isolation --no-index ./python
# From build/, so the tests import the installed package, not the source folder.
(cd build && KRONOS_CLI="$PWD/release/kronos" pyvenv/bin/python -m pytest -q ../python/tests)

secs=${FUZZ_SECONDS:-30}
if [ "$secs" -gt 0 ]; then
  echo "== libFuzzer (${secs}s per target)"
  CC=clang cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKRONOS_FUZZ=ON >/dev/null
  for src in fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    cmake --build build/fuzz -j"$jobs" --target "$name" >/dev/null
    corpus=build/fuzz/corpus/$name
    mkdir -p "$corpus"
    if ! build/fuzz/fuzz/"$name" -max_total_time="$secs" -print_final_stats=1 \
         -artifact_prefix=build/fuzz/"$name"- "$corpus" "fuzz/corpus/$name" >build/fuzz/"$name".log 2>&1; then
      tail -40 build/fuzz/"$name".log
      echo "$name: FAILED (crash input kept under build/fuzz/)"
      exit 1
    fi
    echo "$name: $(grep -o 'stat::number_of_executed_units: [0-9]*' build/fuzz/"$name".log) in ${secs}s, no crash"
  done
fi
