#!/usr/bin/env bash
# One training step of the Kronos predictor: kronos's C core (build/release/bench/train_step)
# against PyTorch (bench/finetune_step.py: Debian's python3-torch on OpenBLAS, the model of
# bench/torch_kronos.py, checked against ../shared/golden/train first), same machine, same
# threads, interleaved round by round so both see the same load.
#
#   bash bench/finetune_vs_torch.sh [ROUNDS] [STEPS] > bench/results/finetune-vs-pytorch-DATE.md
#
# Shapes: Kronos-mini and Kronos-small (random weights, dropout 0 on both sides), windows of 513
# rows (512 positions learned), batch 32 and 8. Each process runs one shape: its peak resident
# memory is that shape's. Prints Markdown; the raw JSON lines go to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
steps=${2:-3}
threads=${THREADS:-2}
c_bench=build/release/bench/train_step
py=/usr/bin/python3
[ -x "$c_bench" ] || { echo "build first: cmake --build build/release" >&2; exit 1; }
blas=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/ {print $2}')
case "$blas" in
  *openblas*) ;;
  *) echo "libblas.so.3 is '$blas', not OpenBLAS: select it with update-alternatives" >&2; exit 1 ;;
esac
golden=$("$py" bench/torch_kronos.py)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
  for shape in mini small; do
    for batch in 32 8; do
      "$c_bench" --shape "$shape" --batch "$batch" --len 513 --threads "$threads" \
        --steps "$steps" --warmup 1 --json | tee -a "$tmp/c.jsonl" >&2
      "$py" bench/finetune_step.py --shape "$shape" --batch "$batch" --seq 512 \
        --threads "$threads" --steps "$steps" --warmup 1 --no-golden | tee -a "$tmp/torch.jsonl" >&2
    done
  done
done
"$py" - "$tmp/c.jsonl" "$tmp/torch.jsonl" "$rounds" "$steps" "$threads" "$blas" <<'EOF'
import json, statistics, sys
c = [json.loads(l) for l in open(sys.argv[1])]
t = [json.loads(l) for l in open(sys.argv[2])]
rounds, steps, threads, blas = sys.argv[3:7]
print(f"Rounds: {rounds} (interleaved), {steps} timed steps after 1 warm-up each, {threads} threads, "
      f"PyTorch {t[0]['torch']} on {blas}.\n")
print("| shape | batch x positions | kronos ms/step | PyTorch ms/step | speed-up (wall) | "
      "kronos CPU s/step | PyTorch CPU s/step | speed-up (CPU time) | kronos tokens/s | "
      "kronos % of FMA peak (wall / CPU time) | kronos peak RSS MB | PyTorch peak RSS MB |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for shape in ("mini", "small"):
    for batch in (32, 8):
        cs = [x for x in c if x["shape"] == shape and x["batch"] == batch]
        ts = [x for x in t if x["shape"] == shape and x["batch"] == batch]
        if not cs or not ts:
            continue
        med = statistics.median
        cm, tm = med(x["ms_per_step"] for x in cs), med(1000 * x["median_s"] for x in ts)
        cc, tc = med(x["cpu_s_per_step"] for x in cs), med(x["cpu_s_per_step"] for x in ts)
        pos = batch * 512
        print(f"| {shape} | {batch} x 512 | {cm:.0f} | {tm:.0f} | {tm / cm:.2f}x | {cc:.2f} | "
              f"{tc:.2f} | {tc / cc:.2f}x | {pos / cm * 1000:.0f} | "
              f"{100 * med(x['peak_fraction'] for x in cs):.0f} / "
              f"{100 * med(x['cpu_fraction'] for x in cs):.0f} | "
              f"{max(x['peak_rss_mb'] for x in cs):.0f} | {max(x['peak_rss_mb'] for x in ts):.0f} |")
EOF
echo
echo "PyTorch model against ../shared/golden/train (before timing):"
echo '```'
echo "$golden"
echo '```'
