"""kronos.client against a stand-in server (http.server on 127.0.0.1): the X-Kronos-Series
header a load balancer routes by -- the series given, the symbol, or a hash of the first candle
that stays the same as the history grows -- and errors with Retry-After. Against a real
`kronos serve` (its own store file and API key): forecasts equal predict's, and the candle
store's round trip (upload, read, list, delete) with its failures."""

import datetime
import email.utils
import json
import os
import re
import socket
import sqlite3
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
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Type") == "text/csv":
            body = raw.decode()
            self.server.seen.append((self.path, dict(self.headers), body))
            return self._answer(200, {"ok": True})
        body = json.loads(raw)
        self.server.seen.append((self.path, dict(self.headers), body))
        if isinstance(body, dict) and "candles" in body and self.path.startswith("/v1/candles"):
            return self._answer(200, {"ok": True})
        mode = body.get("mode")
        if mode in ("flaky503", "flaky429") and self.server.refusals:
            self.server.refusals -= 1
            out = b'{"error":{"message":"queue full"}}'
            self.send_response(503 if mode == "flaky503" else 429)
            if mode == "flaky503":
                self.send_header("Retry-After", "0")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        if mode == "drop" and self.server.drops:  # the connection breaks, no answer
            self.server.drops -= 1
            return
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

    def _answer(self, code, answer):
        out = json.dumps(answer).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self):
        self.server.seen.append((self.path, dict(self.headers), None))
        if self.server.slow_gets:
            self.server.slow_gets -= 1
            time.sleep(1.5)
        if "WRONG" in self.path or self.server.wrong_shape:  # a 200 that is no such answer
            return self._answer(200, {"object": "list", "data": {"AAPL": 1}})
        if self.path.startswith("/v1/symbols"):
            return self._answer(200, {"object": "list", "data": []})
        self._answer(200, {"object": "candles", "symbol": "AAPL", "interval": "1d", "rows": 1,
                           "columns": ["timestamps", "open", "high", "low", "close"],
                           "candles": [["2024-01-02", 1, 2, 0.5, 1.5]]})

    def do_DELETE(self):
        self.server.seen.append((self.path, dict(self.headers), None))
        if self.server.drops:
            self.server.drops -= 1
            return
        self._answer(200, {"object": "candles.delete", "deleted": 0})

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.seen, srv.wrong_shape, srv.refusals, srv.drops, srv.slow_gets = [], False, 0, 0, 0
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_forecast_and_analyze_send_the_series_key(server, candles):
    c = Client(f"http://127.0.0.1:{server.server_address[1]}")
    c.forecast_raw(candles.iloc[:64], pred_len=4, series="600977.sh", paths=2)
    c.forecast_raw(candles.iloc[:64], pred_len=4)
    c.forecast_raw(candles.iloc[:80], pred_len=4)  # one history, longer: the same key
    c.forecast_raw(candles.iloc[10:80], pred_len=4)  # another first candle: another key
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
    waits = []
    c._sleep = waits.append
    with pytest.raises(ServerError) as e:
        c.forecast_raw([["2024-01-02", 1, 2, 0.5, 1.5]], pred_len=999)
    # Sent three times (retries=2), each retry after the answer's Retry-After, then raised.
    assert len(server.seen) == 3 and waits == [2.0, 2.0]
    assert e.value.http_status == 503 and e.value.retry_after == 2.0
    assert e.value.status == -9  # a kr_status, as for every KronosError: KR_ERR_BUSY
    assert "queue full" in str(e.value)


def _url(server):
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_busy_answers_are_retried_after_retry_after(server):
    # 429 and 503 say the request was not processed: sent again after Retry-After (1 s when
    # none is given), up to `retries` times; other failures, and waits past max_retry_wait,
    # are raised at once.
    rows = [["2024-01-02", 1, 2, 0.5, 1.5], ["2024-01-03", 1.5, 2, 1, 1.8]]
    waits = []
    c = Client(_url(server), retries=3)
    c._sleep = waits.append
    server.refusals = 2
    assert c.forecast_raw(rows, 2, mode="flaky503") == {"ok": True}
    assert waits == [0.0, 0.0] and len(server.seen) == 3
    waits.clear()
    server.refusals = 3
    assert c.forecast_raw(rows, 2, mode="flaky429") == {"ok": True}
    assert waits == [1.0, 1.0, 1.0]
    waits.clear()
    server.refusals = 5
    with pytest.raises(ServerError, match="HTTP 503: queue full"):
        c.forecast_raw(rows, 2, mode="flaky503")
    assert waits == [0.0] * 3
    waits.clear()
    for mode in ("strerr", "date"):  # a 502; a 503 asking for 30 s
        with pytest.raises(ServerError):
            c.forecast_raw(rows, 2, mode=mode)
    assert waits == []
    n = len(server.seen)
    server.refusals = 1
    no_retry = Client(_url(server), retries=0)
    no_retry._sleep = waits.append
    with pytest.raises(ServerError, match="HTTP 503"):
        no_retry.forecast_raw(rows, 2, mode="flaky503")
    assert waits == [] and len(server.seen) == n + 1


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_server_coming_back_is_waited_for():
    # Connection refused: nothing was sent, so every call is tried again (0.5 s, then 1 s,
    # ...), a delete too; here the replica is back by the second wait.
    port = _free_port()
    started = []

    def sleep(w):
        waits.append(w)
        if len(waits) == 2:
            srv = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
            srv.seen, srv.wrong_shape, srv.refusals, srv.drops, srv.slow_gets = \
                [], False, 0, 0, 0
            threading.Thread(target=srv.serve_forever, daemon=True).start()
            started.append(srv)

    waits = []
    c = Client(f"http://127.0.0.1:{port}", retries=3)
    c._sleep = sleep
    try:
        assert c.delete("AAPL", interval="1d")["deleted"] == 0
        assert waits == [0.5, 1.0] and len(started[0].seen) == 1
    finally:
        for srv in started:
            srv.shutdown()
            srv.server_close()
    # Still down after every retry: raised, saying so.
    waits.clear()
    gone = Client(f"http://127.0.0.1:{_free_port()}", retries=2, max_retry_wait=0.75)
    gone._sleep = waits.append
    with pytest.raises(ServerUnreachableError) as e:
        gone.symbols()
    assert waits == [0.5, 0.75] and e.value.request_sent is False


def test_a_broken_connection_is_resent_unless_a_delete(server):
    # The connection broke after the request went out: a forecast (a computation) and a read
    # are sent again; a delete is not (it may have been done).
    rows = [["2024-01-02", 1, 2, 0.5, 1.5], ["2024-01-03", 1.5, 2, 1, 1.8]]
    waits = []
    c = Client(_url(server), retries=2)
    c._sleep = waits.append
    server.drops = 1
    assert c.forecast_raw(rows, 2, mode="drop") == {"ok": True}
    assert waits == [0.5] and len(server.seen) == 2
    waits.clear()
    server.drops = 1
    with pytest.raises(ServerUnreachableError) as e:
        c.delete("AAPL", interval="1d")
    assert e.value.request_sent is True and waits == [] and len(server.seen) == 3
    server.drops = 0


def test_timeouts_are_retried_for_reads_only(server):
    rows = [["2024-01-02", 1, 2, 0.5, 1.5], ["2024-01-03", 1.5, 2, 1, 1.8]]
    waits = []
    c = Client(_url(server), timeout=0.5, retries=2)
    c._sleep = waits.append
    server.slow_gets = 1
    assert c.symbols() == []
    assert waits == [0.5]
    waits.clear()
    n = len(server.seen)
    with pytest.raises(ServerTimeoutError):
        c.forecast_raw(rows, 2, mode="slow")  # most likely still computing: not sent again
    assert waits == [] and len(server.seen) == n + 1


def test_client_arguments_checked_and_key_never_shown(server):
    for kw, match in [({"timeout": 0}, "timeout"), ({"timeout": None}, "timeout"),
                      ({"timeout": float("nan")}, "timeout"), ({"retries": -1}, "retries"),
                      ({"retries": 1.5}, "retries"), ({"max_retry_wait": -1}, "max_retry_wait"),
                      ({"api_key": 123}, "api_key")]:
        with pytest.raises(kronos.InvalidArgumentError, match=match):
            Client(_url(server), **kw)
    with pytest.raises(kronos.InvalidArgumentError, match="url"):
        Client("127.0.0.1:8080")
    # A key read from a file with its newline: once a ValueError of http.client quoting it.
    for bad in ("s3cret-key\n", "s3cret\r\nX-Evil: 1", "s3cret\x00key"):
        with pytest.raises(kronos.InvalidArgumentError, match="api_key") as e:
            Client(_url(server), api_key=bad)
        assert "s3cret" not in str(e.value)
    c = Client(_url(server), api_key="s3cret-key")
    assert "s3cret" not in repr(c) and "api_key=<set>" in repr(c)


def test_failures_are_kronos_errors(server):
    c = Client(_url(server), timeout=0.5)
    rows = [["2024-01-02", 1, 2, 0.5, 1.5], ["2024-01-03", 1.5, 2, 1, 1.8]]

    def fails(cls, match, **fields):
        with pytest.raises(cls, match=match) as e:
            c.forecast_raw(rows, 2, **fields)
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
        Client(f"http://127.0.0.1:{dead}").forecast_raw(rows, 2)
    assert isinstance(e.value, ConnectionError)
    with pytest.raises(kronos.InvalidArgumentError, match="candles: the DataFrame has no rows"):
        c.forecast_raw(pd.DataFrame(columns=["timestamps", "open", "high", "low", "close"]), 2)
    with pytest.raises(kronos.InvalidArgumentError, match="temperature: cannot be sent"):
        c.forecast_raw(rows, 2, temperature=float("nan"))


def test_numpy_scalars_and_frames_sent_exactly(server):
    c = Client(_url(server))
    c.forecast_raw([["2024-01-02", 1, 2, 0.5, 1.5]], np.int64(2), temperature=np.float32(0.5),
               quantiles=np.array([0.1, 0.9]))
    body = server.seen[-1][2]
    assert body["pred_len"] == 2 and body["temperature"] == 0.5
    assert body["quantiles"] == [0.1, 0.9]
    # Full float64 precision, and tz-aware stamps at their wall clock (what predict reads).
    ts = pd.date_range("2024-01-02 09:30", periods=3, freq="5min", tz="Asia/Shanghai")
    df = pd.DataFrame({"open": [1.2345678901234567e-5, 2.0, 3.0], "high": 3.0, "low": 0.5,
                       "close": 1.0, "volume": np.int64(7)}, index=ts)
    c.forecast_raw(df, 2)
    sent = server.seen[-1][2]["candles"]
    assert sent["index"][0] == "2024-01-02T09:30:00"
    assert sent["data"][0][0] == 1.2345678901234567e-5 and sent["data"][0][4] == 7
    c.forecast_raw(df.reset_index(names="timestamps"), 2)
    assert server.seen[-1][2]["candles"]["data"][1][0] == "2024-01-02T09:35:00"


def test_store_requests_carry_the_series_key(server, candles):
    # Each candle-store call about a symbol routes by it (upper case, as forecast's series);
    # the list has no key (round robin). Symbols and stamps are percent-encoded.
    c = Client(_url(server), api_key="s3cret")
    c.upload("^gspc", candles.iloc[:3], "1d")
    c.upload("aapl", candles.iloc[:1], "5m")  # one row: CSV, which takes a single candle
    c.upload("aapl", "timestamps,open,high,low,close\n2024-01-02,1,2,0.5,1.5\n", "1d")
    c.candles("aapl", limit=5)
    c.symbols()
    c.delete("aapl", "1d", start=datetime.date(2024, 1, 2), end="2024-01-03 10:00")
    c.delete("aapl", "1d", series="portfolio-7")
    (p0, h0, b0), (p1, h1, b1), (_, h2, _), (p3, h3, _), (p4, h4, _), (p5, h5, _), \
        (p6, h6, _) = server.seen
    assert p0 == "/v1/candles/%5Egspc?interval=1d" and h0["X-Kronos-Series"] == "^GSPC"
    assert h0["Authorization"] == "Bearer s3cret"
    assert b0["candles"]["columns"][0] == "timestamps" and len(b0["candles"]["data"]) == 3
    assert h1["Content-Type"] == "text/csv" and p1 == "/v1/candles/aapl?interval=5m"
    assert b1.splitlines() == ["timestamps,open,high,low,close,volume,amount",
                               "2024-06-18T11:15:00,11.27,11.28,11.26,11.27,379.0,427161.0"]
    assert h2["Content-Type"] == "text/csv"
    assert p3 == "/v1/candles/aapl?limit=5" and h3["X-Kronos-Series"] == "AAPL"
    assert p4 == "/v1/symbols" and "X-Kronos-Series" not in h4
    assert p5 == ("/v1/candles/aapl?interval=1d&from=2024-01-02%2000%3A00%3A00"
                  "&to=2024-01-03%2010%3A00") and h5["X-Kronos-Series"] == "AAPL"
    assert p6 == "/v1/candles/aapl?interval=1d" and h6["X-Kronos-Series"] == "PORTFOLIO-7"


def test_store_answers_of_another_shape_are_server_errors(server):
    c = Client(_url(server))
    with pytest.raises(ServerError, match="HTTP 200: the answer is not a candles object"):
        c.candles("WRONG")
    server.wrong_shape = True
    with pytest.raises(ServerError, match="HTTP 200: the answer is not a list of series"):
        c.symbols()


API_KEY = "k-" + "7f3a9c" * 4


@pytest.fixture(scope="module")
def kronos_server(kronos_cli, tmp_path_factory):
    """A `kronos serve` on the demo model with its own candle store (never the user's) and an
    API key: (url, store file)."""
    tmp = tmp_path_factory.mktemp("serve")
    key_file, db = tmp / "key", tmp / "store.db"
    key_file.write_text(API_KEY + "\n")
    os.chmod(key_file, 0o600)
    proc = subprocess.Popen([kronos_cli, "serve", "--port", "0", "--threads", "1",
                             "--model", DEMO, "--db", str(db), "--api-key-file", str(key_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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
    yield url, str(db)
    proc.terminate()
    proc.wait(30)


def test_client_equals_predict(kronos_server, predictor, candles):
    # The server's forecast of a frame equals predict's on it: tz-aware stamps at their wall
    # clock, low prices at full precision. forecast_raw: the answer as the server wrote it.
    c = Client(kronos_server[0], api_key=API_KEY)
    h = candles.iloc[:120].reset_index(drop=True)
    tz = h.set_index(pd.DatetimeIndex(h["timestamps"]).tz_localize("Asia/Shanghai"))[COLS]
    tiny = h.copy()
    for k in ("open", "high", "low", "close"):
        tiny[k] = tiny[k] * 1.2345678e-6
    for frame, x in ((tz, None), (tiny, tiny["timestamps"])):
        r = c.forecast_raw(frame, pred_len=4, seed=0, paths=1, lookback=len(h))
        srv = np.array([[row[k] for k in COLS] for row in r["mean"]]).astype(np.float32)
        loc = predictor.predict(frame[COLS], x, None, 4, seed=0)
        np.testing.assert_array_equal(srv, loc.to_numpy())
        assert [row["timestamps"][:19].replace("T", " ") for row in r["mean"]] == \
            [str(t) for t in loc.index]


def test_client_forecast_is_predict(kronos_server, predictor, candles):
    # Client.forecast / forecast_batch take predict's arguments and return what predict /
    # predict_batch return: DataFrames (float32, indexed by y_timestamp as a DatetimeIndex,
    # or by the inferred stamps), Forecasts with paths and quantiles, the same numbers.
    c = Client(kronos_server[0], api_key=API_KEY)
    h = candles.iloc[:150].reset_index(drop=True)
    x, y = h["timestamps"].iloc[:140], h["timestamps"].iloc[140:146]
    df = h[COLS].iloc[:140]
    kw = dict(T=0.8, top_k=0, top_p=0.95, sample_count=3, seed=11)
    got = c.forecast(df, x, y, 6, **kw)
    want = predictor.predict(df, x, y, 6, **kw)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert isinstance(got.index, pd.DatetimeIndex) and got.dtypes.eq(np.float32).all()
    # Strings in, a DatetimeIndex out; no y_timestamp: the inferred stamps, as predict's.
    # (With no volume the server answers volume and amount 0, where predict returns the
    # model's noise around 0, as the official code does: docs/python.md.)
    got = c.forecast(df[COLS[:4]], x.astype(str), y.astype(str), pred_len=6, **kw)
    want = predictor.predict(df[COLS[:4]], x, y, 6, **kw)
    pd.testing.assert_frame_equal(got[COLS[:4]], want[COLS[:4]], check_exact=True)
    assert (got[COLS[4:]] == 0).all().all() and (want[COLS[4:]] != 0).any().any()
    got = c.forecast(h.iloc[:140], None, None, 6, **kw)
    pd.testing.assert_frame_equal(got, predictor.predict(h.iloc[:140], None, None, 6, **kw),
                                  check_exact=True)
    full = c.forecast(df, x, y, 6, return_paths=True, quantiles=[0.1, 0.9], **kw)
    ref = predictor.predict(df, x, y, 6, return_paths=True, quantiles=[0.1, 0.9], **kw)
    assert isinstance(full, kronos.Forecast)
    np.testing.assert_array_equal(full.s1, ref.s1)
    np.testing.assert_array_equal(full.s2, ref.s2)
    for a, b in zip(full.paths, ref.paths):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    for q in (0.1, 0.9):
        np.testing.assert_array_equal(full.quantiles[q].to_numpy(),
                                      ref.quantiles[q].to_numpy().astype(np.float32))
    # The batch: lists in, a list out, one seed for the call.
    dfs = [df, h[COLS].iloc[20:140]]
    xs, ys = [x, h["timestamps"].iloc[20:140]], [y, y]
    got = c.forecast_batch(dfs, xs, ys, 6, **kw)
    want = predictor.predict_batch(dfs, xs, ys, 6, **kw)
    assert len(got) == 2
    for a, b in zip(got, want):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    # seed None: numpy's global generator seeds it, as predict's.
    np.random.seed(3)
    a = c.forecast(df, x, y, 6, sample_count=2)
    np.random.seed(3)
    pd.testing.assert_frame_equal(a, predictor.predict(df, x, y, 6, sample_count=2),
                                  check_exact=True)
    # The former call's names are refused, pointing at predict's name and forecast_raw.
    with pytest.raises(kronos.InvalidArgumentError, match="paths: .*sample_count.*forecast_raw"):
        c.forecast(df, x, y, pred_len=6, paths=2)
    with pytest.raises(kronos.InvalidArgumentError, match="x_timestamp: got the number 6"):
        c.forecast(df, 6)
    with pytest.raises(kronos.InvalidArgumentError, match="y_timestamp length"):
        c.forecast(df, x, y.iloc[:2], 6)
    with pytest.raises(ServerError) as e:  # the server's limit, naming the series
        c.forecast_batch(dfs, xs, ys, 6, sample_count=1000)
    assert e.value.http_status == 400 and str(e.value).startswith("series 0: HTTP 400")


def _dead_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def test_store_round_trip(kronos_server, candles, monkeypatch):
    url, _ = kronos_server
    c = Client(url, api_key=API_KEY)
    frame = candles.iloc[:40].reset_index(drop=True)
    up = c.upload("RT.SH", frame.iloc[:30], "5m")
    assert (up["symbol"], up["interval"], up["written"], up["new"], up["rows"]) == \
        ("RT.SH", "5m", 30, 30, 30)
    # Another spelling of symbol and interval joins the series: 10 new, 10 sent again.
    up = c.upload("rt.sh", frame.iloc[20:40], "5min")
    assert (up["symbol"], up["interval"], up["new"], up["unchanged"], up["rows"]) == \
        ("RT.SH", "5m", 10, 10, 40)
    # One more bar, tz-aware (stored at its wall clock), goes as CSV; a changed one replaces.
    bar = candles.iloc[40:41].set_index("timestamps")
    bar.index = bar.index.tz_localize("Asia/Shanghai")
    assert c.upload("RT.SH", bar, "5m")["new"] == 1
    changed = frame.iloc[38:40].copy()
    changed["volume"] += 1
    assert c.upload("RT.SH", changed, "5m")["replaced"] == 2
    expected = candles.iloc[:41].reset_index(drop=True)
    expected.loc[38:39, "volume"] += 1

    back = c.candles("RT.SH", interval="5min")
    assert back.attrs == {"symbol": "RT.SH", "interval": "5m"}
    pd.testing.assert_frame_equal(back, expected, check_exact=True)
    # Every candle (limit None) and a range, in pages of 7 (the server's most is 100000):
    # each page asks for those before the last one's oldest; 14 in a range end on a 404.
    monkeypatch.setattr(kronos.client, "CANDLES_LIMIT_MAX", 7)
    paged = c.candles("rt.sh", interval="5min", limit=None)
    assert paged.attrs == {"symbol": "RT.SH", "interval": "5m"}
    pd.testing.assert_frame_equal(paged, expected, check_exact=True)
    ts = expected["timestamps"]
    for lo, hi, limit in ((5, 30, None), (0, 13, None), (5, 30, 10), (5, 30, 3)):
        want = expected.iloc[lo:hi + 1]
        want = want if limit is None else want.iloc[-limit:]
        got = c.candles("RT.SH", limit=limit, start=ts[lo], end=str(ts[hi]))
        pd.testing.assert_frame_equal(got, want.reset_index(drop=True), check_exact=True)
    monkeypatch.undo()
    with pytest.raises(ServerError) as e:
        c.candles("RT.SH", start="2100-01-01")
    assert e.value.http_status == 404 and "from 2100-01-01" in str(e.value)
    with pytest.raises(kronos.InvalidArgumentError, match="start: .* is after end"):
        c.candles("RT.SH", start=ts[5], end=ts[1])
    with pytest.raises(kronos.InvalidArgumentError, match="limit: expected a positive integer or None"):
        c.candles("RT.SH", limit=0)
    # What is read goes back as it is (an upload of the same rows changes nothing), and into
    # forecast() like any frame.
    assert c.upload("RT.SH", back, "5m")["unchanged"] == 41
    # A read in another case names the series as stored.
    assert c.candles("rt.sh", limit=1).attrs["symbol"] == "RT.SH"
    # market= sets the symbol's calendar; an unknown one is refused by the server, naming it.
    assert c.upload("RT.SH", back.iloc[-2:], "5m", market="sse")["market"] == "SSE"
    with pytest.raises(ServerError) as e:
        c.upload("RT.SH", back.iloc[-2:], "5m", market="nowhere")
    assert (e.value.http_status, e.value.field) == (400, "market")
    pd.testing.assert_frame_equal(c.candles("RT.SH", limit=5), expected.iloc[-5:]
                                  .reset_index(drop=True), check_exact=True)

    (entry,) = [e for e in c.symbols() if e["symbol"] == "RT.SH"]
    assert (entry["interval"], entry["market"], entry["rows"]) == ("5m", "SSE", 41)
    assert entry["first_timestamp"] == "2024-06-18 11:15:00"

    ts = expected["timestamps"]
    gone = c.delete("RT.SH", "5m", start=ts[10], end=str(ts[14]))  # Timestamp and text
    assert (gone["deleted"], gone["rows"]) == (5, 36)
    assert (gone["first_deleted"], gone["last_deleted"]) == (str(ts[10]), str(ts[14]))
    # Epoch seconds (fractions round inward) and datetimes; a range with no candle deletes 0.
    epoch = (ts[0] - pd.Timestamp(0)) // pd.Timedelta(seconds=1)
    gone = c.delete("RT.SH", "5m", start=epoch - 0.5, end=np.int64(epoch + 300))
    assert (gone["deleted"], gone["first_timestamp"]) == (2, str(ts[2]))
    gone = c.delete("RT.SH", "5m", start=ts[10].to_pydatetime(), end=ts[14] + pd.Timedelta("1s"))
    assert (gone["deleted"], gone["rows"]) == (0, 34) and "first_deleted" not in gone
    assert len(c.candles("RT.SH", "5m")) == 34

    gone = c.delete("RT.SH", "5m")  # the whole series
    assert (gone["deleted"], gone["rows"]) == (34, 0) and "first_timestamp" not in gone
    assert "RT.SH" not in [e["symbol"] for e in c.symbols()]
    with pytest.raises(ServerError) as e:
        c.candles("RT.SH")
    assert e.value.http_status == 404


def test_store_refusals(kronos_server, candles):
    url, _ = kronos_server
    c = Client(url, api_key=API_KEY)
    frame = candles.iloc[:10]
    c.upload("BAD.T", frame, "5m")

    def server_error(status, call, *args, **kwargs):
        with pytest.raises(ServerError) as e:
            call(*args, **kwargs)
        assert e.value.http_status == status and isinstance(e.value, kronos.KronosError)
        return e.value

    e = server_error(404, c.candles, "NOPE")
    assert e.status == -1 and "no candles stored for 'NOPE'" in e.message
    e = server_error(404, c.delete, "NOPE", "1d")
    assert "no such series" in e.message
    server_error(404, c.delete, "BAD.T", "1d")  # the symbol, but not that interval
    # Stamps the server's readers refuse are named by the API's parameter; from after to too.
    e = server_error(400, c.delete, "BAD.T", "5m", start="2024-13-45")
    assert e.field == "from"
    e = server_error(400, c.delete, "BAD.T", "5m", end="yesterday")
    assert e.field == "to" and "cannot parse 'yesterday'" in e.message
    e = server_error(400, c.delete, "BAD.T", "5m", start="2024-06-19", end="2024-06-18")
    assert e.field == "from"
    # A bad row: a 400 naming it, and nothing written.
    broken = frame.iloc[:3].copy()
    broken.loc[1, "high"] = broken.loc[1, "low"] - 1
    e = server_error(400, c.upload, "BAD.T", broken.iloc[:3], "5m")
    assert e.field and e.field.startswith("candles") and "high" in e.message
    assert len(c.candles("BAD.T")) == 10

    # A wrong key: 401, and neither key appears in the error.
    e = server_error(401, Client(url, api_key="wrong-key-123").symbols)
    assert "wrong-key-123" not in str(e) and API_KEY not in str(e)
    server_error(401, Client(url).candles, "BAD.T")

    # Argument errors come before any request: this client has no server to reach.
    dead = Client(_dead_url(), api_key=API_KEY)
    args = [
        ("start: .* is after end", dead.delete, ("BAD.T", "5m"),
         {"start": pd.Timestamp("2024-06-19"), "end": datetime.date(2024, 6, 18)}),
        ("start: expected a str, datetime", dead.delete, ("BAD.T", "5m"), {"start": [1]}),
        ("end: NaT is no stamp", dead.delete, ("BAD.T", "5m"), {"end": pd.NaT}),
        ("end: expected epoch seconds, got nan", dead.delete, ("BAD.T", "5m"),
         {"end": float("nan")}),
        ("start: .* outside the years", dead.delete, ("BAD.T", "5m"), {"start": 1e15}),
        ("symbol: expected 1-32 letters", dead.candles, ("../etc",), {}),
        ("symbol: expected", dead.upload, ("", frame, "5m"), {}),
        ("interval: expected a count", dead.upload, ("BAD.T", frame, "5 min"), {}),
        ("interval: expected a count", dead.delete, ("BAD.T", None), {}),
        ("limit: expected a positive integer or None", dead.candles, ("BAD.T",), {"limit": 0}),
        ("limit: expected", dead.candles, ("BAD.T",), {"limit": True}),
        ("candles: required", dead.upload, ("BAD.T", None, "5m"), {}),
        ("candles: the DataFrame has no rows", dead.upload, ("BAD.T", frame.iloc[:0], "5m"), {}),
        ("candles: no rows", dead.upload, ("BAD.T", [], "5m"), {}),
    ]
    for match, call, a, kw in args:
        with pytest.raises(kronos.InvalidArgumentError, match=match):
            call(*a, **kw)
    for call, a in ((dead.upload, ("BAD.T", frame, "5m")), (dead.candles, ("BAD.T",)),
                    (dead.symbols, ()), (dead.delete, ("BAD.T", "5m"))):
        with pytest.raises(ServerUnreachableError):
            call(*a)
    c.delete("BAD.T", "5m")


def test_store_busy_is_503_with_retry_after(kronos_server, candles):
    # Another writer holds the store's write lock past the server's busy timeout: 503 with
    # Retry-After (a retry succeeds), nothing deleted.
    url, db = kronos_server
    c = Client(url, api_key=API_KEY)
    c.upload("LOCK.T", candles.iloc[:10], "5m")
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(ServerError) as e:
            Client(url, api_key=API_KEY, retries=0).delete("LOCK.T", "5m")
        assert e.value.http_status == 503 and e.value.retry_after == 1.0
        assert e.value.status == -9 and db not in str(e.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(c.candles("LOCK.T")) == 10
    assert c.delete("LOCK.T", "5m")["deleted"] == 10


def test_models_and_batch_analysis(kronos_server, candles):
    # models(): the demo checkpoint says it is one, and this server has no language model.
    # analyze_batch(): stored series analysed together, ranked, an unknown one in failures.
    c = Client(kronos_server[0], api_key=API_KEY)
    m = c.models()
    assert m["data"][0]["demo"] is True and m["narrative"] is None
    for sym, start in (("BA.SH", 0), ("BB.SH", 300)):
        c.upload(sym, candles.iloc[start:start + 200].reset_index(drop=True), "5m")
    r = c.analyze_batch(["ba.sh", "BB.SH", "NOPE"], horizon=4, paths=8, seed=1)
    assert [rep["symbol"] for rep in r["reports"]] == ["BA.SH", "BB.SH"]
    assert sorted(x["symbol"] for x in r["ranking"]) == ["BA.SH", "BB.SH"]
    assert [f["symbol"] for f in r["failures"]] == ["NOPE"]
    for bad in ({}, {"symbols": "BA.SH"}, {"symbols": []}, {"symbols": ["BA.SH"], "all": True}):
        with pytest.raises(kronos.InvalidArgumentError):
            c.analyze_batch(**bad)
    with pytest.raises(ServerError) as e:  # none of them: the server's 400 naming the field
        c.analyze_batch(["NOPE"], horizon=4, paths=8)
    assert e.value.http_status == 400 and e.value.field == "symbols[0]"


@pytest.mark.parametrize("reply", [
    # A body cut short (a proxy or replica dying mid-answer), an error body cut short, and a
    # port that speaks no HTTP: ServerErrors like every failure, never http.client's own.
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"data\": [",
    b"HTTP/1.1 500 Internal\r\nContent-Length: 100\r\n\r\n{\"error\":",
    b"SSH-2.0-OpenSSH_9.2\r\n",
])
def test_broken_answers_are_server_errors(reply):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def answer():
        for _ in range(2):  # the first try and its retry
            conn, _ = srv.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(reply)

    th = threading.Thread(target=answer, daemon=True)
    th.start()
    c = Client(f"http://127.0.0.1:{srv.getsockname()[1]}", retries=1, timeout=10)
    waits = []
    c._sleep = waits.append
    try:
        with pytest.raises(ServerError):
            c.symbols()
    finally:
        srv.close()
