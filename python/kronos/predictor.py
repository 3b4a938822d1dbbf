"""KronosPredictor: the official predict / predict_batch over the C engine."""

import ctypes
import numbers
import threading
import weakref

import numpy as np
import pandas as pd

from . import _lib
from .errors import InvalidArgumentError
from .model import Kronos, KronosTokenizer, load_model

PRICE_COLS = ["open", "high", "low", "close"]
COLUMNS = PRICE_COLS + ["volume", "amount"]
_WINDOWS = {"exact": 0, "rolling": 1}


class Context:
    """A kr_context: thread pool, workspace, KV cache and the engine thread. Thread-safe: any
    number of Python threads may run forecasts on one context (the engine batches them)."""

    def __init__(self, model, threads=None, kv_dtype=None):
        cp = _lib.kr_context_default_params()
        if threads is not None:
            cp.n_threads = _as_int("threads", threads, 1)
        if kv_dtype is not None:
            if not isinstance(kv_dtype, str):
                raise InvalidArgumentError(
                    f"kv_dtype: expected 'f32', 'bf16' or 'int8', got {kv_dtype!r}")
            cp.kv_dtype = kv_dtype.encode()
        err = _lib.kr_error()
        handle = ctypes.c_void_p()
        _lib.check(_lib.kr_context_create(model.handle, ctypes.byref(cp), ctypes.byref(handle),
                                          ctypes.byref(err)), err)
        self.model = model  # the model must outlive the context
        self.handle = handle
        self._free = weakref.finalize(self, _lib.kr_context_free, handle)

    def close(self):
        self._free()


class Forecast:
    """One series' forecast with everything the engine kept (what predict returns when
    return_paths or quantiles are asked for).

    mean        DataFrame, the forecast predict returns (mean of the paths, as the official)
    paths       list of DataFrames, one per path (return_paths=True), else None
    s1, s2      int32 arrays [paths, pred_len]: each path's generated token ids
    history_s1, history_s2   int32 arrays [lookback]: the history's token ids
    quantiles   {q: DataFrame} across paths, for the quantiles asked for
    stats       dict of the run's token counts and timings (kr_forecast_stats)
    """

    def __init__(self, mean, paths, s1, s2, history_s1, history_s2, quantiles, stats):
        self.mean, self.paths, self.s1, self.s2 = mean, paths, s1, s2
        self.history_s1, self.history_s2 = history_s1, history_s2
        self.quantiles, self.stats = quantiles, stats

    def __repr__(self):
        return (f"Forecast(pred_len={len(self.mean)}, paths={len(self.s1)}, "
                f"quantiles={sorted(self.quantiles)})")


def _as_int(name, v, minimum):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise InvalidArgumentError(f"{name}: expected an integer, got {v!r}")
    if v < minimum or v > 2**31 - 1:
        raise InvalidArgumentError(f"{name}: must be >= {minimum}, got {v}")
    return int(v)


def _as_float(name, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(v):
        raise InvalidArgumentError(f"{name}: expected a finite number, got {v!r}")
    return float(v)


def to_seconds(stamps, what):
    """Datetimes -> int64 seconds since 1970, the naive wall clock taken as UTC (what the
    engine's calendar features read); tz-aware stamps are taken at their own wall clock, as
    the official code's .dt.hour etc. do."""
    if isinstance(stamps, pd.DataFrame):
        raise InvalidArgumentError(f"{what}: expected a Series or DatetimeIndex of datetimes, "
                                   "got a DataFrame")
    if isinstance(stamps, (pd.Series, pd.Index)):
        dtype = stamps.dtype
    else:
        stamps = np.asarray(stamps)
        dtype = stamps.dtype
    if dtype.kind in "iufcb":
        raise InvalidArgumentError(
            f"{what}: expected datetimes, got numbers ({dtype}); convert them with "
            "pd.to_datetime(..., unit='s')")
    try:
        idx = pd.DatetimeIndex(pd.to_datetime(stamps))
    except (ValueError, TypeError, OverflowError) as e:
        raise InvalidArgumentError(f"{what}: not datetimes: {e}") from None
    if idx.tz is not None:
        idx = idx.tz_localize(None)
    bad = np.flatnonzero(idx.isna())
    if len(bad):
        raise InvalidArgumentError(f"{what}: row {bad[0]} is not a valid timestamp (NaT)")
    return np.ascontiguousarray(idx.values.astype("datetime64[s]").astype(np.int64))


def _numeric_column(df, col, where):
    s = df[col]
    if isinstance(s, pd.DataFrame):
        raise InvalidArgumentError(f"{where}column '{col}' appears more than once")
    if s.dtype.kind in "mM":
        raise InvalidArgumentError(f"{where}column '{col}' holds datetimes, expected numbers")
    try:
        return np.asarray(s, dtype=np.float64)
    except (ValueError, TypeError):
        pass
    for row, v in enumerate(s.tolist()):
        try:
            float(v)
        except (ValueError, TypeError):
            raise InvalidArgumentError(
                f"{where}column '{col}', row {row}: {v!r} is not a number") from None
    raise InvalidArgumentError(f"{where}column '{col}' is not numeric ({s.dtype})")


class _Prepared:
    __slots__ = ("values", "ts", "future", "index")

    def __init__(self, values, ts, future, index):
        self.values, self.ts, self.future, self.index = values, ts, future, index


def prepare(df, x_timestamp, y_timestamp, pred_len, index=None):
    """Checks one series by the official rules and converts it for the engine. `index` is the
    position in a batch (messages then name it, as the official predict_batch does)."""
    batch = index is not None
    where = f"DataFrame at index {index}: " if batch else ""
    if not isinstance(df, pd.DataFrame):
        raise InvalidArgumentError(f"Input at index {index} is not a pandas DataFrame."
                                   if batch else "Input must be a pandas DataFrame.")
    if not all(c in df.columns for c in PRICE_COLS):
        missing = [c for c in PRICE_COLS if c not in df.columns]
        raise InvalidArgumentError(
            (f"DataFrame at index {index} is missing price columns {PRICE_COLS}"
             if batch else f"Price columns {PRICE_COLS} not found in DataFrame") +
            f" (missing {missing}; columns are {list(df.columns)}).")
    n = len(df)
    if n == 0:
        raise InvalidArgumentError(f"{where}the DataFrame has no rows")
    cols = {c: _numeric_column(df, c, where) for c in PRICE_COLS}
    # Missing volume/amount as the official code fills them: no volume -> both 0; no amount ->
    # volume * mean of the four prices (pandas' row mean, so the same float64 numbers).
    if "volume" not in df.columns:
        cols["volume"] = np.zeros(n)
        cols["amount"] = np.zeros(n)
    else:
        cols["volume"] = _numeric_column(df, "volume", where)
        if "amount" in df.columns:
            cols["amount"] = _numeric_column(df, "amount", where)
        else:
            prices = pd.DataFrame({c: cols[c] for c in PRICE_COLS})
            cols["amount"] = cols["volume"] * prices.mean(axis=1).to_numpy(np.float64)
    values = np.ascontiguousarray(np.column_stack([cols[c] for c in COLUMNS]), dtype=np.float64)
    nan = np.isnan(values)
    if nan.any():
        row, c = np.argwhere(nan)[0]
        raise InvalidArgumentError(
            (f"DataFrame at index {index} contains NaN values in price or volume columns"
             if batch else "Input DataFrame contains NaN values in price or volume columns") +
            f" (first: row {row}, column '{COLUMNS[c]}').")
    if x_timestamp is None:
        # Extra: the stamps may come with the frame, as its DatetimeIndex or a timestamps column.
        if isinstance(df.index, pd.DatetimeIndex):
            x_timestamp = df.index
        elif "timestamps" in df.columns:
            x_timestamp = df["timestamps"]
        else:
            raise InvalidArgumentError(
                f"{where}x_timestamp is None and the DataFrame has neither a DatetimeIndex nor a "
                "'timestamps' column")
    ts = to_seconds(x_timestamp, f"x_timestamp{f' at index {index}' if batch else ''}")
    if len(ts) != n:
        raise InvalidArgumentError(
            f"Inconsistent lengths{f' at index {index}' if batch else ''}: x has {n} rows vs "
            f"x_timestamp has {len(ts)}.")
    future = None
    out_index = None
    if y_timestamp is not None:
        future = to_seconds(y_timestamp, f"y_timestamp{f' at index {index}' if batch else ''}")
        if len(future) != pred_len:
            raise InvalidArgumentError(
                f"y_timestamp length{f' at index {index}' if batch else ''} should equal "
                f"pred_len={pred_len}, got {len(future)}.")
        out_index = y_timestamp
    return _Prepared(values, ts, future, out_index)


def run(ctx, prepared, params, keep_paths=False, quantiles=()):
    """Runs prepared series as one kr_forecast_run_batch call (the GIL is released meanwhile)
    and returns one dict of numpy arrays per series."""
    n = len(prepared)
    series = (_lib.kr_series * n)()
    for i, p in enumerate(prepared):
        s = series[i]
        s.n = len(p.ts)
        s.timestamps = p.ts.ctypes.data
        s.values = p.values.ctypes.data
        s.has_volume = s.has_amount = 1
        s.future_timestamps = p.future.ctypes.data if p.future is not None else None
    params.keep_paths = 1 if keep_paths or quantiles else 0
    out = (ctypes.c_void_p * n)()
    err = _lib.kr_error()
    st = _lib.kr_forecast_run_batch(ctx.handle, series, n, ctypes.byref(params), out,
                                    ctypes.byref(err))
    _lib.check(st, err)
    results = []
    try:
        for i in range(n):
            results.append(_read(out[i], keep_paths, quantiles))
    finally:
        for i in range(n):
            _lib.kr_forecast_free(out[i])
    return results


def _arr(ptr, shape, dtype):
    count = int(np.prod(shape))
    return np.ctypeslib.as_array(ptr, shape=(count,)).astype(dtype, copy=True).reshape(shape)


def _read(f, keep_paths, quantiles):
    P = _lib.kr_forecast_pred_len(f)
    paths = _lib.kr_forecast_paths(f)
    L = _lib.kr_forecast_lookback(f)
    r = {
        "timestamps": _arr(_lib.kr_forecast_timestamps(f), (P,), np.int64),
        # The engine computes in float32 (as the reference): float32 loses nothing.
        "mean": _arr(_lib.kr_forecast_mean(f), (P, 6), np.float32),
    }
    if keep_paths:
        r["paths"] = [_arr(_lib.kr_forecast_path(f, k), (P, 6), np.float32) for k in range(paths)]
        r["s1"] = np.stack([_arr(_lib.kr_forecast_path_s1(f, k), (P,), np.int32)
                            for k in range(paths)])
        r["s2"] = np.stack([_arr(_lib.kr_forecast_path_s2(f, k), (P,), np.int32)
                            for k in range(paths)])
        r["history_s1"] = _arr(_lib.kr_forecast_history_s1(f), (L,), np.int32)
        r["history_s2"] = _arr(_lib.kr_forecast_history_s2(f), (L,), np.int32)
    if quantiles:
        r["quantiles"] = {}
        buf = np.empty((P, 6), dtype=np.float64)
        err = _lib.kr_error()
        for q in quantiles:
            _lib.check(_lib.kr_forecast_quantile(
                f, q, buf.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), ctypes.byref(err)), err)
            r["quantiles"][q] = buf.copy()  # interpolated in double by the engine
    st = _lib.kr_forecast_stats()
    _lib.kr_forecast_get_stats(f, ctypes.byref(st))
    r["stats"] = {name: getattr(st, name) for name, _ in st._fields_ if name != "profile"}
    r["stats"]["profile"] = st.profile.as_dict()
    return r


def _frame(values, index, ts):
    if index is None:  # future stamps inferred by the engine
        index = pd.DatetimeIndex(ts.astype("datetime64[s]").astype("datetime64[ns]"),
                                 name="timestamps")
    return pd.DataFrame(values, columns=COLUMNS, index=index)


def to_output(r, index, return_paths, quantiles):
    mean = _frame(r["mean"], index, r["timestamps"])
    if not return_paths and not quantiles:
        return mean
    paths = [_frame(p, mean.index, None) for p in r["paths"]] if return_paths else None
    qs = {q: _frame(v, mean.index, None) for q, v in r.get("quantiles", {}).items()}
    return Forecast(mean, paths, r.get("s1"), r.get("s2"), r.get("history_s1"),
                    r.get("history_s2"), qs, r["stats"])


class KronosPredictor:
    """The official KronosPredictor on the C engine.

    device is accepted for compatibility and ignored (the engine runs on the CPU). Extras:
    threads (compute threads of this predictor's context; default all CPUs), kv_dtype
    ('f32', 'bf16', 'int8') and quant (weights: 'f32', 'bf16', 'int8', 'fp8', 'q4').
    """

    def __init__(self, model, tokenizer, device=None, max_context=512, clip=5, *, threads=None,
                 kv_dtype=None, quant=None):
        if not isinstance(model, Kronos):
            raise InvalidArgumentError(
                f"model: expected Kronos.from_pretrained(...), got {type(model).__name__}")
        if not isinstance(tokenizer, KronosTokenizer):
            raise InvalidArgumentError(
                f"tokenizer: expected KronosTokenizer.from_pretrained(...), got "
                f"{type(tokenizer).__name__}")
        self.model, self.tokenizer, self.device = model, tokenizer, device or "cpu"
        self.max_context = _as_int("max_context", max_context, 1)
        self.clip = _as_float("clip", clip)
        self.price_cols = list(PRICE_COLS)
        self.vol_col, self.amt_vol = "volume", "amount"
        self.time_cols = ["minute", "hour", "weekday", "day", "month"]
        self._defaults = (threads, kv_dtype, quant)
        self._contexts = {}
        self._lock = threading.Lock()
        self._context(threads, kv_dtype, quant)  # load now: errors belong to the constructor

    def _context(self, threads, kv_dtype, quant):
        key = (threads, kv_dtype, quant or None)
        with self._lock:
            ctx = self._contexts.get(key)
            if ctx is None:
                m = load_model(self.model.path, self.tokenizer.path, quant)
                ctx = Context(m, threads, kv_dtype)
                self._contexts[key] = ctx
            return ctx

    def close(self):
        """Frees the contexts now (otherwise when the predictor is garbage-collected)."""
        with self._lock:
            for c in self._contexts.values():
                c.close()
            self._contexts.clear()

    def _params(self, pred_len, T, top_k, top_p, sample_count, seed, window):
        p = _lib.kr_forecast_default_params()
        p.pred_len = _as_int("pred_len", pred_len, 1)
        p.max_context = self.max_context
        p.clip = self.clip
        p.temperature = _as_float("T", T)
        p.top_k = _as_int("top_k", top_k, 0)
        p.top_p = _as_float("top_p", top_p)
        p.paths = _as_int("sample_count", sample_count, 1)
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not (
                    0 <= seed < 2**64):
                raise InvalidArgumentError(f"seed: expected an integer in [0, 2^64), got {seed!r}")
            p.seed = int(seed)
        if window not in _WINDOWS:
            raise InvalidArgumentError(f"window: expected 'exact' or 'rolling', got {window!r}")
        p.window = _WINDOWS[window]
        return p

    @staticmethod
    def _quantiles(quantiles):
        if quantiles is None:
            return ()
        if isinstance(quantiles, numbers.Real):
            quantiles = [quantiles]
        out = []
        for q in quantiles:
            q = _as_float("quantiles", q)
            if not 0.0 <= q <= 1.0:
                raise InvalidArgumentError(f"quantiles: {q} is outside [0, 1]")
            out.append(q)
        return tuple(out)

    def _raw(self, prepared, pred_len, T=1.0, top_k=0, top_p=0.9, sample_count=1, seed=0,
             return_paths=False, quantiles=None, quant=None, kv_dtype=None, window="exact",
             threads=None):
        """Runs prepared series; one dict of numpy arrays per series (see run)."""
        params = self._params(pred_len, T, top_k, top_p, sample_count, seed, window)
        qs = self._quantiles(quantiles)
        d_threads, d_kv, d_quant = self._defaults
        ctx = self._context(d_threads if threads is None else threads,
                            d_kv if kv_dtype is None else kv_dtype,
                            d_quant if quant is None else quant)
        # Official semantics: the whole frame is the lookback (the predictor's window slides
        # over it past max_context; the tokenizer encodes all of it). lookback is a batch-wide
        # parameter, so one batch call per history length.
        by_len = {}
        for i, p in enumerate(prepared):
            by_len.setdefault(len(p.ts), []).append(i)
        results = [None] * len(prepared)
        for n, idx in by_len.items():
            params.lookback = n
            for i, r in zip(idx, run(ctx, [prepared[i] for i in idx], params,
                                     bool(return_paths), qs)):
                results[i] = r
        return results

    def _run_prepared(self, prepared, pred_len, T, top_k, top_p, sample_count, seed,
                      return_paths, quantiles, quant, kv_dtype, window, threads):
        qs = self._quantiles(quantiles)
        results = self._raw(prepared, pred_len, T, top_k, top_p, sample_count, seed,
                            return_paths, qs, quant, kv_dtype, window, threads)
        return [to_output(r, p.index, return_paths, qs) for p, r in zip(prepared, results)]

    def predict(self, df, x_timestamp, y_timestamp, pred_len, T=1.0, top_k=0, top_p=0.9,
                sample_count=1, verbose=True, use_kv_cache=False, *, seed=0,
                return_paths=False, quantiles=None, quant=None, kv_dtype=None, window="exact",
                threads=None):
        """Forecasts pred_len candles after df; a DataFrame indexed by y_timestamp with columns
        open, high, low, close, volume, amount (the mean of sample_count paths).

        x_timestamp may be None when df has a DatetimeIndex or a 'timestamps' column, and
        y_timestamp None to let the engine infer the future stamps. verbose and use_kv_cache
        are accepted and ignored (the engine always caches; its numbers equal the reference's).
        With return_paths or quantiles, returns a Forecast (its .mean is that DataFrame)."""
        pred_len = _as_int("pred_len", pred_len, 1)
        prepared = [prepare(df, x_timestamp, y_timestamp, pred_len)]
        return self._run_prepared(prepared, pred_len, T, top_k, top_p, sample_count, seed,
                                  return_paths, quantiles, quant, kv_dtype, window, threads)[0]

    def predict_batch(self, df_list, x_timestamp_list, y_timestamp_list, pred_len, T=1.0,
                      top_k=0, top_p=0.9, sample_count=1, verbose=True, use_kv_cache=False, *,
                      seed=0, return_paths=False, quantiles=None, quant=None, kv_dtype=None,
                      window="exact", threads=None):
        """predict for several series at once, batched in the engine; a list in input order.

        Relaxation of the official rule: histories may differ in length (each series is
        forecast exactly as predict would forecast it alone)."""
        seqs = (list, tuple)
        if not isinstance(df_list, seqs) or not isinstance(x_timestamp_list, seqs) or \
                not isinstance(y_timestamp_list, seqs):
            raise InvalidArgumentError(
                "df_list, x_timestamp_list, y_timestamp_list must be list or tuple types.")
        if not len(df_list) == len(x_timestamp_list) == len(y_timestamp_list):
            raise InvalidArgumentError(
                "df_list, x_timestamp_list, y_timestamp_list must have consistent lengths "
                f"(got {len(df_list)}, {len(x_timestamp_list)}, {len(y_timestamp_list)}).")
        if not df_list:
            return []
        pred_len = _as_int("pred_len", pred_len, 1)
        prepared = [prepare(d, x, y, pred_len, index=i)
                    for i, (d, x, y) in enumerate(zip(df_list, x_timestamp_list,
                                                      y_timestamp_list))]
        return self._run_prepared(prepared, pred_len, T, top_k, top_p, sample_count, seed,
                                  return_paths, quantiles, quant, kv_dtype, window, threads)
