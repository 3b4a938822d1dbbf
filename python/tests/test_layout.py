"""The ctypes mirrors of include/kronos.h's structures against the C compiler's layout: for
every structure kronos._lib mirrors, sizeof and each field's offset (a field missing at the end
of kr_model_info once let kr_model_get_info write 376 bytes into a 112-byte buffer)."""

import ctypes
import os
import shutil
import subprocess

import pytest

from conftest import DEMO, ROOT
from kronos import _backtest, _lib, errors
from kronos.model import load_model


def _mirrored():
    return sorted((name, cls) for module in (_lib, _backtest) for name, cls in vars(module).items()
                  if isinstance(cls, type) and issubclass(cls, ctypes.Structure)
                  and name.startswith("kr_"))


def test_every_structure_is_checked():
    names = {n for n, _ in _mirrored()}
    assert {"kr_error", "kr_model_params", "kr_model_info", "kr_series", "kr_forecast_params",
            "kr_context_params", "kr_profile_entry", "kr_step_profile",
            "kr_forecast_stats", "kr_request_params", "kr_finetune_key",
            "kr_finetune_progress", "kr_finetune_result",
            "kr_candles", "kr_backtest_series", "kr_backtest_progress", "kr_backtest_params"} <= names


def test_layouts_equal_the_c_compilers(tmp_path):
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    include = os.path.join(ROOT, "include")
    if not cc or not os.path.isfile(os.path.join(include, "kronos.h")):
        pytest.skip("no C compiler or no include/kronos.h (needs a source checkout)")
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "kronos.h"',
             '#include "kronos/finetune.h"', '#include "kronos/backtest.h"', "int main(void) {"]
    expected = []
    for name, cls in _mirrored():
        lines.append(f'    printf("{name} %zu\\n", sizeof({name}));')
        expected.append(f"{name} {ctypes.sizeof(cls)}")
        for field, _ in cls._fields_:
            lines.append(f'    printf("{name}.{field} %zu\\n", offsetof({name}, {field}));')
            expected.append(f"{name}.{field} {getattr(cls, field).offset}")
    lines += ["    return 0;", "}"]
    src, exe = tmp_path / "layout.c", tmp_path / "layout"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([cc, "-std=c11", "-I", include, "-o", str(exe), str(src)], check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    assert [g for g in got if g] == expected


def test_info_has_demo_and_source():
    m = load_model(os.path.join(DEMO, "predictor"), os.path.join(DEMO, "tokenizer"))
    info = m.info()
    assert info["demo"] is True and "kronos-demo" in info["source"]
    assert info["quant"] == "f32" and info["d_model"] > 0 and info["n_params"] > 0
    # The public way to it (README): KronosPredictor.info(), for its default weight format.
    from kronos import Kronos, KronosPredictor, KronosTokenizer
    p = KronosPredictor(Kronos.from_pretrained(DEMO), KronosTokenizer.from_pretrained(DEMO))
    assert p.info() == dict(info, load_seconds=p.info()["load_seconds"])
    q = KronosPredictor(Kronos.from_pretrained(DEMO), KronosTokenizer.from_pretrained(DEMO),
                        quant="int8")
    assert q.info()["quant"] == "int8" and q.info()["demo"] is True
    p.close()
    q.close()


def test_a_larger_c_structure_is_caught_not_overflowed():
    def writes_too_much(p):
        ctypes.memset(p, 0, ctypes.sizeof(_lib.kr_model_info) + 8)
    with pytest.raises(errors.InternalError, match="different versions"):
        _lib.fill(writes_too_much, _lib.kr_model_info)
    exact = _lib.fill(lambda p: ctypes.memset(p, 0, ctypes.sizeof(_lib.kr_model_info)),
                      _lib.kr_model_info)
    assert exact.demo == 0


def test_model_params_mirror():
    mp = _lib.kr_model_default_params()
    assert mp.quant is None and mp.allow_nonfinite == 0


def test_forecast_stats_larger_in_the_library_is_caught(predictor, candles, monkeypatch):
    # kr_forecast_stats is filled at every forecast: a library whose structure grew (another
    # version) must be noticed as kr_model_info's is, not write past the Python buffer.
    real = _lib.kr_forecast_get_stats
    size = ctypes.sizeof(_lib.kr_forecast_stats)

    def grown(f, p):
        if isinstance(p, type(ctypes.byref(ctypes.c_int()))):
            pytest.fail("kr_forecast_get_stats got a bare kr_forecast_stats: nothing catches "
                        "a larger C structure (the write would overflow)")
        real(f, p)
        ctypes.memset(p, 0, size + 8)

    monkeypatch.setattr(_lib, "kr_forecast_get_stats", grown)
    with pytest.raises(errors.InternalError, match="kr_forecast_stats.*different versions"):
        predictor.predict(candles.iloc[:100], None, None, 4)
