#!/usr/bin/env bash
# The test suite: installs what is missing, checks the commit messages, then a Release build and
# an ASan+UBSan build, each running the ctest suite (the ASan one all but the checks labelled
# release-only, which test no C code's memory; the Release one also its golden,
# engine and kernel suites on the AVX2 kernels when the CPU has AVX-512), the build with every
# optional part left out (core only) and its tests, the threaded suites under ThreadSanitizer,
# the Python package (python/, installed with the Release library into a throwaway venv over
# Debian's numpy/pandas/distributed) with its pytest suite, then every libFuzzer target for a
# bounded time. FUZZ_SECONDS (default 30) sets the time per fuzzer; FUZZ_SECONDS=0 skips
# fuzzing.
#
# Each configuration is built once (the fuzz targets in one build command, not one per target).
# Independent work runs side by side where it mostly waits or uses one core: the Python suite
# beside the ThreadSanitizer suites, two fuzzers at a time (each is one thread). Every stage
# prints its name; the last line gives each stage's wall time and the total.
set -euo pipefail
cd "$(dirname "$0")/.."
t_start=$(date +%s)
stage_times=""
stage_t0=$t_start
stage() { # name: the previous stage ends, this one starts
  local now
  now=$(date +%s)
  [ -z "${stage_name:-}" ] || stage_times="$stage_times $stage_name=$((now - stage_t0))s"
  stage_name=$1
  stage_t0=$now
  echo "== $1"
}
bash scripts/install-deps.sh
# PostgreSQL and HAProxy for the scale-out tests (tests/scale/: ctest store_pg and
# scale_replicas), which report themselves skipped without them.
bash scripts/install-deps.sh --scale
jobs=$(nproc)
# No test may hang the run: one without a TIMEOUT of its own is stopped (and failed) after
# 15 minutes; the slowest take ~1 minute under ASan.
# One test more than there are cores: many suites spend part of their time waiting (a server's
# answer, a deadline, a child process), and a fresh clone has no cost data to order them by.
ctest_args=(--output-on-failure --timeout 900 -j"$((jobs + 1))")
# The 32 MB `mini` golden set is not copied into the project; use it when it is beside us.
if [ -z "${KRONOS_GOLDEN_MINI_DIR:-}" ] && [ -d ../shared/golden/mini ]; then
  KRONOS_GOLDEN_MINI_DIR="$(cd ../shared/golden/mini && pwd)"
  export KRONOS_GOLDEN_MINI_DIR
fi

# The web page: Chromium for its browser test, its npm packages (lightweight-charts, and
# playwright-core to drive the browser) and web/dist, which `kronos serve` serves at /. Before
# configuring, since tests/CMakeLists.txt registers web_e2e only when both are there.
# Commit messages after the base commit (older subjects are history).
stage "Commit messages"
bash scripts/check_commits.sh

stage "Web page"
bash scripts/install-deps.sh --web
(cd web && npm ci --no-audit --no-fund --loglevel=error >/dev/null && npm run build --silent >/dev/null)

stage "Release build"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$jobs" >/dev/null
ctest --test-dir build/release "${ctest_args[@]}"
# On an AVX-512 machine the engine would never run its AVX2 kernels end to end (the kernel
# suites test every variant directly, the golden and engine suites only the best one): rerun
# those on the AVX2 row too (~30 s).
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  stage "Release, KRONOS_ISA=avx2 (golden, engine and kernel suites)"
  KRONOS_ISA=avx2 ctest --test-dir build/release "${ctest_args[@]}" -R 'golden|engine|kernels'
fi

stage "ASan + UBSan build"
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKRONOS_SANITIZE=ON >/dev/null
cmake --build build/asan -j"$jobs" >/dev/null
# Every suite except those labelled release-only (JavaScript, layouts in Chromium, the tree's
# own checks, the deployment files, the install, the GEMM bench's command line: see
# tests/CMakeLists.txt), which the Release build ran.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan "${ctest_args[@]}" -LE release-only

# Every optional part left out (the core library, the store's and the HTTP client's stand-ins,
# the CLI saying "built without ..."): it configures, builds and passes its tests. The suites
# that run the same core code as the Release build and take long are left to that build.
stage "Minimal build (-DKRONOS_BUILD_SERVER=OFF ... : the core only)"
cmake -S . -B build/minimal -DCMAKE_BUILD_TYPE=Release -DKRONOS_BUILD_SERVER=OFF \
  -DKRONOS_WITH_PG=OFF -DKRONOS_WITH_CURL=OFF -DKRONOS_WITH_SQLITE=OFF \
  -DKRONOS_BUILD_ANALYST=OFF -DKRONOS_BUILD_EVAL=OFF >/dev/null
cmake --build build/minimal -j"$jobs" >/dev/null
ldd build/minimal/lib/libkronos.so | grep -E 'sqlite|libpq|curl|microhttpd' &&
  { echo "the core library links a dependency of the libraries on top"; exit 1; }
ctest --test-dir build/minimal "${ctest_args[@]}" -LE release-only \
  -E '^(test_engine_context|test_engine_kv_dtype|test_engine_admission|test_engine_alloc|test_base_threadpool|test_kernels)$'

# The threads' suites again under ThreadSanitizer (~4 min): the thread pool, the engine context
# (submit, cancel, synchronous batches failing mid-submission), admission, and the server with
# an f32 drift shadow attached while it serves, and the backtest jobs (worker threads, event
# streams, cancel, a server freed under a running job). Any report fails the run.
stage "ThreadSanitizer (thread pool, engine context and admission, server) beside Python"
tsan_tests=(test_base_threadpool test_engine_context test_engine_admission test_server_e2e
            test_server_analyst test_server_backtest)
cmake -S . -B build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKRONOS_TSAN=ON >/dev/null
cmake --build build/tsan -j"$jobs" --target kronos_cli "${tsan_tests[@]}" >/dev/null
# The Python package meanwhile (its suite mostly waits on forecasts and child processes):
# Debian's python3 (not a pyenv one on PATH); the venv sees the system's numpy, pandas,
# pytest and distributed, and pip installs offline with no build isolation, bundling
# build/release/lib/libkronos.so.0 into the package. From build/, so the tests import the
# installed package, not the source folder.
bash scripts/install-deps.sh --python
rm -rf build/pyvenv
/usr/bin/python3 -m venv --system-site-packages --without-pip build/pyvenv
build/pyvenv/bin/python -m pip install -q --no-build-isolation --no-index ./python
(cd build && KRONOS_CLI="$PWD/release/kronos" pyvenv/bin/python -m pytest -q ../python/tests \
  >pytest.log 2>&1) &
python_pid=$!
tsan_rc=0
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ctest --test-dir build/tsan "${ctest_args[@]}" -R "^($(IFS='|'; echo "${tsan_tests[*]}"))\$" ||
  tsan_rc=$?
python_rc=0
wait "$python_pid" || python_rc=$?
echo "-- Python package (pytest):"
tail -15 build/pytest.log
[ "$tsan_rc" -eq 0 ] || { echo "ThreadSanitizer suites FAILED"; exit 1; }
[ "$python_rc" -eq 0 ] || { echo "Python suite FAILED (build/pytest.log)"; exit 1; }

secs=${FUZZ_SECONDS:-30}
if [ "$secs" -gt 0 ]; then
  stage "libFuzzer (${secs}s per target, two at a time)"
  CC=clang cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKRONOS_FUZZ=ON >/dev/null
  targets=()
  for src in fuzz/fuzz_*.c; do targets+=("$(basename "$src" .c)"); done
  cmake --build build/fuzz -j"$jobs" --target "${targets[@]}" >/dev/null
  # Each fuzzer is one thread: two run at once.
  fuzz_one() {
    local name=$1 secs=$2 corpus=build/fuzz/corpus/$1
    mkdir -p "$corpus"
    if ! build/fuzz/fuzz/"$name" -max_total_time="$secs" -print_final_stats=1 \
         -artifact_prefix=build/fuzz/"$name"- "$corpus" "fuzz/corpus/$name" >build/fuzz/"$name".log 2>&1; then
      tail -40 build/fuzz/"$name".log
      echo "$name: FAILED (crash input kept under build/fuzz/)"
      return 1
    fi
    echo "$name: $(grep -o 'stat::number_of_executed_units: [0-9]*' build/fuzz/"$name".log) in ${secs}s, no crash"
  }
  export -f fuzz_one
  for src in fuzz/fuzz_*.c; do basename "$src" .c; done |
    xargs -P "$jobs" -I{} bash -c 'fuzz_one "$1" "$2"' _ {} "$secs"
fi
stage done
echo "stages:$stage_times; total $(( $(date +%s) - t_start ))s"
