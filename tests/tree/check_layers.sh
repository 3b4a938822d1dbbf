#!/usr/bin/env bash
# Fails when a file of a layer includes a header of a layer above it (the architecture of
# README "How it is built"): each src/<layer>/ may include its own headers, the public ones
# (include/) and those of the layers listed for it below — dependencies point down only.
set -euo pipefail
cd "$(dirname "$0")/../.."
declare -A allowed=(
  [base]="base"
  [net]="base net"
  [kernels]="base kernels"
  [market]="base market"
  [model]="base kernels model"
  [hub]="base net hub"
  [engine]="base kernels market model engine"
  [analyst]="base net kernels market model engine analyst"
  [server]="base net kernels market model hub engine analyst server"
  [cli]="base net kernels market model hub engine analyst server cli"
)
bad=0
checked=0
for dir in src/*/; do
  layer=$(basename "$dir")
  [ -n "${allowed[$layer]+x}" ] || { echo "src/$layer: a layer this check does not know (add it)"; bad=1; continue; }
  for f in "$dir"*.[ch]; do
    [ -e "$f" ] || continue
    checked=$((checked + 1))
    while IFS= read -r inc; do
      dep=${inc%%/*}
      [ "$dep" = "$inc" ] && continue              # no folder: a public or system header
      case " ${allowed[$layer]} " in *" $dep "*) ;; *)
        echo "$f includes \"$inc\": $layer may not depend on $dep"; bad=1 ;;
      esac
    done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f" | grep -v '^kronos')
  done
done
[ $bad -eq 0 ] && echo "$checked files: every include points down the layers"
exit $bad
