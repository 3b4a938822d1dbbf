"""kronos: the Kronos K-line forecasting models on the kronos C engine (libkronos.so).

A script written for the official model/kronos.py runs with its import line changed to
    from kronos import Kronos, KronosTokenizer, KronosPredictor
and the official module's functions (auto_regressive_inference, calc_time_stamps,
top_k_top_p_filtering, sample_from_logits) come from the same import. What stays different:
docs/python.md.
"""

from ._lib import library_path, version as engine_version
from .errors import (BusyError, CancelledError, FormatError, InternalError, InvalidArgumentError,
                     KronosError, KronosIOError, KronosMemoryError, KronosTimeoutError,
                     ModelError, NumericError, UnavailableError, UnsupportedError)
from .finetune import finetune
from .model import Kronos, KronosTokenizer
from .predictor import Forecast, KronosPredictor
from ._backtest import BacktestResult, backtest
from .functions import (auto_regressive_inference, calc_time_stamps, sample_from_logits,
                        top_k_top_p_filtering)

__version__ = "0.3.0"
__all__ = ["Kronos", "KronosTokenizer", "KronosPredictor", "Forecast", "finetune", "backtest",
           "BacktestResult", "KronosError",
           "InvalidArgumentError", "KronosIOError", "FormatError", "ModelError",
           "KronosMemoryError", "UnsupportedError", "InternalError", "CancelledError",
           "BusyError", "KronosTimeoutError", "UnavailableError", "NumericError", "engine_version",
           "library_path", "auto_regressive_inference", "calc_time_stamps",
           "sample_from_logits", "top_k_top_p_filtering"]
