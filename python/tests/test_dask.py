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
