#!/usr/bin/env python3
"""The capacity model of docs/scaling.md: how many `kronos serve` replicas, and how much
database, N symbols at a bar interval need -- computed from measured per-replica figures
(bench/results/scale-2026-12-01.md, bench/results/realistic-load-2026-12-07.md), standard
library only.

At every bar close each symbol gets one request (a forecast or an analysis), and all of them
must be answered within the deadline D = min(deadline_fraction x interval, max_deadline)
(defaults 0.1 and 120 s). That is bar-by-bar traffic: every request a window one bar later than
the symbol's last, so with exact normalisation the prefix cache does not help it (0 % hits on
bench/load --traffic bar). The per-replica rates are therefore those measured on that traffic
(--traffic bar, the default); --traffic anchored plans for norm "anchored" (97-99 % hits), and
--traffic fixed for the repeated-window benchmark the plan once used (94-100 % hits: no live
traffic looks like it, so it overstates capacity).
The requests are routed by consistent hashing on the symbol (deploy/haproxy.cfg), so the
replicas do not get equal shares: the busiest replica decides when the bar is done. The
simulation places the symbols on a hash ring (points per replica as HAProxy's consistent
hashing does), and takes the smallest replica count whose busiest replica finishes its share
within D at the measured per-replica rate times the headroom. The database must take one
upsert (the new bar) and, for analyses, one read per symbol within D.

    python3 bench/capacity.py                      # the tables of docs/scaling.md
    python3 bench/capacity.py --traffic anchored   # with norm "anchored"
    python3 bench/capacity.py --figures my.json    # with figures measured elsewhere
    python3 bench/capacity.py --cores-per-replica 8 --headroom 0.6 --markdown
"""
import argparse
import bisect
import hashlib
import json
import math
import sys

# Measured on the 2-vCPU AVX-512 VM while other agents loaded it: requests per second per core
# at saturation (bench/load, continuous batching, lookback 128, pred_len a mix around 12;
# analyses: bench/analyses, ten at once, horizon 20, 32 paths), and the stores' rates through
# one connection (bench/bench_store). The top-level figures are the fixed-window traffic of
# bench/results/scale-2026-12-01.md (94-100 % cache hits: they overstate what bar-by-bar
# traffic gets); "by_traffic" holds the bar-by-bar figures of
# bench/results/realistic-load-2026-12-07.md (one symbol's next bar a request: 0 % hits with
# exact normalisation, 96-99 % with anchored). On an idle machine expect higher figures.
MEASURED = {
    "models": {
        # The same shape on an idle machine: bench/results/load-2026-11-29.md (61.2 and 15.2
        # req/s on 2 cores).
        "kronos-small-idle": {
            "conditions": "idle 2-vCPU AVX-512 VM, 2026-11-29",
            "forecast_1path": 30.6,
            "forecast_8path": 7.6,
            "analysis": None,
            "by_traffic": {
                # Not measured idle: the idle fixed-window figure times the bar / fixed ratio
                # measured on one machine, one day (2026-12-07, Kronos-small, 8 paths: 0.85 /
                # 2.27 req/s; anchored 1.00 / 2.27).
                "bar": {"conditions": "DERIVED: idle fixed-window x the measured bar/fixed "
                        "ratio 0.37 (2026-12-07)", "forecast_8path": 7.6 * 0.85 / 2.27},
                "anchored": {"conditions": "DERIVED: idle fixed-window x the measured "
                             "anchored/fixed ratio 0.44 (2026-12-07)",
                             "forecast_8path": 7.6 * 1.00 / 2.27},
            },
        },
        "kronos-small": {  # random weights of the Kronos-small shape (d_model 512, 8 layers)
            "conditions": "2-vCPU AVX-512 VM shared with 4 other agents (load 16-19), 2026-12-01",
            "forecast_1path": 13.1,
            "forecast_8path": 1.25,
            "analysis": None,  # not measured on this shape
            "by_traffic": {
                "bar": {"conditions": "2-vCPU AVX-512 VM shared with other agents (load 24-27), "
                        "2026-12-07", "forecast_8path": 0.85 / 2},
                "anchored": {"conditions": "2-vCPU AVX-512 VM shared with other agents "
                             "(load 25), 2026-12-07", "forecast_8path": 1.00 / 2},
            },
        },
        "kronos-demo": {  # the bundled 1.3 M-parameter demo model
            "conditions": "2-vCPU AVX-512 VM shared with 4 other agents (load 16-19), 2026-12-01",
            "forecast_1path": 84.3,
            "forecast_8path": 29.2,
            "analysis": 2.2,
            "by_traffic": {
                # Two runs at 15 req/s offered (bar: 9.19 and 4.85 served; anchored: 14.70 and
                # 15.47, i.e. it kept up with the offered load: a lower bound).
                "bar": {"conditions": "2-vCPU AVX-512 VM shared with other agents (load 22-26), "
                        "2026-12-07, mean of two runs", "forecast_8path": 7.0 / 2},
                "anchored": {"conditions": "2-vCPU AVX-512 VM shared with other agents (load "
                             "22-26), 2026-12-07, mean of two runs (a lower bound)",
                             "forecast_8path": 15.1 / 2},
            },
        },
    },
    "db": {  # one connection; PostgreSQL 15 with its default durability (fsync on)
        "sqlite": {"upserts_per_s": 1143, "reads_per_s": 576, "candles_per_s": 278982},
        "postgresql": {"upserts_per_s": 127, "reads_per_s": 246, "candles_per_s": 33943},
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


_SYMBOL_HASHES = []


def symbol_hashes(n):
    while len(_SYMBOL_HASHES) < n:
        s = len(_SYMBOL_HASHES)
        _SYMBOL_HASHES.append(int.from_bytes(hashlib.sha1(f"SYM{s}".encode()).digest()[:8], "big"))
    return _SYMBOL_HASHES[:n]


def busiest_share(n_symbols, replicas, points=64):
    """Symbols on the busiest replica when n_symbols are hashed onto the ring."""
    if replicas == 1:
        return n_symbols
    pts = ring(replicas, points)
    keys = [p[0] for p in pts]
    load = [0] * replicas
    for h in symbol_hashes(n_symbols):
        load[pts[bisect.bisect(keys, h) % len(pts)][1]] += 1
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
    ap.add_argument("--figures", help="JSON with the shape of MEASURED (models, db)")
    ap.add_argument("--model", default="kronos-small", help="which measured model (default "
                    "kronos-small; also kronos-small-idle, kronos-demo)")
    ap.add_argument("--traffic", default="bar", choices=["bar", "anchored", "fixed"],
                    help="the traffic the rates were measured on (default bar: bar-by-bar "
                    "forecasts, exact normalisation)")
    ap.add_argument("--cores-per-replica", type=int, default=2)
    ap.add_argument("--headroom", type=float, default=0.7,
                    help="fraction of the measured saturation rate to plan for (default 0.7)")
    ap.add_argument("--deadline-fraction", type=float, default=0.1,
                    help="answers due within this fraction of the bar (default 0.1)")
    ap.add_argument("--max-deadline", type=float, default=120.0,
                    help="and within this many seconds at most (default 120)")
    ap.add_argument("--machines", type=int, default=100)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args(argv[1:])
    fig = MEASURED
    if a.figures:
        with open(a.figures) as f:
            fig = json.load(f)
    md = a.markdown
    if a.model not in fig["models"]:
        print(f"capacity.py: no figures for model '{a.model}' (have: {', '.join(fig['models'])})",
              file=sys.stderr)
        return 2
    per_core = fig["models"][a.model]
    conditions = per_core.get("conditions", "conditions not given")
    if a.traffic != "fixed":
        by = per_core.get("by_traffic", {}).get(a.traffic)
        if not by:
            print(f"capacity.py: model '{a.model}' has no figures measured on {a.traffic} traffic "
                  f"(have: fixed{''.join(', ' + t for t in per_core.get('by_traffic', {}))})",
                  file=sys.stderr)
            return 2
        conditions = by.get("conditions", conditions)
        per_core = by
    print(f"Figures: model {a.model}, {a.traffic} traffic, {conditions}.")
    print(f"Plan: {a.cores_per_replica} cores per replica, {a.headroom:.0%} of saturation; a bar's "
          f"answers due within min({a.deadline_fraction:g} x interval, {a.max_deadline:g} s).\n")

    workloads = [(k, n) for k, n in WORKLOADS if per_core.get(k)]
    rows = []
    for key, name in workloads:
        r = per_core[key] * a.cores_per_replica
        rows.append([name, f"{per_core[key]:.2f}", f"{r:.1f}", f"{r * a.headroom:.1f}"])
    print(table(["workload", "req/s per core (measured)", "req/s per replica (saturated)",
                 "planned req/s per replica"], rows, md))
    print()

    for key, name in workloads:
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
    for key, name in workloads:
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
