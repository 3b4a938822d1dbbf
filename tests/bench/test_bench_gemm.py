#!/usr/bin/env python3
"""bench_gemm's command line: a warm and a --cold-weights run each print a well-formed JSON
report (the flag recorded, every shape with a positive, finite GFLOP/s in every column), and an
unknown flag is refused with the usage line and exit code 2. Timings are not checked (noisy);
under ASan the cold run also proves the copies of W it cycles through stay in bounds."""
import json
import math
import subprocess
import sys


def run(exe, *args):
    p = subprocess.run([exe, "--json", "--reps", "1", "--no-scalar", *args],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"bench_gemm {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
    return json.loads(p.stdout)


def check(report, cold):
    assert report["cold_weights"] is cold, report["cold_weights"]
    assert report["fma_peak_gflops"], "no FMA peak"
    assert len(report["shapes"]) > 0
    for s in report["shapes"]:
        assert s["gflops"], s
        for col, g in s["gflops"].items():
            assert math.isfinite(g) and g > 0, (s["M"], s["N"], s["K"], col, g)


def main():
    exe = sys.argv[1]
    check(run(exe), False)
    check(run(exe, "--cold-weights"), True)
    p = subprocess.run([exe, "--cold"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.returncode
    assert "--cold-weights" in p.stderr, p.stderr
    print("bench_gemm: warm and cold reports well-formed, unknown flag refused")


if __name__ == "__main__":
    main()
