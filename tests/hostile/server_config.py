#!/usr/bin/env python3
"""Hostile start-up settings of `kronos serve` (issue 38, items 2, 8 and 11):

  - every flag given an empty value (an unset shell variable) is refused at start and by
    --check-config, exit 2, naming the flag; `--api-key-file ''` never serves without
    authentication;
  - the access log on a FIFO: start and --check-config refuse it at once (the open used to block
    with the signals held, so only kill -9 ended it); SIGUSR1 after the log's path became a FIFO
    keeps the old file and leaves SIGTERM working;
  - a kv_budget far above the machine's RAM is refused, naming the RAM.

Usage: server_config.py KRONOS_BINARY
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile  # noqa: E402

# Every flag of `kronos serve` that takes a value.
VALUE_FLAGS = ["--model", "--tokenizer", "--host", "--port", "--config", "--quant", "--kv-dtype",
               "--threads", "--kv-budget", "--api-key-file", "--request-timeout",
               "--drain-delay", "--db", "--web-root", "--access-log"]


def test_empty_values(kronos, tmp):
    for flag in VALUE_FLAGS:
        for check in ([], ["--check-config"]):
            rc, out = hostile.run(kronos, ["serve", *check, flag, ""], timeout=60)
            assert rc == 2, f"serve {check} {flag} '': exit {rc}: {out[-400:]}"
            assert flag in out, f"serve {flag} '': the message does not name it: {out[-400:]}"
            assert "no authentication" not in out, out
            rc, out = hostile.run(kronos, ["serve", *check, f"{flag}="], timeout=60)
            assert rc == 2 and flag in out, f"serve {flag}=: exit {rc}: {out[-400:]}"
    # The config file's keys refuse "" the same way, named.
    for key in ("api_key_file", "model", "access_log", "db", "web_root", "tokenizer"):
        cfg = os.path.join(tmp, "c.json")
        with open(cfg, "w") as f:
            f.write('{"%s": ""}' % key)
        rc, out = hostile.run(kronos, ["serve", "--check-config", "--config", cfg], timeout=60)
        assert rc == 2 and key in out, f'"{key}": "": exit {rc}: {out[-400:]}'


def test_access_log_fifo(kronos, tmp):
    fifo = os.path.join(tmp, "access.fifo")
    os.mkfifo(fifo)
    for check in (["--check-config"], []):
        rc, out = hostile.run(kronos, ["serve", *check, "--access-log", fifo], timeout=60)
        assert rc == 2, f"serve {check} --access-log FIFO: exit {rc}: {out[-400:]}"
        assert "FIFO" in out and "access_log" in out, out[-400:]
    # A running server whose log path becomes a FIFO: SIGUSR1 refuses it, the old file stays,
    # and SIGTERM still drains.
    log = os.path.join(tmp, "access.log")
    srv = hostile.Serve(kronos, ["--access-log", log]).start()
    try:
        st, _ = hostile.request(srv.port, "GET", "/health")
        assert st == 200
        os.rename(log, log + ".1")
        os.mkfifo(log)
        srv.proc.send_signal(signal.SIGUSR1)
        srv.wait_for(r"SIGUSR1: access_log: .*FIFO.*still writing to the old file", 30)
        st, _ = hostile.request(srv.port, "GET", "/health")
        assert st == 200
        rc = srv.stop(timeout=60)
        assert rc == 0, f"exit {rc} after SIGTERM:\n{srv.output()[-1000:]}"
        with open(log + ".1") as f:
            assert f.read().count("\n") == 2, "the old file lost a line"
    finally:
        srv.kill()


def test_kv_budget_past_ram(kronos, tmp):
    for value in ("1e15", "900000GiB"):
        for check in (["--check-config"], []):
            rc, out = hostile.run(kronos, ["serve", *check, "--kv-budget", value], timeout=60)
            assert rc == 2 and "RAM" in out, f"--kv-budget {value}: exit {rc}: {out[-400:]}"
    cfg = os.path.join(tmp, "c.json")
    with open(cfg, "w") as f:
        f.write('{"kv_budget": 1e15}')
    rc, out = hostile.run(kronos, ["serve", "--check-config", "--config", cfg], timeout=60)
    assert rc == 2 and "RAM" in out, f"kv_budget 1e15: exit {rc}: {out[-400:]}"


if __name__ == "__main__":
    sys.exit(hostile.main([test_empty_values, test_access_log_fifo, test_kv_budget_past_ram],
                          sys.argv))
