"""Backtest speed: `kronos backtest` (static batches through the public batch API) against the
same forecasts made one `predict` call at a time through the Python package, on the
Kronos-small shape (random weights). Writes bench/results/backtest.md.

    cmake --build build/release -j2
    PYTHONPATH=python /usr/bin/python3 bench/backtest_bench.py [--origins 1000] [--subset 100]

The CLI runs the whole backtest (origins x 32 paths x 20 steps; forecasting, scoring, the
bootstrap, the report); the Python side makes the last `subset` of those forecasts, each a
`predictor.predict(...)` of the rows up to its origin, one after the other, and the CLI runs
that subset too, in the same run, for the ratio. The official `predict_batch` is not run here
(its code is not on this machine): its cost is taken from the anchors measured on this machine
class (shared/anchors/reference_bench.md) and extrapolated, and the report says so.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

import pandas as pd

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CLI = os.environ.get("KRONOS_CLI", os.path.join(ROOT, "build", "release", "kronos"))
DATA = os.path.join(ROOT, "data", "AAPL_1d.csv")
HORIZON, PATHS, EVERY, LOOKBACK = 20, 32, 2, 492

# The official predictor on this machine class (shared/anchors/reference_bench.md, OpenBLAS,
# torch 1.13, 2 threads, the row-loop SDPA shim): predict_batch of 8 series, 1 path, lookback
# 400, 120 steps recomputing the window at each: 226.0 s, i.e. per (series x path) row and step:
ANCHOR_ROW_STEP_S = 226.0 / (8 * 120)


def small_model():
    d = os.path.join(tempfile.gettempdir(), "kronos-bench-small-seed1")
    if not os.path.isfile(os.path.join(d, "predictor", "model.safetensors")):
        subprocess.run([CLI, "gen-random", "--shape", "small", "--seed", "1", "--out", d],
                       check=True, stdout=subprocess.DEVNULL)
    return d


def load_avg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def cli_backtest(model, origins, out, extra=()):
    cmd = [CLI, "backtest", "--input", f"AAPL={DATA}", "--model", model, "--horizon",
           str(HORIZON), "--paths", str(PATHS), "--every", str(EVERY), "--min-history",
           str(LOOKBACK), "--max-origins", str(origins), "--format", "json", "--out", out,
           *extra]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    with open(out) as f:
        report = json.load(f)
    return wall, report, " ".join(cmd[1:]).replace(model, "$SMALL").replace(DATA, "data/AAPL_1d.csv")


def python_one_at_a_time(model, rows):
    from kronos import Kronos, KronosPredictor, KronosTokenizer
    df = pd.read_csv(DATA, float_precision="round_trip")
    df["timestamps"] = pd.to_datetime(df["timestamps"])
    pred = KronosPredictor(Kronos.from_pretrained(os.path.join(model, "predictor")),
                           KronosTokenizer.from_pretrained(os.path.join(model, "tokenizer")))
    t0 = time.perf_counter()
    for i in rows:
        x = df.iloc[i + 1 - LOOKBACK:i + 1]
        pred.predict(df=x[["open", "high", "low", "close", "volume", "amount"]],
                     x_timestamp=x["timestamps"], y_timestamp=None, pred_len=HORIZON,
                     sample_count=PATHS, return_paths=True)
    wall = time.perf_counter() - t0
    pred.close()
    return wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--origins", type=int, default=1000)
    ap.add_argument("--subset", type=int, default=100)
    ap.add_argument("--skip-full", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "backtest.md"))
    args = ap.parse_args()
    model = small_model()
    work = tempfile.mkdtemp(prefix="kronos-btbench-")
    lines = [f"# Backtest speed — {datetime.date.today()}", ""]
    loads = [load_avg()]

    sub_wall, sub, sub_cmd = cli_backtest(model, args.subset, os.path.join(work, "sub.json"))
    rows = []
    csv_path = os.path.join(work, "sub.csv")
    subprocess.run([CLI, "backtest", "--input", f"AAPL={DATA}", "--model", model, "--horizon",
                    str(HORIZON), "--paths", str(PATHS), "--every", str(EVERY),
                    "--min-history", str(LOOKBACK), "--max-origins", str(args.subset),
                    "--bootstrap", "0", "--format", "csv", "--out", csv_path], check=True,
                   capture_output=True)
    rows = list(pd.read_csv(csv_path)["row"])
    loads.append(load_avg())
    py_wall = python_one_at_a_time(model, rows)
    loads.append(load_avg())
    full = None
    if not args.skip_full:
        full = cli_backtest(model, args.origins, os.path.join(work, "full.json"))
        loads.append(load_avg())

    n_sub = sub["counts"]["forecasts"]
    sub_fc = sub["engine"]["seconds_forecast"]
    lines += [
        "`kronos backtest` against the same forecasts made one `predict` call at a time through "
        "the Python package, on the Kronos-small shape with random weights (`kronos gen-random "
        "--shape small --seed 1`), on `data/AAPL_1d.csv`: 20-step forecasts of 32 paths from "
        f"every {EVERY}nd bar, each from the {LOOKBACK} rows up to its origin "
        "(max_context 512 - horizon), in static batches of 1024 series x paths rows "
        "(32 forecasts a batch).", "",
        f"Machine: 2 vCPU shared with other jobs; load average at the start, between the parts "
        f"and at the end: {', '.join(loads)} (on 2 cores: the figures are what a loaded machine "
        "gave, ratios within one run are what to read).", "",
        "| run | forecasts | wall s | forecasting s | forecasts / s |",
        "|---|---:|---:|---:|---:|",
    ]
    if full:
        f_wall, f, f_cmd = full
        n = f["counts"]["forecasts"]
        lines.append(f"| `kronos backtest`, {n} origins (whole run: forecasts, scores, "
                     f"{f['parameters']['bootstrap']} bootstrap resamples, report) | {n} | "
                     f"{f_wall:.1f} | {f['engine']['seconds_forecast']:.1f} | "
                     f"{n / f['engine']['seconds_forecast']:.2f} |")
    lines.append(f"| `kronos backtest`, the last {n_sub} origins | {n_sub} | {sub_wall:.1f} | "
                 f"{sub_fc:.1f} | {n_sub / sub_fc:.2f} |")
    lines.append(f"| Python `predict` one call at a time, the same {len(rows)} forecasts | "
                 f"{len(rows)} | {py_wall:.1f} | {py_wall:.1f} | {len(rows) / py_wall:.2f} |")
    official = ANCHOR_ROW_STEP_S * PATHS * HORIZON
    lines += [
        "", f"**Speed-up of the backtest's batches over one `predict` call at a time: "
        f"{py_wall / sub_fc:.1f}x** (forecasting time, the same {n_sub} forecasts, one run).", "",
        "**The official `predict_batch`** (not run: the official code is not on this machine; "
        "Debian's python3-torch 1.13 is installed): the anchors' `predict_batch` of 8 series "
        "(1 path, lookback 400, 120 steps, OpenBLAS, the row-loop SDPA shim) took 226.0 s on "
        f"this machine class, {ANCHOR_ROW_STEP_S:.3f} s per series-path row and step, because "
        "it recomputes the whole window at every step. A backtest forecast of 32 paths x 20 "
        f"steps is then about {official:.0f} s, {1 / official:.4f} forecasts/s"]
    if full:
        n = full[1]["counts"]["forecasts"]
        rate = n / full[1]["engine"]["seconds_forecast"]
        lines[-1] += (f"; {n} of them about {official * n / 3600:.0f} h, against "
                      f"{full[1]['engine']['seconds_forecast'] / 60:.1f} min here: about "
                      f"{rate * official:.0f}x (an extrapolation from the anchors, not a run "
                      "side by side).")
    else:
        lines[-1] += "."
    lines += ["", "Commands:", "", "```sh",
              f"PYTHONPATH=python /usr/bin/python3 bench/backtest_bench.py --origins {args.origins} "
              f"--subset {args.subset}",
              f"# the CLI runs inside it: kronos {sub_cmd}"]
    if full:
        lines.append(f"# and: kronos {full[2]}")
    lines += ["```", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
