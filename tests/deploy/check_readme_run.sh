#!/usr/bin/env bash
# Follows deploy/README.md's "Run" block as far as a machine without systemd as PID 1 allows:
# the config check it tells operators to run is the unit's ExecStartPre word for word, and it
# passes on an install made as the README says (cmake --install; the config and a 0640 API key
# file under /etc/kronos; the store under /var/lib/kronos), with those three roots moved into a
# scratch directory.
#   check_readme_run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
readme=$src/deploy/README.md
unit=$src/deploy/kronos-serve.service
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
join() { sed -e ':a' -e '/\\$/N; s/\\\n *//; ta'; }
cmd=$(sed -n '/^## Run/,/^## /p' "$readme" | join | grep -E '^sudo -u kronos .*--check-config' |
      sed -e 's/^sudo -u kronos //' -e 's/ *#.*//')
[ -n "$cmd" ] || { echo "deploy/README.md: no 'sudo -u kronos ... --check-config' in Run"; exit 1; }
pre=$(join <"$unit" | sed -n 's/^ExecStartPre=//p')
[ "$cmd" = "$pre" ] ||
  { echo "deploy/README.md checks another command than the unit's ExecStartPre:";
    echo "  $cmd"; echo "  $pre"; exit 1; }
# Every deploy/ file the block names exists.
for f in $(sed -n '/^## Run/,/^## /p' "$readme" | grep -oE '(^|[ `(])deploy/[a-z_.-]+' | sed 's/^[ `(]//' | sort -u); do
  [ -e "$src/$f" ] || { echo "deploy/README.md names $f, which does not exist"; exit 1; }
done

prefix=$tmp/usr/local
cmake --install "$build" --prefix "$prefix" >/dev/null
# The page is installed only when web/dist was built (the README's first step).
mkdir -p "$prefix/share/kronos/web" "$tmp/etc/kronos" "$tmp/var/lib/kronos"
install -m 0640 /dev/null "$tmp/etc/kronos/api-key"
head -c 32 /dev/urandom | base64 >"$tmp/etc/kronos/api-key"
sed "s#/etc/kronos#$tmp/etc/kronos#" "$src/deploy/kronos-serve.json" >"$tmp/etc/kronos/kronos-serve.json"
run=$(echo "$cmd" | sed -e "s#/usr/local#$prefix#g" -e "s#/etc/kronos#$tmp/etc/kronos#g" \
                       -e "s#/var/lib/kronos#$tmp/var/lib/kronos#g" -e 's/--port [0-9]*//')
# The shipped port may be taken on this machine (a warning, exit 0); everything else must pass.
if ! out=$(env -u KRONOS_DB $run 2>&1); then
  echo "$out"; echo "deploy/README.md's config check fails on an install made as it says"; exit 1
fi
echo "$out" | grep -q 'config OK' || { echo "$out"; echo "no 'config OK'"; exit 1; }
if echo "$out" | grep -q 'WARNING'; then echo "$out"; echo "a warning on the README's setup"; exit 1; fi
echo "deploy/README.md: its config check is the unit's ExecStartPre and passes as installed"
