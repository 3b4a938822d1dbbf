#!/usr/bin/env python3
"""A large candle CSV for timing `kronos ingest` (bench/results/ingest-2026-12-03.md).

    python3 bench/make_ingest_csv.py [ROWS, default 2000000] > /tmp/big.csv

Repeats data/XSHG_5min_600977.csv's rows (their value text as written), each copy shifted by a
whole number of 11-week periods: the stamps stay strictly increasing, keep their weekdays and
times of day, and 800 copies (2M rows) end in 2193, inside the store's years 1900-2200.
"""
import datetime
import os
import sys

rows = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                   "XSHG_5min_600977.csv")
with open(src, encoding="utf-8") as f:
    header = f.readline()
    body = [line.rstrip("\n").split(",", 1) for line in f if line.strip()]
stamps = [datetime.datetime.strptime(ts, "%Y-%m-%d %H:%M:%S") for ts, _ in body]
# The copy's shift must exceed the file's span so that the copies do not overlap.
shift = datetime.timedelta(weeks=11)
assert stamps[-1] - stamps[0] < shift
out = sys.stdout
out.write(header)
written = 0
copy = 0
while written < rows:
    for t, (_, rest) in zip(stamps, body):
        if written == rows:
            break
        out.write((t + copy * shift).strftime("%Y-%m-%d %H:%M:%S") + "," + rest + "\n")
        written += 1
    copy += 1
