"""A client of `kronos serve` over HTTP (standard library only), for a server or for replicas
behind HAProxy (deploy/haproxy.cfg).

Every forecast and analysis carries an X-Kronos-Series header: the load balancer hashes it, so
requests about one series reach the same replica, whose prefix cache still holds that series'
context (docs/scaling.md). The key is the `series` argument when given (a symbol, an id),
else the symbol of an analysis, else a hash of the first candle -- stable while a history only
grows at its end.

The candle store of the server (`kronos serve --db`, docs/api.md) is reached the same way:
upload() upserts candles, candles() reads a series back as a DataFrame, symbols() lists the
stored series and delete() removes a series or a range of its stamps; their requests carry the
symbol as the routing key.

    from kronos.client import Client
    c = Client("http://127.0.0.1:8080")
    pred_df = c.forecast(df, x_timestamp, y_timestamp, pred_len=24, sample_count=8,
                         series="600977.SH")           # what KronosPredictor.predict returns
    answer = c.forecast_raw(df, pred_len=24, paths=8)  # the server's JSON answer as a dict
    report = c.analyze("AAPL", horizon=10)
    c.upload("AAPL", df, interval="1d")           # {"new": ..., "replaced": ..., ...}
    history = c.candles("AAPL", interval="1d")    # timestamps, open, ..., as df has them
    c.delete("AAPL", "1d", start="2025-08-04", end="2025-08-05")
"""

import csv
import datetime
import email.utils
import hashlib
import http.client
import io
import json
import math
import numbers
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

from . import _answers, _transport
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
    """No connection to the server (refused, unknown host, reset; http_status None).
    `request_sent`: False when no connection was made (refused, unknown host), so the server
    cannot have seen the request; True when it broke after the request went out."""

    def __init__(self, message, request_sent=True):
        super().__init__(None, message)
        self.request_sent = request_sent


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
        body = _transport.decode_json(text)
    except _transport.BadJSON:
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


# ------------------------------------------------------------------ the candle store

# The store's names (store/store.c): 1-32 letters, digits and . _ - ^ =; an interval is a
# count 1..100000 and a unit. Checked here too, so a bad one fails before any request.
_STORE_NAME = re.compile(r"[A-Za-z0-9._\-^=]{1,32}")
_INTERVAL = re.compile(r"([1-9][0-9]*)(s|m|min|h|d|w|mo)")
_INTERVAL_COUNT_MAX = 100000
# Most rows one GET /v1/candles answers (KR_API_CANDLES_MAX, src/server/analyst_request.h).
CANDLES_LIMIT_MAX = 100000
# Years a stored stamp may have (KR_CANDLE_YEAR_MIN/MAX, src/series/candles.h).
_YEAR_MIN, _YEAR_MAX = 1900, 2200
_EPOCH = datetime.datetime(1970, 1, 1)
# Column names the candle readers take as the timestamp (src/server/analyst_request.c).
_TIME_COLUMNS = ("timestamps", "timestamp", "datetime", "date", "time")


def _symbol(symbol):
    if not isinstance(symbol, str) or not _STORE_NAME.fullmatch(symbol):
        raise InvalidArgumentError(
            f"symbol: expected 1-32 letters, digits or . _ - ^ = (AAPL, 600977.SH, ^GSPC), "
            f"got {symbol!r:.60}")
    return symbol


def _interval(interval, required=True):
    if interval is None and not required:
        return None
    m = _INTERVAL.fullmatch(interval) if isinstance(interval, str) else None
    if not m or len(interval) > 32 or int(m.group(1)) > _INTERVAL_COUNT_MAX:
        raise InvalidArgumentError(
            "interval: expected a count 1..100000 and a unit s, m, min, h, d, w or mo (1d, 5m, "
            f"1h), got {interval!r:.60}")
    return interval


def _range_end(value, name, is_end):
    """One end of a range (delete(), candles()) as (text for the query, seconds or None).

    None is an open end. Text goes as it is: the server reads every stamp form of the candle
    readers, and a date alone as the end takes in its whole day (its errors name `from`/`to`).
    A datetime.date is that day (as the end, the whole of it). A datetime, pandas.Timestamp
    or numpy.datetime64 is its wall clock (tz-aware ones too: the stamps of an uploaded frame
    are stored at their wall clock). An int or float is epoch seconds, the UTC time it names.
    Stored stamps are whole seconds: a start with a fraction rounds up and an end down, so the
    range holds exactly the candles within it."""
    if value is None:
        return None, None
    if isinstance(value, str):
        if not value.strip():
            raise InvalidArgumentError(f"{name}: empty (None leaves the range open)")
        return value.strip(), None
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise InvalidArgumentError(f"{name}: expected a stamp, got a bool")
    if type(value).__name__ == "NaTType" or (type(value).__name__ == "datetime64" and
                                            str(value) == "NaT"):
        raise InvalidArgumentError(f"{name}: NaT is no stamp")
    if type(value).__name__ == "datetime64":
        import pandas as pd
        value = pd.Timestamp(value)
    if isinstance(value, datetime.datetime):
        delta = value.replace(tzinfo=None) - _EPOCH
        secs = delta.days * 86400 + delta.seconds
        if (delta.microseconds or getattr(value, "nanosecond", 0)) and not is_end:
            secs += 1
    elif isinstance(value, datetime.date):
        secs = (value - _EPOCH.date()).days * 86400 + (86400 - 1 if is_end else 0)
    elif isinstance(value, numbers.Integral):
        secs = int(value)
    elif isinstance(value, numbers.Real):
        f = float(value)
        if not math.isfinite(f):
            raise InvalidArgumentError(f"{name}: expected epoch seconds, got {f}")
        secs = math.floor(f) if is_end else math.ceil(f)
    else:
        raise InvalidArgumentError(
            f"{name}: expected a str, datetime, date, pandas.Timestamp, numpy.datetime64 or "
            f"epoch seconds, got {type(value).__name__}")
    try:
        when = _EPOCH + datetime.timedelta(seconds=secs)
    except OverflowError:
        when = None
    if when is None or not _YEAR_MIN <= when.year <= _YEAR_MAX:
        raise InvalidArgumentError(
            f"{name}: {value!r:.60} is outside the years {_YEAR_MIN}-{_YEAR_MAX}")
    return when.isoformat(sep=" "), secs


def _is_frame(candles):
    return hasattr(candles, "to_json") and hasattr(candles, "columns")


def _one_row_csv(frame):
    """A one-row DataFrame as CSV text (header and row): JSON bodies of POST /v1/candles need
    two rows, the CSV reader takes one. Numbers at full precision, the stamp at its wall
    clock; a DatetimeIndex (or one named as a time column) becomes the timestamps column."""
    split = _rows(frame)
    header, row = list(split["columns"]), list(split["data"][0])
    index = frame.index
    if index.dtype.kind == "M" or str(index.name).lower() in _TIME_COLUMNS:
        header.insert(0, "timestamps")
        row.insert(0, split["index"][0])
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerow(["" if v is None else v for v in row])  # str(float) round-trips
    return out.getvalue()


def _all_strings(values):
    try:
        return len(values) > 0 and all(isinstance(v, str) and v for v in values)
    except TypeError:
        return False


def _shape_error(code, what, answer):
    try:
        text = json.dumps(answer)[:200]
    except (TypeError, ValueError, RecursionError):
        text = repr(answer)[:200]
    return ServerError(code, f"the answer is not {what}: " + text)


def _candles_frame(answer):
    """GET /v1/candles' answer as a DataFrame (_answers.candles_frame); ServerError when it is
    no such answer."""
    try:
        return _answers.candles_frame(answer)
    except _answers.BadAnswer as e:
        raise ServerError(200, str(e)) from None


def _is_count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _upserted(answer):
    if not isinstance(answer, dict):
        raise _shape_error(200, "an upsert's counts", answer)
    return answer


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


# Statuses by which the server (or the balancer) says it did nothing with the request and when
# to come back (docs/api.md, "Errors"): retrying them is safe for every method.
_RETRY_STATUSES = (429, 503)

# Methods this API may send again after a connection broke with the request out: its POSTs are
# forecasts and analyses (computations that write nothing, the same answer for the same seed)
# and all-or-nothing upserts (the same rows again leave the same store). A DELETE may have been
# done: sent again it answers 404 for what it deleted, so it is only resent when no connection
# was made at all. Timeouts are retried for GETs alone: a POST that timed out is most likely
# still being computed, and sending it again would double the load of a busy server.
_RESEND_AFTER_BREAK = ("GET", "POST")

# The first wait before trying a server that could not be reached again; doubled per retry.
_UNREACHABLE_FIRST_WAIT = 0.5


def _positive_seconds(name, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v <= 0:
        raise InvalidArgumentError(f"{name}: expected a positive number of seconds, got {v!r:.60}")
    return float(v)


def _check_api_key(api_key):
    # http.client refuses a header value with a line break and quotes the value in its
    # ValueError: the key would land in a traceback. The message here never holds the key.
    if api_key is None:
        return None
    if not isinstance(api_key, str):
        raise InvalidArgumentError(f"api_key: expected a str, got {type(api_key).__name__}")
    if any(c in api_key for c in "\r\n"):
        raise InvalidArgumentError(
            "api_key: contains a line break (a key read from a file needs .strip())")
    if any(ord(c) < 0x20 or ord(c) > 0x7e for c in api_key):
        raise InvalidArgumentError("api_key: only printable ASCII can go in an HTTP header")
    return api_key


class Client:
    """`url`: the server or the balancer (http://host:port). `api_key`: sent as a bearer token
    when the server wants one (in no repr or message), and only to the origin of `url`: a
    redirect to another scheme, host or port is followed without it (as `requests` does).
    `timeout`: seconds per request, all of it -- connecting, sending, the answer's headers
    and body, redirects -- so a server that trickles its answer ends at the deadline
    (ServerTimeoutError). `max_answer_bytes`: the largest answer body read (default 256 MiB);
    a larger Content-Length is refused before anything is read, and a body that runs past it
    as soon as it does (ServerError naming the limit).
    `retries`: how many times a request answered 429 or 503 (the server did nothing with it:
    queue full, draining, store busy) is sent again, after the answer's Retry-After (1 s when
    it names none); an answer asking for more than `max_retry_wait` seconds is raised at once,
    its `retry_after` telling the wait. The same count covers a server that could not be
    reached (a replica restarting): a connection refused is retried for every call, one that
    broke after the request went out for every call but a delete, a timeout for reads; after
    0.5 s, then 1, 2, ... (at most `max_retry_wait`)."""

    def __init__(self, url, api_key=None, timeout=300.0, retries=2, max_retry_wait=10.0,
                 max_answer_bytes=_transport.MAX_ANSWER_BYTES):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidArgumentError(f"url: expected http://host:port, got {url!r:.60}")
        self.url = url.rstrip("/")
        self.api_key = _check_api_key(api_key)
        self.timeout = _positive_seconds("timeout", timeout)
        if isinstance(retries, bool) or not isinstance(retries, numbers.Integral) or \
                not 0 <= retries <= 100:
            raise InvalidArgumentError(
                f"retries: expected an integer in 0..100, got {retries!r:.60}")
        self.retries = int(retries)
        self.max_retry_wait = _positive_seconds("max_retry_wait", max_retry_wait)
        if isinstance(max_answer_bytes, bool) or not isinstance(max_answer_bytes,
                                                                numbers.Integral) or \
                max_answer_bytes < 1:
            raise InvalidArgumentError(f"max_answer_bytes: expected a positive integer, got "
                                       f"{max_answer_bytes!r:.60}")
        self.max_answer_bytes = int(max_answer_bytes)
        self._sleep = time.sleep

    def __repr__(self):
        key = ", api_key=<set>" if self.api_key else ""
        return f"Client({self.url!r}{key}, timeout={self.timeout:g}, retries={self.retries})"

    def _request(self, method, path, key="", query=None, body=None, csv_text=None):
        """_request_once, again after Retry-After while the answer is 429 or 503 (see
        Client)."""
        retried = 0
        while True:
            try:
                return self._request_once(method, path, key, query, body, csv_text)
            except ServerTimeoutError:
                if method != "GET" or retried == self.retries:
                    raise
                wait = min(_UNREACHABLE_FIRST_WAIT * 2 ** retried, self.max_retry_wait)
            except ServerUnreachableError as e:
                if (e.request_sent and method not in _RESEND_AFTER_BREAK) or \
                        retried == self.retries:
                    raise
                wait = min(_UNREACHABLE_FIRST_WAIT * 2 ** retried, self.max_retry_wait)
            except ServerError as e:
                wait = 1.0 if e.retry_after is None else e.retry_after
                if (e.http_status not in _RETRY_STATUSES or retried == self.retries or
                        wait > self.max_retry_wait):
                    raise
            retried += 1
            self._sleep(wait)

    def _request_once(self, method, path, key="", query=None, body=None, csv_text=None):
        """One request; the answer's JSON. `body` goes as JSON, `csv_text` as text/csv; `query`
        (a dict, None values left out) is appended percent-encoded. Every failure raises a
        ServerError (or its timeout / unreachable subclass); the API key is in no message."""
        headers = {"Accept": "application/json"}
        data = None
        if csv_text is not None:
            headers["Content-Type"] = "text/csv"
            data = csv_text.encode()
        elif body is not None:
            headers["Content-Type"] = "application/json"
            data = _encode(body)
        if key:
            headers["X-Kronos-Series"] = key
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        query = {k: v for k, v in (query or {}).items() if v is not None}
        if query:
            path += "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        where = f"{method} {self.url}{path}"
        deadline = _transport.Deadline(self.timeout)
        try:
            return self._exchange(req, where, deadline)
        finally:
            deadline.close()

    def _exchange(self, req, where, deadline):
        def timed_out():
            return ServerTimeoutError(f"{where}: no answer within {self.timeout:g} s")

        code = None
        try:
            with _transport.opener(deadline).open(req, timeout=self.timeout) as r:
                code = r.status
                ctype = r.headers.get("Content-Type") or "no Content-Type"
                text = _transport.read_capped(r, self.max_answer_bytes)
            if deadline.expired:  # a shut-down socket reads as the end of the headers or body
                raise timed_out()
        except _transport.AnswerTooLarge as e:
            if deadline.expired:
                raise timed_out() from None
            size = f"{e.size} bytes" if e.size is not None else "longer"
            raise ServerError(code, f"{where}: the answer is {size}, over max_answer_bytes "
                              f"({self.max_answer_bytes}); raise it (Client(max_answer_bytes=)) "
                              "or ask for less") from None
        except urllib.error.HTTPError as e:
            body = _transport.read_error_body(e)
            if deadline.expired and not body:
                raise timed_out() from None
            message, field = _error_of(body.decode(errors="replace"))
            raise ServerError(e.code, message or str(e.reason), field,
                              _retry_after(e.headers.get("Retry-After"))) from None
        except (TimeoutError, socket.timeout):
            raise timed_out() from None
        except urllib.error.URLError as e:
            if deadline.expired or isinstance(e.reason, (TimeoutError, socket.timeout)):
                raise timed_out() from None
            # Refused or no such host: no connection, so the server never saw the request.
            sent = not isinstance(e.reason, (ConnectionRefusedError, socket.gaierror))
            raise ServerUnreachableError(f"{where}: {e.reason}", request_sent=sent) from None
        except (ConnectionError, OSError) as e:  # reset or closed while reading the answer
            if deadline.expired:
                raise timed_out() from None
            raise ServerUnreachableError(f"{where}: {e}") from None
        except http.client.HTTPException as e:  # an answer cut short, or no HTTP at all
            if deadline.expired:
                raise timed_out() from None
            raise ServerUnreachableError(f"{where}: no valid HTTP answer: {e!r:.200}") from None
        try:
            return _transport.decode_json(text)
        except _transport.BadJSON as e:
            raise ServerError(code, "the answer is not JSON: " +
                              text[:120].decode(errors="replace") + f" ({ctype}: {e})") from None

    def forecast(self, df, x_timestamp=None, y_timestamp=None, pred_len=None, T=1.0, top_k=0,
                 top_p=0.9, sample_count=1, verbose=True, use_kv_cache=False, *, seed=None,
                 return_paths=False, quantiles=None, window="exact", series=None, **server):
        """KronosPredictor.predict on the server: the same arguments, checked by the same
        rules, and the same result -- a DataFrame indexed by y_timestamp (else by the stamps
        the server inferred) with columns open, high, low, close, volume, amount (float32, the
        mean of sample_count paths), or a Forecast with return_paths or quantiles (its
        history_s1/_s2 None; stats the answer's "usage" and "timing"). The numbers equal
        predict's for the same seed and model. seed None draws one from numpy's global
        generator, as predict does. verbose and use_kv_cache are accepted and ignored.

        `series`: the routing key (else a hash of the first candle). Server fields with no
        predict counterpart, by their API names: max_context, market, timeout_s, ohlc
        ("raw" by default, as predict's). The former call, with the server's field names
        (paths, temperature, ...) and its answer as a dict, is forecast_raw()."""
        from . import _remote
        body, prepared, qs = _remote.body(df, x_timestamp, y_timestamp, pred_len, T, top_k,
                                          top_p, sample_count, seed, return_paths, quantiles,
                                          window, server)
        answer = self._request("POST", "/v1/forecast", series_key(series, df), body=body)
        try:
            return _remote.output(answer, prepared, body["pred_len"], body["paths"],
                                  return_paths, qs)
        except _answers.BadAnswer as e:
            raise ServerError(200, str(e)) from None

    def forecast_batch(self, df_list, x_timestamp_list, y_timestamp_list, pred_len, T=1.0,
                       top_k=0, top_p=0.9, sample_count=1, verbose=True, use_kv_cache=False,
                       *, seed=None, return_paths=False, quantiles=None, window="exact",
                       series=None, max_workers=8, **server):
        """KronosPredictor.predict_batch on the server: one forecast request per series, at
        most `max_workers` at a time (the server batches them), results in input order. One
        seed for the call (None: drawn from numpy's global generator), as predict_batch.
        `series`: None (each series routed by a hash of its first candle) or a list of routing
        keys. Any failure raises, its message naming the series ("series 3: ...")."""
        seqs = (list, tuple)
        if not isinstance(df_list, seqs) or not isinstance(x_timestamp_list, seqs) or \
                not isinstance(y_timestamp_list, seqs):
            raise InvalidArgumentError(
                "df_list, x_timestamp_list, y_timestamp_list must be list or tuple types.")
        if not len(df_list) == len(x_timestamp_list) == len(y_timestamp_list):
            raise InvalidArgumentError(
                "df_list, x_timestamp_list, y_timestamp_list must have consistent lengths "
                f"(got {len(df_list)}, {len(x_timestamp_list)}, {len(y_timestamp_list)}).")
        if series is not None and (not isinstance(series, seqs) or
                                   len(series) != len(df_list)):
            raise InvalidArgumentError("series: expected None or one routing key per series")
        if isinstance(max_workers, bool) or not isinstance(max_workers, numbers.Integral) or \
                not 1 <= max_workers <= 256:
            raise InvalidArgumentError(
                f"max_workers: expected an integer in 1..256, got {max_workers!r:.60}")
        if not df_list:
            return []
        from . import _remote
        from .predictor import fresh_seed
        if seed is None:
            seed = fresh_seed()
        # Everything checked before the first request goes out.
        jobs = [_remote.body(d, x, y, pred_len, T, top_k, top_p, sample_count, seed,
                             return_paths, quantiles, window, server, index=i)
                for i, (d, x, y) in enumerate(zip(df_list, x_timestamp_list,
                                                  y_timestamp_list))]

        def one(i):
            body, prepared, qs = jobs[i]
            key = series_key(series[i] if series is not None else None, df_list[i])
            try:
                answer = self._request("POST", "/v1/forecast", key, body=body)
                return _remote.output(answer, prepared, body["pred_len"], body["paths"],
                                      return_paths, qs)
            except _answers.BadAnswer as e:
                raise ServerError(200, f"series {i}: {e}") from None
            except ServerError as e:
                e.message = f"series {i}: {e.message}"
                e.args = (f"series {i}: {e.args[0]}",) + e.args[1:]
                raise

        import concurrent.futures
        workers = min(int(max_workers), len(jobs))
        with concurrent.futures.ThreadPoolExecutor(workers, "kronos-client") as pool:
            futures = [pool.submit(one, i) for i in range(len(jobs))]
            try:
                return [f.result() for f in futures]
            except BaseException:
                for f in futures:
                    f.cancel()
                raise

    def forecast_raw(self, candles, pred_len, series=None, **fields):
        """POST /v1/forecast with the server's field names, returning its answer as a dict
        (docs/api.md): `candles` a DataFrame (timestamps column or index), rows, columns or
        CSV text; other fields (paths, seed, quantiles, ...) as docs/api.md names them. This
        was Client.forecast before it took predict's arguments."""
        body = dict(fields, candles=_rows(candles), pred_len=pred_len)
        answer = self._request("POST", "/v1/forecast", series_key(series, candles), body=body)
        if not isinstance(answer, dict):
            raise _shape_error(200, "a forecast", answer)
        return answer

    def analyze(self, symbol=None, candles=None, series=None, **fields):
        """POST /v1/analyze: a stored `symbol`, or `candles` (then `symbol` is the label)."""
        body = dict(fields)
        if symbol is not None:
            body["symbol"] = symbol
        if candles is not None:
            body["candles"] = _rows(candles)
        body.setdefault("format", "json")
        answer = self._request("POST", "/v1/analyze", series_key(series or symbol, candles),
                               body=body)
        if not isinstance(answer, dict):
            raise _shape_error(200, "a report", answer)
        return answer

    def analyze_batch(self, symbols=None, all=False, **fields):
        """POST /v1/analyze/batch: one report set for several stored `symbols` (a list of
        names) or, with `all=True`, every stored series: `reports` in the given order, a
        `ranking` by expected return within each interval and the `failures` of the symbols
        that could not be analysed (docs/api.md). Other fields as for analyze()."""
        if (symbols is None) == (not all):
            raise InvalidArgumentError("analyze_batch: give symbols=[...] or all=True, not both")
        if symbols is not None:
            if isinstance(symbols, str) or not _all_strings(symbols):
                raise InvalidArgumentError(
                    "symbols: expected a list of symbol names, got " + repr(symbols)[:60])
            fields["symbols"] = list(symbols)
        else:
            fields["all"] = True
        fields.setdefault("format", "json")
        answer = self._request("POST", "/v1/analyze/batch", body=fields)
        if not isinstance(answer, dict) or not isinstance(answer.get("reports"), list):
            raise _shape_error(200, "a report set", answer)
        return answer

    def models(self):
        """GET /v1/models: {"data": [the model served: its name, quant, shapes, "demo" (a
        demo or test checkpoint: no forecast to act on), ...], "narrative": {"model": NAME}
        when analyses can ask for a language model's narrative, else None}."""
        answer = self._request("GET", "/v1/models")
        if not isinstance(answer, dict) or not isinstance(answer.get("data"), list):
            raise _shape_error(200, "a list of models", answer)
        return answer

    def upload(self, symbol, candles, interval, market=None, series=None):
        """POST /v1/candles/SYMBOL?interval=: upserts `candles` into the server's store, all or
        nothing (a bad row is a ServerError 400 naming it, and nothing is written).

        `candles` as forecast() takes them: a DataFrame (timestamps column or DatetimeIndex;
        tz-aware stamps are stored at their wall clock, numbers at full precision; one row goes
        as CSV, which the server takes for a single candle), rows, columns, CSV text (sent as
        text/csv), or an answer of candles() in its JSON form ({"candles", "columns"}).
        `interval` is required (1d, 5m, 1h, ...). A symbol is one series in any case and an
        interval in any spelling of its length ("aapl" joins AAPL, "5min" joins 5m).
        `market` (optional: NYSE, SSE, HKEX, CRYPTO, ...) sets the symbol's exchange calendar,
        as `kronos ingest --market` does; an unknown one is a ServerError 400 naming `market`.

        Returns the server's answer: {"symbol", "interval" (the stored spelling), "written",
        "new", "replaced", "unchanged", "market" (None: none set), "rows" (stored afterwards),
        "first_timestamp", "last_timestamp"}."""
        path = "/v1/candles/" + urllib.parse.quote(_symbol(symbol), safe="")
        query = {"interval": _interval(interval)}
        if market is not None:
            if not isinstance(market, str) or not market or len(market) > 32:
                raise InvalidArgumentError(
                    f"market: expected a market name (NYSE, SSE, HKEX, ...), got {market!r:.60}")
            query["market"] = market
        key = series_key(series or symbol)
        if candles is None:
            raise InvalidArgumentError("candles: required (a DataFrame, rows or CSV text)")
        if isinstance(candles, bytes):
            candles = candles.decode()
        if isinstance(candles, str):
            if not candles.strip():
                raise InvalidArgumentError("candles: empty CSV text")
            return _upserted(self._request("POST", path, key, query, csv_text=candles))
        if _is_frame(candles) and len(candles) == 1:
            return _upserted(self._request("POST", path, key, query,
                                           csv_text=_one_row_csv(candles)))
        if isinstance(candles, (list, tuple)) and not candles:
            raise InvalidArgumentError("candles: no rows")
        if isinstance(candles, dict) and "candles" in candles:
            body = candles
        else:
            body = {"candles": _rows(candles)}
        return _upserted(self._request("POST", path, key, query, body=body))

    def candles(self, symbol, interval=None, limit=CANDLES_LIMIT_MAX, series=None, start=None,
                end=None):
        """GET /v1/candles/SYMBOL: the newest `limit` stored candles of a series stamped from
        `start` to `end` (both included, None an open end; the forms delete() takes), oldest
        first, as a DataFrame: a `timestamps` column (datetime64, the stored wall clock, as
        forecast() and upload() take it back) and open, high, low, close (volume and amount
        when stored) as float64, exactly the stored numbers; `frame.attrs` holds the answer's
        "symbol" and "interval" (both in the stored spelling: "5min" reads a 5m series).
        `interval` None: the symbol's only series, else its most recently updated one.

        `limit` None reads every candle of the range. The server answers at most 100000 rows
        a request, so more come in pages, each asking for the candles before the oldest one
        read so far (a write between two pages may leave a page's boundary behind it). Nothing
        stored (or nothing in the range) is a ServerError 404 (the message lists the intervals
        that are stored)."""
        path = "/v1/candles/" + urllib.parse.quote(_symbol(symbol), safe="")
        if limit is not None and (isinstance(limit, bool) or
                                  not isinstance(limit, numbers.Integral) or limit < 1):
            raise InvalidArgumentError(
                f"limit: expected a positive integer or None (all), got {limit!r:.60}")
        start_text, start_secs = _range_end(start, "start", is_end=False)
        end_text, end_secs = _range_end(end, "end", is_end=True)
        if start_secs is not None and end_secs is not None and start_secs > end_secs:
            raise InvalidArgumentError(f"start: {start_text} is after end {end_text}")
        import pandas as pd
        interval = _interval(interval, required=False)
        key = series_key(series or symbol)
        pages, got, first_answer = [], 0, None
        while True:
            page = CANDLES_LIMIT_MAX if limit is None else min(CANDLES_LIMIT_MAX, limit - got)
            query = {"interval": interval, "limit": page, "from": start_text, "to": end_text}
            try:
                answer = self._request("GET", path, key, query)
            except ServerError as e:
                # The last page ended at the series' first candle (404: none before it), or at
                # `start` (400 on `from`, which the first page took: the range turned empty).
                if pages and (e.http_status == 404 or
                              (e.http_status == 400 and e.field == "from")):
                    break
                raise
            frame = _candles_frame(answer)
            if len(frame) > page:
                raise ServerError(200, f"{path}: asked for {page} candles, the answer holds "
                                  f"{len(frame)}")
            if pages and len(frame) and \
                    frame["timestamps"].iloc[-1] >= pages[-1]["timestamps"].iloc[0]:
                # A server that ignores `to` would send the same page again and again.
                raise ServerError(200, f"{path}: asked for candles before "
                                  f"{pages[-1]['timestamps'].iloc[0]}, the answer holds "
                                  f"{frame['timestamps'].iloc[-1]} (the server ignored `to`)")
            pages.append(frame)
            got += len(frame)
            first_answer = first_answer or answer
            if len(frame) < page or (limit is not None and got >= limit):
                break
            # The next page: the same series (as the first answer named it), before this one.
            interval = answer.get("interval") or interval
            before = frame["timestamps"].iloc[0] - pd.Timedelta(seconds=1)
            end_text = before.strftime("%Y-%m-%d %H:%M:%S")
        if len(pages) == 1:
            return pages[0]
        frame = pd.concat(reversed(pages), ignore_index=True)
        frame.attrs.update(symbol=first_answer.get("symbol"),
                           interval=first_answer.get("interval"))
        return frame

    def symbols(self):
        """GET /v1/symbols: the stored series, a list of {"symbol", "interval", "market"
        (None: none set), "rows",
        "first_timestamp", "last_timestamp", "updated_at" (Unix seconds of the last upsert)},
        ordered by symbol, then most recently updated first."""
        answer = self._request("GET", "/v1/symbols")
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list):
            raise _shape_error(200, "a list of series", answer)
        return data

    def delete(self, symbol, interval, start=None, end=None, series=None):
        """DELETE /v1/candles/SYMBOL?interval=&from=&to=: removes the candles of one series
        stamped from `start` to `end` (both included; the API's `from` and `to`), the whole
        series when both are None, in one transaction. A series left with no candle is gone
        from symbols().

        `start`, `end`: text in any stamp form of the candle readers (a date alone as `end`
        takes in its whole day), a datetime.date (as `end`, its whole day), a datetime or
        pandas.Timestamp or numpy.datetime64 (at its wall clock, as upload() stores a frame's
        stamps), or epoch seconds (int or float). A start after the end is refused before any
        request when neither is text (the server refuses it otherwise, naming `from`).

        Returns the server's answer: {"symbol", "interval", "deleted", "first_deleted" and
        "last_deleted" (when any), "rows" left, "first_timestamp" and "last_timestamp" (while
        any are left)}; a range holding no candle gives "deleted": 0. No such series is a
        ServerError 404; another writer holding the store's lock a 503 with retry_after (nothing
        deleted)."""
        path = "/v1/candles/" + urllib.parse.quote(_symbol(symbol), safe="")
        interval = _interval(interval)
        start_text, start_secs = _range_end(start, "start", is_end=False)
        end_text, end_secs = _range_end(end, "end", is_end=True)
        if start_secs is not None and end_secs is not None and start_secs > end_secs:
            raise InvalidArgumentError(f"start: {start_text} is after end {end_text}")
        query = {"interval": interval, "from": start_text, "to": end_text}
        answer = self._request("DELETE", path, series_key(series or symbol), query)
        if not isinstance(answer, dict) or not _is_count(answer.get("deleted")):
            raise _shape_error(200, "a deletion's count", answer)
        return answer
