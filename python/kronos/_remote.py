"""Client.forecast / forecast_batch: predict's arguments turned into a POST /v1/forecast body,
and its answer into what predict returns.

The series goes through predict's own checks and conversion (predictor.prepare: the price
columns, volume and amount filled as the official code fills them, the stamps at their wall
clock), so the server forecasts exactly the candles predict would: its whole history as the
lookback (lookback = rows), the raw mean of the paths (ohlc "raw"), the same seed."""

import numbers

import numpy as np
import pandas as pd

from . import _answers
from .errors import InvalidArgumentError
from .predictor import (COLUMNS, Forecast, check_quantiles, forecast_params, fresh_seed,
                        prepare)

# The old Client.forecast's field names (the server's) and predict's names for them.
RENAMED = {"paths": "sample_count", "temperature": "T", "future_timestamps": "y_timestamp",
           "candles": "df", "lookback": None, "columns": None, "stream": None}
# Server fields forecast() passes through under their own names.
PASSED = ("max_context", "market", "timeout_s", "ohlc")


def _refuse_old_names(extra):
    for k in extra:
        new = RENAMED.get(k, "")
        if new:
            hint = f"; Client.forecast takes predict's name for it: {new}"
        elif k in RENAMED:
            hint = "; predict has no such argument"
        else:
            hint = ""
        raise InvalidArgumentError(
            f"{k}: not an argument of Client.forecast{hint} (Client.forecast_raw takes the "
            "server's fields as docs/api.md names them and returns its answer as it is)")


def _wall(seconds):
    return [str(t) for t in np.asarray(seconds, dtype=np.int64).astype("datetime64[s]")]


def body(df, x_timestamp, y_timestamp, pred_len, T, top_k, top_p, sample_count, seed,
         return_paths, quantiles, window, extra, index=None):
    """(the request body, the prepared series, the quantiles) for one series, every argument
    checked as predict checks it."""
    if isinstance(x_timestamp, numbers.Number) and not isinstance(x_timestamp, bool):
        raise InvalidArgumentError(
            f"x_timestamp: got the number {x_timestamp!r}: Client.forecast takes predict's "
            "arguments (df, x_timestamp, y_timestamp, pred_len, ...); Client.forecast_raw("
            "candles, pred_len, ...) is the former call, with the server's answer as it is")
    if pred_len is None:
        raise InvalidArgumentError("pred_len: required")
    _refuse_old_names([k for k in extra if k not in PASSED])
    max_context = extra.get("max_context")
    forecast_params(pred_len, T, top_k, top_p, sample_count, 0 if seed is None else seed,
                    window, 512 if max_context is None else max_context, 5)
    qs = check_quantiles(quantiles)
    p = prepare(df, x_timestamp, y_timestamp, int(pred_len), index=index)
    if len(p.ts) < 2:
        at = f" at index {index}" if index is not None else ""
        raise InvalidArgumentError(f"df{at}: the server needs at least 2 candles, got 1")
    if seed is None:
        seed = fresh_seed()
    seed = int(seed)
    candles = {"timestamps": _wall(p.ts)}
    for j, c in enumerate(COLUMNS):
        candles[c] = p.values[:, j].tolist()  # float64 at full precision
    out = {"candles": candles, "pred_len": int(pred_len), "lookback": len(p.ts),
           "paths": int(sample_count), "temperature": float(T), "top_k": int(top_k),
           "top_p": float(top_p), "seed": seed if seed <= 2**53 else str(seed),
           "window": window, "quantiles": list(qs), "return_paths": bool(return_paths),
           "ohlc": "raw"}
    if p.future is not None:
        out["future_timestamps"] = _wall(p.future)
    out.update({k: v for k, v in extra.items() if v is not None})
    return out, p, qs


def _frame(values, index):
    return pd.DataFrame(np.asarray(values, dtype=np.float32), columns=COLUMNS, index=index)


def output(answer, prepared, pred_len, sample_count, return_paths, qs):
    """The answer as predict returns it: the mean as a float32 DataFrame indexed by
    y_timestamp (a DatetimeIndex) or by the forecast's stamps; a Forecast with return_paths
    or quantiles (history_s1/_s2 None: the server does not send them; stats the answer's
    "usage" and "timing"). Raises _answers.BadAnswer for an answer of another shape."""
    a = _answers.ForecastAnswer(answer, pred_len, qs, sample_count if return_paths else None)
    index = prepared.index
    if index is None:
        index = pd.DatetimeIndex(a.stamps, name="timestamps")
    mean = _frame(a.mean, index)
    if not return_paths and not qs:
        return mean
    paths = [_frame(p, index) for p in a.paths] if return_paths else None
    quantiles = {q: _frame(v, index) for q, v in a.quantiles.items()}
    stats = {"usage": answer.get("usage"), "timing": answer.get("timing")}
    return Forecast(mean, paths, a.s1, a.s2, None, None, quantiles, stats)
