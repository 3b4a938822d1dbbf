"""The wheel: with libkronos.so.0 bundled it holds machine code, so it is tagged for this
platform (py3-none-<platform>, not py3-none-any), and building it leaves no build/ or
kronos.egg-info in the source tree."""

import importlib.util
import os
import subprocess
import sys
import zipfile

import pytest

from conftest import DEMO, FIXTURES, ROOT
from kronos import library_path

SRC = os.path.join(ROOT, "python")
AAPL = os.path.join(FIXTURES, "csv", "aapl_1d_2019.csv")


def test_wheel_is_platform_specific_and_builds_out_of_tree(tmp_path):
    if not os.path.isfile(os.path.join(SRC, "setup.py")):
        pytest.skip("no python/setup.py (needs a source checkout)")
    if not (importlib.util.find_spec("pip") and importlib.util.find_spec("wheel")):
        pytest.skip("pip or wheel missing")
    if not os.path.isfile(library_path):
        pytest.skip("the library came from the loader path: nothing to bundle")
    before = set(os.listdir(SRC))
    env = dict(os.environ, KRONOS_LIBRARY=library_path)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation",
                    "--no-index", "--no-deps", "-w", str(tmp_path), SRC],
                   check=True, env=env, capture_output=True)
    assert set(os.listdir(SRC)) == before
    (whl,) = [f for f in os.listdir(tmp_path) if f.endswith(".whl")]
    assert whl.startswith("kronos-") and "-py3-none-" in whl and not whl.endswith("-any.whl")
    with zipfile.ZipFile(tmp_path / whl) as z:
        assert "kronos/libkronos.so.0" in z.namelist()
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))).decode()
    assert "Root-Is-Purelib: false" in meta


def test_wheel_bundles_the_tools_library_beside_the_core(tmp_path):
    """kronos.finetune and kronos.backtest call libkronos-tools.so.0: the wheel carries it
    next to libkronos.so.0 when the build made one."""
    tools = os.path.join(os.path.dirname(library_path), "libkronos-tools.so.0")
    if not os.path.isfile(os.path.join(SRC, "setup.py")) or not os.path.isfile(tools):
        pytest.skip("no source checkout, or no libkronos-tools.so.0 beside the library")
    if not (importlib.util.find_spec("pip") and importlib.util.find_spec("wheel")):
        pytest.skip("pip or wheel missing")
    env = dict(os.environ, KRONOS_LIBRARY=library_path)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation",
                    "--no-index", "--no-deps", "-w", str(tmp_path), SRC],
                   check=True, env=env, capture_output=True)
    (whl,) = [f for f in os.listdir(tmp_path) if f.endswith(".whl")]
    with zipfile.ZipFile(tmp_path / whl) as z:
        assert "kronos/libkronos-tools.so.0" in z.namelist()


def test_the_core_library_alone_forecasts_and_finetune_says_what_is_missing(tmp_path):
    """With libkronos.so.0 and no libkronos-tools.so.0 beside it (an embedder's install of
    the core), the package imports and forecasts; finetune and backtest raise
    UnsupportedError naming the missing library instead of failing at import."""
    if not os.path.isfile(library_path):
        pytest.skip("the library came from the loader path")
    core = tmp_path / "libkronos.so.0"
    core.write_bytes(open(os.path.realpath(library_path), "rb").read())
    script = f"""
import pandas as pd
import kronos
from kronos import _lib
assert _lib.tools is None, _lib.tools
p = kronos.KronosPredictor(kronos.Kronos.from_pretrained({DEMO!r}),
                           kronos.KronosTokenizer.from_pretrained({DEMO!r}), threads=1)
df = pd.read_csv({AAPL!r})
df["timestamps"] = pd.to_datetime(df["timestamps"])
x, y = df.iloc[:64], pd.Series(pd.date_range(df["timestamps"].iloc[63], periods=4, freq="D")[1:])
fc = p.predict(x[["open", "high", "low", "close", "volume"]], x["timestamps"], y, pred_len=3,
               verbose=False, seed=1)
assert len(fc) == 3, fc
for call in (lambda: kronos.finetune(data="x.csv"),
             lambda: kronos.backtest({{"AAPL": df}}, p, horizon=4, paths=2)):
    try:
        call()
    except kronos.UnsupportedError as e:
        assert "libkronos-tools.so.0" in str(e), e
    else:
        raise AssertionError("no UnsupportedError")
print("ok")
"""
    env = dict(os.environ, KRONOS_LIBRARY=str(core))
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(tmp_path),
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
