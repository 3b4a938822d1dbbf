#!/usr/bin/env python3
"""scripts/replicas.sh when things are not as it left them (ctest scale_replicas_script):

  1. stale pid files (the processes died, their numbers reused by something else): `stop`
     signals none of those other processes and says the files were stale;
  2. a port of the set already in use: `start` refuses, naming the port, before starting
     anything (another server there would answer the readiness checks for a replica);
  3. a replica that exits at start-up: `start` fails with the end of its log;
  4. `start` again while a set runs from the same directory: refused (it would orphan it);
  5. a replica killed with SIGKILL: `roll` starts it again instead of failing on it, and
     `stop` of a half-dead set stops what is left.

Usage: test_replicas_script.py KRONOS_BINARY SOURCE_DIR
Exits 77 (skipped) when HAProxy is not installed (bash scripts/install-deps.sh --scale).
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port_block  # noqa: E402

SKIP = 77


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid, seconds=30):
    """SIGKILL is delivered asynchronously: the process may still be listed for a moment."""
    deadline = time.monotonic() + seconds
    while alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} still alive after SIGKILL"
        time.sleep(0.02)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    kronos, source = argv[1], argv[2]
    if not shutil.which("haproxy"):
        print("SKIPPED: HAProxy is not installed; run: bash scripts/install-deps.sh --scale")
        return SKIP
    script = os.path.join(source, "scripts", "replicas.sh")
    top = tempfile.mkdtemp(prefix="kronos-replicas-script-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    others = []
    d = os.path.join(top, "set")

    def run(*args):
        r = subprocess.run(["bash", script, *args], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=600)
        return r.returncode, r.stdout

    def start(n, port, *serve_flags):
        return run("start", "-n", str(n), "--port", str(port), "--dir", d, "--kronos", kronos,
                   "--", "--threads", "1", "--no-tune", *serve_flags)

    def pid(name):
        with open(os.path.join(d, name + ".pid")) as f:
            return int(f.read())

    try:
        # ---- 1. stale pid files: their numbers now belong to other processes.
        os.makedirs(d)
        for _ in range(2):
            others.append(subprocess.Popen(["sleep", "600"]))
        with open(os.path.join(d, "replicas"), "w") as f:
            f.write("2\n")
        for name, value in (("r1.pid", others[0].pid), ("haproxy.pid", others[1].pid),
                            ("r2.pid", "not a number"), ("r1.port", 1), ("r2.port", 2)):
            with open(os.path.join(d, name), "w") as f:
                f.write(f"{value}\n")
        rc, out = run("stop", "--dir", d)
        assert rc == 0, out
        assert all(alive(p.pid) for p in others), f"stop signalled a stranger:\n{out}"
        assert "replica 1 was not running" in out and "HAProxy was not running" in out, out
        print("stale pid files: stop left the processes now holding those numbers alone")

        # ---- 2. a port of the set in use.
        base = free_port_block(2)
        squatter = socket.socket()
        squatter.bind(("127.0.0.1", base + 2))
        squatter.listen(8)
        rc, out = start(2, base)
        squatter.close()
        assert rc != 0 and f"port {base + 2} is in use" in out, f"{rc}: {out}"
        assert not os.path.exists(os.path.join(d, "r1.pid")), "started replicas anyway"
        print(f"port {base + 2} in use: start refused before starting anything")

        # ---- 3. a replica that cannot start.
        base = free_port_block(1)
        rc, out = start(1, base, "--no-such-flag")
        assert rc != 0 and "exited before it was ready" in out, f"{rc}: {out}"
        assert "no-such-flag" in out, f"the replica's log was not shown: {out}"
        run("stop", "--dir", d)
        print("a replica exiting at start-up: start failed showing its log")

        # ---- 4. a set running: a second start from the same directory is refused.
        base = free_port_block(2)
        rc, out = start(2, base)
        assert rc == 0, out
        r1, r2, hap = pid("r1"), pid("r2"), pid("haproxy")
        rc, out = start(2, free_port_block(2))
        assert rc != 0 and "are running from" in out, f"{rc}: {out}"
        assert alive(r1) and alive(r2) and alive(hap), "the running set was disturbed"
        print("second start from a running set's directory refused; the set untouched")

        # ---- 5. a replica killed: roll restarts it; stop of a half-dead set.
        os.kill(r1, signal.SIGKILL)
        wait_gone(r1)
        rc, out = run("roll", "--dir", d)
        assert rc == 0 and "replica 1 was not running; starting it" in out, f"{rc}: {out}"
        r1 = pid("r1")
        r2 = pid("r2")
        assert alive(r1) and alive(r2), out
        os.kill(r2, signal.SIGKILL)
        wait_gone(r2)
        rc, out = run("stop", "--dir", d)
        assert rc == 0 and "stopped 2 of 3 processes" in out, f"{rc}: {out}"
        for p in (r1, hap):
            for _ in range(100):
                if not alive(p):
                    break
                subprocess.run(["sleep", "0.1"])
            assert not alive(p), f"pid {p} still running after stop"
        print("replica killed: roll started it again; stop of the half-dead set stopped the rest")
        print("OK")
        return 0
    finally:
        if os.path.exists(os.path.join(d, "replicas")):
            run("stop", "--dir", d)
        for p in others:
            p.kill()
            p.wait()
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
