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
cp -r /usr/lib/systemd/system "$root/usr/lib/systemd/"
cp "$unit" "$root/etc/systemd/system/kronos-serve.service"
if ! out=$(systemd-analyze verify --root="$root" kronos-serve.service 2>&1) || [ -n "$out" ]; then
  echo "$out"
  echo "kronos-serve.service: systemd-analyze verify failed"
  exit 1
fi
# The flags of ExecStart are the binary's: every one it passes is a flag `kronos serve` knows.
for flag in $(grep -v '^#' "$unit" | grep -o -- ' --[a-z-]*' | sort -u); do
  "$binary" serve --help | grep -q -- "  $flag " ||
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
if grep -Eq '^(ReadOnlyPaths|InaccessiblePaths)=.*/var/lib/kronos' "$unit"; then
  echo "kronos-serve.service: /var/lib/kronos must stay writable (the candle store)"
  exit 1
fi
echo "kronos-serve.service: verified by systemd-analyze, every flag known, paths as installed"
