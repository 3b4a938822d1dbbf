"""What the hostile server tests (tests/hostile/server_*.py) share: a `kronos serve` child
process, raw HTTP exchanges, and its memory as the kernel counts it.

Every test here is an attack from an adversarial review (issue 38) turned into a bounded
check: each waits with a timeout, never for ever, and measures the server's resident memory
(VmRSS, and its peak VmHWM, from /proc/PID/status) against a bound derived from the budgets
it was started with, never against a wall clock.
"""
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77


class Serve:
    """`kronos serve ARGS...` on 127.0.0.1 and an ephemeral port; stderr collected."""

    def __init__(self, kronos, args, env=None):
        self.kronos = kronos
        e = dict(os.environ)
        e.pop("KRONOS_DB", None)
        e.update(env or {})
        self.proc = subprocess.Popen(
            [kronos, "serve", "--port", "0", "--threads", "1", "--no-tune", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=e)
        self.lines = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.port = None

    def _read(self):
        for raw in self.proc.stdout:
            with self.lock:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def output(self):
        with self.lock:
            return "\n".join(self.lines)

    def wait_for(self, pattern, timeout=60):
        """The first match of the regular expression in its output, or an AssertionError."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            m = re.search(pattern, self.output())
            if m:
                return m
            if self.proc.poll() is not None:
                time.sleep(0.2)  # the reader's last lines
                m = re.search(pattern, self.output())
                if m:
                    return m
                raise AssertionError(f"kronos serve exited ({self.proc.returncode}) before "
                                     f"/{pattern}/:\n{self.output()[-2000:]}")
            time.sleep(0.05)
        raise AssertionError(f"no /{pattern}/ within {timeout}s:\n{self.output()[-2000:]}")

    def start(self, timeout=60):
        m = self.wait_for(r"listening on http://127\.0\.0\.1:(\d+)", timeout)
        self.port = int(m.group(1))
        return self

    def status(self):
        """/proc/PID/status fields in bytes: VmRSS (now), VmHWM (peak)."""
        out = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0]) * 1024
        return out

    def stop(self, timeout=60):
        """SIGTERM, then its exit status (killed after timeout: AssertionError)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"kronos serve did not exit {timeout}s after SIGTERM:\n"
                                 f"{self.output()[-2000:]}")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def sanitized(kronos):
    """Whether the binary runs under AddressSanitizer or ThreadSanitizer: their quarantine and
    shadow keep freed memory resident by design, so the ASan run of ctest checks the answers
    and the server's survival, the release run the RSS bounds (as test_server_process does)."""
    with open(kronos, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__tsan_init" in data


def run(kronos, args, timeout=60, env=None):
    """`kronos ARGS...` to its end: (exit status, output); AssertionError past timeout."""
    e = dict(os.environ)
    e.pop("KRONOS_DB", None)
    e.update(env or {})
    try:
        r = subprocess.run([kronos, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout, env=e)
    except subprocess.TimeoutExpired as ex:
        raise AssertionError(f"kronos {' '.join(args)} still running after {timeout}s: "
                             f"{(ex.output or b'')[-500:]!r}")
    return r.returncode, r.stdout.decode(errors="replace")


def request(port, method, path, body=None, headers=None, timeout=120):
    """One exchange over a fresh connection: (status, body bytes); status 0 when no HTTP
    answer came (the connection closed or reset first)."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        if isinstance(body, str):
            body = body.encode()
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException) as e:
        return 0, str(e).encode()
    finally:
        c.close()


def metric(port, series):
    """One exact series of GET /metrics ("name{labels}"), or None."""
    st, body = request(port, "GET", "/metrics", timeout=30)
    if st != 200:
        return None
    for line in body.decode().splitlines():
        name, _, value = line.rpartition(" ")
        if name == series:
            return float(value)
    return None


def unread_get(port, path, rcvbuf=4096):
    """Sends a GET and never reads the answer (a tiny receive buffer): the socket, to close
    later."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return s


def status_line(sock, timeout=60):
    """The status code of the answer on sock (reading until its status line), or 0 when the
    connection ends (closed, reset) before one arrives."""
    sock.settimeout(timeout)
    buf = b""
    try:
        while b"\r\n" not in buf:
            b = sock.recv(4096)
            if not b:
                break
            buf += b
    except OSError:
        pass
    m = re.match(rb"HTTP/1\.[01] (\d{3})", buf)
    return int(m.group(1)) if m else 0


def write_candles_csv(path, rows, seed=1, start=1_600_000_000, step=60):
    """rows 1-minute candles of a random walk (valid OHLCV), as `kronos ingest` reads."""
    rng = random.Random(seed)
    price = 100.0
    with open(path, "w") as f:
        f.write("timestamps,open,high,low,close,volume,amount\n")
        for i in range(rows):
            t = time.gmtime(start + i * step)
            o = price
            c = max(1.0, o * (1 + rng.gauss(0, 0.002)))
            h = max(o, c) * (1 + abs(rng.gauss(0, 0.001)))
            lo = min(o, c) * (1 - abs(rng.gauss(0, 0.001)))
            v = 100 + rng.randrange(1000)
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S', t)},{o:.4f},{h:.4f},{lo:.4f},"
                    f"{c:.4f},{v},{v * c:.2f}\n")
            price = c


def ingest(kronos, db, symbol, rows, tmp, seed=1):
    csv = os.path.join(tmp, f"{symbol}.csv")
    write_candles_csv(csv, rows, seed)
    rc, out = run(kronos, ["ingest", "--symbol", symbol, "--interval", "1m", "--db", db, csv],
                  timeout=300)
    assert rc == 0, f"ingest {symbol}: {out}"
    os.unlink(csv)


def main(tests, argv):
    """Runs each test(kronos, tmpdir) in turn; argv: KRONOS_BINARY."""
    if len(argv) < 2:
        print(f"usage: {argv[0]} KRONOS_BINARY", file=sys.stderr)
        return 2
    kronos = os.path.abspath(argv[1])
    for t in tests:
        with tempfile.TemporaryDirectory(prefix="kronos-hostile-") as tmp:
            t0 = time.time()
            t(kronos, tmp)
            print(f"ok  {t.__name__} ({time.time() - t0:.1f} s)", flush=True)
    return 0
