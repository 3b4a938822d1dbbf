"""Installs the kronos package; bundles libkronos.so.0 next to it when one is found.

Offline, with Debian's python3-setuptools:  python3 -m pip install --no-build-isolation ./python
The library bundled is $KRONOS_LIBRARY if set, else the source tree's build/release/lib/
libkronos.so.0 if it was built; otherwise none is bundled and the package finds the library on
the system loader path at import (e.g. after `cmake --install build/release --prefix /usr/local`
and ldconfig).
"""

import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

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
        else:
            print("kronos: no libkronos.so.0 bundled; the system loader path will be used")


setup(
    name="kronos",
    version="0.2.0",
    description="Kronos K-line forecasting on the kronos C engine (official KronosPredictor API)",
    packages=["kronos"],
    python_requires=">=3.9",
    install_requires=["numpy", "pandas"],
    extras_require={"dask": ["distributed"]},
    cmdclass={"build_py": BuildPy},
    zip_safe=False,
)
