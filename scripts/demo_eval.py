#!/usr/bin/env python3
"""Compares two Kronos checkpoint pairs on the held-out part of a fine-tune config's data:
the figures of models/kronos-demo/README.md (scripts/train-demo.sh runs it).

    demo_eval.py --kronos build/release/kronos --config models/kronos-demo/train.yaml \\
                 --old models/kronos-demo --new build/train-demo [--json out.json]

A pair is a directory holding tokenizer/ + predictor/, or a `kronos finetune` output (its
tokenizer/best_model + basemodel/best_model). For each pair:
  - validation loss: `kronos finetune --eval-only` on the config's held-out windows (the last
    val_ratio of each series), both stages, kronos's causal validation and the official
    model.eval() variant;
  - forecasts from origins spread over each series' held-out part (the first forecast bar
    held out, its lookback may reach back into the training part) at lookbacks 256, 400 and
    512: the mean first-step return (first forecast close / last close - 1), to set against
    the typical one-bar move of the held-out data (mean |close / previous close - 1| at those
    origins); and CRPS of the close over the horizon in return space (x / last close - 1) from
    the sample paths, beside two naive forecasts: persistence (the last close: CRPS = |r|) and
    a random walk (the lookback's own h-bar returns as the ensemble); and the mean absolute
    error of the mean path's returns (persistence's is its CRPS).
Prints Markdown; --json writes every figure.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import pandas as pd
import yaml

from kronos import Kronos, KronosPredictor, KronosTokenizer

LOOKBACKS = (256, 400, 512)
HORIZON = 16
PATHS = 16
ORIGINS_PER_SERIES = 8


def pair_dirs(root, cfg):
    if os.path.isdir(os.path.join(root, "predictor")):
        return os.path.join(root, "predictor"), os.path.join(root, "tokenizer")
    tok = os.path.join(root, "tokenizer", "best_model")
    if not os.path.isdir(tok):  # a run with the tokenizer stage off kept its starting tokenizer
        paths = cfg.get("model_paths", {})
        tok = paths.get("finetuned_tokenizer") or paths["pretrained_tokenizer"]
    return os.path.join(root, "basemodel", "best_model"), tok


def series_files(cfg):
    paths = cfg["data"]["data_path"]
    paths = [paths] if isinstance(paths, str) else paths
    out = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(os.path.join(p, f) for f in os.listdir(p)
                          if f.endswith((".csv", ".json")))
        else:
            out.append(p)
    return out


def val_losses(kronos, config, pred, tok, val_windows):
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([kronos, "finetune", "--config", config, "--pretrained-predictor", pred,
                            "--pretrained-tokenizer", tok, "--out", os.path.join(tmp, "o"),
                            "--eval-only", "--val-windows", str(val_windows), "--no-progress",
                            "--train-tokenizer=true", "--train-basemodel=true"],
                           capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"demo_eval: kronos finetune --eval-only failed:\n{r.stderr}")
    out = {}
    for stage in ("tokenizer", "predictor"):
        m = re.search(stage + r": validation loss ([0-9.eE+-]+) over (\d+) windows([^\n]*)",
                      r.stderr)
        out[stage] = float(m.group(1))
        out[stage + "_windows"] = int(m.group(2))
        off = re.search(r"official model.eval\(\) variant ([0-9.eE+-]+)", m.group(3))
        if off:
            out[stage + "_official"] = float(off.group(1))
    return out


def crps_ensemble(x, y):
    """CRPS of the ensemble x (members on axis 0) for observations y."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x - y).mean(0)
    b = np.abs(x[:, None] - x[None, :]).mean((0, 1))
    return a - 0.5 * b


def origins(n, train_ratio, lookback):
    first = max(int(n * train_ratio), lookback)
    last = n - HORIZON
    if last < first:
        return []
    return sorted({int(round(v)) for v in np.linspace(first, last, ORIGINS_PER_SERIES)})


def forecast_figures(pred_dir, tok_dir, files, train_ratio, threads):
    p = KronosPredictor(Kronos.from_pretrained(pred_dir), KronosTokenizer.from_pretrained(tok_dir),
                        max_context=512, threads=threads)
    out = {}
    for L in LOOKBACKS:
        first_ret, moves, crps_m, crps_p, crps_rw, mae_m, n_windows = [], [], [], [], [], [], 0
        for f in files:
            df = pd.read_csv(f)
            ts = pd.to_datetime(df["timestamps"])
            cols = [c for c in ("open", "high", "low", "close", "volume", "amount") if c in df]
            os_ = origins(len(df), train_ratio, L)
            if not os_:
                continue
            hist = [df[cols].iloc[o - L:o].reset_index(drop=True) for o in os_]
            fc = p.predict_batch(hist, [ts.iloc[o - L:o].reset_index(drop=True) for o in os_],
                                 [ts.iloc[o:o + HORIZON].reset_index(drop=True) for o in os_],
                                 pred_len=HORIZON, sample_count=PATHS, seed=7, return_paths=True)
            close = df["close"].to_numpy(np.float64)
            for o, fo in zip(os_, fc):
                last = close[o - 1]
                y = close[o:o + HORIZON] / last - 1
                paths = np.stack([q["close"].to_numpy(np.float64) for q in fo.paths]) / last - 1
                first_ret.append(fo.mean["close"].iloc[0] / last - 1)
                moves.append(abs(y[0]))
                crps_m.append(crps_ensemble(paths, y).mean())
                mean_path = fo.mean["close"].to_numpy(np.float64) / last - 1
                mae_m.append(np.abs(mean_path - y).mean())
                crps_p.append(np.abs(y).mean())
                # The random walk's members: the lookback's h-bar returns from 64 starts.
                lb = close[o - L:o]
                starts = np.linspace(0, L - HORIZON - 1, 64).astype(int)
                rw = np.stack([lb[starts + h] / lb[starts] - 1 for h in range(1, HORIZON + 1)], -1)
                crps_rw.append(crps_ensemble(rw, y).mean())
                n_windows += 1
        out[L] = dict(windows=n_windows, crps_model_per_window=[float(v) for v in crps_m],
                      first_step_return_per_window=[float(v) for v in first_ret],
                      mean_first_step_return=float(np.mean(first_ret)),
                      mean_abs_first_step_return=float(np.mean(np.abs(first_ret))),
                      typical_one_bar_move=float(np.mean(moves)),
                      crps_model=float(np.mean(crps_m)), crps_persistence=float(np.mean(crps_p)),
                      mae_mean_path=float(np.mean(mae_m)),
                      crps_random_walk=float(np.mean(crps_rw)))
    p.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kronos", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--val-windows", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--labels", default="bundled,rebuilt", help="names of --old,--new")
    ap.add_argument("--json")
    args = ap.parse_args()
    with open(args.config) as f:
        cfg = yaml.safe_load(f)
    files = series_files(cfg)
    train_ratio = cfg["data"]["train_ratio"]
    old_name, new_name = args.labels.split(",")
    res = {}
    for name, root in ((old_name, args.old), (new_name, args.new)):
        pred, tok = pair_dirs(root, cfg)
        res[name] = dict(dirs=[pred, tok],
                         val=val_losses(args.kronos, args.config, pred, tok, args.val_windows),
                         forecasts=forecast_figures(pred, tok, files, train_ratio, args.threads))
    print(f"Held-out: the last {1 - train_ratio:.0%} of each of {len(files)} series of "
          f"{args.config}.\n")
    print(f"| figure | {old_name} | {new_name} |\n|---|---:|---:|")
    for k, label in (("tokenizer", "tokenizer validation loss (mse(z, x))"),
                     ("predictor", "predictor validation loss (causal, kronos)"),
                     ("predictor_official", "predictor validation loss (official model.eval())")):
        print(f"| {label} | {res[old_name]['val'][k]:.4f} | {res[new_name]['val'][k]:.4f} |")
    for L in LOOKBACKS:
        a, b = res[old_name]["forecasts"][L], res[new_name]["forecasts"][L]
        print(f"| lookback {L}: mean first-step return (%) | {100 * a['mean_first_step_return']:+.3f}"
              f" | {100 * b['mean_first_step_return']:+.3f} |")
        print(f"| lookback {L}: mean abs first-step return (%) | "
              f"{100 * a['mean_abs_first_step_return']:.3f} | "
              f"{100 * b['mean_abs_first_step_return']:.3f} |")
        print(f"| lookback {L}: typical one-bar move (%) | {100 * a['typical_one_bar_move']:.3f} | "
              f"{100 * b['typical_one_bar_move']:.3f} |")
        print(f"| lookback {L}: CRPS model / persistence / random walk (x1e-3, {a['windows']} "
              f"windows) | {1e3 * a['crps_model']:.2f} / {1e3 * a['crps_persistence']:.2f} / "
              f"{1e3 * a['crps_random_walk']:.2f} | {1e3 * b['crps_model']:.2f} / "
              f"{1e3 * b['crps_persistence']:.2f} / {1e3 * b['crps_random_walk']:.2f} |")
        print(f"| lookback {L}: MAE of the mean path's returns (x1e-3; persistence = its CRPS) | "
              f"{1e3 * a['mae_mean_path']:.2f} | {1e3 * b['mae_mean_path']:.2f} |")
    # Paired over the same windows: the rebuilt minus the bundled CRPS, with its standard error.
    for L in LOOKBACKS:
        d = (np.array(res[new_name]["forecasts"][L]["crps_model_per_window"]) -
             np.array(res[old_name]["forecasts"][L]["crps_model_per_window"]))
        print(f"| lookback {L}: CRPS {new_name} - {old_name} (x1e-3, paired, +- 1 s.e.) | "
              f"{1e3 * d.mean():+.2f} +- {1e3 * d.std(ddof=1) / np.sqrt(len(d)):.2f} | |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
