"""The wheel: with libkronos.so.0 bundled it holds machine code, so it is tagged for this
platform (py3-none-<platform>, not py3-none-any), and building it leaves no build/ or
kronos.egg-info in the source tree."""

import importlib.util
import os
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT
from kronos import library_path

SRC = os.path.join(ROOT, "python")


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
