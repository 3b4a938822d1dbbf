"""Installs the kronos package; bundles libkronos.so.0 (and libkronos-tools.so.0 beside it, for
kronos.finetune and kronos.backtest) next to it when one is found.

Offline, with Debian's python3-setuptools:  python3 -m pip install --no-build-isolation ./python
The library bundled is $KRONOS_LIBRARY if set, else the source tree's build/release/lib/
libkronos.so.0 if it was built; otherwise none is bundled and the package finds the library on
the system loader path at import (e.g. after `cmake --install build/release --prefix /usr/local`
and ldconfig).

A wheel with the library bundled holds machine code: it is tagged py3-none-<platform> (any
Python 3, this machine's platform); without it, py3-none-any. The build's scratch files
(build/, kronos.egg-info) go to a temporary directory, not into the source tree.
"""

import atexit
import os
import shutil
import sys
import tempfile

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: only `setup.py install`-style builds
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))


def _library():
    env = os.environ.get("KRONOS_LIBRARY")
    if env:
        return env
    built = os.path.join(HERE, "..", "build", "release", "lib", "libkronos.so.0")
    return built if os.path.exists(built) else None


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = _library()
        if lib:
            dest = os.path.join(self.build_lib, "kronos", "libkronos.so.0")
            shutil.copyfile(os.path.realpath(lib), dest)
            print(f"kronos: bundled {lib}")
            # The libraries on top (fine-tuning, backtest), when built beside it.
            tools = os.path.join(os.path.dirname(lib), "libkronos-tools.so.0")
            if os.path.exists(tools):
                shutil.copyfile(os.path.realpath(tools),
                                os.path.join(self.build_lib, "kronos", "libkronos-tools.so.0"))
                print(f"kronos: bundled {tools}")
        else:
            print("kronos: no libkronos.so.0 bundled; the system loader path will be used")


class BinaryDistribution(Distribution):
    """With the library bundled the package is no pure-Python one: the wheel gets a platform
    tag and installs into platlib."""

    def has_ext_modules(self):
        return _library() is not None


cmdclass = {"build_py": BuildPy}
if bdist_wheel is not None:
    class BdistWheel(bdist_wheel):
        def get_tag(self):
            python, abi, plat = super().get_tag()
            # ctypes, no extension module: any Python 3 of this platform loads it.
            return ("py3", "none", plat) if _library() else (python, abi, plat)

    cmdclass["bdist_wheel"] = BdistWheel


def _scratch():
    """A temporary build directory for commands that write into the source tree by default;
    `setup.py build --build-base DIR` and similar still win."""
    if any(a.startswith(("--build-base", "-b", "--egg-base", "-e")) for a in sys.argv[1:]):
        return {}
    tmp = tempfile.mkdtemp(prefix="kronos-python-build-")
    atexit.register(shutil.rmtree, tmp, True)
    return {"build": {"build_base": os.path.join(tmp, "build")},
            "egg_info": {"egg_base": tmp}}


setup(
    name="kronos",
    version="0.3.0",
    description="Kronos K-line forecasting on the kronos C engine (official KronosPredictor API)",
    packages=["kronos"],
    python_requires=">=3.9",
    install_requires=["numpy", "pandas"],
    extras_require={"dask": ["distributed"]},
    cmdclass=cmdclass,
    distclass=BinaryDistribution,
    options=_scratch(),
    zip_safe=False,
)
