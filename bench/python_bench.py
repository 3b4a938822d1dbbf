"""Python package benchmark: the official-API call vs the CLI on the Kronos-small shape, and
200 series through Dask (2 workers) vs one process. Writes bench/results/python-<date>.md.

    cmake --build build/release -j2
    PYTHONPATH=python /usr/bin/python3 bench/python_bench.py [--repeat 3] [--skip-dask]

Ratios within one run are what to read; wall times on a shared machine are noisy.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CLI = os.environ.get("KRONOS_CLI", os.path.join(ROOT, "build", "release", "kronos"))
CSV = os.path.join(ROOT, "data", "XSHG_5min_600977.csv")
DEMO = os.path.join(ROOT, "models", "kronos-demo")
COLS = ["open", "high", "low", "close", "volume", "amount"]


def small_model():
    d = os.path.join(tempfile.gettempdir(), "kronos-bench-small-seed1")
    if not os.path.isfile(os.path.join(d, "predictor", "model.safetensors")):
        subprocess.run([CLI, "gen-random", "--shape", "small", "--seed", "1", "--out", d],
                       check=True, stdout=subprocess.DEVNULL)
    return d


def official_vs_cli(repeat, lines):
    from kronos import Kronos, KronosPredictor, KronosTokenizer
    mdir = small_model()
    df = pd.read_csv(CSV)
    df["timestamps"] = pd.to_datetime(df["timestamps"])
    lookback, pred_len = 400, 120
    x_df = df.loc[:lookback - 1, COLS]
    x_ts = df.loc[:lookback - 1, "timestamps"]
    y_ts = df.loc[lookback:lookback + pred_len - 1, "timestamps"]
    work = tempfile.mkdtemp(prefix="kronos-pybench-")
    inp, fut, out = (os.path.join(work, f) for f in ("in.csv", "future.csv", "out.json"))
    df.loc[:lookback - 1].to_csv(inp, index=False, date_format="%Y-%m-%d %H:%M:%S")
    pd.DataFrame({"timestamps": y_ts}).to_csv(fut, index=False,
                                              date_format="%Y-%m-%d %H:%M:%S")
    t0 = time.perf_counter()
    pred = KronosPredictor(Kronos.from_pretrained(os.path.join(mdir, "predictor")),
                           KronosTokenizer.from_pretrained(os.path.join(mdir, "tokenizer")))
    load_s = time.perf_counter() - t0
    lines += ["## Official-API call vs the CLI (Kronos-small shape, random weights)", "",
              f"Model: `kronos gen-random --shape small --seed 1 --out {mdir}`; input: the first "
              f"{lookback} rows of `data/XSHG_5min_600977.csv`, pred_len {pred_len}, future "
              "stamps = the following rows, seed 0, all CPUs. Python: "
              "`predictor.predict(df=x_df, x_timestamp=x_ts, y_timestamp=y_ts, pred_len=120, "
              "sample_count=P)` on a loaded predictor (load + context: "
              f"{load_s * 1000:.0f} ms, once). CLI: `kronos forecast --model DIR/predictor "
              "--tokenizer DIR/tokenizer --input in.csv --future-timestamps future.csv "
              "--pred-len 120 --paths P --format json --output out.json`, a whole process "
              "each time. Engine = the call's own `seconds_total` (kr_forecast_stats). "
              f"Median of {repeat}.", "",
              "| paths | Python call s | its engine s | binding overhead | CLI process s | "
              "CLI engine s | Python call / CLI process | same numbers |",
              "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for paths in (1, 8):
        py, py_eng, cli, cli_eng = [], [], [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = pred.predict(df=x_df, x_timestamp=x_ts, y_timestamp=y_ts, pred_len=pred_len,
                             sample_count=paths, return_paths=True)
            py.append(time.perf_counter() - t0)
            py_eng.append(r.stats["seconds_total"])
            t0 = time.perf_counter()
            subprocess.run([CLI, "forecast", "--model", os.path.join(mdir, "predictor"),
                            "--tokenizer", os.path.join(mdir, "tokenizer"), "--input", inp,
                            "--future-timestamps", fut, "--pred-len", str(pred_len), "--paths",
                            str(paths), "--format", "json", "--output", out], check=True)
            cli.append(time.perf_counter() - t0)
            with open(out) as f:
                j = json.load(f)
            cli_eng.append(j["stats"]["seconds_total"])
        cli_mean = np.array([[row[c] for c in COLS] for row in j["mean"]]).astype(np.float32)
        same = np.array_equal(cli_mean, r.mean.to_numpy())
        m = statistics.median
        lines.append(f"| {paths} | {m(py):.3f} | {m(py_eng):.3f} | {m(py) / m(py_eng):.3f}x | "
                     f"{m(cli):.3f} | {m(cli_eng):.3f} | {m(py) / m(cli):.3f} | "
                     f"{'yes' if same else 'NO'} |")
        print(lines[-1], flush=True)
    pred.close()
    lines.append("")


def dask_vs_one_process(lines):
    import distributed
    import kronos.dask as kd
    from kronos import Kronos, KronosPredictor, KronosTokenizer
    df = pd.read_csv(CSV)
    df["timestamps"] = pd.to_datetime(df["timestamps"])
    n, lookback, pred_len = 200, 256, 24
    step = (len(df) - lookback - pred_len) // n

    def windows(shift):
        starts = [i * step + shift for i in range(n)]
        return ([df.iloc[s:s + lookback][COLS] for s in starts],
                [df.iloc[s:s + lookback]["timestamps"] for s in starts],
                [df.iloc[s + lookback:s + lookback + pred_len]["timestamps"] for s in starts])

    dfs, xs, ys = windows(0)
    # Other windows (one row later) for the warm run, so no prefix-cache entry of the first
    # run is reused.
    dfs2, xs2, ys2 = windows(1)
    one = {}
    for threads in (1, 2):
        pred = KronosPredictor(Kronos.from_pretrained(DEMO),
                               KronosTokenizer.from_pretrained(DEMO), threads=threads)
        t0 = time.perf_counter()
        ref = pred.predict_batch(dfs, xs, ys, pred_len)
        one[threads] = time.perf_counter() - t0
        pred.close()
    t0 = time.perf_counter()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        start = time.perf_counter() - t0
        t0 = time.perf_counter()
        got = kd.forecast_many(client, dfs, xs, ys, pred_len, model=DEMO, tokenizer=DEMO,
                               threads=1, batch_size=25)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        kd.forecast_many(client, dfs2, xs2, ys2, pred_len, model=DEMO, tokenizer=DEMO,
                         threads=1, batch_size=25)
        second = time.perf_counter() - t0
    same = all(a.equals(b) for a, b in zip(ref, got))
    lines += ["## 200 series: Dask (2 worker processes) vs one process", "",
              f"Demo model, {n} windows of {lookback} rows of `data/XSHG_5min_600977.csv`, "
              f"pred_len {pred_len}, 1 path, seed 0. One process: `predict_batch` on a "
              "predictor with threads=1 and with threads=2 (the machine's 2 CPUs). Dask: "
              "`kronos.dask.forecast_many(client, ..., "
              "threads=1, batch_size=25)` on `LocalCluster(n_workers=2, threads_per_worker=1)`; "
              "the first call includes the workers loading the model (the plugin), the second "
              "(windows one row later, so nothing comes from the prefix cache) finds it loaded. "
              "Each one-process run uses a fresh predictor (empty prefix cache).", "",
              "| run | wall s | vs one process (threads=2) | equal to predict_batch |",
              "|---|---:|---:|---|",
              f"| one process, predict_batch, threads=1 | {one[1]:.3f} | {one[1] / one[2]:.2f} | |",
              f"| one process, predict_batch, threads=2 | {one[2]:.3f} | 1.00 | |",
              f"| Dask, first call (model load on 2 workers) | {first:.3f} | "
              f"{first / one[2]:.2f} | "
              f"{'yes, bit for bit' if same else 'NO'} |",
              f"| Dask, second call (warm workers) | {second:.3f} | {second / one[2]:.2f} | |",
              f"| (cluster start, not counted) | {start:.3f} | | |", ""]
    print("\n".join(lines[-7:]), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-dask", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import kronos
    now = datetime.datetime.now(datetime.timezone.utc)
    load = os.getloadavg()
    lines = [f"# Python package — {now:%Y-%m-%dT%H:%MZ}", "",
             f"Machine: {os.cpu_count()} CPUs; load average at start {load[0]:.1f} (the machine "
             "is shared: other jobs ran meanwhile). Library: "
             f"`{kronos.library_path}` ({kronos.engine_version}); Python {sys.version.split()[0]}, "
             f"numpy {np.__version__}, pandas {pd.__version__}.", "",
             f"Command: `PYTHONPATH=python /usr/bin/python3 bench/python_bench.py --repeat "
             f"{a.repeat}`", ""]
    official_vs_cli(a.repeat, lines)
    if not a.skip_dask:
        dask_vs_one_process(lines)
    lines.append(f"Load average at the end: {os.getloadavg()[0]:.1f}.")
    out = a.out or os.path.join(ROOT, "bench", "results", f"python-{now:%Y-%m-%d}.md")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
