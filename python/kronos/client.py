"""A client of `kronos serve` over HTTP (standard library only), for a server or for replicas
behind HAProxy (deploy/haproxy.cfg).

Every forecast and analysis carries an X-Kronos-Series header: the load balancer hashes it, so
requests about one series reach the same replica, whose prefix cache still holds that series'
context (docs/scaling.md). The key is the `series` argument when given (a symbol, an id),
else the symbol of an analysis, else a hash of the first candle -- stable while a history only
grows at its end.

    from kronos.client import Client
    c = Client("http://127.0.0.1:8080")
    fc = c.forecast(df, pred_len=24, paths=8, series="600977.SH")
    report = c.analyze("AAPL", horizon=10)
"""

import email.utils
import hashlib
import json
import math
import numbers
import socket
import time
import urllib.error
import urllib.request

from .errors import InvalidArgumentError, KronosError

__all__ = ["Client", "ServerError", "ServerTimeoutError", "ServerUnreachableError", "series_key"]

# The kr_status closest to an HTTP answer (docs/api.md, "Errors"); others get 0.
_KR_STATUS = {400: -1, 404: -1, 405: -1, 411: -1, 413: -1, 415: -1, 422: -1, 408: -10,
              504: -10, 429: -9, 503: -9, 499: -8, 500: -7}


class ServerError(KronosError):
    """The server's answer was no success (or no valid answer): `http_status` the HTTP status
    (None when none came: see the subclasses), `message` and `field` the server's error object,
    `retry_after` seconds when the server (or the load balancer) said when to retry (a number
    or an HTTP date). `status` stays a kr_status as for every KronosError: the closest one to
    the HTTP status (-1 invalid argument for 400/404/413/422, -9 busy for 429/503, -10 timeout
    for 408/504, -8 cancelled for 499, -7 internal for 500), else 0."""

    def __init__(self, http_status, message, field=None, retry_after=None):
        super().__init__(f"HTTP {http_status}: {message}" if http_status else message)
        self.http_status, self.field, self.retry_after = http_status, field, retry_after
        self.message = message
        self.status = _KR_STATUS.get(http_status, 0)


class ServerTimeoutError(ServerError, TimeoutError):
    """No answer within the client's `timeout` (http_status None, status -10)."""

    def __init__(self, message):
        super().__init__(None, message)
        self.status = -10


class ServerUnreachableError(ServerError, ConnectionError):
    """No connection to the server (refused, unknown host, reset; http_status None)."""

    def __init__(self, message):
        super().__init__(None, message)


def _retry_after(value):
    """Retry-After in seconds: a number, or an HTTP date (seconds from now, at least 0)."""
    if not value:
        return None
    value = value.strip()
    try:
        secs = float(value)
        return secs if math.isfinite(secs) and secs >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_of(text):
    """(message, field) from an error body: {"error": {...}}, {"error": "text"}, else text."""
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()[:200], None
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        msg = err.get("message")
        return (msg if isinstance(msg, str) else json.dumps(msg)), err.get("field")
    if isinstance(err, str):
        return err, None
    return text.strip()[:200], None


def _wall_clock(values):
    """Datetimes as the naive wall-clock ISO text predict reads them as (tz-aware ones at their
    own wall clock, to the second), None for NaT."""
    import pandas as pd
    idx = pd.DatetimeIndex(values)
    if idx.tz is not None:
        idx = idx.tz_localize(None)
    secs = idx.values.astype("datetime64[s]")
    return [None if pd.isna(t) else str(t) for t in secs]


def _cell(v):
    """One JSON value: numbers at full precision (repr: a float64 round-trips), numpy scalars
    as Python ones, NaN and None as null."""
    if v is None:
        return None
    if isinstance(v, (bool,)) or type(v).__name__ == "bool_":
        return bool(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        f = float(v)
        return f if math.isfinite(f) else None
    if hasattr(v, "isoformat"):
        return _wall_clock([v])[0]
    return v if isinstance(v, str) else str(v)


def _column(series):
    if series.dtype.kind == "M":
        return _wall_clock(series)
    return [_cell(v) for v in series.tolist()]


def _rows(candles):
    """Candles as the server takes them: a pandas DataFrame becomes its 'split' JSON layout
    (timestamps at their wall clock, numbers at full precision, exactly what predict reads);
    lists, dicts and CSV text go as they are."""
    if not (hasattr(candles, "to_json") and hasattr(candles, "columns")):
        return candles
    if len(candles) == 0:
        raise InvalidArgumentError("candles: the DataFrame has no rows")
    cols = [_column(candles.iloc[:, j]) for j in range(candles.shape[1])]
    index = candles.index
    return {"columns": [str(c) for c in candles.columns],
            "index": _wall_clock(index) if index.dtype.kind == "M" else
            [_cell(v) for v in index.tolist()],
            "data": [list(row) for row in zip(*cols)]}


def _json_default(v):
    if isinstance(v, numbers.Number) or hasattr(v, "isoformat"):
        return _cell(v)
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


def _encode(body):
    """The request body as JSON; a field that cannot be sent raises InvalidArgumentError
    naming it."""
    try:
        return json.dumps(body, default=_json_default, allow_nan=False).encode()
    except (TypeError, ValueError):
        pass
    for k, v in body.items():
        try:
            json.dumps(v, default=_json_default, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(f"{k}: cannot be sent as JSON: {e}") from None
    raise InvalidArgumentError("the request cannot be sent as JSON")


def _first(candles):
    if hasattr(candles, "iloc"):
        if len(candles) == 0:
            return None
        row = candles.iloc[0]
        return [str(candles.index[0])] + [str(v) for v in row.tolist()]
    if isinstance(candles, str):
        lines = candles.splitlines()
        return lines[1] if len(lines) > 1 else None
    if isinstance(candles, dict):
        return [candles[k][0] if isinstance(candles[k], list) and candles[k] else None
                for k in sorted(candles)]
    if isinstance(candles, (list, tuple)) and candles:
        return candles[0]
    return None


def series_key(symbol=None, candles=None):
    """The X-Kronos-Series value: the symbol (upper case), else 'h' + 8 hex digits of a hash of
    the first candle, else '' (then the balancer goes round robin)."""
    if symbol:
        return str(symbol).upper()
    first = _first(candles) if candles is not None else None
    if first is None:
        return ""
    text = json.dumps(first, default=str, separators=(",", ":"))
    return "h" + hashlib.sha1(text.encode()).hexdigest()[:8]


class Client:
    """`url`: the server or the balancer (http://host:port). `api_key`: sent as a bearer token
    when the server wants one. `timeout`: seconds per request."""

    def __init__(self, url, api_key=None, timeout=300.0):
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def _post(self, path, body, key):
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["X-Kronos-Series"] = key
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url + path, data=_encode(body), headers=headers,
                                     method="POST")
        where = f"POST {self.url}{path}"
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                code, text = r.status, r.read()
        except urllib.error.HTTPError as e:
            message, field = _error_of(e.read().decode(errors="replace"))
            raise ServerError(e.code, message or str(e.reason), field,
                              _retry_after(e.headers.get("Retry-After"))) from None
        except (TimeoutError, socket.timeout):
            raise ServerTimeoutError(f"{where}: no answer within {self.timeout:g} s") from None
        except urllib.error.URLError as e:
            if isinstance(e.reason, (TimeoutError, socket.timeout)):
                raise ServerTimeoutError(
                    f"{where}: no answer within {self.timeout:g} s") from None
            raise ServerUnreachableError(f"{where}: {e.reason}") from None
        except (ConnectionError, OSError) as e:  # reset or closed while reading the answer
            raise ServerUnreachableError(f"{where}: {e}") from None
        try:
            return json.loads(text)
        except ValueError:
            raise ServerError(code, "the answer is not JSON: " +
                              text[:200].decode(errors="replace")) from None

    def forecast(self, candles, pred_len, series=None, **fields):
        """POST /v1/forecast: `candles` a DataFrame (timestamps column or index), rows, columns
        or CSV text; other fields (paths, seed, quantiles, ...) as docs/api.md names them."""
        body = dict(fields, candles=_rows(candles), pred_len=pred_len)
        return self._post("/v1/forecast", body, series_key(series, candles))

    def analyze(self, symbol=None, candles=None, series=None, **fields):
        """POST /v1/analyze: a stored `symbol`, or `candles` (then `symbol` is the label)."""
        body = dict(fields)
        if symbol is not None:
            body["symbol"] = symbol
        if candles is not None:
            body["candles"] = _rows(candles)
        body.setdefault("format", "json")
        return self._post("/v1/analyze", body, series_key(series or symbol, candles))
