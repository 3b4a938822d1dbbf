"""Freeing engine objects: close() waits for the calls running on the predictor and refuses
later ones (it once freed a context another thread was forecasting on), and a model outlives
its contexts whatever order the garbage collector finds them in."""

import gc
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import kronos.predictor as kp
from conftest import DEMO, FIXTURES
from kronos import KronosError, KronosPredictor, _lib

COLS = ["open", "high", "low", "close", "volume", "amount"]


@pytest.fixture
def own(demo):
    p = KronosPredictor(*demo, threads=1)
    yield p
    p.close()


def test_close_waits_for_a_running_batch(own, candles, monkeypatch):
    # Deterministic: another thread calls close() between predict_batch's two engine calls
    # (one per history length); the batch finishes on the context, then close frees it.
    h = candles.iloc[:200]
    real_run, events = kp.run, []
    closer = threading.Thread(target=lambda: (events.append("close"), own.close(),
                                              events.append("closed")))

    def run_then_close(*a, **k):
        out = real_run(*a, **k)
        events.append("run")
        if len(events) == 1:
            closer.start()
            time.sleep(0.3)  # close() is waiting meanwhile
            assert events == ["run", "close"]
        return out

    monkeypatch.setattr(kp, "run", run_then_close)
    out = own.predict_batch([h[COLS].iloc[:60], h[COLS].iloc[:80]],
                            [h["timestamps"].iloc[:60], h["timestamps"].iloc[:80]],
                            [None, None], 4)
    closer.join()
    assert len(out) == 2 and events == ["run", "close", "run", "closed"]
    with pytest.raises(KronosError, match="predictor is closed"):
        own.predict(h[COLS].iloc[:60], h["timestamps"].iloc[:60], None, 4)


def test_close_while_threads_predict(demo, candles):
    # Each call either finishes or raises "predictor is closed"; none touches freed memory
    # (run under the ASan build to see the difference).
    h = candles.iloc[:300]
    for _ in range(5):
        p = KronosPredictor(*demo, threads=1)
        outcomes = []

        def work():
            for _ in range(3):
                try:
                    p.predict(h[COLS], h["timestamps"], None, 16, sample_count=2)
                    outcomes.append("ok")
                except KronosError as e:
                    assert "predictor is closed" in str(e)
                    outcomes.append("closed")

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.05)
        p.close()
        for t in threads:
            t.join()
        assert len(outcomes) == 12


def test_calls_after_close_raise(demo, candles):
    p = KronosPredictor(*demo, threads=1)
    p.close()
    p.close()  # idempotent
    h = candles.iloc[:50]
    for kw in ({}, {"threads": 2}, {"kv_dtype": "bf16"}):  # no new context either
        with pytest.raises(KronosError, match="predictor is closed"):
            p.predict(h[COLS], h["timestamps"], None, 4, **kw)


def test_model_freed_after_its_contexts_in_a_cycle(demo, candles, monkeypatch):
    order = []
    real_model_free, real_ctx_free = _lib.kr_model_free, _lib.kr_context_free
    monkeypatch.setattr(_lib, "kr_model_free", lambda h: (order.append("model"),
                                                          real_model_free(h)))
    monkeypatch.setattr(_lib, "kr_context_free", lambda h: (order.append("context"),
                                                            real_ctx_free(h)))
    # A weight format no other test loads, so that this predictor owns a model of its own.
    p = KronosPredictor(*demo, threads=1, quant="fp8")
    p.predict(candles[COLS].iloc[:64], candles["timestamps"].iloc[:64], None, 2)
    p.me = p  # a reference cycle: only the cyclic collector frees it
    del p
    gc.collect()
    gc.collect()
    assert order == ["context", "model"]


_FORK_SCRIPT = r"""
import os, sys
import numpy as np, pandas as pd
from kronos import Kronos, KronosPredictor, KronosTokenizer
demo, csv, mode = sys.argv[1:4]
df = pd.read_csv(csv, parse_dates=["timestamps"]).iloc[:80]
p = KronosPredictor(Kronos.from_pretrained(demo), KronosTokenizer.from_pretrained(demo), threads=1)
parent = p.predict(df, None, None, 4, sample_count=2, seed=0).to_numpy()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    if mode == "predict":
        child = p.predict(df, None, None, 4, sample_count=2, seed=0).to_numpy()
        os.write(w, b"same" if np.array_equal(child, parent) else b"differs")
    sys.exit(0)  # a normal exit: the interpreter's finalizers run in the child too
os.close(w)
_, status = os.waitpid(pid, 0)
print(os.read(r, 64).decode(), os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("mode", ["predict", "exit"])
def test_predictor_survives_fork(mode, tmp_path):
    # fork copies a context but not its engine thread: a forecast in the child, or merely the
    # child's exit freeing the context, once waited for that thread forever.
    script = tmp_path / "fork.py"
    script.write_text(_FORK_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), DEMO,
                             os.path.join(FIXTURES, "regression_input.csv"), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the hung child too, not only the parent
        proc.communicate()
        pytest.fail(f"fork then {mode} hung")
    assert proc.returncode == 0, stderr
    assert stdout.split() == (["same", "0"] if mode == "predict" else ["0"])


_SIGINT_SCRIPT = r"""
import os, signal, sys, threading, time
import pandas as pd
from kronos import Kronos, KronosPredictor, KronosTokenizer
demo, csv = sys.argv[1:3]
df = pd.read_csv(csv, parse_dates=["timestamps"]).iloc[:500]
p = KronosPredictor(Kronos.from_pretrained(demo), KronosTokenizer.from_pretrained(demo), threads=1)

def interrupt_once_the_engine_runs():
    while not any(t.name == "kronos-forecast" for t in threading.enumerate()):
        time.sleep(0.01)
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt_once_the_engine_runs, daemon=True).start()
try:
    # Minutes of work (the exact window re-run at every step past max_context).
    p.predict(df, None, None, 500, sample_count=64)
    print("completed")
except KeyboardInterrupt:
    print("interrupted")
print(p.predict(df, None, None, 4).shape)  # the context still works
"""


def test_ctrl_c_interrupts_a_running_forecast(tmp_path):
    # A forecast once held the main thread in the foreign call to its end: Ctrl-C waited for
    # it. Now the engine is told to stop at its next step and KeyboardInterrupt is raised.
    script = tmp_path / "sigint.py"
    script.write_text(_SIGINT_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), DEMO,
                             os.path.join(FIXTURES, "regression_input.csv")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("Ctrl-C did not interrupt the forecast")
    assert proc.returncode == 0, stderr
    assert stdout.split("\n")[:2] == ["interrupted", "(4, 6)"]


_EXIT_SCRIPT = r"""
import atexit, sys, threading, time
import pandas as pd
import kronos.predictor as kp
from kronos import Kronos, KronosError, KronosPredictor, KronosTokenizer
demo, csv, log = sys.argv[1:4]
# atexit runs its hooks last registered first: this one after kronos' (which tells the running
# forecasts to stop) and the model's finalizer. It lets the daemon thread write its outcome:
# without it the interpreter may finalize first and freeze the thread before the write (a
# loaded machine did). A forecast that was not stopped is still running after the join.
atexit.register(lambda: worker.join(120))
df = pd.read_csv(csv, parse_dates=["timestamps"]).iloc[:500]
p = KronosPredictor(Kronos.from_pretrained(demo), KronosTokenizer.from_pretrained(demo), threads=1)

def forecast():
    try:
        # Minutes of work (the exact window re-run at every step past max_context).
        p.predict(df, None, None, 500, sample_count=64)
        outcome = "completed"
    except KronosError as e:
        outcome = "stopped: " + str(e)
    with open(log, "w") as f:
        f.write(outcome)

worker = threading.Thread(target=forecast, daemon=True)
worker.start()
while not kp._running_aborts:  # the forecast is in the engine
    time.sleep(0.01)
time.sleep(0.2)
"""


def test_exit_stops_forecasts_left_in_daemon_threads(tmp_path):
    # The main thread returns while a daemon thread forecasts: the context's finalizer used to
    # wait for that forecast to end (minutes with a large model); it is told to stop instead.
    script, log = tmp_path / "exit.py", tmp_path / "outcome"
    script.write_text(_EXIT_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), DEMO,
                             os.path.join(FIXTURES, "regression_input.csv"), str(log)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the interpreter did not exit")
    assert proc.returncode == 0, stderr
    assert log.read_text().startswith("stopped: "), log.read_text()
