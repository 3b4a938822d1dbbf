#!/usr/bin/env bash
# N `kronos serve` replicas behind HAProxy (deploy/haproxy.cfg) on loopback, for a demo or a
# test of scaling out (docs/scaling.md):
#
#   scripts/replicas.sh start [-n N] [--port P] [--db FILE|URL] [--dir DIR] [--kronos BIN]
#                             [-- SERVE_FLAGS...]
#       replicas on 127.0.0.1:P+1 .. P+N (default N 3, P 8080), HAProxy on 127.0.0.1:P; prints
#       the URL. --db: the shared store (default DIR/kronos.db, an SQLite file, which replicas
#       on one machine can share; across machines use postgresql://...). DIR (default
#       ${TMPDIR:-/tmp}/kronos-replicas) keeps the generated haproxy.cfg, the logs and pids.
#       SERVE_FLAGS go to every replica (e.g. --model DIR --threads 1).
#   scripts/replicas.sh roll [--dir DIR]
#       rolling restart: one replica at a time gets SIGTERM (its /ready turns 503 while it still
#       serves, for --drain-delay; HAProxy takes it out), is started again with the same flags,
#       and is back in HAProxy before the next one goes.
#   scripts/replicas.sh revive --replica I [--dir DIR]
#       starts replica I again with its flags (after it crashed or was killed).
#   scripts/replicas.sh stop [--dir DIR]
#       stops HAProxy and the replicas (each drains) and removes nothing but the pid files.
#
# Pid files are trusted only while their process is still the one started (its command line:
# `serve --port P`, HAProxy with DIR/haproxy.cfg): a stale one is reported, never signalled.
# `start` refuses a DIR whose set is still running and ports already in use, and fails at once
# with a replica's log when it exits at start-up; `roll` starts a replica that died instead of
# failing on it.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:-}"
[ -n "$cmd" ] && shift
n=3
port=8080
db=""
dir="${TMPDIR:-/tmp}/kronos-replicas"
kronos=""
replica=""
serve_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --db) db="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --kronos) kronos="$2"; shift 2 ;;
    --replica) replica="$2"; shift 2 ;;
    --) shift; serve_flags=("$@"); break ;;
    *) echo "replicas.sh: unknown argument '$1' (see the top of $0)" >&2; exit 2 ;;
  esac
done

die() { echo "replicas.sh: $*" >&2; exit 1; }

# The HAProxy runtime API over its Unix socket (no socat needed).
hap() {
  python3 - "$dir/haproxy.sock" "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
out = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    out += b
sys.stdout.write(out.decode())
EOF
}

# HAProxy's view of replica i: UP, DOWN, MAINT, ... (with transitions like "UP 1/2").
hap_status() {
  hap "show stat" | awk -F, -v s="r$1" '$1 == "replicas" && $2 == s { print $18 }'
}

wait_until() { # seconds, description, command...
  local secs="$1" what="$2"; shift 2
  local t=0
  until "$@"; do
    sleep 0.1
    t=$((t + 1))
    [ "$t" -lt $((secs * 10)) ] || die "timed out after ${secs}s waiting for $what"
  done
}

ready() { curl -sf -o /dev/null "http://127.0.0.1:$1/ready"; }
hap_up() { [ "$(hap_status "$1")" = "UP" ]; }
hap_out() { case "$(hap_status "$1")" in UP*) return 1 ;; *) return 0 ;; esac; }
# A process that has exited but not been reaped (a zombie: in a container whose PID 1 does not
# reap orphans) counts as gone.
alive() {
  local st
  st="$(ps -o stat= -p "$1" 2>/dev/null)" || return 1
  [ -n "$st" ] && [ "${st#Z}" = "$st" ]
}
gone() { ! alive "$1"; }

# Whether pid is the process this set started: replica i ("serve --port P" with its port) or,
# for "haproxy", HAProxy with this directory's config. A pid file outlives its process (a
# crash, kill -9, a reboot) and its number may by then belong to anything else, which must
# never get this script's signals.
ours() { # pid, i|haproxy
  local args
  alive "$1" || return 1
  args="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null || ps -o args= -p "$1" 2>/dev/null)" ||
    return 1
  if [ "$2" = haproxy ]; then
    case "$args" in *haproxy*" -f $dir/haproxy.cfg"*) return 0 ;; esac
  else
    local p
    p="$(cat "$dir/r$2.port" 2>/dev/null)" || return 1
    case "$args" in *" serve --port $p "*) return 0 ;; esac
  fi
  return 1
}

# The pid in file f when that process is still the one it names (ours), else nothing.
live_pid() { # file, i|haproxy
  local pid
  [ -f "$1" ] || return 0
  pid="$(cat "$1" 2>/dev/null)"
  case "$pid" in '' | *[!0-9]*) return 0 ;; esac
  if ours "$pid" "$2"; then echo "$pid"; fi
}

# Whether something accepts TCP connections on 127.0.0.1:port.
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Waits until replica i answers /ready; fails at once, with its log, when it exits instead.
wait_replica() { # i
  local i="$1" t=0 pid
  pid="$(cat "$dir/r$i.pid")"
  until ready "$(cat "$dir/r$i.port")"; do
    if gone "$pid"; then
      echo "replicas.sh: replica $i exited before it was ready; its log ($dir/r$i.log) ends:" >&2
      tail -n 5 "$dir/r$i.log" >&2
      return 1
    fi
    sleep 0.1
    t=$((t + 1))
    [ "$t" -lt 1200 ] || { echo "replicas.sh: timed out after 120s waiting for replica $i (log: $dir/r$i.log)" >&2; return 1; }
  done
}

# Starts replica i from its saved command line (written by `start`).
start_replica() {
  local i="$1"
  mapfile -d '' args <"$dir/r$i.args"
  "${args[@]}" >>"$dir/r$i.log" 2>&1 &
  echo $! >"$dir/r$i.pid"
}

case "$cmd" in
start)
  command -v haproxy >/dev/null || die "haproxy is not installed (bash scripts/install-deps.sh --scale)"
  if [ -z "$kronos" ]; then
    if [ -x "$here/build/release/kronos" ]; then kronos="$here/build/release/kronos"
    else kronos="$(command -v kronos)" || die "no kronos binary: build it or pass --kronos BIN"; fi
  fi
  mkdir -p "$dir"
  # A set still running from this directory would be orphaned (its pid files overwritten).
  if [ -f "$dir/replicas" ]; then
    for i in $(seq 1 "$(cat "$dir/replicas")"); do
      [ -z "$(live_pid "$dir/r$i.pid" "$i")" ] ||
        die "replicas are running from $dir (replica $i, pid $(cat "$dir/r$i.pid")): stop them first ($0 stop --dir $dir)"
    done
    [ -z "$(live_pid "$dir/haproxy.pid" haproxy)" ] ||
      die "HAProxy is running from $dir: stop it first ($0 stop --dir $dir)"
  fi
  # Another server on a port would answer the readiness checks in a replica's place.
  for p in $(seq "$port" $((port + n))); do
    ! port_taken "$p" || die "port $p is in use (pick another --port; this set uses $port..$((port + n)))"
  done
  [ -n "$db" ] || db="$dir/kronos.db"
  # Behind the proxy every connection comes from 127.0.0.1: HAProxy's maxconn bounds them.
  echo '{"max_connections_per_ip": 0}' >"$dir/replica.json"
  # Written first, so `stop` finds whatever was started even when the start fails half way.
  echo "$n" >"$dir/replicas"
  servers=""
  for i in $(seq 1 "$n"); do
    p=$((port + i))
    printf '%s\0' "$kronos" serve --port "$p" --db "$db" --drain-delay 2 \
      --config "$dir/replica.json" "${serve_flags[@]}" >"$dir/r$i.args"
    : >"$dir/r$i.log"
    echo "$p" >"$dir/r$i.port"
    start_replica "$i"
    servers+="    server r$i 127.0.0.1:$p"$'\n'
  done
  for i in $(seq 1 "$n"); do
    wait_replica "$i" || die "replica $i did not start; stop the others: $0 stop --dir $dir"
  done
  # deploy/haproxy.cfg with this run's address, socket and servers.
  awk -v bind="    bind 127.0.0.1:$port" -v sock="    stats socket $dir/haproxy.sock mode 600 level admin" \
      -v servers="$servers" '
    /^    bind / { print bind; next }
    /^    stats socket / { print sock; next }
    /# BEGIN servers/ { print; printf "%s", servers; skip = 1; next }
    /# END servers/ { skip = 0 }
    !skip { print }' "$here/deploy/haproxy.cfg" >"$dir/haproxy.cfg"
  haproxy -c -q -f "$dir/haproxy.cfg" || die "haproxy refused $dir/haproxy.cfg"
  haproxy -db -f "$dir/haproxy.cfg" >"$dir/haproxy.log" 2>&1 &
  echo $! >"$dir/haproxy.pid"
  wait_until 30 "HAProxy's socket" test -S "$dir/haproxy.sock"
  for i in $(seq 1 "$n"); do wait_until 30 "HAProxy to see replica $i up" hap_up "$i"; done
  echo "kronos: http://127.0.0.1:$port ($n replicas on ports $((port + 1))..$((port + n)), store $(
    case "$db" in postgres*://*) echo "PostgreSQL" ;; *) echo "$db" ;; esac); logs in $dir)"
  echo "stop with: $0 stop --dir $dir"
  ;;
roll)
  [ -f "$dir/replicas" ] || die "nothing started in $dir"
  n="$(cat "$dir/replicas")"
  for i in $(seq 1 "$n"); do
    pid="$(live_pid "$dir/r$i.pid" "$i")"
    if [ -n "$pid" ]; then
      kill -TERM "$pid"
      wait_until 30 "HAProxy to take replica $i out" hap_out "$i"
      wait_until 180 "replica $i to drain and exit" gone "$pid"
    else
      echo "replica $i was not running; starting it"
    fi
    start_replica "$i"
    wait_replica "$i" || die "replica $i did not start again"
    wait_until 30 "HAProxy to put replica $i back" hap_up "$i"
    echo "replica $i restarted (pid $(cat "$dir/r$i.pid"))"
  done
  ;;
revive)
  [ -f "$dir/r$replica.args" ] || die "no replica '$replica' in $dir (--replica I)"
  if [ -n "$(live_pid "$dir/r$replica.pid" "$replica")" ]; then
    die "replica $replica is running (pid $(cat "$dir/r$replica.pid"))"
  fi
  start_replica "$replica"
  wait_replica "$replica" || die "replica $replica did not start"
  wait_until 30 "HAProxy to put replica $replica back" hap_up "$replica"
  echo "replica $replica started (pid $(cat "$dir/r$replica.pid"))"
  ;;
stop)
  [ -f "$dir/replicas" ] || die "nothing started in $dir"
  n="$(cat "$dir/replicas")"
  # Only processes this set started: a stale pid file (the process died, its number reused)
  # is reported, its number left alone.
  pids=()
  stopped=()
  for who in haproxy $(seq 1 "$n"); do
    f="$dir/r$who.pid"
    [ "$who" = haproxy ] && f="$dir/haproxy.pid"
    pid="$(live_pid "$f" "$who")"
    name="replica $who"
    [ "$who" = haproxy ] && name="HAProxy"
    if [ -n "$pid" ]; then
      pids+=("$pid")
      stopped+=("$name")
    elif [ -f "$f" ]; then
      echo "$name was not running (pid file $f was stale)"
    fi
  done
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    t=0
    while alive "$pid" && [ $t -lt 300 ]; do sleep 0.1; t=$((t + 1)); done
    if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  done
  rm -f "$dir"/*.pid "$dir/replicas"
  echo "stopped ${#stopped[@]} of $((n + 1)) processes (${stopped[*]:-none})"
  ;;
*)
  sed -n '2,26p' "$0" >&2
  exit 2
  ;;
esac
