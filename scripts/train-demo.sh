#!/usr/bin/env bash
# Trains the bundled demo model (models/kronos-demo) from scratch on the bundled public candles
# with `kronos finetune` and the config models/kronos-demo/train.yaml, then compares it with
# the bundled checkpoint on the held-out windows (scripts/demo_eval.py): validation loss, the
# mean first-step return bias at lookbacks 256/400/512 and CRPS against naive forecasts.
#
#   scripts/train-demo.sh             train into build/train-demo, compare, report
#   scripts/train-demo.sh --install   then copy the new pair into models/kronos-demo
#
# Needs the Release build (build/release) and, for the comparison, Debian's python3 with numpy
# and pandas (scripts/install-deps.sh --python). Deterministic for the config's seed and threads
# (kronos.threads: 2). Wall time depends on the machine's load: the model card records it.
set -euo pipefail
cd "$(dirname "$0")/.."
install=0
for a in "$@"; do
  case "$a" in
    --install) install=1 ;;
    *) echo "train-demo.sh: unknown option '$a' (--install)" >&2; exit 2 ;;
  esac
done
kronos=build/release/kronos
[ -x "$kronos" ] || { echo "train-demo.sh: build first: cmake --build build/release" >&2; exit 1; }
out=build/train-demo
mkdir -p "$out"
start=$(date +%s)
/usr/bin/time -v -o "$out/time.txt" "$kronos" finetune --config models/kronos-demo/train.yaml \
  --out "$out" --force
end=$(date +%s)
echo "training took $((end - start)) s of wall time" | tee "$out/wall.txt"
grep -E "Elapsed|User time|System time|Maximum resident" "$out/time.txt" | tee -a "$out/wall.txt"

# The comparison with the bundled checkpoint, on the same held-out windows.
py=/usr/bin/python3
export KRONOS_LIBRARY="$PWD/build/release/lib/libkronos.so.0" PYTHONPATH="$PWD/python"
"$py" scripts/demo_eval.py --kronos "$kronos" --config models/kronos-demo/train.yaml \
  --old models/kronos-demo --new "$out" --json "$out/compare.json" | tee "$out/compare.md"

if [ "$install" = 1 ]; then
  # Written beside the old file and renamed over it: a process that maps the bundled model
  # keeps its pages (README "The real Kronos checkpoints").
  for part in tokenizer predictor; do
    src="$out/${part/predictor/basemodel}/best_model"
    cp "$src/model.safetensors" "models/kronos-demo/$part/model.safetensors.new"
    mv "models/kronos-demo/$part/model.safetensors.new" "models/kronos-demo/$part/model.safetensors"
  done
  "$py" -c '
import json
p = "models/kronos-demo/predictor/config.json"
cfg = json.load(open(p))
cfg["source"] = ("kronos-demo: a 1.3 M-parameter Kronos-architecture checkpoint trained from "
                 "scratch with kronos finetune on 12 public series (scripts/train-demo.sh, "
                 "models/kronos-demo/README.md); not the official Kronos weights")
with open(p, "w") as f:
    json.dump(cfg, f, indent=2)
    f.write("\n")
'
  echo "installed the new pair into models/kronos-demo (update its README's figures)"
fi
