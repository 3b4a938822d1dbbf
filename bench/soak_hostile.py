#!/usr/bin/env python3
"""A soak of `kronos serve` on PostgreSQL under mixed hostile load (issue 38), writing a
Markdown report: valid forecasts and analyses (whose only acceptable failures are the 429 and
503 the limits promise), never-reading clients of 7 MB candle pages, slow uploads cut by the
read timeout, chunked uploads while the memory budget is full, and a PostgreSQL restart in
the middle; the server's RSS each second against its budgets plus model and KV; at the end
SIGTERM under load, and how long the drain took.

    bench/soak_hostile.sh [SECONDS]        (default 1800; the report goes to bench/results/)
    bench/soak_hostile.py --kronos build/release/kronos --seconds 180 --out FILE.md

Needs PostgreSQL (tests/scale/pgcluster.py starts a throwaway cluster). Not run by ctest.
"""
import argparse
import json
import os
import random
import signal
import socket
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "scale"))
sys.path.insert(0, os.path.join(here, "..", "tests", "hostile"))
import hostile  # noqa: E402
import pgcluster  # noqa: E402

MiB = 1 << 20
BUDGET_MIB = 64  # max_memory_in_flight and max_request_memory
KV_MIB = 64
SLACK_MIB = 48  # as tests/hostile/server_memory.py: estimates' error, arenas, stacks
OK_REFUSALS = (429, 503)


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}  # (kind, status) -> n
        self.failures = []  # (t, kind, status, body)
        self.minute = {}  # minute -> {status: n}
        self.term = threading.Event()  # SIGTERM sent: no new valid requests

    def add(self, t0, kind, status, body=b"", valid=True):
        if self.term.is_set():
            kind += " [in flight at SIGTERM]"
            valid = False  # reported in the drain's rows of the table
        with self.lock:
            self.counts[(kind, status)] = self.counts.get((kind, status), 0) + 1
            if valid:
                m = self.minute.setdefault(int((time.time() - t0) // 60), {})
                m[status] = m.get(status, 0) + 1
            if valid and status != 200 and status not in OK_REFUSALS:
                self.failures.append((round(time.time() - t0, 1), kind, status, body[:200]))


def candle_rows(n, seed):
    rng = random.Random(seed)
    price, rows = 50.0, []
    for i in range(n):
        o = price
        c = max(1.0, o * (1 + rng.gauss(0, 0.002)))
        h, lo = max(o, c) * 1.001, min(o, c) * 0.999
        t = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1_600_000_000 + 60 * i))
        rows.append([t, round(o, 4), round(h, 4), round(lo, 4), round(c, 4), 100 + i % 50])
        price = c
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kronos", default=os.path.join(here, "..", "build", "release", "kronos"))
    ap.add_argument("--seconds", type=int, default=1800)
    ap.add_argument("--out", default="-")
    a = ap.parse_args()
    kronos = os.path.abspath(a.kronos)
    cluster = pgcluster.Cluster(tcp=True).start()
    tmp = cluster.top
    srv = None
    try:
        db = cluster.createdb("kronos_soak")
        hostile.ingest(kronos, db, "MIDT", 100_000, "/tmp", seed=7)
        for k in range(8):
            hostile.ingest(kronos, db, f"SK{k}", 3_000, "/tmp", seed=k)
        cfg = os.path.join("/tmp", f"kronos-soak-{os.getpid()}.json")
        with open(cfg, "w") as f:
            json.dump({"max_memory_in_flight": f"{BUDGET_MIB}MiB",
                       "max_request_memory": f"{BUDGET_MIB}MiB", "kv_budget": f"{KV_MIB}MiB",
                       "read_timeout_s": 10, "request_timeout_s": 30, "max_queue": 64,
                       "max_connections_per_ip": 0}, f)
        srv = hostile.Serve(kronos, ["--db", db, "--config", cfg], env={}).start()
        port = srv.port
        st, _ = hostile.request(port, "GET", "/v1/candles/SK0?limit=10")
        assert st == 200, st
        base = srv.status()["VmHWM"]
        bound = base + (BUDGET_MIB + KV_MIB + SLACK_MIB) * MiB
        t0 = time.time()
        stop = threading.Event()
        tally = Tally()
        series = candle_rows(400, 3)

        # Valid clients behave: they honour Retry-After (1 s) and send nothing new once the
        # server is told to stop (what they sent before is answered in the drain).
        def forecasts(i):
            rng = random.Random(i)
            while not stop.is_set() and not tally.term.is_set():
                s = rng.randrange(200)
                body = json.dumps({"candles": series[s:s + 128], "pred_len": 8, "paths": 4})
                st, b = hostile.request(port, "POST", "/v1/forecast", body, timeout=60)
                tally.add(t0, "forecast", st, b)
                if st in OK_REFUSALS:
                    stop.wait(1)

        def analyses():
            k = 0
            while not stop.is_set() and not tally.term.is_set():
                body = json.dumps({"symbol": f"SK{k % 8}", "horizon": 4, "paths": 8,
                                   "lookback": 128})
                st, b = hostile.request(port, "POST", "/v1/analyze", body, timeout=60)
                tally.add(t0, "analysis", st, b)
                if st in OK_REFUSALS:
                    stop.wait(1)
                k += 1

        def unread_pages():
            socks = []
            while not stop.is_set():
                try:
                    socks.append(hostile.unread_get(port, "/v1/candles/MIDT?limit=100000"))
                except OSError:
                    pass
                if len(socks) >= 20:
                    socks.pop(0).close()
                tally.add(t0, "unread page", -1, valid=False)
                stop.wait(0.5)
            for s in socks:
                s.close()

        def slow_uploads():
            while not stop.is_set():
                s = socket.socket()
                try:
                    s.connect(("127.0.0.1", port))
                    s.sendall(b"POST /v1/candles/SLOW?interval=1m HTTP/1.1\r\nHost: x\r\n"
                              b"Content-Type: text/csv\r\nContent-Length: 100000\r\n\r\n")
                    for _ in range(15):  # 1 KB a second: cut at read_timeout_s
                        if stop.is_set():
                            break
                        s.sendall(b"x" * 1024)
                        time.sleep(1)
                except OSError:
                    pass
                tally.add(t0, "slow upload", hostile.status_line(s, 5), valid=False)
                s.close()

        def chunked():
            from server_memory import chunked_upload  # noqa: E402
            while not stop.is_set() and not tally.term.is_set():
                res = [None]
                chunked_upload(port, 6 * MiB, res, 0)
                # Every upload gets an HTTP answer (503/413 while the budget is full, else 400:
                # the body is not candles): none may end without one before SIGTERM.
                tally.add(t0, "chunked 6 MiB", res[0], valid=False)
                if res[0] == 0 and not tally.term.is_set():
                    tally.failures.append((round(time.time() - t0, 1), "chunked upload", 0,
                                           b"no HTTP answer"))
                stop.wait(2)

        samples = []

        def sampler():
            while not stop.is_set():
                try:
                    s = srv.status()
                    g = hostile.metric(port, "kronos_http_memory_in_flight_bytes") or 0
                    samples.append((time.time() - t0, s["VmRSS"], g))
                except (OSError, KeyError):
                    pass
                stop.wait(1)

        threads = [threading.Thread(target=forecasts, args=(i,)) for i in range(3)]
        threads += [threading.Thread(target=f) for f in (analyses, unread_pages, slow_uploads,
                                                          chunked, sampler)]
        for th in threads:
            th.start()
        pg_events = []
        restart_at = a.seconds / 2
        while time.time() - t0 < a.seconds:
            if restart_at and time.time() - t0 >= restart_at:
                restart_at = 0
                pg_events.append(("halt", round(time.time() - t0, 1)))
                cluster.halt()
                time.sleep(5)
                cluster.resume()
                pg_events.append(("resumed", round(time.time() - t0, 1)))
            time.sleep(0.5)
        # SIGTERM under load: the drain, timed.
        t_term = time.time()
        tally.term.set()
        srv.proc.send_signal(signal.SIGTERM)
        try:
            rc = srv.proc.wait(120)
        except Exception:
            rc = None
        drain_s = time.time() - t_term
        stop.set()
        for th in threads:
            th.join(120)
        report(a, kronos, base, bound, samples, tally, pg_events, rc, drain_s)
        return 0 if (not tally.failures and rc == 0
                     and max(s[1] for s in samples) <= bound) else 1
    finally:
        if srv:
            srv.kill()
        cluster.stop()


def report(a, kronos, base, bound, samples, tally, pg_events, rc, drain_s):
    out = sys.stdout if a.out == "-" else open(a.out, "w")
    w = out.write
    peak_rss = max(s[1] for s in samples)
    peak_gauge = max(s[2] for s in samples)
    w(f"# Hostile soak of kronos serve on PostgreSQL, {a.seconds} s "
      f"({time.strftime('%Y-%m-%d', time.gmtime())}, {os.cpu_count()} cores)\n\n")
    w(f"Command: `bench/soak_hostile.py --seconds {a.seconds}` (`bench/soak_hostile.sh`). "
      f"Demo model, 1 compute thread; max_memory_in_flight = max_request_memory = "
      f"{BUDGET_MIB} MiB, kv_budget {KV_MIB} MiB, read_timeout_s 10, request_timeout_s 30.\n"
      f"Load: 3 threads of valid forecasts, 1 of valid analyses (PostgreSQL store), 20 "
      f"never-reading clients of 7 MB candle pages (renewed every 0.5 s), slow uploads (1 KB/s),"
      f" chunked 6 MiB uploads; PostgreSQL halted (immediate) and restarted: {pg_events}.\n\n")
    w(f"- RSS: baseline (model loaded, store touched) {base / MiB:.0f} MiB, peak "
      f"**{peak_rss / MiB:.0f} MiB**, bound baseline + budget + KV + {SLACK_MIB} MiB slack = "
      f"{bound / MiB:.0f} MiB: **{'within' if peak_rss <= bound else 'PAST'}**\n")
    w(f"- memory gauge (kronos_http_memory_in_flight_bytes) peak {peak_gauge / MiB:.1f} MiB of "
      f"{BUDGET_MIB} MiB\n")
    w(f"- failed valid requests (not 200, 429 or 503): **{len(tally.failures)}**\n")
    for f in tally.failures[:20]:
        w(f"  - t={f[0]} s {f[1]}: {f[2]} {f[3]!r}\n")
    w(f"- SIGTERM under load: exit status {rc} after {drain_s:.1f} s (the answers of what was "
      f"in flight: rows marked [in flight at SIGTERM]; 0 = the connection closed without one)\n\n")
    w("| kind | status | count |\n|---|---:|---:|\n")
    for (kind, st), n in sorted(tally.counts.items(), key=lambda x: (x[0][0], str(x[0][1]))):
        w(f"| {kind} | {st if st != -1 else 'sent'} | {n} |\n")
    w("\n| minute | RSS max (MiB) | gauge max (MiB) | answers by status |\n|---:|---:|---:|---|\n")
    for m in range(int(a.seconds // 60) + 1):
        ss = [s for s in samples if m * 60 <= s[0] < (m + 1) * 60]
        if not ss:
            continue
        by = tally.minute.get(m, {})
        w(f"| {m} | {max(s[1] for s in ss) / MiB:.0f} | {max(s[2] for s in ss) / MiB:.1f} | "
          f"{', '.join(f'{k}: {v}' for k, v in sorted(by.items(), key=lambda x: str(x[0])))} |\n")
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    sys.exit(main())
