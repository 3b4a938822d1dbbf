"""The HTTP exchange under kronos.client: one request with a total deadline, redirects that
keep the API key on its own origin, and answers read with a size cap and decoded as strict
JSON. Standard library only.

Why not plain urllib.request.urlopen: its `timeout` bounds each socket operation, so a server
sending a byte a second holds a call for as long as it likes; it reads an answer whole,
whatever its Content-Length says; and its redirect handler copies every header -- the
Authorization one too -- to whatever host a `Location` names.
"""

import http.client
import json
import math
import socket
import threading
import time
import urllib.parse
import urllib.request

# The default cap on an answer's body (Client(max_answer_bytes=)): the largest answer the
# server's limits allow (256 paths x 2048 candles with every path returned) is ~80 MB.
MAX_ANSWER_BYTES = 256 << 20
# An error answer is read for its message only.
_MAX_ERROR_BYTES = 1 << 20
_CHUNK = 1 << 16


class Deadline:
    """A request's end: the sockets opened for it are shut down when it passes, so that a
    read blocked on a server that trickles (or never answers) returns at once. Every phase
    -- connecting, sending, the status line, headers and body, redirects -- is inside it."""

    def __init__(self, seconds):
        self.seconds = seconds
        self._end = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._watched = []
        self.expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self):
        return self._end - time.monotonic()

    def watch(self, sock):
        # A duplicate of the descriptor: shutdown() acts on the connection whichever
        # descriptor names it, and the duplicate leaves the (maybe TLS) socket object that
        # http.client reads from alone.
        try:
            dup = socket.fromfd(sock.fileno(), sock.family, sock.type)
        except OSError:
            return
        with self._lock:
            self._watched.append(dup)
            if self.expired:
                _shut(dup)

    def _expire(self):
        with self._lock:
            self.expired = True
            for s in self._watched:
                _shut(s)

    def close(self):
        self._timer.cancel()
        with self._lock:
            for s in self._watched:
                s.close()
            self._watched = []


def _shut(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _bound(http_class, deadline):
    """http_class whose connection takes at most the deadline's remaining time and whose
    socket the deadline shuts down."""

    class Connection(http_class):
        def connect(self):
            left = deadline.remaining()
            if left <= 0 or deadline.expired:
                raise socket.timeout("the request's deadline passed")
            self.timeout = left
            super().connect()
            deadline.watch(self.sock)

    return Connection


class _DeadlineMixin:
    def do_open(self, http_class, req, **kwargs):
        return super().do_open(_bound(http_class, self.deadline), req, **kwargs)


class _HTTPHandler(_DeadlineMixin, urllib.request.HTTPHandler):
    def __init__(self, deadline):
        super().__init__()
        self.deadline = deadline


class _HTTPSHandler(_DeadlineMixin, urllib.request.HTTPSHandler):
    def __init__(self, deadline):
        super().__init__()
        self.deadline = deadline


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url):
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme)


def keeps_credentials(old_url, new_url):
    """Whether a redirect from old_url to new_url may carry the Authorization header: the same
    scheme, host and port, or (as `requests` allows) the same host moving from http on its
    default port to https on its default port."""
    old, new = _origin(old_url), _origin(new_url)
    if old == new:
        return True
    return (old[1] == new[1] and old[0] == "http" and old[2] == 80 and new[0] == "https" and
            new[2] == 443)


class _RedirectHandler(urllib.request.HTTPRedirectHandler):
    """Follows redirects as urllib does, but drops the API key when the new URL is another
    origin (as `requests` does): a 302 to another host or port must not receive it."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and not keeps_credentials(req.full_url, new.full_url):
            new.remove_header("Authorization")
        return new


def opener(deadline):
    """An opener for http and https alone (no file:, ftp: or data: URLs, which a redirect
    could otherwise name), every connection under `deadline`."""
    o = urllib.request.OpenerDirector()
    for h in (urllib.request.ProxyHandler(), urllib.request.UnknownHandler(),
              _HTTPHandler(deadline), _HTTPSHandler(deadline),
              urllib.request.HTTPDefaultErrorHandler(), _RedirectHandler(),
              urllib.request.HTTPErrorProcessor()):
        o.add_handler(h)
    return o


class AnswerTooLarge(Exception):
    """An answer over the cap: `size` its Content-Length (None when it had none)."""

    def __init__(self, size):
        super().__init__(size)
        self.size = size


def read_capped(response, cap):
    """The body of `response`, at most `cap` bytes: a larger Content-Length is refused before
    anything is read, and a body that runs past the cap (chunked, or longer than it said) as
    soon as it does."""
    length = response.headers.get("Content-Length")
    if length is not None:
        try:
            size = int(length.strip())
        except ValueError:
            size = None
        if size is not None and size > cap:
            raise AnswerTooLarge(size)
    else:
        size = None
    chunks, total = [], 0
    while True:
        chunk = response.read(min(_CHUNK, cap + 1 - total))
        if not chunk:
            if size is not None and total < size:  # read(n) returns what came, no error
                raise http.client.IncompleteRead(b"".join(chunks), size - total)
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > cap:
            raise AnswerTooLarge(None)


def read_error_body(error):
    """What an error answer's body says, at most _MAX_ERROR_BYTES (b"" when it broke off)."""
    try:
        return read_capped(error, _MAX_ERROR_BYTES)
    except AnswerTooLarge:
        return b""
    except (http.client.HTTPException, OSError, ValueError):
        return b""


class BadJSON(ValueError):
    pass


def _no_constant(name):
    raise BadJSON(f"{name} is no JSON number")


def _finite(text):
    f = float(text)
    if not math.isfinite(f):
        raise BadJSON(f"the number {text[:40]} is out of range")
    return f


def decode_json(data):
    """Strict JSON: no NaN or Infinity, no number that overflows a double, no nesting deeper
    than Python's recursion allows. Raises BadJSON saying why."""
    try:
        return json.loads(data, parse_constant=_no_constant, parse_float=_finite)
    except BadJSON:
        raise
    except RecursionError:
        raise BadJSON("it is nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, bad UTF-8, an integer of too many digits
        raise BadJSON(str(e)[:200]) from None
