#!/usr/bin/env bash
# `kronos serve` confined as deploy/kronos-serve.service confines it, without systemd as PID 1:
# the unit's SystemCallFilter= groups expanded by `systemd-analyze syscall-filter` into an allow
# list, and MemoryDenyWriteExecute=, applied by tests/deploy/seccomp_run (libseccomp) — stricter
# than the unit, which answers a call outside the list with EPERM: here it kills the process, so
# no call outside the list may be made at all, not even one whose failure kronos would survive.
# Under it: the unit's ExecStartPre (--check-config), then the server through an ingest, an
# analysis, a forecast, a malformed body, a vanished client, an analysis with a narrative from
# a stand-in LLM, and a drain (exit 0). First, that
# the filter bites: a call outside the list kills, a writable+executable mapping is refused.
# With KRONOS_TEST_PG_URL / KRONOS_TEST_PG_TCP_URL set (ctest syscall_filter_pg) the server runs
# it again on those PostgreSQL stores. Skips (77) without systemd-analyze or the helper
# (libseccomp-dev).
# Usage: check_syscall_filter.sh BUILD_DIR SOURCE_DIR SECCOMP_RUN
set -euo pipefail
build=$1
source=$2
helper=$3
unit=$source/deploy/kronos-serve.service
command -v systemd-analyze >/dev/null ||
  { echo "SKIPPED: systemd-analyze not installed (apt-get install systemd)"; exit 77; }
[ -x "$helper" ] || { echo "SKIPPED: $helper not built (apt-get install libseccomp-dev)"; exit 77; }
# In a sanitizer build, LeakSanitizer's exit check stops the process's threads from a traced
# helper task (ptrace, outside any service filter), which the filter kills while the process
# waits for it: leaks are the ASan suite's to find, not this test's.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
tmp=$(mktemp -d)
# shellcheck source=tests/deploy/serve_scenario.sh
. "$source/tests/deploy/serve_scenario.sh"
trap 'serve_stop; rm -rf "$tmp"' EXIT

# The unit's filter: every SystemCallFilter= line (groups and names), groups expanded.
expand() {
  case "$1" in
    @*) systemd-analyze syscall-filter "$1" | sed -n 's/^    \([@a-z0-9_-]*\)$/\1/p' |
          while read -r n; do expand "$n" </dev/null; done ;;
    *) echo "$1" ;;
  esac
}
filters=$(sed -n 's/^SystemCallFilter=//p' "$unit")
[ -n "$filters" ] || { echo "kronos-serve.service has no SystemCallFilter="; exit 1; }
case "$filters" in *'~'*) echo "a deny list (~) is not what this test models"; exit 1 ;; esac
for f in $filters; do expand "$f"; done | sort -u >"$tmp/allow"
wx=()
grep -q '^MemoryDenyWriteExecute=yes$' "$unit" && wx=(--deny-write-execute)
confine=("$helper" --allow "$tmp/allow" --kill "${wx[@]}" --)
echo "filter: $filters ($(wc -l <"$tmp/allow") system calls)${wx:+, MemoryDenyWriteExecute}"

# The filter bites.
"${confine[@]}" python3 -c 'print("ok")' >/dev/null || { echo "python3 alone dies under the filter"; exit 1; }
rc=0
("${confine[@]}" python3 -c 'import ctypes; ctypes.CDLL(None).reboot(0)'; exit $?) 2>/dev/null || rc=$?
[ "$rc" = 159 ] || { echo "reboot(2) was not killed by the filter (exit $rc)"; exit 1; }
if [ ${#wx[@]} -gt 0 ]; then
  out=$("${confine[@]}" python3 -c 'import mmap
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    print("mapped")
except PermissionError:
    print("refused")')
  [ "$out" = refused ] || { echo "a writable and executable mapping was not refused ($out)"; exit 1; }
fi

# A stand-in for the LLM behind the narratives (Ollama's /api/generate, one answer), so the
# server's HTTP client runs under the filter too.
python3 -c '
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"response": "Stand-in prose.", "done": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()' >"$tmp/llm.port" &
llm_pid=$!
trap 'kill $llm_pid 2>/dev/null; serve_stop; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do [ -s "$tmp/llm.port" ] && break; sleep 0.1; done
[ -s "$tmp/llm.port" ] || { echo "the stand-in LLM did not start"; exit 1; }
echo "{\"llm_url\": \"http://127.0.0.1:$(cat "$tmp/llm.port")\", \"llm_model\": \"stand-in\"}" >"$tmp/serve.json"

# ExecStartPre, then the server.
"${confine[@]}" "$build/kronos" serve --db "$tmp/k.db" --config "$tmp/serve.json" --check-config \
  >"$tmp/check.log" 2>&1 ||
  { cat "$tmp/check.log"; echo "kronos serve --check-config failed under the filter"; exit 1; }
serve_config=$tmp/serve.json
serve_start "${confine[@]}"
serve_scenario
curl -s -m 120 -X POST "$serve_url/v1/analyze" -H 'Content-Type: application/json' \
  -d '{"symbol":"AAPL","horizon":5,"paths":4,"narrative":true}' >"$tmp/narrated.json"
grep -q 'Stand-in prose' "$tmp/narrated.json" ||
  { head -c 600 "$tmp/narrated.json"; echo; echo "no narrative from the stand-in LLM"; exit 1; }
serve_stop
serve_config=
echo "kronos serve (SQLite store, an LLM narrative) ran the scenario and drained under the unit's system-call filter"
# A PostgreSQL store (ctest syscall_filter_pg: tests/scale/pgcluster.py run --tcp sets these),
# over its Unix socket and over TCP.
for serve_db in ${KRONOS_TEST_PG_URL:-} ${KRONOS_TEST_PG_TCP_URL:-}; do
  "${confine[@]}" "$build/kronos" serve --db "$serve_db" --check-config >"$tmp/check.log" 2>&1 ||
    { cat "$tmp/check.log"; echo "--check-config on PostgreSQL failed under the filter"; exit 1; }
  serve_start "${confine[@]}"
  serve_scenario
  serve_stop
  case "$serve_db" in *127.0.0.1*) how=TCP ;; *) how="a Unix socket" ;; esac
  echo "kronos serve (PostgreSQL over $how) ran the scenario and drained under the filter"
done
