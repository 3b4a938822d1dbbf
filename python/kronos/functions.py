"""The module-level functions of the official model/kronos.py, with its signatures, over numpy
and the C engine (no torch): calc_time_stamps, top_k_top_p_filtering, sample_from_logits and
auto_regressive_inference. A script that imports them from the official module runs with the
import changed to `from kronos import ...`; what stays different is listed in docs/python.md.

Arrays go in as numpy arrays (or anything np.asarray takes, CPU torch tensors included) and
come out as numpy arrays. Randomness comes from numpy's global generator, so np.random.seed
makes a run repeatable (the official functions draw from torch's)."""

import datetime
import threading

import numpy as np
import pandas as pd

from .errors import InvalidArgumentError
from .model import Kronos, KronosTokenizer
from .predictor import KronosPredictor, _as_int, fresh_seed, _Prepared

__all__ = ["calc_time_stamps", "top_k_top_p_filtering", "sample_from_logits",
           "auto_regressive_inference"]

STAMP_COLUMNS = ["minute", "hour", "weekday", "day", "month"]


def calc_time_stamps(x_timestamp):
    """The model's calendar features of each stamp: a DataFrame of minute, hour, weekday
    (Monday 0), day and month, as the official function gives them. Takes what pd.to_datetime
    takes (a Series of datetimes as the official one does, strings, a DatetimeIndex, ...);
    tz-aware stamps at their own wall clock."""
    stamps = pd.Series(pd.to_datetime(x_timestamp))
    out = pd.DataFrame()
    for name in STAMP_COLUMNS:
        out[name] = getattr(stamps.dt, name).to_numpy()
    return out


def _float_logits(logits):
    """logits as a float numpy array, the caller's own when it is one (changed in place, as
    the official function changes its tensor)."""
    if isinstance(logits, np.ndarray) and logits.dtype.kind == "f" and logits.flags.writeable:
        return logits
    return np.array(logits, dtype=np.float32)


def _softmax(x):
    with np.errstate(invalid="ignore", over="ignore"):
        z = x - np.max(x, axis=-1, keepdims=True)
        e = np.exp(z)
        return e / np.sum(e, axis=-1, keepdims=True)


def top_k_top_p_filtering(logits, top_k=0, top_p=1.0, filter_value=-float("Inf"),
                          min_tokens_to_keep=1):
    """Sets the logits outside the top k (top_k > 0), else outside the nucleus of
    probability top_p (top_p < 1: the smallest set of most likely tokens whose probability
    reaches top_p), to filter_value, keeping at least min_tokens_to_keep per row; along the
    last axis. Changes a float numpy array in place and returns it (other inputs: a float32
    copy). With neither filter the logits come back unchanged (the official returns None)."""
    logits = _float_logits(logits)
    vocab = logits.shape[-1]
    if top_k > 0:
        k = min(max(int(top_k), int(min_tokens_to_keep)), vocab)
        kth = -np.partition(-logits, k - 1, axis=-1)[..., k - 1:k]
        logits[logits < kth] = filter_value
        return logits
    if top_p < 1.0:
        order = np.argsort(-logits, axis=-1, kind="stable")
        ranked = np.take_along_axis(logits, order, axis=-1)
        cumulative = np.cumsum(_softmax(ranked), axis=-1)
        remove = cumulative > top_p
        if min_tokens_to_keep > 1:
            remove[..., :int(min_tokens_to_keep)] = False
        # The token that crosses top_p stays: shift right by one; the first always stays.
        remove[..., 1:] = remove[..., :-1].copy()
        remove[..., 0] = False
        back = np.empty_like(remove)
        np.put_along_axis(back, order, remove, axis=-1)
        logits[back] = filter_value
    return logits


def sample_from_logits(logits, temperature=1.0, top_k=None, top_p=None, sample_logits=True,
                       *, rng=None):
    """One token id per row of logits [batch, vocab] (an int64 array [batch, 1]): logits /
    temperature, filtered by top_k_top_p_filtering when top_k > 0 or top_p < 1, then a draw
    from the softmax (sample_logits=True) or its most likely token. `rng` (keyword, not in
    the official): a numpy Generator or RandomState; default numpy's global generator."""
    logits = np.array(logits, dtype=np.float64) / float(temperature)
    k = 0 if top_k is None else top_k
    p = 1.0 if top_p is None else top_p
    if k > 0 or p < 1.0:
        logits = top_k_top_p_filtering(logits, top_k=k, top_p=p)
    probs = _softmax(logits)
    rows = probs.reshape(-1, probs.shape[-1])
    if not sample_logits:
        return np.argmax(rows, axis=-1).reshape(probs.shape[:-1] + (1,)).astype(np.int64)
    draw = (rng.random if isinstance(rng, np.random.Generator) else
            (rng or np.random).random_sample)
    u = np.asarray(draw((rows.shape[0], 1)))
    cdf = np.cumsum(rows, axis=-1)
    cdf /= cdf[:, -1:]
    ids = np.minimum((cdf <= u).sum(axis=-1), rows.shape[-1] - 1)
    return ids.reshape(probs.shape[:-1] + (1,)).astype(np.int64)


# ------------------------------------------------------------------ auto_regressive_inference

_RANGES = {"minute": (0, 59), "hour": (0, 23), "weekday": (0, 6), "day": (1, 31),
           "month": (1, 12)}
_EPOCH = datetime.datetime(1970, 1, 1)


def _features(stamp, what):
    a = np.asarray(stamp, dtype=np.float64)
    if a.ndim != 3 or a.shape[-1] != 5:
        raise InvalidArgumentError(f"{what}: expected [batch, rows, 5] (minute, hour, weekday, "
                                   f"day, month), got shape {a.shape}")
    r = np.rint(a)
    if not np.isfinite(a).all() or (r != a).any():
        raise InvalidArgumentError(f"{what}: calendar features must be whole numbers")
    for j, name in enumerate(STAMP_COLUMNS):
        lo, hi = _RANGES[name]
        bad = np.argwhere((r[..., j] < lo) | (r[..., j] > hi))
        if len(bad):
            b, i = bad[0]
            raise InvalidArgumentError(f"{what}[{b}][{i}]: {name} {int(r[b, i, j])} is outside "
                                       f"{lo}..{hi}")
    return r.astype(np.int64)


def _seconds(rows, after, what):
    """Strictly increasing wall-clock seconds whose minute, hour, weekday, day and month are
    the rows' (the model reads nothing else of a stamp): each row on the first date at or
    after the previous one that has its month, day and weekday."""
    out = np.empty(len(rows), dtype=np.int64)
    prev = after
    for i, (mi, h, wd, d, mo) in enumerate(rows.tolist()):
        year = prev.year if prev is not None else 1972
        for y in range(year, year + 401):
            try:
                t = datetime.datetime(y, mo, d, h, mi)
            except ValueError:  # 31 April, 29 February of a common year
                continue
            if t.weekday() == wd and (prev is None or t > prev):
                break
        else:
            raise InvalidArgumentError(f"{what} row {i}: no date is a {wd} (weekday) on "
                                       f"{d}/{mo}")
        prev = t
        out[i] = (t - _EPOCH) // datetime.timedelta(seconds=1)
    return out, prev


_predictors = {}
_predictors_lock = threading.Lock()


def _predictor(tokenizer, model, max_context, clip):
    if not isinstance(model, Kronos):
        raise InvalidArgumentError(
            f"model: expected Kronos.from_pretrained(...), got {type(model).__name__}")
    if not isinstance(tokenizer, KronosTokenizer):
        raise InvalidArgumentError(f"tokenizer: expected KronosTokenizer.from_pretrained(...), "
                                   f"got {type(tokenizer).__name__}")
    key = (model.path, tokenizer.path, max_context, float(clip))
    with _predictors_lock:
        p = _predictors.get(key)
        if p is None:
            p = KronosPredictor(model, tokenizer, max_context=max_context, clip=clip)
            _predictors[key] = p
        return p


def auto_regressive_inference(tokenizer, model, x, x_stamp, y_stamp, max_context, pred_len,
                              clip=5, T=1.0, top_k=0, top_p=0.99, sample_count=5, verbose=False,
                              use_kv_cache=False, *, seed=None):
    """The official function's forecast over the engine: x [batch, rows, 6] normalised candles
    (as KronosPredictor.predict normalises them), x_stamp [batch, rows, 5] and y_stamp
    [batch, pred_len, 5] their calendar features (calc_time_stamps' columns); returns float32
    [batch, min(rows + pred_len, max_context), 6], normalised, averaged over sample_count paths,
    the last pred_len rows the forecast. The rows before it (the official returns the
    tokenizer's reconstruction of the history there) are NaN: the engine decodes only the
    forecast. seed (keyword, not in the official): None draws one from numpy's global
    generator. use_kv_cache is accepted and ignored (the engine always caches).

    x goes to the engine as it is (kr_forecast_params.prenormalized: clipped to ±clip, not
    normalised again), so the forecast is predict's on the raw candles x came from, in x's
    scale: predict's result is it times (std + 1e-5) plus the mean."""
    pred_len = _as_int("pred_len", pred_len, 1)
    max_context = _as_int("max_context", max_context, 1)
    values = np.asarray(x, dtype=np.float32)
    if values.ndim != 3 or values.shape[-1] != 6:
        raise InvalidArgumentError(f"x: expected [batch, rows, 6], got shape {values.shape}")
    xs, ys = _features(x_stamp, "x_stamp"), _features(y_stamp, "y_stamp")
    batch, rows = values.shape[0], values.shape[1]
    if xs.shape[:2] != (batch, rows) or ys.shape[:2] != (batch, pred_len):
        raise InvalidArgumentError(
            f"x_stamp must be [{batch}, {rows}, 5] and y_stamp [{batch}, {pred_len}, 5], got "
            f"{list(xs.shape)} and {list(ys.shape)}")
    if not np.isfinite(values).all():
        raise InvalidArgumentError("x: holds a NaN or an infinity")
    predictor = _predictor(tokenizer, model, max_context, clip)
    prepared = []
    for b in range(batch):
        ts, last = _seconds(xs[b], None, f"x_stamp[{b}]")
        future, _ = _seconds(ys[b], last, f"y_stamp[{b}]")
        v64 = np.ascontiguousarray(values[b], dtype=np.float64)  # float32 values, exactly
        prepared.append(_Prepared(v64, ts, future, None))
    seed = fresh_seed() if seed is None else seed
    # prenormalized: the engine clips x to ±clip as the official does, and leaves the
    # forecast in x's scale.
    out = predictor._raw(prepared, pred_len, T=T, top_k=top_k, top_p=top_p,
                         sample_count=sample_count, seed=seed, verbose=verbose,
                         prenormalized=True)
    width = min(rows + pred_len, max_context)
    keep = min(pred_len, width)
    preds = np.full((batch, width, 6), np.nan, dtype=np.float32)
    for b, r in enumerate(out):
        preds[b, width - keep:] = r["mean"][-keep:]
    return preds
