#!/usr/bin/env python3
"""HAProxy's policy in front of `kronos serve` replicas (deploy/haproxy.cfg, started by
scripts/replicas.sh on an SQLite store; issue 38, item 11):

  - a request of death is not resent: a POST in flight when its replica dies gets a 502, and no
    other replica receives it (HAProxy used to send it to up to three more);
  - a client cannot pin its load on one replica: concurrent requests that all carry one
    X-Kronos-Series spread over the replicas once the first holds 1.5x the average in flight
    (hash-balance-factor), where they all went to one replica;
  - POST /analyze is hashed for affinity by its stock_code (and symbol) as /v1/analyze is: the
    same code always reaches the same replica.

Usage: server_haproxy.py KRONOS_BINARY SOURCE_DIR
Exits 77 (skipped) when HAProxy is not installed (bash scripts/install-deps.sh --scale).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scale"))
import hostile  # noqa: E402
from ports import free_port_block  # noqa: E402

N = 3


def forecasts_answered(port, route="/v1/forecast"):
    total = 0.0
    st, body = hostile.request(port, "GET", "/metrics", timeout=30)
    if st != 200:
        return None
    for line in body.decode().splitlines():
        if line.startswith(f'kronos_http_requests_total{{route="{route}"'):
            total += float(line.rpartition(" ")[2])
    return total


def candles(source, n=128):
    rows = []
    with open(os.path.join(source, "data", "XSHG_5min_600977.csv")) as f:
        next(f)
        for line in f:
            p = line.strip().split(",")
            rows.append([p[0]] + [float(x) for x in p[1:]])
            if len(rows) == n:
                break
    return rows


class Replicas:
    def __init__(self, kronos, source, top):
        self.kronos, self.source = kronos, source
        self.dir = os.path.join(top, "replicas")
        self.port = free_port_block(N)
        self.script = os.path.join(source, "scripts", "replicas.sh")

    def start(self):
        r = subprocess.run(["bash", self.script, "start", "-n", str(N), "--port", str(self.port),
                            "--dir", self.dir, "--kronos", self.kronos, "--", "--threads", "1",
                            "--no-tune"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=300)
        assert r.returncode == 0, f"replicas.sh start: {r.stdout}"

    def stop(self):
        subprocess.run(["bash", self.script, "stop", "--dir", self.dir], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=300)

    def ports(self):
        return [self.port + i for i in range(1, N + 1)]

    def pid(self, i):
        with open(os.path.join(self.dir, f"r{i}.pid")) as f:
            return int(f.read())


def test_request_of_death_not_resent(reps, rows):
    before = [forecasts_answered(p) for p in reps.ports()]
    # Long enough to be found running and killed (128 + 380 candles fit the default window).
    body = json.dumps({"candles": rows, "pred_len": 380, "paths": 64})
    out = {}

    def send():
        out["r"] = hostile.request(reps.port, "POST", "/v1/forecast", body,
                                   {"X-Kronos-Series": "death"}, timeout=300)

    th = threading.Thread(target=send)
    th.start()
    victim = None
    t0 = time.time()
    while victim is None and time.time() - t0 < 60:
        for i, p in enumerate(reps.ports(), 1):
            if (hostile.metric(p, "kronos_requests_running") or 0) > 0:
                victim = i
                break
        time.sleep(0.05)
    assert victim, "the forecast never ran on a replica"
    os.kill(reps.pid(victim), signal.SIGKILL)
    th.join(300)
    st, data = out["r"]
    survivors = [p for i, p in enumerate(reps.ports(), 1) if i != victim]
    after = {p: forecasts_answered(p) for p in survivors}
    print(f"  a POST in flight on replica {victim} when it was killed: {st}; forecasts on the "
          f"others before/after: {[before[i - 1] for i in range(1, N + 1) if i != victim]} / "
          f"{list(after.values())}")
    assert st == 502, f"want 502 (not resent), got {st} {data[:200]}"
    for i, p in enumerate(reps.ports(), 1):
        if i != victim:
            assert after[p] == before[i - 1], f"replica {i} received the request of death"
    subprocess.run(["bash", reps.script, "revive", "--replica", str(victim), "--dir", reps.dir],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300, check=True)
    time.sleep(1.5)  # HAProxy's two health checks (250 ms apart) bring it back


def test_pinned_key_spreads(reps, rows):
    before = [forecasts_answered(p) for p in reps.ports()]
    body = json.dumps({"candles": rows, "pred_len": 200, "paths": 16})
    results = []
    lock = threading.Lock()

    def send():
        r = hostile.request(reps.port, "POST", "/v1/forecast", body,
                            {"X-Kronos-Series": "pinned"}, timeout=300)
        with lock:
            results.append(r[0])

    th = [threading.Thread(target=send) for _ in range(12)]
    for t in th:
        t.start()
    for t in th:
        t.join(600)
    got = [forecasts_answered(p) - b for p, b in zip(reps.ports(), before)]
    print(f"  12 concurrent forecasts with one X-Kronos-Series: {sorted(results)}; per replica "
          f"{got}")
    assert results.count(200) == 12, results
    assert max(got) <= 9 and sum(1 for g in got if g > 0) >= 2, \
        f"one key pinned the load on one replica: {got}"


def settle(reps):
    """Waits until every replica answers /ready and HAProxy has seen it up again: a replica
    that failed its 250 ms health checks under the previous test's load (slow under ASan) is
    out of the hash ring until two checks pass, and a request meanwhile goes to another."""
    deadline = time.time() + 60
    for p in reps.ports():
        while time.time() < deadline:
            try:
                st, _ = hostile.request(p, "GET", "/ready", timeout=5)
            except OSError:
                st = None
            if st == 200:
                break
            time.sleep(0.1)
    time.sleep(1.5)  # rise 2 x inter 250 ms, with room


def haproxy_stat(reps):
    """HAProxy's "show stat" over its runtime socket: {server name: row}."""
    import csv
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(os.path.join(reps.dir, "haproxy.sock"))
    s.sendall(b"show stat\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    lines = data.decode().lstrip("# ").splitlines()
    return {r["svname"]: r for r in csv.DictReader(lines) if r.get("pxname") == "replicas"}


def wait_idle_and_up(reps):
    """Waits until HAProxy has every replica UP and no session in flight. The previous
    request's session can still count for a moment after its client read the answer; with
    hash-balance-factor 150 a replica holding one session of one in flight is "full", and the
    next request of the same key would overflow to the next replica on the ring."""
    deadline = time.time() + 30
    while time.time() < deadline:
        rows = haproxy_stat(reps)
        servers = [r for name, r in rows.items() if name not in ("FRONTEND", "BACKEND")]
        if servers and all(r["status"] == "UP" and r["scur"] == "0" for r in servers):
            return
        time.sleep(0.05)
    raise AssertionError(f"HAProxy never idle with every replica up: {rows}")


def test_analyze_stock_code_affinity(reps):
    settle(reps)
    for field in ("stock_code", "symbol"):
        before = [forecasts_answered(p, "/analyze") for p in reps.ports()]
        for _ in range(6):
            wait_idle_and_up(reps)
            st, _ = hostile.request(reps.port, "POST", "/analyze",
                                    json.dumps({field: "AFFINITY.SH"}))
            assert st in (400, 404), st  # nothing stored: answered, by one replica
        got = [forecasts_answered(p, "/analyze") - b for p, b in zip(reps.ports(), before)]
        print(f"  6 x POST /analyze {{\"{field}\": ...}}: per replica {got}")
        assert sorted(got) == [0, 0, 6], f"{field} was not hashed for affinity: {got}"


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    kronos, source = os.path.abspath(argv[1]), argv[2]
    if not shutil.which("haproxy"):
        print("SKIPPED: HAProxy is not installed; run: bash scripts/install-deps.sh --scale")
        return hostile.SKIP
    top = tempfile.mkdtemp(prefix="kronos-hostile-hap-")
    reps = Replicas(kronos, source, top)
    try:
        reps.start()
        rows = candles(source)
        for t in (lambda: test_analyze_stock_code_affinity(reps),
                  lambda: test_pinned_key_spreads(reps, rows),
                  lambda: test_request_of_death_not_resent(reps, rows)):
            t0 = time.time()
            t()
            print(f"ok  ({time.time() - t0:.1f} s)", flush=True)
        return 0
    finally:
        reps.stop()
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
