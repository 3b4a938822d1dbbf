"""The official model/kronos.py's module-level functions (issue 42, item 8): calc_time_stamps,
top_k_top_p_filtering and sample_from_logits against their definitions worked by hand, and
auto_regressive_inference against predict on the same series and seed."""

import numpy as np
import pandas as pd
import pytest

import kronos
from kronos import (auto_regressive_inference, calc_time_stamps, sample_from_logits,
                    top_k_top_p_filtering)

COLS = ["open", "high", "low", "close", "volume", "amount"]
INF = -np.inf


def test_calc_time_stamps(candles):
    ts = candles["timestamps"].iloc[:50]
    got = calc_time_stamps(ts)
    assert list(got.columns) == ["minute", "hour", "weekday", "day", "month"]
    for c in got.columns:
        np.testing.assert_array_equal(got[c].to_numpy(), getattr(ts.dt, c).to_numpy())
    # Other forms of the same stamps give the same features.
    for other in (ts.astype(str), pd.DatetimeIndex(ts), list(ts)):
        pd.testing.assert_frame_equal(calc_time_stamps(other), got)


@pytest.mark.parametrize("logits,kw,want", [
    # top-k: the k largest stay (ties with the k-th stay too, as the official's `<` keeps).
    ([[1, 3, 2, 5, 4]], dict(top_k=2), [[INF, INF, INF, 5, 4]]),
    ([[1, 3, 3, 0]], dict(top_k=2), [[INF, 3, 3, INF]]),
    ([[1, 3, 2]], dict(top_k=10), [[1, 3, 2]]),  # k past the vocabulary: all stay
    ([[1, 3, 2]], dict(top_k=1, min_tokens_to_keep=2), [[INF, 3, 2]]),
    # top-p over softmax([ln .5, ln .3, ln .15, ln .05]): the smallest set reaching p stays.
    ([np.log([0.05, 0.5, 0.15, 0.3])], dict(top_p=0.7), [[INF, np.log(0.5), INF, np.log(0.3)]]),
    ([np.log([0.05, 0.5, 0.15, 0.3])], dict(top_p=0.85),
     [[INF, np.log(0.5), np.log(0.15), np.log(0.3)]]),
    ([np.log([0.05, 0.5, 0.15, 0.3])], dict(top_p=0.1), [[INF, np.log(0.5), INF, INF]]),
    # min_tokens_to_keep is applied before the official's shift right, which keeps one more.
    ([np.log([0.05, 0.5, 0.15, 0.3])], dict(top_p=0.1, min_tokens_to_keep=2),
     [[INF, np.log(0.5), np.log(0.15), np.log(0.3)]]),
    # Neither filter: unchanged; top_k wins over top_p; another filter value.
    ([[1, 2]], dict(), [[1, 2]]),
    ([[1, 3, 2]], dict(top_k=1, top_p=0.01), [[INF, 3, INF]]),
    ([[1, 3, 2]], dict(top_k=1, filter_value=-1e9), [[-1e9, 3, -1e9]]),
])
def test_top_k_top_p_filtering(logits, kw, want):
    arr = np.array(logits, dtype=np.float32)
    out = top_k_top_p_filtering(arr, **kw)
    assert out is arr  # in place, as the official changes its tensor
    np.testing.assert_allclose(out, np.array(want, dtype=np.float32), rtol=1e-6)
    # A list (no array to change) comes back as a new array with the same values.
    np.testing.assert_allclose(top_k_top_p_filtering(logits, **kw),
                               np.array(want, dtype=np.float32), rtol=1e-6)


def test_sample_from_logits():
    logits = np.log(np.array([[0.1, 0.6, 0.3], [0.7, 0.2, 0.1]]))
    # Greedy forms: the most likely token of each row, as an int64 [batch, 1].
    for kw in (dict(sample_logits=False), dict(top_k=1)):
        ids = sample_from_logits(logits, **kw)
        assert ids.dtype == np.int64 and ids.shape == (2, 1)
        np.testing.assert_array_equal(ids[:, 0], [1, 0])
    # Draws follow the softmax of logits / temperature (a fixed seed: a fixed count).
    np.random.seed(0)
    draws = np.concatenate([sample_from_logits(logits) for _ in range(4000)], axis=1)
    freq = np.stack([(draws == k).mean(axis=1) for k in range(3)], axis=1)
    np.testing.assert_allclose(freq, np.exp(logits), atol=0.03)
    # numpy's global generator drives them: np.random.seed repeats a run.
    np.random.seed(7)
    a = sample_from_logits(logits, temperature=2.0, top_p=0.9)
    np.random.seed(7)
    np.testing.assert_array_equal(a, sample_from_logits(logits, temperature=2.0, top_p=0.9))
    # top_p filters out the token below the nucleus: row 0 keeps 1 and 2 at top_p 0.8.
    np.random.seed(1)
    draws = np.concatenate([sample_from_logits(logits, top_p=0.8) for _ in range(500)], axis=1)
    assert set(draws[0]) == {1, 2} and set(draws[1]) == {0, 1}
    rng = np.random.default_rng(3)
    assert sample_from_logits(logits, rng=rng).shape == (2, 1)


def _official_inputs(df, x_ts, y_ts):
    """x, x_stamp, y_stamp as the official predict builds them for auto_regressive_inference."""
    x = df[COLS].to_numpy(np.float32)
    mean, std = np.mean(x, axis=0), np.std(x, axis=0)
    xn = np.clip((x - mean) / (std + 1e-5), -5, 5)
    xs = calc_time_stamps(x_ts).to_numpy(np.float32)
    ys = calc_time_stamps(y_ts).to_numpy(np.float32)
    return xn[None], xs[None], ys[None], mean, std


def test_auto_regressive_inference_is_predicts_forecast(demo, predictor, candles):
    model, tok = demo
    h = candles.iloc[:120].reset_index(drop=True)
    x_ts, y_ts = h["timestamps"].iloc[:100], h["timestamps"].iloc[100:108]
    df = h[COLS].iloc[:100]
    x, xs, ys, mean, std = _official_inputs(df, x_ts, y_ts)
    preds = auto_regressive_inference(tok, model, x, xs, ys, 512, 8, clip=5, T=1.0, top_k=0,
                                      top_p=0.9, sample_count=3, seed=21)
    assert preds.shape == (1, 108, 6) and preds.dtype == np.float32
    assert np.isnan(preds[0, :100]).all() and np.isfinite(preds[0, 100:]).all()
    # It is predict's forecast with the same seed, in the normalised scale: predict's
    # numbers are these times (std + 1e-5) plus the mean (float32, as the engine and the
    # official compute them), bit for bit. The same tokens, too.
    ref = predictor.predict(df, x_ts, y_ts, 8, T=1.0, top_k=0, top_p=0.9, sample_count=3,
                            seed=21, verbose=False)
    back = preds[0, -8:] * (std + np.float32(1e-5)) + mean
    np.testing.assert_array_equal(back, ref.to_numpy())
    # Values past the clip are clipped, as the official clips them.
    wild = x.copy()
    wild[0, 5, 4] = 40.0
    clipped = x.copy()
    clipped[0, 5, 4] = 5.0
    np.testing.assert_array_equal(
        auto_regressive_inference(tok, model, wild, xs, ys, 512, 8, sample_count=1, seed=2),
        auto_regressive_inference(tok, model, clipped, xs, ys, 512, 8, sample_count=1, seed=2))
    # A batch of two (one a window in the middle of the series), past max_context: the
    # official shape [batch, max_context, 6].
    x2, xs2, ys2, _, _ = _official_inputs(h[COLS].iloc[10:110], h["timestamps"].iloc[10:110],
                                          h["timestamps"].iloc[110:118])
    both = auto_regressive_inference(tok, model, np.concatenate([x, x2]),
                                     np.concatenate([xs, xs2]), np.concatenate([ys, ys2]), 64,
                                     8, sample_count=2, seed=4)
    assert both.shape == (2, 64, 6) and np.isfinite(both[:, -8:]).all()
    # seed None: numpy's global generator, as everywhere in the package.
    np.random.seed(11)
    a = auto_regressive_inference(tok, model, x, xs, ys, 512, 8, sample_count=1)
    np.random.seed(11)
    np.testing.assert_array_equal(a, auto_regressive_inference(tok, model, x, xs, ys, 512, 8,
                                                               sample_count=1))


def test_auto_regressive_inference_refusals(demo):
    model, tok = demo
    x = np.zeros((1, 4, 6), np.float32)
    x[0, :, 0] = [0.1, -0.2, 0.3, -0.1]
    xs = np.array([[[0, 9, 0, 3, 6], [5, 9, 0, 3, 6], [10, 9, 0, 3, 6], [15, 9, 0, 3, 6]]],
                  np.float32)
    ys = np.array([[[20, 9, 0, 3, 6]]], np.float32)
    bad = xs.copy()
    bad[0, 2, 4] = 13
    cases = [
        ((tok, model, x, bad, ys, 16, 1), r"x_stamp\[0\]\[2\]: month 13 is outside 1\.\.12"),
        ((tok, model, x[:, :, :5], xs, ys, 16, 1), r"x: expected \[batch, rows, 6\]"),
        ((tok, model, x, xs, ys[:, :, :4], 16, 1), r"y_stamp: expected \[batch, rows, 5\]"),
        ((tok, model, x, xs, ys, 16, 2), r"and y_stamp \[1, 2, 5\], got"),
        ((tok, model, x, xs + 0.5, ys, 16, 1), "whole numbers"),
        ((model, tok, x, xs, ys, 16, 1), "model: expected Kronos"),
    ]
    for args, match in cases:
        with pytest.raises(kronos.InvalidArgumentError, match=match):
            auto_regressive_inference(*args)
    # Valid features (3 June, a Monday: the first such date from 1972 on) forecast.
    out = auto_regressive_inference(tok, model, x, xs, ys, 16, 1, sample_count=1, seed=1)
    assert out.shape == (1, 5, 6) and np.isfinite(out[0, -1]).all()
