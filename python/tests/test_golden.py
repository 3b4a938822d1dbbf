"""The golden end-to-end cases (tests/fixtures, copies of the official reference's outputs on
random weights) reproduced through the official Python API: the CSV slices read by pandas and
passed to predict / predict_batch as an official script would. Token ids exact; the returned
candles within the golden tolerance |d| <= 1e-5*|ref| + 1e-5*(x_std + 1e-5)."""

import json
import os

import numpy as np
import pandas as pd
import pytest

import safetensors_np
from conftest import FIXTURES
from kronos import Kronos, KronosPredictor, KronosTokenizer

CASES = ["e2e_lb64_pl8", "e2e_lb256_pl16", "e2e_overflow_lb120_pl24_ctx128",
         "e2e_overflow_lb160_pl8_ctx128", "e2e_batch3_lb64_pl8"]


def _configs():
    out = [("tiny", os.path.join(FIXTURES, "tiny")), ("odd", os.path.join(FIXTURES, "odd"))]
    mini = os.environ.get("KRONOS_GOLDEN_MINI_DIR")
    if mini and os.path.isdir(mini):
        out.append(("mini", mini))
    return out


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("config", _configs(), ids=lambda c: c[0])
def test_golden_e2e(config, case, candles):
    _, cdir = config
    with open(os.path.join(cdir, "cases", case + ".json")) as f:
        meta = json.load(f)
    t = safetensors_np.load(os.path.join(cdir, "cases", case + ".safetensors"))
    P, C = meta["pred_len"], meta["max_context"]
    pred = KronosPredictor(Kronos.from_pretrained(os.path.join(cdir, "predictor")),
                           KronosTokenizer.from_pretrained(os.path.join(cdir, "tokenizer")),
                           max_context=C, clip=meta["clip"], threads=1)
    cols = ["open", "high", "low", "close", "volume", "amount"]
    dfs, xs, ys = [], [], []
    for b, (h0, h1, f1) in enumerate(meta["csv_rows"]):
        dfs.append(candles.iloc[h0:h1][cols])
        xs.append(candles.iloc[h0:h1]["timestamps"])
        ys.append(candles.iloc[h1:f1]["timestamps"])
        # The fixture's inputs are these rows: same values (as float32) and stamps.
        np.testing.assert_array_equal(dfs[b].to_numpy(np.float32), t["in.x_raw"][b])
        np.testing.assert_array_equal(xs[b].values.astype("datetime64[s]").astype(np.int64),
                                      t["in.x_time_unix"][b])
    kw = dict(T=meta["T"], top_k=meta["top_k"], top_p=meta["top_p"],
              sample_count=meta["sample_count"], verbose=False, return_paths=True)
    if meta["entry"] == "KronosPredictor.predict_batch":
        got = pred.predict_batch(dfs, xs, ys, pred_len=P, **kw)
    else:
        got = [pred.predict(dfs[0], xs[0], ys[0], pred_len=P, **kw)]
    assert len(got) == len(dfs)
    for b, r in enumerate(got):
        np.testing.assert_array_equal(r.history_s1, t["out.hist_s1"][b], err_msg="history s1")
        np.testing.assert_array_equal(r.history_s2, t["out.hist_s2"][b], err_msg="history s2")
        np.testing.assert_array_equal(r.s1[0], t["out.gen_s1"][b], err_msg="generated s1")
        np.testing.assert_array_equal(r.s2[0], t["out.gen_s2"][b], err_msg="generated s2")
        df = r.mean
        assert list(df.columns) == cols
        assert (df.index == pd.DatetimeIndex(ys[b])).all()
        ref = t["out.pred"][b].astype(np.float64)
        tol = 1e-5 * np.abs(ref) + 1e-5 * (t["dbg.x_std"][b].astype(np.float64) + 1e-5)
        diff = np.abs(df.to_numpy(np.float64) - ref)
        assert (diff <= tol).all(), f"max excess {np.max(diff - tol)} at {np.argmax(diff - tol)}"
    pred.close()
