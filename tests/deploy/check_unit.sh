#!/usr/bin/env bash
# Verifies the shipped systemd unit (deploy/kronos-serve.service) with `systemd-analyze verify`
# as it would run after the /usr/local install: in a scratch root that holds the built binary
# at /usr/local/bin/kronos and this system's own units (sysinit.target, ...). Any message fails
# the test: verify only warns about an unknown key or a bad value, and exits 0 on those.
# Skips (77) when systemd-analyze is not installed (Debian package systemd).
set -euo pipefail
unit=$1
binary=$2
command -v systemd-analyze >/dev/null ||
  { echo "SKIPPED: systemd-analyze not installed (apt-get install systemd)"; exit 77; }
[ -d /usr/lib/systemd/system ] || { echo "SKIPPED: no /usr/lib/systemd/system"; exit 77; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/local/bin" "$root/etc/systemd/system" "$root/usr/lib/systemd"
cp "$binary" "$root/usr/local/bin/kronos"
# ExecReload's kill, where the unit names it.
mkdir -p "$root/bin"
cp "$(type -P kill)" "$root/bin/kill"
cp -r /usr/lib/systemd/system "$root/usr/lib/systemd/"
cp "$unit" "$root/etc/systemd/system/kronos-serve.service"
if ! out=$(systemd-analyze verify --root="$root" kronos-serve.service 2>&1) || [ -n "$out" ]; then
  echo "$out"
  echo "kronos-serve.service: systemd-analyze verify failed"
  exit 1
fi
# The sandbox stays tight: systemd's own exposure score (0 safe .. 10 exposed) at most 4.0
# (1.8 with the system-call filter; 3.2 before it; 6.7 before the hardening of 2026-12-03).
if ! out=$(systemd-analyze security --offline=yes --root="$root" --threshold=40 \
             kronos-serve.service 2>&1); then
  echo "$out" | tail -25
  echo "kronos-serve.service: exposure above 4.0 (systemd-analyze security)"
  exit 1
fi
# The flags of ExecStart are the binary's: every one it passes is a flag `kronos serve` knows.
# (--help read once: grep -q stopping at its match cut the pipe while kronos still wrote, and
# pipefail took the SIGPIPE for an unknown flag.)
help=$("$binary" serve --help)
for flag in $(grep -v '^#' "$unit" | grep -o -- ' --[a-z-]*' | sort -u); do
  echo "$help" | grep -q -- "  $flag " ||
    { echo "kronos-serve.service passes $flag, which kronos serve does not know"; exit 1; }
done
# What the install and deploy/README.md promise: a dedicated user, the store in the service's
# own writable state directory, the installed binary and model.
need() {
  grep -Eq -e "$1" "$unit" || { echo "kronos-serve.service: expected a line matching '$1'"; exit 1; }
}
need '^User=kronos$'
need '^StateDirectory=kronos$'
need '^ExecStart=/usr/local/bin/kronos serve '
need '--db /var/lib/kronos/kronos\.db'
need '--model /usr/local/share/kronos/models/kronos-demo'
need '^LogsDirectory=kronos$'
# A config error (exit 2) is not retried: restarting cannot fix it.
need '^RestartPreventExitStatus=2$'
# kronos serve speaks the notify protocol (tests/test_server_notify.c): readiness and pings.
need '^Type=notify$'
need '^WatchdogSec=[0-9]+'
# Confined to an ordinary service's system calls, no writable+executable memory; ctest
# syscall_filter runs kronos serve under exactly this filter.
need '^SystemCallFilter=@system-service$'
need '^MemoryDenyWriteExecute=yes$'
# SIGHUP reloads the models of the --config file (without --config it would drain and stop
# the service): a reload sends SIGHUP, and ExecStart passes --config.
need '^ExecReload=/bin/kill -HUP \$MAINPID$'
if ! grep -Eq '^ExecStart=.* --config ' "$unit"; then
  echo "kronos-serve.service: ExecReload= sends SIGHUP, which drains without --config"
  exit 1
fi
# ExecStartPre checks exactly what ExecStart runs.
joined=$(sed -e ':a' -e '/\\$/N; s/\\\n *//; ta' "$unit")
pre=$(echo "$joined" | sed -n 's/^ExecStartPre=//p')
start=$(echo "$joined" | sed -n 's/^ExecStart=//p')
[ "$pre" = "$start --check-config" ] ||
  { echo "kronos-serve.service: ExecStartPre is not ExecStart + --check-config:"; \
    echo "  $pre"; echo "  $start"; exit 1; }
# The stop timeout covers the longest drain of the shipped config: its drain delay, its
# request timeout (what a drain waits for accepted requests) and the 1 s to send the answers.
config=$(dirname "$unit")/kronos-serve.json
json_num() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" "$config" | head -1; }
drain=$(awk -v t="$(json_num request_timeout_s)" -v d="$(json_num drain_delay_s)" \
          'BEGIN { print (t == "" ? 120 : t) + (d == "" ? 0 : d) + 1 }')
stop=$(sed -n 's/^TimeoutStopSec=//p' "$unit")
awk -v s="$stop" -v d="$drain" 'BEGIN { exit !(s + 0 > d + 0) }' ||
  { echo "kronos-serve.service: TimeoutStopSec=$stop does not cover a drain of $drain s"; exit 1; }
if grep -Eq '^(ReadOnlyPaths|InaccessiblePaths)=.*/var/lib/kronos' "$unit"; then
  echo "kronos-serve.service: /var/lib/kronos must stay writable (the candle store)"
  exit 1
fi
echo "kronos-serve.service: verified by systemd-analyze, every flag known, paths as installed"
