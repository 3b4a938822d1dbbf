"""The server's answers turned into what kronos.client returns, every field checked: an answer
of another shape (a proxy's page, another version of the server, a hostile server) raises
BadAnswer naming the field, never a pandas or numpy exception, and never becomes a silently
wrong frame."""

import math
import numbers

import numpy as np
import pandas as pd

COLUMNS = ["open", "high", "low", "close", "volume", "amount"]
_F32_MAX = float(np.finfo(np.float32).max)


class BadAnswer(Exception):
    """`what`: what the answer should have been; `reason`: where it is not."""

    def __init__(self, what, reason):
        super().__init__(f"the answer is not {what}: {reason}")
        self.what, self.reason = what, reason


def _number(v, where, what):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise BadAnswer(what, f"{where}: expected a number, got {_show(v)}")
    try:
        f = float(v)
    except OverflowError:
        f = math.inf
    if not math.isfinite(f):
        raise BadAnswer(what, f"{where}: {_show(v)} is not a finite double")
    return f


def _show(v):
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _stamps(values, where, what):
    for i, v in enumerate(values):
        if not isinstance(v, str) or not v:
            raise BadAnswer(what, f"{where}[{i}]: expected a timestamp string, got {_show(v)}")
    try:
        idx = pd.DatetimeIndex(pd.to_datetime(list(values)))
    except (ValueError, TypeError, OverflowError) as e:
        raise BadAnswer(what, f"{where}: not timestamps ({str(e)[:100]})") from None
    if idx.tz is not None:  # the server writes wall clocks; a zone would be another server
        raise BadAnswer(what, f"{where}: timestamps with a time zone")
    bad = np.flatnonzero(idx.isna())
    if len(bad):  # pandas reads "NaN", "nat", "" as NaT
        raise BadAnswer(what, f"{where}[{bad[0]}]: {_show(values[bad[0]])} is no timestamp")
    if len(idx) > 1 and not (idx[1:] > idx[:-1]).all():
        raise BadAnswer(what, f"{where}: timestamps not strictly increasing")
    return idx


def candles_frame(answer):
    """GET /v1/candles' answer as a DataFrame: a timestamps column (datetime64, the stored wall
    clock) and the stored columns as float64 (exactly the stored doubles), oldest first."""
    what = "a candles object"
    if not isinstance(answer, dict):
        raise BadAnswer(what, f"expected an object, got {type(answer).__name__}")
    columns, rows = answer.get("columns"), answer.get("candles")
    if not (isinstance(columns, list) and columns and columns[0] == "timestamps" and
            all(isinstance(c, str) and c for c in columns) and len(set(columns)) == len(columns)):
        raise BadAnswer(what, f"columns: expected distinct names after 'timestamps', got "
                        f"{_show(columns)}")
    if not isinstance(rows, list):
        raise BadAnswer(what, f"candles: expected a list, got {_show(rows)}")
    values = np.empty((len(rows), len(columns) - 1), dtype=np.float64)
    stamps = []
    for i, r in enumerate(rows):
        if not (isinstance(r, list) and len(r) == len(columns)):
            raise BadAnswer(what, f"candles[{i}]: expected {len(columns)} values, got {_show(r)}")
        stamps.append(r[0])
        for j in range(1, len(columns)):
            values[i, j - 1] = _number(r[j], f"candles[{i}][{j}] ({columns[j]})", what)
    idx = _stamps(stamps, "candles[*][0] (timestamps)", what)
    frame = pd.DataFrame({"timestamps": idx.values.astype("datetime64[ns]")})
    for j, name in enumerate(columns[1:]):
        frame[name] = values[:, j]
    for k in ("symbol", "interval"):
        if answer.get(k) is not None and not isinstance(answer.get(k), str):
            raise BadAnswer(what, f"{k}: expected a string, got {_show(answer.get(k))}")
    frame.attrs.update(symbol=answer.get("symbol"), interval=answer.get("interval"))
    return frame


def _rows(rows, where, pred_len, what):
    """Forecast rows ({"timestamps", "open", ..., "amount"}) as (DatetimeIndex, float64
    array [pred_len, 6])."""
    if not isinstance(rows, list) or len(rows) != pred_len:
        got = f"{len(rows)} rows" if isinstance(rows, list) else _show(rows)
        raise BadAnswer(what, f"{where}: expected {pred_len} rows, got {got}")
    values = np.empty((pred_len, len(COLUMNS)), dtype=np.float64)
    stamps = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise BadAnswer(what, f"{where}[{i}]: expected an object, got {_show(r)}")
        stamps.append(r.get("timestamps"))
        for j, c in enumerate(COLUMNS):
            if c not in r:
                raise BadAnswer(what, f"{where}[{i}]: no '{c}'")
            values[i, j] = _number(r[c], f"{where}[{i}].{c}", what)
            if abs(values[i, j]) > _F32_MAX:  # the engine's numbers are float32
                raise BadAnswer(what, f"{where}[{i}].{c}: {_show(r[c])} is past float32's "
                                "range")
    return _stamps(stamps, f"{where}[*].timestamps", what), values


def _tokens(v, where, pred_len, what):
    if not (isinstance(v, list) and len(v) == pred_len and
            all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 2**31 for t in v)):
        raise BadAnswer(what, f"{where}: expected {pred_len} token ids, got {_show(v)}")
    return np.asarray(v, dtype=np.int32)


class ForecastAnswer:
    """POST /v1/forecast's answer, checked: `stamps` the forecast's DatetimeIndex, `mean`
    [pred_len, 6], `quantiles` {q: [pred_len, 6]} for the quantiles asked for, `paths`
    ([pred_len, 6] each), `s1`, `s2` ([paths, pred_len]) when paths were asked for, and the
    answer itself (`raw`)."""

    def __init__(self, answer, pred_len, quantiles=(), paths=None):
        what = "a forecast"
        if not isinstance(answer, dict):
            raise BadAnswer(what, f"expected an object, got {type(answer).__name__}")
        self.raw = answer
        self.stamps, self.mean = _rows(answer.get("mean"), "mean", pred_len, what)
        self.quantiles = {}
        if quantiles:
            got = answer.get("quantiles")
            if not isinstance(got, dict):
                raise BadAnswer(what, f"quantiles: expected an object, got {_show(got)}")
            for q in quantiles:
                key = f"{q:g}"  # the server's %g
                if key not in got:
                    raise BadAnswer(what, f"quantiles: no '{key}'")
                self.quantiles[q] = self._same_stamps(got[key], f"quantiles.{key}", pred_len,
                                                      what)
        self.paths = self.s1 = self.s2 = None
        if paths is not None:
            got = answer.get("paths")
            if not isinstance(got, list) or len(got) != paths:
                n = f"{len(got)}" if isinstance(got, list) else _show(got)
                raise BadAnswer(what, f"paths: expected {paths} paths, got {n}")
            self.paths, s1, s2 = [], [], []
            for k, p in enumerate(got):
                if not isinstance(p, dict):
                    raise BadAnswer(what, f"paths[{k}]: expected an object, got {_show(p)}")
                self.paths.append(self._same_stamps(p.get("candles"), f"paths[{k}].candles",
                                                    pred_len, what))
                s1.append(_tokens(p.get("s1"), f"paths[{k}].s1", pred_len, what))
                s2.append(_tokens(p.get("s2"), f"paths[{k}].s2", pred_len, what))
            self.s1, self.s2 = np.stack(s1), np.stack(s2)

    def _same_stamps(self, rows, where, pred_len, what):
        stamps, values = _rows(rows, where, pred_len, what)
        if not stamps.equals(self.stamps):
            raise BadAnswer(what, f"{where}: timestamps other than the mean's")
        return values
