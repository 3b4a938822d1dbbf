"""kronos.client's reading of answers, against hostile ones (issue 38: atheris is not in
Debian, so a table plus a deterministic randomized generator stand in for a fuzzer).

Every answer -- truncated, of another content type, not JSON, NaN, numbers past a double,
nested past Python's recursion, wrong types in any field, fields missing -- gives either a
well-formed result or a ServerError (a KronosError): never another exception, never a frame
holding a NaN or a string where numbers belong."""

import copy
import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pandas as pd
import pytest

import kronos
from kronos.client import Client, ServerError

COLS = ["open", "high", "low", "close", "volume", "amount"]
P = 3  # forecast steps asked for


class _Canned(BaseHTTPRequestHandler):
    """Answers every request with self.server.reply = (status, headers, body bytes); a
    header "X-Cut" cuts the body there while Content-Length announces all of it."""

    def _any(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        status, headers, body = self.server.reply
        self.send_response(status)
        cut = None
        for k, v in headers.items():
            if k == "X-Cut":
                cut = int(v)
            else:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body if cut is None else body[:cut])

    do_GET = do_POST = do_DELETE = _any

    def log_message(self, *args):
        pass


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client that stopped reading (an answer over its cap): nothing to report


@pytest.fixture(scope="module")
def canned():
    srv = _Server(("127.0.0.1", 0), _Canned)
    srv.reply = (200, {}, b"{}")
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    c = Client(f"http://127.0.0.1:{srv.server_address[1]}", retries=0, timeout=20,
               max_answer_bytes=1 << 20)
    yield srv, c
    srv.shutdown()
    srv.server_close()


def _history():
    ts = pd.date_range("2024-01-02 09:30", periods=20, freq="5min")
    rng = np.random.default_rng(0)
    close = 10 + np.cumsum(rng.normal(0, 0.05, 20))
    df = pd.DataFrame({"open": close, "high": close + 0.1, "low": close - 0.1, "close": close,
                       "volume": rng.uniform(100, 200, 20)})
    return df, pd.Series(ts), pd.Series(pd.date_range(ts[-1], periods=P + 1, freq="5min")[1:])


DF, X, Y = _history()


def _rows(n, start="2024-01-02 11:10:00"):
    stamps = pd.date_range(start, periods=n, freq="5min")
    return [dict(timestamps=str(t), open=10.5 + i, high=10.75 + i, low=10.25 + i,
                 close=10.5 + i, volume=150.0 + i, amount=1575.0 + i)
            for i, t in enumerate(stamps)]


# (call, a valid answer, the check of what the call returned for it)
def _valid_forecast(out):
    assert isinstance(out, kronos.Forecast)
    assert out.mean.shape == (P, 6) and out.mean.dtypes.eq(np.float32).all()
    assert isinstance(out.mean.index, pd.DatetimeIndex) and (out.mean.index == Y).all()
    assert out.s1.tolist() == [[1, 2, 3], [7, 8, 9]] and len(out.paths) == 2
    return out.quantiles[0.9]["close"].tolist() == [10.5, 11.5, 12.5]


ENDPOINTS = {
    "models": (lambda c: c.models(),
               {"object": "list", "data": [{"id": "kronos-demo", "demo": True}],
                "narrative": None},
               lambda out: out["data"][0]["id"] == "kronos-demo"),
    "symbols": (lambda c: c.symbols(),
                {"object": "list", "data": [{"symbol": "X", "interval": "1d", "rows": 2}]},
                lambda out: out[0]["symbol"] == "X"),
    "candles": (lambda c: c.candles("X", limit=5),
                {"object": "candles", "symbol": "X", "interval": "1d",
                 "columns": ["timestamps", "open", "high", "low", "close", "volume"],
                 "candles": [["2024-01-02", 1.5, 2, 1, 1.75, 100],
                             ["2024-01-03", 1.75, 2.5, 1.5, 2, 120]]},
                lambda out: (out["close"].tolist() == [1.75, 2.0] and
                             out["timestamps"].dtype.kind == "M")),
    "forecast": (lambda c: c.forecast(DF, X, Y, P, sample_count=2, seed=1, return_paths=True,
                                      quantiles=[0.1, 0.9]),
                 {"object": "forecast", "mean": _rows(P),
                  "quantiles": {"0.1": _rows(P), "0.9": _rows(P)},
                  "paths": [{"candles": _rows(P), "s1": [1, 2, 3], "s2": [4, 5, 6]},
                            {"candles": _rows(P), "s1": [7, 8, 9], "s2": [0, 1, 2]}],
                  "usage": {"decode_tokens": 6}, "timing": {"total_seconds": 0.1}},
                 _valid_forecast),
    "forecast_mean": (lambda c: c.forecast(DF, X, None, P, seed=1),
                      {"object": "forecast", "mean": _rows(P)},
                      lambda out: out["close"].tolist() == [10.5, 11.5, 12.5]),
    "forecast_raw": (lambda c: c.forecast_raw(DF.assign(timestamps=X), P),
                     {"object": "forecast", "mean": _rows(P)},
                     lambda out: out["object"] == "forecast"),
    "analyze": (lambda c: c.analyze("X"), {"symbol": "X", "summary": "up"},
                lambda out: out["symbol"] == "X"),
    "analyze_batch": (lambda c: c.analyze_batch(["X"]),
                      {"reports": [{"symbol": "X"}], "ranking": [], "failures": []},
                      lambda out: out["reports"][0]["symbol"] == "X"),
    "upload": (lambda c: c.upload("X", DF.assign(timestamps=X), "5m"),
               {"symbol": "X", "interval": "5m", "new": 20},
               lambda out: out["new"] == 20),
    "delete": (lambda c: c.delete("X", "5m"), {"symbol": "X", "deleted": 3, "rows": 0},
               lambda out: out["deleted"] == 3),
}

JSON = {"Content-Type": "application/json"}


def _check_result(name, out):
    """What a call may return for any answer: the right type, and frames of finite numbers."""
    if name == "candles":
        assert isinstance(out, pd.DataFrame) and out.columns[0] == "timestamps"
        assert out["timestamps"].dtype.kind == "M"
        num = out.iloc[:, 1:].to_numpy()
        assert num.dtype == np.float64 and np.isfinite(num).all()
    elif name.startswith("forecast") and name != "forecast_raw":
        frames = [out] if isinstance(out, pd.DataFrame) else \
            [out.mean] + list(out.paths or []) + list(out.quantiles.values())
        for f in frames:
            assert f.shape == (P, 6) and list(f.columns) == COLS
            assert f.dtypes.eq(np.float32).all() and np.isfinite(f.to_numpy()).all()
            assert isinstance(f.index, pd.DatetimeIndex)
    elif name == "symbols":
        assert isinstance(out, list)
    else:
        assert isinstance(out, dict)


def _call(canned, name, status, headers, body):
    srv, c = canned
    srv.reply = (status, headers, body)
    call = ENDPOINTS[name][0]
    try:
        out = call(c)
    except ServerError as e:
        assert isinstance(e, kronos.KronosError) and str(e)
        return e
    _check_result(name, out)
    return out


@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_valid_answers_read_exactly(canned, name):
    _, answer, check = ENDPOINTS[name]
    out = _call(canned, name, 200, JSON, json.dumps(answer).encode())
    assert not isinstance(out, ServerError), out
    assert check(out)


DEEP = b"[" * 100000 + b"]" * 100000

# Whole answers no endpoint may take for a success: (what, status, headers, body).
HOSTILE = [
    ("empty body", 200, JSON, b""),
    ("html page", 200, {"Content-Type": "text/html"}, b"<html><body>502</body></html>"),
    ("json type, html body", 200, JSON, b"<html>ok</html>"),
    ("plain text", 200, {"Content-Type": "text/plain"}, b"ok"),
    ("truncated object", 200, JSON, b'{"data": [1, 2'),
    ("cut short on the wire", 200, {**JSON, "X-Cut": "5"}, b'{"data": [], "object": "list"}'),
    ("NaN literal", 200, JSON, b'{"data": [NaN], "deleted": NaN}'),
    ("Infinity literal", 200, JSON, b'{"deleted": Infinity}'),
    ("number past a double", 200, JSON, b'{"deleted": 1e999, "data": [1e999]}'),
    ("5000-digit integer", 200, JSON, b'{"deleted": ' + b"9" * 5000 + b"}"),
    ("nested past recursion", 200, JSON, DEEP),
    ("invalid UTF-8", 200, JSON, b'{"data": ["\xff\xfe"]}'),
    ("a list", 200, JSON, b"[1, 2, 3]"),
    ("a string", 200, JSON, b'"ok"'),
    ("null", 200, JSON, b"null"),
    ("a number", 200, JSON, b"42"),
    ("an empty object", 200, JSON, b"{}"),
    ("error status, nested", 500, JSON, b'{"error": ' + DEEP + b"}"),
    ("error status, not JSON", 502, {"Content-Type": "text/html"}, b"<html>bad gateway</html>"),
    ("error status, huge message", 400, JSON,
     json.dumps({"error": {"message": "x" * 100000, "field": 3}}).encode()),
    ("over the size cap", 200, JSON, b'{"data": ["' + b"x" * (1 << 20) + b'"]}'),
]


@pytest.mark.parametrize("name", sorted(ENDPOINTS))
@pytest.mark.parametrize("what,status,headers,body", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_answers_are_server_errors(canned, name, what, status, headers, body):
    out = _call(canned, name, status, headers, body)
    if what in ("an empty object",) and name in ("analyze", "upload", "forecast_raw"):
        return  # an object is all these promise
    assert isinstance(out, ServerError), f"{what}: {name} returned {out!r:.200}"


# Field by field: the valid answer with one field of the wrong type (or missing).
def _field_cases():
    cases = []
    for name in ("candles", "forecast", "forecast_mean", "delete"):
        answer = ENDPOINTS[name][1]
        for path in _paths(answer):
            for bad in ("x", None, True, [], {}, -1e400, "NaN"):
                cases.append((name, path, bad))
            cases.append((name, path, _MISSING))
    return cases


_MISSING = object()


def _paths(node, prefix=()):
    """Every path to a leaf or a list/dict inside an answer (lists: their first element)."""
    out = []
    items = node.items() if isinstance(node, dict) else \
        enumerate(node[:1]) if isinstance(node, list) else []
    for k, v in items:
        out.append(prefix + (k,))
        out.extend(_paths(v, prefix + (k,)))
    return out


def _set(answer, path, value):
    a = copy.deepcopy(answer)
    node = a
    for k in path[:-1]:
        node = node[k]
    if value is _MISSING:
        if isinstance(node, dict):
            del node[path[-1]]
        else:
            del node[path[-1]]
    else:
        node[path[-1]] = value
    return a


# Fields a reader does not use (so any value there is fine) or may be given any object.
_UNREAD = {("object",), ("usage",), ("timing",), ("symbol",), ("interval",), ("rows",),
           ("usage", "decode_tokens"), ("timing", "total_seconds")}


@pytest.mark.parametrize("name,path,bad", _field_cases(),
                         ids=lambda v: repr(v)[:40] if not isinstance(v, str) else v)
def test_a_wrong_field_is_named(canned, name, path, bad):
    answer = _set(ENDPOINTS[name][1], path, bad)
    body = json.dumps(answer, allow_nan=True).replace("-Infinity", "-1e400").encode()
    out = _call(canned, name, 200, JSON, body)
    if path in _UNREAD or (path[0] in ("symbol", "interval") and bad is None):
        return
    if (name, path, bad) == ("candles", ("candles",), []):  # no candles: an empty frame
        return
    if bad is _MISSING and isinstance(path[-1], int) and name == "candles":
        return  # one candle fewer is still a valid page
    if name == "forecast_mean" and path[0] != "mean":
        return
    assert isinstance(out, ServerError), f"{name} {path} = {bad!r}: returned {out!r:.200}"


# --------------------------------------------------------------- randomized, fixed seed

_POOL = [None, True, False, 0, -1, 1.5, -0.0, 2 ** 70, "", "x", "2024-13-45", "NaN", [], {},
         [None], {"a": 1}, "9" * 50, 1e308]


def _mutate(rng, answer):
    """The answer with 1-3 random changes: a value replaced, a key dropped or added, a list
    cut, repeated or reversed."""
    a = copy.deepcopy(answer)
    for _ in range(rng.randint(1, 3)):
        paths = _paths(a)
        if not paths:
            return a
        path = rng.choice(paths)
        node = a
        for k in path[:-1]:
            node = node[k]
        key = path[-1]
        op = rng.randrange(6)
        pooled = copy.deepcopy(rng.choice(_POOL))  # no object shared between two places
        if op <= 1:
            node[key] = pooled
        elif op == 2 and isinstance(node, dict):
            del node[key]
        elif op == 3 and isinstance(node, dict):
            node["extra" + str(rng.randrange(9))] = pooled
        elif isinstance(node[key], list) and node[key]:
            lst = node[key]
            node[key] = copy.deepcopy(rng.choice([lst[:-1], lst + lst[-1:], lst[::-1],
                                                  lst * 3]))
        else:
            node[key] = pooled
    return a


def _mangle(rng, body):
    """Byte-level damage now and then: cut, a byte flipped, garbage in the middle."""
    r = rng.random()
    if r < 0.15 and body:
        return body[:rng.randrange(len(body))]
    if r < 0.25 and body:
        i = rng.randrange(len(body))
        return body[:i] + bytes([rng.randrange(256)]) + body[i + 1:]
    if r < 0.3:
        i = rng.randrange(len(body) + 1)
        return body[:i] + b"\x00]}{NaN" + body[i:]
    return body


def test_randomized_answers(canned):
    rng = random.Random(20261207)
    names = sorted(ENDPOINTS)
    outcomes = {"ok": 0, "error": 0}
    for i in range(600):
        name = rng.choice(names)
        answer = _mutate(rng, ENDPOINTS[name][1])
        body = _mangle(rng, json.dumps(answer, allow_nan=True).encode())
        headers = dict(JSON) if rng.random() < 0.8 else {"Content-Type": "text/html"}
        status = 200 if rng.random() < 0.9 else rng.choice([400, 404, 500, 502])
        try:
            out = _call(canned, name, status, headers, body)
        except AssertionError as e:
            raise AssertionError(f"case {i} ({name}): {e}; body {body[:300]!r}") from None
        except Exception as e:  # noqa: BLE001 -- exactly what this test is about
            raise AssertionError(f"case {i} ({name}): {type(e).__name__}: {e}; "
                                 f"body {body[:300]!r}") from None
        outcomes["error" if isinstance(out, ServerError) else "ok"] += 1
    # Both kinds occur: the generator neither breaks every answer nor leaves them all valid.
    assert outcomes["ok"] > 50 and outcomes["error"] > 200, outcomes
