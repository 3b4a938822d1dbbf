#!/usr/bin/env bash
# scripts/check_commits.sh refuses what the rule refuses and takes what it takes, on messages of
# its --message mode (the commit-msg hook): a 73-character subject, a body without the blank
# line before it; a 72-character subject with a body, and a one-line message of a trivial
# change. Then the commits of this checkout after the base, when the base is in its history.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check=$src/scripts/check_commits.sh
fails=0
expect() { # want (0 or 1), message text
  printf '%s\n' "$2" >"$tmp/msg"
  local got=0
  (cd "$src" && bash "$check" --message "$tmp/msg") >"$tmp/out" 2>&1 || got=1
  if [ "$got" -ne "$1" ]; then
    echo "expected $( [ "$1" -eq 0 ] && echo accepted || echo refused): $(head -1 "$tmp/msg")"
    cat "$tmp/out"
    fails=$((fails + 1))
  fi
}
long=$(printf 'x%.0s' $(seq 73))
ok72=$(printf 'y%.0s' $(seq 72))
expect 1 "$long"
expect 1 "$(printf 'engine: a subject\nthe body on the second line')"
expect 0 "$(printf '%s\n\nwhy it changed' "$ok72")"
expect 0 "docs: a typo"
expect 0 "$(printf 'docs: a typo\n\n# a comment git strips')"
[ "$fails" -eq 0 ] || exit 1
echo "check_commits.sh --message: refuses a 73-character subject and a body without a blank line"
if git -C "$src" rev-parse -q --verify "${KRONOS_COMMIT_BASE:-10867f5}^{commit}" >/dev/null; then
  bash "$check"
else
  echo "the base commit is not in this clone's history: the branch's commits are not checked here"
fi
