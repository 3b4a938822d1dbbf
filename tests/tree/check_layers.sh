#!/usr/bin/env bash
# Fails when a file of a layer includes a header of a layer above it (the architecture of
# docs/internals.md "How it is built"): each src/<layer>/ may include its own headers, the public ones
# (include/) and those of the layers listed for it below — dependencies point down only.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -H '^#include "' src/*/*.[ch] | awk -F'"' '
BEGIN {
  allow["base"] = "base"
  allow["net"] = "base net"
  allow["kernels"] = "base kernels"
  allow["market"] = "base market"
  allow["model"] = "base kernels model"
  allow["train"] = "base kernels model train"
  allow["series"] = "base kernels model series"
  allow["hub"] = "base net hub"
  allow["engine"] = "base kernels market model engine"
  allow["analyst"] = "base net kernels market model engine analyst"
  allow["server"] = "base net kernels market model hub engine analyst server"
  allow["eval"] = "base kernels market model engine analyst eval"
  allow["finetune"] = "base net kernels market model series train hub engine analyst server finetune"
  allow["cli"] = "cli"
  bad = 0
}
{
  split($1, p, "/"); layer = p[2]; file = substr($1, 1, length($1) - 10); sub(/:#include $/, "", file)
  files[file] = 1
  if (!(layer in allow)) { printf "src/%s: a layer this check does not know (add it)\n", layer; bad = 1; next }
  inc = $2
  if (inc ~ /^kronos/ || index(inc, "/") == 0) next
  dep = substr(inc, 1, index(inc, "/") - 1)
  if (index(" " allow[layer] " ", " " dep " ") == 0) {
    printf "%s includes \"%s\": %s may not depend on %s\n", file, inc, layer, dep; bad = 1
  }
}
END {
  n = 0; for (f in files) n++
  if (!bad) printf "%d files: every include points down the layers\n", n
  exit bad
}'
