"""kronos.dask.forecast_many on a LocalCluster of 2 worker processes: 200 series give results
equal, bit for bit, to predict_batch in this process, and each worker loaded the model once."""

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import kronos.dask as kd  # noqa: E402
from conftest import DEMO  # noqa: E402


def _loads(dask_worker=None):
    import kronos.dask
    import kronos.model
    return len(kronos.model._models), kronos.dask.setups


def test_forecast_many_equals_predict_batch(predictor, candles):
    dfs, xs, ys = [], [], []
    for i in range(200):
        s = i * 11
        n = 32 + i % 5  # mixed lengths: several engine batches per task
        dfs.append(candles.iloc[s:s + n])
        xs.append(None)
        ys.append(candles.iloc[s + n:s + n + 4]["timestamps"])
    kw = dict(sample_count=2, seed=3, return_paths=True, quantiles=[0.25])
    ref = predictor.predict_batch(dfs, xs, ys, 4, **kw)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        got = kd.forecast_many(client, dfs, xs, ys, 4, model=DEMO, tokenizer=DEMO, threads=1,
                               batch_size=16, **kw)
        # A second call finds the model loaded: still one load per worker.
        again = kd.forecast_many(client, dfs[:8], xs[:8], ys[:8], 4, model=DEMO, tokenizer=DEMO,
                                 threads=1, batch_size=4, **kw)
        per_worker = client.run(_loads)
    assert len(per_worker) == 2 and set(per_worker.values()) == {(1, 1)}
    for a, b in zip(ref, again):
        assert a.mean.equals(b.mean)
    assert len(got) == len(ref) == 200
    for a, b in zip(ref, got):
        assert a.mean.equals(b.mean)
        assert (a.mean.index == b.mean.index).all()
        np.testing.assert_array_equal(a.s1, b.s1)
        np.testing.assert_array_equal(a.s2, b.s2)
        for pa, pb in zip(a.paths, b.paths):
            np.testing.assert_array_equal(pa.to_numpy(), pb.to_numpy())
        np.testing.assert_array_equal(a.quantiles[0.25].to_numpy(), b.quantiles[0.25].to_numpy())


def test_forecast_many_checks_inputs_before_sending(candles):
    # No cluster needed: bad input fails on the client, naming the series.
    from kronos import InvalidArgumentError
    bad = candles.iloc[:40].assign(close=np.nan)
    with pytest.raises(InvalidArgumentError, match="DataFrame at index 1 contains NaN"):
        kd.forecast_many(None, [candles.iloc[:40], bad], [None, None], [None, None], 4,
                         model=DEMO, tokenizer=DEMO)
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        kd.forecast_many(None, [], [], [], 4, model=DEMO, tokenizer=DEMO, batch_size=0)


@pytest.mark.parametrize("kw,match", [
    (dict(pred_len=0), "pred_len: must be >= 1"),
    (dict(T=-1), r"T: must be > 0, got -1"),
    (dict(T=1e40), "T: 1e\\+40 is past float32's range"),
    (dict(top_p=2), r"top_p: must be in \(0, 1\]"),
    (dict(window="x"), "window: expected 'exact' or 'rolling'"),
    (dict(max_context=0), r"max_context: must be in 1\.\.65536"),
    (dict(clip=0), "clip: must be > 0"),
    (dict(sample_count=0), "sample_count: must be in"),
    (dict(seed=-1), "seed: expected an integer"),
    (dict(quantiles=[2]), r"quantiles: 2.0 is outside \[0, 1\]"),
    (dict(threads=0), "threads: must be >= 1"),
    (dict(kv_dtype="f16"), "kv_dtype 'f16' is not one of"),
    (dict(quant="int4"), "quant 'int4' is not one of"),
])
def test_forecast_many_checks_parameters_before_sending(candles, kw, match):
    # client=None: nothing may reach a cluster.
    from kronos import InvalidArgumentError
    kw.setdefault("pred_len", 4)
    h = candles.iloc[:40]
    with pytest.raises(InvalidArgumentError, match=match):
        kd.forecast_many(None, [h], [None], [None], model=DEMO, tokenizer=DEMO, **kw)


def _plugins(dask_scheduler=None):
    return list(dask_scheduler.worker_plugins)


def test_failing_worker_setup_is_unregistered(tmp_path, candles):
    # A checkpoint that passes the client's checks (config.json, model.safetensors) but fails
    # to load on the workers: the error comes back and the plugin does not stay registered.
    import kronos
    bad = tmp_path / "pred"
    bad.mkdir()
    (bad / "config.json").write_text("{}")
    (bad / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    h = candles.iloc[:40]
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        for _ in range(2):  # the second call fails the same way (no half-registered plugin)
            with pytest.raises(kronos.KronosError, match=str(bad)):
                kd.forecast_many(client, [h], [None], [None], 4, model=str(bad),
                                 tokenizer=DEMO, threads=1)
            assert not [p for p in client.run_on_scheduler(_plugins) if p.startswith("kronos-")]


def test_forecast_many_errors_name_the_callers_series(candles):
    import kronos
    h = candles.iloc[:200].reset_index(drop=True)
    dfs = [h.iloc[:60].copy() for _ in range(5)]
    dfs[3].loc[5, "close"] = np.inf  # series 1 of the second task (batch_size 2)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with pytest.raises(kronos.InvalidArgumentError, match=r"^series 3: row 5, field 'close'"):
            kd.forecast_many(client, dfs, [None] * 5, [None] * 5, 4, model=DEMO, tokenizer=DEMO,
                             threads=1, batch_size=2)
