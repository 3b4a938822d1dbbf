#!/usr/bin/env python3
"""`kronos serve` on a PostgreSQL store that fails under it (ctest scale_pg_outage), on a
throwaway cluster (pgcluster.py), with a password in the URL that must never show:

  1. a PostgreSQL backend killed with SIGKILL (the server restarts every connection and
     recovers): requests meanwhile answer 503 with Retry-After, never 500, and work again;
  2. PostgreSQL stopped (pooled connections dead, nothing listening): every store route
     answers 503 with Retry-After and a message naming no socket path, host or password
     (the reason goes to the server log); restarted, requests recover without restarting
     kronos;
  3. PostgreSQL down when `kronos serve` starts: it starts (forecasts need no store), its store
     routes answer 503 and /ready 503 until the database is back; `--check-config` fails,
     password hidden;
  4. the replica killed with SIGKILL while it writes a large batch: the series holds all of it
     or none of it, and the next upsert (another replica) works;
  5. the database alive but stuck (a table lock held longer than the request may take, the
     store's busy timeout longer still): the statement timeout (= --request-timeout) ends the
     read, 503 + Retry-After "did not answer in time", not a wait for the lock;
  6. the database dropped under a running server (it answers but refuses): 500, the reason in
     the server log only.

Usage: test_pg_outage.py KRONOS_BINARY SOURCE_DIR
Exits 77 (skipped) when PostgreSQL is not installed (bash scripts/install-deps.sh --scale).
"""
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pgcluster  # noqa: E402
from ports import free_port  # noqa: E402

SKIP = 77
SECRET = "s3cr3t"


def request(port, method, path, body=None, headers=None, timeout=120):
    """(status, body text, headers); the timeout is a hang detector, not a measurement."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace"), dict(r.getheaders())
    finally:
        c.close()


class Serve:
    def __init__(self, kronos, db, top, name, extra=(), ready=(200,)):
        """Starts kronos serve and waits until /ready answers a status in `ready` (503 too
        for a server started with its store unreachable: /ready says so)."""
        self.port = free_port()
        self.log = os.path.join(top, name + ".log")
        self.proc = subprocess.Popen(
            [kronos, "serve", "--port", str(self.port), "--db", db, "--threads", "1",
             "--no-tune", *extra], stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        for _ in range(1200):
            if self.proc.poll() is not None:
                raise RuntimeError(f"kronos serve exited {self.proc.returncode}:\n{self.text()}")
            try:
                if request(self.port, "GET", "/ready", timeout=5)[0] in ready:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("kronos serve never became ready:\n" + self.text())

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()


def store_routes(port):
    """Every route that reaches the store: (what, status, body, headers)."""
    out = []
    for what, method, path, body in [
        ("GET /v1/candles", "GET", "/v1/candles/AAA", None),
        ("GET /v1/symbols", "GET", "/v1/symbols", None),
        ("POST /v1/candles", "POST", "/v1/candles/BBB?interval=1d",
         "timestamps,open,high,low,close\n2024-01-02,1,2,0.5,1.5\n"),
        ("POST /v1/analyze", "POST", "/v1/analyze",
         json.dumps({"symbol": "AAA", "horizon": 3, "paths": 2})),
        ("POST /v1/analyze/batch all", "POST", "/v1/analyze/batch",
         json.dumps({"all": True, "horizon": 3, "paths": 2})),
        ("POST /v1/analyze/batch", "POST", "/v1/analyze/batch",
         json.dumps({"symbols": ["AAA", "CCC"], "horizon": 3, "paths": 2})),
    ]:
        h = {"Content-Type": "text/csv" if method == "POST" and "candles" in path
             else "application/json"}
        st, text, hdrs = request(port, method, path, body, h)
        out.append((what, st, text, hdrs))
    return out


def assert_unavailable(answers, cluster, when):
    for what, st, text, hdrs in answers:
        assert st == 503, f"{when}: {what}: {st} {text[:300]}"
        assert hdrs.get("Retry-After") == "1", f"{when}: {what}: no Retry-After: {hdrs}"
        for leak in (SECRET, cluster.top, ".s.PGSQL", "postgresql://"):
            assert leak not in text, f"{when}: {what} shows {leak!r}: {text[:300]}"


def until_ok(port, cluster, when, tries=600):
    """Polls GET /v1/candles/AAA until 200; whatever came before must be a 503 with
    Retry-After (the database coming back), never a 500."""
    for _ in range(tries):
        st, text, hdrs = request(port, "GET", "/v1/candles/AAA?limit=5")
        if st == 200:
            return json.loads(text)
        assert_unavailable([("GET /v1/candles", st, text, hdrs)], cluster, when)
        time.sleep(0.1)
    raise AssertionError(f"{when}: the store never came back")


def kronos_backends(cluster, db):
    return [int(p) for p in cluster.psql(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'kronos' AND "
        f"datname = '{db}'").split()]


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    kronos, source = argv[1], argv[2]
    try:
        cluster = pgcluster.Cluster()
    except FileNotFoundError as e:
        print(f"SKIPPED: {e}")
        return SKIP
    top = tempfile.mkdtemp(prefix="kronos-outage-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    servers = []
    try:
        cluster.start()
        db = cluster.createdb("kronos_outage").replace("postgresql://postgres@",
                                                       f"postgresql://postgres:{SECRET}@")
        with open(os.path.join(source, "data", "AAPL_1d.csv"), "rb") as f:
            csv = f.read()
        a = Serve(kronos, db, top, "a")
        servers.append(a)
        st, text, _ = request(a.port, "POST", "/v1/candles/AAA?interval=1d", csv,
                              {"Content-Type": "text/csv"})
        assert st == 200, f"ingest: {st} {text[:300]}"

        # ---- 1. a backend killed with SIGKILL: PostgreSQL resets every connection.
        pids = kronos_backends(cluster, "kronos_outage")
        assert pids, "no pooled kronos connection to kill"
        os.kill(pids[0], signal.SIGKILL)
        got = until_ok(a.port, cluster, "after a backend's SIGKILL")
        assert got.get("symbol", "").upper() == "AAA", got
        print(f"backend {pids[0]} killed: requests answered 503 + Retry-After, then recovered")

        # ---- 2. PostgreSQL stopped under pooled connections, then started again.
        cluster.halt()
        assert_unavailable(store_routes(a.port), cluster, "PostgreSQL down")
        st, text, _ = request(a.port, "GET", "/metrics")
        assert st == 200 and SECRET not in text, "metrics while down"
        cluster.resume()
        until_ok(a.port, cluster, "PostgreSQL restarted")
        log = a.text()
        assert SECRET not in log, "the server log shows the password"
        assert "retry later" in log, "the server log does not say why:\n" + log[-2000:]
        print("PostgreSQL stopped: every store route answered 503 + Retry-After without a path "
              "or password; restarted: recovered without restarting kronos")

        # ---- 3. PostgreSQL down when kronos starts.
        cluster.halt()
        r = subprocess.run([kronos, "serve", "--db", db, "--check-config"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120)
        assert r.returncode != 0, "--check-config passed with the database down"
        assert SECRET not in r.stdout and "postgres:***@" in r.stdout, r.stdout
        b = Serve(kronos, db, top, "b", ready=(200, 503))
        servers.append(b)
        st, text, _ = request(b.port, "GET", "/ready")
        assert st == 503 and json.loads(text)["status"] == "store_unreachable", f"{st} {text}"
        assert SECRET not in text and cluster.top not in text, text
        st, text, _ = request(b.port, "POST", "/v1/forecast", json.dumps(
            {"candles": [[1704067200 + 86400 * i, 10, 11, 9, 10 + i % 7 * 0.1]
                         for i in range(64)], "pred_len": 2}),
            {"Content-Type": "application/json"})
        assert st == 200, f"a forecast with the store down: {st} {text[:300]}"
        assert_unavailable(store_routes(b.port), cluster, "started with PostgreSQL down")
        cluster.resume()
        until_ok(b.port, cluster, "PostgreSQL started after kronos")
        for _ in range(100):  # the probe's answer stands a second
            if request(b.port, "GET", "/ready")[0] == 200:
                break
            time.sleep(0.1)
        assert request(b.port, "GET", "/ready")[0] == 200, "/ready stayed 503"
        assert SECRET not in b.text()
        b.stop()
        print("kronos started with PostgreSQL down: forecasts served, store routes and /ready "
              "503 until it came up; --check-config failed naming the URL without its password")

        # ---- 4. the replica killed with SIGKILL in the middle of a large upsert.
        rows = ["timestamps,open,high,low,close,volume"]
        t0 = 946684800  # 2000-01-01, hourly bars
        n = 60000
        for i in range(n):
            c = 100 + (i % 50) * 0.25
            rows.append(f"{t0 + 3600 * i},{c},{c + 1},{c - 1},{c + 0.5},{1000 + i}")
        big = ("\n".join(rows) + "\n").encode()
        res = {}

        def post():
            try:
                res["answer"] = request(a.port, "POST", "/v1/candles/BIG?interval=1h", big,
                                        {"Content-Type": "text/csv"})
            except OSError as e:
                res["answer"] = (0, str(e), {})
        th = threading.Thread(target=post)
        th.start()
        # Killed while its INSERT runs when it can be seen running, else whenever it is.
        for _ in range(3000):
            busy = cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name "
                                "= 'kronos' AND state = 'active' AND query LIKE 'INSERT%'",
                                "kronos_outage").strip()
            if busy != "0" or not th.is_alive():
                break
            time.sleep(0.01)
        a.kill()
        th.join()
        count = int(cluster.psql("SELECT count(*) FROM kronos.candles WHERE symbol = 'BIG'",
                                 "kronos_outage"))
        listed = cluster.psql("SELECT coalesce(sum(rows), 0) FROM kronos.symbols WHERE symbol "
                              "= 'BIG'", "kronos_outage").strip()
        assert count in (0, n), f"a half-written series: {count} of {n} rows"
        assert int(listed) == count, f"symbols says {listed} rows, candles holds {count}"
        c2 = Serve(kronos, db, top, "c")
        servers.append(c2)
        st, text, _ = request(c2.port, "POST", "/v1/candles/BIG?interval=1h", big,
                              {"Content-Type": "text/csv"})
        assert st == 200, f"the upsert after the kill: {st} {text[:300]}"
        count = int(cluster.psql("SELECT count(*) FROM kronos.candles WHERE symbol = 'BIG'",
                                 "kronos_outage"))
        assert count == n, f"{count} rows after the second upsert, want {n}"
        print(f"replica killed mid-upsert (answer {res['answer'][0]}): the series held "
              f"{'all' if listed != '0' else 'none'} of it; the next upsert stored all {n} rows")
        # ---- 5. the database stuck: a lock held past the request's deadline.
        d = Serve(kronos, db, top, "d", ["--request-timeout", "2"])
        servers.append(d)
        holder = subprocess.Popen(
            [pgcluster.find_bin("psql"), "-X", "-q", "-d", cluster.url("kronos_outage"), "-c",
             "BEGIN; LOCK TABLE kronos.candles IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(300);"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=dict(os.environ, PGAPPNAME="lock_holder"))
        try:
            for _ in range(600):
                held = cluster.psql("SELECT count(*) FROM pg_locks WHERE granted AND mode = "
                                    "'AccessExclusiveLock' AND relation = "
                                    "'kronos.candles'::regclass", "kronos_outage").strip()
                if held == "1":
                    break
                time.sleep(0.05)
            assert held == "1", "the lock was never taken"
            st, text, hdrs = request(d.port, "GET", "/v1/candles/AAA")
            assert st == 503 and "did not answer in time" in text, f"{st} {text[:300]}"
            assert hdrs.get("Retry-After") == "1", hdrs
            # The server's statement timeout (a moment before the request's deadline),
            # not the client giving the connection up at the deadline.
            assert "the statement timeout (1.8 s)" in d.text(), d.text()[-2000:]
        finally:
            # A backend asleep does not notice its client gone: end it, and the lock with it.
            cluster.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                         "application_name = 'lock_holder'")
            holder.kill()
            holder.wait()
        until_ok(d.port, cluster, "the lock released")
        d.stop()
        print("database stuck behind a lock: the statement timeout answered 503 'did not answer "
              "in time' at the request's deadline instead of waiting for the lock")

        # ---- 6. the database dropped under a running server: refused, not unreachable.
        cluster.psql("DROP DATABASE kronos_outage WITH (FORCE)")
        st, text, hdrs = request(c2.port, "GET", "/v1/candles/AAA")
        assert st == 500 and "refused the connection" in text, f"{st} {text[:300]}"
        for leak in (SECRET, cluster.top, ".s.PGSQL"):
            assert leak not in text, f"the database dropped: shows {leak!r}: {text[:300]}"
        assert "does not exist" in c2.text(), "the server log does not say why"
        print("database dropped: 500 'refused the connection', the reason only in the log")
        for srv in servers:  # a sanitizer build reports into the server logs
            for marker in ("AddressSanitizer", "runtime error:", "LeakSanitizer"):
                assert marker not in srv.text(), f"{srv.log}: {marker}\n{srv.text()[-3000:]}"
        print("OK")
        return 0
    finally:
        for s in servers:
            s.kill()
        cluster.stop()
        subprocess.run(["rm", "-rf", top])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
