"""The same seed gives the same numbers through the Python package as through the CLI
(`kronos forecast --format json`): mean, every path's candles and tokens, quantiles, stamps."""

import json
import subprocess

import numpy as np
import pandas as pd
import pytest

from conftest import DEMO

COLS = ["open", "high", "low", "close", "volume", "amount"]


def _rows(rows):
    return np.array([[r[c] for c in COLS] for r in rows], dtype=np.float64)


@pytest.mark.parametrize("paths,seed,top_k", [(1, 0, 0), (3, 7, 0), (4, 123456789, 20)])
def test_same_seed_same_numbers_as_cli(tmp_path, candles, predictor, kronos_cli, paths, seed,
                                       top_k):
    hist = candles.iloc[200:300]
    csv = tmp_path / "in.csv"
    hist.to_csv(csv, index=False, date_format="%Y-%m-%d %H:%M:%S")
    out = subprocess.run(
        [kronos_cli, "forecast", "--model", DEMO, "--input", str(csv), "--pred-len", "12",
         "--paths", str(paths), "--seed", str(seed), "--top-k", str(top_k), "--threads", "1",
         "--quantiles", "0.1,0.5,0.9", "--ohlc", "raw", "--format", "json"],
        check=True, capture_output=True, text=True).stdout
    cli = json.loads(out)
    # The frame as a script reads that CSV back.
    df = pd.read_csv(csv, float_precision="round_trip")
    df["timestamps"] = pd.to_datetime(df["timestamps"])
    # The CLI reads --quantiles as doubles: ask for the same q.
    qs = [0.1, 0.5, 0.9]
    r = predictor.predict(df[COLS], df["timestamps"], None, pred_len=12, sample_count=paths,
                          top_k=top_k, seed=seed, return_paths=True, quantiles=qs)
    assert [t.strftime("%Y-%m-%d %H:%M:%S") for t in r.mean.index] == \
        [row["timestamps"] for row in cli["mean"]]
    # The engine's candles are float32; the CLI prints them as doubles within 1 ulp (cJSON's
    # 15 digits), which round back to the same float32 exactly.
    np.testing.assert_array_equal(r.mean.to_numpy(), _rows(cli["mean"]).astype(np.float32))
    assert len(r.paths) == len(cli["paths"]) == paths
    for k, cp in enumerate(cli["paths"]):
        np.testing.assert_array_equal(r.paths[k].to_numpy(),
                                      _rows(cp["candles"]).astype(np.float32))
        np.testing.assert_array_equal(r.s1[k], cp["s1"])
        np.testing.assert_array_equal(r.s2[k], cp["s2"])
    # Quantiles are interpolated in double: equal to the CLI's text within its 1 ulp.
    for q, key in zip(qs, ("0.1", "0.5", "0.9")):
        np.testing.assert_allclose(r.quantiles[q].to_numpy(), _rows(cli["quantiles"][key]),
                                   rtol=4e-16, atol=0)
