#!/usr/bin/env bash
# Shell completion and the man page (issue 42, finding 9), both written by `kronos` from the
# option tables its --help prints: bash completes commands, flags and flag values (a choice's
# words, files); every flag every command's --help lists is offered for that command; the zsh
# script parses (when zsh is here); the man page renders without groff warnings and names
# every command and flag.
#   check_completion.sh KRONOS_BINARY
set -euo pipefail
kronos=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$kronos" completion bash >"$tmp/kronos.bash"
"$kronos" completion zsh >"$tmp/_kronos"
"$kronos" man >"$tmp/kronos.1"

# shellcheck disable=SC1091
source "$tmp/kronos.bash"
complete_words() { # complete_words WORD... : what bash offers for the last word
  COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _kronos; echo "${COMPREPLY[*]}"
}
expect() { # expect "GOT" WANTED...
  local got=$1; shift
  for w in "$@"; do
    [[ " $got " == *" $w "* ]] || { echo "completion offers '$got', not '$w'"; exit 1; }
  done
}
expect "$(complete_words kronos fore)" forecast
expect "$(complete_words kronos ca)" calendars
expect "$(complete_words kronos forecast --pred)" --pred-len
expect "$(complete_words kronos forecast --format '')" csv json
expect "$(complete_words kronos forecast --ohlc '')" consistent raw
expect "$(complete_words kronos ingest --int)" --interval
expect "$(complete_words kronos analyze --as)" --as-of
expect "$(complete_words kronos serve --calendar)" --calendar-dir
mkdir "$tmp/d" && touch "$tmp/d/prices.csv"
expect "$(complete_words kronos forecast --input "$tmp/d/pr")" "$tmp/d/prices.csv"

# Every flag of every command's --help is offered for that command.
cmds=$("$kronos" --help | sed -n '/^commands:/,/^$/p' | awk '/^  [a-z]/{print $1}')
for c in $cmds; do
  flags=$("$kronos" "$c" --help | { grep -oE '^ +(-h, )?--[a-z0-9][a-z0-9-]*' || true; } | sed 's/.*--/--/' | sort -u)
  offered=$(complete_words kronos "$c" --)
  for f in $flags; do
    [[ " $offered " == *" $f "* ]] || { echo "kronos $c: --help lists $f, completion does not offer it"; exit 1; }
    grep -q -- "$(printf '%s' "${f#--}" | sed 's/-/\\\\-/g')" "$tmp/kronos.1" ||
      { echo "kronos $c: $f is not in the man page"; exit 1; }
  done
  grep -q "^\.SS \"kronos $c\"" "$tmp/kronos.1" || { echo "the man page has no section for $c"; exit 1; }
done

if command -v zsh >/dev/null; then zsh -n "$tmp/_kronos"; fi
warnings=$(groff -man -ww -z "$tmp/kronos.1" 2>&1 || true)
[ -z "$warnings" ] || { echo "groff warns about the man page:"; echo "$warnings"; exit 1; }
echo "completion and man page: every command and flag of --help"
