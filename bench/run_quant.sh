#!/usr/bin/env bash
# Quantisation: the speed table with one column per weight format, and the fidelity report.
#   speed     Kronos-small random weights (gen-random), exact window, lookback 400, pred_len 120:
#             S1, S8, and NW (lookback 392, no window overflow) S1 — per format: median
#             wall time, ~GFLOP/s, peak RSS, weight bytes, time to quantise at load. Each job
#             is its own process, so RSS is its own.
#   kv        S8 with --kv-dtype f32 / bf16 / int8 (f32 weights): time and KV-cache MB.
#   fidelity  kronos eval-quant for every format (+ int8 and q4 calibrated, + KV bf16/int8)
#             on the bundled demo model and on the random small model, over the bundled
#             data/ files: next-token agreement, KL, forecast error, KS, ROC-AUC, Spearman.
#   gptq      q4 and int8 by round-to-nearest, AWQ / SmoothQuant and GPTQ (kronos quantize
#             --method), calibrated on MSFT_1d + XSHG_5min and evaluated with eval-quant on the
#             held-out AAPL_1d + BTCUSDT_1h, on the demo and the random small model, each run
#             through the deploy/quant-gate.json gates.
# Writes bench/results/quant-speed-<date>.md, bench/results/quant-fidelity-<date>.md and
# bench/results/quant-gptq-<date>.md (+ JSON of every eval-quant run in a folder of that name).
# Usage: bash bench/run_quant.sh [build dir, default build/release]
#        PARTS="speed", "fidelity" or "gptq" runs one part (default: all three);
#        MODELS="demo" or "small" limits the gptq part to one model (the other's JSON is reused).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
if [ ! -x "$build/kronos" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" >/dev/null
fi
kronos=$build/kronos
stamp=$(date +%Y-%m-%d)
tmp=${TMPDIR:-/tmp}
small=$tmp/kronos-bench-small
[ -f "$small/predictor/model.safetensors" ] || "$kronos" gen-random --shape small --out "$small" >/dev/null
mkdir -p bench/results "bench/results/quant-fidelity-$stamp"
formats="f32 bf16 int8 fp8 q4"
parts=${PARTS:-speed fidelity gptq}

# ---- speed: one JSON per (format, job)
if [[ " $parts " == *" speed "* ]]; then
jdir=$tmp/kronos-quant-json
rm -rf "$jdir" && mkdir -p "$jdir"
for f in $formats; do
  "$kronos" bench --model "$small" --quant "$f" --paths 1,8 --repeat 3 --json > "$jdir/S-$f.json"
  "$kronos" bench --model "$small" --quant "$f" --lookback 392 --paths 1 --repeat 3 --json > "$jdir/NW-$f.json"
done
for kv in f32 bf16 int8; do
  "$kronos" bench --model "$small" --kv-dtype "$kv" --paths 8 --repeat 3 --json > "$jdir/KV-$kv.json"
done
python3 - "$jdir" "$formats" > "bench/results/quant-speed-$stamp.md" <<'EOF'
import json, sys, subprocess
d, formats = sys.argv[1], sys.argv[2].split()
S = {f: json.load(open(f"{d}/S-{f}.json")) for f in formats}
NW = {f: json.load(open(f"{d}/NW-{f}.json")) for f in formats}
cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
print("# Quantised weights: speed (Kronos-small shape, random weights)\n")
print(f"Machine: {cpu}, isa {S['f32']['isa']}. Command: `bash bench/run_quant.sh`. Exact window, lookback 400,")
print("pred_len 120 (NW: lookback 392, no overflow); wall time = median of 3 forecast calls, model loaded.")
print("Each cell: seconds (speed-up vs f32). ~GFLOP/s counts model FLOPs per token.\n")
def res(j, paths):
    return [r for r in j["results"] if r["paths"] == paths and r["mode"] == "kv-cache"][0]
print("| job | " + " | ".join(formats) + " |")
print("|---|" + "---:|" * len(formats))
for label, src, paths in [("S1", S, 1), ("S8", S, 8), ("NW S1", NW, 1)]:
    base = res(src["f32"], paths)["seconds"]
    cells = []
    for f in formats:
        s = res(src[f], paths)["seconds"]
        cells.append(f"{s:.3f} ({base / s:.2f}x)")
    print(f"| {label} wall s | " + " | ".join(cells) + " |")
for label, key, paths, fmt in [("S1 ~GFLOP/s", "gflops", 1, "{:.0f}"), ("S8 ~GFLOP/s", "gflops", 8, "{:.0f}"),
                               ("S1 peak RSS MB", "peak_rss_mb", 1, "{:.0f}"), ("S8 peak RSS MB", "peak_rss_mb", 8, "{:.0f}")]:
    print(f"| {label} | " + " | ".join(fmt.format(res(S[f], paths)[key]) for f in formats) + " |")
print("| weight MB | " + " | ".join(f"{S[f]['weight_bytes'] / 1048576:.1f}" for f in formats) + " |")
bf = S["bf16"]["weight_bytes"]
print("| weight bytes vs bf16 | " + " | ".join(f"{bf / S[f]['weight_bytes']:.2f}x smaller" if S[f]['weight_bytes'] < bf else f"{S[f]['weight_bytes'] / bf:.2f}x larger" if S[f]['weight_bytes'] > bf else "1.00x" for f in formats) + " |")
print("| quantise at load, s | " + " | ".join(f"{S[f]['quantize_seconds']:.2f}" for f in formats) + " |")
print("| model load (incl. quantise), s | " + " | ".join(f"{S[f]['model_load_seconds']:.2f}" for f in formats) + " |")
print("\n## KV-cache precision (f32 weights, S8)\n")
print("| kv dtype | wall s | KV MB | peak RSS MB |\n|---|---:|---:|---:|")
for kv in ["f32", "bf16", "int8"]:
    r = res(json.load(open(f"{d}/KV-{kv}.json")), 8)
    print(f"| {kv} | {r['seconds']:.3f} | {r['kv_cache_mb']:.1f} | {r['peak_rss_mb']:.0f} |")
EOF
fi

# ---- fidelity
out=bench/results/quant-fidelity-$stamp.md
if [[ " $parts " == *" fidelity "* ]]; then
calib="--calib data/MSFT_1d.csv --calib data/XSHG_5min_600977.csv"
{
  echo "# Quantisation fidelity — $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Command: \`bash bench/run_quant.sh\` (\`kronos eval-quant\`, defaults: every bundled data/ file, 16"
  echo "windows each of 256 rows, horizon 24, 32 paths, seed 1; the small model: 4 windows, 16 paths). Teacher-forced next-token metrics run"
  echo "both predictors on the f32 tokenizer's tokens; forecast metrics compare full forecasts."
  echo "Calibrated runs (smoothquant / awq) calibrate on MSFT_1d and XSHG_5min windows, which overlap"
  echo "the evaluation files: a stated caveat, the uncalibrated rows have none."
  echo
  for model in demo small; do
    # The small model's runs are ~10x the demo's cost: fewer windows and paths keep the whole
    # script within minutes.
    if [ "$model" = demo ]; then m=models/kronos-demo; size=""; else m=$small; size="--windows 4 --paths 16"; fi
    echo "## Model: $model ($m)"
    echo
    for run in "bf16" "int8" "int8 $calib" "fp8" "q4" "q4 $calib" "f32 --kv-dtype bf16" "f32 --kv-dtype int8"; do
      set -- $run
      fmt=$1; shift
      name=$model-$fmt
      if [ $# -gt 0 ]; then name=$name-$(echo "$*" | tr -c 'a-z0-9' '-' | cut -c1-24); fi
      "$kronos" eval-quant --model "$m" --quant "$fmt" "$@" $size --json "bench/results/quant-fidelity-$stamp/$name.json"
    done
  done
} > "$out"
fi
# ---- gptq: methods side by side, held-out evaluation, gates
if [[ " $parts " == *" gptq "* ]]; then
gdir=bench/results/quant-gptq-$stamp
mkdir -p "$gdir"
calib="--calib data/MSFT_1d.csv --calib data/XSHG_5min_600977.csv"
held="--data data/AAPL_1d.csv --data data/BTCUSDT_1h.csv"
for model in ${MODELS:-demo small}; do
  if [ "$model" = demo ]; then m=models/kronos-demo; size="--windows 32"; else m=$small; size="--windows 8 --paths 16"; fi
  "$kronos" eval-quant --model "$m" --quant f32 $held $size --json "$gdir/$model-f32.json" > /dev/null
  for run in "q4 rtn" "q4 awq" "q4 gptq" "int8 rtn" "int8 smoothquant" "int8 gptq"; do
    set -- $run
    qdir=$tmp/kronos-gptq-$model-$1-$2
    c=$calib; [ "$2" = rtn ] && c=""
    "$kronos" quantize --model "$m" --quant "$1" --method "$2" $c --out "$qdir" 2> "$gdir/$model-$1-$2.quantize.log"
    rc=0
    "$kronos" eval-quant --model "$m" --quant-model "$qdir" $held $size --gate deploy/quant-gate.json \
      --json "$gdir/$model-$1-$2.json" > "$gdir/$model-$1-$2.md" 2> "$gdir/$model-$1-$2.gate.log" || rc=$?
    # 3 = a gate failed: a result to report, not an error of the script.
    [ "$rc" = 0 ] || [ "$rc" = 3 ] || { cat "$gdir/$model-$1-$2.gate.log"; exit 1; }
  done
done
python3 - "$gdir" > "bench/results/quant-gptq-$stamp.md" <<'EOF'
import json, os, re, sys
d = sys.argv[1]
cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
print("# GPTQ beside round-to-nearest and AWQ / SmoothQuant\n")
print(f"Machine: {cpu} (AVX-512), 2 cores. Command: `PARTS=gptq bash bench/run_quant.sh`, which runs per")
print("model and method `kronos quantize --model M --quant F --method X [--calib data/MSFT_1d.csv --calib")
print("data/XSHG_5min_600977.csv] --out Q` and `kronos eval-quant --model M --quant-model Q --data")
print("data/AAPL_1d.csv --data data/BTCUSDT_1h.csv --gate deploy/quant-gate.json` (demo: 32 windows per")
print("file, 32 paths; random small: 8 windows per file, 16 paths; lookback 256, horizon 24, seed 1).")
print("Calibration (16 windows of 400 rows from MSFT_1d and XSHG_5min) and evaluation files do not")
print("overlap. Teacher-forced metrics run both predictors on the f32 tokenizer's tokens. Risk KS: the")
print("distance between the CDFs of P(up) over windows that went up and those that went down (f32 / quant).")
print("Gate: deploy/quant-gate.json; every eval-quant run is a gate run (exit 3 = a gate failed): the")
print("failed gates are listed under each table, each run's report with its gate table is in")
print(f"{d}/<model>-<format>-<method>.md and its stderr in ….gate.log.")
print(f"'quantise s' is wall time of `kronos quantize` (calibration forecasts included) on a shared machine:")
print(f"load average {os.getloadavg()[0]:.1f} when the run ended (other jobs), so compare within a table only.\n")
def fm(v, f):
    return "n/a" if v is None else f.format(v)
for model in ["demo", "small"]:
    f32 = json.load(open(f"{d}/{model}-f32.json"))
    rc = f32["risk_control"]
    print(f"## Model: {model}\n")
    print(f"{rc['windows_up']} windows went up, {rc['windows_down']} down. f32: risk KS {fm(rc['ks_f32'], '{:.4f}')}, "
          f"ROC-AUC {fm(rc['roc_auc_f32'], '{:.4f}')}.\n")
    print("| format | method | quantise s | weights MB | s1 top-1 | s1 top-1 decisive | s1 KL | s2 KL | KS p (returns) | MAPE vs f32 | Spearman | risk KS f32 / quant | ROC-AUC f32 / quant | gate |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
    fails = []
    for fmt in ["q4", "int8"]:
        for meth in (["rtn", "awq", "gptq"] if fmt == "q4" else ["rtn", "smoothquant", "gptq"]):
            j = json.load(open(f"{d}/{model}-{fmt}-{meth}.json"))
            qs = re.search(r"windows, ([0-9.]+) s;", open(f"{d}/{model}-{fmt}-{meth}.quantize.log").read())
            nt, fc, rk, g = j["next_token"], j["forecast"], j["risk_control"], j["gates"]
            dec = nt["s1_top1_agreement_decisive"]
            print(f"| {fmt} | {j['method']} | {qs.group(1) if qs else '?'} | {j['weight_bytes'] / 1048576:.1f} | "
                  f"{100 * nt['s1_top1_agreement']:.2f}% | {fm(None if dec is None else 100 * dec, '{:.2f}%')} | "
                  f"{nt['s1_mean_kl']:.5f} | {nt['s2_mean_kl']:.5f} | {fm(fc['ks_path_returns']['p_value'], '{:.3f}')} | "
                  f"{fm(fc['mape_vs_f32_percent'], '{:.3f}%')} | {fm(fc['spearman_expected_return_windows'], '{:.3f}')} | "
                  f"{fm(rk['ks_f32'], '{:.3f}')} / {fm(rk['ks_quant'], '{:.3f}')} | "
                  f"{fm(rk['roc_auc_f32'], '{:.3f}')} / {fm(rk['roc_auc_quant'], '{:.3f}')} | "
                  f"{'pass' if g['passed'] else 'FAIL (%d)' % g['failed']} |")
            for line in open(f"{d}/{model}-{fmt}-{meth}.gate.log"):
                if line.startswith("gate "):
                    fails.append(f"- {fmt} {meth}: {line.strip()}")
    print()
    if fails:
        print("Failed gates:\n")
        print("\n".join(fails))
        print()
EOF
fi

echo "wrote bench/results/quant-*-$stamp.md ($parts)"
