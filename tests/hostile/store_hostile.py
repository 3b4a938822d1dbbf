#!/usr/bin/env python3
"""Hostile cases against the candle store through `kronos` itself (ctest hostile_store_*),
from issue 38's review, each bounded (every wait has a hang detector):

  typos     PostgreSQL URL typos and odd names as --db (serve --check-config, serve, ingest,
            store list, analyze) and $KRONOS_DB: refused, exit non-zero, with a message
            saying what is wrong and never the password (also one holding an unescaped
            '/', '#', '?' or '@'), and nothing created in the working directory (each became
            an SQLite file in a directory named after the URL). A file whose name has a
            colon, given as ./NAME, still works.
  busy      an SQLite store locked by another writer: POST /v1/candles answers 503 +
            Retry-After by --request-timeout (2 s), not after the 10 s busy timeout.
  race      concurrent first writes of one series spelled differently (POST
            /v1/candles/RSk?interval=1h and /v1/candles/rsk?interval=60m, 2000 rows each, 500
            shared): one series of 3500 rows every round (two series of 2000, 20 rounds out
            of 20, before); with the second batch lacking volume, one is refused (400) and
            the other stored. On SQLite, or on PostgreSQL with --pg (KRONOS_TEST_PG_URL, set
            by tests/scale/pgcluster.py run).

Usage: store_hostile.py KRONOS_BINARY SOURCE_DIR CASE [--pg]
Exits 77 (skipped) for --pg without KRONOS_TEST_PG_URL.
"""
import concurrent.futures
import http.client
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

SKIP = 77
SECRET = "PW9x"
HANG = 120  # seconds: a wait this long is a hang, not a slow machine


def free_port():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scale"))
    from ports import free_port as fp
    return fp()


def request(port, method, path, body=None, headers=None, timeout=HANG):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace"), dict(r.getheaders())
    finally:
        c.close()


class Serve:
    def __init__(self, kronos, db, top, extra=()):
        self.port = free_port()
        self.log = os.path.join(top, f"serve-{self.port}.log")
        self.proc = subprocess.Popen(
            [kronos, "serve", "--port", str(self.port), "--db", db, "--threads", "1",
             "--no-tune", *extra], stdout=open(self.log, "w"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
        for _ in range(1200):
            if self.proc.poll() is not None:
                raise RuntimeError(f"kronos serve exited {self.proc.returncode}:\n{self.text()}")
            try:
                if request(self.port, "GET", "/ready", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("kronos serve never became ready:\n" + self.text())

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run(argv, cwd, env=None):
    return subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=HANG)


# ---------------------------------------------------------------- typos

TYPOS = [
    ("postgresql:/kr:PW9x@db.example/k", "two slashes"),
    ("postgres:/kr:PW9x@db.example/k", "two slashes"),
    ("postgresql:kr", "two slashes"),
    ("postgresql:kr:PW9x@db.example/k", "two slashes"),
    (" postgresql://kr:PW9x@db.example/k", "white space"),
    ("postgresql://kr:PW9x@db.example/k ", "white space"),
    ("pgsql://kr:PW9x@db.example/k", "'pgsql' is not a kind of database"),
    ("postgre://kr:PW9x@db.example/k", "'postgre' is not a kind of database"),
    ("kr:PW9x@db.example/k", "'kr' is not a kind of database"),
    ("pgsql://kr:PW9x/sl@db.example/k", "not a kind of database"),
    ("host=db.example password=PW9x", "key=value"),
]


def case_typos(kronos, source, top):
    csv = os.path.join(source, "data", "AAPL_1d.csv")
    work = os.path.join(top, "cwd")
    os.mkdir(work)
    env = dict(os.environ)
    env.pop("KRONOS_DB", None)
    env["HOME"] = top
    for target, says in TYPOS:
        for argv in ([kronos, "serve", "--db", target, "--check-config"],
                     [kronos, "serve", "--db", target, "--port", "0"],
                     [kronos, "ingest", "--symbol", "AAA", "--interval", "1d", "--db", target, csv],
                     [kronos, "store", "list", "--db", target],
                     [kronos, "analyze", "AAA", "--db", target]):
            r = run(argv, work, env)
            what = f"{' '.join(argv[1:3])} --db {target!r}"
            assert r.returncode not in (0, None), f"{what}: exit 0\n{r.stdout[-1500:]}"
            assert SECRET not in r.stdout, f"{what} shows the password:\n{r.stdout[-1500:]}"
            assert says in r.stdout, f"{what}: does not say {says!r}:\n{r.stdout[-1500:]}"
        r = run([kronos, "store", "list"], work, dict(env, KRONOS_DB=target))
        assert r.returncode != 0 and SECRET not in r.stdout, f"KRONOS_DB={target!r}: {r.stdout}"
        left = os.listdir(work)
        assert not left, f"--db {target!r} created {left} in the working directory"
    # Passwords holding what libpq misreads: masked wherever they show (a server that
    # cannot be reached: a closed port on loopback).
    for pw in ("PW9x/sl", "PW9x#h", "PW9x?q", "PW9x@at"):
        target = f"postgresql://kr:{pw}@127.0.0.1:1/k?connect_timeout=2"
        r = run([kronos, "serve", "--db", target, "--check-config"], work, env)
        assert r.returncode != 0, f"{target}: exit 0"
        assert SECRET not in r.stdout, f"{target!r} shows (part of) the password:\n{r.stdout}"
    # A file whose name has a colon, written as ./NAME.
    r = run([kronos, "ingest", "--symbol", "AAA", "--interval", "1d", "--db", "./a:b.db", csv],
            work, env)
    assert r.returncode == 0, r.stdout
    assert os.path.isfile(os.path.join(work, "a:b.db")), os.listdir(work)
    print(f"typos: {len(TYPOS)} targets x 6 entry points refused without the password, nothing "
          "created; passwords with / # ? @ masked; ./a:b.db is a file")


# ---------------------------------------------------------------- busy

def case_busy(kronos, source, top):
    db = os.path.join(top, "busy.db")
    srv = Serve(kronos, db, top, ["--request-timeout", "2"])
    try:
        body = "timestamps,open,high,low,close\n2024-01-02,1,2,0.5,1.5\n"
        st, text, _ = request(srv.port, "POST", "/v1/candles/AAA?interval=1d", body,
                              {"Content-Type": "text/csv"})
        assert st == 200, f"{st} {text}"
        holder = sqlite3.connect(db, timeout=0, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another writer, holding the lock
        try:
            t0 = time.monotonic()
            st, text, hdrs = request(srv.port, "POST", "/v1/candles/AAA?interval=1d", body,
                                     {"Content-Type": "text/csv"})
            took = time.monotonic() - t0
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert st == 503 and hdrs.get("Retry-After") == "1", f"{st} {text}"
        assert "locked" in text, text
        # The store's busy timeout is 10 s: an answer before it is the request's deadline's.
        assert took < 10.0, f"503 after {took:.1f} s: the busy timeout, not the deadline"
        assert db not in text, text
        st, _, _ = request(srv.port, "POST", "/v1/candles/AAA?interval=1d", body,
                           {"Content-Type": "text/csv"})
        assert st == 200, st
        print(f"busy: a locked SQLite store answered 503 + Retry-After after {took:.2f} s "
              "(--request-timeout 2, busy timeout 10 s)")
    finally:
        srv.stop()


# ---------------------------------------------------------------- race

def hourly_csv(first, n, volume):
    rows = ["timestamps,open,high,low,close" + (",volume" if volume else "")]
    for i in range(first, first + n):
        c = 100 + (i % 50) * 0.25
        rows.append(f"{1704067200 + 3600 * i},{c},{c + 1},{c - 1},{c + 0.5}"
                    + (f",{1000 + i}" if volume else ""))
    return ("\n".join(rows) + "\n").encode()


def case_race(kronos, source, top, pg):
    db = os.environ.get("KRONOS_TEST_PG_URL", "") if pg else os.path.join(top, "race.db")
    if pg and not db:
        print("SKIPPED: KRONOS_TEST_PG_URL unset (run through tests/scale/pgcluster.py run)")
        return SKIP
    srv = Serve(kronos, db, top)
    rounds = 10
    try:
        a, b = hourly_csv(0, 2000, True), hourly_csv(1500, 2000, True)
        b_bare = hourly_csv(1500, 2000, False)
        refused = 0
        for k in range(2 * rounds):
            sym = f"RS{k}"
            bare = k >= rounds  # the second half: the "60m" batch has no volume
            posts = [("POST", f"/v1/candles/{sym}?interval=1h", a),
                     ("POST", f"/v1/candles/{sym.lower()}?interval=60m", b_bare if bare else b)]
            with concurrent.futures.ThreadPoolExecutor(2) as ex:
                answers = list(ex.map(lambda p: request(srv.port, p[0], p[1], p[2],
                                                        {"Content-Type": "text/csv"}), posts))
            st, text, _ = request(srv.port, "GET", "/v1/symbols")
            assert st == 200, text
            series = [e for e in json.loads(text)["data"] if e["symbol"].upper() == sym]
            assert len(series) == 1, f"round {k}: {len(series)} series: {series} {answers}"
            statuses = sorted(ans[0] for ans in answers)
            if not bare:
                assert statuses == [200, 200], f"round {k}: {answers}"
                assert series[0]["rows"] == 3500, f"round {k}: {series}"
            else:
                assert statuses == [200, 400], f"round {k}: {answers}"
                no = [ans for ans in answers if ans[0] == 400][0]
                assert "volume" in no[1], no[1]
                assert series[0]["rows"] == 2000, f"round {k}: {series}"
                refused += 1
        print(f"race ({'postgresql' if pg else 'sqlite'}): {2 * rounds} rounds of 1h/60m, "
              f"RSk/rsk first writes at once: one series each; {refused} volume mismatches "
              "refused across spellings")
        print("OK")
    finally:
        srv.stop()
    log = srv.text()
    for marker in ("AddressSanitizer", "runtime error:", "LeakSanitizer"):
        assert marker not in log, log[-3000:]
    return 0


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    kronos, source, case = os.path.abspath(argv[1]), os.path.abspath(argv[2]), argv[3]
    top = tempfile.mkdtemp(prefix="kronos-hostile-store-")
    try:
        if case == "typos":
            case_typos(kronos, source, top)
        elif case == "busy":
            case_busy(kronos, source, top)
        elif case == "race":
            return case_race(kronos, source, top, "--pg" in argv)
        else:
            print(f"unknown case {case}", file=sys.stderr)
            return 2
        print("OK")
        return 0
    finally:
        subprocess.run(["rm", "-rf", top])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
