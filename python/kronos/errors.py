"""Exceptions: one class per kr_status of include/kronos/status.h, all under KronosError.

Bad input raises a subclass of ValueError (as the official KronosPredictor raises ValueError),
so `except ValueError` written for the official API keeps working.
"""


class KronosError(Exception):
    """A kronos failure. `status` is the C kr_status (0 for errors found in Python), `message`
    the C message naming the place (file, series, row, field)."""

    status = 0

    def __init__(self, message):
        super().__init__(message)
        self.message = message


class InvalidArgumentError(KronosError, ValueError):
    """KR_ERR_INVALID_ARG, and invalid input found before calling the engine."""
    status = -1


class KronosIOError(KronosError, OSError):
    """KR_ERR_IO: a file could not be opened, read or mapped."""
    status = -2


class FormatError(KronosError, ValueError):
    """KR_ERR_FORMAT: malformed file or input data."""
    status = -3


class ModelError(KronosError):
    """KR_ERR_MODEL: a checkpoint lacks a tensor or has the wrong shape or dtype."""
    status = -4


class KronosMemoryError(KronosError, MemoryError):
    """KR_ERR_NOMEM."""
    status = -5


class UnsupportedError(KronosError):
    """KR_ERR_UNSUPPORTED: valid but not supported by this build."""
    status = -6


class InternalError(KronosError):
    """KR_ERR_INTERNAL: a broken invariant (a bug: please report it)."""
    status = -7


class CancelledError(KronosError):
    """KR_ERR_CANCELLED."""
    status = -8


class BusyError(KronosError):
    """KR_ERR_BUSY: a queue or memory budget is full; retry later."""
    status = -9


class KronosTimeoutError(KronosError, TimeoutError):
    """KR_ERR_TIMEOUT."""
    status = -10


class UnavailableError(KronosError):
    """KR_ERR_UNAVAILABLE: a server it needs (the candle store's database) is down or
    unreachable; retry later."""
    status = -11


class NumericError(KronosError, ArithmeticError):
    """KR_ERR_NUMERIC: a computation produced NaN or infinity (a fine-tune's loss or
    gradients); nothing was updated by it."""
    status = -12


_BY_STATUS = {c.status: c for c in (InvalidArgumentError, KronosIOError, FormatError, ModelError,
                                    KronosMemoryError, UnsupportedError, InternalError,
                                    CancelledError, BusyError, KronosTimeoutError,
                                    UnavailableError, NumericError)}


def from_status(status, message):
    e = _BY_STATUS.get(status, KronosError)(message)
    e.status = status
    return e
