"""Freeing engine objects: close() waits for the calls running on the predictor and refuses
later ones (it once freed a context another thread was forecasting on), and a model outlives
its contexts whatever order the garbage collector finds them in."""

import gc
import threading
import time

import pytest

import kronos.predictor as kp
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
