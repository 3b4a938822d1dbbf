#!/usr/bin/env bash
# Installs the project's git hooks into this checkout (a worktree's too): commit-msg runs
# scripts/check_commits.sh --message on every message, so a subject over 72 characters, or a
# change of more than 10 lines without a body, is refused before it is committed (CI checks
# the same: scripts/test.sh). Run once per clone: bash scripts/install-hooks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
hooks=$(git rev-parse --git-path hooks)
mkdir -p "$hooks"
cat >"$hooks/commit-msg" <<'HOOK'
#!/usr/bin/env bash
# Installed by scripts/install-hooks.sh: the commit-message rule (scripts/check_commits.sh).
check="$(git rev-parse --show-toplevel)/scripts/check_commits.sh"
[ -f "$check" ] || exit 0 # a branch from before the rule: nothing to run
exec bash "$check" --message "$1"
HOOK
chmod +x "$hooks/commit-msg"
echo "installed $hooks/commit-msg (scripts/check_commits.sh --message)"
