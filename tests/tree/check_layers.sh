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
  allow["series"] = "base series"
  allow["store"] = "base series store"
  allow["model"] = "base kernels model"
  allow["hub"] = "base net model hub"
  allow["train"] = "base kernels model train"
  allow["engine"] = "base kernels series model engine"
  allow["analyst"] = "base net kernels series model engine store analyst"
  allow["server"] = "base net kernels series model hub engine store analyst eval common server"
  allow["eval"] = "base kernels series model engine analyst eval"
  allow["common"] = "base kernels series model engine store analyst common"
  allow["finetune"] = "base net kernels series model train hub engine store common finetune"
  allow["cli"] = "cli common"
  # The core library (libkronos) is these layers; its files may include only the core'"'"'s public
  # headers, not those of the libraries on top (kronos/store.h, analyst.h, server.h, ...).
  core = " base kernels model series train engine "
  core_public = " kronos.h kronos/status.h kronos/util.h kronos/series.h kronos/hub_cache.h kronos/forecast_json.h kronos/paths.h kronos/train.h "
  bad = 0
}
{
  split($1, p, "/"); layer = p[2]; file = substr($1, 1, length($1) - 10); sub(/:#include $/, "", file)
  files[file] = 1
  if (!(layer in allow)) { printf "src/%s: a layer this check does not know (add it)\n", layer; bad = 1; next }
  inc = $2
  if (inc ~ /^kronos/) {
    if (index(core, " " layer " ") && !index(core_public, " " inc " ")) {
      printf "%s includes \"%s\": the core library (%s) may not depend on the libraries on top\n", file, inc, layer; bad = 1
    }
    next
  }
  if (index(inc, "/") == 0) next
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
