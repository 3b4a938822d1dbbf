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

import hashlib
import json
import urllib.error
import urllib.request

from .errors import KronosError

__all__ = ["Client", "ServerError", "series_key"]


class ServerError(KronosError):
    """A non-2xx answer: `status` the HTTP status, `message` and `field` the server's error
    object, `retry_after` seconds when the server (or the load balancer) said when to retry."""

    def __init__(self, status, message, field=None, retry_after=None):
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.message, self.field, self.retry_after = status, message, field, retry_after


def _rows(candles):
    """Candles as the server takes them: a pandas DataFrame becomes its 'split' JSON layout;
    lists, dicts and CSV text go as they are."""
    if hasattr(candles, "to_json"):
        return json.loads(candles.to_json(orient="split", date_format="iso"))
    return candles


def _first(candles):
    if hasattr(candles, "iloc"):
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
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                err = json.loads(text).get("error", {})
            except ValueError:
                err = {"message": text[:200] or e.reason}
            ra = e.headers.get("Retry-After")
            raise ServerError(e.code, err.get("message", ""), err.get("field"),
                              float(ra) if ra and ra.replace(".", "", 1).isdigit() else None) from None

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
