"""kronos.client against servers that misbehave (issue 38, items 6 and 7): a redirect to
another origin never receives the API key; `timeout` is the whole request's deadline; answers
are read with a size cap; nesting too deep for Python is a ServerError; and paging through
candles ends when a server ignores `to`."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kronos.client import Client, ServerError, ServerTimeoutError

KEY = "secret-" + "a1b2c3" * 4


class _Recorder(BaseHTTPRequestHandler):
    """Answers by self.server.route(handler) -> (status, headers, body); records every request's
    path and headers."""

    def _any(self):
        self.server.seen.append((self.command, self.path, dict(self.headers)))
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        status, headers, body = self.server.route(self)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _any

    def log_message(self, *args):
        pass


@pytest.fixture
def servers():
    made = []

    def make(route):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
        srv.seen, srv.route = [], route
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        made.append(srv)
        return srv

    yield make
    for srv in made:
        srv.shutdown()
        srv.server_close()


def _url(srv, host="127.0.0.1"):
    return f"http://{host}:{srv.server_address[1]}"


_SYMBOLS = (200, {"Content-Type": "application/json"}, b'{"object": "list", "data": []}')


def test_a_redirect_to_another_origin_never_gets_the_api_key(servers):
    other = servers(lambda h: _SYMBOLS)
    # The first server sends /v1/symbols on to itself (same origin: the key goes along, as
    # requests does) and from there to another port (another origin: it does not).
    def route(h):
        if h.path == "/v1/symbols":
            return 302, {"Location": "/v1/here"}, b""
        return 302, {"Location": _url(other) + "/v1/symbols"}, b""

    first = servers(route)
    for method in ("symbols", "models"):
        c = Client(_url(first), api_key=KEY, retries=0)
        if method == "symbols":
            assert c.symbols() == []
        else:
            first.route = lambda h: (307, {"Location": _url(other) + "/v1/models"}, b"")
            other.route = lambda h: (200, {}, b'{"data": []}')
            assert c.models() == {"data": []}
    auth = [(p, hd.get("Authorization")) for _, p, hd in first.seen]
    assert auth == [("/v1/symbols", f"Bearer {KEY}"), ("/v1/here", f"Bearer {KEY}"),
                    ("/v1/models", f"Bearer {KEY}")]
    assert [p for _, p, _ in other.seen] == ["/v1/symbols", "/v1/models"]
    assert all("Authorization" not in hd for _, _, hd in other.seen)
    # The same port under another host name is another origin too (localhost vs 127.0.0.1).
    first.seen.clear()
    first.route = lambda h: ((302, {"Location": _url(first, "localhost") + "/v1/x"}, b"")
                             if h.path == "/v1/symbols" else _SYMBOLS)
    assert Client(_url(first), api_key=KEY, retries=0).symbols() == []
    assert [hd.get("Authorization") for _, _, hd in first.seen] == [f"Bearer {KEY}", None]


def test_redirect_credentials_rule():
    from kronos._transport import keeps_credentials as keeps
    assert keeps("http://a:8080/x", "http://A:8080/y")
    assert keeps("http://a/x", "http://a:80/y")
    assert keeps("http://a/x", "https://a/y")  # the upgrade requests allows
    assert not keeps("http://a:8080/x", "https://a:8443/y")
    assert not keeps("https://a/x", "http://a/y")
    assert not keeps("http://a:8080/x", "http://a:8081/x")
    assert not keeps("http://a/x", "http://b/x")
    assert not keeps("http://a/x", "http://a@b/x")


def _raw_server(answer):
    """A one-connection-at-a-time TCP server running answer(conn) per connection; returns
    (url, the listening socket, the list of what answer() returned)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    results = []

    def loop():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(30)
                try:
                    conn.recv(65536)
                    results.append(answer(conn))
                except OSError as e:
                    results.append(e)

    threading.Thread(target=loop, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}", srv, results


def test_timeout_is_the_whole_requests_deadline():
    # A valid answer sent a byte every 0.25 s (10 s in all). Every read gets its byte well
    # within a 2 s per-read timeout, so that timeout alone would wait the 10 s out and succeed;
    # the request's deadline ends it, and the server sees the connection go before it is done.
    body = b'{"data": []}'
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
              str(len(body)).encode() + b"\r\n\r\n" + body)

    def trickle(conn):
        for i in range(len(answer)):
            time.sleep(10 / len(answer))
            try:
                conn.sendall(answer[i:i + 1])
            except OSError:
                return i  # bytes sent before the client went
        return len(answer)

    url, srv, sent = _raw_server(trickle)
    try:
        c = Client(url, timeout=2, retries=0)
        with pytest.raises(ServerTimeoutError, match="no answer within 2 s"):
            c.models()
        for _ in range(200):  # the server notices at its next byte
            if sent:
                break
            time.sleep(0.05)
        assert sent and sent[0] < len(answer)
    finally:
        srv.close()


def test_huge_answers_are_refused_not_read():
    # A 2 GB Content-Length is refused before a byte of the body is read; a chunked body (no
    # Content-Length) is cut at the cap; both are ServerErrors naming the limit.
    def huge(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2000000000\r\n\r\n{\"data\": [")
        time.sleep(1)

    url, srv, _ = _raw_server(huge)
    try:
        with pytest.raises(ServerError, match=r"2000000000 bytes, over max_answer_bytes"):
            Client(url, retries=0).models()
    finally:
        srv.close()

    def chunked(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"[" * 4096
        for _ in range(64):
            conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        conn.sendall(b"0\r\n\r\n")

    url, srv, _ = _raw_server(chunked)
    try:
        with pytest.raises(ServerError, match=r"the answer is longer, over max_answer_bytes "
                                              r"\(100000\)"):
            Client(url, retries=0, max_answer_bytes=100000).models()
    finally:
        srv.close()
    with pytest.raises(ValueError, match="max_answer_bytes: expected a positive integer"):
        Client(url, max_answer_bytes=0)


def test_nesting_too_deep_is_a_server_error(servers):
    deep = b"[" * 200000 + b"]" * 200000
    srv = servers(lambda h: (200, {"Content-Type": "application/json"}, deep))
    with pytest.raises(ServerError, match="not JSON.*nested too deeply"):
        Client(_url(srv), retries=0).symbols()
    # An error answer nested as deep still gives its status.
    srv.route = lambda h: (500, {}, b'{"error": ' + deep + b"}")
    with pytest.raises(ServerError) as e:
        Client(_url(srv), retries=0).symbols()
    assert e.value.http_status == 500


def test_paging_ends_when_the_server_ignores_to(servers):
    # limit=None reads pages of CANDLES_LIMIT_MAX, each asking for the candles before the
    # oldest read so far; a server that ignores `to` answers the same full page every time.
    rows = [[f"2024-01-{d:02d}", 1, 2, 0.5, 1.5] for d in range(1, 8)]
    page = json.dumps({"symbol": "X", "interval": "1d", "candles": rows,
                       "columns": ["timestamps", "open", "high", "low", "close"]}).encode()

    def route(h):
        if len(h.server.seen) > 20:  # without the check, end the loop here (and fail)
            return 500, {}, b'{"error": "too many pages"}'
        return 200, {}, page

    srv = servers(route)
    import kronos.client
    old = kronos.client.CANDLES_LIMIT_MAX
    kronos.client.CANDLES_LIMIT_MAX = 7
    try:
        with pytest.raises(ServerError, match="the server ignored `to`"):
            Client(_url(srv), retries=0).candles("X", limit=None)
    finally:
        kronos.client.CANDLES_LIMIT_MAX = old
    assert len(srv.seen) == 2
    assert "to=2023-12-31%2023%3A59%3A59" in srv.seen[1][1]
