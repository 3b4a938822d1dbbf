"""Shared fixtures. The package is imported from the installed copy or from PYTHONPATH; the
library from $KRONOS_LIBRARY, the bundled copy or the build tree (kronos._lib)."""

import os
import shutil

import pandas as pd
import pytest

from kronos import Kronos, KronosPredictor, KronosTokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
DEMO = os.path.join(ROOT, "models", "kronos-demo")


@pytest.fixture(scope="session")
def candles():
    """The regression CSV read as the official examples read it (float64, parsed stamps)."""
    df = pd.read_csv(os.path.join(FIXTURES, "regression_input.csv"))
    df["timestamps"] = pd.to_datetime(df["timestamps"])
    return df


@pytest.fixture(scope="session")
def demo():
    return Kronos.from_pretrained(DEMO), KronosTokenizer.from_pretrained(DEMO)


@pytest.fixture(scope="session")
def predictor(demo):
    p = KronosPredictor(*demo, threads=1)
    yield p
    p.close()


@pytest.fixture(scope="session")
def kronos_cli():
    """The kronos binary: $KRONOS_CLI, the build tree's, or the one on PATH."""
    for c in (os.environ.get("KRONOS_CLI"), os.path.join(ROOT, "build", "release", "kronos"),
              shutil.which("kronos")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    pytest.skip("no kronos binary (set KRONOS_CLI)")
