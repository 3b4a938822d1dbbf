"""The official API's behaviour where kronos differed (issue 42, item 8): seed=None draws fresh
randomness from numpy's global generator, a non-CPU device is a warning and .device says
"cpu", verbose=True shows progress, and the result is indexed by a DatetimeIndex whatever
form the stamps came in."""

import datetime
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from kronos import KronosPredictor, predictor as kp

COLS = ["open", "high", "low", "close", "volume", "amount"]
P = 4


@pytest.fixture(scope="module")
def hist(candles):
    return candles.iloc[:100].reset_index(drop=True)


def _y(candles):
    return candles["timestamps"].iloc[100:100 + P].reset_index(drop=True)


def test_seed_none_is_fresh_per_call_and_numpy_seeds_it(predictor, hist, candles):
    # An ensemble loop as the official examples write it: each call other paths.
    x, y = hist["timestamps"], _y(candles)
    runs = [predictor.predict(hist[COLS], x, y, P, verbose=False).to_numpy() for _ in range(3)]
    assert not np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[1], runs[2])
    # np.random.seed makes a run repeatable, as torch.manual_seed does the official one's.
    np.random.seed(1234)
    a = predictor.predict(hist[COLS], x, y, P, sample_count=2, verbose=False)
    b = predictor.predict(hist[COLS], x, y, P, sample_count=2, verbose=False)
    np.random.seed(1234)
    a2 = predictor.predict(hist[COLS], x, y, P, sample_count=2, verbose=False)
    b2 = predictor.predict(hist[COLS], x, y, P, sample_count=2, verbose=False)
    pd.testing.assert_frame_equal(a, a2, check_exact=True)
    pd.testing.assert_frame_equal(b, b2, check_exact=True)
    # The seed drawn is one of numpy's: the same as passing it.
    np.random.seed(1234)
    drawn = kp.fresh_seed()
    pd.testing.assert_frame_equal(
        a, predictor.predict(hist[COLS], x, y, P, sample_count=2, seed=drawn, verbose=False),
        check_exact=True)
    # An explicit seed stays exact: the same numbers at every call, whatever numpy's state.
    s0 = predictor.predict(hist[COLS], x, y, P, seed=0, verbose=False)
    np.random.seed(99)
    pd.testing.assert_frame_equal(s0, predictor.predict(hist[COLS], x, y, P, seed=0,
                                                        verbose=False), check_exact=True)
    # predict_batch draws one seed for the call: equal series get equal forecasts, and the
    # batch equals predict with that seed.
    np.random.seed(5)
    batch = predictor.predict_batch([hist[COLS]] * 2, [x] * 2, [y] * 2, P, verbose=False)
    np.random.seed(5)
    seed = kp.fresh_seed()
    pd.testing.assert_frame_equal(batch[0], batch[1], check_exact=True)
    pd.testing.assert_frame_equal(
        batch[0], predictor.predict(hist[COLS], x, y, P, seed=seed, verbose=False),
        check_exact=True)


def test_a_gpu_device_warns_once_and_device_is_cpu(demo, monkeypatch):
    from kronos import model as km
    monkeypatch.setattr(km, "_device_warned", [], raising=False)
    monkeypatch.setattr(kp, "_device_warned", [], raising=False)  # where it was once

    class TorchDevice:  # torch.device("cuda", 0) prints as cuda:0
        def __str__(self):
            return "cuda:0"

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        first = KronosPredictor(*demo, device="cuda:0", threads=1)
        again = KronosPredictor(*demo, device=TorchDevice(), threads=1)
        cpu = KronosPredictor(*demo, device="cpu", threads=1)
    msgs = [str(x.message) for x in w if issubclass(x.category, UserWarning)]
    assert len(msgs) == 1 and "'cuda:0' ignored: kronos runs on the CPU" in msgs[0]
    assert first.device == again.device == cpu.device == "cpu"
    for p in (first, again, cpu):
        p.close()
    # model.to("cuda") as the official examples write it: the same warning, once; a dtype or
    # "cpu" none.
    monkeypatch.setattr(km, "_device_warned", [])
    model, tok = demo
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert model.to("cpu") is model and tok.to(dtype="float32") is tok
        assert not w
        assert model.to("cuda:1") is model and tok.to(device="mps") is tok
    assert [str(x.message) for x in w] == ["device 'cuda:1' ignored: kronos runs on the CPU "
                                           "(its C engine), with the same numbers; .device "
                                           "says 'cpu'"]


def test_verbose_shows_progress(predictor, hist, candles, capsys, monkeypatch):
    x, y = hist["timestamps"], _y(candles)
    predictor.predict(hist[COLS], x, y, P, seed=1, verbose=False)
    assert capsys.readouterr().err == ""
    predictor.predict(hist[COLS], x, y, P, seed=1)  # verbose=True, the official default
    err = capsys.readouterr().err
    assert f"{P}/{P}" in err and "kronos forecast" in err
    # A batch: every series' steps (two lengths: two engine calls, one bar).
    predictor.predict_batch([hist[COLS], hist[COLS].iloc[10:]], [x, x.iloc[10:]], [y, y], P,
                            seed=1, verbose=True)
    err = capsys.readouterr().err
    assert f"{2 * P}/{2 * P}" in err and "(2 series)" in err
    # Without tqdm: a plain line on stderr.
    monkeypatch.setitem(sys.modules, "tqdm", None)
    predictor.predict(hist[COLS], x, y, P, seed=1, verbose=True)
    err = capsys.readouterr().err
    assert err.startswith(f"kronos forecast: {P}/{P} steps (") and err.endswith(" s)\n")
    assert err.count("\n") == 1  # one line, not a stream of carriage returns


def test_a_datetime_index_whatever_the_stamps(predictor, hist, candles):
    x = hist["timestamps"]
    y = _y(candles).rename("when")
    ref = predictor.predict(hist[COLS], x, y, P, seed=3, verbose=False)
    assert isinstance(ref.index, pd.DatetimeIndex) and ref.index.name == "when"
    forms = {
        "strings": y.astype(str),
        "datetime64 array": y.values.astype("datetime64[s]"),
        "Series of Timestamps": pd.Series(list(y), dtype=object, name="when"),
        "list of datetimes": [t.to_pydatetime() for t in y],
        "list of strings": [str(t) for t in y],
        "DatetimeIndex": pd.DatetimeIndex(y),
    }
    for what, stamps in forms.items():
        out = predictor.predict(hist[COLS], x.astype(str), stamps, P, seed=3, verbose=False)
        assert isinstance(out.index, pd.DatetimeIndex), what
        assert (out.index == ref.index).all(), what
        np.testing.assert_array_equal(out.to_numpy(), ref.to_numpy(), err_msg=what)
    # Tz-aware stamps keep their zone; a batch too.
    tz = pd.DatetimeIndex(y).tz_localize("America/New_York")
    out = predictor.predict(hist[COLS], x, tz.astype(str), P, seed=3, verbose=False)
    assert out.index.tz is not None
    assert [t.isoformat() for t in out.index] == [t.isoformat() for t in tz]
    batch = predictor.predict_batch([hist[COLS]], [x], [list(y.astype(str))], P, seed=3,
                                    verbose=False)
    assert isinstance(batch[0].index, pd.DatetimeIndex)
    assert datetime.datetime(2024, 1, 1) < batch[0].index[0].to_pydatetime()


def test_swapped_checkpoints_fail_at_once():
    # Issue 42 item 7: a tokenizer given as the predictor (or the reverse) used to load and
    # fail only at the first forecast, without the CLI's hint.
    from conftest import DEMO
    from kronos import InvalidArgumentError, Kronos, KronosTokenizer
    with pytest.raises(InvalidArgumentError, match=r"tokenizer checkpoint .* not a predictor; "
                                                   r"load it with KronosTokenizer\.from_pretrained"
                                                   r" \(are the model and the tokenizer swapped\?\)"):
        Kronos.from_pretrained(f"{DEMO}/tokenizer")
    with pytest.raises(InvalidArgumentError, match=r"predictor checkpoint .* not a tokenizer; "
                                                   r"load it with Kronos\.from_pretrained"):
        KronosTokenizer.from_pretrained(f"{DEMO}/predictor")
    # The right way round, and the bundle directory holding both, still load.
    assert Kronos.from_pretrained(f"{DEMO}/predictor").path.endswith("predictor")
    assert KronosTokenizer.from_pretrained(DEMO).path.endswith("tokenizer")


def test_parameters_are_read_only_views_of_the_weights(demo, tmp_path, kronos_cli):
    # The official web UI and torch-style scripts read model.parameters(): here numpy arrays
    # viewing the checkpoint's weights, by the official state_dict names.
    import gc
    import os
    import subprocess

    import safetensors_np
    from conftest import DEMO
    from kronos import Kronos, UnsupportedError

    model, tok = demo
    file = safetensors_np.load(os.path.join(model.path, "model.safetensors"))
    named = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    state = model.state_dict()
    assert set(state) == set(file) == set(named) | set(buffers) and not set(named) & set(buffers)
    for name in ("embedding.emb_s1.weight", "transformer.0.self_attn.q_proj.weight",
                 "dep_layer.cross_attn.v_proj.bias", "head.proj_s1.weight", "norm.weight"):
        assert name in named
    assert all(n.endswith(".inv_freq") for n in buffers) and buffers
    for name, arr in state.items():
        assert isinstance(arr, np.ndarray) and arr.dtype == np.float32
        np.testing.assert_array_equal(arr, file[name], err_msg=name)
    params = list(model.parameters())
    assert len(params) == len(named)
    assert sum(p.numel() for p in params) == sum(a.size for a in named.values())
    assert next(model.parameters()).device == "cpu"
    w = named["embedding.emb_s1.weight"]
    assert w.shape == (1024, model.config["d_model"]) and w.dim() == 2
    # Read-only, and not to be made writable (the file is mapped read-only).
    with pytest.raises(ValueError, match="read-only"):
        w[0, 0] = 1.0
    with pytest.raises(ValueError):
        w.setflags(write=True)
    # The views outlive the model object.
    first = float(w[0, 0])
    del model, named, state, params
    gc.collect()
    assert float(w[0, 0]) == first
    # The tokenizer: its BSQ bases are int64 buffers, in state_dict but not parameters.
    tstate = tok.state_dict(prefix="tokenizer_model.")
    assert tstate["tokenizer_model.tokenizer.bsq.basis"].dtype == np.int64
    assert "tokenizer.bsq.basis" not in dict(tok.named_parameters())
    assert "embed.weight" in dict(tok.named_parameters())
    # A kronos quantize checkpoint: said plainly.
    out = tmp_path / "q"
    subprocess.run([kronos_cli, "quantize", "--quant", "int8", "--out", str(out), "--model",
                    DEMO], check=True, capture_output=True)
    q = Kronos.from_pretrained(str(out / "predictor"))
    with pytest.raises(UnsupportedError, match="a kronos quantize checkpoint .* open the f32 "
                                               "checkpoint it was made from"):
        list(q.parameters())
