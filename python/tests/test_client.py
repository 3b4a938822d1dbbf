"""kronos.client against a stand-in server (http.server on 127.0.0.1): the X-Kronos-Series
header a load balancer routes by -- the series given, the symbol, or a hash of the first candle
that stays the same as the history grows -- and errors with Retry-After."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest

from kronos.client import Client, ServerError, series_key


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append((self.path, dict(self.headers), body))
        if body.get("pred_len") == 999:
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
    assert e.value.status == 503 and e.value.retry_after == 2.0
    assert "queue full" in str(e.value)
