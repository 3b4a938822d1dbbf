"""kronos: the Kronos K-line forecasting models on the kronos C engine (libkronos.so).

A script written for the official model/kronos.py runs with its import line changed to
    from kronos import Kronos, KronosTokenizer, KronosPredictor
"""

from ._lib import library_path, version as engine_version
from .errors import (BusyError, CancelledError, FormatError, InternalError, InvalidArgumentError,
                     KronosError, KronosIOError, KronosMemoryError, KronosTimeoutError,
                     ModelError, UnavailableError, UnsupportedError)
from .model import Kronos, KronosTokenizer
from .predictor import Forecast, KronosPredictor

__version__ = "0.3.0"
__all__ = ["Kronos", "KronosTokenizer", "KronosPredictor", "Forecast", "KronosError",
           "InvalidArgumentError", "KronosIOError", "FormatError", "ModelError",
           "KronosMemoryError", "UnsupportedError", "InternalError", "CancelledError",
           "BusyError", "KronosTimeoutError", "UnavailableError", "engine_version",
           "library_path"]
