#!/usr/bin/env python3
"""The capacity model of docs/scaling.md: how many `kronos serve` replicas, and how much
database, N symbols at a bar interval need -- computed from measured per-replica figures
(bench/results/scale-2026-12-01.md), standard library only.

At every bar close each symbol gets one request (a forecast or an analysis), and all of them
must be answered within the deadline D = min(deadline_fraction x interval, max_deadline).
The requests are routed by consistent hashing on the symbol (deploy/haproxy.cfg), so the
replicas do not get equal shares: the busiest replica decides when the bar is done. The
simulation places the symbols on a hash ring (points per replica as HAProxy's consistent
hashing does), and takes the smallest replica count whose busiest replica finishes its share
within D at the measured per-replica rate times the headroom. The database must take one
upsert (the new bar) and, for analyses, one read per symbol within D.

    python3 bench/capacity.py                      # the tables of docs/scaling.md
    python3 bench/capacity.py --figures my.json    # with figures measured elsewhere
    python3 bench/capacity.py --cores-per-replica 8 --headroom 0.6 --markdown
"""
import argparse
import bisect
import hashlib
import json
import math
import sys

# Measured on the 2-vCPU AVX-512 VM, demo model (bench/results/scale-2026-12-01.md): requests
# per second per core at saturation, and the stores' rates through one connection.
MEASURED = {
    "machine": "2 vCPU x86-64 AVX-512, loaded by other agents (load average 17-18)",
    "model": "kronos-demo (1.3 M parameters), lookback 128, pred_len 12",
    "per_core": {
        "forecast_1path": 0.0,
        "forecast_8path": 0.0,
        "analysis": 0.0,
    },
    "db": {
        "sqlite": {"upserts_per_s": 0.0, "reads_per_s": 0.0, "candles_per_s": 0.0},
        "postgresql": {"upserts_per_s": 0.0, "reads_per_s": 0.0, "candles_per_s": 0.0},
    },
}

INTERVALS = [("1m", 60), ("5m", 300), ("1h", 3600), ("1d", 86400)]
SYMBOLS = [100, 1000, 5000, 20000]
WORKLOADS = [("forecast_1path", "1-path forecasts"), ("forecast_8path", "8-path forecasts"),
             ("analysis", "analyses (32 paths)")]


def ring(replicas, points=64):
    """A consistent-hash ring: `points` positions per replica, sorted."""
    pts = []
    for r in range(replicas):
        for k in range(points):
            h = hashlib.sha1(f"replica-{r}-{k}".encode()).digest()
            pts.append((int.from_bytes(h[:8], "big"), r))
    pts.sort()
    return pts


def busiest_share(n_symbols, replicas, points=64):
    """Symbols on the busiest replica when n_symbols are hashed onto the ring."""
    if replicas == 1:
        return n_symbols
    pts = ring(replicas, points)
    keys = [p[0] for p in pts]
    load = [0] * replicas
    for s in range(n_symbols):
        h = int.from_bytes(hashlib.sha1(f"SYM{s}".encode()).digest()[:8], "big")
        i = bisect.bisect(keys, h) % len(pts)
        load[pts[i][1]] += 1
    return max(load)


def replicas_needed(n, deadline_s, per_replica_rps, limit=100000):
    """The smallest replica count whose busiest replica answers its share within the deadline."""
    if per_replica_rps <= 0:
        return None
    lo = max(1, math.ceil(n / (deadline_s * per_replica_rps)))
    r = lo
    while r <= limit:
        # Exact simulation while it is cheap; beyond, the busiest share of a 64-point ring is
        # about 1.3x the mean (what the simulation shows for hundreds of replicas).
        share = busiest_share(n, r) if r <= 400 else math.ceil(1.3 * n / r)
        if share / per_replica_rps <= deadline_s:
            return r
        r = max(r + 1, int(r * 1.05))
    return None


def deadline(interval_s, fraction, max_deadline):
    return min(fraction * interval_s, max_deadline)


def table(headers, rows, markdown):
    if markdown:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
        out = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths))]
        out += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--figures", help="JSON with the shape of MEASURED (per_core, db)")
    ap.add_argument("--cores-per-replica", type=int, default=2)
    ap.add_argument("--headroom", type=float, default=0.7,
                    help="fraction of the measured saturation rate to plan for (default 0.7)")
    ap.add_argument("--deadline-fraction", type=float, default=0.2,
                    help="answers due within this fraction of the bar (default 0.2)")
    ap.add_argument("--max-deadline", type=float, default=60.0,
                    help="and within this many seconds at most (default 60)")
    ap.add_argument("--machines", type=int, default=100)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args(argv[1:])
    fig = MEASURED
    if a.figures:
        with open(a.figures) as f:
            fig = json.load(f)
    md = a.markdown
    per_core = fig["per_core"]
    print(f"Figures: {fig.get('machine', '?')}; {fig.get('model', '?')}.")
    print(f"Plan: {a.cores_per_replica} cores per replica, {a.headroom:.0%} of saturation; a bar's "
          f"answers due within min({a.deadline_fraction:g} x interval, {a.max_deadline:g} s).\n")

    rows = []
    for key, name in WORKLOADS:
        r = per_core[key] * a.cores_per_replica
        rows.append([name, f"{per_core[key]:.2f}", f"{r:.1f}", f"{r * a.headroom:.1f}"])
    print(table(["workload", "req/s per core (measured)", "req/s per replica (saturated)",
                 "planned req/s per replica"], rows, md))
    print()

    for key, name in WORKLOADS:
        rps = per_core[key] * a.cores_per_replica * a.headroom
        rows = []
        for n in SYMBOLS:
            row = [n]
            for iname, secs in INTERVALS:
                r = replicas_needed(n, deadline(secs, a.deadline_fraction, a.max_deadline), rps)
                row.append("—" if r is None else r)
            rows.append(row)
        print(f"Replicas for {name} (each symbol once per bar):")
        print(table(["symbols"] + [f"{i} (D {deadline(s, a.deadline_fraction, a.max_deadline):g} s)"
                                   for i, s in INTERVALS], rows, md))
        print()

    print("Database load per bar (one upsert per symbol, one read per analysed symbol, within D)"
          " against the measured rate of one connection:")
    rows = []
    for n in SYMBOLS:
        for iname, secs in INTERVALS:
            d = deadline(secs, a.deadline_fraction, a.max_deadline)
            need = n / d
            cells = [n, iname, f"{need:.0f}"]
            for b in ("sqlite", "postgresql"):
                db = fig["db"][b]
                u = need / db["upserts_per_s"] if db["upserts_per_s"] else float("inf")
                rd = need / db["reads_per_s"] if db["reads_per_s"] else float("inf")
                cells.append(f"{u:.0%} / {rd:.0%}")
            rows.append(cells)
    print(table(["symbols", "interval", "upserts/s and reads/s needed",
                 "SQLite: writes / reads busy", "PostgreSQL: writes / reads busy"], rows, md))
    print()

    rows = []
    m = a.machines
    for key, name in WORKLOADS:
        rps = per_core[key] * a.cores_per_replica * a.headroom
        row = [name]
        for iname, secs in INTERVALS:
            d = deadline(secs, a.deadline_fraction, a.max_deadline)
            # Symbols the fleet serves: the busiest replica of m is ~1.3x the mean share.
            row.append(f"{int(m * rps * d / 1.3):,}")
        rows.append(row)
    print(f"Symbols {m} replicas ({a.cores_per_replica} cores each) serve per bar:")
    print(table(["workload"] + [i for i, _ in INTERVALS], rows, md))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
