#!/usr/bin/env python3
"""Three `kronos serve` replicas behind HAProxy (deploy/haproxy.cfg, through
scripts/replicas.sh), sharing a throwaway PostgreSQL store (pgcluster.py):

  0. the CLI (ingest, analyze, serve --check-config) on the PostgreSQL store, a password in
     the URL never shown;
  1. shared store: candles ingested through replica 1 are analysed through replica 2 and 3 and
     through HAProxy: the same report (the analysis is seeded, so equal inputs give equal
     reports);
  2. failover: clients send forecasts through HAProxy; one replica is killed with SIGKILL in
     the middle. Every request is answered 200 -- those routed to the dead replica before
     HAProxy saw it down were redispatched to another (counted from its stats) -- except the
     few that were in flight on it: a POST already sent is never resent (it may be what
     killed the replica), so those get 502, at most one per client thread; the other replicas
     carry on;
  3. rolling restart (`replicas.sh roll`: SIGTERM, /ready 503 during --drain-delay, HAProxy
     takes the replica out, it drains, starts again) under the same load: zero failed
     requests;
  4. affinity: K series each forecast R times. The prefix-cache hit rate (from the replicas'
     /metrics) through HAProxy with X-Kronos-Series is at least 90 % of one replica's on the
     same workload; without the header (round robin) it is reported beside it.

Usage: test_replicas.py KRONOS_BINARY SOURCE_DIR [--report FILE]
Exits 77 (skipped) only when PostgreSQL or HAProxy is not installed
(`bash scripts/install-deps.sh --scale` installs both).
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pgcluster  # noqa: E402
from ports import free_port_block  # noqa: E402

SKIP = 77
N = 3


def request(port, method, path, body=None, headers=None, timeout=120):
    """(status, body bytes, headers dict); status 0 with the error text on a connection error."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        return r.status, data, dict(r.getheaders())
    except (OSError, http.client.HTTPException) as e:
        return 0, str(e).encode(), {}
    finally:
        c.close()


def metrics(port):
    status, body, _ = request(port, "GET", "/metrics", timeout=10)
    out = {}
    if status != 200:
        return out
    for line in body.decode().splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


def cache_counters(ports):
    q = h = 0.0
    for p in ports:
        m = metrics(p)
        q += m.get("kronos_prefix_cache_queried_tokens_total", 0.0)
        h += m.get("kronos_prefix_cache_hit_tokens_total", 0.0)
    return q, h


def read_candles(path):
    rows = []
    with open(path) as f:
        next(f)
        for line in f:
            p = line.strip().split(",")
            rows.append([p[0]] + [float(x) for x in p[1:]])
    return rows


def strip_volatile(o):
    """A report without its generation time (everything else is a function of the inputs)."""
    if isinstance(o, dict):
        return {k: strip_volatile(v) for k, v in o.items() if k not in ("generated_at", "timing")}
    if isinstance(o, list):
        return [strip_volatile(v) for v in o]
    return o


def differences(a, b, path="", out=None):
    """The paths where two JSON values differ (the first few)."""
    out = [] if out is None else out
    if len(out) >= 5:
        return out
    if type(a) is not type(b):
        out.append(f"{path}: {a!r:.60} vs {b!r:.60}")
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            differences(a.get(k), b.get(k), f"{path}/{k}", out)
    elif isinstance(a, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            differences(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r:.60} vs {b!r:.60}")
    return out


class Replicas:
    def __init__(self, source, kronos, db, top):
        self.source, self.kronos, self.db = source, kronos, db
        self.dir = os.path.join(top, "replicas")
        self.port = free_port_block(N)
        self.script = os.path.join(source, "scripts", "replicas.sh")

    def run(self, *args, check=True):
        r = subprocess.run(["bash", self.script, args[0], "--dir", self.dir, *args[1:]],
                           text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        if check and r.returncode != 0:
            raise RuntimeError(f"replicas.sh {args[0]} failed ({r.returncode}):\n{r.stdout}\n"
                               + self.logs())
        return r.stdout

    def start(self):
        out = subprocess.run(
            ["bash", self.script, "start", "-n", str(N), "--port", str(self.port), "--db", self.db,
             "--dir", self.dir, "--kronos", self.kronos, "--", "--threads", "1", "--no-tune"],
            text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"replicas.sh start failed:\n{out.stdout}\n{self.logs()}")
        return out.stdout

    def replica_port(self, i):
        return self.port + i

    def pid(self, i):
        with open(os.path.join(self.dir, f"r{i}.pid")) as f:
            return int(f.read())

    def hap(self, cmd):
        s = socket.socket(socket.AF_UNIX)
        s.connect(os.path.join(self.dir, "haproxy.sock"))
        s.sendall(cmd.encode() + b"\n")
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
        s.close()
        return out.decode()

    def backend_stats(self):
        """HAProxy's counters of the backend row: retries, redispatches, 5xx, ..."""
        lines = self.hap("show stat").splitlines()
        head = lines[0].lstrip("# ").split(",")
        for line in lines[1:]:
            f = line.split(",")
            if len(f) > 1 and f[0] == "replicas" and f[1] == "BACKEND":
                return dict(zip(head, f))
        return {}

    def server_status(self, i):
        for line in self.hap("show stat").splitlines()[1:]:
            f = line.split(",")
            if len(f) > 17 and f[0] == "replicas" and f[1] == f"r{i}":
                return f[17]
        return "?"

    def logs(self):
        out = []
        for name in sorted(os.listdir(self.dir)) if os.path.isdir(self.dir) else []:
            if name.endswith(".log"):
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    out.append(f"--- {name} (last lines)\n" + "".join(f.readlines()[-15:]))
        return "\n".join(out)

    def stop(self):
        if os.path.exists(os.path.join(self.dir, "replicas")):
            self.run("stop", check=False)


class Load:
    """Client threads sending forecasts through HAProxy until stopped; counts the answers."""

    def __init__(self, port, candles, threads=4, series=12):
        self.port, self.candles = port, candles
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.sent = self.ok = 0
        self.failures = []
        self.threads = [threading.Thread(target=self.run, args=(t, series), daemon=True)
                        for t in range(threads)]

    def run(self, t, series):
        k = t
        while not self.stop_flag.is_set():
            s = k % series
            k += len(self.threads)
            body = json.dumps({"candles": self.candles[s * 40: s * 40 + 64], "pred_len": 2,
                               "paths": 1, "seed": 1})
            status, data, _ = request(self.port, "POST", "/v1/forecast", body,
                                      {"X-Kronos-Series": f"load-{s}"})
            with self.lock:
                self.sent += 1
                if status == 200:
                    self.ok += 1
                else:
                    self.failures.append((status, data[:200]))

    def __enter__(self):
        for th in self.threads:
            th.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        for th in self.threads:
            th.join(300)

    def wait_sent(self, n, timeout=120):
        t0 = time.time()
        while self.sent < n and time.time() - t0 < timeout:
            time.sleep(0.05)


def wait(cond, timeout, what):
    t0 = time.time()
    while not cond():
        if time.time() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    kronos, source = argv[1], argv[2]
    report_path = argv[argv.index("--report") + 1] if "--report" in argv else None
    if not shutil.which("haproxy"):
        print("SKIPPED: HAProxy is not installed; run: bash scripts/install-deps.sh --scale")
        return SKIP
    try:
        cluster = pgcluster.Cluster()
    except FileNotFoundError as e:
        print(f"SKIPPED: {e}")
        return SKIP
    top = tempfile.mkdtemp(prefix="kronos-scale-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    reps = None
    figures = {}
    try:
        cluster.start()
        db = cluster.createdb("kronos_scale")
        # ---- 0. the CLI on the same database, with a password in the URL (trust
        # authentication ignores it): it works, and no output shows it.
        secret_db = db.replace("postgresql://postgres@", "postgresql://postgres:s3cr3t@")
        cli = [
            [kronos, "ingest", "--symbol", "CLI", "--interval", "1d", "--db", secret_db,
             os.path.join(source, "data", "AAPL_1d.csv")],
            [kronos, "analyze", "CLI", "--db", secret_db, "--horizon", "3", "--paths", "4",
             "--format", "json"],
            [kronos, "serve", "--db", secret_db, "--check-config"],
            [kronos, "analyze", "NOPE", "--db", secret_db],
        ]
        for i, args in enumerate(cli):
            r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=300)
            assert "s3cr3t" not in r.stdout, f"{args[1]} showed the password: {r.stdout[-500:]}"
            want = 1 if args[2] == "NOPE" else 0
            assert r.returncode == want, f"{args[1]} exit {r.returncode}: {r.stdout[-500:]}"
            if args[1] in ("ingest", "serve"):
                assert "postgres:***@" in r.stdout, r.stdout[-500:]
        print("CLI on the PostgreSQL store: ingest, analyze, serve --check-config; the password "
              "never shown")

        reps = Replicas(source, kronos, db, top)
        print(reps.start().strip())
        front = reps.port
        ports = [reps.replica_port(i) for i in range(1, N + 1)]

        # ---- 1. one store: ingest through replica 1, analyse through the others.
        with open(os.path.join(source, "data", "XSHG_5min_600977.csv"), "rb") as f:
            csv = f.read()
        st, body, _ = request(ports[0], "POST", "/v1/candles/SCALE?interval=5min", csv,
                              {"Content-Type": "text/csv"})
        assert st == 200, f"ingest through replica 1: {st} {body[:300]}"
        ask = json.dumps({"symbol": "scale", "horizon": 4, "paths": 4, "seed": 7,
                          "lookback": 128, "format": "json"})
        reports = []
        for port in (ports[1], ports[2], front):
            st, body, _ = request(port, "POST", "/v1/analyze", ask)
            assert st == 200, f"analyze through port {port}: {st} {body[:300]}"
            reports.append(strip_volatile(json.loads(body)))
        for r in reports[1:]:
            assert r == reports[0], f"the replicas' reports differ: {differences(reports[0], r)}"
        print("shared store: ingested through replica 1, the same report from replicas 2, 3 "
              "and through HAProxy")

        candles = read_candles(os.path.join(source, "data", "XSHG_5min_600977.csv"))

        # ---- 2. kill -9 one replica under load.
        before = reps.backend_stats()
        with Load(front, candles) as load:
            load.wait_sent(40)
            victim = 2
            os.kill(reps.pid(victim), signal.SIGKILL)
            killed_at = load.sent
            wait(lambda: not reps.server_status(victim).startswith("UP"), 30,
                 "HAProxy to mark the killed replica down")
            load.wait_sent(killed_at + 80)
        after = reps.backend_stats()
        retried = int(after.get("wretr", 0)) - int(before.get("wretr", 0))
        redispatched = int(after.get("wredis", 0)) - int(before.get("wredis", 0))
        figures["failover"] = dict(sent=load.sent, ok=load.ok, failed=len(load.failures),
                                   retried=retried, redispatched=redispatched,
                                   sent_before_kill=killed_at)
        print(f"kill -9 under load: {load.sent} requests, {load.ok} answered 200, "
              f"{len(load.failures)} failed; HAProxy retried {retried}, redispatched "
              f"{redispatched}")
        # Only the POSTs in flight on the killed replica fail (502: HAProxy does not resend
        # what may have killed it), at most one per client thread.
        assert all(st == 502 for st, _ in load.failures), \
            f"requests lost after kill -9: {load.failures[:5]}"
        assert len(load.failures) <= len(load.threads), load.failures
        assert load.ok > killed_at, "the other replicas did not carry on"
        # Requests did meet the dead replica (in flight, or sent before HAProxy saw it down):
        # otherwise this checked nothing.
        assert retried + redispatched + len(load.failures) > 0, \
            "no request met the killed replica"
        # The survivors answered everything after the kill.
        for i in (1, 3):
            assert reps.server_status(i) == "UP", f"replica {i}: {reps.server_status(i)}"

        # Bring the killed replica back (same flags).
        reps.run("revive", "--replica", str(victim))

        # ---- 3. rolling restart under load.
        with Load(front, candles) as load:
            load.wait_sent(20)
            roll_out = reps.run("roll")
            n_roll = load.sent
            load.wait_sent(n_roll + 20)
        figures["rolling_restart"] = dict(sent=load.sent, ok=load.ok, failed=len(load.failures))
        print(roll_out.strip())
        print(f"rolling restart under load: {load.sent} requests, {load.ok} answered 200, "
              f"{len(load.failures)} failed")
        assert not load.failures, f"requests failed in the rolling restart: {load.failures[:5]}"

        # ---- 4. affinity: hit rate of repeated series.
        K, R = 12, 4

        def workload(port, offset, header):
            for _ in range(R):
                for s in range(K):
                    start = offset + s * 37
                    body = json.dumps({"candles": candles[start:start + 96], "pred_len": 2,
                                       "paths": 1, "seed": 3})
                    h = {"X-Kronos-Series": f"aff-{offset}-{s}"} if header else {}
                    st, data, _ = request(port, "POST", "/v1/forecast", body, h)
                    assert st == 200, f"forecast: {st} {data[:200]}"

        def hit_rate(run_ports, port, offset, header):
            q0, h0 = cache_counters(run_ports)
            workload(port, offset, header)
            q1, h1 = cache_counters(run_ports)
            return (h1 - h0) / (q1 - q0) if q1 > q0 else 0.0

        # Distinct windows per run (offsets), so no run finds another's entries.
        single = hit_rate([ports[0]], ports[0], 0, False)
        affinity = hit_rate(ports, front, 700, True)
        round_robin = hit_rate(ports, front, 1400, False)
        figures["affinity"] = dict(series=K, repeats=R, single=single, affinity=affinity,
                                   round_robin=round_robin)
        print(f"prefix-cache hit rate, {K} series x {R} requests: one replica {single:.3f}, "
              f"3 replicas with X-Kronos-Series {affinity:.3f} "
              f"({affinity / single * 100 if single else 0:.0f} % of one replica's), "
              f"round robin {round_robin:.3f}")
        assert single > 0, "no prefix-cache hits on one replica"
        assert affinity >= 0.9 * single, "affinity lost the prefix cache's hits"
        assert round_robin < affinity, "round robin hit as often as affinity"
        if report_path:
            with open(report_path, "w") as f:
                json.dump(figures, f, indent=1)
        print("all scale checks passed")
        return 0
    except Exception:
        if reps:
            print(reps.logs(), file=sys.stderr)
        raise
    finally:
        if reps:
            reps.stop()
        cluster.stop()
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
