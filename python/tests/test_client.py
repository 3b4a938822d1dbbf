"""kronos.client against a stand-in server (http.server on 127.0.0.1): the X-Kronos-Series
header a load balancer routes by -- the series given, the symbol, or a hash of the first candle
that stays the same as the history grows -- and errors with Retry-After."""

import email.utils
import json
import re
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pandas as pd
import pytest

import kronos
from conftest import DEMO
from kronos.client import (Client, ServerError, ServerTimeoutError, ServerUnreachableError,
                           series_key)

COLS = ["open", "high", "low", "close", "volume", "amount"]

# Canned answers by the body's "mode": (HTTP status, body, extra headers).
_MODES = {
    "strerr": (502, b'{"error": "bad gateway"}', {}),
    "listerr": (500, b"[1,2]", {}),
    "html": (502, b"<html>502 Bad Gateway</html>", {}),
    "date": (503, b'{"error":{"message":"busy"}}', {"Retry-After": "DATE"}),
    "badjson200": (200, b"<html>ok</html>", {}),
}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append((self.path, dict(self.headers), body))
        mode = body.get("mode")
        if mode == "slow":
            time.sleep(2)
        if mode in _MODES:
            code, out, headers = _MODES[mode]
            self.send_response(code)
            for k, v in headers.items():
                if v == "DATE":
                    v = email.utils.formatdate(time.time() + 30, usegmt=True)
                self.send_header(k, v)
        elif body.get("pred_len") == 999:
            out = json.dumps({"error": {"message": "queue full", "field": None}}).encode()
            self.send_response(503)
            self.send_header("Retry-After", "2")
        else:
            out = json.dumps({"ok": True}).encode()
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.seen = []
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_forecast_and_analyze_send_the_series_key(server, candles):
    c = Client(f"http://127.0.0.1:{server.server_address[1]}")
    c.forecast(candles.iloc[:64], pred_len=4, series="600977.sh", paths=2)
    c.forecast(candles.iloc[:64], pred_len=4)
    c.forecast(candles.iloc[:80], pred_len=4)  # one history, longer: the same key
    c.forecast(candles.iloc[10:80], pred_len=4)  # another first candle: another key
    c.analyze("aapl", horizon=5)
    (p0, h0, b0), (_, h1, b1), (_, h2, _), (_, h3, _), (p4, h4, b4) = server.seen
    assert p0 == "/v1/forecast" and h0["X-Kronos-Series"] == "600977.SH"
    assert b0["pred_len"] == 4 and b0["paths"] == 2 and len(b0["candles"]["data"]) == 64
    assert h1["X-Kronos-Series"].startswith("h") and len(h1["X-Kronos-Series"]) == 9
    assert h2["X-Kronos-Series"] == h1["X-Kronos-Series"]
    assert h3["X-Kronos-Series"] != h1["X-Kronos-Series"]
    assert p4 == "/v1/analyze" and h4["X-Kronos-Series"] == "AAPL"
    assert b4 == {"symbol": "aapl", "horizon": 5, "format": "json"}


def test_series_key_rules():
    rows = [["2024-01-02", 1, 2, 0.5, 1.5], ["2024-01-03", 1.5, 2, 1, 1.8]]
    assert series_key("msft") == "MSFT"
    assert series_key(candles=rows) == series_key(candles=rows + [["2024-01-04", 2, 2, 2, 2]])
    assert series_key(candles=rows) != series_key(candles=rows[1:])
    assert series_key() == ""
    df = pd.DataFrame({"timestamps": ["2024-01-02"], "open": [1.0]})
    assert series_key(candles=df) == series_key(candles=pd.concat([df, df]))


def test_errors_carry_retry_after(server):
    c = Client(f"http://127.0.0.1:{server.server_address[1]}")
    with pytest.raises(ServerError) as e:
        c.forecast([["2024-01-02", 1, 2, 0.5, 1.5]], pred_len=999)
    assert e.value.http_status == 503 and e.value.retry_after == 2.0
    assert e.value.status == -9  # a kr_status, as for every KronosError: KR_ERR_BUSY
    assert "queue full" in str(e.value)


def _url(server):
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_failures_are_kronos_errors(server):
    c = Client(_url(server), timeout=0.5)
    rows = [["2024-01-02", 1, 2, 0.5, 1.5], ["2024-01-03", 1.5, 2, 1, 1.8]]

    def fails(cls, match, **fields):
        with pytest.raises(cls, match=match) as e:
            c.forecast(rows, 2, **fields)
        assert isinstance(e.value, kronos.KronosError)
        return e.value

    e = fails(ServerError, "HTTP 502: bad gateway", mode="strerr")
    assert e.http_status == 502 and e.status == 0 and e.message == "bad gateway"
    e = fails(ServerError, r"HTTP 500: \[1,2\]", mode="listerr")
    assert e.status == -7
    fails(ServerError, "HTTP 502: <html>502 Bad Gateway</html>", mode="html")
    e = fails(ServerError, "HTTP 503: busy", mode="date")
    assert e.status == -9 and 25 <= e.retry_after <= 30
    e = fails(ServerError, "HTTP 200: the answer is not JSON: <html>ok", mode="badjson200")
    e = fails(ServerTimeoutError, r"no answer within 0.5 s", mode="slow")
    assert isinstance(e, TimeoutError) and e.status == -10 and e.http_status is None
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    with pytest.raises(ServerUnreachableError, match=f"127.0.0.1:{dead}") as e:
        Client(f"http://127.0.0.1:{dead}").forecast(rows, 2)
    assert isinstance(e.value, ConnectionError)
    with pytest.raises(kronos.InvalidArgumentError, match="candles: the DataFrame has no rows"):
        c.forecast(pd.DataFrame(columns=["timestamps", "open", "high", "low", "close"]), 2)
    with pytest.raises(kronos.InvalidArgumentError, match="temperature: cannot be sent"):
        c.forecast(rows, 2, temperature=float("nan"))


def test_numpy_scalars_and_frames_sent_exactly(server):
    c = Client(_url(server))
    c.forecast([["2024-01-02", 1, 2, 0.5, 1.5]], np.int64(2), temperature=np.float32(0.5),
               quantiles=np.array([0.1, 0.9]))
    body = server.seen[-1][2]
    assert body["pred_len"] == 2 and body["temperature"] == 0.5
    assert body["quantiles"] == [0.1, 0.9]
    # Full float64 precision, and tz-aware stamps at their wall clock (what predict reads).
    ts = pd.date_range("2024-01-02 09:30", periods=3, freq="5min", tz="Asia/Shanghai")
    df = pd.DataFrame({"open": [1.2345678901234567e-5, 2.0, 3.0], "high": 3.0, "low": 0.5,
                       "close": 1.0, "volume": np.int64(7)}, index=ts)
    c.forecast(df, 2)
    sent = server.seen[-1][2]["candles"]
    assert sent["index"][0] == "2024-01-02T09:30:00"
    assert sent["data"][0][0] == 1.2345678901234567e-5 and sent["data"][0][4] == 7
    c.forecast(df.reset_index(names="timestamps"), 2)
    assert server.seen[-1][2]["candles"]["data"][1][0] == "2024-01-02T09:35:00"


@pytest.fixture(scope="module")
def kronos_server(kronos_cli):
    proc = subprocess.Popen([kronos_cli, "serve", "--port", "0", "--threads", "1",
                             "--model", DEMO], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    url = None
    deadline = time.time() + 60
    while time.time() < deadline and url is None:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(r"listening on (http://\S+)", line)
        url = m.group(1) if m else None
    if url is None:
        proc.kill()
        pytest.skip("kronos serve did not start")
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    yield url
    proc.terminate()
    proc.wait(30)


def test_client_equals_predict(kronos_server, predictor, candles):
    # The server's forecast of a frame equals predict's on it: tz-aware stamps at their wall
    # clock, low prices at full precision.
    c = Client(kronos_server)
    h = candles.iloc[:120].reset_index(drop=True)
    tz = h.set_index(pd.DatetimeIndex(h["timestamps"]).tz_localize("Asia/Shanghai"))[COLS]
    tiny = h.copy()
    for k in ("open", "high", "low", "close"):
        tiny[k] = tiny[k] * 1.2345678e-6
    for frame, x in ((tz, None), (tiny, tiny["timestamps"])):
        r = c.forecast(frame, pred_len=4, seed=0, paths=1, lookback=len(h))
        srv = np.array([[row[k] for k in COLS] for row in r["mean"]]).astype(np.float32)
        loc = predictor.predict(frame[COLS], x, None, 4)
        np.testing.assert_array_equal(srv, loc.to_numpy())
        assert [row["timestamps"][:19].replace("T", " ") for row in r["mean"]] == \
            [str(t) for t in loc.index]
