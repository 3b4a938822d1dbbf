"""kronos.backtest through the C library: the same figures as `kronos backtest` on the same
candles (bit for bit: one code path), DataFrames of every table, no lookahead through the
Python door too, progress, the second model, and refusals."""

import json
import math
import os
import subprocess

import numpy as np
import pandas as pd
import pytest

import kronos
from conftest import FIXTURES, ROOT
from kronos import Kronos, KronosPredictor, KronosTokenizer
from kronos.errors import InvalidArgumentError

TINY = os.path.join(FIXTURES, "tiny")
AAPL = os.path.join(FIXTURES, "csv", "aapl_1d_2019.csv")


@pytest.fixture(scope="module")
def tiny():
    p = KronosPredictor(Kronos.from_pretrained(os.path.join(TINY, "predictor")),
                        KronosTokenizer.from_pretrained(os.path.join(TINY, "tokenizer")),
                        threads=2)
    yield p
    p.close()


@pytest.fixture(scope="module")
def aapl():
    # round_trip: the exact doubles the C reader parses (pandas' default parser can be an ulp off)
    df = pd.read_csv(AAPL, float_precision="round_trip")
    df["timestamps"] = pd.to_datetime(df["timestamps"])
    return df


def test_equals_the_cli(tiny, aapl, kronos_cli, tmp_path):
    bt = kronos.backtest({"AAPL": aapl}, tiny, horizon=5, paths=4, every=7, bootstrap=50, seed=2)
    out = tmp_path / "bt.json"
    subprocess.run([kronos_cli, "backtest", "--model", os.path.join(TINY, "predictor"),
                    "--tokenizer", os.path.join(TINY, "tokenizer"), "--input", f"AAPL={AAPL}",
                    "--horizon", "5", "--paths", "4", "--every", "7", "--bootstrap", "50",
                    "--seed", "2", "--threads", "2", "--out", str(out)], check=True,
                   capture_output=True)
    cli = json.loads(out.read_text())
    for key in ("pooled", "by_step", "pit", "relative", "significance", "counts"):
        assert bt.report[key] == cli[key], key


def test_tables(tiny, aapl):
    three = {"A": aapl, "B": aapl.assign(close=aapl.close * 1.02),
             "C": aapl.assign(close=aapl.close[::-1].to_numpy())}
    # Keep high/low consistent with the changed closes.
    for k in ("B", "C"):
        three[k]["high"] = np.maximum(three[k][["open", "close"]].max(axis=1), three[k]["high"])
        three[k]["low"] = np.minimum(three[k][["open", "close"]].min(axis=1), three[k]["low"])
    seen = []
    bt = kronos.backtest(three, tiny, horizon=4, paths=4, every=5, bootstrap=40,
                         progress=lambda *a: seen.append(a))
    assert not bt.demo  # the tiny fixture does not declare itself a demo
    assert set(bt.scores.columns) == {"forecaster", "metric", "value", "lo", "hi"}
    assert {"model", "naive", "drift", "random_walk"} <= set(bt.scores.forecaster)
    crps = bt.scores.query("forecaster == 'model' and metric == 'crps'").iloc[0]
    assert crps.lo <= crps.value <= crps.hi
    assert len(bt.by_step.query("forecaster == 'model' and metric == 'crps'")) == 4
    assert set(bt.per_symbol.symbol) == {"A", "B", "C"}
    assert (bt.relative.symbol == "all").any()
    assert len(bt.ic) > 5 and bt.ic.ic.between(-1, 1).all()
    assert len(bt.periods) > 5 and "equity" in bt.periods.columns
    assert len(bt.origins) == bt.report["counts"]["forecasts"]
    assert "model_crps" in bt.origins.columns
    assert len(bt.pit.query("forecaster == 'model'")) == 10
    assert bt.verdicts and all(isinstance(v, str) for v in bt.verdicts)
    assert "<svg" in bt.to_html() and "## Verdict" in bt.to_markdown()
    assert json.loads(bt.to_json())["object"] == "backtest"
    phases = [a[0] for a in seen]
    assert phases[0] == "plan" and phases[-1] == "done" and "forecast" in phases
    done = [a[1] for a in seen if a[0] == "forecast"]
    assert done == sorted(done) and done[-1] == bt.report["counts"]["forecasts"]


def test_no_lookahead(tiny, aapl):
    row = 150
    origin = aapl.timestamps[row]
    a = kronos.backtest({"S": aapl}, tiny, horizon=5, paths=4, origins=[origin], bootstrap=0,
                        top=0)
    later = aapl.copy()
    later.loc[row + 1:, ["open", "high", "low", "close"]] *= 1.5
    b = kronos.backtest({"S": later}, tiny, horizon=5, paths=4, origins=[origin], bootstrap=0,
                        top=0)
    cols = ["model_mean", "model_median", "model_p10", "model_p90", "model_prob_up", "model_vol"]
    assert a.origins[cols].equals(b.origins[cols])
    assert a.origins.realized_close[0] != b.origins.realized_close[0]
    c = kronos.backtest({"S": aapl}, tiny, horizon=5, paths=4,
                        origins=[aapl.timestamps[row - 1]], bootstrap=0, top=0)
    assert not a.origins[cols].equals(c.origins[cols])


def test_compare_and_demo(tiny, aapl, demo):
    q = KronosPredictor(*demo, threads=2, quant="int8")
    try:
        bt = kronos.backtest({"AAPL": aapl}, q, horizon=4, paths=4, max_origins=5, lookback=64,
                             bootstrap=0, compare=tiny, compare_name="tiny f32")
        assert bt.demo and bt.report["demo_notice"].startswith("DEMO MODEL")
        assert bt.report["compare_model"]["name"] == "tiny f32"
        assert "compare" in set(bt.scores.forecaster)
    finally:
        q.close()


def test_refusals(tiny, aapl):
    with pytest.raises(InvalidArgumentError, match="predictor"):
        kronos.backtest({"A": aapl}, "not a predictor")
    with pytest.raises(InvalidArgumentError, match="window"):
        kronos.backtest({"A": aapl}, tiny, window="sliding")
    with pytest.raises(InvalidArgumentError, match="paths"):
        kronos.backtest({"A": aapl}, tiny, paths=1)
    with pytest.raises(InvalidArgumentError, match="no series"):
        kronos.backtest({}, tiny)
    with pytest.raises(InvalidArgumentError, match="origins and every"):
        kronos.backtest({"A": aapl}, tiny, every=2, origins=["2019-06-03"])
    # The library's own checks come back as InvalidArgumentError naming the parameter.
    with pytest.raises(InvalidArgumentError, match="hold"):
        kronos.backtest({"A": aapl}, tiny, every=2, hold=3)
    with pytest.raises(InvalidArgumentError, match="no origin"):
        kronos.backtest({"A": aapl.head(40)}, tiny)
