"""DataFrame inputs by the official rules and the extras' forms: every accepted form gives the
same numbers, every bad input raises a clear ValueError (or KronosError) naming the problem and
never crashes the interpreter."""

import os
import shutil

import numpy as np
import pandas as pd
import pytest

import kronos
from conftest import DEMO
from kronos import Kronos, KronosError, KronosIOError, KronosTokenizer
from kronos import errors
from kronos.errors import InvalidArgumentError

COLS = ["open", "high", "low", "close", "volume", "amount"]
P = 6


@pytest.fixture(scope="module")
def hist(candles):
    return candles.iloc[400:480].reset_index(drop=True)


def _fut(candles):
    return candles.iloc[480:480 + P]["timestamps"]


def _predict(predictor, df, x, y, **kw):
    kw.setdefault("sample_count", 2)
    kw.setdefault("seed", 5)
    return predictor.predict(df, x, y, pred_len=P, **kw)


def test_official_call_returns_frame(predictor, hist, candles):
    y = _fut(candles)
    out = _predict(predictor, hist[COLS], hist["timestamps"], y)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == COLS
    assert (out.index == pd.DatetimeIndex(y)).all() and out.index.name == "timestamps"
    assert (out.dtypes == np.float32).all() and np.isfinite(out.to_numpy()).all()


def test_timestamp_forms_agree(predictor, hist, candles):
    y = _fut(candles)
    ref = _predict(predictor, hist[COLS], hist["timestamps"], y)
    forms = [
        (hist[COLS], pd.DatetimeIndex(hist["timestamps"]), y),          # DatetimeIndex stamps
        (hist, None, y),                                                # a timestamps column
        (hist.set_index("timestamps")[COLS], None, y),                  # the frame's index
        (hist[COLS], list(hist["timestamps"]), list(y)),                # plain lists
        (hist[COLS], hist["timestamps"].dt.strftime("%Y-%m-%d %H:%M"), y),  # strings
        # tz-aware stamps: their wall clock is what counts, as with the official .dt accessors
        (hist[COLS], hist["timestamps"].dt.tz_localize("Asia/Shanghai"),
         y.dt.tz_localize("America/New_York")),
    ]
    for df, x, yy in forms:
        out = _predict(predictor, df, x, yy)
        np.testing.assert_array_equal(out.to_numpy(), ref.to_numpy())


def test_future_stamps_inferred_when_absent(predictor, hist, candles):
    out = _predict(predictor, hist, None, None)
    assert list(out.index) == list(_fut(candles))  # 5-minute bars continue within the session


def test_missing_volume_amount_filled_as_official(predictor, hist, candles):
    y = _fut(candles)
    # No amount: volume * mean(open, high, low, close); no volume: both zero.
    amount = hist["volume"] * hist[["open", "high", "low", "close"]].mean(axis=1)
    ref = _predict(predictor, hist[COLS[:5]].assign(amount=amount), hist["timestamps"], y)
    got = _predict(predictor, hist[COLS[:5]], hist["timestamps"], y)
    np.testing.assert_array_equal(got.to_numpy(), ref.to_numpy())
    ref0 = _predict(predictor, hist[COLS[:4]].assign(volume=0.0, amount=0.0), hist["timestamps"], y)
    got0 = _predict(predictor, hist[COLS[:4]], hist["timestamps"], y)
    np.testing.assert_array_equal(got0.to_numpy(), ref0.to_numpy())
    # An amount without a volume goes too, as in the reference, but with a warning naming it.
    with pytest.warns(UserWarning, match="column 'amount' ignored: without a volume column"):
        dropped = _predict(predictor, hist[COLS[:4] + ["amount"]], hist["timestamps"], y)
    np.testing.assert_array_equal(dropped.to_numpy(), ref0.to_numpy())


def test_other_numeric_dtypes_accepted(predictor, hist, candles):
    y = _fut(candles)
    ref = _predict(predictor, hist[COLS], hist["timestamps"], y)
    as_text = hist[COLS].astype(str)        # numbers as strings convert like .astype(float32)
    got = _predict(predictor, as_text, hist["timestamps"], y)
    np.testing.assert_array_equal(got.to_numpy(), ref.to_numpy())
    ints = hist[COLS].assign(volume=hist["volume"].astype(np.int64))
    _predict(predictor, ints, hist["timestamps"], y)


def _raises(exc, match, fn):
    with pytest.raises(exc, match=match) as e:
        fn()
    assert isinstance(e.value, KronosError)
    return e.value


@pytest.mark.parametrize("name,mutate,match", [
    ("not a frame", lambda d: d.to_numpy(), "Input must be a pandas DataFrame"),
    ("no close", lambda d: d.drop(columns=["close"]),
     r"Price columns .* not found in DataFrame .*missing \['close'\]"),
    ("NaN", lambda d: d.assign(close=d["close"].where(d.index != 17)),
     r"contains NaN values in price or volume columns \(first: row 17, column 'close'\)"),
    ("text", lambda d: d.assign(high=d["high"].astype(object).where(d.index != 3, "n/a")),
     r"column 'high', row 3: 'n/a' is not a number"),
    ("datetimes as prices", lambda d: d.assign(open=d["timestamps"]),
     "column 'open' holds datetimes"),
    # numpy casts complex to float by dropping the imaginary part, with only a warning
    ("complex", lambda d: d.assign(low=d["low"] + 1j), "column 'low' holds complex numbers"),
    ("inf", lambda d: d.assign(volume=d["volume"].where(d.index != 9, np.inf)),
     "row 9, field 'volume': not a finite number"),
    ("empty", lambda d: d.iloc[:0], "no rows"),
    ("one row", lambda d: d.iloc[:1], "too few rows"),
    ("unsorted", lambda d: d.iloc[::-1], "timestamps not strictly increasing"),
])
def test_bad_frames(predictor, hist, candles, name, mutate, match):
    df = mutate(hist.copy())
    x = df["timestamps"] if isinstance(df, pd.DataFrame) else hist["timestamps"]
    _raises(ValueError, match, lambda: predictor.predict(df, x, None, pred_len=P))


@pytest.mark.parametrize("x,y,match", [
    (lambda h: h["timestamps"].iloc[:-1], None,
     "Inconsistent lengths: x has 80 rows vs x_timestamp has 79"),
    (lambda h: h["timestamps"].astype("int64") // 10**9, None, "expected datetimes, got numbers"),
    (lambda h: h["timestamps"].where(h.index != 4), None, "row 4 is not a valid timestamp"),
    (lambda h: ["not a date"] * len(h), None, "not datetimes"),
    (lambda h: h["timestamps"], lambda h: h["timestamps"].iloc[:3],
     "y_timestamp length should equal pred_len=6, got 3"),
    (lambda h: h[["timestamps"]], None, "got a DataFrame"),
])
def test_bad_timestamps(predictor, hist, x, y, match):
    yy = y(hist) if y else None
    _raises(ValueError, match, lambda: predictor.predict(hist[COLS], x(hist), yy, pred_len=P))


def test_no_timestamps_anywhere(predictor, hist):
    _raises(ValueError, "neither a DatetimeIndex nor a 'timestamps' column",
            lambda: predictor.predict(hist[COLS], None, None, pred_len=P))


@pytest.mark.parametrize("kw,match", [
    (dict(pred_len=0), "pred_len: must be >= 1"),
    (dict(pred_len="6"), "pred_len: expected an integer"),
    (dict(pred_len=100000), "pred_len must be in 1..max_context"),
    (dict(T=0.0), r"T: must be > 0, got 0.0"),
    (dict(T=1e40), r"T: 1e\+40 is past float32's range"),
    (dict(T=1e-50), r"T: 1e-50 rounds to 0 in float32"),
    (dict(top_p=0.0), r"top_p: must be in \(0, 1\], got 0.0"),
    (dict(top_p=1.5), r"top_p: must be in \(0, 1\], got 1.5"),
    (dict(top_p=1e-50), r"top_p: 1e-50 rounds to 0 in float32"),
    (dict(T=float("nan")), "T: expected a finite number"),
    (dict(top_k=-1), "top_k: must be >= 0"),
    (dict(sample_count=0), r"sample_count: must be in 1\.\.4096, got 0"),
    (dict(seed=-1), "seed: expected an integer"),
    (dict(window="sliding"), "window: expected 'exact' or 'rolling'"),
    (dict(kv_dtype="f16"), "kv_dtype 'f16' is not one of f32, bf16, int8"),
    (dict(kv_dtype=8), "kv_dtype 8 is not one of"),
    (dict(quant="int3"), "quant 'int3' is not one of f32, bf16, int8, fp8, q4"),
    (dict(window=["exact"]), "window: expected 'exact' or 'rolling'"),
    (dict(quantiles=[1.5]), r"quantiles: 1.5 is outside \[0, 1\]"),
    (dict(threads=0), "threads: must be >= 1"),
    (dict(pred_len=10**10), "pred_len: must be <= 2147483647, got 10000000000"),
    (dict(top_k=2**31), "top_k: must be <= 2147483647"),
    (dict(quantiles="0.5"), "quantiles: expected a number or a list of numbers, got '0.5'"),
])
def test_bad_parameters(predictor, hist, kw, match):
    kw.setdefault("pred_len", P)
    _raises(ValueError, match, lambda: predictor.predict(hist, None, None, **kw))


def test_predict_batch_rules(predictor, hist, candles):
    y = _fut(candles)
    _raises(ValueError, "must be list or tuple types",
            lambda: predictor.predict_batch(hist, [hist["timestamps"]], [y], pred_len=P))
    _raises(ValueError, "must have consistent lengths",
            lambda: predictor.predict_batch([hist, hist], [hist["timestamps"]], [y, y], pred_len=P))
    bad = hist.assign(low=hist["low"].where(hist.index != 2))
    _raises(ValueError, r"DataFrame at index 1 contains NaN values .*row 2, column 'low'",
            lambda: predictor.predict_batch([hist, bad], [None, None], [y, y], pred_len=P))
    _raises(ValueError, "Input at index 1 is not a pandas DataFrame",
            lambda: predictor.predict_batch([hist, [1, 2]], [None, None], [y, y], pred_len=P))
    _raises(ValueError, "y_timestamp length at index 0 should equal pred_len=6, got 2",
            lambda: predictor.predict_batch([hist], [None], [y.iloc[:2]], pred_len=P))
    # An engine error names the series.
    rev = hist.iloc[::-1]
    _raises(ValueError, "series 1: row 1: timestamps not strictly increasing",
            lambda: predictor.predict_batch([hist, rev], [None, None], [y, y], pred_len=P))
    assert predictor.predict_batch([], [], [], pred_len=P) == []


def test_predict_batch_equals_predict_and_allows_mixed_lengths(predictor, hist, candles):
    # Relaxation of the official rule: histories of different lengths in one call.
    y = _fut(candles)
    short = hist.iloc[30:].reset_index(drop=True)
    batch = predictor.predict_batch([hist, short, hist], [None] * 3, [y] * 3, pred_len=P,
                                    sample_count=2, seed=5)
    for df, got in zip([hist, short, hist], batch):
        one = _predict(predictor, df, None, y)
        np.testing.assert_array_equal(got.to_numpy(), one.to_numpy())


def test_extras(predictor, hist, candles):
    y = _fut(candles)
    r = _predict(predictor, hist, None, y, sample_count=5, return_paths=True,
                 quantiles=[0.1, 0.5, 0.9])
    assert isinstance(r, kronos.Forecast)
    assert r.s1.shape == r.s2.shape == (5, P) and r.s1.dtype == np.int32
    assert r.history_s1.shape == (len(hist),)
    assert len(r.paths) == 5 and all(list(p.columns) == COLS for p in r.paths)
    stack = np.stack([p.to_numpy(np.float64) for p in r.paths])
    assert (r.quantiles[0.1].to_numpy() <= r.quantiles[0.9].to_numpy() + 1e-9).all()
    np.testing.assert_allclose(r.quantiles[0.5].to_numpy(), np.median(stack, axis=0), rtol=1e-12)
    assert r.stats["decode_tokens"] > 0
    # The step profile comes through as plain numbers (the C struct mirrored field by field).
    prof = r.stats["profile"]
    assert prof["parts"]["gemm"]["flops"] > 0 and prof["parts"]["gemm"]["calls"] > 0
    assert sum(p["seconds"] for p in prof["parts"].values()) == pytest.approx(
        prof["seconds_steps"], rel=1e-6)
    # Another seed gives other paths; the same seed the same ones.
    r2 = _predict(predictor, hist, None, y, sample_count=5, return_paths=True, seed=6)
    assert not np.array_equal(r.s1, r2.s1)
    r3 = _predict(predictor, hist, None, y, sample_count=5, return_paths=True)
    np.testing.assert_array_equal(r.s1, r3.s1)
    # Precision extras run, and stay close to f32 on this small model.
    for kw in (dict(kv_dtype="bf16"), dict(quant="int8"), dict(window="rolling"), dict(threads=2)):
        out = _predict(predictor, hist, None, y, top_k=1, **kw)
        assert np.isfinite(out.to_numpy()).all(), kw


def test_from_pretrained_errors_and_hub_cache(tmp_path, monkeypatch):
    _raises(KronosIOError, "no such directory",
            lambda: Kronos.from_pretrained(str(tmp_path / "nope")))
    _raises(KronosIOError, "no config.json", lambda: Kronos.from_pretrained(str(tmp_path)))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    e = _raises(KronosIOError, "run: kronos pull NeoQuasar/Kronos-small",
                lambda: Kronos.from_pretrained("NeoQuasar/Kronos-small"))
    assert isinstance(e, OSError)
    # A snapshot in the hub cache layout (as `kronos pull` or huggingface_hub leaves it).
    for repo, part in (("Kronos-small", "predictor"), ("Kronos-Tokenizer-base", "tokenizer")):
        root = tmp_path / "hf" / "hub" / f"models--NeoQuasar--{repo}"
        snap = root / "snapshots" / "abc123"
        snap.mkdir(parents=True)
        (root / "refs").mkdir()
        (root / "refs" / "main").write_text("abc123")
        for f in ("config.json", "model.safetensors"):
            os.symlink(os.path.join(DEMO, part, f), snap / f)
    m = Kronos.from_pretrained("NeoQuasar/Kronos-small")
    t = KronosTokenizer.from_pretrained("NeoQuasar/Kronos-Tokenizer-base")
    assert m.path.endswith("abc123") and t.path.endswith("abc123")
    kronos.KronosPredictor(m, t, threads=1).close()
    # A revision may not climb out of the repository's folder.
    for rev in ("../../../etc", "/etc", "a/../b"):
        _raises(InvalidArgumentError, "not a valid revision",
                lambda: Kronos.from_pretrained("NeoQuasar/Kronos-small", revision=rev))
    _raises(InvalidArgumentError, "revision must be a string",
            lambda: Kronos.from_pretrained("NeoQuasar/Kronos-small", revision=3))
    # A NUL would end the C string early: "main\0x" once resolved as "main".
    _raises(InvalidArgumentError, "holds a NUL character",
            lambda: Kronos.from_pretrained("NeoQuasar/Kronos-small", revision="main\0x"))
    # A pull killed halfway: the snapshot lacks the weights. It is not a checkpoint, and the
    # message says what to run.
    root = tmp_path / "hf" / "hub" / "models--NeoQuasar--Kronos-base"
    (root / "snapshots" / "def456").mkdir(parents=True)
    (root / "refs").mkdir()
    (root / "refs" / "v1").write_text("def456")
    os.symlink(os.path.join(DEMO, "predictor", "config.json"),
               root / "snapshots" / "def456" / "config.json")
    _raises(KronosIOError, "run: kronos pull NeoQuasar/Kronos-base --revision v1",
            lambda: Kronos.from_pretrained("NeoQuasar/Kronos-base", revision="v1"))
    # A ref whose commit would name a path outside snapshots/ is not followed.
    (root / "refs" / "evil").write_text("../../../../etc")
    _raises(KronosIOError, "is not in the hub cache",
            lambda: Kronos.from_pretrained("NeoQuasar/Kronos-base", revision="evil"))


def test_model_load_error_carries_c_message(tmp_path):
    bad = tmp_path / "pred"
    bad.mkdir()
    (bad / "config.json").write_text("{}")
    (bad / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    tok = KronosTokenizer.from_pretrained(DEMO)
    with pytest.raises(KronosError) as e:
        kronos.KronosPredictor(Kronos.from_pretrained(str(bad)), tok)
    assert e.value.status < 0 and str(bad) in str(e.value)


def test_status_mapping():
    assert isinstance(errors.from_status(-1, "m"), ValueError)
    assert isinstance(errors.from_status(-3, "m"), ValueError)
    assert isinstance(errors.from_status(-2, "m"), OSError)
    assert isinstance(errors.from_status(-10, "m"), TimeoutError)
    assert isinstance(errors.from_status(-5, "m"), MemoryError)
    for st in range(-1, -12, -1):
        e = errors.from_status(st, "msg")
        assert type(e) is not KronosError, f"status {st} has no class of its own"
        assert isinstance(e, KronosError) and e.status == st and str(e) == "msg"
    assert type(errors.from_status(-99, "x")) is KronosError


def test_context_params_mirror_the_c_struct():
    # kr_context_params is returned by value: a field missing in the ctypes mirror shifts the
    # ones after it (and the C side writes past the Python buffer).
    from kronos import _lib
    cp = _lib.kr_context_default_params()
    assert cp.max_batch_tokens == 4096 and cp.prefix_cache == 1
    assert cp.background_min_rows == 8 and cp.background_step_rows == 256 and cp.tune == 0
    assert cp.target_queue_p95_s == 0.1 and cp.target_ttft_p95_s == 2.0
    assert cp.profile == 1


def _dst_frame(candles, n=100):
    # Hourly bars through the end of US summer time (2024-11-03 01:00 comes twice).
    ts = pd.date_range("2024-11-01 00:00", periods=n + P, freq="h", tz="UTC").tz_convert(
        "America/New_York")
    d = candles[COLS].iloc[:n].reset_index(drop=True)
    return d, pd.Series(ts[:n]), pd.Series(ts[n:])


def test_tz_aware_stamps_across_summer_time_end(predictor, candles):
    d, x, y = _dst_frame(candles)
    wall = x.dt.tz_localize(None)
    assert (wall.diff().iloc[1:] <= pd.Timedelta(0)).any()  # the wall clock repeats 01:00
    out = _predict(predictor, d, x, y)
    assert (out.index == pd.DatetimeIndex(y)).all()
    # The model reads the wall clock's calendar fields (as the official .dt.hour etc.): the
    # same as naive stamps with those fields that do increase -- here the bars before the
    # repeated hour moved back 28 years (same weekdays, days and months in 1901-2099).
    rep = int(np.flatnonzero(np.diff(wall.to_numpy()) <= np.timedelta64(0))[0]) + 1
    ref_x = wall.copy()
    ref_x.iloc[:rep] = ref_x.iloc[:rep] - pd.DateOffset(years=28)
    assert (ref_x.diff().iloc[1:] > pd.Timedelta(0)).all()
    ref = _predict(predictor, d, ref_x, y.dt.tz_localize(None))
    np.testing.assert_array_equal(out.to_numpy(), ref.to_numpy())
    # Future stamps inferred from the history: the wall clock's next hours.
    got = _predict(predictor, d, x, None)
    assert list(got.index) == list(y.dt.tz_localize(None))
    # A future across the change, given tz-aware, likewise.
    d2, x2, y2 = _dst_frame(candles, n=50)
    assert (y2.dt.tz_localize(None).diff().iloc[1:] <= pd.Timedelta(0)).any()
    out2 = _predict(predictor, d2, x2, y2)
    y2_wall = y2.dt.tz_localize(None)
    after = int(np.flatnonzero(y2_wall.diff().iloc[1:] <= pd.Timedelta(0))[0]) + 1
    ref_y2 = y2_wall.where(y2.index < after, y2_wall + pd.DateOffset(years=28))
    ref2 = _predict(predictor, d2, x2.dt.tz_localize(None), ref_y2)
    np.testing.assert_array_equal(out2.to_numpy(), ref2.to_numpy())


def test_tz_aware_stamps_out_of_order_refused(predictor, candles):
    d, x, _ = _dst_frame(candles)
    x = x.copy()
    x.iloc[[40, 41]] = x.iloc[[41, 40]].to_numpy()
    _raises(ValueError, r"x_timestamp: row 41: timestamps not strictly increasing",
            lambda: predictor.predict(d, x, None, pred_len=P))


def test_sub_second_stamps(predictor, hist, candles):
    """The engine's stamps are whole seconds: fractions are dropped silently while the stamps
    stay apart (the model reads minutes and up), and named when two then coincide."""
    x = hist["timestamps"] + pd.Timedelta(milliseconds=250)
    y = _fut(candles) + pd.Timedelta(milliseconds=750)
    out = _predict(predictor, hist[COLS], x, y)
    ref = _predict(predictor, hist[COLS], hist["timestamps"], _fut(candles))
    np.testing.assert_array_equal(out.to_numpy(), ref.to_numpy())
    half = pd.Series(pd.date_range("2024-01-02 09:30", periods=len(hist), freq="500ms"))
    _raises(ValueError, r"x_timestamp: row 1: .* are the same second; the engine's timestamps "
            "are whole seconds", lambda: _predict(predictor, hist[COLS], half, _fut(candles)))


def test_batch_errors_name_the_callers_series(predictor, candles):
    h = candles.iloc[:200].reset_index(drop=True)
    lens = [100, 80, 100]
    dfs = [h[COLS].iloc[:n].copy() for n in lens]
    xs = [h["timestamps"].iloc[:n] for n in lens]
    dfs[2].loc[7, "close"] = np.inf  # the second of the 100-row engine call
    _raises(ValueError, r"^series 2: row 7, field 'close': not a finite number",
            lambda: predictor.predict_batch(dfs, xs, [None] * 3, pred_len=P))
    dfs[2].loc[7, "close"] = 11.0
    dfs[1].loc[3, "open"] = np.inf  # alone in its engine call: the engine names no series
    _raises(ValueError, r"^series 1: row 3, field 'open': not a finite number",
            lambda: predictor.predict_batch(dfs, xs, [None] * 3, pred_len=P))


def test_forecast_repr_without_paths(predictor, hist):
    r = _predict(predictor, hist, None, None, quantiles=[0.5])
    assert r.s1 is None and repr(r) == "Forecast(pred_len=6, quantiles=[0.5])"
    r = _predict(predictor, hist, None, None, return_paths=True)
    assert repr(r) == "Forecast(pred_len=6, paths=2, quantiles=[])"


@pytest.mark.parametrize("kw,match", [
    (dict(clip=1e40), r"clip: 1e\+40 is past float32's range"),
    (dict(clip=0), r"clip: must be > 0, got 0.0"),
    (dict(max_context=0), r"max_context: must be in 1\.\.65536, got 0"),
])
def test_bad_predictor_parameters(demo, kw, match):
    _raises(ValueError, match, lambda: kronos.KronosPredictor(*demo, **kw))


def test_checkpoint_path_not_utf8(tmp_path, candles):
    # Linux paths are bytes: a directory named in Latin-1 reaches the library as its bytes
    # (os.fsencode), not as a UnicodeEncodeError.
    d = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    shutil.copytree(DEMO, os.fsdecode(d))
    p = kronos.KronosPredictor(Kronos.from_pretrained(os.fsdecode(d)),
                               KronosTokenizer.from_pretrained(os.fsdecode(d)), threads=1)
    try:
        assert p.predict(candles.iloc[:100], None, None, 4).shape == (4, 6)
    finally:
        p.close()
