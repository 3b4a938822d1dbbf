#!/usr/bin/env python3
"""`kronos serve` on a PostgreSQL store whose server freezes (ctest scale_pg_frozen): every
PostgreSQL process SIGSTOPped, as a paused VM or a network partition looks from a client —
the connections stay open, their data is acknowledged, nothing answers. Issue 38, item 1: a
request on a pooled connection hung without limit, new connections took 13 s, /ready stayed
200 and SIGTERM waited for PostgreSQL to come back (~90 s).

  1. frozen: a store request on the pooled connection, then more at once than the pool holds
     (new connections), on every store route: each answers 503 + Retry-After "did not answer
     in time" by its deadline (--request-timeout), never hangs;
  2. /ready turns 503 ("store_unreachable") while /health stays 200 and forecasts (no store)
     are served;
  3. resumed (SIGCONT): /ready is 200 again and the store routes work, without a restart;
  4. frozen again with a request waiting on it: SIGTERM drains and the process exits 0 within
     the drain bound (the request's deadline, plus the drain's second for the answers), the
     waiting request answered 503.

The password in the URL never shows in an answer or the log. The timeouts below are hang
detectors (the deadline plus a wide margin for a loaded machine), not measurements; the
times printed are.

Usage: test_pg_frozen.py KRONOS_BINARY SOURCE_DIR
Exits 77 (skipped) when PostgreSQL is not installed (bash scripts/install-deps.sh --scale).
"""
import concurrent.futures
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
from test_pg_outage import SECRET, Serve, request  # noqa: E402

SKIP = 77
TIMEOUT = 3  # --request-timeout of the server under test, seconds
HANG = TIMEOUT + 60  # a client that waited this long saw a hang, not a deadline


def timed(port, method, path, body=None, headers=None):
    t0 = time.monotonic()
    st, text, hdrs = request(port, method, path, body, headers, timeout=HANG)
    return st, text, hdrs, time.monotonic() - t0


def assert_deadline_503(what, st, text, hdrs, took, cluster):
    assert st == 503, f"{what}: {st} {text[:300]}"
    assert hdrs.get("Retry-After") == "1", f"{what}: no Retry-After: {hdrs}"
    assert "did not answer in time" in text or "cannot be reached" in text, f"{what}: {text}"
    for leak in (SECRET, cluster.top, ".s.PGSQL", "postgresql://"):
        assert leak not in text, f"{what} shows {leak!r}: {text[:300]}"


CSV = "timestamps,open,high,low,close\n2024-01-02,1,2,0.5,1.5\n"
ROUTES = [
    ("GET /v1/symbols", "GET", "/v1/symbols", None, {}),
    ("GET /v1/candles", "GET", "/v1/candles/AAA?limit=5", None, {}),
    ("POST /v1/candles", "POST", "/v1/candles/BBB?interval=1d", CSV,
     {"Content-Type": "text/csv"}),
    ("DELETE /v1/candles", "DELETE", "/v1/candles/CCC?interval=1d", None, {}),
    ("POST /v1/analyze", "POST", "/v1/analyze",
     json.dumps({"symbol": "AAA", "horizon": 3, "paths": 2}), {"Content-Type": "application/json"}),
]


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
    top = tempfile.mkdtemp(prefix="kronos-frozen-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    srv = None
    try:
        cluster.start()
        db = cluster.createdb("kronos_frozen").replace("postgresql://postgres@",
                                                       f"postgresql://postgres:{SECRET}@")
        with open(os.path.join(source, "data", "AAPL_1d.csv"), "rb") as f:
            csv = f.read()
        srv = Serve(kronos, db, top, "a", ["--request-timeout", str(TIMEOUT)])
        st, text, _ = request(srv.port, "POST", "/v1/candles/AAA?interval=1d", csv,
                              {"Content-Type": "text/csv"})
        assert st == 200, f"ingest: {st} {text[:300]}"
        assert request(srv.port, "GET", "/v1/symbols")[0] == 200  # a pooled connection now

        # ---- 1. frozen: the pooled connection, then more than the pool at once.
        cluster.freeze()
        st, text, hdrs, took = timed(srv.port, "GET", "/v1/symbols")
        assert_deadline_503("pooled GET /v1/symbols", st, text, hdrs, took, cluster)
        print(f"frozen: GET /v1/symbols on the pooled connection: {st} after {took:.2f} s "
              f"(--request-timeout {TIMEOUT})")
        jobs = [ROUTES[i % len(ROUTES)] for i in range(20)]  # the pool holds 16
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as ex:
            answers = list(ex.map(lambda r: (r[0],) + timed(srv.port, *r[1:]), jobs))
        for what, st, text, hdrs, took in answers:
            assert_deadline_503(what, st, text, hdrs, took, cluster)
        slowest = max(a[4] for a in answers)
        print(f"frozen: {len(answers)} store requests at once, every route: all 503 + "
              f"Retry-After, the slowest after {slowest:.2f} s")

        # ---- 2. /ready out, /health and forecasts still served.
        ready = None
        for _ in range(20):
            ready = timed(srv.port, "GET", "/ready")
            if ready[0] == 503:
                break
        assert ready[0] == 503, f"/ready stayed {ready[0]} with the store frozen: {ready[1]}"
        assert json.loads(ready[1])["status"] == "store_unreachable", ready[1]
        assert SECRET not in ready[1] and "postgresql" not in ready[1], ready[1]
        assert request(srv.port, "GET", "/health", timeout=HANG)[0] == 200
        st, text, _ = request(srv.port, "POST", "/v1/forecast", json.dumps(
            {"candles": [[1704067200 + 86400 * i, 10, 11, 9, 10 + i % 7 * 0.1]
                         for i in range(64)], "pred_len": 2}),
            {"Content-Type": "application/json"}, timeout=HANG)
        assert st == 200, f"a forecast with the store frozen: {st} {text[:300]}"
        print(f"frozen: /ready 503 store_unreachable (answered in {ready[3]:.2f} s), /health "
              "200, a forecast 200")

        # ---- 3. resumed: back without a restart.
        cluster.thaw()
        for _ in range(100):
            if request(srv.port, "GET", "/ready", timeout=HANG)[0] == 200:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("/ready never came back to 200 after SIGCONT")
        for _ in range(100):
            st, text, hdrs = request(srv.port, "GET", "/v1/candles/AAA?limit=5", timeout=HANG)
            if st == 200:
                break
            assert st == 503 and hdrs.get("Retry-After") == "1", f"{st} {text[:300]}"
            time.sleep(0.1)
        assert st == 200, f"the store never came back: {st} {text[:300]}"
        print("resumed: /ready 200 and the store routes answer, without a restart")

        # ---- 4. SIGTERM while a request waits on the frozen store.
        assert request(srv.port, "GET", "/v1/symbols", timeout=HANG)[0] == 200
        cluster.freeze()
        stuck = {}

        def wait_on_store():
            stuck["answer"] = timed(srv.port, "GET", "/v1/symbols")

        th = threading.Thread(target=wait_on_store)
        th.start()
        time.sleep(0.5)  # in the server, waiting on the database
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        try:
            rc = srv.proc.wait(HANG)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"SIGTERM: still running {HANG} s later:\n{srv.text()[-2000:]}")
        took = time.monotonic() - t0
        th.join(HANG)
        assert rc == 0, f"exit status {rc} after SIGTERM:\n{srv.text()[-2000:]}"
        st, text, hdrs, waited = stuck["answer"]
        assert_deadline_503("the request waiting at SIGTERM", st, text, hdrs, waited, cluster)
        log = srv.text()
        assert "drained" in log and "still unsent" not in log, log[-2000:]
        print(f"SIGTERM with a request waiting on the frozen store: exit 0 after {took:.2f} s "
              f"(drain bound: --request-timeout {TIMEOUT} s + 1 s), the request answered 503 "
              f"after {waited:.2f} s")
        cluster.thaw()

        assert SECRET not in log, "the server log shows the password"
        assert "candle store unreachable" in log and "reachable again" in log, log[-3000:]
        for marker in ("AddressSanitizer", "runtime error:", "LeakSanitizer"):
            assert marker not in log, f"{srv.log}: {marker}\n{log[-3000:]}"
        print("OK")
        return 0
    finally:
        cluster.thaw()
        if srv:
            srv.kill()
        cluster.stop()
        subprocess.run(["rm", "-rf", top])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
