# Sourced by the deploy tests that exercise a running `kronos serve` (check_metrics.sh,
# check_syscall_filter.sh): start it on a free port with an SQLite store, and drive the
# requests an operator's server sees — an ingest, an analysis, a forecast, a malformed body and
# a client that gives up — failing (exit 1) on any wrong answer. Needs $build, $source, $tmp.

serve_pid=
serve_url=

# serve_start [WRAPPER...]: `kronos serve` (through WRAPPER when given) on a free port, the store
# $serve_db (default an SQLite file in $tmp), with --config $serve_config when set; returns once
# it listens.
serve_start() {
  # Emptied here, not by the child's redirection: the loop below would otherwise race the
  # child's open and read the previous server's port from the old log.
  : >"$tmp/serve.log"
  "$@" "$build/kronos" serve --port 0 --db "${serve_db:-$tmp/k.db}" ${serve_config:+--config "$serve_config"} \
    >"$tmp/serve.log" 2>&1 &
  serve_pid=$!
  local port=
  for _ in $(seq 1 300); do
    port=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$tmp/serve.log")
    [ -n "$port" ] && break
    kill -0 "$serve_pid" 2>/dev/null || { cat "$tmp/serve.log"; echo "kronos serve exited"; exit 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$tmp/serve.log"; echo "kronos serve did not start listening"; exit 1; }
  serve_url=http://127.0.0.1:$port
}

# serve_stop: SIGTERM (a drain) and its exit status, which must be 0.
serve_stop() {
  [ -n "$serve_pid" ] || return 0
  kill -TERM "$serve_pid" 2>/dev/null || true
  local rc=0
  wait "$serve_pid" || rc=$?
  serve_pid=
  [ "$rc" = 0 ] || { tail -20 "$tmp/serve.log"; echo "kronos serve exited with $rc after SIGTERM"; exit 1; }
}

serve_code() { curl -s -m 120 -o /dev/null -w '%{http_code}' "$@"; }

# serve_expect CODE WHAT CURL-ARGS...: the request answers CODE, else exit 1 showing the answer
# and the server's log. A 503 (busy, the store or the engine under a loaded machine: what a
# client retries after Retry-After) is retried a few times first: the scenario is about what the
# server may do, not how fast a shared CI machine lets it.
serve_expect() {
  local want=$1 what=$2 code= try
  shift 2
  for try in 1 2 3 4 5; do
    code=$(curl -s -m 120 -o "$tmp/answer" -w '%{http_code}' "$@") || true
    [ "$code" = 503 ] && [ "$want" != 503 ] || break
    sleep 2
  done
  [ "$code" = "$want" ] && return 0
  echo "$what: HTTP $code (want $want) after $try tries: $(head -c 400 "$tmp/answer" 2>/dev/null)"
  tail -20 "$tmp/serve.log"
  exit 1
}

# serve_scenario: the requests, each answer checked.
serve_scenario() {
  serve_expect 200 ingest -X POST "$serve_url/v1/candles/AAPL?interval=1d" \
    -H 'Content-Type: text/csv' --data-binary "@$source/data/AAPL_1d.csv"
  serve_expect 200 analysis -X POST "$serve_url/v1/analyze" -H 'Content-Type: application/json' \
    -d '{"symbol":"AAPL","horizon":5,"paths":4}'
  # The candles as CSV text in the JSON (the header and the last 100 rows).
  local candles
  candles=$( (head -1 "$source/data/AAPL_1d.csv"; tail -100 "$source/data/AAPL_1d.csv") |
    python3 -c 'import json, sys; print(json.dumps(sys.stdin.read()))')
  serve_expect 200 forecast -X POST "$serve_url/v1/forecast" -H 'Content-Type: application/json' \
    -d "{\"candles\": $candles, \"pred_len\": 3, \"paths\": 2}"
  serve_expect 400 "malformed JSON" -X POST "$serve_url/v1/analyze" \
    -H 'Content-Type: application/json' -d '{'
  # A client that gives up: the request is cancelled or finishes, either way it is counted.
  curl -s -m 0.05 -X POST "$serve_url/v1/analyze" -H 'Content-Type: application/json' \
    -d '{"symbol":"AAPL","horizon":30,"paths":64}' >/dev/null 2>&1 || true
  serve_expect 200 /ready "$serve_url/ready"
}
