"""KronosPredictor: the official predict / predict_batch over the C engine."""

import atexit
import contextlib
import ctypes
import numbers
import os
import re
import threading
import warnings
import weakref

import numpy as np
import pandas as pd

from . import _lib, _progress, errors
from .errors import InvalidArgumentError, KronosError
from . import model as _model
from .model import Kronos, KronosTokenizer, cpu_device, load_model

PRICE_COLS = ["open", "high", "low", "close"]
COLUMNS = PRICE_COLS + ["volume", "amount"]
_WINDOWS = {"exact": 0, "rolling": 1}
KV_DTYPES = ("f32", "bf16", "int8")  # kr_context_params.kv_dtype
QUANTS = ("f32", "bf16", "int8", "fp8", "q4")  # kr_model_params.quant
# 400 Gregorian years are 146097 days, a whole number of weeks: a stamp moved by a multiple of
# them keeps its minute, hour, weekday, day and month (the calendar features the model reads).
CYCLE_SECONDS = 146097 * 86400
# The engine's limits (src/engine/forecast.c, KR_MAX_CONTEXT_LIMIT and KR_MAX_PATHS), checked
# here too so that kronos.dask refuses them before anything is sent.
MAX_CONTEXT_LIMIT = 65536
MAX_PATHS = 4096


class _Guard:
    """The calls running on one kr_context, so that freeing it waits for them (and a call
    after that fails cleanly instead of using freed memory)."""

    def __init__(self):
        self.cv = threading.Condition()
        self.users = 0
        self.closed = False
        self.forked = False

    def enter(self):
        if self.forked:
            raise KronosError("this engine context belongs to the process that forked this one "
                              "(its engine threads do not exist here)")
        with self.cv:
            if self.closed:
                raise KronosError("predictor is closed")
            self.users += 1

    def leave(self):
        with self.cv:
            self.users -= 1
            self.cv.notify_all()

    def free(self, handle, model):
        # The finalizer's arguments keep `model` (the LoadedModel) alive until the context is
        # freed: kr_model_free comes after every kr_context_free, whatever order the garbage
        # collector (or interpreter exit) finalizes the objects in.
        with self.cv:
            self.closed = True
            while self.users:
                self.cv.wait()
        _lib.kr_context_free(handle)


class Context:
    """A kr_context: thread pool, workspace, KV cache and the engine thread. Thread-safe: any
    number of Python threads may run forecasts on one context (the engine batches them)."""

    def __init__(self, model, threads=None, kv_dtype=None):
        cp = _lib.kr_context_default_params()
        if threads is not None:
            cp.n_threads = _as_int("threads", threads, 1)
        if kv_dtype is not None:
            cp.kv_dtype = check_choice("kv_dtype", kv_dtype, KV_DTYPES).encode()
        err = _lib.kr_error()
        handle = ctypes.c_void_p()
        _lib.check(_lib.kr_context_create(model.handle, ctypes.byref(cp), ctypes.byref(handle),
                                          ctypes.byref(err)), err)
        self.model = model
        self.handle = handle
        self._guard = _Guard()
        self._free = weakref.finalize(self, self._guard.free, handle, model)
        _contexts.add(self)

    def _forget_after_fork(self):
        # kr_context_free would wait forever for the engine thread, which fork did not copy.
        self._free.detach()
        self._guard.forked = True

    @contextlib.contextmanager
    def use(self):
        """Holds the context for a call: close() waits until the call is over."""
        self._guard.enter()
        try:
            yield self
        finally:
            self._guard.leave()

    def close(self):
        """Frees the context once the calls running on it are over; later calls raise
        KronosError("predictor is closed")."""
        self._free()


_contexts = weakref.WeakSet()
_predictors = weakref.WeakSet()


def _forget_after_fork():
    """os.fork() copies a context's memory but not its engine thread: a forecast in the child
    would wait for that thread forever, and so would freeing the context at the child's exit.
    The child keeps its predictors usable by dropping their contexts (and models) unfreed; each
    loads and creates afresh at its next call."""
    for c in list(_contexts):
        c._forget_after_fork()
    for p in list(_predictors):
        p._lock = threading.Lock()  # another parent thread may have held it at the fork
        p._contexts = {}
    _model.forget_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


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
        paths = (f"paths={len(self.s1)}, " if self.s1 is not None else "")
        return f"Forecast(pred_len={len(self.mean)}, {paths}quantiles={sorted(self.quantiles)})"


def _as_int(name, v, minimum, maximum=None):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise InvalidArgumentError(f"{name}: expected an integer, got {v!r}")
    if maximum is not None and not minimum <= v <= maximum:
        raise InvalidArgumentError(f"{name}: must be in {minimum}..{maximum}, got {v}")
    if v < minimum:
        raise InvalidArgumentError(f"{name}: must be >= {minimum}, got {v}")
    if v > 2**31 - 1:  # the engine's int
        raise InvalidArgumentError(f"{name}: must be <= {2**31 - 1}, got {v}")
    return int(v)


def _as_float(name, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(v):
        raise InvalidArgumentError(f"{name}: expected a finite number, got {v!r}")
    return float(v)


def _as_positive_float32(name, v, maximum=None):
    """A parameter the engine holds as a float32 (temperature, top_p, clip): > 0 (and <=
    maximum) both as given and once rounded to float32."""
    v = _as_float(name, v)
    if v <= 0 or (maximum is not None and v > maximum):
        rng = f"in (0, {maximum:g}]" if maximum is not None else "> 0"
        raise InvalidArgumentError(f"{name}: must be {rng}, got {v!r}")
    with np.errstate(over="ignore", under="ignore"):
        f = np.float32(v)
    if not np.isfinite(f):
        raise InvalidArgumentError(
            f"{name}: {v!r} is past float32's range (the engine's precision; at most 3.4e38)")
    if f == 0:
        raise InvalidArgumentError(
            f"{name}: {v!r} rounds to 0 in float32 (the engine's precision; at least 1.4e-45)")
    return v


def check_choice(name, v, choices):
    # The engine's wording, so that the message is the same whichever side finds it.
    if not isinstance(v, str) or v not in choices:
        raise InvalidArgumentError(f"{name} {v!r} is not one of {', '.join(choices)}")
    return v


def check_engine_options(threads, kv_dtype, quant):
    """The context and model options (None: the default), checked as Context and load_model
    check them, so that a caller can check them before anything is loaded or sent."""
    if threads is not None:
        _as_int("threads", threads, 1)
    if kv_dtype is not None:
        check_choice("kv_dtype", kv_dtype, KV_DTYPES)
    if quant is not None:
        check_choice("quant", quant, QUANTS)


def forecast_params(pred_len, T, top_k, top_p, sample_count, seed, window, max_context, clip):
    """kr_forecast_params from predict's arguments, each checked (the message names it)."""
    p = _lib.kr_forecast_default_params()
    p.pred_len = _as_int("pred_len", pred_len, 1)
    p.max_context = _as_int("max_context", max_context, 1, MAX_CONTEXT_LIMIT)
    if p.pred_len > p.max_context:  # the engine's wording
        raise InvalidArgumentError(
            f"pred_len must be in 1..max_context ({p.max_context}), got {p.pred_len}")
    p.clip = _as_positive_float32("clip", clip)
    p.temperature = _as_positive_float32("T", T)
    p.top_k = _as_int("top_k", top_k, 0)
    p.top_p = _as_positive_float32("top_p", top_p, maximum=1.0)
    p.paths = _as_int("sample_count", sample_count, 1, MAX_PATHS)
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not (
                0 <= seed < 2**64):
            raise InvalidArgumentError(f"seed: expected an integer in [0, 2^64), got {seed!r}")
        p.seed = int(seed)
    if not isinstance(window, str) or window not in _WINDOWS:
        raise InvalidArgumentError(f"window: expected 'exact' or 'rolling', got {window!r}")
    p.window = _WINDOWS[window]
    return p


def check_quantiles(quantiles):
    """quantiles as a tuple of floats in [0, 1] (() for None)."""
    if quantiles is None:
        return ()
    if isinstance(quantiles, (str, bytes)):
        raise InvalidArgumentError(f"quantiles: expected a number or a list of numbers, "
                                   f"got {quantiles!r}")
    if isinstance(quantiles, numbers.Real):
        quantiles = [quantiles]
    out = []
    for q in quantiles:
        q = _as_float("quantiles", q)
        if not 0.0 <= q <= 1.0:
            raise InvalidArgumentError(f"quantiles: {q} is outside [0, 1]")
        out.append(q)
    return tuple(out)


def _stamps(stamps, what):
    """Datetimes -> (int64 seconds since 1970 of the naive wall clock taken as UTC, what the
    engine's calendar features read; whether they were tz-aware). Tz-aware stamps are taken at
    their own wall clock, as the official code's .dt.hour etc. do, and must be strictly
    increasing as instants (their wall clock repeats an hour when summer time ends)."""
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
    bad = np.flatnonzero(idx.isna())
    if len(bad):
        raise InvalidArgumentError(f"{what}: row {bad[0]} is not a valid timestamp (NaT)")
    aware = idx.tz is not None
    if aware:
        instants = idx.asi8
        back = np.flatnonzero(instants[1:] <= instants[:-1])
        if len(back):
            r = back[0] + 1
            raise InvalidArgumentError(
                f"{what}: row {r}: timestamps not strictly increasing ({idx[r - 1]} then "
                f"{idx[r]})")
        idx = idx.tz_localize(None)
    seconds = np.ascontiguousarray(idx.values.astype("datetime64[s]").astype(np.int64))
    # The engine's timestamps are whole seconds (the model reads minute, hour, weekday, day,
    # month): a fraction is dropped, which is harmless unless two stamps then coincide.
    ns = idx.asi8
    merged = np.flatnonzero((seconds[1:] <= seconds[:-1]) & (ns[1:] > ns[:-1]))
    if len(merged):
        r = merged[0] + 1
        raise InvalidArgumentError(
            f"{what}: row {r}: {idx[r - 1]} and {idx[r]} are the same second; the engine's "
            "timestamps are whole seconds (fractions are dropped), so candles need to be at "
            "least a second apart")
    return seconds, aware


def to_seconds(stamps, what):
    """The wall-clock seconds of _stamps (the engine's timestamps)."""
    return _stamps(stamps, what)[0]


def _cycles(gap):
    """Whole 400-year cycles that make a wall-clock step of `gap` (<= 0) seconds positive."""
    return (-gap) // CYCLE_SECONDS + 1


def _unwind_back(seq, last, ok):
    """Moves seq[:last] back by whole cycles wherever the wall clock fails to advance although
    the instants do (ok[i]: seq[i - 1] < seq[i] as instants). True when anything moved."""
    shift = 0
    for i in range(last - 1, -1, -1):
        seq[i] -= shift
        if ok[i + 1] and seq[i + 1] <= seq[i]:
            k = _cycles(seq[i + 1] - seq[i]) * CYCLE_SECONDS
            seq[i] -= k
            shift += k
    return shift != 0


def _unwind_forward(seq, first, ok):
    """Moves seq[first:] forwards likewise (the future after the last history row)."""
    shift = 0
    for i in range(first, len(seq)):
        seq[i] += shift
        if ok[i] and seq[i] <= seq[i - 1]:
            k = _cycles(seq[i] - seq[i - 1]) * CYCLE_SECONDS
            seq[i] += k
            shift += k


def _infer_future(wall, pred_len, what):
    """kr_calendar_future over the rows of the wall clock that precede every later row (the
    history as a calendar sees it once summer time's repeated hour is set aside)."""
    later_min = np.minimum.accumulate(wall[::-1])[::-1]
    keep = np.ones(len(wall), dtype=bool)
    keep[:-1] = wall[:-1] < later_min[1:]
    ts = np.ascontiguousarray(wall[keep])
    out = np.empty(pred_len, dtype=np.int64)
    err = _lib.kr_error()
    st = _lib.kr_calendar_future(ts.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)), len(ts),
                                 pred_len, out.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)),
                                 None, ctypes.byref(err))
    if st != 0:
        raise errors.from_status(st, f"{what}inferring future timestamps: "
                                 f"{err.message.decode('utf-8', 'replace')}")
    return out


def engine_clock(ts, x_aware, future, y_aware, pred_len, where=""):
    """The stamps the engine gets: the wall clocks, unless tz-aware stamps go back in wall
    time (a summer-time end) although they advance as instants; then the history before
    each such step moves back, and the future after one forwards, by whole 400-year cycles
    (minute, hour, weekday, day and month unchanged: the model's features are the official
    ones), with the future stamps inferred here when none were given."""
    n = len(ts)
    seq = ts if future is None else np.concatenate([ts, future])
    ok = np.zeros(len(seq), dtype=bool)  # ok[i]: seq[i - 1] < seq[i] as instants
    ok[1:n] = x_aware
    if future is not None:
        ok[n] = x_aware and y_aware
        ok[n + 1:] = y_aware
    if not ok.any() or (np.diff(seq) > 0).all():
        return ts, future
    seq = seq.astype(np.int64, copy=True)
    moved = _unwind_back(seq, n - 1, ok)  # the history, back from its last row
    if future is not None:
        _unwind_forward(seq, n, ok)  # the future, on from the last history row
        return np.ascontiguousarray(seq[:n]), np.ascontiguousarray(seq[n:])
    if moved:
        future = _infer_future(ts, pred_len, where)
    return np.ascontiguousarray(seq[:n]), future
def _numeric_column(df, col, where):
    s = df[col]
    if isinstance(s, pd.DataFrame):
        raise InvalidArgumentError(f"{where}column '{col}' appears more than once")
    if s.dtype.kind in "mM":
        raise InvalidArgumentError(f"{where}column '{col}' holds datetimes, expected numbers")
    if s.dtype.kind == "c":
        raise InvalidArgumentError(f"{where}column '{col}' holds complex numbers, expected real "
                                   "ones")
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


def _datetime_index(stamps):
    """The stamps (already checked by _stamps) as a DatetimeIndex, tz-aware ones in their
    zone, named as the Series or Index they came in: strings, datetime64 arrays, lists of
    Timestamps alike (the official code indexes by the stamps as given, a string index for
    strings)."""
    idx = pd.DatetimeIndex(pd.to_datetime(stamps))
    return idx.rename(getattr(stamps, "name", None))


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
        if "amount" in df.columns:  # the reference drops it silently; say so (kronos forecast does)
            warnings.warn(f"{where}column 'amount' ignored: without a volume column, volume and "
                          "amount are both 0 (the reference's rule); add the volume column to "
                          "use it", UserWarning, stacklevel=3)
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
    at = f" at index {index}" if batch else ""
    ts, x_aware = _stamps(x_timestamp, f"x_timestamp{at}")
    if len(ts) != n:
        raise InvalidArgumentError(
            f"Inconsistent lengths{at}: x has {n} rows vs x_timestamp has {len(ts)}.")
    future, y_aware = None, False
    out_index = None
    if y_timestamp is not None:
        future, y_aware = _stamps(y_timestamp, f"y_timestamp{at}")
        if len(future) != pred_len:
            raise InvalidArgumentError(
                f"y_timestamp length{at} should equal pred_len={pred_len}, got {len(future)}.")
        out_index = _datetime_index(y_timestamp)
    ts, future = engine_clock(ts, x_aware, future, y_aware, pred_len, where)
    return _Prepared(values, ts, future, out_index)


def _interruptible(call, abort):
    """call() (a foreign call polling `abort` once per engine step) on a helper thread, so
    that Ctrl-C (KeyboardInterrupt, or any exception a signal handler raises) reaches the
    waiting main thread, which a foreign call would hold until the end of the forecast. On
    such an exception the engine is told to stop, and the exception is raised once the call has
    returned (its results freed): nothing it uses is freed under it."""
    result, interrupted = [], None
    worker = threading.Thread(target=lambda: result.append(call()), name="kronos-forecast",
                              daemon=True)
    worker.start()
    while worker.is_alive():
        try:
            worker.join()
        except BaseException as e:
            abort.value = 1
            interrupted = interrupted or e
    if interrupted is not None:
        raise interrupted
    return result[0]


# The abort flags of the forecasts running now. At interpreter exit the contexts' finalizers
# wait for the calls on them; forecasts left running in daemon threads would hold the exit for
# as long as they take (minutes with a large model), so they are told to stop at their next
# engine step instead (and raise KronosError in their threads).
_running_aborts = {}  # id -> the ctypes int (unhashable itself)
_running_lock = threading.Lock()
_exit_hook = []


def _stop_running_at_exit():
    with _running_lock:
        for abort in _running_aborts.values():
            abort.value = 1


def _track(abort):
    with _running_lock:
        if not _exit_hook:
            # Registered at the first forecast, after weakref.finalize's own exit hook (the
            # model's finalizer exists by then): atexit runs the later hook first.
            atexit.register(_stop_running_at_exit)
            _exit_hook.append(True)
        _running_aborts[id(abort)] = abort


def _untrack(abort):
    with _running_lock:
        _running_aborts.pop(id(abort), None)


def _progress_callback(progress, group):
    """A kr_event_callback moving `progress` at each STEP event (keyed by (group, series))."""

    def on_event(_user, event):
        try:
            e = event.contents
            if e.kind == _lib.KR_EVENT_STEP:
                progress.step((group, e.index), e.step)
        except Exception:  # noqa: BLE001 -- a bar's failure must not reach the engine thread
            pass

    return _lib.kr_event_callback(on_event)


def run(ctx, prepared, params, keep_paths=False, quantiles=(), progress=None, group=0):
    """Runs prepared series as one kr_forecast_run_batch call (the GIL is released meanwhile)
    and returns one dict of numpy arrays per series. `progress` (a _progress.Progress) moves
    at every decode step, its keys (group, series)."""
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
    abort = ctypes.c_int(0)
    request = _lib.kr_request_default_params()
    request.should_abort = _lib.kr_abort_flag
    request.abort_user = ctypes.addressof(abort)
    callback = None
    if progress is not None:
        callback = _progress_callback(progress, group)  # alive until the call returns
        request.on_event = ctypes.cast(callback, ctypes.c_void_p)

    def call():
        return _lib.kr_forecast_run_batch(ctx.handle, series, n, ctypes.byref(params),
                                          ctypes.byref(request), out, ctypes.byref(err))

    _track(abort)
    try:
        if threading.current_thread() is threading.main_thread():
            try:
                st = _interruptible(call, abort)
            except BaseException:
                for i in range(n):  # a call that finished before it saw the flag
                    _lib.kr_forecast_free(out[i])
                raise
        else:  # signals reach the main thread only: nothing here to interrupt
            st = call()
    finally:
        _untrack(abort)
    del callback
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
    st = _lib.fill(_lib.kr_forecast_get_stats, _lib.kr_forecast_stats, f)
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


_SERIES = re.compile(r"\bseries (\d+)")


def _renamed(e, names):
    """The engine's error for one batch call with each "series k" (k: the place in that call)
    replaced by names[k], the caller's index; a call of one series names none, so it gets
    the prefix."""
    msg = e.message
    if len(names) == 1 and not _SERIES.search(msg):
        msg = f"series {names[0]}: {msg}"
    else:
        msg = _SERIES.sub(lambda m: f"series {names[int(m.group(1))]}"
                          if int(m.group(1)) < len(names) else m.group(0), msg)
    return errors.from_status(e.status, msg)


def fresh_seed():
    """A seed drawn from numpy's global generator: what seed=None uses, so that calls differ
    (the official code draws from torch's generator) and np.random.seed(k) repeats a run."""
    return int(np.random.randint(0, 2**63, dtype=np.int64))


class KronosPredictor:
    """The official KronosPredictor on the C engine.

    device is accepted for compatibility: the engine runs on the CPU, so .device is "cpu" and
    another device (e.g. "cuda:0") gets a warning, once per process. Extras: threads (compute
    threads of this predictor's context; default all CPUs), kv_dtype ('f32', 'bf16', 'int8')
    and quant (weights: 'f32', 'bf16', 'int8', 'fp8', 'q4').
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
        self.model, self.tokenizer = model, tokenizer
        self.device = cpu_device(device)
        self.max_context = _as_int("max_context", max_context, 1, MAX_CONTEXT_LIMIT)
        self.clip = _as_positive_float32("clip", clip)
        self.price_cols = list(PRICE_COLS)
        self.vol_col, self.amt_vol = "volume", "amount"
        self.time_cols = ["minute", "hour", "weekday", "day", "month"]
        self._defaults = (threads, kv_dtype, quant)
        self._contexts = {}
        self._closed = False
        self._lock = threading.Lock()
        _predictors.add(self)
        self._context(threads, kv_dtype, quant)  # load now: errors belong to the constructor

    def _context(self, threads, kv_dtype, quant):
        check_engine_options(threads, kv_dtype, quant)
        key = (threads, kv_dtype, quant or None)
        with self._lock:
            if self._closed:
                raise KronosError("predictor is closed")
            ctx = self._contexts.get(key)
            if ctx is None:
                m = load_model(self.model.path, self.tokenizer.path, quant)
                ctx = Context(m, threads, kv_dtype)
                self._contexts[key] = ctx
            return ctx

    def info(self):
        """The model this predictor runs (its default weight format), as a dict of
        kr_model_info: shapes, n_params, weight_bytes, load_seconds, quant, quant_method,
        `demo` (True for a checkpoint that only exercises the software: its config.json says
        intended_use "demo" or "test") and `source` (where the weights come from)."""
        d_threads, d_kv, d_quant = self._defaults
        return self._context(d_threads, d_kv, d_quant).model.info()

    def close(self):
        """Frees the contexts now (otherwise when the predictor is garbage-collected), once
        the calls running on them (in other threads) are over. Later calls raise
        KronosError("predictor is closed")."""
        with self._lock:
            self._closed = True
            contexts = list(self._contexts.values())
            self._contexts.clear()
        for c in contexts:
            c.close()

    def _params(self, pred_len, T, top_k, top_p, sample_count, seed, window):
        return forecast_params(pred_len, T, top_k, top_p, sample_count, seed, window,
                               self.max_context, self.clip)

    _quantiles = staticmethod(check_quantiles)

    def _raw(self, prepared, pred_len, T=1.0, top_k=0, top_p=0.9, sample_count=1, seed=None,
             return_paths=False, quantiles=None, quant=None, kv_dtype=None, window="exact",
             threads=None, indices=None, verbose=False, prenormalized=False):
        """Runs prepared series; one dict of numpy arrays per series (see run). `indices`: the
        series' places in the caller's list, which error messages name (default 0, 1, ...;
        given, a message names its series even when only one is run here). seed None: one
        drawn from numpy's global generator (fresh_seed). verbose: a progress bar over the
        decode steps of every series. prenormalized: the values are normalised already (as
        auto_regressive_inference takes them), and the results stay in that scale."""
        if seed is None:
            seed = fresh_seed()
        params = self._params(pred_len, T, top_k, top_p, sample_count, seed, window)
        params.prenormalized = 1 if prenormalized else 0
        qs = self._quantiles(quantiles)
        d_threads, d_kv, d_quant = self._defaults
        ctx = self._context(d_threads if threads is None else threads,
                            d_kv if kv_dtype is None else kv_dtype,
                            d_quant if quant is None else quant)
        named = indices is not None or len(prepared) > 1
        indices = list(range(len(prepared))) if indices is None else list(indices)
        # Official semantics: the whole frame is the lookback (the predictor's window slides
        # over it past max_context; the tokenizer encodes all of it). lookback is a batch-wide
        # parameter, so one batch call per history length.
        by_len = {}
        for i, p in enumerate(prepared):
            by_len.setdefault(len(p.ts), []).append(i)
        results = [None] * len(prepared)
        progress = _progress.Progress(pred_len, len(prepared)) if verbose else None
        try:
            with ctx.use():
                for group, (n, idx) in enumerate(by_len.items()):
                    params.lookback = n
                    try:
                        out = run(ctx, [prepared[i] for i in idx], params, bool(return_paths),
                                  qs, progress, group)
                    except KronosError as e:
                        if not named:
                            raise
                        raise _renamed(e, [indices[i] for i in idx]) from None
                    for i, r in zip(idx, out):
                        results[i] = r
        finally:
            if progress is not None:
                progress.close()
        return results

    def _run_prepared(self, prepared, pred_len, T, top_k, top_p, sample_count, seed,
                      return_paths, quantiles, quant, kv_dtype, window, threads, verbose):
        qs = self._quantiles(quantiles)
        results = self._raw(prepared, pred_len, T, top_k, top_p, sample_count, seed,
                            return_paths, qs, quant, kv_dtype, window, threads,
                            verbose=bool(verbose))
        return [to_output(r, p.index, return_paths, qs) for p, r in zip(prepared, results)]

    def predict(self, df, x_timestamp, y_timestamp, pred_len, T=1.0, top_k=0, top_p=0.9,
                sample_count=1, verbose=True, use_kv_cache=False, *, seed=None,
                return_paths=False, quantiles=None, quant=None, kv_dtype=None, window="exact",
                threads=None):
        """Forecasts pred_len candles after df; a DataFrame indexed by y_timestamp (as a
        DatetimeIndex, whatever form the stamps came in) with columns open, high, low, close,
        volume, amount (the mean of sample_count paths).

        x_timestamp may be None when df has a DatetimeIndex or a 'timestamps' column, and
        y_timestamp None to let the engine infer the future stamps. verbose: a progress bar
        over the decode steps (tqdm when installed, else a line on stderr). use_kv_cache is
        accepted and ignored (the engine always caches; its numbers equal the reference's).
        seed: None (default) draws one from numpy's global generator at each call, so calls
        differ as the official code's do and np.random.seed(k) makes a run repeatable; an int
        gives exactly the paths of that seed. With return_paths or quantiles, returns a
        Forecast (its .mean is that DataFrame)."""
        pred_len = _as_int("pred_len", pred_len, 1)
        prepared = [prepare(df, x_timestamp, y_timestamp, pred_len)]
        return self._run_prepared(prepared, pred_len, T, top_k, top_p, sample_count, seed,
                                  return_paths, quantiles, quant, kv_dtype, window, threads,
                                  verbose)[0]

    def predict_batch(self, df_list, x_timestamp_list, y_timestamp_list, pred_len, T=1.0,
                      top_k=0, top_p=0.9, sample_count=1, verbose=True, use_kv_cache=False, *,
                      seed=None, return_paths=False, quantiles=None, quant=None, kv_dtype=None,
                      window="exact", threads=None):
        """predict for several series at once, batched in the engine; a list in input order.
        seed None draws one seed for the call (every series forecast with it, as predict
        would forecast each with that seed).

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
                                  return_paths, quantiles, quant, kv_dtype, window, threads,
                                  verbose)
