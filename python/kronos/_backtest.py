"""kronos.backtest: does the model beat a naive forecast on these candles?

A rolling-origin backtest through the C library (kronos/backtest.h, kr_backtest_run): every
series is forecast from many past origins, each time from the rows up to the origin only, and
scored against what followed and against the naive, seasonal naive, drift and bootstrap
random-walk baselines, with block bootstrap intervals, Diebold-Mariano tests, IC / RankIC and
a top-K strategy. docs/backtest.md defines every figure; the result's tables are pandas
DataFrames.

    import kronos
    from kronos import Kronos, KronosTokenizer, KronosPredictor
    p = KronosPredictor(Kronos.from_pretrained(DIR), KronosTokenizer.from_pretrained(DIR))
    bt = kronos.backtest({"AAPL": aapl_df, "MSFT": msft_df}, p, horizon=20, paths=32)
    bt.verdicts          # ["kronos-demo loses to naive on CRPS (Diebold-Mariano p = ...)", ...]
    bt.scores            # forecaster x score, with intervals
    bt.to_html()         # the report with its plots
"""

import ctypes
import io
import json
import threading
import weakref

import numpy as np
import pandas as pd

from . import _lib
from .errors import InvalidArgumentError
from .predictor import KronosPredictor, _as_int, _interruptible, _track, _untrack, prepare

_P = ctypes.POINTER


class kr_candles(ctypes.Structure):
    _fields_ = [
        ("n", ctypes.c_int64), ("timestamps", ctypes.c_void_p), ("values", ctypes.c_void_p),
        ("has_volume", ctypes.c_int), ("has_amount", ctypes.c_int), ("date_only", ctypes.c_int),
        ("amount_dropped", ctypes.c_char * 64),
    ]


class kr_backtest_series(ctypes.Structure):
    _fields_ = [("symbol", ctypes.c_char_p), ("interval", ctypes.c_char_p),
                ("candles", _P(kr_candles)), ("market", ctypes.c_char_p)]


class kr_backtest_progress(ctypes.Structure):
    _fields_ = [("phase", ctypes.c_char_p), ("done", ctypes.c_int64), ("total", ctypes.c_int64),
                ("elapsed_seconds", ctypes.c_double), ("eta_seconds", ctypes.c_double)]


_PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, _P(kr_backtest_progress))


class kr_backtest_params(ctypes.Structure):
    _fields_ = [
        ("horizon", ctypes.c_int), ("every", ctypes.c_int),
        ("from_ts", ctypes.c_int64), ("to_ts", ctypes.c_int64),
        ("origin_ts", _P(ctypes.c_int64)), ("n_origin_ts", ctypes.c_int),
        ("min_history", ctypes.c_int), ("max_origins", ctypes.c_int),
        ("paths", ctypes.c_int), ("lookback", ctypes.c_int), ("max_context", ctypes.c_int),
        ("temperature", ctypes.c_float), ("top_k", ctypes.c_int), ("top_p", ctypes.c_float),
        ("seed", ctypes.c_uint64), ("window", ctypes.c_int), ("ohlc", ctypes.c_int),
        ("static_batch_rows", ctypes.c_int),
        ("season", ctypes.c_int), ("bootstrap", ctypes.c_int), ("block_length", ctypes.c_int),
        ("ci_level", ctypes.c_double), ("alpha", ctypes.c_double),
        ("score_seed", ctypes.c_uint64),
        ("strategy_k", ctypes.c_int), ("strategy_short", ctypes.c_int),
        ("strategy_rank", ctypes.c_int), ("cost_bps", ctypes.c_double), ("hold", ctypes.c_int),
        ("ashare_rules", ctypes.c_int),
        ("compare", ctypes.c_void_p), ("compare_name", ctypes.c_char_p),
        ("progress", ctypes.c_void_p), ("progress_user", ctypes.c_void_p),
        ("request", _P(_lib.kr_request_params)),
        ("model_name", ctypes.c_char_p), ("predictor_dir", ctypes.c_char_p),
        ("tokenizer_dir", ctypes.c_char_p),
    ]


_status = ctypes.c_int
_bt_default = _lib._tools_proto("kr_backtest_default_params", kr_backtest_params)
_bt_run = _lib._tools_proto("kr_backtest_run", _status, ctypes.c_void_p, _P(kr_backtest_series),
                      ctypes.c_int, _P(kr_backtest_params), _P(ctypes.c_void_p),
                      _P(_lib.kr_error))
_bt_free = _lib._tools_proto("kr_backtest_report_free", None, ctypes.c_void_p)
_bt_render = _lib._tools_proto("kr_backtest_render", _status, ctypes.c_void_p, ctypes.c_int,
                         _P(ctypes.c_void_p), _P(_lib.kr_error))
_libc_free = ctypes.CDLL(None).free
_libc_free.argtypes = [ctypes.c_void_p]
_libc_free.restype = None

_FORMATS = {"json": 0, "md": 1, "markdown": 1, "html": 2, "csv": 3}
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _check_layout():
    if _lib.tools is None:  # no libkronos-tools.so.0: backtest() raises UnsupportedError
        return
    p = _bt_default()
    if not (p.horizon == 20 and p.paths == 32 and p.min_history == 64 and p.bootstrap == 1000
            and abs(p.ci_level - 0.95) < 1e-12 and abs(p.alpha - 0.05) < 1e-12
            and p.strategy_k == 1 and abs(p.cost_bps - 10) < 1e-12 and p.ashare_rules == -1
            and p.from_ts == _INT64_MIN and p.to_ts == _INT64_MAX and p.max_context == 512):
        raise ImportError(f"kronos: the tools library beside {_lib.library_path} does not match "
                          "this package's kr_backtest_params (a library from another version?)")


_check_layout()


def _render(handle, fmt):
    out = ctypes.c_void_p()
    err = _lib.kr_error()
    _lib.check(_bt_render(handle, _FORMATS[fmt], ctypes.byref(out), ctypes.byref(err)), err)
    try:
        return ctypes.string_at(out).decode("utf-8")
    finally:
        _libc_free(out)


def _est_rows(est, **keys):
    return dict(keys, value=est["value"], lo=est["lo"], hi=est["hi"])


class BacktestResult:
    """What kr_backtest_run found. DataFrames (long format, one figure a row with its interval
    `lo`, `hi`):
      scores        forecaster, metric, value, lo, hi (all symbols, over the horizon)
      by_step       forecaster, metric, step, value, lo, hi
      per_symbol    symbol, forecaster, metric, value, lo, hi
      relative      forecaster, baseline, metric, symbol ("all": the geometric mean), value, lo, hi
      significance  the Diebold-Mariano rows (symbol None: pooled)
      pit           forecaster, bin, value, lo, hi
      reliability   forecaster, bin_lo, bin_hi, count, mean_prob_up, value, lo, hi
      ic            origin, symbols, ic, rank_ic (the model's, per origin)
      periods       the strategy's periods (empty when it did not run)
      origins       one row per forecast (the per-origin CSV)
    and `report` (the JSON report as a dict), `verdicts`, `demo`; to_markdown(), to_html(),
    to_json(), to_csv() render the report as the C library does."""

    def __init__(self, handle):
        self._handle = handle
        self._free = weakref.finalize(self, _bt_free, handle)
        self.report = json.loads(_render(handle, "json"))
        self.demo = bool(self.report["demo"])
        self.verdicts = list(self.report["verdicts"])
        r = self.report
        self.scores = pd.DataFrame([_est_rows(e, forecaster=f, metric=m)
                                    for f, ms in r["pooled"].items() for m, e in ms.items()])
        self.by_step = pd.DataFrame([_est_rows(e, forecaster=f, metric=m, step=k + 1)
                                     for f, ms in r["by_step"].items() for m, a in ms.items()
                                     for k, e in enumerate(a)])
        self.per_symbol = pd.DataFrame([_est_rows(e, symbol=s["symbol"], forecaster=f, metric=m)
                                        for s in r["symbols"] for f, ms in s["scores"].items()
                                        for m, e in ms.items()])
        rel = []
        for q in r["relative"]:
            keys = dict(forecaster=q["forecaster"], baseline=q["baseline"], metric=q["metric"])
            rel.append(_est_rows(q["geometric_mean"], symbol="all", **keys))
            rel += [_est_rows(e, symbol=s, **keys) for s, e in q["per_symbol"].items()]
        self.relative = pd.DataFrame(rel)
        self.significance = pd.DataFrame(r["significance"])
        self.pit = pd.DataFrame([_est_rows(e, forecaster=f, bin=j)
                                 for f, a in r["pit"].items() for j, e in enumerate(a)])
        self.reliability = pd.DataFrame([dict(_est_rows(b["observed"], forecaster=f),
                                              bin_lo=b["bin_lo"], bin_hi=b["bin_hi"],
                                              count=b["count"], mean_prob_up=b["mean_prob_up"])
                                         for f, a in r["reliability"].items() for b in a])
        self.ic = pd.DataFrame(r["cross_section"]["series"],
                               columns=["origin", "symbols", "ic", "rank_ic"])
        self.periods = pd.DataFrame(r["strategy"]["periods"])
        self.origins = pd.read_csv(io.StringIO(_render(handle, "csv")), keep_default_na=True)

    def __repr__(self):
        c = self.report["counts"]
        return (f"<BacktestResult {self.report['model']['name']}: {c['forecasts']} forecasts, "
                f"{c['symbols']} symbols, {c['origins']} origins{', DEMO MODEL' if self.demo else ''}>")

    def to_json(self):
        return _render(self._handle, "json")

    def to_markdown(self):
        return _render(self._handle, "md")

    def to_html(self):
        return _render(self._handle, "html")

    def to_csv(self):
        return _render(self._handle, "csv")


def _series_items(data):
    if isinstance(data, pd.DataFrame):
        return [("series", data)]
    if isinstance(data, dict):
        items = list(data.items())
    elif isinstance(data, (list, tuple)):
        items = list(data)
    else:
        raise InvalidArgumentError(
            "data: expected a DataFrame, a dict {symbol: DataFrame} or a list of "
            f"(symbol, DataFrame), got {type(data).__name__}")
    if not items:
        raise InvalidArgumentError("data: no series given")
    for i, it in enumerate(items):
        if not (isinstance(it, tuple) and len(it) == 2 and isinstance(it[0], str)):
            raise InvalidArgumentError(f"data[{i}]: expected (symbol, DataFrame)")
    return items


def _stamp(v, what):
    """A from / to / origin as the naive seconds the library takes."""
    t = pd.Timestamp(v)
    if t.tzinfo is not None:
        t = t.tz_localize(None)
    return int(t.value // 10**9)


_CHOICES = {"window": {"exact": 0, "rolling": 1}, "ohlc": {"raw": 0, "consistent": 1},
            "rank_by": {"return": 0, "prob_up": 1}, "ashare": {"auto": -1, "off": 0, "on": 1}}


def _choice(name, v):
    if v not in _CHOICES[name]:
        raise InvalidArgumentError(f"{name}: must be one of {', '.join(_CHOICES[name])}, got {v!r}")
    return _CHOICES[name][v]


def backtest(data, predictor, *, horizon=20, paths=32, every=None, origins=None, start=None,
             end=None, min_history=64, max_origins=None, lookback=None, T=1.0, top_k=0,
             top_p=0.9, seed=0, window="exact", ohlc="consistent", interval=None, market=None,
             season=None, bootstrap=1000, block_length=None, ci_level=0.95, alpha=0.05,
             score_seed=0, top=1, short=False, rank_by="return", cost_bps=10.0, hold=None,
             ashare="auto", compare=None, compare_name=None, batch_size=None, progress=None):
    """Backtests `predictor` (a KronosPredictor) on `data`: a DataFrame, a dict {symbol:
    DataFrame} or a list of (symbol, DataFrame); each frame has open, high, low, close
    (volume, amount optional) and its stamps as a DatetimeIndex or a 'timestamps' column, as
    predict takes them. Parameters as `kronos backtest` (docs/backtest.md): horizon, paths,
    every (an origin every N bars; default the horizon) or origins (dates), start / end (the
    range of origins), min_history, max_origins, lookback, T, top_k, top_p, seed, window,
    ohlc, interval / market (for the report and the calendar), season (0: none), bootstrap,
    block_length, ci_level, alpha, score_seed, the strategy's top, short, rank_by ("return",
    "prob_up"), cost_bps, hold, ashare ("auto", "on", "off"); compare: a second
    KronosPredictor scored as one more forecaster; batch_size: series x paths rows per static
    batch; progress: called as progress(phase, done, total, elapsed_seconds, eta_seconds).
    Returns a BacktestResult. Ctrl-C stops the forecasts at the engine's next step."""
    if not isinstance(predictor, KronosPredictor):
        raise InvalidArgumentError(f"predictor: expected a KronosPredictor, got "
                                   f"{type(predictor).__name__}")
    if compare is not None and not isinstance(compare, KronosPredictor):
        raise InvalidArgumentError(f"compare: expected a KronosPredictor, got "
                                   f"{type(compare).__name__}")
    horizon = _as_int("horizon", horizon, 1)
    items = _series_items(data)
    p = _bt_default()
    p.horizon = horizon
    p.paths = _as_int("paths", paths, 2)
    if every is not None:
        p.every = _as_int("every", every, 1)
    keep = []  # what the C structures point into, alive until the call returns
    if origins is not None:
        if every is not None:
            raise InvalidArgumentError("origins and every: give one of them")
        stamps = np.array([_stamp(o, "origins") for o in origins], dtype=np.int64)
        if len(stamps) == 0:
            raise InvalidArgumentError("origins: no date given")
        keep.append(stamps)
        p.origin_ts = stamps.ctypes.data_as(_P(ctypes.c_int64))
        p.n_origin_ts = len(stamps)
    if start is not None:
        p.from_ts = _stamp(start, "start")
    if end is not None:
        p.to_ts = _stamp(end, "end")
    p.min_history = _as_int("min_history", min_history, 2)
    if max_origins is not None:
        p.max_origins = _as_int("max_origins", max_origins, 1)
    if lookback is not None:
        p.lookback = _as_int("lookback", lookback, 2)
    p.max_context = predictor.max_context
    p.temperature, p.top_k, p.top_p, p.seed = float(T), _as_int("top_k", top_k, 0), \
        float(top_p), int(seed)
    p.window, p.ohlc = _choice("window", window), _choice("ohlc", ohlc)
    if season is not None:
        p.season = -1 if season == 0 else _as_int("season", season, 1)
    p.bootstrap = _as_int("bootstrap", bootstrap, 0)
    if block_length is not None:
        p.block_length = _as_int("block_length", block_length, 1)
    p.ci_level, p.alpha, p.score_seed = float(ci_level), float(alpha), int(score_seed)
    p.strategy_k, p.strategy_short = _as_int("top", top, 0), int(bool(short))
    p.strategy_rank, p.cost_bps = _choice("rank_by", rank_by), float(cost_bps)
    if hold is not None:
        p.hold = _as_int("hold", hold, 1)
    p.ashare_rules = _choice("ashare", ashare)
    if batch_size is not None:
        b = _as_int("batch_size", batch_size, 0)
        p.static_batch_rows = -1 if b == 0 else b

    n = len(items)
    cs = (kr_candles * n)()
    series = (kr_backtest_series * n)()
    for i, (sym, df) in enumerate(items):
        prep = prepare(df, None, None, horizon, index=i if n > 1 else None)
        keep.append(prep)
        c = cs[i]
        c.n = len(prep.ts)
        c.timestamps = prep.ts.ctypes.data
        c.values = prep.values.ctypes.data
        c.has_volume = c.has_amount = 1
        c.date_only = int(bool(np.all(prep.ts % 86400 == 0)))
        name = sym.encode()
        keep.append(name)
        series[i].symbol = name
        series[i].candles = ctypes.pointer(c)
        if interval is not None:
            series[i].interval = str(interval).encode()
            keep.append(series[i].interval)
        if market is not None:
            series[i].market = str(market).encode()
            keep.append(series[i].market)

    d_threads, d_kv, d_quant = predictor._defaults
    ctx = predictor._context(d_threads, d_kv, d_quant)
    p.predictor_dir = predictor.model.path.encode()
    p.tokenizer_dir = predictor.tokenizer.path.encode()
    cctx = None
    if compare is not None:
        c_threads, c_kv, c_quant = compare._defaults
        cctx = compare._context(c_threads, c_kv, c_quant)
        p.compare = cctx.handle.value
        label = compare_name or f"{compare.model.path}{' ' + c_quant if c_quant else ''}"
        p.compare_name = label.encode()
        keep.append(p.compare_name)
    callback = None
    if progress is not None:
        def on_progress(user, pr):
            q = pr.contents
            try:
                progress(q.phase.decode(), q.done, q.total, q.elapsed_seconds, q.eta_seconds)
            except Exception:  # a failing progress callback must not unwind through C
                pass
        callback = _PROGRESS_FN(on_progress)
        p.progress = ctypes.cast(callback, ctypes.c_void_p).value
    abort = ctypes.c_int(0)
    request = _lib.kr_request_default_params()
    request.should_abort = _lib.kr_abort_flag
    request.abort_user = ctypes.addressof(abort)
    p.request = ctypes.pointer(request)
    out = ctypes.c_void_p()
    err = _lib.kr_error()

    def call():
        return _bt_run(ctx.handle, series, n, ctypes.byref(p), ctypes.byref(out),
                       ctypes.byref(err))

    _track(abort)
    try:
        with ctx.use():
            if cctx is not None:
                cctx._guard.enter()
            try:
                if threading.current_thread() is threading.main_thread():
                    st = _interruptible(call, abort)
                else:
                    st = call()
            finally:
                if cctx is not None:
                    cctx._guard.leave()
    except BaseException:
        if out.value:
            _bt_free(out)
        raise
    finally:
        _untrack(abort)
    _lib.check(st, err)
    return BacktestResult(out.value)
