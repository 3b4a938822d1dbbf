#!/usr/bin/env bash
# The commit messages of the project: a subject of at most 72 characters, and for a commit that
# is not trivial (more than 10 lines changed) a blank line, then a body that says why.
#   check_commits.sh                  every commit after the base (below) up to HEAD
#   check_commits.sh --message FILE   one message about to be committed (the commit-msg hook
#                                     of scripts/install-hooks.sh; the size rule is then the
#                                     staged change's)
# The base is the commit after which the rule holds (older subjects are history):
# KRONOS_COMMIT_BASE, default 10867f5. A commit is held to the rule when the rule is in its
# tree (scripts/check_commits.sh) or it leads to the commit that added it; commits made on a
# branch that did not have it yet, merged later, are history too. A merge's subject is the integrator's summary of a branch whose commits are
# checked themselves: only its second line must be blank. Exit 1 naming every message that
# breaks the rule.
set -euo pipefail
cd "$(dirname "$0")/.."
max_subject=72
trivial_lines=10

# check NAME CHANGED_LINES [merge] < message
check() {
  local name=$1 changed=$2 merge=${3:-} subject second rest bad=0
  subject=$(sed -n 1p)
  second=$(sed -n 2p <<<"$MSG")
  rest=$(sed -n '3,$p' <<<"$MSG" | grep -v '^#' | grep -c '[^[:space:]]' || true)
  if [ -z "$merge" ] && [ "${#subject}" -gt "$max_subject" ]; then
    echo "$name: subject of ${#subject} characters (at most $max_subject): $subject"
    bad=1
  fi
  if [ -z "${subject// /}" ]; then
    echo "$name: empty subject"
    bad=1
  fi
  if [ -n "$second" ] && [[ "$second" != \#* ]]; then
    echo "$name: the subject's second line must be blank (then the body)"
    bad=1
  fi
  if [ "$changed" -gt "$trivial_lines" ] && [ "$rest" -eq 0 ]; then
    echo "$name: $changed lines changed and no body: say why after a blank line"
    bad=1
  fi
  return $bad
}

if [ "${1:-}" = "--message" ]; then
  MSG=$(grep -v '^#' "$2" || true)
  changed=$(git diff --cached --numstat | awk '{ s += $1 + $2 } END { print s + 0 }')
  check "this commit" "$changed" <<<"$MSG" || {
    echo "(the message is kept in $2; amend it with git commit -e -F $2)"
    exit 1
  }
  exit 0
fi

base=${KRONOS_COMMIT_BASE:-10867f5}
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "check_commits: base $base is not in this clone's history (set KRONOS_COMMIT_BASE)"
  exit 1
fi
fails=0 n=0 before=0
added=$(git log --diff-filter=A --format=%H "$base..HEAD" -- scripts/check_commits.sh | tail -1)
while read -r sha; do
  if ! git cat-file -e "$sha:scripts/check_commits.sh" 2>/dev/null &&
    ! { [ -n "$added" ] && git merge-base --is-ancestor "$sha" "$added"; }; then
    before=$((before + 1)) # made without the rule in its tree
    continue
  fi
  n=$((n + 1))
  MSG=$(git log -1 --format=%B "$sha")
  # A merge's size is its branch's, whose commits are checked themselves.
  if [ "$(git rev-list --parents -n 1 "$sha" | wc -w)" -gt 2 ]; then
    check "$(git log -1 --format=%h "$sha")" 0 merge <<<"$MSG" || fails=$((fails + 1))
    continue
  fi
  changed=$(git show --numstat --format= "$sha" | awk '{ s += $1 + $2 } END { print s + 0 }')
  check "$(git log -1 --format=%h "$sha")" "$changed" <<<"$MSG" || fails=$((fails + 1))
done < <(git rev-list --reverse "$base..HEAD")
if [ "$fails" -gt 0 ]; then
  echo "check_commits: $fails of $n commits after $base break the message rule (scripts/check_commits.sh)"
  exit 1
fi
echo "check_commits: $n commits after $base, every subject <= $max_subject characters, a body where the change is not trivial ($before made before the rule, not checked)"
